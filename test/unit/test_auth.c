/* test_auth.c — the proxy's clients file, token lookup, roles per endpoint and scopes
 * per (object type, op) (proxy/auth.h), and the tools' token (common/token.h). The
 * digests below are `printf %s TOKEN | sha256sum`, an implementation of SHA-256 other
 * than the proxy's. */
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/sha.h>

#include "auth.h"
#include "helpers.h"
#include "request.h"
#include "shard.h"
#include "tls.h"
#include "token.h"

#define ADMIN_SHA "10a4c7c9fc5206d6f36dc6944a81bb6f4a3cb0e25014ae3b12e6c3e52712292a" /* admin-token */
#define FEED_SHA "b40f19644925e321aeb2c2f06bd0351c61a6ff91159066ad21832164bd9b3e83"  /* feed-token */
#define SPAM_SHA "795c6db68dfbfabe29f5dd2c2c2f3fb7990ac1dd370c32e7577a5e3160a44e5d"  /* spam-token */
#define NOW ((int64_t)1796083200) /* 2026-12-01T00:00:00Z: the time of the decisions */
#define READER_SHA "ba5005a40cf5212e4ac0190104cc127edab013294bb71279a975b27a80982d45" /* reader-token */

static const char *const good =
    "# test clients\n"
    "clients = (\n"
    "  { name = \"sre\"; token_sha256 = \"" ADMIN_SHA "\"; roles = [\"admin\"]; },\n"
    "  { name = \"feed\"; token_sha256 = \"" FEED_SHA "\"; roles = [\"submit\", \"read\"];\n"
    "    scopes = [\"pin:create\", \"board:*\"]; },\n"
    "  { name = \"spam-cleanup\"; token_sha256 = \"" SPAM_SHA "\"; roles = [\"submit\"]; scopes = [\"pin:delete\"]; },\n"
    "  { name = \"dash\"; token_sha256 = \"" READER_SHA "\"; roles = [\"read\"]; }\n"
    ");\n";

static bw_auth_set_t *load_text(const char *text, const bw_config_t *conf, char *err, size_t size) {
    char *path = t_write_temp(text);
    bw_auth_set_t *s = bw_auth_load(path, conf, err, size);
    t_unlink_free(path);
    return s;
}

/* The load must fail with an error that contains every one of the needles. */
static void load_fails(const char *text, const char *needle1, const char *needle2) {
    bw_config_t *conf = t_ref_config();
    char err[1024] = "";
    bw_auth_set_t *s = load_text(text, conf, err, sizeof(err));
    ck_assert_msg(s == NULL, "loaded, expected an error with \"%s\"", needle1);
    ck_assert_msg(strstr(err, needle1), "error \"%s\" lacks \"%s\"", err, needle1);
    if (needle2) ck_assert_msg(strstr(err, needle2), "error \"%s\" lacks \"%s\"", err, needle2);
    bw_config_destroy(conf);
}

START_TEST(parse_good) {
    bw_config_t *conf = t_ref_config();
    char err[1024];
    bw_auth_set_t *s = load_text(good, conf, err, sizeof(err));
    ck_assert_msg(s != NULL, "%s", err);
    ck_assert_int_eq(s->client_cnt, 4);
    ck_assert_str_eq(s->clients[0].name, "sre");
    ck_assert_uint_eq(s->clients[0].roles, BW_ROLE_ADMIN);
    ck_assert_int_eq(s->clients[0].line, 3);
    ck_assert_uint_eq(s->clients[1].roles, BW_ROLE_SUBMIT | BW_ROLE_READ);
    ck_assert_int_eq(s->clients[1].scope_cnt, 2);
    ck_assert_str_eq(s->clients[1].scopes[0].type, "pin");
    ck_assert_int_eq(s->clients[1].scopes[0].op, BW_OP_CREATE);
    ck_assert_int_eq(s->clients[1].scopes[1].op, 0);
    ck_assert_uint_eq(s->clients[0].tokens[0].digest[0], 0x10);
    ck_assert_uint_eq(s->clients[0].tokens[0].digest[31], 0x2a);
    char text[128];
    bw_auth_scopes_text(&s->clients[1], text, sizeof(text));
    ck_assert_str_eq(text, "pin:create, board:*");
    bw_auth_roles_text(s->clients[1].roles, text, sizeof(text));
    ck_assert_str_eq(text, "submit, read");
    bw_auth_release(s);
    bw_config_destroy(conf);
}
END_TEST

START_TEST(parse_errors) {
    /* bad hex: a digit that is not hex, and a short digest; the line and the client named */
    char bad[2048];
    snprintf(bad, sizeof(bad), "clients = (\n  { name = \"a\"; roles = [\"read\"];\n    token_sha256 = \"%.63sg\"; }\n);\n",
             ADMIN_SHA);
    load_fails(bad, ":3: client \"a\": token_sha256 must be 64 hex digits", "not all hex digits");
    load_fails("clients = ( { name = \"b\"; token_sha256 = \"abc\"; roles = [\"read\"]; } );\n",
               ":1: client \"b\": token_sha256 must be 64 hex digits", "has 3 characters");
    load_fails("clients = ( { name = \"c\"; roles = [\"read\"]; } );\n", "client \"c\": needs token_sha256", NULL);
    /* quotas: numbers in range, jobs whole */
    snprintf(bad, sizeof(bad), "clients = (\n { name = \"q\"; token_sha256 = \"%s\"; roles = [\"admin\"];\n"
             " ops_per_second = -5; }\n);\n", ADMIN_SHA);
    load_fails(bad, ":3: client \"q\": ops_per_second -5 is out of range: 0 (no limit) to 1000000", NULL);
    snprintf(bad, sizeof(bad), "clients = (\n { name = \"q\"; token_sha256 = \"%s\"; roles = [\"admin\"];\n"
             " bytes_per_second = \"lots\"; }\n);\n", ADMIN_SHA);
    load_fails(bad, ":3: client \"q\": bytes_per_second must be a number (0 = no limit)", NULL);
    snprintf(bad, sizeof(bad), "clients = (\n { name = \"q\"; token_sha256 = \"%s\"; roles = [\"admin\"];\n"
             " max_jobs_in_flight = 2.5; }\n);\n", ADMIN_SHA);
    load_fails(bad, ":3: client \"q\": max_jobs_in_flight must be a whole number", NULL);
    /* unknown role */
    snprintf(bad, sizeof(bad), "clients = (\n { name = \"w\"; token_sha256 = \"%s\";\n roles = [\"read\", \"writer\"]; }\n);\n",
             ADMIN_SHA);
    load_fails(bad, ":3: client \"w\": unknown role \"writer\"", NULL);
    /* duplicate token: both clients and the first one's line */
    snprintf(bad, sizeof(bad),
             "clients = (\n { name = \"one\"; token_sha256 = \"%s\"; roles = [\"read\"]; },\n"
             " { name = \"two\"; token_sha256 = \"%s\"; roles = [\"admin\"]; }\n);\n",
             ADMIN_SHA, ADMIN_SHA);
    load_fails(bad, ":3: client \"two\" has the same token as client \"one\" (line 2)", NULL);
    /* the same digest in upper case is the same token */
    char upper[65];
    for (int i = 0; i < 64; i++) upper[i] = (char)(ADMIN_SHA[i] >= 'a' ? ADMIN_SHA[i] - 32 : ADMIN_SHA[i]);
    upper[64] = '\0';
    snprintf(bad, sizeof(bad),
             "clients = (\n { name = \"one\"; token_sha256 = \"%s\"; roles = [\"read\"]; },\n"
             " { name = \"two\"; token_sha256 = \"%s\"; roles = [\"admin\"]; }\n);\n",
             ADMIN_SHA, upper);
    load_fails(bad, "client \"two\" has the same token as client \"one\"", NULL);
    /* duplicate name */
    snprintf(bad, sizeof(bad),
             "clients = (\n { name = \"one\"; token_sha256 = \"%s\"; roles = [\"read\"]; },\n"
             " { name = \"one\"; token_sha256 = \"%s\"; roles = [\"admin\"]; }\n);\n",
             ADMIN_SHA, FEED_SHA);
    load_fails(bad, ":3: client \"one\" is listed twice (also line 2)", NULL);
    /* scopes: unknown op, unknown type, malformed, missing for a submitter, on a reader */
    snprintf(bad, sizeof(bad), "clients = ( { name = \"s\"; token_sha256 = \"%s\"; roles = [\"submit\"];\n"
                               "  scopes = [\"pin:remove\"]; } );\n", SPAM_SHA);
    load_fails(bad, ":2: client \"s\": scope \"pin:remove\": unknown op \"remove\"", NULL);
    snprintf(bad, sizeof(bad), "clients = ( { name = \"s\"; token_sha256 = \"%s\"; roles = [\"submit\"]; "
                               "scopes = [\"pins:delete\"]; } );\n", SPAM_SHA);
    load_fails(bad, "unknown object type \"pins\"", NULL);
    snprintf(bad, sizeof(bad), "clients = ( { name = \"s\"; token_sha256 = \"%s\"; roles = [\"submit\"]; "
                               "scopes = [\"delete\"]; } );\n", SPAM_SHA);
    load_fails(bad, "scope \"delete\" is not TYPE:OP", NULL);
    snprintf(bad, sizeof(bad), "clients = ( { name = \"s\"; token_sha256 = \"%s\"; roles = [\"submit\"]; } );\n", SPAM_SHA);
    load_fails(bad, "client \"s\": the submit role needs scopes", NULL);
    snprintf(bad, sizeof(bad), "clients = ( { name = \"r\"; token_sha256 = \"%s\"; roles = [\"read\"]; "
                               "scopes = [\"pin:*\"]; } );\n", SPAM_SHA);
    load_fails(bad, "client \"r\": scopes limit the submit role", NULL);
    /* unknown keys, no roles, a bad name, a syntax error, a missing file */
    snprintf(bad, sizeof(bad), "clients = ( { name = \"k\"; token_sha256 = \"%s\"; roles = [\"read\"];\n"
                               "  scope = [\"pin:*\"]; } );\n", SPAM_SHA);
    load_fails(bad, ":2: client \"k\": unknown key \"scope\"", NULL);
    snprintf(bad, sizeof(bad), "clients = ( { name = \"k\"; token_sha256 = \"%s\"; roles = [ ]; } );\n", SPAM_SHA);
    load_fails(bad, "client \"k\": needs roles", NULL);
    snprintf(bad, sizeof(bad), "clients = ( { name = \"a b\"; token_sha256 = \"%s\"; roles = [\"read\"]; } );\n", SPAM_SHA);
    load_fails(bad, "client 1: name \"a b\"", NULL);
    load_fails("clients = ( { name = \"x\" ", ":1: syntax error", NULL);
    load_fails("client = ( );\n", "unknown key \"client\"", NULL);
    char err[256];
    ck_assert_ptr_null(bw_auth_load("/nonexistent/clients.conf", NULL, err, sizeof(err)));
    ck_assert_str_eq(err, "/nonexistent/clients.conf: cannot read the clients file");
}
END_TEST

static int compares, compare_len_ok;
static int counting_memcmp(const void *a, const void *b, size_t len) {
    compares++;
    compare_len_ok &= len == BW_AUTH_DIGEST_LEN;
    return CRYPTO_memcmp(a, b, len);
}

START_TEST(lookup) {
    char err[1024];
    bw_auth_set_t *s = load_text(good, NULL, err, sizeof(err));
    ck_assert_msg(s != NULL, "%s", err);
    const bw_auth_client_t *c = bw_auth_find(s, "spam-token", 10, NULL);
    ck_assert(c && strcmp(c->name, "spam-cleanup") == 0);
    c = bw_auth_find(s, "admin-token", 11, NULL);
    ck_assert(c && strcmp(c->name, "sre") == 0);
    ck_assert_ptr_null(bw_auth_find(s, "admin-token ", 12, NULL));
    ck_assert_ptr_null(bw_auth_find(s, "admin-toke", 10, NULL));
    ck_assert_ptr_null(bw_auth_find(s, "", 0, NULL));
    ck_assert_ptr_null(bw_auth_find(s, "10a4c7c9fc5206d6f36dc6944a81bb6f4a3cb0e25014ae3b12e6c3e52712292a", 64, NULL)); /* the digest is no token */
    /* the digest comparison is OpenSSL's constant-time one, and every client is compared,
     * over the whole digest, even when the first one matched */
    ck_assert_ptr_eq((void *)bw_auth_memcmp, (void *)CRYPTO_memcmp);
    bw_auth_memcmp = counting_memcmp;
    compares = 0, compare_len_ok = 1;
    c = bw_auth_find(s, "admin-token", 11, NULL);
    ck_assert(c && strcmp(c->name, "sre") == 0);
    ck_assert_int_eq(compares, 4);
    compares = 0;
    ck_assert_ptr_null(bw_auth_find(s, "nobody", 6, NULL));
    ck_assert_int_eq(compares, 4);
    ck_assert(compare_len_ok);
    bw_auth_memcmp = CRYPTO_memcmp;
    /* the header */
    size_t len = 0;
    const char *t = bw_auth_bearer("Bearer abc", &len);
    ck_assert(t && len == 3 && strncmp(t, "abc", 3) == 0);
    t = bw_auth_bearer("bearer   abc  ", &len);
    ck_assert(t && len == 3 && strncmp(t, "abc", 3) == 0);
    ck_assert_ptr_null(bw_auth_bearer("Basic YWJjOmRlZg==", &len));
    ck_assert_ptr_null(bw_auth_bearer("Bearer", &len));
    ck_assert_ptr_null(bw_auth_bearer("Bearer   ", &len));
    ck_assert_ptr_null(bw_auth_bearer("Bearerabc", &len));
    ck_assert_ptr_null(bw_auth_bearer(NULL, &len));
    bw_auth_release(s);
}
END_TEST


/* A submitter's lanes: only those it lists (by the configuration's names), every lane
 * without the key; an admin always; names checked against the configuration. */
START_TEST(client_lanes) {
    bw_config_t *conf = t_conf_variant_load("lanes = (", "lanes = ( { name = \"urgent\"; weight = 4; }, { name = \"bulk\"; }");
    char text[1024], err[1024] = "";
    snprintf(text, sizeof(text), "clients = ( { name = \"feed\"; token_sha256 = \"%s\"; roles = [\"submit\"];\n"
                                 "  scopes = [\"pin:create\"]; lanes = [\"bulk\", \"default\"]; },\n"
                                 "  { name = \"spam-cleanup\"; token_sha256 = \"%s\"; roles = [\"submit\"]; scopes = [\"pin:delete\"]; } );\n",
             FEED_SHA, SPAM_SHA);
    bw_auth_set_t *s = load_text(text, conf, err, sizeof(err));
    ck_assert_msg(s != NULL, "%s", err);
    const bw_auth_client_t *feed = &s->clients[0], *spam = &s->clients[1];
    ck_assert(bw_auth_allows_lane(feed, 0));  /* default */
    ck_assert(!bw_auth_allows_lane(feed, 1)); /* urgent */
    ck_assert(bw_auth_allows_lane(feed, 2));  /* bulk */
    for (int l = 0; l < 3; l++) ck_assert(bw_auth_allows_lane(spam, l) && bw_auth_allows_lane(NULL, l));
    char lanes[128];
    bw_auth_lanes_text(feed, conf, lanes, sizeof(lanes));
    ck_assert_str_eq(lanes, "default, bulk");
    bw_auth_lanes_text(spam, conf, lanes, sizeof(lanes));
    ck_assert_str_eq(lanes, "every lane");
    bw_auth_release(s);
    char bad[512];
    snprintf(bad, sizeof(bad), "clients = ( { name = \"f\"; token_sha256 = \"%s\"; roles = [\"submit\"]; "
                               "scopes = [\"pin:create\"]; lanes = [\"fast\"]; } );\n", FEED_SHA);
    char *path = t_write_temp(bad);
    ck_assert_ptr_null(bw_auth_load(path, conf, err, sizeof(err)));
    ck_assert_msg(strstr(err, "client \"f\": lanes: \"fast\" is not a lane of the configuration"), "%s", err);
    t_unlink_free(path);
    snprintf(bad, sizeof(bad), "clients = ( { name = \"a\"; token_sha256 = \"%s\"; roles = [\"admin\"]; "
                               "lanes = [\"bulk\"]; } );\n", ADMIN_SHA);
    path = t_write_temp(bad);
    ck_assert_ptr_null(bw_auth_load(path, conf, err, sizeof(err)));
    ck_assert_msg(strstr(err, "an admin may use every lane"), "%s", err);
    t_unlink_free(path);
    bw_config_destroy(conf);
}
END_TEST

START_TEST(scopes) {
    bw_auth_scope_t sc[3] = {{"pin", BW_OP_DELETE}, {"board", 0}, {NULL, BW_OP_CREATE}};
    bw_auth_client_t c = {.name = "x", .roles = BW_ROLE_SUBMIT, .scopes = sc, .scope_cnt = 1};
    /* pin:delete */
    ck_assert(bw_auth_allows_op(&c, "pin", BW_OP_DELETE));
    ck_assert(!bw_auth_allows_op(&c, "pin", BW_OP_CREATE));
    ck_assert(!bw_auth_allows_op(&c, "pin", BW_OP_UPDATE));
    ck_assert(!bw_auth_allows_op(&c, "board", BW_OP_DELETE));
    ck_assert(!bw_auth_allows_op(&c, "pi", BW_OP_DELETE));
    /* board:* */
    c.scopes = &sc[1];
    for (int op = BW_OP_CREATE; op <= BW_OP_DELETE; op++) ck_assert(bw_auth_allows_op(&c, "board", op));
    ck_assert(!bw_auth_allows_op(&c, "pin", BW_OP_CREATE));
    /* *:create */
    c.scopes = &sc[2];
    ck_assert(bw_auth_allows_op(&c, "pin", BW_OP_CREATE));
    ck_assert(bw_auth_allows_op(&c, "board", BW_OP_CREATE));
    ck_assert(!bw_auth_allows_op(&c, "pin", BW_OP_UPSERT));
    /* all three */
    c.scopes = sc, c.scope_cnt = 3;
    ck_assert(bw_auth_allows_op(&c, "pin", BW_OP_DELETE) && bw_auth_allows_op(&c, "board", BW_OP_UPDATE) &&
              bw_auth_allows_op(&c, "pin", BW_OP_CREATE) && !bw_auth_allows_op(&c, "pin", BW_OP_UPDATE));
    /* scopes need the submit role; an admin needs none; no clients file: everything */
    c.roles = BW_ROLE_READ;
    ck_assert(!bw_auth_allows_op(&c, "pin", BW_OP_DELETE));
    bw_auth_client_t admin = {.name = "sre", .roles = BW_ROLE_ADMIN};
    ck_assert(bw_auth_allows_op(&admin, "pin", BW_OP_UPSERT));
    ck_assert(bw_auth_allows_op(NULL, "pin", BW_OP_UPSERT));
}
END_TEST

START_TEST(ops_out_of_scope) {
    /* a spam-cleanup client (pin:delete) sends: create pin, delete pin, an invalid op,
     * delete board, create pin, delete pin */
    bw_config_t *conf = t_ref_config();
    bw_arena_t a;
    bw_arena_init(&a, 1 << 14);
    t_req_t r;
    t_req_init(&r, &a, 8);
    uint64_t owner = bw_id_make(3, 9, 1);
    Bulkwrite__V1__Op *o = t_op(&r, BW_OP_CREATE, "pin", bw_id_make(3, 1, 10), t_idstr(&r, owner));
    t_f_int(&r, o, "owner_id", 1);
    t_op(&r, BW_OP_DELETE, "pin", bw_id_make(3, 1, 11), "");
    t_op(&r, BW_OP_DELETE, "pin", bw_id_make(3, 2, 12), ""); /* type id 2 is no pin: invalid */
    t_op(&r, BW_OP_DELETE, "board", bw_id_make(3, 2, 13), "");
    o = t_op(&r, BW_OP_CREATE, "pin", bw_id_make(3, 1, 14), t_idstr(&r, owner));
    t_f_int(&r, o, "owner_id", 1);
    t_op(&r, BW_OP_DELETE, "pin", bw_id_make(3, 1, 15), "");
    bw_op_route_t routes[6];
    bw_rejection_t *rej;
    size_t cnt = bw_request_validate(conf, r.req, BW_FMT_PROTOBUF, &a, routes, &rej);
    ck_assert_uint_eq(cnt, 1);
    bw_auth_scope_t sc = {"pin", BW_OP_DELETE};
    bw_auth_client_t spam = {.name = "spam-cleanup", .roles = BW_ROLE_SUBMIT, .scopes = &sc, .scope_cnt = 1};
    ck_assert_uint_eq(bw_auth_refuse_ops(&spam, r.req, routes, &rej, &cnt, &a), 3);
    ck_assert_uint_eq(cnt, 4);
    /* in request order; the invalid op keeps its own reason */
    ck_assert_uint_eq(rej[0].index, 0);
    ck_assert_str_eq(rej[0].reason, "forbidden: client \"spam-cleanup\" may not create pin (its scopes: pin:delete)");
    ck_assert_uint_eq(rej[1].index, 2);
    ck_assert_ptr_null(strstr(rej[1].reason, "forbidden"));
    ck_assert_uint_eq(rej[2].index, 3);
    ck_assert_str_eq(rej[2].reason, "forbidden: client \"spam-cleanup\" may not delete board (its scopes: pin:delete)");
    ck_assert_uint_eq(rej[3].index, 4);
    ck_assert_str_eq(rej[3].reason, rej[0].reason);
    ck_assert(!rej[0].retryable && !rej[2].retryable);
    /* refused ops are out of the batches; the allowed deletes are still routed */
    ck_assert(routes[0].shard == -1 && routes[3].shard == -1 && routes[4].shard == -1);
    ck_assert(routes[1].shard == 3 && routes[5].shard == 3);
    /* an admin, and no clients file, refuse nothing */
    bw_auth_client_t admin = {.name = "sre", .roles = BW_ROLE_ADMIN};
    size_t before = cnt;
    ck_assert_uint_eq(bw_auth_refuse_ops(&admin, r.req, routes, &rej, &cnt, &a), 0);
    ck_assert_uint_eq(bw_auth_refuse_ops(NULL, r.req, routes, &rej, &cnt, &a), 0);
    ck_assert_uint_eq(cnt, before);
    bw_arena_destroy(&a);
    bw_config_destroy(conf);
}
END_TEST

START_TEST(decisions) {
    char err[1024], why[320];
    bw_auth_set_t *s = load_text(good, NULL, err, sizeof(err));
    ck_assert_msg(s != NULL, "%s", err);
    const bw_auth_client_t *c;
    /* open endpoints */
    ck_assert_uint_eq(bw_auth_decide(s, "GET", "/healthz", NULL, NULL, 0, NOW, &c, why, sizeof(why)), 0);
    ck_assert_uint_eq(bw_auth_decide(s, "GET", "/metrics", NULL, NULL, 1, NOW, &c, why, sizeof(why)), 0);
    ck_assert_uint_eq(bw_auth_decide(s, "GET", "/readyz", NULL, NULL, 1, NOW, &c, why, sizeof(why)), 0);
    ck_assert_uint_eq(bw_auth_decide(s, "GET", "/metrics", NULL, NULL, 0, NOW, &c, why, sizeof(why)), 401);
    ck_assert_uint_eq(bw_auth_decide(s, "GET", "/metrics", "Bearer reader-token", NULL, 0, NOW, &c, why, sizeof(why)), 0);
    ck_assert_uint_eq(bw_auth_decide(s, "GET", "/metrics", "Bearer spam-token", NULL, 0, NOW, &c, why, sizeof(why)), 403);
    /* 401: no credential, another scheme, an unknown token; even for unknown endpoints */
    ck_assert_uint_eq(bw_auth_decide(s, "POST", "/v1/batches", NULL, NULL, 1, NOW, &c, why, sizeof(why)), 401);
    ck_assert_str_eq(why, "no credential: send Authorization: Bearer TOKEN");
    ck_assert_uint_eq(bw_auth_decide(s, "POST", "/v1/batches", "Basic eDp5", NULL, 1, NOW, &c, why, sizeof(why)), 401);
    ck_assert_uint_eq(bw_auth_decide(s, "POST", "/v1/batches", "Bearer wrong", NULL, 1, NOW, &c, why, sizeof(why)), 401);
    ck_assert_str_eq(why, "unknown token");
    ck_assert_ptr_null(c);
    ck_assert_uint_eq(bw_auth_decide(s, "GET", "/nowhere", NULL, NULL, 1, NOW, &c, why, sizeof(why)), 401);
    /* roles */
    ck_assert_uint_eq(bw_auth_decide(s, "POST", "/v1/batches", "Bearer dash-token", NULL, 1, NOW, &c, why, sizeof(why)), 401);
    ck_assert_uint_eq(bw_auth_decide(s, "POST", "/v1/batches", "Bearer reader-token", NULL, 1, NOW, &c, why, sizeof(why)), 403);
    ck_assert_str_eq(why, "POST /v1/batches needs the submit role; client \"dash\" has read");
    ck_assert(c && strcmp(c->name, "dash") == 0);
    ck_assert_uint_eq(bw_auth_decide(s, "GET", "/v1/shards", "Bearer reader-token", NULL, 1, NOW, &c, why, sizeof(why)), 0);
    ck_assert_uint_eq(bw_auth_decide(s, "GET", "/v1/jobs/0123", "Bearer reader-token", NULL, 1, NOW, &c, why, sizeof(why)), 0);
    ck_assert_uint_eq(bw_auth_decide(s, "POST", "/v1/batches", "Bearer spam-token", NULL, 1, NOW, &c, why, sizeof(why)), 0);
    ck_assert(c && strcmp(c->name, "spam-cleanup") == 0);
    ck_assert_uint_eq(bw_auth_decide(s, "GET", "/v1/jobs/0123", "Bearer spam-token", NULL, 1, NOW, &c, why, sizeof(why)), 403);
    ck_assert_uint_eq(bw_auth_decide(s, "POST", "/v1/shards/3/pause", "Bearer feed-token", NULL, 1, NOW, &c, why, sizeof(why)), 403);
    ck_assert_str_eq(why, "POST /v1/shards/3/pause needs the admin role; client \"feed\" has submit, read");
    ck_assert_uint_eq(bw_auth_decide(s, "POST", "/v1/shards/3/pause", "Bearer admin-token", NULL, 1, NOW, &c, why, sizeof(why)), 0);
    /* server control is shard control for many shards: admin only */
    ck_assert_uint_eq(bw_auth_decide(s, "POST", "/v1/servers/mysql-a/pause", "Bearer feed-token", NULL, 1, NOW, &c, why,
                                     sizeof(why)), 403);
    ck_assert_uint_eq(bw_auth_decide(s, "POST", "/v1/servers/mysql-a/pause", "Bearer admin-token", NULL, 1, NOW, &c, why,
                                     sizeof(why)), 0);
    ck_assert_uint_eq(bw_auth_decide(s, "POST", "/v1/batches", "Bearer admin-token", NULL, 1, NOW, &c, why, sizeof(why)), 0);
    ck_assert_uint_eq(bw_auth_decide(s, "GET", "/v1/shards", "Bearer admin-token", NULL, 1, NOW, &c, why, sizeof(why)), 0);
    /* an authenticated client reaches unknown endpoints (404 there) */
    ck_assert_uint_eq(bw_auth_decide(s, "GET", "/nowhere", "Bearer spam-token", NULL, 1, NOW, &c, why, sizeof(why)), 0);
    /* no clients file: open, no client */
    ck_assert_uint_eq(bw_auth_decide(NULL, "POST", "/v1/shards/3/pause", NULL, NULL, 0, NOW, &c, why, sizeof(why)), 0);
    ck_assert_ptr_null(c);
    bw_auth_release(s);
}
END_TEST

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

START_TEST(reload_keeps_old_on_error) {
    char *path = t_write_temp(good);
    /* a config naming the file (the reference config has none) */
    char repl[512];
    snprintf(repl, sizeof(repl), "clients_file = \"%s\";", path);
    bw_config_t *conf = t_conf_variant_load("clients_file = \"\";", repl);
    char err[1024];
    bw_auth_t *a = bw_auth_start(conf, err, sizeof(err));
    ck_assert_msg(a != NULL, "%s", err);
    bw_auth_set_t *held = bw_auth_acquire(a); /* a request in flight */
    ck_assert_ptr_nonnull(bw_auth_find(held, "spam-token", 10, NULL));
    /* a broken file: the loaded clients stay */
    write_file(path, "clients = ( { name = \"x\"; } );\n");
    ck_assert_int_eq(bw_auth_reload(a, conf), -1);
    bw_auth_set_t *s = bw_auth_acquire(a);
    ck_assert_ptr_eq(s, held);
    bw_auth_release(s);
    /* a good one: the new token works, the removed one does not; the held set is intact */
    char text[1024];
    snprintf(text, sizeof(text), "clients = ( { name = \"new\"; token_sha256 = \"%s\"; roles = [\"admin\"]; } );\n",
             FEED_SHA);
    write_file(path, text);
    ck_assert_int_eq(bw_auth_reload(a, conf), 0);
    s = bw_auth_acquire(a);
    ck_assert_ptr_nonnull(bw_auth_find(s, "feed-token", 10, NULL));
    ck_assert_ptr_null(bw_auth_find(s, "spam-token", 10, NULL));
    bw_auth_release(s);
    ck_assert_str_eq(bw_auth_find(held, "spam-token", 10, NULL)->name, "spam-cleanup");
    bw_auth_release(held);
    bw_auth_stop(a);
    /* a file that does not load stops the start */
    write_file(path, "clients = ( { name = \"x\"; } );\n");
    ck_assert_ptr_null(bw_auth_start(conf, err, sizeof(err)));
    ck_assert_msg(strstr(err, "needs token_sha256"), "%s", err);
    bw_config_destroy(conf);
    /* no file: open */
    conf = t_ref_config();
    a = bw_auth_start(conf, err, sizeof(err));
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_null(bw_auth_acquire(a));
    ck_assert_int_eq(bw_auth_reload(a, conf), 0);
    bw_auth_stop(a);
    bw_config_destroy(conf);
    t_unlink_free(path);
}
END_TEST

/* Which client each credential is, for the fleet's check (fleet.h): sorted lines. */
START_TEST(credentials_listed) {
    char *path = t_write_temp("");
    char text[1024];
    snprintf(text, sizeof(text),
             "clients = ( { name = \"feed\"; token_sha256 = \"%s\"; roles = [\"read\"]; },\n"
             "  { name = \"ops\"; cert_identity = \"ops.internal\"; roles = [\"admin\"]; } );\n", FEED_SHA);
    write_file(path, text);
    char repl[512];
    snprintf(repl, sizeof(repl), "clients_file = \"%s\";", path);
    bw_config_t *conf = t_conf_variant_load("clients_file = \"\";", repl);
    char err[1024];
    bw_auth_t *a = bw_auth_start(conf, err, sizeof(err));
    ck_assert_msg(a != NULL, "%s", err);
    char *creds = bw_auth_credentials(a), want[256], cert[17];
    unsigned char d[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)"ops.internal", strlen("ops.internal"), d);
    for (int i = 0; i < 8; i++) snprintf(cert + 2 * i, 3, "%02x", d[i]);
    /* c: sorts before t:; 16 hex digits of the identity's SHA-256, of the token's */
    snprintf(want, sizeof(want), "c:%s ops\nt:%.16s feed\n", cert, FEED_SHA);
    ck_assert_str_eq(creds, want);
    free(creds);
    bw_auth_stop(a);
    bw_config_destroy(conf);
    /* open: none */
    conf = t_ref_config();
    a = bw_auth_start(conf, err, sizeof(err));
    creds = bw_auth_credentials(a);
    ck_assert_str_eq(creds, "");
    free(creds);
    bw_auth_stop(a);
    bw_config_destroy(conf);
    t_unlink_free(path);
}
END_TEST

START_TEST(relative_path) {
    /* a relative clients_file is read from the configuration file's folder */
    char *path = t_write_temp(good);
    const char *base = strrchr(path, '/') + 1;
    char repl[512];
    snprintf(repl, sizeof(repl), "clients_file = \"%s\";", base);
    bw_config_t *conf = t_conf_variant_load("clients_file = \"\";", repl);
    char err[1024];
    bw_auth_t *a = bw_auth_start(conf, err, sizeof(err));
    ck_assert_msg(a != NULL, "%s", err);
    bw_auth_set_t *s = bw_auth_acquire(a);
    ck_assert_str_eq(s->path, path);
    bw_auth_release(s);
    bw_auth_stop(a);
    bw_config_destroy(conf);
    t_unlink_free(path);
}
END_TEST

START_TEST(example_file) {
    /* conf/clients.example.conf loads against the reference config, and its tokens are
     * the ones its comment names */
    bw_config_t *conf = t_ref_config();
    char err[1024];
    bw_auth_set_t *s = bw_auth_load("conf/clients.example.conf", conf, err, sizeof(err));
    ck_assert_msg(s != NULL, "%s", err);
    ck_assert_int_eq(s->client_cnt, 4);
    const bw_auth_client_t *c = bw_auth_find(s, "example-spam-token", 18, NULL);
    ck_assert(c && strcmp(c->name, "spam-cleanup") == 0 && bw_auth_allows_op(c, "pin", BW_OP_DELETE) &&
              !bw_auth_allows_op(c, "pin", BW_OP_CREATE));
    ck_assert_str_eq(bw_auth_find(s, "example-sre-token", 17, NULL)->name, "sre");
    ck_assert_str_eq(bw_auth_find(s, "example-feed-token", 18, NULL)->name, "feed-ingest");
    ck_assert_str_eq(bw_auth_find(s, "example-dash-token", 18, NULL)->name, "dashboard");
    const bw_auth_token_t *next;
    ck_assert_str_eq(bw_auth_find(s, "example-dash-token-2027", 23, &next)->name, "dashboard");
    ck_assert_int_eq(next->expires, 0);
    ck_assert_int_eq(s->clients[3].tokens[0].expires, 1811808000); /* date -u -d 2027-06-01 +%s */
    const bw_auth_client_t *feed = bw_auth_find(s, "example-feed-token", 18, NULL);
    ck_assert(feed->quota.ops_per_second == 50000 && feed->quota.bytes_per_second == 20e6 &&
              feed->quota.max_jobs_in_flight == 8);
    ck_assert(c->quota.ops_per_second == 0 && c->quota.max_jobs_in_flight == 0); /* absent: no limit */
    bw_auth_release(s);
    bw_config_destroy(conf);
}
END_TEST

START_TEST(tool_token) {
    char err[256], *tok, *hdr;
    unsetenv("BW_TOKEN");
    ck_assert_int_eq(bw_token_load(NULL, &tok, err, sizeof(err)), 0);
    ck_assert_ptr_null(tok);
    setenv("BW_TOKEN", "env-token", 1);
    ck_assert_int_eq(bw_token_header(NULL, &hdr, err, sizeof(err)), 0);
    ck_assert_str_eq(hdr, "Authorization: Bearer env-token");
    free(hdr);
    /* the file wins over the environment; its newline is dropped */
    char *path = t_write_temp("file-token\n");
    ck_assert_int_eq(bw_token_load(path, &tok, err, sizeof(err)), 0);
    ck_assert_str_eq(tok, "file-token");
    free(tok);
    t_unlink_free(path);
    path = t_write_temp("two words\n");
    ck_assert_int_eq(bw_token_load(path, &tok, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, "printable ASCII without spaces"), "%s", err);
    t_unlink_free(path);
    path = t_write_temp("\n");
    ck_assert_int_eq(bw_token_load(path, &tok, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, "the token is empty"), "%s", err);
    t_unlink_free(path);
    ck_assert_int_eq(bw_token_load("/nonexistent/token", &tok, err, sizeof(err)), -1);
    setenv("BW_TOKEN", "", 1);
    ck_assert_int_eq(bw_token_load(NULL, &tok, err, sizeof(err)), -1);
    unsetenv("BW_TOKEN");
}
END_TEST

/* ---- client certificates (issue 11: TLS) ------------------------------------------- */

/* feed-cert: a submitter known by its certificate only; ops: an admin with both. */
static const char *const with_certs =
    "clients = (\n"
    "  { name = \"feed-cert\"; cert_identity = \"feed.internal\"; roles = [\"submit\"]; scopes = [\"pin:*\"]; },\n"
    "  { name = \"ops\"; token_sha256 = \"" ADMIN_SHA "\"; cert_identity = \"spiffe://bw/ops\"; roles = [\"admin\"]; },\n"
    "  { name = \"dash\"; token_sha256 = \"" READER_SHA "\"; roles = [\"read\"]; }\n"
    ");\n";

START_TEST(cert_identity_loading) {
    char err[1024], bad[2048];
    bw_auth_set_t *s = load_text(with_certs, NULL, err, sizeof(err));
    ck_assert_msg(s != NULL, "%s", err);
    ck_assert_int_eq(s->client_cnt, 3);
    ck_assert_str_eq(s->clients[0].cert_identity, "feed.internal");
    ck_assert_int_eq(s->clients[0].token_cnt, 0);
    ck_assert_int_eq(s->clients[1].token_cnt, 1);
    ck_assert_ptr_null(s->clients[2].cert_identity);
    ck_assert_str_eq(bw_auth_find_identity(s, "spiffe://bw/ops")->name, "ops");
    ck_assert_ptr_null(bw_auth_find_identity(s, "feed.internal.")); /* exact match only */
    ck_assert_ptr_null(bw_auth_find_identity(s, "FEED.INTERNAL"));
    ck_assert_ptr_null(bw_auth_find_identity(s, NULL));
    ck_assert_str_eq(bw_auth_find(s, "admin-token", 11, NULL)->name, "ops");
    bw_auth_release(s);
    /* neither a token nor a certificate identity */
    load_fails("clients = ( { name = \"n\"; roles = [\"read\"]; } );\n",
               "client \"n\": needs token_sha256", "or cert_identity");
    /* identities: not empty, no spaces or control characters, not too long, a string */
    load_fails("clients = ( { name = \"e\"; cert_identity = \"\"; roles = [\"read\"]; } );\n",
               "client \"e\": cert_identity must be a string of 1 to 255", NULL);
    load_fails("clients = ( { name = \"e\"; cert_identity = \"a b\"; roles = [\"read\"]; } );\n",
               "cert_identity must be", NULL);
    load_fails("clients = ( { name = \"e\"; cert_identity = \"a\\nb\"; roles = [\"read\"]; } );\n",
               "cert_identity must be", NULL);
    load_fails("clients = ( { name = \"e\"; cert_identity = 5; roles = [\"read\"]; } );\n", "cert_identity must be",
               NULL);
    char longid[300];
    memset(longid, 'x', 256);
    longid[256] = '\0';
    snprintf(bad, sizeof(bad), "clients = ( { name = \"e\"; cert_identity = \"%s\"; roles = [\"read\"]; } );\n", longid);
    load_fails(bad, "cert_identity must be", NULL);
    longid[255] = '\0';
    snprintf(bad, sizeof(bad), "clients = ( { name = \"e\"; cert_identity = \"%s\"; roles = [\"read\"]; } );\n", longid);
    s = load_text(bad, NULL, err, sizeof(err));
    ck_assert_msg(s != NULL, "255 characters: %s", err);
    bw_auth_release(s);
    /* a duplicate identity, like a duplicate token, names both clients */
    load_fails("clients = (\n { name = \"a\"; cert_identity = \"x.internal\"; roles = [\"read\"]; },\n"
               " { name = \"b\"; cert_identity = \"x.internal\"; roles = [\"admin\"]; }\n);\n",
               ":3: client \"b\" has the same cert_identity \"x.internal\" as client \"a\" (line 2)", NULL);
    /* a token given must still be a digest */
    load_fails("clients = ( { name = \"t\"; cert_identity = \"t.internal\"; token_sha256 = \"abc\"; roles = [\"read\"]; } );\n",
               "token_sha256 must be 64 hex digits", NULL);
    /* two certificate-only clients do not clash on their (absent) tokens */
    s = load_text("clients = (\n { name = \"a\"; cert_identity = \"a.internal\"; roles = [\"read\"]; },\n"
                  " { name = \"b\"; cert_identity = \"b.internal\"; roles = [\"read\"]; }\n);\n", NULL, err, sizeof(err));
    ck_assert_msg(s != NULL, "%s", err);
    bw_auth_release(s);
}
END_TEST

START_TEST(cert_decisions) {
    char err[1024], why[320];
    bw_auth_set_t *s = load_text(with_certs, NULL, err, sizeof(err));
    ck_assert_msg(s != NULL, "%s", err);
    const bw_auth_client_t *c;
    /* a certificate alone: the client's roles and scopes, as with a token */
    ck_assert_uint_eq(bw_auth_decide(s, "POST", "/v1/batches", NULL, "feed.internal", 1, NOW, &c, why, sizeof(why)), 0);
    ck_assert(c && strcmp(c->name, "feed-cert") == 0);
    ck_assert(bw_auth_allows_op(c, "pin", BW_OP_CREATE) && !bw_auth_allows_op(c, "board", BW_OP_CREATE));
    ck_assert_uint_eq(bw_auth_decide(s, "POST", "/v1/shards/3/pause", NULL, "feed.internal", 1, NOW, &c, why, sizeof(why)), 403);
    ck_assert_str_eq(why, "POST /v1/shards/3/pause needs the admin role; client \"feed-cert\" has submit");
    ck_assert_uint_eq(bw_auth_decide(s, "POST", "/v1/shards/3/pause", NULL, "spiffe://bw/ops", 1, NOW, &c, why, sizeof(why)), 0);
    ck_assert_str_eq(c->name, "ops");
    /* open endpoints stay open whatever the certificate */
    ck_assert_uint_eq(bw_auth_decide(s, "GET", "/healthz", NULL, "nobody.internal", 1, NOW, &c, why, sizeof(why)), 0);
    /* an identity that is no client's: 401 with it named; a valid token then decides */
    ck_assert_uint_eq(bw_auth_decide(s, "GET", "/v1/shards", NULL, "nobody.internal", 1, NOW, &c, why, sizeof(why)), 401);
    ck_assert_str_eq(why, "the client certificate's identity \"nobody.internal\" is no client's cert_identity");
    ck_assert_ptr_null(c);
    ck_assert_uint_eq(bw_auth_decide(s, "GET", "/v1/shards", "Bearer reader-token", "nobody.internal", 1, NOW, &c, why,
                                     sizeof(why)), 0);
    ck_assert_str_eq(c->name, "dash");
    /* a token presented must be valid, even beside a good certificate */
    ck_assert_uint_eq(bw_auth_decide(s, "POST", "/v1/batches", "Bearer wrong", "feed.internal", 1, NOW, &c, why, sizeof(why)), 401);
    ck_assert_str_eq(why, "unknown token");
    ck_assert_ptr_null(c);
    ck_assert_uint_eq(bw_auth_decide(s, "POST", "/v1/batches", "Basic eDp5", "feed.internal", 1, NOW, &c, why, sizeof(why)), 401);
    /* a certificate and a token of two clients: refused, not one of them picked */
    ck_assert_uint_eq(bw_auth_decide(s, "GET", "/v1/shards", "Bearer reader-token", "feed.internal", 1, NOW, &c, why,
                                     sizeof(why)), 401);
    ck_assert_str_eq(why, "the client certificate is client \"feed-cert\"'s and the token client \"dash\"'s: "
                          "send one client's credentials");
    ck_assert_ptr_null(c);
    /* both of one client */
    ck_assert_uint_eq(bw_auth_decide(s, "POST", "/v1/shards/1/resume", "Bearer admin-token", "spiffe://bw/ops", 1, NOW, &c,
                                     why, sizeof(why)), 0);
    ck_assert_str_eq(c->name, "ops");
    /* a token-only client's name is no identity */
    ck_assert_uint_eq(bw_auth_decide(s, "GET", "/v1/shards", NULL, "dash", 1, NOW, &c, why, sizeof(why)), 401);
    /* no clients file: open */
    ck_assert_uint_eq(bw_auth_decide(NULL, "POST", "/v1/shards/3/pause", NULL, "x", 0, NOW, &c, why, sizeof(why)), 0);
    bw_auth_release(s);
}
END_TEST

/* A self-signed certificate (signed by a fresh ECDSA key, *pk when not NULL): CN cn
 * (NULL: none), then the SANs (type, value) in order. */
static gnutls_x509_crt_t make_signed(const char *cn, int san_cnt, const unsigned *types, const char *const *values,
                                     gnutls_x509_privkey_t *pk_out) {
    gnutls_x509_privkey_t pk;
    ck_assert_int_eq(gnutls_x509_privkey_init(&pk), 0);
    ck_assert_int_eq(gnutls_x509_privkey_generate(pk, GNUTLS_PK_ECDSA, GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0), 0);
    gnutls_x509_crt_t crt;
    ck_assert_int_eq(gnutls_x509_crt_init(&crt), 0);
    if (cn) ck_assert_int_eq(gnutls_x509_crt_set_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, cn, (unsigned)strlen(cn)), 0);
    for (int i = 0; i < san_cnt; i++)
        ck_assert_int_eq(gnutls_x509_crt_set_subject_alt_name(crt, types[i], values[i], (unsigned)strlen(values[i]),
                                                              GNUTLS_FSAN_APPEND), 0);
    ck_assert_int_eq(gnutls_x509_crt_set_key(crt, pk), 0);
    ck_assert_int_eq(gnutls_x509_crt_set_version(crt, 3), 0);
    ck_assert_int_eq(gnutls_x509_crt_set_serial(crt, "\x01", 1), 0);
    ck_assert_int_eq(gnutls_x509_crt_set_activation_time(crt, time(NULL) - 60), 0);
    ck_assert_int_eq(gnutls_x509_crt_set_expiration_time(crt, time(NULL) + 3600), 0);
    ck_assert_int_eq(gnutls_x509_crt_sign2(crt, crt, pk, GNUTLS_DIG_SHA256, 0), 0);
    if (pk_out) *pk_out = pk;
    else gnutls_x509_privkey_deinit(pk);
    return crt;
}

/* The same certificate as a peer's would be: read from its DER (GnuTLS reads the names
 * of a certificate it built only once it is encoded). */
static gnutls_x509_crt_t make_crt(const char *cn, int san_cnt, const unsigned *types, const char *const *values) {
    gnutls_x509_crt_t built = make_signed(cn, san_cnt, types, values, NULL), crt;
    gnutls_datum_t der = {NULL, 0};
    ck_assert_int_eq(gnutls_x509_crt_export2(built, GNUTLS_X509_FMT_DER, &der), 0);
    ck_assert_int_eq(gnutls_x509_crt_init(&crt), 0);
    ck_assert_int_eq(gnutls_x509_crt_import(crt, &der, GNUTLS_X509_FMT_DER), 0);
    gnutls_free(der.data);
    gnutls_x509_crt_deinit(built);
    return crt;
}

START_TEST(cert_identity_names) {
    char id[BW_AUTH_IDENTITY_MAX + 1], why[320];
    /* the first DNS or URI SAN, an e-mail SAN before it skipped */
    unsigned types[] = {GNUTLS_SAN_RFC822NAME, GNUTLS_SAN_DNSNAME, GNUTLS_SAN_URI};
    const char *values[] = {"feed@example.com", "feed.internal", "spiffe://bw/feed"};
    gnutls_x509_crt_t crt = make_crt("Feed CN", 3, types, values);
    ck_assert_int_eq(bw_tls_cert_identity(crt, id, sizeof(id), why, sizeof(why)), 0);
    ck_assert_str_eq(id, "feed.internal");
    gnutls_x509_crt_deinit(crt);
    crt = make_crt("Feed CN", 2, (unsigned[]){GNUTLS_SAN_URI, GNUTLS_SAN_DNSNAME},
                   (const char *[]){"spiffe://bw/feed", "feed.internal"});
    ck_assert_int_eq(bw_tls_cert_identity(crt, id, sizeof(id), why, sizeof(why)), 0);
    ck_assert_str_eq(id, "spiffe://bw/feed");
    gnutls_x509_crt_deinit(crt);
    /* no DNS or URI SAN: the common name */
    crt = make_crt("ops.internal", 1, types, values);
    ck_assert_int_eq(bw_tls_cert_identity(crt, id, sizeof(id), why, sizeof(why)), 0);
    ck_assert_str_eq(id, "ops.internal");
    gnutls_x509_crt_deinit(crt);
    /* a common name with a space cannot be an identity; nor can nothing */
    crt = make_crt("Feed CN", 0, NULL, NULL);
    ck_assert_int_eq(bw_tls_cert_identity(crt, id, sizeof(id), why, sizeof(why)), -1);
    ck_assert_msg(strstr(why, "common name is not 1 to 255 printable ASCII"), "%s", why);
    gnutls_x509_crt_deinit(crt);
    crt = make_crt(NULL, 0, NULL, NULL);
    ck_assert_int_eq(bw_tls_cert_identity(crt, id, sizeof(id), why, sizeof(why)), -1);
    ck_assert_msg(strstr(why, "no DNS or URI subject alternative name and no common name"), "%s", why);
    gnutls_x509_crt_deinit(crt);
}
END_TEST

/* The reference config with its proxy.tls keys set to these (the files' paths). */
static bw_config_t *tls_conf(const char *cert, const char *key, const char *ca, int require) {
    const char *finds[] = {"cert_file = \"\";", "key_file = \"\";", "client_ca_file = \"\";",
                           "require_client_cert = false;"};
    char repl[4][600];
    snprintf(repl[0], sizeof(repl[0]), "cert_file = \"%s\";", cert);
    snprintf(repl[1], sizeof(repl[1]), "key_file = \"%s\";", key);
    snprintf(repl[2], sizeof(repl[2]), "client_ca_file = \"%s\";", ca);
    snprintf(repl[3], sizeof(repl[3]), "require_client_cert = %s;", require ? "true" : "false");
    char *text = strdup(t_ref_conf_text());
    for (int i = 0; i < 4; i++) {
        char *at = strstr(text, finds[i]);
        ck_assert_msg(at != NULL, "the reference config lacks %s", finds[i]);
        size_t n = strlen(text) - strlen(finds[i]) + strlen(repl[i]) + 1;
        char *next = malloc(n);
        snprintf(next, n, "%.*s%s%s", (int)(at - text), text, repl[i], at + strlen(finds[i]));
        free(text);
        text = next;
    }
    char *path = t_write_temp(text), err[1024];
    bw_config_t *conf = bw_config_load(path, err, sizeof(err));
    ck_assert_msg(conf != NULL, "%s", err);
    t_unlink_free(path);
    free(text);
    return conf;
}

static void tls_load_fails(const char *cert, const char *key, const char *ca, int require, const char *needle,
                           const char *needle2) {
    bw_config_t *conf = tls_conf(cert, key, ca, require);
    bw_tls_t *t = (bw_tls_t *)1;
    char err[1024] = "";
    ck_assert_int_eq(bw_tls_load(conf, &t, err, sizeof(err)), -1);
    ck_assert_ptr_null(t);
    ck_assert_msg(strstr(err, needle), "error \"%s\" lacks \"%s\"", err, needle);
    if (needle2) ck_assert_msg(strstr(err, needle2), "error \"%s\" lacks \"%s\"", err, needle2);
    bw_config_destroy(conf);
}

/* PEM text of a fresh self-signed ECDSA certificate and its key (malloc'd). */
static void make_pem(char **cert, char **key) {
    gnutls_x509_privkey_t pk;
    gnutls_x509_crt_t crt = make_signed("localhost", 1, (unsigned[]){GNUTLS_SAN_DNSNAME}, (const char *[]){"localhost"}, &pk);
    gnutls_datum_t c = {NULL, 0}, k = {NULL, 0};
    ck_assert_int_eq(gnutls_x509_crt_export2(crt, GNUTLS_X509_FMT_PEM, &c), 0);
    ck_assert_int_eq(gnutls_x509_privkey_export2(pk, GNUTLS_X509_FMT_PEM, &k), 0);
    *cert = strndup((const char *)c.data, c.size);
    *key = strndup((const char *)k.data, k.size);
    gnutls_free(c.data);
    gnutls_free(k.data);
    gnutls_x509_crt_deinit(crt);
    gnutls_x509_privkey_deinit(pk);
}

START_TEST(tls_files) {
    /* the reference config: plain HTTP */
    bw_config_t *conf = t_ref_config();
    bw_tls_t *t = (bw_tls_t *)1;
    char err[1024];
    ck_assert_int_eq(bw_tls_load(conf, &t, err, sizeof(err)), 0);
    ck_assert_ptr_null(t);
    bw_config_destroy(conf);
    /* keys that go together */
    tls_load_fails("", "k.pem", "", 0, "proxy.tls.key_file is set but proxy.tls.cert_file is not", NULL);
    tls_load_fails("", "", "ca.pem", 0, "proxy.tls.client_ca_file is set but proxy.tls.cert_file is not", NULL);
    tls_load_fails("", "", "", 1, "proxy.tls.require_client_cert is set but proxy.tls.cert_file is not", NULL);
    tls_load_fails("c.pem", "", "", 0, "proxy.tls.cert_file is set but proxy.tls.key_file is not", NULL);
    char *cert, *key, *cert2, *key2;
    make_pem(&cert, &key);
    make_pem(&cert2, &key2);
    char *cp = t_write_temp(cert), *kp = t_write_temp(key), *k2p = t_write_temp(key2), *junk = t_write_temp("not a PEM\n");
    tls_load_fails(cp, kp, "", 1, "proxy.tls.require_client_cert needs proxy.tls.client_ca_file", NULL);
    /* files: the key and the path named */
    tls_load_fails("/nonexistent/cert.pem", kp, "", 0, "proxy.tls.cert_file: /nonexistent/cert.pem: No such file", NULL);
    tls_load_fails(cp, "/nonexistent/key.pem", "", 0, "proxy.tls.key_file: /nonexistent/key.pem: No such file", NULL);
    tls_load_fails(cp, kp, "/nonexistent/ca.pem", 0, "proxy.tls.client_ca_file: /nonexistent/ca.pem", NULL);
    /* contents: a key of another certificate, a file that is no PEM */
    tls_load_fails(cp, k2p, "", 0, "proxy.tls.cert_file", "key_file");
    tls_load_fails(junk, kp, "", 0, "proxy.tls.cert_file", junk);
    tls_load_fails(cp, kp, junk, 0, "proxy.tls.client_ca_file", junk);
    /* good: the PEM text for the listeners, the CA asked for clients */
    conf = tls_conf(cp, kp, cp, 1);
    ck_assert_int_eq(bw_tls_load(conf, &t, err, sizeof(err)), 0);
    ck_assert_ptr_nonnull(t);
    ck_assert_str_eq(t->listen.cert_pem, cert);
    ck_assert_str_eq(t->listen.key_pem, key);
    ck_assert_str_eq(t->listen.trust_pem, cert);
    ck_assert_int_eq(t->require_client_cert, 1);
    bw_tls_free(t);
    bw_config_destroy(conf);
    /* a relative path is read from the configuration file's folder (both are temp files) */
    conf = tls_conf(strrchr(cp, '/') + 1, strrchr(kp, '/') + 1, "", 0);
    ck_assert_msg(bw_tls_load(conf, &t, err, sizeof(err)) == 0, "%s", err);
    ck_assert_ptr_null(t->listen.trust_pem);
    bw_tls_free(t);
    bw_config_destroy(conf);
    t_unlink_free(cp);
    t_unlink_free(kp);
    t_unlink_free(k2p);
    t_unlink_free(junk);
    free(cert);
    free(key);
    free(cert2);
    free(key2);
}
END_TEST

START_TEST(token_expiry) {
    /* one token with an expiry, and a rotation: an old token expiring, a new one not */
    char text[2048], err[1024];
    snprintf(text, sizeof(text),
             "clients = (\n"
             "  { name = \"sre\"; token_sha256 = \"%s\"; token_expires = \"2026-12-01T00:00:00Z\"; roles = [\"admin\"]; },\n"
             "  { name = \"feed\"; roles = [\"submit\"]; scopes = [\"pin:create\"];\n"
             "    tokens = ( { sha256 = \"%s\"; expires = \"2026-12-08T12:00:00Z\"; }, { sha256 = \"%s\"; } ); }\n"
             ");\n", ADMIN_SHA, FEED_SHA, SPAM_SHA);
    bw_auth_set_t *s = load_text(text, NULL, err, sizeof(err));
    ck_assert_msg(s != NULL, "%s", err);
    ck_assert_int_eq(s->clients[0].token_cnt, 1);
    ck_assert_int_eq(s->clients[0].tokens[0].expires, NOW);
    ck_assert_int_eq(s->clients[1].token_cnt, 2);
    ck_assert_int_eq(s->clients[1].tokens[0].expires, NOW + 7 * 86400 + 12 * 3600);
    ck_assert_int_eq(s->clients[1].tokens[1].expires, 0);
    /* both of feed's tokens are feed's: its name, and so its request_ids, jobs and quotas */
    const bw_auth_token_t *entry;
    ck_assert_str_eq(bw_auth_find(s, "feed-token", 10, &entry)->name, "feed");
    ck_assert_ptr_eq(entry, &s->clients[1].tokens[0]);
    ck_assert_str_eq(bw_auth_find(s, "spam-token", 10, &entry)->name, "feed");
    ck_assert_ptr_eq(entry, &s->clients[1].tokens[1]);
    /* the expiry is the first second refused */
    const bw_auth_client_t *c;
    char why[512];
    ck_assert_uint_eq(bw_auth_decide(s, "GET", "/v1/shards", "Bearer admin-token", NULL, 0, NOW - 1, &c, why, sizeof(why)), 0);
    ck_assert_uint_eq(bw_auth_decide(s, "GET", "/v1/shards", "Bearer admin-token", NULL, 0, NOW, &c, why, sizeof(why)), 401);
    ck_assert_str_eq(why, "the token expired at 2026-12-01T00:00:00Z: ask for a new one");
    ck_assert_ptr_null(c);
    /* during the rotation both work; after it only the new one */
    ck_assert_uint_eq(bw_auth_decide(s, "POST", "/v1/batches", "Bearer feed-token", NULL, 0, NOW, &c, why, sizeof(why)), 0);
    ck_assert_uint_eq(bw_auth_decide(s, "POST", "/v1/batches", "Bearer spam-token", NULL, 0, NOW, &c, why, sizeof(why)), 0);
    int64_t later = NOW + 8 * 86400;
    ck_assert_uint_eq(bw_auth_decide(s, "POST", "/v1/batches", "Bearer feed-token", NULL, 0, later, &c, why, sizeof(why)), 401);
    ck_assert_ptr_nonnull(strstr(why, "expired at 2026-12-08T12:00:00Z"));
    ck_assert_uint_eq(bw_auth_decide(s, "POST", "/v1/batches", "Bearer spam-token", NULL, 0, later, &c, why, sizeof(why)), 0);
    ck_assert_str_eq(c->name, "feed");
    bw_auth_release(s);

    /* the time's format, strictly UTC with the Z; impossible dates refused */
    int64_t t;
    ck_assert_int_eq(bw_utc_time_parse("1970-01-01T00:00:00Z", &t), 0);
    ck_assert_int_eq(t, 0);
    ck_assert_int_eq(bw_utc_time_parse("2028-02-29T23:59:59Z", &t), 0);
    const char *const bad_times[] = {"2026-12-01", "2026-12-01T00:00:00", "2026-12-01T00:00:00+01:00",
                                     "2026-12-01T00:00:00Zx", "2027-02-29T00:00:00Z", "2026-13-01T00:00:00Z",
                                     "2026-12-01T24:00:00Z", "1969-12-31T23:59:59Z", "2026-12-1T00:00:00Z", ""};
    for (size_t i = 0; i < sizeof(bad_times) / sizeof(bad_times[0]); i++)
        ck_assert_msg(bw_utc_time_parse(bad_times[i], &t) == -1, "\"%s\" was taken as a time", bad_times[i]);

    /* errors name the key */
    snprintf(text, sizeof(text), "clients = ( { name = \"a\"; token_sha256 = \"%s\"; token_expires = \"tomorrow\";\n"
             "  roles = [\"read\"]; } );\n", ADMIN_SHA);
    load_fails(text, ":1: client \"a\": token_expires must be a UTC time like \"2027-03-01T00:00:00Z\"", NULL);
    load_fails("clients = ( { name = \"a\"; token_expires = \"2027-03-01T00:00:00Z\"; roles = [\"read\"]; } );\n",
               "client \"a\": token_expires needs token_sha256", NULL);
    snprintf(text, sizeof(text), "clients = ( { name = \"a\"; token_sha256 = \"%s\"; roles = [\"read\"];\n"
             "  tokens = ( { sha256 = \"%s\"; } ); } );\n", ADMIN_SHA, FEED_SHA);
    load_fails(text, ":2: client \"a\": tokens, or token_sha256 and token_expires: not both", NULL);
    snprintf(text, sizeof(text), "clients = ( { name = \"a\"; roles = [\"read\"];\n"
             "  tokens = ( { sha256 = \"%s\"; }, { sha256 = \"%s\"; expire = \"x\"; } ); } );\n", ADMIN_SHA, FEED_SHA);
    load_fails(text, "client \"a\": tokens[1]: unknown key \"expire\" (sha256, expires)", NULL);
    snprintf(text, sizeof(text), "clients = ( { name = \"a\"; roles = [\"read\"];\n"
             "  tokens = ( { sha256 = \"%s\"; }, { sha256 = \"%s\"; } ); } );\n", ADMIN_SHA, ADMIN_SHA);
    load_fails(text, "client \"a\": tokens[1] is the same token as tokens[0]", NULL);
    load_fails("clients = ( { name = \"a\"; roles = [\"read\"]; tokens = ( ); } );\n",
               "client \"a\": tokens must be a list of 1 to 8 groups", NULL);
    snprintf(text, sizeof(text), "clients = ( { name = \"a\"; roles = [\"read\"];\n"
             "  tokens = ( { sha256 = \"%.60s\"; } ); } );\n", ADMIN_SHA);
    load_fails(text, ":2: client \"a\": tokens[].sha256 must be 64 hex digits", "has 60 characters");
    /* a rotated-in token is still unique across clients */
    snprintf(text, sizeof(text), "clients = ( { name = \"one\"; token_sha256 = \"%s\"; roles = [\"read\"]; },\n"
             "  { name = \"two\"; roles = [\"read\"]; tokens = ( { sha256 = \"%s\"; }, { sha256 = \"%s\"; } ); } );\n",
             FEED_SHA, ADMIN_SHA, FEED_SHA);
    load_fails(text, ":2: client \"two\" has the same token as client \"one\" (line 1)", NULL);
}
END_TEST

/* Protected mode: without a clients file the proxy serves loopback addresses only. */
START_TEST(protected_mode) {
    const char *loopback[] = {"127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1", "localhost", "LOCALHOST"};
    const char *reachable[] = {"0.0.0.0", "::", "10.0.0.5", "128.0.0.1", "::ffff:10.0.0.1", "fe80::1", "example.com", ""};
    for (size_t i = 0; i < sizeof(loopback) / sizeof(*loopback); i++)
        ck_assert_msg(bw_auth_is_loopback(loopback[i]), "%s is loopback", loopback[i]);
    for (size_t i = 0; i < sizeof(reachable) / sizeof(*reachable); i++)
        ck_assert_msg(!bw_auth_is_loopback(reachable[i]), "%s is not loopback", reachable[i]);

    bw_config_t *conf = t_ref_config();
    char *listen = conf->proxy_listen_address, *admin = conf->proxy_admin_listen_address;
    char *clients = conf->proxy_auth_clients_file, err[1024] = "";
    ck_assert_int_eq(bw_auth_check_open(conf, err, sizeof(err)), 0); /* the reference: 127.0.0.1, no clients */
    conf->proxy_listen_address = "0.0.0.0";
    ck_assert_int_eq(bw_auth_check_open(conf, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, "proxy.listen_address \"0.0.0.0\" is not a loopback address") &&
                  strstr(err, "proxy.auth.allow_open = true"), "%s", err);
    char start_err[1024] = "";
    ck_assert_ptr_null(bw_auth_start(conf, start_err, sizeof(start_err)));
    ck_assert_str_eq(start_err, err);
    conf->proxy_auth_allow_open = 1; /* on purpose: served, with a warning */
    ck_assert_int_eq(bw_auth_check_open(conf, err, sizeof(err)), 1);
    bw_auth_t *a = bw_auth_start(conf, start_err, sizeof(start_err));
    ck_assert_ptr_nonnull(a);
    bw_auth_stop(a);
    conf->proxy_auth_allow_open = 0;
    conf->proxy_listen_address = "::1";
    conf->proxy_admin_listen_address = "10.1.2.3";
    ck_assert_int_eq(bw_auth_check_open(conf, err, sizeof(err)), 0); /* admin_port 0: no admin listener */
    conf->proxy_admin_port = 18090;
    ck_assert_int_eq(bw_auth_check_open(conf, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, "proxy.admin_listen_address \"10.1.2.3\""), "%s", err);
    conf->proxy_auth_clients_file = "clients.conf"; /* authenticated: any address */
    conf->proxy_listen_address = "0.0.0.0";
    ck_assert_int_eq(bw_auth_check_open(conf, err, sizeof(err)), 0);
    conf->proxy_listen_address = listen;
    conf->proxy_admin_listen_address = admin;
    conf->proxy_auth_clients_file = clients;
    bw_config_destroy(conf);
}
END_TEST

Suite *auth_suite(void) {
    Suite *s = suite_create("auth");
    TCase *tc = tcase_create("auth");
    tcase_add_test(tc, parse_good);
    tcase_add_test(tc, parse_errors);
    tcase_add_test(tc, lookup);
    tcase_add_test(tc, scopes);
    tcase_add_test(tc, client_lanes);
    tcase_add_test(tc, ops_out_of_scope);
    tcase_add_test(tc, decisions);
    tcase_add_test(tc, reload_keeps_old_on_error);
    tcase_add_test(tc, relative_path);
    tcase_add_test(tc, example_file);
    tcase_add_test(tc, tool_token);
    tcase_add_test(tc, cert_identity_loading);
    tcase_add_test(tc, cert_decisions);
    tcase_add_test(tc, cert_identity_names);
    tcase_add_test(tc, tls_files);
    tcase_add_test(tc, token_expiry);
    tcase_add_test(tc, protected_mode);
    tcase_add_test(tc, credentials_listed);
    suite_add_tcase(s, tc);
    return s;
}
