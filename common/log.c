#define _POSIX_C_SOURCE 200809L
#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static atomic_int log_level = BW_LOG_INFO;
static const char *const level_names[] = {"DEBUG", "INFO", "WARN", "ERROR"};

void bw_log_set_level(bw_log_level_t level) { atomic_store(&log_level, (int)level); }

int bw_log_level_parse(const char *name) {
    static const char *const names[] = {"debug", "info", "warn", "error"};
    for (int i = 0; i < 4; i++)
        if (strcmp(name, names[i]) == 0) return i;
    return -1;
}

void bw_log(bw_log_level_t level, const char *component, int shard, const char *job,
            const char *fmt, ...) {
    if ((int)level < atomic_load(&log_level)) return;
    char line[2048];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    int n = snprintf(line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s %s",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                     tm.tm_sec, ts.tv_nsec / 1000000, level_names[level], component);
    if (shard >= 0 && n < (int)sizeof(line))
        n += snprintf(line + n, sizeof(line) - (size_t)n, " shard=%d", shard);
    if (job && n < (int)sizeof(line))
        n += snprintf(line + n, sizeof(line) - (size_t)n, " job=%s", job);
    int msg = n;
    if (n < (int)sizeof(line) - 1) {
        line[n++] = ' ';
        va_list ap;
        va_start(ap, fmt);
        n += vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
        va_end(ap);
    }
    if (n > (int)sizeof(line) - 2) n = (int)sizeof(line) - 2;
    /* one event, one line: a control character from outside (a URL, a client's text)
     * cannot forge another line */
    for (int i = msg; i < n; i++)
        if ((unsigned char)line[i] < 0x20 || line[i] == 0x7f) line[i] = '?';
    line[n++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, (size_t)n);
    (void)w;
}
