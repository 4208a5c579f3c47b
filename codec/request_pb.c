/* request_pb.c — a protobuf request body into protobuf-c's structs, by hand
 * (request_decode.h).
 *
 * protobuf-c's unpack walks every message twice through its descriptors and allocates
 * each string, field and value on its own; this reads the request once with the rules
 * protobuf-c applies (wire.h, pbdecode.h) into the same structs, carved from the arena in
 * few blocks. A field's row in request_schema.h says what its value is and where it goes.
 * Text and bytes values are not copied: they point into the body. Strings that the
 * validator reads as C strings (names, object type, shard key, request_id) are copied with
 * a terminating NUL, so an embedded NUL cuts them where protobuf-c's did. */
#include "request_decode.h"

#include <stdio.h>
#include <string.h>

#include "pbdecode.h"
#include "request_schema.h"
#include "wire.h"

/* The occurrences of each of sc's members in message r, in one pass (so a repeated member
 * is allocated once): row i's in counts[i + 1] (counts[0] gets the unknown fields'); -1 on
 * malformed input. */
static int members_count(const bw_schema_t *sc, bw_wire_reader_t r, uint32_t counts[BW_SCHEMA_MEMBERS_MAX + 1]) {
    memset(counts, 0, (sc->n + 1) * sizeof(*counts));
    while (r.p < r.end) {
        uint32_t number;
        int wt;
        if (bw_wire_tag(&r, &number, &wt) || bw_wire_skip(&r, wt)) return -1;
        counts[(number < BW_SCHEMA_NUMBER_MAX ? sc->by_number[number] : -1) + 1]++;
    }
    return 0;
}

/* Room for the repeated text members of a new message of sc's type, as counted. (Its
 * repeated messages, ops and fields, are the caller's.) */
static void members_prepare(const bw_schema_t *sc, void *msg, const uint32_t *counts, bw_arena_t *a) {
    for (size_t i = 0; sc->lists >> i; i++)
        if (sc->lists >> i & 1)
            *(char ***)bw_schema_value(sc, msg, (int)i) = bw_arena_alloc(a, (counts[i + 1] + 1) * sizeof(char *));
}

/* A BW_MEMBER_NAME's text (request.h's rules come later, in the proxy), or NULL with err. */
static char *name_read(const bw_member_t *m, const uint8_t *d, size_t n, bw_arena_t *a, char *err, size_t esz) {
    const uint8_t *nul = memchr(d, 0, n);
    if (!nul) return bw_pbd_string(a, d, n);
    if (m->nul_names_nothing) return "\x7f";
    snprintf(err, esz, "%s contains a control character (NUL) at byte %zu", m->name, (size_t)(nul - d));
    return NULL;
}

/* A BW_MEMBER_NAME or BW_MEMBER_NAMES value (member_read's), stored in slot. */
static int names_read(const bw_schema_t *sc, int i, bw_wire_reader_t *r, int wt, void *msg, void *slot, bw_arena_t *a,
                      char *err, size_t esz) {
    const bw_member_t *m = &sc->members[i];
    const uint8_t *d;
    size_t n;
    if (wt != BW_WIRE_LEN || bw_wire_bytes(r, &d, &n)) return -1;
    char *s = name_read(m, d, n, a, err, esz);
    if (!s) return -1;
    if (m->kind == BW_MEMBER_NAME) *(char **)slot = s;
    else (*(char ***)slot)[(*bw_schema_count(sc, msg, i))++] = s;
    return 0;
}

/* The value of sc's member i, whose tag (wire type wt) was just read, into msg as its
 * kind says. -1 where protobuf-c would refuse the message (err stays as the caller set
 * it), or for a NUL in a name (err says so). Not for ops and fields: their messages are
 * the caller's. Inlined into both readers: a call per op member cost the protobuf path 5 %
 * of its instructions (callgrind, a 5,000-op request). */
static inline __attribute__((always_inline)) int member_read(const bw_schema_t *sc, int i, bw_wire_reader_t *r,
                                                             int wt, void *msg, bw_arena_t *a, char *err,
                                                             size_t esz) {
    const bw_member_t *m = &sc->members[i];
    void *slot = bw_schema_value(sc, msg, i);
    uint64_t v;
    int b;
    const uint8_t *d;
    size_t n;
    switch (m->kind) {
    case BW_MEMBER_UINT32: /* protobuf-c keeps a varint's low 32 bits */
    case BW_MEMBER_OP_WORD: /* an enum, read as protobuf-c does (the low 32 bits) */
        if (wt != BW_WIRE_VARINT || bw_wire_varint(r, &v, NULL)) return -1;
        if (m->kind == BW_MEMBER_UINT32) *(uint32_t *)slot = (uint32_t)v;
        else *(Bulkwrite__V1__OpType *)slot = (Bulkwrite__V1__OpType)(int32_t)(uint32_t)v;
        return 0;
    case BW_MEMBER_TIME_MS: /* an int64 varint */
        if (wt != BW_WIRE_VARINT || bw_wire_varint(r, &v, NULL)) return -1;
        *(int64_t *)slot = (int64_t)v;
        return 0;
    case BW_MEMBER_BOOL:
        if (bw_wire_bool(r, wt, &b)) return -1;
        *(protobuf_c_boolean *)slot = b;
        return 0;
    case BW_MEMBER_ID: return wt != BW_WIRE_I64 || bw_wire_fixed64(r, (uint64_t *)slot) ? -1 : 0;
    case BW_MEMBER_TEXT:
        if (wt != BW_WIRE_LEN || bw_wire_bytes(r, &d, &n)) return -1;
        *(char **)slot = bw_pbd_string(a, d, n);
        return 0;
    case BW_MEMBER_NAME:
    case BW_MEMBER_NAMES: return names_read(sc, i, r, wt, msg, slot, a, err, esz);
    case BW_MEMBER_OPS:
    case BW_MEMBER_FIELDS: break;
    }
    return -1;
}

/* ---- an op's fields ---- */

/* Field and its Value share one arena block. */
typedef struct {
    Bulkwrite__V1__Field f;
    Bulkwrite__V1__Value v;
} field_block_t;

static int field_read(bw_wire_reader_t r, field_block_t *b, bw_arena_t *a) {
    Bulkwrite__V1__Field *f = &b->f;
    bulkwrite__v1__field__init(f);
    f->name = "";
    while (r.p < r.end) {
        uint32_t field;
        int wt, any;
        const uint8_t *d;
        size_t n;
        if (bw_wire_tag(&r, &field, &wt)) return -1;
        switch (field) {
        case 1:
            if (wt != BW_WIRE_LEN || bw_wire_bytes(&r, &d, &n)) return -1;
            f->name = bw_pbd_string(a, d, n);
            break;
        case 2:
            if (wt != BW_WIRE_LEN || bw_wire_bytes(&r, &d, &n) || bw_pbd_value(d, n, &f->value, &b->v)) return -1;
            break;
        case 3:
            if (bw_wire_bool(&r, wt, &any)) return -1;
            f->increment = any;
            break;
        default:
            if (bw_wire_skip(&r, wt)) return -1;
        }
    }
    return 0;
}

/* An Op of a BatchWriteRequest into *op; -1 where protobuf-c would refuse it. */
static int op_read(const bw_schema_t *sc, bw_wire_reader_t r, Bulkwrite__V1__Op *op, bw_arena_t *a, char *err,
                   size_t esz) {
    uint32_t counts[BW_SCHEMA_MEMBERS_MAX + 1];
    if (members_count(sc, r, counts)) return -1;
    bulkwrite__v1__op__init(op); /* its texts "", as protobuf-c's are */
    members_prepare(sc, op, counts, a);
    size_t nf = counts[BW_OP_FIELDS + 1];
    field_block_t *blocks = NULL;
    if (nf) {
        op->fields = bw_arena_alloc(a, nf * sizeof(*op->fields));
        blocks = bw_arena_alloc(a, nf * sizeof(*blocks));
    }
    while (r.p < r.end) {
        uint32_t number;
        int wt, i;
        if (bw_wire_tag(&r, &number, &wt)) return -1;
        const bw_member_t *m = bw_schema_member_of(sc, number, &i);
        if (!m) {
            if (bw_wire_skip(&r, wt)) return -1;
        } else if (m->kind == BW_MEMBER_FIELDS) {
            const uint8_t *d;
            size_t n;
            if (wt != BW_WIRE_LEN || bw_wire_bytes(&r, &d, &n)) return -1;
            field_block_t *b = &blocks[op->n_fields];
            if (field_read((bw_wire_reader_t){d, d + n}, b, a)) return -1;
            op->fields[op->n_fields++] = &b->f;
        } else if (member_read(sc, i, &r, wt, op, a, err, esz)) {
            return -1;
        }
    }
    return 0;
}

/* ---- the request ---- */

Bulkwrite__V1__BatchWriteRequest *bw_request_decode_pb(const void *body, size_t len, size_t max_ops, bw_arena_t *a,
                                                       char *err, size_t esz, int *too_many) {
    const bw_schema_t *sc = bw_schema_request(), *op_sc = bw_schema_op();
    bw_wire_reader_t r = {body, (const uint8_t *)body + len};
    uint32_t counts[BW_SCHEMA_MEMBERS_MAX + 1];
    *too_many = 0;
    snprintf(err, esz, "malformed protobuf: not a bulkwrite.v1.BatchWriteRequest");
    if (members_count(sc, r, counts)) return NULL;
    /* counted on the wire, before any op's struct exists */
    size_t n_ops = counts[BW_REQ_OPS + 1];
    if ((*too_many = n_ops > max_ops)) {
        snprintf(err, esz, "the request has %zu ops; proxy.max_ops is %zu", n_ops, max_ops);
        return NULL;
    }
    Bulkwrite__V1__BatchWriteRequest *req = bw_arena_alloc(a, sizeof(*req));
    bulkwrite__v1__batch_write_request__init(req);
    members_prepare(sc, req, counts, a);
    Bulkwrite__V1__Op *ops = bw_arena_alloc(a, (n_ops + 1) * sizeof(*ops));
    req->ops = bw_arena_alloc(a, (n_ops + 1) * sizeof(*req->ops));
    while (r.p < r.end) {
        uint32_t number;
        int wt, i;
        if (bw_wire_tag(&r, &number, &wt)) return NULL;
        const bw_member_t *m = bw_schema_member_of(sc, number, &i);
        if (!m) {
            if (bw_wire_skip(&r, wt)) return NULL;
        } else if (m->kind == BW_MEMBER_OPS) {
            const uint8_t *d;
            size_t n;
            if (wt != BW_WIRE_LEN || bw_wire_bytes(&r, &d, &n)) return NULL;
            if (op_read(op_sc, (bw_wire_reader_t){d, d + n}, &ops[req->n_ops], a, err, esz)) return NULL;
            req->ops[req->n_ops] = &ops[req->n_ops];
            req->n_ops++;
        } else if (member_read(sc, i, &r, wt, req, a, err, esz)) {
            return NULL;
        }
    }
    return req;
}
