/* batcher.h — shard batching and operation batching.
 *
 * A validated request is split by target shard, then by (object type, op), then into
 * batches of at most the object type's batch size for that op and at most
 * kafka.message_max_bytes once encoded. Each batch becomes one ShardBatch message for
 * the partition whose number is the shard.
 *
 * Order: ops on one object keep their request order. Within a shard the batcher may
 * group ops on *different* objects by (type, op); when an op touches an object that an
 * earlier op of another (type, op) touched, everything gathered so far for that shard
 * is emitted first (an "epoch" ends), so the two land in order in the partition.
 *
 * @locality any thread; everything lives in the caller's arena except payloads. */
#ifndef BW_BATCHER_H
#define BW_BATCHER_H

#include <stdint.h>

#include "arena.h"
#include "bulkwrite/v1/bulkwrite.pb-c.h"
#include "config.h"

/* What validation decided about one op. */
typedef struct {
    int shard;        /* target logical shard; -1 = rejected, not batched */
    int type_index;   /* into conf->object_types */
    const int *cols;  /* [op->n_fields] config column index of each field */
} bw_op_route_t;

typedef struct {
    int32_t shard;
    /* Kafka headers, so a consumer can group messages without decoding them */
    const char *type_name;  /* bw-type */
    char op_header[4];      /* bw-op: the OpType number */
    char rows_header[24];   /* bw-rows: row count */
    void *payload;        /* packed ShardBatch; malloc'd, owned by the caller (or Kafka) */
    size_t len;
    const uint32_t *ops;  /* request indices of the ops it carries (arena) */
    size_t op_cnt;
} bw_batch_msg_t;

typedef struct {
    bw_batch_msg_t *msgs; /* arena */
    size_t msg_cnt;
} bw_batch_set_t;

/* Splits the routed ops of `req` into messages of job `job_id`; a named job's part also
 * carries the job's id, `named_job` (NULL or "" for a job of one request). An op whose row alone exceeds the
 * message size limit is rejected: routes[i].shard is set to -1 and its index and reason
 * are appended to `too_large` (arena, caller reads *too_large_cnt entries). */
void bw_batcher_split(const bw_config_t *conf, const Bulkwrite__V1__BatchWriteRequest *req,
                      bw_op_route_t *routes, const char *job_id, const char *named_job, int64_t now_ms,
                      bw_arena_t *arena, bw_batch_set_t *out, uint32_t **too_large,
                      size_t *too_large_cnt);

/* Frees payloads still owned by the caller (msgs whose payload is not NULL). */
void bw_batcher_free_payloads(bw_batch_set_t *set);

#endif
