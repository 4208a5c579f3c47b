/* retain.h — what Kafka must keep of a partition a shard has applied, so that a copy of
 * the shard's database that lags behind its primary can still be brought level from
 * Kafka (no I/O; tested alone).
 *
 * The shard's ledger (store/ledger.h) moves in the same transaction as the rows, so a
 * replica's bw_offsets says exactly what that replica has applied. A replica promoted
 * after a failover resumes from its own ledger; everything after it must still be in
 * Kafka. A partition is therefore trimmed (DeleteRecords, consumer/trim.c) only up to
 * the lowest of:
 *   - what the primary has applied and Kafka acknowledged as committed;
 *   - what the primary had applied consumer.keep_applied_ms ago (a replica nobody
 *     listed, a backup restored within that margin);
 *   - what every listed replica (shards.servers[].replicas) has applied, as last read
 *     from its bw_offsets: one never read, or without the row, keeps everything.
 *
 * The margin comes from samples of the applied offsets, taken every keep/16: the bound
 * is the newest sample at least keep old, so it keeps up to 1/16 more than the margin,
 * never less. A consumer that just started (or took the partition over) has no sample
 * that old: it keeps everything until it has.
 *
 * @locality the dispatcher thread (one owner). */
#ifndef BW_RETAIN_H
#define BW_RETAIN_H

#include <stddef.h>
#include <stdint.h>

#define BW_RETAIN_SAMPLES 17 /* keep/16 apart: the oldest is always older than keep */

typedef struct bw_retain bw_retain_t;

/* Samples of `slots` partitions' applied offsets. */
bw_retain_t *bw_retain_new(size_t slots);
void bw_retain_free(bw_retain_t *r);

/* Takes a sample of applied[0..slots) (the next offset each has applied; -1 unknown or
 * not held here) at now_ms, if keep_ms/16 has passed since the last one. keep_ms 0 takes
 * none. Returns 1 if it took one. */
int bw_retain_sample(bw_retain_t *r, const int64_t *applied, int64_t now_ms, int64_t keep_ms);

/* The shard's database went back to `offset` (a failover, a restore): no sample of slot
 * may say more was applied than that. */
void bw_retain_clamp(bw_retain_t *r, size_t slot, int64_t offset);

/* The offset slot had applied at least keep_ms before now_ms (every message below it was
 * applied that long ago): its newest sample that old; -1 when there is none. */
int64_t bw_retain_applied_before(const bw_retain_t *r, size_t slot, int64_t now_ms, int64_t keep_ms);

/* Everything bw_retain_trim_to weighs for one partition. */
typedef struct {
    int64_t applied;          /* next offset to apply, per the primary's ledger; -1 unknown */
    int64_t committed;        /* Kafka acknowledged a commit of this offset; -1 none */
    int64_t keep_ms;          /* consumer.keep_applied_ms; 0 = no margin */
    int64_t applied_before;   /* bw_retain_applied_before (with keep_ms > 0) */
    int replicas;             /* replicas listed for the shard's server */
    int64_t replicas_applied; /* the least next offset over them as last read; -1 unknown */
} bw_retain_in_t;

/* The offset below which Kafka may delete the partition's messages; -1 = nothing. */
int64_t bw_retain_trim_to(const bw_retain_in_t *in);

#endif
