/* progress.c — what follows an applied batch, and what others see of it.
 *
 * - Kafka commits: the shard's ledger already holds its offset (in the batch's
 *   transaction); the Kafka commit only saves re-reading. Commits go in one request for
 *   every partition that moved, every consumer.commit_interval_ms: one request per
 *   batch per partition would starve the group's heartbeats at 4,096 partitions.
 * - Gauges and status records (GET /v1/shards on the proxy, the proxies' backlog
 *   admission), and the alerts that watch time: a backlog nearing the topic's retention,
 *   and a shard with lag and no applied batch for consumer.stall_alert_ms.
 * @locality dispatcher thread. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "consumer.h"
#include "gate.h"
#include "log.h"

/* A job was applied and committed in the shard: its counts, its offset, its errors. */
void bw_progress_applied(bw_job_t *j, int64_t now) {
    bw_partition_t *p = &consumer.partitions[j->slot];
    bw_shard_t *sh = &consumer.shards[j->shard];
    const bw_apply_result_t *res = &j->res;
    p->applied = p->commit_due = res->next_offset;
    p->lagging_since_ms = 0; /* progress: the buffered head tells the age again */
    p->progress_ms = bw_wall_ms();
    sh->rows_applied += res->rows_applied;
    sh->rows_failed += res->rows_failed;
    if (res->rows_failed) {
        char msg[96];
        snprintf(msg, sizeof(msg), "%llu ops refused (see bw_job_failures and the dead-letter topic)",
                 (unsigned long long)res->rows_failed);
        bw_partition_note_error(j->shard, bw_fail_name(BW_FAIL_DATA), msg);
        /* counted once committed: a rolled-back attempt is not counted twice */
        bw_metrics_add(consumer.metrics, BW_CM_ERRORS, j->shard, BW_FAIL_DATA, res->rows_failed);
    }
    sh->dead_letters += res->rows_failed + res->messages_undecodable;
    if (res->rows_failed) { /* the status's recent dead letters: the job to look at */
        bw_dead_note_t *d = &sh->dead[sh->dead_next];
        sh->dead_next = (sh->dead_next + 1) % 5;
        d->at_ms = bw_wall_ms();
        d->ops = res->rows_failed > UINT32_MAX ? UINT32_MAX : (uint32_t)res->rows_failed;
        d->error_code = res->failure_code;
        snprintf(d->job_id, sizeof(d->job_id), "%s", res->failure_job);
        snprintf(d->reason, sizeof(d->reason), "%s", res->failure_reason);
    }
    if (res->messages_undecodable)
        bw_metrics_add(consumer.metrics, BW_CM_ERRORS, j->shard, BW_FAIL_DECODE, res->messages_undecodable);
    bw_metrics_add(consumer.metrics, BW_CM_STATEMENTS, j->shard, 0, res->statements);
    bw_consumer_metrics_applied(consumer.metrics, j->shard, res->rows_applied, res->rows_failed, res->messages_skipped,
                                res->messages_duplicate, res->dead_letters, now - j->started_us);
    /* progress resolves the stall at once; with lanes, check_stall decides (another lane
     * of the shard may still be stuck) */
    if (consumer.conf->lane_cnt == 1) bw_alerts_resolve(consumer.alerts, BW_ALERT_NO_PROGRESS, j->shard);
    bw_log(BW_LOG_DEBUG, COMPONENT, j->shard, NULL,
           "applied %zu messages: %llu rows, %llu failed, %llu messages already applied", j->cnt,
           (unsigned long long)res->rows_applied, (unsigned long long)res->rows_failed,
           (unsigned long long)res->messages_skipped);
}

/* ---- Kafka commits ------------------------------------------------------------------- */

/* Sends one asynchronous commit for every partition applied since the last one. */
void bw_progress_commit(void) {
    rd_kafka_topic_partition_list_t *l = NULL;
    for (int s = 0; s < consumer.slot_count; s++) {
        bw_partition_t *p = &consumer.partitions[s];
        if (!p->assigned || p->commit_due < 0) continue;
        if (!l) l = rd_kafka_topic_partition_list_new(64);
        rd_kafka_topic_partition_list_add(l, consumer.conf->lanes[p->lane].topic, p->shard)->offset = p->commit_due;
        p->commit_due = -1;
    }
    if (!l) return;
    rd_kafka_resp_err_t e = rd_kafka_commit(consumer.rk, l, 1);
    if (e) bw_log(BW_LOG_DEBUG, COMPONENT, -1, NULL, "commit of %d partitions: %s", l->cnt, rd_kafka_err2str(e));
    rd_kafka_topic_partition_list_destroy(l);
}

/* @locality dispatcher thread, from rd_kafka_consumer_poll */
void bw_progress_commit_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t *l, void *opaque) {
    (void)rk;
    (void)opaque;
    for (int i = 0; l && i < l->cnt; i++) {
        const rd_kafka_topic_partition_t *e = &l->elems[i];
        int slot = bw_partition_slot_of(e->topic, e->partition);
        if (err || e->err || slot < 0) continue;
        bw_partition_t *p = &consumer.partitions[slot];
        if (p->assigned && e->offset > p->committed) p->committed = e->offset;
    }
}

/* ---- gauges and time-watching alerts ---------------------------------------------------- */

/* With a retention.ms on the topic (an operator's choice), warn well before Kafka may
 * delete a shard's unapplied messages. */
static void check_backlog_age(int shard, int64_t now_ms) {
    if (consumer.retention.retention_ms <= 0) return;
    int64_t oldest = bw_partition_shard_oldest_unapplied_ms(shard);
    int64_t warn_after = consumer.retention.retention_ms / 100 * consumer.conf->backlog_age_warn_pct;
    if (oldest && now_ms - oldest > warn_after) {
        char msg[300];
        snprintf(msg, sizeof(msg),
                 "the oldest unapplied message is older than %lld s (%d %% of the topic's retention); the topic's "
                 "retention.ms deletes messages after %lld s",
                 (long long)warn_after / 1000, consumer.conf->backlog_age_warn_pct,
                 (long long)consumer.retention.retention_ms / 1000);
        bw_alerts_fire(consumer.alerts, BW_ALERT_BACKLOG_AGING, shard, msg);
    } else {
        bw_alerts_resolve(consumer.alerts, BW_ALERT_BACKLOG_AGING, shard);
    }
}

/* Whatever the cause (a stuck lock, a server down, a gap, a ledger that cannot be read,
 * a bug), a shard with lag and no applied batch for consumer.stall_alert_ms alerts. A
 * pause meant so (an operator's, the throttle's: gate.h) is not a stall. A slow rate stretches the bound to three of its
 * intervals, so a shard throttled to one batch a minute does not alert. */
static void check_stall(int shard, bw_gate_t reasons, int64_t now_ms) {
    const bw_shard_t *p = &consumer.shards[shard];
    int64_t after = consumer.conf->stall_alert_ms;
    if (p->rl.rate > 0 && 3000.0 / p->rl.rate > (double)after) after = (int64_t)(3000.0 / p->rl.rate);
    /* the lane that waits longest without progress speaks for the shard */
    int64_t since = 0, lag = 0;
    for (int lane = 0; lane < consumer.conf->lane_cnt; lane++) {
        const bw_partition_t *q = &consumer.partitions[bw_config_slot(consumer.conf, lane, shard)];
        if (!q->assigned || !q->lag || !q->lagging_since_ms) continue;
        int64_t t = q->lagging_since_ms > q->progress_ms ? q->lagging_since_ms : q->progress_ms;
        if (!since || t < since) since = t, lag = q->lag;
    }
    if (!consumer.conf->stall_alert_ms || (reasons & BW_GATE_INTENDED) || !since || now_ms - since <= after) {
        bw_alerts_resolve(consumer.alerts, BW_ALERT_NO_PROGRESS, shard);
        return;
    }
    const char *why = "";
    for (int i = 0; i < 5; i++) { /* the newest error, if any, says why */
        int k = (p->errors_next + 4 - i) % 5;
        if (p->errors[k].at_ms) {
            why = p->errors[k].message;
            break;
        }
    }
    char msg[400];
    snprintf(msg, sizeof(msg), "%lld messages wait and no batch was applied for %lld s%s%s",
             (long long)lag, (long long)(now_ms - since) / 1000, why[0] ? "; latest error: " : "", why);
    bw_alerts_fire(consumer.alerts, BW_ALERT_NO_PROGRESS, shard, msg);
}

/* A partition not fetched for long (paused, stopped at lost messages, its ledger not
 * read) has a stale cached watermark. */
static int watermarks_stale(int slot, int64_t now_us) {
    return (bw_gate_slot(slot, now_us) & BW_GATE_STALE_WATERMARKS) != 0;
}

/* Watermarks of partitions not fetched come from a thread of their own, which asks the
 * brokers for every partition's log start and end once a second (one ListOffsets per
 * broker and end): the answer can take half a second even on the embedded Kafka, and the
 * dispatcher must never wait for it. @locks watermarks.mu guards lo, hi */
static struct {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stopping;
    int64_t *lo, *hi; /* [slot count]; -1 unknown */
} watermarks;

static void *watermarks_main(void *arg) {
    (void)arg;
    size_t n = (size_t)consumer.conf->shard_count;
    pthread_mutex_lock(&watermarks.mu);
    while (!watermarks.stopping) {
        for (int lane = 0; lane < consumer.conf->lane_cnt; lane++) {
            pthread_mutex_unlock(&watermarks.mu);
            const char *topic = consumer.conf->lanes[lane].topic;
            rd_kafka_topic_partition_list_t *l[2] = {
                bw_kafka_list_offsets(consumer.rk, topic, NULL, n, RD_KAFKA_OFFSET_BEGINNING, 5000),
                bw_kafka_list_offsets(consumer.rk, topic, NULL, n, RD_KAFKA_OFFSET_END, 5000)};
            pthread_mutex_lock(&watermarks.mu);
            for (int k = 0; k < 2; k++) {
                for (int i = 0; l[k] && i < l[k]->cnt; i++)
                    if (!l[k]->elems[i].err && l[k]->elems[i].partition >= 0 && l[k]->elems[i].partition < (int)n)
                        (k ? watermarks.hi : watermarks.lo)[bw_config_slot(consumer.conf, lane, l[k]->elems[i].partition)] =
                            l[k]->elems[i].offset;
                if (l[k]) rd_kafka_topic_partition_list_destroy(l[k]);
            }
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        if (!watermarks.stopping) pthread_cond_timedwait(&watermarks.cv, &watermarks.mu, &ts);
    }
    pthread_mutex_unlock(&watermarks.mu);
    return NULL;
}

void bw_progress_start(void) {
    size_t n = (size_t)consumer.slot_count;
    pthread_mutex_init(&watermarks.mu, NULL);
    pthread_cond_init(&watermarks.cv, NULL);
    watermarks.lo = malloc(sizeof(int64_t) * n);
    watermarks.hi = malloc(sizeof(int64_t) * n);
    for (size_t i = 0; i < n; i++) watermarks.lo[i] = watermarks.hi[i] = -1;
    pthread_create(&watermarks.thread, NULL, watermarks_main, NULL);
}

void bw_progress_stop(void) {
    pthread_mutex_lock(&watermarks.mu);
    watermarks.stopping = 1;
    pthread_cond_signal(&watermarks.cv);
    pthread_mutex_unlock(&watermarks.mu);
    pthread_join(watermarks.thread, NULL);
    free(watermarks.lo);
    free(watermarks.hi);
}

void bw_progress_update_gauges(void) {
    int64_t now_ms = bw_wall_ms(), now_us = bw_now_us();
    pthread_mutex_lock(&watermarks.mu);
    for (int s = 0; s < consumer.slot_count; s++) { /* each lane's partition: its lag */
        bw_partition_t *p = &consumer.partitions[s];
        if (!p->assigned) {
            if (consumer.conf->lane_cnt > 1) bw_consumer_metrics_lane(consumer.metrics, s, 0, 0, 0);
            continue;
        }
        int64_t lo = -1, hi = -1, lag = (int64_t)p->len;
        /* lag = high watermark - next offset to apply */
        int64_t next = p->len ? p->buf[0]->offset : p->lost_to > p->lost_from ? p->lost_from : p->next_fetch;
        if (watermarks_stale(s, now_us)) lo = watermarks.lo[s], hi = watermarks.hi[s];
        else rd_kafka_get_watermark_offsets(consumer.rk, consumer.conf->lanes[p->lane].topic, p->shard, &lo, &hi);
        /* a shard that never applied anything starts at the beginning of its log */
        if (next < 0 && p->assigned_from == RD_KAFKA_OFFSET_BEGINNING) next = lo;
        if (next >= 0 && hi >= 0) lag = hi > next ? hi - next : 0;
        else if (p->ledger_pending && hi >= 0) lag = hi - (lo > 0 ? lo : 0); /* at most this much waits */
        p->lag = lag;
        if (!lag) p->lagging_since_ms = 0;
        else if (!p->lagging_since_ms) p->lagging_since_ms = now_ms;
        if (hi >= 0) p->high = hi;
        if (lo >= 0) p->low = lo;
        if (consumer.conf->lane_cnt > 1) bw_consumer_metrics_lane(consumer.metrics, s, 1, lag, p->statements);
    }
    pthread_mutex_unlock(&watermarks.mu);
    for (int s = 0; s < consumer.conf->shard_count; s++) { /* each shard: over its lanes */
        bw_shard_t *sh = &consumer.shards[s];
        if (!sh->assigned_lanes) continue;
        int64_t lag = 0;
        for (int lane = 0; lane < consumer.conf->lane_cnt; lane++) {
            const bw_partition_t *p = &consumer.partitions[bw_config_slot(consumer.conf, lane, s)];
            if (p->assigned) lag += p->lag;
        }
        /* each gauge reads its own reason: a shard paused by the throttle is not "buffer full" */
        bw_gate_t reasons = bw_gate_shard(s, now_us);
        bw_consumer_metrics_shard(consumer.metrics, s, sh->rl.rate, sh->rl_rows.rate,
                                  (reasons & BW_GATE_BIT(BW_GATE_PAUSED)) != 0,
                                  (reasons & BW_GATE_BIT(BW_GATE_BUFFER_FULL)) != 0, (reasons & BW_GATE_HELD) != 0, lag);
        check_backlog_age(s, now_ms);
        check_stall(s, reasons, now_ms);
    }
}

/* ---- status records --------------------------------------------------------------------- */

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* The median and 99th percentile of the shard's last batches' ms per statement (0, 0
 * before any): nearest rank over at most BW_LATENCY_SAMPLES samples. */
static void latency_percentiles(const bw_shard_t *p, double *p50, double *p99) {
    float sorted[BW_LATENCY_SAMPLES];
    int n = p->latency_cnt;
    *p50 = *p99 = 0;
    if (!n) return;
    memcpy(sorted, p->latency_ms_ring, (size_t)n * sizeof(*sorted)); /* the ring fills from 0 */
    qsort(sorted, (size_t)n, sizeof(*sorted), cmp_float);
    *p50 = sorted[(n - 1) / 2];
    *p99 = sorted[(int)ceil(0.99 * n) - 1];
}

/* One shard's status record (fire and forget: a lost one is replaced by the next). */
static void publish_shard_status(int s, int64_t now) {
    const bw_partition_t *d = &consumer.partitions[s]; /* the default lane's partition: slot s */
    /* a shard's lanes split between consumers (rebalance.c warns): the holder of its
     * default lane speaks for it, or two records would overwrite each other */
    if (!d->assigned) return;
    bw_shard_t *p = &consumer.shards[s];
    Bulkwrite__Internal__V1__ShardStatus st = BULKWRITE__INTERNAL__V1__SHARD_STATUS__INIT;
    Bulkwrite__Internal__V1__ShardError errs[5], *errp[5];
    Bulkwrite__Internal__V1__LaneStatus lanes[BW_LANES_MAX], *lanep[BW_LANES_MAX];
    st.shard = (uint32_t)s;
    st.consumer = consumer.instance;
    st.updated_at_ms = now;
    st.rate = p->rl.rate;
    st.row_rate = p->rl_rows.rate;
    bw_gate_t reasons = bw_gate_shard(s, bw_now_us());
    char *reason_names[BW_GATE_REASONS];
    Bulkwrite__Internal__V1__GateReason reason_codes[BW_GATE_REASONS];
    for (int r = 0; r < BW_GATE_REASONS; r++)
        if (reasons & BW_GATE_BIT(r)) {
            reason_codes[st.n_reason_codes++] = (Bulkwrite__Internal__V1__GateReason)(r + 1);
            reason_names[st.n_reasons++] = (char *)bw_gate_reason_name((bw_gate_reason_t)r);
        }
    st.reasons = reason_names;
    st.reason_codes = reason_codes;
    st.paused = (reasons & BW_GATE_BIT(BW_GATE_PAUSED)) != 0;
    st.unhealthy = (reasons & BW_GATE_BLOCKED) != 0;
    st.rows_applied = p->rows_applied;
    st.rows_failed = p->rows_failed;
    if (d->assigned) {
        st.applied_offset = d->applied >= 0 ? d->applied : d->low >= 0 ? d->low : 0;
        st.high_watermark = d->high >= 0 ? d->high : 0;
        st.log_start_offset = d->low >= 0 ? d->low : 0;
        st.lost_from = d->lost_from;
        st.lost_to = d->lost_to;
    }
    st.oldest_unapplied_ms = bw_partition_shard_oldest_unapplied_ms(s);
    const char *alerts[BW_ALERT_KINDS];
    st.n_alerts = bw_alerts_of_shard(consumer.alerts, s, alerts, BW_ALERT_KINDS);
    st.alerts = (char **)alerts;
    for (int lane = 0; lane < consumer.conf->lane_cnt; lane++) {
        bw_partition_t *q = &consumer.partitions[bw_config_slot(consumer.conf, lane, s)];
        if (!q->assigned) continue;
        st.lag += q->lag;
        q->published_applied = q->applied;
        if (consumer.conf->lane_cnt == 1) continue; /* no lanes: the fields above say it all */
        Bulkwrite__Internal__V1__LaneStatus *l = &lanes[st.n_lanes];
        bulkwrite__internal__v1__lane_status__init(l);
        l->lane = consumer.conf->lanes[lane].name;
        l->weight = (uint32_t)consumer.conf->lanes[lane].weight;
        l->lag = q->lag;
        l->applied_offset = q->applied >= 0 ? q->applied : q->low >= 0 ? q->low : 0;
        l->high_watermark = q->high >= 0 ? q->high : 0;
        l->log_start_offset = q->low >= 0 ? q->low : 0;
        l->lost_from = q->lost_from;
        l->lost_to = q->lost_to;
        l->statements = q->statements;
        lanep[st.n_lanes++] = l;
    }
    st.lanes = lanep;
    st.cap_rate = p->cap_rate;
    if (consumer.throttle.mode != BW_THROTTLE_OFF && p->throttle.initialised) {
        const bw_throttle_shard_t *t = &p->throttle;
        st.throttle_state = (char *)bw_throttle_state_names[t->state];
        st.throttle_signal = (char *)(t->signal >= 0 ? bw_signal_names[t->signal] : "");
        st.throttle_state_code = (Bulkwrite__Internal__V1__ThrottleState)(t->state + 1);
        st.throttle_signal_code = (Bulkwrite__Internal__V1__ThrottleSignal)(t->signal + 1); /* -1: none */
        st.throttle_value = t->value;
        st.throttle_level = t->level;
        st.throttle_since_ms = t->since_ms;
        st.throttle_rate = t->state == BW_THROTTLE_RUNNING ? p->cap_rate : t->rate;
        st.throttle_reason = (char *)t->why;
        st.throttle_dry_run = consumer.throttle.mode == BW_THROTTLE_DRY_RUN;
    }
    for (int i = 0; i < 5; i++) { /* newest first */
        int k = (p->errors_next + 4 - i) % 5;
        if (!p->errors[k].at_ms) break;
        bulkwrite__internal__v1__shard_error__init(&errs[i]);
        errs[i].at_ms = p->errors[k].at_ms;
        errs[i].kind = (char *)p->errors[k].kind;
        errs[i].message = p->errors[k].message;
        errp[i] = &errs[i];
        st.n_recent_errors++;
    }
    st.recent_errors = errp;
    Bulkwrite__Internal__V1__DeadLetterNote notes[5], *notep[5];
    for (int i = 0; i < 5; i++) { /* newest first */
        const bw_dead_note_t *d = &p->dead[(p->dead_next + 4 - i) % 5];
        if (!d->at_ms) break;
        bulkwrite__internal__v1__dead_letter_note__init(&notes[i]);
        notes[i].at_ms = d->at_ms;
        notes[i].job_id = (char *)d->job_id;
        notes[i].ops = d->ops;
        notes[i].error_code = d->error_code;
        notes[i].reason = (char *)d->reason;
        notep[i] = &notes[i];
        st.n_recent_dead_letters++;
    }
    st.recent_dead_letters = notep;
    st.dead_letters = p->dead_letters;
    st.statements = p->statements_done;
    latency_percentiles(p, &st.statement_p50_ms, &st.statement_p99_ms);
    char key[24];
    int klen = bw_shard_key(s, key);
    bw_record_produce(consumer.status_rk, consumer.conf->status_topic, BW_RECORD_SHARD_STATUS, key, (size_t)klen,
                      &st.base);
}

int bw_progress_publish_shard(int shard) {
    if (!consumer.partitions[shard].assigned) return 0;
    publish_shard_status(shard, bw_wall_ms());
    return 1;
}

/* Every assigned shard's status (all), or only those whose applied offset moved since
 * they were last published: the proxies' backlog admission sees room soon. */
void bw_progress_publish_status(int all) {
    int64_t now = bw_wall_ms();
    for (int s = 0; s < consumer.conf->shard_count; s++) {
        if (!consumer.shards[s].assigned_lanes) continue;
        int moved = all;
        for (int lane = 0; lane < consumer.conf->lane_cnt && !moved; lane++) {
            const bw_partition_t *q = &consumer.partitions[bw_config_slot(consumer.conf, lane, s)];
            moved = q->assigned && q->applied != q->published_applied;
        }
        if (moved) publish_shard_status(s, now);
    }
}
