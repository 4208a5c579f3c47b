/* release.c — scheduled and dependent batches: into their shards when they are due.
 *
 * A request with a not_before still ahead, or with prerequisites (after), is held whole
 * in its job record in the jobs topic (submit.c): its batches are durable there, and the
 * shards' partitions carry nothing of it, so other work on those shards goes on. Every
 * proxy runs this loop about once a second over the held records its index knows
 * (bw_jobs_held_list). A held batch is released, as the batcher made it and under its
 * own (job, part) name, once:
 *  - not_before has come, and
 *  - on its shard, every prerequisite is finished (bw_jobs_done_on): all its ops in
 *    (sealed, for a named job; no resend awaited, for a request) and nothing of it
 *    pending, held or lost on that shard. A prerequisite whose record the jobs topic no
 *    longer has (its retention) counts as finished.
 * A named job's part goes only once the part before it holds nothing (submit.c holds a
 * part that arrives while an earlier one of its job is held, whatever its not_before).
 * Batches are released in part order per shard, through the shard's backlog admission,
 * and the record is then written again without them (their offsets in `shards`, their
 * parts in `accepted_parts`). No lock: two proxies that release the same batch produce it
 * twice, and the shard applies its (job, part) once (docs/reliability.md).
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
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "proxy.h"

#define RELEASE_INTERVAL_MS 1000

static pthread_t release_thread;
static atomic_int release_run;
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
    Bulkwrite__V1__JobRecord *rec = bulkwrite__v1__job_record__unpack(NULL, len, raw);
    free(raw);
    if (!rec) return;
    bw_jobs_named_t named;
    int is_named = rec->job && strcmp(rec->job, p->id) == 0 && bw_jobs_named(proxy.jobs, p->id, &named) == 0;
    char *record_id = rec->job_id; /* bw_jobs_status points it at p->id */
    bw_jobs_status(proxy.conf, rec, p->id, proxy.shards, 1, is_named ? &named : NULL, &p->st);
    rec->job_id = record_id;
    bulkwrite__v1__job_record__free_unpacked(rec, NULL);
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
static int prereqs_done(prereqs_t *ps, const bw_jobs_held_t *h, int shard) {
    for (size_t i = 0; i < h->n_after; i++) {
        prereq_t *p = prereq_get(ps, h->after[i]);
        if (p->state == PREREQ_UNKNOWN || (p->state == PREREQ_READ && !bw_jobs_done_on(&p->st, shard))) return 0;
    }
    return 1;
}

/* The id of a cancelled prerequisite of the held record, or NULL. Every one is looked at,
 * whether the record is due or not: the waiting job is cancelled at once. */
static const char *prereq_cancelled(prereqs_t *ps, const bw_jobs_held_t *h) {
    for (size_t i = 0; i < h->n_after; i++) {
        prereq_t *p = prereq_get(ps, h->after[i]);
        if (p->state == PREREQ_READ && p->st.cancelled_at_ms) return p->id;
    }
    return NULL;
}

/* Writes `out` (a held record changed by the caller) to the jobs topic and the index. */
static int write_record(const char *id, Bulkwrite__V1__JobRecord *out) {
    out->written_at_ms = bw_wall_ms();
    size_t len = bulkwrite__v1__job_record__get_packed_size(out);
    void *buf = malloc(len + 1);
    if (!buf) abort();
    bulkwrite__v1__job_record__pack(out, buf);
    size_t key_len = 32;
    rd_kafka_resp_err_t e = bw_producers_send_records(proxy.conf->jobs_topic, 1, &id, &key_len, &buf, &len, NULL);
    if (e) bw_log(BW_LOG_WARN, COMPONENT, -1, id, "held job record not written (%s): tried again", rd_kafka_err2str(e));
    else bw_jobs_put(proxy.jobs, id, buf, len);
    free(buf);
    return e ? -1 : 0;
}

/* Produces the record's releasable batches (go[k] set) in part order, each shard's until
 * its backlog refuses one, and writes the record again without those Kafka took.
 * refused (slot = lane x shards + shard: the turn's, shared by every record) marks the
 * slots whose backlog refused a batch this turn: later records wait behind it too.
 * Returns how many batches Kafka took (0: the record was not written); *emptied is set
 * when the record holds none now. */
static size_t release_batches(Bulkwrite__V1__JobRecord *rec, const uint8_t *go, uint8_t *refused, int *emptied) {
    int lane = bw_config_lane(proxy.conf, rec->lane && rec->lane[0] ? rec->lane : "default");
    if (lane < 0) {
        bw_log(BW_LOG_ERROR, COMPONENT, -1, rec->job_id, "held batches of lane \"%s\", which the configuration no "
               "longer has: kept until it has", rec->lane);
        return 0;
    }
    bw_arena_t arena;
    bw_arena_init(&arena, 1 << 12);
    size_t n = rec->n_held, shards = (size_t)proxy.conf->shard_count;
    bw_batch_set_t set = {bw_arena_alloc(&arena, (n + 1) * sizeof(bw_batch_msg_t)), 0};
    bw_msg_fate_t *fate = bw_arena_alloc(&arena, (n + 1) * sizeof(*fate));
    size_t *from = bw_arena_alloc(&arena, (n + 1) * sizeof(*from)); /* message -> rec->held index */
    uint8_t *waits = bw_arena_alloc(&arena, shards); /* this record's shards with a batch held back */
    memset(waits, 0, shards);
    for (size_t k = 0; k < n; k++) {
        const Bulkwrite__V1__HeldBatch *h = rec->held[k];
        if (h->shard >= shards) continue; /* a record from another layout: never released */
        uint8_t *slot_refused = &refused[bw_config_slot(proxy.conf, lane, (int)h->shard)];
        if (!go[k] || waits[h->shard] || *slot_refused) {
            waits[h->shard] = 1; /* a shard's later batches wait for its earlier ones */
            continue;
        }
        bw_batch_msg_t *m = &set.msgs[set.msg_cnt];
        memset(m, 0, sizeof(*m));
        m->shard = (int32_t)h->shard;
        m->type_name = h->object_type;
        snprintf(m->op_header, sizeof(m->op_header), "%u", h->op % 10);
        snprintf(m->rows_header, sizeof(m->rows_header), "%u", h->rows);
        m->op_cnt = h->rows;
        if (!(m->payload = malloc(h->payload.len + 1))) abort();
        memcpy(m->payload, h->payload.data, h->payload.len);
        m->len = h->payload.len;
        if (!bw_backlog_admit(proxy.backlog, bw_config_slot(proxy.conf, lane, m->shard), bw_producers_message_bytes(m),
                              bw_now_us(), NULL)) {
            waits[h->shard] = *slot_refused = 1;
            free(m->payload);
            continue;
        }
        fate[set.msg_cnt] = BW_MSG_PRODUCE;
        from[set.msg_cnt++] = k;
    }
    if (!set.msg_cnt) {
        bw_arena_destroy(&arena);
        return 0;
    }
    rd_kafka_resp_err_t *errs = bw_arena_alloc(&arena, set.msg_cnt * sizeof(*errs));
    int64_t *offsets = bw_arena_alloc(&arena, set.msg_cnt * sizeof(*offsets));
    memset(errs, 0, set.msg_cnt * sizeof(*errs));
    bw_producers_send_batches(&set, lane, fate, rec->job_id, errs, offsets, &arena);
    /* the record again: what Kafka took leaves `held` for `accepted_parts` and `shards` */
    uint8_t *out_of_held = bw_arena_alloc(&arena, n + 1);
    memset(out_of_held, 0, n + 1);
    Bulkwrite__V1__JobRecord out = *rec;
    out.accepted_parts = bw_arena_alloc(&arena, (rec->n_accepted_parts + set.msg_cnt) * sizeof(uint32_t));
    if (rec->n_accepted_parts) memcpy(out.accepted_parts, rec->accepted_parts, rec->n_accepted_parts * sizeof(uint32_t));
    Bulkwrite__V1__ShardOps *so = bw_arena_alloc(&arena, (rec->n_shards + 1) * sizeof(*so));
    out.shards = bw_arena_alloc(&arena, (rec->n_shards + 1) * sizeof(*out.shards));
    for (size_t i = 0; i < rec->n_shards; i++) so[i] = *rec->shards[i], out.shards[i] = &so[i];
    size_t released = 0;
    for (size_t i = 0; i < set.msg_cnt; i++) {
        if (errs[i]) continue;
        const Bulkwrite__V1__HeldBatch *h = rec->held[from[i]];
        out_of_held[from[i]] = 1;
        out.accepted_parts[out.n_accepted_parts++] = h->part;
        released++;
        for (size_t s = 0; s < out.n_shards; s++) {
            if (so[s].shard != h->shard) continue;
            int first = so[s].held_ops == so[s].ops; /* nothing of this shard in Kafka before */
            so[s].held_ops -= h->rows < so[s].held_ops ? h->rows : so[s].held_ops;
            if (first || offsets[i] < so[s].first_offset) so[s].first_offset = offsets[i];
            if (first || offsets[i] > so[s].last_offset) so[s].last_offset = offsets[i];
        }
    }
    out.held = bw_arena_alloc(&arena, (n + 1) * sizeof(*out.held));
    out.n_held = 0;
    for (size_t k = 0; k < n; k++)
        if (!out_of_held[k]) out.held[out.n_held++] = rec->held[k];
    if (!out.n_held) out.released_at_ms = bw_wall_ms();
    if (released) bw_metrics_add(proxy.metrics, BW_PM_HELD_BATCHES_RELEASED, 0, 0, released);
    if (released && write_record(rec->job_id, &out) == 0 && !out.n_held) *emptied = 1;
    if (released && !out.n_held)
        bw_log(BW_LOG_INFO, COMPONENT, -1, rec->job_id, "released %zu held batches into their shards%s", released,
               out.n_held ? "" : ": none is held now");
    bw_arena_destroy(&arena);
    return released;
}

/* A cancelled job's held batches will never go out: its record is written again without
 * them (its shards' held_ops stay, so the status counts those ops cancelled). */
static void drop_held(const char *id) {
    void *raw;
    size_t len;
    if (bw_jobs_lookup(proxy.jobs, id, &raw, &len) && bw_jobs_record(proxy.jobs, id, &raw, &len)) return;
    Bulkwrite__V1__JobRecord *rec = bulkwrite__v1__job_record__unpack(NULL, len, raw);
    free(raw);
    if (!rec) return;
    size_t n_held = rec->n_held;
    rec->n_held = 0;
    if (n_held && write_record(id, rec) == 0)
        bw_log(BW_LOG_INFO, COMPONENT, -1, id, "job cancelled: its %zu held batches are dropped", n_held);
    rec->n_held = n_held; /* freed with the record */
    bulkwrite__v1__job_record__free_unpacked(rec, NULL);
}

/* One held record: cancelled, not due, waiting for prerequisites or for an earlier part
 * of its job (behind), or (some of) it released; or written again to outlive the
 * topic's retention. 1 when it holds nothing now. */
static int release_one(const bw_jobs_held_t *h, int behind, prereqs_t *ps, int64_t now, uint8_t *refused) {
    if (bw_shard_table_job_cancelled(proxy.shards, h->job)) {
        drop_held(h->id);
        return 1;
    }
    int64_t refresh_after = proxy.conf->jobs_retention_ms / 4;
    /* the embedded Kafka drops a partition's oldest data past 5 MiB (or 100,000 message
     * sets): a held record a quarter of that behind the topic's end is written again */
    int pushed_out = proxy.embedded && (h->behind_bytes > BW_KAFKA_EMBEDDED_PARTITION_BYTES / 4 ||
                                        h->behind_records > BW_KAFKA_EMBEDDED_PARTITION_SETS / 4);
    if (pushed_out) refresh_after = 0;
    int due = h->not_before_ms <= now;
    const char *cancelled_by = prereq_cancelled(ps, h);
    if (cancelled_by) {
        char why[160];
        snprintf(why, sizeof(why), "prerequisite job %s was cancelled", cancelled_by);
        int already;
        if (bw_change_cancel(h->job, "(bulkwrite)", "proxy", why, &already) == 0 && !already)
            bw_log(BW_LOG_INFO, COMPONENT, -1, h->job, "job cancelled: %s", why);
        return 0;
    }
    /* a prerequisite not complete anywhere holds every shard: no need to read the record */
    int maybe = due && !behind && prereqs_done(ps, h, -1);
    if (!maybe && h->written_at_ms > now - refresh_after) return 0;
    void *raw;
    size_t len;
    if (bw_jobs_lookup(proxy.jobs, h->id, &raw, &len) && bw_jobs_record(proxy.jobs, h->id, &raw, &len)) return 0;
    Bulkwrite__V1__JobRecord *rec = bulkwrite__v1__job_record__unpack(NULL, len, raw);
    free(raw);
    if (!rec) return 0;
    uint8_t *go = calloc(rec->n_held + 1, 1);
    if (!go) abort();
    size_t cnt = 0;
    for (size_t k = 0; maybe && k < rec->n_held; k++)
        cnt += go[k] = rec->held[k]->shard < (uint32_t)proxy.conf->shard_count &&
                       prereqs_done(ps, h, (int)rec->held[k]->shard);
    /* kept past the retention whatever holds it: not due, prerequisites, a full backlog, a lane gone */
    int emptied = 0;
    if (!(cnt && release_batches(rec, go, refused, &emptied)) && rec->written_at_ms <= now - refresh_after)
        write_record(h->id, rec);
    free(go);
    bulkwrite__v1__job_record__free_unpacked(rec, NULL);
    return emptied;
}

/* Due first, then in the order they were accepted (a named job's parts by number): ops
 * on one object in two held requests go out in the order the client sent them. */
static int held_cmp(const void *a, const void *b) {
    const bw_jobs_held_t *x = a, *y = b;
    if (x->not_before_ms != y->not_before_ms) return x->not_before_ms < y->not_before_ms ? -1 : 1;
    if (x->created_at_ms != y->created_at_ms) return x->created_at_ms < y->created_at_ms ? -1 : 1;
    if (x->job_part != y->job_part) return x->job_part < y->job_part ? -1 : 1;
    return strcmp(x->id, y->id);
}

/* By job, then part: a named job's parts side by side, in part order. */
static int part_cmp(const void *a, const void *b) {
    const bw_jobs_held_t *x = *(const bw_jobs_held_t *const *)a, *y = *(const bw_jobs_held_t *const *)b;
    int c = strcmp(x->job, y->job);
    return c ? c : x->job_part < y->job_part ? -1 : x->job_part > y->job_part;
}

/* One turn over the held records. A named job's part goes out only once the part before
 * it (of those held) holds nothing: ops on one object in two parts keep their order,
 * whatever each part's not_before or arrival. A part after one still held waits for a
 * later turn. */
static void release_turn(bw_jobs_held_t *held, size_t n, uint8_t *refused) {
    qsort(held, n, sizeof(*held), held_cmp);
    const bw_jobs_held_t **by_part = malloc((n + 1) * sizeof(*by_part));
    size_t *before = malloc((n + 1) * sizeof(*before)); /* held index of the part before, or n */
    uint8_t *emptied = calloc(n + 1, 1);
    if (!by_part || !before || !emptied) abort();
    for (size_t i = 0; i < n; i++) by_part[i] = &held[i];
    qsort(by_part, n, sizeof(*by_part), part_cmp);
    for (size_t k = 0; k < n; k++)
        before[by_part[k] - held] = k && !strcmp(by_part[k - 1]->job, by_part[k]->job) ? (size_t)(by_part[k - 1] - held) : n;
    prereqs_t ps = {0};
    int64_t now = bw_wall_ms();
    memset(refused, 0, (size_t)proxy.conf->shard_count * BW_LANES_MAX);
    for (size_t i = 0; i < n && atomic_load(&release_run); i++)
        emptied[i] = (uint8_t)release_one(&held[i], before[i] < n && !emptied[before[i]], &ps, now, refused);
    prereqs_free(&ps);
    free(emptied);
    free(before);
    free(by_part);
}

/* The jobs and control topics read to their end: before that, a held record or a cancel
 * written before this proxy started may not be known yet, and a cancelled job's batches
 * could go out again. */
static int caught_up(void) { return bw_jobs_caught_up(proxy.jobs) && bw_shard_table_sync(proxy.shards, 1000); }

static void *release_loop(void *arg) {
    (void)arg;
    uint8_t *refused = malloc((size_t)proxy.conf->shard_count * BW_LANES_MAX);
    if (!refused) abort();
    int64_t waiting_since = bw_now_us(), warned = 0;
    while (atomic_load(&release_run) && !caught_up()) {
        if (!warned && bw_now_us() - waiting_since > 10000000) {
            bw_log(BW_LOG_WARN, COMPONENT, -1, NULL, "the jobs and control topics are not read to their end after 10 s: "
                   "no held batch is released until they are");
            warned = 1;
        }
        usleep(100000);
    }
    while (atomic_load(&release_run)) {
        bw_jobs_held_t *held;
        size_t n = bw_jobs_held_list(proxy.jobs, &held);
        release_turn(held, n, refused);
        free(held);
        for (int t = 0; t < RELEASE_INTERVAL_MS / 100 && atomic_load(&release_run); t++) usleep(100000);
    }
    free(refused);
    return NULL;
}

void bw_release_start(void) {
    atomic_store(&release_run, 1);
    if (pthread_create(&release_thread, NULL, release_loop, NULL) == 0) release_started = 1;
    else bw_log(BW_LOG_ERROR, COMPONENT, -1, NULL, "the release thread did not start: held jobs wait");
}

void bw_release_stop(void) {
    atomic_store(&release_run, 0);
    if (release_started) pthread_join(release_thread, NULL);
    release_started = 0;
}

int bw_release_would_cycle(const char *id, char *const *after, size_t n_after) {
    bw_jobs_held_t *held;
    size_t n = bw_jobs_held_list(proxy.jobs, &held);
    int cycle = bw_jobs_held_cycle(held, n, id, after, n_after);
    free(held);
    return cycle;
}
