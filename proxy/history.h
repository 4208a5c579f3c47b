/* history.h — each shard's recent past as the proxy saw it in its consumers' status
 * records: a point every BW_HISTORY_STEP_MS for the last hour (GET /v1/shards/{n}/history),
 * rows/s from the consumers' own rows_applied counters over BW_RATE_WINDOW_MS (GET
 * /v1/shards' consumer.rows_per_s), and when the consumer's alerts fired and resolved.
 *
 * Everything lives in fixed arrays allocated once (no allocation per status record or per
 * sample): a point is 20 bytes and a flags byte, about 8 KB a shard with its readings
 * and alert events: 33 MB for 4,096 shards, 69 KB for 8 (bw_history_bytes). Kept in the proxy's memory only: a restarted proxy starts
 * with no points (each proxy keeps its own, from the same status topic).
 *
 * The clock is the caller's (wall ms): bw_history_observe() takes the consumer's report
 * time, bw_history_tick() the sampling time, so tests inject both.
 *
 * @locality any thread: a mutex guards the table (the status tail observes, the proxy's
 * loop ticks, HTTP threads read). */
#ifndef BW_HISTORY_H
#define BW_HISTORY_H

#include <stddef.h>
#include <stdint.h>

#define BW_HISTORY_STEP_MS 10000  /* one point per shard every 10 s */
#define BW_HISTORY_POINTS 360     /* an hour of points */
#define BW_RATE_WINDOW_MS 60000   /* consumer.rows_per_s: rows_applied over the last minute */
#define BW_HISTORY_ALERT_EVENTS 16 /* alert events a shard keeps (fired and resolved) */
#define BW_HISTORY_ALERT_NAMES 32  /* distinct alert names the table knows */

typedef struct bw_history bw_history_t;

/* What a consumer's status record says of a shard, as the history needs it. */
typedef struct {
    int64_t at_ms;             /* the record's updated_at_ms */
    const char *consumer;      /* the consumer's instance: a new one restarts the counters */
    int64_t lag;               /* messages not applied */
    int64_t oldest_unapplied_ms; /* when the next message to apply was written; 0: none or not known */
    uint64_t rows_applied;     /* cumulative, since that consumer took the shard */
    double rate, row_rate;     /* the budgets in force */
    int paused;
    const char *const *alerts; /* names of its alerts firing now */
    size_t n_alerts;
} bw_history_report_t;

/* One point of GET /v1/shards/{n}/history. NaN rows_per_s: not known (the first step of a
 * consumer); oldest_unapplied_ms < 0: none waits, or not known. */
typedef struct {
    int64_t at_ms;
    int64_t lag;
    int64_t oldest_unapplied_ms; /* an age */
    double rows_per_s;
    double rate, row_rate;
    int paused;
} bw_history_point_t;

/* An alert of the shard that fired or resolved (name: the alert's, static). */
typedef struct {
    int64_t at_ms;
    const char *name;
    int resolved;
} bw_history_alert_t;

/* stale_ms: a shard whose latest report is older than this at a tick gets no point there
 * (its consumer is gone: a gap, not a flat line). */
bw_history_t *bw_history_new(int shard_count, int64_t stale_ms);
void bw_history_free(bw_history_t *h);
/* Bytes the table holds (docs/operations.md quotes it). */
size_t bw_history_bytes(const bw_history_t *h);

/* A status record of `shard` (from the status tail's hook). An older record than the
 * latest one read is ignored. */
void bw_history_observe(bw_history_t *h, int shard, const bw_history_report_t *r);
/* Samples every shard once per BW_HISTORY_STEP_MS step of now_ms: call it often (the
 * proxy's loop does, every 100 ms); returns 1 when it sampled. */
int bw_history_tick(bw_history_t *h, int64_t now_ms);

/* Rows per second applied by the shard over the last BW_RATE_WINDOW_MS of its consumer's
 * reports (less while that consumer has held it for less); NaN when not known (fewer than
 * two reports of one consumer). */
double bw_history_rows_per_s(bw_history_t *h, int shard);
/* Sums over shards first..last of what their consumers last reported: rows_per_s (NaN
 * when no shard's is known), lag, and how many shards reported at all. */
typedef struct {
    double rows_per_s;
    int64_t lag;
    int reporting;
} bw_history_sum_t;
void bw_history_sum(bw_history_t *h, int first, int last, bw_history_sum_t *out);
/* The shard's points, oldest first, into out[max] (max BW_HISTORY_POINTS holds all);
 * returns how many. */
size_t bw_history_points(bw_history_t *h, int shard, bw_history_point_t *out, size_t max);
/* The shard's alert events at or after since_ms, oldest first; returns how many. */
size_t bw_history_alerts(bw_history_t *h, int shard, int64_t since_ms, bw_history_alert_t *out, size_t max);

/* The rate between two readings of a cumulative counter: per second, NaN when the
 * readings are not in order (a reset, or no time between them). */
double bw_history_counter_rate(int64_t from_ms, uint64_t from, int64_t to_ms, uint64_t to);

#endif
