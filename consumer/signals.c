/* signals.c — the throttle's signal reader (signals.h). */
#include "signals.h"

#include <math.h>
#include <mysql.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "bw.h"
#include "db.h"
#include "log.h"

#define COMPONENT "signals"

/* The heartbeats this reader wrote last, oldest first: the lag is the age of the oldest
 * one a replica has not applied, so a replica that keeps up reads a few milliseconds,
 * not the interval between two writes. */
#define HEARTBEATS_KEPT 64

#define THREADS_RUNNING_SQL "SHOW GLOBAL STATUS LIKE 'Threads_running'"

typedef struct {
    MYSQL *primary;
    MYSQL **replicas; /* [replica_cnt] */
    char *fallback_noted; /* [replica_cnt]: its lag comes from Seconds_Behind_Master (logged once) */
    bw_signal_reading_t readings[BW_SERVER_SIGNALS];
    int64_t written_us[HEARTBEATS_KEPT];
    int written_cnt, written_next; /* ring over written_us */
    double running_sum; /* Threads_running samples of this interval, for their mean */
    int running_cnt;
} server_signals_t;

struct bw_signals {
    const bw_config_t *conf;
    server_signals_t *servers;
    uint64_t heartbeat_id; /* this consumer's row of each heartbeat table */
    pthread_mutex_t mu; /* guards servers[].readings and stopping */
    pthread_cond_t cv;
    int stopping;
    pthread_t *threads; /* one per server: a server that hangs delays no other's readings */
};

typedef struct {
    bw_signals_t *s;
    int server;
} reader_arg_t;

static int64_t wall_us(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000000 + tv.tv_usec;
}

/* The one number of a query's first row and column; -1 with why. */
static int query_number(MYSQL *db, const char *sql, int column, double *out, char *why, size_t why_size) {
    if (mysql_query(db, sql)) return snprintf(why, why_size, "%s", mysql_error(db)), -1;
    MYSQL_RES *r = mysql_store_result(db);
    if (!r) return snprintf(why, why_size, "%s", mysql_errno(db) ? mysql_error(db) : "no result set"), -1;
    MYSQL_ROW row = mysql_fetch_row(r);
    int ok = row && (int)mysql_num_fields(r) > column && row[column];
    char *end = NULL;
    if (ok) *out = strtod(row[column], &end);
    ok = ok && end != row[column] && *end == '\0' && isfinite(*out); /* "nan", "inf", 1e999 are no readings */
    mysql_free_result(r);
    mysql_commit(db); /* autocommit is off: end the read's snapshot, so the next read sees new rows */
    if (!ok) return snprintf(why, why_size, "no number in the first row and column"), -1;
    return 0;
}

static void heartbeat_written(server_signals_t *ss, int64_t ts_us) {
    ss->written_us[ss->written_next] = ts_us;
    ss->written_next = (ss->written_next + 1) % HEARTBEATS_KEPT;
    if (ss->written_cnt < HEARTBEATS_KEPT) ss->written_cnt++;
}

/* The lag in ms of a replica whose heartbeat row holds seen_us (0: no row yet), at now_us:
 * the age of the oldest heartbeat written after seen_us (it has waited that long to be
 * applied); 0 when the replica holds the newest. Older than every kept write: the age of
 * the oldest kept, a lower bound already HEARTBEATS_KEPT intervals long. */
static double heartbeat_lag_ms(const server_signals_t *ss, int64_t seen_us, int64_t now_us) {
    int oldest = (ss->written_next - ss->written_cnt + HEARTBEATS_KEPT) % HEARTBEATS_KEPT;
    for (int k = 0; k < ss->written_cnt; k++) {
        int64_t w = ss->written_us[(oldest + k) % HEARTBEATS_KEPT];
        if (w > seen_us) return (double)(now_us - w) / 1000.0;
    }
    return 0;
}

/* The replica's own Seconds_Behind_Master in ms (SHOW REPLICA STATUS, which needs the
 * REPLICA MONITOR privilege): the lag when the heartbeat cannot be read. NULL (a thread
 * stopped) and "not a replica" are errors, never 0. 0, or -1 with why. */
static int replica_status_lag_ms(MYSQL *db, double *ms, char *why, size_t why_size) {
    if (mysql_query(db, "SHOW REPLICA STATUS")) return snprintf(why, why_size, "%s", mysql_error(db)), -1;
    MYSQL_RES *r = mysql_store_result(db);
    if (!r) return snprintf(why, why_size, "%s", mysql_errno(db) ? mysql_error(db) : "no result set"), -1;
    MYSQL_ROW row = mysql_fetch_row(r);
    MYSQL_FIELD *f = mysql_fetch_fields(r);
    int col = -1;
    for (unsigned i = 0; i < mysql_num_fields(r); i++)
        if (strcmp(f[i].name, "Seconds_Behind_Master") == 0) col = (int)i;
    int rc = 0;
    if (!row) rc = snprintf(why, why_size, "not a replica (SHOW REPLICA STATUS is empty)");
    else if (col < 0) rc = snprintf(why, why_size, "no Seconds_Behind_Master column");
    else if (!row[col]) rc = snprintf(why, why_size, "Seconds_Behind_Master is NULL (replication stopped)");
    else *ms = strtod(row[col], NULL) * 1000.0;
    mysql_free_result(r);
    mysql_commit(db);
    return rc ? -1 : 0;
}

/* Records a reading (or why it failed) under the lock. */
static void note(bw_signals_t *s, int server, int kind, int ok, double value, const char *why) {
    pthread_mutex_lock(&s->mu);
    bw_signal_reading_t *r = &s->servers[server].readings[kind];
    if (ok) {
        r->value = value;
        r->at_us = bw_now_us();
        r->error[0] = '\0';
    } else {
        snprintf(r->error, sizeof(r->error), "%s", why);
    }
    pthread_mutex_unlock(&s->mu);
}

static void drop(MYSQL **db) {
    if (*db) mysql_close(*db);
    *db = NULL;
}

static void read_server(bw_signals_t *s, int i) {
    const bw_config_t *c = s->conf;
    const bw_server_t *sv = &c->servers[i];
    server_signals_t *ss = &s->servers[i];
    char why[256] = "", sql[512], db[80];
    double v;
    bw_config_shard_db(c, sv->first_shard, db, sizeof(db));
    if (!ss->primary && !(ss->primary = bw_db_connect(c, i, why, sizeof(why)))) {
        for (int k = 0; k < BW_SERVER_SIGNALS; k++) note(s, i, k, 0, 0, why);
        return;
    }
    int ok = 1, beat_ok = 0;
    if (sv->replica_cnt) {
        int64_t beat = wall_us();
        snprintf(sql, sizeof(sql), "REPLACE INTO `%s`.`%s` (id, ts_us) VALUES (%llu, %lld)", db,
                 c->throttle_heartbeat_table, (unsigned long long)s->heartbeat_id, (long long)beat);
        if (!mysql_query(ss->primary, sql) && !mysql_commit(ss->primary)) {
            heartbeat_written(ss, beat);
            beat_ok = 1;
        } else {
            /* no fresh heartbeat: the replicas would show the last one as no lag at all */
            snprintf(why, sizeof(why), "heartbeat write on %s: %s", sv->name, mysql_error(ss->primary));
            note(s, i, BW_SIGNAL_REPLICATION_LAG, 0, 0, why);
            ok = !bw_db_error_is_client(mysql_errno(ss->primary)); /* a refusal (read_only, a grant) leaves the session usable */
        }
    }
    if (ok) {
        ok = !query_number(ss->primary, THREADS_RUNNING_SQL, 1, &v, why, sizeof(why));
        if (ok) ss->running_sum += v, ss->running_cnt++;
        /* the reading query is one of them: the signal counts the others */
        note(s, i, BW_SIGNAL_THREADS_RUNNING, ok, ok ? fmax(0, ss->running_sum / ss->running_cnt - 1) : 0, why);
    }
    ss->running_sum = 0;
    ss->running_cnt = 0;
    if (ok && c->throttle_custom_query[0]) {
        int good = !query_number(ss->primary, c->throttle_custom_query, 0, &v, why, sizeof(why));
        note(s, i, BW_SIGNAL_CUSTOM, good, v, why);
        /* a query the server refuses is the operator's to fix; a client error means the
         * connection is gone */
        ok = good || !bw_db_error_is_client(mysql_errno(ss->primary));
    }
    if (!ok) drop(&ss->primary);

    /* the lag: the most over the replicas; one that cannot be read makes the signal unknown */
    if (!beat_ok) return;
    double lag = 0;
    int lag_ok = sv->replica_cnt > 0;
    for (int r = 0; r < sv->replica_cnt; r++) {
        MYSQL **rdb = &ss->replicas[r];
        if (!*rdb && !(*rdb = bw_db_connect_replica(c, i, r, why, sizeof(why)))) {
            lag_ok = 0;
            break;
        }
        /* no row yet (our first heartbeat not applied there): 0, as old as can be */
        snprintf(sql, sizeof(sql), "SELECT COALESCE(MAX(ts_us), 0) FROM `%s`.`%s` WHERE id = %llu", db,
                 c->throttle_heartbeat_table, (unsigned long long)s->heartbeat_id);
        double ms;
        if (query_number(*rdb, sql, 0, &v, why, sizeof(why))) {
            if (bw_db_error_is_client(mysql_errno(*rdb))) { /* the connection is gone */
                char what[sizeof(why)];
                snprintf(what, sizeof(what), "heartbeat on %.60s: %.180s", sv->replicas[r], why);
                memcpy(why, what, sizeof(why));
                drop(rdb);
                lag_ok = 0;
                break;
            }
            /* the server answered but the heartbeat cannot be read: the replica's own
             * (coarser) Seconds_Behind_Master, else unknown with both reasons */
            char fallback[160];
            if (replica_status_lag_ms(*rdb, &ms, fallback, sizeof(fallback))) {
                char what[sizeof(why)];
                snprintf(what, sizeof(what), "heartbeat on %.60s: %.90s; Seconds_Behind_Master: %.60s", sv->replicas[r],
                         why, fallback);
                memcpy(why, what, sizeof(why));
                /* refused (no REPLICA MONITOR): a global grant reaches new sessions only */
                if (mysql_errno(*rdb)) drop(rdb);
                lag_ok = 0;
                break;
            }
            if (!ss->fallback_noted[r]) {
                bw_warn(COMPONENT, "server %s: the heartbeat on replica %s cannot be read (%s); replication lag from its "
                                   "Seconds_Behind_Master (whole seconds) until it can",
                        sv->name, sv->replicas[r], why);
                ss->fallback_noted[r] = 1;
            }
        } else {
            if (ss->fallback_noted[r])
                bw_info(COMPONENT, "server %s: the heartbeat on replica %s is read again", sv->name, sv->replicas[r]);
            ss->fallback_noted[r] = 0;
            if (v < 0 || v > 9e15) v = 0; /* not a time we wrote: as old as can be */
            ms = heartbeat_lag_ms(ss, (int64_t)v, wall_us());
        }
        if (ms > lag) lag = ms;
    }
    if (sv->replica_cnt) note(s, i, BW_SIGNAL_REPLICATION_LAG, lag_ok, lag < 0 ? 0 : lag, why);
}

/* One of the extra Threads_running samples between two full reads. A failure here only
 * leaves the sample out: the full read reconnects and reports. */
static void sample_threads_running(bw_signals_t *s, int i) {
    server_signals_t *ss = &s->servers[i];
    char why[256];
    double v;
    if (!ss->primary) return;
    if (query_number(ss->primary, THREADS_RUNNING_SQL, 1, &v, why, sizeof(why))) {
        if (bw_db_error_is_client(mysql_errno(ss->primary))) drop(&ss->primary);
        return;
    }
    ss->running_sum += v;
    ss->running_cnt++;
}

static void *signals_main(void *arg) {
    bw_signals_t *s = ((reader_arg_t *)arg)->s;
    int i = ((reader_arg_t *)arg)->server;
    free(arg);
    mysql_thread_init();
    int samples = s->conf->throttle_threads_running_samples > 0 ? s->conf->throttle_threads_running_samples : 1;
    int64_t tick_ns = (int64_t)s->conf->throttle_interval_ms * 1000000 / samples;
    struct timespec next;
    clock_gettime(CLOCK_REALTIME, &next);
    pthread_mutex_lock(&s->mu);
    /* samples ticks an interval, on fixed deadlines (a slow query does not stretch the
     * interval); tick 0 does the full read, the others sample Threads_running only */
    for (int tick = 0; !s->stopping; tick = (tick + 1) % samples) {
        pthread_mutex_unlock(&s->mu);
        if (tick == 0)
            read_server(s, i);
        else
            sample_threads_running(s, i);
        pthread_mutex_lock(&s->mu);
        int64_t ns = next.tv_nsec + tick_ns;
        next.tv_sec += ns / 1000000000;
        next.tv_nsec = ns % 1000000000;
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        if (now.tv_sec > next.tv_sec || (now.tv_sec == next.tv_sec && now.tv_nsec > next.tv_nsec))
            next = now; /* behind (a server slower than a tick): from now, not a burst to catch up */
        if (!s->stopping) pthread_cond_timedwait(&s->cv, &s->mu, &next);
    }
    pthread_mutex_unlock(&s->mu);
    drop(&s->servers[i].primary);
    for (int r = 0; r < s->conf->servers[i].replica_cnt; r++) drop(&s->servers[i].replicas[r]);
    mysql_thread_end();
    return NULL;
}

uint64_t bw_signals_heartbeat_id(const char *name) {
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) h = (h ^ *p) * 1099511628211ULL;
    h &= INT64_MAX;
    return h ? h : 1;
}

bw_signals_t *bw_signals_start(const bw_config_t *conf, uint64_t heartbeat_id) {
    bw_signals_t *s = calloc(1, sizeof(*s));
    if (!s) abort();
    s->conf = conf;
    s->heartbeat_id = heartbeat_id;
    s->servers = calloc((size_t)conf->server_cnt, sizeof(*s->servers));
    if (!s->servers) abort();
    for (int i = 0; i < conf->server_cnt; i++) {
        server_signals_t *ss = &s->servers[i];
        ss->replicas = calloc((size_t)conf->servers[i].replica_cnt + 1, sizeof(MYSQL *));
        ss->fallback_noted = calloc((size_t)conf->servers[i].replica_cnt + 1, 1);
        if (!ss->replicas || !ss->fallback_noted) abort();
        /* readings start zeroed: never read, no error yet (the throttle waits for a first read) */
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->threads = calloc((size_t)conf->server_cnt, sizeof(pthread_t));
    if (!s->threads) abort();
    for (int i = 0; i < conf->server_cnt; i++) {
        reader_arg_t *a = malloc(sizeof(*a));
        if (!a) abort();
        *a = (reader_arg_t){s, i};
        pthread_create(&s->threads[i], NULL, signals_main, a);
    }
    bw_info(COMPONENT, "reading the throttle's signals of %d servers every %d ms", conf->server_cnt,
            conf->throttle_interval_ms);
    return s;
}

void bw_signals_stop(bw_signals_t *s) {
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->stopping = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < s->conf->server_cnt; i++) pthread_join(s->threads[i], NULL);
    free(s->threads);
    for (int i = 0; i < s->conf->server_cnt; i++) {
        free(s->servers[i].replicas);
        free(s->servers[i].fallback_noted);
    }
    free(s->servers);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}

void bw_signals_read(bw_signals_t *s, int server, bw_signal_reading_t out[BW_SERVER_SIGNALS]) {
    pthread_mutex_lock(&s->mu);
    memcpy(out, s->servers[server].readings, sizeof(s->servers[server].readings));
    pthread_mutex_unlock(&s->mu);
}
