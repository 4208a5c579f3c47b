/* handover.h — a shard that moves keeps its throttle and health state.
 *
 * A consumer publishes each shard's status (progress.c) to the compacted status topic,
 * and once more when the group takes the shard back; every consumer follows that topic
 * (shardtable.h). A consumer that is given a shard seeds its state from the shard's
 * latest status record, whoever wrote it (another consumer, or this one before a
 * restart or a rebalance), when the record is at most consumer.handover_max_age_ms old:
 *   - the adaptive throttle's state: throttled (at the record's rate, not the cap; the
 *     throttle's recovery raises it again as usual), unknown (at the floor) or critical
 *     (paused until its signal is back under its threshold). A running shard starts
 *     afresh (at its cap; at the floor if a signal is over on arrival);
 *   - its health: a shard held after timeouts, or stopped by an error only an operator
 *     can fix, stays held; its probe goes consumer.pause_ms after the record was written;
 *   - a retry backoff in progress (the next failure waits longer), and its recent errors.
 * A server marked down is not seeded: the new owner reads the shard's ledger on that
 * server before anything else, and that read is the server's health check.
 *
 * No I/O and no clock of its own: tested alone (test/unit/test_handover.c).
 * @locality dispatcher thread. */
#ifndef BW_HANDOVER_H
#define BW_HANDOVER_H

#include <stddef.h>
#include <stdint.h>

#include "bulkwrite/internal/v1/records.pb-c.h"
#include "throttle.h"

typedef struct {
    int64_t max_age_ms;       /* consumer.handover_max_age_ms: an older record is ignored; 0 = never seed */
    int64_t probe_every_ms;   /* consumer.pause_ms */
    int64_t retry_initial_ms; /* consumer.retry_initial_ms */
} bw_handover_limits_t;

/* What a status record hands to the shard's new holder. */
typedef struct {
    int64_t age_ms;           /* of the record */
    int throttle;             /* t holds a throttle state to resume (throttled, unknown or critical) */
    bw_throttle_shard_t t;
    int held, stopped;        /* health.h: held after timeouts, or for a stop error */
    int64_t probe_at_us;      /* a held shard's next probe (monotonic) */
    int64_t backoff_us;       /* a retry backoff was running: 0 if none */
    size_t n_errors;          /* its recent errors, oldest first */
    struct {
        int64_t at_ms;
        const char *kind;     /* a static name: bw_fail_name(), "ledger", "lost", or "other" */
        char message[240];
    } errors[5];
} bw_handover_t;

typedef enum {
    BW_HANDOVER_NONE,    /* no record, or nothing in it to keep (running, healthy, no error) */
    BW_HANDOVER_STALE,   /* a record older than max_age_ms (or seeding is off): ignored */
    BW_HANDOVER_SEEDED,  /* out says what to keep */
} bw_handover_result_t;

/* The state st (NULL: none) hands over at now_us (monotonic) / now_ms (wall). tl: the
 * throttle as in force here; with throttle.mode off no throttle state is kept. */
bw_handover_result_t bw_handover_seed(const Bulkwrite__Internal__V1__ShardStatus *st, const bw_handover_limits_t *l,
                                      const bw_throttle_limits_t *tl, int64_t now_us, int64_t now_ms,
                                      bw_handover_t *out);

#endif
