/* test_ratelimit.c — Guava SmoothBursty semantics, driven by an injected clock. */
#include "helpers.h"
#include "ratelimit.h"

#include <math.h>
#include <string.h>

#define SEC 1000000LL
#define MS 1000LL

START_TEST(first_acquire_immediate) {
    bw_ratelimit_t rl;
    bw_ratelimit_init(&rl, 1.0, 5 * SEC);
    ck_assert_int_eq(bw_ratelimit_try_acquire(&rl, 1, 5 * SEC), 0);
    /* the next one waits a whole interval */
    ck_assert_int_eq(bw_ratelimit_try_acquire(&rl, 1, 5 * SEC), SEC);
    ck_assert_int_eq(bw_ratelimit_try_acquire(&rl, 1, 5 * SEC + 300 * MS), 700 * MS);
    ck_assert_int_eq(bw_ratelimit_try_acquire(&rl, 1, 6 * SEC), 0);
}
END_TEST

/* An operator lifts a throttled shard: the wait owed at 0.001/s is cut to one new interval. */
START_TEST(rate_raise_cuts_the_old_wait) {
    bw_ratelimit_t rl;
    bw_ratelimit_init(&rl, 0.001, 0);
    ck_assert_int_eq(bw_ratelimit_try_acquire(&rl, 1, 0), 0);
    ck_assert_int_eq(bw_ratelimit_try_acquire(&rl, 1, 10 * SEC), 990 * SEC);
    bw_ratelimit_set_rate(&rl, 10.0, 10 * SEC);
    ck_assert_int_eq(bw_ratelimit_try_acquire(&rl, 1, 10 * SEC), 100 * MS);
    ck_assert_int_eq(bw_ratelimit_try_acquire(&rl, 1, 10 * SEC + 100 * MS), 0);
    /* lowering the rate keeps a short wait as it is */
    bw_ratelimit_set_rate(&rl, 1.0, 10 * SEC + 100 * MS);
    ck_assert_int_eq(bw_ratelimit_try_acquire(&rl, 1, 10 * SEC + 100 * MS), 100 * MS);
}
END_TEST

START_TEST(try_acquire_spacing_rate5) {
    bw_ratelimit_t rl;
    bw_ratelimit_init(&rl, 5.0, 0);
    int64_t granted_at[10];
    int n = 0;
    for (int64_t t = 0; t <= 2 * SEC && n < 10; t += MS)
        if (bw_ratelimit_try_acquire(&rl, 1, t) == 0) granted_at[n++] = t;
    ck_assert_int_eq(n, 10);
    for (int i = 0; i < n; i++) ck_assert_int_eq(granted_at[i], i * 200 * MS);
    /* a refused try takes nothing: it reports the time left and the next on time succeeds */
    bw_ratelimit_init(&rl, 5.0, 0);
    ck_assert_int_eq(bw_ratelimit_try_acquire(&rl, 1, 0), 0);
    for (int i = 0; i < 5; i++) ck_assert_int_eq(bw_ratelimit_try_acquire(&rl, 1, 150 * MS), 50 * MS);
    ck_assert_int_eq(bw_ratelimit_try_acquire(&rl, 1, 200 * MS), 0);
    ck_assert_int_eq(bw_ratelimit_try_acquire(&rl, 1, 200 * MS), 200 * MS);
}
END_TEST

START_TEST(reserve_accumulates_like_guava) {
    bw_ratelimit_t rl;
    bw_ratelimit_init(&rl, 2.0, 0);
    ck_assert_int_eq(bw_ratelimit_reserve(&rl, 1, 0), 0);
    ck_assert_int_eq(bw_ratelimit_reserve(&rl, 1, 0), 500000);
    ck_assert_int_eq(bw_ratelimit_reserve(&rl, 1, 0), 1000000);
    /* a big reservation is paid by the next caller, not by itself */
    bw_ratelimit_init(&rl, 1.0, 0);
    ck_assert_int_eq(bw_ratelimit_reserve(&rl, 3, 0), 0);
    ck_assert_int_eq(bw_ratelimit_reserve(&rl, 1, 0), 3 * SEC);
    ck_assert_int_eq(bw_ratelimit_reserve(&rl, 1, 1 * SEC), 3 * SEC);
    /* after the waits elapse, nothing is owed */
    ck_assert_int_eq(bw_ratelimit_reserve(&rl, 1, 10 * SEC), 0);
    /* try_acquire while reservations are outstanding is refused */
    bw_ratelimit_init(&rl, 2.0, 0);
    bw_ratelimit_reserve(&rl, 1, 0);
    bw_ratelimit_reserve(&rl, 1, 0);
    ck_assert_int_eq(bw_ratelimit_try_acquire(&rl, 1, 100 * MS), 900 * MS);
}
END_TEST

START_TEST(stored_permits_burst) {
    bw_ratelimit_t rl;
    bw_ratelimit_init(&rl, 5.0, 0);
    ck_assert_int_eq(bw_ratelimit_try_acquire(&rl, 1, 0), 0);
    /* idle for 10 s: at most rate * 1 s = 5 permits are stored */
    int64_t t = 10 * SEC;
    int burst = 0;
    while (bw_ratelimit_try_acquire(&rl, 1, t) == 0) {
        burst++;
        ck_assert_int_le(burst, 100);
    }
    /* Guava: the 5 stored permits plus one fresh permit that the *next* caller pays for */
    ck_assert_int_eq(burst, 5 + 1);
    ck_assert(rl.stored_permits < 1e-9);
    /* and then the steady spacing again */
    ck_assert_int_eq(bw_ratelimit_try_acquire(&rl, 1, t), 200 * MS);
    ck_assert_int_eq(bw_ratelimit_try_acquire(&rl, 1, t + 200 * MS), 0);

    /* half a second idle stores half a second's worth (2.5 permits) */
    bw_ratelimit_init(&rl, 10.0, 0);
    ck_assert_int_eq(bw_ratelimit_try_acquire(&rl, 1, 0), 0);
    t = 600 * MS; /* next_free was 100 ms: 500 ms idle = 5 permits */
    burst = 0;
    while (bw_ratelimit_try_acquire(&rl, 1, t) == 0) burst++;
    ck_assert_int_eq(burst, 5 + 1);

    /* reserve uses stored permits first: no wait for them */
    bw_ratelimit_init(&rl, 4.0, 0);
    bw_ratelimit_reserve(&rl, 1, 0); /* next free at 250 ms */
    ck_assert_int_eq(bw_ratelimit_reserve(&rl, 2, 5 * SEC), 0); /* 4 stored, 2 left */
    ck_assert_int_eq(bw_ratelimit_reserve(&rl, 2, 5 * SEC), 0); /* 0 left */
    ck_assert_int_eq(bw_ratelimit_reserve(&rl, 2, 5 * SEC), 0); /* fresh: costs 0.5 s */
    ck_assert_int_eq(bw_ratelimit_reserve(&rl, 1, 5 * SEC), 500 * MS);
}
END_TEST

START_TEST(set_rate_midway) {
    bw_ratelimit_t rl;
    bw_ratelimit_init(&rl, 5.0, 0);
    ck_assert_int_eq(bw_ratelimit_try_acquire(&rl, 1, 0), 0);
    ck_assert_int_eq(bw_ratelimit_try_acquire(&rl, 1, 200 * MS), 0); /* next free at 400 ms */
    bw_ratelimit_set_rate(&rl, 10.0, 200 * MS);
    /* the wait already owed is cut to one new interval (due at 300 ms, not 400 ms);
     * afterwards 100 ms spacing */
    ck_assert_int_eq(bw_ratelimit_try_acquire(&rl, 1, 250 * MS), 50 * MS);
    ck_assert_int_eq(bw_ratelimit_try_acquire(&rl, 1, 300 * MS), 0);
    ck_assert_int_eq(bw_ratelimit_try_acquire(&rl, 1, 400 * MS), 0);
    ck_assert_int_eq(bw_ratelimit_try_acquire(&rl, 1, 450 * MS), 50 * MS);
    ck_assert_int_eq(bw_ratelimit_try_acquire(&rl, 1, 500 * MS), 0);
    ck_assert_int_eq(bw_ratelimit_try_acquire(&rl, 1, 600 * MS), 0);
    /* slow down to 1/s */
    bw_ratelimit_set_rate(&rl, 1.0, 600 * MS);
    ck_assert_int_eq(bw_ratelimit_try_acquire(&rl, 1, 700 * MS), 0); /* paid at 600 ms, due 700 */
    ck_assert_int_eq(bw_ratelimit_try_acquire(&rl, 1, 800 * MS), 900 * MS);
    ck_assert_int_eq(bw_ratelimit_try_acquire(&rl, 1, 1700 * MS), 0);

    /* stored permits scale with the rate (Guava: stored * new_max / old_max) */
    bw_ratelimit_init(&rl, 4.0, 0);
    bw_ratelimit_try_acquire(&rl, 1, 0);
    bw_ratelimit_set_rate(&rl, 8.0, 10 * SEC); /* 4 stored of max 4 -> 8 of max 8 */
    ck_assert(rl.stored_permits > 7.999 && rl.stored_permits < 8.001);
    int burst = 0;
    while (bw_ratelimit_try_acquire(&rl, 1, 10 * SEC) == 0) burst++;
    ck_assert_int_eq(burst, 8 + 1);
}
END_TEST

START_TEST(rate_bounds) {
    char err[256] = "";
    ck_assert_int_eq(bw_ratelimit_check(0, err, sizeof(err)), 0);
    ck_assert_int_eq(bw_ratelimit_check(BW_RATE_MIN, err, sizeof(err)), 0);
    ck_assert_int_eq(bw_ratelimit_check(BW_RATE_MAX, err, sizeof(err)), 0);
    ck_assert_str_eq(err, "");
    const double bad[] = {1e-13, BW_RATE_MIN / 2, -1, BW_RATE_MAX * 1.01, NAN, INFINITY, -INFINITY};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        ck_assert_int_eq(bw_ratelimit_check(bad[i], err, sizeof(err)), -1);
        ck_assert_msg(strstr(err, "0 (unlimited) or 0.001 to 1e6 statements per second"), "%g: %s", bad[i], err);
    }
    ck_assert_str_eq(err, "rate -inf is out of range: use 0 (unlimited) or 0.001 to 1e6 statements per second "
                          "(one statement per 1000 s at the least; pause a shard to stop it)");
    ck_assert(bw_ratelimit_clamp(0) == 0);
    ck_assert(bw_ratelimit_clamp(1e-13) == BW_RATE_MIN);
    ck_assert(bw_ratelimit_clamp(-1) == BW_RATE_MIN);
    ck_assert(bw_ratelimit_clamp(NAN) == BW_RATE_MIN);
    ck_assert(bw_ratelimit_clamp(-INFINITY) == BW_RATE_MIN);
    ck_assert(bw_ratelimit_clamp(INFINITY) == BW_RATE_MAX);
    ck_assert(bw_ratelimit_clamp(2.5) == 2.5);
}
END_TEST

/* Row rates: 0 (no row budget) or 1 to 1e6 rows per second; the rest refused with the
 * bounds, and clamped to the nearest bound when read from a record. */
START_TEST(row_rate_bounds) {
    char err[256] = "";
    const double good[] = {0, BW_ROW_RATE_MIN, 2.5, 150000, BW_ROW_RATE_MAX};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        ck_assert_msg(bw_ratelimit_check_rows(good[i], err, sizeof(err)) == 0, "%g refused: %s", good[i], err);
    ck_assert_str_eq(err, "");
    const double bad[] = {0.5, BW_RATE_MIN, 1e-13, -1, BW_ROW_RATE_MAX * 1.01, NAN, INFINITY, -INFINITY};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        ck_assert_int_eq(bw_ratelimit_check_rows(bad[i], err, sizeof(err)), -1);
        ck_assert_msg(strstr(err, "0 (no row budget) or 1 to 1e6 rows per second"), "%g: %s", bad[i], err);
    }
    ck_assert_str_eq(err, "row_rate -inf is out of range: use 0 (no row budget) or 1 to 1e6 rows per second "
                          "(pause a shard to stop it)");
    ck_assert(bw_ratelimit_clamp_rows(0) == 0);
    ck_assert(bw_ratelimit_clamp_rows(0.5) == BW_ROW_RATE_MIN);
    ck_assert(bw_ratelimit_clamp_rows(NAN) == BW_ROW_RATE_MIN);
    ck_assert(bw_ratelimit_clamp_rows(-3) == BW_ROW_RATE_MIN);
    ck_assert(bw_ratelimit_clamp_rows(INFINITY) == BW_ROW_RATE_MAX);
    ck_assert(bw_ratelimit_clamp_rows(2.5) == 2.5);
    /* a limiter charged in rows keeps every row rate the bounds accept */
    bw_ratelimit_t rl;
    bw_ratelimit_init(&rl, BW_ROW_RATE_MAX, 0);
    ck_assert(rl.rate == BW_ROW_RATE_MAX);
    bw_ratelimit_init(&rl, BW_ROW_RATE_MIN, 0);
    ck_assert(rl.rate == BW_ROW_RATE_MIN);
    bw_ratelimit_set_rate(&rl, BW_ROW_RATE_MIN, 0);
    ck_assert(rl.rate == BW_ROW_RATE_MIN);
}
END_TEST

/* Any double is safe: only 0 is unlimited; 1e-13 once made 1e6/rate overflow int64. */
START_TEST(out_of_range_rates_never_unlimited) {
    const double tiny[] = {1e-13, 5e-324, -1, NAN, -INFINITY};
    for (size_t i = 0; i < sizeof(tiny) / sizeof(tiny[0]); i++) {
        bw_ratelimit_t rl;
        bw_ratelimit_init(&rl, tiny[i], 0);
        ck_assert_msg(rl.rate == BW_RATE_MIN, "%g", tiny[i]);
        ck_assert_int_eq(bw_ratelimit_try_acquire(&rl, 1, 0), 0);
        /* the next batch waits one interval of the minimum rate: 1,000 s */
        ck_assert_int_eq(bw_ratelimit_try_acquire(&rl, 1, 0), 1000 * SEC);
        bw_ratelimit_set_rate(&rl, tiny[i], 10 * SEC);
        ck_assert_int_eq(bw_ratelimit_try_acquire(&rl, 1, 10 * SEC), 990 * SEC);
    }
    bw_ratelimit_t rl;
    bw_ratelimit_init(&rl, INFINITY, 0);
    ck_assert(rl.rate == BW_RATE_MAX);
    bw_ratelimit_reserve(&rl, 2 * BW_RATE_MAX, 0); /* two seconds' worth at the maximum */
    ck_assert_int_eq(bw_ratelimit_try_acquire(&rl, 1, 0), 2 * SEC);
    /* a huge permit count saturates the clock instead of wrapping it into "free now" */
    bw_ratelimit_init(&rl, BW_RATE_MIN, 0);
    bw_ratelimit_reserve(&rl, 1e300, 0);
    ck_assert_int_eq(bw_ratelimit_try_acquire(&rl, 1, 0), INT64_MAX);
    bw_ratelimit_reserve(&rl, NAN, 0);
    ck_assert_int_eq(bw_ratelimit_try_acquire(&rl, 1, SEC), INT64_MAX - SEC);
}
END_TEST

START_TEST(rate_zero_unlimited) {
    bw_ratelimit_t rl;
    bw_ratelimit_init(&rl, 0.0, 0);
    for (int i = 0; i < 100000; i++) {
        ck_assert_int_eq(bw_ratelimit_try_acquire(&rl, 1, 0), 0);
        ck_assert_int_eq(bw_ratelimit_reserve(&rl, 5, 0), 0);
    }
    /* limited -> unlimited drops any debt */
    bw_ratelimit_init(&rl, 1.0, 0);
    bw_ratelimit_reserve(&rl, 100, 0);
    ck_assert_int_gt(bw_ratelimit_try_acquire(&rl, 1, SEC), 0);
    bw_ratelimit_set_rate(&rl, 0.0, SEC);
    ck_assert_int_eq(bw_ratelimit_try_acquire(&rl, 1, SEC), 0);
    ck_assert_int_eq(bw_ratelimit_reserve(&rl, 1000, SEC), 0);
    /* unlimited -> limited: paced again */
    bw_ratelimit_set_rate(&rl, 2.0, 2 * SEC);
    int n = 0;
    for (int64_t t = 2 * SEC; t < 12 * SEC; t += MS) n += bw_ratelimit_try_acquire(&rl, 1, t) == 0;
    ck_assert_msg(n >= 20 - 1 && n <= 20 + 2 + 1, "10 s at 2/s after unlimited granted %d", n);
}
END_TEST

static int count_30s(double rate, int64_t start, int64_t idle_before) {
    bw_ratelimit_t rl;
    bw_ratelimit_init(&rl, rate, start - idle_before);
    int n = 0;
    for (int64_t t = start; t < start + 30 * SEC; t += MS)
        while (bw_ratelimit_try_acquire(&rl, 1, t) == 0) n++; /* take all that is allowed */
    return n;
}

START_TEST(precision_over_30s) {
    const double rates[] = {1, 3, 5, 7, 13.7, 50, 100, 200, 333, 999};
    for (size_t i = 0; i < BW_ARRAY_LEN(rates); i++) {
        double r = rates[i];
        int n = count_30s(r, 0, 0);
        double want = r * 30;
        ck_assert_msg(n >= want - 1 && n <= want + 1, "rate %g: %d permits in 30 s, want %g +-1", r, n, want);
        /* started after a long idle: plus at most one second of stored permits */
        n = count_30s(r, 100 * SEC, 50 * SEC);
        want = r * 30 + r;
        ck_assert_msg(n >= want - 1 && n <= want + 1, "rate %g after idle: %d permits, want %g +-1", r, n, want);
    }
    /* a rate above the tick (1 ms) is still honoured thanks to stored fractions; the
     * interval (666.67 us) is truncated to whole microseconds per reservation as in
     * Guava, which runs fast by at most 1 us per permit (0.15 % here) */
    int n = count_30s(1500, 0, 0);
    ck_assert_msg(n >= 30 * 1500 - 1 && n <= 30 * 1500 * 1.0015 + 1, "rate 1500: %d", n);
}
END_TEST

START_TEST(reserve_loop_precision) {
    /* a consumer loop that sleeps exactly what reserve() says: grants at rate */
    const double rates[] = {2, 7, 50, 250};
    for (size_t i = 0; i < BW_ARRAY_LEN(rates); i++) {
        bw_ratelimit_t rl;
        bw_ratelimit_init(&rl, rates[i], 0);
        int64_t t = 0;
        int n = 0;
        while (1) {
            int64_t w = bw_ratelimit_reserve(&rl, 1, t);
            t += w;
            if (t >= 30 * SEC) break;
            n++;
        }
        ck_assert_msg(n >= rates[i] * 30 - 1 && n <= rates[i] * 30 + 1, "rate %g: %d", rates[i], n);
    }
}
END_TEST

Suite *ratelimit_suite(void) {
    Suite *s = suite_create("ratelimit");
    TCase *tc = tcase_create("guava");
    tcase_add_test(tc, first_acquire_immediate);
    tcase_add_test(tc, try_acquire_spacing_rate5);
    tcase_add_test(tc, rate_raise_cuts_the_old_wait);
    tcase_add_test(tc, reserve_accumulates_like_guava);
    tcase_add_test(tc, stored_permits_burst);
    tcase_add_test(tc, set_rate_midway);
    tcase_add_test(tc, rate_zero_unlimited);
    tcase_add_test(tc, rate_bounds);
    tcase_add_test(tc, row_rate_bounds);
    tcase_add_test(tc, out_of_range_rates_never_unlimited);
    tcase_add_test(tc, precision_over_30s);
    tcase_add_test(tc, reserve_loop_precision);
    suite_add_tcase(s, tc);
    return s;
}
