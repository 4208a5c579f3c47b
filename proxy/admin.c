#include "admin.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bw.h"
#include "history.h"
#include "endpoints.h"
#include "ratelimit.h"
#include "scrub.h"

static json_t *setting_obj(const bw_config_t *conf, int shard, const bw_shard_setting_t *set, int admin) {
    char db[80];
    bw_config_shard_db(conf, shard, db, sizeof(db));
    json_t *o = json_pack("{s:i, s:s, s:f, s:b}", "shard", shard, "database", db, "configured_rate",
                          conf->shard_rate[shard], "paused", set->paused);
    if (admin) json_object_set_new(o, "server", json_string(conf->servers[conf->shard_server[shard]].name));
    json_object_set_new(o, "operator_rate", set->has_rate ? json_real(set->rate) : json_null());
    json_object_set_new(o, "effective_rate", json_real(bw_shard_effective_rate(conf, shard, set)));
    json_object_set_new(o, "configured_row_rate", json_real(conf->shard_row_rate[shard]));
    json_object_set_new(o, "operator_row_rate", set->has_row_rate ? json_real(set->row_rate) : json_null());
    json_object_set_new(o, "effective_row_rate", json_real(bw_shard_effective_row_rate(conf, shard, set)));
    json_object_set_new(o, "pinned", json_boolean(set->pinned));
    if (set->updated_at_ms) {
        json_object_set_new(o, "changed_at_ms", json_integer(set->updated_at_ms));
        json_object_set_new(o, "reason", json_string(set->reason));
        json_object_set_new(o, "changed_by", json_string(set->changed_by));
        json_object_set_new(o, "changed_from", json_string(set->changed_from));
    }
    return o;
}

/* A record's changes, newest first: [{at_ms, action, by, from, reason, setting}]. */
static json_t *changes_arr(Bulkwrite__Internal__V1__ControlChange *const *changes, size_t n) {
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) {
        const Bulkwrite__Internal__V1__ControlChange *h = changes[i];
        json_array_append_new(a, json_pack("{s:I, s:s, s:s, s:s, s:s, s:s}", "at_ms", (json_int_t)h->at_ms, "action",
                                           h->action, "by", h->by, "from", h->from, "reason", h->reason, "setting",
                                           h->setting));
    }
    return a;
}

static json_t *history_arr(const Bulkwrite__Internal__V1__ShardControl *c) { return changes_arr(c->history, c->n_history); }

/* A server's budget record as JSON: the budgets in force (0 = none) and the audit; null
 * when no operator ever set one. */
static json_t *budget_obj(const Bulkwrite__Internal__V1__ServerBudget *r) {
    if (!r) return json_null();
    bw_server_budget_t b;
    bw_server_budget_from_record(r, &b);
    json_t *o = json_pack("{s:f, s:f, s:I, s:s, s:s, s:s}", "rate", b.rate, "row_rate", b.row_rate, "changed_at_ms",
                          (json_int_t)b.updated_at_ms, "changed_by", b.changed_by, "changed_from", b.changed_from,
                          "reason", b.reason);
    json_object_set_new(o, "history", changes_arr(r->history, r->n_history));
    return o;
}

/* [{"name", "first_shard", "last_shard", "budget"}] of every configured server (GET
 * /v1/shards, either view, admins). */
static json_t *servers_arr(const bw_config_t *conf, bw_shard_table_t *table) {
    json_t *a = json_array();
    for (int v = 0; v < conf->server_cnt; v++) {
        const bw_server_t *sv = &conf->servers[v];
        Bulkwrite__Internal__V1__ServerBudget *r = bw_shard_table_server_budget_record(table, v);
        json_array_append_new(a, json_pack("{s:s, s:i, s:i, s:o}", "name", sv->name, "first_shard", sv->first_shard,
                                           "last_shard", sv->last_shard, "budget", budget_obj(r)));
        if (r) bulkwrite__internal__v1__server_budget__free_unpacked(r, NULL);
    }
    return a;
}

char *bw_admin_budget_json(const bw_config_t *conf, int server, const Bulkwrite__Internal__V1__ServerBudget *r) {
    const bw_server_t *sv = &conf->servers[server];
    json_t *o = json_pack("{s:s, s:i, s:i, s:o}", "server", sv->name, "first_shard", sv->first_shard, "last_shard",
                          sv->last_shard, "budget", budget_obj(r));
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return text;
}

char *bw_admin_setting_json(const bw_config_t *conf, int shard, const bw_shard_setting_t *set) {
    json_t *o = setting_obj(conf, shard, set, 1); /* shard control: admins only */
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}

/* What Kafka holds for the shard and whether the proxy admits more (backlog.h), and
 * offsets the consumer found deleted before they were applied. */
static json_t *backlog_obj(bw_backlog_t *backlog, int shard, const Bulkwrite__Internal__V1__ShardStatus *st) {
    bw_backlog_view_t v;
    bw_backlog_view(backlog, shard, &v);
    json_t *o = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "messages", (json_int_t)v.messages, "bytes",
                          (json_int_t)v.bytes, "max_messages", (json_int_t)v.max_messages, "max_bytes",
                          (json_int_t)v.max_bytes, "applied_offset", (json_int_t)v.applied, "high_watermark",
                          (json_int_t)v.high, "log_start_offset", (json_int_t)v.low);
    json_object_set_new(o, "full", json_boolean(v.messages >= v.max_messages || v.bytes >= v.max_bytes));
    if (st && st->lost_to > st->lost_from)
        json_object_set_new(o, "lost", json_pack("{s:I, s:I}", "from_offset", (json_int_t)st->lost_from,
                                                 "to_offset", (json_int_t)st->lost_to));
    return o;
}

static double finite_or_0(double x) { return isfinite(x) ? x : 0; }

/* The throttle's word on the shard, from its consumer's status record; NULL when the
 * throttle is off there. "throttled": the shard runs below its cap now (never in dry
 * run, where nothing is applied). For a caller without the admin role an unknown
 * signal's error (hosts, users, the server's words) is cut off, as scrub.h does. */
static json_t *throttle_obj(const Bulkwrite__Internal__V1__ShardStatus *st, int admin) {
    if (!st || !st->throttle_state || !*st->throttle_state) return NULL;
    char reason[300];
    if (admin) snprintf(reason, sizeof(reason), "%s", st->throttle_reason ? st->throttle_reason : "");
    else bw_scrub_throttle_reason(st->throttle_state, st->throttle_reason, reason, sizeof(reason));
    json_t *o = json_pack("{s:s, s:b, s:f, s:f, s:I, s:s, s:b}", "state", st->throttle_state, "throttled",
                          strcmp(st->throttle_state, "running") != 0 && !st->throttle_dry_run, "rate",
                          finite_or_0(st->throttle_rate), "cap", finite_or_0(st->cap_rate), "since_ms",
                          (json_int_t)st->throttle_since_ms, "reason", reason, "dry_run", st->throttle_dry_run);
    if (o && st->throttle_signal && *st->throttle_signal)
        json_object_set_new(o, "signal", json_pack("{s:s, s:f, s:f}", "name", st->throttle_signal, "value",
                                                   finite_or_0(st->throttle_value), "level",
                                                   finite_or_0(st->throttle_level)));
    return o;
}

char *bw_admin_check_json(const bw_config_t *conf, bw_shard_table_t *table, int shard, int admin, int *held) {
    (void)conf;
    Bulkwrite__Internal__V1__ShardStatus *st = bw_shard_table_status(table, shard);
    bw_shard_setting_t set;
    bw_shard_table_setting(table, shard, &set);
    json_t *t = throttle_obj(st, admin);
    int paused = set.paused || (st && st->paused), throttled = t && json_is_true(json_object_get(t, "throttled"));
    json_t *o = json_pack("{s:i, s:b, s:b, s:b}", "shard", shard, "paused", paused, "paused_by_operator", set.paused,
                          "throttled", throttled);
    json_object_set_new(o, "throttle", t ? t : json_null());
    *held = paused || throttled;
    if (!st) json_object_set_new(o, "note", json_string("no consumer has reported this shard yet"));
    else if (!t) json_object_set_new(o, "note", json_string("the adaptive throttle is off (throttle.mode)"));
    if (st) bulkwrite__internal__v1__shard_status__free_unpacked(st, NULL);
    char *out = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return out;
}

/* A shard's consumer as GET /v1/shards shows it (st: its latest status record). */
static json_t *consumer_obj(const bw_config_t *conf, int s, const Bulkwrite__Internal__V1__ShardStatus *st,
                            bw_backlog_t *backlog, bw_history_t *history, int admin, bw_clock_t *k) {
    json_t *errs = json_array();
    for (size_t i = 0; i < st->n_recent_errors; i++) {
        const Bulkwrite__Internal__V1__ShardError *e = st->recent_errors[i];
        char scrubbed[160];
        json_array_append_new(errs, json_pack("{s:I, s:s, s:s}", "at_ms", (json_int_t)e->at_ms, "kind", e->kind,
                                              "message", admin ? e->message
                                                               : bw_scrub_shard_error(e->kind, e->message, scrubbed,
                                                                                      sizeof(scrubbed))));
    }
    json_t *c = json_pack("{s:s, s:I, s:f, s:b, s:b, s:I, s:I, s:o}", "instance", st->consumer, "lag",
                          (json_int_t)st->lag, "rate", st->rate, "paused", st->paused, "unhealthy", st->unhealthy,
                          "rows_applied", (json_int_t)st->rows_applied, "rows_failed", (json_int_t)st->rows_failed,
                          "recent_errors", errs);
    bw_clock_age(k, c, "age_ms", st->updated_at_ms);
    json_object_set_new(c, "row_rate", json_real(st->row_rate));
    double rows_per_s = history ? bw_history_rows_per_s(history, s) : NAN;
    json_object_set_new(c, "rows_per_s", isfinite(rows_per_s) ? json_real(rows_per_s) : json_null());
    /* the lag as time: when the next message to apply was written (0: none waits) */
    json_object_set_new(c, "oldest_unapplied_ms", json_integer(st->oldest_unapplied_ms));
    json_object_set_new(c, "statement_p50_ms", json_real(finite_or_0(st->statement_p50_ms)));
    json_object_set_new(c, "statement_p99_ms", json_real(finite_or_0(st->statement_p99_ms)));
    json_object_set_new(c, "dead_letters", json_integer((json_int_t)st->dead_letters));
    json_object_set_new(c, "statements", json_integer((json_int_t)st->statements));
    json_t *dead = json_array(); /* the jobs to look at: their failures have every op */
    for (size_t i = 0; i < st->n_recent_dead_letters; i++) {
        const Bulkwrite__Internal__V1__DeadLetterNote *d = st->recent_dead_letters[i];
        json_t *n = json_pack("{s:I, s:s, s:i, s:i}", "at_ms", (json_int_t)d->at_ms, "job_id",
                              d->job_id ? d->job_id : "", "ops", (int)d->ops, "error_code", (int)d->error_code);
        if (admin) json_object_set_new(n, "reason", json_string(d->reason ? d->reason : "")); /* holds values */
        json_array_append_new(dead, n);
    }
    json_object_set_new(c, "recent_dead_letters", dead);
    json_t *reasons = json_array(); /* why it is not running now (consumer/gate.h); [] while it runs */
    for (size_t i = 0; i < st->n_reasons; i++) json_array_append_new(reasons, json_string(st->reasons[i]));
    json_object_set_new(c, "reasons", reasons);
    json_t *t = throttle_obj(st, admin);
    if (t) json_object_set_new(c, "throttle", t);
    if (st->n_lanes) { /* priority lanes: each one's lag, share and backlog */
        json_t *lanes = json_array();
        for (size_t i = 0; i < st->n_lanes; i++) {
            const Bulkwrite__Internal__V1__LaneStatus *l = st->lanes[i];
            json_t *lo = json_pack("{s:s, s:i, s:I, s:I, s:I, s:I}", "lane", l->lane ? l->lane : "", "weight",
                                   (int)l->weight, "lag", (json_int_t)l->lag, "statements", (json_int_t)l->statements,
                                   "applied_offset", (json_int_t)l->applied_offset, "high_watermark",
                                   (json_int_t)l->high_watermark);
            if (l->lost_to > l->lost_from)
                json_object_set_new(lo, "lost", json_pack("{s:I, s:I}", "from_offset", (json_int_t)l->lost_from,
                                                          "to_offset", (json_int_t)l->lost_to));
            int lane = bw_config_lane(conf, l->lane);
            if (backlog && lane > 0)
                json_object_set_new(lo, "backlog", backlog_obj(backlog, bw_config_slot(conf, lane, s), NULL));
            json_array_append_new(lanes, lo);
        }
        json_object_set_new(c, "lanes", lanes);
    }
    if (!admin) json_object_del(c, "instance"); /* a host name */
    return c;
}

/* The summary view's consumer: what the grid, the table and the alerts need. */
static json_t *consumer_summary(int s, const Bulkwrite__Internal__V1__ShardStatus *st, bw_history_t *history,
                                int admin, bw_clock_t *k) {
    json_t *c = json_pack("{s:I, s:f, s:f, s:b, s:b}", "lag", (json_int_t)st->lag, "rate", st->rate, "row_rate",
                          st->row_rate, "paused", st->paused, "unhealthy", st->unhealthy);
    bw_clock_age(k, c, "age_ms", st->updated_at_ms);
    /* an age, unlike the full form's timestamp: it moves with the clock */
    if (st->lag > 0 && st->oldest_unapplied_ms > 0) bw_clock_age(k, c, "oldest_unapplied_age_ms", st->oldest_unapplied_ms);
    else json_object_set_new(c, "oldest_unapplied_age_ms", json_null());
    double rows_per_s = history ? bw_history_rows_per_s(history, s) : NAN;
    json_object_set_new(c, "rows_per_s", isfinite(rows_per_s) ? json_real(rows_per_s) : json_null());
    json_t *reasons = json_array();
    for (size_t i = 0; i < st->n_reasons; i++) json_array_append_new(reasons, json_string(st->reasons[i]));
    json_object_set_new(c, "reasons", reasons);
    json_t *t = throttle_obj(st, admin);
    json_object_set_new(c, "throttled", json_boolean(t && json_is_true(json_object_get(t, "throttled"))));
    json_decref(t);
    json_object_set_new(c, "errors", json_integer((json_int_t)st->n_recent_errors));
    if (st->n_recent_errors) {
        const Bulkwrite__Internal__V1__ShardError *e = st->recent_errors[0];
        char scrubbed[160];
        json_object_set_new(c, "last_error",
                            json_pack("{s:I, s:s, s:s}", "at_ms", (json_int_t)e->at_ms, "kind", e->kind, "message",
                                      admin ? e->message
                                            : bw_scrub_shard_error(e->kind, e->message, scrubbed, sizeof(scrubbed))));
    }
    json_object_set_new(c, "dead_letters", json_integer((json_int_t)st->dead_letters));
    return c;
}

json_t *bw_admin_shards_tree(const bw_config_t *conf, bw_shard_table_t *table, bw_backlog_t *backlog,
                             bw_history_t *history, const bw_admin_shards_view_t *view, int admin, bw_clock_t *k) {
    json_t *arr = json_array();
    int first = view->shard >= 0 ? view->shard : 0, last = view->shard >= 0 ? view->shard : conf->shard_count - 1;
    for (int s = first; s <= last; s++) {
        bw_shard_setting_t set;
        Bulkwrite__Internal__V1__ShardControl *rec = bw_shard_table_control(table, s);
        if (rec) bw_shard_setting_from_record(rec, &set);
        else memset(&set, 0, sizeof(set));
        json_t *o;
        if (view->summary) {
            char db[80];
            bw_config_shard_db(conf, s, db, sizeof(db));
            o = json_pack("{s:i, s:s}", "shard", s, "database", db);
            if (admin) json_object_set_new(o, "server", json_string(conf->servers[conf->shard_server[s]].name));
            json_object_set_new(o, "paused", json_boolean(set.paused));
            json_object_set_new(o, "effective_rate", json_real(bw_shard_effective_rate(conf, s, &set)));
            json_object_set_new(o, "effective_row_rate", json_real(bw_shard_effective_row_rate(conf, s, &set)));
        } else {
            o = setting_obj(conf, s, &set, admin);
            if (rec) json_object_set_new(o, "history", history_arr(rec)); /* only shards an operator changed */
        }
        if (rec) bulkwrite__internal__v1__shard_control__free_unpacked(rec, NULL);
        Bulkwrite__Internal__V1__ShardStatus *st = bw_shard_table_status(table, s);
        if (backlog && !view->summary) json_object_set_new(o, "backlog", backlog_obj(backlog, s, st));
        if (backlog && view->summary) {
            bw_backlog_view_t v;
            bw_backlog_view(backlog, s, &v);
            json_object_set_new(o, "backlog_full", json_boolean(v.messages >= v.max_messages || v.bytes >= v.max_bytes));
        }
        json_t *c = !st ? json_null() /* no consumer has reported it yet */
                  : view->summary ? consumer_summary(s, st, history, admin, k)
                                  : consumer_obj(conf, s, st, backlog, history, admin, k);
        json_object_set_new(o, "consumer", c);
        if (st) bulkwrite__internal__v1__shard_status__free_unpacked(st, NULL);
        json_array_append_new(arr, o);
    }
    json_t *root = json_object();
    if (view->summary) json_object_set_new(root, "view", json_string("summary"));
    bw_clock_now(k, root, "now_ms");
    json_object_set_new(root, "rate_window_s", json_integer(BW_RATE_WINDOW_MS / 1000));
    if (admin) json_object_set_new(root, "servers", servers_arr(conf, table)); /* server names: admins only */
    json_object_set_new(root, "shards", arr);
    return root;
}

/* One point of a shard's history as JSON. */
static json_t *point_obj(const bw_history_point_t *p) {
    json_t *o = json_pack("{s:I, s:I}", "at_ms", (json_int_t)p->at_ms, "lag", (json_int_t)p->lag);
    json_object_set_new(o, "oldest_unapplied_ms", p->oldest_unapplied_ms >= 0 ? json_integer(p->oldest_unapplied_ms)
                                                                              : json_null());
    json_object_set_new(o, "rows_per_s", isfinite(p->rows_per_s) ? json_real(p->rows_per_s) : json_null());
    json_object_set_new(o, "rate", json_real(p->rate));
    json_object_set_new(o, "row_rate", json_real(p->row_rate));
    json_object_set_new(o, "paused", json_boolean(p->paused));
    return o;
}

static int event_cmp(const void *a, const void *b) {
    json_int_t x = json_integer_value(json_object_get(*(json_t *const *)a, "at_ms"));
    json_int_t y = json_integer_value(json_object_get(*(json_t *const *)b, "at_ms"));
    return x < y ? -1 : x > y;
}

json_t *bw_admin_history_tree(bw_shard_table_t *table, bw_history_t *history, int shard, int64_t now_ms) {
    int64_t since = now_ms - (int64_t)BW_HISTORY_STEP_MS * BW_HISTORY_POINTS;
    bw_history_point_t *pts = malloc(BW_HISTORY_POINTS * sizeof(*pts));
    if (!pts) abort();
    size_t n = bw_history_points(history, shard, pts, BW_HISTORY_POINTS);
    json_t *points = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(points, point_obj(&pts[i]));
    free(pts);
    /* operator changes from the control records (they survive restarts), alerts from the history */
    json_t *ev[BW_CONTROL_HISTORY + BW_HISTORY_ALERT_EVENTS];
    size_t m = 0;
    Bulkwrite__Internal__V1__ShardControl *rec = bw_shard_table_control(table, shard);
    for (size_t i = 0; rec && i < rec->n_history && m < BW_CONTROL_HISTORY; i++) {
        const Bulkwrite__Internal__V1__ControlChange *h = rec->history[i];
        if (h->at_ms < since) continue;
        const char *kind = !strcmp(h->action, "pause") ? "pause" : !strcmp(h->action, "resume") ? "resume" : "rate";
        ev[m++] = json_pack("{s:I, s:s, s:s, s:s, s:s}", "at_ms", (json_int_t)h->at_ms, "kind", kind, "by", h->by,
                            "detail", h->reason, "setting", h->setting);
    }
    if (rec) bulkwrite__internal__v1__shard_control__free_unpacked(rec, NULL);
    bw_history_alert_t al[BW_HISTORY_ALERT_EVENTS];
    size_t na = bw_history_alerts(history, shard, since, al, BW_HISTORY_ALERT_EVENTS);
    for (size_t i = 0; i < na; i++)
        ev[m++] = json_pack("{s:I, s:s, s:s, s:s}", "at_ms", (json_int_t)al[i].at_ms, "kind",
                            al[i].resolved ? "alert_resolved" : "alert", "by", "consumer", "detail", al[i].name);
    qsort(ev, m, sizeof(ev[0]), event_cmp);
    json_t *events = json_array();
    for (size_t i = 0; i < m; i++) json_array_append_new(events, ev[i]);
    return json_pack("{s:i, s:i, s:i, s:o, s:o}", "shard", shard, "step_s", BW_HISTORY_STEP_MS / 1000, "window_s",
                     BW_HISTORY_STEP_MS * BW_HISTORY_POINTS / 1000, "points", points, "events", events);
}

int bw_admin_is_control(const char *method, const char *url) {
    const bw_endpoint_t *e = bw_endpoint_find(method, url);
    return e && (e->id == BW_EP_SHARD_CONTROL || e->id == BW_EP_SERVER_CONTROL);
}

int bw_admin_served(const char *method, const char *url, bw_listener_t on, char *why, size_t why_size) {
    if (on == BW_LISTENER_ONLY) return 1;
    const bw_endpoint_t *e = bw_endpoint_find(method, url);
    if (on == BW_LISTENER_DATA) { /* unknown ones too: they answer 404 or 405 there */
        if (!e || (e->listeners & BW_ON_DATA)) return 1;
        snprintf(why, why_size, "%.8s %.200s: %s", method, url, e->admin_why);
        return 0;
    }
    if (e && (e->listeners & BW_ON_ADMIN)) return 1;
    snprintf(why, why_size, "%.8s %.200s is not served on the admin listener: it serves shard and server control, "
                            "the page (/ui/) and what it reads, GET /v1/shards, /healthz and /metrics (the rest is "
                            "on proxy.port)", method, url);
    return 0;
}

int bw_admin_parse_url(const bw_config_t *conf, const char *url, bw_admin_target_t *t, char *err, size_t esz) {
    const char *slash;
    memset(t, 0, sizeof(*t));
    if (strncmp(url, "/v1/servers/", 12) == 0) {
        const char *name = url + 12;
        if (!(slash = strchr(name, '/')) || slash == name)
            return snprintf(err, esz, "expected /v1/servers/{server}/rate|pause|resume|budget"), -1;
        for (int i = 0; i < conf->server_cnt && !t->server; i++) {
            const bw_server_t *sv = &conf->servers[i];
            if (strlen(sv->name) == (size_t)(slash - name) && strncmp(sv->name, name, (size_t)(slash - name)) == 0) {
                t->server = sv->name;
                t->first_shard = sv->first_shard;
                t->last_shard = sv->last_shard;
            }
        }
        if (!t->server) {
            size_t n = 0;
            char names[256] = "";
            for (int i = 0; i < conf->server_cnt && n < sizeof(names); i++)
                n += (size_t)snprintf(names + n, sizeof(names) - n, "%s%s", i ? ", " : "", conf->servers[i].name);
            return snprintf(err, esz, "no server \"%.*s\" in shards.servers (%s)",
                            (int)(slash - name > 64 ? 64 : slash - name), name, names), -1;
        }
    } else {
        const char *p = url + strlen("/v1/shards/");
        char *end;
        long s = strtol(p, &end, 10);
        if (end == p || *end != '/') return snprintf(err, esz, "expected /v1/shards/{shard}/rate|pause|resume"), -1;
        if (s < 0 || s >= conf->shard_count)
            return snprintf(err, esz, "shard %ld is out of range: shards.count is %d", s, conf->shard_count), -1;
        t->first_shard = t->last_shard = (int)s;
        slash = end;
    }
    t->action = slash + 1;
    if (t->server && strcmp(t->action, "budget") == 0) return 0; /* the whole server's, not each shard's */
    if (strcmp(t->action, "rate") && strcmp(t->action, "pause") && strcmp(t->action, "resume"))
        return snprintf(err, esz, "unknown action \"%.40s\": use rate, pause or resume%s", t->action,
                        t->server ? " (or budget: the whole server's)" : ""), -1;
    return 0;
}

char *bw_admin_server_json(const bw_config_t *conf, const bw_admin_target_t *t, const bw_shard_setting_t *sets) {
    json_t *arr = json_array();
    for (int s = t->first_shard; s <= t->last_shard; s++)
        json_array_append_new(arr, setting_obj(conf, s, &sets[s - t->first_shard], 1));
    json_t *o = json_pack("{s:s, s:i, s:i, s:o}", "server", t->server, "first_shard", t->first_shard, "last_shard",
                          t->last_shard, "shards", arr);
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return text;
}

void bw_admin_setting_text(const bw_shard_setting_t *set, char *out, size_t size) {
    char rate[48], rows[48];
    if (!set->has_rate) snprintf(rate, sizeof(rate), "configured stmt/s");
    else if (set->rate == 0) snprintf(rate, sizeof(rate), "unlimited stmt/s");
    else snprintf(rate, sizeof(rate), "%g stmt/s", set->rate);
    if (!set->has_row_rate) snprintf(rows, sizeof(rows), "configured rows/s");
    else if (set->row_rate == 0) snprintf(rows, sizeof(rows), "no row budget");
    else snprintf(rows, sizeof(rows), "%g rows/s", set->row_rate);
    snprintf(out, size, "%s; %s%s; %s", set->paused ? "paused" : "running", rate, set->pinned ? " pinned" : "", rows);
}

int bw_admin_control_update(int shard, const char *action, const char *body, size_t len,
                            Bulkwrite__Internal__V1__ShardControl *const *prev, const bw_admin_caller_t *caller,
                            bw_shard_setting_t *set, bw_admin_records_t *out, char *err, size_t esz) {
    memset(out, 0, sizeof(*out));
    json_t *j = NULL;
    if (len) {
        json_error_t je;
        if (!(j = json_loadb(body, len, 0, &je)) || !json_is_object(j)) {
            snprintf(err, esz, "the body must be a JSON object%s%s", j ? "" : ": ", j ? "" : je.text);
            json_decref(j);
            return -1;
        }
    }
    const char *key;
    json_t *v;
    int rc = 0;
    json_object_foreach(j, key, v) {
        if (strcmp(key, "reason") == 0) {
            if (!json_is_string(v) || strlen(json_string_value(v)) >= sizeof(set->reason)) {
                rc = snprintf(err, esz, "reason must be a string of at most %zu bytes", sizeof(set->reason) - 1);
                break;
            }
        } else if (strcmp(key, "rate") == 0 && strcmp(action, "rate") == 0) {
            if (!json_is_null(v) && !json_is_number(v)) {
                rc = snprintf(err, esz, "rate must be a number of statements per second, or null for the configured rate");
                break;
            }
            if (!json_is_null(v) && bw_ratelimit_check(json_number_value(v), err, esz)) {
                rc = 1;
                break;
            }
        } else if (strcmp(key, "row_rate") == 0 && strcmp(action, "rate") == 0) {
            if (!json_is_null(v) && !json_is_number(v)) {
                rc = snprintf(err, esz, "row_rate must be a number of rows per second, or null for the configured row rate");
                break;
            }
            if (!json_is_null(v) && bw_ratelimit_check_rows(json_number_value(v), err, esz)) {
                rc = 1;
                break;
            }
        } else if (strcmp(key, "pinned") == 0 && strcmp(action, "rate") == 0) {
            if (!json_is_boolean(v)) {
                rc = snprintf(err, esz, "pinned must be true (the adaptive throttle leaves the shard at its rate) or false");
                break;
            }
        } else {
            rc = snprintf(err, esz, "unknown member \"%s\" for %s", key, action);
            break;
        }
    }
    if (!rc && strcmp(action, "rate") == 0 && !json_object_get(j, "rate") && !json_object_get(j, "row_rate") &&
        !json_object_get(j, "pinned"))
        rc = snprintf(err, esz,
                      "rate needs {\"rate\": number or null}, {\"row_rate\": number or null}, {\"pinned\": boolean}, "
                      "or several");
    if (rc) {
        json_decref(j);
        return -1;
    }
    int writes[BW_CONTROL_KEYS] = {0}; /* the keys this change writes */
    if (strcmp(action, "rate") == 0) {
        /* each member given replaces that budget; one left out stays as it was, unwritten */
        json_t *r = json_object_get(j, "rate"), *rr = json_object_get(j, "row_rate"), *pin = json_object_get(j, "pinned");
        if (r) {
            set->has_rate = !json_is_null(r);
            set->rate = set->has_rate ? json_number_value(r) : 0;
            writes[BW_CONTROL_RATE] = 1;
        }
        if (rr) {
            set->has_row_rate = !json_is_null(rr);
            set->row_rate = set->has_row_rate ? json_number_value(rr) : 0;
            writes[BW_CONTROL_ROW_RATE] = 1;
        }
        if (pin) {
            set->pinned = json_is_true(pin);
            writes[BW_CONTROL_PINNED] = 1;
        }
    } else {
        set->paused = strcmp(action, "pause") == 0;
        writes[BW_CONTROL_PAUSE] = 1;
    }
    json_t *reason = json_object_get(j, "reason");
    const char *why = reason ? json_string_value(reason) : "";
    if (caller->server) /* a server-wide change says so in every shard's record */
        snprintf(set->reason, sizeof(set->reason), "server %s%s%s", caller->server, *why ? ": " : "", why);
    else
        snprintf(set->reason, sizeof(set->reason), "%s", why);
    set->updated_at_ms = bw_wall_ms();
    snprintf(set->changed_by, sizeof(set->changed_by), "%s", caller->by);
    snprintf(set->changed_from, sizeof(set->changed_from), "%s", caller->from);
    json_decref(j);

    char setting[160];
    bw_admin_setting_text(set, setting, sizeof(setting));
    Bulkwrite__Internal__V1__ControlChange now = BULKWRITE__INTERNAL__V1__CONTROL_CHANGE__INIT;
    now.at_ms = set->updated_at_ms;
    now.action = (char *)action;
    now.by = set->changed_by;
    now.from = set->changed_from;
    now.reason = set->reason;
    now.setting = setting;
    for (int k = 0; k < BW_CONTROL_KEYS; k++) {
        if (!writes[k]) continue;
        const Bulkwrite__Internal__V1__ShardControl *was = prev ? prev[k] : NULL;
        Bulkwrite__Internal__V1__ControlChange *history[BW_CONTROL_HISTORY];
        size_t n = 0;
        history[n++] = &now;
        for (size_t i = 0; was && i < was->n_history && n < BW_CONTROL_HISTORY; i++) history[n++] = was->history[i];
        /* the field's own members, and the audit; the other fields stay unset */
        Bulkwrite__Internal__V1__ShardControl c = BULKWRITE__INTERNAL__V1__SHARD_CONTROL__INIT;
        c.shard = (uint32_t)shard;
        if (k == BW_CONTROL_PAUSE) c.paused = set->paused;
        if (k == BW_CONTROL_RATE) {
            c.has_rate = set->has_rate;
            c.rate = set->rate;
        }
        if (k == BW_CONTROL_ROW_RATE) {
            c.has_row_rate = set->has_row_rate;
            c.row_rate = set->row_rate;
        }
        if (k == BW_CONTROL_PINNED) c.pinned = set->pinned;
        c.updated_at_ms = set->updated_at_ms;
        c.reason = set->reason;
        c.changed_by = set->changed_by;
        c.changed_from = set->changed_from;
        c.history = history;
        c.n_history = n;
        size_t i = out->n++;
        out->key[i] = (bw_control_key_t)k;
        out->len[i] = bulkwrite__internal__v1__shard_control__get_packed_size(&c);
        if (!(out->data[i] = malloc(out->len[i] ? out->len[i] : 1))) abort();
        bulkwrite__internal__v1__shard_control__pack(&c, out->data[i]);
    }
    return 0;
}

void bw_admin_records_free(bw_admin_records_t *r) {
    for (size_t i = 0; i < r->n; i++) free(r->data[i]);
    r->n = 0;
}

void bw_admin_budget_text(const bw_server_budget_t *b, char *out, size_t size) {
    char rate[48], rows[48];
    if (b->rate > 0) snprintf(rate, sizeof(rate), "%g stmt/s", b->rate);
    else snprintf(rate, sizeof(rate), "no statement budget");
    if (b->row_rate > 0) snprintf(rows, sizeof(rows), "%g rows/s", b->row_rate);
    else snprintf(rows, sizeof(rows), "no row budget");
    snprintf(out, size, "%s; %s", rate, rows);
}

/* The body of a budget change checked member by member; 0, or -1 with err. */
static int budget_body_check(json_t *j, char *err, size_t esz) {
    const char *key;
    json_t *v;
    json_object_foreach(j, key, v) {
        int rows = strcmp(key, "row_rate") == 0;
        if (strcmp(key, "reason") == 0) {
            if (!json_is_string(v) || strlen(json_string_value(v)) >= sizeof(((bw_server_budget_t *)0)->reason))
                return snprintf(err, esz, "reason must be a string of at most %zu bytes",
                                sizeof(((bw_server_budget_t *)0)->reason) - 1), -1;
        } else if (rows || strcmp(key, "rate") == 0) {
            if (!json_is_null(v) && !json_is_number(v))
                return snprintf(err, esz, "%s must be a number of %s per second for the whole server, or null (or 0) for "
                                "none", key, rows ? "rows" : "statements"), -1;
            if (json_is_number(v) && (rows ? bw_ratelimit_check_rows(json_number_value(v), err, esz)
                                           : bw_ratelimit_check(json_number_value(v), err, esz)))
                return -1;
        } else {
            return snprintf(err, esz, "unknown member \"%s\" for budget", key), -1;
        }
    }
    if (!json_object_get(j, "rate") && !json_object_get(j, "row_rate"))
        return snprintf(err, esz, "budget needs {\"rate\": number or null}, {\"row_rate\": number or null}, or both"), -1;
    return 0;
}

int bw_admin_budget_update(const char *server, const char *body, size_t len, const Bulkwrite__Internal__V1__ServerBudget *prev,
                           const bw_admin_caller_t *caller, bw_server_budget_t *out, void **data, size_t *dlen,
                           char *err, size_t esz) {
    *data = NULL;
    *dlen = 0;
    json_error_t je;
    json_t *j = len ? json_loadb(body, len, 0, &je) : NULL;
    if (!j || !json_is_object(j)) {
        snprintf(err, esz, "the body must be a JSON object%s%s", j || !len ? "" : ": ", j || !len ? "" : je.text);
        json_decref(j);
        return -1;
    }
    if (budget_body_check(j, err, esz)) {
        json_decref(j);
        return -1;
    }
    bw_server_budget_t b;
    if (prev) bw_server_budget_from_record(prev, &b);
    else memset(&b, 0, sizeof(b));
    /* a member given replaces that budget (null and 0: none); one left out stays */
    json_t *r = json_object_get(j, "rate"), *rr = json_object_get(j, "row_rate"), *why = json_object_get(j, "reason");
    if (r) b.rate = json_is_number(r) ? json_number_value(r) : 0;
    if (rr) b.row_rate = json_is_number(rr) ? json_number_value(rr) : 0;
    snprintf(b.reason, sizeof(b.reason), "%s", why ? json_string_value(why) : "");
    json_decref(j);
    b.updated_at_ms = bw_wall_ms();
    snprintf(b.changed_by, sizeof(b.changed_by), "%s", caller->by);
    snprintf(b.changed_from, sizeof(b.changed_from), "%s", caller->from);
    char setting[128];
    bw_admin_budget_text(&b, setting, sizeof(setting));
    Bulkwrite__Internal__V1__ControlChange now = BULKWRITE__INTERNAL__V1__CONTROL_CHANGE__INIT;
    now.at_ms = b.updated_at_ms;
    now.action = "budget";
    now.by = b.changed_by;
    now.from = b.changed_from;
    now.reason = b.reason;
    now.setting = setting;
    Bulkwrite__Internal__V1__ControlChange *history[BW_CONTROL_HISTORY];
    size_t n = 0;
    history[n++] = &now;
    for (size_t i = 0; prev && i < prev->n_history && n < BW_CONTROL_HISTORY; i++) history[n++] = prev->history[i];
    Bulkwrite__Internal__V1__ServerBudget rec = BULKWRITE__INTERNAL__V1__SERVER_BUDGET__INIT;
    rec.server = (char *)server;
    rec.rate = b.rate;
    rec.row_rate = b.row_rate;
    rec.updated_at_ms = b.updated_at_ms;
    rec.changed_by = b.changed_by;
    rec.changed_from = b.changed_from;
    rec.reason = b.reason;
    rec.history = history;
    rec.n_history = n;
    *dlen = bulkwrite__internal__v1__server_budget__get_packed_size(&rec);
    if (!(*data = malloc(*dlen ? *dlen : 1))) abort();
    bulkwrite__internal__v1__server_budget__pack(&rec, *data);
    *out = b;
    return 0;
}
