/* throttle.h — the adaptive throttle: each shard's rate follows its database's health.
 *
 * Signals (signals.h reads them): a server's replication lag (a heartbeat row written on
 * the primary, read on its replicas), its Threads_running, an optional custom query
 * returning one number, and the shard's own statement latency. Each has a threshold and
 * an optional critical level (throttle.* in the configuration; a threshold of 0 turns the
 * signal off).
 *
 * Per shard, between throttle.floor and its cap (the operator's or configured rate, which
 * stays the most it may run at; an unlimited cap climbs back to throttle.max_rate before
 * it runs unlimited again):
 *   - a signal over its threshold cuts the rate by throttle.decrease, once per interval (a
 *     shard's first step with a signal over: at the floor at once, see bw_throttle_step);
 *   - a signal that cannot be read, or whose reading is older than throttle.stale_ms, is
 *     "unknown" and holds the shard at the floor: never taken for healthy;
 *   - every signal below threshold * throttle.recover_ratio for throttle.quiet_ms lets the
 *     rate grow per interval by throttle.increase of the rate it ran at when the trouble
 *     began, and past that rate by throttle.increase of its own (hysteresis: between the
 *     two levels the rate holds);
 *   - a signal over its critical level for throttle.critical_ms pauses the shard (its
 *     batches wait in Kafka, nothing is dropped); it resumes at the floor on its own once
 *     the signal is back under its threshold. A short spike does not pause.
 * In dry_run mode all of this is decided and reported, and the cap stays in force.
 *
 * No I/O and no clock of its own, like health.h: tested alone (test/unit/test_throttle.c).
 * @locality dispatcher thread. */
#ifndef BW_THROTTLE_H
#define BW_THROTTLE_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

typedef enum {
    BW_SIGNAL_REPLICATION_LAG, /* ms, the most of the server's replicas (a server signal) */
    BW_SIGNAL_THREADS_RUNNING, /* the server's Threads_running */
    BW_SIGNAL_CUSTOM,          /* the number throttle.custom_query returns on the server */
    BW_SIGNAL_LATENCY,         /* ms per statement of the shard's recent batches (a shard signal) */
    BW_SIGNAL_KINDS
} bw_signal_t;
#define BW_SERVER_SIGNALS 3 /* the first three are read per server */

/* "replication_lag_ms", "threads_running", "custom", "statement_latency_ms": metric labels */
extern const char *const bw_signal_names[BW_SIGNAL_KINDS];

typedef enum { BW_THROTTLE_OFF, BW_THROTTLE_DRY_RUN, BW_THROTTLE_ON } bw_throttle_mode_t;

typedef enum {
    BW_THROTTLE_RUNNING,   /* at its cap */
    BW_THROTTLE_THROTTLED, /* below its cap because of a signal */
    BW_THROTTLE_UNKNOWN,   /* a signal cannot be read: at the floor */
    BW_THROTTLE_CRITICAL,  /* paused: a signal over its critical level for critical_ms */
} bw_throttle_state_t;
extern const char *const bw_throttle_state_names[4]; /* "running", "throttled", "unknown", "critical" */

typedef struct {
    double threshold; /* 0: the signal is not used */
    double critical;  /* 0: none */
} bw_signal_limit_t;

/* throttle.* of the configuration, as the logic uses it. */
typedef struct {
    bw_throttle_mode_t mode;
    double floor, max_rate, decrease, increase, recover_ratio;
    int64_t interval_us, stale_us, quiet_us, critical_us;
    bw_signal_limit_t limits[BW_SIGNAL_KINDS];
} bw_throttle_limits_t;

void bw_throttle_limits_from_config(const bw_config_t *conf, bw_throttle_limits_t *out);

/* One signal as last read: value at at_us (monotonic; 0 = never read), or error (the
 * last read failed: why) . */
typedef struct {
    double value;
    int64_t at_us;
    char error[240];
} bw_signal_reading_t;

/* A shard's throttle. Zero-initialised = running, never stepped. */
typedef struct {
    bw_throttle_state_t state;
    double rate;         /* statements/s while not running */
    int signal;          /* the signal behind the state (bw_signal_t); -1 none */
    double value;        /* its value then */
    double level;        /* the level it passed: its threshold, or its critical level */
    int64_t since_ms;    /* wall clock: the state began */
    char why[256];       /* the reason in words, for logs and the API */
    int64_t last_step_us, quiet_since_us, critical_since_us;
    double trouble_rate; /* the rate it ran at when its latest trouble began: the climb's unit */
    int in_trouble;      /* a signal over, unknown or critical since the last calm step */
    int initialised;
    int pinned;          /* an operator holds the rate: bw_throttle_pin */
} bw_throttle_shard_t;

/* One step for the shard at now_us (monotonic) / now_ms (wall). cap: the rate in force
 * (0 = unlimited); observed: the statements/s it ran lately (where an unlimited shard
 * starts from when a signal first passes). readings[k] for every bw_signal_t. A shard's
 * first step (t zeroed: just assigned) with a signal over its threshold starts it at the
 * floor. Returns 1 when the state or the signal behind it changed (log it), else 0. */
int bw_throttle_step(const bw_throttle_limits_t *l, bw_throttle_shard_t *t, double cap, double observed,
                     const bw_signal_reading_t readings[BW_SIGNAL_KINDS], int64_t now_us, int64_t now_ms);

/* An operator pinned the shard's rate (its control record's pinned): running at its cap,
 * the reason says so, no signal moves it; the next bw_throttle_step after the pin is
 * lifted starts afresh. Returns 1 when the shard was not pinned before (log it). */
int bw_throttle_pin(bw_throttle_shard_t *t, int64_t now_ms);

/* The rate the shard's limiter runs at: the cap unless the mode is on and the shard is
 * not running, then the adaptive rate (never above a non-zero cap). */
double bw_throttle_rate(const bw_throttle_limits_t *l, const bw_throttle_shard_t *t, double cap);
/* 1 if the shard is paused by its throttle (critical, mode on). */
int bw_throttle_paused(const bw_throttle_limits_t *l, const bw_throttle_shard_t *t);

#endif
