/* test_forward.c — the proxy forwards what it read without protobuf-c: its wire reader
 * must read every body as protobuf-c's unpack does (and refuse the same ones), and the
 * ShardBatch bytes the batcher writes must be protobuf-c's pack of the batch the old
 * path built, byte for byte (forward_ref.c holds that path). Hostile text, bytes, NULs,
 * increments, upserts, deletes, unknown fields, merged and overwritten values,
 * non-canonical varints; random requests; random mutations of a body. The consumer's
 * ShardBatch reader is held against protobuf-c's unpack the same way. JSON's many-field
 * duplicate check is here too. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batcher.h"
#include "forward_ref.h"
#include "helpers.h"
#include "pbdecode.h"
#include "request.h"
#include "shard.h"

static bw_arena_t A;
static bw_config_t *C;
static void setup(void) {
    bw_arena_init(&A, 1 << 20);
    C = t_ref_config();
}
static void teardown(void) {
    bw_config_destroy(C);
    bw_arena_destroy(&A);
}

#define PIN_ID(shard, local) bw_id_make(shard, 1, local)
#define BOARD_ID(shard, local) bw_id_make(shard, 2, local)

/* ---- raw wire bytes, for what protobuf-c never writes ------------------------------- */

typedef struct {
    uint8_t *b;
    size_t len, cap;
} raw_t;

static void raw_put(raw_t *r, const void *p, size_t n) {
    if (r->len + n > r->cap) {
        r->cap = (r->len + n) * 2 + 64;
        r->b = realloc(r->b, r->cap);
    }
    memcpy(r->b + r->len, p, n);
    r->len += n;
}
static void raw_varint(raw_t *r, uint64_t v) {
    uint8_t t[10];
    size_t n = 0;
    while (v >= 0x80) {
        t[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    t[n++] = (uint8_t)v;
    raw_put(r, t, n);
}
static void raw_tag(raw_t *r, unsigned field, unsigned wt) { raw_varint(r, (uint64_t)field << 3 | wt); }
static void raw_len(raw_t *r, unsigned field, const void *p, size_t n) {
    raw_tag(r, field, 2);
    raw_varint(r, n);
    raw_put(r, p, n);
}
static void raw_fixed64(raw_t *r, unsigned field, uint64_t v) {
    raw_tag(r, field, 1);
    uint8_t t[8];
    for (int i = 0; i < 8; i++) t[i] = (uint8_t)(v >> (8 * i));
    raw_put(r, t, 8);
}
static void raw_sub(raw_t *r, unsigned field, raw_t *sub) {
    raw_len(r, field, sub->b, sub->len);
    free(sub->b);
    *sub = (raw_t){0};
}

/* Ops protobuf-c never writes: overlong varints, unknown fields at every level, a oneof
 * set twice, a Value given twice (merged), an empty Value, the op given twice. */
static void hostile_ops(raw_t *body) {
    raw_t op = {0}, f = {0}, v = {0};
    raw_put(&op, "\x08\x82\x00", 3); /* op = UPDATE as an overlong varint */
    raw_len(&op, 2, "pin", 3);
    raw_fixed64(&op, 3, PIN_ID(2, 7));
    raw_tag(&op, 99, 0);
    raw_varint(&op, 12345);
    raw_len(&op, 100, "junk", 4);
    /* like_count: string then int (the int wins), increment as 128, an unknown fixed32 */
    raw_len(&f, 1, "like_count", 10);
    raw_len(&v, 4, "x", 1);
    raw_tag(&v, 2, 0);
    raw_varint(&v, 10); /* sint64 5 */
    raw_sub(&f, 2, &v);
    raw_put(&f, "\x18\x80\x01", 3);
    raw_put(&f, "\x7d\x01\x02\x03\x04", 5); /* field 15, wire type 5 */
    raw_sub(&op, 5, &f);
    /* title: the value twice, merged: the later string wins */
    raw_len(&f, 1, "title", 5);
    raw_tag(&v, 2, 0);
    raw_varint(&v, 2);
    raw_sub(&f, 2, &v);
    raw_len(&v, 4, "t\0x", 3);
    raw_sub(&f, 2, &v);
    raw_sub(&op, 5, &f);
    /* description: a Value with an unknown field (not forwarded) */
    raw_len(&f, 1, "description", 11);
    raw_len(&v, 20, "u", 1);
    raw_len(&v, 4, "d\xc3\xa9", 3);
    raw_sub(&f, 2, &v);
    raw_sub(&op, 5, &f);
    /* board_id: an empty Value (no member: null) */
    raw_len(&f, 1, "board_id", 8);
    raw_put(&f, "\x12\x00", 2);
    raw_sub(&op, 5, &f);
    raw_sub(body, 2, &op);
    /* an unknown top-level field between ops, then a delete whose op is given twice */
    raw_fixed64(body, 99, 42);
    raw_put(&op, "\x08\x01", 2);
    raw_len(&op, 2, "pin", 3);
    raw_fixed64(&op, 3, PIN_ID(2, 8));
    raw_put(&op, "\x08\x04", 2);
    raw_sub(body, 2, &op);
    raw_len(body, 1, "second-request-id-wins", 22);
}

/* The variety request, in protobuf-c structs: hostile text and bytes, NULL and absent
 * values, increments, every op, both routes, many ops (op_index past one varint byte). */
static Bulkwrite__V1__BatchWriteRequest *variety(void) {
    t_req_t r;
    t_req_init(&r, &A, 400);
    r.req->request_id = "variety \xf0\x9f\x98\x80";
    static uint8_t image[60000], all_bytes[256];
    for (size_t i = 0; i < sizeof(image); i++) image[i] = (uint8_t)(i * 131 + 7);
    for (int i = 0; i < 256; i++) all_bytes[i] = (uint8_t)i;
    static const char hostile[] = "a\0b \"q\" \\ '; DROP TABLE pins; -- \n\t\xe2\x80\x94 \xf0\x9f\x98\x80";
    char owner3[24];
    snprintf(owner3, sizeof(owner3), "%" PRIu64, bw_id_make(3, 9, 1));
    for (int i = 0; i < 60; i++) {
        Bulkwrite__V1__Op *o = t_op(&r, BW_OP_CREATE, "pin", i % 3 ? PIN_ID(3, 100 + (uint64_t)i) : 0, owner3);
        t_f_int(&r, o, "owner_id", i == 0 ? INT64_MIN : i == 1 ? INT64_MAX : -i);
        t_f_str(&r, o, "title", hostile, sizeof(hostile) - 1 - (size_t)(i % 7));
        if (i % 4 == 0) t_f_null(&r, o, "board_id");
        if (i % 4 == 1) t_f_bytes(&r, o, "image", all_bytes, sizeof(all_bytes));
        if (i % 4 == 2) t_f_str(&r, o, "description", "", 0);
        if (i % 4 == 3) t_field(&r, o, "description")->value = NULL; /* no value: null */
        if (i == 5) t_f_bytes(&r, o, "image", image, sizeof(image));
        if (i == 6) t_f_str(&r, o, "image", "text as bytes", 13);
    }
    for (int i = 0; i < 300; i++) {
        Bulkwrite__V1__Op *o;
        switch (i % 6) {
        case 0:
            o = t_op(&r, BW_OP_UPDATE, "pin", PIN_ID(3, 100 + (uint64_t)(i % 50)), NULL);
            t_f_inc(&r, o, "like_count", i % 2 ? -5 : 1000000);
            break;
        case 1:
            o = t_op(&r, BW_OP_UPSERT, "pin", PIN_ID((unsigned)i % 8, 7), NULL);
            t_f_int(&r, o, "owner_id", 1);
            t_f_str(&r, o, "description", hostile, sizeof(hostile) - 1);
            break;
        case 2: t_op(&r, BW_OP_DELETE, "pin", PIN_ID((unsigned)i % 8, 100 + (uint64_t)i), NULL); break;
        case 3: {
            o = t_op(&r, BW_OP_CREATE, "board", 0, i % 12 == 3 ? "acme\"';--" : "\xe6\x97\xa5\xe6\x9c\xac");
            t_f_str(&r, o, "partner", "p\0", 2);
            t_f_str(&r, o, "name", hostile, 20);
            t_f_dbl(&r, o, "score", i % 12 == 3 ? -0.0 : 1e308);
            t_f_bool(&r, o, "archived", i % 12 == 3);
            break;
        }
        case 4:
            o = t_op(&r, BW_OP_UPDATE, "board", BOARD_ID((unsigned)i % 8, 3), NULL);
            t_f_dbl(&r, o, "score", 2.5);
            t_f_inc(&r, o, "score", 1); /* given twice: rejected */
            break;
        default:
            o = t_op(&r, BW_OP_UPDATE, "pin", PIN_ID((unsigned)i % 8, 9), NULL);
            t_f_null(&r, o, "title");
            t_f_int(&r, o, "board_id", 0);
        }
    }
    t_op(&r, BW_OP_DELETE, "widget", PIN_ID(1, 1), NULL); /* invalid ones too */
    t_op(&r, BW_OP_UPDATE, "pin", PIN_ID(1, 1), NULL);
    return r.req;
}

static uint8_t *pack(const Bulkwrite__V1__BatchWriteRequest *req, size_t *len) {
    *len = bulkwrite__v1__batch_write_request__get_packed_size(req);
    uint8_t *b = bw_arena_alloc(&A, *len + 1);
    bulkwrite__v1__batch_write_request__pack(req, b);
    return b;
}

/* Reads `body` both ways, requires the same request, then validates, splits and
 * compares every message with protobuf-c's. Returns the number of messages. */
static size_t forward_and_compare(const bw_config_t *conf, const uint8_t *body, size_t len) {
    char err[512], why[512];
    Bulkwrite__V1__BatchWriteRequest *req = bw_request_decode(BW_FMT_PROTOBUF, body, len, &A, err, sizeof(err));
    Bulkwrite__V1__BatchWriteRequest *pbc = bulkwrite__v1__batch_write_request__unpack(&A.pb, len, body);
    ck_assert_msg(req != NULL, "the wire reader refused a body protobuf-c reads: %s", err);
    ck_assert_msg(pbc != NULL, "protobuf-c refused the body");
    ck_assert_msg(fref_request_eq(req, pbc, why, sizeof(why)), "read differently from protobuf-c: %s", why);
    bw_op_route_t *routes = bw_arena_alloc(&A, (req->n_ops + 1) * sizeof(*routes));
    bw_rejection_t *rej;
    bw_request_validate(conf, req, BW_FMT_PROTOBUF, &A, routes, &rej);
    bw_batch_set_t set;
    uint32_t *too_large;
    size_t too_large_cnt;
    bw_batcher_split(conf, req, routes, "0123456789abcdef0123456789abcdef", NULL, 1700000000123LL, &A, &set, &too_large,
                     &too_large_cnt);
    ck_assert_msg(fref_check_split(conf, pbc, &set, "0123456789abcdef0123456789abcdef", NULL, 1700000000123LL, why, sizeof(why)),
                  "%s", why);
    size_t n = set.msg_cnt;
    bw_batcher_free_payloads(&set);
    /* a named job's part carries the job's id too (ShardBatch.job), for the consumer's logs */
    const char *named = "fedcba9876543210fedcba9876543210";
    bw_batcher_split(conf, req, routes, "fedcba9876543210fedc000000000007", named, 1700000000123LL, &A, &set, &too_large,
                     &too_large_cnt);
    ck_assert_msg(fref_check_split(conf, pbc, &set, "fedcba9876543210fedc000000000007", named, 1700000000123LL, why,
                                   sizeof(why)), "%s", why);
    ck_assert_uint_eq(set.msg_cnt, n);
    bw_batcher_free_payloads(&set);
    return n;
}

START_TEST(forward_equals_protobuf_c) {
    size_t len;
    uint8_t *body = pack(variety(), &len);
    ck_assert_uint_ge(forward_and_compare(C, body, len), 8);
    /* the same with hand-made ops appended (a repeated field may be concatenated) */
    raw_t raw = {0};
    raw_put(&raw, body, len);
    hostile_ops(&raw);
    char err[256];
    Bulkwrite__V1__BatchWriteRequest *req = bw_request_decode(BW_FMT_PROTOBUF, raw.b, raw.len, &A, err, sizeof(err));
    ck_assert_ptr_nonnull(req);
    ck_assert_str_eq(req->request_id, "second-request-id-wins");
    const Bulkwrite__V1__Op *x = req->ops[req->n_ops - 2];
    ck_assert_int_eq(x->op, BW_OP_UPDATE);
    ck_assert_uint_eq(x->n_fields, 4);
    ck_assert_int_eq(x->fields[0]->value->kind_case, BULKWRITE__V1__VALUE__KIND_INT_VALUE);
    ck_assert_int_eq(x->fields[0]->value->int_value, 5);
    ck_assert_int_eq(x->fields[0]->increment, 1);
    ck_assert_int_eq(x->fields[1]->value->kind_case, BULKWRITE__V1__VALUE__KIND_STRING_VALUE);
    ck_assert_uint_eq(x->fields[1]->value->string_value.len, 3);
    ck_assert_int_eq(x->fields[3]->value->kind_case, BULKWRITE__V1__VALUE__KIND__NOT_SET);
    ck_assert_int_eq(req->ops[req->n_ops - 1]->op, BW_OP_DELETE);
    forward_and_compare(C, raw.b, raw.len);
    /* small messages and batches: many cuts, each where protobuf-c's sizes put it */
    bw_config_t *small = t_conf_variant_load("message_max_bytes = 1000000;", "message_max_bytes = 3000;");
    ck_assert_uint_gt(forward_and_compare(small, raw.b, raw.len), 10);
    bw_config_destroy(small);
    free(raw.b);
}
END_TEST

/* xorshift: deterministic */
static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

START_TEST(forward_random_requests) {
    bw_config_t *c2 = t_conf_variant_load("message_max_bytes = 1000000;", "message_max_bytes = 5000;");
    static const char *const pin_cols[] = {"owner_id", "board_id", "title", "description", "like_count", "image"};
    char text[300];
    for (size_t i = 0; i < sizeof(text); i++) text[i] = (char)(rnd() % 95 + 32);
    for (int round = 0; round < 30; round++) {
        t_req_t r;
        size_t n = 1 + rnd() % 700;
        t_req_init(&r, &A, n);
        for (size_t i = 0; i < n; i++) {
            unsigned shard = (unsigned)(rnd() % 8);
            int kind = 1 + (int)(rnd() % 4);
            uint64_t id = rnd() % 8 ? PIN_ID(shard, 1 + rnd() % 30) : rnd();
            Bulkwrite__V1__Op *o = t_op(&r, kind, rnd() % 10 ? "pin" : "board", kind == BW_OP_CREATE && rnd() % 3 ? 0 : id,
                                        kind == BW_OP_CREATE ? t_idstr(&r, bw_id_make(shard, 9, 1)) : NULL);
            size_t nf = kind == BW_OP_DELETE ? rnd() % 10 == 0 : rnd() % 5;
            for (size_t f = 0; f < nf; f++) {
                const char *col = pin_cols[rnd() % 6];
                switch (rnd() % 7) {
                case 0: t_f_int(&r, o, col, (int64_t)rnd()); break;
                case 1: t_f_inc(&r, o, col, (int64_t)(rnd() % 100) - 50); break;
                case 2: t_f_str(&r, o, col, text, rnd() % sizeof(text)); break;
                case 3: t_f_bytes(&r, o, col, text, rnd() % 40); break;
                case 4: t_f_null(&r, o, col); break;
                case 5: t_f_dbl(&r, o, col, (double)rnd() / 3.0); break;
                default: t_f_bool(&r, o, col, (int)(rnd() % 2));
                }
            }
        }
        size_t len;
        uint8_t *body = pack(r.req, &len);
        forward_and_compare(round % 2 ? c2 : C, body, len);
        bw_arena_reset(&A);
    }
    bw_config_destroy(c2);
}
END_TEST

/* base's bytes into buf (base.len + 3 bytes at least), damaged in 1 to 3 places: a byte
 * replaced, a bit flipped, the tail cut, a byte inserted. Returns the new length. */
static size_t damage(uint8_t *buf, const raw_t *base) {
    memcpy(buf, base->b, base->len);
    size_t n = base->len;
    for (int k = 1 + (int)(rnd() % 3); k > 0; k--) {
        size_t at = rnd() % n;
        switch (rnd() % 4) {
        case 0: buf[at] = (uint8_t)rnd(); break;
        case 1: buf[at] ^= (uint8_t)(1u << (rnd() % 8)); break;
        case 2: n = at + 1; break; /* truncate */
        default: memmove(buf + at + 1, buf + at, n - at); buf[at] = (uint8_t)rnd(); n++; break;
        }
    }
    return n;
}

/* Whether the wire reader accepts body (with err saying why not), after requiring that
 * protobuf-c accepts and refuses the same, and reads an accepted body the same. */
static int reader_agrees(const uint8_t *body, size_t len, const char *what, size_t i, char *err, size_t esz) {
    char why[256];
    Bulkwrite__V1__BatchWriteRequest *mine = bw_request_decode(BW_FMT_PROTOBUF, body, len, &A, err, esz);
    Bulkwrite__V1__BatchWriteRequest *pbc = bulkwrite__v1__batch_write_request__unpack(&A.pb, len, body);
    if (!mine && pbc && fref_nul_refused(err)) return 0; /* the one deliberate difference */
    ck_assert_msg(!mine == !pbc, "%s %zu: the wire reader %s, protobuf-c %s", what, i, mine ? "accepted" : "refused",
                  pbc ? "accepted" : "refused");
    if (mine) ck_assert_msg(fref_request_eq(mine, pbc, why, sizeof(why)), "%s %zu read differently: %s", what, i, why);
    return mine != NULL;
}

/* Random damage to a body: the wire reader accepts exactly what protobuf-c accepts, and
 * reads it the same. */
START_TEST(forward_reader_agrees_on_damage) {
    size_t len;
    t_req_t r;
    t_req_init(&r, &A, 8);
    Bulkwrite__V1__Op *o = t_op(&r, BW_OP_CREATE, "pin", PIN_ID(3, 1), t_idstr(&r, bw_id_make(3, 9, 1)));
    t_f_int(&r, o, "owner_id", -7);
    t_f_str(&r, o, "title", "caf\xc3\xa9", 5);
    t_f_dbl(&r, o, "like_count", 0.5);
    o = t_op(&r, BW_OP_UPDATE, "pin", PIN_ID(3, 1), NULL);
    t_f_inc(&r, o, "like_count", 3);
    t_f_bytes(&r, o, "image", "\0\1", 2);
    raw_t base = {0};
    const uint8_t *packed = pack(r.req, &len);
    raw_put(&base, packed, len);
    hostile_ops(&base);
    uint8_t *buf = malloc(base.len + 16);
    char err[256];
    size_t accepted = 0, refused = 0;
    for (int i = 0; i < 20000; i++) {
        size_t n = damage(buf, &base);
        if (reader_agrees(buf, n, "mutation", (size_t)i, err, sizeof(err)))
            accepted++;
        else
            refused++;
        bw_arena_reset(&A);
    }
    ck_assert_uint_gt(accepted, 100);
    ck_assert_uint_gt(refused, 100);
    free(buf);
    free(base.b);
}
END_TEST

/* A Value given two and three times in one Field, every sequence of six kinds of
 * occurrence: protobuf-c 1.4 merges a message with a oneof in its own way (an occurrence
 * without a member keeps the earlier one, unless that is an empty string or bytes, which
 * it drops; and with no member on either side it refuses the body), and the wire reader
 * must accept and read exactly as it does. The fuzzer found the third rule. */
START_TEST(forward_value_given_twice) {
    static const struct { const char *wire; size_t len; } kinds[] = {
        {"", 0},           /* no member */
        {"\x10\x02", 2},   /* int_value 1 */
        {"\x22\x00", 2},   /* string_value "" */
        {"\x22\x01x", 3},  /* string_value "x" */
        {"\x2a\x00", 2},   /* bytes_value "" */
        {"\x08\x00", 2},   /* null_value (false) */
    };
    const size_t nk = BW_ARRAY_LEN(kinds);
    char err[256];
    size_t refused = 0, accepted = 0;
    for (size_t seq = 0; seq < nk * nk + nk * nk * nk; seq++) {
        size_t count = seq < nk * nk ? 2 : 3, code = seq < nk * nk ? seq : seq - nk * nk;
        raw_t body = {0}, op = {0}, f = {0};
        raw_put(&op, "\x08\x02", 2); /* UPDATE */
        raw_len(&op, 2, "pin", 3);
        raw_fixed64(&op, 3, PIN_ID(2, 7));
        raw_len(&f, 1, "board_id", 8);
        for (size_t k = 0; k < count; k++, code /= nk) raw_len(&f, 2, kinds[code % nk].wire, kinds[code % nk].len);
        raw_sub(&op, 5, &f);
        raw_sub(&body, 2, &op);
        if (reader_agrees(body.b, body.len, "sequence", seq, err, sizeof(err))) {
            accepted++;
        } else {
            ck_assert_ptr_nonnull(strstr(err, "malformed"));
            refused++;
        }
        free(body.b);
        bw_arena_reset(&A);
    }
    ck_assert_uint_gt(accepted, 100);
    ck_assert_uint_gt(refused, 1);
}
END_TEST

/* A ShardBatch protobuf-c never writes: fields out of order and given twice (the later
 * wins), overlong varints, unknown fields at every level, a Value given twice (merged), an
 * empty Value, text with a NUL and 4-byte UTF-8, bytes of every value. */
static void hostile_shard_batch(raw_t *sb) {
    raw_t row = {0}, f = {0}, v = {0};
    raw_len(sb, 1, "ffffffffffffffffffffffffffffffff", 32);
    raw_put(sb, "\x10\x83\x80\x00", 4); /* shard 3, overlong */
    raw_len(sb, 3, "pin", 3);
    raw_put(sb, "\x20\x82\x80\x80\x80\x00", 6); /* op UPDATE, overlong */
    raw_len(sb, 5, "like_count", 10);
    raw_len(sb, 5, "title", 5);
    raw_len(sb, 5, "image", 5);
    raw_tag(sb, 99, 0);
    raw_varint(sb, 7);
    /* row 0: like_count += 5 (a string then an int: the int wins), title merged */
    raw_put(&row, "\x08\x81\x01", 3); /* op_index 129 */
    raw_fixed64(&row, 2, PIN_ID(3, 7));
    raw_tag(&f, 1, 0);
    raw_varint(&f, 0);
    raw_len(&v, 4, "x", 1);
    raw_tag(&v, 2, 0);
    raw_varint(&v, 10); /* sint64 5 */
    raw_sub(&f, 2, &v);
    raw_put(&f, "\x18\x80\x01", 3); /* increment as 128 */
    raw_put(&f, "\x7d\x01\x02\x03\x04", 5); /* field 15, wire type 5 */
    raw_sub(&row, 3, &f);
    raw_tag(&f, 1, 0);
    raw_varint(&f, 1);
    raw_tag(&v, 2, 0);
    raw_varint(&v, 2);
    raw_sub(&f, 2, &v);
    raw_len(&v, 4, "t\0\xf0\x9f\x98\x80", 6);
    raw_sub(&f, 2, &v);
    raw_sub(&row, 3, &f);
    raw_len(&row, 50, "junk", 4);
    raw_sub(sb, 6, &row);
    /* row 1: every byte as the image, an empty Value (no member) as the title */
    static uint8_t all[256];
    for (size_t i = 0; i < sizeof(all); i++) all[i] = (uint8_t)i;
    raw_put(&row, "\x08\x01", 2);
    raw_fixed64(&row, 2, PIN_ID(3, 8));
    raw_tag(&f, 1, 0);
    raw_varint(&f, 2);
    raw_len(&v, 5, all, sizeof(all));
    raw_sub(&f, 2, &v);
    raw_sub(&row, 3, &f);
    raw_tag(&f, 1, 0);
    raw_varint(&f, 1);
    raw_put(&f, "\x12\x00", 2);
    raw_sub(&row, 3, &f);
    raw_sub(sb, 6, &row);
    raw_tag(sb, 7, 0);
    raw_varint(sb, (uint64_t)-1700000000123LL); /* enqueued_at_ms, negative */
    raw_put(sb, "\x40\x05", 2); /* part 5 */
    raw_len(sb, 1, "0123456789abcdef0123456789abcdef", 32); /* the later job_id wins */
}

/* The consumer's ShardBatch reader (pbdecode.h) reads what protobuf-c's unpack reads, the
 * same way, and refuses what it refuses: a hand-made batch, then random damage to it. (Every
 * batch the batcher writes is read both ways in fref_check_split, above.) */
START_TEST(shard_batch_reader_agrees) {
    raw_t base = {0};
    hostile_shard_batch(&base);
    char why[256];
    int accepted;
    ck_assert_msg(fref_shard_batch_agrees(base.b, base.len, &A, &accepted, why, sizeof(why)), "%s", why);
    ck_assert(accepted);
    const Bulkwrite__Internal__V1__ShardBatch *sb = bw_pbd_shard_batch(base.b, base.len, &A);
    ck_assert_ptr_nonnull(sb);
    ck_assert_str_eq(sb->job_id, "0123456789abcdef0123456789abcdef");
    ck_assert_uint_eq(sb->shard, 3);
    ck_assert_int_eq(sb->op, BW_OP_UPDATE);
    ck_assert_int_eq(sb->enqueued_at_ms, -1700000000123LL);
    ck_assert_uint_eq(sb->part, 5);
    ck_assert_uint_eq(sb->n_columns, 3);
    ck_assert_str_eq(sb->columns[2], "image");
    ck_assert_uint_eq(sb->n_rows, 2);
    const Bulkwrite__Internal__V1__Row *r0 = sb->rows[0], *r1 = sb->rows[1];
    ck_assert_uint_eq(r0->op_index, 129);
    ck_assert_uint_eq(r0->id, PIN_ID(3, 7));
    ck_assert_uint_eq(r0->n_fields, 2);
    ck_assert_int_eq(r0->fields[0]->value->kind_case, BULKWRITE__V1__VALUE__KIND_INT_VALUE);
    ck_assert_int_eq(r0->fields[0]->value->int_value, 5);
    ck_assert_int_eq(r0->fields[0]->increment, 1);
    ck_assert_int_eq(r0->fields[1]->value->kind_case, BULKWRITE__V1__VALUE__KIND_STRING_VALUE);
    ck_assert_uint_eq(r0->fields[1]->value->string_value.len, 6);
    ck_assert_mem_eq(r0->fields[1]->value->string_value.data, "t\0\xf0\x9f\x98\x80", 6);
    ck_assert_uint_eq(r1->fields[0]->value->bytes_value.len, 256);
    ck_assert_uint_eq(r1->fields[0]->value->bytes_value.data[255], 255);
    ck_assert_int_eq(r1->fields[1]->value->kind_case, BULKWRITE__V1__VALUE__KIND__NOT_SET);
    /* empty: an empty batch (the consumer dead-letters it for its job_id), as protobuf-c */
    ck_assert_msg(fref_shard_batch_agrees(NULL, 0, &A, &accepted, why, sizeof(why)) && accepted, "%s", why);
    uint8_t *buf = malloc(base.len + 16);
    size_t taken = 0, refused = 0;
    for (int i = 0; i < 20000; i++) {
        size_t n = damage(buf, &base);
        ck_assert_msg(fref_shard_batch_agrees(buf, n, &A, &accepted, why, sizeof(why)), "mutation %d: %s", i, why);
        if (accepted) taken++;
        else refused++;
        bw_arena_reset(&A);
    }
    ck_assert_uint_gt(taken, 100);
    ck_assert_uint_gt(refused, 100);
    free(buf);
    free(base.b);
}
END_TEST

START_TEST(json_many_fields_duplicate) {
    char body[4096];
    int n = snprintf(body, sizeof(body), "{\"ops\": [{\"op\": \"update\", \"object_type\": \"pin\", \"id\": 68719476737, \"fields\": {");
    for (int i = 0; i < 60; i++) n += snprintf(body + n, sizeof(body) - (size_t)n, "%s\"f%d\": %d", i ? ", " : "", i, i);
    char ok[4200];
    snprintf(ok, sizeof(ok), "%s}}]}", body);
    char err[512];
    Bulkwrite__V1__BatchWriteRequest *req = bw_request_decode(BW_FMT_JSON, ok, strlen(ok), &A, err, sizeof(err));
    ck_assert_msg(req != NULL, "%s", err);
    ck_assert_uint_eq(req->ops[0]->n_fields, 60);
    ck_assert_str_eq(req->ops[0]->fields[59]->name, "f59");
    for (int dup = 0; dup < 60; dup += 7) {
        char bad[4200];
        snprintf(bad, sizeof(bad), "%s, \"f%d\": 1}}]}", body, dup);
        req = bw_request_decode(BW_FMT_JSON, bad, strlen(bad), &A, err, sizeof(err));
        ck_assert_msg(req == NULL, "duplicate f%d accepted", dup);
        ck_assert_msg(strstr(err, "malformed JSON") && strstr(err, "duplicate object key"), "%s", err);
    }
}
END_TEST

Suite *forward_suite(void) {
    Suite *s = suite_create("forward");
    TCase *tc = tcase_create("wire");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, forward_equals_protobuf_c);
    tcase_add_test(tc, forward_random_requests);
    tcase_add_test(tc, forward_reader_agrees_on_damage);
    tcase_add_test(tc, forward_value_given_twice);
    tcase_add_test(tc, shard_batch_reader_agrees);
    tcase_add_test(tc, json_many_fields_duplicate);
    suite_add_tcase(s, tc);
    return s;
}
