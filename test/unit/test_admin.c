/* test_admin.c — the shard admin API's input: URLs and control bodies, refused with the
 * reason or turned into the shard's next control record. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "helpers.h"
#include "ratelimit.h"
#include "shardtable.h"

START_TEST(urls) {
    bw_config_t *conf = t_ref_config();
    const char *action;
    char err[256];
    ck_assert_int_eq(bw_admin_parse_url(conf, "/v1/shards/7/rate", &action, err, sizeof(err)), 7);
    ck_assert_str_eq(action, "rate");
    ck_assert_int_eq(bw_admin_parse_url(conf, "/v1/shards/0/resume", &action, err, sizeof(err)), 0);
    ck_assert_int_eq(bw_admin_parse_url(conf, "/v1/shards/8/pause", &action, err, sizeof(err)), -1);
    ck_assert_str_eq(err, "shard 8 is out of range: shards.count is 8");
    ck_assert_int_eq(bw_admin_parse_url(conf, "/v1/shards/x/pause", &action, err, sizeof(err)), -1);
    ck_assert_int_eq(bw_admin_parse_url(conf, "/v1/shards/3/explode", &action, err, sizeof(err)), -1);
    ck_assert_str_eq(err, "unknown action \"explode\": use rate, pause or resume");
    bw_config_destroy(conf);
}
END_TEST

static Bulkwrite__V1__ShardControl *update(const char *action, const char *body, bw_shard_setting_t *set,
                                           char *err) {
    void *rec;
    size_t len;
    if (bw_admin_control_update(3, action, body, strlen(body), set, &rec, &len, err, 256)) return NULL;
    Bulkwrite__V1__ShardControl *c = bulkwrite__v1__shard_control__unpack(NULL, len, rec);
    free(rec);
    ck_assert_ptr_nonnull(c);
    return c;
}

START_TEST(control_bodies) {
    bw_shard_setting_t set = {0};
    char err[256];
    Bulkwrite__V1__ShardControl *c = update("rate", "{\"rate\": 2.5, \"reason\": \"hot\"}", &set, err);
    ck_assert(c && c->shard == 3 && c->has_rate && c->rate == 2.5 && !c->paused && strcmp(c->reason, "hot") == 0);
    bulkwrite__v1__shard_control__free_unpacked(c, NULL);
    /* a pause keeps the rate; a resume keeps it too */
    c = update("pause", "", &set, err);
    ck_assert(c && c->paused && c->has_rate && c->rate == 2.5 && c->updated_at_ms > 0);
    bulkwrite__v1__shard_control__free_unpacked(c, NULL);
    c = update("rate", "{\"rate\": null}", &set, err);
    ck_assert(c && !c->has_rate && c->paused);
    bulkwrite__v1__shard_control__free_unpacked(c, NULL);
    c = update("resume", "{}", &set, err);
    ck_assert(c && !c->paused);
    bulkwrite__v1__shard_control__free_unpacked(c, NULL);
    /* the bounds and 0 (unlimited) are rates */
    const double edges[] = {0, BW_RATE_MIN, BW_RATE_MAX};
    for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++) {
        char body[64];
        snprintf(body, sizeof(body), "{\"rate\": %.17g}", edges[i]);
        c = update("rate", body, &set, err);
        ck_assert(c && c->has_rate && c->rate == edges[i]);
        bulkwrite__v1__shard_control__free_unpacked(c, NULL);
    }

    static const struct {
        const char *action, *body, *why;
    } bad[] = {
        {"rate", "{\"rate\": -1}", "rate -1 is out of range: use 0 (unlimited) or 0.001 to 1e6 statements per second"},
        {"rate", "{\"rate\": 1e7}", "rate 1e+07 is out of range"},
        /* below the minimum: 1e-13 once overflowed the limiter to unlimited */
        {"rate", "{\"rate\": 1e-13}", "rate 1e-13 is out of range: use 0 (unlimited) or 0.001 to 1e6"},
        {"rate", "{\"rate\": 0.000999}", "rate 0.000999 is out of range"},
        {"rate", "{\"rate\": \"5\"}", "rate must be a number"},
        {"rate", "{}", "rate needs {\"rate\": number or null}"},
        {"rate", "[1]", "the body must be a JSON object"},
        {"rate", "{\"rate\": 1", "the body must be a JSON object"},
        {"pause", "{\"rate\": 1}", "unknown member \"rate\" for pause"},
        {"pause", "{\"reason\": 7}", "reason must be a string"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        bw_shard_setting_t before = set;
        ck_assert_msg(update(bad[i].action, bad[i].body, &set, err) == NULL, "accepted %s", bad[i].body);
        ck_assert_msg(strstr(err, bad[i].why) == err, "%s: got \"%s\"", bad[i].body, err);
        ck_assert_msg(memcmp(&before, &set, sizeof(set)) == 0, "%s changed the setting", bad[i].body);
    }
}
END_TEST

/* A control record with an out-of-range rate (an older version's, or written by hand) is
 * clamped when read: it never makes the shard unlimited. */
START_TEST(control_record_rate_clamped) {
    const struct {
        double rate, want;
    } cases[] = {{1e-13, BW_RATE_MIN}, {-3, BW_RATE_MIN}, {NAN, BW_RATE_MIN}, {1e9, BW_RATE_MAX},
                 {INFINITY, BW_RATE_MAX}, {0, 0}, {2.5, 2.5}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        Bulkwrite__V1__ShardControl c = BULKWRITE__V1__SHARD_CONTROL__INIT;
        c.has_rate = 1;
        c.rate = cases[i].rate;
        c.paused = 1;
        c.reason = "by hand";
        bw_shard_setting_t set;
        bw_shard_setting_from_record(&c, &set);
        ck_assert_msg(set.has_rate && set.rate == cases[i].want, "%g read as %g", cases[i].rate, set.rate);
        ck_assert(set.paused && strcmp(set.reason, "by hand") == 0);
    }
}
END_TEST

START_TEST(shard_keys) {
    char key[24];
    ck_assert_int_eq(bw_shard_key(4095, key), 10);
    ck_assert_str_eq(key, "shard/4095");
}
END_TEST

Suite *admin_suite(void) {
    Suite *s = suite_create("admin");
    TCase *tc = tcase_create("admin");
    tcase_add_test(tc, urls);
    tcase_add_test(tc, control_bodies);
    tcase_add_test(tc, shard_keys);
    tcase_add_test(tc, control_record_rate_clamped);
    suite_add_tcase(s, tc);
    return s;
}
