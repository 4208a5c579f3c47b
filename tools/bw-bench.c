/* bw-bench — the direct baselines of `make bench` (test/bench.sh): what the shards take
 * when a client writes the same rows straight to them, without bulkwrite in between.
 *
 *   bw-bench insert  [--conns N] [--batch N] JOB...  multi-row INSERTs of the jobs' pins, built by
 *                                                  store/sql.c as the consumer builds them, one
 *                                                  transaction per statement
 *   bw-bench array   [--conns N] [--batch N] JOB...  the same rows through the consumer's array-bound
 *                                                  path (store/sqlbind.c: one prepared INSERT,
 *                                                  STMT_ATTR_ARRAY_SIZE = batch)
 *   bw-bench rowwise [--sample N] JOB...             one autocommit INSERT per row, over the first N
 *                                                  rows (default 5,000)
 *   bw-bench delete  [--conns N] [--batch N] JOB...  DELETE … WHERE id IN (batch ids) for cleanup jobs
 *   bw-bench probe   --shard S [--seconds T] [--interval-ms M] [--samples FILE]
 *                                                  online traffic on shard S's database: one
 *                                                  autocommit single-row INSERT, then a point SELECT
 *                                                  of it, every M ms (default 5) for T s (default 5);
 *                                                  its rows are deleted at the end
 *   bw-bench clean                                 TRUNCATE every object type's table in every
 *                                                  shard database (the ledger stays)
 *   bw-bench settle                                waits (60 s at most) until every server is
 *                                                  quiet: InnoDB has flushed its dirty pages (at
 *                                                  most 1 % of the pool; innodb_max_dirty_pages_pct
 *                                                  is set to 0 meanwhile, as an idle server keeps
 *                                                  them) and purged its history (at most 1,000
 *                                                  undo logs), so that every case starts from the
 *                                                  same state, not while the server still writes
 *                                                  out the one before
 *   bw-bench applied --since T                     when the consumer applied what it applied since
 *                                                  T (Unix seconds): from every shard's ledger
 *                                                  (bw_job_parts.applied_at, TIMESTAMP(3), written in
 *                                                  each transaction just before its COMMIT), the
 *                                                  first and last transaction's times, the rows of
 *                                                  the first, and all rows (--timeline: every
 *                                                  transaction on stderr)
 *
 * JOBs are bw-workload's (tools/workload.h): feed:N:SHARD, spread:N, cleanup:N:SHARD, so a
 * baseline writes exactly the rows the pipeline is fed. --batch defaults to the object
 * type's batch size for the op (pin), --conns to 1. Rows are grouped by shard and a shard
 * belongs to one connection (shard s to connection s mod N), as the consumer holds one
 * batch in flight per shard. Every statement must affect exactly its rows, or the run fails.
 *
 * stdout: one line of name=value results (rows, seconds, rows_per_s, statements; the probe
 * its latencies in ms); diagnostics on stderr. Exit 0 on success, 1 on failure, 2 usage. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "config.h"
#include "db.h"
#include "sql.h"
#include "sqlbind.h"
#include "workload.h"

#define PROBE_LOCAL_BASE 3000000000ULL /* probe pins: apart from every bw-workload job's ids */
#define TITLE_MAX 160

static bw_config_t *conf;
static const bw_object_type_t *pin_ot;

/* The pin columns a feed sets, in the order bw-workload sends them. */
static const char *const feed_columns[] = {"owner_id", "board_id", "title", "like_count"};
#define FEED_COLS 4
static int feed_colmap[FEED_COLS]; /* batch column -> pin_ot column */

typedef enum { MODE_INSERT, MODE_ARRAY, MODE_ROWWISE, MODE_DELETE } bench_mode_t;

/* One statement's rows: ops first, first + stride, … of job `job`, all on one shard. */
typedef struct {
    int job, shard;
    long first, stride, count;
} batch_t;

typedef struct {
    const job_t *jobs;
    int job_cnt;
    batch_t *batches;
    size_t batch_cnt;
    int conns, batch_rows;
    bench_mode_t mode;
} plan_t;

/* One connection's work and its storage, allocated once (no allocation per row). */
typedef struct {
    const plan_t *plan;
    int index;
    MYSQL **db;    /* [server_cnt], connected on first use */
    long rows, statements;
    int failed;
    char err[512];
    /* text statements */
    bw_buf_t sql;
    bw_sql_row_t *rows_buf;
    Bulkwrite__Internal__V1__RowField *fields;     /* [batch][FEED_COLS] */
    Bulkwrite__Internal__V1__RowField **field_ptrs; /* [batch][FEED_COLS] */
    Bulkwrite__V1__Value *values;         /* [batch][FEED_COLS] */
    char (*titles)[TITLE_MAX];
    /* array binding: the consumer's own path (store/sqlbind.h) */
    bw_sqlbind_cache_t *caches; /* [server_cnt] */
    bw_sqlbind_t bind;
} worker_t;

static double now_s(void) { return (double)bw_now_us() / 1e6; }

/* ---- rows --------------------------------------------------------------------------- */

/* Fills row r of the worker's storage with pin p (and its fields, for text statements). */
static void fill_pin(worker_t *w, size_t r, const pin_t *p) {
    pin_title(w->titles[r], TITLE_MAX, p->id);
    Bulkwrite__Internal__V1__RowField *f = &w->fields[r * FEED_COLS];
    Bulkwrite__V1__Value *v = &w->values[r * FEED_COLS];
    for (int c = 0; c < FEED_COLS; c++) {
        bulkwrite__internal__v1__row_field__init(&f[c]);
        bulkwrite__v1__value__init(&v[c]);
        f[c].column = (uint32_t)c;
        f[c].value = &v[c];
        w->field_ptrs[r * FEED_COLS + c] = &f[c];
        v[c].kind_case = BULKWRITE__V1__VALUE__KIND_INT_VALUE;
    }
    v[0].int_value = (int64_t)p->owner;
    v[1].int_value = p->board;
    v[2].kind_case = BULKWRITE__V1__VALUE__KIND_STRING_VALUE;
    v[2].string_value.data = (uint8_t *)w->titles[r];
    v[2].string_value.len = strlen(w->titles[r]);
    v[3].int_value = 0;
    w->rows_buf[r] = (bw_sql_row_t){.id = p->id, .field_cnt = FEED_COLS, .fields = &w->field_ptrs[r * FEED_COLS],
                                    .colmap = feed_colmap};
}

/* Fills the storage with the batch's rows. */
static void fill_batch(worker_t *w, const batch_t *b) {
    const job_t *jb = &w->plan->jobs[b->job];
    for (long k = 0; k < b->count; k++) {
        long i = b->first + k * b->stride;
        if (jb->kind == JOB_CLEANUP) {
            w->rows_buf[k] = (bw_sql_row_t){.id = touched_pin(conf->shard_count, jb, i), .colmap = feed_colmap};
        } else {
            pin_t p = created_pin(conf->shard_count, jb, i);
            fill_pin(w, (size_t)k, &p);
        }
    }
}

/* ---- statements --------------------------------------------------------------------- */

static MYSQL *worker_db(worker_t *w, int server) {
    if (w->db[server]) return w->db[server];
    if (!(w->db[server] = bw_db_connect(conf, server, w->err, sizeof(w->err)))) return NULL;
    bw_sqlbind_cache_open(&w->caches[server], w->db[server]);
    if (w->plan->mode == MODE_ROWWISE && mysql_autocommit(w->db[server], 1)) {
        snprintf(w->err, sizeof(w->err), "autocommit: %s", mysql_error(w->db[server]));
        return NULL;
    }
    return w->db[server];
}

static int fail(worker_t *w, MYSQL *db, const char *what) {
    snprintf(w->err, sizeof(w->err), "%s: %s", what, mysql_error(db));
    return -1;
}

/* Runs one statement and commits it (rowwise: autocommit); it must touch `want` rows. */
static int run_text(worker_t *w, MYSQL *db, long want) {
    if (mysql_real_query(db, w->sql.data, w->sql.len)) return fail(w, db, "statement");
    if ((long)mysql_affected_rows(db) != want) {
        snprintf(w->err, sizeof(w->err), "statement affected %llu rows, not %ld (are the tables clean?)",
                 (unsigned long long)mysql_affected_rows(db), want);
        return -1;
    }
    if (w->plan->mode != MODE_ROWWISE && mysql_commit(db)) return fail(w, db, "commit");
    w->statements++;
    w->rows += want;
    return 0;
}

/* The batch as the consumer sends a CREATE statement when array binding wins: one
 * prepared INSERT executed over arrays of the rows' values (bw_sqlbind_execute). */
static int run_array(worker_t *w, int server, const char *dbname, long count) {
    MYSQL *db = worker_db(w, server);
    if (!db) return -1;
    if (!w->caches[server].bulk) return snprintf(w->err, sizeof(w->err), "the server cannot execute arrays"), -1;
    unsigned err = 0;
    const char *msg = "";
    bw_sqlbind_status_t st = bw_sqlbind_execute(&w->bind, &w->caches[server], db, dbname, pin_ot, BW_OP_CREATE,
                                                w->rows_buf, (size_t)count, &err, &msg);
    if (st != BW_SQLBIND_OK) {
        snprintf(w->err, sizeof(w->err), "array-bound INSERT: %s",
                 st == BW_SQLBIND_TEXT ? "not sent (a value or the statement did not bind)" : msg);
        return -1;
    }
    if (mysql_commit(db)) return fail(w, db, "commit");
    w->statements++;
    w->rows += count;
    return 0;
}

static int run_batch(worker_t *w, const batch_t *b) {
    int server = conf->shard_server[b->shard];
    char dbname[80];
    bw_config_shard_db(conf, b->shard, dbname, sizeof(dbname));
    fill_batch(w, b);
    if (w->plan->mode == MODE_ARRAY) return run_array(w, server, dbname, b->count);
    MYSQL *db = worker_db(w, server);
    if (!db) return -1;
    int op = w->plan->mode == MODE_DELETE ? BW_OP_DELETE : BW_OP_CREATE;
    if (w->plan->mode != MODE_ROWWISE) {
        bw_sql_build(&w->sql, dbname, pin_ot, op, w->rows_buf, (size_t)b->count);
        return run_text(w, db, b->count);
    }
    for (long k = 0; k < b->count; k++) {
        bw_sql_build(&w->sql, dbname, pin_ot, op, &w->rows_buf[k], 1);
        if (run_text(w, db, 1)) return -1;
    }
    return 0;
}

/* @locality its own thread; touches only its worker_t. */
static void *worker_run(void *arg) {
    worker_t *w = arg;
    const plan_t *pl = w->plan;
    for (size_t i = 0; i < pl->batch_cnt && !w->failed; i++)
        if (pl->batches[i].shard % pl->conns == w->index && run_batch(w, &pl->batches[i])) w->failed = 1;
    return NULL;
}

static void worker_init(worker_t *w, const plan_t *pl, int index) {
    size_t n = (size_t)pl->batch_rows;
    *w = (worker_t){.plan = pl, .index = index};
    w->db = calloc((size_t)conf->server_cnt, sizeof(*w->db));
    w->caches = calloc((size_t)conf->server_cnt, sizeof(*w->caches));
    bw_sqlbind_init(&w->bind);
    bw_buf_init(&w->sql);
    w->rows_buf = calloc(n, sizeof(*w->rows_buf));
    w->fields = calloc(n * FEED_COLS, sizeof(*w->fields));
    w->field_ptrs = calloc(n * FEED_COLS, sizeof(*w->field_ptrs));
    w->values = calloc(n * FEED_COLS, sizeof(*w->values));
    w->titles = calloc(n, sizeof(*w->titles));
    if (!w->db || !w->caches || !w->rows_buf || !w->fields || !w->field_ptrs || !w->values || !w->titles) abort();
}

static void worker_free(worker_t *w) {
    for (int s = 0; s < conf->server_cnt; s++) {
        bw_sqlbind_cache_close(&w->caches[s]);
        if (w->db[s]) mysql_close(w->db[s]);
    }
    free(w->db);
    free(w->caches);
    bw_sqlbind_free(&w->bind);
    bw_buf_free(&w->sql);
    free(w->rows_buf);
    free(w->fields);
    free(w->field_ptrs);
    free(w->values);
    free(w->titles);
}

/* ---- plans -------------------------------------------------------------------------- */

static void plan_add(plan_t *pl, size_t *cap, batch_t b) {
    if (pl->batch_cnt == *cap) {
        *cap = *cap ? *cap * 2 : 256;
        pl->batches = realloc(pl->batches, *cap * sizeof(*pl->batches));
        if (!pl->batches) abort();
    }
    pl->batches[pl->batch_cnt++] = b;
}

/* Cuts the jobs' ops into batches of at most batch_rows, per shard; with limit >= 0, only
 * the first job's first `limit` ops. */
static int plan_make(plan_t *pl, long limit) {
    size_t cap = 0;
    int shards = conf->shard_count;
    for (int j = 0; j < (limit >= 0 ? 1 : pl->job_cnt); j++) {
        const job_t *jb = &pl->jobs[j];
        if (jb->kind == JOB_IMAGE || jb->kind == JOB_LIKE || jb->kind == JOB_COUNTER) {
            fprintf(stderr, "bw-bench: %s jobs have no baseline here\n", job_names[jb->kind]);
            return -1;
        }
        if ((pl->mode == MODE_DELETE) != (jb->kind == JOB_CLEANUP)) {
            fprintf(stderr, "bw-bench: delete takes cleanup jobs, the others create jobs\n");
            return -1;
        }
        long ops = job_ops(jb);
        if (limit >= 0 && ops > limit) ops = limit;
        if (jb->kind != JOB_SPREAD) {
            for (long i = 0; i < ops; i += pl->batch_rows)
                plan_add(pl, &cap, (batch_t){j, jb->shard, i, 1, ops - i < pl->batch_rows ? ops - i : pl->batch_rows});
            continue;
        }
        for (int s = 0; s < shards && s < ops; s++) { /* op i is on shard i mod shards */
            long on_shard = (ops - s + shards - 1) / shards;
            for (long k = 0; k < on_shard; k += pl->batch_rows)
                plan_add(pl, &cap, (batch_t){j, s, s + k * shards, shards,
                                             on_shard - k < pl->batch_rows ? on_shard - k : pl->batch_rows});
        }
    }
    return 0;
}

/* Runs the plan on its connections and prints the line of results. */
static int run_plan(plan_t *pl) {
    worker_t *ws = calloc((size_t)pl->conns, sizeof(*ws));
    pthread_t *th = calloc((size_t)pl->conns, sizeof(*th));
    if (!ws || !th) abort();
    for (int i = 0; i < pl->conns; i++) worker_init(&ws[i], pl, i);
    /* connect first: the time measured is the statements' */
    int ret = 0;
    for (size_t i = 0; i < pl->batch_cnt && !ret; i++) {
        worker_t *w = &ws[pl->batches[i].shard % pl->conns];
        if (!worker_db(w, conf->shard_server[pl->batches[i].shard])) {
            fprintf(stderr, "bw-bench: %s\n", w->err);
            ret = 1;
        }
    }
    double t0 = now_s();
    for (int i = 0; i < pl->conns && !ret; i++) pthread_create(&th[i], NULL, worker_run, &ws[i]);
    for (int i = 0; i < pl->conns && !ret; i++) pthread_join(th[i], NULL);
    double secs = now_s() - t0;
    long rows = 0, statements = 0;
    for (int i = 0; i < pl->conns; i++) {
        if (ws[i].failed) {
            fprintf(stderr, "bw-bench: connection %d: %s\n", i, ws[i].err);
            ret = 1;
        }
        rows += ws[i].rows;
        statements += ws[i].statements;
        worker_free(&ws[i]);
    }
    if (!ret)
        printf("rows=%ld seconds=%.3f rows_per_s=%.0f statements=%ld statements_per_s=%.0f conns=%d batch=%d\n", rows,
               secs, rows / secs, statements, statements / secs, pl->conns, pl->batch_rows);
    free(ws);
    free(th);
    return ret;
}

/* ---- probe -------------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The q-quantile (0..1) of n sorted samples, nearest rank. */
static double quantile(const double *v, size_t n, double q) {
    if (!n) return 0;
    size_t k = (size_t)(q * (double)n + 0.999999);
    return v[k ? k - 1 : 0];
}

static void sleep_until(double t) {
    double d = t - now_s();
    if (d <= 0) return;
    struct timespec ts = {(time_t)d, (long)((d - (double)(time_t)d) * 1e9)};
    nanosleep(&ts, NULL);
}

/* Online traffic on one shard's database: an autocommit single-row INSERT of a pin, then a
 * point SELECT of it, every interval; prints the latencies' p50 and p99 (ms), and appends
 * each latency to samples_path if given (probes in slices, pooled by the caller). */
static int probe(int shard, double seconds, double interval_ms, const char *samples_path) {
    char err[512], dbname[80], q[512];
    int server = conf->shard_server[shard];
    bw_config_shard_db(conf, shard, dbname, sizeof(dbname));
    MYSQL *db = bw_db_connect(conf, server, err, sizeof(err));
    if (!db) return fprintf(stderr, "bw-bench: %s\n", err), 1;
    if (mysql_autocommit(db, 1)) return fprintf(stderr, "bw-bench: %s\n", mysql_error(db)), mysql_close(db), 1;
    size_t cap = (size_t)(seconds * 1000.0 / interval_ms) + 2, n = 0;
    double *wr = calloc(cap, sizeof(double)), *rd = calloc(cap, sizeof(double)), *all = calloc(2 * cap, sizeof(double));
    if (!wr || !rd || !all) abort();
    plan_t pl = {.batch_rows = 1, .conns = 1, .mode = MODE_INSERT};
    worker_t w;
    worker_init(&w, &pl, 0);
    int ret = 0;
    double start = now_s(), next = start;
    while (n < cap && now_s() - start < seconds) {
        sleep_until(next);
        next += interval_ms / 1000.0;
        pin_t p = {.id = bw_id_make((unsigned)shard, PIN_TYPE, PROBE_LOCAL_BASE + n), .owner = feed_owner(shard)};
        fill_pin(&w, 0, &p);
        bw_sql_build(&w.sql, dbname, pin_ot, BW_OP_CREATE, w.rows_buf, 1);
        double t0 = now_s();
        if (mysql_real_query(db, w.sql.data, w.sql.len)) {
            fprintf(stderr, "bw-bench: probe INSERT: %s\n", mysql_error(db));
            ret = 1;
            break;
        }
        double t1 = now_s();
        snprintf(q, sizeof(q), "SELECT `%s` FROM `%s`.`%s` WHERE `%s`=%" PRIu64, pin_ot->id_column, dbname,
                 pin_ot->table, pin_ot->id_column, p.id);
        MYSQL_RES *r = NULL;
        if (mysql_query(db, q) || !(r = mysql_store_result(db)) || mysql_num_rows(r) != 1) {
            fprintf(stderr, "bw-bench: probe SELECT: %s\n", r ? "the row written is not there" : mysql_error(db));
            if (r) mysql_free_result(r);
            ret = 1;
            break;
        }
        mysql_free_result(r);
        wr[n] = (t1 - t0) * 1000;
        rd[n] = (now_s() - t1) * 1000;
        all[2 * n] = wr[n];
        all[2 * n + 1] = rd[n];
        n++;
    }
    /* the probe leaves nothing behind: its rows would be strangers to a verify */
    snprintf(q, sizeof(q), "DELETE FROM `%s`.`%s` WHERE `%s` BETWEEN %" PRIu64 " AND %" PRIu64, dbname,
             pin_ot->table, pin_ot->id_column, bw_id_make((unsigned)shard, PIN_TYPE, PROBE_LOCAL_BASE),
             bw_id_make((unsigned)shard, PIN_TYPE, PROBE_LOCAL_BASE + cap));
    if (mysql_query(db, q)) {
        fprintf(stderr, "bw-bench: probe cleanup: %s\n", mysql_error(db));
        ret = 1;
    }
    FILE *samples = !ret && n && samples_path ? fopen(samples_path, "a") : NULL;
    if (samples_path && !ret && n && !samples) {
        fprintf(stderr, "bw-bench: %s: %s\n", samples_path, strerror(errno));
        ret = 1;
    }
    if (samples) {
        for (size_t i = 0; i < 2 * n; i++) fprintf(samples, "%.3f\n", all[i]);
        if (fclose(samples)) ret = 1;
    }
    if (!ret && n) {
        qsort(wr, n, sizeof(double), cmp_double);
        qsort(rd, n, sizeof(double), cmp_double);
        qsort(all, 2 * n, sizeof(double), cmp_double);
        printf("ops=%zu seconds=%.2f write_p50_ms=%.3f write_p99_ms=%.3f read_p50_ms=%.3f read_p99_ms=%.3f "
               "p50_ms=%.3f p99_ms=%.3f max_ms=%.3f\n",
               2 * n, now_s() - start, quantile(wr, n, 0.5), quantile(wr, n, 0.99), quantile(rd, n, 0.5),
               quantile(rd, n, 0.99), quantile(all, 2 * n, 0.5), quantile(all, 2 * n, 0.99), all[2 * n - 1]);
    } else if (!ret) {
        fprintf(stderr, "bw-bench: probe: no samples\n");
        ret = 1;
    }
    worker_free(&w);
    free(wr);
    free(rd);
    free(all);
    mysql_close(db);
    return ret;
}

/* ---- clean -------------------------------------------------------------------------- */

static int clean(void) {
    char err[512], q[512];
    for (int i = 0; i < conf->server_cnt; i++) {
        MYSQL *db = bw_db_connect(conf, i, err, sizeof(err));
        if (!db) return fprintf(stderr, "bw-bench: %s\n", err), 1;
        for (int s = conf->servers[i].first_shard; s <= conf->servers[i].last_shard; s++)
            for (int t = 0; t < conf->object_type_cnt; t++) {
                char dbname[80];
                bw_config_shard_db(conf, s, dbname, sizeof(dbname));
                snprintf(q, sizeof(q), "TRUNCATE TABLE `%s`.`%s`", dbname, conf->object_types[t].table);
                if (mysql_query(db, q)) {
                    fprintf(stderr, "bw-bench: %s: %s\n", q, mysql_error(db));
                    mysql_close(db);
                    return 1;
                }
            }
        mysql_close(db);
    }
    return 0;
}

/* ---- settle ------------------------------------------------------------------------- */

/* A global status counter, or -1. */
static long long status_value(MYSQL *db, const char *name) {
    char q[160];
    snprintf(q, sizeof(q), "SHOW GLOBAL STATUS LIKE '%s'", name);
    MYSQL_RES *r = NULL;
    MYSQL_ROW row;
    long long v = -1;
    if (mysql_query(db, q) == 0 && (r = mysql_store_result(db)) && (row = mysql_fetch_row(r))) v = atoll(row[1]);
    if (r) mysql_free_result(r);
    return v;
}

static int settle(void) {
    char err[512];
    double start = now_s();
    for (int i = 0; i < conf->server_cnt; i++) {
        MYSQL *db = bw_db_connect(conf, i, err, sizeof(err));
        if (!db) return fprintf(stderr, "bw-bench: %s\n", err), 1;
        long long dirty, total, history;
        double pct = 90;
        MYSQL_RES *r = NULL;
        MYSQL_ROW row;
        if (mysql_query(db, "SELECT @@GLOBAL.innodb_max_dirty_pages_pct") == 0 && (r = mysql_store_result(db)) &&
            (row = mysql_fetch_row(r)))
            pct = atof(row[0]);
        if (r) mysql_free_result(r);
        if (mysql_query(db, "SET GLOBAL innodb_max_dirty_pages_pct = 0")) {
            fprintf(stderr, "bw-bench: settle: %s: %s\n", conf->servers[i].name, mysql_error(db));
            mysql_close(db);
            return 1;
        }
        for (;;) {
            dirty = status_value(db, "Innodb_buffer_pool_pages_dirty");
            total = status_value(db, "Innodb_buffer_pool_pages_total");
            history = status_value(db, "Innodb_history_list_length");
            if (dirty < 0 || total <= 0 || history < 0) {
                fprintf(stderr, "bw-bench: settle: %s has no InnoDB status counters\n", conf->servers[i].name);
                mysql_close(db);
                return 1;
            }
            if ((dirty * 100 <= total && history <= 1000) || now_s() - start > 60) break;
            usleep(100000);
        }
        char q[96];
        snprintf(q, sizeof(q), "SET GLOBAL innodb_max_dirty_pages_pct = %.6f", pct);
        if (mysql_query(db, q)) fprintf(stderr, "bw-bench: settle: %s: %s\n", conf->servers[i].name, mysql_error(db));
        if (dirty * 100 > total || history > 1000)
            fprintf(stderr, "bw-bench: settle: %s still busy after 60 s (%lld of %lld pages dirty, history %lld)\n",
                    conf->servers[i].name, dirty, total, history);
        mysql_close(db);
    }
    printf("seconds=%.2f\n", now_s() - start);
    return 0;
}

/* ---- applied ------------------------------------------------------------------------ */

/* The end times of a pipeline case, read from the ledger rather than from polling the
 * consumer's metrics (a 50 ms poll was a tenth of a 100k-delete case). Every time comes
 * from the servers' clock, which is this machine's, as the bench script's is. */
static int applied(double since, int timeline) {
    char err[512], q[1024];
    double first = 0, last = 0;
    unsigned long long rows = 0, first_rows = 0, parts = 0;
    for (int i = 0; i < conf->server_cnt; i++) {
        MYSQL *db = bw_db_connect(conf, i, err, sizeof(err));
        if (!db) return fprintf(stderr, "bw-bench: %s\n", err), 1;
        for (int s = conf->servers[i].first_shard; s <= conf->servers[i].last_shard; s++) {
            char dbname[80];
            bw_config_shard_db(conf, s, dbname, sizeof(dbname));
            /* per transaction (one applied_at), oldest first */
            snprintf(q, sizeof(q),
                     "SELECT UNIX_TIMESTAMP(applied_at), SUM(rows_applied + rows_failed), COUNT(*) FROM `%s`.bw_job_parts "
                     "WHERE applied_at >= FROM_UNIXTIME(%.3f) GROUP BY applied_at ORDER BY applied_at",
                     dbname, since);
            MYSQL_RES *r = NULL;
            if (mysql_query(db, q) || !(r = mysql_store_result(db))) {
                fprintf(stderr, "bw-bench: %s: %s\n", q, mysql_error(db));
                mysql_close(db);
                return 1;
            }
            for (MYSQL_ROW row; (row = mysql_fetch_row(r));) {
                double at = atof(row[0]);
                unsigned long long n = strtoull(row[1], NULL, 10);
                if (timeline) fprintf(stderr, "shard %d at %.3f rows %llu parts %s\n", s, at, n, row[2]);
                rows += n;
                parts += strtoull(row[2], NULL, 10);
                if (first == 0 || at < first) first = at, first_rows = n;
                else if (at == first) first_rows += n;
                if (at > last) last = at;
            }
            mysql_free_result(r);
        }
        mysql_close(db);
    }
    printf("parts=%llu rows=%llu first_at=%.3f first_rows=%llu last_at=%.3f\n", parts, rows, first, first_rows, last);
    return 0;
}

/* ---- main --------------------------------------------------------------------------- */

static int usage(FILE *out, int code) {
    fputs("usage: bw-bench [-c CONFIG] insert|array|delete [--conns N] [--batch N] JOB...\n"
          "       bw-bench [-c CONFIG] rowwise [--sample N] JOB...\n"
          "       bw-bench [-c CONFIG] probe --shard S [--seconds T] [--interval-ms M] [--samples FILE]\n"
          "       bw-bench [-c CONFIG] clean | settle\n"
          "       bw-bench [-c CONFIG] applied --since UNIX_SECONDS [--timeline]\n"
          "JOB: feed:N:SHARD | spread:N (insert, array, rowwise) | cleanup:N:SHARD (delete)\n"
          "Prints one line of name=value results (rows_per_s; the probe's p50_ms and p99_ms).\n",
          out);
    return code;
}

static int find_feed_columns(void) {
    if (!(pin_ot = bw_config_object_type(conf, "pin")))
        return fprintf(stderr, "bw-bench: the configuration has no object type \"pin\"\n"), -1;
    for (int c = 0; c < FEED_COLS; c++) {
        feed_colmap[c] = -1;
        for (int k = 0; k < pin_ot->column_cnt; k++)
            if (strcmp(pin_ot->columns[k].name, feed_columns[c]) == 0) feed_colmap[c] = k;
        if (feed_colmap[c] < 0) return fprintf(stderr, "bw-bench: pin has no column %s\n", feed_columns[c]), -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    const char *config_path = "conf/bulkwrite.conf";
    long conns = 1, batch = 0, sample = 5000, shard = -1;
    double seconds = 5, interval_ms = 5, since = -1;
    const char *samples_path = NULL;
    int timeline = 0;
    static const struct option opts[] = {{"config", required_argument, 0, 'c'},
                                         {"conns", required_argument, 0, 'C'},
                                         {"batch", required_argument, 0, 'B'},
                                         {"sample", required_argument, 0, 'S'},
                                         {"shard", required_argument, 0, 's'},
                                         {"seconds", required_argument, 0, 'T'},
                                         {"interval-ms", required_argument, 0, 'I'},
                                         {"samples", required_argument, 0, 'P'},
                                         {"since", required_argument, 0, 'A'},
                                         {"timeline", no_argument, 0, 'L'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    for (int o; (o = getopt_long(argc, argv, "c:h", opts, NULL)) != -1;) {
        switch (o) {
        case 'c': config_path = optarg; break;
        case 'C': conns = atol(optarg); break;
        case 'B': batch = atol(optarg); break;
        case 'S': sample = atol(optarg); break;
        case 's': shard = atol(optarg); break;
        case 'T': seconds = atof(optarg); break;
        case 'I': interval_ms = atof(optarg); break;
        case 'P': samples_path = optarg; break;
        case 'A': since = atof(optarg); break;
        case 'L': timeline = 1; break;
        case 'h': return usage(stdout, 0);
        default: return usage(stderr, 2);
        }
    }
    if (optind >= argc || conns < 1 || conns > 256 || batch < 0 || batch > 100000 || sample < 1 || seconds <= 0 ||
        interval_ms <= 0)
        return usage(stderr, 2);
    char err[512];
    conf = bw_config_load(config_path, err, sizeof(err));
    if (!conf) return fprintf(stderr, "bw-bench: %s\n", err), 1;
    const char *cmd = argv[optind++];
    int args = argc - optind, ret = 2;
    job_t *jobs = calloc((size_t)args + 1, sizeof(*jobs));
    if (!jobs) abort();
    if (find_feed_columns()) {
        ret = 1;
    } else if (strcmp(cmd, "clean") == 0) {
        ret = args ? usage(stderr, 2) : clean();
    } else if (strcmp(cmd, "settle") == 0) {
        ret = args ? usage(stderr, 2) : settle();
    } else if (strcmp(cmd, "applied") == 0) {
        ret = args || since < 0 ? usage(stderr, 2) : applied(since, timeline);
    } else if (strcmp(cmd, "probe") == 0) {
        ret = args || shard < 0 || shard >= conf->shard_count ? usage(stderr, 2) : probe((int)shard, seconds, interval_ms, samples_path);
    } else {
        static const char *const modes[] = {"insert", "array", "rowwise", "delete"};
        int m = 0;
        while (m < 4 && strcmp(cmd, modes[m]) != 0) m++;
        for (int i = 0; i < args && m < 4; i++)
            if (parse_job(conf, argv[optind + i], &jobs[i])) {
                fprintf(stderr, "bw-bench: bad job \"%s\"\n", argv[optind + i]);
                m = 4;
            }
        if (m < 4 && args) {
            plan_t pl = {.jobs = jobs, .job_cnt = args, .mode = (bench_mode_t)m, .conns = (int)conns};
            pl.batch_rows = batch ? (int)batch : pin_ot->batch_size[m == MODE_DELETE ? BW_OP_DELETE : BW_OP_CREATE];
            if (m == MODE_ROWWISE) pl.batch_rows = pl.conns = 1;
            ret = plan_make(&pl, m == MODE_ROWWISE ? sample : -1) ? 2 : run_plan(&pl);
            free(pl.batches);
        } else {
            ret = usage(stderr, 2);
        }
    }
    free(jobs);
    bw_config_destroy(conf);
    return ret;
}
