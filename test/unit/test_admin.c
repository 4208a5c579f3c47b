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
    ck_assert_str_eq(err, "expected /v1/servers/{server}/rate|pause|resume|budget");
    ck_assert_int_eq(bw_admin_parse_url(conf, "/v1/servers/mysql-a", &t, err, sizeof(err)), -1);
    ck_assert_int_eq(bw_admin_parse_url(conf, "/v1/servers/mysql-a/drain", &t, err, sizeof(err)), -1);
    ck_assert_str_eq(err, "unknown action \"drain\": use rate, pause or resume (or budget: the whole server's)");
    /* a budget is a whole server's: not a shard's action */
    ck_assert_int_eq(bw_admin_parse_url(conf, "/v1/servers/mysql-b/budget", &t, err, sizeof(err)), 0);
    ck_assert(t.first_shard == 4 && t.last_shard == 7 && !strcmp(t.action, "budget") && !strcmp(t.server, "mysql-b"));
    ck_assert_int_eq(bw_admin_parse_url(conf, "/v1/shards/3/budget", &t, err, sizeof(err)), -1);
    ck_assert_str_eq(err, "unknown action \"budget\": use rate, pause or resume");
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
            bw_admin_records_t out;
            ck_assert_int_eq(bw_admin_control_update(s, "pause", body[k], strlen(body[k]), NULL, &by, &sets[s - 4], &out,
                                                     err, sizeof(err)), 0);
            /* a pause writes the shard's pause record only */
            ck_assert(out.n == 1 && out.key[0] == BW_CONTROL_PAUSE);
            Bulkwrite__Internal__V1__ShardControl *c = bulkwrite__internal__v1__shard_control__unpack(NULL, out.len[0], out.data[0]);
            bw_admin_records_free(&out);
            ck_assert(c && c->paused && c->shard == (uint32_t)s && !c->has_rate && !c->has_row_rate);
            ck_assert_str_eq(c->reason, k ? "server mysql-b" : "server mysql-b: kernel upgrade");
            ck_assert_str_eq(c->history[0]->reason, c->reason);
            bulkwrite__internal__v1__shard_control__free_unpacked(c, NULL);
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

/* One shard's records under each of its keys, as the shard table keeps them: a change's
 * records replace those under their keys (the latest record per key wins). */
typedef struct {
    Bulkwrite__Internal__V1__ShardControl *rec[BW_CONTROL_KEYS];
    uint64_t order[BW_CONTROL_KEYS], reads; /* when each was read */
} t_shard_t;

static void t_shard_free(t_shard_t *sh) {
    for (int k = 0; k < BW_CONTROL_KEYS; k++)
        if (sh->rec[k]) bulkwrite__internal__v1__shard_control__free_unpacked(sh->rec[k], NULL);
    memset(sh, 0, sizeof(*sh));
}

/* The records read, as the table reads them from the control topic (out is freed). */
static void t_shard_apply(t_shard_t *sh, bw_admin_records_t *out) {
    for (size_t i = 0; i < out->n; i++) {
        Bulkwrite__Internal__V1__ShardControl *c = bulkwrite__internal__v1__shard_control__unpack(NULL, out->len[i], out->data[i]);
        ck_assert_ptr_nonnull(c);
        if (sh->rec[out->key[i]]) bulkwrite__internal__v1__shard_control__free_unpacked(sh->rec[out->key[i]], NULL);
        sh->rec[out->key[i]] = c;
        sh->order[out->key[i]] = ++sh->reads;
    }
    bw_admin_records_free(out);
}

static Bulkwrite__Internal__V1__ShardControl *t_shard_fold(const t_shard_t *sh, int shard) {
    return bw_shard_control_fold(shard, (const Bulkwrite__Internal__V1__ShardControl *const *)sh->rec, sh->order);
}

/* A change of shard 3 by caller, as a proxy makes it: from the shard's folded setting
 * (*set, which a proxy reads from the table first) and its records (for their history);
 * the records go into *sh. 0, or -1 with err. */
static int t_change(t_shard_t *sh, const char *action, const char *body, const bw_admin_caller_t *caller,
                    bw_shard_setting_t *set, char *err) {
    bw_admin_records_t out;
    if (bw_admin_control_update(3, action, body, strlen(body), sh->rec, caller, set, &out, err, 256)) {
        ck_assert_uint_eq(out.n, 0);
        return -1;
    }
    ck_assert_uint_gt(out.n, 0);
    t_shard_apply(sh, &out);
    return 0;
}

static t_shard_t shard3; /* update()'s shard; each test starts and ends with t_shard_free */

/* The change, then shard 3's folded record (free it), or NULL with err. */
static Bulkwrite__Internal__V1__ShardControl *update(const char *action, const char *body, bw_shard_setting_t *set,
                                           char *err) {
    static const bw_admin_caller_t caller = {"sre", "127.0.0.1", NULL};
    if (t_change(&shard3, action, body, &caller, set, err)) return NULL;
    Bulkwrite__Internal__V1__ShardControl *c = t_shard_fold(&shard3, 3);
    ck_assert_ptr_nonnull(c);
    return c;
}

/* Each change names who changed the shard and from where, and the shard's history holds
 * its changes newest first, at most BW_CONTROL_HISTORY. */
START_TEST(control_audit_history) {
    t_shard_free(&shard3);
    bw_shard_setting_t set = {0};
    char err[256];
    Bulkwrite__Internal__V1__ShardControl *prev = NULL;
    const bw_admin_caller_t callers[] = {{"sre", "127.0.0.1", NULL}, {"oncall", "::1", NULL}};
    for (int i = 0; i < BW_CONTROL_HISTORY + 5; i++) {
        char body[64];
        snprintf(body, sizeof(body), "{\"rate\": %d, \"reason\": \"step %d\"}", i + 1, i);
        ck_assert_int_eq(t_change(&shard3, "rate", body, &callers[i % 2], &set, err), 0);
        ck_assert_ptr_nonnull(shard3.rec[BW_CONTROL_RATE]);
        ck_assert(!shard3.rec[BW_CONTROL_PAUSE] && !shard3.rec[BW_CONTROL_ROW_RATE] && !shard3.rec[BW_CONTROL_PINNED]);
        if (prev) bulkwrite__internal__v1__shard_control__free_unpacked(prev, NULL);
        prev = t_shard_fold(&shard3, 3);
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
    bulkwrite__internal__v1__shard_control__free_unpacked(prev, NULL);
    /* a pause says so, and the shard's history goes on behind it */
    const bw_admin_caller_t sre = {"sre", "10.0.0.7", NULL};
    ck_assert_int_eq(t_change(&shard3, "pause", "{\"reason\":\"incident 42\"}", &sre, &set, err), 0);
    prev = t_shard_fold(&shard3, 3);
    ck_assert_str_eq(prev->history[0]->action, "pause");
    ck_assert_str_eq(prev->history[0]->setting, "paused; 25 stmt/s; configured rows/s");
    ck_assert_str_eq(prev->history[1]->reason, "step 24");
    ck_assert_uint_eq(prev->n_history, BW_CONTROL_HISTORY);
    /* the setting a consumer reads names the caller too */
    bw_shard_setting_t read;
    bw_shard_setting_from_record(prev, &read);
    ck_assert_str_eq(read.changed_by, "sre");
    ck_assert_str_eq(read.changed_from, "10.0.0.7");
    ck_assert_str_eq(read.reason, "incident 42");
    ck_assert(read.paused && read.has_rate && read.rate == 25);
    bulkwrite__internal__v1__shard_control__free_unpacked(prev, NULL);
    t_shard_free(&shard3);
}
END_TEST

START_TEST(control_bodies) {
    t_shard_free(&shard3);
    bw_shard_setting_t set = {0};
    char err[256];
    Bulkwrite__Internal__V1__ShardControl *c = update("rate", "{\"rate\": 2.5, \"reason\": \"hot\"}", &set, err);
    ck_assert(c && c->shard == 3 && c->has_rate && c->rate == 2.5 && !c->paused && strcmp(c->reason, "hot") == 0);
    bulkwrite__internal__v1__shard_control__free_unpacked(c, NULL);
    /* a pause keeps the rate; a resume keeps it too */
    c = update("pause", "", &set, err);
    ck_assert(c && c->paused && c->has_rate && c->rate == 2.5 && c->updated_at_ms > 0);
    bulkwrite__internal__v1__shard_control__free_unpacked(c, NULL);
    c = update("rate", "{\"rate\": null}", &set, err);
    ck_assert(c && !c->has_rate && c->paused);
    bulkwrite__internal__v1__shard_control__free_unpacked(c, NULL);
    c = update("resume", "{}", &set, err);
    ck_assert(c && !c->paused);
    bulkwrite__internal__v1__shard_control__free_unpacked(c, NULL);
    /* a pin comes and goes with the rate; a rate without it keeps it, a pause keeps it */
    c = update("rate", "{\"rate\": 20, \"pinned\": true}", &set, err);
    ck_assert(c && c->pinned && c->rate == 20 && set.pinned);
    ck_assert_ptr_nonnull(strstr(c->history[0]->setting, "20 stmt/s pinned"));
    bulkwrite__internal__v1__shard_control__free_unpacked(c, NULL);
    c = update("rate", "{\"rate\": 30}", &set, err);
    ck_assert(c && c->pinned && c->rate == 30);
    bulkwrite__internal__v1__shard_control__free_unpacked(c, NULL);
    c = update("pause", "", &set, err);
    ck_assert(c && c->pinned && c->paused);
    bulkwrite__internal__v1__shard_control__free_unpacked(c, NULL);
    c = update("rate", "{\"pinned\": false}", &set, err);
    ck_assert(c && !c->pinned && c->rate == 30 && c->paused && !set.pinned);
    bulkwrite__internal__v1__shard_control__free_unpacked(c, NULL);
    c = update("resume", "{}", &set, err);
    ck_assert(c && !c->paused);
    bulkwrite__internal__v1__shard_control__free_unpacked(c, NULL);
    /* the bounds and 0 (unlimited) are rates */
    const double edges[] = {0, BW_RATE_MIN, BW_RATE_MAX};
    for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++) {
        char body[64];
        snprintf(body, sizeof(body), "{\"rate\": %.17g}", edges[i]);
        c = update("rate", body, &set, err);
        ck_assert(c && c->has_rate && c->rate == edges[i]);
        bulkwrite__internal__v1__shard_control__free_unpacked(c, NULL);
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
    t_shard_free(&shard3);
}
END_TEST

/* The row budget: set alone, together with the rate, back to the configured value with null;
 * each member given changes only its budget, and pause/resume carry both along. */
START_TEST(control_row_rate) {
    t_shard_free(&shard3);
    bw_shard_setting_t set = {0};
    char err[256];
    Bulkwrite__Internal__V1__ShardControl *c = update("rate", "{\"row_rate\": 5000}", &set, err);
    ck_assert_msg(c != NULL, "%s", err);
    ck_assert(c->has_row_rate && c->row_rate == 5000 && !c->has_rate);
    bulkwrite__internal__v1__shard_control__free_unpacked(c, NULL);
    c = update("rate", "{\"rate\": 20}", &set, err); /* the row budget stays */
    ck_assert(c && c->has_rate && c->rate == 20 && c->has_row_rate && c->row_rate == 5000);
    bulkwrite__internal__v1__shard_control__free_unpacked(c, NULL);
    c = update("pause", "{\"reason\": \"disk\"}", &set, err);
    ck_assert(c && c->paused && c->has_rate && c->rate == 20 && c->has_row_rate && c->row_rate == 5000);
    bulkwrite__internal__v1__shard_control__free_unpacked(c, NULL);
    c = update("rate", "{\"rate\": null, \"row_rate\": 250.5, \"reason\": \"both\"}", &set, err);
    ck_assert(c && !c->has_rate && c->has_row_rate && c->row_rate == 250.5 && c->paused);
    ck_assert_str_eq(c->reason, "both");
    bulkwrite__internal__v1__shard_control__free_unpacked(c, NULL);
    c = update("resume", "", &set, err);
    ck_assert(c && !c->paused && c->has_row_rate && c->row_rate == 250.5);
    bulkwrite__internal__v1__shard_control__free_unpacked(c, NULL);
    /* 0 (no row budget) and the bounds are row rates; 0 is the operator's, not the configured */
    const double edges[] = {0, BW_ROW_RATE_MIN, BW_ROW_RATE_MAX};
    for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++) {
        char body[64];
        snprintf(body, sizeof(body), "{\"row_rate\": %.17g}", edges[i]);
        c = update("rate", body, &set, err);
        ck_assert_msg(c && c->has_row_rate && c->row_rate == edges[i], "%s: %s", body, err);
        bulkwrite__internal__v1__shard_control__free_unpacked(c, NULL);
    }
    c = update("rate", "{\"row_rate\": null}", &set, err);
    ck_assert(c && !c->has_row_rate && c->row_rate == 0 && !c->has_rate);
    bulkwrite__internal__v1__shard_control__free_unpacked(c, NULL);
    ck_assert(!set.has_row_rate && !set.has_rate);
    t_shard_free(&shard3);
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
        Bulkwrite__Internal__V1__ShardControl c = BULKWRITE__INTERNAL__V1__SHARD_CONTROL__INIT;
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
        Bulkwrite__Internal__V1__ShardControl c = BULKWRITE__INTERNAL__V1__SHARD_CONTROL__INIT;
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
    Bulkwrite__Internal__V1__ShardControl *back = bulkwrite__internal__v1__shard_control__unpack(NULL, sizeof(old), old);
    ck_assert_ptr_nonnull(back);
    bw_shard_setting_t set;
    bw_shard_setting_from_record(back, &set);
    bulkwrite__internal__v1__shard_control__free_unpacked(back, NULL);
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
    const char *data_only[][2] = {{"POST", "/v1/batches"}, {"GET", "/v1/check/3"}, {"GET", "/readyz"}};
    for (size_t i = 0; i < 3; i++) {
        ck_assert_int_eq(bw_admin_served(data_only[i][0], data_only[i][1], BW_LISTENER_DATA, why, sizeof(why)), 1);
        ck_assert_int_eq(bw_admin_served(data_only[i][0], data_only[i][1], BW_LISTENER_ADMIN, why, sizeof(why)), 0);
        ck_assert_msg(strstr(why, "is not served on the admin listener"), "%s", why);
    }
    /* and what the page reads (it is served on the admin listener when there is one) */
    const char *both[] = {"/v1/shards", "/healthz", "/metrics", "/v1/jobs", "/v1/jobs/0123", "/v1/fleet", "/v1/whoami"};
    for (size_t i = 0; i < sizeof(both) / sizeof(*both); i++) {
        ck_assert_int_eq(bw_admin_served("GET", both[i], BW_LISTENER_DATA, why, sizeof(why)), 1);
        ck_assert_int_eq(bw_admin_served("GET", both[i], BW_LISTENER_ADMIN, why, sizeof(why)), 1);
    }
    ck_assert_int_eq(bw_admin_served("DELETE", "/v1/jobs/0123", BW_LISTENER_ADMIN, why, sizeof(why)), 1); /* cancel */
    /* the page itself: on the admin listener only, when there is one */
    ck_assert_int_eq(bw_admin_served("GET", "/ui/", BW_LISTENER_ONLY, why, sizeof(why)), 1);
    ck_assert_int_eq(bw_admin_served("GET", "/ui/app.js", BW_LISTENER_ADMIN, why, sizeof(why)), 1);
    ck_assert_int_eq(bw_admin_served("GET", "/ui/", BW_LISTENER_DATA, why, sizeof(why)), 0);
    ck_assert_msg(strstr(why, "the page is served on the admin listener"), "%s", why);
    /* the admin listener serves nothing else, unknown paths and methods included */
    ck_assert_int_eq(bw_admin_served("GET", "/v1/secret", BW_LISTENER_ADMIN, why, sizeof(why)), 0);
    ck_assert_int_eq(bw_admin_served("DELETE", "/v1/shards", BW_LISTENER_ADMIN, why, sizeof(why)), 0);
    ck_assert_int_eq(bw_admin_served("GET", "/v1/shards/3/pause", BW_LISTENER_DATA, why, sizeof(why)), 1); /* 405 after */
}
END_TEST

/* ---- per-field records and their fold (shardtable.h) ------------------------------------------ */

static Bulkwrite__Internal__V1__ControlChange t_chg(int64_t at, const char *action, const char *reason) {
    Bulkwrite__Internal__V1__ControlChange h = BULKWRITE__INTERNAL__V1__CONTROL_CHANGE__INIT;
    h.at_ms = at;
    h.action = (char *)action;
    h.by = "sre";
    h.from = "127.0.0.1";
    h.reason = (char *)reason;
    h.setting = "";
    return h;
}

/* A record as an older version wrote it under "shard/N" (every field), read as the base;
 * a field's own record overrides that field only, and a tombstone of it (the key
 * deleted) brings the whole record's value back. */
START_TEST(fold_legacy_and_fields) {
    const Bulkwrite__Internal__V1__ShardControl *recs[BW_CONTROL_KEYS] = {0};
    ck_assert_ptr_null(bw_shard_control_fold(3, recs, NULL)); /* never changed */
    Bulkwrite__Internal__V1__ControlChange old_h = t_chg(1000, "rate", "old"), *old_hist[] = {&old_h};
    Bulkwrite__Internal__V1__ShardControl whole = BULKWRITE__INTERNAL__V1__SHARD_CONTROL__INIT;
    whole.shard = 3;
    whole.has_rate = 1;
    whole.rate = 40;
    whole.has_row_rate = 1;
    whole.row_rate = 3000;
    whole.pinned = 1;
    whole.updated_at_ms = 1000;
    whole.reason = "old";
    whole.changed_by = "sre";
    whole.changed_from = "10.0.0.1";
    whole.history = old_hist;
    whole.n_history = 1;
    recs[BW_CONTROL_WHOLE] = &whole;
    Bulkwrite__Internal__V1__ShardControl *f = bw_shard_control_fold(3, recs, NULL);
    ck_assert(f && f->shard == 3 && !f->paused && f->has_rate && f->rate == 40 && f->has_row_rate &&
              f->row_rate == 3000 && f->pinned && f->updated_at_ms == 1000 && f->n_history == 1);
    ck_assert_str_eq(f->reason, "old");
    bulkwrite__internal__v1__shard_control__free_unpacked(f, NULL);

    /* a pause record: paused, the rest from the whole record, the audit of the pause */
    Bulkwrite__Internal__V1__ControlChange p_h = t_chg(2000, "pause", "disk"), *p_hist[] = {&p_h};
    Bulkwrite__Internal__V1__ShardControl pause = BULKWRITE__INTERNAL__V1__SHARD_CONTROL__INIT;
    pause.shard = 3;
    pause.paused = 1;
    pause.updated_at_ms = 2000;
    pause.reason = "disk";
    pause.changed_by = "oncall";
    pause.changed_from = "::1";
    pause.history = p_hist;
    pause.n_history = 1;
    recs[BW_CONTROL_PAUSE] = &pause;
    f = bw_shard_control_fold(3, recs, NULL);
    ck_assert(f->paused && f->has_rate && f->rate == 40 && f->row_rate == 3000 && f->pinned && f->updated_at_ms == 2000);
    ck_assert_str_eq(f->reason, "disk");
    ck_assert_str_eq(f->changed_by, "oncall");
    ck_assert_str_eq(f->changed_from, "::1");
    ck_assert_uint_eq(f->n_history, 2);
    ck_assert_str_eq(f->history[0]->action, "pause");
    ck_assert_str_eq(f->history[1]->reason, "old");
    bw_shard_setting_t set;
    bw_shard_setting_from_record(f, &set); /* what a consumer runs at */
    ck_assert(set.paused && set.has_rate && set.rate == 40 && set.has_row_rate && set.row_rate == 3000 && set.pinned);
    bulkwrite__internal__v1__shard_control__free_unpacked(f, NULL);

    /* "back to the configured rate" in the rate record overrides the whole record's 40,
     * though its record is older than the pause: the pause's audit stays the newest */
    Bulkwrite__Internal__V1__ShardControl rate = BULKWRITE__INTERNAL__V1__SHARD_CONTROL__INIT;
    rate.has_rate = 0;
    rate.updated_at_ms = 1500;
    rate.reason = "configured";
    recs[BW_CONTROL_RATE] = &rate;
    Bulkwrite__Internal__V1__ShardControl unpin = BULKWRITE__INTERNAL__V1__SHARD_CONTROL__INIT;
    unpin.pinned = 0;
    unpin.updated_at_ms = 1200;
    recs[BW_CONTROL_PINNED] = &unpin;
    f = bw_shard_control_fold(3, recs, NULL);
    ck_assert(f->paused && !f->has_rate && f->rate == 0 && f->has_row_rate && f->row_rate == 3000 && !f->pinned);
    ck_assert_str_eq(f->reason, "disk");
    bulkwrite__internal__v1__shard_control__free_unpacked(f, NULL);

    /* the pause key's tombstone: the whole record's "running" again, the rate's audit newest */
    recs[BW_CONTROL_PAUSE] = NULL;
    f = bw_shard_control_fold(3, recs, NULL);
    ck_assert(!f->paused && !f->has_rate && f->updated_at_ms == 1500);
    ck_assert_str_eq(f->reason, "configured");
    bulkwrite__internal__v1__shard_control__free_unpacked(f, NULL);
    /* field records without a whole record: an unset field is the configured value */
    recs[BW_CONTROL_WHOLE] = NULL;
    f = bw_shard_control_fold(3, recs, NULL);
    ck_assert(f && !f->paused && !f->has_rate && !f->has_row_rate && !f->pinned);
    bulkwrite__internal__v1__shard_control__free_unpacked(f, NULL);
}
END_TEST

/* Two SREs on two proxies at the same moment, each starting from the same setting: one
 * pauses the shard, the other sets its rate. Whichever record Kafka orders first, both
 * changes stand; a body with only row_rate writes the row rate only. */
START_TEST(concurrent_fields_both_stand) {
    char err[256];
    const bw_admin_caller_t a = {"alice", "10.0.0.1", NULL}, b = {"bob", "10.0.0.2", NULL};
    for (int order = 0; order < 2; order++) {
        t_shard_t sh = {0};
        bw_shard_setting_t start = {0};
        ck_assert_int_eq(t_change(&sh, "rate", "{\"rate\": 10, \"row_rate\": 500}", &a, &start, err), 0);
        bw_shard_setting_t on_a = start, on_b = start; /* both proxies read the same fold */
        bw_admin_records_t pa, rb;
        ck_assert_int_eq(bw_admin_control_update(3, "pause", "{\"reason\":\"disk\"}", 17, sh.rec, &a, &on_a, &pa, err,
                                                 sizeof(err)), 0);
        const char *body = "{\"rate\": 2.5}";
        ck_assert_int_eq(bw_admin_control_update(3, "rate", body, strlen(body), sh.rec, &b, &on_b, &rb, err, sizeof(err)),
                         0);
        ck_assert(pa.n == 1 && pa.key[0] == BW_CONTROL_PAUSE && rb.n == 1 && rb.key[0] == BW_CONTROL_RATE);
        t_shard_apply(&sh, order ? &rb : &pa);
        t_shard_apply(&sh, order ? &pa : &rb);
        Bulkwrite__Internal__V1__ShardControl *f = t_shard_fold(&sh, 3);
        ck_assert_msg(f->paused && f->has_rate && f->rate == 2.5 && f->has_row_rate && f->row_rate == 500,
                      "order %d: paused %d rate %g row_rate %g", order, f->paused, f->rate, f->row_rate);
        ck_assert_uint_eq(f->n_history, 3);
        bulkwrite__internal__v1__shard_control__free_unpacked(f, NULL);
        /* a row rate alone leaves the statement rate's record as it is */
        bw_shard_setting_t set = on_b;
        ck_assert_int_eq(bw_admin_control_update(3, "rate", "{\"row_rate\": 900}", 17, sh.rec, &b, &set, &rb, err,
                                                 sizeof(err)), 0);
        ck_assert(rb.n == 1 && rb.key[0] == BW_CONTROL_ROW_RATE);
        t_shard_apply(&sh, &rb);
        f = t_shard_fold(&sh, 3);
        ck_assert(f->paused && f->rate == 2.5 && f->row_rate == 900);
        bw_shard_setting_from_record(f, &set); /* a proxy's next change starts from the fold */
        bulkwrite__internal__v1__shard_control__free_unpacked(f, NULL);
        /* rate, row rate and pin at once: three records, one change in the history */
        ck_assert_int_eq(t_change(&sh, "rate", "{\"rate\": 4, \"row_rate\": null, \"pinned\": true}", &a, &set, err), 0);
        f = t_shard_fold(&sh, 3);
        ck_assert(f->paused && f->rate == 4 && !f->has_row_rate && f->pinned);
        ck_assert_uint_eq(f->n_history, 5);
        ck_assert_str_eq(f->history[0]->setting, "paused; 4 stmt/s pinned; configured rows/s");
        ck_assert_str_ne(f->history[1]->setting, f->history[0]->setting);
        bulkwrite__internal__v1__shard_control__free_unpacked(f, NULL);
        t_shard_free(&sh);
    }
}
END_TEST

/* The history of the fold: every record's changes, newest first by time, a change written
 * to several keys once, one record's order kept among equal times, at most
 * BW_CONTROL_HISTORY; the whole record's (older versions') changes among them. */
START_TEST(fold_history_merge) {
    Bulkwrite__Internal__V1__ControlChange w1 = t_chg(100, "rate", "w1"), w2 = t_chg(400, "pause", "w2");
    Bulkwrite__Internal__V1__ControlChange *w_hist[] = {&w2, &w1};
    /* one rate change at 500 set rate and row rate: it is in both records */
    Bulkwrite__Internal__V1__ControlChange both = t_chg(500, "rate", "both"), r1 = t_chg(300, "rate", "r1");
    Bulkwrite__Internal__V1__ControlChange *r_hist[] = {&both, &r1}, *rr_hist[] = {&both};
    /* a pause and a resume in the same millisecond: resume is the newer, as its record says */
    Bulkwrite__Internal__V1__ControlChange res = t_chg(450, "resume", "res"), pau = t_chg(450, "pause", "pau"),
                                 p0 = t_chg(200, "pause", "p0");
    Bulkwrite__Internal__V1__ControlChange *p_hist[] = {&res, &pau, &p0};
    Bulkwrite__Internal__V1__ShardControl w = BULKWRITE__INTERNAL__V1__SHARD_CONTROL__INIT, p = w, r = w, rr = w;
    w.history = w_hist, w.n_history = 2, w.updated_at_ms = 400;
    p.history = p_hist, p.n_history = 3, p.updated_at_ms = 450;
    r.history = r_hist, r.n_history = 2, r.updated_at_ms = 500;
    rr.history = rr_hist, rr.n_history = 1, rr.updated_at_ms = 500;
    const Bulkwrite__Internal__V1__ShardControl *recs[BW_CONTROL_KEYS] = {&w, &p, &r, &rr, NULL};
    Bulkwrite__Internal__V1__ShardControl *f = bw_shard_control_fold(3, recs, NULL);
    const char *want[] = {"both", "res", "pau", "w2", "r1", "p0", "w1"};
    ck_assert_uint_eq(f->n_history, 7);
    for (size_t i = 0; i < 7; i++) ck_assert_str_eq(f->history[i]->reason, want[i]);
    for (size_t i = 1; i < 7; i++) ck_assert(f->history[i - 1]->at_ms >= f->history[i]->at_ms);
    bulkwrite__internal__v1__shard_control__free_unpacked(f, NULL);
    /* at most BW_CONTROL_HISTORY: the newest of 2 × 15 changes in two records */
    Bulkwrite__Internal__V1__ControlChange many[2][15], *lists[2][15];
    char reasons[2][15][16];
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 15; i++) {
            snprintf(reasons[k][i], sizeof(reasons[k][i]), "%c%d", "pr"[k], i);
            many[k][i] = t_chg(1000 - 2 * i - k, k ? "rate" : "pause", reasons[k][i]);
            lists[k][i] = &many[k][i];
        }
    Bulkwrite__Internal__V1__ShardControl p2 = BULKWRITE__INTERNAL__V1__SHARD_CONTROL__INIT, r2 = p2;
    p2.history = lists[0], p2.n_history = 15;
    r2.history = lists[1], r2.n_history = 15;
    const Bulkwrite__Internal__V1__ShardControl *recs2[BW_CONTROL_KEYS] = {NULL, &p2, &r2, NULL, NULL};
    f = bw_shard_control_fold(3, recs2, NULL);
    ck_assert_uint_eq(f->n_history, BW_CONTROL_HISTORY);
    ck_assert_str_eq(f->history[0]->reason, "p0");
    ck_assert_str_eq(f->history[1]->reason, "r0");
    ck_assert_str_eq(f->history[BW_CONTROL_HISTORY - 1]->reason, "r9");
    bulkwrite__internal__v1__shard_control__free_unpacked(f, NULL);
    /* two changes in one millisecond under two keys: the record Kafka holds later is the
     * newer, for the history and for the audit */
    Bulkwrite__Internal__V1__ControlChange x = t_chg(700, "pause", "x"), y = t_chg(700, "rate", "y");
    Bulkwrite__Internal__V1__ControlChange *x_hist[] = {&x}, *y_hist[] = {&y};
    Bulkwrite__Internal__V1__ShardControl px = BULKWRITE__INTERNAL__V1__SHARD_CONTROL__INIT, ry = px;
    px.history = x_hist, px.n_history = 1, px.updated_at_ms = 700, px.reason = "x", px.paused = 1;
    ry.history = y_hist, ry.n_history = 1, ry.updated_at_ms = 700, ry.reason = "y", ry.has_rate = 1, ry.rate = 3;
    const Bulkwrite__Internal__V1__ShardControl *recs3[BW_CONTROL_KEYS] = {NULL, &px, &ry, NULL, NULL};
    const uint64_t pause_later[BW_CONTROL_KEYS] = {0, 9, 4, 0, 0}, rate_later[BW_CONTROL_KEYS] = {0, 4, 9, 0, 0};
    f = bw_shard_control_fold(3, recs3, pause_later);
    ck_assert(f->paused && f->rate == 3 && f->n_history == 2);
    ck_assert_str_eq(f->reason, "x");
    ck_assert_str_eq(f->history[0]->reason, "x");
    bulkwrite__internal__v1__shard_control__free_unpacked(f, NULL);
    f = bw_shard_control_fold(3, recs3, rate_later);
    ck_assert_str_eq(f->reason, "y");
    ck_assert_str_eq(f->history[0]->reason, "y");
    ck_assert_str_eq(f->history[1]->reason, "x");
    bulkwrite__internal__v1__shard_control__free_unpacked(f, NULL);
}
END_TEST

/* A server-wide pause from one proxy and a rate of one of its shards from another at the
 * same moment: every shard of the server paused, that one at its new rate too. */
START_TEST(server_change_beside_shard_rate) {
    bw_config_t *conf = t_ref_config();
    bw_admin_target_t t;
    char err[256];
    ck_assert_int_eq(bw_admin_parse_url(conf, "/v1/servers/mysql-b/pause", &t, err, sizeof(err)), 0);
    const bw_admin_caller_t server = {"alice", "10.0.0.1", t.server}, one = {"bob", "10.0.0.2", NULL};
    t_shard_t sh[4];
    memset(sh, 0, sizeof(sh));
    bw_admin_records_t out;
    bw_shard_setting_t rate_set = {0};
    /* bob's rate of shard 5 is read after alice's proxy read the shards, before it wrote */
    const char *body = "{\"rate\": 7, \"reason\": \"hot user\"}";
    ck_assert_int_eq(bw_admin_control_update(5, "rate", body, strlen(body), sh[1].rec, &one, &rate_set, &out, err,
                                             sizeof(err)), 0);
    bw_admin_records_t bob = out;
    for (int s = 4; s <= 7; s++) {
        bw_shard_setting_t set = {0};
        ck_assert_int_eq(bw_admin_control_update(s, "pause", "", 0, sh[s - 4].rec, &server, &set, &out, err, sizeof(err)),
                         0);
        t_shard_apply(&sh[s - 4], &out);
    }
    t_shard_apply(&sh[1], &bob);
    for (int s = 4; s <= 7; s++) {
        Bulkwrite__Internal__V1__ShardControl *f = t_shard_fold(&sh[s - 4], s);
        ck_assert_msg(f->paused, "shard %d not paused", s);
        ck_assert(s == 5 ? f->has_rate && f->rate == 7 : !f->has_rate);
        ck_assert_uint_eq(f->n_history, s == 5 ? 2 : 1);
        bulkwrite__internal__v1__shard_control__free_unpacked(f, NULL);
        t_shard_free(&sh[s - 4]);
    }
    bw_config_destroy(conf);
}
END_TEST

/* The control topic's keys: the whole record's, each field's, and none other. */
START_TEST(control_keys) {
    char key[BW_CONTROL_KEY_MAX];
    const char *names[] = {"shard/4095", "shard/4095/pause", "shard/4095/rate", "shard/4095/row_rate",
                           "shard/4095/pinned"};
    for (int k = 0; k < BW_CONTROL_KEYS; k++) {
        int len = bw_shard_control_key(4095, (bw_control_key_t)k, key);
        ck_assert_str_eq(key, names[k]);
        bw_control_key_t back = BW_CONTROL_KEYS;
        ck_assert_int_eq(bw_shard_key_parse(key, (size_t)len, 4096, &back), 4095);
        ck_assert_int_eq(back, k);
        ck_assert_int_eq(bw_shard_key_parse(key, (size_t)len, 4095, &back), -1); /* another layout's shard */
    }
    bw_control_key_t k;
    ck_assert_int_eq(bw_shard_key_parse("shard/0", 7, 8, &k), 0);
    ck_assert_int_eq(k, BW_CONTROL_WHOLE);
    const char *not_ours[] = {"shard/", "shard/x", "shard/-1", "shard/+1", "shard/ 1", "shard/3/", "shard/3/paused",
                              "shard/3/rate/x", "shard/3pause", "member/proxy/h:1", "shards/3", "shard/3/Pause",
                              "shard/99999999999999999999"};
    for (size_t i = 0; i < sizeof(not_ours) / sizeof(not_ours[0]); i++)
        ck_assert_msg(bw_shard_key_parse(not_ours[i], strlen(not_ours[i]), 8, &k) == -1, "%s parsed", not_ours[i]);
    ck_assert_int_eq(bw_shard_key_parse(NULL, 0, 8, &k), -1);
    /* a key with a NUL inside is no shard's */
    ck_assert_int_eq(bw_shard_key_parse("shard/3\0/rate", 13, 8, &k), -1);
}
END_TEST

/* ---- a whole server's budget ---- */

/* A budget change from *rec (replaced by the new record, which the caller frees), or NULL
 * with err. */
static Bulkwrite__Internal__V1__ServerBudget *budget_change(Bulkwrite__Internal__V1__ServerBudget **rec, const char *body, char *err) {
    static const bw_admin_caller_t caller = {"sre", "10.0.0.7", "mysql-a"};
    bw_server_budget_t b;
    void *data;
    size_t len;
    if (bw_admin_budget_update("mysql-a", body, strlen(body), *rec, &caller, &b, &data, &len, err, 256)) {
        ck_assert_ptr_null(data);
        return NULL;
    }
    Bulkwrite__Internal__V1__ServerBudget *next = bulkwrite__internal__v1__server_budget__unpack(NULL, len, data);
    free(data);
    ck_assert_ptr_nonnull(next);
    ck_assert(next->rate == b.rate && next->row_rate == b.row_rate);
    if (*rec) bulkwrite__internal__v1__server_budget__free_unpacked(*rec, NULL);
    return *rec = next;
}

/* A budget names who set it, from where and why; a member left out stays, null and 0 clear
 * that kind; each change goes first in the history, at most BW_CONTROL_HISTORY. */
START_TEST(server_budget_changes) {
    Bulkwrite__Internal__V1__ServerBudget *rec = NULL;
    char err[256];
    Bulkwrite__Internal__V1__ServerBudget *r = budget_change(&rec, "{\"rate\": 40, \"reason\": \"2048 shards on one box\"}", err);
    ck_assert_ptr_nonnull(r);
    ck_assert_str_eq(r->server, "mysql-a");
    ck_assert(r->rate == 40 && r->row_rate == 0 && r->updated_at_ms > 0);
    ck_assert_str_eq(r->changed_by, "sre");
    ck_assert_str_eq(r->changed_from, "10.0.0.7");
    ck_assert_str_eq(r->reason, "2048 shards on one box");
    ck_assert_uint_eq(r->n_history, 1);
    ck_assert_str_eq(r->history[0]->action, "budget");
    ck_assert_str_eq(r->history[0]->setting, "40 stmt/s; no row budget");
    ck_assert_ptr_nonnull(r = budget_change(&rec, "{\"row_rate\": 5000}", err)); /* the rate stays */
    ck_assert(r->rate == 40 && r->row_rate == 5000);
    ck_assert_str_eq(r->history[0]->setting, "40 stmt/s; 5000 rows/s");
    ck_assert_str_eq(r->history[1]->reason, "2048 shards on one box");
    ck_assert_ptr_nonnull(r = budget_change(&rec, "{\"rate\": null}", err));
    ck_assert(r->rate == 0 && r->row_rate == 5000);
    ck_assert_ptr_nonnull(r = budget_change(&rec, "{\"rate\": 0, \"row_rate\": 0, \"reason\": \"done\"}", err));
    ck_assert(r->rate == 0 && r->row_rate == 0); /* cleared; the record keeps the audit */
    ck_assert_str_eq(r->history[0]->setting, "no statement budget; no row budget");
    ck_assert_uint_eq(r->n_history, 4);
    for (int i = 0; i < BW_CONTROL_HISTORY + 3; i++) ck_assert_ptr_nonnull(budget_change(&rec, "{\"rate\": 7}", err));
    ck_assert_uint_eq(rec->n_history, BW_CONTROL_HISTORY);
    /* refused, nothing made */
    const char *bad[][2] = {
        {"", "the body must be a JSON object"},
        {"[1]", "the body must be a JSON object"},
        {"{}", "budget needs {\"rate\": number or null}, {\"row_rate\": number or null}, or both"},
        {"{\"reason\": \"x\"}", "budget needs {\"rate\": number or null}, {\"row_rate\": number or null}, or both"},
        {"{\"rate\": 1e-13}", "rate 1e-13 is out of range"},
        {"{\"rate\": -5}", "rate -5 is out of range"},
        {"{\"rate\": 40, \"row_rate\": 0.5}", "row_rate 0.5 is out of range"},
        {"{\"rate\": \"40\"}", "rate must be a number of statements per second for the whole server"},
        {"{\"pinned\": true}", "unknown member \"pinned\" for budget"},
        {"{\"rate\": 4, \"reason\": 7}", "reason must be a string"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ck_assert_msg(budget_change(&rec, bad[i][0], err) == NULL, "%s accepted", bad[i][0]);
        ck_assert_msg(strncmp(err, bad[i][1], strlen(bad[i][1])) == 0, "%s: %s", bad[i][0], err);
    }
    ck_assert(rec->rate == 7);
    bulkwrite__internal__v1__server_budget__free_unpacked(rec, NULL);
}
END_TEST

/* "server/<name>/budget": built and parsed back; anything else is not a budget's. */
START_TEST(server_budget_keys) {
    char key[BW_SERVER_BUDGET_KEY_MAX], name[BW_SERVER_BUDGET_KEY_MAX];
    int len = bw_server_budget_key("mysql-a", key);
    ck_assert_str_eq(key, "server/mysql-a/budget");
    ck_assert_int_eq(bw_server_budget_key_parse(key, (size_t)len, name), 0);
    ck_assert_str_eq(name, "mysql-a");
    ck_assert_int_eq(bw_server_budget_key_parse("server/a/b/budget", 17, name), 0); /* the name is what lies between */
    ck_assert_str_eq(name, "a/b");
    const char *not_ours[] = {"server//budget", "server/budget", "server/x", "server/x/budgets", "server/x/Budget",
                              "shard/1/budget", "servers/x/budget", "member/proxy/h:1"};
    for (size_t i = 0; i < sizeof(not_ours) / sizeof(not_ours[0]); i++)
        ck_assert_msg(bw_server_budget_key_parse(not_ours[i], strlen(not_ours[i]), name) == -1, "%s parsed", not_ours[i]);
    ck_assert_int_eq(bw_server_budget_key_parse("server/a\0/budget", 16, name), -1);
    char longname[400];
    memset(longname, 'x', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    ck_assert_int_eq(bw_server_budget_key(longname, key), -1);
}
END_TEST

/* The reply and GET /v1/shards' servers[].budget: null before any budget; then the
 * budgets (out-of-bounds values written by hand read clamped) and the audit. */
START_TEST(server_budget_json) {
    bw_config_t *conf = t_ref_config();
    char *text = bw_admin_budget_json(conf, 1, NULL);
    json_t *j = json_loads(text, 0, NULL);
    ck_assert_ptr_nonnull(j);
    ck_assert_str_eq(json_string_value(json_object_get(j, "server")), "mysql-b");
    ck_assert_int_eq(json_integer_value(json_object_get(j, "first_shard")), 4);
    ck_assert(json_is_null(json_object_get(j, "budget")));
    json_decref(j);
    free(text);
    Bulkwrite__Internal__V1__ServerBudget r = BULKWRITE__INTERNAL__V1__SERVER_BUDGET__INIT;
    Bulkwrite__Internal__V1__ControlChange h = BULKWRITE__INTERNAL__V1__CONTROL_CHANGE__INIT, *hist[1] = {&h};
    h.at_ms = 1796031494264, h.action = "budget", h.by = "sre", h.from = "10.0.0.7", h.reason = "why", h.setting = "s";
    r.server = "mysql-b", r.rate = 1e-13, r.row_rate = 0.5, r.updated_at_ms = 1796031494264;
    r.changed_by = "sre", r.changed_from = "10.0.0.7", r.reason = "why", r.history = hist, r.n_history = 1;
    text = bw_admin_budget_json(conf, 1, &r);
    j = json_loads(text, 0, NULL);
    json_t *b = json_object_get(j, "budget");
    ck_assert(json_real_value(json_object_get(b, "rate")) == BW_RATE_MIN);
    ck_assert(json_real_value(json_object_get(b, "row_rate")) == BW_ROW_RATE_MIN);
    ck_assert_int_eq(json_integer_value(json_object_get(b, "changed_at_ms")), 1796031494264);
    ck_assert_str_eq(json_string_value(json_object_get(b, "changed_by")), "sre");
    ck_assert_str_eq(json_string_value(json_object_get(b, "reason")), "why");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(b, "history"), 0), "action")),
                     "budget");
    json_decref(j);
    free(text);
    bw_config_destroy(conf);
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
    tcase_add_test(tc, fold_legacy_and_fields);
    tcase_add_test(tc, concurrent_fields_both_stand);
    tcase_add_test(tc, fold_history_merge);
    tcase_add_test(tc, server_change_beside_shard_rate);
    tcase_add_test(tc, control_keys);
    tcase_add_test(tc, server_budget_changes);
    tcase_add_test(tc, server_budget_keys);
    tcase_add_test(tc, server_budget_json);
    suite_add_tcase(s, tc);
    return s;
}
