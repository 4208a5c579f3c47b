#include "apply.h"

#include <errmsg.h>
#include <inttypes.h>
#include <mysqld_error.h>
#include <stdlib.h>
#include <string.h>

#include "bulkwrite.pb-c.h"
#include "db.h"
#include "log.h"
#include "sql.h"

#define COMPONENT "consumer"

void bw_applier_init(bw_applier_t *ap, const bw_config_t *conf, bw_metrics_t *metrics) {
    memset(ap, 0, sizeof(*ap));
    ap->conf = conf;
    ap->metrics = metrics;
    ap->conns = calloc((size_t)conf->server_cnt, sizeof(*ap->conns));
    bw_buf_init(&ap->sql);
    bw_arena_init(&ap->arena, 1 << 20);
}

void bw_applier_destroy(bw_applier_t *ap) {
    for (int i = 0; i < ap->conf->server_cnt; i++)
        if (ap->conns[i]) mysql_close(ap->conns[i]);
    free(ap->conns);
    bw_buf_free(&ap->sql);
    bw_arena_destroy(&ap->arena);
    bw_sql_thread_done();
}

/* The state of one apply call. */
typedef struct {
    bw_applier_t *ap;
    int shard, server;
    MYSQL *db;
    char dbname[80];
    bw_apply_result_t *res;
    const char *job_id; /* of the message being applied, for logs */
} apply_ctx_t;

/* Classifies the last MySQL error: a retry (connection dropped if it is broken) or a
 * data error. Returns 1 for retry. */
static int failed_retry(apply_ctx_t *x, const char *what) {
    unsigned err = mysql_errno(x->db);
    snprintf(x->res->error, sizeof(x->res->error), "%s on %s: %s (%u)", what, x->dbname,
             mysql_error(x->db), err);
    if (!bw_db_error_retryable(err)) return 0;
    x->res->status = BW_APPLY_RETRY;
    x->res->timeout = err == ER_STATEMENT_TIMEOUT || err == ER_LOCK_WAIT_TIMEOUT ||
                      err == ER_QUERY_INTERRUPTED || err == CR_SERVER_LOST;
    if (err >= 2000 && err < 3000) { /* client-side: the connection is gone or unusable */
        mysql_close(x->db);
        x->ap->conns[x->server] = NULL;
        x->db = NULL;
    }
    return 1;
}

static int query(apply_ctx_t *x, const char *sql, size_t len) {
    return mysql_real_query(x->db, sql, (unsigned long)len);
}

/* A decoded message: its rows and where its columns live in the object type. */
typedef struct {
    Bulkwrite__V1__ShardBatch *sb;
    const bw_object_type_t *ot;
    int *colmap;
} decoded_t;

/* Unpacks and checks a message against the config. NULL (logged, counted) if unusable. */
static int decode(apply_ctx_t *x, const rd_kafka_message_t *m, decoded_t *d) {
    const bw_config_t *conf = x->ap->conf;
    d->sb = bulkwrite__v1__shard_batch__unpack(&x->ap->arena.pb, m->len, m->payload);
    const char *why = NULL;
    if (!d->sb) why = "not a bulkwrite.v1.ShardBatch";
    else if ((int)d->sb->shard != x->shard) why = "its shard differs from its partition";
    else if (!(d->ot = bw_config_object_type(conf, d->sb->object_type))) why = "unknown object type";
    else if ((int)d->sb->op < BW_OP_CREATE || (int)d->sb->op > BW_OP_DELETE) why = "unknown op";
    if (!why) {
        d->colmap = bw_arena_alloc(&x->ap->arena, (d->sb->n_columns + 1) * sizeof(int));
        for (size_t c = 0; c < d->sb->n_columns && !why; c++)
            if ((d->colmap[c] = bw_config_column(d->ot, d->sb->columns[c])) < 0) why = "unknown column";
        for (size_t r = 0; r < d->sb->n_rows && !why; r++)
            for (size_t f = 0; f < d->sb->rows[r]->n_fields && !why; f++)
                if (d->sb->rows[r]->fields[f]->column >= d->sb->n_columns) why = "column index out of range";
    }
    if (!why) return 0;
    /* a message that cannot be applied is reported, never silently dropped */
    bw_log(BW_LOG_ERROR, COMPONENT, x->shard, d->sb ? d->sb->job_id : NULL,
           "message at offset %" PRId64 " cannot be applied: %s", m->offset, why);
    bw_metrics_shard_error(x->ap->metrics, x->shard, BW_APPLY_ERR_DECODE);
    x->res->rows_failed += d->sb ? d->sb->n_rows : 1;
    return -1;
}

/* Applies rows one at a time under savepoints: those the shard refuses fail alone. */
static int apply_rows_one_by_one(apply_ctx_t *x, const bw_object_type_t *ot, int op,
                                 const bw_sql_row_t *rows, const uint32_t *op_index,
                                 const char *const *jobs, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (query(x, "SAVEPOINT bw_row", 16)) return failed_retry(x, "savepoint"), -1;
        bw_sql_build(&x->ap->sql, x->dbname, ot, op, &rows[i], 1);
        if (query(x, x->ap->sql.data, x->ap->sql.len) == 0) {
            x->res->rows_applied++;
            continue;
        }
        if (failed_retry(x, "statement")) return -1;
        bw_log(BW_LOG_WARN, COMPONENT, x->shard, jobs[i], "op %" PRIu32 " (%s id %" PRIu64 ") failed: %s",
               op_index[i], bw_op_name(op), rows[i].id, x->res->error);
        bw_metrics_shard_error(x->ap->metrics, x->shard, BW_APPLY_ERR_DATA);
        x->res->rows_failed++;
        if (query(x, "ROLLBACK TO SAVEPOINT bw_row", 28)) return failed_retry(x, "rollback to savepoint"), -1;
    }
    x->res->error[0] = '\0';
    return 0;
}

/* Applies rows[0..n) of one (type, op) as few statements as bw_sql_plan allows. */
static int apply_run(apply_ctx_t *x, const bw_object_type_t *ot, int op, const bw_sql_row_t *rows,
                     const uint32_t *op_index, const char *const *jobs, size_t n) {
    size_t done = 0;
    while (done < n) {
        size_t k = bw_sql_plan(ot, op, rows + done, n - done);
        bw_sql_build(&x->ap->sql, x->dbname, ot, op, rows + done, k);
        if (query(x, "SAVEPOINT bw_stmt", 17)) return failed_retry(x, "savepoint"), -1;
        if (query(x, x->ap->sql.data, x->ap->sql.len) == 0) {
            x->res->rows_applied += k;
        } else {
            if (failed_retry(x, "statement")) return -1;
            /* a data error: find the offending rows without losing the others */
            if (query(x, "ROLLBACK TO SAVEPOINT bw_stmt", 29)) return failed_retry(x, "rollback to savepoint"), -1;
            if (apply_rows_one_by_one(x, ot, op, rows + done, op_index + done, jobs + done, k)) return -1;
        }
        done += k;
    }
    return 0;
}

static int store_offset(apply_ctx_t *x, const char *topic, int64_t next) {
    bw_buf_t *b = &x->ap->sql;
    bw_buf_reset(b);
    bw_buf_printf(b, "INSERT INTO `%s`.`bw_offsets` (topic, kafka_partition, next_offset) VALUES ('", x->dbname);
    bw_sql_append_escaped(b, topic, strlen(topic));
    bw_buf_printf(b, "',%d,%" PRId64 ") ON DUPLICATE KEY UPDATE next_offset=VALUES(next_offset)", x->shard, next);
    if (query(x, b->data, b->len)) return failed_retry(x, "storing the offset"), -1;
    return 0;
}

void bw_applier_apply(bw_applier_t *ap, int shard, rd_kafka_message_t *const *msgs, size_t cnt,
                      bw_apply_result_t *res) {
    memset(res, 0, sizeof(*res));
    res->status = BW_APPLY_OK;
    bw_arena_reset(&ap->arena);
    const bw_config_t *conf = ap->conf;
    apply_ctx_t x = {.ap = ap, .shard = shard, .server = conf->shard_server[shard], .res = res};
    bw_config_shard_db(conf, shard, x.dbname, sizeof(x.dbname));
    if (!ap->conns[x.server]) {
        ap->conns[x.server] = bw_db_connect(conf, x.server, res->error, sizeof(res->error));
        if (!ap->conns[x.server]) {
            res->status = BW_APPLY_RETRY;
            return;
        }
    }
    x.db = ap->conns[x.server];

    int64_t stored;
    if (bw_db_read_offset(x.db, conf, shard, 1, &ap->sql, &stored)) {
        failed_retry(&x, "reading the stored offset");
        goto rollback;
    }

    decoded_t *dec = bw_arena_alloc(&ap->arena, cnt * sizeof(*dec));
    size_t row_cap = 0;
    for (size_t i = 0; i < cnt; i++) {
        memset(&dec[i], 0, sizeof(dec[i]));
        if (msgs[i]->offset < stored) continue;
        if (decode(&x, msgs[i], &dec[i])) dec[i].sb = NULL;
        else row_cap += dec[i].sb->n_rows;
    }
    bw_sql_row_t *rows = bw_arena_alloc(&ap->arena, (row_cap + 1) * sizeof(*rows));
    uint32_t *op_index = bw_arena_alloc(&ap->arena, (row_cap + 1) * sizeof(*op_index));
    const char **jobs = bw_arena_alloc(&ap->arena, (row_cap + 1) * sizeof(*jobs));
    size_t n = 0;
    const bw_object_type_t *run_ot = NULL;
    int run_op = 0;
    /* rows of consecutive messages sharing (type, op) form one run */
    for (size_t i = 0; i <= cnt; i++) {
        const decoded_t *d = i < cnt ? &dec[i] : NULL;
        if (i < cnt && msgs[i]->offset < stored) {
            res->messages_skipped++;
            continue;
        }
        if (d && !d->sb) continue;
        if (n && (!d || d->ot != run_ot || (int)d->sb->op != run_op)) {
            if (apply_run(&x, run_ot, run_op, rows, op_index, jobs, n)) goto rollback;
            n = 0;
        }
        if (!d) break;
        run_ot = d->ot;
        run_op = (int)d->sb->op;
        for (size_t r = 0; r < d->sb->n_rows; r++) {
            const Bulkwrite__V1__Row *row = d->sb->rows[r];
            rows[n] = (bw_sql_row_t){row->id, row->n_fields, row->fields, d->colmap};
            op_index[n] = row->op_index;
            jobs[n] = d->sb->job_id;
            n++;
        }
    }
    res->next_offset = msgs[cnt - 1]->offset + 1;
    if (stored > res->next_offset) res->next_offset = stored; /* all skipped: keep the later one */
    else if (store_offset(&x, conf->topic, res->next_offset)) goto rollback;
    if (mysql_commit(x.db)) {
        failed_retry(&x, "commit");
        res->status = BW_APPLY_RETRY; /* whatever the code: nothing is known to be committed */
        goto rollback;
    }
    return;
rollback:
    if (x.db) mysql_rollback(x.db);
    res->status = BW_APPLY_RETRY;
    res->rows_applied = res->rows_failed = res->messages_skipped = 0;
}
