/* release.c — scheduled and dependent batches: into their shards when they are due.
 *
 * A request with a not_before still ahead, or with prerequisites (after), is held whole
 * in its job record in the jobs topic (submit.c): its batches are durable there, and the
 * shards' partitions carry nothing of it, so other work on those shards goes on. Every
 * proxy's index keeps the records that hold batches in its delay queue (timers.h), and
 * this loop sleeps until the next one is due (or a record due sooner arrives). A held
 * batch is released, as the batcher made it and under its own (job, part) name, once:
 *  - not_before has come, and
 *  - on its shard, every prerequisite is finished (bw_jobs_done_on): all its ops in
 *    (sealed, for a named job; no resend awaited, for a request) and nothing of it
 *    pending, held or lost on that shard. A prerequisite whose record the jobs topic no
 *    longer has (its retention) counts as finished.
 * A named job's part goes only once the part before it holds nothing (submit.c holds a
 * part that arrives while an earlier one of its job is held, whatever its not_before).
 *
 * A turn takes what is due (at most TURN_MAX records, in release order: due, then
 * accepted, then part), admits each batch to its shard's backlog, produces all of them
 * at once (a shard's in order, through one producer) and waits for their acks together;
 * then writes every record again without what Kafka took (their offsets in `shards`,
 * their parts in `accepted_parts`) in one go, and sums its work in one log line a second.
 * Records that cannot go yet are parked for a second (timers.h). Each shard's records are
 * released by one owner among the live proxies (own_shards); no lock between proxies:
 * two that release the same batch (owners changing) produce it twice, and the shard
 * applies its (job, part) once (docs/reliability.md).
 *
 * The loop's first turn waits until the jobs and control topics are read to their end
 * (a proxy just started knows every held record and every cancel first).
 *
 * A cancelled job's held batches are never released: its record is written again without
 * them, and its status counts their ops cancelled;
 * a job whose prerequisite was cancelled is cancelled too, with that reason. A held
 * record is written again before kafka.jobs_retention_ms could delete it, and on the
 * embedded Kafka before its partition's 5 MiB bound could.
 *
 * @locality its own thread; it reads the index and the status tables through their locks
 * and produces through the pool (producers.c). */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "proxy.h"

#define TURN_MAX 20000        /* records a turn looks at; more due: the next turn at once */
#define IDLE_MS 1000          /* a turn at least this often: prerequisites, full backlogs */
#define REFRESH_EVERY_MS 2000 /* how often records not due yet are checked: a rewrite, a cancel */
#define OWNER_FRESH_MS 5000   /* a proxy whose presence is older is gone: its shards get other owners */
#define TAKEOVER_MS 30000     /* a record this late is released by any proxy (owners that disagree, a stuck one) */
#define TURN_SPACING_MS 5     /* turns at most this often: timers due within it go out together */
#define OWNERS_EVERY_MS 1000  /* how often the shards' owners are worked out again */

/* A held record's part number as logs give it with its job (h->job, the id its client
 * holds): a named job's part's, or -1 for a job of one request. */
static int64_t named_part(const bw_timer_t *h) { return strcmp(h->id, h->job) ? (int64_t)h->job_part : -1; }

static pthread_t release_thread;
static atomic_int release_run;
static atomic_int release_running; /* past its first wait: it can own shards (own_shards) */
static int release_started;

/* A prerequisite as its status says now; one read per turn however many wait for it. */
typedef enum {
    PREREQ_UNKNOWN, /* not read this turn (the index behind, the topic not read): it holds its dependents */
    PREREQ_READ,    /* st is its status */
    PREREQ_EXPIRED, /* its record is gone from the jobs topic (retention): finished long ago */
} prereq_state_t;

typedef struct {
    char id[33];
    prereq_state_t state;
    Bulkwrite__V1__JobStatus st;
} prereq_t;

typedef struct {
    prereq_t *p;
    size_t n, cap;
} prereqs_t;

/* A prerequisite's status is read from the shards' ledgers (bw_jobs_status), not from the
 * consumers' status records: those carry a partition's applied offset, sampled every
 * consumer.progress_interval_ms, and after a MySQL failover they still say what the old
 * primary applied, while the promoted server's ledger is the truth (docs/reliability.md).
 * Only held records with prerequisites cost a read, once per prerequisite per turn. */
static void prereq_read(prereq_t *p) {
    void *raw;
    size_t len;
    int rc = bw_jobs_record(proxy.jobs, p->id, &raw, &len);
    /* it existed when its dependent was accepted (submit.c): a topic read to its end
     * without it means its retention deleted it, not that it is still to come */
    if (rc == -1) p->state = PREREQ_EXPIRED;
    if (rc) return;
    Bulkwrite__Internal__V1__JobRecord *rec = bulkwrite__internal__v1__job_record__unpack(NULL, len, raw);
    free(raw);
    if (!rec) return;
    bw_jobs_named_t named;
    int is_named = rec->job && strcmp(rec->job, p->id) == 0 && bw_jobs_named(proxy.jobs, p->id, &named) == 0;
    char *record_id = rec->job_id; /* bw_jobs_status points it at p->id */
    bw_jobs_status(proxy.conf, rec, p->id, proxy.shards, 1, is_named ? &named : NULL, &p->st);
    rec->job_id = record_id;
    bulkwrite__internal__v1__job_record__free_unpacked(rec, NULL);
    p->state = PREREQ_READ;
}

static prereq_t *prereq_get(prereqs_t *ps, const char *id) {
    for (size_t i = 0; i < ps->n; i++)
        if (strcmp(ps->p[i].id, id) == 0) return &ps->p[i];
    if (ps->n == ps->cap) {
        ps->cap = ps->cap ? ps->cap * 2 : 8;
        if (!(ps->p = realloc(ps->p, ps->cap * sizeof(*ps->p)))) abort();
    }
    prereq_t *p = &ps->p[ps->n++];
    memset(p, 0, sizeof(*p));
    snprintf(p->id, sizeof(p->id), "%s", id);
    prereq_read(p);
    return p;
}

static void prereqs_free(prereqs_t *ps) {
    for (size_t i = 0; i < ps->n; i++)
        if (ps->p[i].state == PREREQ_READ) bw_jobs_status_free(&ps->p[i].st);
    free(ps->p);
}

/* 1 when every prerequisite of the held record is finished on `shard` (-1: complete everywhere). */
static int prereqs_done(prereqs_t *ps, const bw_timer_t *h, int shard) {
    for (size_t i = 0; i < h->n_after; i++) {
        prereq_t *p = prereq_get(ps, h->after[i]);
        if (p->state == PREREQ_UNKNOWN || (p->state == PREREQ_READ && !bw_jobs_done_on(&p->st, shard))) return 0;
    }
    return 1;
}

/* The id of a cancelled prerequisite of the held record, or NULL. Every one is looked at,
 * whether the record is due or not: the waiting job is cancelled at once. */
static const char *prereq_cancelled(prereqs_t *ps, const bw_timer_t *h) {
    for (size_t i = 0; i < h->n_after; i++) {
        prereq_t *p = prereq_get(ps, h->after[i]);
        if (p->state == PREREQ_READ && p->st.cancelled_at_ms) return p->id;
    }
    return NULL;
}

/* A record's part in a turn. */
typedef struct {
    const bw_timer_t *h;
    Bulkwrite__Internal__V1__JobRecord *rec; /* unpacked when it is released, dropped or rewritten */
    int lane;
    size_t first, count;           /* its messages in its lane's set */
    int drop;                      /* its job was cancelled: written without its held batches */
    int stale;                     /* written again even if nothing goes: retention, the embedded bound */
} pick_t;

/* One lane's messages of a turn; message i is batch batch[i] of picks[pick[i]]. */
typedef struct {
    bw_batch_set_t set;
    const char **keys;
    size_t *pick, *batch;
    size_t cap;
} lane_out_t;

static bw_batch_msg_t *lane_add(lane_out_t *lo, const char *key, size_t pick, size_t batch) {
    if (lo->set.msg_cnt == lo->cap) {
        lo->cap = lo->cap ? lo->cap * 2 : 256;
        if (!(lo->set.msgs = realloc(lo->set.msgs, lo->cap * sizeof(*lo->set.msgs))) ||
            !(lo->keys = realloc(lo->keys, lo->cap * sizeof(*lo->keys))) ||
            !(lo->pick = realloc(lo->pick, lo->cap * sizeof(*lo->pick))) ||
            !(lo->batch = realloc(lo->batch, lo->cap * sizeof(*lo->batch))))
            abort();
    }
    size_t i = lo->set.msg_cnt++;
    lo->keys[i] = key;
    lo->pick[i] = pick;
    lo->batch[i] = batch;
    memset(&lo->set.msgs[i], 0, sizeof(lo->set.msgs[i]));
    return &lo->set.msgs[i];
}

/* What a turn did, for its log line and the metrics. */
typedef struct {
    size_t released, records, emptied, waiting, dropped, rewritten, not_written;
    size_t shards;           /* shards released into */
    int64_t worst_late_ms;   /* the latest record's lateness */
} turn_sum_t;

/* Adds a turn's work to the summary and says it in one line once a second has passed
 * since the last (or at once, when `now`): a delay queue at 10,000 timers a second logs
 * one line a second, not one per job. */
static void summarize(const turn_sum_t *t, int now) {
    static turn_sum_t acc;
    static int64_t said_us, turns;
    acc.released += t->released;
    acc.records += t->records;
    acc.emptied += t->emptied;
    acc.dropped += t->dropped;
    acc.rewritten += t->rewritten;
    acc.not_written += t->not_written;
    acc.waiting = t->waiting; /* as of the last turn */
    acc.shards = t->shards > acc.shards ? t->shards : acc.shards;
    if (t->worst_late_ms > acc.worst_late_ms) acc.worst_late_ms = t->worst_late_ms;
    turns++;
    int64_t at = bw_now_us();
    if (!now && at - said_us < 1000000) return;
    if (acc.released || acc.dropped || acc.not_written)
        bw_log(BW_LOG_INFO, COMPONENT, -1, NULL,
               "released %zu held batches of %zu job records in %" PRId64 " turns over %.1f s (%zu hold nothing "
               "now; at most %zu shards a turn; the latest %.3f s after its time); %zu due wait%s%s%s",
               acc.released, acc.records, turns, said_us ? (double)(at - said_us) / 1e6 : 0.0, acc.emptied, acc.shards,
               (double)acc.worst_late_ms / 1000, acc.waiting, acc.waiting == 1 ? "s" : "",
               acc.dropped ? "; cancelled jobs' records dropped their held batches" : "",
               acc.not_written ? "; some records not written: tried again" : "");
    if (acc.rewritten)
        bw_log(BW_LOG_DEBUG, COMPONENT, -1, NULL, "%zu held job records written again to stay in the jobs topic",
               acc.rewritten);
    memset(&acc, 0, sizeof(acc));
    turns = 0;
    said_us = at;
}

/* Decides which of the held batches of pick p go now, into its lane's set: a shard's
 * batches in part order, each through its shard's backlog admission; a batch whose
 * shard waits (a prerequisite not finished there, an earlier batch held back, the
 * backlog full: `refused`, shared by the turn's records) holds back its shard's later
 * ones. waits: shard_count bytes, all 0, left so. */
static void pick_batches(pick_t *p, size_t pi, prereqs_t *ps, lane_out_t *lo, uint8_t *refused, uint8_t *waits) {
    const Bulkwrite__Internal__V1__JobRecord *rec = p->rec;
    size_t shards = (size_t)proxy.conf->shard_count;
    p->first = lo->set.msg_cnt;
    for (size_t k = 0; k < rec->n_held; k++) {
        const Bulkwrite__Internal__V1__HeldBatch *h = rec->held[k];
        if (h->shard >= shards) continue; /* a record from another layout: never released */
        uint8_t *slot_refused = &refused[bw_config_slot(proxy.conf, p->lane, (int)h->shard)];
        if (waits[h->shard] || *slot_refused || !prereqs_done(ps, p->h, (int)h->shard)) {
            waits[h->shard] = 1; /* a shard's later batches wait for its earlier ones */
            continue;
        }
        bw_batch_msg_t *m = lane_add(lo, p->h->id, pi, k);
        m->shard = (int32_t)h->shard;
        m->type_name = h->object_type;
        snprintf(m->op_header, sizeof(m->op_header), "%u", h->op % 10);
        snprintf(m->rows_header, sizeof(m->rows_header), "%u", h->rows);
        m->op_cnt = h->rows;
        if (!(m->payload = malloc(h->payload.len + 1))) abort();
        memcpy(m->payload, h->payload.data, h->payload.len);
        m->len = h->payload.len;
        if (!bw_backlog_admit(proxy.backlog, bw_config_slot(proxy.conf, p->lane, m->shard), bw_producers_message_bytes(m),
                              bw_now_us(), NULL)) {
            waits[h->shard] = *slot_refused = 1;
            free(m->payload);
            lo->set.msg_cnt--;
        }
    }
    p->count = lo->set.msg_cnt - p->first;
    for (size_t k = 0; k < rec->n_held; k++)
        if (rec->held[k]->shard < shards) waits[rec->held[k]->shard] = 0;
}

/* The record p written again: what Kafka took (errs, offsets of its lane's messages)
 * leaves `held` for `accepted_parts` and `shards`; a cancelled job's record keeps none.
 * Packed into *out (malloc'd); how many of its batches Kafka took; *empty: it holds
 * none now. */
static size_t pick_record(const pick_t *p, const lane_out_t *lo, const rd_kafka_resp_err_t *errs,
                          const int64_t *offsets, bw_arena_t *arena, void **out, size_t *out_len, int *empty) {
    const Bulkwrite__Internal__V1__JobRecord *rec = p->rec;
    Bulkwrite__Internal__V1__JobRecord o = *rec;
    size_t n = rec->n_held, released = 0;
    uint8_t *out_of_held = bw_arena_alloc(arena, n + 1);
    memset(out_of_held, 0, n + 1);
    o.accepted_parts = bw_arena_alloc(arena, (rec->n_accepted_parts + p->count + 1) * sizeof(uint32_t));
    if (rec->n_accepted_parts) memcpy(o.accepted_parts, rec->accepted_parts, rec->n_accepted_parts * sizeof(uint32_t));
    Bulkwrite__Internal__V1__ShardOps *so = bw_arena_alloc(arena, (rec->n_shards + 1) * sizeof(*so));
    o.shards = bw_arena_alloc(arena, (rec->n_shards + 1) * sizeof(*o.shards));
    for (size_t i = 0; i < rec->n_shards; i++) so[i] = *rec->shards[i], o.shards[i] = &so[i];
    for (size_t i = p->first; i < p->first + p->count; i++) {
        if (errs[i]) continue;
        const Bulkwrite__Internal__V1__HeldBatch *h = rec->held[lo->batch[i]];
        out_of_held[lo->batch[i]] = 1;
        o.accepted_parts[o.n_accepted_parts++] = h->part;
        released++;
        for (size_t s = 0; s < o.n_shards; s++) {
            if (so[s].shard != h->shard) continue;
            int first = so[s].held_ops == so[s].ops; /* nothing of this shard in Kafka before */
            so[s].held_ops -= h->rows < so[s].held_ops ? h->rows : so[s].held_ops;
            if (first || offsets[i] < so[s].first_offset) so[s].first_offset = offsets[i];
            if (first || offsets[i] > so[s].last_offset) so[s].last_offset = offsets[i];
        }
    }
    o.held = bw_arena_alloc(arena, (n + 1) * sizeof(*o.held));
    o.n_held = 0;
    for (size_t k = 0; !p->drop && k < n; k++)
        if (!out_of_held[k]) o.held[o.n_held++] = rec->held[k];
    if (released && !o.n_held) o.released_at_ms = bw_wall_ms();
    o.written_at_ms = bw_wall_ms();
    *empty = !o.n_held;
    *out_len = bulkwrite__internal__v1__job_record__get_packed_size(&o);
    if (!(*out = malloc(*out_len + 1))) abort();
    bulkwrite__internal__v1__job_record__pack(&o, *out);
    return released;
}

/* The records a turn changed, written to the jobs topic together and put in the index
 * (which leaves those that hold nothing now out of the delay queue). */
static void write_records(pick_t *picks, size_t n, lane_out_t *lanes, rd_kafka_resp_err_t *const *errs,
                          int64_t *const *offsets, bw_arena_t *arena, turn_sum_t *sum) {
    const char **keys = bw_arena_alloc(arena, (n + 1) * sizeof(*keys));
    size_t *klens = bw_arena_alloc(arena, (n + 1) * sizeof(*klens)), *vlens = bw_arena_alloc(arena, (n + 1) * sizeof(*vlens));
    void **vals = bw_arena_alloc(arena, (n + 1) * sizeof(*vals));
    size_t *which = bw_arena_alloc(arena, (n + 1) * sizeof(*which)), cnt = 0;
    uint8_t *empty = bw_arena_alloc(arena, n + 1);
    bw_metrics_change_t *late = bw_arena_alloc(arena, (n + 1) * sizeof(*late));
    size_t late_cnt = 0;
    int64_t now = bw_wall_ms();
    for (size_t i = 0; i < n; i++) {
        pick_t *p = &picks[i];
        if (!p->rec) continue;
        int emptied;
        size_t released =
            pick_record(p, &lanes[p->lane], errs[p->lane], offsets[p->lane], arena, &vals[cnt], &vlens[cnt], &emptied);
        if (!released && !p->drop && !p->stale) {
            free(vals[cnt]);
            continue;
        }
        if (released) {
            sum->released += released;
            sum->records++;
            int64_t since = p->h->not_before_ms > p->h->created_at_ms ? p->h->not_before_ms : p->h->created_at_ms;
            int64_t late_ms = now - since > 0 ? now - since : 0;
            if (late_ms > sum->worst_late_ms) sum->worst_late_ms = late_ms;
            late[late_cnt++] = (bw_metrics_change_t){BW_PM_HELD_RELEASE_LATENESS, 0, 0, BW_METRICS_OBSERVE, (double)late_ms * 1000};
        }
        sum->dropped += p->drop;
        sum->rewritten += !released && !p->drop;
        keys[cnt] = p->h->id;
        klens[cnt] = 32;
        empty[cnt] = (uint8_t)emptied;
        which[cnt++] = i;
    }
    if (late_cnt) bw_metrics_change(proxy.metrics, late, late_cnt);
    if (sum->released) bw_metrics_add(proxy.metrics, BW_PM_HELD_BATCHES_RELEASED, 0, 0, (double)sum->released);
    rd_kafka_resp_err_t *werrs = bw_arena_alloc(arena, (cnt + 1) * sizeof(*werrs));
    memset(werrs, 0, (cnt + 1) * sizeof(*werrs));
    if (cnt) bw_producers_send_records(proxy.conf->jobs_topic, cnt, keys, klens, vals, vlens, werrs);
    for (size_t c = 0; c < cnt; c++) {
        pick_t *p = &picks[which[c]];
        if (werrs[c]) {
            sum->not_written++; /* its batches go out again next turn: applied once */
            if (sum->not_written == 1)
                bw_log_part(BW_LOG_WARN, COMPONENT, -1, p->h->job, named_part(p->h),
                            "held job record not written (%s): tried again", rd_kafka_err2str(werrs[c]));
        } else {
            if (p->drop) /* one line per job: cancels are operators' acts, not a flood */
                bw_log_part(BW_LOG_INFO, COMPONENT, -1, p->h->job, named_part(p->h),
                            "job cancelled: its %zu held batches are dropped", p->rec->n_held);
            bw_jobs_put(proxy.jobs, p->h->id, vals[c], vlens[c]);
            sum->emptied += empty[c];
        }
        free(vals[c]);
    }
}

static int job_cancelled(void *ud, const char *job) {
    (void)ud;
    return bw_shard_table_job_cancelled(proxy.shards, job);
}

/* The shards this proxy releases, into mine (a byte per shard). Each shard has one owner
 * among the live proxies (their presence, fleet.h: fresh, agreeing, and releasing: a
 * proxy still reading the topics after its start owns nothing yet): the one that
 * ranks highest for it (rendezvous hashing, so a proxy that comes or goes moves only its
 * own shards). A proxy killed -9 delays its shards' timers until its presence is
 * OWNER_FRESH_MS old (it writes one every 2 s) and the others have worked the owners out
 * again (OWNERS_EVERY_MS): 4 to 6 s. One owner per shard keeps ops on one object in
 * order (an object lives on one shard). Without presence (none read yet), every shard.
 * Any proxy releases a record TAKEOVER_MS late, whoever owns its shard. */
static void own_shards(uint8_t *mine, int64_t now_ms) {
    const char *self = proxy.fleet.instance;
    size_t shards = (size_t)proxy.conf->shard_count;
    Bulkwrite__Internal__V1__FleetMember **members;
    size_t n = bw_shard_table_members(proxy.shards, &members), live = 0;
    const char **names = malloc((n + 1) * sizeof(*names));
    if (!names) abort();
    names[live++] = self;
    for (size_t i = 0; i < n; i++) {
        const Bulkwrite__Internal__V1__FleetMember *m = members[i];
        if (m->role && !strcmp(m->role, "proxy") && m->instance && strcmp(m->instance, self) && m->agrees &&
            m->releases && now_ms - m->seen_at_ms <= OWNER_FRESH_MS)
            names[live++] = m->instance;
    }
    for (size_t s = 0; s < shards; s++) {
        uint64_t best = 0;
        size_t owner = 0;
        for (size_t i = 0; i < live; i++) {
            uint64_t h = 1469598103934665603u;
            for (const char *c = names[i]; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211u;
            for (int k = 0; k < 4; k++) h = (h ^ ((s >> (8 * k)) & 0xff)) * 1099511628211u;
            h ^= h >> 31;
            if (i == 0 || h > best) best = h, owner = i;
        }
        mine[s] = !self[0] || owner == 0;
    }
    bw_shard_table_members_free(members, n);
    free(names);
}

/* One turn: the due records, released as far as they may go; the records not due yet
 * with prerequisites, cancelled at once when one of those is; and, when refresh is set,
 * the records not due yet that must be written again (to stay in the topic, or without
 * their batches: their job was cancelled). Returns
 * how many due records it looked at. */
static size_t release_turn(uint8_t *refused, uint8_t *waits, const uint8_t *mine, int refresh) {
    int64_t now = bw_wall_ms();
    bw_timers_t *timers = bw_jobs_timers(proxy.jobs);
    bw_timer_t *due, *stale = NULL, *deps = NULL;
    size_t shards = (size_t)proxy.conf->shard_count;
    size_t n_due = bw_timers_due(timers, now, TURN_MAX, mine, shards, now - TAKEOVER_MS, OWNERS_EVERY_MS, &due);
    size_t n_stale = 0, n_deps = refresh ? bw_timers_dependents(timers, &deps) : 0;
    int64_t refresh_after = proxy.conf->jobs_retention_ms / 4;
    /* the embedded Kafka drops a partition's oldest data past 5 MiB (or 100,000 message
     * sets): a held record a quarter of that behind the topic's end is written again */
    uint64_t bound_bytes = proxy.embedded ? BW_KAFKA_EMBEDDED_PARTITION_BYTES / 4 : 0;
    uint64_t bound_records = proxy.embedded ? BW_KAFKA_EMBEDDED_PARTITION_SETS / 4 : 0;
    if (refresh)
        n_stale = bw_timers_stale(timers, now - refresh_after, bound_bytes, bound_records, job_cancelled, NULL, mine,
                                  shards, TURN_MAX, &stale);
    size_t n = n_due + n_stale + n_deps;
    bw_arena_t arena;
    bw_arena_init(&arena, 1 << 16);
    pick_t *picks = bw_arena_alloc(&arena, (n + 1) * sizeof(*picks));
    memset(picks, 0, (n + 1) * sizeof(*picks));
    lane_out_t lanes[BW_LANES_MAX];
    memset(lanes, 0, sizeof(lanes));
    memset(refused, 0, (size_t)proxy.conf->shard_count * BW_LANES_MAX);
    prereqs_t ps = {0};
    turn_sum_t sum = {0};
    for (size_t i = 0; i < n && atomic_load(&release_run); i++) {
        pick_t *p = &picks[i];
        p->h = i < n_due ? &due[i] : i < n_due + n_stale ? &stale[i - n_due] : &deps[i - n_due - n_stale];
        const bw_timer_t *h = p->h;
        int only_cancel = i >= n_due + n_stale; /* a dependent not due: only its prerequisites' cancels */
        p->drop = !only_cancel && bw_shard_table_job_cancelled(proxy.shards, h->job);
        p->stale = h->written_at_ms <= now - refresh_after || (bound_bytes && h->behind_bytes > bound_bytes) ||
                   (bound_records && h->behind_records > bound_records);
        const char *cancelled_by = p->drop ? NULL : prereq_cancelled(&ps, h);
        if (cancelled_by) {
            char why[160];
            snprintf(why, sizeof(why), "prerequisite job %s was cancelled", cancelled_by);
            int already;
            if (bw_change_cancel(h->job, "(bulkwrite)", "proxy", why, &already) == 0 && !already)
                bw_log(BW_LOG_INFO, COMPONENT, -1, h->job, "job cancelled: %s", why);
            continue; /* dropped next turn, as the cancel is read */
        }
        if (only_cancel) continue;
        if (i < n_due && !h->owned) { /* another proxy's, on several shards: later records on them wait for it */
            Bulkwrite__Internal__V1__JobRecord *r = bulkwrite__internal__v1__job_record__unpack(NULL, h->len, h->rec);
            int lane = r ? bw_config_lane(proxy.conf, r->lane && r->lane[0] ? r->lane : "default") : -1;
            for (size_t k = 0; lane >= 0 && k < r->n_held; k++)
                if (r->held[k]->shard < (uint32_t)proxy.conf->shard_count)
                    refused[bw_config_slot(proxy.conf, lane, (int)r->held[k]->shard)] = 1;
            if (r) bulkwrite__internal__v1__job_record__free_unpacked(r, NULL);
            continue;
        }
        /* a prerequisite not complete anywhere holds every shard: no need to read the record */
        int maybe = i < n_due && !p->drop && !h->part_before_held && prereqs_done(&ps, h, -1);
        if (!maybe && !p->drop && !p->stale) {
            sum.waiting++;
            continue;
        }
        if (!(p->rec = bulkwrite__internal__v1__job_record__unpack(NULL, h->len, h->rec))) continue;
        p->lane = bw_config_lane(proxy.conf, p->rec->lane && p->rec->lane[0] ? p->rec->lane : "default");
        if (p->lane < 0) {
            bw_log_part(BW_LOG_ERROR, COMPONENT, -1, h->job, named_part(h), "held batches of lane \"%s\", which the "
                        "configuration no longer has: kept until it has", p->rec->lane);
            p->lane = 0;
            maybe = 0;
        }
        if (maybe) pick_batches(p, i, &ps, &lanes[p->lane], refused, waits);
        if (maybe && p->count < p->rec->n_held) sum.waiting++;
    }
    /* every lane's batches produced at once, their acks awaited together */
    rd_kafka_resp_err_t *errs[BW_LANES_MAX] = {0};
    int64_t *offsets[BW_LANES_MAX] = {0};
    for (int l = 0; l < BW_LANES_MAX; l++) {
        lane_out_t *lo = &lanes[l];
        size_t cnt = lo->set.msg_cnt;
        errs[l] = bw_arena_alloc(&arena, (cnt + 1) * sizeof(**errs));
        offsets[l] = bw_arena_alloc(&arena, (cnt + 1) * sizeof(**offsets));
        memset(errs[l], 0, (cnt + 1) * sizeof(**errs));
        if (!cnt) continue;
        bw_msg_fate_t *fate = bw_arena_alloc(&arena, cnt * sizeof(*fate));
        for (size_t i = 0; i < cnt; i++) fate[i] = BW_MSG_PRODUCE;
        bw_producers_send_batches(&lo->set, l, fate, NULL, lo->keys, errs[l], offsets[l], &arena);
        uint8_t *seen = waits; /* borrowed: shards released into */
        for (size_t i = 0; i < cnt; i++)
            if (!errs[l][i] && !seen[lo->set.msgs[i].shard]) seen[lo->set.msgs[i].shard] = 1, sum.shards++;
        memset(seen, 0, (size_t)proxy.conf->shard_count);
    }
    write_records(picks, n, lanes, errs, offsets, &arena, &sum);
    summarize(&sum, 0);
    /* due records that could not go (prerequisites, an earlier part, a full backlog, a
     * cancel just made) are looked at again in a second, out of the due ones' way */
    const char **parked = bw_arena_alloc(&arena, (n_due + 1) * sizeof(*parked));
    size_t n_parked = 0;
    for (size_t i = 0; i < n_due; i++)
        if (picks[i].h && picks[i].h->owned && !picks[i].drop && !picks[i].count) parked[n_parked++] = picks[i].h->id;
    if (n_parked) bw_timers_park(timers, parked, n_parked, bw_wall_ms() + IDLE_MS);
    for (size_t i = 0; i < n; i++)
        if (picks[i].rec) bulkwrite__internal__v1__job_record__free_unpacked(picks[i].rec, NULL);
    for (int l = 0; l < BW_LANES_MAX; l++) {
        free(lanes[l].set.msgs);
        free(lanes[l].keys);
        free(lanes[l].pick);
        free(lanes[l].batch);
    }
    prereqs_free(&ps);
    bw_timers_copies_free(due, n_due);
    bw_timers_copies_free(stale, n_stale);
    bw_timers_copies_free(deps, n_deps);
    bw_arena_destroy(&arena);
    return n_due;
}

/* The jobs and control topics read to their end: before that, a held record or a cancel
 * written before this proxy started may not be known yet, and a cancelled job's batches
 * could go out again. */
static int caught_up(void) { return bw_jobs_caught_up(proxy.jobs) && bw_shard_table_sync(proxy.shards, 1000); }

static void *release_loop(void *arg) {
    (void)arg;
    uint8_t *refused = malloc((size_t)proxy.conf->shard_count * BW_LANES_MAX);
    uint8_t *waits = calloc((size_t)proxy.conf->shard_count, 1);
    if (!refused || !waits) abort();
    bw_timers_t *timers = bw_jobs_timers(proxy.jobs);
    int64_t waiting_since = bw_now_us(), warned = 0;
    while (atomic_load(&release_run) && !caught_up()) {
        if (!warned && bw_now_us() - waiting_since > 10000000) {
            bw_log(BW_LOG_WARN, COMPONENT, -1, NULL, "the jobs and control topics are not read to their end after 10 s: "
                   "no held batch is released until they are");
            warned = 1;
        }
        usleep(100000);
    }
    uint8_t *mine = malloc((size_t)proxy.conf->shard_count + 1);
    if (!mine) abort();
    atomic_store(&release_running, 1);
    int64_t refreshed_ms = 0, owners_ms = 0;
    while (atomic_load(&release_run)) {
        int64_t now = bw_wall_ms(), turn_ms = now;
        int refresh = now - refreshed_ms >= REFRESH_EVERY_MS;
        if (refresh) refreshed_ms = now;
        if (now - owners_ms >= OWNERS_EVERY_MS) {
            own_shards(mine, now);
            owners_ms = now;
        }
        if (release_turn(refused, waits, mine, refresh) >= TURN_MAX) continue; /* more are due */
        /* asleep until the next record is due (at least TURN_SPACING_MS on: those due
         * meanwhile go out together), one arrives due sooner, or a second passed (records
         * waiting for prerequisites, a full backlog or another proxy are looked at again) */
        int64_t next = bw_timers_next_due(timers), soonest = turn_ms + TURN_SPACING_MS, idle = bw_wall_ms() + IDLE_MS;
        if (next < soonest) next = soonest;
        if (atomic_load(&release_run)) bw_timers_wait(timers, next < idle ? next : idle);
    }
    free(mine);
    atomic_store(&release_running, 0);
    summarize(&(turn_sum_t){0}, 1);
    free(waits);
    free(refused);
    return NULL;
}

int bw_release_running(void) { return atomic_load(&release_running); }

void bw_release_start(void) {
    atomic_store(&release_run, 1);
    if (pthread_create(&release_thread, NULL, release_loop, NULL) == 0) release_started = 1;
    else bw_log(BW_LOG_ERROR, COMPONENT, -1, NULL, "the release thread did not start: held jobs wait");
}

void bw_release_stop(void) {
    atomic_store(&release_run, 0);
    if (!release_started) return; /* a startup that failed before it: no jobs index either */
    bw_timers_wake(bw_jobs_timers(proxy.jobs));
    pthread_join(release_thread, NULL);
    release_started = 0;
}

int bw_release_would_cycle(const char *id, char *const *after, size_t n_after) {
    return bw_timers_would_cycle(bw_jobs_timers(proxy.jobs), id, after, n_after);
}
