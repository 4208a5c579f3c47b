/* test_ledger.c — the ledger's reads and writes round-trip on a live MariaDB: offsets
 * (bulk read, locked read, upsert), parts (dedup by (job_id, part) against the table and
 * within a batch, sums per job), failures (split by bytes, the latest reason kept, reasons
 * cut and escaped, a sample per shard). */
#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "helpers.h"
#include "ledger.h"

#define JOB_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define JOB_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

static bw_config_t *conf;
static MYSQL *db;
static bw_buf_t scratch;

static int setup(void) {
    if (!(conf = t_live_config("bwledger"))) return 0;
    char err[512];
    db = bw_db_connect(conf, 0, err, sizeof(err));
    ck_assert_msg(db != NULL, "connect: %s", err);
    const char *tables[] = {"bw_offsets", "bw_job_parts", "bw_job_failures"};
    for (int s = 0; s < 2; s++)
        for (size_t i = 0; i < 3; i++) {
            char q[128];
            snprintf(q, sizeof(q), "TRUNCATE TABLE bwledger0000%d.%s", s, tables[i]);
            ck_assert_msg(mysql_query(db, q) == 0, "%s: %s", q, mysql_error(db));
        }
    bw_buf_init(&scratch);
    return 1;
}

static void teardown(void) {
    bw_buf_free(&scratch);
    mysql_close(db);
    bw_config_destroy(conf);
}

static long long scalar(const char *sql) { return t_scalar(db, sql); }

START_TEST(schema_names_the_three_tables) {
    bw_buf_t b;
    bw_buf_init(&b);
    bw_ledger_schema_sql("db9", &b);
    ck_assert_ptr_nonnull(strstr(b.data, "CREATE TABLE IF NOT EXISTS `db9`.`bw_offsets`"));
    ck_assert_ptr_nonnull(strstr(b.data, "CREATE TABLE IF NOT EXISTS `db9`.`bw_job_parts`"));
    ck_assert_ptr_nonnull(strstr(b.data, "CREATE TABLE IF NOT EXISTS `db9`.`bw_job_failures`"));
    /* tables made before the failures kept their ops get the columns */
    ck_assert_ptr_nonnull(strstr(b.data, "ALTER TABLE `db9`.`bw_job_failures` ADD COLUMN IF NOT EXISTS op MEDIUMBLOB"));
    size_t lines = 0;
    for (const char *p = b.data; (p = strstr(p, ";\n")); p += 2) lines++;
    ck_assert_uint_eq(lines, 4);
    bw_buf_free(&b);
}
END_TEST

START_TEST(offsets_round_trip) {
    if (!setup()) return;
    int shards[] = {1, 0};
    int64_t offs[2], next = 0;
    ck_assert_uint_eq(bw_ledger_read_offsets(db, conf, shards, 2, offs, &scratch), 0);
    ck_assert_int_eq(offs[0], -1);
    ck_assert_int_eq(offs[1], -1);
    ck_assert_uint_eq(bw_ledger_lock_offset(db, conf, 0, &next, &scratch), 0);
    ck_assert_int_eq(next, -1);
    ck_assert_uint_eq(bw_ledger_write_offset(db, conf, 0, 17, &scratch), 0);
    ck_assert_uint_eq(bw_ledger_write_offset(db, conf, 0, 42, &scratch), 0); /* an update */
    ck_assert_int_eq(mysql_commit(db), 0);
    ck_assert_uint_eq(bw_ledger_lock_offset(db, conf, 0, &next, &scratch), 0);
    ck_assert_int_eq(next, 42);
    ck_assert_int_eq(mysql_rollback(db), 0);
    ck_assert_uint_eq(bw_ledger_read_offsets(db, conf, shards, 2, offs, &scratch), 0);
    ck_assert_int_eq(offs[0], -1); /* shard 1: none */
    ck_assert_int_eq(offs[1], 42);
    ck_assert_int_eq(scalar("SELECT COUNT(*) FROM bwledger00000.bw_offsets"), 1);
    teardown();
}
END_TEST

START_TEST(parts_dedup_and_sum) {
    if (!setup()) return;
    bw_ledger_part_t first[] = {
        {.job_id = JOB_A, .part = 0, .kafka_offset = 5, .rows_applied = 3, .rows_failed = 1},
        {.job_id = NULL, .part = 9, .kafka_offset = 6},                           /* ignored */
        {.job_id = JOB_A, .part = 1, .kafka_offset = 7, .rows_applied = 2},
        {.job_id = JOB_B, .part = 0, .kafka_offset = 8, .rows_applied = 4, .duplicate = 1}, /* not written */
    };
    ck_assert_uint_eq(bw_ledger_write_parts(db, conf, 0, first, 4, &scratch), 0);
    ck_assert_int_eq(mysql_commit(db), 0);
    ck_assert_int_eq(scalar("SELECT COUNT(*) FROM bwledger00000.bw_job_parts"), 2);
    ck_assert_int_eq(scalar("SELECT kafka_offset FROM bwledger00000.bw_job_parts WHERE part = 1"), 7);

    bw_ledger_part_t again[] = {
        {.job_id = JOB_A, .part = 1},  /* stored */
        {.job_id = JOB_B, .part = 0},  /* new */
        {.job_id = JOB_B, .part = 0},  /* repeats the one before */
        {.job_id = NULL},
        {.job_id = JOB_A, .part = 2},  /* new */
    };
    ck_assert_uint_eq(bw_ledger_find_applied(db, conf, 0, again, 5, &scratch), 0);
    ck_assert_int_eq(again[0].duplicate, 1);
    ck_assert_int_eq(again[1].duplicate, 0);
    ck_assert_int_eq(again[2].duplicate, 1);
    ck_assert_int_eq(again[3].duplicate, 0);
    ck_assert_int_eq(again[4].duplicate, 0);
    ck_assert_uint_eq(bw_ledger_find_applied(db, conf, 1, again, 1, &scratch), 0); /* the other shard: new */
    ck_assert_int_eq(again[0].duplicate, 0);

    bw_ledger_job_shard_t js[] = {{.shard = 1, .applied = 99}, {.shard = 0}};
    ck_assert_uint_eq(bw_ledger_read_job(db, conf, JOB_A, 0, js, 2, &scratch), 0);
    ck_assert_uint_eq(js[0].applied, 0);
    ck_assert_uint_eq(js[0].failed, 0);
    ck_assert_uint_eq(js[1].applied, 5);
    ck_assert_uint_eq(js[1].failed, 1);
    mysql_rollback(db);
    teardown();
}
END_TEST

/* A named job's parts are one range of ids: the reads sum and list all of them, and
 * nothing of another job, even one whose id sorts right next to the range. */
START_TEST(named_job_reads_every_part) {
    if (!setup()) return;
    char p0[33], p1[33], p9[33];
    bw_ledger_part_id(JOB_A, 0, p0);
    bw_ledger_part_id(JOB_A, 1, p1);
    bw_ledger_part_id(JOB_A, 0xffffffffu, p9);
    ck_assert_str_eq(p9, "aaaaaaaaaaaaaaaaaaaa0000ffffffff");
    bw_ledger_part_t parts[] = {
        {.job_id = p0, .part = 0, .kafka_offset = 1, .rows_applied = 3},
        {.job_id = p0, .part = 1, .kafka_offset = 2, .rows_applied = 1, .rows_failed = 1},
        {.job_id = p1, .part = 0, .kafka_offset = 3, .rows_applied = 5},
        {.job_id = p9, .part = 0, .kafka_offset = 4, .rows_failed = 2},
        {.job_id = "aaaaaaaaaaaaaaaaaaab000000000000", .part = 0, .kafka_offset = 5, .rows_applied = 100}, /* another job */
        {.job_id = "aaaaaaaaaaaaaaaaaaa9ffffffffffff", .part = 0, .kafka_offset = 6, .rows_applied = 100},
    };
    ck_assert_uint_eq(bw_ledger_write_parts(db, conf, 0, parts, 6, &scratch), 0);
    bw_ledger_failure_t f[] = {
        {.job_id = p9, .part = 0, .op_index = 4, .object_id = 9, .reason = "b"},
        {.job_id = p1, .part = 0, .op_index = 8, .object_id = 1, .reason = "a"},
        {.job_id = p0, .part = 1, .op_index = 2, .object_id = 2, .reason = "c"},
        {.job_id = "aaaaaaaaaaaaaaaaaaab000000000000", .part = 0, .op_index = 0, .object_id = 5, .reason = "other"},
    };
    ck_assert_uint_eq(bw_ledger_write_failures(db, conf, 0, f, 4, 1 << 20, &scratch), 0);
    ck_assert_int_eq(mysql_commit(db), 0);
    bw_ledger_job_shard_t js[] = {{.shard = 0}};
    ck_assert_uint_eq(bw_ledger_read_job(db, conf, JOB_A, 1, js, 1, &scratch), 0);
    ck_assert_uint_eq(js[0].applied, 9);
    ck_assert_uint_eq(js[0].failed, 3);
    bw_ledger_failure_t out[8];
    size_t cnt = 0;
    ck_assert_uint_eq(bw_ledger_read_job_failures(db, conf, JOB_A, 1, js, 1, 20, out, 8, &cnt, &scratch), 0);
    ck_assert_uint_eq(cnt, 3); /* by part, then op */
    ck_assert_uint_eq(out[0].job_part, 0);
    ck_assert_uint_eq(out[0].op_index, 2);
    ck_assert_uint_eq(out[1].job_part, 1);
    ck_assert_uint_eq(out[1].op_index, 8);
    ck_assert_uint_eq(out[2].job_part, 0xffffffffu);
    ck_assert_str_eq(out[2].reason, "b");
    for (size_t i = 0; i < cnt; i++) free(out[i].reason);
    /* the plain read of one part's id sees only it */
    ck_assert_uint_eq(bw_ledger_read_job(db, conf, p1, 0, js, 1, &scratch), 0);
    ck_assert_uint_eq(js[0].applied, 5);
    mysql_rollback(db);
    teardown();
}
END_TEST

/* Pages of a named job's failures: by part then op, after a cursor, of one error code,
 * with the op each was refused with (stored as written, quotes and NUL-free bytes). */
START_TEST(failure_pages_follow_the_cursor) {
    if (!setup()) return;
    char p0[33], p2[33];
    bw_ledger_part_id(JOB_A, 0, p0);
    bw_ledger_part_id(JOB_A, 2, p2);
    const char *op = "{\"op\":\"create\",\"fields\":{\"title\":\"it's \\\"quoted\\\"\"}}";
    bw_ledger_failure_t f[] = {
        {.job_id = p2, .part = 0, .op_index = 1, .object_id = 21, .error_code = 1406, .reason = "long", .op = op},
        {.job_id = p0, .part = 0, .op_index = 7, .object_id = 7, .error_code = 1062, .reason = "dup", .op = op},
        {.job_id = p0, .part = 0, .op_index = 3, .object_id = 3, .error_code = 1406, .reason = "long", .op = op,
         .op_truncated = 1},
        {.job_id = p2, .part = 0, .op_index = 0, .object_id = 20, .error_code = 1406, .reason = "long"},
        {.job_id = "aaaaaaaaaaaaaaaaaaab000000000000", .part = 0, .op_index = 0, .object_id = 5, .reason = "other"},
    };
    ck_assert_uint_eq(bw_ledger_write_failures(db, conf, 0, f, 5, 1 << 20, &scratch), 0);
    bw_ledger_failure_t out[4];
    size_t cnt;
    /* the first page of 2, then the rest from the last row's cursor */
    ck_assert_uint_eq(bw_ledger_read_failures_page(db, conf, JOB_A, 1, 0, NULL, 0, 0, 2, out, &cnt, &scratch), 0);
    ck_assert_uint_eq(cnt, 2);
    ck_assert_uint_eq(out[0].job_part, 0);
    ck_assert_uint_eq(out[0].op_index, 3);
    ck_assert_int_eq(out[0].op_truncated, 1);
    ck_assert_str_eq(out[0].op, op);
    ck_assert_uint_eq(out[1].op_index, 7);
    ck_assert_int_eq(out[1].op_truncated, 0);
    ck_assert_str_eq(out[1].part_id, p0);
    char after[33];
    memcpy(after, out[1].part_id, 33);
    for (size_t i = 0; i < cnt; i++) bw_ledger_failure_free(&out[i]);
    ck_assert_uint_eq(bw_ledger_read_failures_page(db, conf, JOB_A, 1, 0, after, 7, 0, 4, out, &cnt, &scratch), 0);
    ck_assert_uint_eq(cnt, 2);
    ck_assert_uint_eq(out[0].job_part, 2);
    ck_assert_uint_eq(out[0].op_index, 0);
    ck_assert_ptr_null(out[0].op); /* written without one */
    ck_assert_uint_eq(out[1].op_index, 1);
    ck_assert_uint_eq(out[1].object_id, 21);
    for (size_t i = 0; i < cnt; i++) bw_ledger_failure_free(&out[i]);
    /* of error 1406 only: 3 of the job's 4 */
    ck_assert_uint_eq(bw_ledger_read_failures_page(db, conf, JOB_A, 1, 0, NULL, 0, 1406, 4, out, &cnt, &scratch), 0);
    ck_assert_uint_eq(cnt, 3);
    for (size_t i = 0; i < cnt; i++) {
        ck_assert_uint_eq(out[i].error_code, 1406);
        bw_ledger_failure_free(&out[i]);
    }
    /* refused again (a resubmission): the failure takes the latest reason and op */
    const char *op2 = "{\"op\":\"create\",\"fields\":{\"title\":\"second\"}}";
    bw_ledger_failure_t again = {.job_id = p0, .part = 0, .op_index = 3, .object_id = 3, .error_code = 1062,
                                 .reason = "dup now", .op = op2};
    ck_assert_uint_eq(bw_ledger_write_failures(db, conf, 0, &again, 1, 1 << 20, &scratch), 0);
    ck_assert_uint_eq(bw_ledger_read_failures_page(db, conf, JOB_A, 1, 0, NULL, 0, 0, 1, out, &cnt, &scratch), 0);
    ck_assert_uint_eq(cnt, 1);
    ck_assert_uint_eq(out[0].op_index, 3);
    ck_assert_str_eq(out[0].reason, "dup now");
    ck_assert_str_eq(out[0].op, op2);
    ck_assert_int_eq(out[0].op_truncated, 0);
    bw_ledger_failure_free(&out[0]);
    mysql_rollback(db);
    teardown();
}
END_TEST

START_TEST(failures_split_by_bytes_and_read_back) {
    if (!setup()) return;
    char long_reason[1500];
    memset(long_reason, 'x', sizeof(long_reason) - 1);
    long_reason[sizeof(long_reason) - 1] = '\0';
    long_reason[0] = '\'';
    bw_ledger_failure_t f[] = {
        {.job_id = JOB_A, .part = 0, .op_index = 3, .object_id = 1003, .error_code = 1062, .reason = "dup"},
        {.job_id = JOB_A, .part = 0, .op_index = 1, .object_id = 1001, .error_code = 1406, .reason = long_reason},
        {.job_id = JOB_A, .part = 1, .op_index = 2, .object_id = 1002, .error_code = 0, .reason = "it's bad"},
    };
    /* a budget that takes one row per statement */
    ck_assert_uint_eq(bw_ledger_write_failures(db, conf, 0, f, 3, 2500, &scratch), 0);
    ck_assert_int_eq(scalar("SELECT COUNT(*) FROM bwledger00000.bw_job_failures"), 3);
    ck_assert_int_eq(scalar("SELECT LENGTH(reason) FROM bwledger00000.bw_job_failures WHERE op_index = 1"), 1000);
    /* refused again: the latest reason and code; and a large budget: one statement */
    f[0].error_code = 1264;
    f[0].reason = "out of range";
    ck_assert_uint_eq(bw_ledger_write_failures(db, conf, 0, f, 1, 1 << 20, &scratch), 0);
    ck_assert_uint_eq(bw_ledger_write_failures(db, conf, 1, f + 2, 1, 1 << 20, &scratch), 0);
    ck_assert_int_eq(mysql_commit(db), 0);
    ck_assert_int_eq(scalar("SELECT error_code FROM bwledger00000.bw_job_failures WHERE op_index = 3"), 1264);

    bw_ledger_job_shard_t js[] = {{.shard = 0, .failed = 3}, {.shard = 1, .failed = 1}};
    bw_ledger_failure_t out[8];
    size_t cnt = 0;
    ck_assert_uint_eq(bw_ledger_read_job_failures(db, conf, JOB_A, 0, js, 2, 2, out, 8, &cnt, &scratch), 0);
    ck_assert_uint_eq(cnt, 3); /* 2 of shard 0 (the limit), 1 of shard 1 */
    int seen0 = 0, seen1 = 0;
    for (size_t i = 0; i < cnt; i++) {
        if (out[i].shard == 0) {
            ck_assert_uint_eq(out[i].op_index, seen0 ? 2 : 1); /* by op_index */
            if (!seen0) ck_assert_int_eq(out[i].reason[0], '\'');
            if (!seen0) ck_assert_uint_eq(out[i].object_id, 1001);
            seen0++;
        } else {
            ck_assert_int_eq(out[i].shard, 1);
            ck_assert_str_eq(out[i].reason, "it's bad");
            seen1++;
        }
        free(out[i].reason);
    }
    ck_assert_int_eq(seen0, 2);
    ck_assert_int_eq(seen1, 1);
    /* a shard with no failed count is not asked; the cap drops the rest */
    js[1].failed = 0;
    cnt = 0;
    ck_assert_uint_eq(bw_ledger_read_job_failures(db, conf, JOB_A, 0, js, 2, 20, out, 1, &cnt, &scratch), 0);
    ck_assert_uint_eq(cnt, 1);
    ck_assert_int_eq(out[0].shard, 0);
    free(out[0].reason);
    mysql_rollback(db);
    teardown();
}
END_TEST

Suite *ledger_suite(void) {
    Suite *s = suite_create("ledger");
    TCase *tc = tcase_create("ledger");
    tcase_add_test(tc, schema_names_the_three_tables);
    tcase_add_test(tc, offsets_round_trip);
    tcase_add_test(tc, parts_dedup_and_sum);
    tcase_add_test(tc, failures_split_by_bytes_and_read_back);
    tcase_add_test(tc, named_job_reads_every_part);
    tcase_add_test(tc, failure_pages_follow_the_cursor);
    suite_add_tcase(s, tc);
    return s;
}
