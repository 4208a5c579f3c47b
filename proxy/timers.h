/* timers.h — the held records: scheduled and dependent batches waiting in their job's
 * record in the jobs topic, kept for the release loop (release.c) in the order they
 * come due. It is the proxy's delay queue.
 *
 * Every record the jobs index reads or puts (jobs.c) is noted here: one that holds
 * batches is kept whole (its packed bytes, never dropped: the jobs index is bounded and
 * evicts, a timer must not), one that holds none leaves. A record waits in `pending`, a
 * heap by due time, until its not_before has come; then in `ready`, a heap in release
 * order (due, then accepted, then part), until a rewrite without held batches removes
 * it. So a turn of the release loop looks at what is due, never at the whole backlog,
 * and a million timers cost a heap operation each as they come due.
 *
 * bw_timers_wait sleeps until the next timer is due, or a record due earlier is noted:
 * a lone timer goes out within milliseconds of its time, not on a scan.
 *
 * @locality any thread (a mutex; the jobs tail and this proxy's writers note, the
 * release thread takes and waits). Lock order: the jobs index's, then this one's. */
#ifndef BW_TIMERS_H
#define BW_TIMERS_H

#include <stddef.h>
#include <stdint.h>

#include "bulkwrite/internal/v1/records.pb-c.h"

#define BW_AFTER_MAX 16 /* prerequisites per request (BatchWriteRequest.after) */

typedef struct bw_timers bw_timers_t;

/* A held record as the release loop sees it: a copy (bw_timers_copies_free). */
typedef struct {
    char id[33];             /* the record's key: the request's job id (a named job's part's) */
    char job[33];            /* the job it belongs to: the named job's id, or id */
    int64_t not_before_ms;
    int64_t written_at_ms;
    int64_t created_at_ms;   /* when it was accepted: releases keep acceptance order */
    uint32_t job_part;       /* a named job's part number (0 otherwise) */
    int part_before_held;    /* an earlier part of its named job holds batches: it waits */
    uint32_t shard;          /* the shard of its first held batch: whose owner releases it */
    int owned;               /* this proxy releases it (it owns the shard, or the record is late) */
    /* what the jobs topic took after the record, as the tail read it: on the embedded
     * Kafka, which keeps only a partition's newest 5 MiB, how close it is to being dropped */
    uint64_t behind_bytes, behind_records;
    size_t n_after;
    char (*after)[33];       /* its prerequisites (n_after) */
    void *rec;               /* the packed JobRecord */
    size_t len;
} bw_timer_t;

bw_timers_t *bw_timers_new(void);
void bw_timers_free(bw_timers_t *t);

/* The record now kept for `id` (r unpacked, raw/len packed): kept while it holds
 * batches, removed once it holds none (r NULL or r->n_held 0). pos_bytes, pos_records:
 * how far the jobs tail had read when it read the record. Wakes the waiting release
 * loop when the record is due before it meant to wake. */
void bw_timers_note(bw_timers_t *t, const char *id, const Bulkwrite__Internal__V1__JobRecord *r, const void *raw, size_t len,
                    uint64_t pos_bytes, uint64_t pos_records);
/* The jobs tail's position now, for the copies' behind_bytes and behind_records. */
void bw_timers_position(bw_timers_t *t, uint64_t pos_bytes, uint64_t pos_records);

/* Copies of at most max of the records due at now_ms, in release order: due, then
 * accepted, then part, then id. Records with prerequisites are among them once due,
 * whatever the prerequisites say. With mine (a byte per shard: the shards this proxy
 * releases), a record whose first held batch is on another proxy's shard is parked for
 * park_ms instead (its owner releases it meanwhile) unless its not_before is at or
 * before takeover_ms (its owner is late: gone, or held up); one with batches on several
 * shards is copied with owned 0 (its shards wait for it). The copied records stay due
 * until released or parked. *out is malloc'd (NULL when none); returns the count. */
size_t bw_timers_due(bw_timers_t *t, int64_t now_ms, size_t max, const uint8_t *mine, size_t shards,
                     int64_t takeover_ms, int64_t park_ms, bw_timer_t **out);
/* The due records of ids that cannot go now (prerequisites, an earlier part, a full
 * backlog) wait until until_ms: they keep no place among the due meanwhile. */
void bw_timers_park(bw_timers_t *t, const char *const *ids, size_t n, int64_t until_ms);
/* Copies of at most max records (due or not) this proxy must write again now: written at
 * or before written_before_ms, or behind the topic's end by more than behind_bytes or
 * behind_records (0: no such bound) — to stay in the topic —, or of a job `gone` says is
 * gone (cancelled: its held batches are dropped). gone may be NULL. With mine, only the
 * records of this proxy's shards (their owner writes the others). */
size_t bw_timers_stale(bw_timers_t *t, int64_t written_before_ms, uint64_t behind_bytes, uint64_t behind_records,
                       int (*gone)(void *ud, const char *job), void *ud, const uint8_t *mine, size_t shards,
                       size_t max, bw_timer_t **out);
/* Copies (id, job and prerequisites only: rec NULL) of the records not due yet that have
 * prerequisites: a cancelled prerequisite cancels them at once, whatever their time. */
size_t bw_timers_dependents(bw_timers_t *t, bw_timer_t **out);
void bw_timers_copies_free(bw_timer_t *copies, size_t n);

/* When the next record not yet due is due (INT64_MAX: none). */
int64_t bw_timers_next_due(bw_timers_t *t);
/* Sleeps until until_ms (wall clock), or until a record due before that is noted, or
 * bw_timers_wake. */
void bw_timers_wait(bw_timers_t *t, int64_t until_ms);
void bw_timers_wake(bw_timers_t *t);

typedef struct {
    size_t held;         /* records that hold batches */
    size_t ops;          /* the ops they hold */
    size_t due;          /* of the records, those due now and not released yet */
    size_t bytes;        /* their packed records and entries */
    int64_t next_due_ms; /* when the next record not due yet is due (0: none) */
} bw_timers_stats_t;
void bw_timers_stats(bw_timers_t *t, bw_timers_stats_t *st);

/* What one client holds (its records' JobRecord.client; "" without a clients file). */
typedef struct {
    char client[72];
    size_t held, ops;
} bw_timers_client_t;
#define BW_TIMERS_CLIENTS_MAX 1000 /* past them, the rest add up under "(other)" */
/* The clients that hold records now, at most max, those holding most first. */
size_t bw_timers_clients(bw_timers_t *t, bw_timers_client_t *out, size_t max);

/* 1 if a record of job `job` (a named job's part, or a request's) holds batches. */
int bw_timers_holds_job(bw_timers_t *t, const char *job);
/* 1 if job `id` is reachable from the jobs in `after` through the prerequisites of the
 * held records (a record's job waits for its after): holding `id` after them would make
 * the two wait for each other. */
int bw_timers_would_cycle(bw_timers_t *t, const char *id, char *const *after, size_t n_after);

#endif
