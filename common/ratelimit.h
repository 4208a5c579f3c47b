/* ratelimit.h — a smooth token bucket with the semantics of Guava's RateLimiter
 * (SmoothBursty): permits are handed out evenly at `rate` per second; up to one second
 * of unused permits is stored for a burst; a request is paid for by the *next* one, so
 * the first acquire after idle is immediate.
 *
 * The clock is injected (microseconds, monotonic) so tests drive time.
 * @locality not thread-safe: one owner (the consumer's dispatcher thread). */
#ifndef BW_RATELIMIT_H
#define BW_RATELIMIT_H

#include <stddef.h>
#include <stdint.h>

/* A shard's budget is statements per second (`rate`: every SQL statement a job will run,
 * as planned from its messages' headers when it is handed out, takes one permit; a retried
 * job pays again, and rows retried one by one after a data error are not charged) and, optionally, rows per second (`row_rate`: a statement takes one permit
 * per row it carries); whichever binds first holds the shard back.
 *
 * The statement rates bulkwrite accepts; 0 means unlimited. The least is one statement per
 * 1,000 s (~17 min): slower than that a shard is paused in all but name (pause it
 * instead), and one interval (1e6 / rate us) stays far inside int64 microseconds. The most
 * is one statement per microsecond, beyond what any shard can apply. Config, admin API
 * and bwctl refuse anything else through bw_ratelimit_check(). */
#define BW_RATE_MIN 0.001
#define BW_RATE_MAX 1e6
/* "0.001 to 1e6", for help texts and the generated config docs */
#define BW_RATE_STR_(x) #x
#define BW_RATE_STR(x) BW_RATE_STR_(x)
#define BW_RATE_BOUNDS_TEXT BW_RATE_STR(BW_RATE_MIN) " to " BW_RATE_STR(BW_RATE_MAX)

/* The row rates bulkwrite accepts; 0 means no row budget (statements alone limit the
 * shard). The least is one row per second: one 500-row statement every 500 s. The most,
 * 1e6 rows/s, is several times what one MariaDB shard applies (about 150,000 rows/s of
 * 500-row INSERTs, 230,000 of 1,000-id DELETEs measured on 2 cores): above it, use 0.
 * Both lie within the statement bounds, so a bw_ratelimit_t charged in rows never clamps a
 * row rate these bounds accept (a unit test checks it: C11 has no floating static_assert). Refused otherwise through bw_ratelimit_check_rows(). */
#define BW_ROW_RATE_MIN 1
#define BW_ROW_RATE_MAX 1e6
#define BW_ROW_RATE_BOUNDS_TEXT BW_RATE_STR(BW_ROW_RATE_MIN) " to " BW_RATE_STR(BW_ROW_RATE_MAX)

/* 0 if `rate` is 0 (unlimited) or within BW_RATE_MIN..BW_RATE_MAX statements per second;
 * otherwise -1 and errstr says why, naming the bounds ("rate 1e-13 is out of range: ..."). */
int bw_ratelimit_check(double rate, char *errstr, size_t errstr_size);
/* The same for a row rate: 0 (no row budget) or BW_ROW_RATE_MIN..BW_ROW_RATE_MAX rows per
 * second ("row_rate 0.5 is out of range: ..."). */
int bw_ratelimit_check_rows(double row_rate, char *errstr, size_t errstr_size);

/* The nearest rate bw_ratelimit_check() accepts: below the minimum it is the minimum, above
 * the maximum (or +inf) the maximum. A rate that cannot be read (NaN, negative) is the
 * minimum: only an explicit 0 lifts the limit. */
double bw_ratelimit_clamp(double rate);
/* The nearest row rate bw_ratelimit_check_rows() accepts, by the same rules. */
double bw_ratelimit_clamp_rows(double row_rate);

typedef struct {
    double rate;              /* permits per second, clamped by bw_ratelimit_clamp(); 0 = unlimited */
    double stable_interval_us;
    double stored_permits;
    double max_permits;
    double max_burst_seconds;
    int64_t next_free_us;     /* when the next permit may be handed out */
} bw_ratelimit_t;

/* Any double is safe as `rate`: it is clamped (bw_ratelimit_clamp), never unlimited
 * unless it is 0. */
void bw_ratelimit_init(bw_ratelimit_t *rl, double rate, int64_t now_us);
/* Changes the rate (clamped as above), keeping stored permits in proportion (as Guava does); a wait owed
 * at the old rate is cut to at most one interval of the new one. */
void bw_ratelimit_set_rate(bw_ratelimit_t *rl, double rate, int64_t now_us);

/* Microseconds until a permit may be handed out (0: now, or unlimited). */
int64_t bw_ratelimit_wait(const bw_ratelimit_t *rl, int64_t now_us);
/* Takes `permits` now if the limiter allows it (Guava's tryAcquire with no timeout) and
 * returns 0; otherwise returns how many microseconds remain until it would, and takes
 * nothing. */
int64_t bw_ratelimit_try_acquire(bw_ratelimit_t *rl, double permits, int64_t now_us);

/* Reserves `permits` unconditionally and returns the microseconds to wait before using
 * them (Guava's acquire(), minus the sleep). */
int64_t bw_ratelimit_reserve(bw_ratelimit_t *rl, double permits, int64_t now_us);

#endif
