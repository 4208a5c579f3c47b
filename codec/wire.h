/* wire.h — the protobuf wire format by hand, for the proxy's hot path.
 *
 * The proxy reads a BatchWriteRequest and writes ShardBatch messages without
 * protobuf-c's descriptor-driven unpack and pack (which allocate per field and walk
 * every message three times: size, pack, unpack). The reader follows protobuf-c's
 * rules where they matter (varints of at most 10 bytes, tags and lengths of at most 5,
 * field number 0 and groups refused); the writer emits exactly what protobuf-c would
 * for the same struct (proto3: zero scalars and empty strings omitted), so a
 * ShardBatch written here unpacks, and repacks, to the same bytes.
 * @locality any thread; no state. */
#ifndef BW_WIRE_H
#define BW_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum { BW_WIRE_VARINT = 0, BW_WIRE_I64 = 1, BW_WIRE_LEN = 2, BW_WIRE_I32 = 5 };

/* ---- reading: each returns 0, or -1 on malformed input (the reader is then spent) ---- */

typedef struct {
    const uint8_t *p, *end;
} bw_wire_reader_t;

/* A varint of at most 10 bytes; bits past 64 are dropped (as protobuf-c does).
 * *any_bit: whether any payload bit was set (protobuf-c's bool, which sees bits past 64). */
static inline int bw_wire_varint(bw_wire_reader_t *r, uint64_t *v, int *any_bit) {
    if (r->p < r->end && *r->p < 0x80) { /* one byte: most lengths, small numbers */
        *v = *r->p++;
        if (any_bit) *any_bit = *v != 0;
        return 0;
    }
    uint64_t x = 0;
    int any = 0;
    for (unsigned i = 0; i < 10; i++) {
        if (r->p == r->end) return -1;
        uint8_t b = *r->p++;
        any |= b & 0x7f;
        x |= (uint64_t)(b & 0x7f) << (i < 9 ? 7 * i : 63);
        if (!(b & 0x80)) {
            *v = x;
            if (any_bit) *any_bit = any != 0;
            return 0;
        }
    }
    return -1;
}

/* The next field's number and wire type, read as protobuf-c reads them: at most 5
 * bytes, 32 bits; -1 when the first byte names field 0 or the wire type is a group (3,
 * 4) or does not exist (6, 7). */
static inline int bw_wire_tag(bw_wire_reader_t *r, uint32_t *field, int *wire_type) {
    if (r->p == r->end || (*r->p & 0xf8) == 0) return -1;
    int wt = *r->p & 7;
    if (*r->p < 0x80 && (wt <= BW_WIRE_LEN || wt == BW_WIRE_I32)) { /* one byte: fields 1 to 15 */
        *field = (uint32_t)*r->p++ >> 3;
        *wire_type = wt;
        return 0;
    }
    uint32_t t = (uint32_t)(*r->p & 0x7f) >> 3;
    *wire_type = *r->p & 7;
    unsigned shift = 4;
    size_t max = r->end - r->p < 5 ? (size_t)(r->end - r->p) : 5;
    size_t i = 0;
    while (r->p[i] & 0x80) {
        if (++i == max) return -1;
        t |= (uint32_t)(r->p[i] & 0x7f) << shift;
        shift += 7;
    }
    r->p += i + 1;
    *field = t;
    return *wire_type == BW_WIRE_VARINT || *wire_type == BW_WIRE_I64 || *wire_type == BW_WIRE_LEN ||
                   *wire_type == BW_WIRE_I32
               ? 0
               : -1;
}

static inline int bw_wire_fixed64(bw_wire_reader_t *r, uint64_t *v) {
    if (r->end - r->p < 8) return -1;
    uint64_t x = 0;
    for (int i = 7; i >= 0; i--) x = x << 8 | r->p[i];
    r->p += 8;
    *v = x;
    return 0;
}

/* A length-delimited field: its bytes [*data, *data + *len) inside the reader's range. */
static inline int bw_wire_bytes(bw_wire_reader_t *r, const uint8_t **data, size_t *len) {
    uint64_t n = 0; /* the length: at most 5 bytes */
    for (unsigned i = 0;; i++) {
        if (i == 5 || r->p == r->end) return -1;
        uint8_t b = *r->p++;
        n |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) break;
    }
    if ((uint64_t)(r->end - r->p) < n) return -1;
    *data = r->p;
    *len = n;
    r->p += n;
    return 0;
}

/* A bool as protobuf-c reads it: whatever the wire type, true when any byte of the
 * field's data (for a length-delimited field: its length prefix and its bytes) has one
 * of its low 7 bits set. protobuf-c checks no wire type for a bool, so neither does this. */
static inline int bw_wire_bool(bw_wire_reader_t *r, int wire_type, int *b) {
    const uint8_t *start = r->p;
    uint64_t v;
    const uint8_t *d;
    size_t n;
    switch (wire_type) {
    case BW_WIRE_VARINT: return bw_wire_varint(r, &v, b);
    case BW_WIRE_I64:
    case BW_WIRE_I32:
        if (r->end - r->p < (wire_type == BW_WIRE_I64 ? 8 : 4)) return -1;
        r->p += wire_type == BW_WIRE_I64 ? 8 : 4;
        break;
    case BW_WIRE_LEN:
        if (bw_wire_bytes(r, &d, &n)) return -1;
        break;
    default: return -1;
    }
    int any = 0;
    for (const uint8_t *q = start; q < r->p; q++) any |= *q & 0x7f;
    *b = any != 0;
    return 0;
}

/* Skips a field of an unknown number. */
static inline int bw_wire_skip(bw_wire_reader_t *r, int wire_type) {
    uint64_t v;
    const uint8_t *d;
    size_t n;
    switch (wire_type) {
    case BW_WIRE_VARINT: return bw_wire_varint(r, &v, NULL);
    case BW_WIRE_I64: return bw_wire_fixed64(r, &v);
    case BW_WIRE_LEN: return bw_wire_bytes(r, &d, &n);
    case BW_WIRE_I32:
        if (r->end - r->p < 4) return -1;
        r->p += 4;
        return 0;
    default: return -1;
    }
}

/* ---- writing: sizes first, then bytes into a buffer of exactly that size ---- */

static inline size_t bw_wire_varint_size(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* A length-delimited field's bytes on the wire: tag (field numbers below 16), length, body. */
static inline size_t bw_wire_len_size(size_t body) { return 1 + bw_wire_varint_size(body) + body; }

static inline uint8_t *bw_wire_put_varint(uint8_t *p, uint64_t v) {
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

/* Tags of field numbers below 16 take one byte. */
static inline uint8_t *bw_wire_put_tag(uint8_t *p, unsigned field, int wire_type) {
    *p++ = (uint8_t)(field << 3 | (unsigned)wire_type);
    return p;
}

static inline uint8_t *bw_wire_put_fixed64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
    return p + 8;
}

static inline uint8_t *bw_wire_put_bytes(uint8_t *p, unsigned field, const void *data, size_t len) {
    p = bw_wire_put_tag(p, field, BW_WIRE_LEN);
    p = bw_wire_put_varint(p, len);
    if (len) memcpy(p, data, len);
    return p + len;
}

static inline uint64_t bw_wire_zigzag64(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }
static inline int64_t bw_wire_unzigzag64(uint64_t v) { return (int64_t)(v >> 1) ^ -(int64_t)(v & 1); }

#endif
