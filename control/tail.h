/* tail.h — reads a compacted topic from its beginning and keeps following it.
 *
 * The jobs, control and status topics are tables kept in Kafka: the latest record per
 * key is the current value. A tail hands every record, in order, to a callback on its
 * own thread; the caller keeps "latest per key" however it likes. It reads every
 * partition, joins no group and commits nothing.
 *
 * A record's version orders the values of its key: the offset it was first written at
 * (its BW_KAFKA_HEADER_ORIGIN when it is a copy the embedded Kafka's compactor wrote
 * again, control/compactor.h; else its own offset). A record whose version is below the
 * one the caller holds for its key is an older value: the caller ignores it.
 *
 * @locality the callback runs on the tail's thread. */
#ifndef BW_TAIL_H
#define BW_TAIL_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

typedef struct bw_tail bw_tail_t;

typedef void (*bw_tail_fn)(void *ud, const void *key, size_t key_len, const void *value, size_t value_len,
                           int64_t version);

/* Starts following `topic` (which must exist). NULL with errstr on failure. */
bw_tail_t *bw_tail_start(const bw_config_t *conf, const char *brokers, const char *topic, bw_tail_fn fn,
                         void *ud, char *errstr, size_t errstr_size);
/* 1 once every partition was read up to the end it had when the tail started. */
int bw_tail_caught_up(bw_tail_t *t);
/* Waits up to timeout_ms until the tail has read everything written to the topic
 * before this call (high watermarks now). 1 if it got there. */
int bw_tail_sync(bw_tail_t *t, int timeout_ms);
void bw_tail_stop(bw_tail_t *t);

/* Reads `topic` once from its beginning to its end (the high watermarks when called) and
 * hands the latest value of `key` to keep(ud, value, len) — called for every value of
 * the key in order, so the caller keeps the one it prefers. For a record dropped from a
 * bounded in-memory index: slow (the whole topic), so callers keep it rare. 0 when the
 * topic was read to its end within timeout_ms, -1 with errstr otherwise. */
int bw_tail_find(const bw_config_t *conf, const char *brokers, const char *topic, const void *key, size_t key_len,
                 void (*keep)(void *ud, const void *value, size_t len), void *ud, int timeout_ms, char *errstr,
                 size_t errstr_size);

#endif
