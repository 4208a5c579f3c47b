#include "quota.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ratelimit.h"

typedef struct budget {
    struct budget *next;
    char *client;
    bw_ratelimit_t ops, bytes;
    double ops_rate, bytes_rate; /* the limits (ops/s, bytes/s) the buckets were set to; 0 = none */
    int in_flight;
} budget_t;

#define BUCKETS 256

/* @locks mu guards every budget */
struct bw_quota {
    pthread_mutex_t mu;
    budget_t *buckets[BUCKETS];
};

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
    pthread_mutex_destroy(&q->mu);
    free(q);
}

/* The client's budget, made on first use. @locks q->mu held */
static budget_t *budget(bw_quota_t *q, const char *client, int64_t now_us) {
    unsigned h = 5381;
    for (const char *p = client; *p; p++) h = h * 33 + (unsigned char)*p;
    budget_t **head = &q->buckets[h % BUCKETS];
    for (budget_t *b = *head; b; b = b->next)
        if (strcmp(b->client, client) == 0) return b;
    budget_t *b = calloc(1, sizeof(*b));
    if (!b || !(b->client = strdup(client))) abort();
    bw_ratelimit_init(&b->ops, 0, now_us);
    bw_ratelimit_init(&b->bytes, 0, now_us);
    b->next = *head;
    *head = b;
    return b;
}

/* Byte budgets count KiB: the buckets hold at most BW_RATE_MAX (1e6) permits per second. */
#define BYTES_PER_PERMIT 1024.0

/* A bucket's limit as the clients file has it now (a reload may change it); `unit` is
 * what one permit stands for. */
static void follow(bw_ratelimit_t *rl, double *was, double limit, double unit, int64_t now_us) {
    if (*was == limit) return;
    if (*was == 0) bw_ratelimit_init(rl, limit / unit, now_us); /* from unlimited: a full second of burst */
    else bw_ratelimit_set_rate(rl, limit / unit, now_us);
    *was = limit;
}

static int whole_seconds(int64_t us) { return us <= 0 ? 1 : (int)((us + 999999) / 1000000); }

unsigned bw_quota_admit(bw_quota_t *q, const char *client, const bw_quota_limits_t *lim, double ops, double bytes,
                        int64_t now_us, bw_quota_kind_t *kind, int *retry_after_s, char *why, size_t why_size) {
    pthread_mutex_lock(&q->mu);
    budget_t *b = budget(q, client, now_us);
    follow(&b->ops, &b->ops_rate, lim->ops_per_second, 1, now_us);
    follow(&b->bytes, &b->bytes_rate, lim->bytes_per_second, BYTES_PER_PERMIT, now_us);
    unsigned status = 429;
    if (lim->max_jobs_in_flight > 0 && b->in_flight >= lim->max_jobs_in_flight) {
        *kind = BW_QUOTA_JOBS;
        *retry_after_s = 1;
        snprintf(why, why_size, "client \"%s\" has %d requests in flight, its max_jobs_in_flight; resend after one is "
                 "answered", client, b->in_flight);
        goto out;
    }
    int64_t ops_wait = b->ops_rate > 0 ? bw_ratelimit_wait(&b->ops, now_us) : 0;
    int64_t bytes_wait = b->bytes_rate > 0 ? bw_ratelimit_wait(&b->bytes, now_us) : 0;
    if (ops_wait > 0 || bytes_wait > 0) {
        int by_ops = ops_wait >= bytes_wait;
        *kind = by_ops ? BW_QUOTA_OPS : BW_QUOTA_BYTES;
        *retry_after_s = whole_seconds(by_ops ? ops_wait : bytes_wait);
        snprintf(why, why_size, "client \"%s\" is over its quota of %.17g %s per second; resend after %d s", client,
                 by_ops ? b->ops_rate : b->bytes_rate, by_ops ? "ops" : "bytes", *retry_after_s);
        goto out;
    }
    if (b->ops_rate > 0) bw_ratelimit_reserve(&b->ops, ops, now_us);
    if (b->bytes_rate > 0) bw_ratelimit_reserve(&b->bytes, bytes / BYTES_PER_PERMIT, now_us);
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
