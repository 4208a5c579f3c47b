/* auth.c — the clients file, bearer tokens, roles and scopes (auth.h). */
#include "auth.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <libconfig.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "endpoints.h"
#include "log.h"

#define COMPONENT "auth"

int (*bw_auth_memcmp)(const void *a, const void *b, size_t len) = CRYPTO_memcmp;

static const char *const role_names[] = {"submit", "read", "admin"}; /* bit order of bw_role_t */
#define ROLE_CNT 3

/* ---- loading ------------------------------------------------------------------------ */

static void client_free(bw_auth_client_t *c) {
    free(c->name);
    free(c->cert_identity);
    for (int i = 0; i < c->scope_cnt; i++) free(c->scopes[i].type);
    free(c->scopes);
}

static void set_free(bw_auth_set_t *s) {
    if (!s) return;
    for (int i = 0; i < s->client_cnt; i++) client_free(&s->clients[i]);
    free(s->clients);
    free(s->path);
    free(s);
}

static int hex_digit(int ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

/* 64 hex digits into out; -1 if s is anything else. */
static int parse_digest(const char *s, uint8_t out[BW_AUTH_DIGEST_LEN]) {
    if (strlen(s) != 2 * BW_AUTH_DIGEST_LEN) return -1;
    for (int i = 0; i < BW_AUTH_DIGEST_LEN; i++) {
        int hi = hex_digit((unsigned char)s[2 * i]), lo = hex_digit((unsigned char)s[2 * i + 1]);
        if (hi < 0 || lo < 0) return -1;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}

static int name_ok(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > BW_AUTH_NAME_MAX) return 0;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-' && *s != '.') return 0;
    return 1;
}

static int line_of(const config_setting_t *s) { return s ? (int)config_setting_source_line(s) : 0; }

/* "type:op" into sc; -1 with why set. */
static int parse_scope(const char *text, const bw_config_t *conf, bw_auth_scope_t *sc, char *why, size_t why_size) {
    const char *colon = strchr(text, ':');
    if (!colon || strchr(colon + 1, ':') || colon == text || !colon[1]) {
        snprintf(why, why_size, "scope \"%.80s\" is not TYPE:OP (e.g. \"pin:delete\", \"board:*\", \"*:create\")", text);
        return -1;
    }
    const char *op = colon + 1;
    sc->op = -1;
    if (strcmp(op, "*") == 0) sc->op = 0;
    for (int k = BW_OP_CREATE; k <= BW_OP_DELETE && sc->op < 0; k++)
        if (strcmp(op, bw_op_name(k)) == 0) sc->op = k;
    if (sc->op < 0) {
        snprintf(why, why_size, "scope \"%.80s\": unknown op \"%.40s\" (create, update, upsert, delete or *)", text, op);
        return -1;
    }
    size_t tlen = (size_t)(colon - text);
    if (tlen == 1 && text[0] == '*') {
        sc->type = NULL;
        return 0;
    }
    sc->type = strndup(text, tlen);
    if (conf && !bw_config_object_type(conf, sc->type)) {
        snprintf(why, why_size, "scope \"%.80s\": unknown object type \"%.64s\"", text, sc->type);
        free(sc->type);
        sc->type = NULL;
        return -1;
    }
    return 0;
}

/* A quota key of a client (quota.h): absent = 0 = no limit; else a number in 0..max. */
static int parse_quota(const config_setting_t *e, const char *key, double max, double *out,
                       const config_setting_t **at, char *why, size_t why_size) {
    const config_setting_t *m = config_setting_get_member(e, key);
    *out = 0;
    if (!m) return 0;
    *at = m;
    int type = config_setting_type(m);
    if (type == CONFIG_TYPE_INT || type == CONFIG_TYPE_INT64) *out = (double)config_setting_get_int64(m);
    else if (type == CONFIG_TYPE_FLOAT) *out = config_setting_get_float(m);
    else return snprintf(why, why_size, "%s must be a number (0 = no limit)", key), -1;
    if (!(*out >= 0 && *out <= max))
        return snprintf(why, why_size, "%s %.17g is out of range: 0 (no limit) to %.17g", key, *out, max), -1;
    return 0;
}

/* One token: the digest at `hex` (named key in errors) and the optional expiry at `expires`. */
static int parse_token(const config_setting_t *hex, const config_setting_t *expires, const char *key,
                       const char *expires_key, bw_auth_token_t *tok, char *why, size_t why_size,
                       const config_setting_t **at) {
    const char *h = config_setting_get_string(hex);
    *at = hex;
    if (!h)
        return snprintf(why, why_size, "%s must be a string: the sha256 of the token (printf %%s TOKEN | sha256sum)",
                        key), -1;
    if (parse_digest(h, tok->digest))
        return snprintf(why, why_size,
                        "%s must be 64 hex digits, the sha256 of the token (printf %%s TOKEN | sha256sum); "
                        "this one has %zu characters%s", key, strlen(h),
                        strlen(h) == 64 ? ", not all hex digits" : ""), -1;
    tok->expires = 0;
    if (expires) {
        *at = expires;
        if (bw_utc_time_parse(config_setting_get_string(expires), &tok->expires))
            return snprintf(why, why_size, "%s must be a UTC time like \"2027-03-01T00:00:00Z\"", expires_key), -1;
    }
    return 0;
}

/* A client's tokens: token_sha256 (and token_expires), or tokens = ( { sha256; expires; } ... ). */
static int parse_tokens(const config_setting_t *e, bw_auth_client_t *c, char *why, size_t why_size,
                        const config_setting_t **at) {
    const config_setting_t *one = config_setting_get_member(e, "token_sha256"),
                           *one_expires = config_setting_get_member(e, "token_expires"),
                           *list = config_setting_get_member(e, "tokens");
    if (list && (one || one_expires))
        return *at = list, snprintf(why, why_size, "tokens, or token_sha256 and token_expires: not both"), -1;
    if (one_expires && !one)
        return *at = one_expires, snprintf(why, why_size, "token_expires needs token_sha256"), -1;
    if (one) {
        c->token_cnt = 1;
        return parse_token(one, one_expires, "token_sha256", "token_expires", &c->tokens[0], why, why_size, at);
    }
    if (!list) return 0;
    *at = list;
    int n = config_setting_length(list);
    if (!config_setting_is_list(list) || n < 1 || n > BW_AUTH_TOKENS_MAX)
        return snprintf(why, why_size, "tokens must be a list of 1 to %d groups ( { sha256 = \"...\"; expires = "
                                       "\"2027-03-01T00:00:00Z\"; }, ... ), expires optional", BW_AUTH_TOKENS_MAX), -1;
    for (int i = 0; i < n; i++) {
        const config_setting_t *t = config_setting_get_elem(list, (unsigned)i), *hex;
        *at = t;
        if (!config_setting_is_group(t) || !(hex = config_setting_get_member(t, "sha256")))
            return snprintf(why, why_size, "tokens[%d] must be a group { sha256 = \"...\"; expires = \"...\"; }", i), -1;
        for (int k = 0; k < config_setting_length(t); k++) {
            const char *key = config_setting_name(config_setting_get_elem(t, (unsigned)k));
            if (strcmp(key, "sha256") && strcmp(key, "expires"))
                return snprintf(why, why_size, "tokens[%d]: unknown key \"%s\" (sha256, expires)", i, key), -1;
        }
        if (parse_token(hex, config_setting_get_member(t, "expires"), "tokens[].sha256", "tokens[].expires",
                        &c->tokens[i], why, why_size, at))
            return -1;
        for (int j = 0; j < i; j++)
            if (memcmp(c->tokens[j].digest, c->tokens[i].digest, BW_AUTH_DIGEST_LEN) == 0)
                return snprintf(why, why_size, "tokens[%d] is the same token as tokens[%d]", i, j), -1;
        c->token_cnt++;
    }
    return 0;
}

/* One entry of `clients` into c; -1 with why (the caller adds file, line and name). */
static int parse_client(const config_setting_t *e, const bw_config_t *conf, bw_auth_client_t *c, char *why,
                        size_t why_size, const config_setting_t **at) {
    static const char *const known[] = {"name", "token_sha256", "token_expires", "tokens", "cert_identity", "roles",
                                        "scopes", "lanes", "ops_per_second", "bytes_per_second", "max_jobs_in_flight"};
    *at = e;
    if (!config_setting_is_group(e)) return snprintf(why, why_size, "expected a group { name = ...; ... }"), -1;
    const char *name = NULL;
    if (!config_setting_lookup_string(e, "name", &name)) return snprintf(why, why_size, "needs a name (a string)"), -1;
    if (!name_ok(name)) return snprintf(why, why_size, "name \"%.80s\": 1 to 64 of A-Z a-z 0-9 _ - .", name), -1;
    c->name = strdup(name);
    for (int i = 0; i < config_setting_length(e); i++) {
        const config_setting_t *m = config_setting_get_elem(e, (unsigned)i);
        int ok = 0;
        for (size_t k = 0; k < sizeof(known) / sizeof(known[0]) && !ok; k++) ok = !strcmp(config_setting_name(m), known[k]);
        if (!ok) {
            *at = m;
            return snprintf(why, why_size, "unknown key \"%s\" (name, token_sha256, token_expires, tokens, cert_identity, roles, scopes, "
                                           "lanes, ops_per_second, bytes_per_second, max_jobs_in_flight)",
                            config_setting_name(m)), -1;
        }
    }
    const config_setting_t *m = config_setting_get_member(e, "cert_identity");
    if (m) {
        const char *id = config_setting_get_string(m);
        *at = m;
        if (!id || !bw_auth_identity_ok(id))
            return snprintf(why, why_size, "cert_identity must be a string of 1 to %d ASCII characters '!' to '~' "
                                           "(a DNS name, a URI or a common name)", BW_AUTH_IDENTITY_MAX), -1;
        c->cert_identity = strdup(id);
    }
    if (parse_tokens(e, c, why, why_size, at)) return -1;
    if (!c->token_cnt && !c->cert_identity)
        return *at = e, snprintf(why, why_size, "needs token_sha256 (a string: printf %%s TOKEN | sha256sum), tokens, "
                                               "or cert_identity"), -1;
    m = config_setting_get_member(e, "roles");
    *at = m ? m : e;
    if (!m || !(config_setting_is_array(m) || config_setting_is_list(m)) || config_setting_length(m) == 0)
        return snprintf(why, why_size, "needs roles, a list of one or more of \"submit\", \"read\", \"admin\""), -1;
    for (int i = 0; i < config_setting_length(m); i++) {
        const char *r = config_setting_get_string_elem(m, i);
        int bit = -1;
        for (int k = 0; r && k < ROLE_CNT && bit < 0; k++)
            if (strcmp(r, role_names[k]) == 0) bit = k;
        if (bit < 0)
            return snprintf(why, why_size, "unknown role \"%.40s\" (submit, read or admin)", r ? r : "(not a string)"), -1;
        c->roles |= 1u << bit;
    }
    m = config_setting_get_member(e, "scopes");
    if (m) {
        *at = m;
        if (!(config_setting_is_array(m) || config_setting_is_list(m)))
            return snprintf(why, why_size, "scopes must be a list of \"TYPE:OP\" strings"), -1;
        if (!(c->roles & BW_ROLE_SUBMIT))
            return snprintf(why, why_size, "scopes limit the submit role, which this client does not have"), -1;
        if (c->roles & BW_ROLE_ADMIN)
            return snprintf(why, why_size, "an admin may submit every op, so scopes would not limit it: "
                                           "remove the scopes or the admin role"), -1;
        int n = config_setting_length(m);
        c->scopes = calloc((size_t)n + 1, sizeof(*c->scopes));
        for (int i = 0; i < n; i++) {
            const char *t = config_setting_get_string_elem(m, i);
            if (!t) return snprintf(why, why_size, "scopes must be a list of \"TYPE:OP\" strings"), -1;
            if (parse_scope(t, conf, &c->scopes[i], why, why_size)) return -1;
            c->scope_cnt++;
        }
    }
    m = config_setting_get_member(e, "lanes");
    if (m) {
        *at = m;
        if (!(config_setting_is_array(m) || config_setting_is_list(m)) || config_setting_length(m) == 0)
            return snprintf(why, why_size, "lanes must be a list of one or more lane names"), -1;
        if (c->roles & BW_ROLE_ADMIN)
            return snprintf(why, why_size, "an admin may use every lane, so lanes would not limit it: "
                                           "remove the lanes or the admin role"), -1;
        if (!(c->roles & BW_ROLE_SUBMIT))
            return snprintf(why, why_size, "lanes limit the submit role, which this client does not have"), -1;
        for (int i = 0; i < config_setting_length(m); i++) {
            const char *t = config_setting_get_string_elem(m, i);
            int lane = t && conf ? bw_config_lane(conf, t) : -1;
            if (!t || !t[0] || lane < 0)
                return snprintf(why, why_size, "lanes: \"%.40s\" is not a lane of the configuration (its lanes)",
                                t ? t : "(not a string)"), -1;
            c->lanes |= 1u << lane;
        }
    }
    if (parse_quota(e, "ops_per_second", 1e6, &c->quota.ops_per_second, at, why, why_size) ||
        parse_quota(e, "bytes_per_second", 1e12, &c->quota.bytes_per_second, at, why, why_size))
        return -1;
    double jobs = 0;
    if (parse_quota(e, "max_jobs_in_flight", 1e6, &jobs, at, why, why_size)) return -1;
    if (jobs != (int)jobs) return *at = config_setting_get_member(e, "max_jobs_in_flight"),
                                  snprintf(why, why_size, "max_jobs_in_flight must be a whole number"), -1;
    c->quota.max_jobs_in_flight = (int)jobs;
    if ((c->roles & BW_ROLE_SUBMIT) && !(c->roles & BW_ROLE_ADMIN) && c->scope_cnt == 0) {
        *at = e;
        return snprintf(why, why_size, "the submit role needs scopes, e.g. [\"pin:delete\"] (\"*:*\" for every "
                                       "object type and op)"), -1;
    }
    return 0;
}

bw_auth_set_t *bw_auth_load(const char *path, const bw_config_t *conf, char *errstr, size_t errstr_size) {
    config_t cf;
    config_init(&cf);
    bw_auth_set_t *s = calloc(1, sizeof(*s));
    s->path = strdup(path);
    atomic_init(&s->refs, 1);
    if (config_read_file(&cf, path) != CONFIG_TRUE) {
        if (config_error_type(&cf) == CONFIG_ERR_FILE_IO)
            bw_seterr(errstr, errstr_size, BW_ERR_INVALID, "%s: cannot read the clients file", path);
        else
            bw_seterr(errstr, errstr_size, BW_ERR_INVALID, "%s:%d: %s", path, config_error_line(&cf),
                      config_error_text(&cf));
        goto fail;
    }
    const config_setting_t *root = config_root_setting(&cf), *list = config_setting_get_member(root, "clients");
    for (int i = 0; i < config_setting_length(root); i++) {
        const config_setting_t *m = config_setting_get_elem(root, (unsigned)i);
        if (strcmp(config_setting_name(m), "clients")) {
            bw_seterr(errstr, errstr_size, BW_ERR_INVALID, "%s:%d: unknown key \"%s\" (the file holds clients = ( ... );)",
                      path, line_of(m), config_setting_name(m));
            goto fail;
        }
    }
    if (!list || !config_setting_is_list(list)) {
        bw_seterr(errstr, errstr_size, BW_ERR_INVALID, "%s:%d: expected clients = ( { name = ...; ... }, ... );",
                  path, line_of(list));
        goto fail;
    }
    int n = config_setting_length(list);
    s->clients = calloc((size_t)n + 1, sizeof(*s->clients));
    for (int i = 0; i < n; i++) {
        const config_setting_t *e = config_setting_get_elem(list, (unsigned)i), *at = e;
        bw_auth_client_t *c = &s->clients[i];
        char why[400];
        s->client_cnt++;
        c->line = line_of(e);
        if (parse_client(e, conf, c, why, sizeof(why), &at)) {
            if (c->name)
                bw_seterr(errstr, errstr_size, BW_ERR_INVALID, "%s:%d: client \"%s\": %s", path, line_of(at), c->name, why);
            else
                bw_seterr(errstr, errstr_size, BW_ERR_INVALID, "%s:%d: client %d: %s", path, line_of(at), i + 1, why);
            goto fail;
        }
        for (int j = 0; j < i; j++) {
            const bw_auth_client_t *o = &s->clients[j];
            if (strcmp(o->name, c->name) == 0) {
                bw_seterr(errstr, errstr_size, BW_ERR_INVALID, "%s:%d: client \"%s\" is listed twice (also line %d)",
                          path, c->line, c->name, o->line);
                goto fail;
            }
            for (int a = 0; a < o->token_cnt; a++)
                for (int b = 0; b < c->token_cnt; b++)
                    if (memcmp(o->tokens[a].digest, c->tokens[b].digest, BW_AUTH_DIGEST_LEN) == 0) {
                        bw_seterr(errstr, errstr_size, BW_ERR_INVALID,
                                  "%s:%d: client \"%s\" has the same token as client \"%s\" (line %d): every client "
                                  "needs a token of its own", path, c->line, c->name, o->name, o->line);
                        goto fail;
                    }
            if (o->cert_identity && c->cert_identity && strcmp(o->cert_identity, c->cert_identity) == 0) {
                bw_seterr(errstr, errstr_size, BW_ERR_INVALID,
                          "%s:%d: client \"%s\" has the same cert_identity \"%s\" as client \"%s\" (line %d): a "
                          "certificate names one client", path, c->line, c->name, c->cert_identity, o->name, o->line);
                goto fail;
            }
        }
    }
    config_destroy(&cf);
    return s;
fail:
    config_destroy(&cf);
    set_free(s);
    return NULL;
}

/* ---- decisions ---------------------------------------------------------------------- */

const bw_auth_client_t *bw_auth_find(const bw_auth_set_t *set, const char *token, size_t len,
                                     const bw_auth_token_t **token_entry) {
    uint8_t digest[BW_AUTH_DIGEST_LEN];
    unsigned int dlen = 0;
    if (token_entry) *token_entry = NULL;
    if (!set || !token || !len || !EVP_Digest(token, len, digest, &dlen, EVP_sha256(), NULL) ||
        dlen != BW_AUTH_DIGEST_LEN)
        return NULL;
    const bw_auth_client_t *found = NULL;
    const bw_auth_token_t *entry = NULL;
    /* every token of every client, no early exit: the time does not say which one matched */
    for (int i = 0; i < set->client_cnt; i++)
        for (int k = 0; k < set->clients[i].token_cnt; k++)
            if (bw_auth_memcmp(set->clients[i].tokens[k].digest, digest, BW_AUTH_DIGEST_LEN) == 0) {
                found = &set->clients[i];
                entry = &found->tokens[k];
            }
    if (token_entry) *token_entry = entry;
    return found;
}

/* An identity is public (it is in the certificate), so a plain comparison will do. */
const bw_auth_client_t *bw_auth_find_identity(const bw_auth_set_t *set, const char *identity) {
    for (int i = 0; set && identity && i < set->client_cnt; i++)
        if (set->clients[i].cert_identity && strcmp(set->clients[i].cert_identity, identity) == 0)
            return &set->clients[i];
    return NULL;
}

int bw_auth_identity_ok(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > BW_AUTH_IDENTITY_MAX) return 0;
    for (; *s; s++)
        if (*s < '!' || *s > '~') return 0;
    return 1;
}

const char *bw_auth_bearer(const char *header, size_t *len) {
    if (!header || strncasecmp(header, "Bearer", 6) != 0 || (header[6] != ' ' && header[6] != '\t')) return NULL;
    const char *t = header + 6;
    while (*t == ' ' || *t == '\t') t++;
    size_t n = strlen(t);
    while (n && (t[n - 1] == ' ' || t[n - 1] == '\t')) n--;
    if (!n) return NULL;
    *len = n;
    return t;
}

int bw_auth_allows_op(const bw_auth_client_t *client, const char *type, int op) {
    if (!client || (client->roles & BW_ROLE_ADMIN)) return 1;
    if (!(client->roles & BW_ROLE_SUBMIT)) return 0;
    for (int i = 0; i < client->scope_cnt; i++) {
        const bw_auth_scope_t *sc = &client->scopes[i];
        if ((!sc->type || (type && strcmp(sc->type, type) == 0)) && (sc->op == 0 || sc->op == op)) return 1;
    }
    return 0;
}

int bw_auth_allows_lane(const bw_auth_client_t *client, int lane) {
    if (!client || (client->roles & BW_ROLE_ADMIN) || !client->lanes) return 1;
    return lane >= 0 && lane < 32 && (client->lanes >> lane & 1u);
}

void bw_auth_lanes_text(const bw_auth_client_t *client, const bw_config_t *conf, char *out, size_t size) {
    size_t n = 0;
    out[0] = '\0';
    for (int l = 0; client && client->lanes && l < conf->lane_cnt && n < size; l++)
        if (client->lanes >> l & 1u) n += (size_t)snprintf(out + n, size - n, "%s%s", n ? ", " : "", conf->lanes[l].name);
    if (!n) snprintf(out, size, "every lane");
}

void bw_auth_roles_text(unsigned roles, char *out, size_t size) {
    size_t n = 0;
    out[0] = '\0';
    for (int k = 0; k < ROLE_CNT; k++)
        if (roles & (1u << k) && n < size)
            n += (size_t)snprintf(out + n, size - n, "%s%s", n ? ", " : "", role_names[k]);
    if (!n) snprintf(out, size, "none");
}

void bw_auth_scopes_text(const bw_auth_client_t *client, char *out, size_t size) {
    size_t n = 0;
    out[0] = '\0';
    for (int i = 0; client && i < client->scope_cnt && n < size; i++) {
        const bw_auth_scope_t *sc = &client->scopes[i];
        n += (size_t)snprintf(out + n, size - n, "%s%s:%s", n ? ", " : "", sc->type ? sc->type : "*",
                              sc->op ? bw_op_name(sc->op) : "*");
    }
    if (!n) snprintf(out, size, "none");
}

unsigned bw_auth_decide(const bw_auth_set_t *set, const char *method, const char *url,
                        const char *authorization, const char *cert_identity, int open_metrics, int64_t now,
                        const bw_auth_client_t **client, char *why, size_t why_size) {
    *client = NULL;
    unsigned need = bw_endpoint_roles(method, url, open_metrics);
    if (!set || !need) return 0;
    const bw_auth_client_t *by_cert = bw_auth_find_identity(set, cert_identity), *c = by_cert;
    if (authorization || !cert_identity) { /* a token presented must be valid, whatever the certificate says */
        size_t len = 0;
        const char *token = bw_auth_bearer(authorization, &len);
        if (!token) {
            snprintf(why, why_size, "%s", authorization ? "the Authorization header is not \"Bearer TOKEN\""
                                                        : "no credential: send Authorization: Bearer TOKEN");
            return 401;
        }
        const bw_auth_token_t *entry;
        if (!(c = bw_auth_find(set, token, len, &entry))) {
            snprintf(why, why_size, "unknown token");
            return 401;
        }
        if (entry->expires && now >= entry->expires) {
            char when[32];
            time_t t = (time_t)entry->expires;
            struct tm tm;
            strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
            snprintf(why, why_size, "the token expired at %s: ask for a new one", when);
            return 401;
        }
        if (by_cert && by_cert != c) {
            snprintf(why, why_size, "the client certificate is client \"%s\"'s and the token client \"%s\"'s: "
                                    "send one client's credentials", by_cert->name, c->name);
            return 401;
        }
    } else if (!c) {
        snprintf(why, why_size, "the client certificate's identity \"%.255s\" is no client's cert_identity", cert_identity);
        return 401;
    }
    *client = c;
    if (c->roles & need) return 0;
    char needs[64], has[64];
    bw_auth_roles_text(need & ~(unsigned)BW_ROLE_ADMIN ? need & ~(unsigned)BW_ROLE_ADMIN : need, needs, sizeof(needs));
    bw_auth_roles_text(c->roles, has, sizeof(has));
    snprintf(why, why_size, "%.8s %.200s needs the %s role; client \"%s\" has %s", method, url, needs, c->name, has);
    return 403;
}

static int rejection_cmp(const void *a, const void *b) {
    uint32_t x = ((const bw_rejection_t *)a)->index, y = ((const bw_rejection_t *)b)->index;
    return x < y ? -1 : x > y;
}

size_t bw_auth_refuse_ops(const bw_auth_client_t *client, const Bulkwrite__V1__BatchWriteRequest *req,
                          bw_op_route_t *routes, bw_rejection_t **rejected, size_t *rejected_cnt, bw_arena_t *arena) {
    if (!client || (client->roles & BW_ROLE_ADMIN)) return 0;
    size_t refused = 0;
    for (size_t i = 0; i < req->n_ops; i++)
        refused += routes[i].shard >= 0 && !bw_auth_allows_op(client, req->ops[i]->object_type, (int)req->ops[i]->op);
    if (!refused) return 0;
    char scopes[256], text[512];
    bw_auth_scopes_text(client, scopes, sizeof(scopes));
    bw_rejection_t *all = bw_arena_alloc(arena, (*rejected_cnt + refused) * sizeof(*all));
    if (*rejected_cnt) memcpy(all, *rejected, *rejected_cnt * sizeof(*all));
    size_t n = *rejected_cnt;
    const char *last_type = NULL, *reason = NULL;
    int last_op = -1;
    for (size_t i = 0; i < req->n_ops; i++) {
        const Bulkwrite__V1__Op *op = req->ops[i];
        if (routes[i].shard < 0 || bw_auth_allows_op(client, op->object_type, (int)op->op)) continue;
        routes[i].shard = -1;
        if (!reason || (int)op->op != last_op || strcmp(op->object_type, last_type)) { /* one text per (type, op) run */
            int len = snprintf(text, sizeof(text), "forbidden: client \"%s\" may not %s %s (its scopes: %s)",
                               client->name, bw_op_name((int)op->op), op->object_type, scopes);
            reason = bw_arena_strndup(arena, text, (size_t)len < sizeof(text) ? (size_t)len : sizeof(text) - 1);
            last_type = op->object_type;
            last_op = (int)op->op;
        }
        all[n++] = (bw_rejection_t){(uint32_t)i, reason, 0};
    }
    qsort(all, n, sizeof(*all), rejection_cmp);
    *rejected = all;
    *rejected_cnt = n;
    return refused;
}

/* ---- the live set ------------------------------------------------------------------- */

struct bw_auth {
    pthread_mutex_t mu; /* guards cur while a reference is taken or it is swapped */
    bw_auth_set_t *cur; /* NULL: no clients file */
    char *path;         /* the clients file, resolved; NULL: none */
};

char *bw_auth_path(const bw_config_t *conf) { return bw_config_file(conf, conf->proxy_auth_clients_file); }

static void log_set(const bw_auth_set_t *s, const char *what) {
    int roles[ROLE_CNT] = {0};
    for (int i = 0; i < s->client_cnt; i++)
        for (int k = 0; k < ROLE_CNT; k++) roles[k] += !!(s->clients[i].roles & (1u << k));
    int certs = 0;
    for (int i = 0; i < s->client_cnt; i++) certs += s->clients[i].cert_identity != NULL;
    bw_info(COMPONENT, "%s %s: %d clients (%d submit, %d read, %d admin; %d with a cert_identity)", what, s->path,
            s->client_cnt, roles[0], roles[1], roles[2], certs);
    /* a token about to lapse is a page tomorrow: say so while there is time to rotate it */
    int64_t now = (int64_t)time(NULL);
    for (int i = 0; i < s->client_cnt; i++)
        for (int k = 0; k < s->clients[i].token_cnt; k++) {
            int64_t exp = s->clients[i].tokens[k].expires;
            if (!exp || exp - now > 7 * 86400) continue;
            char when[32];
            time_t t = (time_t)exp;
            struct tm tm;
            strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
            bw_warn(COMPONENT, "client \"%s\": token %d of %d %s %s", s->clients[i].name, k + 1,
                    s->clients[i].token_cnt, exp <= now ? "expired at" : "expires at", when);
        }
}

int bw_auth_is_loopback(const char *address) {
    struct in_addr v4;
    struct in6_addr v6;
    if (strcasecmp(address, "localhost") == 0) return 1;
    if (inet_pton(AF_INET, address, &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, address, &v6) != 1) return 0; /* a name or a wildcard: may be anything */
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return 1;
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
}

int bw_auth_check_open(const bw_config_t *conf, char *err, size_t err_size) {
    if (conf->proxy_auth_clients_file[0]) return 0;
    const char *key = "proxy.listen_address", *address = conf->proxy_listen_address;
    if (bw_auth_is_loopback(address) && conf->proxy_admin_port) {
        key = "proxy.admin_listen_address";
        address = conf->proxy_admin_listen_address;
    }
    if (bw_auth_is_loopback(address)) return 0;
    if (conf->proxy_auth_allow_open) {
        snprintf(err, err_size, "%s \"%s\" is not a loopback address and proxy.auth.clients_file is not set: the API, "
                 "shard control included, is open to anyone who reaches it (proxy.auth.allow_open = true)", key, address);
        return 1;
    }
    snprintf(err, err_size, "%s \"%s\" is not a loopback address and proxy.auth.clients_file is not set: the API, "
             "shard control included, would be open to anyone who reaches it. Set proxy.auth.clients_file "
             "(docs/security.md), listen on 127.0.0.1, or set proxy.auth.allow_open = true to serve it open on "
             "purpose", key, address);
    return -1;
}

bw_auth_t *bw_auth_start(const bw_config_t *conf, char *errstr, size_t errstr_size) {
    char open_why[512];
    int open = bw_auth_check_open(conf, open_why, sizeof(open_why));
    if (open < 0) return snprintf(errstr, errstr_size, "%s", open_why), NULL;
    bw_auth_t *a = calloc(1, sizeof(*a));
    pthread_mutex_init(&a->mu, NULL);
    a->path = bw_auth_path(conf);
    if (!a->path) {
        if (open) bw_warn(COMPONENT, "%s", open_why);
        else bw_warn(COMPONENT, "proxy.auth.clients_file is not set: the HTTP API is open to callers on this host "
                                "(loopback only), and every caller is admin (docs/security.md)");
        return a;
    }
    char why[1024];
    if (!(a->cur = bw_auth_load(a->path, conf, why, sizeof(why)))) {
        snprintf(errstr, errstr_size, "proxy.auth.clients_file: %s", why);
        bw_auth_stop(a);
        return NULL;
    }
    log_set(a->cur, "clients loaded from");
    return a;
}

int bw_auth_reload(bw_auth_t *a, const bw_config_t *conf) {
    if (!a->path) return 0;
    char err[1024];
    bw_auth_set_t *s = bw_auth_load(a->path, conf, err, sizeof(err));
    if (!s) {
        bw_error(COMPONENT, "SIGHUP: clients file not reloaded, the clients loaded before stay: %s", err);
        return -1;
    }
    pthread_mutex_lock(&a->mu);
    bw_auth_set_t *old = a->cur;
    a->cur = s;
    pthread_mutex_unlock(&a->mu);
    bw_auth_release(old);
    log_set(s, "SIGHUP: clients reloaded from");
    return 0;
}

bw_auth_set_t *bw_auth_acquire(bw_auth_t *a) {
    pthread_mutex_lock(&a->mu);
    bw_auth_set_t *s = a->cur;
    if (s) atomic_fetch_add(&s->refs, 1);
    pthread_mutex_unlock(&a->mu);
    return s;
}

void bw_auth_release(bw_auth_set_t *s) {
    if (s && atomic_fetch_sub(&s->refs, 1) == 1) set_free(s);
}

static int line_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

char *bw_auth_credentials(bw_auth_t *a) {
    bw_auth_set_t *s = bw_auth_acquire(a);
    size_t n = 0, cap = 0, len = 1;
    for (int i = 0; s && i < s->client_cnt; i++) cap += (size_t)s->clients[i].token_cnt + 1;
    char **lines = calloc(cap + 1, sizeof(*lines));
    for (int i = 0; lines && s && i < s->client_cnt; i++) {
        const bw_auth_client_t *c = &s->clients[i];
        unsigned char d[SHA256_DIGEST_LENGTH];
        for (int t = 0; t <= c->token_cnt; t++) {
            const unsigned char *digest = t < c->token_cnt ? c->tokens[t].digest : NULL;
            if (!digest && !c->cert_identity) continue;
            if (!digest) digest = SHA256((const unsigned char *)c->cert_identity, strlen(c->cert_identity), d);
            char line[200];
            int l = snprintf(line, sizeof(line), "%c:", t < c->token_cnt ? 't' : 'c');
            for (int k = 0; k < 8; k++) l += snprintf(line + l, sizeof(line) - (size_t)l, "%02x", digest[k]);
            snprintf(line + l, sizeof(line) - (size_t)l, " %s", c->name);
            if ((lines[n] = strdup(line))) len += strlen(lines[n++]) + 1;
        }
    }
    bw_auth_release(s);
    char *out = malloc(len);
    if (out) {
        qsort(lines, n, sizeof(*lines), line_cmp);
        char *p = out;
        *p = '\0';
        for (size_t i = 0; i < n; i++) p += sprintf(p, "%s\n", lines[i]);
    }
    for (size_t i = 0; i < n; i++) free(lines[i]);
    free(lines);
    return out;
}

void bw_auth_stop(bw_auth_t *a) {
    if (!a) return;
    bw_auth_release(a->cur);
    pthread_mutex_destroy(&a->mu);
    free(a->path);
    free(a);
}
