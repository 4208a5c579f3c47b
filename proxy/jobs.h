/* jobs.h — job receipts: what the proxy accepted, read from the jobs topic into an index.
 *
 * At submission the proxy writes a JobRecord (accepted ops per shard) to the compacted
 * jobs topic, keyed by job id, before it replies. Every proxy follows that topic into
 * an in-memory index, so any proxy answers GET /v1/jobs/{id}, also after restarts. The
 * index is bounded (proxy.jobs_index_max_bytes, least recently used records dropped); a
 * dropped record is read back from the topic when asked for. The answer adds, per shard, the applied and failed counts from the shard's bw_job_parts
 * table and a sample of failures from bw_job_failures (read through store/ledger.h) —
 * written in the apply transaction, so they are exact.
 *
 * What the shards made of a job (its status, its failures) is job_status.h's.
 *
 * A named job (docs/jobs.md) is its parts: each part's record is keyed by the part's own
 * id (bw_ledger_part_id) and names the job; the index keeps, per named job, which parts
 * it has read and which one is the last (kept for every named job, not dropped with the
 * records), and a job's record is its parts' merged (bw_jobs_record).
 *
 * @locality any thread (the index has a mutex; the tail thread fills it). */
#ifndef BW_JOBS_H
#define BW_JOBS_H

#include <stddef.h>
#include <stdint.h>

#include "bulkwrite/v1/bulkwrite.pb-c.h"
#include "config.h"
#include "shardtable.h"
#include "timers.h"

typedef struct bw_jobs bw_jobs_t;

bw_jobs_t *bw_jobs_start(const bw_config_t *conf, const char *brokers, char *errstr, size_t errstr_size);
void bw_jobs_stop(bw_jobs_t *j);
int bw_jobs_caught_up(bw_jobs_t *j);
/* The records that hold batches (scheduled, dependent), as the index reads them. */
bw_timers_t *bw_jobs_timers(bw_jobs_t *j);
/* Brings the index up to what the jobs topic holds now (up to 3 s); 1 if it did. */
int bw_jobs_sync(bw_jobs_t *j);

/* Puts a record this proxy just wrote into its index (the tail brings the same later). */
void bw_jobs_put(bw_jobs_t *j, const char *job_id, const void *rec, size_t len);

/* The record of a job as the index holds it now (packed, malloc'd). 0 found, -1 not. */
int bw_jobs_lookup(bw_jobs_t *j, const char *job_id, void **out, size_t *len);

/* The record of a job (packed, malloc'd: *out, *len), looked up in the index; when it
 * is not there yet, the index is first brought up to date with the topic (a job just
 * accepted by another proxy); when it is still not there but the tail has read the id
 * (a record dropped from the bounded index), the topic is read for it (slow: one
 * caller at a time). A named job's record is its parts' merged (ops per shard summed,
 * offsets spanning every part; job and job_id both the job's id, job_last set once
 * sealed). 0 found; -1 not in the topic (read to its end: never written, or deleted by
 * its retention); -2 not known now (the tail behind, the topic not read). */
int bw_jobs_record(bw_jobs_t *j, const char *job_id, void **out, size_t *len);

/* A named job as the index knows it (its parts' records read so far, by this proxy's
 * tail and its own writes). */
typedef struct {
    uint32_t received;       /* distinct parts */
    uint32_t next_part;      /* the lowest part number not received */
    int64_t last;            /* the last part of a sealed job; -1 while it is open */
    int64_t max_part;        /* the highest part number read (received or not); -1 none */
    int64_t created_at_ms;
    char lane[40], client[72], name[132];
    char replay_of[33];      /* the job its parts replay ("" none) */
} bw_jobs_named_t;
/* 0 with *out filled, -1 if no part of the named job `job_id` was read. */
int bw_jobs_named(bw_jobs_t *j, const char *job_id, bw_jobs_named_t *out);

/* The latest jobs the index read (a named job once, by its id), newest first. */
typedef struct {
    char id[33];
    char client[72];
    int64_t created_at_ms;
} bw_jobs_recent_t;
#define BW_JOBS_RECENT_MAX 256
/* Copies at most max of them into out; returns how many. */
size_t bw_jobs_recent(bw_jobs_t *j, bw_jobs_recent_t *out, size_t max);

/* The index's size and work, for /metrics. */
typedef struct {
    size_t entries, bytes, max_bytes;
    uint64_t evicted;        /* records dropped, least recently used first */
    uint64_t found_in_topic; /* records read back from the topic for a lookup */
} bw_jobs_stats_t;
void bw_jobs_stats(bw_jobs_t *j, bw_jobs_stats_t *st);

#endif
