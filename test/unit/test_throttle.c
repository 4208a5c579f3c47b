/* test_throttle.c — the adaptive throttle's decisions (consumer/throttle.h), driven by a
 * fake clock: decrease over a threshold, hold between the levels, grow after calm,
 * unknown at the floor, critical only after critical_ms, dry run, an operator's pin. */
#include <math.h>
#include <string.h>

#include "helpers.h"
#include "throttle.h"

#define S 1000000LL /* one second in us */

static bw_throttle_limits_t limits(void) {
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
    l.limits[BW_SIGNAL_THREADS_RUNNING] = (bw_signal_limit_t){32, 0};
    return l;
}

/* Every signal fresh at now; lag and threads_running as given. */
static void readings(bw_signal_reading_t r[BW_SIGNAL_KINDS], double lag, double threads, int64_t now) {
    memset(r, 0, sizeof(bw_signal_reading_t) * BW_SIGNAL_KINDS);
    for (int k = 0; k < BW_SIGNAL_KINDS; k++) r[k].at_us = now;
    r[BW_SIGNAL_REPLICATION_LAG].value = lag;
    r[BW_SIGNAL_THREADS_RUNNING].value = threads;
}

/* One step at `at` (monotonic and wall alike) with every signal fresh, lag and
 * threads_running as given. */
static void step_with(const bw_throttle_limits_t *l, bw_throttle_shard_t *t, double cap, double observed, double lag,
                      double threads, int64_t at) {
    bw_signal_reading_t r[BW_SIGNAL_KINDS];
    readings(r, lag, threads, at);
    bw_throttle_step(l, t, cap, observed, r, at, at / 1000);
}

START_TEST(decrease_hold_recover) {
    bw_throttle_limits_t l = limits();
    bw_throttle_shard_t t = {0};
    bw_signal_reading_t r[BW_SIGNAL_KINDS];
    int64_t now = 100 * S;
    readings(r, 10, 2, now);
    ck_assert_int_eq(bw_throttle_step(&l, &t, 100, 0, r, now, 1000), 0);
    ck_assert_int_eq(t.state, BW_THROTTLE_RUNNING);
    ck_assert(bw_throttle_rate(&l, &t, 100) == 100);
    /* lag over 1000 ms: halved from the cap at once, then once per interval, not per call */
    now += S;
    readings(r, 1520, 2, now);
    ck_assert_int_eq(bw_throttle_step(&l, &t, 100, 0, r, now, 2000), 1);
    ck_assert_int_eq(t.state, BW_THROTTLE_THROTTLED);
    ck_assert(t.rate == 50);
    ck_assert_int_eq(t.signal, BW_SIGNAL_REPLICATION_LAG);
    ck_assert_str_eq(t.why, "replication_lag_ms 1520 over its threshold 1000 since 1970-01-01T00:00:02Z");
    ck_assert_int_eq(bw_throttle_step(&l, &t, 100, 0, r, now + S / 2, 2500), 0);
    ck_assert(t.rate == 50);
    for (int i = 1; i <= 10; i++) {
        readings(r, 1520, 2, now + i * S);
        bw_throttle_step(&l, &t, 100, 0, r, now + i * S, 2000);
    }
    ck_assert(t.rate == 1); /* the floor, never below */
    ck_assert(bw_throttle_rate(&l, &t, 100) == 1);
    now += 11 * S;
    /* between the recovery level (800) and the threshold: the rate holds */
    for (int i = 0; i < 10; i++) {
        readings(r, 900, 2, now + i * S);
        bw_throttle_step(&l, &t, 100, 0, r, now + i * S, 3000);
    }
    ck_assert_int_eq(t.state, BW_THROTTLE_THROTTLED);
    ck_assert(t.rate == 1);
    now += 10 * S;
    /* calm: after quiet_ms (3 s), +10 % of the cap (where the trouble began) per interval, until the cap */
    readings(r, 100, 2, now);
    bw_throttle_step(&l, &t, 100, 0, r, now, 4000);
    readings(r, 100, 2, now + 2 * S);
    bw_throttle_step(&l, &t, 100, 0, r, now + 2 * S, 4000);
    ck_assert(t.rate == 1);
    readings(r, 100, 2, now + 3 * S);
    bw_throttle_step(&l, &t, 100, 0, r, now + 3 * S, 4000);
    ck_assert(fabs(t.rate - 11) < 1e-9);
    int changed = 0;
    for (int i = 4; i <= 14; i++) {
        readings(r, 100, 2, now + i * S);
        changed |= bw_throttle_step(&l, &t, 100, 0, r, now + i * S, 5000);
    }
    ck_assert_int_eq(changed, 1);
    ck_assert_int_eq(t.state, BW_THROTTLE_RUNNING);
    ck_assert(bw_throttle_rate(&l, &t, 100) == 100);
}
END_TEST

START_TEST(unlimited_cap_starts_from_observed) {
    bw_throttle_limits_t l = limits();
    bw_throttle_shard_t t = {0};
    bw_signal_reading_t r[BW_SIGNAL_KINDS];
    int64_t now = 100 * S;
    readings(r, 10, 2, now - S); /* a calm first step: it ran here before */
    bw_throttle_step(&l, &t, 0, 190, r, now - S, 500);
    readings(r, 10, 40, now); /* threads_running 40 > 32 */
    bw_throttle_step(&l, &t, 0, 190, r, now, 1000);
    ck_assert_int_eq(t.state, BW_THROTTLE_THROTTLED);
    ck_assert(t.rate == 95); /* half of the 190 statements/s it ran, not of max_rate */
    ck_assert(bw_throttle_rate(&l, &t, 0) == 95);
    ck_assert_int_eq(t.signal, BW_SIGNAL_THREADS_RUNNING);
    /* the worst ratio names the signal: lag 3000/1000 beats threads 40/32 */
    readings(r, 3000, 40, now + S);
    bw_throttle_step(&l, &t, 0, 190, r, now + S, 2000);
    ck_assert_int_eq(t.signal, BW_SIGNAL_REPLICATION_LAG);
    /* recovery climbs to max_rate, then the shard runs unlimited again */
    readings(r, 0, 1, now + 2 * S);
    for (int i = 2; i < 40; i++) {
        readings(r, 0, 1, now + i * S);
        bw_throttle_step(&l, &t, 0, 0, r, now + i * S, 3000);
    }
    ck_assert_int_eq(t.state, BW_THROTTLE_RUNNING);
    ck_assert(bw_throttle_rate(&l, &t, 0) == 0);
}
END_TEST

/* Recovery climbs in steps of `increase` of the rate it ran at when the trouble began,
 * not of max_rate: an unlimited shard that got into trouble at 40 statements/s climbs by
 * 4, not by 100 (which would flood the server again at once); past that rate, by 10 % of
 * its own rate. */
START_TEST(recovery_steps_by_where_trouble_began) {
    bw_throttle_limits_t l = limits();
    bw_throttle_shard_t t = {0};
    int64_t now = 100 * S;
    step_with(&l, &t, 0, 40, 10, 1, now - S);
    step_with(&l, &t, 0, 40, 10, 40, now);
    ck_assert(t.rate == 20);
    for (int i = 1; i <= 4; i++) step_with(&l, &t, 0, 0, 10, 1, now + i * S);
    ck_assert(fabs(t.rate - 24) < 1e-9); /* calm since +1 s, quiet_ms 3 s: one step of 0.1 x 40 */
    /* a new bout of trouble at 24: the next climb is in steps of 2.4 */
    step_with(&l, &t, 0, 0, 10, 40, now + 5 * S);
    ck_assert(fabs(t.rate - 12) < 1e-9);
    for (int i = 6; i <= 9; i++) step_with(&l, &t, 0, 0, 10, 1, now + i * S);
    ck_assert(fabs(t.rate - 14.4) < 1e-9);
    for (int i = 10; i <= 13; i++) step_with(&l, &t, 0, 0, 10, 1, now + i * S);
    ck_assert(fabs(t.rate - 24) < 1e-6); /* back where the trouble began */
    step_with(&l, &t, 0, 0, 10, 1, now + 14 * S);
    ck_assert(fabs(t.rate - 26.4) < 1e-6); /* past it: 10 % of its own rate */
    ck_assert_int_eq(t.state, BW_THROTTLE_THROTTLED);
}
END_TEST

START_TEST(unknown_is_never_healthy) {
    bw_throttle_limits_t l = limits();
    bw_throttle_shard_t t = {0};
    bw_signal_reading_t r[BW_SIGNAL_KINDS];
    int64_t now = 100 * S;
    readings(r, 10, 2, now);
    bw_throttle_step(&l, &t, 100, 0, r, now, 1000);
    /* the lag was last read 6 s ago (stale_ms 5 s), with an error: unknown, at the floor */
    now += 6 * S;
    readings(r, 10, 2, now);
    r[BW_SIGNAL_REPLICATION_LAG].at_us = now - 6 * S;
    strcpy(r[BW_SIGNAL_REPLICATION_LAG].error, "heartbeat on 127.0.0.1:3308: Table 'db00004.bw_heartbeat' doesn't exist");
    ck_assert_int_eq(bw_throttle_step(&l, &t, 100, 0, r, now, 7000), 1);
    ck_assert_int_eq(t.state, BW_THROTTLE_UNKNOWN);
    ck_assert(bw_throttle_rate(&l, &t, 100) == 1);
    ck_assert_ptr_nonnull(strstr(t.why, "replication_lag_ms unknown since"));
    ck_assert_ptr_nonnull(strstr(t.why, "doesn't exist"));
    /* never read at all is unknown too */
    bw_throttle_shard_t fresh = {0};
    r[BW_SIGNAL_REPLICATION_LAG].at_us = 0;
    bw_throttle_step(&l, &fresh, 100, 0, r, now, 7000);
    ck_assert_int_eq(fresh.state, BW_THROTTLE_UNKNOWN);
    /* read again and calm: throttled at the floor, growing after quiet_ms (not a jump to the cap) */
    readings(r, 10, 2, now + S);
    bw_throttle_step(&l, &t, 100, 0, r, now + S, 8000);
    ck_assert_int_eq(t.state, BW_THROTTLE_THROTTLED);
    ck_assert(bw_throttle_rate(&l, &t, 100) == 1);
    /* a signal whose threshold is 0 is off: never unknown */
    l.limits[BW_SIGNAL_THREADS_RUNNING].threshold = 0;
    bw_throttle_shard_t off = {0};
    readings(r, 10, 0, now);
    r[BW_SIGNAL_THREADS_RUNNING].at_us = 0;
    bw_throttle_step(&l, &off, 100, 0, r, now, 7000);
    ck_assert_int_eq(off.state, BW_THROTTLE_RUNNING);
}
END_TEST

START_TEST(critical_pauses_only_after_critical_ms) {
    bw_throttle_limits_t l = limits();
    bw_throttle_shard_t t = {0};
    bw_signal_reading_t r[BW_SIGNAL_KINDS];
    int64_t now = 100 * S;
    /* a 5 s spike over the critical 30 s lag: throttled, not paused */
    for (int i = 0; i < 5; i++) {
        readings(r, 40000, 2, now + i * S);
        bw_throttle_step(&l, &t, 100, 0, r, now + i * S, 1000);
    }
    ck_assert_int_eq(t.state, BW_THROTTLE_THROTTLED);
    ck_assert_int_eq(bw_throttle_paused(&l, &t), 0);
    readings(r, 500, 2, now + 5 * S); /* the spike ends: the clock restarts */
    bw_throttle_step(&l, &t, 100, 0, r, now + 5 * S, 1000);
    for (int i = 6; i < 16; i++) {
        readings(r, 40000, 2, now + i * S);
        bw_throttle_step(&l, &t, 100, 0, r, now + i * S, 1000);
    }
    ck_assert_int_eq(t.state, BW_THROTTLE_THROTTLED); /* 9 s over it */
    readings(r, 40000, 2, now + 16 * S);
    ck_assert_int_eq(bw_throttle_step(&l, &t, 100, 0, r, now + 16 * S, 1000), 1);
    ck_assert_int_eq(t.state, BW_THROTTLE_CRITICAL);
    ck_assert_int_eq(bw_throttle_paused(&l, &t), 1);
    ck_assert_ptr_nonnull(strstr(t.why, "over its critical level 30000: paused since"));
    /* under the critical level but over the threshold: still paused */
    readings(r, 5000, 2, now + 17 * S);
    bw_throttle_step(&l, &t, 100, 0, r, now + 17 * S, 1000);
    ck_assert_int_eq(bw_throttle_paused(&l, &t), 1);
    /* its signal no longer readable: still paused (unknown is never a recovery) */
    readings(r, 5000, 2, now + 17 * S);
    r[BW_SIGNAL_REPLICATION_LAG].at_us = 0;
    bw_throttle_step(&l, &t, 100, 0, r, now + 17 * S + S / 2, 1000);
    ck_assert_int_eq(t.state, BW_THROTTLE_CRITICAL);
    /* under the threshold: resumes by itself, at the floor, whatever another signal does */
    readings(r, 900, 40, now + 18 * S);
    bw_throttle_step(&l, &t, 100, 0, r, now + 18 * S, 1000);
    ck_assert_int_eq(bw_throttle_paused(&l, &t), 0);
    ck_assert_int_eq(t.state, BW_THROTTLE_THROTTLED);
    ck_assert(bw_throttle_rate(&l, &t, 100) == 1);
}
END_TEST

START_TEST(a_shard_arriving_in_trouble_starts_at_the_floor) {
    bw_throttle_limits_t l = limits();
    bw_throttle_shard_t t = {0}; /* just assigned (a rebalance zeroes it) */
    bw_signal_reading_t r[BW_SIGNAL_KINDS];
    int64_t now = 100 * S;
    readings(r, 5000, 2, now);
    ck_assert_int_eq(bw_throttle_step(&l, &t, 200, 0, r, now, 1000), 1);
    ck_assert_int_eq(t.state, BW_THROTTLE_THROTTLED);
    ck_assert(bw_throttle_rate(&l, &t, 200) == 1); /* not 200, then 100, 50, ... */
    /* and it recovers from there as any throttled shard: calm for quiet_ms, then +10 % of the cap */
    for (int i = 1; i <= 5; i++) {
        readings(r, 10, 2, now + i * S);
        bw_throttle_step(&l, &t, 200, 0, r, now + i * S, 1000);
    }
    ck_assert(t.rate > 1 && t.rate < 200);
}
END_TEST

START_TEST(a_lowered_cap_cuts_from_itself) {
    bw_throttle_limits_t l = limits();
    bw_throttle_shard_t t = {0};
    bw_signal_reading_t r[BW_SIGNAL_KINDS];
    int64_t now = 100 * S;
    readings(r, 10, 2, now - S);
    bw_throttle_step(&l, &t, 1000, 0, r, now - S, 500);
    readings(r, 1500, 2, now);
    bw_throttle_step(&l, &t, 1000, 0, r, now, 1000);
    ck_assert(t.rate == 500);
    /* the operator lowers the cap to 100 while it is throttled: the next cut is from 100 */
    readings(r, 1500, 2, now + S);
    bw_throttle_step(&l, &t, 100, 0, r, now + S, 2000);
    ck_assert(t.rate == 50);
    ck_assert(bw_throttle_rate(&l, &t, 100) == 50);
    /* the trouble began at 1000, but the climb is in steps of the new cap's tenth */
    for (int i = 2; i <= 5; i++) step_with(&l, &t, 100, 0, 10, 2, now + i * S);
    ck_assert(fabs(t.rate - 60) < 1e-9);
}
END_TEST

/* A signal that dips under the recovery level and comes back before quiet_ms is the same
 * bout of trouble: the climb stays in steps of where it began (the cap), not of the rate
 * the cuts left. */
START_TEST(a_flicker_keeps_the_bout) {
    bw_throttle_limits_t l = limits();
    bw_throttle_shard_t t = {0};
    int64_t now = 100 * S;
    step_with(&l, &t, 100, 0, 10, 2, now - S);
    step_with(&l, &t, 100, 0, 1500, 2, now);
    step_with(&l, &t, 100, 0, 10, 2, now + S);       /* calm for one interval */
    step_with(&l, &t, 100, 0, 1500, 2, now + 2 * S); /* over again */
    ck_assert(t.rate == 25);
    for (int i = 3; i <= 6; i++) step_with(&l, &t, 100, 0, 10, 2, now + i * S);
    ck_assert(fabs(t.rate - 35) < 1e-9); /* 25 + 0.1 x 100, not + 0.1 x 50 */
}
END_TEST

START_TEST(dry_run_and_off_change_nothing) {
    bw_throttle_limits_t l = limits();
    l.mode = BW_THROTTLE_DRY_RUN;
    bw_throttle_shard_t t = {0};
    bw_signal_reading_t r[BW_SIGNAL_KINDS];
    int64_t now = 100 * S;
    for (int i = 0; i < 20; i++) {
        readings(r, 40000, 2, now + i * S);
        bw_throttle_step(&l, &t, 100, 0, r, now + i * S, 1000);
    }
    /* decided and reported ... */
    ck_assert_int_eq(t.state, BW_THROTTLE_CRITICAL);
    ck_assert(t.rate == 1);
    /* ... not applied */
    ck_assert(bw_throttle_rate(&l, &t, 100) == 100);
    ck_assert_int_eq(bw_throttle_paused(&l, &t), 0);
    l.mode = BW_THROTTLE_OFF;
    ck_assert(bw_throttle_rate(&l, &t, 100) == 100);
    /* a cap below the throttle's rate wins */
    l.mode = BW_THROTTLE_ON;
    t.state = BW_THROTTLE_THROTTLED;
    t.rate = 50;
    ck_assert(bw_throttle_rate(&l, &t, 20) == 20);
}
END_TEST

START_TEST(pinned_shard_runs_at_its_cap) {
    bw_throttle_limits_t l = limits();
    bw_throttle_shard_t t = {0};
    bw_signal_reading_t r[BW_SIGNAL_KINDS];
    int64_t now = 100 * S;
    readings(r, 10, 2, now - S);
    bw_throttle_step(&l, &t, 100, 0, r, now - S, 500);
    readings(r, 5000, 2, now);
    bw_throttle_step(&l, &t, 100, 0, r, now, 1000);
    ck_assert_int_eq(t.state, BW_THROTTLE_THROTTLED);
    ck_assert(bw_throttle_rate(&l, &t, 100) == 50);
    /* pinned: at its cap whatever the signals say, the reason says who holds it */
    ck_assert_int_eq(bw_throttle_pin(&t, 2000), 1);
    ck_assert_int_eq(bw_throttle_pin(&t, 3000), 0); /* once: no log line per tick */
    ck_assert_int_eq(t.state, BW_THROTTLE_RUNNING);
    ck_assert(bw_throttle_rate(&l, &t, 100) == 100);
    ck_assert_int_eq(bw_throttle_paused(&l, &t), 0);
    ck_assert_ptr_nonnull(strstr(t.why, "pinned by an operator since 1970-01-01T00:00:02Z"));
    /* unpinned: the next step starts afresh and the signal cuts the rate again */
    now += S;
    readings(r, 5000, 2, now);
    ck_assert_int_eq(bw_throttle_step(&l, &t, 100, 0, r, now, 4000), 1);
    ck_assert_int_eq(t.pinned, 0);
    ck_assert_int_eq(t.state, BW_THROTTLE_THROTTLED);
    ck_assert(bw_throttle_rate(&l, &t, 100) == 50);
}
END_TEST

Suite *throttle_suite(void) {
    Suite *s = suite_create("throttle");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, decrease_hold_recover);
    tcase_add_test(tc, unlimited_cap_starts_from_observed);
    tcase_add_test(tc, recovery_steps_by_where_trouble_began);
    tcase_add_test(tc, unknown_is_never_healthy);
    tcase_add_test(tc, critical_pauses_only_after_critical_ms);
    tcase_add_test(tc, dry_run_and_off_change_nothing);
    tcase_add_test(tc, pinned_shard_runs_at_its_cap);
    tcase_add_test(tc, a_lowered_cap_cuts_from_itself);
    tcase_add_test(tc, a_flicker_keeps_the_bout);
    tcase_add_test(tc, a_shard_arriving_in_trouble_starts_at_the_floor);
    suite_add_tcase(s, tc);
    return s;
}
