/* request_decode.h — a batch write request's body into protobuf-c's structs, from either
 * encoding.
 *
 * Both encodings decode into the same structs (JSON is mapped field for field, by the
 * members of request_schema.h), so validation and batching have one path: protobuf by a
 * hand-written reader of the wire format (request_pb.c, on wire.h and pbdecode.h), JSON by
 * yajl's streaming parser (request_json.c), neither through a document tree or
 * protobuf-c's unpack. Everything is allocated from the caller's arena, except that text
 * and bytes values of a protobuf body point into the body: it must outlive the request's
 * structs and the batches made from them. The proxy validates what they return against
 * its configuration (proxy/request.h). @locality any thread. */
#ifndef BW_REQUEST_DECODE_H
#define BW_REQUEST_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "bulkwrite/v1/bulkwrite.pb-c.h"

typedef enum { BW_FMT_PROTOBUF, BW_FMT_JSON } bw_format_t;

/* The protobuf decoder: the request, or NULL with err saying what is malformed (the
 * bodies protobuf-c's unpack refuses, and a NUL in request_id, job, replay_of or after).
 * More than max_ops ops, counted on the wire before any op's struct is built, set
 * *too_many. */
Bulkwrite__V1__BatchWriteRequest *bw_request_decode_pb(const void *body, size_t len, size_t max_ops, bw_arena_t *a,
                                                       char *err, size_t esz, int *too_many);

/* The JSON decoder. The rules are jansson's (it was the decoder before): no duplicate keys,
 * no NUL in a key, UTF-8 text (bw_utf8_valid), integers within 64 bits, no lone \u
 * surrogate. NULL with err saying what is malformed ("malformed JSON at line L column C:
 * ..." for a syntax fault) or wrong. More than max_ops ops stop the parse at op max_ops +
 * 1, before its struct is built, with *too_many set. Nothing points into the body. */
Bulkwrite__V1__BatchWriteRequest *bw_request_decode_json(const void *body, size_t len, size_t max_ops, bw_arena_t *a,
                                                         char *err, size_t esz, int *too_many);

/* An op the JSON decoder built: the op, and why it cannot be accepted when its JSON held a
 * value protobuf could not carry, or carried as something else (a negative, fractional
 * or out-of-range id, an integer past 64 bits). Such an op is rejected alone, with that
 * reason, by the proxy's validation; the rest of the request goes on. */
typedef struct {
    Bulkwrite__V1__Op op; /* first: req->ops[i] points here */
    const char *fault;    /* NULL, or the reason (arena) */
} bw_json_op_t;

/* The fault of an op of a request the JSON decoder returned, or NULL. */
const char *bw_json_op_fault(const Bulkwrite__V1__Op *op);

/* A reader of ops one at a time, each a JSON text of its own (a line of a JSON-lines
 * file), by the JSON decoder's rules and into the same structs: bwctl submit reads a file
 * with it and sends protobuf. @locality one thread a reader. */
typedef struct bw_json_ops_reader bw_json_ops_reader_t;
bw_json_ops_reader_t *bw_json_ops_reader_new(void);
void bw_json_ops_reader_free(bw_json_ops_reader_t *r);

/* The op that text holds (its structs from a), or NULL with err saying why it cannot be
 * read. An op the JSON decoder marks with a fault (bw_json_op_fault) is returned. */
Bulkwrite__V1__Op *bw_json_op_read(bw_json_ops_reader_t *r, bw_arena_t *a, const char *text, size_t len, char *err,
                                   size_t esz);

/* Decodes a request body of either encoding, refusing a request of more than max_ops ops
 * while it is decoded, before the ops' structs are built (protobuf: counted on the wire
 * first; JSON: the parse stops at op max_ops + 1), with *too_many set (the proxy answers
 * 413). The arena then holds O(body) bytes whatever the body holds: a 16 MiB body of
 * empty ops never becomes gigabytes of structs (docs/security.md). A NUL in request_id is
 * refused by both decoders (it would cut the id short: two ids, one job). */
static inline Bulkwrite__V1__BatchWriteRequest *bw_request_decode_bounded(bw_format_t fmt, const void *body,
                                                                          size_t len, size_t max_ops,
                                                                          bw_arena_t *arena, char *errstr,
                                                                          size_t errstr_size, int *too_many) {
    if (fmt == BW_FMT_JSON) return bw_request_decode_json(body, len, max_ops, arena, errstr, errstr_size, too_many);
    return bw_request_decode_pb(body, len, max_ops, arena, errstr, errstr_size, too_many);
}

/* The same without a bound on the ops. */
static inline Bulkwrite__V1__BatchWriteRequest *bw_request_decode(bw_format_t fmt, const void *body, size_t len,
                                                                  bw_arena_t *arena, char *errstr,
                                                                  size_t errstr_size) {
    int too_many;
    return bw_request_decode_bounded(fmt, body, len, SIZE_MAX, arena, errstr, errstr_size, &too_many);
}

#endif
