#include "quota.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet.h"
#include "log.h"
#include "ratelimit.h"

/* One rate of a client: ops or bytes. */
typedef struct {
    bw_ratelimit_t bucket;
    double limit;  /* the client's, as the clients file has it (the last request's or listing's); 0 = none */
    double share;  /* of limit, this proxy's (1 alone) */
    double rate;   /* the bucket runs at limit x share; 0 = no limit */
    double asked;  /* since the last fleet fill, admitted or refused */
    double demand; /* per second, smoothed: what this proxy reports */
} rate_t;

typedef struct budget {
    struct budget *next;
    char *client; /* never freed before bw_quota_free: the fleet record points at it */
    rate_t ops, bytes;
    int listed;   /* a client of the clients file with a quota: reported at every fleet turn */
    int sharers;  /* proxies that shared its quota at the last fleet read (logged on change) */
    int in_flight;
} budget_t;

#define BUCKETS 256

const char *const bw_quota_kind_names[BW_QUOTA_KINDS] = {"ops_per_second", "bytes_per_second", "jobs_in_flight"};

/* @locks mu guards every budget; the demand records: the fleet turn's thread only */
struct bw_quota {
    pthread_mutex_t mu;
    budget_t *buckets[BUCKETS];
    int64_t filled_us; /* the last demand interval's end; 0: none yet */
    Bulkwrite__Internal__V1__ClientDemand *demand, **demand_ptrs; /* the last fill's, rec points at them */
    size_t demand_cap;
    bw_quota_share_fn share_fn; /* told each share, or NULL */
    void *share_ud;
};

void bw_quota_on_share(bw_quota_t *q, bw_quota_share_fn fn, void *ud) {
    q->share_fn = fn;
    q->share_ud = ud;
}

bw_quota_t *bw_quota_new(void) {
    bw_quota_t *q = calloc(1, sizeof(*q));
    if (!q) abort();
    pthread_mutex_init(&q->mu, NULL);
    return q;
}

void bw_quota_free(bw_quota_t *q) {
    if (!q) return;
    for (int i = 0; i < BUCKETS; i++)
        for (budget_t *b = q->buckets[i], *next; b; b = next) {
            next = b->next;
            free(b->client);
            free(b);
        }
    free(q->demand);
    free(q->demand_ptrs);
    pthread_mutex_destroy(&q->mu);
    free(q);
}

/* The client's budget, made on first use (alone: shares 1). @locks q->mu held */
static budget_t *budget(bw_quota_t *q, const char *client, int64_t now_us) {
    unsigned h = 5381;
    for (const char *p = client; *p; p++) h = h * 33 + (unsigned char)*p;
    budget_t **head = &q->buckets[h % BUCKETS];
    for (budget_t *b = *head; b; b = b->next)
        if (strcmp(b->client, client) == 0) return b;
    budget_t *b = calloc(1, sizeof(*b));
    if (!b || !(b->client = strdup(client))) abort();
    bw_ratelimit_init(&b->ops.bucket, 0, now_us);
    bw_ratelimit_init(&b->bytes.bucket, 0, now_us);
    b->ops.share = b->bytes.share = 1;
    b->next = *head;
    *head = b;
    return b;
}

/* Byte budgets count KiB: the buckets hold at most BW_RATE_MAX (1e6) permits per second. */
#define BYTES_PER_PERMIT 1024.0

/* The bucket at limit x share, as the clients file (a reload may change the limit) and
 * the fleet (the share) have it now; `unit` is what one permit stands for. */
static void follow(rate_t *r, double limit, double unit, int64_t now_us) {
    r->limit = limit;
    double rate = limit * r->share;
    if (r->rate == rate) return;
    if (r->rate == 0) bw_ratelimit_init(&r->bucket, rate / unit, now_us); /* from unlimited: a full second of burst */
    else bw_ratelimit_set_rate(&r->bucket, rate / unit, now_us);
    r->rate = rate;
}

static void follow_limits(budget_t *b, const bw_quota_limits_t *lim, int64_t now_us) {
    follow(&b->ops, lim->ops_per_second, 1, now_us);
    follow(&b->bytes, lim->bytes_per_second, BYTES_PER_PERMIT, now_us);
}

static int whole_seconds(int64_t us) { return us <= 0 ? 1 : (int)((us + 999999) / 1000000); }

/* "over its quota of 2000 ops per second", and this proxy's part of it when it shares. */
static void over_quota(char *why, size_t why_size, const char *client, const rate_t *r, const char *unit,
                       int retry_after_s) {
    char part[96] = "";
    if (r->share < 1)
        snprintf(part, sizeof(part), " (this proxy's share of the proxies': %.4g)", r->rate);
    snprintf(why, why_size, "client \"%s\" is over its quota of %.17g %s per second%s; resend after %d s", client,
             r->limit, unit, part, retry_after_s);
}

unsigned bw_quota_admit(bw_quota_t *q, const char *client, const bw_quota_limits_t *lim, double ops, double bytes,
                        int64_t now_us, bw_quota_kind_t *kind, int *retry_after_s, char *why, size_t why_size) {
    pthread_mutex_lock(&q->mu);
    budget_t *b = budget(q, client, now_us);
    follow_limits(b, lim, now_us);
    b->ops.asked += ops; /* the demand counts what it asks, admitted or not */
    b->bytes.asked += bytes;
    unsigned status = 429;
    if (lim->max_jobs_in_flight > 0 && b->in_flight >= lim->max_jobs_in_flight) {
        *kind = BW_QUOTA_JOBS;
        *retry_after_s = 1;
        snprintf(why, why_size, "client \"%s\" has %d requests in flight, its max_jobs_in_flight; resend after one is "
                 "answered", client, b->in_flight);
        goto out;
    }
    int64_t ops_wait = b->ops.rate > 0 ? bw_ratelimit_wait(&b->ops.bucket, now_us) : 0;
    int64_t bytes_wait = b->bytes.rate > 0 ? bw_ratelimit_wait(&b->bytes.bucket, now_us) : 0;
    if (ops_wait > 0 || bytes_wait > 0) {
        int by_ops = ops_wait >= bytes_wait;
        *kind = by_ops ? BW_QUOTA_OPS : BW_QUOTA_BYTES;
        *retry_after_s = whole_seconds(by_ops ? ops_wait : bytes_wait);
        over_quota(why, why_size, client, by_ops ? &b->ops : &b->bytes, by_ops ? "ops" : "bytes", *retry_after_s);
        goto out;
    }
    if (b->ops.rate > 0) bw_ratelimit_reserve(&b->ops.bucket, ops, now_us);
    if (b->bytes.rate > 0) bw_ratelimit_reserve(&b->bytes.bucket, bytes / BYTES_PER_PERMIT, now_us);
    b->in_flight++;
    status = 0;
out:
    pthread_mutex_unlock(&q->mu);
    return status;
}

void bw_quota_done(bw_quota_t *q, const char *client) {
    pthread_mutex_lock(&q->mu);
    budget_t *b = budget(q, client, 0);
    if (b->in_flight > 0) b->in_flight--;
    pthread_mutex_unlock(&q->mu);
}

/* ---- one budget across the fleet's proxies ------------------------------------------ */

static double clean(double d) { return d >= 0 ? (d < 1e15 ? d : 1e15) : 0; /* NaN: 0 */ }

/* What the members take at water level w: each what it asks up to w, at least fl. */
static double taken(const double *demand, size_t n, double fl, double w) {
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += fmax(fl, fmin(clean(demand[i]), w));
    return sum;
}

double bw_quota_share(double limit, const double *demand, size_t n, size_t self, double floor) {
    if (n <= 1 || !(limit > 0) || self >= n) return 1;
    floor = floor > 0 ? (floor < 1 ? floor : 1) : 0;
    double fl = floor * limit / (double)n, top = 0;
    for (size_t i = 0; i < n; i++) top = fmax(top, clean(demand[i]));
    double asked = taken(demand, n, fl, top), mine = clean(demand[self]);
    if (asked <= limit) return (fmax(fl, mine) + (limit - asked) / (double)n) / limit; /* the rest split evenly */
    /* the water level w where the members take the whole limit: taken(fl) = floor x limit
     * <= limit < taken(top); halving the interval, the same steps wherever it is computed */
    double lo = fl, hi = top;
    for (int i = 0; i < 64; i++) {
        double mid = lo + (hi - lo) / 2;
        if (taken(demand, n, fl, mid) > limit) hi = mid;
        else lo = mid;
    }
    return fmax(fl, fmin(mine, lo)) / taken(demand, n, fl, lo);
}

void bw_quota_unlist_all(bw_quota_t *q) {
    pthread_mutex_lock(&q->mu);
    for (int i = 0; i < BUCKETS; i++)
        for (budget_t *b = q->buckets[i]; b; b = b->next) b->listed = 0;
    pthread_mutex_unlock(&q->mu);
}

void bw_quota_list(bw_quota_t *q, const char *client, const bw_quota_limits_t *lim, int64_t now_us) {
    if (lim->ops_per_second <= 0 && lim->bytes_per_second <= 0) return;
    pthread_mutex_lock(&q->mu);
    budget_t *b = budget(q, client, now_us);
    follow_limits(b, lim, now_us);
    b->listed = 1;
    pthread_mutex_unlock(&q->mu);
}

/* The interval's rate into the demand, which falls at once (a proxy the client leaves
 * gives its share back with its next record) and rises smoothed; asked starts again. */
static void smooth(rate_t *r, double seconds) {
    double rate = r->asked / seconds;
    r->demand = rate < r->demand ? rate : r->demand + BW_QUOTA_SMOOTHING * (rate - r->demand);
    r->asked = 0;
}

void bw_quota_fleet_fill(bw_quota_t *q, Bulkwrite__Internal__V1__FleetMember *rec, int64_t now_us) {
    pthread_mutex_lock(&q->mu);
    double seconds = (double)(now_us - q->filled_us) / 1e6;
    int close = q->filled_us && seconds >= BW_FLEET_INTERVAL_MS / 2000.0;
    int first = !q->filled_us;
    if (close || first) q->filled_us = now_us;
    size_t n = 0;
    for (int i = 0; i < BUCKETS; i++)
        for (budget_t *b = q->buckets[i]; b; b = b->next) {
            if (close) smooth(&b->ops, seconds), smooth(&b->bytes, seconds);
            if (first) b->ops.asked = b->bytes.asked = 0; /* from here on */
            if (!b->listed) continue;
            if (n == q->demand_cap) {
                q->demand_cap = q->demand_cap ? 2 * q->demand_cap : 16;
                q->demand = realloc(q->demand, q->demand_cap * sizeof(*q->demand));
                q->demand_ptrs = realloc(q->demand_ptrs, q->demand_cap * sizeof(*q->demand_ptrs));
                if (!q->demand || !q->demand_ptrs) abort();
            }
            Bulkwrite__Internal__V1__ClientDemand *d = &q->demand[n++];
            bulkwrite__internal__v1__client_demand__init(d);
            d->client = b->client;
            d->ops_per_second = b->ops.demand;
            d->bytes_per_second = b->bytes.demand;
        }
    for (size_t i = 0; i < n; i++) q->demand_ptrs[i] = &q->demand[i]; /* after the last realloc */
    pthread_mutex_unlock(&q->mu);
    rec->demand = n ? q->demand_ptrs : NULL;
    rec->n_demand = n;
}

/* The client's demand in member m's record: 1 with *ops and *bytes (0 when the record is
 * older than BW_QUOTA_DEMAND_FRESH_MS), 0 when m does not list it. */
static int demand_of(const Bulkwrite__Internal__V1__FleetMember *m, const char *client, int64_t now_ms, double *ops,
                     double *bytes) {
    for (size_t i = 0; i < m->n_demand; i++) {
        const Bulkwrite__Internal__V1__ClientDemand *d = m->demand[i];
        if (!d->client || strcmp(d->client, client)) continue;
        int fresh = now_ms - m->seen_at_ms <= BW_QUOTA_DEMAND_FRESH_MS;
        *ops = fresh ? d->ops_per_second : 0;
        *bytes = fresh ? d->bytes_per_second : 0;
        return 1;
    }
    return 0;
}

/* Whether m's record counts: another live proxy that agrees. */
static int sharer(const Bulkwrite__Internal__V1__FleetMember *m, const char *self, int64_t now_ms) {
    return m->role && !strcmp(m->role, "proxy") && m->instance && strcmp(m->instance, self) && m->agrees &&
           now_ms - m->seen_at_ms <= BW_FLEET_STALE_MS;
}

void bw_quota_fleet_read(bw_quota_t *q, const char *self, Bulkwrite__Internal__V1__FleetMember *const *members, size_t n,
                         int64_t now_ms, int64_t now_us) {
    double *ops = malloc((n + 1) * sizeof(*ops)), *bytes = malloc((n + 1) * sizeof(*bytes));
    if (!ops || !bytes) abort();
    pthread_mutex_lock(&q->mu);
    for (int i = 0; i < BUCKETS; i++)
        for (budget_t *b = q->buckets[i]; b; b = b->next) {
            if (!b->listed) continue;
            size_t cnt = 1; /* this proxy first */
            ops[0] = b->ops.demand;
            bytes[0] = b->bytes.demand;
            for (size_t m = 0; m < n; m++)
                if (sharer(members[m], self, now_ms) &&
                    demand_of(members[m], b->client, now_ms, &ops[cnt], &bytes[cnt]))
                    cnt++;
            b->ops.share = bw_quota_share(b->ops.limit, ops, cnt, 0, BW_QUOTA_FLOOR);
            b->bytes.share = bw_quota_share(b->bytes.limit, bytes, cnt, 0, BW_QUOTA_FLOOR);
            follow(&b->ops, b->ops.limit, 1, now_us);
            follow(&b->bytes, b->bytes.limit, BYTES_PER_PERMIT, now_us);
            if ((int)cnt != b->sharers && (b->sharers || cnt > 1))
                bw_log(BW_LOG_INFO, "quota", -1, NULL, "client \"%s\": its quota is shared by %zu live prox%s", b->client,
                       cnt, cnt == 1 ? "y (this one: all of it)" : "ies");
            b->sharers = (int)cnt;
            if (q->share_fn) /* lock order: quota, then the hook's */
                q->share_fn(q->share_ud, b->client, b->ops.limit > 0 ? b->ops.share : -1,
                            b->bytes.limit > 0 ? b->bytes.share : -1);
        }
    pthread_mutex_unlock(&q->mu);
    free(ops);
    free(bytes);
}

void bw_quota_shares(bw_quota_t *q, const char *client, double *ops_share, double *bytes_share) {
    pthread_mutex_lock(&q->mu);
    budget_t *b = budget(q, client, 0);
    *ops_share = b->ops.share;
    *bytes_share = b->bytes.share;
    pthread_mutex_unlock(&q->mu);
}
