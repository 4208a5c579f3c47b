/* jobs.h — job receipts: what the proxy accepted, and what the shards made of it.
 *
 * At submission the proxy writes a JobRecord (accepted ops per shard) to the compacted
 * jobs topic, keyed by job id, before it replies. Every proxy follows that topic into
 * an in-memory index, so any proxy answers GET /v1/jobs/{id}, also after restarts. The
 * index is bounded (proxy.jobs_index_max_bytes, least recently used records dropped); a
 * dropped record is read back from the topic when asked for. The answer adds, per shard, the applied and failed counts from the shard's bw_job_parts
 * table and a sample of failures from bw_job_failures (read through store/ledger.h) —
 * written in the apply transaction, so they are exact.
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

#include "bulkwrite.pb-c.h"
#include "config.h"
#include "shardtable.h"

typedef struct bw_jobs bw_jobs_t;

bw_jobs_t *bw_jobs_start(const bw_config_t *conf, const char *brokers, char *errstr, size_t errstr_size);
void bw_jobs_stop(bw_jobs_t *j);
int bw_jobs_caught_up(bw_jobs_t *j);
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

/* At most this many prerequisites per request (BatchWriteRequest.after). */
#define BW_AFTER_MAX 16

/* A record that still holds batches (scheduled or dependent: JobRecord.held), as the
 * index read it last: what proxy/release.c needs to decide when to release them. */
typedef struct {
    char id[33];             /* the record's key: the request's job id (a named job's part's) */
    char job[33];            /* the job it belongs to: the named job's id, or id */
    int64_t not_before_ms;
    int64_t written_at_ms;
    int64_t created_at_ms;   /* when it was accepted: releases keep acceptance order */
    uint32_t job_part;       /* a named job's part number (0 otherwise) */
    /* what the jobs topic took after the record, as the tail read it: on the embedded
     * Kafka, which keeps only a partition's newest 5 MiB, how close it is to being dropped */
    uint64_t behind_bytes, behind_records;
    size_t n_after;
    char after[BW_AFTER_MAX][33];
} bw_jobs_held_t;
/* Every held record's entry (malloc'd array in *out, free it); returns the count. */
size_t bw_jobs_held_list(bw_jobs_t *j, bw_jobs_held_t **out);
/* 1 if a held record of job `job` (a named job's part) is in the index. */
int bw_jobs_holds_job(bw_jobs_t *j, const char *job);
/* 1 if job `id` is reachable from the jobs in `after` through the prerequisites of the
 * held records (a record's job waits for its after): holding `id` after them would make
 * the two wait for each other. */
int bw_jobs_held_cycle(const bw_jobs_held_t *held, size_t n, const char *id, char *const *after, size_t n_after);

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
    size_t held;             /* records that hold batches (bw_jobs_held_list) */
} bw_jobs_stats_t;
void bw_jobs_stats(bw_jobs_t *j, bw_jobs_stats_t *st);

/* Fills st from the record and the shards. job_id is the checked id (32 hex digits)
 * the record was found under; shards out of range are dropped from rec. table (may be
 * NULL) gives the consumers' status: pending ops in a range Kafka deleted before it was
 * applied are reported lost. admin 0: failure reasons and shard errors are scrubbed of
 * the server's text and names (scrub.h). The ledgers are read as the servers'
 * proxy_user (read-only). named (NULL for a job of one request): rec is a named job's
 * merged record (bw_jobs_record) and this the index's view of its parts: the ledgers are
 * read over all its parts, and it is finished only once sealed with every part in. A
 * cancelled job (table's JobControl) reports, per shard, the ops its consumer skipped
 * (pending ops behind the shard's applied offset) as cancelled. Every string and array of st is malloc'd: free with
 * bw_jobs_status_free. */
void bw_jobs_status(const bw_config_t *conf, Bulkwrite__V1__JobRecord *rec, const char *job_id,
                    bw_shard_table_t *table, int admin, const bw_jobs_named_t *named, Bulkwrite__V1__JobStatus *st);
void bw_jobs_status_free(Bulkwrite__V1__JobStatus *st);
/* Fills st->prerequisites: each job of st->after, as its own status says now (its
 * ledgers read). Freed by bw_jobs_status_free. */
void bw_jobs_prerequisites(bw_jobs_t *j, const bw_config_t *conf, bw_shard_table_t *table, Bulkwrite__V1__JobStatus *st);
/* 1 when a job with status st, named in another's `after`, lets that job's ops on `shard`
 * go (-1: whether it can on some shard): it is not cancelled, every op of it is in (a
 * named job sealed with all its parts; a request not awaiting a resend), and none of its
 * ops on that shard is pending, held, lost (to be sent again) or unknown (a ledger that
 * did not answer). */
int bw_jobs_done_on(const Bulkwrite__V1__JobStatus *st, int shard);
/* JSON text of a status (malloc'd). */
char *bw_jobs_status_json(const Bulkwrite__V1__JobStatus *st);

/* 1 if the shard's status names a range lost in Kafka that holds messages of the job
 * (its first and last offsets on the shard). */
int bw_jobs_lost_here(const Bulkwrite__V1__ShardStatus *st, const char *lane, const Bulkwrite__V1__ShardOps *ops);
/* The range [*from, *to) of `lane`'s partition of the shard lost in Kafka (empty if equal). */
void bw_jobs_lane_lost(const Bulkwrite__V1__ShardStatus *st, const char *lane, int64_t *from, int64_t *to);

#define BW_JOB_FAILURE_SAMPLE 20

/* Where a page of failures ends: the last failure it holds (shard, part, op_index). */
typedef struct {
    int set;
    int shard;
    uint32_t part, op_index;
} bw_jobs_cursor_t;
/* Reads a cursor as the API writes it ("SHARD-PART-OP_INDEX"). 0, or -1 if malformed. */
int bw_jobs_cursor_parse(const char *text, bw_jobs_cursor_t *c);

/* GET /v1/jobs/{id}/failures: one page (JSON, malloc'd) of at most `limit` failures of
 * the job, by shard, part and op index, after the cursor `after` (set: the page goes on
 * from there), each with its op as it was sent (for a replay: docs/jobs.md); of MySQL
 * error `code` when not 0, whose reason (as the caller sees it: scrubbed unless admin)
 * contains `reason` when not NULL. "next" is the cursor of the next page, null on the
 * last one. The ledgers are read as proxy_user. NULL with err when a shard's ledger
 * could not be read. */
char *bw_jobs_failures_json(const bw_config_t *conf, const Bulkwrite__V1__JobRecord *rec, const char *job_id,
                            int named, int admin, const bw_jobs_cursor_t *after, unsigned code, const char *reason,
                            size_t limit, char *err, size_t esz);

#endif
