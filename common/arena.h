/* arena.h — a bump allocator, also usable as protobuf-c's allocator.
 *
 * Decoding a request or a Kafka message allocates one small block per row and field;
 * with an arena those are carved from a few large chunks and released all at once by
 * bw_arena_reset(), so the hot paths do no per-row malloc/free once warmed up.
 * @locality one owner thread. */
#ifndef BW_ARENA_H
#define BW_ARENA_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>

typedef struct bw_arena_chunk bw_arena_chunk_t;

typedef struct {
    bw_arena_chunk_t *chunks; /* newest first; the first one is kept across resets */
    size_t chunk_size;
    ProtobufCAllocator pb; /* hands out memory from this arena; free is a no-op */
} bw_arena_t;

void bw_arena_init(bw_arena_t *a, size_t chunk_size);
void *bw_arena_alloc(bw_arena_t *a, size_t size);
char *bw_arena_strndup(bw_arena_t *a, const char *s, size_t len);
/* Releases everything allocated; keeps the largest chunk for reuse. */
void bw_arena_reset(bw_arena_t *a);
void bw_arena_destroy(bw_arena_t *a);

#endif
