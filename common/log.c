#define _POSIX_C_SOURCE 200809L
#include "log.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bw.h"
#include "utf8.h"

static atomic_int log_level = BW_LOG_INFO;
static atomic_int log_format = BW_LOG_TEXT;
static const char *const level_names[] = {"DEBUG", "INFO", "WARN", "ERROR"};
static const char *const level_keys[] = {"debug", "info", "warn", "error"};
/* sd-daemon(3)'s prefixes: LOG_DEBUG, LOG_INFO, LOG_WARNING, LOG_ERR */
static const char level_priority[] = {'7', '6', '4', '3'};

void bw_log_set_level(bw_log_level_t level) { atomic_store(&log_level, (int)level); }
void bw_log_set_format(bw_log_format_t format) { atomic_store(&log_format, (int)format); }
int bw_log_enabled(bw_log_level_t level) { return (int)level >= atomic_load(&log_level); }

int bw_log_level_parse(const char *name) {
    for (int i = 0; i < 4; i++)
        if (strcmp(name, level_keys[i]) == 0) return i;
    return -1;
}

int bw_log_journal_detect(const char *journal_stream, int fd) {
    struct stat st;
    unsigned long long dev, ino;
    int end = 0;
    if (!journal_stream || sscanf(journal_stream, "%llu:%llu%n", &dev, &ino, &end) != 2 ||
        journal_stream[end] || fstat(fd, &st))
        return 0;
    return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

/* ---- rendering ---------------------------------------------------------------------- */

/* A line being written: every piece fits whole or not at all; once one did not, the
 * rest is left out (full), and `cap` keeps room for the closing bytes. */
typedef struct {
    char *b;
    size_t cap, n;
    int full;
} line_t;

static void put(line_t *l, const char *s, size_t len) {
    if (l->full || len > l->cap - l->n) {
        l->full = 1;
        return;
    }
    memcpy(l->b + l->n, s, len);
    l->n += len;
}

static void puts_(line_t *l, const char *s) { put(l, s, strlen(s)); }

/* s as text shows it: control characters as '?' */
static void put_plain(line_t *l, const char *s) {
    for (; *s && !l->full; s++) {
        char c = (unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s;
        put(l, &c, 1);
    }
}

/* s escaped as inside a JSON string, or a quoted logfmt value (Go's strconv.Quote
 * spelling, which logfmt readers take): \" \\ \n \r \t, other controls as \u00XX */
static void put_escaped(line_t *l, const char *s) {
    for (; *s && !l->full; s++) {
        unsigned char c = (unsigned char)*s;
        char esc[8];
        if (c == '"' || c == '\\') snprintf(esc, sizeof(esc), "\\%c", c);
        else if (c == '\n') strcpy(esc, "\\n");
        else if (c == '\r') strcpy(esc, "\\r");
        else if (c == '\t') strcpy(esc, "\\t");
        else if (c < 0x20 || c == 0x7f) snprintf(esc, sizeof(esc), "\\u%04x", c);
        else {
            put(l, (const char *)&c, 1);
            continue;
        }
        puts_(l, esc);
    }
}

/* A logfmt value needs quotes when it is empty or holds a space, '=', '"' or a control. */
static int logfmt_needs_quotes(const char *s) {
    if (!*s) return 1;
    for (; *s; s++)
        if ((unsigned char)*s <= ' ' || *s == '=' || *s == '"' || *s == 0x7f) return 1;
    return 0;
}

/* One field: key=value (text, logfmt) or "key":value (json); quoted: a string. */
static void put_field(line_t *l, bw_log_format_t format, int first, const char *key, const char *value,
                      int quoted) {
    if (format == BW_LOG_JSON) {
        puts_(l, first ? "\"" : ",\"");
        puts_(l, key);
        puts_(l, quoted ? "\":\"" : "\":");
        put_escaped(l, value);
        if (quoted) puts_(l, "\"");
        return;
    }
    if (!first) puts_(l, " ");
    puts_(l, key);
    puts_(l, "=");
    if (format == BW_LOG_TEXT) {
        put_plain(l, value);
    } else if (logfmt_needs_quotes(value)) {
        puts_(l, "\"");
        put_escaped(l, value);
        puts_(l, "\"");
    } else {
        puts_(l, value);
    }
}

size_t bw_log_render(char *out, size_t cap, bw_log_format_t format, int journal, int64_t wall_ms,
                     bw_log_level_t level, const bw_log_fields_t *f, const char *msg) {
    /* the closing: '"' (a cut logfmt msg), '"}' (json), '\n' */
    line_t l = {.b = out, .cap = cap - 3};
    if (journal) {
        char prio[4] = {'<', level_priority[level], '>', '\0'};
        puts_(&l, prio);
    }
    time_t secs = (time_t)(wall_ms / 1000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    char ts[80], num[24];
    snprintf(ts, sizeof(ts), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
             tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(wall_ms % 1000));
    if (format == BW_LOG_TEXT) {
        char head[128];
        snprintf(head, sizeof(head), "%s %-5s ", ts, level_names[level]);
        puts_(&l, head);
        put_plain(&l, f->component);
    } else {
        if (format == BW_LOG_JSON) puts_(&l, "{");
        put_field(&l, format, 1, "ts", ts, 1);
        put_field(&l, format, 0, "level", level_keys[level], 1);
        put_field(&l, format, 0, "component", f->component, 1);
    }
    if (f->shard >= 0) {
        snprintf(num, sizeof(num), "%d", f->shard);
        put_field(&l, format, 0, "shard", num, 0);
    }
    if (f->job) put_field(&l, format, 0, "job", f->job, 1);
    if (f->part >= 0) {
        snprintf(num, sizeof(num), "%" PRId64, f->part);
        put_field(&l, format, 0, "part", num, 0);
    }
    for (size_t i = 0; i < f->kv_cnt; i++)
        if (f->kv[i].value) put_field(&l, format, 0, f->kv[i].key, f->kv[i].value, 1);
    /* the message goes last and may be cut: what was written of it is closed */
    if (format == BW_LOG_TEXT) {
        puts_(&l, " ");
        put_plain(&l, msg);
    } else if (format == BW_LOG_LOGFMT) {
        puts_(&l, " msg=\"");
        put_escaped(&l, msg);
        l.b[l.n++] = '"';
    } else {
        puts_(&l, ",\"msg\":\"");
        put_escaped(&l, msg);
        l.b[l.n++] = '"';
        l.b[l.n++] = '}';
    }
    l.b[l.n++] = '\n';
    return l.n;
}

/* ---- writing ------------------------------------------------------------------------ */

static pthread_once_t journal_once = PTHREAD_ONCE_INIT;
static int journal;

static void journal_check(void) { journal = bw_log_journal_detect(getenv("JOURNAL_STREAM"), STDERR_FILENO); }

static void log_v(bw_log_level_t level, const bw_log_fields_t *f, const char *fmt, va_list ap) {
    if (!bw_log_enabled(level)) return;
    pthread_once(&journal_once, journal_check);
    char msg[2048], line[4096];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    bw_utf8_sanitize(msg); /* a cut sequence or a server's bytes: every format stays UTF-8 */
    size_t n = bw_log_render(line, sizeof(line), (bw_log_format_t)atomic_load(&log_format), journal, bw_wall_ms(),
                             level, f, msg);
    ssize_t w = write(STDERR_FILENO, line, n);
    (void)w;
}

void bw_log(bw_log_level_t level, const char *component, int shard, const char *job, const char *fmt, ...) {
    bw_log_fields_t f = {.component = component, .shard = shard, .job = job, .part = -1};
    va_list ap;
    va_start(ap, fmt);
    log_v(level, &f, fmt, ap);
    va_end(ap);
}

void bw_log_part(bw_log_level_t level, const char *component, int shard, const char *job, int64_t part,
                 const char *fmt, ...) {
    bw_log_fields_t f = {.component = component, .shard = shard, .job = job, .part = part};
    va_list ap;
    va_start(ap, fmt);
    log_v(level, &f, fmt, ap);
    va_end(ap);
}

void bw_log_fields(bw_log_level_t level, const bw_log_fields_t *f, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    log_v(level, f, fmt, ap);
    va_end(ap);
}

/* ---- rate limit --------------------------------------------------------------------- */

/* FNV-1a of facility, a NUL, and msg with each run of digits as one '0'; never 0. */
static uint64_t limit_key(const char *facility, const char *msg) {
    uint64_t h = 14695981039346656037u;
    for (const char *s = facility; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211u;
    h *= 1099511628211u; /* the NUL between them */
    for (const char *s = msg; *s; s++) {
        if (*s >= '0' && *s <= '9') {
            while (s[1] >= '0' && s[1] <= '9') s++;
            h = (h ^ '0') * 1099511628211u;
        } else {
            h = (h ^ (unsigned char)*s) * 1099511628211u;
        }
    }
    return h ? h : 1;
}

int bw_log_limit_pass(bw_log_limit_t *l, const char *facility, const char *msg, int64_t now_ms,
                      unsigned *dropped) {
    uint64_t key = limit_key(facility, msg);
    pthread_mutex_lock(&l->mu);
    bw_log_limit_slot_t *s = NULL;
    for (size_t i = 0; i < BW_LOG_LIMIT_SLOTS && !s; i++)
        if (l->slots[i].key == key) s = &l->slots[i];
    if (!s) { /* a free slot, else the least recently used one, starts afresh */
        s = &l->slots[0];
        for (size_t i = 1; i < BW_LOG_LIMIT_SLOTS && s->key; i++)
            if (!l->slots[i].key || l->slots[i].last_ms < s->last_ms) s = &l->slots[i];
        *s = (bw_log_limit_slot_t){.key = key, .start_ms = now_ms};
    } else if (now_ms - s->start_ms >= l->interval_ms) { /* a new interval: the drops stay counted */
        s->start_ms = now_ms;
        s->passed = 0;
    }
    s->last_ms = now_ms;
    int pass = s->passed < l->burst;
    if (pass) {
        s->passed++;
        *dropped = s->dropped;
        s->dropped = 0;
    } else {
        s->dropped++;
    }
    pthread_mutex_unlock(&l->mu);
    return pass;
}
