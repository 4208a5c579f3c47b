/* pbdecode.h — bulkwrite's protobuf messages read by hand (wire.h) into protobuf-c's
 * structs, carved from an arena.
 *
 * protobuf-c's unpack walks a message through its descriptors, and allocates and copies
 * every string, row, field and value on its own. These readers take one pass with the
 * rules protobuf-c applies (a later scalar wins, a message given twice is merged, unknown
 * fields are skipped, a wrong wire type refuses the whole message) and fill the same
 * structs, so the code that reads them does not change (the request's reader, built on
 * them, is request_pb.c). Strings read as C strings (names, ids) are copied with a
 * terminating NUL, so an embedded NUL cuts them where protobuf-c's did; text and bytes
 * values are not copied: they point into the input, which must outlive the struct. The fuzz harness (test/fuzz/fuzz_forward.c) checks
 * every reader against protobuf-c's unpack.
 * @locality any thread; the arena's owner. */
#ifndef BW_PBDECODE_H
#define BW_PBDECODE_H

#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "bulkwrite/internal/v1/records.pb-c.h"
#include "wire.h"

/* The occurrences of field `field` in a message (to allocate a repeated field once).
 * Malformed input fails here already: -1. */
int bw_pbd_count(bw_wire_reader_t r, uint32_t field, size_t *cnt);

/* A Value field's bytes [d, d + n) into *slot: the first time (*slot NULL) into `store`,
 * which *slot then points to; a Value given again is merged into it as protobuf-c merges
 * a message whose members are a oneof. -1 on malformed input. */
int bw_pbd_value(const uint8_t *d, size_t n, Bulkwrite__V1__Value **slot, Bulkwrite__V1__Value *store);

/* A string field as a C string in the arena. */
static inline char *bw_pbd_string(bw_arena_t *a, const uint8_t *d, size_t n) {
    return bw_arena_strndup(a, (const char *)d, n);
}

/* A ShardBatch (what the consumer reads from Kafka), or NULL where protobuf-c's
 * bulkwrite__internal__v1__shard_batch__unpack would refuse the bytes. */
Bulkwrite__Internal__V1__ShardBatch *bw_pbd_shard_batch(const void *data, size_t len, bw_arena_t *a);

#endif
