/* test_apply.c — the consumer's apply transaction against a live MariaDB: replays are
 * skipped by offset, resubmitted parts by (job_id, part), data errors fail alone and are
 * recorded on their job; statements split by bytes under the server's packet limit, a
 * row over it fails alone; reaped connections are replaced without an error; and the
 * dead-letter record's JSON, truncated when it would not fit a Kafka message. */
#include <inttypes.h>
#include <jansson.h>
#include <mysql.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apply.h"
#include "consumer_metrics.h"
#include "db.h"
#include "deadletter.h"
#include "helpers.h"
#include "shard.h"
#include "sql.h"

#define JOB_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define JOB_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define JOB_C "cccccccccccccccccccccccccccccccc"
#define JOB_D "dddddddddddddddddddddddddddddddd"

static bw_config_t *conf;
static MYSQL *db;
static bw_metrics_t *metrics;
static bw_applier_t ap;

static uint64_t pin(uint64_t local) { return bw_id_make(0, 1, local); }

static int setup(void) {
    if (!(conf = t_live_config("bwapply"))) return 0;
    char err[512];
    db = bw_db_connect(conf, 0, err, sizeof(err));
    ck_assert_msg(db != NULL, "connect: %s", err);
    mysql_autocommit(db, 1);
    const char *tables[] = {"pins", "bw_offsets", "bw_job_parts", "bw_job_failures"};
    for (size_t i = 0; i < 4; i++) {
        char q[128];
        snprintf(q, sizeof(q), "TRUNCATE TABLE bwapply00000.%s", tables[i]);
        ck_assert_msg(mysql_query(db, q) == 0, "%s: %s", q, mysql_error(db));
    }
    metrics = bw_consumer_metrics_new(conf);
    bw_applier_init(&ap, conf, metrics, NULL);
    return 1;
}

static void teardown(void) {
    bw_applier_destroy(&ap);
    bw_metrics_destroy(metrics);
    mysql_close(db);
    bw_config_destroy(conf);
}

static long long scalar(const char *sql) { return t_scalar(db, sql); }

/* A Kafka message carrying one ShardBatch of pins on shard 0. Each row: id, and either a
 * create (owner_id 7, title, like_count 0) or an increment of like_count. */
typedef struct {
    rd_kafka_message_t m;
    uint8_t buf[8192];
} msg_t;

static void make_msg(msg_t *out, int64_t offset, const char *job, uint32_t part, int op, const uint64_t *ids,
                     size_t n, const char *title) {
    Bulkwrite__V1__Value vals[16][3];
    Bulkwrite__Internal__V1__RowField fields[16][3], *fp[16][3];
    Bulkwrite__Internal__V1__Row rows[16], *rp[16];
    char *cols_create[] = {"owner_id", "title", "like_count"};
    char *cols_update[] = {"like_count"};
    for (size_t i = 0; i < n; i++) {
        bulkwrite__internal__v1__row__init(&rows[i]);
        rows[i].op_index = (uint32_t)i;
        rows[i].id = ids[i];
        for (int f = 0; f < 3; f++) {
            bulkwrite__internal__v1__row_field__init(&fields[i][f]);
            bulkwrite__v1__value__init(&vals[i][f]);
            fields[i][f].value = &vals[i][f];
            fp[i][f] = &fields[i][f];
        }
        if (op == BW_OP_CREATE) {
            fields[i][0].column = 0;
            vals[i][0].kind_case = BULKWRITE__V1__VALUE__KIND_INT_VALUE;
            vals[i][0].int_value = 7;
            fields[i][1].column = 1;
            vals[i][1].kind_case = BULKWRITE__V1__VALUE__KIND_STRING_VALUE;
            vals[i][1].string_value.data = (uint8_t *)title;
            vals[i][1].string_value.len = strlen(title);
            fields[i][2].column = 2;
            vals[i][2].kind_case = BULKWRITE__V1__VALUE__KIND_INT_VALUE;
            vals[i][2].int_value = 0;
            rows[i].n_fields = 3;
        } else {
            fields[i][0].column = 0;
            fields[i][0].increment = 1;
            vals[i][0].kind_case = BULKWRITE__V1__VALUE__KIND_INT_VALUE;
            vals[i][0].int_value = 1;
            rows[i].n_fields = 1;
        }
        rows[i].fields = fp[i];
        rp[i] = &rows[i];
    }
    Bulkwrite__Internal__V1__ShardBatch sb = BULKWRITE__INTERNAL__V1__SHARD_BATCH__INIT;
    sb.job_id = (char *)job;
    sb.part = part;
    sb.shard = 0;
    sb.object_type = "pin";
    sb.op = (Bulkwrite__V1__OpType)op;
    sb.columns = op == BW_OP_CREATE ? cols_create : cols_update;
    sb.n_columns = op == BW_OP_CREATE ? 3 : 1;
    sb.rows = rp;
    sb.n_rows = n;
    ck_assert_uint_le(bulkwrite__internal__v1__shard_batch__get_packed_size(&sb), sizeof(out->buf));
    memset(&out->m, 0, sizeof(out->m));
    out->m.len = bulkwrite__internal__v1__shard_batch__pack(&sb, out->buf);
    out->m.payload = out->buf;
    out->m.offset = offset;
}

static void apply(msg_t *const *msgs, size_t n, bw_apply_result_t *res) {
    rd_kafka_message_t *ms[8];
    for (size_t i = 0; i < n; i++) ms[i] = &msgs[i]->m;
    bw_applier_apply(&ap, 0, -1, ms, n, res);
    ck_assert_msg(res->status == BW_APPLY_OK, "apply failed: %s", res->error);
}

START_TEST(replays_and_resubmissions_apply_once) {
    if (!setup()) return;
    static msg_t m0, m1, m2, m3, m4, m5;
    uint64_t creates[] = {pin(1), pin(2), pin(3)}, one[] = {pin(1)};
    make_msg(&m0, 0, JOB_A, 0, BW_OP_CREATE, creates, 3, "t");
    make_msg(&m1, 1, JOB_A, 1, BW_OP_UPDATE, one, 1, NULL);
    bw_apply_result_t res;
    apply((msg_t *[]){&m0, &m1}, 2, &res);
    ck_assert_uint_eq(res.rows_applied, 4);
    ck_assert_int_eq(res.next_offset, 2);
    ck_assert_int_eq(scalar("SELECT like_count FROM bwapply00000.pins WHERE id = 68719476737"), 1);

    /* a replay after a crash: same offsets, nothing applied */
    apply((msg_t *[]){&m0, &m1}, 2, &res);
    ck_assert_uint_eq(res.messages_skipped, 2);
    ck_assert_uint_eq(res.rows_applied, 0);

    /* the client resent job A: part 1 again at a new offset, and a new job B after it */
    make_msg(&m2, 2, JOB_A, 1, BW_OP_UPDATE, one, 1, NULL);
    make_msg(&m3, 3, JOB_B, 0, BW_OP_UPDATE, one, 1, NULL);
    apply((msg_t *[]){&m2, &m3}, 2, &res);
    ck_assert_uint_eq(res.messages_duplicate, 1);
    ck_assert_uint_eq(res.rows_applied, 1);
    /* the same part twice in one call */
    make_msg(&m4, 4, JOB_C, 0, BW_OP_UPDATE, one, 1, NULL);
    make_msg(&m5, 5, JOB_C, 0, BW_OP_UPDATE, one, 1, NULL);
    apply((msg_t *[]){&m4, &m5}, 2, &res);
    ck_assert_uint_eq(res.messages_duplicate, 1);
    ck_assert_int_eq(res.next_offset, 6);
    ck_assert_int_eq(scalar("SELECT like_count FROM bwapply00000.pins WHERE id = 68719476737"), 3);

    ck_assert_int_eq(scalar("SELECT next_offset FROM bwapply00000.bw_offsets"), 6);
    ck_assert_int_eq(scalar("SELECT COUNT(*) FROM bwapply00000.bw_job_parts"), 4);
    ck_assert_int_eq(scalar("SELECT SUM(rows_applied) FROM bwapply00000.bw_job_parts WHERE job_id = '" JOB_A "'"), 4);
    ck_assert_int_eq(scalar("SELECT kafka_offset FROM bwapply00000.bw_job_parts WHERE job_id = '" JOB_C "'"), 4);
    teardown();
}
END_TEST

START_TEST(data_errors_fail_alone_and_are_recorded) {
    if (!setup()) return;
    ck_assert(mysql_query(db, "INSERT INTO bwapply00000.pins (id, owner_id) VALUES (68719476747, 1)") == 0);
    static msg_t m0, m1, m2;
    uint64_t ids[] = {pin(10), pin(11), pin(12)}; /* pin(11) exists */
    make_msg(&m0, 0, JOB_A, 0, BW_OP_CREATE, ids, 3, "fine");
    char long_title[400];
    memset(long_title, 'x', sizeof(long_title) - 1);
    long_title[sizeof(long_title) - 1] = '\0';
    uint64_t too_long[] = {pin(13)};
    make_msg(&m1, 1, JOB_A, 1, BW_OP_CREATE, too_long, 1, long_title); /* title is VARCHAR(255) */
    memset(&m2, 0, sizeof(m2));
    memcpy(m2.buf, "\xff\xff garbage", 10);
    m2.m.payload = m2.buf;
    m2.m.len = 10;
    m2.m.offset = 2;
    bw_apply_result_t res;
    apply((msg_t *[]){&m0, &m1, &m2}, 3, &res);
    ck_assert_uint_eq(res.rows_applied, 2);
    ck_assert_uint_eq(res.rows_failed, 2);
    ck_assert_int_eq(res.next_offset, 3); /* the undecodable message is passed, not retried forever */
    ck_assert_int_eq(scalar("SELECT COUNT(*) FROM bwapply00000.pins"), 3);
    ck_assert_int_eq(scalar("SELECT COUNT(*) FROM bwapply00000.pins WHERE id IN (68719476746, 68719476748)"), 2);
    ck_assert_int_eq(scalar("SELECT owner_id FROM bwapply00000.pins WHERE id = 68719476747"), 1);
    ck_assert_int_eq(scalar("SELECT error_code FROM bwapply00000.bw_job_failures WHERE job_id = '" JOB_A
                            "' AND part = 0 AND op_index = 1 AND object_id = 68719476747"
                            " AND reason LIKE 'Duplicate entry%'"),
                     1062);
    ck_assert_int_eq(scalar("SELECT error_code FROM bwapply00000.bw_job_failures WHERE job_id = '" JOB_A
                            "' AND part = 1 AND reason LIKE 'Data too long%'"),
                     1406);
    /* each failure keeps its op, as the API takes it (a create with a shard_key back to its shard) */
    ck_assert_int_eq(scalar("SELECT COUNT(*) FROM bwapply00000.bw_job_failures WHERE object_id = 68719476747"
                            " AND op_truncated = 0 AND JSON_VALUE(op, '$.op') = 'create'"
                            " AND JSON_VALUE(op, '$.id') = '68719476747' AND JSON_VALUE(op, '$.shard_key') = '68719476747'"
                            " AND JSON_VALUE(op, '$.object_type') = 'pin'"),
                     1);
    ck_assert_int_eq(scalar("SELECT rows_failed FROM bwapply00000.bw_job_parts WHERE job_id = '" JOB_A "' AND part = 0"), 1);
    ck_assert_int_eq(scalar("SELECT rows_applied FROM bwapply00000.bw_job_parts WHERE job_id = '" JOB_A "' AND part = 0"), 2);
    teardown();
}
END_TEST

/* Increments of one pin from two jobs are summed into one row each (pins sets
 * coalesce_increments): one UPDATE statement, exact sums, each part's count exact. A sum
 * the server refuses is taken apart: its ops apply one by one, and only the one that
 * overflows fails. */
START_TEST(increments_are_summed_and_refused_sums_fail_op_by_op) {
    if (!setup()) return;
    ck_assert(conf->object_types[0].coalesce_increments);
    static msg_t m0, m1, m2, m3;
    uint64_t creates[] = {pin(1), pin(2), pin(3), pin(4)};
    uint64_t b[16], c[16];
    for (int i = 0; i < 16; i++) {
        b[i] = pin(i % 3 == 0 ? 1 : i % 3 == 1 ? 2 : 3); /* 1: 6 times, 2: 5, 3: 5 */
        c[i] = pin(i % 2 ? 1 : 4);                     /* 1: 8 times, 4: 8 */
    }
    make_msg(&m0, 0, JOB_A, 0, BW_OP_CREATE, creates, 4, "t");
    make_msg(&m1, 1, JOB_B, 0, BW_OP_UPDATE, b, 16, NULL);
    make_msg(&m2, 2, JOB_C, 0, BW_OP_UPDATE, c, 16, NULL);
    bw_apply_result_t res;
    apply((msg_t *[]){&m0, &m1, &m2}, 3, &res);
    ck_assert_uint_eq(res.rows_applied, 36);
    ck_assert_uint_eq(res.rows_failed, 0);
    ck_assert_uint_eq(res.rows_coalesced, 28);
    ck_assert_uint_eq(res.statements, 2); /* the creates, and one UPDATE of 4 rows */
    ck_assert_int_eq(scalar("SELECT like_count FROM bwapply00000.pins WHERE id = 68719476737"), 14);
    ck_assert_int_eq(scalar("SELECT like_count FROM bwapply00000.pins WHERE id = 68719476738"), 5);
    ck_assert_int_eq(scalar("SELECT like_count FROM bwapply00000.pins WHERE id = 68719476739"), 5);
    ck_assert_int_eq(scalar("SELECT like_count FROM bwapply00000.pins WHERE id = 68719476740"), 8);
    ck_assert_int_eq(scalar("SELECT rows_applied FROM bwapply00000.bw_job_parts WHERE job_id = '" JOB_B "'"), 16);
    ck_assert_int_eq(scalar("SELECT rows_applied FROM bwapply00000.bw_job_parts WHERE job_id = '" JOB_C "'"), 16);
    /* a replay of the same messages adds nothing */
    apply((msg_t *[]){&m1, &m2}, 2, &res);
    ck_assert_uint_eq(res.rows_applied, 0);
    ck_assert_int_eq(scalar("SELECT like_count FROM bwapply00000.pins WHERE id = 68719476737"), 14);

    ck_assert(mysql_query(db, "UPDATE bwapply00000.pins SET like_count = 9223372036854775806 WHERE id = 68719476737") == 0);
    uint64_t d[] = {pin(1), pin(1), pin(2)};
    make_msg(&m3, 3, JOB_D, 0, BW_OP_UPDATE, d, 3, NULL);
    apply((msg_t *[]){&m3}, 1, &res);
    ck_assert_uint_eq(res.rows_applied, 2);
    ck_assert_uint_eq(res.rows_failed, 1);
    ck_assert_int_eq(scalar("SELECT like_count = 9223372036854775807 FROM bwapply00000.pins WHERE id = 68719476737"), 1);
    ck_assert_int_eq(scalar("SELECT like_count FROM bwapply00000.pins WHERE id = 68719476738"), 6);
    ck_assert_int_eq(scalar("SELECT op_index FROM bwapply00000.bw_job_failures WHERE job_id = '" JOB_D
                            "' AND error_code = 1690"),
                     1);
    ck_assert_int_eq(scalar("SELECT rows_applied FROM bwapply00000.bw_job_parts WHERE job_id = '" JOB_D "'"), 2);
    ck_assert_int_eq(scalar("SELECT rows_failed FROM bwapply00000.bw_job_parts WHERE job_id = '" JOB_D "'"), 1);
    teardown();
}
END_TEST

/* A dropped column stops the shard: the batch is kept (retry with BW_FAIL_STOP), nothing
 * is recorded as failed, the offset does not move; with the column back it applies. */
/* A message that is not where the ledger says the next one is stops the shard: nothing of
 * the batch commits, and the error names the offsets not read. */
START_TEST(offset_gap_stops_never_skips) {
    if (!setup()) return;
    static msg_t m0, m1, m2, m3, m4, m5;
    uint64_t creates[] = {pin(31)}, more[] = {pin(32)}, again[] = {pin(33)}, last[] = {pin(34)};
    bw_apply_result_t res;
    rd_kafka_message_t *ms[3];
    /* nothing applied yet: the first message may be anywhere, but the next must follow it */
    make_msg(&m0, 7, JOB_A, 0, BW_OP_CREATE, creates, 1, "a");
    make_msg(&m1, 9, JOB_A, 1, BW_OP_CREATE, more, 1, "b");
    ms[0] = &m0.m, ms[1] = &m1.m;
    bw_applier_apply(&ap, 0, -1, ms, 2, &res);
    ck_assert_int_eq(res.status, BW_APPLY_RETRY);
    ck_assert_int_eq(res.fail, BW_FAIL_STOP);
    ck_assert_msg(strstr(res.error, "offset 9 of partition 0 was read where 8 comes next: offsets 8 to 8 were not read"),
                  "error: %s", res.error);
    ck_assert_int_eq(scalar("SELECT COUNT(*) FROM bwapply00000.pins"), 0); /* not even offset 7's row */
    ck_assert_int_eq(scalar("SELECT COUNT(*) FROM bwapply00000.bw_offsets"), 0);
    apply((msg_t *[]){&m0}, 1, &res);
    ck_assert_int_eq(res.next_offset, 8);
    /* the ledger says 8: a batch starting at 9, or a replay of 7 followed by 9, stops */
    bw_applier_apply(&ap, 0, -1, (rd_kafka_message_t *[]){&m1.m}, 1, &res);
    ck_assert_int_eq(res.fail, BW_FAIL_STOP);
    ck_assert_msg(strstr(res.error, "where 8 comes next (the shard's ledger): offsets 8 to 8"), "error: %s", res.error);
    ms[0] = &m0.m, ms[1] = &m1.m;
    bw_applier_apply(&ap, 0, -1, ms, 2, &res);
    ck_assert_int_eq(res.status, BW_APPLY_RETRY);
    ck_assert_int_eq(res.fail, BW_FAIL_STOP);
    ck_assert_uint_eq(res.messages_skipped, 0);
    make_msg(&m2, 12, JOB_B, 0, BW_OP_CREATE, again, 1, "c");
    bw_applier_apply(&ap, 0, -1, (rd_kafka_message_t *[]){&m2.m}, 1, &res);
    ck_assert_msg(strstr(res.error, "offsets 8 to 11 were not read"), "error: %s", res.error);
    ck_assert_int_eq(scalar("SELECT next_offset FROM bwapply00000.bw_offsets"), 8);
    ck_assert_int_eq(scalar("SELECT COUNT(*) FROM bwapply00000.pins"), 1);
    /* read from the right place, the same rows apply, each once */
    make_msg(&m3, 8, JOB_A, 1, BW_OP_CREATE, more, 1, "b");
    make_msg(&m4, 9, JOB_B, 0, BW_OP_CREATE, again, 1, "c");
    make_msg(&m5, 10, JOB_C, 0, BW_OP_CREATE, last, 1, "d");
    apply((msg_t *[]){&m0, &m3, &m4, &m5}, 4, &res);
    ck_assert_uint_eq(res.messages_skipped, 1);
    ck_assert_int_eq(res.next_offset, 11);
    ck_assert_int_eq(scalar("SELECT COUNT(*) FROM bwapply00000.pins"), 4);
    ck_assert_int_eq(scalar("SELECT next_offset FROM bwapply00000.bw_offsets"), 11);
    teardown();
}
END_TEST

/* A ledger behind what this consumer applied there (the database is an older copy: a
 * promoted replica, a restored backup) commits nothing and answers where to fetch again;
 * a ledger without the row at all sends it to the log's beginning. */
START_TEST(ledger_behind_rewinds) {
    if (!setup()) return;
    static msg_t m0, m1;
    uint64_t first[] = {pin(41)}, later[] = {pin(42)};
    bw_apply_result_t res;
    make_msg(&m0, 0, JOB_A, 0, BW_OP_CREATE, first, 1, "a");
    apply((msg_t *[]){&m0}, 1, &res);
    ck_assert_int_eq(res.next_offset, 1);
    /* this consumer applied up to 5 elsewhere; the server it now reaches says 1 */
    make_msg(&m1, 5, JOB_B, 0, BW_OP_CREATE, later, 1, "b");
    bw_applier_apply(&ap, 0, 5, (rd_kafka_message_t *[]){&m1.m}, 1, &res);
    ck_assert_int_eq(res.status, BW_APPLY_REWIND);
    ck_assert_int_eq(res.next_offset, 1);
    ck_assert_msg(strstr(res.error, "says offset 1 comes next, behind 5 this consumer applied"), "error: %s", res.error);
    ck_assert_int_eq(scalar("SELECT COUNT(*) FROM bwapply00000.pins"), 1);
    ck_assert_int_eq(scalar("SELECT next_offset FROM bwapply00000.bw_offsets"), 1);
    /* the same ledger, asked with what it says itself: no rewind (the hole then stops it) */
    bw_applier_apply(&ap, 0, 1, (rd_kafka_message_t *[]){&m1.m}, 1, &res);
    ck_assert_int_eq(res.status, BW_APPLY_RETRY);
    ck_assert_int_eq(res.fail, BW_FAIL_STOP);
    /* no row at all: from the beginning */
    ck_assert_msg(mysql_query(db, "DELETE FROM bwapply00000.bw_offsets") == 0, "%s", mysql_error(db));
    bw_applier_apply(&ap, 0, 1, (rd_kafka_message_t *[]){&m1.m}, 1, &res);
    ck_assert_int_eq(res.status, BW_APPLY_REWIND);
    ck_assert_int_eq(res.next_offset, -1);
    teardown();
}
END_TEST

START_TEST(schema_drift_stops_not_dead_letters) {
    if (!setup()) return;
    static msg_t m0;
    uint64_t creates[] = {pin(21), pin(22)};
    make_msg(&m0, 0, JOB_A, 0, BW_OP_CREATE, creates, 2, "t");
    ck_assert_msg(mysql_query(db, "ALTER TABLE bwapply00000.pins DROP COLUMN title") == 0, "%s", mysql_error(db));
    bw_apply_result_t res;
    rd_kafka_message_t *ms[] = {&m0.m};
    bw_applier_apply(&ap, 0, -1, ms, 1, &res);
    ck_assert_int_eq(res.status, BW_APPLY_RETRY);
    ck_assert_int_eq(res.fail, BW_FAIL_STOP);
    ck_assert_msg(strstr(res.error, "(1054)"), "error: %s", res.error);
    ck_assert_uint_eq(res.rows_failed, 0);
    ck_assert_int_eq(scalar("SELECT COUNT(*) FROM bwapply00000.bw_job_failures"), 0);
    ck_assert_int_eq(scalar("SELECT COUNT(*) FROM bwapply00000.bw_offsets"), 0);
    ck_assert_int_eq(scalar("SELECT COUNT(*) FROM bwapply00000.pins"), 0);
    ck_assert_msg(mysql_query(db, "ALTER TABLE bwapply00000.pins ADD COLUMN title VARCHAR(255) NULL") == 0, "%s",
                  mysql_error(db));
    apply((msg_t *[]){&m0}, 1, &res);
    ck_assert_uint_eq(res.rows_applied, 2);
    ck_assert_int_eq(scalar("SELECT COUNT(*) FROM bwapply00000.pins WHERE title = 't'"), 2);
    teardown();
}
END_TEST

/* The error policy, entry by entry: data errors are the row's, the rest keep the batch. */
START_TEST(error_table) {
    static const struct {
        unsigned err;
        bw_fail_t cls;
    } want[] = {
        {1062, BW_FAIL_DATA},  {1406, BW_FAIL_DATA},  {1048, BW_FAIL_DATA},   {1366, BW_FAIL_DATA},
        {1292, BW_FAIL_DATA},  {1452, BW_FAIL_DATA},  {1690, BW_FAIL_DATA},   {4025, BW_FAIL_DATA},
        {1264, BW_FAIL_DATA},  {1265, BW_FAIL_DATA},  {1213, BW_FAIL_RETRY}, {1040, BW_FAIL_RETRY},
        {1927, BW_FAIL_RETRY}, {1205, BW_FAIL_TIMEOUT}, {1969, BW_FAIL_TIMEOUT}, {2013, BW_FAIL_TIMEOUT},
        {2006, BW_FAIL_CONNECTION}, {2002, BW_FAIL_CONNECTION}, {2003, BW_FAIL_CONNECTION},
        {2055, BW_FAIL_CONNECTION}, {1054, BW_FAIL_STOP}, {1146, BW_FAIL_STOP}, {1142, BW_FAIL_STOP},
        {1143, BW_FAIL_STOP}, {1044, BW_FAIL_STOP}, {1114, BW_FAIL_STOP}, {1021, BW_FAIL_STOP},
        {1290, BW_FAIL_STOP}, {1836, BW_FAIL_STOP}, {1153, BW_FAIL_STOP}, {1136, BW_FAIL_STOP},
        {9999, BW_FAIL_STOP}, /* unknown: stop, never dead-letter */
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        ck_assert_msg(bw_db_error_class(want[i].err) == want[i].cls, "errno %u: %s, want %s", want[i].err,
                      bw_fail_name(bw_db_error_class(want[i].err)), bw_fail_name(want[i].cls));
    /* the client library's own errors close the connection; the server's leave it usable */
    ck_assert(bw_db_error_is_client(2000) && bw_db_error_is_client(2013) && bw_db_error_is_client(2999));
    ck_assert(!bw_db_error_is_client(0) && !bw_db_error_is_client(1999) && !bw_db_error_is_client(3000));
}
END_TEST

START_TEST(dead_letter_record_carries_op_and_reason) {
    Bulkwrite__V1__Value v[4];
    Bulkwrite__Internal__V1__RowField f[4], *fp[4];
    for (int i = 0; i < 4; i++) {
        bulkwrite__v1__value__init(&v[i]);
        bulkwrite__internal__v1__row_field__init(&f[i]);
        f[i].value = &v[i];
        f[i].column = (uint32_t)i;
        fp[i] = &f[i];
    }
    v[0].kind_case = BULKWRITE__V1__VALUE__KIND_STRING_VALUE;
    v[0].string_value.data = (uint8_t *)"it's \"x\"";
    v[0].string_value.len = 8;
    v[1].kind_case = BULKWRITE__V1__VALUE__KIND_BYTES_VALUE;
    v[1].bytes_value.data = (uint8_t *)"\x00\xff";
    v[1].bytes_value.len = 2;
    v[2].kind_case = BULKWRITE__V1__VALUE__KIND_INT_VALUE;
    v[2].int_value = -5;
    f[2].increment = 1;
    v[3].kind_case = BULKWRITE__V1__VALUE__KIND_NULL_VALUE;
    Bulkwrite__Internal__V1__Row row = BULKWRITE__INTERNAL__V1__ROW__INIT;
    row.op_index = 17;
    row.id = UINT64_MAX;
    row.fields = fp;
    row.n_fields = 4;
    char *cols[] = {"title", "image", "like_count", "board_id"};
    bw_dead_letter_t r = {.job_id = JOB_A, .part = 3, .shard = 2, .offset = 99, .op = BW_OP_UPDATE,
                          .object_type = "pin", .row = &row, .columns = cols, .n_columns = 4, .error_code = 1406,
                          .error = "Data too long for column 'title' at row 1"};
    char *s = bw_dead_letter_json(&r, SIZE_MAX);
    json_error_t je;
    json_t *j = json_loads(s, 0, &je);
    ck_assert_msg(j != NULL, "not JSON: %s", s);
    ck_assert_str_eq(json_string_value(json_object_get(j, "job_id")), JOB_A);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "part")), 3);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "op_index")), 17);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "shard")), 2);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "kafka_offset")), 99);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "error_code")), 1406);
    ck_assert_str_eq(json_string_value(json_object_get(j, "error")), "Data too long for column 'title' at row 1");
    json_t *op = json_object_get(j, "op"), *fields = json_object_get(op, "fields");
    ck_assert_str_eq(json_string_value(json_object_get(op, "op")), "update");
    ck_assert_str_eq(json_string_value(json_object_get(op, "object_type")), "pin");
    ck_assert_str_eq(json_string_value(json_object_get(op, "id")), "18446744073709551615");
    ck_assert_str_eq(json_string_value(json_object_get(fields, "title")), "it's \"x\"");
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(fields, "image"), "base64")), "AP8=");
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(fields, "like_count"), "increment")), -5);
    ck_assert(json_is_null(json_object_get(fields, "board_id")));
    json_decref(j);
    free(s);
}
END_TEST

/* What jansson refuses stays in the record: an empty string or bytes value as "" (or
 * base64 ""), whether its data is NULL (protobuf-c's unpack) or points at the message
 * with length 0 (the consumer's reader, codec/pbdecode.c), and a server's message that
 * quotes bytes that are not UTF-8 (a duplicate key in a binary column), those bytes as
 * '?'. Both used to vanish from the record. */
START_TEST(dead_letter_keeps_empty_values_and_bad_text) {
    static const uint8_t payload[1] = {0};
    Bulkwrite__V1__Value v[4];
    Bulkwrite__Internal__V1__RowField f[4], *fp[4];
    for (int i = 0; i < 4; i++) {
        bulkwrite__v1__value__init(&v[i]);
        bulkwrite__internal__v1__row_field__init(&f[i]);
        f[i].value = &v[i];
        f[i].column = (uint32_t)i;
        fp[i] = &f[i];
        v[i].kind_case = i < 2 ? BULKWRITE__V1__VALUE__KIND_STRING_VALUE : BULKWRITE__V1__VALUE__KIND_BYTES_VALUE;
    }
    v[0].string_value = (ProtobufCBinaryData){0, NULL};
    v[1].string_value = (ProtobufCBinaryData){0, (uint8_t *)payload};
    v[2].bytes_value = (ProtobufCBinaryData){0, NULL};
    v[3].bytes_value = (ProtobufCBinaryData){0, (uint8_t *)payload};
    Bulkwrite__Internal__V1__Row row = BULKWRITE__INTERNAL__V1__ROW__INIT;
    row.id = 5;
    row.fields = fp;
    row.n_fields = 4;
    char *cols[] = {"title", "description", "image", "thumbnail"};
    bw_dead_letter_t r = {.shard = 0, .op = BW_OP_CREATE, .object_type = "pin", .row = &row, .columns = cols,
                          .n_columns = 4, .error_code = 1062, .error = "Duplicate entry '\xff\xfe caf\xc3\xa9' for key 'PRIMARY'"};
    char *s = bw_dead_letter_json(&r, SIZE_MAX);
    json_error_t je;
    json_t *j = json_loads(s, 0, &je);
    ck_assert_msg(j != NULL, "not JSON: %s", s);
    ck_assert_msg(json_is_string(json_object_get(j, "error")), "no error in %s", s);
    ck_assert_str_eq(json_string_value(json_object_get(j, "error")), "Duplicate entry '?? caf\xc3\xa9' for key 'PRIMARY'");
    json_t *fields = json_object_get(json_object_get(j, "op"), "fields");
    ck_assert_uint_eq(json_object_size(fields), 4);
    for (int i = 0; i < 4; i++) {
        json_t *x = json_object_get(fields, cols[i]);
        if (i < 2) ck_assert_msg(json_is_string(x) && !strcmp(json_string_value(x), ""), "%s in %s", cols[i], s);
        else ck_assert_msg(json_is_string(json_object_get(x, "base64")) &&
                               !strcmp(json_string_value(json_object_get(x, "base64")), ""),
                           "%s in %s", cols[i], s);
    }
    json_decref(j);
    free(s);
}
END_TEST

/* One message of `n` pin creates on shard 0, each with owner_id 7 and an image of
 * image_len bytes (byte i of row r is r + i), in a heap buffer the caller frees. */
static void make_image_msg(rd_kafka_message_t *m, int64_t offset, const char *job, uint32_t part,
                           const uint64_t *ids, size_t n, size_t image_len) {
    Bulkwrite__V1__Value own[64], img[64];
    Bulkwrite__Internal__V1__RowField fo[64], fi[64], *fp[64][2];
    Bulkwrite__Internal__V1__Row rows[64], *rp[64];
    uint8_t *images = malloc(n * image_len);
    ck_assert_uint_le(n, 64);
    for (size_t r = 0; r < n; r++) {
        for (size_t i = 0; i < image_len; i++) images[r * image_len + i] = (uint8_t)(r + i);
        bulkwrite__internal__v1__row__init(&rows[r]);
        bulkwrite__v1__value__init(&own[r]);
        bulkwrite__v1__value__init(&img[r]);
        bulkwrite__internal__v1__row_field__init(&fo[r]);
        bulkwrite__internal__v1__row_field__init(&fi[r]);
        own[r].kind_case = BULKWRITE__V1__VALUE__KIND_INT_VALUE;
        own[r].int_value = 7;
        img[r].kind_case = BULKWRITE__V1__VALUE__KIND_BYTES_VALUE;
        img[r].bytes_value = (ProtobufCBinaryData){image_len, images + r * image_len};
        fo[r].column = 0;
        fo[r].value = &own[r];
        fi[r].column = 1;
        fi[r].value = &img[r];
        fp[r][0] = &fo[r];
        fp[r][1] = &fi[r];
        rows[r].op_index = (uint32_t)r;
        rows[r].id = ids[r];
        rows[r].fields = fp[r];
        rows[r].n_fields = 2;
        rp[r] = &rows[r];
    }
    char *cols[] = {"owner_id", "image"};
    Bulkwrite__Internal__V1__ShardBatch sb = BULKWRITE__INTERNAL__V1__SHARD_BATCH__INIT;
    sb.job_id = (char *)job;
    sb.part = part;
    sb.object_type = "pin";
    sb.op = BULKWRITE__V1__OP_TYPE__CREATE;
    sb.columns = cols;
    sb.n_columns = 2;
    sb.rows = rp;
    sb.n_rows = n;
    memset(m, 0, sizeof(*m));
    m->payload = malloc(bulkwrite__internal__v1__shard_batch__get_packed_size(&sb));
    m->len = bulkwrite__internal__v1__shard_batch__pack(&sb, m->payload);
    m->offset = offset;
    free(images);
}

/* Sets the server's max_allowed_packet for connections made from now on (the applier
 * reconnects); returns the previous value. */
static long long set_max_packet(long long v) {
    long long old = scalar("SELECT @@GLOBAL.max_allowed_packet");
    char q[96];
    snprintf(q, sizeof(q), "SET GLOBAL max_allowed_packet = %lld", v);
    ck_assert_msg(mysql_query(db, q) == 0, "%s: %s", q, mysql_error(db));
    bw_applier_destroy(&ap);
    bw_applier_init(&ap, conf, metrics, NULL);
    return old;
}

static long long session_status(MYSQL *c, const char *name) {
    char q[128];
    snprintf(q, sizeof(q), "SHOW SESSION STATUS LIKE '%s'", name);
    ck_assert_msg(mysql_query(c, q) == 0, "%s: %s", q, mysql_error(c));
    MYSQL_RES *r = mysql_store_result(c);
    MYSQL_ROW row = mysql_fetch_row(r);
    long long v = row ? atoll(row[1]) : -1;
    mysql_free_result(r);
    return v;
}

/* 48 rows of 6 KB images (12 KB of SQL each) against a 64 KiB max_allowed_packet: one
 * transaction of many statements, each under 3/4 of the limit, every byte in place. */
START_TEST(statements_split_by_bytes_in_one_transaction) {
    if (!setup()) return;
    long long old = set_max_packet(65536);
    rd_kafka_message_t m[4], *ms[4];
    uint64_t ids[12];
    for (int k = 0; k < 4; k++) {
        for (int r = 0; r < 12; r++) ids[r] = pin(100 + (uint64_t)(k * 12 + r));
        make_image_msg(&m[k], k, JOB_A, (uint32_t)k, ids, 12, 6000);
        ms[k] = &m[k];
    }
    bw_apply_result_t res;
    bw_applier_apply(&ap, 0, -1, ms, 4, &res);
    set_max_packet(old);
    ck_assert_msg(res.status == BW_APPLY_OK, "apply failed: %s", res.error);
    ck_assert_uint_eq(res.rows_applied, 48);
    ck_assert_uint_eq(res.rows_failed, 0);
    ck_assert_int_eq(scalar("SELECT COUNT(*) FROM bwapply00000.pins WHERE LENGTH(image) = 6000"), 48);
    /* row 5 of message 2: byte i is 5 + i */
    ck_assert_int_eq(scalar("SELECT ASCII(SUBSTRING(image, 1, 1)) + 256 * ASCII(SUBSTRING(image, 300, 1)) "
                            "FROM bwapply00000.pins WHERE id = 68719476865"),
                     5 + 256 * ((5 + 299) & 255));
    ck_assert_int_eq(scalar("SELECT next_offset FROM bwapply00000.bw_offsets"), 4);
    for (int k = 0; k < 4; k++) free(m[k].payload);
    teardown();
}
END_TEST

/* The same split, watched from the applier's own session: several INSERTs, one COMMIT. */
START_TEST(split_statements_share_one_commit) {
    if (!setup()) return;
    long long old = set_max_packet(65536);
    rd_kafka_message_t m, *ms[] = {&m};
    uint64_t ids[20];
    for (int r = 0; r < 20; r++) ids[r] = pin(200 + (uint64_t)r);
    make_image_msg(&m, 0, JOB_B, 0, ids, 20, 6000);
    bw_apply_result_t res;
    bw_applier_apply(&ap, 0, -1, ms, 1, &res);
    ck_assert_msg(res.status == BW_APPLY_OK, "apply failed: %s", res.error);
    MYSQL *c = ap.conns[0].db;
    ck_assert_ptr_nonnull(c);
    ck_assert_uint_eq(ap.conns[0].max_packet, 65536);
    /* 20 rows of ~12 KB under a 48 KiB budget: at least 6 statements of pins, plus the
     * ledger's two inserts; one commit */
    long long inserts = session_status(c, "Com_insert"), commits = session_status(c, "Com_commit");
    set_max_packet(old);
    ck_assert_msg(inserts >= 8, "Com_insert %lld", inserts);
    ck_assert_int_eq(commits, 1);
    ck_assert_int_eq(scalar("SELECT COUNT(*) FROM bwapply00000.pins"), 20);
    free(m.payload);
    teardown();
}
END_TEST

/* A row whose statement alone is over max_allowed_packet fails alone, as a data error
 * naming its size and the limit; the rows around it land. */
START_TEST(row_over_max_packet_fails_alone) {
    if (!setup()) return;
    long long old = set_max_packet(65536);
    rd_kafka_message_t m[3], *ms[3];
    uint64_t a[] = {pin(300), pin(301)}, big[] = {pin(302)}, c[] = {pin(303)};
    make_image_msg(&m[0], 0, JOB_A, 0, a, 2, 1000);
    make_image_msg(&m[1], 1, JOB_A, 1, big, 1, 40000); /* 80 KB of hex */
    make_image_msg(&m[2], 2, JOB_A, 2, c, 1, 1000);
    for (int k = 0; k < 3; k++) ms[k] = &m[k];
    bw_apply_result_t res;
    bw_applier_apply(&ap, 0, -1, ms, 3, &res);
    set_max_packet(old);
    ck_assert_msg(res.status == BW_APPLY_OK, "apply failed: %s", res.error);
    ck_assert_uint_eq(res.rows_applied, 3);
    ck_assert_uint_eq(res.rows_failed, 1);
    ck_assert_int_eq(res.next_offset, 3);
    ck_assert_int_eq(scalar("SELECT COUNT(*) FROM bwapply00000.pins"), 3);
    ck_assert_int_eq(scalar("SELECT error_code FROM bwapply00000.bw_job_failures WHERE object_id = 68719477038"
                            " AND reason LIKE 'row too large: its statement is 80% bytes, over the server''s "
                            "max_allowed_packet (65536)'"),
                     1153);
    /* its op is kept without the 80 KB value (a quarter of the statement budget at most), marked so */
    ck_assert_int_eq(scalar("SELECT op_truncated FROM bwapply00000.bw_job_failures WHERE object_id = 68719477038"), 1);
    ck_assert_int_le(scalar("SELECT LENGTH(op) FROM bwapply00000.bw_job_failures WHERE object_id = 68719477038"),
                     65536 / 100 * 75 / 4);
    for (int k = 0; k < 3; k++) free(m[k].payload);
    teardown();
}
END_TEST

/* Whatever the rows, the planned bound is never below what bw_sql_build writes, and a
 * smaller budget takes fewer rows (0 when the first alone does not fit). */
START_TEST(statement_bound_covers_the_statement) {
    if (!setup()) return;
    const bw_object_type_t *ot = bw_config_object_type(conf, "pin");
    rd_kafka_message_t m;
    uint64_t ids[10];
    for (int r = 0; r < 10; r++) ids[r] = pin(400 + (uint64_t)r);
    make_image_msg(&m, 0, JOB_A, 0, ids, 10, 3000);
    Bulkwrite__Internal__V1__ShardBatch *sb = bulkwrite__internal__v1__shard_batch__unpack(NULL, m.len, m.payload);
    /* text full of what escapes doubles: quotes, backslashes, NULs */
    Bulkwrite__V1__Value title = BULKWRITE__V1__VALUE__INIT;
    title.kind_case = BULKWRITE__V1__VALUE__KIND_STRING_VALUE;
    title.string_value = (ProtobufCBinaryData){5, (uint8_t *)"'\\\"\0x"};
    Bulkwrite__Internal__V1__RowField tf = BULKWRITE__INTERNAL__V1__ROW_FIELD__INIT, *fields[10][3];
    tf.column = 2;
    tf.value = &title;
    int colmap[] = {0, 5, 2};
    bw_sql_row_t rows[10];
    for (int r = 0; r < 10; r++) {
        fields[r][0] = sb->rows[r]->fields[0];
        fields[r][1] = sb->rows[r]->fields[1];
        fields[r][2] = &tf;
        rows[r] = (bw_sql_row_t){sb->rows[r]->id, 3, fields[r], colmap};
    }
    bw_buf_t b;
    bw_buf_init(&b);
    for (int op = BW_OP_CREATE; op <= BW_OP_DELETE; op++) {
        size_t bound = 0, k = bw_sql_plan_bytes(ot, op, "bwapply00000", rows, 10, SIZE_MAX, &bound);
        ck_assert_uint_eq(k, 10);
        bw_sql_build(&b, "bwapply00000", ot, op, rows, k);
        ck_assert_msg(b.len <= bound, "%s: %zu bytes, bound %zu", bw_op_name(op), b.len, bound);
        ck_assert_uint_lt(bw_sql_plan_bytes(ot, op, "bwapply00000", rows, 10, bound - 1, NULL), 10);
        size_t one = 0;
        bw_sql_plan_bytes(ot, op, "bwapply00000", rows, 1, SIZE_MAX, &one);
        ck_assert_uint_eq(bw_sql_plan_bytes(ot, op, "bwapply00000", rows, 10, one - 1, &bound), 0);
        ck_assert_uint_eq(bound, one); /* the lone row's bound, for the caller's decision */
    }
    bw_buf_free(&b);
    bulkwrite__internal__v1__shard_batch__free_unpacked(sb, NULL);
    free(m.payload);
    teardown();
}
END_TEST

static void apply_one(uint64_t local, int64_t offset, bw_apply_result_t *res) {
    static msg_t m;
    uint64_t ids[] = {pin(local)};
    make_msg(&m, offset, JOB_C, (uint32_t)offset, BW_OP_CREATE, ids, 1, "r");
    rd_kafka_message_t *ms[] = {&m.m};
    bw_applier_apply(&ap, 0, -1, ms, 1, res);
}

/* A connection the server closed under the applier (KILL, wait_timeout) is replaced at
 * once: the batch applies, no failure kind, no retry; the ping after idling finds it
 * too. Only a fresh connection that fails is a connection failure. */
START_TEST(reaped_connection_is_replaced_without_error) {
    if (!setup()) return;
    bw_apply_result_t res;
    apply_one(500, 0, &res);
    ck_assert_msg(res.status == BW_APPLY_OK, "apply failed: %s", res.error);
    ck_assert_uint_eq(res.reconnects, 0);

    /* killed between batches: found by the batch's first statement */
    char q[64];
    snprintf(q, sizeof(q), "KILL CONNECTION %lu", mysql_thread_id(ap.conns[0].db));
    ck_assert_msg(mysql_query(db, q) == 0, "%s: %s", q, mysql_error(db));
    apply_one(501, 1, &res);
    ck_assert_msg(res.status == BW_APPLY_OK && res.fail == BW_FAIL_NONE, "apply failed: %s", res.error);
    ck_assert_uint_eq(res.reconnects, 1);

    /* reaped by wait_timeout while idle: found by the ping before use */
    conf->connection_check_idle_ms = 0;
    ck_assert_msg(mysql_query(ap.conns[0].db, "SET SESSION wait_timeout = 1") == 0, "%s", mysql_error(ap.conns[0].db));
    sleep(3);
    apply_one(502, 2, &res);
    ck_assert_msg(res.status == BW_APPLY_OK && res.fail == BW_FAIL_NONE, "apply failed: %s", res.error);
    ck_assert_uint_eq(res.reconnects, 1);
    ck_assert_int_eq(scalar("SELECT COUNT(*) FROM bwapply00000.pins"), 3);

    /* closed after connection_idle_close_ms idle, and not before */
    ck_assert_int_eq(bw_applier_close_idle(&ap, bw_now_us()), 0);
    ck_assert_int_eq(bw_applier_close_idle(&ap, bw_now_us() + (int64_t)conf->connection_idle_close_ms * 1000), 1);
    ck_assert_ptr_null(ap.conns[0].db);

    /* a fresh connection that fails is a connection failure, counted by the caller */
    int port = conf->servers[0].port;
    conf->servers[0].port = 1;
    apply_one(503, 3, &res);
    conf->servers[0].port = port;
    ck_assert_int_eq(res.status, BW_APPLY_RETRY);
    ck_assert_int_eq(res.fail, BW_FAIL_CONNECTION);
    ck_assert_uint_eq(res.reconnects, 0);
    teardown();
}
END_TEST

/* A malformed batch (a field naming column 5 of 2) fails its ops as "column index out of
 * range", and their dead letters are written from the same batch: the field without a
 * column is left out (it used to be read past the batch's column list), and the op is
 * marked truncated, since it cannot be sent again as it is. */
START_TEST(dead_letter_skips_field_past_columns) {
    Bulkwrite__V1__Value v[2];
    Bulkwrite__Internal__V1__RowField f[2], *fp[2];
    for (int i = 0; i < 2; i++) {
        bulkwrite__v1__value__init(&v[i]);
        bulkwrite__internal__v1__row_field__init(&f[i]);
        v[i].kind_case = BULKWRITE__V1__VALUE__KIND_INT_VALUE;
        v[i].int_value = 10 + i;
        f[i].value = &v[i];
        fp[i] = &f[i];
    }
    f[0].column = 1;
    f[1].column = 5;
    Bulkwrite__Internal__V1__Row row = BULKWRITE__INTERNAL__V1__ROW__INIT;
    row.id = 9;
    row.fields = fp;
    row.n_fields = 2;
    char *cols[] = {"title", "owner_id"};
    bw_dead_letter_t r = {.job_id = JOB_A, .object_type = "pin", .op = BW_OP_UPDATE, .row = &row, .columns = cols,
                          .n_columns = 2, .error = "column index out of range"};
    int truncated = 0;
    char *s = bw_dead_letter_op_json(&r, SIZE_MAX, &truncated);
    json_error_t je;
    json_t *op = json_loads(s, 0, &je);
    ck_assert_msg(op != NULL, "not JSON: %s", s);
    json_t *fields = json_object_get(op, "fields");
    ck_assert_uint_eq(json_object_size(fields), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(fields, "owner_id")), 10);
    ck_assert_int_eq(truncated, 1);
    json_decref(op);
    free(s);
    s = bw_dead_letter_json(&r, SIZE_MAX);
    ck_assert_msg((op = json_loads(s, 0, &je)) != NULL, "not JSON: %s", s);
    ck_assert(json_is_true(json_object_get(op, "truncated")));
    json_decref(op);
    free(s);
}
END_TEST

/* A record over the producer's limit carries each long value truncated, with its
 * length and sha256, and fits; so does an undecodable message's payload. */
START_TEST(dead_letter_truncated_to_fit) {
    size_t n = 200000;
    uint8_t *ctl = malloc(n);
    memset(ctl, 1, n); /* each escapes to \u0001: 1.2 MB of JSON */
    Bulkwrite__V1__Value v[2];
    Bulkwrite__Internal__V1__RowField f[2], *fp[2];
    for (int i = 0; i < 2; i++) {
        bulkwrite__v1__value__init(&v[i]);
        bulkwrite__internal__v1__row_field__init(&f[i]);
        f[i].value = &v[i];
        f[i].column = (uint32_t)i;
        fp[i] = &f[i];
    }
    v[0].kind_case = BULKWRITE__V1__VALUE__KIND_STRING_VALUE;
    v[0].string_value = (ProtobufCBinaryData){n, ctl};
    v[1].kind_case = BULKWRITE__V1__VALUE__KIND_INT_VALUE;
    v[1].int_value = 7;
    Bulkwrite__Internal__V1__Row row = BULKWRITE__INTERNAL__V1__ROW__INIT;
    row.id = 42;
    row.fields = fp;
    row.n_fields = 2;
    char *cols[] = {"description", "owner_id"};
    bw_dead_letter_t r = {.job_id = JOB_A, .object_type = "pin", .op = BW_OP_CREATE, .row = &row,
                          .columns = cols, .n_columns = 2, .error_code = 1406, .error = "Data too long"};
    bw_config_t *c = t_ref_config();
    size_t max = bw_dead_letter_max_bytes(c);
    ck_assert_uint_lt(max, (size_t)c->message_max_bytes);
    char *whole = bw_dead_letter_json(&r, SIZE_MAX);
    ck_assert_uint_gt(strlen(whole), 1000000);
    free(whole);
    char *s = bw_dead_letter_json(&r, max);
    ck_assert_uint_le(strlen(s), max);
    json_error_t je;
    json_t *j = json_loads(s, 0, &je);
    ck_assert_msg(j != NULL, "not JSON: %.200s", s);
    ck_assert(json_is_true(json_object_get(j, "truncated")));
    json_t *fields = json_object_get(json_object_get(j, "op"), "fields");
    json_t *t = json_object_get(json_object_get(fields, "description"), "truncated");
    ck_assert_int_eq(json_integer_value(json_object_get(t, "length")), 200000);
    /* sha256 of 200,000 bytes 0x01, by Python's hashlib */
    ck_assert_str_eq(json_string_value(json_object_get(t, "sha256")),
                     "6015fcd09f3f14b7da9d89cb95f1e4ee007948bc7cf9a59be8163c3460e4f954");
    ck_assert_uint_eq(json_string_length(json_object_get(t, "prefix")), 1024);
    ck_assert_int_eq(json_integer_value(json_object_get(fields, "owner_id")), 7); /* short values stay */
    json_decref(j);
    free(s);

    /* a tiny limit: no prefix, then no fields; still JSON with the op's identity */
    s = bw_dead_letter_json(&r, 300);
    ck_assert_msg((j = json_loads(s, 0, &je)) != NULL, "not JSON: %s", s);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "op"), "id")), "42");
    json_decref(j);
    free(s);

    uint8_t *payload = calloc(1, 900000); /* base64: 1.2 MB */
    bw_dead_letter_t raw = {.shard = 1, .offset = 9, .error = "not a bulkwrite.internal.v1.ShardBatch", .raw = payload,
                            .raw_len = 900000};
    s = bw_dead_letter_json(&raw, max);
    ck_assert_uint_le(strlen(s), max);
    ck_assert_msg((j = json_loads(s, 0, &je)) != NULL, "not JSON");
    ck_assert_int_eq(json_integer_value(json_object_get(j, "payload_length")), 900000);
    ck_assert_uint_eq(strlen(json_string_value(json_object_get(j, "payload_sha256"))), 64);
    json_decref(j);
    free(s);
    bw_config_destroy(c);
    free(payload);
    free(ctl);
}
END_TEST

Suite *apply_suite(void) {
    Suite *s = suite_create("apply");
    TCase *tc = tcase_create("apply");
    tcase_add_test(tc, replays_and_resubmissions_apply_once);
    tcase_add_test(tc, data_errors_fail_alone_and_are_recorded);
    tcase_add_test(tc, increments_are_summed_and_refused_sums_fail_op_by_op);
    tcase_add_test(tc, dead_letter_record_carries_op_and_reason);
    tcase_add_test(tc, dead_letter_keeps_empty_values_and_bad_text);
    tcase_add_test(tc, schema_drift_stops_not_dead_letters);
    tcase_add_test(tc, offset_gap_stops_never_skips);
    tcase_add_test(tc, ledger_behind_rewinds);
    tcase_add_test(tc, error_table);
    tcase_add_test(tc, statements_split_by_bytes_in_one_transaction);
    tcase_add_test(tc, split_statements_share_one_commit);
    tcase_add_test(tc, row_over_max_packet_fails_alone);
    tcase_add_test(tc, statement_bound_covers_the_statement);
    tcase_add_test(tc, reaped_connection_is_replaced_without_error);
    tcase_add_test(tc, dead_letter_truncated_to_fit);
    tcase_add_test(tc, dead_letter_skips_field_past_columns);
    suite_add_tcase(s, tc);
    return s;
}
