#include "apply.h"

#include <errmsg.h>
#include <inttypes.h>
#include <mysqld_error.h>
#include <stdlib.h>
#include <string.h>

#include "bulkwrite/internal/v1/records.pb-c.h"
#include "coalesce.h"
#include "db.h"
#include "ledger.h"
#include "log.h"
#include "pbdecode.h"
#include "shard.h"
#include "sql.h"

#define COMPONENT "consumer"

typedef Bulkwrite__Internal__V1__ShardBatch shard_batch_t;

/* A message's job as logs name it: the id its client holds (a named job's, not its
 * part's), and a named job's part number (-1 for a job of one request). */
static const char *client_job(const shard_batch_t *sb) { return sb->job[0] ? sb->job : sb->job_id; }
static int64_t named_part(const shard_batch_t *sb) {
    return sb->job[0] ? (int64_t)bw_ledger_part_of(sb->job_id) : -1;
}

void bw_applier_init(bw_applier_t *ap, const bw_config_t *conf, bw_metrics_t *metrics,
                     bw_dead_letters_t *dead_letters) {
    memset(ap, 0, sizeof(*ap));
    ap->conf = conf;
    ap->metrics = metrics;
    ap->dead_letters = dead_letters;
    ap->conns = calloc((size_t)conf->server_cnt, sizeof(*ap->conns));
    if (!ap->conns) abort();
    bw_buf_init(&ap->sql);
    bw_sqlbind_init(&ap->bind);
    bw_arena_init(&ap->arena, 1 << 20);
}

static void conn_close(bw_apply_conn_t *c) {
    bw_sqlbind_cache_close(&c->stmts);
    if (c->db) mysql_close(c->db);
    c->db = NULL;
}

void bw_applier_destroy(bw_applier_t *ap) {
    for (int i = 0; i < ap->conf->server_cnt; i++) conn_close(&ap->conns[i]);
    free(ap->conns);
    bw_buf_free(&ap->sql);
    bw_sqlbind_free(&ap->bind);
    bw_arena_destroy(&ap->arena);
    bw_sql_thread_done();
}

/* A message of the call, decoded, and what became of it. */
typedef struct {
    Bulkwrite__Internal__V1__ShardBatch *sb; /* NULL: below the stored offset, or undecodable */
    const bw_object_type_t *ot;
    int *colmap;
    const char *unusable;          /* why its ops cannot be applied (config mismatch), or NULL */
} decoded_t;

/* Where a refused op came from (its ledger row is in failures[] at the same index). */
typedef struct {
    uint32_t msg;
    const Bulkwrite__Internal__V1__Row *row;
} failure_src_t;

/* The state of one apply call. */
typedef struct {
    bw_applier_t *ap;
    int shard, server;
    bw_apply_conn_t *conn;
    MYSQL *db;             /* conn->db, NULL once a client-side error closed it */
    char dbname[80];
    bw_apply_result_t *res;
    rd_kafka_message_t *const *msgs;
    decoded_t *dec;
    bw_ledger_part_t *parts;       /* [cnt] each message as the ledger keeps it: counts, duplicate */
    bw_ledger_failure_t *failures; /* refused ops, as bw_job_failures keeps them */
    failure_src_t *failure_src;    /* [failure_cnt] and where each came from */
    size_t failure_cnt;
    bw_dead_letter_t *undecodable; /* raw dead letters of messages that did not decode */
    size_t undecodable_cnt;
    char md5_key[48];              /* a key md5 routes to this shard (create_key), once found */
    int md5_key_state;             /* 0 not looked for yet, 1 found, -1 none */
} apply_ctx_t;

/* Classifies a MySQL error by the error table (db.h): a data error of the row
 * (returns 0), or anything else, which keeps the batch (returns 1): a retry, a broken
 * connection (dropped), or a shard that must stop. */
static int failed_retry_err(apply_ctx_t *x, const char *what, unsigned err, const char *msg) {
    snprintf(x->res->error, sizeof(x->res->error), "%s on %s: %s (%u)", what, x->dbname, msg, err);
    bw_fail_t cls = bw_db_error_class(err);
    if (cls == BW_FAIL_DATA) return 0;
    x->res->status = BW_APPLY_RETRY;
    x->res->fail = cls;
    if (bw_db_error_is_client(err)) { /* the connection is gone or unusable */
        conn_close(x->conn);
        x->db = NULL;
    }
    return 1;
}

/* The same for the connection's last error. */
static int failed_retry(apply_ctx_t *x, const char *what) {
    return failed_retry_err(x, what, mysql_errno(x->db), mysql_error(x->db));
}

static int query(apply_ctx_t *x, const char *sql, size_t len) {
    return mysql_real_query(x->db, sql, (unsigned long)len);
}

static void add_failure(apply_ctx_t *x, uint32_t msg, const Bulkwrite__Internal__V1__Row *row, unsigned code,
                        const char *reason) {
    const Bulkwrite__Internal__V1__ShardBatch *sb = x->dec[msg].sb;
    x->failure_src[x->failure_cnt] = (failure_src_t){msg, row};
    x->failures[x->failure_cnt++] = (bw_ledger_failure_t){
        .job_id = sb->job_id, .part = sb->part, .op_index = row->op_index, .object_id = row->id, .error_code = code,
        .reason = bw_arena_strndup(&x->ap->arena, reason, strlen(reason))};
    x->parts[msg].rows_failed++;
    x->res->rows_failed++;
}

static int job_id_valid(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > 32) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return 1;
}

/* Checks message i (unpacked into dec[i].sb, NULL if that failed) against the config. A message that cannot be applied is
 * reported and dead-lettered, never silently dropped: -1. */
static int decode(apply_ctx_t *x, size_t i) {
    const bw_config_t *conf = x->ap->conf;
    const rd_kafka_message_t *m = x->msgs[i];
    decoded_t *d = &x->dec[i];
    const char *why = NULL;
    if (!d->sb) why = "not a bulkwrite.internal.v1.ShardBatch";
    else if (!job_id_valid(d->sb->job_id)) why = "its job_id is not 1 to 32 lower-case hex digits";
    else if ((int)d->sb->shard != x->shard) why = "its shard differs from its partition";
    if (why) { /* no job to charge: the whole message goes to the dead-letter topic */
        bw_log(BW_LOG_ERROR, COMPONENT, x->shard, NULL, "message at offset %" PRId64 " cannot be applied: %s",
               m->offset, why);
        x->undecodable[x->undecodable_cnt++] = (bw_dead_letter_t){
            .shard = x->shard, .topic = m->rkt ? rd_kafka_topic_name(m->rkt) : NULL, .offset = m->offset, .error = why,
            .raw = m->payload, .raw_len = m->len};
        d->sb = NULL;
        return -1;
    }
    if (!(d->ot = bw_config_object_type(conf, d->sb->object_type))) why = "unknown object type";
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
    /* the job is known: each op fails on it with the reason (the config changed under
     * it), unless the part turns out to be a resent one applied before */
    d->unusable = why;
    d->ot = NULL;
    return 0;
}

/* Fails every op of the unusable messages that are not duplicates. */
static void fail_unusable(apply_ctx_t *x, size_t cnt) {
    for (size_t i = 0; i < cnt; i++) {
        decoded_t *d = &x->dec[i];
        if (!d->sb || !d->unusable || x->parts[i].duplicate) continue;
        bw_log_part(BW_LOG_ERROR, COMPONENT, x->shard, client_job(d->sb), named_part(d->sb),
                    "message at offset %" PRId64 " cannot be applied: %s", x->msgs[i]->offset, d->unusable);
        for (size_t r = 0; r < d->sb->n_rows; r++) add_failure(x, (uint32_t)i, d->sb->rows[r], 0, d->unusable);
    }
}

/* Marks messages whose (job_id, part) the shard has applied before, or that repeat an
 * earlier message of this call (the ledger's dedup). */
static int find_duplicates(apply_ctx_t *x, size_t cnt) {
    for (size_t i = 0; i < cnt; i++) {
        const Bulkwrite__Internal__V1__ShardBatch *sb = x->dec[i].sb;
        x->parts[i] = (bw_ledger_part_t){.job_id = sb ? sb->job_id : NULL, .part = sb ? sb->part : 0,
                                         .kafka_offset = x->msgs[i]->offset};
    }
    if (bw_ledger_find_applied(x->db, x->ap->conf, x->shard, x->parts, cnt, &x->ap->sql))
        return failed_retry(x, "looking up applied parts"), -1;
    return 0;
}

/* Rows of one (type, op) run, with the message each came from. A coalesced run
 * (coalesce.h) stands for the rows of `orig`: its row i for orig's rows members[first[i]
 * .. first[i + 1]); src and msg are those of the row's first member. */
typedef struct run {
    const bw_object_type_t *ot;
    int op;
    bw_sql_row_t *rows;
    const Bulkwrite__Internal__V1__Row **src;
    uint32_t *msg;
    size_t n;
    const struct run *orig;
    const uint32_t *first, *members;
} run_t;

/* Counts rows [from, from + k) of a run as applied, each op of a sum included. */
static void count_applied(apply_ctx_t *x, const run_t *run, size_t from, size_t k) {
    for (size_t i = from; i < from + k; i++) {
        if (!run->orig) {
            x->parts[run->msg[i]].rows_applied++;
            x->res->rows_applied++;
            continue;
        }
        for (uint32_t m = run->first[i]; m < run->first[i + 1]; m++) {
            x->parts[run->orig->msg[run->members[m]]].rows_applied++;
            x->res->rows_applied++;
        }
    }
}

/* Applies rows one at a time under savepoints: those the shard refuses fail alone. A
 * sum is taken apart: its ops are applied one by one, in order. */
static int apply_rows_one_by_one(apply_ctx_t *x, const run_t *run, size_t from, size_t n) {
    for (size_t i = from; i < from + n; i++) {
        if (run->orig) {
            for (uint32_t m = run->first[i]; m < run->first[i + 1]; m++)
                if (apply_rows_one_by_one(x, run->orig, run->members[m], 1)) return -1;
            continue;
        }
        if (query(x, "SAVEPOINT bw_row", 16)) return failed_retry(x, "savepoint"), -1;
        bw_sql_build(&x->ap->sql, x->dbname, run->ot, run->op, &run->rows[i], 1);
        x->res->statements++;
        if (query(x, x->ap->sql.data, x->ap->sql.len) == 0) {
            count_applied(x, run, i, 1);
            continue;
        }
        if (failed_retry(x, "statement")) return -1;
        unsigned code = mysql_errno(x->db);
        const shard_batch_t *sb = x->dec[run->msg[i]].sb;
        bw_log_part(BW_LOG_WARN, COMPONENT, x->shard, client_job(sb), named_part(sb),
                    "op %" PRIu32 " (%s id %" PRIu64 ") failed: %s", run->src[i]->op_index, bw_op_name(run->op),
                    run->rows[i].id, x->res->error);
        add_failure(x, run->msg[i], run->src[i], code, mysql_error(x->db));
        if (query(x, "ROLLBACK TO SAVEPOINT bw_row", 28)) return failed_retry(x, "rollback to savepoint"), -1;
    }
    x->res->error[0] = '\0';
    return 0;
}

/* The most bytes a multi-row statement may have on this connection. */
static size_t statement_budget(const apply_ctx_t *x) {
    return x->conn->max_packet / 100 * (size_t)x->ap->conf->statement_packet_pct;
}

/* A row whose statement alone (built in x->ap->sql) is more than the server takes in
 * one packet: it fails alone, as a data error, and never reaches the server. The
 * margin is the packet's command byte and headers. */
static int too_big_for_server(apply_ctx_t *x, const run_t *run, size_t i) {
    size_t len = x->ap->sql.len;
    if (len + 1024 <= x->conn->max_packet) return 0;
    char reason[200];
    snprintf(reason, sizeof(reason), "row too large: its statement is %zu bytes, over the server's "
             "max_allowed_packet (%lu)", len, x->conn->max_packet);
    const shard_batch_t *sb = x->dec[run->msg[i]].sb;
    bw_log_part(BW_LOG_WARN, COMPONENT, x->shard, client_job(sb), named_part(sb),
                "op %" PRIu32 " (%s id %" PRIu64 ") failed: %s", run->src[i]->op_index, bw_op_name(run->op),
                run->rows[i].id, reason);
    add_failure(x, run->msg[i], run->src[i], ER_NET_PACKET_TOO_LARGE, reason);
    return 1;
}

/* Runs the text statement in x->ap->sql: 0, or -1 with the error in *err, *msg. */
static int run_text(apply_ctx_t *x, unsigned *err, const char **msg) {
    if (query(x, x->ap->sql.data, x->ap->sql.len) == 0) return 0;
    *err = mysql_errno(x->db);
    *msg = mysql_error(x->db);
    return -1;
}

/* Runs rows [from, from + k) of a run as one statement: array-bound where that wins and
 * the server can (sqlbind.h), else as text. 0, or -1 with the error in *err, *msg. */
static int run_statement(apply_ctx_t *x, const run_t *run, size_t from, size_t k, unsigned *err, const char **msg) {
    if (x->ap->conf->array_binding) {
        switch (bw_sqlbind_execute(&x->ap->bind, &x->conn->stmts, x->db, x->dbname, run->ot, run->op,
                                   run->rows + from, k, err, msg)) {
        case BW_SQLBIND_OK: x->res->statements_bound++; return 0;
        case BW_SQLBIND_ERROR: x->res->statements_bound++; return -1;
        case BW_SQLBIND_TEXT: break; /* the text statement decides */
        }
    }
    bw_sql_build(&x->ap->sql, x->dbname, run->ot, run->op, run->rows + from, k);
    return run_text(x, err, msg);
}

/* Applies a run as statements that bw_sql_plan_bytes admits under the statement budget,
 * all in the call's transaction. */
static int apply_run(apply_ctx_t *x, const run_t *run) {
    size_t done = 0, budget = statement_budget(x);
    while (done < run->n) {
        size_t k = bw_sql_plan_bytes(run->ot, run->op, x->dbname, run->rows + done, run->n - done, budget, NULL);
        int alone = k == 0; /* one row over the budget goes alone, as text, if the server takes it at all */
        if (alone && run->orig) { /* a sum too big for one statement: its ops go one by one */
            if (apply_rows_one_by_one(x, run, done, 1)) return -1;
            done++;
            continue;
        }
        if (alone) {
            bw_sql_build(&x->ap->sql, x->dbname, run->ot, run->op, run->rows + done, 1);
            if (too_big_for_server(x, run, done)) {
                done++;
                continue;
            }
            k = 1;
        }
        if (query(x, "SAVEPOINT bw_stmt", 17)) return failed_retry(x, "savepoint"), -1;
        unsigned err = 0;
        const char *msg = "";
        x->res->statements++;
        if ((alone ? run_text(x, &err, &msg) : run_statement(x, run, done, k, &err, &msg)) == 0) {
            count_applied(x, run, done, k);
        } else {
            if (failed_retry_err(x, "statement", err, msg)) return -1;
            /* a data error: find the offending rows without losing the others */
            if (query(x, "ROLLBACK TO SAVEPOINT bw_stmt", 29)) return failed_retry(x, "rollback to savepoint"), -1;
            if (apply_rows_one_by_one(x, run, done, k)) return -1;
        }
        done += k;
    }
    return 0;
}

/* Applies a run, its increments coalesced first where its object type asks for it. */
static int apply_whole_run(apply_ctx_t *x, const run_t *run) {
    if (run->op != BW_OP_UPDATE || !run->ot->coalesce_increments || run->n < 2) return apply_run(x, run);
    bw_coalesced_t co;
    size_t added = bw_coalesce_increments(run->ot, run->rows, run->n, &x->ap->arena, &co);
    if (!added) return apply_run(x, run);
    x->res->rows_coalesced += added;
    run_t sums = {.ot = run->ot, .op = run->op, .rows = co.rows, .n = co.n, .orig = run, .first = co.first,
                  .members = co.members,
                  .src = bw_arena_alloc(&x->ap->arena, co.n * sizeof(*sums.src)),
                  .msg = bw_arena_alloc(&x->ap->arena, co.n * sizeof(*sums.msg))};
    for (size_t i = 0; i < co.n; i++) {
        sums.src[i] = run->src[co.members[co.first[i]]];
        sums.msg[i] = run->msg[co.members[co.first[i]]];
    }
    return apply_run(x, &sums);
}

/* A shard_key that routes a create back to this shard (bw_shard_key_for): by its id, or
 * under md5 routing the first "bw-shard-S-N" that lands here, looked for once per
 * transaction rather than once per refused create. 0, or -1 if there is none. */
static int create_key(apply_ctx_t *x, int by_md5, uint64_t id, char key[48]) {
    unsigned shards = (unsigned)x->ap->conf->shard_count;
    if (!by_md5) return bw_shard_key_for(0, (unsigned)x->shard, shards, id, key);
    if (!x->md5_key_state) x->md5_key_state = bw_shard_key_for(1, (unsigned)x->shard, shards, 0, x->md5_key) ? -1 : 1;
    if (x->md5_key_state < 0) return -1;
    memcpy(key, x->md5_key, sizeof(x->md5_key));
    return 0;
}

/* The dead-letter record of refused op i (x->failures[i]); a create's shard_key (not
 * kept in the batch: a create needs one to be sent again) goes to key. */
static bw_dead_letter_t dead_letter_of(apply_ctx_t *x, size_t i, char key[48]) {
    const bw_ledger_failure_t *f = &x->failures[i];
    const failure_src_t *src = &x->failure_src[i];
    const decoded_t *d = &x->dec[src->msg];
    const Bulkwrite__Internal__V1__ShardBatch *sb = d->sb;
    rd_kafka_message_t *m = x->msgs[src->msg];
    int has_key = sb->op == BULKWRITE__V1__OP_TYPE__CREATE && d->ot &&
                  create_key(x, d->ot->create_route == BW_ROUTE_MD5, src->row->id, key) == 0;
    return (bw_dead_letter_t){.job_id = f->job_id, .part = f->part, .shard = x->shard,
                              .topic = m->rkt ? rd_kafka_topic_name(m->rkt) : NULL,
                              .offset = m->offset, .op = (int)sb->op,
                              .object_type = sb->object_type, .shard_key = has_key ? key : NULL,
                              .row = src->row, .columns = sb->columns, .n_columns = sb->n_columns,
                              .error_code = f->error_code, .error = f->reason};
}

/* The most of a refused op's JSON bw_job_failures keeps (longer values are cut, and
 * the op is marked truncated): a quarter of the statement budget, so that a row, escaped,
 * always fits a statement; at most 16 KiB. */
#define FAILURE_OP_MAX 16384

/* The ledger's rows for every message applied now (counts per message) and every op
 * refused, with the op itself (for a replay), in as many statements as the statement
 * budget takes. */
static int record_parts(apply_ctx_t *x, size_t cnt) {
    const bw_config_t *conf = x->ap->conf;
    if (bw_ledger_write_parts(x->db, conf, x->shard, x->parts, cnt, &x->ap->sql))
        return failed_retry(x, "recording job parts"), -1;
    size_t budget = statement_budget(x), op_max = budget / 4 < FAILURE_OP_MAX ? budget / 4 : FAILURE_OP_MAX;
    for (size_t i = 0; i < x->failure_cnt; i++) {
        char key[48];
        bw_dead_letter_t r = dead_letter_of(x, i, key);
        x->failures[i].op = bw_dead_letter_op_json(&r, op_max, &x->failures[i].op_truncated);
    }
    unsigned err = bw_ledger_write_failures(x->db, conf, x->shard, x->failures, x->failure_cnt, budget, &x->ap->sql);
    for (size_t i = 0; i < x->failure_cnt; i++) {
        free((char *)x->failures[i].op);
        x->failures[i].op = NULL;
    }
    if (err) return failed_retry(x, "recording failed ops"), -1;
    return 0;
}

/* Sends every refused op (and undecodable message) to the dead-letter topic. */
static int send_dead_letters(apply_ctx_t *x) {
    size_t n = x->failure_cnt + x->undecodable_cnt;
    x->res->messages_undecodable = x->undecodable_cnt;
    if (x->failure_cnt) { /* the shard's status names the latest (bw_shard_t.dead) */
        const bw_ledger_failure_t *f = &x->failures[x->failure_cnt - 1];
        snprintf(x->res->failure_job, sizeof(x->res->failure_job), "%s", f->job_id ? f->job_id : "");
        snprintf(x->res->failure_reason, sizeof(x->res->failure_reason), "%s", f->reason ? f->reason : "");
        x->res->failure_code = f->error_code;
    }
    if (!n) return 0;
    if (!x->ap->dead_letters) { /* tests without Kafka: the failures table still has them */
        x->res->dead_letters = 0;
        return 0;
    }
    bw_dead_letter_t *recs = bw_arena_alloc(&x->ap->arena, n * sizeof(*recs));
    char (*keys)[48] = bw_arena_alloc(&x->ap->arena, (x->failure_cnt + 1) * sizeof(*keys));
    for (size_t i = 0; i < x->failure_cnt; i++) recs[i] = dead_letter_of(x, i, keys[i]);
    if (x->undecodable_cnt) memcpy(recs + x->failure_cnt, x->undecodable, x->undecodable_cnt * sizeof(*recs));
    if (bw_dead_letters_send(x->ap->dead_letters, recs, n, x->res->error, sizeof(x->res->error))) {
        x->res->status = BW_APPLY_RETRY;
        x->res->fail = BW_FAIL_RETRY;
        return -1;
    }
    x->res->dead_letters = n;
    return 0;
}

/* Opens a connection to `server` and reads its packet limit. -1 with errstr. */
static int conn_open(bw_applier_t *ap, int server, char *errstr, size_t errstr_size) {
    bw_apply_conn_t *c = &ap->conns[server];
    if (!(c->db = bw_db_connect(ap->conf, server, errstr, errstr_size))) return -1;
    bw_sqlbind_cache_open(&c->stmts, c->db);
    if ((c->max_packet = bw_db_max_packet(c->db)) == 0) {
        snprintf(errstr, errstr_size, "reading max_allowed_packet on %s: %s (%u)", ap->conf->servers[server].name,
                 mysql_error(c->db), mysql_errno(c->db));
        conn_close(c);
        return -1;
    }
    return 0;
}

/* The batch follows the ledger without a hole: its first message not applied yet is at
 * the ledger's next offset, and each next one follows it (the batches topic is neither
 * compacted nor transactional, so its offsets have no holes). A hole means the
 * partition was read from the wrong place, and applying past it would skip writes for
 * good: instead nothing of the batch commits and the shard stops (BW_FAIL_STOP: an
 * alert, a probe every consumer.pause_ms). Messages before the ledger's offset are
 * replays, skipped as ever. `stored` is -1 when nothing was applied yet. */
static int check_contiguous(apply_ctx_t *x, int slot, int64_t stored, size_t cnt) {
    int64_t expected = stored;
    for (size_t i = 0; i < cnt; i++) {
        int64_t offset = x->msgs[i]->offset;
        if (offset < stored) continue;
        if (expected >= 0 && offset != expected) {
            snprintf(x->res->error, sizeof(x->res->error),
                     "offset %lld of partition %d was read where %lld comes next%s: offsets %lld to %lld were not read "
                     "(a positioning fault). Nothing is skipped: the shard stops until it reads again from its ledger "
                     "(restart this consumer)", (long long)offset, slot, (long long)expected,
                     expected == stored ? " (the shard's ledger)" : "", (long long)expected, (long long)offset - 1);
            x->res->status = BW_APPLY_RETRY;
            x->res->fail = BW_FAIL_STOP;
            return -1;
        }
        expected = offset + 1;
    }
    return 0;
}

/* The shard's ledger says an offset comes next that is behind what this consumer applied
 * and committed there itself: the database is an older copy than the one it wrote to (a
 * replica promoted after a failover that kept the address, a restored backup). The
 * ledger is the truth: nothing commits, and the partition is fetched again from the
 * ledger's offset (consumer/trim.c keeps those messages in Kafka; if Kafka no longer has
 * them, the gap stops the shard loudly, partition.c). */
static int ledger_moved_back(apply_ctx_t *x, int slot, int64_t stored, int64_t applied) {
    if (applied < 0 || stored >= applied) return 0;
    snprintf(x->res->error, sizeof(x->res->error),
             "the ledger of partition %d on %s says offset %lld comes next, behind %lld this consumer applied there: "
             "the database is an older copy (a failover to a replica, a restored backup); fetching again from %lld",
             slot, x->ap->conf->servers[x->server].name, (long long)stored, (long long)applied,
             (long long)(stored >= 0 ? stored : 0));
    x->res->status = BW_APPLY_REWIND;
    x->res->next_offset = stored;
    return -1;
}

/* One attempt at the whole transaction on the server's connection (opened if none). */
static void apply_batch(bw_applier_t *ap, int slot, int64_t applied, rd_kafka_message_t *const *msgs, size_t cnt,
                        bw_apply_result_t *res) {
    memset(res, 0, sizeof(*res));
    res->status = BW_APPLY_OK;
    bw_arena_reset(&ap->arena);
    const bw_config_t *conf = ap->conf;
    int shard = slot % conf->shard_count;
    apply_ctx_t x = {.ap = ap, .shard = shard, .server = conf->shard_server[shard], .res = res, .msgs = msgs};
    x.conn = &ap->conns[x.server];
    bw_config_shard_db(conf, shard, x.dbname, sizeof(x.dbname));
    if (!x.conn->db && conn_open(ap, x.server, res->error, sizeof(res->error))) {
        res->status = BW_APPLY_RETRY;
        res->fail = BW_FAIL_CONNECTION;
        return;
    }
    x.db = x.conn->db;

    int64_t stored;
    if (bw_ledger_lock_offset(x.db, conf, slot, &stored, &ap->sql)) {
        failed_retry(&x, "reading the stored offset");
        goto rollback;
    }
    if (ledger_moved_back(&x, slot, stored, applied)) {
        mysql_rollback(x.db);
        return;
    }
    if (check_contiguous(&x, slot, stored, cnt)) goto rollback;

    x.dec = bw_arena_alloc(&ap->arena, cnt * sizeof(*x.dec));
    x.undecodable = bw_arena_alloc(&ap->arena, cnt * sizeof(*x.undecodable));
    x.parts = bw_arena_alloc(&ap->arena, cnt * sizeof(*x.parts));
    memset(x.dec, 0, cnt * sizeof(*x.dec));
    size_t row_cap = 0;
    for (size_t i = 0; i < cnt; i++) {
        if (msgs[i]->offset < stored) {
            res->messages_skipped++;
            continue;
        }
        decoded_t *d = &x.dec[i];
        /* values point into the payload: the partition's buffer holds the message until
         * the transaction is over (bw_partition_drop_head) */
        d->sb = bw_pbd_shard_batch(msgs[i]->payload, msgs[i]->len, &ap->arena);
        row_cap += d->sb ? d->sb->n_rows : 0;
    }
    x.failures = bw_arena_alloc(&ap->arena, (row_cap + 1) * sizeof(*x.failures));
    x.failure_src = bw_arena_alloc(&ap->arena, (row_cap + 1) * sizeof(*x.failure_src));
    for (size_t i = 0; i < cnt; i++)
        if (msgs[i]->offset >= stored) decode(&x, i);
    if (find_duplicates(&x, cnt)) goto rollback;
    fail_unusable(&x, cnt);

    run_t run = {.rows = bw_arena_alloc(&ap->arena, (row_cap + 1) * sizeof(*run.rows)),
                 .src = bw_arena_alloc(&ap->arena, (row_cap + 1) * sizeof(*run.src)),
                 .msg = bw_arena_alloc(&ap->arena, (row_cap + 1) * sizeof(*run.msg))};
    /* rows of consecutive messages sharing (type, op) form one run */
    for (size_t i = 0; i <= cnt; i++) {
        const decoded_t *d = i < cnt ? &x.dec[i] : NULL;
        if (d && (!d->sb || !d->ot)) continue;
        if (d && x.parts[i].duplicate) {
            res->messages_duplicate++;
            bw_log_part(BW_LOG_INFO, COMPONENT, shard, client_job(d->sb), named_part(d->sb),
                        "message %" PRIu32 " at offset %" PRId64 " was applied before (resubmitted request): skipped",
                        d->sb->part, msgs[i]->offset);
            continue;
        }
        if (d && ap->jobs && bw_shard_table_job_cancelled(ap->jobs, d->sb->job_id)) {
            res->ops_cancelled += d->sb->n_rows;
            x.parts[i].job_id = NULL; /* not in the ledger: the offset passes it */
            continue;
        }
        if (run.n && (!d || d->ot != run.ot || (int)d->sb->op != run.op)) {
            if (apply_whole_run(&x, &run)) goto rollback;
            run.n = 0;
        }
        if (!d) break;
        run.ot = d->ot;
        run.op = (int)d->sb->op;
        for (size_t r = 0; r < d->sb->n_rows; r++) {
            const Bulkwrite__Internal__V1__Row *row = d->sb->rows[r];
            run.rows[run.n] = (bw_sql_row_t){row->id, row->n_fields, row->fields, d->colmap};
            run.src[run.n] = row;
            run.msg[run.n] = (uint32_t)i;
            run.n++;
        }
    }
    if (record_parts(&x, cnt)) goto rollback;
    res->next_offset = msgs[cnt - 1]->offset + 1;
    if (stored > res->next_offset) res->next_offset = stored; /* all skipped: keep the later one */
    else if (bw_ledger_write_offset(x.db, conf, slot, res->next_offset, &ap->sql)) {
        failed_retry(&x, "storing the offset");
        goto rollback;
    }
    /* refused ops are durable in Kafka before the batch that refused them commits */
    if (send_dead_letters(&x)) goto rollback;
    if (mysql_commit(x.db)) {
        failed_retry(&x, "commit");
        res->status = BW_APPLY_RETRY; /* whatever the code: nothing is known to be committed */
        if (!res->fail) res->fail = BW_FAIL_RETRY;
        goto rollback;
    }
    return;
rollback:
    if (x.db) mysql_rollback(x.db);
    res->status = BW_APPLY_RETRY;
    if (!res->fail) res->fail = BW_FAIL_RETRY;
    res->rows_applied = res->rows_failed = res->messages_skipped = res->messages_duplicate = 0;
    res->dead_letters = res->messages_undecodable = res->statements = res->statements_bound = 0;
    res->rows_coalesced = res->ops_cancelled = 0;
}

int bw_applier_close_idle(bw_applier_t *ap, int64_t now_us) {
    int closed = 0;
    for (int i = 0; i < ap->conf->server_cnt; i++) {
        bw_apply_conn_t *c = &ap->conns[i];
        if (c->db && now_us - c->used_us >= (int64_t)ap->conf->connection_idle_close_ms * 1000) {
            conn_close(c);
            closed++;
        }
    }
    return closed;
}

/* A connection that served an earlier batch can have been closed since, by the
 * server's wait_timeout or a load balancer: that is found (by a ping after a while
 * idle, or by the batch's first statement) and mended by connecting again at once,
 * without an error. Only a failure on a fresh connection says the server is sick. */
void bw_applier_apply(bw_applier_t *ap, int slot, int64_t applied, rd_kafka_message_t *const *msgs, size_t cnt,
                      bw_apply_result_t *res) {
    int64_t now = bw_now_us();
    int shard = slot % ap->conf->shard_count;
    int server = ap->conf->shard_server[shard];
    bw_apply_conn_t *c = &ap->conns[server];
    uint64_t reconnects = 0;
    bw_applier_close_idle(ap, now);
    if (c->db && now - c->used_us >= (int64_t)ap->conf->connection_check_idle_ms * 1000 && mysql_ping(c->db)) {
        bw_log(BW_LOG_INFO, COMPONENT, shard, NULL, "connection to %s closed while idle (%s): reconnecting",
               ap->conf->servers[server].name, mysql_error(c->db));
        conn_close(c);
        reconnects++;
    }
    int reused = c->db != NULL;
    apply_batch(ap, slot, applied, msgs, cnt, res);
    if (res->status == BW_APPLY_RETRY && reused && !c->db) { /* a client-side error closed it */
        bw_log(BW_LOG_INFO, COMPONENT, shard, NULL, "reused connection to %s failed (%s): applying again on a new one",
               ap->conf->servers[server].name, res->error);
        reconnects++;
        apply_batch(ap, slot, applied, msgs, cnt, res);
    }
    res->reconnects = reconnects;
    c->used_us = bw_now_us();
}
