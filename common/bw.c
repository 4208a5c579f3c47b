#include "bw.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

const char *bw_err2str(bw_err_t err) {
    switch (err) {
    case BW_OK: return "ok";
    case BW_ERR_INVALID: return "invalid";
    case BW_ERR_NOMEM: return "out of memory";
    case BW_ERR_IO: return "i/o error";
    case BW_ERR_KAFKA: return "kafka error";
    case BW_ERR_MYSQL_RETRY: return "retryable mysql error";
    case BW_ERR_MYSQL_DATA: return "mysql data error";
    case BW_ERR_TOO_LARGE: return "too large";
    }
    return "unknown error";
}

bw_err_t bw_seterr(char *errstr, size_t errstr_size, bw_err_t err, const char *fmt, ...) {
    if (errstr && errstr_size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(errstr, errstr_size, fmt, ap);
        va_end(ap);
    }
    return err;
}

int64_t bw_now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t bw_wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int bw_utc_time_parse(const char *text, int64_t *secs) {
    struct tm tm = {0};
    int n = 0;
    if (!text || sscanf(text, "%4d-%2d-%2dT%2d:%2d:%2dZ%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                        &tm.tm_min, &tm.tm_sec, &n) != 6 || n != 20 || text[n] != '\0')
        return -1;
    int year = tm.tm_year, mon = tm.tm_mon, day = tm.tm_mday;
    if (year < 1970 || mon < 1 || mon > 12 || day < 1 || day > 31 || tm.tm_hour > 23 || tm.tm_min > 59 ||
        tm.tm_sec > 59 || tm.tm_hour < 0 || tm.tm_min < 0 || tm.tm_sec < 0)
        return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    time_t t = timegm(&tm);
    /* timegm normalises 2027-02-30 into March: such a date is a typo, not a time */
    if (t == (time_t)-1 || tm.tm_year != year - 1900 || tm.tm_mon != mon - 1 || tm.tm_mday != day) return -1;
    *secs = (int64_t)t;
    return 0;
}

void bw_utc_time_format(int64_t ms, char out[21]) {
    time_t secs = (time_t)(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
    struct tm tm;
    if (!gmtime_r(&secs, &tm) || !strftime(out, 21, "%Y-%m-%dT%H:%M:%SZ", &tm)) snprintf(out, 21, "(time %lld)", (long long)secs);
}
