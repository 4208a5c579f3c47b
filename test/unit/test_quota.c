/* test_quota.c — per client quotas (proxy/quota.h), with the clock driven by the test. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "fleet.h"
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

/* ---- one budget across the fleet's proxies ------------------------------------------- */

#define EPS 1e-9

/* The shares of every member, which must sum to 1. */
static void shares_of(double limit, const double *demand, size_t n, double *out) {
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += out[i] = bw_quota_share(limit, demand, n, i, BW_QUOTA_FLOOR);
    ck_assert_double_eq_tol(sum, 1, EPS);
}

/* Alone, a proxy takes the whole quota whatever it is asked; without a limit too. */
START_TEST(share_alone_is_the_whole_quota) {
    ck_assert_double_eq(bw_quota_share(2000, (double[]){5000}, 1, 0, BW_QUOTA_FLOOR), 1);
    ck_assert_double_eq(bw_quota_share(2000, (double[]){0}, 1, 0, BW_QUOTA_FLOOR), 1);
    ck_assert_double_eq(bw_quota_share(0, (double[]){10, 20}, 2, 1, BW_QUOTA_FLOOR), 1);
}
END_TEST

/* The same demand everywhere, or none at all: an even split. */
START_TEST(share_even_demand_splits_evenly) {
    double out[3];
    shares_of(2000, (double[]){3000, 3000}, 2, out);
    ck_assert_double_eq_tol(out[0], 0.5, EPS);
    shares_of(2000, (double[]){2900, 3300}, 2, out); /* both over half the quota: the same */
    ck_assert_double_eq_tol(out[0], 0.5, EPS);
    shares_of(2000, (double[]){0, 0}, 2, out); /* no demand data: the fallback */
    ck_assert_double_eq_tol(out[1], 0.5, EPS);
    shares_of(2000, (double[]){1000, 1000, 1000}, 3, out);
    for (int i = 0; i < 3; i++) ck_assert_double_eq_tol(out[i], 1.0 / 3, EPS);
}
END_TEST

/* Skewed: the proxy asked for less than half gets what it asks, the other the rest;
 * under the quota, what nobody asks for is split evenly. */
START_TEST(share_skewed_demand) {
    double out[3];
    shares_of(2000, (double[]){3000, 500}, 2, out);
    ck_assert_double_eq_tol(out[0], 0.75, EPS);
    ck_assert_double_eq_tol(out[1], 0.25, EPS);
    shares_of(2000, (double[]){600, 200}, 2, out); /* 600 + 600 and 200 + 600 of 2000 */
    ck_assert_double_eq_tol(out[0], 0.6, EPS);
    ck_assert_double_eq_tol(out[1], 0.4, EPS);
    shares_of(3000, (double[]){5000, 5000, 200}, 3, out);
    ck_assert_double_eq_tol(out[2], 200.0 / 3000, EPS);
    ck_assert_double_eq_tol(out[0], 1400.0 / 3000, EPS);
}
END_TEST

/* A proxy nobody uses keeps the floor (BW_QUOTA_FLOOR of an even part), the busy one the
 * rest; the shares of any demands sum to 1; a demand that is no number counts as none. */
START_TEST(share_floor_and_renormalisation) {
    double out[3];
    shares_of(2000, (double[]){5000, 0}, 2, out);
    ck_assert_double_eq_tol(out[1], BW_QUOTA_FLOOR / 2, EPS);
    ck_assert_double_eq_tol(out[0], 1 - BW_QUOTA_FLOOR / 2, EPS);
    shares_of(2000, (double[]){5000, 0, 0}, 3, out);
    ck_assert_double_eq_tol(out[0], 1 - 2 * BW_QUOTA_FLOOR / 3, EPS);
    shares_of(2000, (double[]){5000, 30, 0}, 3, out); /* 30 is under the floor (33.3) */
    ck_assert_double_eq_tol(out[1], BW_QUOTA_FLOOR / 3, EPS);
    shares_of(2000, (double[]){NAN, -5, 1e300}, 3, out);
    ck_assert_double_eq_tol(out[0], BW_QUOTA_FLOOR / 3, EPS);
    ck_assert_double_eq_tol(out[1], BW_QUOTA_FLOOR / 3, EPS);
    unsigned seed = 7;
    for (int round = 0; round < 200; round++) {
        double d[3];
        for (int i = 0; i < 3; i++) d[i] = (double)(rand_r(&seed) % 5000);
        shares_of(1000 + rand_r(&seed) % 3000, d, 3, out);
        for (int i = 0; i < 3; i++) ck_assert(out[i] >= BW_QUOTA_FLOOR / 3 - EPS && out[i] <= 1);
    }
}
END_TEST

/* A proxy of the simulated fleet: its quotas and the record it last wrote. */
typedef struct {
    bw_quota_t *q;
    char name[16];
    Bulkwrite__Internal__V1__FleetMember rec;
} sim_proxy_t;

static void sim_init(sim_proxy_t *p, int i, const bw_quota_limits_t *lim, int64_t now_us) {
    p->q = bw_quota_new();
    snprintf(p->name, sizeof(p->name), "h:%d", 9000 + i);
    bulkwrite__internal__v1__fleet_member__init(&p->rec);
    p->rec.role = "proxy";
    p->rec.instance = p->name;
    p->rec.agrees = 1;
    bw_quota_list(p->q, "feed", lim, now_us);
}

/* Proxy i's fleet turn at now_us (the wall clock: the same ms): its record, then its
 * shares from every live proxy's. */
static void sim_turn(sim_proxy_t *ps, int n, int i, int64_t now_us) {
    bw_quota_fleet_fill(ps[i].q, &ps[i].rec, now_us);
    ps[i].rec.seen_at_ms = now_us / 1000;
    Bulkwrite__Internal__V1__FleetMember *members[8];
    int m = 0;
    for (int j = 0; j < n; j++)
        if (ps[j].rec.seen_at_ms) members[m++] = &ps[j].rec;
    bw_quota_fleet_read(ps[i].q, ps[i].name, members, (size_t)m, now_us / 1000, now_us);
}

/* n proxies, a client that sends 100-op requests every `gap` us and retries at once when
 * refused, to the proxies in turn (only proxy 0 when one_proxy), from t0 for `seconds`;
 * proxy i turns every BW_FLEET_INTERVAL_MS, offset by i x 700 ms. Returns the ops
 * admitted in the last `window` seconds. */
static double sim_run(sim_proxy_t *ps, int n, int64_t *t, double seconds, double window, int one_proxy) {
    const int64_t gap = 10000, interval = BW_FLEET_INTERVAL_MS * 1000LL;
    int64_t end = *t + (int64_t)(seconds * SEC), count_from = end - (int64_t)(window * SEC);
    double admitted = 0;
    bw_quota_limits_t lim = {.ops_per_second = 2000};
    int next = 0;
    for (; *t < end; *t += gap) {
        for (int i = 0; i < n; i++)
            if ((*t - i * 700000) % interval < gap) sim_turn(ps, n, i, *t);
        int to = one_proxy ? 0 : next++ % n;
        bw_quota_kind_t kind;
        int retry;
        if (admit(ps[to].q, "feed", &lim, 100, 1000, *t, &kind, &retry) == 0) {
            bw_quota_done(ps[to].q, "feed");
            if (*t >= count_from) admitted += 100;
        }
    }
    return admitted / window;
}

/* The whole loop, with the clock driven: a client alternating over 2 proxies, then 3,
 * gets its quota within 10 % (it offers 5x it); then on one proxy alone, after a few
 * seconds, close to all of it. */
START_TEST(fleet_shares_one_quota) {
    bw_quota_limits_t lim = {.ops_per_second = 2000};
    sim_proxy_t ps[3];
    int64_t t = 1000 * SEC;
    for (int i = 0; i < 3; i++) sim_init(&ps[i], i, &lim, t);
    double two = sim_run(ps, 2, &t, 26, 20, 0);
    ck_assert_msg(two > 1900 && two < 2100, "2 proxies: %.0f ops/s", two);
    double three = sim_run(ps, 3, &t, 26, 20, 0);
    ck_assert_msg(three > 1900 && three < 2100, "3 proxies: %.0f ops/s", three);
    double ops_share, bytes_share;
    bw_quota_shares(ps[0].q, "feed", &ops_share, &bytes_share);
    ck_assert_double_eq_tol(ops_share, 1.0 / 3, 0.02);
    ck_assert_double_eq(bytes_share, 1); /* no bytes quota */
    double one = sim_run(ps, 3, &t, 16, 10, 1);
    ck_assert_msg(one > 1800 && one < 2200, "one proxy of 3: %.0f ops/s", one);
    bw_quota_shares(ps[0].q, "feed", &ops_share, &bytes_share);
    ck_assert_double_eq_tol(ops_share, 1 - 2 * BW_QUOTA_FLOOR / 3, 0.01);
    for (int i = 0; i < 3; i++) bw_quota_free(ps[i].q);
}
END_TEST

/* Which records count: a live proxy that agrees and lists the client; not a consumer, a
 * stale record, one that disagrees, this proxy's own; a record older than
 * BW_QUOTA_DEMAND_FRESH_MS keeps its proxy the floor only. */
START_TEST(fleet_counts_live_proxies_only) {
    bw_quota_limits_t lim = {.ops_per_second = 1000};
    int64_t t = 50 * SEC, now_ms = 1700000000000LL;
    bw_quota_t *q = bw_quota_new();
    bw_quota_list(q, "feed", &lim, t);
    bw_quota_list(q, "free", &(bw_quota_limits_t){0}, t); /* no quota: not listed */
    Bulkwrite__Internal__V1__FleetMember self;
    bulkwrite__internal__v1__fleet_member__init(&self);
    bw_quota_fleet_fill(q, &self, t);
    ck_assert_uint_eq(self.n_demand, 1);
    ck_assert_str_eq(self.demand[0]->client, "feed");
    for (int i = 0; i < 9; i++) {
        bw_quota_kind_t kind;
        int retry;
        admit(q, "feed", &lim, 400, 10, t + i * 200000, &kind, &retry); /* 3600 ops asked in 2 s */
        bw_quota_done(q, "feed");
    }
    bw_quota_fleet_fill(q, &self, t + 2 * SEC);
    ck_assert_double_eq_tol(self.demand[0]->ops_per_second, BW_QUOTA_SMOOTHING * 1800, 1e-6);

    Bulkwrite__Internal__V1__ClientDemand busy = BULKWRITE__INTERNAL__V1__CLIENT_DEMAND__INIT, *busy_p = &busy;
    busy.client = "feed";
    busy.ops_per_second = 1080; /* as much as this proxy's */
    Bulkwrite__Internal__V1__FleetMember m[6];
    const char *roles[6] = {"proxy", "consumer", "proxy", "proxy", "proxy", "proxy"};
    const char *names[6] = {"h:1", "h:2", "h:3", "h:4", "h:me", "h:6"};
    int64_t seen[6] = {now_ms, now_ms, now_ms - BW_FLEET_STALE_MS - 1, now_ms, now_ms, now_ms};
    for (int i = 0; i < 6; i++) {
        bulkwrite__internal__v1__fleet_member__init(&m[i]);
        m[i].role = (char *)roles[i];
        m[i].instance = (char *)names[i];
        m[i].seen_at_ms = seen[i];
        m[i].agrees = i != 3;
        m[i].demand = &busy_p;
        m[i].n_demand = i == 5 ? 0 : 1; /* h:6 does not list the client */
    }
    Bulkwrite__Internal__V1__FleetMember *members[6] = {&m[0], &m[1], &m[2], &m[3], &m[4], &m[5]};
    double ops_share, bytes_share;
    bw_quota_fleet_read(q, "h:me", members, 6, now_ms, t + 2 * SEC);
    bw_quota_shares(q, "feed", &ops_share, &bytes_share);
    ck_assert_double_eq_tol(ops_share, 0.5, EPS); /* h:1 and this one */
    bw_quota_kind_t kind;
    int retry;
    char why[256];
    int64_t later = t + 10 * SEC; /* a full second of burst at 500 ops/s, and 100 owed */
    ck_assert_uint_eq(bw_quota_admit(q, "feed", &lim, 600, 1, later, &kind, &retry, why, sizeof(why)), 0);
    bw_quota_done(q, "feed");
    ck_assert_uint_eq(bw_quota_admit(q, "feed", &lim, 10, 1, later, &kind, &retry, why, sizeof(why)), 429);
    ck_assert_msg(strstr(why, "over its quota of 1000 ops per second (this proxy's share of the proxies': 500)"),
                  "%s", why);
    /* h:1 quiet for longer than a fresh demand: it keeps the floor only */
    m[0].seen_at_ms = now_ms - BW_QUOTA_DEMAND_FRESH_MS - 1;
    bw_quota_fleet_read(q, "h:me", members, 6, now_ms, later);
    bw_quota_shares(q, "feed", &ops_share, &bytes_share);
    ck_assert_double_eq_tol(ops_share, 1 - BW_QUOTA_FLOOR / 2, EPS);
    /* then gone: all of it, as a lone proxy */
    m[0].seen_at_ms = now_ms - BW_FLEET_STALE_MS - 1;
    bw_quota_fleet_read(q, "h:me", members, 6, now_ms, later);
    bw_quota_shares(q, "feed", &ops_share, &bytes_share);
    ck_assert_double_eq(ops_share, 1);
    /* unlisted (a reload dropped its quota): no longer reported */
    bw_quota_unlist_all(q);
    bw_quota_fleet_fill(q, &self, t + 12 * SEC);
    ck_assert_uint_eq(self.n_demand, 0);
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
    TCase *fleet = tcase_create("fleet");
    tcase_add_test(fleet, share_alone_is_the_whole_quota);
    tcase_add_test(fleet, share_even_demand_splits_evenly);
    tcase_add_test(fleet, share_skewed_demand);
    tcase_add_test(fleet, share_floor_and_renormalisation);
    tcase_add_test(fleet, fleet_shares_one_quota);
    tcase_add_test(fleet, fleet_counts_live_proxies_only);
    suite_add_tcase(s, fleet);
    return s;
}
