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
 *
 * The rates are the client's across the fleet: every live proxy takes a share of each,
 * and its buckets run at limit x share. Each proxy's presence record (control/fleet.h,
 * every 2 s) carries what each listed client asked of it lately, its demand (ops and
 * bytes per second, admitted or refused; it falls at once and rises smoothed); from the demands of the live,
 * agreeing proxies (its own as it just published it), each proxy takes the same max-min
 * fair split (bw_quota_share): a proxy is given what the client asks of it while that is
 * less than an even part, the others split the rest evenly, what nobody asks for is
 * split evenly, and each keeps at least BW_QUOTA_FLOOR of an even part, so a proxy the
 * client just turned to is not shut out until the next record. A client that uses one
 * proxy of N gets 1 - BW_QUOTA_FLOOR x (N-1)/N of its quota there after a few records;
 * one that alternates gets 1/N at each. Alone, or hearing from no other proxy for
 * BW_FLEET_STALE_MS, a proxy takes the whole quota, as a lone proxy does. A record older
 * than BW_QUOTA_DEMAND_FRESH_MS keeps its member only the floor: a proxy killed is given
 * up before it is gone. max_jobs_in_flight is per proxy.
 * @locality any thread (one mutex); the fleet functions: the fleet turn's thread. */
#ifndef BW_QUOTA_H
#define BW_QUOTA_H

#include <stddef.h>
#include <stdint.h>

#include "bulkwrite/internal/v1/records.pb-c.h"

typedef struct {
    double ops_per_second;   /* 0 = no limit */
    double bytes_per_second; /* 0 = no limit */
    int max_jobs_in_flight;  /* 0 = no limit */
} bw_quota_limits_t;

typedef struct bw_quota bw_quota_t;

/* The quotas of a client, as the label quota="..." of its metrics names them. */
typedef enum { BW_QUOTA_OPS, BW_QUOTA_BYTES, BW_QUOTA_JOBS, BW_QUOTA_KINDS } bw_quota_kind_t;
extern const char *const bw_quota_kind_names[BW_QUOTA_KINDS]; /* "ops_per_second", … */

bw_quota_t *bw_quota_new(void);
/* Each fleet read tells fn this proxy's share (0..1] of each client's ops and bytes quotas
 * (negative: the client has no such quota), under the quota's lock. */
typedef void (*bw_quota_share_fn)(void *ud, const char *client, double ops_share, double bytes_share);
void bw_quota_on_share(bw_quota_t *q, bw_quota_share_fn fn, void *ud);
void bw_quota_free(bw_quota_t *q);

/* Admits a request of `ops` ops and `bytes` bytes from `client` at now_us (monotonic).
 * 0: admitted; its budgets are charged and it counts in flight until bw_quota_done.
 * 429: refused, charging nothing; *kind names the quota, *retry_after_s the whole seconds
 * (at least 1) after which the same request would pass, and why says so for the client. */
unsigned bw_quota_admit(bw_quota_t *q, const char *client, const bw_quota_limits_t *lim, double ops, double bytes,
                        int64_t now_us, bw_quota_kind_t *kind, int *retry_after_s, char *why, size_t why_size);
/* An admitted request of client is answered. */
void bw_quota_done(bw_quota_t *q, const char *client);

/* ---- one budget across the fleet's proxies ------------------------------------------ */

#define BW_QUOTA_FLOOR 0.05              /* of an even part: what each proxy keeps at least */
#define BW_QUOTA_SMOOTHING 0.6           /* the weight of the last interval in a rising demand */
#define BW_QUOTA_DEMAND_FRESH_MS 6000    /* a record older keeps its proxy the floor only */

/* The share (0 to 1) of limit that member `self` of n takes, from each member's demand
 * (per second, in limit's unit; not a number or negative: 0): max-min fair as above, each
 * member at least floor x limit / n; the n shares sum to 1 whoever computes them. 1 when
 * n <= 1 or there is no limit; 1/n when nobody asks for anything. */
double bw_quota_share(double limit, const double *demand, size_t n, size_t self, double floor);

/* The clients with a quota, as the clients file has them (again after a SIGHUP): this
 * proxy reports each, asked or not, so that the others count its share from the start.
 * bw_quota_unlist_all forgets the old list first; bw_quota_list adds one client (its
 * budget made if it has none, with these limits). */
void bw_quota_unlist_all(bw_quota_t *q);
void bw_quota_list(bw_quota_t *q, const char *client, const bw_quota_limits_t *lim, int64_t now_us);

/* Closes the demand interval at now_us (one shorter than half BW_FLEET_INTERVAL_MS is
 * left open) and sets rec's demand to every listed client's; rec points into q until
 * the next call or bw_quota_free. */
void bw_quota_fleet_fill(bw_quota_t *q, Bulkwrite__Internal__V1__FleetMember *rec, int64_t now_us);
/* Sets every listed client's shares from the members' records (wall clock now_ms:
 * proxies only, that agree, seen within BW_FLEET_STALE_MS, that list the client; self's
 * own record skipped, its demand from the last fill instead); the buckets follow at
 * now_us. Logs a client's count of proxies when it changes. */
void bw_quota_fleet_read(bw_quota_t *q, const char *self, Bulkwrite__Internal__V1__FleetMember *const *members, size_t n,
                         int64_t now_ms, int64_t now_us);
/* The client's shares now (ops, bytes; 1 for an unknown client). */
void bw_quota_shares(bw_quota_t *q, const char *client, double *ops_share, double *bytes_share);

#endif
