/* The proxy's producers: a pool of proxy.producers idempotent producers for the batches
 * (a shard's partition always on the same one, so a shard's messages keep their order),
 * and one more for the side-topic records (job receipts, control changes), which never
 * lingers. Each has a poller thread serving its delivery reports; a delivery settles the
 * message's place in its shard's backlog and wakes the request waiting for it (kafka.h's
 * acks). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "proxy.h"

/* A message's delivery report opaque: whose it is (a request's acks, kafka.h) and what
 * it holds in its shard's backlog. */
typedef struct {
    bw_kafka_acks_t *acks;
    size_t msg;
    int slot;        /* the (lane, shard) backlog it is in (config.h); -1: a side-topic record */
    size_t bytes;    /* as admitted to that backlog */
} delivery_t;

/* @locality poller thread */
static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    (void)rk;
    (void)opaque;
    delivery_t *d = m->_private;
    if (d->slot >= 0) bw_backlog_settle(proxy.backlog, d->slot, d->bytes, m->err ? -1 : m->offset);
    bw_kafka_acks_delivered(d->acks, d->msg, m);
}

/* librdkafka's errors. A fatal one (an idempotent producer that can no longer keep its
 * guarantees) leaves the producer failing every message: it is marked, and the main
 * loop rebuilds it (bw_producers_recover). @locality librdkafka's threads */
static void on_error(rd_kafka_t *rk, int err, const char *reason, void *opaque) {
    bw_producer_t *pr = opaque;
    if (err != RD_KAFKA_RESP_ERR__FATAL) {
        bw_log(BW_LOG_WARN, COMPONENT, -1, NULL, "kafka: %s: %s", rd_kafka_err2name(err), reason);
        return;
    }
    char why[200];
    rd_kafka_resp_err_t cause = rd_kafka_fatal_error(rk, why, sizeof(why));
    if (!pr || atomic_load(&pr->fatal)) return;
    snprintf(pr->fatal_why, sizeof(pr->fatal_why), "producer %d: fatal error %s: %s", pr->index,
             rd_kafka_err2name(cause), why);
    atomic_store(&pr->fatal, 1);
    bw_log(BW_LOG_ERROR, COMPONENT, -1, NULL, "%s; its requests get 503 until it is rebuilt", pr->fatal_why);
}

/* Serves the producer's delivery reports; asked to send now, it flushes for up to
 * linger.ms (librdkafka sends at once while a flush lasts, whoever's messages it holds;
 * later ones linger again). */
static void *poller_main(void *arg) {
    bw_producer_t *pr = arg;
    while (atomic_load(&proxy.run_poller) && !atomic_load(&pr->stop)) {
        if (atomic_exchange(&pr->send_now, 0)) {
            bw_metrics_add(proxy.metrics, BW_PM_LINGER_FLUSHES, 0, 0, 1);
            rd_kafka_flush(pr->rk, pr->linger_ms);
        } else {
            rd_kafka_poll(pr->rk, 100);
        }
    }
    return NULL;
}

/* Makes producer i (the last one: the records', which never lingers). */
static int producer_open(int i, const char *brokers, char *err, size_t err_size) {
    bw_producer_t *pr = &proxy.producers[i];
    rd_kafka_conf_t *kc = bw_kafka_conf(proxy.conf, BW_KAFKA_PRODUCER, brokers, err, err_size);
    if (!kc) return -1;
    if (i == proxy.conf->proxy_producers && rd_kafka_conf_set(kc, "linger.ms", "0", err, err_size)) {
        rd_kafka_conf_destroy(kc);
        return -1;
    }
    rd_kafka_conf_set_dr_msg_cb(kc, on_delivery);
    rd_kafka_conf_set_error_cb(kc, on_error);
    rd_kafka_conf_set_opaque(kc, pr);
    char linger[32];
    size_t linger_len = sizeof(linger);
    if (rd_kafka_conf_get(kc, "linger.ms", linger, &linger_len) == RD_KAFKA_CONF_OK)
        pr->linger_ms = (int)ceil(strtod(linger, NULL)); /* 0.5 ms: a 1 ms flush */
    char why[512];
    if (!(pr->rk = rd_kafka_new(RD_KAFKA_PRODUCER, kc, why, sizeof(why))))
        return snprintf(err, err_size, "kafka producer: %s", why), -1;
    pr->index = i;
    pr->reports = rd_kafka_queue_get_main(pr->rk);
    return 0;
}

/* Opens each lane's topic on producer i, learns its leaders, starts its poller. */
static void producer_run(int i) {
    bw_producer_t *pr = &proxy.producers[i];
    for (int lane = 0; lane < proxy.conf->lane_cnt; lane++) {
        pr->rkt[lane] = rd_kafka_topic_new(pr->rk, proxy.conf->lanes[lane].topic, NULL);
        /* each producer learns the partitions' leaders now, not on a client's first
         * request (which then waited for the metadata); its partitions exist before any
         * HTTP thread produces to them */
        const struct rd_kafka_metadata *md;
        rd_kafka_resp_err_t e = rd_kafka_metadata(pr->rk, 0, pr->rkt[lane], &md, 10000);
        if (e) bw_log(BW_LOG_WARN, COMPONENT, -1, NULL, "producer %d: metadata of %s: %s (learnt on first use)", i,
                      proxy.conf->lanes[lane].topic, rd_kafka_err2str(e));
        else rd_kafka_metadata_destroy(md);
    }
    atomic_store(&pr->stop, 0);
    pthread_create(&pr->poller, NULL, poller_main, pr);
}

/* Destroys producer i; its poller has stopped. Messages still queued fail, and their
 * reports are served here (each settles its backlog; no request waits for them: the
 * caller holds producers_lock for writing, or the listeners are gone). */
static void producer_close(int i, int flush_ms) {
    bw_producer_t *pr = &proxy.producers[i];
    if (!pr->rk) return;
    if (flush_ms) rd_kafka_flush(pr->rk, flush_ms);
    rd_kafka_purge(pr->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
    for (int64_t until = bw_now_us() + 5000000; rd_kafka_outq_len(pr->rk) > 0 && bw_now_us() < until;)
        rd_kafka_poll(pr->rk, 50);
    rd_kafka_queue_destroy(pr->reports);
    for (int lane = 0; lane < proxy.conf->lane_cnt; lane++)
        if (pr->rkt[lane]) rd_kafka_topic_destroy(pr->rkt[lane]);
    rd_kafka_destroy(pr->rk);
    memset(pr->rkt, 0, sizeof(pr->rkt));
    pr->rk = NULL;
}

int bw_producers_start(const char *brokers, char *err, size_t err_size) {
    int n = proxy.conf->proxy_producers + 1;
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    /* a rebuild waiting for the lock holds new requests back (the default lets readers
     * starve it under load) */
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&proxy.producers_lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    proxy.producers = calloc((size_t)n, sizeof(*proxy.producers));
    if (!proxy.producers) return snprintf(err, err_size, "out of memory"), -1;
    for (int i = 0; i < n; i++) {
        if (producer_open(i, brokers, err, err_size)) return -1;
        proxy.producer_cnt = i + 1;
    }
    /* metadata, topics and offsets: not idempotent, it never produces, so never fatal */
    rd_kafka_conf_t *kc = bw_kafka_conf(proxy.conf, BW_KAFKA_PRODUCER, brokers, err, err_size);
    if (!kc) return -1;
    if (rd_kafka_conf_set(kc, "enable.idempotence", "false", err, err_size)) {
        rd_kafka_conf_destroy(kc);
        return -1;
    }
    rd_kafka_conf_set_error_cb(kc, on_error);
    char why[512];
    if (!(proxy.rk = rd_kafka_new(RD_KAFKA_PRODUCER, kc, why, sizeof(why))))
        return snprintf(err, err_size, "kafka client: %s", why), -1;
    proxy.rkt = rd_kafka_topic_new(proxy.rk, proxy.conf->topic, NULL);
    proxy.brokers = brokers;
    return 0;
}

void bw_producers_run(void) {
    atomic_store(&proxy.run_poller, 1);
    for (int i = 0; i < proxy.producer_cnt; i++) producer_run(i);
}

/* BW_TEST_PRODUCER_FATAL=FILE, for the tests: while FILE exists, producer 0 is put in a
 * fatal state once (rd_kafka_test_fatal_error), and its rebuild waits until FILE is
 * removed, so that a test sees the requests and /readyz meanwhile. */
static int test_fatal_held(void) {
    const char *file = getenv("BW_TEST_PRODUCER_FATAL");
    if (!file || !file[0] || access(file, F_OK)) return 0;
    bw_producer_t *pr = &proxy.producers[0];
    static int injected;
    if (!injected && pr->rk) {
        injected = 1;
        rd_kafka_test_fatal_error(pr->rk, RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER, "injected by BW_TEST_PRODUCER_FATAL");
    }
    return 1;
}

int bw_producers_recover(void) {
    if (test_fatal_held()) return 0;
    int rebuilt = 0;
    for (int i = 0; i < proxy.producer_cnt; i++) {
        bw_producer_t *pr = &proxy.producers[i];
        if (!atomic_load(&pr->fatal)) continue;
        int64_t started = bw_now_us();
        pthread_rwlock_wrlock(&proxy.producers_lock); /* the requests producing now have their answers */
        atomic_store(&pr->stop, 1);
        pthread_join(pr->poller, NULL);
        producer_close(i, 0);
        char err[512];
        while (producer_open(i, proxy.brokers, err, sizeof(err))) { /* the same config built it once */
            bw_log(BW_LOG_ERROR, COMPONENT, -1, NULL, "producer %d: not rebuilt: %s; again in 1 s", i, err);
            sleep(1);
        }
        producer_run(i);
        atomic_store(&pr->fatal, 0);
        pthread_rwlock_unlock(&proxy.producers_lock);
        bw_metrics_add(proxy.metrics, BW_PM_PRODUCERS_REBUILT, 0, 0, 1);
        bw_log(BW_LOG_INFO, COMPONENT, -1, NULL, "producer %d rebuilt after its fatal error (%lld ms)", i,
               (long long)(bw_now_us() - started) / 1000);
        rebuilt++;
    }
    return rebuilt;
}

int bw_producers_ready(char *why, size_t why_size) {
    for (int i = 0; i < proxy.producer_cnt; i++)
        if (atomic_load(&proxy.producers[i].fatal)) return snprintf(why, why_size, "%s", proxy.producers[i].fatal_why), 0;
    return 1;
}

void bw_producers_stop_polling(void) {
    if (!atomic_exchange(&proxy.run_poller, 0)) return;
    for (int i = 0; i < proxy.producer_cnt; i++) pthread_join(proxy.producers[i].poller, NULL);
}

void bw_producers_destroy(void) {
    for (int i = 0; i < proxy.producer_cnt; i++) producer_close(i, 10000);
    if (proxy.rkt) rd_kafka_topic_destroy(proxy.rkt);
    proxy.rkt = NULL;
    if (proxy.rk) rd_kafka_destroy(proxy.rk);
    proxy.rk = NULL;
    free(proxy.producers);
    proxy.producers = NULL;
    proxy.producer_cnt = 0;
}

/* linger.ms holds a producer's batch open for other requests' messages to the same
 * partitions. A request alone in the proxy has nobody to wait for: its producers send
 * at once (a 5,000-op request over 8 shards waited 11 ms for its acknowledgements with
 * linger.ms 5, 6 ms without; docs/performance.md). With another batch request open,
 * even one still uploading its body, that request's messages may join the batch, and
 * lingering pays (4 and 16 clients lost a third of their rate with linger.ms 0). */
static void send_now(const uint8_t *used, int always) {
    if (!always && atomic_load(&proxy.batches_open) != 1) return;
    for (int i = 0; i < proxy.conf->proxy_producers; i++) {
        bw_producer_t *pr = &proxy.producers[i];
        if (!used[i] || pr->linger_ms <= 0) continue;
        atomic_store(&pr->send_now, 1);
        rd_kafka_queue_yield(pr->reports); /* rd_kafka_yield would stop only this thread's poll */
    }
}

static const size_t header_bytes = 3 * 8; /* bw-type, bw-op, bw-rows: names and values, roughly */

size_t bw_producers_message_bytes(const bw_batch_msg_t *m) {
    return bw_backlog_message_bytes(m->len, 32, header_bytes + strlen(m->type_name));
}

void bw_producers_send_batches(bw_batch_set_t *set, int lane, const bw_msg_fate_t *fate, const char *job_id,
                               const char *const *keys, rd_kafka_resp_err_t *errs, int64_t *offsets, bw_arena_t *arena) {
    bw_kafka_acks_t acks; /* the pollers serve the reports */
    pthread_rwlock_rdlock(&proxy.producers_lock); /* no rebuild until the acks are in */
    bw_kafka_acks_init(&acks, NULL, 0, proxy.conf->produce_timeout_ms, errs, offsets);
    delivery_t *ds = bw_arena_alloc(arena, (set->msg_cnt + 1) * sizeof(*ds));
    uint8_t used[64] = {0}; /* proxy.producers is at most 64 */
    for (size_t i = 0; i < set->msg_cnt; i++) {
        bw_batch_msg_t *m = &set->msgs[i];
        if (fate[i] != BW_MSG_PRODUCE) continue;
        int slot = bw_config_slot(proxy.conf, lane, m->shard);
        ds[i] = (delivery_t){&acks, i, slot, bw_producers_message_bytes(m)};
        const char *headers[] = {"bw-type", m->type_name, "bw-op", m->op_header, "bw-rows", m->rows_header};
        const bw_producer_t *pr = &proxy.producers[m->shard % proxy.conf->proxy_producers];
        const char *key = keys ? keys[i] : job_id;
        bw_kafka_msg_t km = {.rk = pr->rk, .rkt = pr->rkt[lane], .partition = m->shard, .key = key, .key_len = strlen(key),
                             .value = m->payload, .value_len = m->len, .msgflags = RD_KAFKA_MSG_F_FREE,
                             .headers = headers, .header_cnt = 3};
        if (bw_kafka_acks_produce(&acks, &km, i, &ds[i]) == 0) {
            m->payload = NULL; /* librdkafka frees it */
            used[m->shard % proxy.conf->proxy_producers] = 1;
        } else {
            bw_backlog_settle(proxy.backlog, slot, ds[i].bytes, -1);
        }
    }
    send_now(used, keys != NULL);
    bw_kafka_acks_wait(&acks);
    pthread_rwlock_unlock(&proxy.producers_lock);
    bw_batcher_free_payloads(set); /* those never handed over */
}

rd_kafka_resp_err_t bw_producers_send_records(const char *topic, size_t n, const char *const *keys,
                                              const size_t *klens, void *const *vals, const size_t *vlens,
                                              rd_kafka_resp_err_t *errs) {
    bw_kafka_acks_t acks;
    delivery_t *dvs = calloc(n ? n : 1, sizeof(*dvs));
    if (!dvs) {
        for (size_t i = 0; errs && i < n; i++) errs[i] = RD_KAFKA_RESP_ERR__QUEUE_FULL;
        return RD_KAFKA_RESP_ERR__QUEUE_FULL;
    }
    pthread_rwlock_rdlock(&proxy.producers_lock);
    const bw_producer_t *pr = &proxy.producers[proxy.producer_cnt - 1]; /* the records' */
    bw_kafka_acks_init(&acks, pr->rk, 0, proxy.conf->produce_timeout_ms, errs, NULL);
    for (size_t i = 0; i < n; i++) {
        dvs[i] = (delivery_t){&acks, i, -1, 0};
        bw_kafka_msg_t km = {.rk = pr->rk, .topic = topic, .partition = RD_KAFKA_PARTITION_UA, .key = keys[i], .key_len = klens[i],
                             .value = vals[i], .value_len = vlens[i], .msgflags = RD_KAFKA_MSG_F_COPY};
        bw_kafka_acks_produce(&acks, &km, i, &dvs[i]);
    }
    rd_kafka_resp_err_t e = bw_kafka_acks_wait(&acks);
    pthread_rwlock_unlock(&proxy.producers_lock);
    free(dvs);
    return e;
}
