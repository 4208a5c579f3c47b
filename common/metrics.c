#include "metrics.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const double buckets[] = {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
#define BUCKETS (sizeof(buckets) / sizeof(buckets[0]))

typedef struct {
    uint64_t counts[BUCKETS + 1];
    double sum;
    uint64_t cnt;
} histogram_t;

typedef struct {
    uint64_t rows, failed_rows, batches, replayed, duplicates, dead_letters;
    uint64_t statements;
    uint64_t errors[BW_APPLY_ERR_KINDS];
    double rate, row_rate; /* statements/s, rows/s */
    int paused, buffer_full, held, alert;
    uint64_t retries;
    uint64_t reconnects;
    int64_t lag;
    int64_t lost;             /* messages deleted from Kafka before they were applied */
    int assigned;
    uint64_t backlog_refused; /* proxy: ops answered 429, the shard's backlog full */
    int throttle_state;       /* 0 running, 1 throttled, 2 unknown, 3 critical (throttle.h) */
    double throttle_rate;     /* the adaptive rate it decided (dry_run: not applied) */
} shard_stats_t;

#define SIGNALS 4 /* bw_signal_t of consumer/throttle.h; names below in its order */
static const char *const signal_names[SIGNALS] = {"replication_lag_ms", "threads_running", "custom",
                                                   "statement_latency_ms"};
static const char *const throttle_states[4] = {"running", "throttled", "unknown", "critical"};

#define CLIENTS_MAX 1000

const char *const bw_quota_kind_names[BW_QUOTA_KINDS] = {"ops_per_second", "bytes_per_second", "jobs_in_flight"};

typedef struct {
    char name[72];
    uint64_t forbidden;    /* requests answered 403 for the client's role */
    uint64_t out_of_scope; /* ops refused outside the client's scopes */
    uint64_t over_quota[BW_QUOTA_KINDS]; /* requests answered 429 for each of its quotas */
    uint64_t accepted_ops, accepted_bytes; /* what its requests had accepted (202, 429, 503) */
} client_stats_t;

struct bw_metrics {
    pthread_mutex_t mu;
    bw_metrics_role_t role;
    int shard_count;
    /* proxy */
    uint64_t status_counts[600];
    uint64_t ops_accepted, ops_rejected, ops_not_accepted, messages, parts_taken_before, linger_flushes;
    histogram_t accept_latency;
    uint64_t jobs_index[5]; /* entries, bytes, max bytes, evicted, found in the topic */
    client_stats_t *clients;
    int client_cnt, client_cap;
    /* consumer */
    shard_stats_t *shards;
    int server_cnt;
    char **server_names;
    int *server_down;
    double (*signal_value)[SIGNALS]; /* [server][signal]: the last reading; NaN unknown */
    double (*signal_threshold)[SIGNALS];
    int throttle_on;                 /* throttle.mode is not off: its series are shown */
    histogram_t apply_latency;
    uint64_t alert_posts[2]; /* failed, ok */
    /* priority lanes (shown when there is more than the default): per slot */
    int lane_cnt;
    char **lane_names;
    struct {
        int assigned;
        int64_t lag;
        uint64_t statements;
    } *lanes;
};

static const char *const err_names[] = {"retryable", "timeout", "connection", "data", "decode", "stop"};

bw_metrics_t *bw_metrics_new(const bw_config_t *conf, bw_metrics_role_t role) {
    bw_metrics_t *m = calloc(1, sizeof(*m));
    pthread_mutex_init(&m->mu, NULL);
    m->role = role;
    m->shard_count = conf->shard_count;
    m->shards = calloc((size_t)conf->shard_count, sizeof(*m->shards));
    m->server_cnt = conf->server_cnt;
    m->server_names = calloc((size_t)conf->server_cnt, sizeof(char *));
    m->server_down = calloc((size_t)conf->server_cnt, sizeof(int));
    m->signal_value = calloc((size_t)conf->server_cnt, sizeof(*m->signal_value));
    m->signal_threshold = calloc((size_t)conf->server_cnt, sizeof(*m->signal_threshold));
    for (int v = 0; v < conf->server_cnt; v++) m->server_names[v] = strdup(conf->servers[v].name);
    m->lane_cnt = conf->lane_cnt;
    m->lane_names = calloc((size_t)conf->lane_cnt, sizeof(char *));
    for (int l = 0; l < conf->lane_cnt; l++) m->lane_names[l] = strdup(conf->lanes[l].name);
    m->lanes = calloc((size_t)bw_config_slot_count(conf), sizeof(*m->lanes));
    return m;
}

void bw_metrics_destroy(bw_metrics_t *m) {
    if (!m) return;
    pthread_mutex_destroy(&m->mu);
    for (int v = 0; v < m->server_cnt; v++) free(m->server_names[v]);
    free(m->server_names);
    free(m->server_down);
    free(m->signal_value);
    free(m->signal_threshold);
    free(m->shards);
    free(m->clients);
    for (int l = 0; l < m->lane_cnt; l++) free(m->lane_names[l]);
    free(m->lane_names);
    free(m->lanes);
    free(m);
}

static void observe(histogram_t *h, int64_t us) {
    double s = (double)us / 1e6;
    size_t i = 0;
    while (i < BUCKETS && s > buckets[i]) i++;
    h->counts[i]++;
    h->sum += s;
    h->cnt++;
}

void bw_metrics_count_status(bw_metrics_t *m, unsigned status) {
    pthread_mutex_lock(&m->mu);
    if (status < 600) m->status_counts[status]++;
    pthread_mutex_unlock(&m->mu);
}

void bw_metrics_count_request(bw_metrics_t *m, unsigned status, uint64_t accepted, uint64_t rejected,
                              uint64_t not_accepted, uint64_t messages, int64_t latency_us) {
    pthread_mutex_lock(&m->mu);
    if (status < 600) m->status_counts[status]++;
    m->ops_accepted += accepted;
    m->ops_rejected += rejected;
    m->ops_not_accepted += not_accepted;
    m->messages += messages;
    observe(&m->accept_latency, latency_us);
    pthread_mutex_unlock(&m->mu);
}

void bw_metrics_parts_taken_before(bw_metrics_t *m, uint64_t messages) {
    pthread_mutex_lock(&m->mu);
    m->parts_taken_before += messages;
    pthread_mutex_unlock(&m->mu);
}

void bw_metrics_linger_flush(bw_metrics_t *m) {
    pthread_mutex_lock(&m->mu);
    m->linger_flushes++;
    pthread_mutex_unlock(&m->mu);
}

/* The client's counters, made on first use. @locks m->mu held */
static client_stats_t *client_stats(bw_metrics_t *m, const char *client) {
    for (int i = 0; i < m->client_cnt; i++)
        if (strcmp(m->clients[i].name, client) == 0) return &m->clients[i];
    if (m->client_cnt >= CLIENTS_MAX) {
        client = "(other)";
        for (int i = 0; i < m->client_cnt; i++)
            if (strcmp(m->clients[i].name, client) == 0) return &m->clients[i];
    }
    if (m->client_cnt == m->client_cap) {
        m->client_cap = m->client_cap ? m->client_cap * 2 : 8;
        client_stats_t *n = realloc(m->clients, (size_t)m->client_cap * sizeof(*n));
        if (!n) abort();
        m->clients = n;
    }
    client_stats_t *st = &m->clients[m->client_cnt++];
    memset(st, 0, sizeof(*st));
    snprintf(st->name, sizeof(st->name), "%s", client);
    return st;
}

void bw_metrics_client_refused(bw_metrics_t *m, const char *client, uint64_t requests, uint64_t ops) {
    pthread_mutex_lock(&m->mu);
    client_stats_t *st = client_stats(m, client);
    st->forbidden += requests;
    st->out_of_scope += ops;
    pthread_mutex_unlock(&m->mu);
}

void bw_metrics_client_over_quota(bw_metrics_t *m, const char *client, bw_quota_kind_t kind) {
    pthread_mutex_lock(&m->mu);
    client_stats(m, client)->over_quota[kind]++;
    pthread_mutex_unlock(&m->mu);
}

void bw_metrics_jobs_index(bw_metrics_t *m, uint64_t entries, uint64_t bytes, uint64_t max_bytes, uint64_t evicted,
                           uint64_t found_in_topic) {
    pthread_mutex_lock(&m->mu);
    m->jobs_index[0] = entries;
    m->jobs_index[1] = bytes;
    m->jobs_index[2] = max_bytes;
    m->jobs_index[3] = evicted;
    m->jobs_index[4] = found_in_topic;
    pthread_mutex_unlock(&m->mu);
}

void bw_metrics_client_accepted(bw_metrics_t *m, const char *client, uint64_t ops, uint64_t bytes) {
    pthread_mutex_lock(&m->mu);
    client_stats_t *st = client_stats(m, client);
    st->accepted_ops += ops;
    st->accepted_bytes += bytes;
    pthread_mutex_unlock(&m->mu);
}

void bw_metrics_backlog_refused(bw_metrics_t *m, int shard, uint64_t ops) {
    pthread_mutex_lock(&m->mu);
    m->shards[shard].backlog_refused += ops;
    pthread_mutex_unlock(&m->mu);
}

void bw_metrics_shard_lost(bw_metrics_t *m, int shard, int64_t messages) {
    pthread_mutex_lock(&m->mu);
    m->shards[shard].lost = messages;
    pthread_mutex_unlock(&m->mu);
}

void bw_metrics_shard_applied(bw_metrics_t *m, int shard, uint64_t rows, uint64_t failed_rows,
                              uint64_t replayed_messages, uint64_t duplicate_messages,
                              uint64_t dead_letters, int64_t latency_us) {
    pthread_mutex_lock(&m->mu);
    m->shards[shard].replayed += replayed_messages;
    m->shards[shard].duplicates += duplicate_messages;
    m->shards[shard].dead_letters += dead_letters;
    m->shards[shard].rows += rows;
    m->shards[shard].failed_rows += failed_rows;
    m->shards[shard].batches++;
    observe(&m->apply_latency, latency_us);
    pthread_mutex_unlock(&m->mu);
}

void bw_metrics_shard_error(bw_metrics_t *m, int shard, bw_apply_err_t kind, uint64_t n) {
    pthread_mutex_lock(&m->mu);
    m->shards[shard].errors[kind] += n;
    pthread_mutex_unlock(&m->mu);
}

void bw_metrics_shard_retry(bw_metrics_t *m, int shard) {
    pthread_mutex_lock(&m->mu);
    m->shards[shard].retries++;
    pthread_mutex_unlock(&m->mu);
}

void bw_metrics_shard_reconnects(bw_metrics_t *m, int shard, uint64_t n) {
    pthread_mutex_lock(&m->mu);
    m->shards[shard].reconnects += n;
    pthread_mutex_unlock(&m->mu);
}

void bw_metrics_shard_state(bw_metrics_t *m, int shard, double rate, int paused, int buffer_full, int64_t lag) {
    pthread_mutex_lock(&m->mu);
    m->shards[shard].rate = rate;
    m->shards[shard].paused = paused;
    m->shards[shard].buffer_full = buffer_full;
    m->shards[shard].lag = lag;
    m->shards[shard].assigned = 1;
    pthread_mutex_unlock(&m->mu);
}

void bw_metrics_shard_row_rate(bw_metrics_t *m, int shard, double row_rate) {
    pthread_mutex_lock(&m->mu);
    m->shards[shard].row_rate = row_rate;
    pthread_mutex_unlock(&m->mu);
}

void bw_metrics_shard_statements(bw_metrics_t *m, int shard, uint64_t n) {
    pthread_mutex_lock(&m->mu);
    m->shards[shard].statements += n;
    pthread_mutex_unlock(&m->mu);
}

void bw_metrics_lane(bw_metrics_t *m, int slot, int assigned, int64_t lag, uint64_t statements) {
    pthread_mutex_lock(&m->mu);
    m->lanes[slot].assigned = assigned;
    m->lanes[slot].lag = lag;
    m->lanes[slot].statements = statements;
    pthread_mutex_unlock(&m->mu);
}

void bw_metrics_shard_forget(bw_metrics_t *m, int shard) {
    pthread_mutex_lock(&m->mu);
    shard_stats_t *st = &m->shards[shard];
    st->assigned = st->paused = st->buffer_full = st->held = st->alert = 0;
    st->rate = st->row_rate = 0;
    st->lag = st->lost = 0;
    pthread_mutex_unlock(&m->mu);
}

void bw_metrics_server_down(bw_metrics_t *m, int server, int down) {
    pthread_mutex_lock(&m->mu);
    m->server_down[server] = down;
    pthread_mutex_unlock(&m->mu);
}

void bw_metrics_shard_throttle(bw_metrics_t *m, int shard, int state, double rate) {
    pthread_mutex_lock(&m->mu);
    m->throttle_on = 1;
    m->shards[shard].throttle_state = state;
    m->shards[shard].throttle_rate = rate;
    pthread_mutex_unlock(&m->mu);
}

void bw_metrics_throttle_off(bw_metrics_t *m) {
    pthread_mutex_lock(&m->mu);
    m->throttle_on = 0;
    pthread_mutex_unlock(&m->mu);
}

void bw_metrics_server_signal(bw_metrics_t *m, int server, int signal, double value, double threshold) {
    pthread_mutex_lock(&m->mu);
    m->throttle_on = 1;
    m->signal_value[server][signal] = value;
    m->signal_threshold[server][signal] = threshold;
    pthread_mutex_unlock(&m->mu);
}

void bw_metrics_shard_held(bw_metrics_t *m, int shard, int held) {
    pthread_mutex_lock(&m->mu);
    m->shards[shard].held = held;
    pthread_mutex_unlock(&m->mu);
}

void bw_metrics_shard_alert(bw_metrics_t *m, int shard, int firing) {
    pthread_mutex_lock(&m->mu);
    m->shards[shard].alert = firing;
    pthread_mutex_unlock(&m->mu);
}

void bw_metrics_alert_post(bw_metrics_t *m, int ok) {
    pthread_mutex_lock(&m->mu);
    m->alert_posts[ok != 0]++;
    pthread_mutex_unlock(&m->mu);
}

/* A shard appears in the per-shard series once it was assigned or did anything. */
static int shard_seen(const shard_stats_t *st) {
    if (st->assigned || st->batches || st->statements || st->alert) return 1;
    for (int k = 0; k < BW_APPLY_ERR_KINDS; k++)
        if (st->errors[k]) return 1;
    return 0;
}

static void render_histogram(bw_buf_t *out, const char *name, const char *help, const histogram_t *h) {
    bw_buf_printf(out, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    uint64_t cum = 0;
    for (size_t i = 0; i < BUCKETS; i++) {
        cum += h->counts[i];
        bw_buf_printf(out, "%s_bucket{le=\"%g\"} %llu\n", name, buckets[i], (unsigned long long)cum);
    }
    bw_buf_printf(out, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", name,
                  (unsigned long long)h->cnt, name, h->sum, name, (unsigned long long)h->cnt);
}

static void header(bw_buf_t *out, const char *name, const char *type, const char *help) {
    bw_buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

#define SHARD_SERIES_IF(seen, name, type, help, fmt, expr)                            \
    do {                                                                             \
        header(out, name, type, help);                                               \
        for (int s = 0; s < m->shard_count; s++) {                                   \
            const shard_stats_t *st = &m->shards[s];                                 \
            if (!seen(st)) continue;                                                 \
            bw_buf_printf(out, name "{shard=\"%d\"} " fmt "\n", s, expr);            \
        }                                                                            \
    } while (0)
/* counters: every shard that did anything here; gauges: only the shards held now (a
 * revoked shard's rate, lag or pause would be stale, and its new owner reports them) */
#define SHARD_SERIES(name, type, help, fmt, expr) SHARD_SERIES_IF(shard_seen, name, type, help, fmt, expr)
#define SHARD_GAUGE(name, help, fmt, expr) SHARD_SERIES_IF(shard_assigned, name, "gauge", help, fmt, expr)
static int shard_assigned(const shard_stats_t *st) { return st->assigned; }

void bw_metrics_render(bw_metrics_t *m, bw_buf_t *out) {
    pthread_mutex_lock(&m->mu);
    if (m->role == BW_METRICS_PROXY) {
        header(out, "bulkwrite_proxy_requests_total", "counter", "HTTP requests answered, by status code.");
        for (unsigned s = 0; s < 600; s++)
            if (m->status_counts[s])
                bw_buf_printf(out, "bulkwrite_proxy_requests_total{code=\"%u\"} %llu\n", s,
                              (unsigned long long)m->status_counts[s]);
        header(out, "bulkwrite_proxy_ops_accepted_total", "counter", "Ops durably written to Kafka.");
        bw_buf_printf(out, "bulkwrite_proxy_ops_accepted_total %llu\n", (unsigned long long)m->ops_accepted);
        header(out, "bulkwrite_proxy_ops_rejected_total", "counter", "Ops rejected as invalid.");
        bw_buf_printf(out, "bulkwrite_proxy_ops_rejected_total %llu\n", (unsigned long long)m->ops_rejected);
        header(out, "bulkwrite_proxy_kafka_produce_errors_total", "counter",
               "Ops not accepted because Kafka did not acknowledge their batch.");
        bw_buf_printf(out, "bulkwrite_proxy_kafka_produce_errors_total %llu\n",
                      (unsigned long long)m->ops_not_accepted);
        header(out, "bulkwrite_proxy_kafka_messages_total", "counter", "Shard batches produced.");
        bw_buf_printf(out, "bulkwrite_proxy_kafka_messages_total %llu\n", (unsigned long long)m->messages);
        header(out, "bulkwrite_proxy_parts_taken_before_total", "counter",
               "Messages of a resent request (same request_id) not produced again: an earlier attempt had them acknowledged.");
        bw_buf_printf(out, "bulkwrite_proxy_parts_taken_before_total %llu\n", (unsigned long long)m->parts_taken_before);
        header(out, "bulkwrite_proxy_linger_flushes_total", "counter",
               "Producer flushes for a batch request alone in the proxy: its batches went to Kafka without waiting linger.ms.");
        bw_buf_printf(out, "bulkwrite_proxy_linger_flushes_total %llu\n", (unsigned long long)m->linger_flushes);
        header(out, "bulkwrite_proxy_backlog_refused_ops_total", "counter",
               "Valid ops answered 429 because their shard's backlog in Kafka was full (the client resends).");
        for (int s = 0; s < m->shard_count; s++)
            if (m->shards[s].backlog_refused)
                bw_buf_printf(out, "bulkwrite_proxy_backlog_refused_ops_total{shard=\"%d\"} %llu\n", s,
                              (unsigned long long)m->shards[s].backlog_refused);
        header(out, "bulkwrite_proxy_client_forbidden_total", "counter",
               "Requests answered 403 because the endpoint is outside the client's roles.");
        for (int i = 0; i < m->client_cnt; i++)
            bw_buf_printf(out, "bulkwrite_proxy_client_forbidden_total{client=\"%s\"} %llu\n", m->clients[i].name,
                          (unsigned long long)m->clients[i].forbidden);
        header(out, "bulkwrite_proxy_client_ops_out_of_scope_total", "counter",
               "Ops of POST /v1/batches refused one by one because they are outside the client's scopes.");
        for (int i = 0; i < m->client_cnt; i++)
            bw_buf_printf(out, "bulkwrite_proxy_client_ops_out_of_scope_total{client=\"%s\"} %llu\n",
                          m->clients[i].name, (unsigned long long)m->clients[i].out_of_scope);
        static const char *const index_series[5][3] = {
            {"bulkwrite_proxy_jobs_index_entries", "gauge", "Job records in the index behind GET /v1/jobs/{id}."},
            {"bulkwrite_proxy_jobs_index_bytes", "gauge", "Bytes the job index holds (records and entries)."},
            {"bulkwrite_proxy_jobs_index_max_bytes", "gauge", "Its bound, proxy.jobs_index_max_bytes."},
            {"bulkwrite_proxy_jobs_index_evicted_total", "counter",
             "Job records dropped from the index, least recently used first."},
            {"bulkwrite_proxy_jobs_read_from_topic_total", "counter",
             "Job records read back from the jobs topic for a GET, after the index had dropped them."}};
        for (int i = 0; i < 5; i++) {
            header(out, index_series[i][0], index_series[i][1], index_series[i][2]);
            bw_buf_printf(out, "%s %llu\n", index_series[i][0], (unsigned long long)m->jobs_index[i]);
        }
        header(out, "bulkwrite_proxy_client_over_quota_total", "counter",
               "Requests answered 429 because the client was over one of its quotas (clients file).");
        for (int i = 0; i < m->client_cnt; i++)
            for (int k = 0; k < BW_QUOTA_KINDS; k++)
                bw_buf_printf(out, "bulkwrite_proxy_client_over_quota_total{client=\"%s\",quota=\"%s\"} %llu\n",
                              m->clients[i].name, bw_quota_kind_names[k],
                              (unsigned long long)m->clients[i].over_quota[k]);
        header(out, "bulkwrite_proxy_client_accepted_ops_total", "counter",
               "Ops of the client's requests that the proxy accepted (durable in Kafka).");
        for (int i = 0; i < m->client_cnt; i++)
            bw_buf_printf(out, "bulkwrite_proxy_client_accepted_ops_total{client=\"%s\"} %llu\n",
                          m->clients[i].name, (unsigned long long)m->clients[i].accepted_ops);
        header(out, "bulkwrite_proxy_client_request_bytes_total", "counter",
               "Bytes of the client's request bodies that passed its quotas.");
        for (int i = 0; i < m->client_cnt; i++)
            bw_buf_printf(out, "bulkwrite_proxy_client_request_bytes_total{client=\"%s\"} %llu\n",
                          m->clients[i].name, (unsigned long long)m->clients[i].accepted_bytes);
        render_histogram(out, "bulkwrite_proxy_accept_latency_seconds",
                         "Time from request received to reply, including Kafka acknowledgement.",
                         &m->accept_latency);
    } else {
        SHARD_SERIES("bulkwrite_consumer_rows_applied_total", "counter", "Rows applied to the shard.",
                     "%llu", (unsigned long long)st->rows);
        SHARD_SERIES("bulkwrite_consumer_rows_failed_total", "counter",
                     "Rows the shard refused (data errors).", "%llu", (unsigned long long)st->failed_rows);
        SHARD_SERIES("bulkwrite_consumer_batches_applied_total", "counter",
                     "Batch transactions committed on the shard.", "%llu", (unsigned long long)st->batches);
        SHARD_SERIES("bulkwrite_consumer_statements_total", "counter",
                     "SQL statements run on the shard (each takes one permit of its statements-per-second rate).",
                     "%llu", (unsigned long long)st->statements);
        SHARD_SERIES("bulkwrite_consumer_messages_replayed_total", "counter",
                     "Messages read again that the shard had already applied (skipped, not re-applied).",
                     "%llu", (unsigned long long)st->replayed);
        SHARD_SERIES("bulkwrite_consumer_messages_duplicate_total", "counter",
                     "Messages of a resubmitted request (same request_id) already applied: skipped.",
                     "%llu", (unsigned long long)st->duplicates);
        SHARD_SERIES("bulkwrite_consumer_dead_letters_total", "counter",
                     "Refused ops (or undecodable messages) written to the dead-letter topic.", "%llu",
                     (unsigned long long)st->dead_letters);
        header(out, "bulkwrite_consumer_errors_total", "counter",
               "Apply errors by kind; every retryable, timeout and connection error is followed by a retry.");
        for (int s = 0; s < m->shard_count; s++)
            for (int k = 0; k < BW_APPLY_ERR_KINDS; k++)
                if (m->shards[s].errors[k])
                    bw_buf_printf(out, "bulkwrite_consumer_errors_total{shard=\"%d\",kind=\"%s\"} %llu\n", s,
                                  err_names[k], (unsigned long long)m->shards[s].errors[k]);
        SHARD_GAUGE("bulkwrite_consumer_rate_batches_per_second",
                     "Effective rate limit in statements per second (0 = unlimited); the name predates "
                     "statement budgets.", "%g", st->rate);
        SHARD_GAUGE("bulkwrite_consumer_rate_rows_per_second",
                     "Effective row budget in rows per second (0 = none: statements alone limit the shard).", "%g",
                     st->row_rate);
        SHARD_SERIES("bulkwrite_consumer_retries_total", "counter",
                     "Batches scheduled again after a retryable error (timeouts and connection errors included).",
                     "%llu", (unsigned long long)st->retries);
        SHARD_SERIES("bulkwrite_consumer_reconnects_total", "counter",
                     "Pooled connections found closed by the server or a load balancer and replaced at once "
                     "(not errors, not retries).", "%llu", (unsigned long long)st->reconnects);
        SHARD_GAUGE("bulkwrite_consumer_paused", "1 while an operator has paused the shard.", "%d", st->paused);
        SHARD_GAUGE("bulkwrite_consumer_buffer_full",
                     "1 while fetching for the shard is paused because its buffer is full (back-pressure).", "%d",
                     st->buffer_full);
        SHARD_GAUGE("bulkwrite_consumer_unhealthy",
                     "1 while the shard is held back after consecutive timeouts (until a probe batch succeeds).",
                     "%d", st->held);
        SHARD_GAUGE("bulkwrite_consumer_alert_firing",
                     "1 while this consumer's BulkwriteShardUnhealthy alert for the shard is firing.", "%d", st->alert);
        if (m->lane_cnt > 1) {
            header(out, "bulkwrite_consumer_lane_lag", "gauge",
                   "Messages of the shard's partition in the lane's topic not yet applied (config lanes).");
            for (int slot = 0; slot < m->lane_cnt * m->shard_count; slot++)
                if (m->lanes[slot].assigned)
                    bw_buf_printf(out, "bulkwrite_consumer_lane_lag{shard=\"%d\",lane=\"%s\"} %lld\n",
                                  slot % m->shard_count, m->lane_names[slot / m->shard_count], (long long)m->lanes[slot].lag);
            header(out, "bulkwrite_consumer_lane_statements_total", "counter",
                   "Statements applied from the lane on the shard since this consumer was assigned it: the lanes' "
                   "shares of the shard's budget.");
            for (int slot = 0; slot < m->lane_cnt * m->shard_count; slot++)
                if (m->lanes[slot].assigned)
                    bw_buf_printf(out, "bulkwrite_consumer_lane_statements_total{shard=\"%d\",lane=\"%s\"} %llu\n",
                                  slot % m->shard_count, m->lane_names[slot / m->shard_count],
                                  (unsigned long long)m->lanes[slot].statements);
        }
        header(out, "bulkwrite_consumer_alert_posts_total", "counter",
               "Posts to alerts.webhook_url, by result.");
        bw_buf_printf(out, "bulkwrite_consumer_alert_posts_total{result=\"ok\"} %llu\n",
                      (unsigned long long)m->alert_posts[1]);
        bw_buf_printf(out, "bulkwrite_consumer_alert_posts_total{result=\"failed\"} %llu\n",
                      (unsigned long long)m->alert_posts[0]);
        SHARD_GAUGE("bulkwrite_consumer_lag_messages",
                     "Messages in Kafka the shard has not applied (high watermark minus its next offset).",
                     "%lld", (long long)st->lag);
        SHARD_GAUGE("bulkwrite_consumer_lost_messages",
                     "Messages Kafka deleted before the shard applied them (the shard stops; see the "
                     "BulkwriteShardDataLost alert).", "%lld", (long long)st->lost);
        header(out, "bulkwrite_consumer_server_down", "gauge",
               "1 while the server is unreachable (its shards wait; see the BulkwriteServerDown alert).");
        for (int v = 0; v < m->server_cnt; v++)
            bw_buf_printf(out, "bulkwrite_consumer_server_down{server=\"%s\"} %d\n", m->server_names[v], m->server_down[v]);
        if (m->throttle_on) {
            header(out, "bulkwrite_consumer_throttle_state", "gauge",
                   "1 for the shard's throttle state (running, throttled, unknown, critical), 0 for the others.");
            for (int s = 0; s < m->shard_count; s++)
                for (int k = 0; m->shards[s].assigned && k < 4; k++)
                    bw_buf_printf(out, "bulkwrite_consumer_throttle_state{shard=\"%d\",state=\"%s\"} %d\n", s,
                                  throttle_states[k], m->shards[s].throttle_state == k);
            SHARD_GAUGE("bulkwrite_consumer_throttle_rate",
                        "Statements per second the adaptive throttle decided for the shard (in dry_run, not applied).",
                        "%g", st->throttle_rate);
            header(out, "bulkwrite_consumer_signal", "gauge",
                   "The throttle's last reading of a server signal (NaN: unknown); signal=\"statement_latency_ms\" "
                   "is the most of the server's shards this consumer holds.");
            for (int v = 0; v < m->server_cnt; v++)
                for (int k = 0; k < SIGNALS; k++)
                    if (m->signal_threshold[v][k] > 0) {
                        double x = m->signal_value[v][k];
                        bw_buf_printf(out, "bulkwrite_consumer_signal{server=\"%s\",signal=\"%s\"} ", m->server_names[v],
                                      signal_names[k]);
                        if (isnan(x)) bw_buf_puts(out, "NaN\n"); /* Prometheus' spelling */
                        else bw_buf_printf(out, "%g\n", x);
                    }
            header(out, "bulkwrite_consumer_signal_threshold", "gauge",
                   "The threshold of a server signal (throttle.*); only signals in use are shown.");
            for (int v = 0; v < m->server_cnt; v++)
                for (int k = 0; k < SIGNALS; k++)
                    if (m->signal_threshold[v][k] > 0)
                        bw_buf_printf(out, "bulkwrite_consumer_signal_threshold{server=\"%s\",signal=\"%s\"} %g\n",
                                      m->server_names[v], signal_names[k], m->signal_threshold[v][k]);
        }
        render_histogram(out, "bulkwrite_consumer_apply_latency_seconds",
                         "Time to apply one batch transaction.", &m->apply_latency);
    }
    pthread_mutex_unlock(&m->mu);
}
