/* request_schema.h — the members of a batch write request, described once.
 *
 * A BatchWriteRequest and each of its Ops are read from protobuf (request_pb.c) and from
 * JSON (request_json.c, docs/api.md), and written as JSON (apijson.c). All three take the
 * members from the two tables here, one row per member: its JSON name, its JSON type as
 * the error texts name it, and its kind, which says what the decoders do with its value.
 * The protobuf side of a member (its field number, where the struct keeps it) is not
 * written here: it is protobuf-c's descriptor of the field of the same name, looked up
 * once, and a row whose field the .proto lacks, or whose kind does not fit the field's
 * type, stops the program at its first request. The unit tests check that every field of
 * both messages has a row, so the two encodings cannot drift.
 *
 * Adding a member of a kind the decoders know is a field in proto/bulkwrite/v1/bulkwrite.proto and a
 * row in request_schema.c (with its constant below).
 * @locality any thread: the tables are constant once looked up (pthread_once). */
#ifndef BW_REQUEST_SCHEMA_H
#define BW_REQUEST_SCHEMA_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "bulkwrite/v1/bulkwrite.pb-c.h"

/* What a member's value is, and what the decoders do with it. The protobuf-c type each
 * kind needs is in request_schema.c (kind_fits). */
typedef enum {
    /* text read as a C string; a NUL in it refuses the request ("request_id contains a
     * control character (NUL) at byte N"): it would cut the text short, two texts one job */
    BW_MEMBER_NAME,
    BW_MEMBER_NAMES,   /* a repeated BW_MEMBER_NAME; JSON: an array of strings */
    BW_MEMBER_UINT32,  /* JSON: an integer from 0 to 4294967295 */
    BW_MEMBER_BOOL,    /* JSON: true or false */
    BW_MEMBER_TIME_MS, /* an int64 of ms since the Unix epoch; JSON: that, or a UTC time text */
    BW_MEMBER_OPS,     /* the request's ops (the op table); JSON: an array of objects */
    BW_MEMBER_OP_WORD, /* an OpType; JSON: its word, any case (bw_op_name) */
    BW_MEMBER_TEXT,    /* text read as a C string, cut at a NUL as protobuf-c's strings are */
    /* an object id (fixed64); JSON: a number or a decimal string, and one that protobuf
     * could not carry rejects its op alone (bw_json_op_t) */
    BW_MEMBER_ID,
    BW_MEMBER_FIELDS,  /* the op's fields; JSON: an object of column: value */
} bw_member_kind_t;

typedef struct {
    const char *name;       /* in JSON, and the protobuf field's name unless proto_name says */
    const char *proto_name; /* the field's name where JSON drops its unit (not_before: not_before_ms) */
    bw_member_kind_t kind;
    /* its JSON type as the error texts name it: in the request's list of members
     * ("request_id: string, …"); after "not" for an op's ("ops[3].id: not an unsigned
     * 64-bit integer") */
    const char *type;
    /* a request member: what the error for a value of another type says of it, in
     * parentheses; NULL: the list of every member and its type */
    const char *mistyped;
    /* protobuf: a NUL does not refuse the request (this reader accepts what protobuf-c
     * accepts) but makes the value "\x7f", which names nothing, so the proxy answers 400 */
    unsigned nul_names_nothing : 1;
} bw_member_t;

/* The rows of the request's table, in the order its error texts list them. */
enum {
    BW_REQ_REQUEST_ID,
    BW_REQ_LANE,
    BW_REQ_JOB,
    BW_REQ_JOB_PART,
    BW_REQ_JOB_LAST,
    BW_REQ_REPLAY_OF,
    BW_REQ_NOT_BEFORE,
    BW_REQ_AFTER,
    BW_REQ_OPS,
    BW_REQ_MEMBERS
};

/* The rows of an op's table. */
enum { BW_OP_OP, BW_OP_OBJECT_TYPE, BW_OP_ID, BW_OP_SHARD_KEY, BW_OP_FIELDS, BW_OP_MEMBERS };

#define BW_SCHEMA_MEMBERS_MAX 16 /* at most 16 rows a table (a decoder's seen-set is a bit each) */
#define BW_SCHEMA_NUMBER_MAX 32  /* field numbers below it have a row; higher ones are unknown */

/* A table with its protobuf message. */
typedef struct {
    const ProtobufCMessageDescriptor *pb;
    const bw_member_t *members;
    size_t n;
    const ProtobufCFieldDescriptor *field[BW_SCHEMA_MEMBERS_MAX]; /* members[i]'s field of pb */
    /* for the decoders' hot paths */
    uint32_t offset[BW_SCHEMA_MEMBERS_MAX];   /* field[i]->offset */
    uint8_t name_len[BW_SCHEMA_MEMBERS_MAX];  /* strlen(members[i].name) */
    int8_t by_first[32];                      /* the first row whose name starts with byte c, at c & 31; -1: none */
    int8_t next_first[BW_SCHEMA_MEMBERS_MAX]; /* the next row after i whose name starts so, -1: none */
    int8_t by_number[BW_SCHEMA_NUMBER_MAX];   /* a field number's row, -1: none (skipped as unknown) */
    unsigned lists;                           /* the BW_MEMBER_NAMES rows (bit i: row i) */
} bw_schema_t;

/* The tables of BatchWriteRequest and of Op (looked up in the descriptors the first time). */
const bw_schema_t *bw_schema_request(void);
const bw_schema_t *bw_schema_op(void);

/* The row named [s, s + len) (JSON), or -1. */
static inline int bw_schema_lookup(const bw_schema_t *sc, const unsigned char *s, size_t len) {
    if (len == 0) return -1;
    int i = sc->by_first[s[0] & 31]; /* then the rows of the same first byte */
    while (i >= 0 && !(sc->name_len[i] == len && memcmp(sc->members[i].name, s, len) == 0)) i = sc->next_first[i];
    return i;
}

/* The row of protobuf field number `number`, or NULL (an unknown field). */
static inline const bw_member_t *bw_schema_member_of(const bw_schema_t *sc, uint32_t number, int *index) {
    int i = number < BW_SCHEMA_NUMBER_MAX ? sc->by_number[number] : -1;
    *index = i;
    return i < 0 ? NULL : &sc->members[i];
}

/* Where message msg (of sc's type) keeps row i's value, and for a repeated member its count. */
static inline void *bw_schema_value(const bw_schema_t *sc, void *msg, int i) {
    return (char *)msg + sc->offset[i];
}
static inline size_t *bw_schema_count(const bw_schema_t *sc, void *msg, int i) {
    return (size_t *)((char *)msg + sc->field[i]->quantifier_offset);
}

/* A field's value that is not a plain JSON value is an object of one member:
 * {"base64": "..."} for bytes (Value.bytes_value), {"increment": number} for
 * Field.increment. */
#define BW_JSON_BASE64 "base64"
#define BW_JSON_INCREMENT "increment"

/* "(expected request_id: string, lane: string, …)": every member and its type, into buf. */
void bw_schema_expected(const bw_schema_t *sc, char *buf, size_t size);

#endif
