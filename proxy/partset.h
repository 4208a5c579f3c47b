/* partset.h — a set of a named job's part numbers, as sorted disjoint ranges: parts
 * arrive nearly in order, so a job of a million parts costs a few ranges, and one request
 * naming any part number adds at most one range (16 bytes), whatever the number.
 * @locality the owner's (jobs.c keeps its sets under the index's mutex). */
#ifndef BW_PARTSET_H
#define BW_PARTSET_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t lo, hi; /* parts lo..hi, inclusive */
} bw_partset_range_t;

typedef struct {
    bw_partset_range_t *r; /* sorted, disjoint, not adjacent */
    uint32_t n, cap;
} bw_partset_t;

#define BW_PARTSET_INIT {NULL, 0, 0}

/* Adds part p; 1 if it was not in the set. */
int bw_partset_add(bw_partset_t *s, uint32_t p);
int bw_partset_has(const bw_partset_t *s, uint32_t p);
/* How many parts are in the set. */
uint64_t bw_partset_count(const bw_partset_t *s);
/* The lowest part not in the set (0 for an empty one). */
uint64_t bw_partset_first_missing(const bw_partset_t *s);
/* The highest part in the set; -1 for an empty one. */
int64_t bw_partset_max(const bw_partset_t *s);
/* Heap bytes it holds. */
size_t bw_partset_bytes(const bw_partset_t *s);
void bw_partset_free(bw_partset_t *s);

#endif
