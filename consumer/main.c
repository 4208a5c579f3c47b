/* bw-consumer — applies shard batches from Kafka to the MySQL shards, at each shard's rate.
 *
 * Threads:
 *  - the dispatcher (main thread) polls Kafka, serves rebalances, buffers up to
 *    consumer.pull_count messages per partition (a partition whose buffer is full is
 *    paused, so a slow shard's backlog stays in Kafka, not in this process), and hands each partition's next run of messages to the worker pool once the
 *    shard's rate limiter allows it. A partition has at most one job in flight, so a
 *    shard's batches are applied in partition order.
 *  - consumer.workers worker threads apply jobs (apply.c). A hung shard holds one
 *    worker until its query timeout; the other shards go on with the rest.
 *  - libmicrohttpd's thread serves /metrics, /healthz and /readyz.
 *
 * Offsets: the shard's own database holds each partition's next offset, updated in the
 * batch's transaction (exactly-once effects); the Kafka commit that follows only saves
 * re-reading.
 *
 * Failures: a retryable error backs the shard off exponentially (consumer.retry_*_ms,
 * with jitter); the batch is kept and tried again, never dropped. After
 * consumer.pause_after_timeouts consecutive timeouts or connection failures the shard
 * is unhealthy: an alert fires (alerts.c), its partition stops being fetched, and after
 * consumer.pause_ms one message is tried as a probe; its success resumes the shard and
 * resolves the alert. Other shards keep their workers and their rates throughout.
 *
 * Runtime control: the operator's per-shard rate and pause come from the compacted
 * control topic (shardtable.c), read continuously; the dispatcher applies a change on
 * its next loop. Every consumer.status_interval_ms the consumer publishes each assigned
 * shard's lag, rate and recent errors to the status topic (GET /v1/shards on the proxy).
 * SIGHUP reloads the config file's runtime keys (rates, retries, pauses, log level). */
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alerts.h"
#include "apply.h"
#include "deadletter.h"
#include "db.h"
#include "daemon.h"
#include "kafka.h"
#include "log.h"
#include "metrics.h"
#include "ratelimit.h"
#include "shardtable.h"

#define COMPONENT "consumer"

typedef struct job job_t;

/* One assigned partition (= logical shard). @locality dispatcher thread only. */
typedef struct {
    int assigned;
    int paused;                /* fetching paused: the buffer is full */
    int64_t next_fetch;        /* offset after the last buffered message; -1 before any */
    int64_t assigned_from;     /* the offset given at assignment (may be logical) */
    rd_kafka_message_t **buf;  /* buffered messages, offset order */
    size_t len, cap;
    job_t *job;                /* in flight, or NULL */
    int64_t ready_at_us;       /* not before (rate limit or retry backoff) */
    int64_t backoff_us;
    int64_t lag;               /* as last measured */
    int64_t applied;           /* the next offset to apply, as stored in the shard's ledger; -1 unknown */
    int64_t published_applied; /* applied as last published in a status record */
    int64_t high, low;         /* watermarks as last measured; -1 unknown */
    int64_t committed;         /* Kafka acknowledged this commit: resuming from it never meets our deletes */
    int64_t deleted_to;        /* Kafka's log start after our last DeleteRecords */
    int64_t lost_from, lost_to;/* messages deleted before they were applied; empty if equal */
    int64_t stalled_since_ms;  /* wall clock when lag was first seen without progress; 0 if none */
    int timeouts;              /* consecutive timeouts or connection failures */
    int unhealthy;             /* alert raised: not fetched; the next job is a probe */
    int op_paused;             /* paused by an operator (control topic) */
    bw_ratelimit_t rl;
    uint64_t rows_applied, rows_failed; /* since assigned, for the status record */
    struct {
        int64_t at_ms;
        const char *kind;
        char message[240];
    } errors[5];               /* recent errors, a ring; errors_next is the next slot */
    int errors_next;
} part_t;

struct job {
    int shard;
    rd_kafka_message_t **msgs; /* the partition's first cnt buffered messages (copied) */
    size_t cnt;
    int64_t started_us;
    bw_apply_result_t res;
    job_t *next;
};

typedef struct {
    bw_config_t *conf;
    rd_kafka_t *rk;
    part_t *parts;
    atomic_int run;
    atomic_int joined;        /* a first assignment (maybe empty) arrived */
    bw_metrics_t *metrics;
    bw_dead_letters_t *dead_letters;
    bw_alerts_t *alerts;
    bw_shard_table_t *table;   /* operator settings */
    unsigned table_version;    /* of the settings last applied */
    rd_kafka_t *status_rk;     /* status records (fire and forget) */
    bw_topic_retention_t retention; /* of the batches topic, as found at startup */
    rd_kafka_queue_t *delete_q;     /* DeleteRecords results; NULL when none is in flight */
    char instance[300];        /* host:port of this consumer, in status records */
    /* worker pool. @locks mu guards todo, done, busy, stopping */
    pthread_mutex_t mu;
    pthread_cond_t todo_cv, done_cv;
    job_t *todo, *todo_tail, *done;
    int busy; /* jobs handed out and not yet collected */
    int stopping;
    pthread_t *workers;
    struct MHD_Daemon *httpd;
} consumer_t;

static consumer_t cs;

/* ---- workers ----------------------------------------------------------------------- */

static void *worker_main(void *arg) {
    (void)arg;
    bw_applier_t ap;
    bw_applier_init(&ap, cs.conf, cs.metrics, cs.dead_letters);
    pthread_mutex_lock(&cs.mu);
    for (;;) {
        while (!cs.todo && !cs.stopping) pthread_cond_wait(&cs.todo_cv, &cs.mu);
        if (!cs.todo) break;
        job_t *j = cs.todo;
        cs.todo = j->next;
        if (!cs.todo) cs.todo_tail = NULL;
        pthread_mutex_unlock(&cs.mu);

        bw_applier_apply(&ap, j->shard, j->msgs, j->cnt, &j->res);

        pthread_mutex_lock(&cs.mu);
        j->next = cs.done;
        cs.done = j;
        pthread_cond_signal(&cs.done_cv);
    }
    pthread_mutex_unlock(&cs.mu);
    bw_applier_destroy(&ap);
    return NULL;
}

/* ---- dispatcher -------------------------------------------------------------------- */

static int header_eq(rd_kafka_message_t *m, const char *name, const void *val, size_t len) {
    rd_kafka_headers_t *h;
    const void *v;
    size_t vlen;
    if (rd_kafka_message_headers(m, &h) || rd_kafka_header_get_last(h, name, &v, &vlen)) return 0;
    return vlen == len && memcmp(v, val, len) == 0;
}

static long header_long(rd_kafka_message_t *m, const char *name) {
    rd_kafka_headers_t *h;
    const void *v;
    size_t vlen;
    char tmp[24];
    if (rd_kafka_message_headers(m, &h) || rd_kafka_header_get_last(h, name, &v, &vlen) ||
        vlen >= sizeof(tmp))
        return -1;
    memcpy(tmp, v, vlen);
    tmp[vlen] = '\0';
    return strtol(tmp, NULL, 10);
}

/* How many leading buffered messages form one job: consecutive messages of the same
 * (object type, op), read from the producer's headers, up to that op's batch size. */
static size_t job_size(const part_t *p) {
    rd_kafka_headers_t *h;
    const void *type;
    size_t type_len;
    rd_kafka_message_t *first = p->buf[0];
    if (rd_kafka_message_headers(first, &h) || rd_kafka_header_get_last(h, "bw-type", &type, &type_len))
        return 1;
    char tname[128];
    if (type_len >= sizeof(tname)) return 1;
    memcpy(tname, type, type_len);
    tname[type_len] = '\0';
    const bw_object_type_t *ot = bw_config_object_type(cs.conf, tname);
    long op = header_long(first, "bw-op"), rows = header_long(first, "bw-rows");
    if (!ot || op < BW_OP_CREATE || op > BW_OP_DELETE || rows < 0) return 1;
    char op_text[8];
    int op_len = snprintf(op_text, sizeof(op_text), "%ld", op);
    long limit = ot->batch_size[op];
    size_t n = 1, bytes = first->len;
    /* rows bound the statement's work, bytes its size (max_allowed_packet) */
    while (n < p->len && header_eq(p->buf[n], "bw-type", type, type_len) &&
           header_eq(p->buf[n], "bw-op", op_text, (size_t)op_len)) {
        long r = header_long(p->buf[n], "bw-rows");
        if (r < 0 || rows + r > limit || bytes + p->buf[n]->len > (size_t)cs.conf->max_batch_bytes) break;
        rows += r;
        bytes += p->buf[n]->len;
        n++;
    }
    return n;
}

/* Pauses or resumes fetching a partition. librdkafka drops what it prefetched for a
 * paused partition, so a resume first seeks to just after the last buffered message:
 * fetching restarts exactly there, whatever librdkafka's own position says. */
/* Where fetching resumes: after the last buffered message; before any message arrived,
 * where the partition was assigned (never the end of the log: a shard paused before
 * it applied anything must still get its backlog). */
static int64_t resume_point(int shard) {
    part_t *p = &cs.parts[shard];
    if (p->next_fetch >= 0) return p->next_fetch;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, cs.conf->topic, shard);
    int64_t at = RD_KAFKA_OFFSET_BEGINNING; /* the shard never stored an offset */
    if (p->assigned_from == RD_KAFKA_OFFSET_STORED) {
        /* its database could not be read at assignment: Kafka's committed offset */
        if (rd_kafka_committed(cs.rk, l, 5000) == 0 && l->elems[0].offset >= 0) at = l->elems[0].offset;
    }
    rd_kafka_topic_partition_list_destroy(l);
    return at;
}

static void set_paused(int shard, int paused) {
    part_t *p = &cs.parts[shard];
    if (p->paused == paused) return;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, cs.conf->topic, shard);
    if (paused) {
        rd_kafka_pause_partitions(cs.rk, l);
    } else {
        rd_kafka_resume_partitions(cs.rk, l);
        l->elems[0].offset = resume_point(shard);
        rd_kafka_error_t *e = rd_kafka_seek_partitions(cs.rk, l, 5000);
        if (e) {
            bw_log(BW_LOG_ERROR, COMPONENT, shard, NULL, "seek after resume: %s", rd_kafka_error_string(e));
            rd_kafka_error_destroy(e);
        }
    }
    rd_kafka_topic_partition_list_destroy(l);
    p->paused = paused;
}

/* Fetching runs unless the operator paused the shard, it is unhealthy, its next
 * messages are lost, or its buffer is full (resumed once half drained). */
static void refresh_fetch(int shard) {
    part_t *p = &cs.parts[shard];
    size_t full = (size_t)cs.conf->pull_count;
    int lost = p->lost_to > p->lost_from;
    int want = p->op_paused || p->unhealthy || lost || p->len >= full || (p->paused && p->len > full / 2);
    set_paused(shard, want);
}

static double configured_rate(int shard) { return cs.conf->shard_rate[shard]; }

static void note_error(int shard, const char *kind, const char *message) {
    part_t *p = &cs.parts[shard];
    p->errors[p->errors_next].at_ms = bw_wall_ms();
    p->errors[p->errors_next].kind = kind;
    snprintf(p->errors[p->errors_next].message, sizeof(p->errors[0].message), "%s", message);
    p->errors_next = (p->errors_next + 1) % 5;
}

/* Applies the operator's settings (and configured rates, after a reload) to every
 * assigned shard. */
static void apply_settings(int64_t now) {
    for (int s = 0; s < cs.conf->shard_count; s++) {
        part_t *p = &cs.parts[s];
        if (!p->assigned) continue;
        bw_shard_setting_t set;
        bw_shard_table_setting(cs.table, s, &set);
        double rate = set.has_rate ? set.rate : configured_rate(s);
        if (rate != p->rl.rate) {
            bw_log(BW_LOG_INFO, COMPONENT, s, NULL, "rate %g -> %g batches/s%s%s%s", p->rl.rate, rate,
                   set.has_rate ? " (operator: " : " (configured)", set.has_rate ? set.reason : "",
                   set.has_rate ? ")" : "");
            bw_ratelimit_set_rate(&p->rl, rate, now);
            if (!p->backoff_us) p->ready_at_us = 0; /* a wait set by the old rate; a retry backoff stays */
        }
        if (set.paused != p->op_paused) {
            bw_log(BW_LOG_INFO, COMPONENT, s, NULL, "%s by an operator%s%s", set.paused ? "paused" : "resumed",
                   set.reason[0] ? ": " : "", set.reason);
            p->op_paused = set.paused;
            refresh_fetch(s);
        }
    }
}

/* @locality dispatcher thread, from rd_kafka_consumer_poll */
static void on_commit(rd_kafka_t *rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t *l, void *opaque) {
    (void)rk;
    (void)opaque;
    for (int i = 0; l && i < l->cnt; i++) {
        const rd_kafka_topic_partition_t *e = &l->elems[i];
        if (err || e->err || e->partition < 0 || e->partition >= cs.conf->shard_count) continue;
        part_t *p = &cs.parts[e->partition];
        if (p->assigned && e->offset > p->committed) p->committed = e->offset;
    }
}

static void commit_offset(int shard, int64_t next) {
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, cs.conf->topic, shard)->offset = next;
    rd_kafka_commit(cs.rk, l, 1);
    rd_kafka_topic_partition_list_destroy(l);
}

/* The shard applied a batch again: it is healthy, its alert (if any) resolves. */
static void mark_healthy(int shard) {
    part_t *p = &cs.parts[shard];
    p->timeouts = 0;
    if (!p->unhealthy) return;
    p->unhealthy = 0;
    bw_metrics_shard_held(cs.metrics, shard, 0);
    bw_alerts_resolve(cs.alerts, BW_ALERT_UNHEALTHY, shard);
    bw_alerts_resolve(cs.alerts, BW_ALERT_STOPPED, shard);
    refresh_fetch(shard);
}

/* The shard refuses writes for a reason only an operator can fix: it is held at once
 * (no consecutive count), with its own alert naming the error; nothing is dead-lettered
 * and the batch stays first. One message is tried every consumer.pause_ms, so the shard
 * goes on by itself once the column, grant or disk is back. */
static void stop_shard(int shard, const char *error, int64_t now) {
    part_t *p = &cs.parts[shard];
    if (!p->unhealthy)
        bw_log(BW_LOG_ERROR, COMPONENT, shard, NULL, "stopped: %s; trying one batch every %d ms", error,
               cs.conf->pause_ms);
    p->unhealthy = 1;
    bw_metrics_shard_held(cs.metrics, shard, 1);
    bw_alerts_fire(cs.alerts, BW_ALERT_STOPPED, shard, error);
    refresh_fetch(shard);
    p->ready_at_us = now + (int64_t)cs.conf->pause_ms * 1000;
}

/* A timeout or connection failure; the shard turns unhealthy after too many in a row. */
static void count_timeout(int shard, const char *error, int64_t now) {
    part_t *p = &cs.parts[shard];
    if (++p->timeouts < cs.conf->pause_after_timeouts) return;
    if (!p->unhealthy)
        bw_log(BW_LOG_ERROR, COMPONENT, shard, NULL,
               "%d consecutive timeouts or connection failures: not pulling the shard for %d ms, then probing",
               p->timeouts, cs.conf->pause_ms);
    p->unhealthy = 1;
    bw_metrics_shard_held(cs.metrics, shard, 1);
    bw_alerts_fire(cs.alerts, BW_ALERT_UNHEALTHY, shard, error); /* again: the alert carries the latest error */
    refresh_fetch(shard);
    p->ready_at_us = now + (int64_t)cs.conf->pause_ms * 1000;
}

/* Takes a finished job back: on success drops its messages and commits; on a retry
 * keeps them and backs off exponentially with jitter. */
static void collect(job_t *j) {
    part_t *p = &cs.parts[j->shard];
    int64_t now = bw_now_us();
    if (j->res.status == BW_APPLY_OK) {
        for (size_t i = 0; i < j->cnt; i++) rd_kafka_message_destroy(p->buf[i]);
        memmove(p->buf, p->buf + j->cnt, (p->len - j->cnt) * sizeof(*p->buf));
        p->len -= j->cnt;
        p->backoff_us = 0;
        mark_healthy(j->shard);
        p->applied = j->res.next_offset;
        p->stalled_since_ms = 0; /* progress: the buffered head tells the age again */
        commit_offset(j->shard, j->res.next_offset);
        refresh_fetch(j->shard);
        p->rows_applied += j->res.rows_applied;
        p->rows_failed += j->res.rows_failed;
        if (j->res.rows_failed) {
            char msg[96];
            snprintf(msg, sizeof(msg), "%llu ops refused (see bw_job_failures and the dead-letter topic)",
                     (unsigned long long)j->res.rows_failed);
            note_error(j->shard, "data", msg);
        }
        /* counted once committed: a rolled-back attempt is not counted twice */
        if (j->res.rows_failed) bw_metrics_shard_error(cs.metrics, j->shard, BW_APPLY_ERR_DATA, j->res.rows_failed);
        if (j->res.messages_undecodable)
            bw_metrics_shard_error(cs.metrics, j->shard, BW_APPLY_ERR_DECODE, j->res.messages_undecodable);
        bw_metrics_shard_applied(cs.metrics, j->shard, j->res.rows_applied, j->res.rows_failed,
                                 j->res.messages_skipped, j->res.messages_duplicate, j->res.dead_letters,
                                 now - j->started_us);
        bw_log(BW_LOG_DEBUG, COMPONENT, j->shard, NULL,
               "applied %zu messages: %llu rows, %llu failed, %llu messages already applied",
               j->cnt, (unsigned long long)j->res.rows_applied, (unsigned long long)j->res.rows_failed,
               (unsigned long long)j->res.messages_skipped);
    } else {
        int64_t initial = (int64_t)cs.conf->retry_initial_ms * 1000, max = (int64_t)cs.conf->retry_max_ms * 1000;
        p->backoff_us = p->backoff_us ? p->backoff_us * 2 : initial;
        if (p->backoff_us > max) p->backoff_us = max;
        int64_t jitter = (int64_t)(rand() % 1000) * p->backoff_us / 4000; /* up to +25% */
        p->ready_at_us = now + p->backoff_us + jitter;
        bw_apply_err_t kind = j->res.fail == BW_FAIL_TIMEOUT      ? BW_APPLY_ERR_TIMEOUT
                              : j->res.fail == BW_FAIL_CONNECTION ? BW_APPLY_ERR_CONNECTION
                              : j->res.fail == BW_FAIL_STOP       ? BW_APPLY_ERR_STOP
                                                                  : BW_APPLY_ERR_RETRYABLE;
        static const char *const kinds[BW_APPLY_ERR_KINDS] = {
            [BW_APPLY_ERR_RETRYABLE] = "retryable", [BW_APPLY_ERR_TIMEOUT] = "timeout",
            [BW_APPLY_ERR_CONNECTION] = "connection", [BW_APPLY_ERR_STOP] = "stop"};
        bw_metrics_shard_error(cs.metrics, j->shard, kind, 1);
        bw_metrics_shard_retry(cs.metrics, j->shard);
        note_error(j->shard, kinds[kind], j->res.error);
        if (kind == BW_APPLY_ERR_STOP) {
            stop_shard(j->shard, j->res.error, now);
        } else {
            bw_log(BW_LOG_WARN, COMPONENT, j->shard, NULL, "batch not applied, retrying in %lld ms: %s",
                   (long long)(p->backoff_us + jitter) / 1000, j->res.error);
            if (kind != BW_APPLY_ERR_RETRYABLE) count_timeout(j->shard, j->res.error, now);
        }
    }
    p->job = NULL;
    free(j->msgs);
    free(j);
}

/* Collects finished jobs; waits up to timeout_us for one if `wait`. */
static void collect_done(int64_t wait_us) {
    pthread_mutex_lock(&cs.mu);
    if (!cs.done && wait_us > 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += (long)(wait_us % 1000000) * 1000;
        ts.tv_sec += wait_us / 1000000 + ts.tv_nsec / 1000000000;
        ts.tv_nsec %= 1000000000;
        pthread_cond_timedwait(&cs.done_cv, &cs.mu, &ts);
    }
    job_t *done = cs.done;
    cs.done = NULL;
    pthread_mutex_unlock(&cs.mu);
    while (done) {
        job_t *next = done->next;
        pthread_mutex_lock(&cs.mu);
        cs.busy--;
        pthread_mutex_unlock(&cs.mu);
        collect(done);
        done = next;
    }
}

/* Hands out every job that is due. Returns microseconds until the next one might be. */
static int64_t dispatch(void) {
    int64_t now = bw_now_us(), next = 10000;
    for (int s = 0; s < cs.conf->shard_count; s++) {
        part_t *p = &cs.parts[s];
        if (!p->assigned || p->job || !p->len || p->op_paused) continue;
        if (p->ready_at_us > now) {
            if (p->ready_at_us - now < next) next = p->ready_at_us - now;
            continue;
        }
        pthread_mutex_lock(&cs.mu);
        int full = cs.busy >= cs.conf->workers;
        pthread_mutex_unlock(&cs.mu);
        if (full) return 1000; /* pool full: back off, Kafka keeps buffering */
        int64_t wait = bw_ratelimit_try_acquire(&p->rl, 1, now);
        if (wait > 0) {
            p->ready_at_us = now + wait;
            if (wait < next) next = wait;
            continue;
        }
        job_t *j = calloc(1, sizeof(*j));
        j->shard = s;
        j->cnt = p->unhealthy ? 1 : job_size(p); /* an unhealthy shard gets one probe message */
        j->msgs = malloc(j->cnt * sizeof(*j->msgs));
        memcpy(j->msgs, p->buf, j->cnt * sizeof(*j->msgs));
        j->started_us = now;
        p->job = j;
        pthread_mutex_lock(&cs.mu);
        cs.busy++;
        if (cs.todo_tail) cs.todo_tail->next = j;
        else cs.todo = j;
        cs.todo_tail = j;
        pthread_cond_signal(&cs.todo_cv);
        pthread_mutex_unlock(&cs.mu);
    }
    return next;
}

/* The shard's next messages are gone from Kafka (an operator's retention, a truncated
 * log): deleted before they were applied. The shard stops at the gap, loudly: an alert
 * names the missing offsets, the status record carries them (jobs whose messages were
 * there report them lost), and the lag counts them. Nothing is skipped silently. */
/* Fetching of the partition goes on at `offset` (librdkafka stops a partition after an
 * offset reset error). */
static void refetch_from(int shard, int64_t offset) {
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, cs.conf->topic, shard)->offset = offset;
    rd_kafka_error_t *e = rd_kafka_seek_partitions(cs.rk, l, 5000);
    if (e) {
        bw_log(BW_LOG_ERROR, COMPONENT, shard, NULL, "seek to %lld: %s", (long long)offset, rd_kafka_error_string(e));
        rd_kafka_error_destroy(e);
    }
    rd_kafka_topic_partition_list_destroy(l);
}

/* The next offset the shard's ledger holds, read now; -1 if it cannot be read. */
static int64_t ledger_offset(int shard) {
    char err[512];
    int64_t next = -1;
    bw_buf_t scratch;
    bw_buf_init(&scratch);
    MYSQL *db = bw_db_connect(cs.conf, cs.conf->shard_server[shard], err, sizeof(err));
    if (!db || bw_db_read_offset(db, cs.conf, shard, 0, &scratch, &next)) next = -1;
    if (db) {
        mysql_rollback(db);
        mysql_close(db);
    }
    bw_buf_free(&scratch);
    return next;
}

/* The shard's next messages are gone from Kafka (an operator's retention, a truncated
 * log): deleted before they were applied. The shard stops at the gap, loudly: an alert
 * names the missing offsets, the status record carries them (jobs whose messages were
 * there report them lost), and the lag counts them. Nothing is skipped silently.
 * `failed` is the offset Kafka no longer holds (-1 if not known). */
static void on_lost(int shard, int64_t failed, const char *why) {
    part_t *p = &cs.parts[shard];
    int64_t lo = -1, hi = -1;
    int64_t from = failed >= 0 ? failed : p->next_fetch >= 0 ? p->next_fetch : p->applied;
    if (p->applied < 0) {
        /* the ledger was not read at assignment, so fetching began at Kafka's committed
         * offset, which may lag it: the ledger decides where the shard really is */
        int64_t next = ledger_offset(shard);
        if (next >= 0) p->applied = from = next;
    }
    rd_kafka_resp_err_t e = rd_kafka_query_watermark_offsets(cs.rk, cs.conf->topic, shard, &lo, &hi, 5000);
    if (e || from < 0 || lo <= from) {
        /* not a gap (a stale position), or it cannot be told now: fetch again from there */
        bw_log(BW_LOG_WARN, COMPONENT, shard, NULL, "offset %lld was out of range (%s); fetching again from %lld%s%s",
               (long long)failed, why, (long long)(from >= 0 ? from : 0), e ? ": watermarks: " : "",
               e ? rd_kafka_err2str(e) : "");
        refetch_from(shard, from >= 0 ? from : RD_KAFKA_OFFSET_BEGINNING);
        return;
    }
    p->lost_from = from;
    p->lost_to = lo;
    p->low = lo;
    p->high = hi;
    char msg[400];
    snprintf(msg, sizeof(msg),
             "offsets %lld to %lld of partition %d (%lld messages) were deleted from Kafka before the shard applied "
             "them; the shard stops at offset %lld (%s)",
             (long long)from, (long long)lo - 1, shard, (long long)(lo - from), (long long)from, why);
    bw_log(BW_LOG_ERROR, COMPONENT, shard, NULL, "%s", msg);
    note_error(shard, "lost", msg);
    bw_metrics_shard_lost(cs.metrics, shard, lo - from);
    bw_alerts_fire(cs.alerts, BW_ALERT_DATA_LOST, shard, msg);
    refresh_fetch(shard);
    p->published_applied = -2; /* publish at once */
}

static void buffer_message(rd_kafka_message_t *m) {
    if (m->err) {
        if (m->err == RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET && m->partition >= 0 &&
            m->partition < cs.conf->shard_count && cs.parts[m->partition].assigned)
            on_lost(m->partition, m->offset, rd_kafka_message_errstr(m));
        else if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
            bw_log(BW_LOG_WARN, COMPONENT, -1, NULL, "kafka: %s", rd_kafka_message_errstr(m));
        rd_kafka_message_destroy(m);
        return;
    }
    if (m->partition < 0 || m->partition >= cs.conf->shard_count || !cs.parts[m->partition].assigned) {
        rd_kafka_message_destroy(m); /* from a partition no longer ours */
        return;
    }
    part_t *p = &cs.parts[m->partition];
    if (p->len && m->offset <= p->buf[p->len - 1]->offset) {
        /* a redelivery of what is already buffered: keep the first copy */
        rd_kafka_message_destroy(m);
        return;
    }
    if (p->len == p->cap) {
        p->cap = p->cap ? p->cap * 2 : (size_t)cs.conf->pull_count;
        p->buf = realloc(p->buf, p->cap * sizeof(*p->buf));
        if (!p->buf) abort();
    }
    p->buf[p->len++] = m;
    p->next_fetch = m->offset + 1;
    if (p->len >= (size_t)cs.conf->pull_count) refresh_fetch(m->partition);
}

/* Lets in-flight jobs of the listed partitions finish, then forgets the partitions. */
static void release_partitions(const rd_kafka_topic_partition_list_t *l) {
    for (;;) {
        int in_flight = 0;
        for (int i = 0; i < l->cnt; i++)
            if (l->elems[i].partition < cs.conf->shard_count && cs.parts[l->elems[i].partition].job)
                in_flight = 1;
        if (!in_flight) break;
        collect_done(100000);
    }
    for (int i = 0; i < l->cnt; i++) {
        int s = l->elems[i].partition;
        if (s >= cs.conf->shard_count) continue;
        part_t *p = &cs.parts[s];
        for (size_t k = 0; k < p->len; k++) rd_kafka_message_destroy(p->buf[k]);
        p->len = 0;
        mark_healthy(s); /* no longer ours: its new owner alerts if it is still sick */
        bw_alerts_resolve(cs.alerts, BW_ALERT_DATA_LOST, s);
        bw_alerts_resolve(cs.alerts, BW_ALERT_BACKLOG_AGING, s);
        bw_alerts_resolve(cs.alerts, BW_ALERT_STOPPED, s);
        p->assigned = 0;
        p->paused = 0;
        p->op_paused = 0;
        bw_metrics_shard_state(cs.metrics, s, 0, 0, 0, 0);
    }
}

/* Sets where each assigned partition resumes: the next offset stored in its shard's own
 * database, which moves only with the data it describes; a partition that never applied
 * anything starts at the beginning of its log. With auto.offset.reset=error, an offset
 * Kafka no longer holds (deleted before it was applied) is reported, never skipped.
 * If a server cannot be read now, its partitions resume from Kafka's committed offset,
 * and the apply transaction still skips anything already applied. */
static void resume_offsets(rd_kafka_topic_partition_list_t *l) {
    bw_buf_t scratch;
    bw_buf_init(&scratch);
    for (int sv = 0; sv < cs.conf->server_cnt; sv++) {
        MYSQL *db = NULL;
        char err[512] = "";
        for (int i = 0; i < l->cnt; i++) {
            int s = l->elems[i].partition;
            if (s >= cs.conf->shard_count || cs.conf->shard_server[s] != sv) continue;
            if (!db && !err[0] && !(db = bw_db_connect(cs.conf, sv, err, sizeof(err))))
                bw_log(BW_LOG_WARN, COMPONENT, s, NULL, "resuming from Kafka's committed offsets: %s", err);
            int64_t next;
            if (!db || bw_db_read_offset(db, cs.conf, s, 0, &scratch, &next)) {
                l->elems[i].offset = RD_KAFKA_OFFSET_STORED;
                continue;
            }
            l->elems[i].offset = next >= 0 ? next : RD_KAFKA_OFFSET_BEGINNING;
            cs.parts[s].next_fetch = next;
            cs.parts[s].applied = next;
            cs.parts[s].assigned_from = l->elems[i].offset;
            bw_log(BW_LOG_DEBUG, COMPONENT, s, NULL, "resuming at offset %lld", (long long)next);
        }
        if (db) {
            mysql_rollback(db);
            mysql_close(db);
        }
    }
    bw_buf_free(&scratch);
}

/* @locality dispatcher thread, from rd_kafka_consumer_poll */
static void on_rebalance(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                         rd_kafka_topic_partition_list_t *l, void *opaque) {
    (void)opaque;
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        int64_t now = bw_now_us();
        for (int i = 0; i < l->cnt; i++) {
            int s = l->elems[i].partition;
            if (s >= cs.conf->shard_count) continue;
            part_t *p = &cs.parts[s];
            p->assigned = 1;
            p->paused = 0;
            p->next_fetch = -1; /* known once resume_offsets has read the shard */
            p->assigned_from = RD_KAFKA_OFFSET_STORED;
            p->ready_at_us = 0;
            p->backoff_us = 0;
            p->timeouts = 0;
            p->unhealthy = 0;
            p->op_paused = 0;
            p->rows_applied = p->rows_failed = 0;
            p->applied = p->high = p->low = -1;
            p->published_applied = -2;
            p->deleted_to = 0;
            p->committed = -1;
            p->lost_from = p->lost_to = 0;
            p->stalled_since_ms = 0;
            bw_metrics_shard_lost(cs.metrics, s, 0);
            bw_ratelimit_init(&p->rl, configured_rate(s), now);
        }
        resume_offsets(l);
        rd_kafka_assign(rk, l);
        /* librdkafka keeps a partition paused across a rebalance; this consumer may have
         * paused it (buffer full) before it was revoked and handed back */
        rd_kafka_resume_partitions(rk, l);
        apply_settings(now); /* an operator's pause or rate holds from the first batch */
        bw_info(COMPONENT, "assigned %d partitions", l->cnt);
        atomic_store(&cs.joined, 1);
    } else {
        bw_info(COMPONENT, "revoking %d partitions", l->cnt);
        release_partitions(l);
        rd_kafka_assign(rk, NULL);
    }
}

/* Wall clock (ms) of the oldest message the shard has not applied, as far as it is
 * known: the next buffered message's timestamp, or (a shard not fetched, e.g. paused)
 * no later than when its lag was first seen without progress. 0 if nothing waits. */
static int64_t oldest_unapplied_ms(const part_t *p) {
    int64_t oldest = p->stalled_since_ms;
    if (p->len) {
        rd_kafka_timestamp_type_t type;
        int64_t ts = rd_kafka_message_timestamp(p->buf[0], &type);
        if (ts > 0 && (!oldest || ts < oldest)) oldest = ts;
    }
    return oldest;
}

/* With a retention.ms on the topic (an operator's choice), warn well before Kafka may
 * delete a shard's unapplied messages. */
static void check_backlog_age(int shard, int64_t now_ms) {
    if (cs.retention.retention_ms <= 0) return;
    int64_t oldest = oldest_unapplied_ms(&cs.parts[shard]);
    int64_t warn_after = cs.retention.retention_ms / 100 * cs.conf->backlog_age_warn_pct;
    if (oldest && now_ms - oldest > warn_after) {
        char msg[300];
        snprintf(msg, sizeof(msg),
                 "the oldest unapplied message is older than %lld s (%d %% of the topic's retention); the topic's "
                 "retention.ms deletes messages after %lld s",
                 (long long)warn_after / 1000, cs.conf->backlog_age_warn_pct, (long long)cs.retention.retention_ms / 1000);
        bw_alerts_fire(cs.alerts, BW_ALERT_BACKLOG_AGING, shard, msg);
    } else {
        bw_alerts_resolve(cs.alerts, BW_ALERT_BACKLOG_AGING, shard);
    }
}

static void update_gauges(void) {
    int64_t now_ms = bw_wall_ms();
    for (int s = 0; s < cs.conf->shard_count; s++) {
        part_t *p = &cs.parts[s];
        if (!p->assigned) continue;
        int64_t lo = -1, hi = -1, lag = (int64_t)p->len;
        /* lag = high watermark - next offset to apply */
        int64_t next = p->len ? p->buf[0]->offset : p->lost_to > p->lost_from ? p->lost_from : p->next_fetch;
        if (next < 0) {
            rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
            rd_kafka_topic_partition_list_add(l, cs.conf->topic, s);
            if (rd_kafka_position(cs.rk, l) == 0) next = l->elems[0].offset;
            rd_kafka_topic_partition_list_destroy(l);
        }
        /* a partition not fetched (paused by an operator, or stopped at lost messages)
         * has a stale cached watermark: ask the broker (few shards are in that state) */
        if (p->op_paused || p->lost_to > p->lost_from)
            rd_kafka_query_watermark_offsets(cs.rk, cs.conf->topic, s, &lo, &hi, 500);
        else rd_kafka_get_watermark_offsets(cs.rk, cs.conf->topic, s, &lo, &hi);
        /* a shard that never applied anything starts at the beginning of its log */
        if (next < 0 && p->assigned_from == RD_KAFKA_OFFSET_BEGINNING) next = lo;
        if (next >= 0 && hi >= 0) lag = hi > next ? hi - next : 0;
        bw_metrics_shard_state(cs.metrics, s, p->rl.rate, p->op_paused, p->paused && !p->op_paused && !p->unhealthy, lag);
        p->lag = lag;
        if (!lag) p->stalled_since_ms = 0;
        else if (!p->stalled_since_ms) p->stalled_since_ms = now_ms;
        if (hi >= 0) p->high = hi;
        if (lo >= 0) p->low = lo;
        check_backlog_age(s, now_ms);
    }
}

static void on_status_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    (void)rk;
    (void)opaque;
    if (m->err) bw_log(BW_LOG_DEBUG, COMPONENT, -1, NULL, "status record: %s", rd_kafka_err2str(m->err));
}

/* One shard's status record (fire and forget: a lost one is replaced by the next). */
static void publish_shard_status(int s, int64_t now) {
    part_t *p = &cs.parts[s];
    Bulkwrite__V1__ShardStatus st = BULKWRITE__V1__SHARD_STATUS__INIT;
    Bulkwrite__V1__ShardError errs[5], *errp[5];
    st.shard = (uint32_t)s;
    st.consumer = cs.instance;
    st.updated_at_ms = now;
    st.lag = p->lag;
    st.rate = p->rl.rate;
    st.paused = p->op_paused;
    st.unhealthy = p->unhealthy;
    st.rows_applied = p->rows_applied;
    st.rows_failed = p->rows_failed;
    st.applied_offset = p->applied >= 0 ? p->applied : p->low >= 0 ? p->low : 0;
    st.high_watermark = p->high >= 0 ? p->high : 0;
    st.log_start_offset = p->low >= 0 ? p->low : 0;
    st.lost_from = p->lost_from;
    st.lost_to = p->lost_to;
    st.oldest_unapplied_ms = oldest_unapplied_ms(p);
    for (int i = 0; i < 5; i++) { /* newest first */
        int k = (p->errors_next + 4 - i) % 5;
        if (!p->errors[k].at_ms) break;
        bulkwrite__v1__shard_error__init(&errs[i]);
        errs[i].at_ms = p->errors[k].at_ms;
        errs[i].kind = (char *)p->errors[k].kind;
        errs[i].message = p->errors[k].message;
        errp[i] = &errs[i];
        st.n_recent_errors++;
    }
    st.recent_errors = errp;
    uint8_t buf[4096];
    size_t len = bulkwrite__v1__shard_status__get_packed_size(&st);
    if (len > sizeof(buf)) return;
    bulkwrite__v1__shard_status__pack(&st, buf);
    char key[24];
    int klen = bw_shard_key(s, key);
    rd_kafka_producev(cs.status_rk, RD_KAFKA_V_TOPIC(cs.conf->status_topic), RD_KAFKA_V_KEY(key, (size_t)klen),
                      RD_KAFKA_V_VALUE(buf, len), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
    p->published_applied = p->applied;
}

/* Every assigned shard's status (all), or only those whose applied offset moved since
 * they were last published: the proxies' backlog admission sees room soon. */
static void publish_status(int all) {
    int64_t now = bw_wall_ms();
    for (int s = 0; s < cs.conf->shard_count; s++) {
        part_t *p = &cs.parts[s];
        if (p->assigned && (all || p->applied != p->published_applied)) publish_shard_status(s, now);
    }
}

/* ---- freeing what the shards applied (DeleteRecords, real brokers only) -------------- */

/* Asks Kafka to delete, per partition, what the shard has applied and stored in its
 * ledger since the last time. One request at a time; its result is read by
 * collect_deleted(). Disk then holds the real backlog, not a retention's worth. */
static void delete_applied(void) {
    if (cs.delete_q || cs.retention.embedded || !cs.conf->delete_applied_interval_ms) return;
    int32_t *partitions = malloc(sizeof(int32_t) * (size_t)cs.conf->shard_count);
    int64_t *offsets = malloc(sizeof(int64_t) * (size_t)cs.conf->shard_count);
    size_t n = 0;
    for (int s = 0; s < cs.conf->shard_count; s++) {
        part_t *p = &cs.parts[s];
        /* only what the ledger holds, and only up to an acknowledged Kafka commit, so a
         * consumer that resumes from Kafka's commit (its ledger unreadable) finds it */
        int64_t upto = p->applied < p->committed ? p->applied : p->committed;
        if (!p->assigned || upto <= p->deleted_to) continue;
        partitions[n] = s;
        offsets[n++] = upto;
    }
    if (n) {
        cs.delete_q = rd_kafka_queue_new(cs.rk);
        bw_kafka_delete_records_start(cs.rk, cs.conf->topic, partitions, offsets, n, 30000, cs.delete_q);
    }
    free(partitions);
    free(offsets);
}

/* Reads the result of the DeleteRecords in flight, waiting up to wait_ms for it. */
static void collect_deleted(int wait_ms) {
    if (!cs.delete_q) return;
    size_t cap = (size_t)cs.conf->shard_count, n = 0;
    int32_t *partitions = malloc(sizeof(int32_t) * cap);
    int64_t *low = malloc(sizeof(int64_t) * cap);
    char err[512] = "";
    int64_t deadline = bw_now_us() + (int64_t)wait_ms * 1000;
    int done;
    while (!(done = bw_kafka_delete_records_poll(cs.delete_q, partitions, low, cap, &n, err, sizeof(err))) &&
           bw_now_us() < deadline)
        usleep(10000);
    if (done) {
        rd_kafka_queue_destroy(cs.delete_q);
        cs.delete_q = NULL;
        for (size_t i = 0; i < n; i++)
            if (low[i] >= 0 && partitions[i] >= 0 && partitions[i] < cs.conf->shard_count)
                cs.parts[partitions[i]].low = cs.parts[partitions[i]].deleted_to = low[i]; /* a failed one is tried again */
        if (err[0]) bw_log(BW_LOG_WARN, COMPONENT, -1, NULL, "deleting applied records: %s (tried again later)", err);
        else bw_log(BW_LOG_DEBUG, COMPONENT, -1, NULL, "deleted applied records of %zu partitions", n);
    }
    free(partitions);
    free(low);
}

/* SIGHUP: the runtime keys of the new file replace the running ones (this thread is the
 * only reader of rates, retry and pause settings). */
static void reload(const bw_daemon_t *d) {
    bw_config_t *n = bw_daemon_reload(d, cs.conf);
    if (!n) return;
    memcpy(cs.conf->shard_rate, n->shard_rate, sizeof(double) * (size_t)cs.conf->shard_count);
    cs.conf->default_rate = n->default_rate;
    cs.conf->retry_initial_ms = n->retry_initial_ms;
    cs.conf->retry_max_ms = n->retry_max_ms;
    cs.conf->pause_after_timeouts = n->pause_after_timeouts;
    cs.conf->pause_ms = n->pause_ms;
    cs.conf->status_interval_ms = n->status_interval_ms;
    cs.conf->progress_interval_ms = n->progress_interval_ms;
    cs.conf->log_level = n->log_level;
    bw_config_destroy(n);
    apply_settings(bw_now_us());
}

/* ---- HTTP ----------------------------------------------------------------------------- */

/* /readyz: ready once the group has given this consumer its (possibly empty) share. */
static int joined_group(void) { return atomic_load(&cs.joined); }

static enum MHD_Result on_http(void *cls, struct MHD_Connection *c, const char *url,
                               const char *method, const char *version, const char *data,
                               size_t *data_size, void **con_cls) {
    (void)cls; (void)version; (void)data; (void)data_size; (void)con_cls;
    enum MHD_Result ret;
    if (bw_daemon_serve_ops(c, method, url, cs.metrics, joined_group, &ret)) return ret;
    char msg[256];
    int len = snprintf(msg, sizeof(msg), "no such endpoint: %s %s\n", method, url);
    return bw_daemon_reply(c, MHD_HTTP_NOT_FOUND, "text/plain", msg, (size_t)len, 0);
}

/* ---- main ------------------------------------------------------------------------------ */

int main(int argc, char **argv) {
    bw_daemon_t d = {.name = "bw-consumer", .port_help = "port of /metrics, /healthz, /readyz (overrides consumer.port)"};
    int exit_code;
    if (!(cs.conf = bw_daemon_init(&d, argc, argv, &exit_code))) return exit_code;
    if (d.port >= 0) cs.conf->consumer_port = d.port;
    char err[512];
    srand((unsigned)bw_now_us());

    rd_kafka_conf_t *kc = bw_kafka_conf(cs.conf, BW_KAFKA_CONSUMER, d.brokers, err, sizeof(err));
    if (!kc) {
        bw_error(COMPONENT, "%s", err);
        return 1;
    }
    rd_kafka_conf_set_rebalance_cb(kc, on_rebalance);
    rd_kafka_conf_set_offset_commit_cb(kc, on_commit);
    cs.rk = rd_kafka_new(RD_KAFKA_CONSUMER, kc, err, sizeof(err));
    if (!cs.rk) {
        bw_error(COMPONENT, "kafka consumer: %s", err);
        return 1;
    }
    if (bw_kafka_ensure_topic(cs.rk, cs.conf, 10000, &cs.retention, err, sizeof(err)) != BW_OK) {
        bw_error(COMPONENT, "%s", err);
        rd_kafka_destroy(cs.rk);
        return 1;
    }
    rd_kafka_poll_set_consumer(cs.rk);
    if (!(cs.dead_letters = bw_dead_letters_new(cs.conf, d.brokers, err, sizeof(err)))) {
        bw_error(COMPONENT, "dead-letter producer: %s", err);
        rd_kafka_destroy(cs.rk);
        return 1;
    }
    rd_kafka_conf_t *sc = bw_kafka_conf(cs.conf, BW_KAFKA_PRODUCER, d.brokers, err, sizeof(err));
    if (sc) rd_kafka_conf_set_dr_msg_cb(sc, on_status_delivery);
    if (!sc || !(cs.status_rk = rd_kafka_new(RD_KAFKA_PRODUCER, sc, err, sizeof(err))) ||
        bw_kafka_ensure_side_topic(cs.status_rk, cs.conf, cs.conf->status_topic, BW_TOPIC_TABLE, 10000, err, sizeof(err)) ||
        bw_kafka_ensure_side_topic(cs.status_rk, cs.conf, cs.conf->control_topic, BW_TOPIC_TABLE, 10000, err, sizeof(err)) ||
        !(cs.table = bw_shard_table_start(cs.conf, d.brokers, NULL, err, sizeof(err)))) {
        bw_error(COMPONENT, "control and status topics: %s", err);
        return 1;
    }
    /* an operator's pause must hold from the first assignment on */
    if (!bw_shard_table_sync(cs.table, 10000))
        bw_warn(COMPONENT, "the control topic %s was not read to its end in 10 s: settings may apply late",
                cs.conf->control_topic);
    cs.parts = calloc((size_t)cs.conf->shard_count, sizeof(*cs.parts));
    cs.metrics = bw_metrics_new(cs.conf, BW_METRICS_CONSUMER);
    pthread_mutex_init(&cs.mu, NULL);
    pthread_cond_init(&cs.todo_cv, NULL);
    pthread_cond_init(&cs.done_cv, NULL);
    cs.workers = calloc((size_t)cs.conf->workers, sizeof(*cs.workers));
    for (int i = 0; i < cs.conf->workers; i++) pthread_create(&cs.workers[i], NULL, worker_main, NULL);

    int bound;
    cs.httpd = bw_daemon_listen(&d, cs.conf->consumer_listen_address, cs.conf->consumer_port, 0, on_http,
                                NULL, 64, &bound);
    if (!cs.httpd) return 1;
    char generator[300];
    snprintf(generator, sizeof(generator), "http://%s:%d/metrics", cs.conf->consumer_listen_address, bound);
    cs.alerts = bw_alerts_new(cs.conf, cs.metrics, generator);
    snprintf(cs.instance, sizeof(cs.instance), "%s:%d", cs.conf->consumer_listen_address, bound);

    rd_kafka_topic_partition_list_t *topics = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(topics, cs.conf->topic, RD_KAFKA_PARTITION_UA);
    rd_kafka_resp_err_t e = rd_kafka_subscribe(cs.rk, topics);
    rd_kafka_topic_partition_list_destroy(topics);
    if (e) {
        bw_error(COMPONENT, "subscribe to %s: %s", cs.conf->topic, rd_kafka_err2str(e));
        return 1;
    }
    bw_info(COMPONENT, "consuming %s in group %s with %d workers; metrics on http://%s:%d/metrics",
            cs.conf->topic, cs.conf->consumer_group, cs.conf->workers, cs.conf->consumer_listen_address,
            bound);

    atomic_store(&cs.run, 1);
    atomic_int reload_requested = 0;
    bw_daemon_handle_signals(&cs.run, &reload_requested);
    int64_t next_gauges = 0, next_status = 0, next_progress = 0, next_delete = 0;
    int64_t wait_us = 0;
    while (atomic_load(&cs.run)) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(cs.rk, (int)(wait_us / 1000));
        /* drain what is already fetched without blocking */
        for (int i = 0; m && i < 10000; i++) {
            buffer_message(m);
            m = rd_kafka_consumer_poll(cs.rk, 0);
        }
        if (m) buffer_message(m);
        collect_done(0);
        if (atomic_exchange(&reload_requested, 0)) reload(&d);
        unsigned version = bw_shard_table_version(cs.table);
        if (version != cs.table_version) {
            cs.table_version = version;
            apply_settings(bw_now_us());
        }
        wait_us = dispatch();
        if (wait_us > 5000) wait_us = 5000; /* finished jobs are collected at least this often */
        int64_t now = bw_now_us();
        if (now >= next_gauges) {
            update_gauges();
            next_gauges = now + 1000000;
        }
        if (now >= next_status) {
            publish_status(1);
            next_status = now + (int64_t)cs.conf->status_interval_ms * 1000;
            next_progress = now + (int64_t)cs.conf->progress_interval_ms * 1000;
        } else if (now >= next_progress) {
            publish_status(0);
            next_progress = now + (int64_t)cs.conf->progress_interval_ms * 1000;
        }
        if (now >= next_delete && cs.conf->delete_applied_interval_ms) {
            delete_applied();
            next_delete = now + (int64_t)cs.conf->delete_applied_interval_ms * 1000;
        }
        collect_deleted(0);
        rd_kafka_poll(cs.status_rk, 0);
    }

    bw_info(COMPONENT, "shutting down: finishing batches in flight");
    for (int s = 0; s < cs.conf->shard_count; s++)
        while (cs.parts[s].job) collect_done(100000);
    rd_kafka_consumer_close(cs.rk); /* revokes: nothing in flight by now */
    collect_deleted(2000); /* its request list is freed with the result */
    if (cs.delete_q) rd_kafka_queue_destroy(cs.delete_q);
    pthread_mutex_lock(&cs.mu);
    cs.stopping = 1;
    pthread_cond_broadcast(&cs.todo_cv);
    pthread_mutex_unlock(&cs.mu);
    for (int i = 0; i < cs.conf->workers; i++) pthread_join(cs.workers[i], NULL);
    rd_kafka_destroy(cs.rk);
    bw_dead_letters_destroy(cs.dead_letters);
    bw_alerts_destroy(cs.alerts);
    bw_shard_table_stop(cs.table);
    rd_kafka_flush(cs.status_rk, 2000);
    rd_kafka_destroy(cs.status_rk);
    MHD_stop_daemon(cs.httpd);
    for (int s = 0; s < cs.conf->shard_count; s++) free(cs.parts[s].buf);
    free(cs.parts);
    free(cs.workers);
    bw_metrics_destroy(cs.metrics);
    bw_config_destroy(cs.conf);
    return 0;
}
