#include "tail.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kafka.h"
#include "log.h"

#define MAX_PARTS 64

struct bw_tail {
    rd_kafka_t *rk;
    char *topic;
    int parts;
    bw_tail_fn fn;
    void *ud;
    pthread_t thread;
    atomic_int run;
    atomic_int caught_up;
    atomic_llong next[MAX_PARTS]; /* next offset to read, per partition */
    int64_t start_end[MAX_PARTS]; /* the end at startup; -1 until known. @locality tail thread once started */
    int64_t asked_us;             /* when unknown ends were last asked for */
};

/* The end (which: RD_KAFKA_OFFSET_END, the high watermark) or the start
 * (RD_KAFKA_OFFSET_BEGINNING) of each of the topic's first `parts` partitions into out[],
 * in one ListOffsets request per broker, not one round trip per partition: the embedded
 * control topic has 16. 0, or -1 if any is not known. */
static int query_ends(rd_kafka_t *rk, const char *topic, int parts, int64_t which, int64_t *out, int timeout_ms) {
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(parts);
    for (int p = 0; p < parts; p++) rd_kafka_topic_partition_list_add(l, topic, p)->offset = which;
    int rc = rd_kafka_offsets_for_times(rk, l, timeout_ms) ? -1 : 0;
    for (int i = 0; !rc && i < l->cnt; i++) {
        const rd_kafka_topic_partition_t *tp = &l->elems[i];
        if (tp->err || tp->offset < 0 || tp->partition < 0 || tp->partition >= parts) rc = -1;
        else out[tp->partition] = tp->offset;
    }
    rd_kafka_topic_partition_list_destroy(l);
    return rc;
}

/* Caught up: every partition read to the end it had at startup. An end that could not be
 * asked yet is asked again (at most once a second): a tail never counts as caught up on a
 * failed query, so operators' pauses are read before anyone relies on them. */
static int caught_up_now(bw_tail_t *t) {
    int all = 1;
    int64_t now = bw_now_us();
    int ask = now - t->asked_us >= 1000000;
    for (int p = 0; p < t->parts; p++) {
        if (t->start_end[p] < 0 && ask) {
            int64_t lo, hi;
            if (!rd_kafka_query_watermark_offsets(t->rk, t->topic, p, &lo, &hi, 1000)) t->start_end[p] = hi;
            t->asked_us = now;
        }
        if (t->start_end[p] < 0 || atomic_load(&t->next[p]) < t->start_end[p]) all = 0;
    }
    return all;
}

static void *tail_main(void *arg) {
    bw_tail_t *t = arg;
    while (atomic_load(&t->run)) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(t->rk, 100);
        if (!m) {
            if (!atomic_load(&t->caught_up) && caught_up_now(t)) atomic_store(&t->caught_up, 1);
            continue;
        }
        if (!m->err) {
            t->fn(t->ud, m->key, m->key_len, m->payload, m->len, bw_kafka_origin(m));
            if (m->partition >= 0 && m->partition < t->parts) atomic_store(&t->next[m->partition], m->offset + 1);
        } else if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            bw_log(BW_LOG_WARN, "kafka", -1, NULL, "reading %s: %s", t->topic, rd_kafka_message_errstr(m));
        }
        if (!atomic_load(&t->caught_up) && caught_up_now(t)) atomic_store(&t->caught_up, 1);
        rd_kafka_message_destroy(m);
    }
    return NULL;
}

bw_tail_t *bw_tail_start(const bw_config_t *conf, const char *brokers, const char *topic, bw_tail_fn fn,
                         void *ud, char *errstr, size_t errstr_size) {
    rd_kafka_conf_t *kc = bw_kafka_conf(conf, BW_KAFKA_CONSUMER, brokers, errstr, errstr_size);
    if (!kc) return NULL;
    /* assign() only: no group membership, no commits; always from the beginning */
    rd_kafka_conf_set(kc, "auto.offset.reset", "earliest", NULL, 0);
    bw_tail_t *t = calloc(1, sizeof(*t));
    t->fn = fn;
    t->ud = ud;
    t->topic = strdup(topic);
    if (!(t->rk = rd_kafka_new(RD_KAFKA_CONSUMER, kc, errstr, errstr_size))) goto fail;
    const struct rd_kafka_metadata *md;
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(t->rk, topic, NULL);
    rd_kafka_resp_err_t err = rd_kafka_metadata(t->rk, 0, rkt, &md, 10000);
    rd_kafka_topic_destroy(rkt);
    if (err || md->topic_cnt != 1 || md->topics[0].err) {
        bw_seterr(errstr, errstr_size, BW_ERR_KAFKA, "topic %s: %s", topic,
                  rd_kafka_err2str(err ? err : md->topic_cnt == 1 ? md->topics[0].err : RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC));
        if (!err) rd_kafka_metadata_destroy(md);
        goto fail;
    }
    t->parts = md->topics[0].partition_cnt;
    rd_kafka_metadata_destroy(md);
    if (t->parts > MAX_PARTS) {
        bw_seterr(errstr, errstr_size, BW_ERR_KAFKA, "topic %s has %d partitions; at most %d are read", topic,
                  t->parts, MAX_PARTS);
        goto fail;
    }
    int64_t lo[MAX_PARTS], hi[MAX_PARTS];
    int known = !query_ends(t->rk, topic, t->parts, RD_KAFKA_OFFSET_BEGINNING, lo, 10000) &&
                !query_ends(t->rk, topic, t->parts, RD_KAFKA_OFFSET_END, hi, 10000);
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(t->parts);
    for (int p = 0; p < t->parts; p++) {
        t->start_end[p] = known ? hi[p] : -1; /* unknown: asked again until it is known */
        atomic_init(&t->next[p], known ? lo[p] : 0);
        rd_kafka_topic_partition_list_add(l, topic, p)->offset = RD_KAFKA_OFFSET_BEGINNING;
    }
    rd_kafka_assign(t->rk, l);
    rd_kafka_topic_partition_list_destroy(l);
    atomic_init(&t->run, 1);
    t->asked_us = bw_now_us();
    atomic_init(&t->caught_up, caught_up_now(t));
    pthread_create(&t->thread, NULL, tail_main, t);
    return t;
fail:
    if (t->rk) rd_kafka_destroy(t->rk);
    free(t->topic);
    free(t);
    return NULL;
}

int bw_tail_caught_up(bw_tail_t *t) { return atomic_load(&t->caught_up); }

int bw_tail_sync(bw_tail_t *t, int timeout_ms) {
    int64_t hi[MAX_PARTS];
    if (query_ends(t->rk, t->topic, t->parts, RD_KAFKA_OFFSET_END, hi, timeout_ms)) return 0;
    int64_t deadline = bw_now_us() + (int64_t)timeout_ms * 1000;
    for (;;) {
        int done = 1;
        for (int p = 0; p < t->parts; p++)
            if (atomic_load(&t->next[p]) < hi[p]) done = 0;
        if (done) return 1;
        if (bw_now_us() >= deadline) return 0;
        usleep(5000);
    }
}

void bw_tail_stop(bw_tail_t *t) {
    if (!t) return;
    atomic_store(&t->run, 0);
    pthread_join(t->thread, NULL);
    rd_kafka_consumer_close(t->rk);
    rd_kafka_destroy(t->rk);
    free(t->topic);
    free(t);
}

int bw_tail_find(const bw_config_t *conf, const char *brokers, const char *topic, const void *key, size_t key_len,
                 void (*keep)(void *ud, const void *value, size_t len), void *ud, int timeout_ms, char *errstr,
                 size_t errstr_size) {
    rd_kafka_conf_t *kc = bw_kafka_conf(conf, BW_KAFKA_CONSUMER, brokers, errstr, errstr_size);
    if (!kc) return -1;
    rd_kafka_conf_set(kc, "enable.partition.eof", "true", NULL, 0);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, kc, errstr, errstr_size);
    if (!rk) return -1;
    int rc = -1, parts = 0;
    int64_t end[MAX_PARTS];
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    rd_kafka_resp_err_t err = rd_kafka_metadata(rk, 0, rkt, &md, timeout_ms);
    rd_kafka_topic_destroy(rkt);
    if (err || md->topic_cnt != 1 || md->topics[0].err || md->topics[0].partition_cnt > MAX_PARTS) {
        bw_seterr(errstr, errstr_size, BW_ERR_KAFKA, "topic %s: %s", topic,
                  err ? rd_kafka_err2str(err) : "no such topic, or too many partitions");
        goto out;
    }
    parts = md->topics[0].partition_cnt;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(parts);
    int left = 0;
    for (int p = 0; p < parts; p++) {
        int64_t lo, hi;
        if ((err = rd_kafka_query_watermark_offsets(rk, topic, p, &lo, &hi, timeout_ms))) {
            rd_kafka_topic_partition_list_destroy(l);
            bw_seterr(errstr, errstr_size, BW_ERR_KAFKA, "topic %s: %s", topic, rd_kafka_err2str(err));
            goto out;
        }
        end[p] = hi;
        if (hi > lo) left++;
        rd_kafka_topic_partition_list_add(l, topic, p)->offset = hi > lo ? lo : RD_KAFKA_OFFSET_END;
    }
    rd_kafka_assign(rk, l);
    rd_kafka_topic_partition_list_destroy(l);
    int done[MAX_PARTS] = {0};
    int64_t deadline = bw_now_us() + (int64_t)timeout_ms * 1000;
    for (int p = 0; p < parts; p++) done[p] = end[p] <= 0;
    /* read each partition up to the end it had: records written after the call are the
     * live tail's */
    while (left > 0 && bw_now_us() < deadline) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
        if (!m) continue;
        int p = m->partition;
        if (p >= 0 && p < parts && !done[p]) {
            if (!m->err && m->key_len == key_len && memcmp(m->key, key, key_len) == 0 && m->len)
                keep(ud, m->payload, m->len);
            if ((!m->err && m->offset + 1 >= end[p]) || m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
                done[p] = 1;
                left--;
            }
        }
        rd_kafka_message_destroy(m);
    }
    if (left > 0) bw_seterr(errstr, errstr_size, BW_ERR_KAFKA, "topic %s: not read to its end within %d ms", topic,
                            timeout_ms);
    else rc = 0;
out:
    if (md) rd_kafka_metadata_destroy(md);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return rc;
}
