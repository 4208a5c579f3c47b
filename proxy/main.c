/* bw-proxy — the bulk write API, job receipts and the SREs' shard API.
 *
 * POST /v1/batches takes a BatchWriteRequest (protobuf or JSON), validates each op,
 * hands the valid ones to the batcher, produces one Kafka message per batch to the
 * shard's partition, answers once Kafka has acknowledged every message, and records
 * the job in the jobs topic (submit.c), so that any proxy can answer GET /v1/jobs/{id}
 * (jobs.c). GET /v1/shards and POST /v1/shards/{n}/rate|pause|resume read and write
 * the control topic (admin.c). routes.c decides who may call what, on which listener.
 *
 * Threads: libmicrohttpd runs one thread per connection (a request blocks until its
 * acknowledgements arrive); a pool of proxy.producers idempotent producers, each with a
 * poller thread serving its delivery reports (producers.c); tails of the jobs, control
 * and status topics each have a thread; one thread releases held (scheduled and
 * dependent) batches when they are due (release.c); this file's loop waits for signals.
 * proxy.h lists the files and the state they share. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon.h"
#include "log.h"
#include "notify.h"
#include "proxy.h"

bw_proxy_t proxy;

/* Every status record a consumer writes: the backlog's admission learns the applied
 * offsets, the history the shard's numbers. @locality the status tail's thread */
static void on_status(void *ud, int shard, const Bulkwrite__Internal__V1__ShardStatus *st) {
    (void)ud;
    bw_backlog_on_status(proxy.backlog, shard, st);
    bw_history_observe(proxy.history, shard,
                       &(bw_history_report_t){.at_ms = st->updated_at_ms, .consumer = st->consumer, .lag = st->lag,
                                              .oldest_unapplied_ms = st->oldest_unapplied_ms,
                                              .rows_applied = st->rows_applied, .rate = st->rate,
                                              .row_rate = st->row_rate, .paused = st->paused,
                                              .alerts = (const char *const *)st->alerts, .n_alerts = st->n_alerts});
}

/* A shard whose consumer has not reported for three status intervals (30 s at least)
 * gets no point in its history: a gap where its consumer was gone. */
static int64_t history_stale_ms(const bw_config_t *conf) {
    int64_t three = 3 * (int64_t)conf->status_interval_ms;
    return three > 30000 ? three : 30000;
}

/* Who may call, TLS, the producers, the side topics and their tails. */
static int start(bw_daemon_t *d) {
    bw_config_t *conf = proxy.conf;
    char err[512];
    /* who may call: before any connection, so a bad clients file stops startup at once */
    proxy.quota = bw_quota_new();
    if (!(proxy.auth = bw_auth_start(conf, err, sizeof(err))))
        return bw_error(COMPONENT, "%s", err), -1;
    if (conf->proxy_auth_clients_file[0] && !conf->proxy_auth_job_id_secret[0])
        bw_log(BW_LOG_WARN, COMPONENT, -1, NULL, "proxy.auth.job_id_secret is empty: anyone who knows a client's "
               "name and request_id can compute its job id (docs/security.md)");
    if (bw_tls_load(conf, &proxy.tls, err, sizeof(err))) return bw_error(COMPONENT, "%s", err), -1;
    if (bw_producers_start(d->brokers, err, sizeof(err))) return bw_error(COMPONENT, "%s", err), -1;
    bw_topic_retention_t retention;
    if (bw_kafka_ensure_topic(proxy.rk, conf, 10000, &retention, err, sizeof(err)) != BW_OK)
        return bw_error(COMPONENT, "%s", err), -1;
    proxy.embedded = retention.embedded;
    if (bw_kafka_ensure_side_topic(proxy.rk, conf, conf->jobs_topic, BW_TOPIC_EXPIRING, 10000, err, sizeof(err)) ||
        bw_kafka_ensure_side_topic(proxy.rk, conf, conf->control_topic, BW_TOPIC_TABLE, 10000, err, sizeof(err)) ||
        bw_kafka_ensure_side_topic(proxy.rk, conf, conf->status_topic, BW_TOPIC_TABLE, 10000, err, sizeof(err)) ||
        !(proxy.jobs = bw_jobs_start(conf, d->brokers, err, sizeof(err))) ||
        !(proxy.backlog = bw_backlog_new(conf, proxy.rk, retention.embedded)) ||
        !(proxy.history = bw_history_new(conf->shard_count, history_stale_ms(conf))) ||
        !(proxy.shards = bw_shard_table_start(conf, d->brokers, &(bw_status_hook_t){on_status, NULL}, err, sizeof(err))))
        return bw_error(COMPONENT, "jobs, control and status topics: %s", err), -1;
    proxy.metrics = bw_metrics_new(conf, &bw_proxy_metrics);
    bw_quota_on_share(proxy.quota, bw_proxy_metrics_quota_share, proxy.metrics); /* before the first fleet turn */
    bw_producers_run();
    return 0;
}

/* The listeners: one thread per connection (a request's thread waits for its
 * acknowledgements); both have the same TLS and bounds (each its own connections).
 * `status` gets where it listens, for systemd. */
static int listen_http(bw_daemon_t *d, char *status, size_t status_size) {
    const bw_config_t *conf = proxy.conf;
    static const bw_listener_t listeners[] = {BW_LISTENER_ONLY, BW_LISTENER_DATA, BW_LISTENER_ADMIN};
    int split = conf->proxy_admin_port != 0, bound, admin_bound = 0;
    bw_listen_limits_t limits = {(unsigned)conf->proxy_max_connections, (unsigned)conf->proxy_max_connections_per_ip,
                                 (unsigned)conf->proxy_connection_timeout_s};
    const bw_listen_tls_t *tls = proxy.tls ? &proxy.tls->listen : NULL;
    const char *scheme = tls ? "https" : "http";
    proxy.httpd = bw_daemon_listen(d, conf->proxy_listen_address, conf->proxy_port, MHD_USE_THREAD_PER_CONNECTION,
                                   bw_routes_on_request, (void *)&listeners[split ? BW_LISTENER_DATA : BW_LISTENER_ONLY],
                                   bw_routes_on_completed, &limits, tls, &bound);
    if (!proxy.httpd) return -1;
    if (split) {
        bw_daemon_t admin_d = *d;
        admin_d.port_file = NULL; /* --port-file names the data port */
        proxy.admin_httpd = bw_daemon_listen(&admin_d, conf->proxy_admin_listen_address, conf->proxy_admin_port,
                                             MHD_USE_THREAD_PER_CONNECTION, bw_routes_on_request,
                                             (void *)&listeners[BW_LISTENER_ADMIN], bw_routes_on_completed, &limits,
                                             tls, &admin_bound);
        if (!proxy.admin_httpd) return -1;
    }
    bw_info(COMPONENT, "listening on %s://%s:%d%s, topic %s, %d shards", scheme, conf->proxy_listen_address, bound,
            split ? "" : " (the admin API too)", conf->topic, conf->shard_count);
    if (split) bw_info(COMPONENT, "admin API on %s://%s:%d", scheme, conf->proxy_admin_listen_address, admin_bound);
    snprintf(status, status_size, "listening on %s://%s:%d", scheme, conf->proxy_listen_address, bound);
    if (proxy.tls)
        bw_info(COMPONENT, "TLS: client certificates %s", !proxy.tls->ca_pem ? "not asked for"
                                                          : proxy.tls->require_client_cert ? "required"
                                                                                           : "verified when presented");
    return 0;
}

/* The fleet turn's part for quotas (quota.h): this proxy's demand into its record, then
 * its shares of each client's quota from every proxy's; and whether it releases held
 * batches yet (release.c: the proxies that do share the shards). */
static void fleet_fill(void *q, Bulkwrite__Internal__V1__FleetMember *rec, int64_t now_ms) {
    (void)now_ms;
    bw_quota_fleet_fill(q, rec, bw_now_us());
    rec->releases = bw_release_running();
}
static void quota_read(void *q, const char *self, Bulkwrite__Internal__V1__FleetMember *const *members, size_t n,
                       int64_t now_ms) {
    bw_quota_fleet_read(q, self, members, n, now_ms, bw_now_us());
}

/* The clients with a quota, which the fleet records list (again after each SIGHUP). */
static void quota_list(void) {
    bw_auth_set_t *set = bw_auth_acquire(proxy.auth);
    bw_quota_unlist_all(proxy.quota);
    for (int i = 0; set && i < set->client_cnt; i++)
        bw_quota_list(proxy.quota, set->clients[i].name, &set->clients[i].quota, bw_now_us());
    bw_auth_release(set);
}

/* This proxy in the fleet (fleet.h): HOST:PORT (HOST:pidPID for port 0, not known
 * yet), its prints (the clients file's credentials among them: again after each
 * SIGHUP), its clients' demand (quotas shared by the proxies), and the first check,
 * before it listens. */
static void join_fleet(int64_t started_at_ms) {
    static bw_fleet_hook_t quota_hook = {fleet_fill, quota_read, NULL};
    char self[300];
    bw_fleet_host_id(proxy.conf->proxy_port, proxy.conf->proxy_listen_address, self, sizeof(self));
    char *credentials = bw_auth_credentials(proxy.auth);
    bw_fleet_self_init(&proxy.fleet, "proxy", self, started_at_ms, proxy.conf, credentials);
    free(credentials);
    quota_hook.arg = proxy.quota;
    proxy.fleet.hook = &quota_hook;
    quota_list();
    bw_shard_table_sync(proxy.shards, 2000); /* the members' latest records */
}

static void fleet_reprint(void) {
    char *credentials = bw_auth_credentials(proxy.auth);
    bw_fleet_self_set_credentials(&proxy.fleet, credentials);
    free(credentials);
    quota_list();
}

/* Requests in flight finish first: the pollers still serve their acks. */
static void stop(void) {
    if (proxy.httpd) MHD_stop_daemon(proxy.httpd);
    if (proxy.admin_httpd) MHD_stop_daemon(proxy.admin_httpd);
    if (proxy.rk && proxy.fleet.instance[0]) bw_fleet_leave(&proxy.fleet, proxy.rk, proxy.conf->status_topic);
    bw_fleet_self_free(&proxy.fleet);
    bw_release_stop(); /* before the pollers: a release waits for its acks */
    bw_producers_stop_polling();
    if (proxy.jobs) bw_jobs_stop(proxy.jobs);
    if (proxy.shards) bw_shard_table_stop(proxy.shards);
    if (proxy.backlog) bw_backlog_destroy(proxy.backlog);
    bw_history_free(proxy.history);
    bw_producers_destroy();
    if (proxy.auth) bw_auth_stop(proxy.auth);
    bw_quota_free(proxy.quota);
    bw_tls_free(proxy.tls);
    if (proxy.metrics) bw_metrics_destroy(proxy.metrics);
    bw_config_destroy(proxy.conf);
}

/* SIGHUP's shard-rate hook: bw_config_reload re-derived conf->shard_rate and
 * shard_row_rate, which GET /v1/shards reads fresh on each request; nothing else here
 * holds a rate. */
static void rates_reloaded(const bw_config_t *c) { (void)c; }

int main(int argc, char **argv) {
    bw_daemon_t d = {.name = "bw-proxy", .port_help = "HTTP port (overrides proxy.port)", .process = BW_PROC_PROXY,
                     .hooks = {[BW_HOOK_SHARD_RATES] = rates_reloaded}};
    int exit_code;
    if (!(proxy.conf = bw_daemon_init(&d, argc, argv, &exit_code))) return exit_code;
    if (d.port >= 0) proxy.conf->proxy_port = d.port;
    atomic_store(&proxy.run, 1);
    int64_t started_at_ms = bw_wall_ms();
    char status[300];
    if (start(&d)) {
        stop();
        return 1;
    }
    join_fleet(started_at_ms);
    atomic_store(&proxy.fleet_agrees, bw_fleet_turn(&proxy.fleet, proxy.rk, proxy.conf->status_topic, proxy.shards,
                                                    bw_wall_ms()));
    bw_release_start(); /* held (scheduled, dependent) batches, when due; after join_fleet: it reads the instance */
    if (listen_http(&d, status, sizeof(status))) {
        stop();
        return 1;
    }
    atomic_int reload = 0;
    bw_daemon_handle_signals(&proxy.run, &reload);
    bw_daemon_ready(&d, status); /* after the signal handlers: systemd may reload at once */
    while (atomic_load(&proxy.run)) {
        usleep(100000);
        /* SIGHUP: the keys the table applies for the proxy, and the clients file */
        if (atomic_exchange(&reload, 0)) {
            bw_daemon_reload(&d, proxy.conf);
            bw_auth_reload(proxy.auth, proxy.conf); /* the file the running config names */
            fleet_reprint();
        }
        atomic_store(&proxy.fleet_agrees, bw_fleet_turn(&proxy.fleet, proxy.rk, proxy.conf->status_topic, proxy.shards,
                                                        bw_wall_ms()));
        bw_producers_recover(); /* a producer librdkafka raised a fatal error on */
        bw_history_tick(proxy.history, bw_wall_ms()); /* a point per shard every BW_HISTORY_STEP_MS */
    }
    bw_info(COMPONENT, "shutting down: finishing requests in flight");
    bw_notify("STOPPING=1");
    stop();
    return 0;
}
