/* test_handover.c — what a moved shard keeps from its latest status record
 * (consumer/handover.h), with the clock injected: a throttled shard resumes at its rate
 * and the throttle's own steps carry on from there; a critical one stays paused while its
 * signal is over; a stale record, a running shard and throttle.mode off keep nothing; a
 * held shard stays held until its probe; recent errors come along. */
#include <math.h>
#include <string.h>

#include "handover.h"
#include "health.h"
#include "helpers.h"

#define S 1000000LL /* one second in us */
#define NOW_MS 1700000000000LL
#define NOW_US (500 * S)

static bw_throttle_limits_t tlimits(void) {
    bw_throttle_limits_t l = {0};
    l.mode = BW_THROTTLE_ON;
    l.floor = 1;
    l.max_rate = 1000;
    l.decrease = 0.5;
    l.increase = 0.1;
    l.recover_ratio = 0.8;
    l.interval_us = 1 * S;
    l.stale_us = 5 * S;
    l.quiet_us = 3 * S;
    l.critical_us = 10 * S;
    l.limits[BW_SIGNAL_REPLICATION_LAG] = (bw_signal_limit_t){1000, 30000};
    return l;
}

static const bw_handover_limits_t hlimits = {.max_age_ms = 60000, .probe_every_ms = 30000, .retry_initial_ms = 100};

/* A record written age_ms ago by another consumer: throttled at 12.5 of a cap of 100. */
static Bulkwrite__Internal__V1__ShardStatus throttled(int64_t age_ms) {
    Bulkwrite__Internal__V1__ShardStatus st = BULKWRITE__INTERNAL__V1__SHARD_STATUS__INIT;
    st.shard = 5;
    st.consumer = "127.0.0.1:18082";
    st.updated_at_ms = NOW_MS - age_ms;
    st.throttle_state = "throttled";
    st.throttle_signal = "replication_lag_ms";
    st.throttle_value = 1520;
    st.throttle_level = 1000;
    st.throttle_since_ms = NOW_MS - 40000;
    st.throttle_rate = 12.5;
    st.throttle_reason = "replication_lag_ms 1520 over its threshold 1000 since ...";
    st.cap_rate = 100;
    return st;
}

static void lag(bw_signal_reading_t r[BW_SIGNAL_KINDS], double v, int64_t at) {
    memset(r, 0, sizeof(bw_signal_reading_t) * BW_SIGNAL_KINDS);
    for (int k = 0; k < BW_SIGNAL_KINDS; k++) r[k].at_us = at;
    r[BW_SIGNAL_REPLICATION_LAG].value = v;
}

START_TEST(throttled_resumes_at_its_rate) {
    bw_throttle_limits_t tl = tlimits();
    Bulkwrite__Internal__V1__ShardStatus st = throttled(3000);
    bw_handover_t h;
    ck_assert_int_eq(bw_handover_seed(&st, &hlimits, &tl, NOW_US, NOW_MS, &h), BW_HANDOVER_SEEDED);
    ck_assert_int_eq(h.age_ms, 3000);
    ck_assert_int_eq(h.throttle, 1);
    ck_assert_int_eq(h.t.state, BW_THROTTLE_THROTTLED);
    ck_assert_int_eq(h.t.signal, BW_SIGNAL_REPLICATION_LAG);
    ck_assert_int_eq(h.t.since_ms, NOW_MS - 40000);
    ck_assert(bw_throttle_rate(&tl, &h.t, 100) == 12.5); /* not the cap */
    ck_assert_int_eq(h.held, 0);
    /* still over: the next cut comes an interval later, from 12.5 (not from the cap, not
     * at the floor as a shard arriving afresh would) */
    bw_signal_reading_t r[BW_SIGNAL_KINDS];
    lag(r, 1520, NOW_US + S / 2);
    bw_throttle_step(&tl, &h.t, 100, 0, r, NOW_US + S / 2, NOW_MS + 500);
    ck_assert(h.t.rate == 12.5);
    lag(r, 1520, NOW_US + S);
    bw_throttle_step(&tl, &h.t, 100, 0, r, NOW_US + S, NOW_MS + 1000);
    ck_assert(h.t.rate == 6.25);
    /* between the levels it holds; calm, it climbs in tenths of the cap back to it */
    for (int i = 2; i < 6; i++) {
        lag(r, 900, NOW_US + i * S);
        bw_throttle_step(&tl, &h.t, 100, 0, r, NOW_US + i * S, NOW_MS + i * 1000);
    }
    ck_assert(h.t.rate == 6.25);
    for (int i = 6; i < 30; i++) {
        lag(r, 10, NOW_US + i * S);
        bw_throttle_step(&tl, &h.t, 100, 0, r, NOW_US + i * S, NOW_MS + i * 1000);
    }
    ck_assert_int_eq(h.t.state, BW_THROTTLE_RUNNING);
    ck_assert(bw_throttle_rate(&tl, &h.t, 100) == 100);
}
END_TEST

START_TEST(stale_or_absent_keeps_nothing) {
    bw_throttle_limits_t tl = tlimits();
    bw_handover_t h;
    ck_assert_int_eq(bw_handover_seed(NULL, &hlimits, &tl, NOW_US, NOW_MS, &h), BW_HANDOVER_NONE);
    Bulkwrite__Internal__V1__ShardStatus st = throttled(60001); /* over max_age_ms */
    ck_assert_int_eq(bw_handover_seed(&st, &hlimits, &tl, NOW_US, NOW_MS, &h), BW_HANDOVER_STALE);
    ck_assert_int_eq(h.throttle, 0);
    ck_assert_int_eq(h.age_ms, 60001);
    st = throttled(60000); /* at it: kept */
    ck_assert_int_eq(bw_handover_seed(&st, &hlimits, &tl, NOW_US, NOW_MS, &h), BW_HANDOVER_SEEDED);
    bw_handover_limits_t off = hlimits;
    off.max_age_ms = 0; /* seeding off */
    ck_assert_int_eq(bw_handover_seed(&st, &off, &tl, NOW_US, NOW_MS, &h), BW_HANDOVER_STALE);
    st.updated_at_ms = 0; /* never stamped */
    ck_assert_int_eq(bw_handover_seed(&st, &hlimits, &tl, NOW_US, NOW_MS, &h), BW_HANDOVER_STALE);
    st = throttled(-2000); /* the writer's clock a little ahead: fresh */
    ck_assert_int_eq(bw_handover_seed(&st, &hlimits, &tl, NOW_US, NOW_MS, &h), BW_HANDOVER_SEEDED);
    ck_assert_int_eq(h.age_ms, 0);
}
END_TEST

START_TEST(running_or_throttle_off_keeps_no_throttle) {
    bw_throttle_limits_t tl = tlimits();
    bw_handover_t h;
    Bulkwrite__Internal__V1__ShardStatus st = throttled(1000);
    st.throttle_state = "running";
    ck_assert_int_eq(bw_handover_seed(&st, &hlimits, &tl, NOW_US, NOW_MS, &h), BW_HANDOVER_NONE);
    st.throttle_state = NULL; /* its holder ran without the throttle */
    ck_assert_int_eq(bw_handover_seed(&st, &hlimits, &tl, NOW_US, NOW_MS, &h), BW_HANDOVER_NONE);
    st = throttled(1000);
    tl.mode = BW_THROTTLE_OFF; /* this consumer runs without it */
    ck_assert_int_eq(bw_handover_seed(&st, &hlimits, &tl, NOW_US, NOW_MS, &h), BW_HANDOVER_NONE);
    tl.mode = BW_THROTTLE_DRY_RUN; /* decided and reported: kept */
    ck_assert_int_eq(bw_handover_seed(&st, &hlimits, &tl, NOW_US, NOW_MS, &h), BW_HANDOVER_SEEDED);
    ck_assert(h.t.rate == 12.5);
    ck_assert(bw_throttle_rate(&tl, &h.t, 100) == 100); /* dry run: the cap stays in force */
}
END_TEST

START_TEST(critical_stays_paused) {
    bw_throttle_limits_t tl = tlimits();
    bw_handover_t h;
    Bulkwrite__Internal__V1__ShardStatus st = throttled(2000);
    st.throttle_state = "critical";
    st.throttle_value = 40000;
    st.throttle_level = 30000;
    st.throttle_rate = 1;
    ck_assert_int_eq(bw_handover_seed(&st, &hlimits, &tl, NOW_US, NOW_MS, &h), BW_HANDOVER_SEEDED);
    ck_assert_int_eq(h.t.state, BW_THROTTLE_CRITICAL);
    ck_assert_int_eq(bw_throttle_paused(&tl, &h.t), 1);
    /* its signal still over its threshold (not critical any more): still paused */
    bw_signal_reading_t r[BW_SIGNAL_KINDS];
    lag(r, 5000, NOW_US + S);
    bw_throttle_step(&tl, &h.t, 100, 0, r, NOW_US + S, NOW_MS + 1000);
    ck_assert_int_eq(bw_throttle_paused(&tl, &h.t), 1);
    /* still critical: paused at once, not critical_ms later */
    lag(r, 40000, NOW_US + 2 * S);
    bw_throttle_step(&tl, &h.t, 100, 0, r, NOW_US + 2 * S, NOW_MS + 2000);
    ck_assert_int_eq(h.t.state, BW_THROTTLE_CRITICAL);
    /* under its threshold: it resumes at the floor, throttled */
    lag(r, 500, NOW_US + 3 * S);
    bw_throttle_step(&tl, &h.t, 100, 0, r, NOW_US + 3 * S, NOW_MS + 3000);
    ck_assert_int_eq(h.t.state, BW_THROTTLE_THROTTLED);
    ck_assert(h.t.rate == 1);
    /* unknown runs at the floor whatever rate the record says */
    st.throttle_state = "unknown";
    st.throttle_rate = 50;
    bw_handover_seed(&st, &hlimits, &tl, NOW_US, NOW_MS, &h);
    ck_assert_int_eq(h.t.state, BW_THROTTLE_UNKNOWN);
    ck_assert(bw_throttle_rate(&tl, &h.t, 100) == 1);
}
END_TEST

/* A record with the enums (ShardStatus.*_code) is read by them, not by its names: a
 * newer consumer may name a state or reason this version spells differently. */
START_TEST(codes_decide_over_names) {
    bw_throttle_limits_t tl = tlimits();
    bw_handover_t h;
    Bulkwrite__Internal__V1__ShardStatus st = throttled(3000);
    st.throttle_state = "a newer name";
    st.throttle_signal = "";
    st.throttle_state_code = BULKWRITE__INTERNAL__V1__THROTTLE_STATE__THROTTLE_STATE_CRITICAL;
    st.throttle_signal_code = BULKWRITE__INTERNAL__V1__THROTTLE_SIGNAL__THROTTLE_SIGNAL_THREADS_RUNNING;
    char *names[] = {"running"};
    Bulkwrite__Internal__V1__GateReason codes[] = {BULKWRITE__INTERNAL__V1__GATE_REASON__GATE_REASON_STOPPED};
    st.reasons = names, st.n_reasons = 1;
    st.reason_codes = codes, st.n_reason_codes = 1;
    ck_assert_int_eq(bw_handover_seed(&st, &hlimits, &tl, NOW_US, NOW_MS, &h), BW_HANDOVER_SEEDED);
    ck_assert_int_eq(h.throttle, 1);
    ck_assert_int_eq(h.t.state, BW_THROTTLE_CRITICAL);
    ck_assert_int_eq(h.t.signal, BW_SIGNAL_THREADS_RUNNING);
    ck_assert_int_eq(h.stopped, 1);
    ck_assert_int_eq(h.held, 1);
    /* the same record with running as its code keeps no throttle, whatever its name says */
    st.throttle_state = "critical";
    st.throttle_state_code = BULKWRITE__INTERNAL__V1__THROTTLE_STATE__THROTTLE_STATE_RUNNING;
    ck_assert_int_eq(bw_handover_seed(&st, &hlimits, &tl, NOW_US, NOW_MS, &h), BW_HANDOVER_SEEDED);
    ck_assert_int_eq(h.throttle, 0);
}
END_TEST

START_TEST(held_stays_held_until_its_probe) {
    bw_throttle_limits_t tl = tlimits();
    bw_handover_t h;
    Bulkwrite__Internal__V1__ShardStatus st = throttled(12000);
    st.throttle_state = "running";
    char *reasons[] = {"unhealthy", "backoff"};
    st.reasons = reasons;
    st.n_reasons = 2;
    st.unhealthy = 1;
    Bulkwrite__Internal__V1__ShardError e1 = BULKWRITE__INTERNAL__V1__SHARD_ERROR__INIT, e2 = BULKWRITE__INTERNAL__V1__SHARD_ERROR__INIT;
    e1.at_ms = NOW_MS - 13000, e1.kind = "timeout", e1.message = "Lock wait timeout exceeded (1205)";
    e2.at_ms = NOW_MS - 20000, e2.kind = "a kind from a newer version", e2.message = "older";
    Bulkwrite__Internal__V1__ShardError *errs[] = {&e1, &e2}; /* newest first */
    st.recent_errors = errs;
    st.n_recent_errors = 2;
    ck_assert_int_eq(bw_handover_seed(&st, &hlimits, &tl, NOW_US, NOW_MS, &h), BW_HANDOVER_SEEDED);
    ck_assert_int_eq(h.throttle, 0);
    ck_assert_int_eq(h.held, 1);
    ck_assert_int_eq(h.stopped, 0);
    ck_assert_int_eq(h.probe_at_us, NOW_US + 18 * S); /* pause_ms (30 s) after the record */
    ck_assert_int_eq(h.backoff_us, 100000);
    ck_assert_int_eq(h.n_errors, 2);
    ck_assert_str_eq(h.errors[0].message, "older"); /* oldest first, as the ring fills */
    ck_assert_str_eq(h.errors[0].kind, "other");
    ck_assert_str_eq(h.errors[1].kind, "timeout");
    /* in the health state: held, a probe at probe_at_us, and its success frees it */
    int server_of[1] = {0};
    bw_health_t *hs = bw_health_new(1, 1, server_of);
    bw_health_seed_shard(hs, 0, h.stopped, h.probe_at_us);
    int64_t wait = 0;
    ck_assert_int_eq(bw_health_admit(hs, 0, NOW_US, &wait), BW_ADMIT_WAIT);
    ck_assert_int_eq(wait, 18 * S);
    ck_assert_int_eq(bw_health_admit(hs, 0, NOW_US + 18 * S, &wait), BW_ADMIT_PROBE);
    ck_assert_uint_eq(bw_health_report(hs, 0, BW_FAIL_NONE, 1, NOW_US + 19 * S), BW_HEALTH_SHARD_FREED);
    ck_assert_int_eq(bw_health_admit(hs, 0, NOW_US + 19 * S, &wait), BW_ADMIT_RUN);
    bw_health_free(hs);
    /* a record older than pause_ms: the probe is due at once; a stop error stays a stop */
    st = throttled(45000);
    char *stopped[] = {"stopped"};
    st.reasons = stopped;
    st.n_reasons = 1;
    ck_assert_int_eq(bw_handover_seed(&st, &hlimits, &tl, NOW_US, NOW_MS, &h), BW_HANDOVER_SEEDED);
    ck_assert_int_eq(h.held, 1);
    ck_assert_int_eq(h.stopped, 1);
    ck_assert_int_eq(h.probe_at_us, NOW_US);
}
END_TEST

Suite *handover_suite(void) {
    Suite *s = suite_create("handover");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, throttled_resumes_at_its_rate);
    tcase_add_test(tc, stale_or_absent_keeps_nothing);
    tcase_add_test(tc, running_or_throttle_off_keeps_no_throttle);
    tcase_add_test(tc, critical_stays_paused);
    tcase_add_test(tc, held_stays_held_until_its_probe);
    tcase_add_test(tc, codes_decide_over_names);
    suite_add_tcase(s, tc);
    return s;
}
