/* test_jobs.c — jobs as the proxy keeps them (proxy/jobs.h, proxy/job_status.h): when a
 * prerequisite lets its dependent's ops go, shard by shard. (The held records and their
 * prerequisites' cycles: test_timers.c; a named job's parts as ranges: test_partset.c; a
 * job's fields in both encodings: test_request.c.) */
#include <stdio.h>

#include "helpers.h"
#include "job_status.h"
#include "jobs.h"

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
    tcase_add_test(tc, prerequisite_done_per_shard);
    suite_add_tcase(s, tc);
    return s;
}
