/* consumer_metrics.h — the consumer's metric families: one row each in
 * consumer_metrics.c, named by this enum in the order /metrics shows them (the engine:
 * common/metrics.h). Callers update them with bw_metrics_add, _set and _observe, indexed
 * as the table's comment says; the helpers below change several rows under one lock.
 * Counters have a series per shard once the shard was assigned here or did anything;
 * gauges only while the shard is assigned (bw_metrics_assigned; a revoked shard's gauges
 * leave, its new owner reports them).
 * @locality any thread. */
#ifndef BW_CONSUMER_METRICS_H
#define BW_CONSUMER_METRICS_H

#include <stdint.h>

#include "config.h"
#include "metrics.h"

typedef enum {
    BW_CM_ROWS_APPLIED,
    BW_CM_MESSAGES_REPLAYED,
    BW_CM_ROWS_FAILED,
    BW_CM_BATCHES_APPLIED,
    BW_CM_STATEMENTS,
    BW_CM_ERRORS,
    BW_CM_MESSAGES_DUPLICATE,
    BW_CM_DEAD_LETTERS,
    BW_CM_UNHEALTHY,
    BW_CM_SERVER_DOWN,
    BW_CM_SERVER_BUDGET,
    BW_CM_KEPT_MESSAGES,
    BW_CM_REPLICA_UNREAD_SECONDS,
    BW_CM_RECONNECTS,
    BW_CM_INCREMENTS_COALESCED,
    BW_CM_OPS_CANCELLED,
    BW_CM_ALERT_FIRING,
    BW_CM_ALERT_POSTS,
    BW_CM_RATE_BATCHES_PER_SECOND,
    BW_CM_RATE_ROWS_PER_SECOND,
    BW_CM_PAUSED,
    BW_CM_BUFFER_FULL,
    BW_CM_RETRIES,
    BW_CM_LAG_MESSAGES,
    BW_CM_LANE_LAG,
    BW_CM_LANE_STATEMENTS,
    BW_CM_LOST_MESSAGES,
    BW_CM_THROTTLE_STATE,
    BW_CM_THROTTLE_RATE,
    BW_CM_SIGNAL,
    BW_CM_SIGNAL_THRESHOLD,
    BW_CM_APPLY_LATENCY_SECONDS,
    BW_CM_ROWS
} bw_consumer_metric_t;

/* The groups of rows shown only while on (bw_metrics_switch). */
enum {
    BW_CONSUMER_METRICS_THROTTLE = 1, /* throttle.mode is not off: on at its first report */
    BW_CONSUMER_METRICS_LANES = 2,    /* lanes besides the default are configured */
};

extern const bw_metrics_table_t bw_consumer_metrics;

/* The consumer's metrics for conf (its lanes group on if it has lanes). */
bw_metrics_t *bw_consumer_metrics_new(const bw_config_t *conf);

/* A batch applied on the shard: its rows applied and refused, messages skipped as
 * replayed or duplicate, records dead-lettered, and its time from hand-off to result. */
void bw_consumer_metrics_applied(bw_metrics_t *m, int shard, uint64_t rows, uint64_t failed_rows,
                                 uint64_t replayed_messages, uint64_t duplicate_messages, uint64_t dead_letters,
                                 int64_t latency_us);
/* A shard assigned here, as of now: the statements/s and rows/s budgets in force (0 =
 * unlimited, none), paused by an operator, fetching paused for back-pressure (buffer
 * full), held back as unhealthy, and its lag. */
void bw_consumer_metrics_shard(bw_metrics_t *m, int shard, double rate, double row_rate, int paused,
                               int buffer_full, int held, int64_t lag);
/* A lane's partition of a shard (its slot, config.h): assigned here or not, its lag and
 * the statements applied from it since it was assigned. */
void bw_consumer_metrics_lane(bw_metrics_t *m, int slot, int assigned, int64_t lag, uint64_t statements);
/* A server budget's share this consumer holds, statements/s and rows/s; BW_METRICS_UNSET:
 * the server has no budget of that kind. */
void bw_consumer_metrics_budget(bw_metrics_t *m, int server, double statements, double rows);
/* The adaptive throttle (consumer/throttle.h): the shard's state (bw_throttle_state_t)
 * and the rate it decided; a server signal's (bw_signal_t) last reading (NaN: unknown)
 * and threshold (0: not used, not shown). Either turns the throttle's series on;
 * bw_metrics_switch(m, BW_CONSUMER_METRICS_THROTTLE, 0) turns them off (throttle.mode off). */
void bw_consumer_metrics_throttle(bw_metrics_t *m, int shard, int state, double rate);
void bw_consumer_metrics_signal(bw_metrics_t *m, int server, int signal, double value, double threshold);

#endif
