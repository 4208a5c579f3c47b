/* config_parse.c — reads a libconfig file through the key table: types, ranges,
 * defaults, unknown and missing keys, then the cross-key checks (config_validate.c)
 * and the secrets' file:/env: references; teardown and lookups. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config_int.h"
#include "log.h"

/* ---- parsing ------------------------------------------------------------------ */

static bw_err_t parse_table(parse_ctx_t *ctx, const config_setting_t *group, const key_t_ *keys,
                            void *base, const char *prefix);

/* Parses one scalar `text` (a default) through libconfig so defaults and file values
 * take the same path. */
static bw_err_t parse_default(parse_ctx_t *ctx, const key_t_ *k, void *base, const char *where);

bw_err_t bw_config_store(parse_ctx_t *ctx, const config_setting_t *s, const key_t_ *k,
                             void *base, const char *where) {
    char *p = (char *)base + k->off;
    char num[64];
    switch (k->kind) {
    case K_STR:
        if (config_setting_type(s) != CONFIG_TYPE_STRING)
            return bw_config_fail_at(ctx, s, "%s: expected a string%s", where, "");
        *(char **)p = strdup(config_setting_get_string(s));
        return BW_OK;
    case K_INT: {
        int t = config_setting_type(s);
        if (t != CONFIG_TYPE_INT && t != CONFIG_TYPE_INT64)
            return bw_config_fail_at(ctx, s, "%s: expected an integer%s", where, "");
        long long v = config_setting_get_int64(s);
        if ((double)v < k->min || (double)v > k->max) {
            snprintf(num, sizeof(num), "%lld (allowed %.0f..%.0f)", v, k->min, k->max);
            return bw_config_fail_at(ctx, s, "%s: out of range: %s", where, num);
        }
        *(int *)p = (int)v;
        return BW_OK;
    }
    case K_DBL: {
        int t = config_setting_type(s);
        double v;
        if (t == CONFIG_TYPE_FLOAT) v = config_setting_get_float(s);
        else if (t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64) v = (double)config_setting_get_int64(s);
        else return bw_config_fail_at(ctx, s, "%s: expected a number%s", where, "");
        if (!isfinite(v) || v < k->min || v > k->max) {
            snprintf(num, sizeof(num), "%g (allowed %g..%g)", v, k->min, k->max);
            return bw_config_fail_at(ctx, s, "%s: out of range: %s", where, num);
        }
        *(double *)p = v;
        return BW_OK;
    }
    case K_BOOL:
        if (config_setting_type(s) != CONFIG_TYPE_BOOL)
            return bw_config_fail_at(ctx, s, "%s: expected true or false%s", where, "");
        *(int *)p = config_setting_get_bool(s);
        return BW_OK;
    case K_ENUM: {
        if (config_setting_type(s) != CONFIG_TYPE_STRING)
            return bw_config_fail_at(ctx, s, "%s: expected a string%s", where, "");
        const char *v = config_setting_get_string(s);
        for (int i = 0; k->enums[i]; i++)
            if (strcmp(v, k->enums[i]) == 0) {
                *(int *)p = i;
                return BW_OK;
            }
        return bw_config_fail_at(ctx, s, "%s: unknown value \"%s\"", where, v);
    }
    case K_STRLIST: {
        if (!config_setting_is_array(s) && !config_setting_is_list(s))
            return bw_config_fail_at(ctx, s, "%s: expected a list of strings%s", where, "");
        int n = config_setting_length(s);
        char **arr = calloc((size_t)n + 1, sizeof(*arr));
        for (int i = 0; i < n; i++) {
            const char *v = config_setting_get_string_elem(s, i);
            if (!v) {
                for (int j = 0; j < i; j++) free(arr[j]);
                free(arr);
                return bw_config_fail_at(ctx, config_setting_get_elem(s, (unsigned)i),
                               "%s: element is not a string%s", where, "");
            }
            arr[i] = strdup(v);
        }
        *(char ***)p = arr;
        *(int *)((char *)base + k->cnt_off) = n;
        return BW_OK;
    }
    case K_LIST: {
        if (!config_setting_is_list(s))
            return bw_config_fail_at(ctx, s, "%s: expected a list ( {...}, ... )%s", where, "");
        int n = config_setting_length(s);
        if (n < k->min || n > k->max) {
            snprintf(num, sizeof(num), "%d entries (allowed %.0f..%.0f)", n, k->min, k->max);
            return bw_config_fail_at(ctx, s, "%s: %s", where, num);
        }
        char *arr = calloc((size_t)n + 1, k->elem_size);
        *(void **)p = arr;
        *(int *)((char *)base + k->cnt_off) = n;
        for (int i = 0; i < n; i++) {
            const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
            char sub[256];
            snprintf(sub, sizeof(sub), "%.200s[%d]", where, i);
            if (!config_setting_is_group(e))
                return bw_config_fail_at(ctx, e, "%s: expected a group { ... }%s", sub, "");
            bw_err_t err = parse_table(ctx, e, k->sub, arr + (size_t)i * k->elem_size, sub);
            if (err) return err;
        }
        return BW_OK;
    }
    case K_GROUP:
        if (!config_setting_is_group(s))
            return bw_config_fail_at(ctx, s, "%s: expected a group { ... }%s", where, "");
        return parse_table(ctx, s, k->sub, base, where);
    }
    return BW_ERR_INVALID;
}

static bw_err_t parse_default(parse_ctx_t *ctx, const key_t_ *k, void *base, const char *where) {
    if (k->kind == K_GROUP) return parse_table(ctx, NULL, k->sub, base, where);
    if (!*k->def) return BW_OK; /* optional without a default: validate() fills it in */
    config_t tmp;
    config_init(&tmp);
    char text[512];
    snprintf(text, sizeof(text), "v = %s;", k->def);
    bw_err_t err = BW_ERR_INVALID;
    if (config_read_string(&tmp, text) == CONFIG_TRUE)
        err = bw_config_store(ctx, config_lookup(&tmp, "v"), k, base, where);
    config_destroy(&tmp);
    return err;
}

/* 1 if the key called `kname` ("kafka.brokers") lives in member `mname` of its group
 * ("kafka" or "kafka.brokers"); *exact set when it is the member itself. */
static int names_member(const char *kname, const char *mname, int *exact) {
    size_t len = strlen(mname);
    if (strncmp(kname, mname, len) != 0) return 0;
    if (kname[len] == '\0') *exact = 1;
    return kname[len] == '\0' || kname[len] == '.';
}

/* A renamed key (k->old_name) set under its old name is read as k, with a warning; set
 * under both names, the file is refused. *s: the setting to read k from. */
static bw_err_t read_old_name(parse_ctx_t *ctx, const config_setting_t *group, const key_t_ *k,
                              const config_setting_t **s) {
    const config_setting_t *old = k->old_name ? bw_config_lookup(group, k->old_name) : NULL;
    if (!old) return BW_OK;
    if (*s)
        return bw_config_fail_at(ctx, old, "%s is the old name of %s, which is set too: remove the old name",
                                 k->old_name, k->name);
    bw_log(BW_LOG_WARN, "config", -1, NULL, "%s:%d: %s is the old name of %s: read as it; rename it in the file",
           ctx->file, (int)config_setting_source_line(old), k->old_name, k->name);
    *s = old;
    return BW_OK;
}

/* First dotted segment of every known key must match each member of `group`. */
static bw_err_t check_unknown(parse_ctx_t *ctx, const config_setting_t *group, const key_t_ *keys,
                              const char *prefix) {
    if (!group) return BW_OK;
    int n = config_setting_length(group);
    for (int i = 0; i < n; i++) {
        const config_setting_t *m = config_setting_get_elem(group, (unsigned)i);
        const char *mname = config_setting_name(m);
        int known = 0, exact = 0;
        for (const key_t_ *k = keys; k->name; k++) {
            known |= names_member(k->name, mname, &exact);
            if (k->old_name) known |= names_member(k->old_name, mname, &exact);
        }
        if (!known) {
            char where[256];
            snprintf(where, sizeof(where), "%.100s%s%.150s", prefix, *prefix ? "." : "", mname);
            return bw_config_fail_at(ctx, m, "unknown key \"%s\"%s", where, "");
        }
        if (!exact && !config_setting_is_group(m)) { /* a section such as "kafka" */
            char where[256];
            snprintf(where, sizeof(where), "%.100s%s%.150s", prefix, *prefix ? "." : "", mname);
            return bw_config_fail_at(ctx, m, "%s: expected a group { ... }%s", where, "");
        }
        /* members of a dotted section ("kafka" in "kafka.brokers") are checked too */
        if (config_setting_is_group(m)) {
            for (const key_t_ *k = keys; k->name; k++) {
                size_t len = strlen(mname);
                if (strncmp(k->name, mname, len) == 0 && k->name[len] == '.') {
                    int found_all = 1;
                    int mn = config_setting_length(m);
                    for (int j = 0; j < mn && found_all; j++) {
                        const config_setting_t *c = config_setting_get_elem(m, (unsigned)j);
                        char full[256];
                        snprintf(full, sizeof(full), "%s.%s", mname, config_setting_name(c));
                        int ok = 0;
                        for (const key_t_ *k2 = keys; k2->name && !ok; k2++)
                            ok = strcmp(k2->name, full) == 0 || (k2->old_name && strcmp(k2->old_name, full) == 0);
                        if (!ok) {
                            char where[256];
                            snprintf(where, sizeof(where), "%.100s%s%.150s", prefix, *prefix ? "." : "", full);
                            return bw_config_fail_at(ctx, c, "unknown key \"%s\"%s", where, "");
                        }
                    }
                    break;
                }
            }
        }
    }
    return BW_OK;
}

static bw_err_t parse_table(parse_ctx_t *ctx, const config_setting_t *group, const key_t_ *keys,
                            void *base, const char *prefix) {
    bw_err_t err = check_unknown(ctx, group, keys, prefix);
    if (err) return err;
    for (const key_t_ *k = keys; k->name; k++) {
        char where[256];
        snprintf(where, sizeof(where), "%.100s%s%.150s", prefix, *prefix ? "." : "", k->name);
        const config_setting_t *s = bw_config_lookup(group, k->name);
        if ((err = read_old_name(ctx, group, k, &s))) return err;
        if (s) err = bw_config_store(ctx, s, k, base, where);
        else if (k->def) err = parse_default(ctx, k, base, where);
        else {
            /* point at the section the key belongs in ("shards" for "shards.count") */
            const config_setting_t *at = group;
            const char *dot = strrchr(k->name, '.');
            if (dot) {
                char sec[128];
                snprintf(sec, sizeof(sec), "%.*s", (int)(dot - k->name), k->name);
                const config_setting_t *p = bw_config_lookup(group, sec);
                if (p) at = p;
            }
            err = bw_config_fail_at(ctx, at, "missing required key \"%s\"%s", where, "");
        }
        if (err) return err;
    }
    return BW_OK;
}

/* ---- secrets ------------------------------------------------------------------- */

int bw_config_secret_name(const char *name, size_t len) {
    static const char *const words[] = {"password", "secret", "key", "token", "sasl.jaas", NULL};
    for (const char *const *w = words; *w; w++) {
        size_t wl = strlen(*w);
        for (size_t i = 0; i + wl <= len; i++)
            if (strncasecmp(name + i, *w, wl) == 0) return 1;
    }
    return 0;
}

char *bw_config_secret_resolve(const char *key, const char *value, const char *conf_path, char *errstr,
                               size_t errstr_size) {
    if (strncmp(value, "env:", 4) == 0) {
        const char *v = getenv(value + 4);
        if (!v || !*v) {
            bw_seterr(errstr, errstr_size, BW_ERR_INVALID, "%s: the environment variable %s is %s", key, value + 4,
                      v ? "empty" : "not set");
            return NULL;
        }
        return strdup(v);
    }
    if (strncmp(value, "file:", 5) != 0) return strdup(value);
    const char *f = value + 5, *slash = conf_path ? strrchr(conf_path, '/') : NULL;
    char path[4096];
    if (f[0] == '/' || !slash) snprintf(path, sizeof(path), "%s", f);
    else snprintf(path, sizeof(path), "%.*s/%s", (int)(slash - conf_path), conf_path, f);
    FILE *in = fopen(path, "r");
    char *text = NULL;
    size_t cap = 0;
    ssize_t n = in ? getdelim(&text, &cap, '\0', in) : -1; /* the whole file */
    int e = errno;
    if (in) fclose(in);
    if (n > 0 && text[n - 1] == '\n') text[--n] = '\0';
    if (n > 0 && text[n - 1] == '\r') text[--n] = '\0';
    if (n <= 0) {
        if (!in) bw_seterr(errstr, errstr_size, BW_ERR_INVALID, "%s: cannot read %s: %s", key, path, strerror(e));
        else bw_seterr(errstr, errstr_size, BW_ERR_INVALID, "%s: %s is empty", key, path);
        free(text);
        return NULL;
    }
    return text;
}

/* Replaces every secret's "file:"/"env:" reference by its value (key tables' `secret`). */
static bw_err_t resolve_secrets(const bw_config_t *c, const key_t_ *keys, void *base, const char *prefix,
                                char *errstr, size_t errstr_size) {
    for (const key_t_ *k = keys; k->name; k++) {
        char where[256];
        snprintf(where, sizeof(where), "%.100s%s%.150s", prefix, *prefix ? "." : "", k->name);
        char *p = (char *)base + k->off;
        if (k->kind == K_STR && k->secret) {
            char *v = bw_config_secret_resolve(where, *(char **)p, c->path, errstr, errstr_size);
            if (!v) return BW_ERR_INVALID;
            free(*(char **)p);
            *(char **)p = v;
        } else if (k->kind == K_STRLIST && k->secret) {
            char **arr = *(char ***)p;
            for (int i = 0, n = *(int *)((char *)base + k->cnt_off); i < n; i++) {
                const char *eq = strchr(arr[i], '=');
                if (!eq || !bw_config_secret_name(arr[i], (size_t)(eq - arr[i]))) continue;
                char key[400];
                snprintf(key, sizeof(key), "%s: %.*s", where, (int)(eq - arr[i]), arr[i]);
                char *v = bw_config_secret_resolve(key, eq + 1, c->path, errstr, errstr_size);
                if (!v) return BW_ERR_INVALID;
                size_t len = (size_t)(eq - arr[i]) + 1 + strlen(v) + 1;
                char *prop = malloc(len);
                snprintf(prop, len, "%.*s=%s", (int)(eq - arr[i]), arr[i], v);
                free(v);
                free(arr[i]);
                arr[i] = prop;
            }
        } else if (k->kind == K_LIST) {
            char *arr = *(char **)p;
            for (int i = 0, n = *(int *)((char *)base + k->cnt_off); i < n; i++) {
                char sub[256];
                snprintf(sub, sizeof(sub), "%.200s[%d]", where, i);
                if (resolve_secrets(c, k->sub, arr + (size_t)i * k->elem_size, sub, errstr, errstr_size))
                    return BW_ERR_INVALID;
            }
        } else if (k->kind == K_GROUP && resolve_secrets(c, k->sub, base, where, errstr, errstr_size)) {
            return BW_ERR_INVALID;
        }
    }
    return BW_OK;
}

bw_config_t *bw_config_load(const char *path, char *errstr, size_t errstr_size) {
    config_t cf;
    config_init(&cf);
    bw_config_t *c = calloc(1, sizeof(*c));
    parse_ctx_t ctx = {path, errstr, errstr_size};
    if (config_read_file(&cf, path) != CONFIG_TRUE) {
        if (config_error_type(&cf) == CONFIG_ERR_FILE_IO)
            bw_seterr(errstr, errstr_size, BW_ERR_IO, "%s: cannot read file", path);
        else
            bw_seterr(errstr, errstr_size, BW_ERR_INVALID, "%s:%d: %s", path,
                      config_error_line(&cf), config_error_text(&cf));
        goto fail;
    }
    c->path = strdup(path);
    if (parse_table(&ctx, config_root_setting(&cf), bw_config_top_keys, c, "") != BW_OK) goto fail;
    if (bw_config_validate(c, &cf, &ctx) != BW_OK) goto fail;
    if (resolve_secrets(c, bw_config_top_keys, c, "", errstr, errstr_size) != BW_OK) goto fail;
    config_destroy(&cf);
    return c;
fail:
    config_destroy(&cf);
    bw_config_destroy(c);
    return NULL;
}

/* ---- teardown, lookups ---------------------------------------------------------- */

void bw_config_free_table(const key_t_ *keys, void *base) {
    for (const key_t_ *k = keys; k->name; k++) {
        char *p = (char *)base + k->off;
        switch (k->kind) {
        case K_STR: free(*(char **)p); break;
        case K_STRLIST: {
            char **arr = *(char ***)p;
            int n = *(int *)((char *)base + k->cnt_off);
            for (int i = 0; arr && i < n; i++) free(arr[i]);
            free(arr);
            break;
        }
        case K_LIST: {
            char *arr = *(char **)p;
            int n = *(int *)((char *)base + k->cnt_off);
            for (int i = 0; arr && i < n; i++) bw_config_free_table(k->sub, arr + (size_t)i * k->elem_size);
            free(arr);
            break;
        }
        case K_GROUP: bw_config_free_table(k->sub, base); break;
        default: break;
        }
    }
}

void bw_config_destroy(bw_config_t *c) {
    if (!c) return;
    for (int i = 0; i < c->lane_cnt; i++) free(c->lanes[i].topic);
    bw_config_free_table(bw_config_top_keys, c);
    free(c->path);
    free(c->shard_rate);
    free(c->shard_row_rate);
    free(c->shard_server);
    free(c);
}

const bw_object_type_t *bw_config_object_type(const bw_config_t *c, const char *name) {
    for (int i = 0; i < c->object_type_cnt; i++)
        if (strcmp(c->object_types[i].name, name) == 0) return &c->object_types[i];
    return NULL;
}

int bw_config_column(const bw_object_type_t *ot, const char *name) { return bw_config_column_from(ot, name, 0); }

int bw_config_column_from(const bw_object_type_t *ot, const char *name, int hint) {
    int n = ot->column_cnt;
    if (hint < 0 || hint >= n) hint = 0;
    for (int k = 0; k < n; k++) { /* from the hint on, then the columns before it */
        int i = hint + k < n ? hint + k : hint + k - n;
        if (strcmp(ot->columns[i].name, name) == 0) return i;
    }
    return -1;
}

int bw_config_lane(const bw_config_t *c, const char *name) {
    if (!name || !name[0]) return 0;
    for (int i = 0; i < c->lane_cnt; i++)
        if (strcmp(c->lanes[i].name, name) == 0) return i;
    return -1;
}

int bw_config_topic_lane(const bw_config_t *c, const char *topic) {
    for (int i = 0; i < c->lane_cnt; i++)
        if (strcmp(c->lanes[i].topic, topic) == 0) return i;
    return -1;
}

void bw_config_shard_db(const bw_config_t *c, int shard, char *buf, size_t size) {
    snprintf(buf, size, "%s%05d", c->database_prefix, shard);
}

char *bw_config_file(const bw_config_t *c, const char *file) {
    if (!file || !*file) return NULL;
    const char *slash = c->path ? strrchr(c->path, '/') : NULL;
    if (file[0] == '/' || !slash) return strdup(file);
    size_t n = (size_t)(slash - c->path) + 1 + strlen(file) + 1;
    char *p = malloc(n);
    snprintf(p, n, "%.*s/%s", (int)(slash - c->path), c->path, file);
    return p;
}

