/* proxy_metrics.h — the proxy's metric families: one row each in proxy_metrics.c, named
 * by this enum in the order /metrics shows them (the engine: common/metrics.h).
 * Callers update them with bw_metrics_add, _set and _observe, indexed as each row's
 * comment in the table says; the helpers below change several rows under one lock.
 * @locality any thread. */
#ifndef BW_PROXY_METRICS_H
#define BW_PROXY_METRICS_H

#include <stdint.h>

#include "jobs.h"
#include "timers.h"
#include "metrics.h"

typedef enum {
    BW_PM_REQUESTS,
    BW_PM_OPS_ACCEPTED,
    BW_PM_OPS_REJECTED,
    BW_PM_KAFKA_PRODUCE_ERRORS,
    BW_PM_KAFKA_MESSAGES,
    BW_PM_PARTS_TAKEN_BEFORE,
    BW_PM_LINGER_FLUSHES,
    BW_PM_PRODUCERS_REBUILT,
    BW_PM_BACKLOG_REFUSED_OPS,
    BW_PM_ACCEPT_LATENCY_SECONDS,
    BW_PM_CLIENT_FORBIDDEN,
    BW_PM_CLIENT_OVER_QUOTA,
    BW_PM_CLIENT_QUOTA_SHARE,
    BW_PM_CLIENT_ACCEPTED_OPS,
    BW_PM_CLIENT_REQUEST_BYTES,
    BW_PM_CLIENT_OPS_OUT_OF_SCOPE,
    BW_PM_JOBS_INDEX_ENTRIES,
    BW_PM_JOBS_INDEX_BYTES,
    BW_PM_JOBS_INDEX_MAX_BYTES,
    BW_PM_JOBS_INDEX_EVICTED,
    BW_PM_JOBS_READ_FROM_TOPIC,
    BW_PM_HELD_JOB_RECORDS,
    BW_PM_HELD_JOB_RECORDS_DUE,
    BW_PM_HELD_BYTES,
    BW_PM_HELD_BATCHES_RELEASED,
    BW_PM_HELD_RELEASE_LATENESS,
    BW_PM_ROWS
} bw_proxy_metric_t;

extern const bw_metrics_table_t bw_proxy_metrics;

/* A request answered `status` (counted once), and what it did: ops accepted, rejected
 * and not accepted, messages produced, its time to the reply. */
void bw_proxy_metrics_request(bw_metrics_t *m, unsigned status, uint64_t accepted, uint64_t rejected,
                              uint64_t not_accepted, uint64_t messages, int64_t latency_us);
/* A request of the client (proxy/auth.h; its name is a safe label) passed its quotas
 * (bytes: its body) and had `ops` accepted. */
void bw_proxy_metrics_client_accepted(bw_metrics_t *m, const char *client, uint64_t ops, uint64_t bytes);
/* A client was refused: `requests` answered 403 for its role, `ops` refused one by one
 * outside its scopes. */
void bw_proxy_metrics_client_refused(bw_metrics_t *m, const char *client, uint64_t requests, uint64_t ops);
/* The job index (proxy/jobs.h) as of now, and the records that hold batches. */
/* This proxy's share of a client's ops and bytes quotas (a bw_quota_share_fn; ud is the
 * bw_metrics_t): negative hides the series. */
void bw_proxy_metrics_quota_share(void *ud, const char *client, double ops_share, double bytes_share);
void bw_proxy_metrics_jobs(bw_metrics_t *m, const bw_jobs_stats_t *js, const bw_timers_stats_t *ts);

#endif
