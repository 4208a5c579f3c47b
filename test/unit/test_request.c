/* test_request.c — JSON and protobuf request decoding, per-op validation with reasons,
 * UTF-8 validation, and response encoding. */
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apijson.h"
#include "helpers.h"
#include "ledger.h"
#include "request.h"
#include "request_schema.h"
#include "shard.h"
#include "utf8.h"

static bw_arena_t A;
static bw_config_t *C;
static void setup(void) {
    bw_arena_init(&A, 1 << 16);
    C = t_ref_config();
}
static void teardown(void) {
    bw_config_destroy(C);
    bw_arena_destroy(&A);
}

static char errbuf[512];

static Bulkwrite__V1__BatchWriteRequest *json(const char *body) {
    errbuf[0] = '\0';
    return bw_request_decode(BW_FMT_JSON, body, strlen(body), &A, errbuf, sizeof(errbuf));
}

static void expect_bad_json(const char *body, const char *needle) {
    Bulkwrite__V1__BatchWriteRequest *req = json(body);
    ck_assert_msg(req == NULL, "accepted malformed JSON: %s", body);
    ck_assert_msg(strstr(errbuf, needle) != NULL, "error for %s is \"%s\", lacks \"%s\"", body, errbuf, needle);
}

/* Packs with protobuf-c, decodes through bw_request_decode. */
static Bulkwrite__V1__BatchWriteRequest *via_protobuf(const Bulkwrite__V1__BatchWriteRequest *req) {
    size_t len = bulkwrite__v1__batch_write_request__get_packed_size(req);
    uint8_t *buf = bw_arena_alloc(&A, len + 1);
    ck_assert_uint_eq(bulkwrite__v1__batch_write_request__pack(req, buf), len);
    errbuf[0] = '\0';
    Bulkwrite__V1__BatchWriteRequest *out = bw_request_decode(BW_FMT_PROTOBUF, buf, len, &A, errbuf, sizeof(errbuf));
    ck_assert_msg(out != NULL, "protobuf decode failed: %s", errbuf);
    return out;
}

#define PIN_ID(shard, local) bw_id_make(shard, 1, local)
#define BOARD_ID(shard, local) bw_id_make(shard, 2, local)

/* ---- decoding -------------------------------------------------------------------- */

START_TEST(request_id_names_the_job) {
    Bulkwrite__V1__BatchWriteRequest r = BULKWRITE__V1__BATCH_WRITE_REQUEST__INIT;
    char a[33], b[33], err[256];
    r.request_id = "feed-17";
    ck_assert_int_eq(bw_request_job_id(&r, NULL, NULL, 0, a, err, sizeof(err)), 0);
    ck_assert_int_eq(bw_request_job_id(&r, NULL, NULL, 0, b, err, sizeof(err)), 0);
    ck_assert_str_eq(a, b); /* a resent request is the same job */
    ck_assert_uint_eq(strspn(a, "0123456789abcdef"), 32);
    r.request_id = "feed-18";
    ck_assert_int_eq(bw_request_job_id(&r, NULL, NULL, 0, b, err, sizeof(err)), 0);
    ck_assert_str_ne(a, b);
    r.request_id = "";
    ck_assert_int_eq(bw_request_job_id(&r, NULL, NULL, 0, a, err, sizeof(err)), 0);
    ck_assert_int_eq(bw_request_job_id(&r, NULL, NULL, 0, b, err, sizeof(err)), 0);
    ck_assert_str_ne(a, b); /* no request_id: a fresh job each time */
    char longest[BW_REQUEST_ID_MAX + 2];
    memset(longest, 'k', sizeof(longest) - 1);
    longest[BW_REQUEST_ID_MAX] = '\0';
    r.request_id = longest;
    ck_assert_int_eq(bw_request_job_id(&r, NULL, NULL, 0, a, err, sizeof(err)), 0);
    longest[BW_REQUEST_ID_MAX] = 'k';
    longest[BW_REQUEST_ID_MAX + 1] = '\0';
    ck_assert_int_eq(bw_request_job_id(&r, NULL, NULL, 0, a, err, sizeof(err)), -1);
    ck_assert_str_eq(err, "request_id is 129 bytes; at most 128 are allowed");
    r.request_id = "tab\there";
    ck_assert_int_eq(bw_request_job_id(&r, NULL, NULL, 0, a, err, sizeof(err)), -1);
    ck_assert_str_eq(err, "request_id contains a control character at byte 3");
    r.request_id = "\xc3\x28";
    ck_assert_int_eq(bw_request_job_id(&r, NULL, NULL, 0, a, err, sizeof(err)), -1);
    ck_assert_str_eq(err, "request_id is not valid UTF-8");
    /* without clients: md5("bulkwrite.v1/" request_id), which test/tiers/backlog.sh computes too */
    r.request_id = "feed-17";
    ck_assert_int_eq(bw_request_job_id(&r, NULL, NULL, 0, a, err, sizeof(err)), 0);
    ck_assert_str_eq(a, "51e2c34a82efee0a09301795d76936fe");
}
END_TEST

/* With clients, a request_id belongs to its client, and the id is an HMAC under the
 * deployment's secret: another client's "feed-17" is another job, and without the secret
 * nobody computes the id. */
START_TEST(request_id_is_scoped_to_the_client) {
    Bulkwrite__V1__BatchWriteRequest r = BULKWRITE__V1__BATCH_WRITE_REQUEST__INIT;
    char open_id[33], feed[33], feed2[33], spam[33], other_key[33], split[33], err[256];
    r.request_id = "feed-17";
    ck_assert_int_eq(bw_request_job_id(&r, NULL, NULL, 0, open_id, err, sizeof(err)), 0);
    ck_assert_int_eq(bw_request_job_id(&r, "feed", "k1", 2, feed, err, sizeof(err)), 0);
    ck_assert_int_eq(bw_request_job_id(&r, "feed", "k1", 2, feed2, err, sizeof(err)), 0);
    ck_assert_str_eq(feed, feed2); /* a resend by the same client: the same job */
    ck_assert_int_eq(bw_request_job_id(&r, "spam", "k1", 2, spam, err, sizeof(err)), 0);
    ck_assert_str_ne(feed, spam);
    ck_assert_str_ne(feed, open_id);
    ck_assert_int_eq(bw_request_job_id(&r, "feed", "k2", 2, other_key, err, sizeof(err)), 0);
    ck_assert_str_ne(feed, other_key);
    /* the NUL after the name: ("fee", "d" + id) is not ("feed", id) */
    r.request_id = "dfeed-17";
    ck_assert_int_eq(bw_request_job_id(&r, "fee", "k1", 2, split, err, sizeof(err)), 0);
    ck_assert_str_ne(feed, split);
    /* HMAC-SHA256 as `openssl dgst -sha256 -hmac k1` computes it over
     * "bulkwrite.v1/feed\0feed-17" (first 16 bytes) */
    ck_assert_str_eq(feed, "9ff291b5d625c03164621ca869168c7b");
}
END_TEST

/* A NUL would cut request_id short (two ids, one job): both decoders refuse it. */
START_TEST(request_id_with_nul_is_refused) {
    expect_bad_json("{\"request_id\": \"nightly\\u0000-monday\", \"ops\": []}",
                    "request_id contains a control character (NUL) at byte 7");
    static const uint8_t pb[] = {0x0a, 0x05, 'a', 'b', 0x00, 'c', 'd', 0x12, 0x00};
    int too_many = -1;
    ck_assert_ptr_null(bw_request_decode_bounded(BW_FMT_PROTOBUF, pb, sizeof(pb), 10, &A, errbuf, sizeof(errbuf),
                                                 &too_many));
    ck_assert_str_eq(errbuf, "request_id contains a control character (NUL) at byte 2");
    ck_assert_int_eq(too_many, 0);
}
END_TEST

/* max_ops is enforced while decoding: protobuf counts the ops on the wire before any
 * struct is built, JSON stops at op max_ops + 1. Exactly max_ops still decodes. */
START_TEST(max_ops_is_enforced_while_decoding) {
    static const uint8_t pb[] = {0x12, 0x00, 0x12, 0x00, 0x12, 0x00}; /* three empty ops */
    int too_many = -1;
    ck_assert_ptr_null(bw_request_decode_bounded(BW_FMT_PROTOBUF, pb, sizeof(pb), 2, &A, errbuf, sizeof(errbuf),
                                                 &too_many));
    ck_assert_int_eq(too_many, 1);
    ck_assert_str_eq(errbuf, "the request has 3 ops; proxy.max_ops is 2");
    Bulkwrite__V1__BatchWriteRequest *r =
        bw_request_decode_bounded(BW_FMT_PROTOBUF, pb, sizeof(pb), 3, &A, errbuf, sizeof(errbuf), &too_many);
    ck_assert_ptr_nonnull(r);
    ck_assert_uint_eq(r->n_ops, 3);
    static const char js[] = "{\"ops\": [{}, {}, {}]}";
    too_many = -1;
    ck_assert_ptr_null(bw_request_decode_bounded(BW_FMT_JSON, js, strlen(js), 2, &A, errbuf, sizeof(errbuf),
                                                 &too_many));
    ck_assert_int_eq(too_many, 1);
    ck_assert_str_eq(errbuf, "the request has more than 2 ops; proxy.max_ops is 2");
    r = bw_request_decode_bounded(BW_FMT_JSON, js, strlen(js), 3, &A, errbuf, sizeof(errbuf), &too_many);
    ck_assert_ptr_nonnull(r);
    ck_assert_uint_eq(r->n_ops, 3);
    /* a malformed body is not "too many" */
    ck_assert_ptr_null(bw_request_decode_bounded(BW_FMT_JSON, "{\"ops\": [", 9, 2, &A, errbuf, sizeof(errbuf),
                                                 &too_many));
    ck_assert_int_eq(too_many, 0);
}
END_TEST

START_TEST(json_maps_field_for_field) {
    char body[2048];
    uint64_t owner = bw_id_make(3, 9, 77), pin = PIN_ID(3, 5);
    snprintf(body, sizeof(body),
             "{\"request_id\": \"req-1\", \"ops\": ["
             " {\"op\": \"create\", \"object_type\": \"pin\", \"id\": %" PRIu64 ", \"shard_key\": \"%" PRIu64 "\","
             "  \"fields\": {\"owner_id\": -12, \"title\": \"caf\\u00e9 \\ud83d\\ude00\", \"board_id\": null,"
             "              \"image\": {\"base64\": \"AP8nXA==\"}}},"
             " {\"op\": \"UPDATE\", \"object_type\": \"pin\", \"id\": \"%" PRIu64 "\","
             "  \"fields\": {\"like_count\": {\"increment\": 3}, \"description\": \"\"}},"
             " {\"op\": \"upsert\", \"object_type\": \"board\", \"id\": %" PRIu64 ","
             "  \"fields\": {\"score\": 2.5, \"archived\": true, \"partner\": \"p\", \"name\": \"n\"}},"
             " {\"op\": \"delete\", \"object_type\": \"pin\", \"id\": %" PRIu64 "}"
             "]}",
             pin, owner, pin, BOARD_ID(1, 1), pin);
    Bulkwrite__V1__BatchWriteRequest *got = json(body);
    ck_assert_msg(got != NULL, "%s", errbuf);

    t_req_t r;
    t_req_init(&r, &A, 8);
    r.req->request_id = "req-1";
    Bulkwrite__V1__Op *o = t_op(&r, BW_OP_CREATE, "pin", pin, t_idstr(&r, owner));
    t_f_int(&r, o, "owner_id", -12);
    t_f_str(&r, o, "title", "caf\xc3\xa9 \xf0\x9f\x98\x80", 10);
    t_f_null(&r, o, "board_id");
    t_f_bytes(&r, o, "image", "\x00\xff\x27\x5c", 4);
    o = t_op(&r, BW_OP_UPDATE, "pin", pin, "");
    t_f_inc(&r, o, "like_count", 3);
    t_f_str(&r, o, "description", "", 0);
    o = t_op(&r, BW_OP_UPSERT, "board", BOARD_ID(1, 1), "");
    t_f_dbl(&r, o, "score", 2.5);
    t_f_bool(&r, o, "archived", 1);
    t_f_str(&r, o, "partner", "p", 1);
    t_f_str(&r, o, "name", "n", 1);
    t_op(&r, BW_OP_DELETE, "pin", pin, "");
    char why[256] = "";
    ck_assert_msg(t_request_eq(r.req, got, why, sizeof(why)), "JSON decoded differently: %s", why);

    /* the same request through protobuf decodes to the same structs */
    Bulkwrite__V1__BatchWriteRequest *pb = via_protobuf(got);
    ck_assert_msg(t_request_eq(got, pb, why, sizeof(why)), "protobuf round trip differs: %s", why);
    pb = via_protobuf(r.req);
    ck_assert_msg(t_request_eq(r.req, pb, why, sizeof(why)), "protobuf round trip differs: %s", why);

    /* both validate the same way: everything valid */
    bw_op_route_t routes[8];
    bw_rejection_t *rej;
    ck_assert_uint_eq(bw_request_validate(C, got, BW_FMT_PROTOBUF, &A, routes, &rej), 0);
    ck_assert_int_eq(routes[0].shard, 3);
    ck_assert_int_eq(routes[2].shard, 1);
}
END_TEST

START_TEST(json_nul_and_escapes) {
    Bulkwrite__V1__BatchWriteRequest *req =
        json("{\"ops\": [{\"op\": \"update\", \"object_type\": \"pin\", \"id\": 68719476737,"
             " \"fields\": {\"title\": \"a\\u0000b\\\"\\\\\\n\"}}]}");
    ck_assert_msg(req != NULL, "%s", errbuf);
    const Bulkwrite__V1__Value *v = req->ops[0]->fields[0]->value;
    ck_assert_int_eq(v->kind_case, BULKWRITE__V1__VALUE__KIND_STRING_VALUE);
    ck_assert_uint_eq(v->string_value.len, 6);
    ck_assert(memcmp(v->string_value.data, "a\0b\"\\\n", 6) == 0);
    /* NUL survives protobuf too (text is carried as bytes) */
    Bulkwrite__V1__BatchWriteRequest *pb = via_protobuf(req);
    ck_assert_uint_eq(pb->ops[0]->fields[0]->value->string_value.len, 6);
    ck_assert(memcmp(pb->ops[0]->fields[0]->value->string_value.data, "a\0b\"\\\n", 6) == 0);
    /* and it is valid UTF-8, so it validates (every check, as for a protobuf body) */
    bw_op_route_t routes[1];
    bw_rejection_t *rej;
    ck_assert_uint_eq(bw_request_validate(C, req, BW_FMT_PROTOBUF, &A, routes, &rej), 0);
    /* an integer id and a decimal-string id are the same; max well-formed id as a string */
    req = json("{\"ops\": [{\"op\": \"delete\", \"object_type\": \"pin\", \"id\": \"4611686018427387903\"}]}");
    ck_assert_msg(req != NULL, "%s", errbuf);
    ck_assert_uint_eq(req->ops[0]->id, 4611686018427387903ull);
    req = json("{\"ops\": []}");
    ck_assert_ptr_nonnull(req);
    ck_assert_uint_eq(req->n_ops, 0);
    req = json("{}");
    ck_assert_ptr_nonnull(req);
    ck_assert_uint_eq(req->n_ops, 0);
}
END_TEST

START_TEST(json_malformed) {
    expect_bad_json("", "malformed JSON");
    expect_bad_json("{\"ops\": [", "malformed JSON");
    expect_bad_json("{\"ops\": [}", "malformed JSON");
    expect_bad_json("{\"ops\": []} trailing", "malformed JSON");
    expect_bad_json("{'ops': []}", "malformed JSON");
    expect_bad_json("{\"ops\": [], \"ops\": []}", "malformed JSON");     /* duplicate key */
    expect_bad_json("{\"ops\": [{\"op\": \"create\", \"op\": \"delete\"}]}", "malformed JSON");
    expect_bad_json("{\"ops\": [{\"op\": \"update\", \"object_type\": \"pin\", \"id\": 1,"
                    " \"fields\": {\"title\": \"a\", \"title\": \"b\"}}]}",
                    "malformed JSON");
    expect_bad_json("[1, 2]", "JSON object");
    expect_bad_json("{\"ops\": {}}", "ops");
    expect_bad_json("{\"ops\": [], \"extra\": 1}", "extra");
    expect_bad_json("{\"ops\": [5]}", "ops[0]: not an object");
    expect_bad_json("{\"ops\": [{}, {\"nope\": 1}]}", "ops[1]: unknown member \"nope\"");
    expect_bad_json("{\"ops\": [{\"op\": 1}]}", "ops[0].op: not a string");
    expect_bad_json("{\"ops\": [{\"object_type\": 1}]}", "ops[0].object_type");
    expect_bad_json("{\"ops\": [{\"shard_key\": 7}]}", "ops[0].shard_key");
    expect_bad_json("{\"ops\": [{\"fields\": []}]}", "ops[0].fields");
    expect_bad_json("{\"ops\": [{\"fields\": {\"title\": [1]}}]}", "arrays");
    expect_bad_json("{\"ops\": [{\"fields\": {\"image\": {\"base64\": \"!!!!\"}}}]}", "base64");
    expect_bad_json("{\"ops\": [{\"fields\": {\"image\": {\"hex\": \"00\"}}}]}", "base64");
    /* JSON text must be UTF-8 */
    expect_bad_json("{\"ops\": [{\"fields\": {\"title\": \"\xff\"}}]}", "malformed JSON");
    expect_bad_json("{\"ops\": [{\"fields\": {\"title\": \"twelve bytes\xc3\"}}]}", "malformed JSON");
    expect_bad_json("{\"ops\": [{\"fields\": {\"titl\xe9\": 1}}]}", "malformed JSON");
    expect_bad_json("{\"ops\": [{\"fields\": {\"a long field name\xc3\": 1}}]}", "malformed JSON");
    /* names: no NUL, escaped or not; a name given twice, among names sharing a first byte */
    expect_bad_json("{\"ops\": [{\"fields\": {\"ti\\u0000tle\": 1}}]}", "NUL byte in object key");
    expect_bad_json("{\"op\\u0000s\": []}", "NUL byte in object key");
    expect_bad_json("{\"ops\": [{\"fields\": {\"title\": \"a\", \"tit\": 1, \"title\": \"b\"}}]}",
                    "duplicate object key \"title\"");
    Bulkwrite__V1__BatchWriteRequest *names = json("{\"ops\": [{\"fields\": {\"title\": \"a\", \"tit\": 1, \"titles\": 2}}]}");
    ck_assert_msg(names != NULL, "%s", errbuf);
    ck_assert_uint_eq(names->ops[0]->n_fields, 3);
    ck_assert_str_eq(names->ops[0]->fields[2]->name, "titles");
    /* an escaped surrogate must be half of a pair: never read as "?" (yajl's habit) */
    expect_bad_json("{\"ops\": [{\"fields\": {\"title\": \"a\\ud800b\"}}]}", "high surrogate");
    expect_bad_json("{\"ops\": [{\"fields\": {\"title\": \"\\ud800\\u0041\"}}]}", "high surrogate");
    expect_bad_json("{\"ops\": [{\"fields\": {\"title\": \"\\udbff\"}}]}", "high surrogate");
    expect_bad_json("{\"ops\": [{\"fields\": {\"title\": \"\\udc00\"}}]}", "malformed JSON");
    /* the first fault in document order is the one named */
    expect_bad_json("{\"ops\": [{\"nope\": 1, \"fields\": {\"title\": \"\\ud800\"}}]}", "unknown member");
    expect_bad_json("{\"ops\": [{\"fields\": {\"title\": \"\\ud800\"}, \"nope\": 1}]}", "high surrogate");
}
END_TEST

/* Integers read exactly on both sides of the 18-digit short path, up to 64 bits, and
 * refused past them; an id string past 2^64 - 1, or cut by a NUL, is refused. */
START_TEST(json_numbers_at_their_bounds) {
    Bulkwrite__V1__BatchWriteRequest *got = json(
        "{\"ops\": [{\"op\": \"update\", \"object_type\": \"pin\", \"id\": \"18446744073709551615\", \"fields\": {"
        "\"a\": 999999999999999999, \"b\": -999999999999999999, \"c\": 1000000000000000000,"
        "\"d\": 9223372036854775807, \"e\": -9223372036854775808, \"f\": -0, \"h\": 1e3}},"
        "{\"op\": \"delete\", \"object_type\": \"pin\", \"id\": \"1234567890123456789\"},"
        "{\"op\": \"delete\", \"object_type\": \"pin\", \"id\": 123456789012345678}]}");
    ck_assert_msg(got != NULL, "%s", errbuf);
    ck_assert_uint_eq(got->ops[0]->id, UINT64_MAX);
    const int64_t want[] = {999999999999999999LL, -999999999999999999LL, 1000000000000000000LL, INT64_MAX, INT64_MIN, 0};
    for (size_t k = 0; k < 6; k++) {
        ck_assert_int_eq(got->ops[0]->fields[k]->value->kind_case, BULKWRITE__V1__VALUE__KIND_INT_VALUE);
        ck_assert_int_eq(got->ops[0]->fields[k]->value->int_value, want[k]);
    }
    ck_assert_int_eq(got->ops[0]->fields[6]->value->kind_case, BULKWRITE__V1__VALUE__KIND_DOUBLE_VALUE);
    ck_assert(got->ops[0]->fields[6]->value->double_value == 1000.0);
    ck_assert_uint_eq(got->ops[1]->id, 1234567890123456789ULL);
    ck_assert_uint_eq(got->ops[2]->id, 123456789012345678ULL);
}
END_TEST

/* A surrogate pair decodes to its one 4-byte character; an escaped backslash before
 * "ud800" is text, not an escape. */
START_TEST(json_surrogate_pairs) {
    Bulkwrite__V1__BatchWriteRequest *req =
        json("{\"ops\": [{\"fields\": {\"title\": \"\\ud83d\\ude00 \\\\ud800\"}}]}");
    ck_assert_msg(req != NULL, "%s", errbuf);
    const Bulkwrite__V1__Value *v = req->ops[0]->fields[0]->value;
    ck_assert_uint_eq(v->string_value.len, 11);
    ck_assert(memcmp(v->string_value.data, "\xf0\x9f\x98\x80 \\ud800", 11) == 0);
}
END_TEST

START_TEST(protobuf_malformed) {
    static const struct {
        const char *data;
        size_t len;
    } bad[] = {
        {"\xff\xff\xff", 3},          /* field number 0x1fffff..., truncated varint */
        {"\x12\x05\x0a\x01", 4},      /* ops: length 5, 2 bytes present */
        {"\x12\x02\x08", 3},          /* truncated */
        {"\x0a\x80", 2},              /* request_id with a truncated length */
        {"\x12\x03\x1a\x01\x00", 5},  /* op.id (fixed64) given as length-delimited: wrong wire type */
        {"\x07", 1},                  /* wire type 7 does not exist */
    };
    for (size_t i = 0; i < BW_ARRAY_LEN(bad); i++) {
        errbuf[0] = '\0';
        Bulkwrite__V1__BatchWriteRequest *req =
            bw_request_decode(BW_FMT_PROTOBUF, bad[i].data, bad[i].len, &A, errbuf, sizeof(errbuf));
        ck_assert_msg(req == NULL, "malformed protobuf %zu accepted", i);
        ck_assert_msg(strstr(errbuf, "malformed protobuf") != NULL, "error \"%s\"", errbuf);
    }
    /* an empty body is a valid empty request */
    Bulkwrite__V1__BatchWriteRequest *req = bw_request_decode(BW_FMT_PROTOBUF, "", 0, &A, errbuf, sizeof(errbuf));
    ck_assert_ptr_nonnull(req);
    ck_assert_uint_eq(req->n_ops, 0);
}
END_TEST

/* ---- validation ------------------------------------------------------------------ */

typedef struct {
    Bulkwrite__V1__Op *op;
    const char *reason; /* NULL = valid */
    int shard;          /* when valid */
} expect_t;

static void check_validation(t_req_t *r, const expect_t *e, size_t n) {
    bw_op_route_t *routes = bw_arena_alloc(&A, (n + 1) * sizeof(*routes));
    bw_rejection_t *rej = NULL;
    size_t nrej = bw_request_validate(C, r->req, BW_FMT_PROTOBUF, &A, routes, &rej);
    size_t want_rej = 0;
    for (size_t i = 0; i < n; i++) want_rej += e[i].reason != NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (!e[i].reason) {
            ck_assert_msg(routes[i].shard == e[i].shard, "op %zu: shard %d, want %d", i, routes[i].shard, e[i].shard);
            /* each field's column, whatever order the fields came in */
            const Bulkwrite__V1__Op *op = e[i].op;
            const bw_object_type_t *ot = bw_config_object_type(C, op->object_type);
            ck_assert_int_eq(routes[i].type_index, (int)(ot - C->object_types));
            for (size_t f = 0; f < op->n_fields; f++)
                ck_assert_msg(routes[i].cols[f] == bw_config_column(ot, op->fields[f]->name),
                              "op %zu field %s: column %d", i, op->fields[f]->name, routes[i].cols[f]);
            ck_assert_msg(k >= nrej || rej[k].index != i, "valid op %zu rejected: %s", i, rej[k].reason);
            continue;
        }
        ck_assert_int_eq(routes[i].shard, -1);
        ck_assert_msg(k < nrej && rej[k].index == i, "op %zu (want \"%s\") not rejected", i, e[i].reason);
        ck_assert_msg(strstr(rej[k].reason, e[i].reason) != NULL, "op %zu: reason \"%s\" lacks \"%s\"", i,
                      rej[k].reason, e[i].reason);
        k++;
    }
    ck_assert_uint_eq(nrej, want_rej);
}

static Bulkwrite__V1__Op *pin_create(t_req_t *r, uint64_t id, unsigned owner_shard) {
    Bulkwrite__V1__Op *o = t_op(r, BW_OP_CREATE, "pin", id, t_idstr(r, bw_id_make(owner_shard, 9, 1)));
    t_f_int(r, o, "owner_id", 1);
    return o;
}

START_TEST(validate_rejections) {
    t_req_t r;
    t_req_init(&r, &A, 100);
    expect_t e[100];
    size_t n = 0;
    Bulkwrite__V1__Op *o;
    char title[300];
    memset(title, 't', sizeof(title));

#define EXPECT(op_, reason_) (e[n++] = (expect_t){(op_), (reason_), -1})
#define VALID(op_, shard_) (e[n++] = (expect_t){(op_), NULL, (shard_)})

    VALID(pin_create(&r, PIN_ID(3, 1), 3), 3);
    VALID(pin_create(&r, 0, 5), 5);

    o = t_op(&r, BW_OP_DELETE, "widget", PIN_ID(1, 1), NULL);
    EXPECT(o, "unknown object_type \"widget\"");
    o = t_op(&r, 0, "pin", PIN_ID(1, 1), NULL); /* an unknown op word decodes to 0 */
    EXPECT(o, "op must be one of create, update, upsert, delete");
    o = t_op(&r, 9, "pin", PIN_ID(1, 1), NULL);
    EXPECT(o, "op must be one of");
    o = t_op(&r, BW_OP_UPDATE, "pin", PIN_ID(1, 1), NULL);
    t_f_int(&r, o, "colour", 1);
    EXPECT(o, "unknown column \"colour\" for object type pin");
    o = t_op(&r, BW_OP_UPDATE, "pin", PIN_ID(1, 1), NULL);
    t_f_int(&r, o, "title", 5);
    EXPECT(o, "field \"title\": column type is string, the value is not");
    o = t_op(&r, BW_OP_UPDATE, "pin", PIN_ID(1, 1), NULL);
    t_f_str(&r, o, "owner_id", "5", 1);
    EXPECT(o, "field \"owner_id\": column type is int");
    o = t_op(&r, BW_OP_UPDATE, "board", BOARD_ID(1, 1), NULL);
    t_f_int(&r, o, "archived", 1);
    EXPECT(o, "field \"archived\": column type is bool");
    o = t_op(&r, BW_OP_UPDATE, "board", BOARD_ID(1, 1), NULL);
    t_f_str(&r, o, "score", "1.5", 3);
    EXPECT(o, "field \"score\": column type is double");
    o = t_op(&r, BW_OP_UPDATE, "board", BOARD_ID(1, 1), NULL);
    t_f_bool(&r, o, "score", 1);
    EXPECT(o, "field \"score\": column type is double");
    o = t_op(&r, BW_OP_UPDATE, "pin", PIN_ID(1, 1), NULL);
    t_f_dbl(&r, o, "like_count", 1.0);
    EXPECT(o, "field \"like_count\": column type is int");
    o = t_op(&r, BW_OP_UPDATE, "pin", PIN_ID(1, 1), NULL);
    t_f_bytes(&r, o, "title", "x", 1);
    EXPECT(o, "field \"title\": column type is string");
    o = t_op(&r, BW_OP_UPDATE, "pin", PIN_ID(1, 1), NULL);
    t_f_int(&r, o, "image", 1);
    EXPECT(o, "field \"image\": column type is bytes");
    o = t_op(&r, BW_OP_UPDATE, "pin", PIN_ID(1, 1), NULL);
    t_f_null(&r, o, "owner_id");
    EXPECT(o, "field \"owner_id\": null (or no value) in a column that is not nullable");
    o = t_op(&r, BW_OP_UPDATE, "pin", PIN_ID(1, 1), NULL);
    t_field(&r, o, "owner_id")->value = NULL; /* protobuf: a field without a value */
    EXPECT(o, "not nullable");
    o = t_op(&r, BW_OP_UPDATE, "pin", PIN_ID(1, 1), NULL);
    t_f_str(&r, o, "title", title, 256);
    EXPECT(o, "field \"title\": 256 bytes, longer than its max_length 255");
    o = t_op(&r, BW_OP_UPDATE, "pin", PIN_ID(1, 1), NULL);
    t_f_str(&r, o, "title", "ok\xff", 3);
    EXPECT(o, "field \"title\": text is not valid UTF-8");
    o = t_op(&r, BW_OP_UPDATE, "pin", PIN_ID(1, 1), NULL);
    t_f_str(&r, o, "title", "\xed\xa0\x80", 3); /* a surrogate */
    EXPECT(o, "not valid UTF-8");
    o = t_op(&r, BW_OP_DELETE, "pin", PIN_ID(8, 1), NULL);
    EXPECT(o, "shard 8 is out of range (shards.count is 8)");
    o = t_op(&r, BW_OP_DELETE, "pin", PIN_ID(65535, 1), NULL);
    EXPECT(o, "shard 65535 is out of range");
    o = t_op(&r, BW_OP_DELETE, "pin", BOARD_ID(1, 1), NULL);
    EXPECT(o, "type id 2 is not pin's type id 1");
    o = t_op(&r, BW_OP_DELETE, "pin", PIN_ID(1, 1) | (1ull << 63), NULL);
    EXPECT(o, "the two top bits must be zero");
    o = t_op(&r, BW_OP_DELETE, "pin", PIN_ID(1, 1) | (1ull << 62), NULL);
    EXPECT(o, "the two top bits must be zero");
    o = t_op(&r, BW_OP_UPDATE, "pin", 0, NULL);
    t_f_int(&r, o, "like_count", 1);
    EXPECT(o, "update needs the object's id");
    o = t_op(&r, BW_OP_DELETE, "pin", 0, NULL);
    EXPECT(o, "delete needs the object's id");
    o = t_op(&r, BW_OP_UPSERT, "pin", 0, NULL);
    t_f_int(&r, o, "owner_id", 1);
    EXPECT(o, "upsert needs the object's id");
    o = t_op(&r, BW_OP_CREATE, "pin", PIN_ID(1, 1), NULL);
    t_f_int(&r, o, "owner_id", 1);
    EXPECT(o, "create needs the owner's shard_key");
    o = t_op(&r, BW_OP_CREATE, "pin", PIN_ID(1, 1), "");
    t_f_int(&r, o, "owner_id", 1);
    EXPECT(o, "create needs the owner's shard_key");
    o = t_op(&r, BW_OP_CREATE, "pin", 0, "alice");
    t_f_int(&r, o, "owner_id", 1);
    EXPECT(o, "shard_key \"alice\" is not an object id (create_route is \"id\")");
    /* a shard_key read as an id: decimal digits only, nothing around them, at most the
     * largest well-formed id (2^64-1 and past it are refused, not cut or wrapped) */
    static const char *const not_ids[] = {" 123", "+123", "123x", "-1", "4611686018427387904", /* 2^62 */
                                          "9999999999999999999", "18446744073709551615",
                                          "18446744073709551616", "99999999999999999999999"};
    for (size_t k = 0; k < sizeof(not_ids) / sizeof(*not_ids); k++) {
        o = t_op(&r, BW_OP_CREATE, "pin", 0, not_ids[k]);
        t_f_int(&r, o, "owner_id", 1);
        EXPECT(o, "is not an object id (create_route is \"id\")");
    }
    o = t_op(&r, BW_OP_CREATE, "pin", 0, "4611686018427387903"); /* 2^62 - 1: every shard bit */
    t_f_int(&r, o, "owner_id", 1);
    EXPECT(o, "shard_key 4611686018427387903: shard 65535 is out of range");
    /* leading zeros are the same id, whether the key is up to 19 characters or more */
    static char padded[2][48];
    snprintf(padded[0], sizeof(padded[0]), "0%s", t_idstr(&r, bw_id_make(5, 9, 1)));
    snprintf(padded[1], sizeof(padded[1]), "%025" PRIu64, bw_id_make(6, 9, 1));
    o = t_op(&r, BW_OP_CREATE, "pin", 0, padded[0]);
    t_f_int(&r, o, "owner_id", 1);
    VALID(o, 5);
    o = t_op(&r, BW_OP_CREATE, "pin", 0, padded[1]);
    t_f_int(&r, o, "owner_id", 1);
    VALID(o, 6);
    /* fields in any order, and a field given twice apart */
    o = t_op(&r, BW_OP_CREATE, "pin", 0, t_idstr(&r, bw_id_make(4, 9, 1)));
    t_f_str(&r, o, "image", "b", 1);
    t_f_int(&r, o, "like_count", 2);
    t_f_str(&r, o, "title", "t", 1);
    t_f_int(&r, o, "owner_id", 1);
    VALID(o, 4);
    o = t_op(&r, BW_OP_UPDATE, "pin", PIN_ID(1, 1), NULL);
    t_f_str(&r, o, "title", "t", 1);
    t_f_int(&r, o, "like_count", 2);
    t_f_str(&r, o, "title", "u", 1);
    EXPECT(o, "field \"title\" is given twice");
    o = t_op(&r, BW_OP_CREATE, "pin", 0, t_idstr(&r, bw_id_make(9, 9, 1)));
    t_f_int(&r, o, "owner_id", 1);
    EXPECT(o, "shard 9 is out of range");
    o = pin_create(&r, PIN_ID(2, 1), 3);
    EXPECT(o, "names shard 2 but its owner's shard_key routes to shard 3");

    /* md5 route: the shard is md5(key) mod 8; an id elsewhere is rejected */
    const char *key = "partner-acme";
    unsigned ks = bw_shard_of_key(key, strlen(key), 8);
    o = t_op(&r, BW_OP_CREATE, "board", 0, key);
    t_f_str(&r, o, "partner", key, strlen(key));
    t_f_str(&r, o, "name", "x", 1);
    VALID(o, (int)ks);
    o = t_op(&r, BW_OP_CREATE, "board", BOARD_ID(ks, 5), key);
    t_f_str(&r, o, "partner", key, strlen(key));
    t_f_str(&r, o, "name", "x", 1);
    VALID(o, (int)ks);
    o = t_op(&r, BW_OP_CREATE, "board", BOARD_ID((ks + 1) % 8, 5), key);
    t_f_str(&r, o, "partner", key, strlen(key));
    t_f_str(&r, o, "name", "x", 1);
    EXPECT(o, "routes to shard");

    o = t_op(&r, BW_OP_DELETE, "pin", PIN_ID(1, 1), NULL);
    t_f_int(&r, o, "like_count", 1);
    EXPECT(o, "delete takes no fields");
    o = pin_create(&r, 0, 1);
    t_f_inc(&r, o, "like_count", 1);
    EXPECT(o, "field \"like_count\": increment is only for UPDATE of int or double columns");
    o = t_op(&r, BW_OP_UPSERT, "pin", PIN_ID(1, 1), NULL);
    t_f_int(&r, o, "owner_id", 1);
    t_f_inc(&r, o, "like_count", 1);
    EXPECT(o, "increment is only for UPDATE");
    o = t_op(&r, BW_OP_UPDATE, "pin", PIN_ID(1, 1), NULL);
    t_f_str(&r, o, "title", "x", 1);
    o->fields[0]->increment = 1;
    EXPECT(o, "increment is only for UPDATE of int or double columns");
    o = t_op(&r, BW_OP_UPDATE, "pin", PIN_ID(1, 1), NULL);
    t_f_null(&r, o, "like_count");
    o->fields[0]->increment = 1;
    EXPECT(o, "cannot increment by null");
    o = t_op(&r, BW_OP_CREATE, "pin", 0, t_idstr(&r, bw_id_make(1, 9, 1)));
    t_f_str(&r, o, "title", "t", 1);
    EXPECT(o, "required column \"owner_id\" is missing");
    o = t_op(&r, BW_OP_UPSERT, "board", BOARD_ID(1, 1), NULL);
    t_f_str(&r, o, "partner", "p", 1);
    EXPECT(o, "required column \"name\" is missing");
    o = t_op(&r, BW_OP_UPDATE, "pin", PIN_ID(1, 1), NULL);
    EXPECT(o, "update needs at least one field");
    o = t_op(&r, BW_OP_UPDATE, "pin", PIN_ID(1, 1), "123");
    t_f_int(&r, o, "like_count", 1);
    EXPECT(o, "shard_key is only for create");
    o = t_op(&r, BW_OP_UPDATE, "pin", PIN_ID(1, 1), NULL);
    t_f_int(&r, o, "like_count", 1);
    t_f_int(&r, o, "like_count", 2);
    EXPECT(o, "field \"like_count\" is given twice");
    o = t_op(&r, BW_OP_UPDATE, "pin", PIN_ID(1, 1), NULL);
    t_f_int(&r, o, "id", 1);
    EXPECT(o, "set the id with the op's id");
    o = t_op(&r, BW_OP_UPDATE, "board", BOARD_ID(1, 1), NULL);
    t_f_dbl(&r, o, "score", NAN);
    EXPECT(o, "NaN and infinity");
    o = t_op(&r, BW_OP_UPDATE, "board", BOARD_ID(1, 1), NULL);
    t_f_dbl(&r, o, "score", -INFINITY);
    EXPECT(o, "NaN and infinity");

    /* valid ones mixed in */
    o = t_op(&r, BW_OP_UPDATE, "board", BOARD_ID(6, 1), NULL);
    t_f_int(&r, o, "score", 3); /* an int is a fine double */
    t_f_inc(&r, o, "score", 1); /* a double column increments too (given once more: rejected?) */
    o->n_fields = 1;            /* keep only the int */
    VALID(o, 6);
    o = t_op(&r, BW_OP_UPDATE, "pin", PIN_ID(7, 1), NULL);
    t_f_str(&r, o, "image", "text is fine binary", 19);
    t_f_str(&r, o, "title", title, 255);
    t_f_inc(&r, o, "like_count", -1);
    t_f_null(&r, o, "board_id");
    VALID(o, 7);
    o = t_op(&r, BW_OP_DELETE, "pin", PIN_ID(0, (1ull << 36) - 1), NULL);
    VALID(o, 0);
    o = t_op(&r, BW_OP_UPSERT, "pin", PIN_ID(4, 1), NULL);
    t_f_int(&r, o, "owner_id", 1);
    VALID(o, 4);
    ck_assert_uint_le(n, sizeof(e) / sizeof(*e));
    check_validation(&r, e, n);

    /* the same request through protobuf gives the same verdicts */
    t_req_t r2 = r;
    r2.req = via_protobuf(r.req);
    for (size_t i = 0; i < n; i++) e[i].op = r2.req->ops[i];
    /* NaN does not compare equal to itself, so compare verdicts, not structs */
    check_validation(&r2, e, n);
#undef EXPECT
#undef VALID
}
END_TEST

/* A bad id, a wrong-typed increment or a number past 64 bits rejects its op alone, with
 * its reason, as protobuf rejects the same op; the valid op beside it is accepted. */
static void expect_op_rejected(const char *op, const char *needle) {
    char body[1024];
    snprintf(body, sizeof(body), "{\"ops\": [%s, {\"op\": \"delete\", \"object_type\": \"pin\", \"id\": 68719476737}]}", op);
    /* the arena hands out memory as it was left: poisoned, a field validation forgot shows */
    bw_arena_reset(&A);
    memset(bw_arena_alloc(&A, 32768), 0xff, 32768);
    bw_arena_reset(&A);
    Bulkwrite__V1__BatchWriteRequest *req = json(body);
    ck_assert_msg(req != NULL, "%s: %s", body, errbuf);
    ck_assert_uint_eq(req->n_ops, 2);
    bw_op_route_t routes[2];
    bw_rejection_t *rej;
    ck_assert_uint_eq(bw_request_validate(C, req, BW_FMT_JSON, &A, routes, &rej), 1);
    ck_assert_uint_eq(rej[0].index, 0);
    ck_assert_msg(strstr(rej[0].reason, needle) != NULL, "%s: reason \"%s\" lacks \"%s\"", op, rej[0].reason, needle);
    ck_assert_msg(!rej[0].retryable, "%s: an invalid op is marked retryable", op);
    ck_assert_int_eq(routes[0].shard, -1);
    ck_assert_int_eq(routes[1].shard, 0);
}

START_TEST(json_bad_values_reject_their_op_alone) {
#define UPD(fields) "{\"op\": \"update\", \"object_type\": \"pin\", \"id\": 68719476737, \"fields\": " fields "}"
#define DEL(id) "{\"op\": \"delete\", \"object_type\": \"pin\", \"id\": " id "}"
    expect_op_rejected(DEL("-1"), "id -1 is not an unsigned 64-bit integer");
    expect_op_rejected(DEL("1.5"), "id 1.5 is not an unsigned 64-bit integer");
    expect_op_rejected(DEL("1e3"), "id 1e3 is not an unsigned 64-bit integer");
    expect_op_rejected(DEL("-9223372036854775809"), "id -9223372036854775809 is not an unsigned 64-bit integer");
    expect_op_rejected(DEL("18446744073709551616"), "id 18446744073709551616 is not an unsigned 64-bit integer");
    expect_op_rejected(DEL("\"12x\""), "id \"12x\" is not an unsigned 64-bit integer");
    expect_op_rejected(DEL("\" 12\""), "id \" 12\" is not");
    expect_op_rejected(DEL("\"\""), "id \"\" is not");
    expect_op_rejected(DEL("\"18446744073709551616\""), "id \"18446744073709551616\" is not");
    expect_op_rejected(DEL("\"12\\u00003\""), "is not an unsigned 64-bit integer");
    /* 2^63 fits protobuf's uint64: rejected by its top bits, as a protobuf client's is */
    expect_op_rejected(DEL("9223372036854775808"), "id 9223372036854775808: the two top bits must be zero");
    expect_op_rejected(UPD("{\"like_count\": 9223372036854775808}"),
                       "field \"like_count\": 9223372036854775808 is out of the signed 64-bit range");
    expect_op_rejected(UPD("{\"like_count\": {\"increment\": -9223372036854775809}}"), "out of the signed 64-bit range");
    expect_op_rejected(UPD("{\"score\": 1e400}"), "field \"score\": 1e400 is out of the double range");
    /* the first fault of an op is its reason */
    expect_op_rejected("{\"op\": \"update\", \"object_type\": \"pin\", \"id\": -2, \"fields\": {\"like_count\": 1e400}}",
                       "id -2 is not");
#undef DEL
    /* wrong-typed increments: the same verdict as the same op sent as protobuf */
    const char *incs[] = {UPD("{\"like_count\": {\"increment\": \"1\"}}"), UPD("{\"like_count\": {\"increment\": true}}"),
                          UPD("{\"like_count\": {\"increment\": null}}"), UPD("{\"like_count\": {\"increment\": 1.5}}")};
    const char *why[] = {"field \"like_count\": column type is int, the value is not",
                         "field \"like_count\": column type is int, the value is not",
                         "field \"like_count\": cannot increment by null",
                         "field \"like_count\": column type is int, the value is not"};
#undef UPD
    for (size_t k = 0; k < 4; k++) {
        expect_op_rejected(incs[k], why[k]);
        char body[512];
        snprintf(body, sizeof(body), "{\"ops\": [%s]}", incs[k]);
        Bulkwrite__V1__BatchWriteRequest *pb = via_protobuf(json(body));
        ck_assert(pb->ops[0]->fields[0]->increment);
        bw_op_route_t routes[1];
        bw_rejection_t *rej;
        ck_assert_uint_eq(bw_request_validate(C, pb, BW_FMT_PROTOBUF, &A, routes, &rej), 1);
        ck_assert_str_eq(rej[0].reason, why[k]);
    }
    /* where no op could carry it, a number past 64 bits still refuses the body */
    expect_bad_json("{\"request_id\": 9223372036854775808, \"ops\": []}", "too big integer");
}
END_TEST

/* bwctl submit's reader: ops one text at a time, by the request decoder's rules, into the
 * same structs as the same ops in one request */
START_TEST(json_ops_read_one_at_a_time) {
    uint64_t pin = PIN_ID(3, 5);
    char ops[3][512];
    snprintf(ops[0], sizeof(ops[0]),
             "{\"op\": \"create\", \"object_type\": \"pin\", \"id\": %" PRIu64 ", \"shard_key\": \"7\","
             " \"fields\": {\"owner_id\": 12, \"title\": \"caf\\u00e9\", \"image\": {\"base64\": \"AP8=\"}}}", pin);
    snprintf(ops[1], sizeof(ops[1]),
             "{\"op\": \"update\", \"object_type\": \"pin\", \"id\": \"%" PRIu64 "\", \"fields\": {\"like_count\":"
             " {\"increment\": 3}, \"a\": 1, \"b\": 2, \"c\": 3, \"d\": 4, \"e\": 5, \"f\": 6, \"g\": 7, \"h\": 8,"
             " \"i\": 9, \"j\": 10, \"k\": 11, \"l\": 12, \"m\": 13, \"n\": 14, \"o\": 15, \"p\": 16, \"q\": 17}}", pin);
    snprintf(ops[2], sizeof(ops[2]), "{\"op\": \"delete\", \"object_type\": \"pin\", \"id\": %" PRIu64 "}", pin);
    char body[2048];
    snprintf(body, sizeof(body), "{\"ops\": [%s, %s, %s]}", ops[0], ops[1], ops[2]);
    Bulkwrite__V1__BatchWriteRequest *whole = json(body);
    ck_assert_msg(whole != NULL, "%s", errbuf);

    bw_json_ops_reader_t *r = bw_json_ops_reader_new();
    Bulkwrite__V1__BatchWriteRequest one = BULKWRITE__V1__BATCH_WRITE_REQUEST__INIT;
    Bulkwrite__V1__Op *read[3];
    one.ops = read;
    char err[256];
    static const struct {
        const char *text, *why;
    } bad[] = {
        {"{\"op\": \"delete\", \"object_type\": \"pin\", \"id\": 1}{\"op\": \"delete\"}", "one op a line"},
        {"{\"op\": \"delete\", \"object_type\": \"pin\"", "ends inside the op"},
        {"[1, 2]", "not an object"},
        {"", "an op ('{') expected"},
        {"{\"op\": \"delete\", \"colour\": 1}", "unknown member \"colour\""},
        {"{\"op\": \"delete\", \"op\": \"create\"}", "malformed JSON at column 22: duplicate object key \"op\""},
        {"{\"op\": \"delete\", \"object_type\": \"pin\", \"fields\": {\"title\": \"\\ud83d\"}}", "high surrogate"},
        {"{\"op\": \"delete\", \"object_type\": \"p\xc0\x80\"}", "invalid UTF-8"},
        {"{\"op\" \"delete\"}", "malformed JSON at column"},
    };
    /* each good text after a bad one: what yajl held of the bad one is gone */
    for (size_t i = 0; i < 3; i++) {
        for (size_t k = i; k < sizeof(bad) / sizeof(bad[0]); k += 3) {
            ck_assert_msg(bw_json_op_read(r, &A, bad[k].text, strlen(bad[k].text), err, sizeof(err)) == NULL,
                          "read: %s", bad[k].text);
            ck_assert_msg(strstr(err, bad[k].why) && !strstr(err, "ops["), "%s: \"%s\" lacks \"%s\"", bad[k].text,
                          err, bad[k].why);
        }
        read[i] = bw_json_op_read(r, &A, ops[i], strlen(ops[i]), err, sizeof(err));
        ck_assert_msg(read[i] != NULL, "%s: %s", ops[i], err);
        ck_assert_ptr_null(bw_json_op_fault(read[i]));
        one.n_ops = i + 1;
    }
    char why[256] = "";
    ck_assert_msg(t_request_eq(whole, &one, why, sizeof(why)), "read one at a time differently: %s", why);
    /* an op protobuf cannot carry is read, with the fault its request would reject it for */
    const char *neg = "{\"op\": \"delete\", \"object_type\": \"pin\", \"id\": -1}";
    Bulkwrite__V1__Op *op = bw_json_op_read(r, &A, neg, strlen(neg), err, sizeof(err));
    ck_assert(op && bw_json_op_fault(op) && strstr(bw_json_op_fault(op), "id -1 is not"));
    bw_json_ops_reader_free(r);
}
END_TEST

START_TEST(validate_json_op_word) {
    Bulkwrite__V1__BatchWriteRequest *req =
        json("{\"ops\": [{\"op\": \"frobnicate\", \"object_type\": \"pin\", \"id\": 68719476737},"
             "           {\"op\": \"Delete\", \"object_type\": \"pin\", \"id\": 68719476737}]}");
    ck_assert_msg(req != NULL, "%s", errbuf);
    bw_op_route_t routes[2];
    bw_rejection_t *rej;
    ck_assert_uint_eq(bw_request_validate(C, req, BW_FMT_JSON, &A, routes, &rej), 1);
    ck_assert_uint_eq(rej[0].index, 0);
    ck_assert_ptr_nonnull(strstr(rej[0].reason, "op must be one of"));
    ck_assert_int_eq(routes[1].shard, 0);
    /* invalid UTF-8 cannot come through JSON but can through protobuf bytes */
    t_req_t r;
    t_req_init(&r, &A, 4);
    Bulkwrite__V1__Op *o = t_op(&r, BW_OP_UPDATE, "pin", PIN_ID(1, 1), NULL);
    t_f_str(&r, o, "description", "\xc0\xaf", 2); /* overlong '/' */
    Bulkwrite__V1__BatchWriteRequest *pb = via_protobuf(r.req);
    ck_assert_uint_eq(bw_request_validate(C, pb, BW_FMT_PROTOBUF, &A, routes, &rej), 1);
    ck_assert_ptr_nonnull(strstr(rej[0].reason, "not valid UTF-8"));
}
END_TEST

START_TEST(utf8_validity) {
    static const struct {
        const char *s;
        size_t len;
        int ok;
    } v[] = {
#define U(lit, ok) {lit, sizeof(lit) - 1, ok}
        U("", 1),
        U("plain ASCII \x7f", 1),
        U("\0", 1),
        U("\xc2\x80", 1),                 /* U+0080, smallest 2-byte */
        U("\xdf\xbf", 1),                 /* U+07FF */
        U("\xe0\xa0\x80", 1),             /* U+0800 */
        U("\xef\xbf\xbf", 1),             /* U+FFFF */
        U("\xed\x9f\xbf", 1),             /* U+D7FF, below the surrogates */
        U("\xee\x80\x80", 1),             /* U+E000, above them */
        U("\xf0\x90\x80\x80", 1),         /* U+10000 */
        U("\xf4\x8f\xbf\xbf", 1),         /* U+10FFFF */
        U("\xc3\xa9\xe6\x97\xa5\xf0\x9f\x98\x80", 1),
        U("\xc0\x80", 0),                 /* overlong NUL */
        U("\xc1\xbf", 0),                 /* overlong U+007F */
        U("\xe0\x80\xaf", 0),             /* overlong '/' in 3 bytes */
        U("\xe0\x9f\xbf", 0),             /* overlong U+07FF */
        U("\xf0\x80\x80\xaf", 0),         /* overlong in 4 bytes */
        U("\xf0\x8f\xbf\xbf", 0),         /* overlong U+FFFF */
        U("\xed\xa0\x80", 0),             /* U+D800 */
        U("\xed\xbf\xbf", 0),             /* U+DFFF */
        U("\xed\xa0\xbd\xed\xb8\x80", 0), /* CESU-8 surrogate pair */
        U("\xf4\x90\x80\x80", 0),         /* U+110000 */
        U("\xf5\x80\x80\x80", 0),
        U("\xf7\xbf\xbf\xbf", 0),
        U("\xf8\x88\x80\x80\x80", 0),     /* 5-byte form */
        U("\xfc\x84\x80\x80\x80\x80", 0), /* 6-byte form */
        U("\xfe", 0),
        U("\xff", 0),
        U("\x80", 0),                     /* lone continuation */
        U("a\xbf", 0),
        U("\xc3", 0),                     /* truncated 2-byte */
        U("\xe6\x97", 0),                 /* truncated 3-byte */
        U("\xf0\x9f\x98", 0),             /* truncated 4-byte */
        U("\xc3\x28", 0),                 /* bad continuation */
        U("\xe6\x28\xa5", 0),
        U("\xf0\x9f\x28\x80", 0),
        U("ok\xc3", 0),
#undef U
    };
    for (size_t i = 0; i < BW_ARRAY_LEN(v); i++)
        ck_assert_msg(bw_utf8_valid((const unsigned char *)v[i].s, v[i].len) == v[i].ok, "case %zu: want %d", i,
                      v[i].ok);
    /* a fault at every offset of a long ASCII run, past the eight-byte steps' edges */
    for (size_t len = 1; len <= 40; len++) {
        for (size_t at = 0; at < len; at++) {
            unsigned char buf[48];
            memset(buf, 'a', sizeof(buf));
            buf[at] = 0xff;
            ck_assert_msg(!bw_utf8_valid(buf, len), "0xff at %zu of %zu", at, len);
            ck_assert_msg(bw_utf8_valid(buf, at), "the %zu bytes before it", at);
            if (at + 2 <= len) { /* a valid 2-byte sequence there, then a truncated one at the end */
                buf[at] = 0xc3, buf[at + 1] = 0xa9;
                ck_assert_msg(bw_utf8_valid(buf, len), "U+00E9 at %zu of %zu", at, len);
                buf[len - 1] = 0xc3;
                ck_assert_msg(!bw_utf8_valid(buf, len), "a lone lead byte at the end of %zu", len);
            }
        }
    }
    /* the length bounds the scan: a valid prefix of an invalid buffer is valid */
    ck_assert(bw_utf8_valid((const unsigned char *)"ab\xff", 2));
    ck_assert(!bw_utf8_valid((const unsigned char *)"\xe6\x97\xa5", 2));
}
END_TEST

/* ---- responses ----------------------------------------------------------------------- */

START_TEST(response_json) {
    bw_rejection_t rej[] = {{1, "unknown object_type \"widget\"", 0},
                            {7, "field \"t\": quote \" and \\ and caf\xc3\xa9", 1}};
    char *out = NULL;
    size_t len = 0;
    bw_response_encode(BW_FMT_JSON, "job-42", 5, rej, 2, &out, &len);
    ck_assert_ptr_nonnull(out);
    ck_assert_uint_eq(strlen(out), len);
    json_error_t jerr;
    json_t *root = json_loadb(out, len, JSON_REJECT_DUPLICATES, &jerr);
    ck_assert_msg(root != NULL, "response is not JSON: %s", jerr.text);
    ck_assert_str_eq(json_string_value(json_object_get(root, "job_id")), "job-42");
    ck_assert_int_eq(json_integer_value(json_object_get(root, "accepted")), 5);
    json_t *arr = json_object_get(root, "rejected");
    ck_assert_uint_eq(json_array_size(arr), 2);
    for (size_t i = 0; i < 2; i++) {
        json_t *e = json_array_get(arr, i);
        ck_assert_int_eq(json_integer_value(json_object_get(e, "index")), rej[i].index);
        ck_assert_str_eq(json_string_value(json_object_get(e, "reason")), rej[i].reason);
        /* "retryable" only where true: a backlog refusal, resent later */
        ck_assert_int_eq(json_is_true(json_object_get(e, "retryable")), rej[i].retryable);
        ck_assert_int_eq(json_object_get(e, "retryable") != NULL, rej[i].retryable);
    }
    json_decref(root);
    free(out);
    /* no rejections: an empty array, not a missing member */
    bw_response_encode(BW_FMT_JSON, "j", 0, NULL, 0, &out, &len);
    root = json_loadb(out, len, 0, &jerr);
    ck_assert_ptr_nonnull(root);
    ck_assert(json_is_array(json_object_get(root, "rejected")));
    ck_assert_uint_eq(json_array_size(json_object_get(root, "rejected")), 0);
    json_decref(root);
    free(out);
}
END_TEST

START_TEST(response_protobuf) {
    bw_rejection_t rej[] = {{0, "a", 0}, {4294967295u, "field \"x\": \xf0\x9f\x98\x80", 1}, {3, "", 0}};
    char *out = NULL;
    size_t len = 0;
    bw_response_encode(BW_FMT_PROTOBUF, "job-7", 123456, rej, 3, &out, &len);
    Bulkwrite__V1__BatchWriteResponse *resp =
        bulkwrite__v1__batch_write_response__unpack(NULL, len, (const uint8_t *)out);
    ck_assert_ptr_nonnull(resp);
    ck_assert_str_eq(resp->job_id, "job-7");
    ck_assert_uint_eq(resp->accepted, 123456);
    ck_assert_uint_eq(resp->n_rejected, 3);
    for (size_t i = 0; i < 3; i++) {
        ck_assert_uint_eq(resp->rejected[i]->index, rej[i].index);
        ck_assert_str_eq(resp->rejected[i]->reason, rej[i].reason);
        ck_assert_int_eq(resp->rejected[i]->retryable, rej[i].retryable);
    }
    bulkwrite__v1__batch_write_response__free_unpacked(resp, NULL);
    free(out);
    bw_response_encode(BW_FMT_PROTOBUF, "", 0, NULL, 0, &out, &len);
    resp = bulkwrite__v1__batch_write_response__unpack(NULL, len, (const uint8_t *)out);
    ck_assert_ptr_nonnull(resp);
    ck_assert_uint_eq(resp->n_rejected, 0);
    bulkwrite__v1__batch_write_response__free_unpacked(resp, NULL);
    free(out);
}
END_TEST

START_TEST(response_reasons_quoting_client_text) {
    /* Reasons quote client text (object type, field names) cut to a length: the cut
     * must not split a UTF-8 sequence, and text that was never UTF-8 (protobuf strings
     * are not checked) must not break the JSON reply or drop the rejection. */
    t_req_t r;
    t_req_init(&r, &A, 4);
    char type[200] = "a";
    for (int i = 0; i < 60; i++) strcat(type, "\xc3\xa9"); /* 1 + 120 bytes: a cut at 100 splits an é */
    t_op(&r, BW_OP_DELETE, type, PIN_ID(1, 1), NULL);
    Bulkwrite__V1__Op *o = t_op(&r, BW_OP_UPDATE, "pin", PIN_ID(1, 1), NULL);
    t_f_int(&r, o, "bad\xff\xfe name", 1);
    t_op(&r, BW_OP_DELETE, "\xe6\x97", PIN_ID(1, 1), NULL);
    bw_op_route_t routes[4];
    bw_rejection_t *rej;
    Bulkwrite__V1__BatchWriteRequest *pb = via_protobuf(r.req);
    size_t n = bw_request_validate(C, pb, BW_FMT_PROTOBUF, &A, routes, &rej);
    ck_assert_uint_eq(n, 3);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(bw_utf8_valid((const unsigned char *)rej[i].reason, strlen(rej[i].reason)),
                      "reason %zu is not UTF-8: %s", i, rej[i].reason);
    ck_assert_ptr_nonnull(strstr(rej[0].reason, "unknown object_type \"a\xc3\xa9"));
    char *out = NULL;
    size_t len = 0;
    bw_response_encode(BW_FMT_JSON, "job", 0, rej, n, &out, &len);
    ck_assert_ptr_nonnull(out);
    json_error_t jerr;
    json_t *root = json_loadb(out, len, 0, &jerr);
    ck_assert_msg(root != NULL, "reply is not JSON: %s", jerr.text);
    ck_assert_uint_eq(json_array_size(json_object_get(root, "rejected")), 3);
    json_decref(root);
    free(out);
    /* encoding a reason that is not UTF-8 keeps the rejection, with '?' for bad bytes */
    bw_rejection_t raw[] = {{0, "ok", 0}, {1, "bad \xc3 and \xff end \xc3\xa9", 0}};
    bw_response_encode(BW_FMT_JSON, "job", 0, raw, 2, &out, &len);
    root = json_loadb(out, len, 0, &jerr);
    ck_assert_msg(root != NULL, "reply is not JSON: %s", jerr.text);
    json_t *arr = json_object_get(root, "rejected");
    ck_assert_uint_eq(json_array_size(arr), 2);
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(arr, 1), "index")), 1);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(arr, 1), "reason")),
                     "bad ? and ? end \xc3\xa9");
    json_decref(root);
    free(out);
}
END_TEST

/* The test clients' JSON writer (codec/apijson.h) writes what the proxy's decoder reads
 * back to the same request, value kinds included: every kind, an increment, text that
 * needs escaping, a double without a fraction, bytes, empty text. */
START_TEST(apijson_request_round_trip) {
    Bulkwrite__V1__Value v[7];
    for (int i = 0; i < 7; i++) bulkwrite__v1__value__init(&v[i]);
    v[0].kind_case = BULKWRITE__V1__VALUE__KIND_INT_VALUE, v[0].int_value = -9007199254740993LL;
    v[1].kind_case = BULKWRITE__V1__VALUE__KIND_DOUBLE_VALUE, v[1].double_value = 3.0;
    v[2].kind_case = BULKWRITE__V1__VALUE__KIND_BOOL_VALUE, v[2].bool_value = 1;
    static const char text[] = "say \"hi\"\\ \x01\ttab caf\xc3\xa9";
    v[3].kind_case = BULKWRITE__V1__VALUE__KIND_STRING_VALUE;
    v[3].string_value = (ProtobufCBinaryData){sizeof(text) - 1, (uint8_t *)text};
    static const uint8_t raw[] = {0, 1, 2, 0xff, 0xfe};
    v[4].kind_case = BULKWRITE__V1__VALUE__KIND_BYTES_VALUE;
    v[4].bytes_value = (ProtobufCBinaryData){sizeof(raw), (uint8_t *)raw};
    v[5].kind_case = BULKWRITE__V1__VALUE__KIND_DOUBLE_VALUE, v[5].double_value = 0.1;
    /* empty text as protobuf-c's unpack leaves it: NULL data (written as "", no NULL memcpy) */
    v[6].kind_case = BULKWRITE__V1__VALUE__KIND_STRING_VALUE, v[6].string_value = (ProtobufCBinaryData){0, NULL};
    static const char *const names[] = {"a", "b", "c", "d", "e", "f", "g"};
    Bulkwrite__V1__Field fv[7], *fp[7];
    for (int i = 0; i < 7; i++) {
        bulkwrite__v1__field__init(&fv[i]);
        fv[i].name = (char *)names[i];
        fv[i].value = &v[i];
        fp[i] = &fv[i];
    }
    fv[0].increment = 1;
    Bulkwrite__V1__Op op[2], *ops[2];
    for (int i = 0; i < 2; i++) {
        bulkwrite__v1__op__init(&op[i]);
        ops[i] = &op[i];
    }
    op[0].op = BULKWRITE__V1__OP_TYPE__UPSERT, op[0].object_type = "pin", op[0].id = PIN_ID(3, 7);
    op[0].shard_key = "user\"1", op[0].fields = fp, op[0].n_fields = 7;
    op[1].op = BULKWRITE__V1__OP_TYPE__DELETE, op[1].object_type = "board", op[1].id = BOARD_ID(1, 2);
    Bulkwrite__V1__BatchWriteRequest req = BULKWRITE__V1__BATCH_WRITE_REQUEST__INIT;
    req.request_id = "nightly/1";
    req.ops = ops;
    req.n_ops = 2;
    bw_buf_t b;
    bw_buf_init(&b);
    bw_apijson_request(&b, req.request_id, NULL, ops, 2);
    Bulkwrite__V1__BatchWriteRequest *back = json(b.data);
    ck_assert_msg(back != NULL, "%s: %s", b.data, errbuf);
    size_t n1 = bulkwrite__v1__batch_write_request__get_packed_size(&req);
    size_t n2 = bulkwrite__v1__batch_write_request__get_packed_size(back);
    uint8_t *p1 = bw_arena_alloc(&A, n1 + 1), *p2 = bw_arena_alloc(&A, n2 + 1);
    bulkwrite__v1__batch_write_request__pack(&req, p1);
    bulkwrite__v1__batch_write_request__pack(back, p2);
    ck_assert_msg(n1 == n2 && memcmp(p1, p2, n1) == 0, "the JSON %s decodes to another request", b.data);
    bw_buf_free(&b);
}
END_TEST


/* The lane: in JSON and protobuf alike; once, a string; a NUL in it makes it no lane's
 * name (JSON refuses it; protobuf reads a name no configuration has, as protobuf-c would
 * read the bytes); absent is "". */
/* A named job: the job's id from the client and the name, in a namespace of its own; each
 * part's id shares the job's first 20 hex digits (the ledgers' range) and ends in its
 * number; a request_id beside the name is refused. */
START_TEST(named_job_ids) {
    Bulkwrite__V1__BatchWriteRequest r = BULKWRITE__V1__BATCH_WRITE_REQUEST__INIT;
    char job[33], part[33], job2[33], part2[33], plain[33], err[256];
    r.job = "ingest-partner-x";
    r.job_part = 7;
    ck_assert_int_eq(bw_request_named_job_id(&r, NULL, NULL, 0, job, part, err, sizeof(err)), 0);
    ck_assert_uint_eq(strspn(job, "0123456789abcdef"), 32);
    ck_assert_int_eq(memcmp(job, part, BW_LEDGER_JOB_PREFIX), 0);
    ck_assert_str_eq(part + BW_LEDGER_JOB_PREFIX, "000000000007");
    ck_assert_uint_eq(bw_ledger_part_of(part), 7);
    r.job_part = BW_JOB_PART_MAX;
    ck_assert_int_eq(bw_request_named_job_id(&r, NULL, NULL, 0, job2, part2, err, sizeof(err)), 0);
    ck_assert_str_eq(job, job2); /* every part: one job */
    ck_assert_str_ne(part, part2);
    ck_assert_uint_eq(bw_ledger_part_of(part2), BW_JOB_PART_MAX);
    /* past the bound: refused, naming it (a part number must not size anything) */
    r.job_part = BW_JOB_PART_MAX + 1;
    ck_assert_int_eq(bw_request_named_job_id(&r, NULL, NULL, 0, job2, part2, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, "job_part 1000000 is over 999999"), "%s", err);
    r.job_part = BW_JOB_PART_MAX;
    /* another client's job of the same name is another job */
    ck_assert_int_eq(bw_request_named_job_id(&r, "team-b", "k", 1, job2, part2, err, sizeof(err)), 0);
    ck_assert_str_ne(job, job2);
    /* a request_id of the same text names another job */
    r.request_id = "ingest-partner-x";
    ck_assert_int_eq(bw_request_job_id(&r, NULL, NULL, 0, plain, err, sizeof(err)), 0);
    ck_assert_str_ne(plain, job);
    ck_assert_int_eq(bw_request_named_job_id(&r, NULL, NULL, 0, job2, part2, err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "leave request_id empty"));
    r.request_id = "";
    r.job = "tab\there";
    ck_assert_int_eq(bw_request_named_job_id(&r, NULL, NULL, 0, job2, part2, err, sizeof(err)), -1);
    ck_assert_str_eq(err, "job contains a control character at byte 3");
}
END_TEST

START_TEST(job_fields_in_both_encodings) {
    Bulkwrite__V1__BatchWriteRequest *r = json("{\"job\": \"nightly\", \"job_part\": 4294967295, \"job_last\": true, \"ops\": []}");
    ck_assert_msg(r != NULL, "%s", errbuf);
    ck_assert_str_eq(r->job, "nightly");
    ck_assert_uint_eq(r->job_part, 4294967295u);
    ck_assert(r->job_last);
    r = json("{\"ops\": []}");
    ck_assert_msg(r != NULL, "%s", errbuf);
    ck_assert_str_eq(r->job, "");
    ck_assert_uint_eq(r->job_part, 0);
    ck_assert(!r->job_last);
    expect_bad_json("{\"job_part\": 4294967296, \"ops\": []}", "job_part 4294967296 is not an integer from 0 to 4294967295");
    expect_bad_json("{\"job_part\": -1, \"ops\": []}", "job_part -1 is not an integer");
    expect_bad_json("{\"job_part\": \"1\", \"ops\": []}", "unknown or mistyped member \"job_part\"");
    expect_bad_json("{\"job_last\": 1, \"ops\": []}", "unknown or mistyped member \"job_last\"");
    expect_bad_json("{\"job\": \"a\\u0000b\", \"ops\": []}", "job contains a control character (NUL) at byte 1");
    /* protobuf: job (4), job_part (5), job_last (6), as protobuf-c reads them */
    Bulkwrite__V1__BatchWriteRequest in = BULKWRITE__V1__BATCH_WRITE_REQUEST__INIT;
    in.job = "nightly";
    in.job_part = 300;
    in.job_last = 1;
    uint8_t buf[64];
    size_t len = bulkwrite__v1__batch_write_request__pack(&in, buf);
    int too_many = -1;
    r = bw_request_decode_bounded(BW_FMT_PROTOBUF, buf, len, 10, &A, errbuf, sizeof(errbuf), &too_many);
    ck_assert_msg(r != NULL, "%s", errbuf);
    ck_assert_str_eq(r->job, "nightly");
    ck_assert_uint_eq(r->job_part, 300);
    ck_assert(r->job_last);
    static const uint8_t pb_nul[] = {0x22, 0x03, 'a', 0x00, 'b'};
    ck_assert_ptr_null(bw_request_decode_bounded(BW_FMT_PROTOBUF, pb_nul, sizeof(pb_nul), 10, &A, errbuf, sizeof(errbuf),
                                                 &too_many));
    ck_assert_str_eq(errbuf, "job contains a control character (NUL) at byte 1");
}
END_TEST

/* replay_of (7): a string in both encodings, a NUL refused in both */
START_TEST(replay_of_in_both_encodings) {
    Bulkwrite__V1__BatchWriteRequest *r = json("{\"replay_of\": \"0123456789abcdef0123456789abcdef\", \"ops\": []}");
    ck_assert_msg(r != NULL, "%s", errbuf);
    ck_assert_str_eq(r->replay_of, "0123456789abcdef0123456789abcdef");
    r = json("{\"ops\": []}");
    ck_assert_msg(r != NULL, "%s", errbuf);
    ck_assert(!r->replay_of || !r->replay_of[0]);
    expect_bad_json("{\"replay_of\": 12, \"ops\": []}", "unknown or mistyped member \"replay_of\"");
    expect_bad_json("{\"replay_of\": \"a\\u0000b\", \"ops\": []}", "replay_of contains a control character (NUL) at byte 1");
    Bulkwrite__V1__BatchWriteRequest in = BULKWRITE__V1__BATCH_WRITE_REQUEST__INIT;
    in.replay_of = "0123456789abcdef0123456789abcdef";
    uint8_t buf[64];
    size_t len = bulkwrite__v1__batch_write_request__pack(&in, buf);
    int too_many = -1;
    r = bw_request_decode_bounded(BW_FMT_PROTOBUF, buf, len, 10, &A, errbuf, sizeof(errbuf), &too_many);
    ck_assert_msg(r != NULL, "%s", errbuf);
    ck_assert_str_eq(r->replay_of, "0123456789abcdef0123456789abcdef");
    static const uint8_t pb_nul[] = {0x3a, 0x03, 'a', 0x00, 'b'};
    ck_assert_ptr_null(bw_request_decode_bounded(BW_FMT_PROTOBUF, pb_nul, sizeof(pb_nul), 10, &A, errbuf, sizeof(errbuf),
                                                 &too_many));
    ck_assert_str_eq(errbuf, "replay_of contains a control character (NUL) at byte 1");
}
END_TEST

/* not_before (a UTC time or ms) and after (job ids) read the same from JSON and from
 * protobuf; a malformed one refuses the request, naming it. */
START_TEST(schedule_in_both_encodings) {
    Bulkwrite__V1__BatchWriteRequest *r = json("{\"not_before\": \"2026-12-06T02:00:00Z\", \"after\": "
                                               "[\"0123456789abcdef0123456789abcdef\", \"fedcba9876543210fedcba9876543210\"], \"ops\": []}");
    ck_assert_msg(r != NULL, "%s", errbuf);
    ck_assert_int_eq(r->not_before_ms, 1796522400000LL);
    ck_assert_uint_eq(r->n_after, 2);
    ck_assert_str_eq(r->after[1], "fedcba9876543210fedcba9876543210");
    r = json("{\"not_before\": 1796522400123, \"after\": [], \"ops\": []}");
    ck_assert_msg(r != NULL, "%s", errbuf);
    ck_assert_int_eq(r->not_before_ms, 1796522400123LL);
    ck_assert_uint_eq(r->n_after, 0);
    r = json("{\"ops\": []}");
    ck_assert_msg(r != NULL, "%s", errbuf);
    ck_assert_int_eq(r->not_before_ms, 0);
    ck_assert_uint_eq(r->n_after, 0);
    expect_bad_json("{\"not_before\": \"tomorrow\", \"ops\": []}", "not_before \"tomorrow\" is not a UTC time");
    expect_bad_json("{\"not_before\": \"2026-02-30T00:00:00Z\", \"ops\": []}", "not_before \"2026-02-30T00:00:00Z\"");
    expect_bad_json("{\"not_before\": -5, \"ops\": []}", "not_before -5 is not a time");
    expect_bad_json("{\"not_before\": 1.5, \"ops\": []}", "not_before 1.5 is not a time");
    expect_bad_json("{\"after\": \"0123\", \"ops\": []}", "unknown or mistyped member \"after\"");
    expect_bad_json("{\"after\": [7], \"ops\": []}", "unknown or mistyped member \"after\"");
    expect_bad_json("{\"after\": [\"a\\u0000b\"], \"ops\": []}", "after contains a control character (NUL) at byte 1");
    expect_bad_json("{\"after\": [], \"after\": [], \"ops\": []}", "duplicate object key \"after\"");
    Bulkwrite__V1__BatchWriteRequest in = BULKWRITE__V1__BATCH_WRITE_REQUEST__INIT;
    char *after[] = {"0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"};
    in.not_before_ms = 1796522400000LL;
    in.after = after;
    in.n_after = 2;
    uint8_t buf[128];
    size_t len = bulkwrite__v1__batch_write_request__pack(&in, buf);
    int too_many = -1;
    r = bw_request_decode_bounded(BW_FMT_PROTOBUF, buf, len, 10, &A, errbuf, sizeof(errbuf), &too_many);
    ck_assert_msg(r != NULL, "%s", errbuf);
    ck_assert_int_eq(r->not_before_ms, 1796522400000LL);
    ck_assert_uint_eq(r->n_after, 2);
    ck_assert_str_eq(r->after[0], after[0]);
    ck_assert_str_eq(r->after[1], after[1]);
    static const uint8_t pb_nul[] = {0x4a, 0x03, 'a', 0x00, 'b'};
    ck_assert_ptr_null(bw_request_decode_bounded(BW_FMT_PROTOBUF, pb_nul, sizeof(pb_nul), 10, &A, errbuf, sizeof(errbuf),
                                                 &too_many));
    ck_assert_str_eq(errbuf, "after contains a control character (NUL) at byte 1");
    static const uint8_t pb_wrong_type[] = {0x42, 0x01, 'x'}; /* not_before as bytes */
    ck_assert_ptr_null(bw_request_decode_bounded(BW_FMT_PROTOBUF, pb_wrong_type, sizeof(pb_wrong_type), 10, &A, errbuf,
                                                 sizeof(errbuf), &too_many));
}
END_TEST

START_TEST(lane_in_both_encodings) {
    Bulkwrite__V1__BatchWriteRequest *r = json("{\"lane\": \"urgent\", \"ops\": []}");
    ck_assert_msg(r != NULL, "%s", errbuf);
    ck_assert_str_eq(r->lane, "urgent");
    r = json("{\"ops\": []}");
    ck_assert_msg(r != NULL, "%s", errbuf);
    ck_assert_str_eq(r->lane, "");
    expect_bad_json("{\"lane\": 4, \"ops\": []}", "unknown or mistyped member \"lane\"");
    expect_bad_json("{\"lane\": \"a\", \"lane\": \"b\", \"ops\": []}", "duplicate object key \"lane\"");
    expect_bad_json("{\"lane\": \"ur\\u0000gent\", \"ops\": []}", "lane contains a control character (NUL) at byte 2");
    static const uint8_t pb[] = {0x1a, 0x04, 'b', 'u', 'l', 'k', 0x12, 0x00};
    int too_many = -1;
    r = bw_request_decode_bounded(BW_FMT_PROTOBUF, pb, sizeof(pb), 10, &A, errbuf, sizeof(errbuf), &too_many);
    ck_assert_msg(r != NULL, "%s", errbuf);
    ck_assert_str_eq(r->lane, "bulk");
    ck_assert_uint_eq(r->n_ops, 1);
    static const uint8_t pb_nul[] = {0x1a, 0x04, 'b', 0x00, 'l', 'k'};
    r = bw_request_decode_bounded(BW_FMT_PROTOBUF, pb_nul, sizeof(pb_nul), 10, &A, errbuf, sizeof(errbuf), &too_many);
    ck_assert_msg(r != NULL, "%s", errbuf);
    ck_assert_str_ne(r->lane, "b");
    /* bw_apijson_request writes it, and it reads back */
    bw_buf_t b;
    bw_buf_init(&b);
    bw_apijson_request(&b, "x", "bulk", NULL, 0);
    r = json(b.data);
    ck_assert_msg(r != NULL, "%s: %s", b.data, errbuf);
    ck_assert_str_eq(r->lane, "bulk");
    bw_buf_free(&b);
}
END_TEST

/* ---- the request schema (codec/request_schema.h) ---------------------------------- */

/* Fields of the two messages that JSON leaves out on purpose ("Message.field"). None
 * today: a field added to the .proto without a row, or a line here, fails
 * schema_covers_every_field. */
static const char *const json_leaves_out[] = {NULL};

static int left_out(const ProtobufCMessageDescriptor *pb, const char *field) {
    char name[128];
    snprintf(name, sizeof(name), "%s.%s", pb->short_name, field);
    for (size_t i = 0; json_leaves_out[i]; i++)
        if (strcmp(json_leaves_out[i], name) == 0) return 1;
    return 0;
}

/* The table a loop test's _i names: 0 the request's, 1 an op's. */
static const bw_schema_t *schema_of_loop(int i) {
    const bw_schema_t *sc = i ? bw_schema_op() : bw_schema_request();
    ck_assert_ptr_eq(sc->pb, i ? &bulkwrite__v1__op__descriptor : &bulkwrite__v1__batch_write_request__descriptor);
    return sc;
}

/* Every row's JSON name is its protobuf field's (not_before drops the unit of
 * not_before_ms), a plain name the writer needs not escape, given once. */
START_TEST(schema_names_are_the_protobuf_fields) {
    const bw_schema_t *sc = schema_of_loop(_i);
    for (size_t i = 0; i < sc->n; i++) {
        const bw_member_t *m = &sc->members[i];
        const ProtobufCFieldDescriptor *fd = sc->field[i];
        ck_assert_ptr_eq(protobuf_c_message_descriptor_get_field_by_name(sc->pb, fd->name), fd);
        if (m->proto_name) {
            size_t n = strlen(m->name);
            ck_assert_str_eq(m->proto_name, fd->name);
            ck_assert_msg(strncmp(fd->name, m->name, n) == 0 && fd->name[n] == '_', "%s is not %s without its unit",
                          m->name, fd->name);
        } else {
            ck_assert_str_eq(m->name, fd->name);
        }
        ck_assert_uint_eq(strspn(m->name, "abcdefghijklmnopqrstuvwxyz_"), strlen(m->name));
        ck_assert(m->type && *m->type);
        int k;
        ck_assert_ptr_eq(bw_schema_member_of(sc, fd->id, &k), m);
        ck_assert_int_eq(k, (int)i);
        ck_assert_int_eq(bw_schema_lookup(sc, (const unsigned char *)m->name, strlen(m->name)), (int)i);
        for (size_t j = 0; j < i; j++) ck_assert_str_ne(sc->members[j].name, m->name);
    }
}
END_TEST

/* Every field of BatchWriteRequest and of Op has a row, or is left out of JSON on purpose. */
START_TEST(schema_covers_every_field) {
    const bw_schema_t *sc = schema_of_loop(_i);
    for (unsigned f = 0; f < sc->pb->n_fields; f++) {
        const ProtobufCFieldDescriptor *fd = &sc->pb->fields[f];
        int found = 0;
        for (size_t i = 0; i < sc->n; i++) found |= sc->field[i] == fd;
        ck_assert_msg(found || left_out(sc->pb, fd->name), "%s.%s has no row in codec/request_schema.c",
                      sc->pb->short_name, fd->name);
    }
}
END_TEST

/* The error texts that name members and their types come from the rows. */
START_TEST(schema_error_texts) {
    static const char list[] = "(expected request_id: string, lane: string, job: string, job_part: integer, "
                               "job_last: boolean, replay_of: string, not_before: string or integer, after: array, "
                               "ops: array)";
    char buf[512];
    bw_schema_expected(bw_schema_request(), buf, sizeof(buf));
    ck_assert_str_eq(buf, list);
    ck_assert_ptr_null(json("{\"nope\": 1, \"ops\": []}"));
    ck_assert_str_eq(errbuf, "unknown or mistyped member \"nope\" (expected request_id: string, lane: string, job: "
                             "string, job_part: integer, job_last: boolean, replay_of: string, not_before: string or "
                             "integer, after: array, ops: array)");
    ck_assert_ptr_null(json("{\"ops\": {}}"));
    snprintf(buf, sizeof(buf), "unknown or mistyped member \"ops\" %s", list);
    ck_assert_str_eq(errbuf, buf);
    ck_assert_ptr_null(json("{\"job_part\": \"1\", \"ops\": []}"));
    ck_assert_str_eq(errbuf, "unknown or mistyped member \"job_part\" (an integer from 0 to 4294967295)");
    ck_assert_ptr_null(json("{\"not_before\": true, \"ops\": []}"));
    ck_assert_str_eq(errbuf, "unknown or mistyped member \"not_before\" (a UTC time \"YYYY-MM-DDTHH:MM:SSZ\", or ms "
                             "since the Unix epoch)");
    ck_assert_ptr_null(json("{\"after\": [7], \"ops\": []}"));
    ck_assert_str_eq(errbuf, "unknown or mistyped member \"after\" (an array of job ids)");
    ck_assert_ptr_null(json("{\"ops\": [{\"id\": []}]}"));
    ck_assert_str_eq(errbuf, "ops[0].id: not an unsigned 64-bit integer");
    ck_assert_ptr_null(json("{\"ops\": [{\"fields\": 1}]}"));
    ck_assert_str_eq(errbuf, "ops[0].fields: not an object");
    ck_assert_ptr_null(json("{\"ops\": [{\"shard_key\": \"a\", \"shard_key\": \"b\"}]}"));
    ck_assert_str_eq(errbuf, "malformed JSON at line 1 column 40: duplicate object key \"shard_key\"");
}
END_TEST

Suite *request_suite(void) {
    Suite *s = suite_create("request");
    TCase *tc = tcase_create("decode");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, request_id_names_the_job);
    tcase_add_test(tc, request_id_is_scoped_to_the_client);
    tcase_add_test(tc, lane_in_both_encodings);
    tcase_add_test(tc, named_job_ids);
    tcase_add_test(tc, job_fields_in_both_encodings);
    tcase_add_test(tc, replay_of_in_both_encodings);
    tcase_add_test(tc, schedule_in_both_encodings);
    tcase_add_test(tc, json_maps_field_for_field);
    tcase_add_test(tc, json_nul_and_escapes);
    tcase_add_test(tc, request_id_with_nul_is_refused);
    tcase_add_test(tc, max_ops_is_enforced_while_decoding);
    tcase_add_test(tc, json_malformed);
    tcase_add_test(tc, json_numbers_at_their_bounds);
    tcase_add_test(tc, json_surrogate_pairs);
    tcase_add_test(tc, protobuf_malformed);
    suite_add_tcase(s, tc);
    tc = tcase_create("validate");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, validate_rejections);
    tcase_add_test(tc, validate_json_op_word);
    tcase_add_test(tc, json_bad_values_reject_their_op_alone);
    tcase_add_test(tc, json_ops_read_one_at_a_time);
    tcase_add_test(tc, utf8_validity);
    suite_add_tcase(s, tc);
    tc = tcase_create("response");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, apijson_request_round_trip);
    tcase_add_test(tc, response_json);
    tcase_add_test(tc, response_protobuf);
    tcase_add_test(tc, response_reasons_quoting_client_text);
    suite_add_tcase(s, tc);
    tc = tcase_create("schema");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, schema_names_are_the_protobuf_fields, 0, 2);
    tcase_add_loop_test(tc, schema_covers_every_field, 0, 2);
    tcase_add_test(tc, schema_error_texts);
    suite_add_tcase(s, tc);
    return s;
}
