/* test_apply.c — the consumer's apply transaction against a live MariaDB: replays are
 * skipped by offset, resubmitted parts by (job_id, part), data errors fail alone and are
 * recorded on their job; and the dead-letter record's JSON. */
#include <inttypes.h>
#include <jansson.h>
#include <mysql.h>
#include <stdlib.h>
#include <string.h>

#include "apply.h"
#include "db.h"
#include "deadletter.h"
#include "helpers.h"
#include "shard.h"

#define JOB_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define JOB_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define JOB_C "cccccccccccccccccccccccccccccccc"

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
    metrics = bw_metrics_new(conf, BW_METRICS_CONSUMER);
    bw_applier_init(&ap, conf, metrics, NULL);
    return 1;
}

static void teardown(void) {
    bw_applier_destroy(&ap);
    bw_metrics_destroy(metrics);
    mysql_close(db);
    bw_config_destroy(conf);
}

static long long scalar(const char *sql) {
    ck_assert_msg(mysql_query(db, sql) == 0, "%s: %s", sql, mysql_error(db));
    MYSQL_RES *r = mysql_store_result(db);
    MYSQL_ROW row = mysql_fetch_row(r);
    long long v = row && row[0] ? atoll(row[0]) : -1;
    mysql_free_result(r);
    return v;
}

/* A Kafka message carrying one ShardBatch of pins on shard 0. Each row: id, and either a
 * create (owner_id 7, title, like_count 0) or an increment of like_count. */
typedef struct {
    rd_kafka_message_t m;
    uint8_t buf[8192];
} msg_t;

static void make_msg(msg_t *out, int64_t offset, const char *job, uint32_t part, int op, const uint64_t *ids,
                     size_t n, const char *title) {
    Bulkwrite__V1__Value vals[16][3];
    Bulkwrite__V1__RowField fields[16][3], *fp[16][3];
    Bulkwrite__V1__Row rows[16], *rp[16];
    char *cols_create[] = {"owner_id", "title", "like_count"};
    char *cols_update[] = {"like_count"};
    for (size_t i = 0; i < n; i++) {
        bulkwrite__v1__row__init(&rows[i]);
        rows[i].op_index = (uint32_t)i;
        rows[i].id = ids[i];
        for (int f = 0; f < 3; f++) {
            bulkwrite__v1__row_field__init(&fields[i][f]);
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
    Bulkwrite__V1__ShardBatch sb = BULKWRITE__V1__SHARD_BATCH__INIT;
    sb.job_id = (char *)job;
    sb.part = part;
    sb.shard = 0;
    sb.object_type = "pin";
    sb.op = (Bulkwrite__V1__OpType)op;
    sb.columns = op == BW_OP_CREATE ? cols_create : cols_update;
    sb.n_columns = op == BW_OP_CREATE ? 3 : 1;
    sb.rows = rp;
    sb.n_rows = n;
    ck_assert_uint_le(bulkwrite__v1__shard_batch__get_packed_size(&sb), sizeof(out->buf));
    memset(&out->m, 0, sizeof(out->m));
    out->m.len = bulkwrite__v1__shard_batch__pack(&sb, out->buf);
    out->m.payload = out->buf;
    out->m.offset = offset;
}

static void apply(msg_t *const *msgs, size_t n, bw_apply_result_t *res) {
    rd_kafka_message_t *ms[8];
    for (size_t i = 0; i < n; i++) ms[i] = &msgs[i]->m;
    bw_applier_apply(&ap, 0, ms, n, res);
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
    ck_assert_int_eq(scalar("SELECT rows_failed FROM bwapply00000.bw_job_parts WHERE job_id = '" JOB_A "' AND part = 0"), 1);
    ck_assert_int_eq(scalar("SELECT rows_applied FROM bwapply00000.bw_job_parts WHERE job_id = '" JOB_A "' AND part = 0"), 2);
    teardown();
}
END_TEST

/* A dropped column stops the shard: the batch is kept (retry with BW_FAIL_STOP), nothing
 * is recorded as failed, the offset does not move; with the column back it applies. */
START_TEST(schema_drift_stops_not_dead_letters) {
    if (!setup()) return;
    static msg_t m0;
    uint64_t creates[] = {pin(21), pin(22)};
    make_msg(&m0, 0, JOB_A, 0, BW_OP_CREATE, creates, 2, "t");
    ck_assert_msg(mysql_query(db, "ALTER TABLE bwapply00000.pins DROP COLUMN title") == 0, "%s", mysql_error(db));
    bw_apply_result_t res;
    rd_kafka_message_t *ms[] = {&m0.m};
    bw_applier_apply(&ap, 0, ms, 1, &res);
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
        bw_dberr_class_t cls;
    } want[] = {
        {1062, BW_DBERR_ROW},  {1406, BW_DBERR_ROW},  {1048, BW_DBERR_ROW},   {1366, BW_DBERR_ROW},
        {1292, BW_DBERR_ROW},  {1452, BW_DBERR_ROW},  {1690, BW_DBERR_ROW},   {4025, BW_DBERR_ROW},
        {1264, BW_DBERR_ROW},  {1265, BW_DBERR_ROW},  {1213, BW_DBERR_RETRY}, {1040, BW_DBERR_RETRY},
        {1927, BW_DBERR_RETRY}, {1205, BW_DBERR_TIMEOUT}, {1969, BW_DBERR_TIMEOUT}, {2013, BW_DBERR_TIMEOUT},
        {2006, BW_DBERR_CONNECTION}, {2002, BW_DBERR_CONNECTION}, {2003, BW_DBERR_CONNECTION},
        {2055, BW_DBERR_CONNECTION}, {1054, BW_DBERR_STOP}, {1146, BW_DBERR_STOP}, {1142, BW_DBERR_STOP},
        {1143, BW_DBERR_STOP}, {1044, BW_DBERR_STOP}, {1114, BW_DBERR_STOP}, {1021, BW_DBERR_STOP},
        {1290, BW_DBERR_STOP}, {1836, BW_DBERR_STOP}, {1153, BW_DBERR_STOP}, {1136, BW_DBERR_STOP},
        {9999, BW_DBERR_STOP}, /* unknown: stop, never dead-letter */
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        ck_assert_msg(bw_db_error_class(want[i].err) == want[i].cls, "errno %u: %s, want %s", want[i].err,
                      bw_db_error_class_name(bw_db_error_class(want[i].err)), bw_db_error_class_name(want[i].cls));
}
END_TEST

START_TEST(dead_letter_record_carries_op_and_reason) {
    Bulkwrite__V1__Value v[4];
    Bulkwrite__V1__RowField f[4], *fp[4];
    for (int i = 0; i < 4; i++) {
        bulkwrite__v1__value__init(&v[i]);
        bulkwrite__v1__row_field__init(&f[i]);
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
    Bulkwrite__V1__Row row = BULKWRITE__V1__ROW__INIT;
    row.op_index = 17;
    row.id = UINT64_MAX;
    row.fields = fp;
    row.n_fields = 4;
    char *cols[] = {"title", "image", "like_count", "board_id"};
    bw_dead_letter_t r = {.job_id = JOB_A, .part = 3, .shard = 2, .offset = 99, .op = BW_OP_UPDATE,
                          .object_type = "pin", .row = &row, .columns = cols, .error_code = 1406,
                          .error = "Data too long for column 'title' at row 1"};
    char *s = bw_dead_letter_json(&r);
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

Suite *apply_suite(void) {
    Suite *s = suite_create("apply");
    TCase *tc = tcase_create("apply");
    tcase_add_test(tc, replays_and_resubmissions_apply_once);
    tcase_add_test(tc, data_errors_fail_alone_and_are_recorded);
    tcase_add_test(tc, dead_letter_record_carries_op_and_reason);
    tcase_add_test(tc, schema_drift_stops_not_dead_letters);
    tcase_add_test(tc, error_table);
    suite_add_tcase(s, tc);
    return s;
}
