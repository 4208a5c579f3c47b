/* jobs.h — job receipts: what the proxy accepted, and what the shards made of it.
 *
 * At submission the proxy writes a JobRecord (accepted ops per shard) to the compacted
 * jobs topic, keyed by job id, before it replies. Every proxy follows that topic into
 * an in-memory index, so any proxy answers GET /v1/jobs/{id}, also after restarts. The
 * index is bounded (proxy.jobs_index_max_bytes, least recently used records dropped); a
 * dropped record is read back from the topic when asked for. The answer adds, per shard, the applied and failed counts from the shard's bw_job_parts
 * table and a sample of failures from bw_job_failures (read through common/ledger.h) —
 * written in the apply transaction, so they are exact.
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

/* Puts a record this proxy just wrote into its index (the tail brings the same later). */
void bw_jobs_put(bw_jobs_t *j, const char *job_id, const void *rec, size_t len);

/* The record of a job as the index holds it now (packed, malloc'd). 0 found, -1 not. */
int bw_jobs_lookup(bw_jobs_t *j, const char *job_id, void **out, size_t *len);

/* The record of a job (packed, malloc'd: *out, *len), looked up in the index; when it
 * is not there yet, the index is first brought up to date with the topic (a job just
 * accepted by another proxy); when it is still not there but the tail has read the id
 * (a record dropped from the bounded index), the topic is read for it (slow: one
 * caller at a time). 0 found, -1 not found. */
int bw_jobs_record(bw_jobs_t *j, const char *job_id, void **out, size_t *len);

/* The index's size and work, for /metrics. */
typedef struct {
    size_t entries, bytes, max_bytes;
    uint64_t evicted;        /* records dropped, least recently used first */
    uint64_t found_in_topic; /* records read back from the topic for a lookup */
} bw_jobs_stats_t;
void bw_jobs_stats(bw_jobs_t *j, bw_jobs_stats_t *st);

/* Fills st from the record and the shards. job_id is the checked id (32 hex digits)
 * the record was found under; shards out of range are dropped from rec. table (may be
 * NULL) gives the consumers' status: pending ops in a range Kafka deleted before it was
 * applied are reported lost. admin 0: failure reasons and shard errors are scrubbed of
 * the server's text and names (scrub.h). The ledgers are read as the servers'
 * proxy_user (read-only). Every string and array of st is malloc'd: free with
 * bw_jobs_status_free. */
void bw_jobs_status(const bw_config_t *conf, Bulkwrite__V1__JobRecord *rec, const char *job_id,
                    bw_shard_table_t *table, int admin, Bulkwrite__V1__JobStatus *st);
void bw_jobs_status_free(Bulkwrite__V1__JobStatus *st);
/* JSON text of a status (malloc'd). */
char *bw_jobs_status_json(const Bulkwrite__V1__JobStatus *st);

/* 1 if the shard's status names a range lost in Kafka that holds messages of the job
 * (its first and last offsets on the shard). */
int bw_jobs_lost_here(const Bulkwrite__V1__ShardStatus *st, const char *lane, const Bulkwrite__V1__ShardOps *ops);
/* The range [*from, *to) of `lane`'s partition of the shard lost in Kafka (empty if equal). */
void bw_jobs_lane_lost(const Bulkwrite__V1__ShardStatus *st, const char *lane, int64_t *from, int64_t *to);

#define BW_JOB_FAILURE_SAMPLE 20

#endif
