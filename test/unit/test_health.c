/* test_health.c — shard and server health (consumer/health.c), driven by an injected clock. */
#include "health.h"
#include "helpers.h"

#define SEC 1000000LL

/* 4 shards: 0 and 1 on server 0, 2 and 3 on server 1; hold after 2 failures, probe every 30 s */
static bw_health_t *two_servers(void) {
    static const int shard_server[] = {0, 0, 1, 1};
    bw_health_t *h = bw_health_new(4, 2, shard_server);
    bw_health_set_limits(h, 2, 30 * SEC);
    return h;
}

START_TEST(healthy_shards_run) {
    bw_health_t *h = two_servers();
    int64_t wait = -1;
    for (int s = 0; s < 4; s++) ck_assert_int_eq(bw_health_admit(h, s, 0, &wait), BW_ADMIT_RUN);
    ck_assert_int_eq(bw_health_report(h, 0, BW_FAIL_NONE, 0, 0), 0);
    ck_assert_int_eq(bw_health_report(h, 1, BW_FAIL_RETRY, 0, 0), 0); /* a deadlock counts for nothing */
    ck_assert_int_eq(bw_health_blocked(h, 1), 0);
    bw_health_free(h);
}
END_TEST

/* Timeouts hold the shard alone; its server and the other shards go on. One probe at a
 * time after the pause, and its success frees the shard. */
START_TEST(timeouts_hold_the_shard_then_a_probe_frees_it) {
    bw_health_t *h = two_servers();
    int64_t wait = 0;
    ck_assert_int_eq(bw_health_report(h, 0, BW_FAIL_TIMEOUT, 0, 1 * SEC), 0);
    ck_assert_int_eq(bw_health_report(h, 0, BW_FAIL_TIMEOUT, 0, 2 * SEC), BW_HEALTH_SHARD_HELD);
    ck_assert_int_eq(bw_health_report(h, 0, BW_FAIL_TIMEOUT, 0, 2 * SEC), 0); /* held already */
    ck_assert(bw_health_shard_held(h, 0));
    ck_assert(bw_health_blocked(h, 0));
    ck_assert(!bw_health_blocked(h, 1));
    ck_assert(!bw_health_server_down(h, 0));
    ck_assert_int_eq(bw_health_admit(h, 0, 10 * SEC, &wait), BW_ADMIT_WAIT);
    ck_assert_int_eq(wait, 22 * SEC);
    ck_assert_int_eq(bw_health_admit(h, 1, 10 * SEC, &wait), BW_ADMIT_RUN);
    ck_assert_int_eq(bw_health_admit(h, 0, 32 * SEC, &wait), BW_ADMIT_PROBE);
    ck_assert_int_eq(bw_health_admit(h, 0, 33 * SEC, &wait), BW_ADMIT_WAIT); /* its probe is out */
    ck_assert_int_eq(bw_health_report(h, 0, BW_FAIL_NONE, 1, 34 * SEC), BW_HEALTH_SHARD_FREED);
    ck_assert_int_eq(bw_health_admit(h, 0, 34 * SEC, &wait), BW_ADMIT_RUN);
    bw_health_free(h);
}
END_TEST

/* A failed probe holds the shard for another pause. */
START_TEST(failed_probe_waits_again) {
    bw_health_t *h = two_servers();
    int64_t wait = 0;
    bw_health_report(h, 3, BW_FAIL_TIMEOUT, 0, 0);
    bw_health_report(h, 3, BW_FAIL_TIMEOUT, 0, 0);
    ck_assert_int_eq(bw_health_admit(h, 3, 30 * SEC, &wait), BW_ADMIT_PROBE);
    ck_assert_int_eq(bw_health_report(h, 3, BW_FAIL_TIMEOUT, 1, 35 * SEC), 0);
    ck_assert_int_eq(bw_health_admit(h, 3, 64 * SEC, &wait), BW_ADMIT_WAIT);
    ck_assert_int_eq(bw_health_admit(h, 3, 65 * SEC, &wait), BW_ADMIT_PROBE);
    bw_health_free(h);
}
END_TEST

/* A stop error holds the shard at once and says so every time (the error may change). */
START_TEST(stop_holds_at_once) {
    bw_health_t *h = two_servers();
    ck_assert_int_eq(bw_health_report(h, 2, BW_FAIL_STOP, 0, 0), BW_HEALTH_SHARD_STOPPED);
    ck_assert(bw_health_shard_held(h, 2));
    ck_assert(!bw_health_server_down(h, 1));
    int64_t wait;
    ck_assert_int_eq(bw_health_admit(h, 2, 30 * SEC, &wait), BW_ADMIT_PROBE);
    ck_assert_int_eq(bw_health_report(h, 2, BW_FAIL_STOP, 1, 30 * SEC), BW_HEALTH_SHARD_STOPPED);
    ck_assert_int_eq(bw_health_admit(h, 2, 60 * SEC, &wait), BW_ADMIT_PROBE);
    ck_assert_int_eq(bw_health_report(h, 2, BW_FAIL_NONE, 1, 60 * SEC), BW_HEALTH_SHARD_FREED);
    bw_health_free(h);
}
END_TEST

/* Connection failures on different shards of one server add up to the server; then
 * every shard of it waits, one probe decides for all, and the other server is untouched. */
START_TEST(connection_failures_take_the_server_down) {
    bw_health_t *h = two_servers();
    int64_t wait = 0;
    ck_assert_int_eq(bw_health_report(h, 0, BW_FAIL_CONNECTION, 0, 0), 0);
    ck_assert_int_eq(bw_health_report(h, 1, BW_FAIL_CONNECTION, 0, 0), BW_HEALTH_SERVER_DOWN);
    ck_assert(bw_health_server_down(h, 0));
    ck_assert(!bw_health_shard_held(h, 0)); /* the shards are not sick, their server is */
    ck_assert(bw_health_blocked(h, 0) && bw_health_blocked(h, 1));
    ck_assert(!bw_health_blocked(h, 2) && !bw_health_blocked(h, 3));
    ck_assert_int_eq(bw_health_admit(h, 0, 5 * SEC, &wait), BW_ADMIT_WAIT);
    ck_assert_int_eq(wait, 25 * SEC);
    ck_assert_int_eq(bw_health_admit(h, 2, 5 * SEC, &wait), BW_ADMIT_RUN);
    /* one probe for the whole server: the first shard asked after the pause */
    ck_assert_int_eq(bw_health_admit(h, 1, 30 * SEC, &wait), BW_ADMIT_PROBE);
    ck_assert_int_eq(bw_health_admit(h, 0, 30 * SEC, &wait), BW_ADMIT_WAIT);
    ck_assert_int_eq(bw_health_report(h, 1, BW_FAIL_CONNECTION, 1, 32 * SEC), 0); /* still down */
    ck_assert_int_eq(bw_health_admit(h, 0, 40 * SEC, &wait), BW_ADMIT_WAIT);
    ck_assert_int_eq(bw_health_admit(h, 0, 62 * SEC, &wait), BW_ADMIT_PROBE);
    ck_assert_int_eq(bw_health_report(h, 0, BW_FAIL_NONE, 1, 63 * SEC), BW_HEALTH_SERVER_UP);
    ck_assert(!bw_health_blocked(h, 1));
    ck_assert_int_eq(bw_health_admit(h, 1, 63 * SEC, &wait), BW_ADMIT_RUN);
    bw_health_free(h);
}
END_TEST

/* A probe the rate limiter did not let go is given back; a revoked probing shard frees
 * the server's probe slot. */
START_TEST(unadmit_and_forget_free_the_probe) {
    bw_health_t *h = two_servers();
    int64_t wait = 0;
    bw_health_report(h, 0, BW_FAIL_CONNECTION, 0, 0);
    bw_health_report(h, 0, BW_FAIL_CONNECTION, 0, 0);
    ck_assert_int_eq(bw_health_admit(h, 0, 30 * SEC, &wait), BW_ADMIT_PROBE);
    bw_health_unadmit(h, 0);
    ck_assert_int_eq(bw_health_admit(h, 1, 30 * SEC, &wait), BW_ADMIT_PROBE);
    bw_health_forget(h, 1);
    ck_assert_int_eq(bw_health_admit(h, 0, 30 * SEC, &wait), BW_ADMIT_PROBE);
    bw_health_free(h);
}
END_TEST

/* A timeout proves the server answers: it is up again, the slow shard counts. */
START_TEST(timeout_means_the_server_answers) {
    bw_health_t *h = two_servers();
    bw_health_report(h, 0, BW_FAIL_CONNECTION, 0, 0);
    bw_health_report(h, 0, BW_FAIL_CONNECTION, 0, 0);
    ck_assert_int_eq(bw_health_report(h, 1, BW_FAIL_TIMEOUT, 0, 0), BW_HEALTH_SERVER_UP);
    ck_assert(!bw_health_server_down(h, 0));
    bw_health_free(h);
}
END_TEST

/* A ledger read that succeeds proves the server answers, even with no batch to probe. */
START_TEST(an_answer_brings_the_server_up) {
    bw_health_t *h = two_servers();
    bw_health_report(h, 2, BW_FAIL_CONNECTION, 0, 0);
    bw_health_report(h, 3, BW_FAIL_CONNECTION, 0, 0);
    ck_assert(bw_health_server_down(h, 1));
    ck_assert_int_eq(bw_health_server_answered(h, 1), BW_HEALTH_SERVER_UP);
    ck_assert(!bw_health_blocked(h, 2));
    ck_assert_int_eq(bw_health_server_answered(h, 1), 0);
    bw_health_free(h);
}
END_TEST

/* Ledger reads that cannot connect count toward the server as failed batches do, with
 * a batch's failures in the same count. */
START_TEST(unreachable_ledger_reads_take_the_server_down) {
    bw_health_t *h = two_servers();
    int64_t wait = 0;
    ck_assert_int_eq(bw_health_server_unreachable(h, 1, 0), 0);
    ck_assert(!bw_health_server_down(h, 1));
    ck_assert_int_eq(bw_health_server_unreachable(h, 1, 3 * SEC), BW_HEALTH_SERVER_DOWN);
    ck_assert(bw_health_blocked(h, 2) && !bw_health_blocked(h, 0));
    ck_assert_int_eq(bw_health_admit(h, 2, 4 * SEC, &wait), BW_ADMIT_WAIT);
    ck_assert_int_eq(wait, 29 * SEC);
    ck_assert_int_eq(bw_health_server_unreachable(h, 1, 5 * SEC), 0); /* already down */
    bw_health_report(h, 0, BW_FAIL_CONNECTION, 0, 0);
    ck_assert_int_eq(bw_health_server_unreachable(h, 0, 0), BW_HEALTH_SERVER_DOWN);
    bw_health_free(h);
}
END_TEST

/* A server whose shards all went to another consumer: its state goes with them, and
 * counting starts afresh if its shards come back. */
START_TEST(forgetting_a_server_brings_it_up_here) {
    bw_health_t *h = two_servers();
    int64_t wait = 0;
    bw_health_report(h, 2, BW_FAIL_CONNECTION, 0, 0);
    bw_health_report(h, 3, BW_FAIL_CONNECTION, 0, 0);
    ck_assert_int_eq(bw_health_admit(h, 2, 30 * SEC, &wait), BW_ADMIT_PROBE);
    bw_health_forget(h, 2);
    bw_health_forget(h, 3);
    ck_assert(bw_health_server_down(h, 1)); /* forgetting its shards leaves the server */
    ck_assert_int_eq(bw_health_forget_server(h, 1), BW_HEALTH_SERVER_UP);
    ck_assert(!bw_health_server_down(h, 1) && !bw_health_blocked(h, 2));
    ck_assert_int_eq(bw_health_admit(h, 2, 31 * SEC, &wait), BW_ADMIT_RUN);
    ck_assert_int_eq(bw_health_forget_server(h, 1), 0);
    ck_assert_int_eq(bw_health_report(h, 2, BW_FAIL_CONNECTION, 0, 32 * SEC), 0); /* the count restarted */
    bw_health_free(h);
}
END_TEST

Suite *health_suite(void) {
    Suite *s = suite_create("health");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, healthy_shards_run);
    tcase_add_test(tc, timeouts_hold_the_shard_then_a_probe_frees_it);
    tcase_add_test(tc, failed_probe_waits_again);
    tcase_add_test(tc, stop_holds_at_once);
    tcase_add_test(tc, connection_failures_take_the_server_down);
    tcase_add_test(tc, unadmit_and_forget_free_the_probe);
    tcase_add_test(tc, timeout_means_the_server_answers);
    tcase_add_test(tc, an_answer_brings_the_server_up);
    tcase_add_test(tc, unreachable_ledger_reads_take_the_server_down);
    tcase_add_test(tc, forgetting_a_server_brings_it_up_here);
    suite_add_tcase(s, tc);
    return s;
}
