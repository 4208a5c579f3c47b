/* trim.c — deleting from Kafka what every copy of a shard has applied (DeleteRecords,
 * real brokers only), so that disk holds the real backlog, not a retention's worth, and
 * a failover to a lagging replica still finds in Kafka everything that replica lacks.
 *
 * How far a partition may be trimmed is retain.h's answer: what the primary applied,
 * committed and kept for consumer.keep_applied_ms, and what every listed replica has
 * applied. The replicas' ledgers are read by a thread of their own (a replica that hangs
 * must not hold the dispatcher), one connection per replica, every round; a replica that
 * cannot be read keeps the offsets it had last, so its server's partitions are trimmed
 * no further until it answers again (logged at once, on /metrics, and
 * BulkwriteTrimHeld after consumer.replica_unread_alert_ms).
 *
 * A round: one DeleteRecords request per lane with something to delete, one request at a
 * time; each result is read by bw_trim_collect(), which starts the next lane's.
 *
 * @locality dispatcher thread, but the replica reader (replica_main) and what it fills
 * (@locks trim.mu guards servers[].replicas[] but db, stopping, kicked). */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "consumer.h"
#include "db.h"
#include "ledger.h"
#include "log.h"
#include "retain.h"

/* A listed replica, as the reader last found it. */
typedef struct {
    MYSQL *db;                /* the reader's own; NULL when not connected */
    int64_t *offsets;         /* [server's slots]: its ledger's next offsets as last read; -1 none */
    int64_t read_ms;          /* wall clock of its last good read; 0 never */
    int64_t failing_since_ms; /* first failed read since the last good one (or start); 0 while reads work */
    int warned;               /* its failing is logged (once, until it is read again) */
    char error[300];          /* why the last read failed */
} replica_t;

typedef struct {
    int *slots;               /* every lane's partitions of the server's shards, lane-major */
    size_t n;
    replica_t *replicas;      /* [replica_cnt] */
} server_t;

static struct {
    bw_retain_t *retain;      /* samples of the applied offsets (retain.h) */
    int64_t *scratch;         /* [slot count] */
    rd_kafka_queue_t *delete_q; /* DeleteRecords results; NULL when none is in flight */
    int delete_lane;          /* the lane whose topic the DeleteRecords in flight is about */
    int delete_round;         /* the next lane of the round */
    /* the replica reader */
    server_t *servers;        /* [server count] */
    int reader;               /* the reader runs: some server lists a replica, a real broker */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stopping, kicked;
} trim;

/* The index of slot in its server's slots (lane-major over the server's shards). */
static size_t server_index_of(int slot) {
    const bw_config_t *conf = consumer.conf;
    int shard = slot % conf->shard_count, lane = slot / conf->shard_count;
    const bw_server_t *sv = &conf->servers[conf->shard_server[shard]];
    int per_lane = sv->last_shard - sv->first_shard + 1;
    return (size_t)(lane * per_lane + shard - sv->first_shard);
}

/* Reads one replica's ledger (outside the lock) and stores what it found (under it). */
static void read_replica(int v, int r, int64_t *offsets, bw_buf_t *scratch) {
    server_t *s = &trim.servers[v];
    replica_t *rp = &s->replicas[r];
    char why[300] = "";
    unsigned err = 0;
    if (!rp->db) rp->db = bw_db_connect_replica(consumer.conf, v, r, why, sizeof(why));
    if (rp->db && (err = bw_ledger_read_offsets(rp->db, consumer.conf, s->slots, s->n, offsets, scratch))) {
        snprintf(why, sizeof(why), "reading bw_offsets: %s (%u)", mysql_error(rp->db), err);
        mysql_close(rp->db); /* a fresh connection next round */
        rp->db = NULL;
    } else if (rp->db) {
        mysql_rollback(rp->db); /* end the read's snapshot: the next round sees new rows */
    }
    const char *name = consumer.conf->servers[v].name, *replica = consumer.conf->servers[v].replicas[r];
    pthread_mutex_lock(&trim.mu);
    if (rp->db) {
        memcpy(rp->offsets, offsets, sizeof(int64_t) * s->n);
        if (rp->warned)
            bw_info(COMPONENT, "server %s: the ledger of replica %s is read again: trimming its shards goes on", name,
                    replica);
        rp->warned = 0;
        rp->read_ms = bw_wall_ms();
        rp->failing_since_ms = 0;
        rp->error[0] = '\0';
    } else {
        if (!rp->failing_since_ms) rp->failing_since_ms = bw_wall_ms();
        if (!rp->warned) {
            rp->warned = 1;
            bw_warn(COMPONENT, "server %s: cannot read the ledger of replica %s (%s): Kafka keeps what its shards "
                               "applied from now on, until it is read", name, replica, why);
        }
        snprintf(rp->error, sizeof(rp->error), "%s", why);
    }
    pthread_mutex_unlock(&trim.mu);
}

/* @locality the replica reader thread: every replica of every server, once per kick. */
static void *replica_main(void *arg) {
    (void)arg;
    bw_buf_t scratch;
    bw_buf_init(&scratch);
    int64_t *offsets = malloc(sizeof(int64_t) * (size_t)consumer.slot_count);
    if (!offsets) abort();
    pthread_mutex_lock(&trim.mu);
    while (!trim.stopping) {
        if (!trim.kicked) {
            pthread_cond_wait(&trim.cv, &trim.mu);
            continue;
        }
        trim.kicked = 0;
        pthread_mutex_unlock(&trim.mu);
        for (int v = 0; v < consumer.conf->server_cnt; v++)
            for (int r = 0; r < consumer.conf->servers[v].replica_cnt; r++) {
                pthread_mutex_lock(&trim.mu);
                int stopping = trim.stopping;
                pthread_mutex_unlock(&trim.mu);
                if (!stopping) read_replica(v, r, offsets, &scratch);
            }
        pthread_mutex_lock(&trim.mu);
    }
    pthread_mutex_unlock(&trim.mu);
    for (int v = 0; v < consumer.conf->server_cnt; v++)
        for (int r = 0; r < consumer.conf->servers[v].replica_cnt; r++)
            if (trim.servers[v].replicas[r].db) mysql_close(trim.servers[v].replicas[r].db);
    free(offsets);
    bw_buf_free(&scratch);
    return NULL;
}

void bw_trim_start(void) {
    const bw_config_t *conf = consumer.conf;
    trim.retain = bw_retain_new((size_t)consumer.slot_count);
    trim.scratch = malloc(sizeof(int64_t) * (size_t)consumer.slot_count);
    trim.servers = calloc((size_t)conf->server_cnt, sizeof(*trim.servers));
    if (!trim.scratch || !trim.servers) abort();
    pthread_mutex_init(&trim.mu, NULL);
    pthread_cond_init(&trim.cv, NULL);
    for (int v = 0; v < conf->server_cnt; v++) {
        const bw_server_t *sv = &conf->servers[v];
        server_t *s = &trim.servers[v];
        if (!sv->replica_cnt) continue;
        int per_lane = sv->last_shard - sv->first_shard + 1;
        s->slots = malloc(sizeof(int) * (size_t)(per_lane * conf->lane_cnt));
        s->replicas = calloc((size_t)sv->replica_cnt, sizeof(*s->replicas));
        if (!s->slots || !s->replicas) abort();
        for (int lane = 0; lane < conf->lane_cnt; lane++)
            for (int sh = sv->first_shard; sh <= sv->last_shard; sh++) s->slots[s->n++] = bw_config_slot(conf, lane, sh);
        for (int r = 0; r < sv->replica_cnt; r++) {
            replica_t *rp = &s->replicas[r];
            if (!(rp->offsets = malloc(sizeof(int64_t) * s->n))) abort();
            for (size_t i = 0; i < s->n; i++) rp->offsets[i] = -1;
            rp->failing_since_ms = bw_wall_ms(); /* not read yet: counts as unread from the start */
            snprintf(rp->error, sizeof(rp->error), "not read yet");
        }
        trim.reader = 1;
    }
    if (consumer.retention.embedded) trim.reader = 0; /* nothing is ever deleted there */
    if (trim.reader) {
        trim.kicked = 1; /* a first read at once */
        pthread_create(&trim.thread, NULL, replica_main, NULL);
    }
}

/* Reads the result of the DeleteRecords in flight and frees it, waiting up to wait_ms. */
static void collect(int wait_ms);

void bw_trim_stop(void) {
    collect(2000); /* its request list is freed with the result */
    if (trim.delete_q) rd_kafka_queue_destroy(trim.delete_q);
    trim.delete_q = NULL;
    if (trim.reader) {
        pthread_mutex_lock(&trim.mu);
        trim.stopping = 1;
        pthread_cond_signal(&trim.cv);
        pthread_mutex_unlock(&trim.mu);
        pthread_join(trim.thread, NULL);
    }
    for (int v = 0; trim.servers && v < consumer.conf->server_cnt; v++) {
        for (int r = 0; r < consumer.conf->servers[v].replica_cnt && trim.servers[v].replicas; r++)
            free(trim.servers[v].replicas[r].offsets);
        free(trim.servers[v].replicas);
        free(trim.servers[v].slots);
    }
    free(trim.servers);
    free(trim.scratch);
    bw_retain_free(trim.retain);
    pthread_mutex_destroy(&trim.mu);
    pthread_cond_destroy(&trim.cv);
}

/* The least next offset the listed replicas of slot's server have, as last read; -1 if
 * one was never read or has no row. @locks trim.mu MUST be held */
static int64_t replicas_applied(int slot, int server) {
    const server_t *s = &trim.servers[server];
    size_t i = server_index_of(slot);
    int64_t least = INT64_MAX;
    for (int r = 0; r < consumer.conf->servers[server].replica_cnt; r++)
        if (s->replicas[r].offsets[i] < least) least = s->replicas[r].offsets[i];
    return least == INT64_MAX ? -1 : least;
}

/* Starts the DeleteRecords of the next lane, from delete_round on, that has something
 * to delete (one topic per request); none left: the round is over. */
static void delete_next_lane(void) {
    const bw_config_t *conf = consumer.conf;
    int32_t *partitions = malloc(sizeof(int32_t) * (size_t)conf->shard_count);
    int64_t *offsets = malloc(sizeof(int64_t) * (size_t)conf->shard_count);
    if (!partitions || !offsets) abort();
    size_t n = 0;
    int64_t now_ms = bw_now_us() / 1000; /* the samples' clock: monotonic */
    pthread_mutex_lock(&trim.mu);
    for (; trim.delete_round < conf->lane_cnt && !n; trim.delete_round++) {
        int lane = trim.delete_round;
        for (int s = 0; s < conf->shard_count; s++) {
            int slot = bw_config_slot(conf, lane, s), server = conf->shard_server[s];
            bw_partition_t *p = &consumer.partitions[slot];
            if (!p->assigned) continue;
            bw_retain_in_t in = {.applied = p->applied, .committed = p->committed,
                                 .keep_ms = conf->keep_applied_ms, .replicas = conf->servers[server].replica_cnt};
            if (in.keep_ms) in.applied_before = bw_retain_applied_before(trim.retain, (size_t)slot, now_ms, in.keep_ms);
            if (in.replicas) in.replicas_applied = replicas_applied(slot, server);
            int64_t upto = bw_retain_trim_to(&in);
            if (upto <= p->deleted_to || upto <= p->low) continue;
            partitions[n] = s;
            offsets[n++] = upto;
        }
        if (n) {
            trim.delete_lane = lane;
            trim.delete_q = rd_kafka_queue_new(consumer.rk);
            bw_kafka_delete_records_start(consumer.rk, conf->lanes[lane].topic, partitions, offsets, n, 30000,
                                          trim.delete_q);
        }
    }
    pthread_mutex_unlock(&trim.mu);
    free(partitions);
    free(offsets);
}

void bw_trim_round(void) {
    if (consumer.retention.embedded) return;
    /* the margin's sample first: what is applied now may be deleted keep_applied_ms later */
    for (int s = 0; s < consumer.slot_count; s++)
        trim.scratch[s] = consumer.partitions[s].assigned ? consumer.partitions[s].applied : -1;
    bw_retain_sample(trim.retain, trim.scratch, bw_now_us() / 1000, consumer.conf->keep_applied_ms);
    if (trim.delete_q) return; /* the last round is still going */
    trim.delete_round = 0;
    delete_next_lane();
    if (trim.reader) { /* fresh replica offsets for the next round */
        pthread_mutex_lock(&trim.mu);
        trim.kicked = 1;
        pthread_cond_signal(&trim.cv);
        pthread_mutex_unlock(&trim.mu);
    }
}

static void collect(int wait_ms) {
    if (!trim.delete_q) return;
    size_t cap = (size_t)consumer.conf->shard_count, n = 0;
    int32_t *partitions = malloc(sizeof(int32_t) * cap);
    int64_t *low = malloc(sizeof(int64_t) * cap);
    if (!partitions || !low) abort();
    char err[512] = "";
    int64_t deadline = bw_now_us() + (int64_t)wait_ms * 1000;
    int done;
    while (!(done = bw_kafka_delete_records_poll(trim.delete_q, partitions, low, cap, &n, err, sizeof(err))) &&
           bw_now_us() < deadline)
        usleep(10000);
    if (done) {
        rd_kafka_queue_destroy(trim.delete_q);
        trim.delete_q = NULL;
        for (size_t i = 0; i < n; i++)
            if (low[i] >= 0 && partitions[i] >= 0 && partitions[i] < consumer.conf->shard_count) {
                bw_partition_t *p = &consumer.partitions[bw_config_slot(consumer.conf, trim.delete_lane, partitions[i])];
                p->low = p->deleted_to = low[i]; /* a failed one is tried again */
            }
        if (err[0]) bw_log(BW_LOG_WARN, COMPONENT, -1, NULL, "deleting applied records: %s (tried again later)", err);
        else bw_log(BW_LOG_DEBUG, COMPONENT, -1, NULL, "deleted applied records of %zu partitions", n);
    }
    free(partitions);
    free(low);
}

void bw_trim_rewound(int slot, int64_t offset) { bw_retain_clamp(trim.retain, (size_t)slot, offset); }

void bw_trim_collect(void) {
    int was = trim.delete_q != NULL;
    collect(0);
    /* the round goes on with the next lane, if any */
    if (was && !trim.delete_q && atomic_load(&consumer.run)) delete_next_lane();
}

/* Per server whose shards are held here: the applied messages Kafka keeps, each listed
 * replica's unread time, and BulkwriteTrimHeld for a replica unread too long. */
void bw_trim_report(int64_t now_ms) {
    const bw_config_t *conf = consumer.conf;
    for (int v = 0; v < conf->server_cnt; v++) {
        const bw_server_t *sv = &conf->servers[v];
        int64_t kept = 0;
        int held = 0;
        for (int lane = 0; lane < conf->lane_cnt; lane++)
            for (int s = sv->first_shard; s <= sv->last_shard; s++) {
                const bw_partition_t *p = &consumer.partitions[bw_config_slot(conf, lane, s)];
                if (!p->assigned) continue;
                held = 1;
                if (p->applied > p->low && p->low >= 0) kept += p->applied - p->low;
            }
        bw_metrics_set(consumer.metrics, BW_CM_KEPT_MESSAGES, v, 0,
                       held && !consumer.retention.embedded ? (double)kept : BW_METRICS_UNSET);
        /* nothing is deleted (consumer.delete_applied_interval_ms 0): nothing is held back either */
        if (!trim.reader || !sv->replica_cnt || !conf->delete_applied_interval_ms) {
            for (int r = 0; r < sv->replica_cnt; r++)
                bw_metrics_set(consumer.metrics, BW_CM_REPLICA_UNREAD_SECONDS, v, r, BW_METRICS_UNSET);
            bw_alerts_resolve(consumer.alerts, BW_ALERT_TRIM_HELD, v);
            continue;
        }
        char worst[600] = "";
        int64_t worst_ms = 0;
        pthread_mutex_lock(&trim.mu);
        for (int r = 0; r < sv->replica_cnt; r++) {
            const replica_t *rp = &trim.servers[v].replicas[r];
            int64_t unread_ms = rp->failing_since_ms ? now_ms - (rp->read_ms ? rp->read_ms : rp->failing_since_ms) : 0;
            bw_metrics_set(consumer.metrics, BW_CM_REPLICA_UNREAD_SECONDS, v, r,
                           held ? (double)unread_ms / 1000.0 : BW_METRICS_UNSET);
            if (rp->failing_since_ms && unread_ms > worst_ms) {
                worst_ms = unread_ms;
                snprintf(worst, sizeof(worst), "the ledger of replica %s has not been read for %" PRId64 " s (%s): "
                         "Kafka keeps every batch its shards applied since (%" PRId64 " messages held here now)",
                         sv->replicas[r], unread_ms / 1000, rp->error, kept);
            }
        }
        pthread_mutex_unlock(&trim.mu);
        if (held && conf->replica_unread_alert_ms && worst_ms > conf->replica_unread_alert_ms)
            bw_alerts_fire(consumer.alerts, BW_ALERT_TRIM_HELD, v, worst);
        else
            bw_alerts_resolve(consumer.alerts, BW_ALERT_TRIM_HELD, v);
    }
}
