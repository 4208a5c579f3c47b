/* ratelimit.h — a smooth token bucket with the semantics of Guava's RateLimiter
 * (SmoothBursty): permits are handed out evenly at `rate` per second; up to one second
 * of unused permits is stored for a burst; a request is paid for by the *next* one, so
 * the first acquire after idle is immediate.
 *
 * The clock is injected (microseconds, monotonic) so tests drive time.
 * @locality not thread-safe: one owner (the consumer's dispatcher thread). */
#ifndef BW_RATELIMIT_H
#define BW_RATELIMIT_H

#include <stdint.h>

typedef struct {
    double rate;              /* permits per second; <= 0 = unlimited */
    double stable_interval_us;
    double stored_permits;
    double max_permits;
    double max_burst_seconds;
    int64_t next_free_us;     /* when the next permit may be handed out */
} bw_ratelimit_t;

void bw_ratelimit_init(bw_ratelimit_t *rl, double rate, int64_t now_us);
/* Changes the rate, keeping stored permits in proportion (as Guava does); a wait owed
 * at the old rate is cut to at most one interval of the new one. */
void bw_ratelimit_set_rate(bw_ratelimit_t *rl, double rate, int64_t now_us);

/* Takes `permits` now if the limiter allows it (Guava's tryAcquire with no timeout) and
 * returns 0; otherwise returns how many microseconds remain until it would, and takes
 * nothing. */
int64_t bw_ratelimit_try_acquire(bw_ratelimit_t *rl, double permits, int64_t now_us);

/* Reserves `permits` unconditionally and returns the microseconds to wait before using
 * them (Guava's acquire(), minus the sleep). */
int64_t bw_ratelimit_reserve(bw_ratelimit_t *rl, double permits, int64_t now_us);

#endif
