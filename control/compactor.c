#include "compactor.h"

#include <stdlib.h>
#include <string.h>

/* A key's latest record. Live values are on the list, oldest position first; a tombstone
 * stays (off the list) only while a copy of the key is on its way, to judge that copy. */
typedef struct entry {
    struct entry *next_in_bucket;
    struct entry *prev, *next; /* the list; both NULL and not the head: off it */
    void *key, *value;
    size_t klen, vlen; /* vlen 0: a tombstone */
    int64_t origin;    /* the offset this value was first written at */
    int64_t at_bytes, at_records; /* the log's written counters when it was last written */
    int pending;       /* copies handed out and not read back yet */
    int forced;        /* a stale copy followed it: write it again at once */
} entry_t;

struct bw_compactor {
    int64_t quarter_bytes, quarter_records;
    int64_t written_bytes, written_records; /* everything read, copies included */
    entry_t **buckets;
    size_t bucket_cnt, entry_cnt;
    entry_t *head, *tail;
    int64_t live_bytes;
    size_t live_records;
};

static uint64_t hash(const void *key, size_t len) {
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (size_t i = 0; i < len; i++) h = (h ^ ((const unsigned char *)key)[i]) * 1099511628211ULL;
    return h;
}

static int64_t record_size(size_t klen, size_t vlen) { return (int64_t)(klen + vlen) + BW_COMPACTOR_RECORD_OVERHEAD; }

bw_compactor_t *bw_compactor_new(int64_t bound_bytes, int64_t bound_records) {
    bw_compactor_t *c = calloc(1, sizeof(*c));
    if (!c) return NULL;
    c->quarter_bytes = bound_bytes / 4;
    c->quarter_records = bound_records / 4;
    c->bucket_cnt = 64;
    if (!(c->buckets = calloc(c->bucket_cnt, sizeof(*c->buckets)))) {
        free(c);
        return NULL;
    }
    return c;
}

void bw_compactor_free(bw_compactor_t *c) {
    if (!c) return;
    for (size_t b = 0; b < c->bucket_cnt; b++)
        for (entry_t *e = c->buckets[b], *n; e; e = n) {
            n = e->next_in_bucket;
            free(e->key);
            free(e->value);
            free(e);
        }
    free(c->buckets);
    free(c);
}

static entry_t **find(bw_compactor_t *c, const void *key, size_t klen) {
    entry_t **p = &c->buckets[hash(key, klen) & (c->bucket_cnt - 1)];
    while (*p && ((*p)->klen != klen || memcmp((*p)->key, key, klen))) p = &(*p)->next_in_bucket;
    return p;
}

static void grow(bw_compactor_t *c) {
    size_t cnt = c->bucket_cnt * 2;
    entry_t **b = calloc(cnt, sizeof(*b));
    if (!b) abort();
    for (size_t i = 0; i < c->bucket_cnt; i++)
        for (entry_t *e = c->buckets[i], *n; e; e = n) {
            n = e->next_in_bucket;
            size_t h = hash(e->key, e->klen) & (cnt - 1);
            e->next_in_bucket = b[h];
            b[h] = e;
        }
    free(c->buckets);
    c->buckets = b;
    c->bucket_cnt = cnt;
}

static int listed(const bw_compactor_t *c, const entry_t *e) { return e->prev || e->next || c->head == e; }

static void unlist(bw_compactor_t *c, entry_t *e) {
    if (!listed(c, e)) return;
    if (e->prev) e->prev->next = e->next;
    else c->head = e->next;
    if (e->next) e->next->prev = e->prev;
    else c->tail = e->prev;
    e->prev = e->next = NULL;
}

/* Written now: the newest position, at the list's end. */
static void list_last(bw_compactor_t *c, entry_t *e) {
    unlist(c, e);
    e->at_bytes = c->written_bytes;
    e->at_records = c->written_records;
    e->prev = c->tail;
    if (c->tail) c->tail->next = e;
    else c->head = e;
    c->tail = e;
}

static void list_first(bw_compactor_t *c, entry_t *e) {
    unlist(c, e);
    e->next = c->head;
    if (c->head) c->head->prev = e;
    else c->tail = e;
    c->head = e;
}

static void set_value(bw_compactor_t *c, entry_t *e, const void *value, size_t vlen) {
    if (e->vlen) {
        c->live_bytes -= record_size(e->klen, e->vlen);
        c->live_records--;
    }
    free(e->value);
    e->value = NULL;
    e->vlen = vlen;
    if (vlen) {
        if (!(e->value = malloc(vlen))) abort();
        memcpy(e->value, value, vlen);
        c->live_bytes += record_size(e->klen, vlen);
        c->live_records++;
    }
}

static void drop(bw_compactor_t *c, entry_t **slot) {
    entry_t *e = *slot;
    unlist(c, e);
    set_value(c, e, NULL, 0);
    *slot = e->next_in_bucket;
    free(e->key);
    free(e);
    c->entry_cnt--;
}

void bw_compactor_read(bw_compactor_t *c, int64_t offset, int64_t origin, const void *key, size_t klen,
                       const void *value, size_t vlen) {
    c->written_bytes += record_size(klen, vlen);
    c->written_records++;
    if (!key || !klen) return; /* no key: nothing to compact it by (Kafka refuses those too) */
    entry_t **slot = find(c, key, klen), *e = *slot;
    if (origin >= 0) { /* a copy: of what this compactor holds, or stale */
        if (!e) return;
        if (e->pending > 0) e->pending--;
        if (origin < e->origin) { /* a newer record came first: the copy must not be last */
            e->forced = 1;
            list_first(c, e);
        } else if (origin == e->origin && e->vlen && !e->forced) {
            list_last(c, e);
        } else if (origin == e->origin && !e->vlen && !e->pending && !e->forced) {
            drop(c, slot);
        }
        return;
    }
    if (!vlen) { /* a tombstone: nothing to keep, unless a copy of an older value is coming */
        if (!e) return;
        if (!e->pending) {
            drop(c, slot);
            return;
        }
        set_value(c, e, NULL, 0);
        e->origin = offset;
        e->forced = 0;
        unlist(c, e);
        return;
    }
    if (!e) {
        if (!(e = calloc(1, sizeof(*e))) || !(e->key = malloc(klen ? klen : 1))) abort();
        memcpy(e->key, key, klen);
        e->klen = klen;
        e->next_in_bucket = *slot;
        *slot = e;
        if (++c->entry_cnt > c->bucket_cnt) grow(c);
    }
    set_value(c, e, value, vlen);
    e->origin = offset;
    e->forced = 0;
    list_last(c, e);
}

int bw_compactor_due(bw_compactor_t *c, const void **key, size_t *klen, const void **value, size_t *vlen,
                     int64_t *origin) {
    entry_t *e = c->head;
    if (!e || (!e->forced && c->written_bytes - e->at_bytes < c->quarter_bytes &&
               c->written_records - e->at_records < c->quarter_records))
        return 0;
    *key = e->key;
    *klen = e->klen;
    *value = e->value;
    *vlen = e->vlen;
    *origin = e->origin;
    e->pending++;
    e->forced = 0;
    if (e->vlen) list_last(c, e); /* due again a quarter later if its copy never comes */
    else unlist(c, e);
    return 1;
}

void bw_compactor_lost(bw_compactor_t *c, const void *key, size_t klen, int64_t origin) {
    if (!key || !klen) return;
    entry_t *e = *find(c, key, klen);
    if (!e) return;
    if (e->pending > 0) e->pending--;
    if (origin == e->origin) { /* still the newest: write it again at once */
        e->forced = 1;
        list_first(c, e);
    }
}

int64_t bw_compactor_live_bytes(const bw_compactor_t *c) { return c->live_bytes; }
size_t bw_compactor_live_records(const bw_compactor_t *c) { return c->live_records; }
