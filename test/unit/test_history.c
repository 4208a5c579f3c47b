/* test_history.c — a shard's last hour (proxy/history.h) with the clock injected: rows/s
 * from a cumulative counter over the 60-s window (not the last two reports), a counter
 * reset by another consumer, a point per 10-s step (rows/s over the step, the oldest
 * unapplied op's age, a gap for a silent consumer), the ring wrapping after an hour,
 * alerts fired and resolved, and the memory of 4,096 shards; and the gzip and ETag
 * helpers of the page's replies (common/daemon.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "daemon.h"
#include "helpers.h"
#include "history.h"

#define T0 1796031490000LL

static void report(bw_history_t *h, int shard, int64_t at, const char *who, uint64_t rows, int64_t lag, int64_t oldest) {
    bw_history_observe(h, shard, &(bw_history_report_t){.at_ms = at, .consumer = who, .lag = lag,
                                                       .oldest_unapplied_ms = oldest, .rows_applied = rows,
                                                       .rate = 50, .row_rate = 0});
}

START_TEST(counter_rate_math) {
    ck_assert(fabs(bw_history_counter_rate(T0, 100, T0 + 2000, 400) - 150.0) < 1e-9);
    ck_assert(isnan(bw_history_counter_rate(T0, 400, T0 + 2000, 100))); /* a reset */
    ck_assert(isnan(bw_history_counter_rate(T0, 100, T0, 200)));        /* no time between */
    ck_assert(fabs(bw_history_counter_rate(T0, 7, T0 + 1000, 7)) < 1e-9); /* idle: 0 */
}
END_TEST

START_TEST(rows_per_s_over_the_window) {
    bw_history_t *h = bw_history_new(2, 30000);
    ck_assert(isnan(bw_history_rows_per_s(h, 0))); /* nothing reported */
    report(h, 0, T0, "c1", 0, 0, 0);
    ck_assert(isnan(bw_history_rows_per_s(h, 0))); /* one report: no rate */
    for (int i = 1; i <= 60; i++) report(h, 0, T0 + i * 2000, "c1", (uint64_t)i * 100, 0, 0); /* 50 rows/s, 2 min */
    ck_assert(fabs(bw_history_rows_per_s(h, 0) - 50.0) < 1e-9);
    /* a burst of 1,000 rows in the last 2 s: spread over the window (60 to 70 s), not 500/s */
    report(h, 0, T0 + 122000, "c1", 7000, 0, 0);
    double r = bw_history_rows_per_s(h, 0);
    ck_assert_msg(r > 50 + 1000.0 / 72 && r < 50 + 1000.0 / 60 + 1, "rate %f", r);
    /* a report older than the latest is ignored */
    report(h, 0, T0 + 1000, "c1", 1, 0, 0);
    ck_assert(fabs(bw_history_rows_per_s(h, 0) - r) < 1e-9);
    /* another consumer takes the shard: its counter starts again, no rate until two reports */
    report(h, 0, T0 + 124000, "c2", 10, 0, 0);
    ck_assert(isnan(bw_history_rows_per_s(h, 0)));
    report(h, 0, T0 + 126000, "c2", 410, 0, 0);
    ck_assert(fabs(bw_history_rows_per_s(h, 0) - 200.0) < 1e-9); /* over the 2 s it has held it */
    ck_assert(isnan(bw_history_rows_per_s(h, 1)));
    ck_assert(isnan(bw_history_rows_per_s(h, 7))); /* out of range */
    bw_history_sum_t sum;
    bw_history_sum(h, 0, 1, &sum);
    ck_assert_int_eq(sum.reporting, 1);
    ck_assert(fabs(sum.rows_per_s - 200.0) < 1e-9);
    bw_history_free(h);
}
END_TEST

START_TEST(a_point_every_step) {
    bw_history_t *h = bw_history_new(2, 30000);
    bw_history_point_t p[BW_HISTORY_POINTS];
    ck_assert_int_eq(bw_history_tick(h, T0), 1);
    ck_assert_int_eq(bw_history_tick(h, T0 + 100), 0); /* the same step */
    ck_assert_int_eq(bw_history_points(h, 0, p, BW_HISTORY_POINTS), 0); /* no report yet: no point */
    /* shard 0: 150 rows/s, lag 1200 whose oldest op was written 5.3 s before the tick */
    for (int i = 0; i <= 5; i++) report(h, 0, T0 + 1000 + i * 2000, "c1", (uint64_t)i * 300, 1200, T0 + 10000 - 5300 + 5000);
    report(h, 1, T0 + 1000, "c1", 0, 0, 0);
    ck_assert_int_eq(bw_history_tick(h, T0 + 10000), 1);
    for (int i = 6; i <= 10; i++) report(h, 0, T0 + 1000 + i * 2000, "c1", (uint64_t)i * 300, 0, 0);
    ck_assert_int_eq(bw_history_tick(h, T0 + 20000), 1);
    size_t n = bw_history_points(h, 0, p, BW_HISTORY_POINTS);
    ck_assert_int_eq(n, 2);
    ck_assert_int_eq(p[0].at_ms, T0 + 10000); /* oldest first */
    ck_assert_int_eq(p[1].at_ms, T0 + 20000);
    ck_assert_int_eq(p[0].lag, 1200);
    ck_assert_int_eq(p[0].oldest_unapplied_ms, 300); /* an age at the tick */
    ck_assert(fabs(p[0].rows_per_s - 150.0) < 1e-6);
    ck_assert(fabs(p[1].rows_per_s - 150.0) < 1e-6); /* the step's own rows: 1,500 in 10 s */
    ck_assert_int_eq(p[1].lag, 0);
    ck_assert_int_eq(p[1].oldest_unapplied_ms, -1); /* none waits */
    ck_assert(fabs(p[1].rate - 50.0) < 1e-6);
    /* shard 1 stopped reporting at T0 + 1 s: a point while fresh, then gaps (stale after 30 s) */
    ck_assert_int_eq(bw_history_points(h, 1, p, BW_HISTORY_POINTS), 2);
    ck_assert(isnan(p[0].rows_per_s)); /* one reading: no rate yet */
    ck_assert_int_eq(bw_history_tick(h, T0 + 40000), 1);
    ck_assert_int_eq(bw_history_points(h, 1, p, BW_HISTORY_POINTS), 2);
    /* an hour and more: the ring keeps the newest 360 */
    for (int i = 5; i < 400; i++) {
        report(h, 0, T0 + i * 10000 - 500, "c1", 3000 + (uint64_t)i, 0, 0);
        bw_history_tick(h, T0 + i * 10000);
    }
    n = bw_history_points(h, 0, p, BW_HISTORY_POINTS);
    ck_assert_int_eq(n, BW_HISTORY_POINTS);
    ck_assert_int_eq(p[0].at_ms, T0 + 40000LL * 10); /* ticks 40..399 */
    ck_assert_int_eq(p[n - 1].at_ms, T0 + 399 * 10000LL);
    for (size_t i = 1; i < n; i++) ck_assert(p[i].at_ms > p[i - 1].at_ms);
    ck_assert(fabs(p[n - 1].rows_per_s - 0.1) < 1e-6);
    ck_assert_int_eq(bw_history_points(h, 1, p, BW_HISTORY_POINTS), 0); /* its points left the hour */
    bw_history_free(h);
}
END_TEST

START_TEST(alerts_fire_and_resolve) {
    bw_history_t *h = bw_history_new(1, 30000);
    const char *down[] = {"BulkwriteServerDown"}, *both[] = {"BulkwriteServerDown", "BulkwriteShardNoProgress"};
    bw_history_report_t r = {.at_ms = T0, .consumer = "c1"};
    bw_history_observe(h, 0, &r);
    r.at_ms += 2000, r.alerts = down, r.n_alerts = 1;
    bw_history_observe(h, 0, &r);
    r.at_ms += 2000; /* the same again: no event */
    bw_history_observe(h, 0, &r);
    r.at_ms += 2000, r.alerts = both, r.n_alerts = 2;
    bw_history_observe(h, 0, &r);
    r.at_ms += 2000, r.alerts = NULL, r.n_alerts = 0;
    bw_history_observe(h, 0, &r);
    bw_history_alert_t a[BW_HISTORY_ALERT_EVENTS];
    size_t n = bw_history_alerts(h, 0, 0, a, BW_HISTORY_ALERT_EVENTS);
    ck_assert_int_eq(n, 4);
    ck_assert_str_eq(a[0].name, "BulkwriteServerDown");
    ck_assert_int_eq(a[0].resolved, 0);
    ck_assert_int_eq(a[0].at_ms, T0 + 2000);
    ck_assert_str_eq(a[1].name, "BulkwriteShardNoProgress");
    ck_assert_int_eq(a[1].at_ms, T0 + 6000);
    ck_assert_int_eq(a[2].resolved + a[3].resolved, 2);
    ck_assert_int_eq(a[3].at_ms, T0 + 8000);
    ck_assert_int_eq(bw_history_alerts(h, 0, T0 + 7000, a, BW_HISTORY_ALERT_EVENTS), 2); /* since */
    for (int i = 0; i < 40; i++) { /* a flapping alert: the newest events stay */
        r.at_ms += 2000, r.alerts = i % 2 ? NULL : down, r.n_alerts = i % 2 ? 0 : 1;
        bw_history_observe(h, 0, &r);
    }
    n = bw_history_alerts(h, 0, 0, a, BW_HISTORY_ALERT_EVENTS);
    ck_assert_int_eq(n, BW_HISTORY_ALERT_EVENTS);
    ck_assert_int_eq(a[n - 1].at_ms, r.at_ms);
    bw_history_free(h);
}
END_TEST

START_TEST(memory_of_4096_shards) {
    bw_history_t *h = bw_history_new(4096, 30000);
    size_t bytes = bw_history_bytes(h);
    ck_assert_msg(bytes < 36u * 1024 * 1024, "%zu bytes", bytes); /* docs/operations.md says about 33 MB */
    bw_history_free(h);
}
END_TEST

START_TEST(gzip_and_etag) {
    ck_assert_int_eq(bw_daemon_accepts_gzip("gzip, deflate, br"), 1);
    ck_assert_int_eq(bw_daemon_accepts_gzip("deflate, GZIP;q=0.5"), 1);
    ck_assert_int_eq(bw_daemon_accepts_gzip("*"), 1);
    ck_assert_int_eq(bw_daemon_accepts_gzip("gzip;q=0"), 0);
    ck_assert_int_eq(bw_daemon_accepts_gzip("gzip; q=0.000, deflate"), 0);
    ck_assert_int_eq(bw_daemon_accepts_gzip("deflate, br"), 0);
    ck_assert_int_eq(bw_daemon_accepts_gzip("xgzip"), 0);
    ck_assert_int_eq(bw_daemon_accepts_gzip(""), 0);
    ck_assert_int_eq(bw_daemon_accepts_gzip(NULL), 0);
    char text[4096];
    for (size_t i = 0; i < sizeof(text); i++) text[i] = "{\"shard\":1}"[i % 11];
    size_t zlen;
    unsigned char *z = bw_daemon_gzip(text, sizeof(text), &zlen);
    ck_assert_ptr_nonnull(z);
    ck_assert(zlen < sizeof(text) / 10);
    ck_assert(z[0] == 0x1f && z[1] == 0x8b); /* gzip, not zlib */
    char back[sizeof(text)];
    z_stream s = {0};
    ck_assert_int_eq(inflateInit2(&s, 16 + 15), Z_OK);
    s.next_in = z, s.avail_in = (uInt)zlen, s.next_out = (Bytef *)back, s.avail_out = sizeof(back);
    ck_assert_int_eq(inflate(&s, Z_FINISH), Z_STREAM_END);
    ck_assert_int_eq(s.total_out, sizeof(text));
    inflateEnd(&s);
    ck_assert(memcmp(text, back, sizeof(text)) == 0);
    free(z);
    char a[24], b[24], c[24];
    bw_daemon_etag("abc", 3, a);
    bw_daemon_etag("abc", 3, b);
    bw_daemon_etag("abd", 3, c);
    ck_assert_str_eq(a, b);
    ck_assert_str_ne(a, c);
    ck_assert(strncmp(a, "W/\"", 3) == 0 && strlen(a) == 20);
}
END_TEST

Suite *history_suite(void) {
    Suite *s = suite_create("history");
    TCase *tc = tcase_create("history");
    tcase_add_test(tc, counter_rate_math);
    tcase_add_test(tc, rows_per_s_over_the_window);
    tcase_add_test(tc, a_point_every_step);
    tcase_add_test(tc, alerts_fire_and_resolve);
    tcase_add_test(tc, memory_of_4096_shards);
    tcase_add_test(tc, gzip_and_etag);
    suite_add_tcase(s, tc);
    return s;
}
