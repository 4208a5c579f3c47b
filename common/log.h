/* log.h — one line per event on stderr, in one of three formats (log_format):
 *   text:   2026-11-30T06:40:01.123Z INFO  consumer shard=3 job=ab12… part=4 applied 500 rows
 *   logfmt: ts=2026-11-30T06:40:01.123Z level=info component=consumer shard=3 job=ab12… part=4 msg="applied 500 rows"
 *   json:   {"ts":"2026-11-30T06:40:01.123Z","level":"info","component":"consumer","shard":3,…,"msg":"applied 500 rows"}
 * Under journald (stderr is the stream JOURNAL_STREAM names) every line starts with its
 * syslog priority, as sd-daemon(3) says: <3> error, <4> warn, <6> info, <7> debug; journald
 * takes it off and files the line at that priority (journalctl -p warning).
 *
 * `job` is always the id the client holds (a named job's id, not its part's); `part` a
 * named job's part number (its job_part).
 * @locality any thread (each line is written with one write(2)). */
#ifndef BW_LOG_H
#define BW_LOG_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { BW_LOG_DEBUG, BW_LOG_INFO, BW_LOG_WARN, BW_LOG_ERROR } bw_log_level_t;
typedef enum { BW_LOG_TEXT, BW_LOG_LOGFMT, BW_LOG_JSON } bw_log_format_t;

void bw_log_set_level(bw_log_level_t level);
/* Parses "debug", "info", "warn", "error"; returns -1 if unknown. */
int bw_log_level_parse(const char *name);
/* 1 if a line of `level` is written at the current level. */
int bw_log_enabled(bw_log_level_t level);
void bw_log_set_format(bw_log_format_t format);

/* 1 if `fd` is the stream JOURNAL_STREAM ("<st_dev>:<st_ino>", as systemd sets it for
 * StandardError=journal) names; 0 if journal_stream is NULL, malformed or another file.
 * bw_log checks stderr against getenv("JOURNAL_STREAM") once, at its first line. */
int bw_log_journal_detect(const char *journal_stream, int fd);

/* A field after the standard ones: key=value (value NULL: left out). */
typedef struct {
    const char *key, *value;
} bw_log_kv_t;

/* What a line says besides its message. */
typedef struct {
    const char *component;   /* "consumer", "proxy", "kafka", … */
    int shard;               /* < 0: none */
    const char *job;         /* the client's job id; NULL: none */
    int64_t part;            /* a named job's part number; < 0: none */
    const bw_log_kv_t *kv;   /* kv_cnt more fields, in order */
    size_t kv_cnt;
} bw_log_fields_t;

/* Renders one line, '\n' included, into out[cap] and returns its length: the priority
 * prefix if `journal`, then the time (Unix ms), level, fields and msg in `format`. A line
 * too long for out is cut in its message and stays one line of its format (a JSON object
 * stays whole); cap >= 512 holds every field (bw_log's lines have 4 KiB). Control
 * characters never reach the line: text shows them as '?', logfmt and json escape them
 * (\n, \t, \u001b), so no value can forge another line. msg should be valid UTF-8
 * (bw_log repairs it first). */
size_t bw_log_render(char *out, size_t cap, bw_log_format_t format, int journal, int64_t wall_ms,
                     bw_log_level_t level, const bw_log_fields_t *f, const char *msg);

/* shard < 0 and job == NULL leave those fields out. */
void bw_log(bw_log_level_t level, const char *component, int shard, const char *job,
            const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* The same with a named job's part number (part < 0: none). */
void bw_log_part(bw_log_level_t level, const char *component, int shard, const char *job, int64_t part,
                 const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* The same with every field given. */
void bw_log_fields(bw_log_level_t level, const bw_log_fields_t *f, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define bw_info(comp, ...) bw_log(BW_LOG_INFO, comp, -1, NULL, __VA_ARGS__)
#define bw_warn(comp, ...) bw_log(BW_LOG_WARN, comp, -1, NULL, __VA_ARGS__)
#define bw_error(comp, ...) bw_log(BW_LOG_ERROR, comp, -1, NULL, __VA_ARGS__)
#define bw_debug(comp, ...) bw_log(BW_LOG_DEBUG, comp, -1, NULL, __VA_ARGS__)

/* ---- rate limit for lines from elsewhere (librdkafka's) --------------------------------
 *
 * At most `burst` lines of one key per `interval_ms`; the key is a facility and its
 * message with every run of digits taken as one (a flapping broker's "after 12ms" and
 * "after 340ms" are the same line). The lines dropped are counted and told with the
 * key's next line that passes. Keys share BW_LOG_LIMIT_SLOTS slots: a key pushed out by
 * others starts again with a full burst.
 * @locks mu guards slots. */
#define BW_LOG_LIMIT_SLOTS 64
typedef struct {
    uint64_t key;        /* 0: free */
    int64_t start_ms;    /* the current interval's start */
    unsigned passed;     /* lines passed in it */
    unsigned dropped;    /* lines dropped since the key's last line passed */
    int64_t last_ms;     /* the key's last line: the least recent slot is reused */
} bw_log_limit_slot_t;
typedef struct {
    pthread_mutex_t mu;
    unsigned burst;
    int64_t interval_ms;
    bw_log_limit_slot_t slots[BW_LOG_LIMIT_SLOTS];
} bw_log_limit_t;
#define BW_LOG_LIMIT_INIT(burst_, interval_ms_) \
    {.mu = PTHREAD_MUTEX_INITIALIZER, .burst = (burst_), .interval_ms = (interval_ms_)}

/* 1: write the line (*dropped: lines of its key dropped before it, to say so); 0: drop
 * it. now_ms is a monotonic clock. */
int bw_log_limit_pass(bw_log_limit_t *l, const char *facility, const char *msg, int64_t now_ms,
                      unsigned *dropped);

#endif
