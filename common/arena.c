#include "arena.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct bw_arena_chunk {
    bw_arena_chunk_t *next;
    size_t size, used;
    max_align_t data[]; /* aligned for any type */
};

static void *pb_alloc(void *opaque, size_t size) { return bw_arena_alloc(opaque, size); }
static void pb_free(void *opaque, void *ptr) {
    (void)opaque;
    (void)ptr;
}

void bw_arena_init(bw_arena_t *a, size_t chunk_size) {
    a->chunks = NULL;
    a->chunk_size = chunk_size;
    a->pb.alloc = pb_alloc;
    a->pb.free = pb_free;
    a->pb.allocator_data = a;
}

void *bw_arena_alloc(bw_arena_t *a, size_t size) {
    size = (size + sizeof(max_align_t) - 1) & ~(sizeof(max_align_t) - 1);
    bw_arena_chunk_t *c = a->chunks;
    if (!c || c->size - c->used < size) {
        size_t csize = size > a->chunk_size ? size : a->chunk_size;
        c = malloc(sizeof(*c) + csize);
        if (!c) {
            fputs("bulkwrite: out of memory in arena\n", stderr);
            abort();
        }
        c->size = csize;
        c->used = 0;
        c->next = a->chunks;
        a->chunks = c;
    }
    void *p = (char *)c->data + c->used;
    c->used += size;
    return p;
}

char *bw_arena_strndup(bw_arena_t *a, const char *s, size_t len) {
    char *p = bw_arena_alloc(a, len + 1);
    memcpy(p, s, len);
    p[len] = '\0';
    return p;
}

void bw_arena_reset(bw_arena_t *a) {
    bw_arena_chunk_t *keep = NULL;
    for (bw_arena_chunk_t *c = a->chunks, *next; c; c = next) {
        next = c->next;
        if (!keep || c->size > keep->size) {
            free(keep);
            keep = c;
        } else {
            free(c);
        }
    }
    if (keep) {
        keep->next = NULL;
        keep->used = 0;
    }
    a->chunks = keep;
}

void bw_arena_destroy(bw_arena_t *a) {
    for (bw_arena_chunk_t *c = a->chunks, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    a->chunks = NULL;
}
