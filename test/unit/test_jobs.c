/* test_jobs.c — jobs as the proxy keeps them (proxy/jobs.h, proxy/job_status.h): a held
 * job may not wait for itself through its prerequisites; when a prerequisite lets its
 * dependent's ops go, shard by shard. (A named job's parts as ranges: test_partset.c; a
 * job's fields in both encodings: test_request.c.) */
#include <stdio.h>

#include "helpers.h"
#include "job_status.h"
#include "jobs.h"

/* A job may not wait, through the held records' prerequisites, for itself. */
START_TEST(after_cycles_are_found) {
    static const char *a = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", *b = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
                      *c = "cccccccccccccccccccccccccccccccc", *d = "dddddddddddddddddddddddddddddddd";
    bw_jobs_held_t held[2] = {{.n_after = 1}, {.n_after = 1}};
    /* b's part 1 waits for a; c waits for b */
    snprintf(held[0].id, 33, "%s", "b000000000000000000000000000000a");
    snprintf(held[0].job, 33, "%s", b);
    snprintf(held[0].after[0], 33, "%s", a);
    snprintf(held[1].id, 33, "%s", c);
    snprintf(held[1].job, 33, "%s", c);
    snprintf(held[1].after[0], 33, "%s", b);
    char *after_c[] = {(char *)c}, *after_d[] = {(char *)d}, *after_b[] = {(char *)b};
    ck_assert_int_eq(bw_jobs_held_cycle(held, 2, a, after_c, 1), 1); /* a -> c -> b -> a */
    ck_assert_int_eq(bw_jobs_held_cycle(held, 2, b, after_c, 1), 1); /* b -> c -> b */
    ck_assert_int_eq(bw_jobs_held_cycle(held, 2, a, after_d, 1), 0); /* d waits for nothing */
    ck_assert_int_eq(bw_jobs_held_cycle(held, 2, d, after_c, 1), 0); /* c, b, a: none waits for d */
    ck_assert_int_eq(bw_jobs_held_cycle(held, 2, c, after_b, 1), 0); /* b waits for a only */
    ck_assert_int_eq(bw_jobs_held_cycle(held, 0, a, after_c, 1), 0); /* nothing held: nothing waits */
}
END_TEST

/* When a prerequisite lets its dependent's ops go, shard by shard: only once every op of
 * it is in and none is pending, lost or unknown on that shard. A request some of whose
 * ops were answered 429 (a resend awaited), and a named job not sealed or missing a part,
 * hold every shard; lost ops (to be sent again) hold theirs. */
START_TEST(prerequisite_done_per_shard) {
    Bulkwrite__V1__JobShard sh[3], *shp[3];
    for (int i = 0; i < 3; i++) {
        bulkwrite__v1__job_shard__init(&sh[i]);
        sh[i].shard = (uint32_t)i;
        sh[i].submitted = sh[i].applied = 10;
        sh[i].error = "";
        shp[i] = &sh[i];
    }
    Bulkwrite__V1__JobStatus st = BULKWRITE__V1__JOB_STATUS__INIT;
    st.shards = shp;
    st.n_shards = 3;
    ck_assert_int_eq(bw_jobs_done_on(&st, 0), 1);
    ck_assert_int_eq(bw_jobs_done_on(&st, 7), 1); /* none of its ops there */
    ck_assert_int_eq(bw_jobs_done_on(&st, -1), 1);
    sh[1].pending = 2;
    ck_assert_int_eq(bw_jobs_done_on(&st, 1), 0);
    ck_assert_int_eq(bw_jobs_done_on(&st, 0), 1); /* shard 0 need not wait for shard 1 */
    ck_assert_int_eq(bw_jobs_done_on(&st, -1), 1);
    sh[1].pending = 0;
    sh[2].lost = 3;
    sh[2].error = "lost in Kafka: ...";
    ck_assert_int_eq(bw_jobs_done_on(&st, 2), 0); /* lost: the client is to send them again */
    sh[2].lost = 0;
    ck_assert_int_eq(bw_jobs_done_on(&st, 2), 0); /* a ledger that did not answer */
    sh[2].error = "";
    st.resend_awaited = 1;
    ck_assert_int_eq(bw_jobs_done_on(&st, 0), 0);
    ck_assert_int_eq(bw_jobs_done_on(&st, -1), 0);
    st.resend_awaited = 0;
    st.named = 1; /* parts 0..2 received, not sealed */
    st.parts = 3;
    ck_assert_int_eq(bw_jobs_done_on(&st, -1), 0);
    st.sealed = 1;
    st.last_part = 3; /* part 3 is the last: one part missing */
    ck_assert_int_eq(bw_jobs_done_on(&st, 0), 0);
    st.parts = 4;
    ck_assert_int_eq(bw_jobs_done_on(&st, 0), 1);
    st.cancelled_at_ms = 1;
    ck_assert_int_eq(bw_jobs_done_on(&st, 0), 0);
}
END_TEST

Suite *jobs_suite(void) {
    Suite *s = suite_create("jobs");
    TCase *tc = tcase_create("jobs");
    tcase_add_test(tc, after_cycles_are_found);
    tcase_add_test(tc, prerequisite_done_per_shard);
    suite_add_tcase(s, tc);
    return s;
}
