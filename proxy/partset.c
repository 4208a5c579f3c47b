/* partset.c — a named job's part numbers as ranges (partset.h). */
#include "partset.h"

#include <stdlib.h>
#include <string.h>

/* The index of the first range whose hi >= p (n when none). */
static uint32_t lower(const bw_partset_t *s, uint32_t p) {
    uint32_t a = 0, b = s->n;
    while (a < b) {
        uint32_t m = a + (b - a) / 2;
        if (s->r[m].hi < p) a = m + 1;
        else b = m;
    }
    return a;
}

int bw_partset_has(const bw_partset_t *s, uint32_t p) {
    uint32_t i = lower(s, p);
    return i < s->n && s->r[i].lo <= p;
}

int bw_partset_add(bw_partset_t *s, uint32_t p) {
    uint32_t i = lower(s, p);
    if (i < s->n && s->r[i].lo <= p) return 0;
    int joins_prev = i > 0 && s->r[i - 1].hi + 1 == p; /* r[i-1].hi < p - 1 otherwise */
    int joins_next = i < s->n && p + 1 == s->r[i].lo;
    if (joins_prev && joins_next) { /* fills the hole between two ranges */
        s->r[i - 1].hi = s->r[i].hi;
        memmove(&s->r[i], &s->r[i + 1], (s->n - i - 1) * sizeof(*s->r));
        s->n--;
    } else if (joins_prev) {
        s->r[i - 1].hi = p;
    } else if (joins_next) {
        s->r[i].lo = p;
    } else {
        if (s->n == s->cap) {
            s->cap = s->cap ? s->cap * 2 : 2;
            if (!(s->r = realloc(s->r, s->cap * sizeof(*s->r)))) abort();
        }
        memmove(&s->r[i + 1], &s->r[i], (s->n - i) * sizeof(*s->r));
        s->r[i] = (bw_partset_range_t){p, p};
        s->n++;
    }
    return 1;
}

uint64_t bw_partset_count(const bw_partset_t *s) {
    uint64_t n = 0;
    for (uint32_t i = 0; i < s->n; i++) n += (uint64_t)s->r[i].hi - s->r[i].lo + 1;
    return n;
}

uint64_t bw_partset_first_missing(const bw_partset_t *s) {
    return s->n && s->r[0].lo == 0 ? (uint64_t)s->r[0].hi + 1 : 0;
}

int64_t bw_partset_max(const bw_partset_t *s) { return s->n ? (int64_t)s->r[s->n - 1].hi : -1; }

size_t bw_partset_bytes(const bw_partset_t *s) { return (size_t)s->cap * sizeof(*s->r); }

void bw_partset_free(bw_partset_t *s) {
    free(s->r);
    *s = (bw_partset_t)BW_PARTSET_INIT;
}
