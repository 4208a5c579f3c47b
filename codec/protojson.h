/* protojson.h — any protobuf-c message to and from the proto3 JSON mapping
 * (https://protobuf.dev/programming-guides/json/), by its descriptor: what the Connect
 * protocol's application/json carries (proxy/connect.c). Not the API's own JSON of
 * /v1/batches (request_decode.h), which predates it and names ops and values its way.
 *
 * Written: lowerCamelCase names, fields at their default left out, 64-bit integers as
 * strings, bytes as base64, enums by name. Read: either name form, 64-bit integers as
 * numbers or strings, enums by name or number, bytes in base64 or base64url with or
 * without padding, null as the default; an unknown field is an error (as protojson's
 * default). @locality any thread. */
#ifndef BW_PROTOJSON_H
#define BW_PROTOJSON_H

#include <jansson.h>
#include <protobuf-c/protobuf-c.h>
#include <stddef.h>

/* The message as a JSON object (new reference). */
json_t *bw_protojson_encode(const ProtobufCMessage *m);

/* A message of type d from a JSON text, malloc'd throughout (free it with
 * protobuf_c_message_free_unpacked(m, NULL)); NULL with err naming the field and what is
 * wrong with it. */
ProtobufCMessage *bw_protojson_decode(const ProtobufCMessageDescriptor *d, const char *text, size_t len, char *err,
                                      size_t esz);

#endif
