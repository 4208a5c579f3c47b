/* metrics.h — counters, gauges and histograms, rendered in Prometheus text format.
 *
 * Each daemon has one fixed set: the table in metrics.c (bw_metrics_def) names every
 * series with its type, labels, help and how its samples are read; it renders /metrics
 * and the metric list of docs/api.md (`bwctl metrics-doc`, checked by `make docs-check`).
 * Updates take a mutex per call — per request or per batch, never per row.
 * @locality any thread. */
#ifndef BW_METRICS_H
#define BW_METRICS_H

#include <stdint.h>

#include "buf.h"
#include "config.h"
#include "db.h"

typedef enum { BW_METRICS_PROXY, BW_METRICS_CONSUMER } bw_metrics_role_t;

typedef struct bw_metrics bw_metrics_t;

typedef enum { BW_METRIC_COUNTER, BW_METRIC_GAUGE, BW_METRIC_HISTOGRAM } bw_metric_type_t;
/* Which daemons show a series: bit flags of bw_metrics_role_t. */
#define BW_METRIC_ROLE(role) (1u << (role))
#define BW_METRIC_PROXY BW_METRIC_ROLE(BW_METRICS_PROXY)
#define BW_METRIC_CONSUMER BW_METRIC_ROLE(BW_METRICS_CONSUMER)
#define BW_METRIC_BOTH (BW_METRIC_PROXY | BW_METRIC_CONSUMER)

/* One metric family, as the table in metrics.c describes it (each row also says how its
 * samples are read, which stays in metrics.c). */
typedef struct {
    const char *name;
    bw_metric_type_t type;
    const char *labels; /* the samples' label names, "shard,kind" ("" for none) */
    unsigned roles;     /* BW_METRIC_PROXY, _CONSUMER or _BOTH */
    const char *help;   /* the HELP line (no backslash, no newline) */
    const char *doc;    /* its meaning in docs/api.md (no "|") */
} bw_metric_def_t;

/* Row i of the table (in the order /metrics shows them), NULL past its end. */
const bw_metric_def_t *bw_metrics_def(size_t i);

bw_metrics_t *bw_metrics_new(const bw_config_t *conf, bw_metrics_role_t role);
void bw_metrics_destroy(bw_metrics_t *m);

/* proxy */
void bw_metrics_count_status(bw_metrics_t *m, unsigned status);
void bw_metrics_count_request(bw_metrics_t *m, unsigned status, uint64_t accepted, uint64_t rejected,
                              uint64_t not_accepted, uint64_t messages, int64_t latency_us);
void bw_metrics_backlog_refused(bw_metrics_t *m, int shard, uint64_t ops);
void bw_metrics_parts_taken_before(bw_metrics_t *m, uint64_t messages);
/* A producer flushed for a batch request alone in the proxy: what it held went to Kafka
 * without waiting linger.ms. @locality a producer's poller thread */
void bw_metrics_linger_flush(bw_metrics_t *m);
void bw_metrics_producer_rebuilt(bw_metrics_t *m);
/* A client (proxy/auth.h; its name is a safe label) was refused: `requests` answered 403
 * for its role, `ops` refused one by one outside its scopes. Counted per client name,
 * across reloads of the clients file; past 1,000 names they add up under "(other)". */
void bw_metrics_client_refused(bw_metrics_t *m, const char *client, uint64_t requests, uint64_t ops);
/* The quotas of a client (proxy/quota.h), as the label quota="..." names them. */
typedef enum { BW_QUOTA_OPS, BW_QUOTA_BYTES, BW_QUOTA_JOBS, BW_QUOTA_KINDS } bw_quota_kind_t;
extern const char *const bw_quota_kind_names[BW_QUOTA_KINDS];
/* A request of the client was answered 429 for its quota `kind`. */
void bw_metrics_client_over_quota(bw_metrics_t *m, const char *client, bw_quota_kind_t kind);
/* This proxy's part (0..1] of the client's ops and bytes quotas among the live proxies; a
 * negative value: the client has no such quota. */
void bw_metrics_client_quota_share(bw_metrics_t *m, const char *client, double ops_share, double bytes_share);
/* A request of the client passed its quotas (bytes: its body) and had `ops` accepted. */
void bw_metrics_client_accepted(bw_metrics_t *m, const char *client, uint64_t ops, uint64_t bytes);
/* The job index (proxy/jobs.h) as of now: entries and bytes held, its bound, records
 * dropped and records read back from the topic, all since start. */
void bw_metrics_jobs_index(bw_metrics_t *m, uint64_t entries, uint64_t bytes, uint64_t max_bytes, uint64_t evicted,
                           uint64_t found_in_topic);
/* Scheduled and dependent batches (proxy/release.c): the job records that hold some now
 * (set), and batches this proxy released into their shards (added). */
void bw_metrics_held_records(bw_metrics_t *m, uint64_t records);
void bw_metrics_batches_released(bw_metrics_t *m, uint64_t batches);

/* consumer */
void bw_metrics_shard_applied(bw_metrics_t *m, int shard, uint64_t rows, uint64_t failed_rows,
                              uint64_t replayed_messages, uint64_t duplicate_messages,
                              uint64_t dead_letters, int64_t latency_us);
/* n failures of class `fail` (its name is the label kind="…"); never BW_FAIL_NONE. */
void bw_metrics_shard_error(bw_metrics_t *m, int shard, bw_fail_t fail, uint64_t n);
void bw_metrics_shard_retry(bw_metrics_t *m, int shard);
/* pooled connections found closed (wait_timeout, a load balancer) and replaced: not errors */
void bw_metrics_shard_reconnects(bw_metrics_t *m, int shard, uint64_t n);
void bw_metrics_shard_coalesced(bw_metrics_t *m, int shard, uint64_t n);
void bw_metrics_shard_cancelled(bw_metrics_t *m, int shard, uint64_t n);
/* rate: the statements-per-second budget in force (0 = unlimited); paused: by an
 * operator; buffer_full: fetching paused for back-pressure */
void bw_metrics_shard_state(bw_metrics_t *m, int shard, double rate, int paused, int buffer_full, int64_t lag);
/* The rows-per-second budget in force (0 = none), shown while the shard is held. */
void bw_metrics_shard_row_rate(bw_metrics_t *m, int shard, double row_rate);
/* Adds n SQL statements run on the shard (each took one permit of its rate). */
void bw_metrics_shard_statements(bw_metrics_t *m, int shard, uint64_t n);
void bw_metrics_shard_held(bw_metrics_t *m, int shard, int held); /* unhealthy: not pulled */
void bw_metrics_shard_alert(bw_metrics_t *m, int shard, int firing);
void bw_metrics_shard_lost(bw_metrics_t *m, int shard, int64_t messages);
/* The shard was revoked: its gauges leave /metrics (its counters stay). */
void bw_metrics_shard_forget(bw_metrics_t *m, int shard);
/* A lane's partition of a shard (slot, config.h): its lag and statements applied; its
 * series show while assigned (and only with lanes besides the default). */
void bw_metrics_lane(bw_metrics_t *m, int slot, int assigned, int64_t lag, uint64_t statements);
void bw_metrics_server_down(bw_metrics_t *m, int server, int down);
/* The adaptive throttle (consumer/throttle.h): the shard's state (bw_throttle_state_t) and
 * the rate it decided; a server signal's (bw_signal_t) last reading (NaN: unknown) and
 * threshold. Their series appear once the throttle reports. */
void bw_metrics_shard_throttle(bw_metrics_t *m, int shard, int state, double rate);
/* throttle.mode off: the throttle's series are gone until the next call above. */
void bw_metrics_throttle_off(bw_metrics_t *m);
void bw_metrics_server_signal(bw_metrics_t *m, int server, int signal, double value, double threshold);
void bw_metrics_alert_post(bw_metrics_t *m, int ok);
/* A server budget's share this consumer holds: statements/s and rows/s; a negative value:
 * the server has no budget of that kind (its series is not shown). */
void bw_metrics_server_budget(bw_metrics_t *m, int server, double statements, double rows);
/* The server's applied messages Kafka keeps (consumer/trim.c); negative: not shown. */
void bw_metrics_server_kept(bw_metrics_t *m, int server, int64_t messages);
/* Seconds since the server's listed replica `replica` was last read (0 while it is read);
 * negative: not shown. */
void bw_metrics_replica_unread(bw_metrics_t *m, int server, int replica, double seconds);

/* /metrics: every family of the table for m's role, each with one HELP and TYPE. */
void bw_metrics_render(bw_metrics_t *m, bw_buf_t *out);

/* The metric list of docs/api.md (a table per daemon) from the table. */
void bw_metrics_doc(bw_buf_t *out);
/* The lines that bound that list in docs/api.md. */
#define BW_METRICS_DOC_BEGIN "<!-- begin: generated by `bwctl metrics-doc` from common/metrics.c (make docs) -->\n"
#define BW_METRICS_DOC_END "<!-- end: generated by `bwctl metrics-doc` -->\n"
/* Appends `text` (docs/api.md) with what is between its BEGIN and END lines replaced by
 * bw_metrics_doc. -1 (nothing appended) when it has not both lines, in that order. */
int bw_metrics_doc_splice(const char *text, bw_buf_t *out);

#endif
