/* test_retain.c — what Kafka must keep of an applied partition (consumer/retain.h), with
 * the clock injected: the margin's samples, and the least of primary, commit, margin and
 * listed replicas, where an unread replica or a missing sample keeps everything. */
#include "helpers.h"
#include "retain.h"

#define MIN_MS 60000LL
#define T0 1700000000000LL

START_TEST(margin_keeps_what_was_applied_since) {
    bw_retain_t *r = bw_retain_new(2);
    int64_t keep = 16 * MIN_MS; /* a sample a minute */
    int64_t applied[2] = {100, -1};
    ck_assert_int_eq(bw_retain_sample(r, applied, T0, keep), 1);
    ck_assert_int_eq(bw_retain_sample(r, applied, T0 + 30000, keep), 0); /* under a sixteenth of keep */
    ck_assert_int_eq(bw_retain_applied_before(r, 0, T0 + keep - 1, keep), -1); /* none that old yet */
    ck_assert_int_eq(bw_retain_applied_before(r, 0, T0 + keep, keep), 100);
    ck_assert_int_eq(bw_retain_applied_before(r, 1, T0 + keep, keep), -1); /* not held then: unknown */
    for (int m = 1; m <= 40; m++) { /* 40 minutes of progress, 10 messages a minute */
        applied[0] = 100 + 10 * m;
        applied[1] = 5 * m;
        ck_assert_int_eq(bw_retain_sample(r, applied, T0 + m * MIN_MS, keep), 1);
    }
    /* at minute 40 the newest sample 16 minutes old is minute 24's */
    ck_assert_int_eq(bw_retain_applied_before(r, 0, T0 + 40 * MIN_MS, keep), 340);
    ck_assert_int_eq(bw_retain_applied_before(r, 1, T0 + 40 * MIN_MS + 59999, keep), 120);
    /* the ring held 17 samples: one 16 minutes old is always among them */
    ck_assert_int_eq(bw_retain_applied_before(r, 0, T0 + 56 * MIN_MS, keep), 500);
    ck_assert_int_eq(bw_retain_applied_before(r, 0, T0 + 57 * MIN_MS, keep), 500); /* a minute late, never early */
    ck_assert_int_eq(bw_retain_sample(r, applied, T0, 0), 0); /* keep 0 samples nothing */
    bw_retain_clamp(r, 0, 150); /* slot 0's database went back to 150: no sample says more */
    ck_assert_int_eq(bw_retain_applied_before(r, 0, T0 + 57 * MIN_MS, keep), 150);
    ck_assert_int_eq(bw_retain_applied_before(r, 1, T0 + 57 * MIN_MS, keep), 200); /* the others' stay */
    bw_retain_free(r);
}
END_TEST

START_TEST(trim_to_is_the_least_of_every_copy) {
    bw_retain_in_t in = {.applied = 1000, .committed = 900, .keep_ms = 0};
    ck_assert_int_eq(bw_retain_trim_to(&in), 900); /* only up to an acknowledged commit */
    in.committed = 1000;
    ck_assert_int_eq(bw_retain_trim_to(&in), 1000);
    in.keep_ms = MIN_MS, in.applied_before = 700;
    ck_assert_int_eq(bw_retain_trim_to(&in), 700); /* the margin */
    in.applied_before = -1;
    ck_assert_int_eq(bw_retain_trim_to(&in), -1); /* no sample that old: nothing */
    in.keep_ms = 0, in.replicas = 2, in.replicas_applied = 400;
    ck_assert_int_eq(bw_retain_trim_to(&in), 400); /* the replica behind */
    in.replicas_applied = -1;
    ck_assert_int_eq(bw_retain_trim_to(&in), -1); /* a replica never read, or without the row */
    in.replicas = 0;
    ck_assert_int_eq(bw_retain_trim_to(&in), 1000); /* no replicas listed: not asked */
    in.applied = -1;
    ck_assert_int_eq(bw_retain_trim_to(&in), -1); /* the primary's ledger unknown */
}
END_TEST

Suite *retain_suite(void) {
    Suite *s = suite_create("retain");
    TCase *tc = tcase_create("retain");
    tcase_add_test(tc, margin_keeps_what_was_applied_since);
    tcase_add_test(tc, trim_to_is_the_least_of_every_copy);
    suite_add_tcase(s, tc);
    return s;
}
