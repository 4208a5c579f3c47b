/* apijson.h — values in the API's JSON encoding (docs/api.md), for the writers of that
 * encoding outside the proxy: dead-letter records (so an op can be resubmitted as it
 * is) and the test clients. The members' names are request_schema.h's, which the
 * decoders read (request_decode.h). */
#ifndef BW_APIJSON_H
#define BW_APIJSON_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "bulkwrite/v1/bulkwrite.pb-c.h"

/* RFC 4648 base64 with padding (malloc'd, NUL-terminated). */
char *bw_base64(const void *data, size_t len);
/* Base64 or base64url (RFC 4648, padding optional) into out (room for len * 3 / 4 + 3
 * bytes): the bytes written, or -1 on a character of neither alphabet. */
long bw_base64_decode(const char *in, size_t len, uint8_t *out);

/* A Value as JSON: numbers, booleans, text, null, {"base64": "..."} for bytes. NULL
 * (an absent value) is null. */
json_t *bw_value_json(const Bulkwrite__V1__Value *v);

/* Appends the JSON body of a batch write request, {"request_id": …, "ops": [...]}, with
 * the ops' values as bw_value_json writes them. Written straight into out: a jansson
 * tree per op cost the bench's JSON client ten times the CPU of its protobuf encoding,
 * and the bench is to measure the proxy. */
void bw_apijson_request(bw_buf_t *out, const char *request_id, const char *lane, Bulkwrite__V1__Op *const *ops,
                        size_t n);

/* Appends one op as the request's JSON has it: {"op": …, "object_type": …, "id": …, …}
 * (bwctl submit's JSON lines too). */
void bw_apijson_op(bw_buf_t *out, const Bulkwrite__V1__Op *op);

#endif
