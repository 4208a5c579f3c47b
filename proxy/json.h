/* json.h — a JSON request body into the protobuf-c structs that a protobuf body decodes
 * into (request.h), by yajl's streaming parser: no document tree. The rules are
 * jansson's (it was the decoder before): no duplicate keys, no NUL in a key, UTF-8 text
 * (bw_utf8_valid), integers within 64 bits, no lone \u surrogate. Everything is carved
 * from the caller's arena; nothing points into the body. @locality any thread. */
#ifndef BW_JSON_H
#define BW_JSON_H

#include <stddef.h>

#include "arena.h"
#include "bulkwrite.pb-c.h"

/* The request, or NULL with err saying what is malformed ("malformed JSON at line L
 * column C: ..." for a syntax fault) or wrong. More than max_ops ops stop the parse at op
 * max_ops + 1, before its struct is built, with *too_many set. */
/* An op the JSON decoder built: the op, and why it cannot be accepted when its JSON held a
 * value protobuf could not carry, or carried as something else (a negative, fractional
 * or out-of-range id, an integer past 64 bits). Such an op is rejected alone, with that
 * reason, by bw_request_validate; the rest of the request goes on. */
typedef struct {
    Bulkwrite__V1__Op op; /* first: req->ops[i] points here */
    const char *fault;    /* NULL, or the reason (arena) */
} bw_json_op_t;

/* The fault of an op of a request this decoder returned, or NULL. */
const char *bw_json_op_fault(const Bulkwrite__V1__Op *op);

Bulkwrite__V1__BatchWriteRequest *bw_json_request_decode(const void *body, size_t len, size_t max_ops, bw_arena_t *a,
                                                         char *err, size_t esz, int *too_many);

#endif
