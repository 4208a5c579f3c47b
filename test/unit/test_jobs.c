/* test_jobs.c — jobs as the proxy keeps them (proxy/jobs.h, proxy/job_status.h): when a
 * prerequisite lets its dependent's ops go, shard by shard; why a shard holds a job's
 * ops back (JobShard.waits), the precedence of the reasons and their JSON. (The held records and their
 * prerequisites' cycles: test_timers.c; a named job's parts as ranges: test_partset.c; a
 * job's fields in both encodings: test_request.c.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* The kind bw_jobs_wait_pick makes of the facts, 0 for none (the wait freed). */
static int kind_of(const bw_wait_facts_t *f) {
    Bulkwrite__V1__ShardWait *w = bw_jobs_wait_pick(f);
    int k = w ? (int)w->kind : 0;
    bw_jobs_wait_free(w);
    return k;
}

/* Every reason alone, then each pair in the documented order (job_status.h): a pause over
 * an error over the throttle over the job's schedule over a full backlog; the shard's own
 * state only while some op of the job could run; nothing pending, nothing to say. */
START_TEST(wait_precedence) {
    bw_shard_setting_t pause = {.paused = 1};
    snprintf(pause.changed_by, sizeof(pause.changed_by), "alice");
    snprintf(pause.reason, sizeof(pause.reason), "reindex");
    const bw_wait_facts_t ready = {.shard = 3, .in_kafka = 10};
    bw_wait_facts_t f = ready;
    ck_assert_int_eq(kind_of(&f), 0); /* applying at its rate */
    f.backlog_full = 1;
    ck_assert_int_eq(kind_of(&f), BULKWRITE__V1__WAIT_KIND__WAIT_KIND_BACKLOG_FULL);
    f.throttle = BULKWRITE__INTERNAL__V1__THROTTLE_STATE__THROTTLE_STATE_THROTTLED;
    ck_assert_int_eq(kind_of(&f), BULKWRITE__V1__WAIT_KIND__WAIT_KIND_THROTTLED);
    f.error = BULKWRITE__INTERNAL__V1__GATE_REASON__GATE_REASON_SERVER_DOWN;
    ck_assert_int_eq(kind_of(&f), BULKWRITE__V1__WAIT_KIND__WAIT_KIND_ERROR);
    f.pause = &pause;
    ck_assert_int_eq(kind_of(&f), BULKWRITE__V1__WAIT_KIND__WAIT_KIND_PAUSED);

    /* held ops alone: the schedule, whatever the shard's state */
    f.in_kafka = 0;
    f.held = 5;
    f.held_until_ms = 1796522400000;
    f.prerequisite = "2c33aa0e5f7a4b2c8d6e0f1a2b3c4d5e";
    ck_assert_int_eq(kind_of(&f), BULKWRITE__V1__WAIT_KIND__WAIT_KIND_HELD);
    f.held_until_ms = 0;
    ck_assert_int_eq(kind_of(&f), BULKWRITE__V1__WAIT_KIND__WAIT_KIND_PREREQUISITE);
    /* due and free to go: the shard's state again (a release into a paused shard waits there) */
    f.prerequisite = NULL;
    ck_assert_int_eq(kind_of(&f), BULKWRITE__V1__WAIT_KIND__WAIT_KIND_PAUSED);
    /* ops in Kafka on a running shard, others held: the held ones' schedule */
    f = ready;
    f.held = 5;
    f.held_until_ms = 1796522400000;
    f.backlog_full = 1;
    ck_assert_int_eq(kind_of(&f), BULKWRITE__V1__WAIT_KIND__WAIT_KIND_HELD);
    /* nothing pending */
    f = (bw_wait_facts_t){.shard = 3, .pause = &pause, .backlog_full = 1};
    ck_assert_int_eq(kind_of(&f), 0);
}
END_TEST

/* Each kind's fields, and the JSON of a status with them: kind and detail always, the
 * members that apply, nothing on a shard that does not wait. */
START_TEST(wait_fields_and_json) {
    bw_shard_setting_t pause = {.paused = 1};
    snprintf(pause.changed_by, sizeof(pause.changed_by), "alice");
    snprintf(pause.reason, sizeof(pause.reason), "reindex");
    Bulkwrite__V1__ShardWait *w = bw_jobs_wait_pick(&(bw_wait_facts_t){.shard = 3, .in_kafka = 1, .pause = &pause});
    ck_assert_str_eq(w->detail, "shard 3 is paused by alice: reindex");
    ck_assert_str_eq(w->by, "alice");
    ck_assert_str_eq(w->reason, "reindex");
    bw_jobs_wait_free(w);
    pause.reason[0] = '\0';
    w = bw_jobs_wait_pick(&(bw_wait_facts_t){.shard = 3, .in_kafka = 1, .pause = &pause});
    ck_assert_str_eq(w->detail, "shard 3 is paused by alice");
    bw_jobs_wait_free(w);
    w = bw_jobs_wait_pick(&(bw_wait_facts_t){
        .shard = 6, .in_kafka = 1, .throttle = BULKWRITE__INTERNAL__V1__THROTTLE_STATE__THROTTLE_STATE_CRITICAL,
        .signal = BULKWRITE__INTERNAL__V1__THROTTLE_SIGNAL__THROTTLE_SIGNAL_THREADS_RUNNING,
        .throttle_reason = "threads_running 40 over its critical level 30 since 2026-12-01T19:21:25Z"});
    ck_assert_str_eq(w->detail, "shard 6 is paused by the adaptive throttle: threads_running 40 over its critical level "
                                "30 since 2026-12-01T19:21:25Z");
    ck_assert_str_eq(w->signal, "threads_running");
    bw_jobs_wait_free(w);
    w = bw_jobs_wait_pick(&(bw_wait_facts_t){.shard = 2, .in_kafka = 1,
                                             .error = BULKWRITE__INTERNAL__V1__GATE_REASON__GATE_REASON_GAP});
    ck_assert_str_eq(w->reason, "gap");
    ck_assert_ptr_nonnull(strstr(w->detail, "lost in Kafka"));
    bw_jobs_wait_free(w);

    /* a status of two shards: shard 0 held, shard 1 done */
    Bulkwrite__V1__JobShard sh[2], *shp[2];
    for (int i = 0; i < 2; i++) {
        bulkwrite__v1__job_shard__init(&sh[i]);
        sh[i].shard = (uint32_t)i;
        sh[i].submitted = 300;
        sh[i].error = "";
        shp[i] = &sh[i];
    }
    sh[0].pending = sh[0].scheduled = 300;
    sh[1].applied = 300;
    sh[0].waits = bw_jobs_wait_pick(&(bw_wait_facts_t){.shard = 0, .held = 300, .held_until_ms = 1796522400000});
    Bulkwrite__V1__JobStatus st = BULKWRITE__V1__JOB_STATUS__INIT;
    st.job_id = "4b9b8e033c407387850af0612b9fdbf3";
    st.request_id = "";
    st.shards = shp;
    st.n_shards = 2;
    char *json = bw_jobs_status_json(&st);
    ck_assert_ptr_nonnull(strstr(json, "\"waits\":{\"kind\":\"held\",\"detail\":\"shard 0 holds 300 ops of the job "
                                       "until 2026-12-06T02:00:00Z (not_before)\",\"until_ms\":1796522400000}"));
    ck_assert_ptr_null(strstr(strstr(json, "\"shard\":1"), "waits")); /* shard 1 waits for nothing */
    free(json);
    bw_jobs_wait_free(sh[0].waits);
}
END_TEST

Suite *jobs_suite(void) {
    Suite *s = suite_create("jobs");
    TCase *tc = tcase_create("jobs");
    tcase_add_test(tc, prerequisite_done_per_shard);
    tcase_add_test(tc, wait_precedence);
    tcase_add_test(tc, wait_fields_and_json);
    suite_add_tcase(s, tc);
    return s;
}
