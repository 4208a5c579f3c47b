#include "backlog.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kafka.h"
#include "log.h"

#define COMPONENT "backlog"
#define REFRESH_MS 1000
#define DEFAULT_MEAN_BYTES 1024.0

/* A message this proxy produced, until the shard has applied it. */
typedef struct {
    int64_t offset;
    int64_t bytes;
} own_msg_t;

typedef struct {
    int64_t applied, high, low;            /* -1 while unknown */
    int64_t reserved_msgs, reserved_bytes; /* admitted, not yet settled */
    own_msg_t *own;                        /* ring in offset order: head, len, cap */
    size_t head, len, cap;
    int64_t own_bytes;
    double mean_bytes;                     /* of this proxy's messages to the shard */
} shard_backlog_t;

/* @locks mu guards shards[], mean_bytes; room_cv waits on mu */
struct bw_backlog {
    const bw_config_t *conf;
    int64_t max_messages, max_bytes;
    pthread_mutex_t mu;
    pthread_cond_t room_cv; /* signalled when a shard may have room: applied moved, a message failed */
    shard_backlog_t *shards;
    double mean_bytes; /* over every shard: the estimate for a shard this proxy never wrote */
    double unknown_floor; /* embedded: a message of unknown size counts as the largest one */
    rd_kafka_t *rk;
    pthread_t refresher;
    pthread_mutex_t stop_mu;
    pthread_cond_t stop_cv;
    int stopping; /* @locks stop_mu */
};

size_t bw_backlog_message_bytes(size_t payload, size_t key, size_t headers) {
    /* a record's varints, attributes and deltas; lz4 may make it smaller, never much bigger */
    return payload + key + headers + 64;
}

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* Forgets own messages the shard has applied. @locks caller holds mu */
static void trim(shard_backlog_t *s) {
    int64_t applied = max64(s->applied, s->low);
    while (s->len && s->own[s->head].offset < applied) {
        s->own_bytes -= s->own[s->head].bytes;
        s->head = (s->head + 1) % s->cap;
        s->len--;
    }
}

/* @locks caller holds mu */
static void compute(const bw_backlog_t *b, const shard_backlog_t *s, bw_backlog_view_t *v) {
    int64_t applied = max64(s->applied, s->low);
    int64_t high = s->high;
    if (s->len) high = max64(high, s->own[(s->head + s->len - 1) % s->cap].offset + 1);
    if (applied < 0) applied = s->len ? s->own[s->head].offset : max64(high, 0); /* nothing known */
    int64_t unapplied = high > applied ? high - applied : 0;
    /* messages older than this proxy's oldest unapplied one: written before it started
     * (or by another proxy); their size is unknown */
    int64_t own_head = s->len ? s->own[s->head].offset : high;
    int64_t before = own_head > applied ? own_head - applied : 0;
    if (before > unapplied) before = unapplied;
    int64_t others = unapplied - before - (int64_t)s->len;
    if (others < 0) others = 0;
    double mean = s->mean_bytes > 0 ? s->mean_bytes : b->mean_bytes > 0 ? b->mean_bytes : DEFAULT_MEAN_BYTES;
    double before_each = mean > b->unknown_floor ? mean : b->unknown_floor;
    v->messages = unapplied + s->reserved_msgs;
    v->bytes = s->own_bytes + (int64_t)((double)before * before_each + (double)others * mean) + s->reserved_bytes;
    v->applied = max64(s->applied, s->low);
    v->high = high >= 0 ? high : -1;
    v->low = s->low;
    v->max_messages = b->max_messages;
    v->max_bytes = b->max_bytes;
}

/* @locks caller holds mu */
static int try_admit(bw_backlog_t *b, shard_backlog_t *s, size_t bytes, bw_backlog_view_t *v) {
    compute(b, s, v);
    /* an empty shard takes any message: a message bigger than the bound still passes */
    int ok = (v->messages == 0 && v->bytes == 0) ||
             (v->messages + 1 <= b->max_messages && v->bytes + (int64_t)bytes <= b->max_bytes);
    if (ok) {
        s->reserved_msgs++;
        s->reserved_bytes += (int64_t)bytes;
    }
    return ok;
}

int bw_backlog_admit(bw_backlog_t *b, int shard, size_t bytes, int64_t deadline_us, bw_backlog_view_t *view) {
    bw_backlog_view_t v;
    pthread_mutex_lock(&b->mu);
    shard_backlog_t *s = &b->shards[shard];
    int ok;
    /* a short wait for room, so a draining shard is fed without a client's round trip */
    while (!(ok = try_admit(b, s, bytes, &v)) && bw_now_us() < deadline_us) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t wait_ns = (deadline_us - bw_now_us()) * 1000;
        if (wait_ns > 100000000) wait_ns = 100000000; /* re-check at least every 100 ms */
        if (wait_ns < 0) wait_ns = 0;
        ts.tv_nsec += (long)wait_ns;
        ts.tv_sec += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&b->room_cv, &b->mu, &ts);
    }
    pthread_mutex_unlock(&b->mu);
    if (view) *view = v;
    return ok;
}

void bw_backlog_settle(bw_backlog_t *b, int shard, size_t bytes, int64_t offset) {
    pthread_mutex_lock(&b->mu);
    shard_backlog_t *s = &b->shards[shard];
    s->reserved_msgs--;
    s->reserved_bytes -= (int64_t)bytes;
    if (offset >= 0 && offset >= max64(s->applied, s->low)) {
        if (s->len == s->cap) { /* grow the ring, unrolled into the new array */
            size_t cap = s->cap ? s->cap * 2 : 64;
            own_msg_t *n = malloc(cap * sizeof(*n));
            if (!n) abort();
            for (size_t i = 0; i < s->len; i++) n[i] = s->own[(s->head + i) % s->cap];
            free(s->own);
            s->own = n;
            s->head = 0;
            s->cap = cap;
        }
        s->own[(s->head + s->len) % s->cap] = (own_msg_t){offset, (int64_t)bytes};
        s->len++;
        s->own_bytes += (int64_t)bytes;
        s->high = max64(s->high, offset + 1);
    }
    if (offset >= 0) {
        /* moving means: recent sizes matter most */
        s->mean_bytes = s->mean_bytes > 0 ? 0.9 * s->mean_bytes + 0.1 * (double)bytes : (double)bytes;
        b->mean_bytes = b->mean_bytes > 0 ? 0.99 * b->mean_bytes + 0.01 * (double)bytes : (double)bytes;
    } else {
        pthread_cond_broadcast(&b->room_cv);
    }
    pthread_mutex_unlock(&b->mu);
}

void bw_backlog_observe(bw_backlog_t *b, int shard, int64_t applied, int64_t high, int64_t low) {
    if (shard < 0 || shard >= bw_config_slot_count(b->conf)) return;
    pthread_mutex_lock(&b->mu);
    shard_backlog_t *s = &b->shards[shard];
    /* offsets only move forward; a late or stale report never shrinks what is known */
    int64_t before = max64(s->applied, s->low);
    s->applied = max64(s->applied, applied);
    s->high = max64(s->high, high);
    s->low = max64(s->low, low);
    trim(s);
    if (max64(s->applied, s->low) > before) pthread_cond_broadcast(&b->room_cv);
    pthread_mutex_unlock(&b->mu);
}

void bw_backlog_on_status(void *ud, int shard, const Bulkwrite__Internal__V1__ShardStatus *st) {
    bw_backlog_t *b = ud;
    /* a status record from before this field existed carries 0: not an offset we trust */
    if (st->applied_offset || st->high_watermark) bw_backlog_observe(b, shard, st->applied_offset, st->high_watermark, -1);
    for (size_t i = 0; i < st->n_lanes; i++) { /* the other lanes' partitions of the shard */
        const Bulkwrite__Internal__V1__LaneStatus *l = st->lanes[i];
        int lane = bw_config_lane(b->conf, l->lane);
        if (lane > 0 && (l->applied_offset || l->high_watermark))
            bw_backlog_observe(b, bw_config_slot(b->conf, lane, shard), l->applied_offset, l->high_watermark, -1);
    }
}

void bw_backlog_view(bw_backlog_t *b, int shard, bw_backlog_view_t *view) {
    pthread_mutex_lock(&b->mu);
    compute(b, &b->shards[shard], view);
    pthread_mutex_unlock(&b->mu);
}

/* ---- refresher: high and low watermarks of every partition, by ListOffsets ------------ */

static void refresh(bw_backlog_t *b) {
    size_t n = (size_t)b->conf->shard_count;
    for (int lane = 0; lane < b->conf->lane_cnt; lane++) {
        const char *topic = b->conf->lanes[lane].topic;
        int base = bw_config_slot(b->conf, lane, 0);
        rd_kafka_topic_partition_list_t *hi = bw_kafka_list_offsets(b->rk, topic, NULL, n, RD_KAFKA_OFFSET_END, 5000);
        rd_kafka_topic_partition_list_t *lo = bw_kafka_list_offsets(b->rk, topic, NULL, n, RD_KAFKA_OFFSET_BEGINNING, 5000);
        for (int i = 0; hi && i < hi->cnt; i++)
            if (!hi->elems[i].err && hi->elems[i].partition < b->conf->shard_count)
                bw_backlog_observe(b, base + hi->elems[i].partition, -1, hi->elems[i].offset, -1);
        for (int i = 0; lo && i < lo->cnt; i++)
            if (!lo->elems[i].err && lo->elems[i].partition < b->conf->shard_count)
                bw_backlog_observe(b, base + lo->elems[i].partition, -1, -1, lo->elems[i].offset);
        if (hi) rd_kafka_topic_partition_list_destroy(hi);
        if (lo) rd_kafka_topic_partition_list_destroy(lo);
    }
}

static void *refresher_main(void *arg) {
    bw_backlog_t *b = arg;
    pthread_mutex_lock(&b->stop_mu);
    while (!b->stopping) {
        pthread_mutex_unlock(&b->stop_mu);
        refresh(b);
        pthread_mutex_lock(&b->stop_mu);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += (REFRESH_MS % 1000) * 1000000L;
        ts.tv_sec += REFRESH_MS / 1000 + ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        if (!b->stopping) pthread_cond_timedwait(&b->stop_cv, &b->stop_mu, &ts);
    }
    pthread_mutex_unlock(&b->stop_mu);
    return NULL;
}

bw_backlog_t *bw_backlog_new(const bw_config_t *conf, rd_kafka_t *rk, int embedded) {
    bw_backlog_t *b = calloc(1, sizeof(*b));
    b->conf = conf;
    b->max_messages = conf->backlog_max_messages;
    b->max_bytes = conf->backlog_max_bytes;
    if (embedded) {
        /* a restarted proxy must not overfill a partition that holds big messages */
        b->unknown_floor = conf->message_max_bytes;
        if (b->max_messages > BW_BACKLOG_EMBEDDED_MAX_MESSAGES) b->max_messages = BW_BACKLOG_EMBEDDED_MAX_MESSAGES;
        if (b->max_bytes > BW_BACKLOG_EMBEDDED_MAX_BYTES) b->max_bytes = BW_BACKLOG_EMBEDDED_MAX_BYTES;
    }
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->room_cv, NULL);
    pthread_mutex_init(&b->stop_mu, NULL);
    pthread_cond_init(&b->stop_cv, NULL);
    b->shards = calloc((size_t)bw_config_slot_count(conf), sizeof(*b->shards)); /* one per (lane, shard) */
    for (int s = 0; s < bw_config_slot_count(conf); s++) b->shards[s].applied = b->shards[s].high = b->shards[s].low = -1;
    b->rk = rk;
    bw_info(COMPONENT, "admission: at most %lld unapplied messages and %.1f MiB per shard%s", (long long)b->max_messages,
            (double)b->max_bytes / 1048576.0,
            embedded ? " (capped for the embedded Kafka, which deletes a partition's oldest data past 5 MiB)" : "");
    if (rk) {
        refresh(b); /* a restarted proxy knows what Kafka holds before its first request */
        pthread_create(&b->refresher, NULL, refresher_main, b);
    }
    return b;
}

void bw_backlog_destroy(bw_backlog_t *b) {
    if (!b) return;
    if (b->rk) {
        pthread_mutex_lock(&b->stop_mu);
        b->stopping = 1;
        pthread_cond_signal(&b->stop_cv);
        pthread_mutex_unlock(&b->stop_mu);
        pthread_join(b->refresher, NULL);
    }
    for (int s = 0; s < bw_config_slot_count(b->conf); s++) free(b->shards[s].own);
    free(b->shards);
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->room_cv);
    pthread_mutex_destroy(&b->stop_mu);
    pthread_cond_destroy(&b->stop_cv);
    free(b);
}
