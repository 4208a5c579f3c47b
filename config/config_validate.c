/* config_validate.c — the checks one key's type and range cannot express (shard
 * coverage, names, lanes, rate bounds) and the derived fields (per-shard rates and
 * servers, lane topics). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_int.h"
#include "ratelimit.h"

/* ---- cross-key validation ----------------------------------------------------- */

static int is_identifier(const char *s) {
    if (!*s || strlen(s) > 64) return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_'))
            return 0;
    return 1;
}

/* The member `name` of group `g`, for its line; `g` itself when absent. */
static const config_setting_t *member(const config_setting_t *g, const char *name) {
    const config_setting_t *m = g ? config_setting_get_member((config_setting_t *)g, name) : NULL;
    return m ? m : g;
}

static int is_lane_name(const char *s) {
    size_t n = strlen(s);
    if (n < 1 || n > 32) return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_' || *s == '-')) return 0;
    return 1;
}

/* Checks the lanes, puts "default" first (added with weight 1 when the file leaves it
 * out) and names each lane's topic. */
static bw_err_t validate_lanes(bw_config_t *c, const config_setting_t *root, parse_ctx_t *ctx) {
    const config_setting_t *ls = bw_config_lookup(root, "lanes");
    int def = -1;
    for (int i = 0; i < c->lane_cnt; i++) {
        const config_setting_t *at = config_setting_get_elem(ls, (unsigned)i);
        if (!is_lane_name(c->lanes[i].name))
            return bw_config_fail_at(ctx, at, "lanes: \"%s\" is not a lane name ([a-z0-9_-], 1 to 32 bytes)%s", c->lanes[i].name, "");
        for (int j = 0; j < i; j++)
            if (strcmp(c->lanes[i].name, c->lanes[j].name) == 0)
                return bw_config_fail_at(ctx, at, "lanes: \"%s\" is listed twice%s", c->lanes[i].name, "");
        if (strcmp(c->lanes[i].name, "default") == 0) def = i;
    }
    if (def < 0) {
        if (c->lane_cnt >= BW_LANES_MAX)
            return bw_config_fail_at(ctx, ls, "lanes: at most %s lanes besides \"default\"%s", "7", "");
        bw_lane_t *l = realloc(c->lanes, sizeof(*l) * ((size_t)c->lane_cnt + 2));
        if (!l) abort();
        memmove(l + 1, l, sizeof(*l) * (size_t)c->lane_cnt);
        memset(&l[0], 0, sizeof(l[0]));
        l[0].name = strdup("default");
        l[0].weight = 1;
        c->lanes = l;
        c->lane_cnt++;
    } else if (def > 0) {
        bw_lane_t d = c->lanes[def];
        memmove(c->lanes + 1, c->lanes, sizeof(*c->lanes) * (size_t)def);
        c->lanes[0] = d;
    }
    /* a shard's lanes must meet on one consumer: the range assignor (kafka.c) does that */
    for (int k = 0; k < 2 && c->lane_cnt > 1; k++) {
        char **props = k ? c->consumer_properties : c->properties;
        int cnt = k ? c->consumer_property_cnt : c->property_cnt;
        for (int i = 0; i < cnt; i++)
            if (strncmp(props[i], "partition.assignment.strategy=", 30) == 0 && strcmp(props[i] + 30, "range") != 0)
                return bw_config_fail_at(ctx, bw_config_lookup(root, k ? "kafka.consumer_properties" : "kafka.properties"),
                               "%s: with lanes the consumers need partition.assignment.strategy=range (it gives one "
                               "consumer every lane of a shard), not \"%s\"",
                               k ? "kafka.consumer_properties" : "kafka.properties", props[i] + 30);
    }
    for (int i = 0; i < c->lane_cnt; i++) {
        size_t n = strlen(c->topic) + strlen(c->lanes[i].name) + 2;
        c->lanes[i].topic = malloc(n);
        if (!c->lanes[i].topic) abort();
        if (i == 0) snprintf(c->lanes[i].topic, n, "%s", c->topic);
        else snprintf(c->lanes[i].topic, n, "%s.%s", c->topic, c->lanes[i].name);
    }
    return BW_OK;
}

/* Each shard's rate is stored once, its final value: a reload writes the running
 * config's arrays while other threads read them, and a shard with an override must never
 * show the default between two stores. */
void bw_config_derive_rates(bw_config_t *c) {
    int *override = malloc((size_t)(c->shard_count > 0 ? c->shard_count : 1) * sizeof(*override));
    if (!override) abort();
    for (int s = 0; s < c->shard_count; s++) override[s] = -1;
    for (int i = 0; i < c->rate_override_cnt; i++) /* the last of a shard's wins */
        if (c->rate_overrides[i].shard >= 0 && c->rate_overrides[i].shard < c->shard_count) /* else a reload's, for a count that needs a restart */
            override[c->rate_overrides[i].shard] = i;
    for (int s = 0; s < c->shard_count; s++) {
        const bw_rate_override_t *o = override[s] < 0 ? NULL : &c->rate_overrides[override[s]];
        c->shard_rate[s] = o ? o->rate : c->default_rate;
        c->shard_row_rate[s] = o ? o->row_rate : c->default_row_rate;
    }
    free(override);
}

bw_err_t bw_config_validate(bw_config_t *c, const config_t *cf, parse_ctx_t *ctx) {
    const config_setting_t *root = config_root_setting(cf);
    bw_err_t lanes_err = validate_lanes(c, root, ctx);
    if (lanes_err) return lanes_err;
    if (c->min_insync_replicas > c->replication_factor) {
        char what[160];
        snprintf(what, sizeof(what), "%d is more than kafka.replication_factor (%d)", c->min_insync_replicas,
                 c->replication_factor);
        return bw_config_fail_at(ctx, bw_config_lookup(root, "kafka.min_insync_replicas"),
                                 "kafka.min_insync_replicas: %s: no write could ever be acknowledged%s", what, "");
    }
    if (!is_identifier(c->database_prefix))
        return bw_config_fail_at(ctx, bw_config_lookup(root, "shards.database_prefix"),
                       "shards.database_prefix: \"%s\" is not an identifier [A-Za-z0-9_]%s",
                       c->database_prefix, "");
    if (!is_identifier(c->throttle_heartbeat_table))
        return bw_config_fail_at(ctx, bw_config_lookup(root, "throttle.heartbeat_table"),
                       "throttle.heartbeat_table: \"%s\" is not an identifier [A-Za-z0-9_]%s",
                       c->throttle_heartbeat_table, "");
    for (int i = 0; i < c->server_cnt; i++)
        for (int r = 0; r < c->servers[i].replica_cnt; r++) {
            const char *hp = c->servers[i].replicas[r], *colon = strrchr(hp, ':');
            char *end = NULL;
            long port = colon ? strtol(colon + 1, &end, 10) : 0;
            if (!colon || colon == hp || !end || *end || port < 1 || port > 65535)
                return bw_config_fail_at(ctx, bw_config_lookup(root, "shards.servers"),
                               "shards.servers[].replicas: \"%s\" of server %s is not \"host:port\"", hp,
                               c->servers[i].name);
        }
    c->shard_server = malloc(sizeof(int) * (size_t)c->shard_count);
    c->shard_rate = malloc(sizeof(*c->shard_rate) * (size_t)c->shard_count);
    c->shard_row_rate = malloc(sizeof(*c->shard_row_rate) * (size_t)c->shard_count);
    for (int s = 0; s < c->shard_count; s++) c->shard_server[s] = -1;
    char why[256];
    if (bw_ratelimit_check(c->default_rate, why, sizeof(why)))
        return bw_config_fail_at(ctx, bw_config_lookup(root, "shards.default_rate"), "shards.default_rate: %s%s", why, "");
    if (bw_ratelimit_check_rows(c->default_row_rate, why, sizeof(why)))
        return bw_config_fail_at(ctx, bw_config_lookup(root, "shards.default_row_rate"), "shards.default_row_rate: %s%s", why, "");
    const config_setting_t *servers = bw_config_lookup(root, "shards.servers");
    for (int i = 0; i < c->server_cnt; i++) {
        const bw_server_t *sv = &c->servers[i];
        const config_setting_t *at = config_setting_get_elem(servers, (unsigned)i);
        if (sv->first_shard > sv->last_shard || sv->last_shard >= c->shard_count)
            return bw_config_fail_at(ctx, member(at, sv->last_shard >= c->shard_count ? "last_shard" : "first_shard"),
                           "shards.servers \"%s\": shard range must lie within 0..shards.count-1 %s",
                           sv->name, "and first_shard <= last_shard");
        for (int s = sv->first_shard; s <= sv->last_shard; s++) {
            if (c->shard_server[s] >= 0) {
                char num[32];
                snprintf(num, sizeof(num), "%d", s);
                return bw_config_fail_at(ctx, member(at, "first_shard"),
                               "shards.servers: shard %s is held by two servers (\"%s\")",
                               num, sv->name);
            }
            c->shard_server[s] = i;
        }
    }
    for (int s = 0; s < c->shard_count; s++)
        if (c->shard_server[s] < 0) {
            char num[32];
            snprintf(num, sizeof(num), "%d", s);
            return bw_config_fail_at(ctx, servers, "shards.servers: no server holds shard %s%s", num, "");
        }
    const config_setting_t *ovs = bw_config_lookup(root, "shards.rate_overrides");
    for (int i = 0; i < c->rate_override_cnt; i++) {
        bw_rate_override_t *o = &c->rate_overrides[i];
        const config_setting_t *at = config_setting_get_elem(ovs, (unsigned)i);
        if (o->shard >= c->shard_count)
            return bw_config_fail_at(ctx, at, "shards.rate_overrides: shard beyond shards.count%s%s", "", "");
        /* a member left out is the default (and is dumped as it) */
        int has_rate = config_setting_get_member((config_setting_t *)at, "rate") != NULL;
        int has_row_rate = config_setting_get_member((config_setting_t *)at, "row_rate") != NULL;
        if (!has_rate && !has_row_rate) {
            char key[64];
            snprintf(key, sizeof(key), "shards.rate_overrides[%d]", i);
            return bw_config_fail_at(ctx, at, "%s: set rate (statements per second), row_rate (rows per second) or %s",
                           key, "both");
        }
        if (!has_rate) o->rate = c->default_rate;
        if (!has_row_rate) o->row_rate = c->default_row_rate;
        if (bw_ratelimit_check(o->rate, why, sizeof(why)))
            return bw_config_fail_at(ctx, member(at, "rate"), "shards.rate_overrides: %s%s", why, "");
        if (bw_ratelimit_check_rows(o->row_rate, why, sizeof(why)))
            return bw_config_fail_at(ctx, member(at, "row_rate"), "shards.rate_overrides: %s%s", why, "");
    }
    bw_config_derive_rates(c);
    const config_setting_t *ots = bw_config_lookup(root, "object_types");
    for (int i = 0; i < c->object_type_cnt; i++) {
        const bw_object_type_t *ot = &c->object_types[i];
        const config_setting_t *at = config_setting_get_elem(ots, (unsigned)i);
        const char *idents[][2] = {{"name", ot->name}, {"table", ot->table}, {"id_column", ot->id_column}};
        for (size_t j = 0; j < 3; j++)
            if (!is_identifier(idents[j][1])) {
                char key[64];
                snprintf(key, sizeof(key), "object_types[%d].%s", i, idents[j][0]);
                return bw_config_fail_at(ctx, member(at, idents[j][0]),
                               "%s: \"%s\" is not an identifier [A-Za-z0-9_]{1,64}", key, idents[j][1]);
            }
        for (int j = 0; j < i; j++) {
            if (strcmp(c->object_types[j].name, ot->name) == 0)
                return bw_config_fail_at(ctx, member(at, "name"), "object type \"%s\": name used twice%s", ot->name, "");
            if (c->object_types[j].type_id == ot->type_id)
                return bw_config_fail_at(ctx, member(at, "type_id"), "object type \"%s\": type_id used twice%s",
                               ot->name, "");
        }
        const config_setting_t *cols = member(at, "columns");
        for (int j = 0; j < ot->column_cnt; j++) {
            const char *cn = ot->columns[j].name;
            const config_setting_t *cat = member(config_setting_get_elem(cols, (unsigned)j), "name");
            if (!is_identifier(cn) || strcmp(cn, ot->id_column) == 0)
                return bw_config_fail_at(ctx, cat, "object type \"%s\": bad column name \"%s\"", ot->name, cn);
            for (int k = 0; k < j; k++)
                if (strcmp(ot->columns[k].name, cn) == 0)
                    return bw_config_fail_at(ctx, cat, "object type \"%s\": column \"%s\" listed twice",
                                   ot->name, cn);
        }
    }
    for (int i = 0; i < c->server_cnt; i++)
        for (int j = 0; j < i; j++)
            if (strcmp(c->servers[i].name, c->servers[j].name) == 0)
                return bw_config_fail_at(ctx, member(config_setting_get_elem(servers, (unsigned)i), "name"),
                               "shards.servers: name \"%s\" used twice%s", c->servers[i].name, "");
    if (c->retry_max_ms < c->retry_initial_ms)
        return bw_config_fail_at(ctx, bw_config_lookup(root, "consumer.retry_max_ms"),
                       "consumer.retry_max_ms must be at least consumer.retry_initial_ms%s%s", "", "");
    if (c->alertmanager_url[0] && strncmp(c->alertmanager_url, "http://", 7) &&
        strncmp(c->alertmanager_url, "https://", 8))
        return bw_config_fail_at(ctx, bw_config_lookup(root, "alerts.alertmanager_url"),
                       "alerts.alertmanager_url: \"%s\" is not an http:// or https:// URL%s", c->alertmanager_url, "");
    for (int i = 0; i < c->alert_label_cnt; i++) {
        const char *l = c->alert_labels[i], *eq = strchr(l, '=');
        int ok = eq && eq > l && (isalpha((unsigned char)l[0]) || l[0] == '_');
        for (const char *p = l; ok && p < eq; p++) ok = isalnum((unsigned char)*p) || *p == '_';
        if (!ok)
            return bw_config_fail_at(ctx, bw_config_lookup(root, "alerts.labels"),
                           "alerts.labels: \"%s\" is not name=value with a label name [A-Za-z_][A-Za-z0-9_]*%s", l, "");
    }
    return BW_OK;
}

