#define _POSIX_C_SOURCE 200809L
#include "alerts.h"

#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "consumer_metrics.h"
#include "log.h"

#define COMPONENT "alerts"
#define RETRY_MS 2000

typedef struct {
    int firing;
    int unsent;           /* state changed since the last successful post */
    int64_t starts_ms, ends_ms;
    int64_t next_post_ms; /* re-post a firing alert from then on */
    uint64_t version;     /* bumped by every change, so a post only settles what it sent */
    char error[512];
} alert_t;

/* @locks mu guards alerts[], stopping */
struct bw_alerts {
    const bw_config_t *conf;
    bw_metrics_t *metrics;
    char generator_url[256];
    pthread_mutex_t mu;
    pthread_cond_t cv;
    alert_t *alerts; /* [BW_ALERT_KINDS * shard_count], kind-major */
    int stopping;
    pthread_t thread;
    int has_thread;
};

static void rfc3339(int64_t ms, char out[32]) {
    time_t s = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&s, &tm);
    size_t n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, 32 - n, ".%03dZ", (int)(ms % 1000));
}

static const struct {
    const char *name, *severity, *summary;
    int per_server; /* indexed by server, not shard */
} kinds[BW_ALERT_KINDS] = {
    {"BulkwriteShardUnhealthy", "page",
     "stopped taking batches: consecutive timeouts or lost connections; the consumer holds it back and "
     "probes it with one batch at a time", 0},
    {"BulkwriteShardDataLost", "page",
     "lost accepted writes: Kafka deleted messages before the shard applied them; the shard stops there "
     "(see the runbook: docs/operations.md)", 0},
    {"BulkwriteShardBacklogAging", "warning",
     "has unapplied messages approaching the batches topic's retention.ms: resume or speed up the shard "
     "before Kafka deletes them", 0},
    {"BulkwriteShardStopped", "page",
     "refuses writes for a reason only an operator can fix (a dropped column or table, a lost grant, "
     "read-only, a full disk): nothing is dead-lettered, its batches wait in Kafka, one is tried again "
     "every consumer.pause_ms", 0},
    {"BulkwriteShardNoProgress", "page",
     "has unapplied messages and applied no batch for longer than consumer.stall_alert_ms, whatever the "
     "cause: see the latest error, the shard's other alerts and GET /v1/shards", 0},
    {"BulkwriteServerDown", "page",
     "is unreachable: every shard on it waits without taking a worker, one batch every consumer.pause_ms "
     "decides when it is back; the other servers' shards keep going", 1},
    {"BulkwriteThrottleSignalUnknown", "warning",
     "has a throttle signal that cannot be read (or is older than throttle.stale_ms): its shards run at "
     "throttle.floor until it is read again; see the error, GET /v1/shards and the consumer's log", 1},
    {"BulkwriteTrimHeld", "warning",
     "keeps every applied batch of its shards in Kafka: a listed replica's ledger cannot be read, and a "
     "failover to that replica could need any of them; the brokers' disks grow until it is read again or "
     "taken out of shards.servers[].replicas (docs/operations.md)", 1},
};

const char *bw_alert_name(bw_alert_kind_t kind) { return kinds[kind].name; }

/* @locks caller holds mu (or owns a) */
char *bw_alerts_body(const bw_alerts_t *a, const int *alerts, size_t n, int64_t now_ms) {
    (void)now_ms;
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        int kind = alerts[i] / a->conf->shard_count, s = alerts[i] % a->conf->shard_count;
        const alert_t *al = &a->alerts[alerts[i]];
        const bw_server_t *sv = &a->conf->servers[kinds[kind].per_server ? s : a->conf->shard_server[s]];
        char shard[16], db[80], address[300], ts[32], summary[700];
        snprintf(address, sizeof(address), "%s:%d", sv->host, sv->port);
        json_t *labels;
        if (kinds[kind].per_server) {
            labels = json_pack("{s:s, s:s, s:s, s:s, s:s}", "alertname", kinds[kind].name, "service", "bulkwrite",
                               "severity", kinds[kind].severity, "server", sv->name, "address", address);
            snprintf(summary, sizeof(summary), "bulkwrite server %s (%s, shards %d to %d) %s", sv->name, address,
                     sv->first_shard, sv->last_shard, kinds[kind].summary);
        } else {
            snprintf(shard, sizeof(shard), "%d", s);
            bw_config_shard_db(a->conf, s, db, sizeof(db));
            labels = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "alertname", kinds[kind].name, "service",
                               "bulkwrite", "severity", kinds[kind].severity, "shard", shard, "database", db,
                               "server", sv->name);
            snprintf(summary, sizeof(summary), "bulkwrite shard %d (%s on %s, %s) %s", s, db, sv->name, address,
                     kinds[kind].summary);
        }
        for (int l = 0; l < a->conf->alert_label_cnt; l++) {
            const char *kv = a->conf->alert_labels[l], *eq = strchr(kv, '=');
            char name[128];
            snprintf(name, sizeof(name), "%.*s", (int)(eq - kv), kv);
            json_object_set_new(labels, name, json_string(eq + 1));
        }
        json_t *ann = json_pack("{s:s, s:s}", "summary", summary, "error", al->error);
        rfc3339(al->starts_ms, ts);
        json_t *o = json_pack("{s:o, s:o, s:s, s:s}", "labels", labels, "annotations", ann, "startsAt", ts,
                              "generatorURL", a->generator_url);
        if (!al->firing) {
            rfc3339(al->ends_ms, ts);
            json_object_set_new(o, "endsAt", json_string(ts));
        }
        json_array_append_new(arr, o);
    }
    char *body = json_dumps(arr, JSON_COMPACT);
    json_decref(arr);
    if (!body) abort();
    return body;
}

static size_t discard(char *p, size_t size, size_t n, void *ud) {
    (void)p;
    (void)ud;
    return size * n;
}

/* Posts body; 0 on a 2xx answer, else -1 with err. */
static int post(const bw_alerts_t *a, const char *body, char *err, size_t esz) {
    CURL *c = curl_easy_init();
    if (!c) return snprintf(err, esz, "curl_easy_init failed"), -1;
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(c, CURLOPT_URL, a->conf->alertmanager_url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)a->conf->alert_timeout_ms);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    if (rc != CURLE_OK) return snprintf(err, esz, "%s", curl_easy_strerror(rc)), -1;
    if (status < 200 || status > 299) return snprintf(err, esz, "HTTP status %ld", status), -1;
    return 0;
}

static void *sender_main(void *arg) {
    bw_alerts_t *a = arg;
    int n_alerts = a->conf->shard_count * BW_ALERT_KINDS;
    int *due = malloc(sizeof(int) * (size_t)n_alerts);
    uint64_t *sent_version = malloc(sizeof(uint64_t) * (size_t)n_alerts);
    pthread_mutex_lock(&a->mu);
    for (;;) {
        int64_t now = bw_wall_ms();
        size_t n = 0;
        for (int s = 0; s < n_alerts; s++) {
            alert_t *al = &a->alerts[s];
            if ((al->unsent || al->firing) && now >= al->next_post_ms) {
                sent_version[n] = al->version;
                due[n++] = s;
            }
        }
        if (n) {
            char *body = bw_alerts_body(a, due, n, now);
            pthread_mutex_unlock(&a->mu);
            char err[256];
            int rc = post(a, body, err, sizeof(err));
            free(body);
            pthread_mutex_lock(&a->mu);
            now = bw_wall_ms();
            for (size_t i = 0; i < n; i++) {
                alert_t *al = &a->alerts[due[i]];
                if (al->version != sent_version[i]) continue; /* changed meanwhile: post again now */
                if (rc == 0) al->unsent = 0;
                al->next_post_ms = now + (rc == 0 ? a->conf->alert_resend_ms : RETRY_MS);
            }
            bw_metrics_add(a->metrics, BW_CM_ALERT_POSTS, 0, rc == 0 ? 0 : 1, 1); /* ok, failed */
            if (rc) bw_log(BW_LOG_WARN, COMPONENT, -1, NULL, "posting %zu alerts to %s failed: %s", n,
                           a->conf->alertmanager_url, err);
        }
        if (a->stopping) break;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&a->cv, &a->mu, &ts);
    }
    pthread_mutex_unlock(&a->mu);
    free(due);
    free(sent_version);
    return NULL;
}

bw_alerts_t *bw_alerts_new(const bw_config_t *conf, bw_metrics_t *metrics, const char *generator_url) {
    bw_alerts_t *a = calloc(1, sizeof(*a));
    a->conf = conf;
    a->metrics = metrics;
    snprintf(a->generator_url, sizeof(a->generator_url), "%s", generator_url);
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cv, NULL);
    a->alerts = calloc((size_t)conf->shard_count * BW_ALERT_KINDS, sizeof(*a->alerts));
    if (conf->alertmanager_url[0]) {
        curl_global_init(CURL_GLOBAL_DEFAULT);
        a->has_thread = pthread_create(&a->thread, NULL, sender_main, a) == 0;
    }
    return a;
}

void bw_alerts_destroy(bw_alerts_t *a) {
    if (!a) return;
    if (a->has_thread) {
        pthread_mutex_lock(&a->mu);
        a->stopping = 1;
        pthread_cond_signal(&a->cv);
        pthread_mutex_unlock(&a->mu);
        pthread_join(a->thread, NULL);
        curl_global_cleanup();
    }
    pthread_mutex_destroy(&a->mu);
    pthread_cond_destroy(&a->cv);
    free(a->alerts);
    free(a);
}

/* shard: the shard, or the server of a per-server kind */
static void fire(bw_alerts_t *a, bw_alert_kind_t kind, int shard, const char *error) {
    pthread_mutex_lock(&a->mu);
    alert_t *al = &a->alerts[kind * a->conf->shard_count + shard];
    int was = al->firing;
    if (!was) {
        al->firing = 1;
        al->starts_ms = bw_wall_ms();
        al->unsent = 1;
        al->next_post_ms = 0;
    }
    /* the same alert again changes nothing to post (a check may re-fire it every second) */
    if (!was || strncmp(al->error, error, sizeof(al->error) - 1)) {
        snprintf(al->error, sizeof(al->error), "%s", error);
        al->version++;
        pthread_cond_signal(&a->cv);
    }
    pthread_mutex_unlock(&a->mu);
    if (!was) {
        if (kind == BW_ALERT_UNHEALTHY) bw_metrics_set(a->metrics, BW_CM_ALERT_FIRING, shard, 0, 1);
        if (kinds[kind].per_server)
            bw_log(BW_LOG_ERROR, COMPONENT, -1, NULL, "ALERT %s firing for server %s: %s", kinds[kind].name,
                   a->conf->servers[shard].name, error);
        else
            bw_log(kind == BW_ALERT_BACKLOG_AGING ? BW_LOG_WARN : BW_LOG_ERROR, COMPONENT, shard, NULL,
                   "ALERT %s firing: %s", kinds[kind].name, error);
    }
}

void bw_alerts_fire(bw_alerts_t *a, bw_alert_kind_t kind, int shard, const char *error) {
    fire(a, kind, shard, error);
}

void bw_alerts_fire_server(bw_alerts_t *a, int server, const char *error) {
    fire(a, BW_ALERT_SERVER_DOWN, server, error);
}

/* lapse_ms: 0 resolves now; more hands the alert over (bw_alerts_hand_over_server) */
static void resolve(bw_alerts_t *a, bw_alert_kind_t kind, int shard, int64_t lapse_ms) {
    pthread_mutex_lock(&a->mu);
    alert_t *al = &a->alerts[kind * a->conf->shard_count + shard];
    int was = al->firing;
    if (was) {
        al->firing = 0;
        al->ends_ms = bw_wall_ms() + lapse_ms;
        al->unsent = 1;
        al->next_post_ms = 0;
        al->version++;
        pthread_cond_signal(&a->cv);
    }
    pthread_mutex_unlock(&a->mu);
    if (was) {
        if (kind == BW_ALERT_UNHEALTHY) bw_metrics_set(a->metrics, BW_CM_ALERT_FIRING, shard, 0, 0);
        if (kinds[kind].per_server && lapse_ms)
            bw_log(BW_LOG_INFO, COMPONENT, -1, NULL,
                   "ALERT %s for server %s handed over: it lapses in %lld ms unless its shards' new holder fires it",
                   kinds[kind].name, a->conf->servers[shard].name, (long long)lapse_ms);
        else if (kinds[kind].per_server)
            bw_log(BW_LOG_INFO, COMPONENT, -1, NULL, "ALERT %s resolved for server %s", kinds[kind].name,
                   a->conf->servers[shard].name);
        else
            bw_log(BW_LOG_INFO, COMPONENT, shard, NULL, "ALERT %s resolved", kinds[kind].name);
    }
}

void bw_alerts_resolve(bw_alerts_t *a, bw_alert_kind_t kind, int shard) { resolve(a, kind, shard, 0); }
void bw_alerts_resolve_server(bw_alerts_t *a, int server) { resolve(a, BW_ALERT_SERVER_DOWN, server, 0); }
void bw_alerts_hand_over_server(bw_alerts_t *a, int server, int64_t lapse_ms) {
    resolve(a, BW_ALERT_SERVER_DOWN, server, lapse_ms > 0 ? lapse_ms : 1);
}

size_t bw_alerts_of_shard(bw_alerts_t *a, int shard, const char **names, size_t max) {
    size_t n = 0;
    pthread_mutex_lock(&a->mu);
    for (int k = 0; k < BW_ALERT_KINDS && n < max; k++) {
        int at = kinds[k].per_server ? a->conf->shard_server[shard] : shard;
        if (a->alerts[k * a->conf->shard_count + at].firing) names[n++] = kinds[k].name;
    }
    pthread_mutex_unlock(&a->mu);
    return n;
}

int bw_alerts_firing(bw_alerts_t *a, bw_alert_kind_t kind, int shard) {
    pthread_mutex_lock(&a->mu);
    int f = a->alerts[kind * a->conf->shard_count + shard].firing;
    pthread_mutex_unlock(&a->mu);
    return f;
}
