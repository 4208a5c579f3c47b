/* test_config_reload.c — the key table's reload column, walked key by key: each key of
 * the reference config is changed (bwctl config-set's engine), the file reloaded as each
 * daemon reloads it, and the running config must have taken it (applied keys) or kept
 * its value, named as needing a restart (restart) or noted as not read; a key
 * without a decision fails. Then config-set's own checks. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config_int.h"
#include "helpers.h"
#include "log.h"

void t_config_reload_tcases(Suite *s);

static char *value_text(const key_t_ *k, const void *base) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    bw_config_dump_value(f, k, base, 0, 0);
    fclose(f);
    return text;
}

/* 1 if `name` is one of the ", "-separated entries of list */
static int listed(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)); p += n)
        if ((p == list || p[-2] == ',') && (p[n] == '\0' || p[n] == ',')) return 1;
    return 0;
}

/* The assignments that change key `full` (k) from its value in c to another valid one. */
static int change_of(const key_t_ *k, const char *full, const bw_config_t *c, char out[][512]) {
    static const char *const special[][3] = {
        {"shards.count", "shards.count=9", "shards.servers[1].last_shard=8"},
        {"shards.rate_overrides", "shards.rate_overrides=( { shard = 1; rate = 5.0; } )", NULL},
        {"shards.servers", "shards.servers[1].port=13399", NULL},
        {"object_types", "object_types[0].batch_size.create=7", NULL},
        {"lanes", "lanes=( { name = \"urgent\"; weight = 2; } )", NULL},
        {"alerts.alertmanager_url", "alerts.alertmanager_url=http://127.0.0.1:9/api/v2/alerts", NULL},
        {"throttle.custom_query", "throttle.custom_query=SELECT 1", NULL},
        {"kafka.properties", "kafka.properties=[ \"client.id=walk\" ]", NULL},
        {"kafka.producer_properties", "kafka.producer_properties=[ \"linger.ms=6\" ]", NULL},
        {"kafka.consumer_properties", "kafka.consumer_properties=[ \"session.timeout.ms=11000\" ]", NULL},
        {"alerts.labels", "alerts.labels=[ \"team=walk\" ]", NULL},
    };
    for (size_t i = 0; i < sizeof(special) / sizeof(special[0]); i++)
        if (strcmp(special[i][0], full) == 0) {
            snprintf(out[0], 512, "%s", special[i][1]);
            if (!special[i][2]) return 1;
            snprintf(out[1], 512, "%s", special[i][2]);
            return 2;
        }
    const char *p = (const char *)c + k->off;
    switch (k->kind) {
    case K_INT: {
        int v = *(const int *)p;
        snprintf(out[0], 512, "%s=%d", full, v + 1 <= k->max ? v + 1 : v - 1);
        return 1;
    }
    case K_DBL: {
        double v = *(const double *)p;
        snprintf(out[0], 512, "%s=%.6f", full, v < k->max ? v + (k->max - v) / 2 : v - (v - k->min) / 2);
        return 1;
    }
    case K_BOOL: snprintf(out[0], 512, "%s=%s", full, *(const int *)p ? "false" : "true"); return 1;
    case K_ENUM: {
        int n = 0;
        while (k->enums[n]) n++;
        snprintf(out[0], 512, "%s=%s", full, k->enums[(*(const int *)p + 1) % n]);
        return 1;
    }
    case K_STR: {
        const char *v = *(char *const *)p;
        snprintf(out[0], 512, "%s=%s%s", full, *v ? v : "walk", *v ? "x" : "");
        return 1;
    }
    default: return 0; /* a list without a special case: the walk says so */
    }
}

typedef struct {
    const char *base;
    int keys, applied, restart, unused, failures;
} walk_t;

static void walk_key(walk_t *w, const key_t_ *k, const char *full) {
    bw_config_t *base = t_ref_config();
    char sets[2][512];
    int n = change_of(k, full, base, sets);
    w->keys++;
    if (!n) {
        fprintf(stderr, "reload walk: %s: no changed value to try (add one to change_of)\n", full);
        w->failures++;
        bw_config_destroy(base);
        return;
    }
    char *path = t_write_temp(t_ref_conf_text()), err[1024];
    char *argv[2] = {sets[0], sets[1]};
    if (bw_config_set_file(path, argv, n, err, sizeof(err)) != BW_OK) {
        fprintf(stderr, "reload walk: %s: config-set refused %s: %s\n", full, sets[0], err);
        w->failures++;
    }
    bw_config_t *want = bw_config_load(path, err, sizeof(err));
    if (!want) {
        fprintf(stderr, "reload walk: %s: the changed file does not load: %s\n", full, err);
        w->failures++;
    }
    for (int role = 0; want && role < BW_PROC_COUNT; role++) {
        bw_config_t *running = t_ref_config(), *next = bw_config_load(path, err, sizeof(err));
        ck_assert_ptr_nonnull(next);
        char *before = value_text(k, running), *after = value_text(k, want);
        if (strcmp(before, after) == 0) {
            fprintf(stderr, "reload walk: %s: %s did not change it\n", full, sets[0]);
            w->failures++;
        }
        bw_reload_t r;
        int rc = bw_config_reload(running, next, (bw_process_t)role, &r);
        char *now = value_text(k, running);
        const char *role_name = bw_process_name((bw_process_t)role), *bad = NULL;
        switch (k->reload[role]) {
        case R_APPLY:
            if (rc < 0 || !listed(r.applied, full)) bad = "not named as applied";
            else if (strcmp(now, after)) bad = "named as applied, but the running value did not change";
            else if (k->hook && !(r.hooks & 1u << k->hook)) bad = "applied without asking for its hook";
            else w->applied++;
            break;
        case R_RESTART:
            if (rc < 0 || !listed(r.restart, full)) bad = "needs a restart, but the reload did not name it";
            else if (strcmp(now, before)) bad = "needs a restart, but the running value changed";
            else w->restart++;
            break;
        case R_UNUSED:
            if (rc < 0 || !listed(r.unused, full)) bad = "not read here, but not named so";
            else if (strcmp(now, before)) bad = "not read here, but the running value changed";
            else w->unused++;
            break;
        default: bad = "has no reload decision in the key table (config_keys.c: RESTART, *_APPLY, ...)";
        }
        if (bad) {
            fprintf(stderr, "reload walk: %s in %s: %s (applied: %s; restart: %s; not read: %s)\n", full, role_name,
                    bad, r.applied, r.restart, r.unused);
            w->failures++;
        }
        free(before);
        free(after);
        free(now);
        bw_config_destroy(running);
        bw_config_destroy(next);
    }
    bw_config_destroy(want);
    bw_config_destroy(base);
    t_unlink_free(path);
}

static void walk_table(walk_t *w, const key_t_ *keys, const char *prefix) {
    for (const key_t_ *k = keys; k->name; k++) {
        char full[256];
        snprintf(full, sizeof(full), "%.120s%.120s", prefix, k->name);
        if (k->kind == K_GROUP) {
            char sub[256];
            snprintf(sub, sizeof(sub), "%.200s.", full);
            walk_table(w, k->sub, sub);
        } else {
            walk_key(w, k, full);
        }
    }
}

START_TEST(reload_walks_every_key) {
    walk_t w = {0};
    walk_table(&w, bw_config_top_keys, "");
    fprintf(stderr, "reload walk: %d keys x %d daemons: %d applied, %d kept until a restart, %d not read; %d wrong\n",
            w.keys, BW_PROC_COUNT, w.applied, w.restart, w.unused, w.failures);
    ck_assert_int_eq(w.failures, 0);
    ck_assert_int_eq(w.applied + w.restart + w.unused, w.keys * BW_PROC_COUNT);
    ck_assert_int_gt(w.keys, 90);
}
END_TEST

/* Several keys at once: the applied ones are applied, and the restart-only ones beside
 * them are all named and keep their running values. The proxy takes the rates too: it
 * shows what the consumers run. */
START_TEST(reload_applies_what_it_can_and_names_the_rest) {
    char *path = t_write_temp(t_ref_conf_text()), err[512];
    char *sets[] = {"consumer.workers=5", "consumer.pull_count=7", "shards.default_rate=7.0",
                    "shards.rate_overrides=( { shard = 7; rate = 40.0; } )", "log_level=debug", "proxy.port=18099"};
    ck_assert_int_eq(bw_config_set_file(path, sets, 6, err, sizeof(err)), BW_OK);
    for (int role = 0; role < BW_PROC_COUNT; role++) {
        bw_config_t *running = t_ref_config(), *next = bw_config_load(path, err, sizeof(err));
        ck_assert_ptr_nonnull(next);
        bw_reload_t r;
        ck_assert_int_eq(bw_config_reload(running, next, (bw_process_t)role, &r), 3);
        ck_assert_str_eq(r.applied, "log_level, shards.default_rate, shards.rate_overrides");
        ck_assert(running->default_rate == 7.0 && running->shard_rate[0] == 7.0 && running->shard_rate[7] == 40.0);
        ck_assert_int_eq(running->log_level, BW_LOG_DEBUG);
        if (role == BW_PROC_CONSUMER) {
            ck_assert_str_eq(r.restart, "consumer.pull_count, consumer.workers");
            ck_assert_str_eq(r.unused, "proxy.port");
            ck_assert_int_eq(running->workers, 4);
        } else {
            ck_assert_str_eq(r.restart, "proxy.port");
            ck_assert_str_eq(r.unused, "consumer.pull_count, consumer.workers");
            ck_assert_int_eq(running->proxy_port, 18080);
        }
        bw_config_destroy(next);
        bw_config_destroy(running);
    }
    t_unlink_free(path);
}
END_TEST

/* A rate override for a shard the new shards.count adds waits for the restart that
 * raises the count: the running arrays keep their size. */
START_TEST(reload_override_beyond_running_count_waits) {
    char *path = t_write_temp(t_ref_conf_text()), err[512];
    char *sets[] = {"shards.count=9", "shards.servers[1].last_shard=8",
                    "shards.rate_overrides=( { shard = 8; rate = 3.0; }, { shard = 2; rate = 4.0; } )"};
    ck_assert_int_eq(bw_config_set_file(path, sets, 3, err, sizeof(err)), BW_OK);
    bw_config_t *running = t_ref_config(), *next = bw_config_load(path, err, sizeof(err));
    ck_assert_ptr_nonnull(next);
    bw_reload_t r;
    ck_assert_int_eq(bw_config_reload(running, next, BW_PROC_CONSUMER, &r), 1);
    ck_assert_str_eq(r.restart, "shards.count, shards.servers");
    ck_assert_int_eq(running->shard_count, 8);
    ck_assert(running->shard_rate[2] == 4.0 && running->shard_rate[7] == running->default_rate);
    bw_config_destroy(next);
    bw_config_destroy(running);
    t_unlink_free(path);
}
END_TEST

/* An applied rate re-derives every shard's rate (the override's shard keeps its own). */
START_TEST(reload_applies_rates_and_names_them) {
    char *path = t_write_temp(t_ref_conf_text()), err[512];
    char *sets[] = {"shards.default_rate=7.0", "throttle.floor=2.0", "log_level=warn"};
    ck_assert_int_eq(bw_config_set_file(path, sets, 3, err, sizeof(err)), BW_OK);
    bw_config_t *running = t_ref_config(), *next = bw_config_load(path, err, sizeof(err));
    bw_reload_t r;
    ck_assert_int_eq(bw_config_reload(running, next, BW_PROC_CONSUMER, &r), 3);
    ck_assert_str_eq(r.applied, "log_level, shards.default_rate, throttle.floor");
    ck_assert_uint_eq(r.hooks, 1u << BW_HOOK_LOGGING | 1u << BW_HOOK_SHARD_RATES | 1u << BW_HOOK_THROTTLE);
    ck_assert(running->shard_rate[0] == 7.0 && running->shard_rate[7] == 50.0);
    ck_assert(running->throttle_floor == 2.0);
    bw_config_destroy(next);
    /* the same file again: nothing changed */
    next = bw_config_load(path, err, sizeof(err));
    ck_assert_int_eq(bw_config_reload(running, next, BW_PROC_CONSUMER, &r), 0);
    ck_assert_str_eq(r.applied, "");
    bw_config_destroy(next);
    bw_config_destroy(running);
    t_unlink_free(path);
    /* what each daemon must run after a reload */
    ck_assert_uint_eq(bw_config_reload_hooks(BW_PROC_PROXY), 1u << BW_HOOK_LOGGING | 1u << BW_HOOK_SHARD_RATES);
    ck_assert_uint_eq(bw_config_reload_hooks(BW_PROC_CONSUMER), 1u << BW_HOOK_LOGGING | 1u << BW_HOOK_SHARD_RATES |
                                                                   1u << BW_HOOK_THROTTLE | 1u << BW_HOOK_HEALTH);
}
END_TEST

static char *file_text(const char *path) {
    FILE *f = fopen(path, "r");
    char *text = NULL;
    size_t cap = 0;
    ck_assert_int_gt(getdelim(&text, &cap, '\0', f), 0);
    fclose(f);
    return text;
}

static void set_refused(const char *assignment, const char *why) {
    char *path = t_write_temp(t_ref_conf_text()), err[512];
    char *sets[] = {"proxy.port=1234", (char *)assignment};
    ck_assert_int_ne(bw_config_set_file(path, sets, 2, err, sizeof(err)), BW_OK);
    if (!strstr(err, why)) ck_abort_msg("config-set %s: \"%s\" does not say \"%s\"", assignment, err, why);
    char *text = file_text(path); /* nothing written, not even the good one before it */
    ck_assert_str_eq(text, t_ref_conf_text());
    free(text);
    t_unlink_free(path);
}

START_TEST(config_set_refuses_bad_keys_and_values) {
    set_refused("proxy.nope=1", "unknown key \"proxy.nope\"");
    set_refused("throttle=1", "unknown key \"throttle\""); /* a group is set member by member */
    set_refused("proxy.port", "is not KEY=VALUE");
    set_refused("proxy.port=70000", "proxy.port: out of range: 70000 (allowed 0..65535)");
    set_refused("proxy.port=\"80\"", "proxy.port: expected an integer");
    set_refused("throttle.mode=sometimes", "throttle.mode: unknown value \"sometimes\"");
    set_refused("kafka.create_topic=1", "kafka.create_topic: expected true or false");
    set_refused("lanes=( { weight = 2; } )", "lanes: missing required key \"lanes[0].name\"");
    set_refused("shards.servers[5].port=1", "shards.servers[5].port: the file's list has no element 5");
    set_refused("consumer.workers=(", "consumer.workers: \"(\" is not a libconfig value");
}
END_TEST

START_TEST(config_set_edits_nested_keys_and_lists) {
    char *path = t_write_temp(t_ref_conf_text()), err[512];
    char *sets[] = {"proxy.auth.clients_file=clients.conf", "throttle.mode=on", "consumer.workers=9",
                    "lanes=( { name = \"urgent\"; weight = 4; } )", "shards.servers[1].port=13399",
                    "kafka.properties=[ \"client.id=x\" ]", "proxy.auth.job_id_secret=say \"hi\"",
                    "shards.default_rate=0.5"};
    ck_assert_int_eq(bw_config_set_file(path, sets, 8, err, sizeof(err)), BW_OK);
    bw_config_t *c = bw_config_load(path, err, sizeof(err));
    if (!c) ck_abort_msg("%s", err);
    ck_assert_str_eq(c->proxy_auth_clients_file, "clients.conf");
    ck_assert_int_eq(c->throttle_mode, 2);
    ck_assert_int_eq(c->workers, 9);
    ck_assert_int_eq(c->lane_cnt, 2);
    ck_assert_str_eq(c->lanes[1].name, "urgent");
    ck_assert_int_eq(c->lanes[1].weight, 4);
    ck_assert_int_eq(c->servers[1].port, 13399);
    ck_assert_int_eq(c->servers[0].port, 13306);
    ck_assert_str_eq(c->properties[0], "client.id=x");
    ck_assert_str_eq(c->proxy_auth_job_id_secret, "say \"hi\"");
    ck_assert(c->default_rate == 0.5);
    /* everything else as it was */
    bw_config_t *ref = t_ref_config();
    ck_assert_int_eq(c->shard_count, ref->shard_count);
    ck_assert_str_eq(c->servers[1].password, ref->servers[1].password);
    ck_assert_int_eq(c->object_types[0].batch_size[BW_OP_CREATE], ref->object_types[0].batch_size[BW_OP_CREATE]);
    bw_config_destroy(ref);
    bw_config_destroy(c);
    t_unlink_free(path);
    char *missing[] = {"proxy.port=1"};
    ck_assert_int_eq(bw_config_set_file("/nonexistent/x.conf", missing, 1, err, sizeof(err)), BW_ERR_IO);
}
END_TEST

void t_config_reload_tcases(Suite *s) {
    TCase *tc = tcase_create("reload");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, reload_walks_every_key);
    tcase_add_test(tc, reload_applies_what_it_can_and_names_the_rest);
    tcase_add_test(tc, reload_override_beyond_running_count_waits);
    tcase_add_test(tc, reload_applies_rates_and_names_them);
    suite_add_tcase(s, tc);
    tc = tcase_create("config-set");
    tcase_add_test(tc, config_set_refuses_bad_keys_and_values);
    tcase_add_test(tc, config_set_edits_nested_keys_and_lists);
    suite_add_tcase(s, tc);
}
