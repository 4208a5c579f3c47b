/* test_scrub.c — what callers without the admin role see of MySQL errors (proxy/scrub.h),
 * and the session charset decision of store/db.c. */
#include <string.h>

#include "buf.h"
#include "db.h"
#include "helpers.h"
#include "scrub.h"

START_TEST(mysql_errors_become_number_and_class) {
    char out[128];
    ck_assert_str_eq(bw_scrub_mysql(1062, out, sizeof(out)), "MySQL error 1062 (duplicate key)");
    ck_assert_str_eq(bw_scrub_mysql(1406, out, sizeof(out)), "MySQL error 1406 (value too long)");
    ck_assert_str_eq(bw_scrub_mysql(1205, out, sizeof(out)), "MySQL error 1205 (lock wait timeout)");
    ck_assert_str_eq(bw_scrub_mysql(2003, out, sizeof(out)), "MySQL error 2003 (connection error)");
    ck_assert_str_eq(bw_scrub_mysql(1234, out, sizeof(out)), "MySQL error 1234 (server error)"); /* unlisted */
}
END_TEST

START_TEST(failure_reasons_lose_row_values) {
    char out[128];
    const char *dup = "Duplicate entry 'alice@example.com' for key 'email'";
    const char *r = bw_scrub_failure(1062, dup, out, sizeof(out));
    ck_assert_str_eq(r, "MySQL error 1062 (duplicate key)");
    ck_assert_ptr_null(strstr(r, "alice"));
    /* bulkwrite's own reasons (code 0) quote nothing and stay */
    ck_assert_str_eq(bw_scrub_failure(0, "unknown column", out, sizeof(out)), "unknown column");
    /* a tiny buffer is cut, never overrun */
    char small[8];
    ck_assert_str_eq(bw_scrub_failure(1062, dup, small, sizeof(small)), "MySQL e");
}
END_TEST

START_TEST(shard_errors_lose_server_names_and_text) {
    char out[160];
    const char *r = bw_scrub_shard_error(
        "stop", "INSERT on db00003: Duplicate entry 'bob' for key 'name' (1062)", out, sizeof(out));
    ck_assert_str_eq(r, "MySQL error 1062 (duplicate key)");
    r = bw_scrub_shard_error("ledger", "reading bw_offsets: Table 'db00003.bw_offsets' doesn't exist (1146)", out,
                             sizeof(out));
    ck_assert_str_eq(r, "MySQL error 1146 (missing table)");
    /* an OS errno in parentheses is no MySQL error; the host goes too */
    r = bw_scrub_shard_error("connection",
                             "connect to mysql-a (db7.internal:3306) as bw: Can't connect to server on 'db7' (111)",
                             out, sizeof(out));
    ck_assert_str_eq(r, "connection error (details for admins)");
    r = bw_scrub_shard_error("timeout", "no number here", out, sizeof(out));
    ck_assert_str_eq(r, "timeout error (details for admins)");
    r = bw_scrub_shard_error("retryable", "(1213)", out, sizeof(out)); /* no text before it */
    ck_assert_str_eq(r, "retryable error (details for admins)");
    /* bulkwrite's own counts and offsets stay */
    const char *data = "3 ops refused (see bw_job_failures and the dead-letter topic)";
    ck_assert_str_eq(bw_scrub_shard_error("data", data, out, sizeof(out)), data);
    const char *lost = "offsets 10 to 19 of partition 3 (10 messages) were deleted from Kafka";
    ck_assert_str_eq(bw_scrub_shard_error("lost", lost, out, sizeof(out)), lost);
}
END_TEST

/* The throttle's reason: an unknown signal's error (hosts, users) is cut after "since …";
 * any other state's reason is kept whole. */
START_TEST(throttle_reason_loses_the_error) {
    char out[200];
    ck_assert_str_eq(bw_scrub_throttle_reason("unknown", "replication_lag_ms unknown since 2026-12-01T19:22:02Z: "
                                              "SELECT denied to user 'bw'@'10.0.0.7'", out, sizeof(out)),
                     "replication_lag_ms unknown since 2026-12-01T19:22:02Z (details for admins)");
    const char *lag = "replication_lag_ms 2518.5 over its threshold 1000 since 2026-12-01T19:21:25Z";
    ck_assert_str_eq(bw_scrub_throttle_reason("throttled", lag, out, sizeof(out)), lag);
    ck_assert_str_eq(bw_scrub_throttle_reason("unknown", NULL, out, sizeof(out)), "");
}
END_TEST

START_TEST(charset_decision) {
    const char *const names[3] = {"character_set_client", "character_set_connection", "character_set_results"};
    char why[128] = "";
    const char *const good[3] = {"utf8mb4", "utf8mb4", "utf8mb4"};
    ck_assert_int_eq(bw_db_charset_check(names, good, why, sizeof(why)), 0);
    /* what MariaDB 10.11 gives with --skip-character-set-client-handshake --character-set-server=latin1 */
    const char *const latin1[3] = {"latin1", "latin1", "latin1"};
    ck_assert_int_eq(bw_db_charset_check(names, latin1, why, sizeof(why)), -1);
    ck_assert_str_eq(why, "character_set_client is latin1, not utf8mb4");
    const char *const utf8mb3[3] = {"utf8mb4", "utf8mb3", "utf8mb4"};
    ck_assert_int_eq(bw_db_charset_check(names, utf8mb3, why, sizeof(why)), -1);
    ck_assert_str_eq(why, "character_set_connection is utf8mb3, not utf8mb4");
    const char *const null_results[3] = {"utf8mb4", "utf8mb4", NULL}; /* SET character_set_results = NULL */
    ck_assert_int_eq(bw_db_charset_check(names, null_results, why, sizeof(why)), -1);
    ck_assert_str_eq(why, "character_set_results is NULL, not utf8mb4");
}
END_TEST

START_TEST(users_sql_least_privilege) {
    bw_config_t *c = t_conf_variant_load("password = \"demo-consumer-pw\";", "password = \"it's\\\\a\\nsecret\";");
    bw_buf_t b;
    bw_buf_init(&b);
    bw_db_users_sql(c, 0, "root", 0, &b);
    bw_buf_append(&b, "", 1);
    /* the password escaped: no raw quote or newline can end the literal or the line */
    ck_assert_ptr_nonnull(strstr(b.data, "ALTER USER 'bw_consumer'@'127.0.0.1' IDENTIFIED BY 'it\\'s\\\\a\\nsecret';\n"));
    ck_assert_ptr_nonnull(strstr(b.data, "GRANT SELECT, INSERT, UPDATE, DELETE ON `db00003`.`pins` TO 'bw_consumer'@'127.0.0.1';"));
    ck_assert_ptr_nonnull(strstr(b.data, "GRANT SELECT ON `db00000`.`bw_job_failures` TO 'bw_proxy'@'127.0.0.1';"));
    /* the throttle's heartbeat row, in the server's first shard database: the consumer writes it */
    ck_assert_ptr_nonnull(strstr(b.data, "GRANT SELECT, INSERT, UPDATE, DELETE ON `db00000`.`bw_heartbeat` TO 'bw_consumer'@'127.0.0.1';"));
    ck_assert_ptr_null(strstr(b.data, "`db00001`.`bw_heartbeat`"));
    ck_assert_ptr_null(strstr(b.data, "GRANT OPTION"));
    ck_assert_ptr_null(strstr(b.data, "*.*"));
    ck_assert_ptr_null(strstr(b.data, "`db00004`")); /* server 0 holds shards 0-3 */
    ck_assert_ptr_null(strstr(b.data, "`pins` TO 'bw_proxy'")); /* the proxy reads the ledger only */
    /* the administrator running it is left alone; printing redacts */
    bw_buf_reset(&b);
    bw_db_users_sql(c, 0, "bw_consumer", 1, &b);
    bw_buf_append(&b, "", 1);
    ck_assert_ptr_null(strstr(b.data, "'bw_consumer'"));
    ck_assert_ptr_nonnull(strstr(b.data, "ALTER USER 'bw_proxy'@'127.0.0.1' IDENTIFIED BY '(redacted)';"));
    ck_assert_ptr_null(strstr(b.data, "demo-proxy-pw"));
    bw_buf_free(&b);
    bw_config_destroy(c);
}
END_TEST

START_TEST(live_session_is_utf8mb4) {
    bw_config_t *conf = t_live_config("bwscrub");
    if (!conf) return;
    char err[512] = "";
    MYSQL *db = bw_db_connect(conf, 0, err, sizeof(err));
    ck_assert_msg(db != NULL, "%s", err);
    mysql_close(db);
    /* the proxy's connection: proxy_user "" means the server's user */
    db = bw_db_connect_as(conf, 0, BW_DB_PROXY, err, sizeof(err));
    ck_assert_msg(db != NULL, "%s", err);
    mysql_close(db);
    bw_config_destroy(conf);
}
END_TEST

Suite *scrub_suite(void) {
    Suite *s = suite_create("scrub");
    TCase *tc = tcase_create("scrub");
    tcase_add_test(tc, mysql_errors_become_number_and_class);
    tcase_add_test(tc, failure_reasons_lose_row_values);
    tcase_add_test(tc, shard_errors_lose_server_names_and_text);
    tcase_add_test(tc, throttle_reason_loses_the_error);
    tcase_add_test(tc, charset_decision);
    tcase_add_test(tc, users_sql_least_privilege);
    tcase_add_test(tc, live_session_is_utf8mb4);
    suite_add_tcase(s, tc);
    return s;
}
