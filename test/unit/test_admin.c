/* test_admin.c — the shard admin API's input: URLs and control bodies, refused with the
 * reason or turned into the shard's next control record. */
#include <jansson.h>
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
    bw_admin_target_t t;
    char err[256];
    ck_assert_int_eq(bw_admin_parse_url(conf, "/v1/shards/7/rate", &t, err, sizeof(err)), 0);
    ck_assert(t.first_shard == 7 && t.last_shard == 7 && t.server == NULL);
    ck_assert_str_eq(t.action, "rate");
    ck_assert_int_eq(bw_admin_parse_url(conf, "/v1/shards/0/resume", &t, err, sizeof(err)), 0);
    ck_assert_int_eq(t.first_shard, 0);
    ck_assert_int_eq(bw_admin_parse_url(conf, "/v1/shards/8/pause", &t, err, sizeof(err)), -1);
    ck_assert_str_eq(err, "shard 8 is out of range: shards.count is 8");
    ck_assert_int_eq(bw_admin_parse_url(conf, "/v1/shards/x/pause", &t, err, sizeof(err)), -1);
    ck_assert_int_eq(bw_admin_parse_url(conf, "/v1/shards/3/explode", &t, err, sizeof(err)), -1);
    ck_assert_str_eq(err, "unknown action \"explode\": use rate, pause or resume");
    /* a server: its range of shards from the configuration */
    ck_assert_int_eq(bw_admin_parse_url(conf, "/v1/servers/mysql-b/pause", &t, err, sizeof(err)), 0);
    ck_assert(t.first_shard == 4 && t.last_shard == 7);
    ck_assert_str_eq(t.server, "mysql-b");
    ck_assert_str_eq(t.action, "pause");
    ck_assert_int_eq(bw_admin_parse_url(conf, "/v1/servers/mysql-a/rate", &t, err, sizeof(err)), 0);
    ck_assert(t.first_shard == 0 && t.last_shard == 3);
    ck_assert_int_eq(bw_admin_parse_url(conf, "/v1/servers/mysql/pause", &t, err, sizeof(err)), -1); /* a prefix is no name */
    ck_assert_str_eq(err, "no server \"mysql\" in shards.servers (mysql-a, mysql-b)");
    ck_assert_int_eq(bw_admin_parse_url(conf, "/v1/servers/mysql-a-x/pause", &t, err, sizeof(err)), -1);
    ck_assert_int_eq(bw_admin_parse_url(conf, "/v1/servers//pause", &t, err, sizeof(err)), -1);
    ck_assert_str_eq(err, "expected /v1/servers/{server}/rate|pause|resume");
    ck_assert_int_eq(bw_admin_parse_url(conf, "/v1/servers/mysql-a", &t, err, sizeof(err)), -1);
    ck_assert_int_eq(bw_admin_parse_url(conf, "/v1/servers/mysql-a/drain", &t, err, sizeof(err)), -1);
    ck_assert_str_eq(err, "unknown action \"drain\": use rate, pause or resume");
    ck_assert(bw_admin_is_control("POST", "/v1/servers/mysql-a/pause") && bw_admin_is_control("POST", "/v1/shards/1/rate"));
    ck_assert(!bw_admin_is_control("GET", "/v1/servers/mysql-a/pause") && !bw_admin_is_control("POST", "/v1/batches"));
    bw_config_destroy(conf);
}
END_TEST

/* A server-wide change names the server in each shard's reason, and the answer lists the
 * server's shards with their settings. */
START_TEST(server_change) {
    bw_config_t *conf = t_ref_config();
    bw_admin_target_t t;
    char err[256];
    ck_assert_int_eq(bw_admin_parse_url(conf, "/v1/servers/mysql-b/pause", &t, err, sizeof(err)), 0);
    const bw_admin_caller_t by = {"sre", "10.0.0.7", t.server};
    bw_shard_setting_t sets[4] = {{0}};
    const char *body[] = {"{\"reason\":\"kernel upgrade\"}", ""};
    for (int k = 0; k < 2; k++)
        for (int s = 4; s <= 7; s++) {
            void *rec;
            size_t len;
            ck_assert_int_eq(bw_admin_control_update(s, "pause", body[k], strlen(body[k]), NULL, &by, &sets[s - 4], &rec,
                                                     &len, err, sizeof(err)), 0);
            Bulkwrite__V1__ShardControl *c = bulkwrite__v1__shard_control__unpack(NULL, len, rec);
            free(rec);
            ck_assert(c && c->paused && c->shard == (uint32_t)s);
            ck_assert_str_eq(c->reason, k ? "server mysql-b" : "server mysql-b: kernel upgrade");
            ck_assert_str_eq(c->history[0]->reason, c->reason);
            bulkwrite__v1__shard_control__free_unpacked(c, NULL);
        }
    char *text = bw_admin_server_json(conf, &t, sets);
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    ck_assert_ptr_nonnull(j);
    ck_assert_str_eq(json_string_value(json_object_get(j, "server")), "mysql-b");
    ck_assert_int_eq(json_integer_value(json_object_get(j, "first_shard")), 4);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "last_shard")), 7);
    json_t *shards = json_object_get(j, "shards");
    ck_assert_uint_eq(json_array_size(shards), 4);
    for (size_t i = 0; i < 4; i++) {
        ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(shards, i), "shard")), 4 + (int)i);
        ck_assert(json_is_true(json_object_get(json_array_get(shards, i), "paused")));
    }
    json_decref(j);
    free(text);
    bw_config_destroy(conf);
}
END_TEST

static Bulkwrite__V1__ShardControl *update(const char *action, const char *body, bw_shard_setting_t *set,
                                           char *err) {
    void *rec;
    size_t len;
    static const bw_admin_caller_t caller = {"sre", "127.0.0.1", NULL};
    if (bw_admin_control_update(3, action, body, strlen(body), NULL, &caller, set, &rec, &len, err, 256)) return NULL;
    Bulkwrite__V1__ShardControl *c = bulkwrite__v1__shard_control__unpack(NULL, len, rec);
    free(rec);
    ck_assert_ptr_nonnull(c);
    return c;
}

/* Each record names who changed the shard and from where, and carries the shard's
 * changes newest first, at most BW_CONTROL_HISTORY. */
START_TEST(control_audit_history) {
    bw_shard_setting_t set = {0};
    char err[256];
    Bulkwrite__V1__ShardControl *prev = NULL;
    const bw_admin_caller_t callers[] = {{"sre", "127.0.0.1", NULL}, {"oncall", "::1", NULL}};
    for (int i = 0; i < BW_CONTROL_HISTORY + 5; i++) {
        char body[64];
        snprintf(body, sizeof(body), "{\"rate\": %d, \"reason\": \"step %d\"}", i + 1, i);
        void *rec;
        size_t len;
        ck_assert_int_eq(bw_admin_control_update(3, "rate", body, strlen(body), prev, &callers[i % 2],
                                                 &set, &rec, &len, err, sizeof(err)), 0);
        if (prev) bulkwrite__v1__shard_control__free_unpacked(prev, NULL);
        prev = bulkwrite__v1__shard_control__unpack(NULL, len, rec);
        free(rec);
        ck_assert_ptr_nonnull(prev);
        ck_assert_str_eq(prev->changed_by, callers[i % 2].by);
        ck_assert_str_eq(prev->changed_from, callers[i % 2].from);
        ck_assert_uint_eq(prev->n_history, (size_t)(i + 1 < BW_CONTROL_HISTORY ? i + 1 : BW_CONTROL_HISTORY));
    }
    /* newest first: step 24 by oncall... back to step 5 */
    ck_assert_str_eq(prev->history[0]->reason, "step 24");
    ck_assert_str_eq(prev->history[0]->by, "sre");
    ck_assert_str_eq(prev->history[0]->setting, "running; 25 stmt/s; configured rows/s");
    ck_assert_str_eq(prev->history[1]->by, "oncall");
    ck_assert_str_eq(prev->history[1]->from, "::1");
    ck_assert_str_eq(prev->history[BW_CONTROL_HISTORY - 1]->reason, "step 5");
    ck_assert(prev->history[0]->at_ms >= prev->history[1]->at_ms && prev->history[0]->at_ms > 0);
    /* a pause says so, and keeps the history */
    void *rec;
    size_t len;
    const bw_admin_caller_t sre = {"sre", "10.0.0.7", NULL};
    const char *pause = "{\"reason\":\"incident 42\"}";
    ck_assert_int_eq(bw_admin_control_update(3, "pause", pause, strlen(pause), prev, &sre, &set, &rec, &len, err,
                                             sizeof(err)), 0);
    bulkwrite__v1__shard_control__free_unpacked(prev, NULL);
    prev = bulkwrite__v1__shard_control__unpack(NULL, len, rec);
    free(rec);
    ck_assert_str_eq(prev->history[0]->action, "pause");
    ck_assert_str_eq(prev->history[0]->setting, "paused; 25 stmt/s; configured rows/s");
    ck_assert_str_eq(prev->history[1]->reason, "step 24");
    /* the setting a consumer reads names the caller too */
    bw_shard_setting_t read;
    bw_shard_setting_from_record(prev, &read);
    ck_assert_str_eq(read.changed_by, "sre");
    ck_assert_str_eq(read.changed_from, "10.0.0.7");
    bulkwrite__v1__shard_control__free_unpacked(prev, NULL);
}
END_TEST

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
    /* a pin comes and goes with the rate; a rate without it keeps it, a pause keeps it */
    c = update("rate", "{\"rate\": 20, \"pinned\": true}", &set, err);
    ck_assert(c && c->pinned && c->rate == 20 && set.pinned);
    ck_assert_ptr_nonnull(strstr(c->history[0]->setting, "20 stmt/s pinned"));
    bulkwrite__v1__shard_control__free_unpacked(c, NULL);
    c = update("rate", "{\"rate\": 30}", &set, err);
    ck_assert(c && c->pinned && c->rate == 30);
    bulkwrite__v1__shard_control__free_unpacked(c, NULL);
    c = update("pause", "", &set, err);
    ck_assert(c && c->pinned && c->paused);
    bulkwrite__v1__shard_control__free_unpacked(c, NULL);
    c = update("rate", "{\"pinned\": false}", &set, err);
    ck_assert(c && !c->pinned && c->rate == 30 && c->paused && !set.pinned);
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
        {"rate", "{}", "rate needs {\"rate\": number or null}, {\"row_rate\": number or null}, {\"pinned\": boolean}"},
        {"rate", "{\"pinned\": 1}", "pinned must be true"},
        {"pause", "{\"pinned\": true}", "unknown member \"pinned\" for pause"},
        {"rate", "{\"reason\": \"x\"}", "rate needs {\"rate\": number or null}"},
        {"rate", "{\"row_rate\": 0.5}", "row_rate 0.5 is out of range: use 0 (no row budget) or 1 to 1e6 rows per second"},
        {"rate", "{\"row_rate\": 2e6}", "row_rate 2e+06 is out of range"},
        {"rate", "{\"row_rate\": -3}", "row_rate -3 is out of range"},
        {"rate", "{\"row_rate\": \"100\"}", "row_rate must be a number of rows per second, or null"},
        {"rate", "{\"row_rate\": true}", "row_rate must be a number"},
        {"rate", "{\"row_rate\": [100]}", "row_rate must be a number"},
        /* both given: either one wrong refuses the whole body, nothing changes */
        {"rate", "{\"rate\": 5, \"row_rate\": 0.1}", "row_rate 0.1 is out of range"},
        {"rate", "{\"rate\": \"5\", \"row_rate\": 100}", "rate must be a number of statements per second"},
        {"rate", "{\"rows\": 100}", "unknown member \"rows\" for rate"},
        {"pause", "{\"row_rate\": 1}", "unknown member \"row_rate\" for pause"},
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

/* The row budget: set alone, together with the rate, back to the configured value with null;
 * each member given changes only its budget, and pause/resume carry both along. */
START_TEST(control_row_rate) {
    bw_shard_setting_t set = {0};
    char err[256];
    Bulkwrite__V1__ShardControl *c = update("rate", "{\"row_rate\": 5000}", &set, err);
    ck_assert_msg(c != NULL, "%s", err);
    ck_assert(c->has_row_rate && c->row_rate == 5000 && !c->has_rate);
    bulkwrite__v1__shard_control__free_unpacked(c, NULL);
    c = update("rate", "{\"rate\": 20}", &set, err); /* the row budget stays */
    ck_assert(c && c->has_rate && c->rate == 20 && c->has_row_rate && c->row_rate == 5000);
    bulkwrite__v1__shard_control__free_unpacked(c, NULL);
    c = update("pause", "{\"reason\": \"disk\"}", &set, err);
    ck_assert(c && c->paused && c->has_rate && c->rate == 20 && c->has_row_rate && c->row_rate == 5000);
    bulkwrite__v1__shard_control__free_unpacked(c, NULL);
    c = update("rate", "{\"rate\": null, \"row_rate\": 250.5, \"reason\": \"both\"}", &set, err);
    ck_assert(c && !c->has_rate && c->has_row_rate && c->row_rate == 250.5 && c->paused);
    ck_assert_str_eq(c->reason, "both");
    bulkwrite__v1__shard_control__free_unpacked(c, NULL);
    c = update("resume", "", &set, err);
    ck_assert(c && !c->paused && c->has_row_rate && c->row_rate == 250.5);
    bulkwrite__v1__shard_control__free_unpacked(c, NULL);
    /* 0 (no row budget) and the bounds are row rates; 0 is the operator's, not the configured */
    const double edges[] = {0, BW_ROW_RATE_MIN, BW_ROW_RATE_MAX};
    for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++) {
        char body[64];
        snprintf(body, sizeof(body), "{\"row_rate\": %.17g}", edges[i]);
        c = update("rate", body, &set, err);
        ck_assert_msg(c && c->has_row_rate && c->row_rate == edges[i], "%s: %s", body, err);
        bulkwrite__v1__shard_control__free_unpacked(c, NULL);
    }
    c = update("rate", "{\"row_rate\": null}", &set, err);
    ck_assert(c && !c->has_row_rate && c->row_rate == 0 && !c->has_rate);
    bulkwrite__v1__shard_control__free_unpacked(c, NULL);
    ck_assert(!set.has_row_rate && !set.has_rate);
}
END_TEST

/* GET /v1/shards' view of a setting: configured, operator's and effective budgets. */
START_TEST(setting_json_budgets) {
    bw_config_t *conf = t_conf_variant_load("{ shard = 7; rate = 50.0; }", "{ shard = 7; rate = 50.0; row_rate = 900.0; }");
    bw_shard_setting_t set = {0};
    char *text = bw_admin_setting_json(conf, 7, &set);
    json_t *j = json_loads(text, 0, NULL);
    ck_assert_msg(j != NULL, "%s", text);
    ck_assert(json_real_value(json_object_get(j, "configured_rate")) == 50.0);
    ck_assert(json_is_null(json_object_get(j, "operator_rate")));
    ck_assert(json_number_value(json_object_get(j, "effective_rate")) == 50.0);
    ck_assert(json_number_value(json_object_get(j, "configured_row_rate")) == 900.0);
    ck_assert(json_is_null(json_object_get(j, "operator_row_rate")));
    ck_assert(json_number_value(json_object_get(j, "effective_row_rate")) == 900.0);
    json_decref(j);
    free(text);
    set.has_row_rate = 1;
    set.row_rate = 0; /* the operator lifted the row budget */
    text = bw_admin_setting_json(conf, 7, &set);
    j = json_loads(text, 0, NULL);
    ck_assert(json_number_value(json_object_get(j, "operator_row_rate")) == 0);
    ck_assert(json_number_value(json_object_get(j, "effective_row_rate")) == 0);
    ck_assert(json_number_value(json_object_get(j, "configured_row_rate")) == 900.0);
    ck_assert(json_number_value(json_object_get(j, "effective_rate")) == 50.0);
    json_decref(j);
    free(text);
    bw_config_destroy(conf);
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
        ck_assert(!set.has_row_rate && set.row_rate == 0);
    }
    /* row rates likewise, by their own bounds */
    const struct {
        double row_rate, want;
    } rows[] = {{0.5, BW_ROW_RATE_MIN}, {-3, BW_ROW_RATE_MIN}, {NAN, BW_ROW_RATE_MIN}, {1e9, BW_ROW_RATE_MAX},
                {0, 0}, {7500, 7500}};
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        Bulkwrite__V1__ShardControl c = BULKWRITE__V1__SHARD_CONTROL__INIT;
        c.has_row_rate = 1;
        c.row_rate = rows[i].row_rate;
        bw_shard_setting_t set;
        bw_shard_setting_from_record(&c, &set);
        ck_assert_msg(set.has_row_rate && set.row_rate == rows[i].want, "%g read as %g", rows[i].row_rate, set.row_rate);
        ck_assert(!set.has_rate);
    }
}
END_TEST

/* A record written before row rates existed (fields 1-6 only) reads as "no operator row
 * rate": the configured one applies. */
START_TEST(control_record_without_row_rate) {
    /* shard 3, has_rate, rate 40.0, reason "old", as the previous version packed it */
    static const uint8_t old[] = {0x08, 0x03, 0x10, 0x01, 0x19, 0, 0, 0, 0, 0, 0, 0x44, 0x40, 0x32, 0x03, 'o', 'l', 'd'};
    Bulkwrite__V1__ShardControl *back = bulkwrite__v1__shard_control__unpack(NULL, sizeof(old), old);
    ck_assert_ptr_nonnull(back);
    bw_shard_setting_t set;
    bw_shard_setting_from_record(back, &set);
    bulkwrite__v1__shard_control__free_unpacked(back, NULL);
    ck_assert(set.has_rate && set.rate == 40 && !set.has_row_rate && set.row_rate == 0);
    ck_assert_str_eq(set.reason, "old");
    bw_config_t *conf = t_conf_variant_load("default_row_rate = 0.0;", "default_row_rate = 3000.0;");
    ck_assert(bw_shard_effective_row_rate(conf, 3, &set) == 3000.0);
    ck_assert(bw_shard_effective_rate(conf, 3, &set) == 40);
    bw_config_destroy(conf);
}
END_TEST

START_TEST(shard_keys) {
    char key[24];
    ck_assert_int_eq(bw_shard_key(4095, key), 10);
    ck_assert_str_eq(key, "shard/4095");
}
END_TEST

START_TEST(listeners) {
    char why[320] = "";
    /* one listener serves everything */
    ck_assert_int_eq(bw_admin_served("POST", "/v1/shards/3/pause", BW_LISTENER_ONLY, why, sizeof(why)), 1);
    ck_assert_int_eq(bw_admin_served("POST", "/v1/batches", BW_LISTENER_ONLY, why, sizeof(why)), 1);
    /* with an admin listener, shard control is there only */
    ck_assert_int_eq(bw_admin_served("POST", "/v1/shards/3/pause", BW_LISTENER_DATA, why, sizeof(why)), 0);
    ck_assert_str_eq(why, "POST /v1/shards/3/pause: shard and server control are served on the admin listener only "
                          "(proxy.admin_listen_address:proxy.admin_port), not on this port");
    ck_assert_int_eq(bw_admin_served("POST", "/v1/shards/3/rate", BW_LISTENER_ADMIN, why, sizeof(why)), 1);
    ck_assert_int_eq(bw_admin_served("POST", "/v1/servers/mysql-a/pause", BW_LISTENER_DATA, why, sizeof(why)), 0);
    ck_assert_int_eq(bw_admin_served("POST", "/v1/servers/mysql-a/pause", BW_LISTENER_ADMIN, why, sizeof(why)), 1);
    const char *data_only[][2] = {{"POST", "/v1/batches"}, {"GET", "/v1/jobs/0123"}, {"GET", "/readyz"}};
    for (size_t i = 0; i < 3; i++) {
        ck_assert_int_eq(bw_admin_served(data_only[i][0], data_only[i][1], BW_LISTENER_DATA, why, sizeof(why)), 1);
        ck_assert_int_eq(bw_admin_served(data_only[i][0], data_only[i][1], BW_LISTENER_ADMIN, why, sizeof(why)), 0);
        ck_assert_msg(strstr(why, "is not served on the admin listener"), "%s", why);
    }
    const char *both[] = {"/v1/shards", "/healthz", "/metrics"};
    for (size_t i = 0; i < 3; i++) {
        ck_assert_int_eq(bw_admin_served("GET", both[i], BW_LISTENER_DATA, why, sizeof(why)), 1);
        ck_assert_int_eq(bw_admin_served("GET", both[i], BW_LISTENER_ADMIN, why, sizeof(why)), 1);
    }
    /* the admin listener serves nothing else, unknown paths and methods included */
    ck_assert_int_eq(bw_admin_served("GET", "/v1/secret", BW_LISTENER_ADMIN, why, sizeof(why)), 0);
    ck_assert_int_eq(bw_admin_served("DELETE", "/v1/shards", BW_LISTENER_ADMIN, why, sizeof(why)), 0);
    ck_assert_int_eq(bw_admin_served("GET", "/v1/shards/3/pause", BW_LISTENER_DATA, why, sizeof(why)), 1); /* 405 after */
}
END_TEST

Suite *admin_suite(void) {
    Suite *s = suite_create("admin");
    TCase *tc = tcase_create("admin");
    tcase_add_test(tc, urls);
    tcase_add_test(tc, server_change);
    tcase_add_test(tc, control_bodies);
    tcase_add_test(tc, control_audit_history);
    tcase_add_test(tc, shard_keys);
    tcase_add_test(tc, control_record_rate_clamped);
    tcase_add_test(tc, control_row_rate);
    tcase_add_test(tc, setting_json_budgets);
    tcase_add_test(tc, control_record_without_row_rate);
    tcase_add_test(tc, listeners);
    suite_add_tcase(s, tc);
    return s;
}
