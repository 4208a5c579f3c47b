#include "pbdecode.h"

#include <string.h>

#define PB_FAIL() return -1

int bw_pbd_count(bw_wire_reader_t r, uint32_t want, size_t *cnt) {
    size_t c = 0;
    while (r.p < r.end) {
        uint32_t field;
        int wt;
        if (bw_wire_tag(&r, &field, &wt) || bw_wire_skip(&r, wt)) PB_FAIL();
        c += field == want;
    }
    *cnt = c;
    return 0;
}

/* A uint32 or enum field: a varint, its low 32 bits (protobuf-c's parse_uint32). */
static int u32_read(bw_wire_reader_t *r, int wt, uint32_t *out) {
    uint64_t x;
    if (wt != BW_WIRE_VARINT || bw_wire_varint(r, &x, NULL)) PB_FAIL();
    *out = (uint32_t)x;
    return 0;
}

/* Value: a oneof; a later member replaces an earlier one, as in protobuf-c. */
static int value_read(bw_wire_reader_t r, Bulkwrite__V1__Value *v) {
    while (r.p < r.end) {
        uint32_t field;
        int wt, any;
        uint64_t x;
        const uint8_t *d;
        size_t n;
        if (bw_wire_tag(&r, &field, &wt)) PB_FAIL();
        switch (field) {
        case 1: /* null_value */
        case 6: /* bool_value */
            if (bw_wire_bool(&r, wt, &any)) PB_FAIL();
            if (field == 1) {
                v->kind_case = BULKWRITE__V1__VALUE__KIND_NULL_VALUE;
                v->null_value = any;
            } else {
                v->kind_case = BULKWRITE__V1__VALUE__KIND_BOOL_VALUE;
                v->bool_value = any;
            }
            break;
        case 2: /* int_value, sint64 */
            if (wt != BW_WIRE_VARINT || bw_wire_varint(&r, &x, NULL)) PB_FAIL();
            v->kind_case = BULKWRITE__V1__VALUE__KIND_INT_VALUE;
            v->int_value = bw_wire_unzigzag64(x);
            break;
        case 3: /* double_value */
            if (wt != BW_WIRE_I64 || bw_wire_fixed64(&r, &x)) PB_FAIL();
            v->kind_case = BULKWRITE__V1__VALUE__KIND_DOUBLE_VALUE;
            memcpy(&v->double_value, &x, sizeof(x));
            break;
        case 4: /* string_value */
        case 5: /* bytes_value */
            if (wt != BW_WIRE_LEN || bw_wire_bytes(&r, &d, &n)) PB_FAIL();
            v->kind_case = field == 4 ? BULKWRITE__V1__VALUE__KIND_STRING_VALUE : BULKWRITE__V1__VALUE__KIND_BYTES_VALUE;
            /* string_value and bytes_value share the union's storage */
            v->string_value.data = (uint8_t *)d;
            v->string_value.len = n;
            break;
        default:
            if (bw_wire_skip(&r, wt)) PB_FAIL();
        }
    }
    return 0;
}

int bw_pbd_value(const uint8_t *d, size_t n, Bulkwrite__V1__Value **slot, Bulkwrite__V1__Value *store) {
    if (!*slot) {
        bulkwrite__v1__value__init(store);
        *slot = store;
        return value_read((bw_wire_reader_t){d, d + n}, store);
    }
    /* given again: merged as protobuf-c 1.4 merges a message whose members are a oneof. A
     * later member wins; a later occurrence without one keeps the earlier member, except
     * an empty string or bytes, which is dropped; and with no member on either side
     * protobuf-c refuses the message (int_range_lookup of case 0) */
    Bulkwrite__V1__Value later;
    bulkwrite__v1__value__init(&later);
    if (value_read((bw_wire_reader_t){d, d + n}, &later)) PB_FAIL();
    Bulkwrite__V1__Value *v = *slot;
    if (later.kind_case != BULKWRITE__V1__VALUE__KIND__NOT_SET) {
        *v = later;
    } else if (v->kind_case == BULKWRITE__V1__VALUE__KIND__NOT_SET) {
        PB_FAIL();
    } else if ((v->kind_case == BULKWRITE__V1__VALUE__KIND_STRING_VALUE ||
                v->kind_case == BULKWRITE__V1__VALUE__KIND_BYTES_VALUE) &&
               v->string_value.len == 0) {
        bulkwrite__v1__value__init(v);
    }
    return 0;
}

/* ---- ShardBatch (consumer) ---- */

/* RowField and its Value share one arena block. */
typedef struct {
    Bulkwrite__Internal__V1__RowField f;
    Bulkwrite__V1__Value v;
} row_field_block_t;

static int row_field_read(bw_wire_reader_t r, row_field_block_t *b) {
    bulkwrite__internal__v1__row_field__init(&b->f);
    while (r.p < r.end) {
        uint32_t field;
        int wt, any;
        const uint8_t *d;
        size_t n;
        if (bw_wire_tag(&r, &field, &wt)) PB_FAIL();
        switch (field) {
        case 1:
            if (u32_read(&r, wt, &b->f.column)) PB_FAIL();
            break;
        case 2:
            if (wt != BW_WIRE_LEN || bw_wire_bytes(&r, &d, &n) || bw_pbd_value(d, n, &b->f.value, &b->v)) PB_FAIL();
            break;
        case 3:
            if (bw_wire_bool(&r, wt, &any)) PB_FAIL();
            b->f.increment = any;
            break;
        default:
            if (bw_wire_skip(&r, wt)) PB_FAIL();
        }
    }
    return 0;
}

static int row_read(bw_wire_reader_t r, Bulkwrite__Internal__V1__Row *row, bw_arena_t *a) {
    size_t nf;
    if (bw_pbd_count(r, 3, &nf)) PB_FAIL();
    bulkwrite__internal__v1__row__init(row);
    row_field_block_t *blocks = NULL;
    if (nf) {
        row->fields = bw_arena_alloc(a, nf * sizeof(*row->fields));
        blocks = bw_arena_alloc(a, nf * sizeof(*blocks));
    }
    while (r.p < r.end) {
        uint32_t field;
        int wt;
        const uint8_t *d;
        size_t n;
        if (bw_wire_tag(&r, &field, &wt)) PB_FAIL();
        switch (field) {
        case 1:
            if (u32_read(&r, wt, &row->op_index)) PB_FAIL();
            break;
        case 2:
            if (wt != BW_WIRE_I64 || bw_wire_fixed64(&r, &row->id)) PB_FAIL();
            break;
        case 3: {
            if (wt != BW_WIRE_LEN || bw_wire_bytes(&r, &d, &n)) PB_FAIL();
            row_field_block_t *b = &blocks[row->n_fields];
            if (row_field_read((bw_wire_reader_t){d, d + n}, b)) PB_FAIL();
            row->fields[row->n_fields++] = &b->f;
            break;
        }
        default:
            if (bw_wire_skip(&r, wt)) PB_FAIL();
        }
    }
    return 0;
}

Bulkwrite__Internal__V1__ShardBatch *bw_pbd_shard_batch(const void *data, size_t len, bw_arena_t *a) {
    const uint8_t *p = data ? data : (const uint8_t *)""; /* an empty Kafka message has no payload */
    bw_wire_reader_t r = {p, p + len};
    size_t n_columns = 0, n_rows = 0;
    /* one pass to count both repeated fields (and refuse malformed input early) */
    for (bw_wire_reader_t c = r; c.p < c.end;) {
        uint32_t field;
        int wt;
        if (bw_wire_tag(&c, &field, &wt) || bw_wire_skip(&c, wt)) return NULL;
        n_columns += field == 5;
        n_rows += field == 6;
    }
    Bulkwrite__Internal__V1__ShardBatch *sb = bw_arena_alloc(a, sizeof(*sb));
    bulkwrite__internal__v1__shard_batch__init(sb);
    sb->job_id = "";
    sb->object_type = "";
    sb->job = "";
    if (n_columns) sb->columns = bw_arena_alloc(a, n_columns * sizeof(*sb->columns));
    Bulkwrite__Internal__V1__Row *rows = NULL;
    if (n_rows) {
        sb->rows = bw_arena_alloc(a, n_rows * sizeof(*sb->rows));
        rows = bw_arena_alloc(a, n_rows * sizeof(*rows));
    }
    while (r.p < r.end) {
        uint32_t field;
        int wt;
        uint64_t x;
        const uint8_t *d;
        size_t n;
        if (bw_wire_tag(&r, &field, &wt)) return NULL;
        switch (field) {
        case 1: /* job_id */
        case 3: /* object_type */
        case 5: /* columns */
        case 9: /* job */
            if (wt != BW_WIRE_LEN || bw_wire_bytes(&r, &d, &n)) return NULL;
            if (field == 1) sb->job_id = bw_pbd_string(a, d, n);
            else if (field == 3) sb->object_type = bw_pbd_string(a, d, n);
            else if (field == 9) sb->job = bw_pbd_string(a, d, n);
            else sb->columns[sb->n_columns++] = bw_pbd_string(a, d, n);
            break;
        case 2:
            if (u32_read(&r, wt, &sb->shard)) return NULL;
            break;
        case 4: { /* op: an enum, read as protobuf-c does (the low 32 bits) */
            uint32_t op;
            if (u32_read(&r, wt, &op)) return NULL;
            sb->op = (Bulkwrite__V1__OpType)(int32_t)op;
            break;
        }
        case 6:
            if (wt != BW_WIRE_LEN || bw_wire_bytes(&r, &d, &n)) return NULL;
            if (row_read((bw_wire_reader_t){d, d + n}, &rows[sb->n_rows], a)) return NULL;
            sb->rows[sb->n_rows] = &rows[sb->n_rows];
            sb->n_rows++;
            break;
        case 7: /* enqueued_at_ms, int64 */
            if (wt != BW_WIRE_VARINT || bw_wire_varint(&r, &x, NULL)) return NULL;
            sb->enqueued_at_ms = (int64_t)x;
            break;
        case 8:
            if (u32_read(&r, wt, &sb->part)) return NULL;
            break;
        default:
            if (bw_wire_skip(&r, wt)) return NULL;
        }
    }
    return sb;
}
