/* test_quota.c — per client quotas (proxy/quota.h), with the clock driven by the test. */
#include <string.h>

#include "helpers.h"
#include "quota.h"

#define SEC 1000000LL

static unsigned admit(bw_quota_t *q, const char *client, const bw_quota_limits_t *lim, double ops, double bytes,
                      int64_t now, bw_quota_kind_t *kind, int *retry) {
    char why[256];
    return bw_quota_admit(q, client, lim, ops, bytes, now, kind, retry, why, sizeof(why));
}

/* ops/s: a second's worth passes at once, the next waits until it is paid for, and a
 * refused request charges nothing. */
START_TEST(ops_budget_refuses_then_admits) {
    bw_quota_t *q = bw_quota_new();
    bw_quota_limits_t lim = {.ops_per_second = 1000};
    bw_quota_kind_t kind;
    int retry = 0;
    int64_t t = 100 * SEC;
    ck_assert_uint_eq(admit(q, "feed", &lim, 3000, 10, t, &kind, &retry), 0); /* owes nothing: passes, owes 3 s */
    bw_quota_done(q, "feed");
    ck_assert_uint_eq(admit(q, "feed", &lim, 1, 10, t + SEC, &kind, &retry), 429);
    ck_assert_int_eq(kind, BW_QUOTA_OPS);
    ck_assert_int_eq(retry, 2); /* 3 s of ops, 1 s passed */
    ck_assert_uint_eq(admit(q, "feed", &lim, 1, 10, t + 2 * SEC, &kind, &retry), 429); /* still owes: nothing charged */
    ck_assert_int_eq(retry, 1);
    ck_assert_uint_eq(admit(q, "feed", &lim, 1000, 10, t + 3 * SEC, &kind, &retry), 0); /* after Retry-After */
    bw_quota_done(q, "feed");
    bw_quota_free(q);
}
END_TEST

/* One client's use never takes from another's budget. */
START_TEST(clients_have_their_own_budgets) {
    bw_quota_t *q = bw_quota_new();
    bw_quota_limits_t lim = {.ops_per_second = 100, .max_jobs_in_flight = 1};
    bw_quota_kind_t kind;
    int retry;
    ck_assert_uint_eq(admit(q, "a", &lim, 500, 1, SEC, &kind, &retry), 0);
    ck_assert_uint_eq(admit(q, "a", &lim, 1, 1, SEC, &kind, &retry), 429);
    ck_assert_int_eq(kind, BW_QUOTA_JOBS); /* in flight first: a is still being answered */
    ck_assert_uint_eq(admit(q, "b", &lim, 100, 1, SEC, &kind, &retry), 0);
    bw_quota_done(q, "a");
    bw_quota_done(q, "b");
    ck_assert_uint_eq(admit(q, "a", &lim, 1, 1, SEC, &kind, &retry), 429);
    ck_assert_int_eq(kind, BW_QUOTA_OPS);
    ck_assert_int_eq(retry, 5);
    bw_quota_free(q);
}
END_TEST

/* bytes/s beyond the buckets' 1e6 permits per second (they count KiB), and the jobs in
 * flight bound: the max passes, one more is refused, a done frees a place. */
START_TEST(bytes_and_jobs_in_flight) {
    bw_quota_t *q = bw_quota_new();
    bw_quota_limits_t lim = {.bytes_per_second = 64e6, .max_jobs_in_flight = 2};
    bw_quota_kind_t kind;
    int retry;
    int64_t t = SEC;
    ck_assert_uint_eq(admit(q, "c", &lim, 1, 128e6, t, &kind, &retry), 0);
    ck_assert_uint_eq(admit(q, "c", &lim, 1, 1, t, &kind, &retry), 429);
    ck_assert_int_eq(kind, BW_QUOTA_BYTES);
    ck_assert_int_eq(retry, 2);
    ck_assert_uint_eq(admit(q, "c", &lim, 1, 1, t + 2 * SEC, &kind, &retry), 0);
    ck_assert_uint_eq(admit(q, "c", &lim, 1, 1, t + 3 * SEC, &kind, &retry), 429);
    ck_assert_int_eq(kind, BW_QUOTA_JOBS);
    ck_assert_int_eq(retry, 1);
    bw_quota_done(q, "c");
    ck_assert_uint_eq(admit(q, "c", &lim, 1, 1, t + 3 * SEC, &kind, &retry), 0);
    bw_quota_done(q, "c");
    bw_quota_done(q, "c");
    bw_quota_free(q);
}
END_TEST

/* No limits: everything passes; a limit added by a reload starts with a full second. */
START_TEST(no_limit_then_a_limit) {
    bw_quota_t *q = bw_quota_new();
    bw_quota_limits_t none = {0}, lim = {.ops_per_second = 10};
    bw_quota_kind_t kind;
    int retry;
    for (int i = 0; i < 1000; i++) {
        ck_assert_uint_eq(admit(q, "d", &none, 1e6, 1e9, SEC, &kind, &retry), 0);
        bw_quota_done(q, "d");
    }
    ck_assert_uint_eq(admit(q, "d", &lim, 10, 1, 2 * SEC, &kind, &retry), 0);
    bw_quota_done(q, "d");
    ck_assert_uint_eq(admit(q, "d", &lim, 10, 1, 2 * SEC, &kind, &retry), 429);
    bw_quota_free(q);
}
END_TEST

Suite *quota_suite(void) {
    Suite *s = suite_create("quota");
    TCase *tc = tcase_create("buckets");
    tcase_add_test(tc, ops_budget_refuses_then_admits);
    tcase_add_test(tc, clients_have_their_own_budgets);
    tcase_add_test(tc, bytes_and_jobs_in_flight);
    tcase_add_test(tc, no_limit_then_a_limit);
    suite_add_tcase(s, tc);
    return s;
}
