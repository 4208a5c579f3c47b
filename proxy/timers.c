/* timers.c — the held records in two heaps, by id and by job (timers.h). */
#include "timers.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bw.h"

typedef struct entry {
    char id[33], job[33];
    int64_t not_before_ms, written_at_ms, created_at_ms;
    uint32_t job_part;
    uint32_t n_after;
    uint32_t ops;                    /* the ops it holds */
    uint32_t shard;                  /* its first held batch's */
    int multi;                       /* it holds batches for more than one shard */
    uint32_t client;                 /* its client's place in clients[] */
    char (*after)[33];
    void *rec;
    size_t len;
    uint64_t pos_bytes, pos_records; /* the tail's when the record was read */
    int64_t due_ms;                  /* in PENDING: when it comes due (its not_before, or parked until) */
    int heap;                        /* PENDING or READY: which heap holds it */
    size_t heap_at;                  /* its place there */
    struct entry *id_next;
    struct job_node *jn;             /* its job's */
    struct entry *jprev, *jnext;     /* its job's records, by part, lowest first */
    struct entry *dep_prev, *dep_next; /* in the dependents' list while n_after > 0 */
} entry_t;

/* A job that holds records: its records in part order (a named job's parts arrive about
 * in order: an insert walks back from the tail a step or two). */
typedef struct job_node {
    char job[33];
    entry_t *head, *tail;
    struct job_node *next; /* hash chain */
} job_node_t;

enum { PENDING, READY };

typedef struct {
    entry_t **at;
    size_t n, cap;
} heap_t;

/* @locks mu guards everything */
struct bw_timers {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    entry_t **by_id;           /* hash chains, `buckets` of them */
    job_node_t **by_job;       /* the jobs', `buckets` too */
    size_t buckets, cnt, jobs, bytes;
    heap_t heaps[2];
    uint64_t pos_bytes, pos_records;
    entry_t *dependents;        /* the records with prerequisites, a few: looked at every turn */
    bw_timers_client_t *clients; /* what each client holds: a few, found by name */
    size_t client_cnt, client_cap, ops;
    int64_t waiting_until; /* the release loop sleeps until then (INT64_MAX: it does not sleep) */
    int waiting, woken;
};

#define ENTRY_BYTES(e) (sizeof(entry_t) + (e)->len + (e)->n_after * 33)

/* ---- the heaps: release order --------------------------------------------------------- */

/* Due first, then in the order they were accepted (a named job's parts by number): ops
 * on one object in two held requests go out in the order the client sent them. */
static int earlier(const entry_t *x, const entry_t *y) {
    if (x->not_before_ms != y->not_before_ms) return x->not_before_ms < y->not_before_ms;
    if (x->created_at_ms != y->created_at_ms) return x->created_at_ms < y->created_at_ms;
    if (x->job_part != y->job_part) return x->job_part < y->job_part;
    return strcmp(x->id, y->id) < 0;
}

/* A heap's order: PENDING by when it comes due, READY in release order. */
static int before(int which, const entry_t *x, const entry_t *y) {
    if (which == PENDING && x->due_ms != y->due_ms) return x->due_ms < y->due_ms;
    return earlier(x, y);
}

static void heap_set(heap_t *h, size_t i, entry_t *e) {
    h->at[i] = e;
    e->heap_at = i;
}

static void sift_up(heap_t *h, int which, size_t i) {
    entry_t *e = h->at[i];
    while (i && before(which, e, h->at[(i - 1) / 2])) {
        heap_set(h, i, h->at[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    heap_set(h, i, e);
}

static void sift_down(heap_t *h, int which, size_t i) {
    entry_t *e = h->at[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && before(which, h->at[c + 1], h->at[c])) c++;
        if (!before(which, h->at[c], e)) break;
        heap_set(h, i, h->at[c]);
        i = c;
    }
    heap_set(h, i, e);
}

static void heap_push(bw_timers_t *t, int which, entry_t *e) {
    heap_t *h = &t->heaps[which];
    if (h->n == h->cap) {
        h->cap = h->cap ? h->cap * 2 : 1024;
        if (!(h->at = realloc(h->at, h->cap * sizeof(*h->at)))) abort();
    }
    e->heap = which;
    heap_set(h, h->n++, e);
    sift_up(h, which, h->n - 1);
}

static void heap_remove(bw_timers_t *t, entry_t *e) {
    heap_t *h = &t->heaps[e->heap];
    size_t i = e->heap_at;
    entry_t *last = h->at[--h->n];
    if (i == h->n) return;
    heap_set(h, i, last);
    sift_up(h, e->heap, i);
    sift_down(h, e->heap, last->heap_at);
}

/* ---- the hash chains ---------------------------------------------------------------------- */

/* FNV-1a over the id: ids are digests, but a test's or a client's may share a prefix. */
static size_t id_hash(const char *id) {
    uint64_t h = 1469598103934665603u;
    for (int i = 0; i < 32 && id[i]; i++) h = (h ^ (unsigned char)id[i]) * 1099511628211u;
    return (size_t)(h ^ h >> 29);
}

static entry_t **id_chain(bw_timers_t *t, const char *id) { return &t->by_id[id_hash(id) & (t->buckets - 1)]; }
static job_node_t **job_chain(bw_timers_t *t, const char *job) { return &t->by_job[id_hash(job) & (t->buckets - 1)]; }

static void grow(bw_timers_t *t) {
    size_t old = t->buckets;
    entry_t **ids = t->by_id;
    job_node_t **jobs = t->by_job;
    t->buckets = old ? old * 2 : 1024;
    if (!(t->by_id = calloc(t->buckets, sizeof(*t->by_id))) || !(t->by_job = calloc(t->buckets, sizeof(*t->by_job))))
        abort();
    for (size_t b = 0; b < old; b++) {
        for (entry_t *e = ids[b], *next; e; e = next) {
            next = e->id_next;
            entry_t **c = id_chain(t, e->id);
            e->id_next = *c;
            *c = e;
        }
        for (job_node_t *n = jobs[b], *next; n; n = next) {
            next = n->next;
            job_node_t **c = job_chain(t, n->job);
            n->next = *c;
            *c = n;
        }
    }
    free(ids);
    free(jobs);
}

static entry_t *find(bw_timers_t *t, const char *id) {
    for (entry_t *e = *id_chain(t, id); e; e = e->id_next)
        if (strcmp(e->id, id) == 0) return e;
    return NULL;
}

static job_node_t *find_job(bw_timers_t *t, const char *job) {
    for (job_node_t *n = *job_chain(t, job); n; n = n->next)
        if (strcmp(n->job, job) == 0) return n;
    return NULL;
}

/* e into its job's list, by part (made with its first record). */
static void job_link(bw_timers_t *t, entry_t *e) {
    job_node_t *n = find_job(t, e->job);
    if (!n) {
        if (!(n = calloc(1, sizeof(*n)))) abort();
        memcpy(n->job, e->job, 33);
        job_node_t **c = job_chain(t, n->job);
        n->next = *c;
        *c = n;
        t->jobs++;
    }
    e->jn = n;
    entry_t *after = n->tail;
    while (after && after->job_part > e->job_part) after = after->jprev;
    e->jprev = after;
    e->jnext = after ? after->jnext : n->head;
    if (e->jnext) e->jnext->jprev = e;
    else n->tail = e;
    if (after) after->jnext = e;
    else n->head = e;
}

/* e out of its job's list; the job's node goes with its last record. */
static void job_unlink(bw_timers_t *t, entry_t *e) {
    job_node_t *n = e->jn;
    if (e->jprev) e->jprev->jnext = e->jnext;
    else n->head = e->jnext;
    if (e->jnext) e->jnext->jprev = e->jprev;
    else n->tail = e->jprev;
    e->jprev = e->jnext = NULL;
    if (n->head) return;
    for (job_node_t **p = job_chain(t, n->job); *p; p = &(*p)->next)
        if (*p == n) {
            *p = n->next;
            break;
        }
    free(n);
    t->jobs--;
}

static void id_unlink(bw_timers_t *t, entry_t *e) {
    for (entry_t **p = id_chain(t, e->id); *p; p = &(*p)->id_next)
        if (*p == e) {
            *p = e->id_next;
            return;
        }
}

/* The place of `name` in clients[], made on first use. */
static uint32_t client_of(bw_timers_t *t, const char *name) {
    if (!name) name = "";
    for (size_t i = 0; i < t->client_cnt; i++)
        if (strcmp(t->clients[i].client, name) == 0) return (uint32_t)i;
    if (t->client_cnt >= BW_TIMERS_CLIENTS_MAX) { /* a place no record holds now, else "(other)" */
        for (size_t i = 0; i < t->client_cnt; i++)
            if (!t->clients[i].held && strcmp(t->clients[i].client, "(other)")) {
                snprintf(t->clients[i].client, sizeof(t->clients[i].client), "%s", name);
                return (uint32_t)i;
            }
        name = "(other)";
        for (size_t i = 0; i < t->client_cnt; i++)
            if (strcmp(t->clients[i].client, name) == 0) return (uint32_t)i;
    }
    if (t->client_cnt == t->client_cap) {
        t->client_cap = t->client_cap ? t->client_cap * 2 : 8;
        if (!(t->clients = realloc(t->clients, t->client_cap * sizeof(*t->clients)))) abort();
    }
    bw_timers_client_t *c = &t->clients[t->client_cnt];
    memset(c, 0, sizeof(*c));
    snprintf(c->client, sizeof(c->client), "%s", name);
    return (uint32_t)t->client_cnt++;
}

/* What e holds counted (sign 1) or no longer (-1), in the totals and its client's. */
static void count(bw_timers_t *t, const entry_t *e, int sign) {
    bw_timers_client_t *c = &t->clients[e->client];
    if (sign > 0) {
        t->bytes += ENTRY_BYTES(e), t->ops += e->ops, c->held++, c->ops += e->ops;
    } else {
        t->bytes -= ENTRY_BYTES(e), t->ops -= e->ops, c->held--, c->ops -= e->ops;
    }
}

static void dependents_unlink(bw_timers_t *t, entry_t *e) {
    if (!e->n_after) return;
    if (e->dep_prev) e->dep_prev->dep_next = e->dep_next;
    else t->dependents = e->dep_next;
    if (e->dep_next) e->dep_next->dep_prev = e->dep_prev;
    e->dep_prev = e->dep_next = NULL;
}

static void forget(bw_timers_t *t, entry_t *e) {
    dependents_unlink(t, e);
    heap_remove(t, e);
    id_unlink(t, e);
    job_unlink(t, e);
    count(t, e, -1);
    t->cnt--;
    free(e->after);
    free(e->rec);
    free(e);
}

/* ---- the API ------------------------------------------------------------------------------ */

bw_timers_t *bw_timers_new(void) {
    bw_timers_t *t = calloc(1, sizeof(*t));
    if (!t) abort();
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    t->waiting_until = INT64_MAX;
    grow(t);
    return t;
}

void bw_timers_free(bw_timers_t *t) {
    if (!t) return;
    while (t->heaps[PENDING].n) forget(t, t->heaps[PENDING].at[0]);
    while (t->heaps[READY].n) forget(t, t->heaps[READY].at[0]);
    free(t->heaps[PENDING].at);
    free(t->heaps[READY].at);
    free(t->by_id);
    free(t->by_job);
    free(t->clients);
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mu);
    free(t);
}

static int valid_id(const char *s) { return s && strlen(s) == 32 && strspn(s, "0123456789abcdef") == 32; }

void bw_timers_note(bw_timers_t *t, const char *id, const Bulkwrite__Internal__V1__JobRecord *r, const void *raw, size_t len,
                    uint64_t pos_bytes, uint64_t pos_records) {
    pthread_mutex_lock(&t->mu);
    entry_t *e = find(t, id);
    if (!r || !r->n_held) {
        if (e) forget(t, e);
        pthread_mutex_unlock(&t->mu);
        return;
    }
    if (e) { /* the same record written again: it keeps its place unless its time moved */
        heap_remove(t, e);
        dependents_unlink(t, e);
        count(t, e, -1);
        free(e->rec);
        free(e->after);
    } else {
        if (t->cnt + 1 > t->buckets) grow(t);
        if (!(e = calloc(1, sizeof(*e)))) abort();
        memcpy(e->id, id, 33);
        snprintf(e->job, sizeof(e->job), "%s", valid_id(r->job) ? r->job : id);
        e->job_part = r->job_part;
        entry_t **c = id_chain(t, e->id);
        e->id_next = *c;
        *c = e;
        job_link(t, e);
        t->cnt++;
    }
    e->not_before_ms = r->not_before_ms;
    e->due_ms = r->not_before_ms;
    e->written_at_ms = r->written_at_ms;
    e->created_at_ms = r->created_at_ms;
    e->client = client_of(t, r->client);
    e->ops = 0;
    e->shard = r->held[0]->shard;
    e->multi = 0;
    for (size_t i = 0; i < r->n_held; i++) {
        e->ops += r->held[i]->rows;
        e->multi |= r->held[i]->shard != e->shard;
    }
    e->pos_bytes = t->pos_bytes = pos_bytes;
    e->pos_records = t->pos_records = pos_records;
    e->n_after = 0;
    e->after = NULL;
    if (r->n_after && !(e->after = malloc(r->n_after * sizeof(*e->after)))) abort();
    for (size_t i = 0; i < r->n_after && e->n_after < BW_AFTER_MAX; i++)
        if (valid_id(r->after[i])) memcpy(e->after[e->n_after++], r->after[i], 33);
    if (e->n_after) {
        e->dep_next = t->dependents;
        if (t->dependents) t->dependents->dep_prev = e;
        t->dependents = e;
    }
    if (!(e->rec = malloc(len ? len : 1))) abort();
    memcpy(e->rec, raw, len);
    e->len = len;
    count(t, e, 1);
    heap_push(t, e->not_before_ms <= bw_wall_ms() ? READY : PENDING, e);
    if (t->waiting && e->not_before_ms < t->waiting_until) { /* the release loop sleeps past its time */
        t->woken = 1;
        pthread_cond_signal(&t->cv);
    }
    pthread_mutex_unlock(&t->mu);
}

void bw_timers_position(bw_timers_t *t, uint64_t pos_bytes, uint64_t pos_records) {
    pthread_mutex_lock(&t->mu);
    t->pos_bytes = pos_bytes;
    t->pos_records = pos_records;
    pthread_mutex_unlock(&t->mu);
}

/* An earlier part of e's named job holds batches (its job's list is by part). */
static int part_before_held(const entry_t *e) { return e->jn->head != e && e->jn->head->job_part < e->job_part; }

/* How far the tail has read past what it had read at `at` (0 if not past it). */
static uint64_t behind(uint64_t now, uint64_t at) { return now > at ? now - at : 0; }

static void copy_out(bw_timers_t *t, const entry_t *e, bw_timer_t *c) {
    memcpy(c->id, e->id, 33);
    memcpy(c->job, e->job, 33);
    c->not_before_ms = e->not_before_ms;
    c->written_at_ms = e->written_at_ms;
    c->created_at_ms = e->created_at_ms;
    c->job_part = e->job_part;
    c->part_before_held = part_before_held(e);
    c->shard = e->shard;
    c->owned = 1;
    c->behind_bytes = behind(t->pos_bytes, e->pos_bytes);
    c->behind_records = behind(t->pos_records, e->pos_records);
    c->n_after = e->n_after;
    c->after = NULL;
    if (e->n_after && !(c->after = malloc(e->n_after * sizeof(*c->after)))) abort();
    if (e->n_after) memcpy(c->after, e->after, e->n_after * sizeof(*c->after));
    if (!(c->rec = malloc(e->len ? e->len : 1))) abort();
    memcpy(c->rec, e->rec, e->len);
    c->len = e->len;
}

/* Room for one more copy in *out (n of *cap). */
static bw_timer_t *next_copy(bw_timer_t **out, size_t n, size_t *cap) {
    if (n == *cap && !(*out = realloc(*out, (*cap = *cap ? *cap * 2 : 64) * sizeof(**out)))) abort();
    return &(*out)[n];
}

/* e waits in PENDING until until_ms, its place in release order kept for when it is due. */
static void park(bw_timers_t *t, entry_t *e, int64_t until_ms) {
    heap_remove(t, e);
    e->due_ms = until_ms > e->not_before_ms ? until_ms : e->not_before_ms;
    heap_push(t, PENDING, e);
}

size_t bw_timers_due(bw_timers_t *t, int64_t now_ms, size_t max, const uint8_t *mine, size_t shards,
                     int64_t takeover_ms, int64_t park_ms, bw_timer_t **out) {
    pthread_mutex_lock(&t->mu);
    heap_t *pending = &t->heaps[PENDING], *ready = &t->heaps[READY];
    while (pending->n && pending->at[0]->due_ms <= now_ms) {
        entry_t *e = pending->at[0];
        heap_remove(t, e);
        heap_push(t, READY, e);
    }
    /* in order, up to max copies: another proxy's records are parked for park_ms (their
     * owner releases them meanwhile), the copied ones put back in READY after */
    size_t n = 0, cap = 0, taken_cnt = 0, taken_cap = max < ready->n ? max : ready->n;
    entry_t **taken = malloc((taken_cap + 1) * sizeof(*taken));
    if (!taken) abort();
    *out = NULL;
    while (n < max && ready->n) {
        entry_t *e = ready->at[0];
        int owned = !mine || (e->shard < shards && mine[e->shard]) ||
                    (e->not_before_ms > 0 && e->not_before_ms <= takeover_ms);
        if (!owned && !e->multi) {
            park(t, e, now_ms + park_ms);
            continue;
        }
        heap_remove(t, e);
        taken[taken_cnt++] = e;
        copy_out(t, e, next_copy(out, n, &cap));
        (*out)[n++].owned = owned;
    }
    for (size_t i = 0; i < taken_cnt; i++) heap_push(t, READY, taken[i]);
    pthread_mutex_unlock(&t->mu);
    free(taken);
    return n;
}

void bw_timers_park(bw_timers_t *t, const char *const *ids, size_t n, int64_t until_ms) {
    pthread_mutex_lock(&t->mu);
    for (size_t i = 0; i < n; i++) {
        entry_t *e = find(t, ids[i]);
        if (e && e->heap == READY) park(t, e, until_ms);
    }
    pthread_mutex_unlock(&t->mu);
}

typedef struct {
    int64_t written_before_ms;
    uint64_t behind_bytes, behind_records;
    int (*gone)(void *ud, const char *job);
    void *ud;
    const uint8_t *mine;
    size_t shards;
} stale_t;

static int is_stale(const bw_timers_t *t, const entry_t *e, const stale_t *s) {
    if (s->mine && !(e->shard < s->shards && s->mine[e->shard])) return 0; /* its owner writes it */
    return e->written_at_ms <= s->written_before_ms ||
           (s->behind_bytes && behind(t->pos_bytes, e->pos_bytes) > s->behind_bytes) ||
           (s->behind_records && behind(t->pos_records, e->pos_records) > s->behind_records) ||
           (s->gone && s->gone(s->ud, e->job));
}

size_t bw_timers_stale(bw_timers_t *t, int64_t written_before_ms, uint64_t behind_bytes, uint64_t behind_records,
                       int (*gone)(void *ud, const char *job), void *ud, const uint8_t *mine, size_t shards,
                       size_t max, bw_timer_t **out) {
    stale_t st = {written_before_ms, behind_bytes, behind_records, gone, ud, mine, shards};
    pthread_mutex_lock(&t->mu);
    size_t n = 0, cap = 0;
    *out = NULL;
    for (int h = PENDING; h <= READY; h++)
        for (size_t i = 0; i < t->heaps[h].n && n < max; i++) {
            const entry_t *e = t->heaps[h].at[i];
            if (is_stale(t, e, &st)) copy_out(t, e, next_copy(out, n++, &cap));
        }
    pthread_mutex_unlock(&t->mu);
    return n;
}

size_t bw_timers_dependents(bw_timers_t *t, bw_timer_t **out) {
    pthread_mutex_lock(&t->mu);
    size_t n = 0, cap = 0;
    *out = NULL;
    for (const entry_t *e = t->dependents; e; e = e->dep_next) {
        if (e->heap != PENDING || e->due_ms > e->not_before_ms) continue; /* due (or parked): bw_timers_due's */
        bw_timer_t *c = next_copy(out, n++, &cap);
        memset(c, 0, sizeof(*c));
        memcpy(c->id, e->id, 33);
        memcpy(c->job, e->job, 33);
        c->n_after = e->n_after;
        if (!(c->after = malloc(e->n_after * sizeof(*c->after)))) abort();
        memcpy(c->after, e->after, e->n_after * sizeof(*c->after));
    }
    pthread_mutex_unlock(&t->mu);
    return n;
}

void bw_timers_copies_free(bw_timer_t *copies, size_t n) {
    for (size_t i = 0; i < n; i++) {
        free(copies[i].after);
        free(copies[i].rec);
    }
    free(copies);
}

int64_t bw_timers_next_due(bw_timers_t *t) {
    pthread_mutex_lock(&t->mu);
    int64_t next = t->heaps[PENDING].n ? t->heaps[PENDING].at[0]->due_ms : INT64_MAX;
    pthread_mutex_unlock(&t->mu);
    return next;
}

void bw_timers_wait(bw_timers_t *t, int64_t until_ms) {
    pthread_mutex_lock(&t->mu);
    t->waiting_until = until_ms;
    t->waiting = 1;
    while (!t->woken) {
        struct timespec at = {(time_t)(until_ms / 1000), (long)(until_ms % 1000) * 1000000};
        if (pthread_cond_timedwait(&t->cv, &t->mu, &at) == ETIMEDOUT) break;
    }
    t->woken = t->waiting = 0;
    t->waiting_until = INT64_MAX;
    pthread_mutex_unlock(&t->mu);
}

void bw_timers_wake(bw_timers_t *t) {
    pthread_mutex_lock(&t->mu);
    t->woken = 1;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

void bw_timers_stats(bw_timers_t *t, bw_timers_stats_t *st) {
    pthread_mutex_lock(&t->mu);
    *st = (bw_timers_stats_t){t->cnt, t->ops, t->heaps[READY].n, t->bytes,
                              t->heaps[PENDING].n ? t->heaps[PENDING].at[0]->due_ms : 0};
    pthread_mutex_unlock(&t->mu);
}

static int most_held_first(const void *a, const void *b) {
    const bw_timers_client_t *x = a, *y = b;
    return x->held != y->held ? (x->held < y->held ? 1 : -1) : strcmp(x->client, y->client);
}

size_t bw_timers_clients(bw_timers_t *t, bw_timers_client_t *out, size_t max) {
    pthread_mutex_lock(&t->mu);
    bw_timers_client_t *all = malloc((t->client_cnt + 1) * sizeof(*all));
    if (!all) abort();
    size_t n = 0;
    for (size_t i = 0; i < t->client_cnt; i++)
        if (t->clients[i].held) all[n++] = t->clients[i];
    pthread_mutex_unlock(&t->mu);
    qsort(all, n, sizeof(*all), most_held_first);
    if (n > max) n = max;
    memcpy(out, all, n * sizeof(*out));
    free(all);
    return n;
}

int bw_timers_holds_job(bw_timers_t *t, const char *job) {
    pthread_mutex_lock(&t->mu);
    int held = find_job(t, job) != NULL;
    pthread_mutex_unlock(&t->mu);
    return held;
}

int bw_timers_would_cycle(bw_timers_t *t, const char *id, char *const *after, size_t n_after) {
    size_t cnt = 0, cap = n_after + BW_AFTER_MAX + 1;
    char (*seen)[33] = malloc(cap * sizeof(*seen));
    if (!seen) abort();
    for (size_t i = 0; i < n_after; i++) snprintf(seen[cnt++], 33, "%s", after[i]);
    int cycle = 0;
    pthread_mutex_lock(&t->mu);
    /* breadth first over "waits for": seen[0..cnt) grows as prerequisites are found */
    for (size_t q = 0; q < cnt && !cycle; q++) {
        if (strcmp(seen[q], id) == 0) cycle = 1;
        const job_node_t *jn = find_job(t, seen[q]);
        for (const entry_t *e = jn ? jn->head : NULL; e && !cycle; e = e->jnext) {
            for (size_t a = 0; a < e->n_after; a++) {
                size_t k = 0;
                while (k < cnt && strcmp(seen[k], e->after[a])) k++;
                if (k < cnt) continue;
                if (cnt == cap && !(seen = realloc(seen, (cap *= 2) * sizeof(*seen)))) abort();
                memcpy(seen[cnt++], e->after[a], 33);
            }
        }
    }
    pthread_mutex_unlock(&t->mu);
    free(seen);
    return cycle;
}
