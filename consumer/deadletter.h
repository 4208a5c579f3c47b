/* deadletter.h — the dead-letter topic: every op a shard refused, with its reason.
 *
 * A record is JSON (docs/reliability.md shows one), keyed "<job_id>/<part>/<op_index>"
 * (or "undecodable/<shard>/<offset>"). The consumer sends a batch's records and waits for
 * Kafka's acknowledgement *before* the batch's transaction commits, so a refused op is
 * never lost; a crash between the two re-sends the same keys, which readers use to
 * drop duplicates.
 *
 * @locality any thread: one producer is shared by all workers. */
#ifndef BW_DEADLETTER_H
#define BW_DEADLETTER_H

#include <stdint.h>

#include "bulkwrite/internal/v1/records.pb-c.h"
#include "config.h"

typedef struct bw_dead_letters bw_dead_letters_t;

/* One refused op (row != NULL), or one message that could not be decoded at all
 * (row == NULL, raw = its payload). */
typedef struct {
    const char *job_id;  /* NULL for an undecodable message */
    uint32_t part;
    int shard;
    const char *topic;        /* the lane's topic the message came from; NULL: not said */
    int64_t offset;
    int op;                   /* bw_op_t */
    const char *object_type;
    const char *shard_key;    /* a create's: a key that routes to the shard (bw_shard_key_for); NULL otherwise */
    const Bulkwrite__Internal__V1__Row *row;
    char *const *columns;     /* ShardBatch.columns the row's fields index */
    size_t n_columns;         /* a field indexing past them (a malformed batch) is left out */
    unsigned error_code;      /* MySQL error number; 0 if not from MySQL */
    const char *error;
    const void *raw;
    size_t raw_len;
} bw_dead_letter_t;

bw_dead_letters_t *bw_dead_letters_new(const bw_config_t *conf, const char *brokers, char *errstr,
                                       size_t errstr_size);
void bw_dead_letters_destroy(bw_dead_letters_t *dl);

/* Sends recs[0..n) and waits until Kafka acknowledged all of them. 0 on success, -1 with
 * errstr otherwise (the caller must not commit the batch). */
int bw_dead_letters_send(bw_dead_letters_t *dl, const bw_dead_letter_t *recs, size_t n, char *errstr,
                         size_t errstr_size);

/* The record's JSON (malloc'd, NUL-terminated), at most max_bytes where it can be: a
 * record that would be longer (a 200 KB string of control bytes escapes to 1.2 MB)
 * carries each long text or binary value as {"truncated": {"length", "sha256",
 * "prefix"}} (the first 1 KiB, then none), or at last the op without its fields; such a
 * record has "truncated": true. An undecodable message's payload is cut the same way
 * (payload_length, payload_sha256). Exposed for tests. */
char *bw_dead_letter_json(const bw_dead_letter_t *r, size_t max_bytes);

/* The refused op of r (r->row set) alone, as the record's "op" (malloc'd): whole when its
 * JSON is at most max_bytes, else cut as bw_dead_letter_json cuts it, and *truncated set
 * (bw_job_failures keeps it for a replay: docs/jobs.md). */
char *bw_dead_letter_op_json(const bw_dead_letter_t *r, size_t max_bytes, int *truncated);

/* The longest record sent for `conf`: under the producer's message.max.bytes. */
size_t bw_dead_letter_max_bytes(const bw_config_t *conf);

#endif
