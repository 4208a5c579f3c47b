#include "metrics.h"

#include <math.h>
#include <stddef.h>
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
    uint64_t errors[BW_FAIL_CLASSES]; /* by failure class (db.h) */
    double rate, row_rate; /* statements/s, rows/s */
    int paused, buffer_full, held, alert;
    uint64_t retries;
    uint64_t reconnects;
    uint64_t coalesced;       /* increments added into another op's row */
    uint64_t cancelled;       /* ops of cancelled jobs skipped */
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
static const char *const throttle_states_names[4] = {"running", "throttled", "unknown", "critical"};

#define CLIENTS_MAX 1000

typedef struct {
    int assigned;
    int64_t lag;
    uint64_t statements;
} lane_stats_t;

const char *const bw_quota_kind_names[BW_QUOTA_KINDS] = {"ops_per_second", "bytes_per_second", "jobs_in_flight"};

typedef struct {
    char name[72];
    uint64_t forbidden;    /* requests answered 403 for the client's role */
    uint64_t out_of_scope; /* ops refused outside the client's scopes */
    uint64_t over_quota[BW_QUOTA_KINDS]; /* requests answered 429 for each of its quotas */
    double quota_share[2];   /* this proxy's part of its ops and bytes quotas; 0: none (not set, or no such quota) */
    uint64_t accepted_ops, accepted_bytes; /* what its requests had accepted (202, 429, 503) */
} client_stats_t;

struct bw_metrics {
    pthread_mutex_t mu;
    bw_metrics_role_t role;
    int shard_count;
    /* proxy */
    uint64_t status_counts[600];
    uint64_t ops_accepted, ops_rejected, ops_not_accepted, messages, parts_taken_before, linger_flushes;
    uint64_t producers_rebuilt;
    histogram_t accept_latency;
    uint64_t jobs_entries, jobs_bytes, jobs_max_bytes, jobs_evicted, jobs_found_in_topic; /* the job index */
    uint64_t held_records, batches_released; /* scheduled and dependent batches */
    client_stats_t *clients;
    int client_cnt, client_cap;
    /* consumer */
    shard_stats_t *shards;
    int server_cnt;
    char **server_names;
    int *server_down;
    double (*signal_value)[SIGNALS]; /* [server][signal]: the last reading; NaN unknown */
    double (*signal_threshold)[SIGNALS];
    double (*budget_share)[2];       /* [server][statements, rows]: this consumer's share; < 0 none */
    int64_t *kept;                   /* [server]: applied messages still in Kafka; < 0 not shown */
    double **replica_unread;         /* [server][replica]: seconds its ledger is unread; < 0 not shown */
    const bw_server_t *servers;      /* the config's (replica names); lives as long as the daemon */
    int throttle_on;                 /* throttle.mode is not off: its series are shown */
    histogram_t apply_latency;
    uint64_t alert_posts[2]; /* failed, ok */
    /* priority lanes (shown when there is more than the default): per slot */
    int lane_cnt;
    char **lane_names;
    lane_stats_t *lanes;
};

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
    m->budget_share = calloc((size_t)conf->server_cnt + 1, sizeof(*m->budget_share));
    for (int v = 0; v < conf->server_cnt; v++) m->budget_share[v][0] = m->budget_share[v][1] = -1;
    for (int v = 0; v < conf->server_cnt; v++) m->server_names[v] = strdup(conf->servers[v].name);
    m->servers = conf->servers;
    m->kept = calloc((size_t)conf->server_cnt + 1, sizeof(int64_t));
    m->replica_unread = calloc((size_t)conf->server_cnt + 1, sizeof(double *));
    if (!m->kept || !m->replica_unread) abort();
    for (int v = 0; v < conf->server_cnt; v++) {
        m->kept[v] = -1;
        if (!(m->replica_unread[v] = malloc(sizeof(double) * ((size_t)conf->servers[v].replica_cnt + 1)))) abort();
        for (int r = 0; r < conf->servers[v].replica_cnt; r++) m->replica_unread[v][r] = -1;
    }
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
    free(m->budget_share);
    for (int v = 0; v < m->server_cnt; v++) free(m->replica_unread[v]);
    free(m->replica_unread);
    free(m->kept);
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

void bw_metrics_producer_rebuilt(bw_metrics_t *m) {
    pthread_mutex_lock(&m->mu);
    m->producers_rebuilt++;
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

void bw_metrics_client_quota_share(bw_metrics_t *m, const char *client, double ops_share, double bytes_share) {
    pthread_mutex_lock(&m->mu);
    client_stats_t *st = client_stats(m, client);
    st->quota_share[0] = ops_share > 0 ? ops_share : 0;
    st->quota_share[1] = bytes_share > 0 ? bytes_share : 0;
    pthread_mutex_unlock(&m->mu);
}

void bw_metrics_jobs_index(bw_metrics_t *m, uint64_t entries, uint64_t bytes, uint64_t max_bytes, uint64_t evicted,
                           uint64_t found_in_topic) {
    pthread_mutex_lock(&m->mu);
    m->jobs_entries = entries;
    m->jobs_bytes = bytes;
    m->jobs_max_bytes = max_bytes;
    m->jobs_evicted = evicted;
    m->jobs_found_in_topic = found_in_topic;
    pthread_mutex_unlock(&m->mu);
}

void bw_metrics_held_records(bw_metrics_t *m, uint64_t records) {
    pthread_mutex_lock(&m->mu);
    m->held_records = records;
    pthread_mutex_unlock(&m->mu);
}

void bw_metrics_batches_released(bw_metrics_t *m, uint64_t batches) {
    pthread_mutex_lock(&m->mu);
    m->batches_released += batches;
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

void bw_metrics_shard_error(bw_metrics_t *m, int shard, bw_fail_t fail, uint64_t n) {
    if ((unsigned)fail >= BW_FAIL_CLASSES) return;
    pthread_mutex_lock(&m->mu);
    m->shards[shard].errors[fail] += n;
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

void bw_metrics_shard_coalesced(bw_metrics_t *m, int shard, uint64_t n) {
    pthread_mutex_lock(&m->mu);
    m->shards[shard].coalesced += n;
    pthread_mutex_unlock(&m->mu);
}

void bw_metrics_shard_cancelled(bw_metrics_t *m, int shard, uint64_t n) {
    pthread_mutex_lock(&m->mu);
    m->shards[shard].cancelled += n;
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

void bw_metrics_server_budget(bw_metrics_t *m, int server, double statements, double rows) {
    pthread_mutex_lock(&m->mu);
    m->budget_share[server][0] = statements;
    m->budget_share[server][1] = rows;
    pthread_mutex_unlock(&m->mu);
}

void bw_metrics_server_kept(bw_metrics_t *m, int server, int64_t messages) {
    pthread_mutex_lock(&m->mu);
    m->kept[server] = messages;
    pthread_mutex_unlock(&m->mu);
}

void bw_metrics_replica_unread(bw_metrics_t *m, int server, int replica, double seconds) {
    pthread_mutex_lock(&m->mu);
    m->replica_unread[server][replica] = seconds;
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

/* ---- the table ------------------------------------------------------------------------
 * Every family is one row: what docs/api.md and HELP say of it, and how its samples are
 * read. A row's renderer walks what the family is per (nothing, shards, clients, lanes,
 * servers) and reads the value at `off` of that struct as `value` says; the few families
 * whose values are not one field each have their own renderer. @locks m->mu held */

typedef enum { V_U64, V_I64, V_INT, V_DOUBLE } value_t;

typedef struct row row_t;
struct row {
    bw_metric_def_t d;
    void (*render)(const bw_metrics_t *m, const row_t *r, bw_buf_t *out); /* the samples */
    size_t off;  /* of the value, in the struct the renderer walks */
    value_t value;
    int (*shown)(const bw_metrics_t *m); /* NULL: always; else the family shows only when true */
};

#define TOTAL(field) offsetof(bw_metrics_t, field)
#define SHARD(field) offsetof(shard_stats_t, field)
#define CLIENT(field) offsetof(client_stats_t, field)
#define LANE(field) offsetof(lane_stats_t, field)

static void put_value(bw_buf_t *out, value_t v, const void *at) {
    switch (v) {
    case V_U64: bw_buf_printf(out, "%llu\n", (unsigned long long)*(const uint64_t *)at); break;
    case V_I64: bw_buf_printf(out, "%lld\n", (long long)*(const int64_t *)at); break;
    case V_INT: bw_buf_printf(out, "%d\n", *(const int *)at); break;
    case V_DOUBLE: {
        double x = *(const double *)at;
        if (isnan(x)) bw_buf_puts(out, "NaN\n"); /* Prometheus' spellings */
        else if (isinf(x)) bw_buf_puts(out, x > 0 ? "+Inf\n" : "-Inf\n");
        else bw_buf_printf(out, "%g\n", x);
        break;
    }
    }
}

#define AT(base, r) ((const char *)(base) + (r)->off)

/* no labels: the value at off in bw_metrics_t */
static void one(const bw_metrics_t *m, const row_t *r, bw_buf_t *out) {
    bw_buf_printf(out, "%s ", r->d.name);
    put_value(out, r->value, AT(m, r));
}

/* A shard appears in the per-shard counters once it was assigned or did anything. */
static int shard_seen(const shard_stats_t *st, const row_t *r) {
    (void)r;
    if (st->assigned || st->batches || st->statements || st->alert) return 1;
    for (int k = 0; k < BW_FAIL_CLASSES; k++)
        if (st->errors[k]) return 1;
    return 0;
}
/* gauges: only the shards held now (a revoked shard's rate, lag or pause would be stale,
 * and its new owner reports them) */
static int shard_assigned(const shard_stats_t *st, const row_t *r) {
    (void)r;
    return st->assigned;
}
static int shard_nonzero(const shard_stats_t *st, const row_t *r) { return *(const uint64_t *)AT(st, r) != 0; }

static void shards_where(const bw_metrics_t *m, const row_t *r, bw_buf_t *out,
                         int (*pred)(const shard_stats_t *, const row_t *)) {
    for (int s = 0; s < m->shard_count; s++) {
        const shard_stats_t *st = &m->shards[s];
        if (!pred(st, r)) continue;
        bw_buf_printf(out, "%s{shard=\"%d\"} ", r->d.name, s);
        put_value(out, r->value, AT(st, r));
    }
}
static void shards_seen(const bw_metrics_t *m, const row_t *r, bw_buf_t *out) { shards_where(m, r, out, shard_seen); }
static void shards_held(const bw_metrics_t *m, const row_t *r, bw_buf_t *out) { shards_where(m, r, out, shard_assigned); }
static void shards_nonzero(const bw_metrics_t *m, const row_t *r, bw_buf_t *out) { shards_where(m, r, out, shard_nonzero); }

static void clients(const bw_metrics_t *m, const row_t *r, bw_buf_t *out) {
    for (int i = 0; i < m->client_cnt; i++) {
        bw_buf_printf(out, "%s{client=\"%s\"} ", r->d.name, m->clients[i].name);
        put_value(out, r->value, AT(&m->clients[i], r));
    }
}

/* a lane's partition of a shard, while assigned */
static void lanes(const bw_metrics_t *m, const row_t *r, bw_buf_t *out) {
    for (int slot = 0; slot < m->lane_cnt * m->shard_count; slot++)
        if (m->lanes[slot].assigned) {
            bw_buf_printf(out, "%s{shard=\"%d\",lane=\"%s\"} ", r->d.name, slot % m->shard_count,
                          m->lane_names[slot / m->shard_count]);
            put_value(out, r->value, AT(&m->lanes[slot], r));
        }
}

/* the histogram_t at off in bw_metrics_t */
static void histogram(const bw_metrics_t *m, const row_t *r, bw_buf_t *out) {
    const histogram_t *h = (const histogram_t *)AT(m, r);
    const char *name = r->d.name;
    uint64_t cum = 0;
    for (size_t i = 0; i < BUCKETS; i++) {
        cum += h->counts[i];
        bw_buf_printf(out, "%s_bucket{le=\"%g\"} %llu\n", name, buckets[i], (unsigned long long)cum);
    }
    bw_buf_printf(out, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", name,
                  (unsigned long long)h->cnt, name, h->sum, name, (unsigned long long)h->cnt);
}

static void requests_by_code(const bw_metrics_t *m, const row_t *r, bw_buf_t *out) {
    for (unsigned s = 0; s < 600; s++)
        if (m->status_counts[s])
            bw_buf_printf(out, "%s{code=\"%u\"} %llu\n", r->d.name, s, (unsigned long long)m->status_counts[s]);
}

static void quotas_by_client(const bw_metrics_t *m, const row_t *r, bw_buf_t *out) {
    for (int i = 0; i < m->client_cnt; i++)
        for (int k = 0; k < BW_QUOTA_KINDS; k++)
            bw_buf_printf(out, "%s{client=\"%s\",quota=\"%s\"} %llu\n", r->d.name, m->clients[i].name,
                          bw_quota_kind_names[k], (unsigned long long)m->clients[i].over_quota[k]);
}

/* the rate quotas a proxy shares (ops, bytes), for the clients that have them */
static void quota_shares(const bw_metrics_t *m, const row_t *r, bw_buf_t *out) {
    for (int i = 0; i < m->client_cnt; i++)
        for (int k = 0; k < 2; k++)
            if (m->clients[i].quota_share[k] > 0) {
                bw_buf_printf(out, "%s{client=\"%s\",quota=\"%s\"} ", r->d.name, m->clients[i].name,
                              bw_quota_kind_names[k]);
                put_value(out, V_DOUBLE, &m->clients[i].quota_share[k]);
            }
}

/* kind: the failure class's name (db.h), for the classes that happened */
static void errors_by_kind(const bw_metrics_t *m, const row_t *r, bw_buf_t *out) {
    for (int s = 0; s < m->shard_count; s++)
        for (int k = 0; k < BW_FAIL_CLASSES; k++)
            if (m->shards[s].errors[k])
                bw_buf_printf(out, "%s{shard=\"%d\",kind=\"%s\"} %llu\n", r->d.name, s, bw_fail_name((bw_fail_t)k),
                              (unsigned long long)m->shards[s].errors[k]);
}

static void alert_posts(const bw_metrics_t *m, const row_t *r, bw_buf_t *out) {
    bw_buf_printf(out, "%s{result=\"ok\"} %llu\n", r->d.name, (unsigned long long)m->alert_posts[1]);
    bw_buf_printf(out, "%s{result=\"failed\"} %llu\n", r->d.name, (unsigned long long)m->alert_posts[0]);
}

static void servers_down(const bw_metrics_t *m, const row_t *r, bw_buf_t *out) {
    for (int v = 0; v < m->server_cnt; v++)
        bw_buf_printf(out, "%s{server=\"%s\"} %d\n", r->d.name, m->server_names[v], m->server_down[v]);
}

static void throttle_states(const bw_metrics_t *m, const row_t *r, bw_buf_t *out) {
    for (int s = 0; s < m->shard_count; s++)
        for (int k = 0; m->shards[s].assigned && k < 4; k++)
            bw_buf_printf(out, "%s{shard=\"%d\",state=\"%s\"} %d\n", r->d.name, s, throttle_states_names[k],
                          m->shards[s].throttle_state == k);
}

/* off: of the [server][signal] array's pointer in bw_metrics_t; only signals in use
 * (a threshold) show */
static void server_signals(const bw_metrics_t *m, const row_t *r, bw_buf_t *out) {
    const double(*values)[SIGNALS] = *(double(*const *)[SIGNALS])AT(m, r);
    for (int v = 0; v < m->server_cnt; v++)
        for (int k = 0; k < SIGNALS; k++)
            if (m->signal_threshold[v][k] > 0) {
                bw_buf_printf(out, "%s{server=\"%s\",signal=\"%s\"} ", r->d.name, m->server_names[v], signal_names[k]);
                put_value(out, V_DOUBLE, &values[v][k]);
            }
}

/* the servers' budgets, by kind, for the kinds each server has */
static void server_budgets(const bw_metrics_t *m, const row_t *r, bw_buf_t *out) {
    static const char *const kinds[2] = {"statements", "rows"};
    for (int v = 0; v < m->server_cnt; v++)
        for (int k = 0; k < 2; k++)
            if (m->budget_share[v][k] >= 0) {
                bw_buf_printf(out, "%s{server=\"%s\",kind=\"%s\"} ", r->d.name, m->server_names[v], kinds[k]);
                put_value(out, V_DOUBLE, &m->budget_share[v][k]);
            }
}

static void servers_kept(const bw_metrics_t *m, const row_t *r, bw_buf_t *out) {
    for (int v = 0; v < m->server_cnt; v++)
        if (m->kept[v] >= 0) bw_buf_printf(out, "%s{server=\"%s\"} %lld\n", r->d.name, m->server_names[v], (long long)m->kept[v]);
}

static void replicas_unread(const bw_metrics_t *m, const row_t *r, bw_buf_t *out) {
    for (int v = 0; v < m->server_cnt; v++)
        for (int k = 0; k < m->servers[v].replica_cnt; k++)
            if (m->replica_unread[v][k] >= 0) {
                bw_buf_printf(out, "%s{server=\"%s\",replica=\"%s\"} ", r->d.name, m->server_names[v],
                              m->servers[v].replicas[k]);
                put_value(out, V_DOUBLE, &m->replica_unread[v][k]);
            }
}

static int with_lanes(const bw_metrics_t *m) { return m->lane_cnt > 1; }
static int with_throttle(const bw_metrics_t *m) { return m->throttle_on; }

static const row_t table[] = {
    {{"bulkwrite_proxy_requests_total", BW_METRIC_COUNTER, "code", BW_METRIC_PROXY,
      "HTTP requests answered, by status code.",
      "answers to `/v1/batches`, and error replies, by HTTP status code (health and metrics "
      "requests are not counted)"},
     requests_by_code, 0, V_U64, NULL},
    {{"bulkwrite_proxy_ops_accepted_total", BW_METRIC_COUNTER, "", BW_METRIC_PROXY,
      "Ops durably written to Kafka.",
      "ops durably written to Kafka"},
     one, TOTAL(ops_accepted), V_U64, NULL},
    {{"bulkwrite_proxy_ops_rejected_total", BW_METRIC_COUNTER, "", BW_METRIC_PROXY,
      "Ops rejected as invalid.",
      "ops rejected as invalid (validation, or too large for a message), or outside the client's "
      "scopes"},
     one, TOTAL(ops_rejected), V_U64, NULL},
    {{"bulkwrite_proxy_kafka_produce_errors_total", BW_METRIC_COUNTER, "", BW_METRIC_PROXY,
      "Ops not accepted because Kafka did not acknowledge their batch.",
      "ops not accepted because Kafka did not acknowledge their batch"},
     one, TOTAL(ops_not_accepted), V_U64, NULL},
    {{"bulkwrite_proxy_kafka_messages_total", BW_METRIC_COUNTER, "", BW_METRIC_PROXY,
      "Shard batches produced.",
      "shard batches (Kafka messages) produced"},
     one, TOTAL(messages), V_U64, NULL},
    {{"bulkwrite_proxy_parts_taken_before_total", BW_METRIC_COUNTER, "", BW_METRIC_PROXY,
      "Messages of a resent request (same request_id) not produced again: an earlier attempt had "
      "them acknowledged.",
      "messages of a resent request (same `request_id`) not produced again, because an earlier "
      "attempt had them acknowledged"},
     one, TOTAL(parts_taken_before), V_U64, NULL},
    {{"bulkwrite_proxy_linger_flushes_total", BW_METRIC_COUNTER, "", BW_METRIC_PROXY,
      "Producer flushes for a batch request alone in the proxy: its batches went to Kafka without "
      "waiting linger.ms.",
      "producer flushes for a batch request alone in the proxy: the batches the producer held went "
      "to Kafka without waiting `linger.ms` for other requests' messages (docs/architecture.md)"},
     one, TOTAL(linger_flushes), V_U64, NULL},
    {{"bulkwrite_proxy_producers_rebuilt_total", BW_METRIC_COUNTER, "", BW_METRIC_PROXY,
      "Producers destroyed and made again after librdkafka raised a fatal error on them.",
      "producers destroyed and made again after librdkafka raised a fatal error on them (an "
      "idempotent producer that lost its sequence); their requests got 503 meanwhile, and /readyz "
      "failed (docs/reliability.md)"},
     one, TOTAL(producers_rebuilt), V_U64, NULL},
    {{"bulkwrite_proxy_backlog_refused_ops_total", BW_METRIC_COUNTER, "shard", BW_METRIC_PROXY,
      "Valid ops answered 429 because their shard's backlog in Kafka was full (the client resends).",
      "valid ops answered 429 because the shard's backlog was full (the client resends them)"},
     shards_nonzero, SHARD(backlog_refused), V_U64, NULL},
    {{"bulkwrite_proxy_accept_latency_seconds", BW_METRIC_HISTOGRAM, "", BW_METRIC_PROXY,
      "Time from request received to reply, including Kafka acknowledgement.",
      "time from request received to reply, including the Kafka acknowledgement (requests that "
      "reached validation)"},
     histogram, TOTAL(accept_latency), V_U64, NULL},
    {{"bulkwrite_proxy_client_forbidden_total", BW_METRIC_COUNTER, "client", BW_METRIC_PROXY,
      "Requests answered 403 because the endpoint is outside the client's roles.",
      "requests answered 403 because the endpoint is outside the client's roles (401s, which have "
      "no client, are in `bulkwrite_proxy_requests_total{code=\"401\"}`)"},
     clients, CLIENT(forbidden), V_U64, NULL},
    {{"bulkwrite_proxy_client_over_quota_total", BW_METRIC_COUNTER, "client,quota", BW_METRIC_PROXY,
      "Requests answered 429 because the client was over one of its quotas (clients file).",
      "requests answered 429 because the client was over its quota `ops_per_second`, "
      "`bytes_per_second` or `jobs_in_flight`"},
     quotas_by_client, 0, V_U64, NULL},
    {{"bulkwrite_proxy_client_quota_share", BW_METRIC_GAUGE, "client,quota", BW_METRIC_PROXY,
      "This proxy's part of the client's ops or bytes quota among the live proxies (1 alone).",
      "this proxy's part (0 to 1) of the client's quota `ops_per_second` or `bytes_per_second`, as the "
      "live proxies split it from their clients' demand every 2 s: 1 alone, 0.5 each with two proxies "
      "asked alike ([security.md](security.md#quotas-across-proxies))"},
     quota_shares, 0, V_DOUBLE, NULL},
    {{"bulkwrite_proxy_client_accepted_ops_total", BW_METRIC_COUNTER, "client", BW_METRIC_PROXY,
      "Ops of the client's requests that the proxy accepted (durable in Kafka).",
      "ops of the client's requests the proxy accepted"},
     clients, CLIENT(accepted_ops), V_U64, NULL},
    {{"bulkwrite_proxy_client_request_bytes_total", BW_METRIC_COUNTER, "client", BW_METRIC_PROXY,
      "Bytes of the client's request bodies that passed its quotas.",
      "body bytes of the client's requests that passed its quotas"},
     clients, CLIENT(accepted_bytes), V_U64, NULL},
    {{"bulkwrite_proxy_client_ops_out_of_scope_total", BW_METRIC_COUNTER, "client", BW_METRIC_PROXY,
      "Ops of POST /v1/batches refused one by one because they are outside the client's scopes.",
      "ops of `POST /v1/batches` refused one by one because they are outside the client's scopes "
      "(also counted in `bulkwrite_proxy_ops_rejected_total`). Per client name; past 1,000 names "
      "the rest add up under `client=\"(other)\"`"},
     clients, CLIENT(out_of_scope), V_U64, NULL},
    {{"bulkwrite_proxy_jobs_index_entries", BW_METRIC_GAUGE, "", BW_METRIC_PROXY,
      "Job records in the index behind GET /v1/jobs/{id}.",
      "job records in the index behind `GET /v1/jobs/{id}`"},
     one, TOTAL(jobs_entries), V_U64, NULL},
    {{"bulkwrite_proxy_jobs_index_bytes", BW_METRIC_GAUGE, "", BW_METRIC_PROXY,
      "Bytes the job index holds (records and entries).",
      "bytes the job index holds (records and entries)"},
     one, TOTAL(jobs_bytes), V_U64, NULL},
    {{"bulkwrite_proxy_jobs_index_max_bytes", BW_METRIC_GAUGE, "", BW_METRIC_PROXY,
      "Its bound, proxy.jobs_index_max_bytes.",
      "the index's bound, `proxy.jobs_index_max_bytes`"},
     one, TOTAL(jobs_max_bytes), V_U64, NULL},
    {{"bulkwrite_proxy_jobs_index_evicted_total", BW_METRIC_COUNTER, "", BW_METRIC_PROXY,
      "Job records dropped from the index, least recently used first.",
      "job records dropped from the index, least recently used first, to stay under its bound"},
     one, TOTAL(jobs_evicted), V_U64, NULL},
    {{"bulkwrite_proxy_jobs_read_from_topic_total", BW_METRIC_COUNTER, "", BW_METRIC_PROXY,
      "Job records read back from the jobs topic for a GET, after the index had dropped them.",
      "job records read back from the jobs topic for a `GET /v1/jobs/{id}` after the index had "
      "dropped them"},
     one, TOTAL(jobs_found_in_topic), V_U64, NULL},
    {{"bulkwrite_proxy_held_job_records", BW_METRIC_GAUGE, "", BW_METRIC_PROXY,
      "Job records that hold scheduled or dependent batches not yet released.",
      "job records (requests) that hold scheduled or dependent batches not yet released into their "
      "shards (`not_before` ahead, or `after` jobs not finished), as this proxy's index knows them"},
     one, TOTAL(held_records), V_U64, NULL},
    {{"bulkwrite_proxy_held_batches_released_total", BW_METRIC_COUNTER, "", BW_METRIC_PROXY,
      "Held batches this proxy released into their shards' partitions.",
      "held (scheduled or dependent) batches this proxy released into their shards' partitions "
      "(another proxy may release the same batch: its shard applies it once)"},
     one, TOTAL(batches_released), V_U64, NULL},
    {{"bulkwrite_consumer_rows_applied_total", BW_METRIC_COUNTER, "shard", BW_METRIC_CONSUMER,
      "Rows applied to the shard.",
      "rows applied to the shard"},
     shards_seen, SHARD(rows), V_U64, NULL},
    {{"bulkwrite_consumer_messages_replayed_total", BW_METRIC_COUNTER, "shard", BW_METRIC_CONSUMER,
      "Messages read again that the shard had already applied (skipped, not re-applied).",
      "messages read again that the shard had already applied; skipped, never re-applied"},
     shards_seen, SHARD(replayed), V_U64, NULL},
    {{"bulkwrite_consumer_rows_failed_total", BW_METRIC_COUNTER, "shard", BW_METRIC_CONSUMER,
      "Rows the shard refused (data errors).",
      "ops the shard refused (data errors), and ops of messages that no longer match the "
      "configuration"},
     shards_seen, SHARD(failed_rows), V_U64, NULL},
    {{"bulkwrite_consumer_batches_applied_total", BW_METRIC_COUNTER, "shard", BW_METRIC_CONSUMER,
      "Batch transactions committed on the shard.",
      "apply transactions committed on the shard"},
     shards_seen, SHARD(batches), V_U64, NULL},
    {{"bulkwrite_consumer_statements_total", BW_METRIC_COUNTER, "shard", BW_METRIC_CONSUMER,
      "SQL statements run on the shard (each takes one permit of its statements-per-second rate).",
      "SQL statements run on the shard; each takes one permit of its statements-per-second rate"},
     shards_seen, SHARD(statements), V_U64, NULL},
    {{"bulkwrite_consumer_errors_total", BW_METRIC_COUNTER, "shard,kind", BW_METRIC_CONSUMER,
      "Apply errors by kind; every retryable, timeout and connection error is followed by a retry.",
      "apply errors by kind: `timeout`, `connection` and `retryable` (per failed attempt; each is "
      "retried), `stop` (per attempt refused for a reason only an operator can fix: the shard stops "
      "and alerts), `data` (per refused row), `decode` (per unusable message)"},
     errors_by_kind, 0, V_U64, NULL},
    {{"bulkwrite_consumer_messages_duplicate_total", BW_METRIC_COUNTER, "shard", BW_METRIC_CONSUMER,
      "Messages of a resubmitted request (same request_id) already applied: skipped.",
      "messages of a resent request (same `request_id`) that the shard had applied; skipped"},
     shards_seen, SHARD(duplicates), V_U64, NULL},
    {{"bulkwrite_consumer_dead_letters_total", BW_METRIC_COUNTER, "shard", BW_METRIC_CONSUMER,
      "Refused ops (or undecodable messages) written to the dead-letter topic.",
      "records written to the dead-letter topic (refused ops, undecodable messages)"},
     shards_seen, SHARD(dead_letters), V_U64, NULL},
    {{"bulkwrite_consumer_unhealthy", BW_METRIC_GAUGE, "shard", BW_METRIC_CONSUMER,
      "1 while the shard is held back after consecutive timeouts (until a probe batch succeeds).",
      "1 while the shard is held back after consecutive timeouts or a stop error, until a probe "
      "batch succeeds"},
     shards_held, SHARD(held), V_INT, NULL},
    {{"bulkwrite_consumer_server_down", BW_METRIC_GAUGE, "server", BW_METRIC_CONSUMER,
      "1 while the server is unreachable (its shards wait; see the BulkwriteServerDown alert).",
      "1 while the server is unreachable (`BulkwriteServerDown`) and this consumer holds one of its "
      "shards: its shards wait without workers, one probe per `consumer.pause_ms` decides"},
     servers_down, 0, V_INT, NULL},
    {{"bulkwrite_consumer_server_budget", BW_METRIC_GAUGE, "server,kind", BW_METRIC_CONSUMER,
      "This consumer's share of the server's budget (POST /v1/servers/{name}/budget): statements or "
      "rows per second.",
      "this consumer's share of a server's budget (`POST /v1/servers/{name}/budget`), "
      "`kind=\"statements\"` per second or `kind=\"rows\"` per second: the budget × the server's "
      "shards held here / its shards; only for the kinds of budget the server has"},
     server_budgets, 0, V_DOUBLE, NULL},
    {{"bulkwrite_consumer_kept_messages", BW_METRIC_GAUGE, "server", BW_METRIC_CONSUMER,
      "Applied messages of the server's shards held here that Kafka still keeps (consumer.keep_applied_ms, "
      "listed replicas behind).",
      "messages of the server's shards held here that were applied and are still in Kafka: what a "
      "failover to a lagging replica, or a restore, can replay (`consumer.keep_applied_ms`, and any "
      "listed replica not level yet); real brokers only"},
     servers_kept, 0, V_I64, NULL},
    {{"bulkwrite_consumer_replica_unread_seconds", BW_METRIC_GAUGE, "server,replica", BW_METRIC_CONSUMER,
      "Seconds since a listed replica's ledger was last read, while it cannot be read (0 while it can): "
      "Kafka keeps what the server's shards applied meanwhile.",
      "0 while a listed replica's ledger (`bw_offsets`) is read every round; else the seconds since it "
      "was last read (or since start): Kafka keeps every batch the server's shards applied meanwhile "
      "(`BulkwriteTrimHeld` after `consumer.replica_unread_alert_ms`); servers whose shards are held here"},
     replicas_unread, 0, V_DOUBLE, NULL},
    {{"bulkwrite_consumer_reconnects_total", BW_METRIC_COUNTER, "shard", BW_METRIC_CONSUMER,
      "Pooled connections found closed by the server or a load balancer and replaced at once (not "
      "errors, not retries).",
      "pooled connections found closed (the server's `wait_timeout`, a load balancer) and replaced "
      "at once: not errors, not retries"},
     shards_seen, SHARD(reconnects), V_U64, NULL},
    {{"bulkwrite_consumer_increments_coalesced_total", BW_METRIC_COUNTER, "shard", BW_METRIC_CONSUMER,
      "Increments added into an earlier increment of the same object (object_types[].coalesce_increments).",
      "increments summed into an earlier increment of the same object in one transaction "
      "(`object_types[].coalesce_increments`): ops applied without a row of their own"},
     shards_seen, SHARD(coalesced), V_U64, NULL},
    {{"bulkwrite_consumer_ops_cancelled_total", BW_METRIC_COUNTER, "shard", BW_METRIC_CONSUMER,
      "Ops of cancelled jobs skipped (DELETE /v1/jobs/{id}): never applied.",
      "ops of cancelled jobs (`DELETE /v1/jobs/{id}`) the shard skipped: never applied, not in its ledger"},
     shards_seen, SHARD(cancelled), V_U64, NULL},
    {{"bulkwrite_consumer_alert_firing", BW_METRIC_GAUGE, "shard", BW_METRIC_CONSUMER,
      "1 while this consumer's BulkwriteShardUnhealthy alert for the shard is firing.",
      "1 while this consumer's `BulkwriteShardUnhealthy` alert for the shard fires"},
     shards_held, SHARD(alert), V_INT, NULL},
    {{"bulkwrite_consumer_alert_posts_total", BW_METRIC_COUNTER, "result", BW_METRIC_CONSUMER,
      "Posts to alerts.webhook_url, by result.",
      "posts to `alerts.webhook_url`, `ok` or `failed`"},
     alert_posts, 0, V_U64, NULL},
    {{"bulkwrite_consumer_rate_batches_per_second", BW_METRIC_GAUGE, "shard", BW_METRIC_CONSUMER,
      "Effective rate limit in statements per second (0 = unlimited); the name predates statement "
      "budgets.",
      "the shard's effective rate limit in statements per second (the name predates statement "
      "budgets): the operator's, else the configured one (0 = unlimited)"},
     shards_held, SHARD(rate), V_DOUBLE, NULL},
    {{"bulkwrite_consumer_rate_rows_per_second", BW_METRIC_GAUGE, "shard", BW_METRIC_CONSUMER,
      "Effective row budget in rows per second (0 = none: statements alone limit the shard).",
      "the shard's effective row budget in rows per second: the operator's, else the configured one "
      "(0 = none)"},
     shards_held, SHARD(row_rate), V_DOUBLE, NULL},
    {{"bulkwrite_consumer_paused", BW_METRIC_GAUGE, "shard", BW_METRIC_CONSUMER,
      "1 while an operator has paused the shard.",
      "1 while an operator has paused the shard (`POST /v1/shards/{n}/pause`)"},
     shards_held, SHARD(paused), V_INT, NULL},
    {{"bulkwrite_consumer_buffer_full", BW_METRIC_GAUGE, "shard", BW_METRIC_CONSUMER,
      "1 while fetching for the shard is paused because its buffer is full (back-pressure).",
      "1 while fetching for the shard is paused because its buffer is full (back-pressure): "
      "`consumer.pull_count` messages, or its share of `consumer.buffer_max_bytes`"},
     shards_held, SHARD(buffer_full), V_INT, NULL},
    {{"bulkwrite_consumer_retries_total", BW_METRIC_COUNTER, "shard", BW_METRIC_CONSUMER,
      "Batches scheduled again after a retryable error (timeouts and connection errors included).",
      "batches scheduled again after a retryable error (timeouts and connection errors included)"},
     shards_seen, SHARD(retries), V_U64, NULL},
    {{"bulkwrite_consumer_lag_messages", BW_METRIC_GAUGE, "shard", BW_METRIC_CONSUMER,
      "Messages in Kafka the shard has not applied (high watermark minus its next offset).",
      "messages not yet applied: the partition's high watermark minus the next offset to apply "
      "(from the log start for a shard that never applied anything; the buffered count when the "
      "watermark is unknown). A shard stopped at lost messages counts them too. Refreshed every "
      "second. With lanes, the sum over the shard's lanes."},
     shards_held, SHARD(lag), V_I64, NULL},
    {{"bulkwrite_consumer_lane_lag", BW_METRIC_GAUGE, "shard,lane", BW_METRIC_CONSUMER,
      "Messages of the shard's partition in the lane's topic not yet applied (config lanes).",
      "`bulkwrite_consumer_lag_messages` for one lane's partition of the shard; only with `lanes` "
      "configured"},
     lanes, LANE(lag), V_I64, with_lanes},
    {{"bulkwrite_consumer_lane_statements_total", BW_METRIC_COUNTER, "shard,lane", BW_METRIC_CONSUMER,
      "Statements applied from the lane on the shard since this consumer was assigned it: the "
      "lanes' shares of the shard's budget.",
      "statements applied from the lane on the shard since this consumer was assigned it: the "
      "lanes' shares of the shard's budget; only with `lanes` configured"},
     lanes, LANE(statements), V_U64, with_lanes},
    {{"bulkwrite_consumer_lost_messages", BW_METRIC_GAUGE, "shard", BW_METRIC_CONSUMER,
      "Messages Kafka deleted before the shard applied them (the shard stops; see the "
      "BulkwriteShardDataLost alert).",
      "messages Kafka deleted before the shard applied them; non-zero stops the shard and fires "
      "`BulkwriteShardDataLost`"},
     shards_held, SHARD(lost), V_I64, NULL},
    {{"bulkwrite_consumer_throttle_state", BW_METRIC_GAUGE, "shard,state", BW_METRIC_CONSUMER,
      "1 for the shard's throttle state (running, throttled, unknown, critical), 0 for the others.",
      "1 for the adaptive throttle's state of the shard (`running`, `throttled`, `unknown`, "
      "`critical`), 0 for the others; absent while `throttle.mode` is off"},
     throttle_states, 0, V_INT, with_throttle},
    {{"bulkwrite_consumer_throttle_rate", BW_METRIC_GAUGE, "shard", BW_METRIC_CONSUMER,
      "Statements per second the adaptive throttle decided for the shard (in dry_run, not applied).",
      "the statements/s the throttle runs the shard at (its cap while running; in `dry_run` the "
      "rate it would set)"},
     shards_held, SHARD(throttle_rate), V_DOUBLE, with_throttle},
    {{"bulkwrite_consumer_signal", BW_METRIC_GAUGE, "server,signal", BW_METRIC_CONSUMER,
      "The throttle's last reading of a server signal (NaN: unknown); "
      "signal=\"statement_latency_ms\" is the most of the server's shards this consumer holds.",
      "the last reading of each throttle signal in use (`replication_lag_ms` only for servers with "
      "replicas, `threads_running`, `custom`; `statement_latency_ms` is the most of the server's "
      "shards that ran batches since the last step); NaN while unknown (never read, or its last "
      "good reading older than `throttle.stale_ms`)"},
     server_signals, TOTAL(signal_value), V_DOUBLE, with_throttle},
    {{"bulkwrite_consumer_signal_threshold", BW_METRIC_GAUGE, "server,signal", BW_METRIC_CONSUMER,
      "The threshold of a server signal (throttle.*); only signals in use are shown.",
      "the signal's threshold; only signals in use are shown. All four throttle series are absent "
      "while `throttle.mode` is off"},
     server_signals, TOTAL(signal_threshold), V_DOUBLE, with_throttle},
    {{"bulkwrite_consumer_apply_latency_seconds", BW_METRIC_HISTOGRAM, "", BW_METRIC_CONSUMER,
      "Time to apply one batch transaction.",
      "time for one batch, from hand-off to a worker until the dispatcher collects the result"},
     histogram, TOTAL(apply_latency), V_U64, NULL},
};
#define ROWS (sizeof(table) / sizeof(table[0]))

const bw_metric_def_t *bw_metrics_def(size_t i) { return i < ROWS ? &table[i].d : NULL; }

static const char *const type_names[] = {"counter", "gauge", "histogram"};

void bw_metrics_render(bw_metrics_t *m, bw_buf_t *out) {
    unsigned role = BW_METRIC_ROLE(m->role);
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < ROWS; i++) {
        const row_t *r = &table[i];
        if (!(r->d.roles & role) || (r->shown && !r->shown(m))) continue;
        bw_buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", r->d.name, r->d.help, r->d.name, type_names[r->d.type]);
        r->render(m, r, out);
    }
    pthread_mutex_unlock(&m->mu);
}

/* ---- docs/api.md ------------------------------------------------------------------- */

static void doc_table(bw_buf_t *out, unsigned role) {
    bw_buf_puts(out, "| series | type | meaning |\n| --- | --- | --- |\n");
    for (size_t i = 0; i < ROWS; i++) {
        const bw_metric_def_t *d = &table[i].d;
        if (!(d->roles & role)) continue;
        bw_buf_printf(out, "| `%s%s%s%s` | %s | %s |\n", d->name, *d->labels ? "{" : "", d->labels,
                      *d->labels ? "}" : "", type_names[d->type], d->doc);
    }
}

void bw_metrics_doc(bw_buf_t *out) {
    bw_buf_puts(out, "Defined by the table in `common/metrics.c`, which also writes this list. Histograms have "
                     "the buckets (seconds)");
    for (size_t i = 0; i < BUCKETS; i++) bw_buf_printf(out, "%s %g", i ? "," : "", buckets[i]);
    bw_buf_puts(out, " and `+Inf`.\n\nProxy:\n\n");
    doc_table(out, BW_METRIC_PROXY);
    bw_buf_puts(out, "\nConsumer: counters have one series per shard once the shard saw activity here; gauges\n"
                     "only for the shards this consumer holds now (a revoked shard's gauges leave, its new\n"
                     "owner reports them):\n\n");
    doc_table(out, BW_METRIC_CONSUMER);
    bw_buf_puts(out, "\n"); /* the table ends before the marker line */
}

int bw_metrics_doc_splice(const char *text, bw_buf_t *out) {
    const char *begin = strstr(text, BW_METRICS_DOC_BEGIN);
    const char *end = begin ? strstr(begin, BW_METRICS_DOC_END) : NULL;
    if (!end) return -1;
    begin += strlen(BW_METRICS_DOC_BEGIN);
    bw_buf_append(out, text, (size_t)(begin - text));
    bw_metrics_doc(out);
    bw_buf_puts(out, end);
    return 0;
}
