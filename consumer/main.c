/* bw-consumer — applies shard batches from Kafka to the MySQL shards, at each shard's rate.
 *
 * Threads:
 *  - the dispatcher (this file's loop) polls Kafka into the partitions' buffers
 *    (partition.c), serves rebalances (rebalance.c), hands due jobs to the pool
 *    (scheduler.c), takes finished ones back, and keeps Kafka, the status topic and the
 *    gauges up to date (progress.c);
 *  - consumer.workers worker threads apply jobs (apply.c), one transaction each;
 *  - libmicrohttpd's thread serves /metrics, /healthz and /readyz;
 *  - the alert sender (alerts.c), the control topic's tail (shardtable.c), and the
 *    watermarks thread (progress.c: partitions not fetched still show their lag).
 * consumer.h lists the files and the state they share.
 *
 * Offsets: the shard's own database holds each partition's next offset, updated in the
 * batch's transaction (exactly-once effects); the Kafka commit that follows only saves
 * re-reading. Runtime control: the operator's per-shard rate and pause come from the
 * compacted control topic, applied on the loop's next turn; SIGHUP reloads the config
 * file's keys the key table marks applied for the consumer (docs/configuration.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "consumer.h"
#include "daemon.h"
#include "log.h"
#include "notify.h"

bw_consumer_t consumer;

/* SIGHUP's hooks (the key table's reload column, config/config_keys.c): what applied keys
 * re-derive. bw_daemon_reload runs them on this thread, the only reader of rates,
 * retry, pause and throttle settings. */
static void apply_rates(const bw_config_t *c) {
    (void)c;
    bw_scheduler_apply_settings(bw_now_us());
}

static void apply_throttle(const bw_config_t *c) {
    bw_throttle_limits_from_config(c, &consumer.throttle);
    bw_scheduler_apply_settings(bw_now_us());
}

static void apply_health(const bw_config_t *c) {
    bw_health_set_limits(consumer.health, c->pause_after_timeouts, (int64_t)c->pause_ms * 1000);
}

/* /readyz: ready once the group has given this consumer its (possibly empty) share. */
static int joined_group(void) { return atomic_load(&consumer.joined); }

static enum MHD_Result on_http(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                               const char *version, const char *data, size_t *data_size, void **con_cls) {
    (void)cls; (void)version; (void)data; (void)data_size; (void)con_cls;
    enum MHD_Result ret;
    if (bw_daemon_serve_ops(c, method, url, consumer.metrics, joined_group, &ret)) return ret;
    char msg[256];
    int len = snprintf(msg, sizeof(msg), "no such endpoint: %s %s\n", method, url);
    return bw_daemon_reply(c, MHD_HTTP_NOT_FOUND, "text/plain", msg, (size_t)len, 0);
}

static void on_status_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    (void)rk;
    (void)opaque;
    if (m->err) bw_log(BW_LOG_DEBUG, COMPONENT, -1, NULL, "status record: %s", rd_kafka_err2str(m->err));
}

/* The group.instance.id (static membership): consumer.instance_id; "auto": this host's
 * name and the consumer's port, the same across restarts; "" (or "auto" with port 0: no
 * stable identity): a dynamic member. Dynamic is the default because librdkafka 2.0.2
 * fences its own static members after a broker restart (both consumers of
 * test/tiers/fault.sh broker-restart stopped with FENCED_INSTANCE_ID). */
static void instance_id(const bw_config_t *conf, char *out, size_t size) {
    if (!strcmp(conf->consumer_instance_id, "auto") && conf->consumer_port)
        bw_fleet_host_id(conf->consumer_port, conf->consumer_listen_address, out, size);
    else if (strcmp(conf->consumer_instance_id, "auto")) snprintf(out, size, "%s", conf->consumer_instance_id);
    else out[0] = '\0';
}

/* Kafka (batches, dead letters, status and control topics), the pool and HTTP. */
static int start(bw_daemon_t *d) {
    bw_config_t *conf = consumer.conf;
    char err[512];
    rd_kafka_conf_t *kc = bw_kafka_conf(conf, BW_KAFKA_CONSUMER, d->brokers, err, sizeof(err));
    if (!kc) return bw_error(COMPONENT, "%s", err), -1;
    char member[300];
    instance_id(conf, member, sizeof(member));
    if (member[0] && rd_kafka_conf_set(kc, "group.instance.id", member, err, sizeof(err))) {
        rd_kafka_conf_destroy(kc);
        return bw_error(COMPONENT, "consumer.instance_id: %s", err), -1;
    }
    rd_kafka_conf_set_rebalance_cb(kc, bw_rebalance_cb);
    rd_kafka_conf_set_offset_commit_cb(kc, bw_progress_commit_cb);
    if (!(consumer.rk = rd_kafka_new(RD_KAFKA_CONSUMER, kc, err, sizeof(err))))
        return bw_error(COMPONENT, "kafka consumer: %s", err), -1;
    if (bw_kafka_ensure_topic(consumer.rk, conf, 10000, &consumer.retention, err, sizeof(err)) != BW_OK)
        return bw_error(COMPONENT, "%s", err), -1;
    rd_kafka_poll_set_consumer(consumer.rk);
    consumer.poll_q = rd_kafka_queue_get_consumer(consumer.rk);
    if (!(consumer.dead_letters = bw_dead_letters_new(conf, d->brokers, err, sizeof(err))))
        return bw_error(COMPONENT, "dead-letter producer: %s", err), -1;
    rd_kafka_conf_t *sc = bw_kafka_conf(conf, BW_KAFKA_PRODUCER, d->brokers, err, sizeof(err));
    if (sc) rd_kafka_conf_set_dr_msg_cb(sc, on_status_delivery);
    if (!sc || !(consumer.status_rk = rd_kafka_new(RD_KAFKA_PRODUCER, sc, err, sizeof(err))) ||
        bw_kafka_ensure_side_topic(consumer.status_rk, conf, conf->status_topic, BW_TOPIC_TABLE, 10000, err, sizeof(err)) ||
        bw_kafka_ensure_side_topic(consumer.status_rk, conf, conf->control_topic, BW_TOPIC_TABLE, 10000, err, sizeof(err)) ||
        !(consumer.table = bw_shard_table_start(conf, d->brokers, &(bw_status_hook_t){0}, err, sizeof(err))))
        return bw_error(COMPONENT, "control and status topics: %s", err), -1;
    /* an operator's pause must hold from the first assignment on: no partition is taken
     * before the control topic was read to its end (and the status topic, whose records
     * hand each shard's throttle and health state to its next holder: handover.h) */
    while (!bw_shard_table_sync(consumer.table, 10000))
        bw_warn(COMPONENT, "the control topic %s was not read to its end in 10 s; reading on before joining the group",
                conf->control_topic);
    consumer.slot_count = bw_config_slot_count(conf);
    consumer.partitions = calloc((size_t)consumer.slot_count, sizeof(*consumer.partitions));
    consumer.shards = calloc((size_t)conf->shard_count, sizeof(*consumer.shards));
    if (!consumer.partitions || !consumer.shards) abort();
    bw_scheduler_servers_init(bw_now_us());
    for (int slot = 0; slot < consumer.slot_count; slot++) {
        consumer.partitions[slot].shard = slot % conf->shard_count;
        consumer.partitions[slot].lane = slot / conf->shard_count;
    }
    consumer.metrics = bw_consumer_metrics_new(conf);
    consumer.health = bw_health_new(conf->shard_count, conf->server_cnt, conf->shard_server);
    bw_health_set_limits(consumer.health, conf->pause_after_timeouts, (int64_t)conf->pause_ms * 1000);
    bw_throttle_limits_from_config(conf, &consumer.throttle);
    bw_pool_start();
    bw_progress_start();
    bw_trim_start();

    int bound;
    consumer.httpd = bw_daemon_listen(d, conf->consumer_listen_address, conf->consumer_port, 0, on_http, NULL, NULL,
                                      &(bw_listen_limits_t){64, 16, 30}, NULL, &bound);
    if (!consumer.httpd) return -1;
    char generator[300];
    snprintf(generator, sizeof(generator), "http://%s:%d/metrics", conf->consumer_listen_address, bound);
    consumer.alerts = bw_alerts_new(conf, consumer.metrics, generator);
    snprintf(consumer.instance, sizeof(consumer.instance), "%s:%d", conf->consumer_listen_address, bound);

    char self[300];
    bw_fleet_host_id(bound, conf->consumer_listen_address, self, sizeof(self));
    bw_fleet_self_init(&consumer.fleet, "consumer", member[0] ? member : self, consumer.started_at_ms, conf, NULL);
    snprintf(consumer.member, sizeof(consumer.member), "%s", member);
    return 0;
}

/* Joins the group, once this consumer's settings agree with the fleet's (fleet.h): a
 * consumer with another shard map or other batch sizes never takes a partition. */
static int subscribe(void) {
    const bw_config_t *conf = consumer.conf;
    /* every lane's topic: the range assignor (bw_kafka_conf) gives one member the same
     * partition of each, so a shard's lanes share its budget here */
    rd_kafka_topic_partition_list_t *topics = rd_kafka_topic_partition_list_new(conf->lane_cnt);
    char names[BW_LANES_MAX * 300] = "";
    for (int lane = 0; lane < conf->lane_cnt; lane++) {
        rd_kafka_topic_partition_list_add(topics, conf->lanes[lane].topic, RD_KAFKA_PARTITION_UA);
        snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s (lane %s, weight %d)", lane ? ", " : "",
                 conf->lanes[lane].topic, conf->lanes[lane].name, conf->lanes[lane].weight);
    }
    rd_kafka_resp_err_t e = rd_kafka_subscribe(consumer.rk, topics);
    rd_kafka_topic_partition_list_destroy(topics);
    if (e) return bw_error(COMPONENT, "subscribe to %s: %s", names, rd_kafka_err2str(e)), -1;
    const char *member = consumer.member;
    bw_info(COMPONENT, "consuming %s in group %s%s%s%s with %d workers; metrics on http://%s/metrics", names,
            conf->consumer_group, member[0] ? " as static member \"" : " (a dynamic member: consumer.instance_id)",
            member, member[0] ? "\"" : "", conf->workers, consumer.instance);
    consumer.subscribed = 1;
    return 0;
}

/* Each turn: take what Kafka fetched, take back finished jobs, hand out due ones, and
 * every so often commit, publish, measure and free. */
static void run(bw_daemon_t *d) {
    const bw_config_t *conf = consumer.conf;
    atomic_int reload_requested = 0;
    bw_daemon_handle_signals(&consumer.run, &reload_requested);
    int64_t next_gauges = 0, next_status = 0, next_progress = 0, next_delete = 0, next_commit = 0;
    int64_t wait_us = 0;
    char consumer_status[sizeof(consumer.instance) + 320];
    snprintf(consumer_status, sizeof(consumer_status), "in group %s; metrics on http://%s", conf->consumer_group,
             consumer.instance);
    while (atomic_load(&consumer.run)) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(consumer.rk, (int)(wait_us / 1000));
        for (int i = 0; m && i < 10000; i++) { /* drain what is already fetched without blocking */
            bw_partition_buffer(m);
            m = rd_kafka_consumer_poll(consumer.rk, 0);
        }
        if (m) bw_partition_buffer(m);
        if (bw_fleet_turn(&consumer.fleet, consumer.status_rk, conf->status_topic, consumer.table, bw_wall_ms()) &&
            !consumer.subscribed && subscribe())
            atomic_store(&consumer.run, 0);
        bw_pool_collect(0);
        if (atomic_exchange(&reload_requested, 0)) bw_daemon_reload(d, consumer.conf);
        /* ready as /readyz says it: once the group gave this consumer its share */
        if (!d->ready && atomic_load(&consumer.joined)) bw_daemon_ready(d, consumer_status);
        unsigned version = bw_shard_table_version(consumer.table);
        if (version != consumer.table_version) {
            consumer.table_version = version;
            bw_scheduler_apply_settings(bw_now_us());
        }
        bw_scheduler_throttle_tick(bw_now_us());
        wait_us = bw_scheduler_dispatch();
        /* a finished job wakes the poll (scheduler.c); the timers below need no finer turn */
        if (wait_us > 50000) wait_us = 50000;
        int64_t now = bw_now_us();
        if (now >= next_commit) {
            bw_progress_commit();
            next_commit = now + (int64_t)conf->commit_interval_ms * 1000;
        }
        if (now >= next_gauges) {
            bw_rebalance_retry_ledgers(now);
            bw_rebalance_check_ledgers(now);
            bw_progress_update_gauges();
            bw_trim_report(bw_wall_ms());
            next_gauges = now + 1000000;
        }
        if (now >= next_status) {
            bw_progress_publish_status(1);
            next_status = now + (int64_t)conf->status_interval_ms * 1000;
            next_progress = now + (int64_t)conf->progress_interval_ms * 1000;
        } else if (now >= next_progress) {
            bw_progress_publish_status(0);
            next_progress = now + (int64_t)conf->progress_interval_ms * 1000;
        }
        if (now >= next_delete && conf->delete_applied_interval_ms) {
            bw_trim_round();
            next_delete = now + (int64_t)conf->delete_applied_interval_ms * 1000;
        }
        bw_trim_collect();
        rd_kafka_poll(consumer.status_rk, 0);
    }
}

/* Leaves the group (revoking: nothing is in flight by now), serving the revocation and
 * the last commits, for at most timeout_ms: with the broker gone a plain
 * rd_kafka_consumer_close() would wait for it forever. Returns 1 if closed. */
static int leave_group(int timeout_ms) {
    rd_kafka_queue_t *q = rd_kafka_queue_get_consumer(consumer.rk);
    rd_kafka_error_t *e = rd_kafka_consumer_close_queue(consumer.rk, q);
    int64_t deadline = bw_now_us() + (int64_t)timeout_ms * 1000;
    if (e) {
        bw_warn(COMPONENT, "leaving the group: %s", rd_kafka_error_string(e));
        rd_kafka_error_destroy(e);
    } else {
        while (!rd_kafka_consumer_closed(consumer.rk) && bw_now_us() < deadline) {
            rd_kafka_message_t *m = rd_kafka_consumer_poll(consumer.rk, 100);
            if (m) rd_kafka_message_destroy(m);
        }
    }
    rd_kafka_queue_destroy(q);
    int closed = rd_kafka_consumer_closed(consumer.rk);
    if (!closed) bw_warn(COMPONENT, "Kafka did not let the consumer leave its group within %d ms; stopping anyway "
                                    "(the offsets are in the shards)", timeout_ms);
    return closed;
}

static void stop(void) {
    bw_info(COMPONENT, "shutting down: finishing batches in flight");
    int *all = malloc(sizeof(int) * (size_t)consumer.slot_count);
    for (int s = 0; s < consumer.slot_count; s++) all[s] = s;
    bw_scheduler_drain(all, (size_t)consumer.slot_count);
    free(all);
    bw_progress_commit();
    int closed = leave_group(10000);
    if (consumer.awaiting) rd_kafka_topic_partition_list_destroy(consumer.awaiting);
    bw_trim_stop();
    bw_pool_stop();
    bw_rebalance_close_checks();
    bw_signals_stop(consumer.signals);
    rd_kafka_queue_destroy(consumer.poll_q);
    consumer.poll_q = NULL;
    bw_progress_stop();
    /* a consumer that could not close must not try again inside destroy (it would wait
     * for the same unreachable coordinator). One that librdkafka raised a fatal error on
     * (fenced) is not destroyed at all: 2.0.2's destroy then waits for its main thread,
     * which never ends (seen with FENCED_INSTANCE_ID); the process exits next. */
    if (!consumer.fatal) rd_kafka_destroy_flags(consumer.rk, closed ? 0 : RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
    bw_dead_letters_destroy(consumer.dead_letters);
    bw_alerts_destroy(consumer.alerts);
    bw_shard_table_stop(consumer.table);
    bw_fleet_leave(&consumer.fleet, consumer.status_rk, consumer.conf->status_topic);
    bw_fleet_self_free(&consumer.fleet);
    rd_kafka_flush(consumer.status_rk, 2000);
    rd_kafka_destroy(consumer.status_rk);
    MHD_stop_daemon(consumer.httpd);
    for (int s = 0; s < consumer.slot_count; s++) free(consumer.partitions[s].buf);
    free(consumer.partitions);
    free(consumer.shards);
    free(consumer.servers);
    bw_health_free(consumer.health);
    bw_metrics_destroy(consumer.metrics);
    bw_config_destroy(consumer.conf);
}

int main(int argc, char **argv) {
    bw_daemon_t d = {.name = "bw-consumer",
                     .port_help = "port of /metrics, /healthz, /readyz (overrides consumer.port)",
                     .process = BW_PROC_CONSUMER,
                     .hooks = {[BW_HOOK_SHARD_RATES] = apply_rates,
                               [BW_HOOK_THROTTLE] = apply_throttle,
                               [BW_HOOK_HEALTH] = apply_health}};
    int exit_code;
    if (!(consumer.conf = bw_daemon_init(&d, argc, argv, &exit_code))) return exit_code;
    if (d.port >= 0) consumer.conf->consumer_port = d.port;
    srand((unsigned)bw_now_us());
    consumer.started_at_ms = bw_wall_ms();
    if (start(&d)) return 1;
    atomic_store(&consumer.run, 1);
    run(&d);
    bw_notify("STOPPING=1");
    stop();
    return consumer.fatal ? 1 : 0;
}
