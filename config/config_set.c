/* config_set.c — `bwctl config-set`: edits a libconfig file key by key, each value
 * checked against the key table before the file is written (config.h). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_int.h"

/* The key `path` names ("throttle.mode", "proxy.auth.clients_file",
 * "shards.servers[1].port", "lanes"), and the libconfig setting path it lives at,
 * segment by segment: names, or "[N]" for a list element. Returns NULL if no key. */
static const key_t_ *find_key(const key_t_ *keys, const char *path, char segs[][128], int *nseg) {
    for (const key_t_ *k = keys; k->name; k++) {
        size_t len = strlen(k->name);
        if (strncmp(path, k->name, len) != 0) continue;
        const char *rest = path + len;
        if (*rest && *rest != '.' && *rest != '[') continue;
        /* a dotted table name is a group per dot in the file ("kafka.brokers") */
        for (const char *s = k->name, *dot; s; s = dot ? dot + 1 : NULL) {
            dot = strchr(s, '.');
            if (*nseg >= 16) return NULL;
            snprintf(segs[(*nseg)++], 128, "%.*s", dot ? (int)(dot - s) : (int)strlen(s), s);
        }
        if (!*rest) return k->kind == K_GROUP ? NULL : k;
        if (*rest == '.' && k->kind == K_GROUP) return find_key(k->sub, rest + 1, segs, nseg);
        if (*rest == '[' && k->kind == K_LIST) {
            char *end;
            long i = strtol(rest + 1, &end, 10);
            if (end == rest + 1 || *end != ']' || i < 0 || *nseg >= 16) return NULL;
            snprintf(segs[(*nseg)++], 128, "[%ld]", i);
            if (end[1] == '.') return find_key(k->sub, end + 2, segs, nseg);
        }
        return NULL;
    }
    return NULL;
}

/* Copies setting src (its value, recursively) into a new member `name` of parent (NULL
 * name: an element of a list or array). */
static config_setting_t *copy_setting(config_setting_t *parent, const char *name, const config_setting_t *src) {
    int type = config_setting_type(src);
    config_setting_t *d = config_setting_add(parent, name, type);
    if (!d) return NULL;
    switch (type) {
    case CONFIG_TYPE_INT: config_setting_set_int(d, config_setting_get_int(src)); break;
    case CONFIG_TYPE_INT64: config_setting_set_int64(d, config_setting_get_int64(src)); break;
    case CONFIG_TYPE_FLOAT: config_setting_set_float(d, config_setting_get_float(src)); break;
    case CONFIG_TYPE_BOOL: config_setting_set_bool(d, config_setting_get_bool(src)); break;
    case CONFIG_TYPE_STRING: config_setting_set_string(d, config_setting_get_string(src)); break;
    default: /* group, list, array */
        for (int i = 0; i < config_setting_length(src); i++) {
            const config_setting_t *e = config_setting_get_elem(src, (unsigned)i);
            if (!copy_setting(d, type == CONFIG_TYPE_GROUP ? config_setting_name(e) : NULL, e)) return NULL;
        }
    }
    return d;
}

/* Parses `text` as key k's value into tmp's setting "v": libconfig syntax, or bare text
 * for a string or a choice. */
static config_setting_t *parse_value(config_t *tmp, const key_t_ *k, const char *text) {
    config_init(tmp);
    size_t n = strlen(text) * 2 + 16;
    char *src = malloc(n);
    if (!src) abort();
    int bare = (k->kind == K_STR || k->kind == K_ENUM) && text[0] != '"';
    if (bare) { /* quoted, with " and \ escaped */
        size_t o = 0;
        o += (size_t)snprintf(src, n, "v = \"");
        for (const char *p = text; *p; p++) {
            if (*p == '"' || *p == '\\') src[o++] = '\\';
            src[o++] = *p;
        }
        snprintf(src + o, n - o, "\";");
    } else {
        snprintf(src, n, "v = %s;", text);
    }
    int ok = config_read_string(tmp, src) == CONFIG_TRUE;
    free(src);
    return ok ? config_lookup(tmp, "v") : NULL;
}

/* One KEY=VALUE into cf; errstr names the key on failure. */
static bw_err_t set_one(config_t *cf, const char *assignment, char *errstr, size_t errstr_size) {
    const char *eq = strchr(assignment, '=');
    if (!eq || eq == assignment)
        return bw_seterr(errstr, errstr_size, BW_ERR_INVALID, "\"%s\" is not KEY=VALUE", assignment);
    char path[512], segs[16][128];
    snprintf(path, sizeof(path), "%.*s", (int)(eq - assignment), assignment);
    int nseg = 0;
    const key_t_ *k = find_key(bw_config_top_keys, path, segs, &nseg);
    const key_t_ *renamed = k ? NULL : bw_config_renamed_key(path);
    if (renamed)
        return bw_seterr(errstr, errstr_size, BW_ERR_INVALID, "%s is the old name of %s: set that", path, renamed->name);
    if (!k) return bw_seterr(errstr, errstr_size, BW_ERR_INVALID, "unknown key \"%s\" (docs/configuration.md)", path);

    config_t tmp;
    const config_setting_t *v = parse_value(&tmp, k, eq + 1);
    if (!v) {
        bw_err_t e = bw_seterr(errstr, errstr_size, BW_ERR_INVALID, "%s: \"%s\" is not a libconfig value: %s", path,
                               eq + 1, config_error_text(&tmp) ? config_error_text(&tmp) : "?");
        config_destroy(&tmp);
        return e;
    }
    /* the parser's own checks, on a scratch copy (a struct the size of any key's base) */
    static const size_t scratch_size = sizeof(bw_config_t) + 4096;
    void *scratch = calloc(1, scratch_size);
    if (!scratch) abort();
    parse_ctx_t ctx = {"value", errstr, errstr_size};
    key_t_ one[2] = {*k, {0}};
    bw_err_t err = bw_config_store(&ctx, v, k, scratch, path);
    bw_config_free_table(one, scratch);
    free(scratch);
    if (err) { /* "value:1: why" → "KEY: why" (why often starts with KEY itself) */
        const char *why = strncmp(errstr, "value:", 6) == 0 ? strstr(errstr + 6, ": ") : NULL;
        char msg[1024];
        why = why ? why + 2 : errstr;
        if (strncmp(why, path, strlen(path)) == 0) snprintf(msg, sizeof(msg), "%s", why);
        else snprintf(msg, sizeof(msg), "%s: %s", path, why);
        snprintf(errstr, errstr_size, "%s", msg);
        config_destroy(&tmp);
        return err;
    }

    /* walk to the parent, making groups the file lacks; then replace the member */
    config_setting_t *at = config_root_setting(cf);
    for (int i = 0; i + 1 < nseg && !err; i++) {
        config_setting_t *next;
        if (segs[i][0] == '[') {
            long idx = strtol(segs[i] + 1, NULL, 10);
            next = config_setting_get_elem(at, (unsigned)idx);
            if (!next) err = bw_seterr(errstr, errstr_size, BW_ERR_INVALID, "%s: the file's list has no element %ld",
                                       path, idx);
        } else if (!(next = config_setting_get_member(at, segs[i]))) {
            next = config_setting_add(at, segs[i], CONFIG_TYPE_GROUP);
        } else if (segs[i + 1][0] == '[' ? !config_setting_is_list(next) : !config_setting_is_group(next)) {
            err = bw_seterr(errstr, errstr_size, BW_ERR_INVALID, "%s: %s in the file is not a %s", path, segs[i],
                            segs[i + 1][0] == '[' ? "list" : "group");
        }
        at = next;
    }
    const char *leaf = segs[nseg - 1];
    if (!err && config_setting_get_member(at, leaf)) config_setting_remove(at, leaf);
    if (!err && !copy_setting(at, leaf, v))
        err = bw_seterr(errstr, errstr_size, BW_ERR_INVALID, "%s: cannot be set in the file", path);
    config_destroy(&tmp);
    return err;
}

bw_err_t bw_config_set_file(const char *path, char *const *assignments, int n, char *errstr, size_t errstr_size) {
    config_t cf;
    config_init(&cf);
    bw_err_t err = BW_OK;
    if (config_read_file(&cf, path) != CONFIG_TRUE) {
        err = config_error_type(&cf) == CONFIG_ERR_FILE_IO
                  ? bw_seterr(errstr, errstr_size, BW_ERR_IO, "%s: cannot read file", path)
                  : bw_seterr(errstr, errstr_size, BW_ERR_INVALID, "%s:%d: %s", path, config_error_line(&cf),
                              config_error_text(&cf));
    }
    for (int i = 0; i < n && !err; i++) err = set_one(&cf, assignments[i], errstr, errstr_size);
    if (!err) { /* written whole, then renamed: a reader never sees half a file */
        char tmp[4096];
        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        if (config_write_file(&cf, tmp) != CONFIG_TRUE || rename(tmp, path) != 0) {
            remove(tmp);
            err = bw_seterr(errstr, errstr_size, BW_ERR_IO, "%s: cannot write the file", path);
        }
    }
    config_destroy(&cf);
    return err;
}
