/* quota.h — what one client may take of the proxy, so that no client takes another's share.
 *
 * Each client of the clients file (proxy/auth.h) may have, on POST /v1/batches:
 *   ops_per_second      ops it may submit per second
 *   bytes_per_second    request body bytes per second
 *   max_jobs_in_flight  its requests the proxy works on at once (decoding, waiting for
 *                       Kafka's acknowledgements); one more is refused at once
 * 0 or absent = no limit. The two rates are token buckets like the shards' (common/
 * ratelimit.h): up to one second of unused budget is kept for a burst, and a request
 * larger than that passes when the client owes nothing, the next ones then waiting until
 * it is paid for. A request over any quota is refused whole, takes nothing from the
 * budgets, and is answered 429 with Retry-After (whole seconds until it would pass).
 *
 * Budgets are kept per client name, so a reload of the clients file (SIGHUP) keeps what
 * each client used; the limits are read from the client at each request.
 * @locality any thread (one mutex). */
#ifndef BW_QUOTA_H
#define BW_QUOTA_H

#include <stddef.h>
#include <stdint.h>

#include "metrics.h"

typedef struct {
    double ops_per_second;   /* 0 = no limit */
    double bytes_per_second; /* 0 = no limit */
    int max_jobs_in_flight;  /* 0 = no limit */
} bw_quota_limits_t;

typedef struct bw_quota bw_quota_t;

bw_quota_t *bw_quota_new(void);
void bw_quota_free(bw_quota_t *q);

/* Admits a request of `ops` ops and `bytes` bytes from `client` at now_us (monotonic).
 * 0: admitted; its budgets are charged and it counts in flight until bw_quota_done.
 * 429: refused, charging nothing; *kind names the quota, *retry_after_s the whole seconds
 * (at least 1) after which the same request would pass, and why says so for the client. */
unsigned bw_quota_admit(bw_quota_t *q, const char *client, const bw_quota_limits_t *lim, double ops, double bytes,
                        int64_t now_us, bw_quota_kind_t *kind, int *retry_after_s, char *why, size_t why_size);
/* An admitted request of client is answered. */
void bw_quota_done(bw_quota_t *q, const char *client);

#endif
