#include "jobs.h"

#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "db.h"
#include "ledger.h"
#include "log.h"
#include "partset.h"
#include "scrub.h"
#include "shardtable.h"
#include "tail.h"

static void on_record(void *ud, const void *key, size_t klen, const void *val, size_t vlen, int64_t version);

/* The index: job id -> latest packed JobRecord, at most proxy.jobs_index_max_bytes of
 * records (with their entries), least recently used dropped first. Every id the tail has
 * read is also set in a Bloom filter of fixed size, so a miss for an id never seen is
 * answered at once, and only a dropped one (or a rare false positive) is looked up in
 * the topic (bw_tail_find). */
typedef struct entry {
    char id[33];
    void *rec;
    size_t len;
    struct entry *hnext;         /* hash chain */
    struct entry *newer, *older; /* LRU list */
} entry_t;

#define ENTRY_BYTES(e) (sizeof(entry_t) + (e)->len)

/* A named job (docs/jobs.md): which parts the tail has read, and the last part once
 * sealed. Kept for every named job read (its parts as ranges and its name: small, and a
 * request adds at most a range, whatever part it names; counted in the index's bytes),
 * not dropped with the records, since its parts' ids are found from it. */
typedef struct named {
    char id[33];
    bw_partset_t parts;      /* parts whose record was read */
    bw_partset_t done;       /* of them, those whose every op was taken or refused for good */
    uint32_t received;       /* parts in done */
    int64_t last;            /* the sealed job's last part; -1 while open */
    int64_t created_at_ms;   /* its first part's */
    char lane[40];
    char client[72];
    char name[132];
    char replay_of[33];      /* the job its parts name as the one they replay ("" none) */
    struct named *hnext;
} named_t;

#define NAMED_BUCKETS 4096
#define SEEN_BITS (1u << 26) /* 8 MiB: 1 % false positives at ~7 million jobs */

/* @locks mu guards buckets, nbuckets, cnt, bytes, newest, oldest, seen and the counters */
struct bw_jobs {
    pthread_mutex_t mu;
    entry_t **buckets;
    size_t nbuckets, cnt, bytes, max_bytes;
    entry_t *newest, *oldest;
    uint8_t *seen;
    uint64_t evicted, found_in_topic;
    named_t *named[NAMED_BUCKETS];
    size_t named_cnt, named_bytes; /* named_bytes: in bytes too (never dropped) */
    uint64_t read_bytes, read_records; /* what the tail read from the topic, all told */
    bw_timers_t *timers; /* the records that hold batches */
    bw_jobs_recent_t recent[BW_JOBS_RECENT_MAX]; /* a ring: the oldest is overwritten */
    size_t recent_next, recent_cnt;
    pthread_mutex_t find_mu; /* one topic read at a time */
    const bw_config_t *conf;
    char *brokers;
    bw_tail_t *tail;
};

static int valid_id(const char *id, size_t len) { return len == 32 && strspn(id, "0123456789abcdef") >= 32; }

/* The id is a digest (random, md5 or HMAC): its 16 bytes are hashes enough. */
static void id_words(const char *id, uint32_t w[4]) {
    for (int k = 0; k < 4; k++) {
        uint32_t v = 0;
        for (int i = 0; i < 8; i++) {
            char c = id[8 * k + i];
            v = v << 4 | (uint32_t)(c <= '9' ? c - '0' : c - 'a' + 10);
        }
        w[k] = v;
    }
}

static void seen_set(bw_jobs_t *j, const char *id) {
    uint32_t w[4];
    id_words(id, w);
    for (int k = 0; k < 4; k++) j->seen[(w[k] % SEEN_BITS) / 8] |= (uint8_t)(1u << (w[k] % 8));
}

static int seen_maybe(bw_jobs_t *j, const char *id) {
    uint32_t w[4];
    id_words(id, w);
    for (int k = 0; k < 4; k++)
        if (!(j->seen[(w[k] % SEEN_BITS) / 8] & (1u << (w[k] % 8)))) return 0;
    return 1;
}

static entry_t **chain(bw_jobs_t *j, const char *id) {
    uint32_t w[4];
    id_words(id, w);
    return &j->buckets[w[0] & (j->nbuckets - 1)];
}

static entry_t *find(bw_jobs_t *j, const char *id) {
    for (entry_t *e = *chain(j, id); e; e = e->hnext)
        if (memcmp(e->id, id, 32) == 0) return e;
    return NULL;
}

static void lru_unlink(bw_jobs_t *j, entry_t *e) {
    if (e->newer) e->newer->older = e->older;
    else j->newest = e->older;
    if (e->older) e->older->newer = e->newer;
    else j->oldest = e->newer;
    e->newer = e->older = NULL;
}

static void lru_push(bw_jobs_t *j, entry_t *e) {
    e->older = j->newest;
    e->newer = NULL;
    if (j->newest) j->newest->newer = e;
    j->newest = e;
    if (!j->oldest) j->oldest = e;
}

static void drop(bw_jobs_t *j, entry_t *e) {
    for (entry_t **p = chain(j, e->id); *p; p = &(*p)->hnext)
        if (*p == e) {
            *p = e->hnext;
            break;
        }
    lru_unlink(j, e);
    j->cnt--;
    j->bytes -= ENTRY_BYTES(e);
    free(e->rec);
    free(e);
}

/* Doubles the hash table when it holds more entries than chains. */
static void grow(bw_jobs_t *j) {
    size_t old_n = j->nbuckets;
    entry_t **old = j->buckets;
    j->nbuckets = old_n ? old_n * 2 : 1024;
    if (!(j->buckets = calloc(j->nbuckets, sizeof(*j->buckets)))) abort();
    for (size_t i = 0; i < old_n; i++)
        for (entry_t *e = old[i], *next; e; e = next) {
            next = e->hnext;
            entry_t **c = chain(j, e->id);
            e->hnext = *c;
            *c = e;
        }
    free(old);
}

void bw_jobs_put(bw_jobs_t *j, const char *job_id, const void *rec, size_t len) {
    on_record(j, job_id, strlen(job_id), rec, len, -1);
}

/* Parts a record says were taken: they only grow from one attempt to the next. */
static size_t parts_taken(const void *rec, size_t len) {
    Bulkwrite__Internal__V1__JobRecord *r = bulkwrite__internal__v1__job_record__unpack(NULL, len, rec);
    size_t n = r ? r->n_accepted_parts : 0;
    if (r) bulkwrite__internal__v1__job_record__free_unpacked(r, NULL);
    return n;
}

static named_t *find_named(bw_jobs_t *j, const char *id) {
    uint32_t w[4];
    id_words(id, w);
    for (named_t *n = j->named[w[0] % NAMED_BUCKETS]; n; n = n->hnext)
        if (memcmp(n->id, id, 32) == 0) return n;
    return NULL;
}

/* Notes a named job's part: the job's id, its number, whether it is the last. */
static void note_part(bw_jobs_t *j, const Bulkwrite__Internal__V1__JobRecord *r) {
    if (!r->job || !valid_id(r->job, strlen(r->job))) return;
    named_t *n = find_named(j, r->job);
    if (!n) {
        uint32_t w[4];
        id_words(r->job, w);
        if (!(n = calloc(1, sizeof(*n)))) abort();
        j->named_bytes += sizeof(*n);
        j->bytes += sizeof(*n);
        memcpy(n->id, r->job, 33);
        n->last = -1;
        n->created_at_ms = r->created_at_ms;
        snprintf(n->lane, sizeof(n->lane), "%s", r->lane ? r->lane : "");
        snprintf(n->client, sizeof(n->client), "%s", r->client ? r->client : "");
        snprintf(n->name, sizeof(n->name), "%s", r->job_name ? r->job_name : "");
        n->hnext = j->named[w[0] % NAMED_BUCKETS];
        j->named[w[0] % NAMED_BUCKETS] = n;
        j->named_cnt++;
    }
    size_t before = bw_partset_bytes(&n->parts) + bw_partset_bytes(&n->done);
    bw_partset_add(&n->parts, r->job_part);
    if (r->complete && bw_partset_add(&n->done, r->job_part)) n->received++;
    size_t after = bw_partset_bytes(&n->parts) + bw_partset_bytes(&n->done);
    j->named_bytes += after - before;
    j->bytes += after - before;
    if (r->created_at_ms && r->created_at_ms < n->created_at_ms) n->created_at_ms = r->created_at_ms;
    if (r->job_last && n->last < 0) n->last = r->job_part; /* the first seal stands (the proxy refuses another) */
    if (r->replay_of && r->replay_of[0] && !n->replay_of[0]) snprintf(n->replay_of, sizeof(n->replay_of), "%s", r->replay_of);
}

/* Notes a job first read now at the head of the recent ring. @locks mu MUST be held */
static void note_recent(bw_jobs_t *j, const char *id, const Bulkwrite__Internal__V1__JobRecord *r) {
    const char *job = r->job && valid_id(r->job, strlen(r->job)) ? r->job : id;
    for (size_t i = 0; i < j->recent_cnt; i++)
        if (memcmp(j->recent[i].id, job, 32) == 0) return;
    bw_jobs_recent_t *e = &j->recent[j->recent_next];
    memcpy(e->id, job, 33);
    snprintf(e->client, sizeof(e->client), "%s", r->client ? r->client : "");
    e->created_at_ms = r->created_at_ms;
    j->recent_next = (j->recent_next + 1) % BW_JOBS_RECENT_MAX;
    if (j->recent_cnt < BW_JOBS_RECENT_MAX) j->recent_cnt++;
}

size_t bw_jobs_recent(bw_jobs_t *j, bw_jobs_recent_t *out, size_t max) {
    pthread_mutex_lock(&j->mu);
    size_t n = 0;
    for (size_t k = 1; k <= j->recent_cnt && n < max; k++)
        out[n++] = j->recent[(j->recent_next + BW_JOBS_RECENT_MAX - k) % BW_JOBS_RECENT_MAX];
    pthread_mutex_unlock(&j->mu);
    return n;
}

/* A job's records are merged by what they say (parts only grow), not by their version:
 * the embedded Kafka's compactor leaves the jobs topic alone; held records are written
 * again by the proxy (timers.h, release.c). */
static void on_record(void *ud, const void *key, size_t klen, const void *val, size_t vlen, int64_t version) {
    bw_jobs_t *j = ud;
    if (!vlen || klen != 32) return;
    char id[33];
    memcpy(id, key, 32);
    id[32] = '\0';
    if (!valid_id(id, 32)) return;
    void *copy = malloc(vlen);
    if (!copy) abort();
    memcpy(copy, val, vlen);
    Bulkwrite__Internal__V1__JobRecord *r = bulkwrite__internal__v1__job_record__unpack(NULL, vlen, val);
    pthread_mutex_lock(&j->mu);
    if (version >= 0) { /* read from the topic: this proxy's own puts (-1) are counted when read back */
        j->read_bytes += klen + vlen + 100; /* a record's framing in its message set, about */
        j->read_records++;
    }
    if (r) note_part(j, r);
    if (r) note_recent(j, id, r);
    seen_set(j, id);
    entry_t *e = find(j, id);
    if (e && parts_taken(e->rec, e->len) > parts_taken(copy, vlen)) {
        free(copy); /* an older attempt's record read after this proxy put a newer one */
    } else {
        if (!e) {
            if (j->cnt + 1 > j->nbuckets) grow(j);
            if (!(e = calloc(1, sizeof(*e)))) abort();
            memcpy(e->id, id, 33);
            entry_t **c = chain(j, id);
            e->hnext = *c;
            *c = e;
            j->cnt++;
        } else {
            lru_unlink(j, e);
            j->bytes -= ENTRY_BYTES(e);
            free(e->rec);
        }
        e->rec = copy;
        e->len = vlen;
        bw_timers_note(j->timers, id, r, copy, vlen, j->read_bytes, j->read_records);
        j->bytes += ENTRY_BYTES(e);
        lru_push(j, e);
    }
    /* the newest stays, whatever its size; named jobs' entries are never dropped */
    while (j->bytes > j->max_bytes && j->oldest != j->newest) {
        drop(j, j->oldest);
        j->evicted++;
    }
    bw_timers_position(j->timers, j->read_bytes, j->read_records);
    pthread_mutex_unlock(&j->mu);
    if (r) bulkwrite__internal__v1__job_record__free_unpacked(r, NULL);
}

bw_jobs_t *bw_jobs_start(const bw_config_t *conf, const char *brokers, char *errstr, size_t errstr_size) {
    bw_jobs_t *j = calloc(1, sizeof(*j));
    if (!j || !(j->seen = calloc(SEEN_BITS / 8, 1)) || !(j->brokers = strdup(brokers))) abort();
    pthread_mutex_init(&j->mu, NULL);
    pthread_mutex_init(&j->find_mu, NULL);
    j->conf = conf;
    j->max_bytes = (size_t)conf->proxy_jobs_index_max_bytes;
    j->timers = bw_timers_new();
    grow(j);
    if (!(j->tail = bw_tail_start(conf, brokers, conf->jobs_topic, on_record, j, errstr, errstr_size))) {
        bw_jobs_stop(j);
        return NULL;
    }
    return j;
}

void bw_jobs_stop(bw_jobs_t *j) {
    if (!j) return;
    bw_tail_stop(j->tail);
    while (j->oldest) drop(j, j->oldest);
    bw_timers_free(j->timers);
    for (size_t b = 0; b < NAMED_BUCKETS; b++)
        for (named_t *n = j->named[b], *next; n; n = next) {
            next = n->hnext;
            bw_partset_free(&n->parts);
            bw_partset_free(&n->done);
            free(n);
        }
    free(j->buckets);
    free(j->seen);
    free(j->brokers);
    pthread_mutex_destroy(&j->mu);
    pthread_mutex_destroy(&j->find_mu);
    free(j);
}

bw_timers_t *bw_jobs_timers(bw_jobs_t *j) { return j->timers; }

int bw_jobs_caught_up(bw_jobs_t *j) { return bw_tail_caught_up(j->tail); }

int bw_jobs_sync(bw_jobs_t *j) { return bw_tail_sync(j->tail, 3000); }

void bw_jobs_stats(bw_jobs_t *j, bw_jobs_stats_t *st) {
    pthread_mutex_lock(&j->mu);
    *st = (bw_jobs_stats_t){j->cnt, j->bytes, j->max_bytes, j->evicted, j->found_in_topic};
    pthread_mutex_unlock(&j->mu);
}

int bw_jobs_lookup(bw_jobs_t *j, const char *id, void **out, size_t *len) {
    if (!valid_id(id, strlen(id))) return -1;
    pthread_mutex_lock(&j->mu);
    entry_t *e = find(j, id);
    if (e) {
        if (!(*out = malloc(e->len))) abort();
        memcpy(*out, e->rec, e->len);
        *len = e->len;
        lru_unlink(j, e); /* used: the newest again */
        lru_push(j, e);
    }
    pthread_mutex_unlock(&j->mu);
    return e ? 0 : -1;
}

/* bw_tail_find's keep: the record with the most parts taken, as on_record keeps it. */
typedef struct {
    void *rec;
    size_t len;
} found_t;

static void keep_found(void *ud, const void *val, size_t len) {
    found_t *f = ud;
    if (f->rec && parts_taken(f->rec, f->len) > parts_taken(val, len)) return;
    free(f->rec);
    if (!(f->rec = malloc(len))) abort();
    memcpy(f->rec, val, len);
    f->len = len;
}

int bw_jobs_named(bw_jobs_t *j, const char *job_id, bw_jobs_named_t *out) {
    if (!valid_id(job_id, strlen(job_id))) return -1;
    pthread_mutex_lock(&j->mu);
    named_t *n = find_named(j, job_id);
    if (n) {
        out->received = n->received;
        out->last = n->last;
        out->max_part = bw_partset_max(&n->parts);
        out->created_at_ms = n->created_at_ms;
        out->next_part = bw_partset_first_missing(&n->done);
        snprintf(out->lane, sizeof(out->lane), "%s", n->lane);
        snprintf(out->client, sizeof(out->client), "%s", n->client);
        snprintf(out->name, sizeof(out->name), "%s", n->name);
        snprintf(out->replay_of, sizeof(out->replay_of), "%s", n->replay_of);
    }
    pthread_mutex_unlock(&j->mu);
    return n ? 0 : -1;
}

/* Adds a held part's schedule to a named job's merged record: the earliest not_before,
 * and its prerequisites (each once, at most BW_AFTER_MAX; rec->after points into ids). */
static void merge_schedule(Bulkwrite__Internal__V1__JobRecord *rec, const Bulkwrite__Internal__V1__JobRecord *part,
                           char ids[][33]) {
    if (part->not_before_ms && (!rec->not_before_ms || part->not_before_ms < rec->not_before_ms))
        rec->not_before_ms = part->not_before_ms;
    for (size_t i = 0; i < part->n_after && rec->n_after < BW_AFTER_MAX; i++) {
        size_t k = 0;
        while (k < rec->n_after && strcmp(ids[k], part->after[i])) k++;
        if (k == rec->n_after) snprintf(ids[rec->n_after++], 33, "%s", part->after[i]);
    }
}

static int record_of(bw_jobs_t *j, const char *job_id, const char *job, int64_t part, void **out, size_t *len);

/* A named job's record: its parts' records merged (ops per shard summed, offsets the
 * first and last of any part), packed and malloc'd; -1 if no part of it was read, -2 if
 * a part's record is not known now (its sums would be short). */
static int named_record(bw_jobs_t *j, const char *job_id, void **out, size_t *len) {
    bw_jobs_named_t info;
    if (bw_jobs_named(j, job_id, &info)) return -1;
    pthread_mutex_lock(&j->mu);
    named_t *n = find_named(j, job_id);
    uint32_t nranges = n->parts.n;
    bw_partset_range_t *ranges = malloc(sizeof(*ranges) * (nranges + 1));
    if (!ranges) abort();
    if (nranges) memcpy(ranges, n->parts.r, sizeof(*ranges) * nranges);
    pthread_mutex_unlock(&j->mu);
    int shard_count = j->conf->shard_count;
    Bulkwrite__Internal__V1__ShardOps *per = calloc((size_t)shard_count, sizeof(*per));
    Bulkwrite__Internal__V1__ShardOps **sop = calloc((size_t)shard_count + 1, sizeof(*sop));
    if (!per || !sop) abort();
    for (int sh = 0; sh < shard_count; sh++) {
        bulkwrite__internal__v1__shard_ops__init(&per[sh]);
        per[sh].shard = (uint32_t)sh;
        per[sh].first_offset = -1;
    }
    Bulkwrite__Internal__V1__JobRecord rec = BULKWRITE__INTERNAL__V1__JOB_RECORD__INIT;
    char after_ids[BW_AFTER_MAX][33];
    char *after_ptrs[BW_AFTER_MAX];
    for (int i = 0; i < BW_AFTER_MAX; i++) after_ptrs[i] = after_ids[i];
    rec.after = after_ptrs;
    int unknown = 0;
    for (uint32_t k = 0; k < nranges && !unknown; k++)
        for (uint64_t p = ranges[k].lo; p <= ranges[k].hi && !unknown; p++) {
            char pid[33];
            void *raw;
            size_t raw_len;
            bw_ledger_part_id(job_id, (uint32_t)p, pid);
            int rc = record_of(j, pid, job_id, (int64_t)p, &raw, &raw_len);
            if (rc == -2) unknown = 1; /* not known now: the sums would be short; no answer rather than a wrong one */
            if (rc) continue;          /* -1: deleted by the topic's retention */
            Bulkwrite__Internal__V1__JobRecord *r = bulkwrite__internal__v1__job_record__unpack(NULL, raw_len, raw);
            free(raw);
            if (!r) continue;
            rec.ops += r->ops;
            rec.rejected += r->rejected;
            for (size_t i = 0; i < r->n_shards; i++) {
                const Bulkwrite__Internal__V1__ShardOps *o = r->shards[i];
                if (o->shard >= (uint32_t)shard_count) continue;
                Bulkwrite__Internal__V1__ShardOps *m = &per[o->shard];
                m->ops += o->ops;
                m->held_ops += o->held_ops;
                if (m->first_offset < 0 || o->first_offset < m->first_offset) m->first_offset = o->first_offset;
                if (o->last_offset > m->last_offset) m->last_offset = o->last_offset;
            }
            merge_schedule(&rec, r, after_ids);
            bulkwrite__internal__v1__job_record__free_unpacked(r, NULL);
        }
    free(ranges);
    if (unknown) {
        free(per);
        free(sop);
        return -2;
    }
    for (int sh = 0; sh < shard_count; sh++)
        if (per[sh].ops) sop[rec.n_shards++] = &per[sh];
    rec.shards = sop;
    rec.job_id = rec.job = (char *)job_id;
    rec.request_id = "";
    rec.job_name = info.name;
    rec.client = info.client;
    rec.lane = info.lane;
    rec.replay_of = info.replay_of;
    rec.created_at_ms = info.created_at_ms;
    rec.job_last = info.last >= 0;
    rec.job_part = info.last >= 0 ? (uint32_t)info.last : 0;
    *len = bulkwrite__internal__v1__job_record__get_packed_size(&rec);
    if (!(*out = malloc(*len + 1))) abort();
    bulkwrite__internal__v1__job_record__pack(&rec, *out);
    free(per);
    free(sop);
    return 0;
}

int bw_jobs_record(bw_jobs_t *j, const char *job_id, void **out, size_t *len) {
    return record_of(j, job_id, job_id, -1, out, len);
}

/* bw_jobs_record of the record keyed job_id, which is job `job`'s part `part` (-1: the
 * record is the job's own) for the log's lines: a named job's parts are logged by the
 * job's id, which its client holds, not the part's. */
static int record_of(bw_jobs_t *j, const char *job_id, const char *job, int64_t part, void **out, size_t *len) {
    if (bw_jobs_lookup(j, job_id, out, len) == 0) return 0;
    int synced = bw_tail_sync(j->tail, 3000); /* a job just accepted by another proxy */
    if (bw_jobs_lookup(j, job_id, out, len) == 0) return 0;
    int named = named_record(j, job_id, out, len);
    if (named != -1) return named;
    pthread_mutex_lock(&j->mu);
    int maybe = seen_maybe(j, job_id);
    pthread_mutex_unlock(&j->mu);
    if (!maybe) return synced ? -1 : -2; /* not in what the tail read: no need to read the topic */
    /* dropped from the index (or a false positive of the filter): read the topic */
    pthread_mutex_lock(&j->find_mu);
    int rc = bw_jobs_lookup(j, job_id, out, len); /* another caller may have brought it back meanwhile */
    if (rc) {
        found_t f = {0};
        char err[256];
        int64_t t0 = bw_now_us();
        if (bw_tail_find(j->conf, j->brokers, j->conf->jobs_topic, job_id, 32, keep_found, &f, 10000, err,
                         sizeof(err))) {
            bw_log_part(BW_LOG_WARN, "proxy", -1, job, part, "job not in the index, and %s", err);
            rc = -2;
        }
        bw_log_part(BW_LOG_INFO, "proxy", -1, job, part,
                    "job %s in %s, read in %.0f ms (not in the index, which keeps proxy.jobs_index_max_bytes)",
                    f.rec ? "found" : "not found", j->conf->jobs_topic, (double)(bw_now_us() - t0) / 1000);
        if (f.rec) {
            on_record(j, job_id, 32, f.rec, f.len, -1);
            pthread_mutex_lock(&j->mu);
            j->found_in_topic++;
            pthread_mutex_unlock(&j->mu);
            *out = f.rec;
            *len = f.len;
            rc = 0;
        }
    }
    pthread_mutex_unlock(&j->find_mu);
    return rc;
}
