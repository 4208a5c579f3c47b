#include "ratelimit.h"

#include <math.h>
#include <stdio.h>

/* The bounds of one kind of rate, and the words its errors use. */
typedef struct {
    const char *name; /* the field: "rate", "row_rate" */
    double min, max;
    const char *zero_means, *bounds, *unit, *hint;
} rate_kind_t;

static const rate_kind_t statements = {
    "rate", BW_RATE_MIN, BW_RATE_MAX, "unlimited", BW_RATE_BOUNDS_TEXT, "statements per second",
    " (one statement per 1000 s at the least; pause a shard to stop it)"};
static const rate_kind_t rows = {"row_rate", BW_ROW_RATE_MIN, BW_ROW_RATE_MAX, "no row budget",
                                 BW_ROW_RATE_BOUNDS_TEXT, "rows per second", " (pause a shard to stop it)"};

static int check(const rate_kind_t *k, double rate, char *errstr, size_t errstr_size) {
    if (rate == 0 || (rate >= k->min && rate <= k->max)) return 0;
    snprintf(errstr, errstr_size, "%s %g is out of range: use 0 (%s) or %s %s%s", k->name, rate, k->zero_means,
             k->bounds, k->unit, k->hint);
    return -1;
}

static double clamp(const rate_kind_t *k, double rate) {
    if (rate == 0) return 0;
    if (isnan(rate) || rate < k->min) return k->min;
    return rate > k->max ? k->max : rate;
}

int bw_ratelimit_check(double rate, char *errstr, size_t errstr_size) {
    return check(&statements, rate, errstr, errstr_size);
}

int bw_ratelimit_check_rows(double row_rate, char *errstr, size_t errstr_size) {
    return check(&rows, row_rate, errstr, errstr_size);
}

double bw_ratelimit_clamp(double rate) { return clamp(&statements, rate); }

double bw_ratelimit_clamp_rows(double row_rate) { return clamp(&rows, row_rate); }

static void resync(bw_ratelimit_t *rl, int64_t now_us) {
    if (now_us > rl->next_free_us) {
        double fresh = (double)(now_us - rl->next_free_us) / rl->stable_interval_us;
        rl->stored_permits += fresh;
        if (rl->stored_permits > rl->max_permits) rl->stored_permits = rl->max_permits;
        rl->next_free_us = now_us;
    }
}

void bw_ratelimit_init(bw_ratelimit_t *rl, double rate, int64_t now_us) {
    rl->max_burst_seconds = 1.0;
    rl->stored_permits = 0;
    rl->max_permits = 0;
    rl->next_free_us = now_us;
    rl->rate = 0;
    rl->stable_interval_us = 1;
    bw_ratelimit_set_rate(rl, rate, now_us);
}

void bw_ratelimit_set_rate(bw_ratelimit_t *rl, double rate, int64_t now_us) {
    if (rl->rate > 0) resync(rl, now_us);
    double old_max = rl->max_permits;
    rate = bw_ratelimit_clamp(rate);
    rl->rate = rate;
    if (rate == 0) {
        rl->next_free_us = now_us;
        rl->stored_permits = 0;
        rl->max_permits = 0;
        return;
    }
    rl->stable_interval_us = 1e6 / rate;
    rl->max_permits = rl->max_burst_seconds * rate;
    /* unlike Guava, a debt run up at the old rate is capped at one new interval: an
     * operator who lifts a shard from 0.001 to 100 statements/s expects it now, not in
     * 1,000 s */
    int64_t cap = now_us + (int64_t)rl->stable_interval_us;
    if (rl->next_free_us > cap) rl->next_free_us = cap;
    rl->stored_permits = old_max > 0 ? rl->stored_permits * rl->max_permits / old_max : 0;
}

int64_t bw_ratelimit_reserve(bw_ratelimit_t *rl, double permits, int64_t now_us) {
    if (rl->rate <= 0) return 0;
    if (!(permits > 0)) permits = 0; /* NaN or negative: nothing to pay for */
    resync(rl, now_us);
    int64_t wait = rl->next_free_us > now_us ? rl->next_free_us - now_us : 0;
    double from_store = permits < rl->stored_permits ? permits : rl->stored_permits;
    double fresh = permits - from_store;
    /* saturates: a huge or NaN permit count must not wrap the clock into "free now" */
    double debt_us = fresh * rl->stable_interval_us;
    if (!(debt_us >= 0)) debt_us = 0;
    rl->next_free_us = debt_us < (double)(INT64_MAX - rl->next_free_us) ? rl->next_free_us + (int64_t)debt_us
                                                                        : INT64_MAX;
    rl->stored_permits -= from_store;
    return wait;
}

int64_t bw_ratelimit_wait(const bw_ratelimit_t *rl, int64_t now_us) {
    return rl->rate > 0 && rl->next_free_us > now_us ? rl->next_free_us - now_us : 0;
}

int64_t bw_ratelimit_try_acquire(bw_ratelimit_t *rl, double permits, int64_t now_us) {
    if (rl->rate <= 0) return 0;
    if (rl->next_free_us > now_us) return rl->next_free_us - now_us;
    bw_ratelimit_reserve(rl, permits, now_us);
    return 0;
}
