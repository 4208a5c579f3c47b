/* rebalance.c — the group gives this consumer partitions and takes them back.
 *
 * Where a partition resumes is the next offset stored in its shard's own database (the
 * ledger), which moves only with the data it describes. Reading it must not hold the
 * dispatcher (a rebalance of 4,096 partitions, a server that does not answer): one job
 * per server reads all of that server's offsets on a worker (a ledger read job, a few
 * queries in all), and librdkafka gets the assignment, with those offsets, once the
 * reads are back (the group waits meanwhile, heartbeats going on). A partition that
 * never stored an offset starts at the beginning of its log. A server that cannot be read
 * is asked again every consumer.pause_ms; its shards wait (their lag shows, and the
 * no-progress alert fires if it lasts), and reads that cannot connect count toward the
 * server's health as batches do (health.h). A server none of whose shards is held here
 * any more is no longer called down here: its shards' new holder decides. With auto.offset.reset=error, an offset Kafka no longer
 * holds is reported as a gap (partition.c), never skipped.
 * @locality dispatcher thread, from rd_kafka_consumer_poll. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <errmsg.h>

#include "consumer.h"
#include "gate.h"
#include "db.h"
#include "handover.h"
#include "ledger.h"
#include "log.h"

/* Set while a revocation drains in-flight jobs: a ledger read collected then belongs to
 * partitions about to be dropped, and says nothing this consumer will act on. */
static int revoking;

static void read_ledger(bw_job_t *j, bw_applier_t *ap);
static void check_ledger(bw_job_t *j, bw_applier_t *ap);
static void ledger_read(bw_job_t *j);
static void ledger_checked(bw_job_t *j);

/* Submits one ledger read per server for the listed partitions (slots), each taken back
 * by `done`; counts them in *in_flight. A check (done = ledger_checked) keeps what each
 * partition had applied when asked. */
static void submit_reads(const int *shards, size_t n, void (*done)(bw_job_t *j), int *in_flight) {
    for (int sv = 0; sv < consumer.conf->server_cnt; sv++) {
        bw_job_t *j = calloc(1, sizeof(*j));
        if (!j) abort();
        j->run = done == ledger_checked ? check_ledger : read_ledger;
        j->done = done;
        j->server = sv;
        j->shards = malloc(sizeof(int) * (n ? n : 1));
        if (!j->shards) abort();
        for (size_t i = 0; i < n; i++)
            if (consumer.conf->shard_server[consumer.partitions[shards[i]].shard] == sv) j->shards[j->cnt++] = shards[i];
        if (!j->cnt) {
            free(j->shards);
            free(j);
            continue;
        }
        j->offsets = malloc(sizeof(int64_t) * j->cnt);
        if (!j->offsets) abort();
        if (done == ledger_checked) {
            if (!(j->asked = malloc(sizeof(int64_t) * j->cnt))) abort();
            for (size_t i = 0; i < j->cnt; i++) j->asked[i] = consumer.partitions[j->shards[i]].applied;
        }
        (*in_flight)++;
        bw_pool_submit(j);
    }
}

static void read_ledgers(const int *shards, size_t n) { submit_reads(shards, n, ledger_read, &consumer.ledger_reads); }

/* @locality worker thread: the ledger read itself (on a connection of its own: ap's
 * are the shards' batches'). */
static void read_ledger(bw_job_t *j, bw_applier_t *ap) {
    (void)ap;
    char err[512];
    bw_buf_t scratch;
    bw_buf_init(&scratch);
    MYSQL *db = bw_db_connect(consumer.conf, j->server, err, sizeof(err));
    if (!db) {
        j->ledger_errno = CR_CONNECTION_ERROR;
        j->res.fail = BW_FAIL_CONNECTION; /* counts toward the server's health */
        snprintf(j->res.error, sizeof(j->res.error), "%s", err);
    } else if ((j->ledger_errno = bw_ledger_read_offsets(db, consumer.conf, j->shards, j->cnt, j->offsets, &scratch))) {
        snprintf(j->res.error, sizeof(j->res.error), "reading bw_offsets: %s (%u)", mysql_error(db), j->ledger_errno);
    }
    if (db) {
        mysql_rollback(db);
        mysql_close(db);
    }
    bw_buf_free(&scratch);
}

/* Every first ledger read of an assignment is back: librdkafka gets the assignment with
 * each partition's stored offset, so fetching starts exactly there. (Assigning first with
 * a placeholder and seeking later raced: librdkafka could start the placeholder after the
 * seek, and the shard skipped its backlog.) A partition whose ledger could not be read
 * gets a placeholder and stays paused; when its read is asked again and answers, it
 * seeks to its offset, long after the placeholder took effect. */
static void hand_over(void) {
    rd_kafka_topic_partition_list_t *l = consumer.awaiting;
    consumer.awaiting = NULL;
    int waiting = 0;
    for (int i = 0; i < l->cnt; i++) {
        int slot = bw_partition_slot_of(l->elems[i].topic, l->elems[i].partition);
        if (slot < 0) continue; /* not one of ours (assign_partitions skipped it) */
        const bw_partition_t *p = &consumer.partitions[slot];
        waiting += p->ledger_pending;
        l->elems[i].offset = p->ledger_pending   ? RD_KAFKA_OFFSET_END
                             : p->next_fetch >= 0 ? p->next_fetch
                                                  : RD_KAFKA_OFFSET_BEGINNING;
    }
    rd_kafka_assign(consumer.rk, l);
    /* librdkafka keeps a partition paused across a rebalance; this consumer may have
     * paused it (buffer full) before it was revoked and handed back */
    rd_kafka_resume_partitions(consumer.rk, l);
    for (int i = 0; i < l->cnt; i++) {
        int slot = bw_partition_slot_of(l->elems[i].topic, l->elems[i].partition);
        if (slot < 0) continue;
        consumer.partitions[slot].fetch_paused = 0;
        bw_partition_refresh_fetch(slot); /* pauses what must wait */
    }
    bw_info(COMPONENT, "fetching %d partitions from their stored offsets%s", l->cnt - waiting,
            waiting ? "; the others wait for their ledger" : "");
    rd_kafka_topic_partition_list_destroy(l);
}

/* The answer of a ledger read: each partition still waiting for it starts fetching. */
static void ledger_read(bw_job_t *j) {
    consumer.ledger_reads--;
    const bw_server_t *sv = &consumer.conf->servers[j->server];
    if (j->ledger_errno)
        bw_log(BW_LOG_WARN, COMPONENT, -1, NULL,
               "cannot read where %zu partitions of server %s resume (%s); asking again in %d ms", j->cnt, sv->name,
               j->res.error, consumer.conf->pause_ms);
    int64_t retry_at = bw_now_us() + (int64_t)consumer.conf->pause_ms * 1000;
    if (j->cnt && !revoking) {
        int shard = consumer.partitions[j->shards[0]].shard;
        if (j->res.fail == BW_FAIL_CONNECTION) {
            /* a consumer that took over a down server's shards sends them no batch before
             * their ledger answers: these reads are what finds the server down, and alerts */
            unsigned changed = bw_health_server_unreachable(consumer.health, j->server, bw_now_us());
            bw_scheduler_on_health(shard, changed, BW_FAIL_CONNECTION, j->res.error);
        } else if (!j->ledger_errno || bw_db_error_class(j->ledger_errno) != BW_FAIL_CONNECTION) {
            /* the server answered (if only with an error): if it was down, it is up. A
             * fresh connection that broke mid-read proves neither; the next read decides */
            unsigned changed = bw_health_server_answered(consumer.health, j->server);
            if (changed) bw_scheduler_on_health(shard, changed, BW_FAIL_NONE, "");
        }
    }
    for (size_t i = 0; i < j->cnt; i++) {
        int s = j->shards[i];
        bw_partition_t *p = &consumer.partitions[s];
        if (!p->assigned || !p->ledger_pending || revoking) continue; /* revoking: dropped once drained */
        if (j->ledger_errno) {
            p->ledger_retry_at_us = retry_at;
            bw_partition_note_error(p->shard, "ledger", j->res.error);
            continue;
        }
        int64_t next = j->offsets[i];
        p->ledger_pending = 0;
        p->next_fetch = p->applied = next;
        p->assigned_from = next >= 0 ? next : RD_KAFKA_OFFSET_BEGINNING;
        bw_log(BW_LOG_DEBUG, COMPONENT, p->shard, NULL, "resuming %s at offset %lld", consumer.conf->lanes[p->lane].topic,
               (long long)next);
        /* a partition already handed to librdkafka (a read asked again) resumes and seeks */
        if (!consumer.awaiting) bw_partition_refresh_fetch(s);
    }
    if (consumer.awaiting && !consumer.ledger_reads) hand_over();
    free(j->shards);
    free(j->offsets);
    free(j);
}

/* Reads again the ledgers that could not be read, once their wait is over. */
void bw_rebalance_retry_ledgers(int64_t now_us) {
    int *due = NULL;
    size_t n = 0;
    for (int s = 0; s < consumer.slot_count; s++) {
        bw_partition_t *p = &consumer.partitions[s];
        if (!p->assigned || !p->ledger_pending || !p->ledger_retry_at_us || p->ledger_retry_at_us > now_us) continue;
        if (!due && !(due = malloc(sizeof(int) * (size_t)consumer.slot_count))) abort();
        p->ledger_retry_at_us = 0; /* one read in flight */
        due[n++] = s;
    }
    if (n) read_ledgers(due, n);
    free(due);
}

/* A server none of whose shards stayed here is not this consumer's to call down: it
 * would never try it again (it decides by its own batches), and its gauge and alert
 * would stay for ever. Its shards' holder tries it, and alerts, from now on. */
static void forget_servers_not_held(void) {
    for (int v = 0; v < consumer.conf->server_cnt; v++) {
        const bw_server_t *sv = &consumer.conf->servers[v];
        int held = 0;
        for (int s = sv->first_shard; s <= sv->last_shard && !held; s++) held = consumer.shards[s].assigned_lanes > 0;
        if (held || !bw_health_forget_server(consumer.health, v)) continue;
        bw_info(COMPONENT, "server %s: none of its shards is held here any more; no longer reported down here", sv->name);
        bw_metrics_set(consumer.metrics, BW_CM_SERVER_DOWN, v, 0, 0);
        /* as long as the new holder takes to fire it: its failed ledger reads, pause_ms
         * apart, each up to a connect timeout, after the group settles */
        const bw_config_t *c = consumer.conf;
        bw_alerts_hand_over_server(consumer.alerts, v,
                                   (int64_t)(c->pause_after_timeouts + 1) * c->pause_ms +
                                       2 * (int64_t)c->connect_timeout_ms);
    }
}

/* The shard's state as its latest status record hands it over (handover.h), logged. */
static void seed_from_status(int shard, int64_t now_us) {
    const bw_config_t *c = consumer.conf;
    Bulkwrite__Internal__V1__ShardStatus *st = bw_shard_table_status(consumer.table, shard);
    bw_handover_limits_t l = {c->handover_max_age_ms, c->pause_ms, c->retry_initial_ms};
    bw_handover_t h;
    bw_handover_result_t r = bw_handover_seed(st, &l, &consumer.throttle, now_us, bw_wall_ms(), &h);
    const char *from = st && st->consumer && *st->consumer ? st->consumer : "?";
    if (r == BW_HANDOVER_STALE && c->handover_max_age_ms)
        bw_log(BW_LOG_DEBUG, COMPONENT, shard, NULL, "consumer %s's status is %.1f s old (consumer.handover_max_age_ms): "
               "the shard starts afresh", from, (double)h.age_ms / 1000);
    if (r != BW_HANDOVER_SEEDED) {
        if (st) bulkwrite__internal__v1__shard_status__free_unpacked(st, NULL);
        return;
    }
    bw_shard_t *sh = &consumer.shards[shard];
    char what[512] = "";
    size_t n = 0;
#define SAY(...) n += (size_t)snprintf(what + n, n < sizeof(what) ? sizeof(what) - n : 0, __VA_ARGS__)
    if (h.throttle) {
        sh->throttle = h.t;
        sh->throttle_paused = bw_throttle_paused(&consumer.throttle, &sh->throttle);
        bw_consumer_metrics_throttle(consumer.metrics, shard, (int)h.t.state, h.t.rate);
        char since[32];
        time_t secs = (time_t)(h.t.since_ms / 1000);
        struct tm tm;
        strftime(since, sizeof(since), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&secs, &tm));
        if (h.t.state == BW_THROTTLE_CRITICAL) SAY("stays paused by the throttle (critical since %s)", since);
        else SAY("resumes the throttle's %g stmt/s (%s since %s)", h.t.rate, bw_throttle_state_names[h.t.state], since);
    }
    if (h.held) {
        bw_health_seed_shard(consumer.health, shard, h.stopped, h.probe_at_us);
        bw_metrics_set(consumer.metrics, BW_CM_UNHEALTHY, shard, 0, 1);
        const char *last = h.n_errors ? h.errors[h.n_errors - 1].message : "held by its previous consumer";
        bw_alerts_fire(consumer.alerts, h.stopped ? BW_ALERT_STOPPED : BW_ALERT_UNHEALTHY, shard, last);
        SAY("%sstays held (%s); its probe in %lld ms", n ? "; " : "", h.stopped ? "stopped" : "unhealthy",
            (long long)((h.probe_at_us - now_us) / 1000));
    }
    if (h.backoff_us) {
        sh->backoff_us = h.backoff_us;
        sh->ready_at_us = now_us + h.backoff_us;
        SAY("%sbacks off %lld ms", n ? "; " : "", (long long)(h.backoff_us / 1000));
    }
    for (size_t i = 0; i < h.n_errors; i++) {
        sh->errors[sh->errors_next].at_ms = h.errors[i].at_ms;
        sh->errors[sh->errors_next].kind = h.errors[i].kind;
        snprintf(sh->errors[sh->errors_next].message, sizeof(sh->errors[0].message), "%s", h.errors[i].message);
        sh->errors_next = (sh->errors_next + 1) % 5;
    }
    if (h.n_errors) SAY("%skeeps %zu recent errors", n ? "; " : "", h.n_errors);
#undef SAY
    bw_info(COMPONENT, "shard %d: %s, from consumer %s's status (%.1f s old)", shard, what, from,
            (double)h.age_ms / 1000);
    bulkwrite__internal__v1__shard_status__free_unpacked(st, NULL);
}

static void assign_partitions(rd_kafka_topic_partition_list_t *l) {
    int64_t now = bw_now_us();
    int *shards = malloc(sizeof(int) * (size_t)(l->cnt ? l->cnt : 1));
    size_t n = 0;
    for (int i = 0; i < l->cnt; i++) {
        int s = bw_partition_slot_of(l->elems[i].topic, l->elems[i].partition);
        if (s < 0) continue;
        bw_partition_t *p = &consumer.partitions[s];
        bw_shard_t *sh = &consumer.shards[p->shard];
        if (!p->assigned) {
            consumer.assigned_cnt++;
            if (!sh->assigned_lanes++) { /* the shard's first lane here: its state starts afresh ... */
                memset(sh, 0, sizeof(*sh));
                sh->assigned_lanes = 1;
                bw_ratelimit_init(&sh->rl, consumer.conf->shard_rate[p->shard], now);
                bw_ratelimit_init(&sh->rl_rows, consumer.conf->shard_row_rate[p->shard], now);
                bw_metrics_set(consumer.metrics, BW_CM_LOST_MESSAGES, p->shard, 0, 0);
                seed_from_status(p->shard, now); /* ... but for what its last holder handed over */
            }
        }
        rd_kafka_message_t **buf = p->buf; /* empty since it was revoked; its memory is reused */
        size_t cap = p->cap;
        int shard = p->shard, lane = p->lane;
        memset(p, 0, sizeof(*p));
        p->shard = shard, p->lane = lane;
        p->buf = buf;
        p->cap = cap;
        p->assigned = 1;
        p->ledger_pending = 1;
        p->fetch_paused = 1;
        p->next_fetch = -1;
        p->assigned_from = RD_KAFKA_OFFSET_STORED;
        p->applied = p->high = p->low = p->commit_due = -1;
        p->published_applied = -2;
        p->committed = -1;
        p->progress_ms = bw_wall_ms();
        shards[n++] = s;
    }
    /* librdkafka gets the assignment once the ledgers answered (hand_over); the group
     * waits for it meanwhile, heartbeats going on */
    if (consumer.awaiting) rd_kafka_topic_partition_list_destroy(consumer.awaiting);
    consumer.awaiting = rd_kafka_topic_partition_list_copy(l);
    read_ledgers(shards, n);
    if (!n) hand_over();
    free(shards);
    bw_scheduler_apply_settings(now); /* an operator's pause or rate holds from the first batch */
    forget_servers_not_held();
    bw_info(COMPONENT, "assigned %d partitions; reading where they resume", l->cnt);
    /* a shard shares one budget between its lanes only if one consumer holds them all:
     * the range assignor does that while every member subscribes to the same lanes */
    int split = 0, example = -1;
    for (int s = 0; s < consumer.conf->shard_count; s++)
        if (consumer.shards[s].assigned_lanes && consumer.shards[s].assigned_lanes < consumer.conf->lane_cnt)
            split++, example = example < 0 ? s : example;
    if (split)
        bw_warn(COMPONENT, "%d shards (e.g. %d) have only some of their %d lanes here: another consumer of the group "
                           "holds the others (a rolling restart that changes lanes, or an assignment strategy other "
                           "than range), so each runs its share at the shard's full rate until every consumer has "
                           "the same lanes",
                split, example, consumer.conf->lane_cnt);
    atomic_store(&consumer.joined, 1);
}

/* Lets in-flight jobs of the listed partitions finish, saves their progress to Kafka,
 * then forgets them: alerts resolve (the new owner raises its own) and their gauges
 * leave /metrics. */
static void revoke_partitions(rd_kafka_t *rk, rd_kafka_topic_partition_list_t *l) {
    int *shards = malloc(sizeof(int) * (size_t)(l->cnt ? l->cnt : 1));
    size_t n = 0;
    for (int i = 0; i < l->cnt; i++) {
        int slot = bw_partition_slot_of(l->elems[i].topic, l->elems[i].partition);
        if (slot >= 0) shards[n++] = slot;
    }
    if (consumer.awaiting) { /* never handed to librdkafka */
        rd_kafka_topic_partition_list_destroy(consumer.awaiting);
        consumer.awaiting = NULL;
    }
    revoking = 1;
    for (size_t i = 0; i < n; i++) consumer.partitions[shards[i]].revoking = 1; /* the gate says so while it drains */
    bw_scheduler_drain(shards, n);
    revoking = 0;
    for (size_t i = 0; i < n; i++) consumer.partitions[shards[i]].revoking = 0;
    bw_progress_commit();
    /* the shards' state as it is now, for their next holder (handover.h) */
    int published = 0;
    for (size_t i = 0; i < n; i++)
        if (consumer.partitions[shards[i]].assigned && shards[i] < consumer.conf->shard_count)
            published += bw_progress_publish_shard(shards[i]);
    if (published) rd_kafka_flush(consumer.status_rk, 1000);
    for (size_t i = 0; i < n; i++) {
        int s = shards[i];
        bw_partition_t *p = &consumer.partitions[s];
        if (!p->assigned) continue;
        bw_partition_drop_all(s);
        p->assigned = 0;
        consumer.assigned_cnt--;
        if (--consumer.shards[p->shard].assigned_lanes) continue; /* the shard's other lanes stay here */
        bw_health_forget(consumer.health, p->shard);
        for (int k = 0; k < BW_ALERT_KINDS; k++)
            if (k != BW_ALERT_SERVER_DOWN && k != BW_ALERT_SIGNAL_UNKNOWN && k != BW_ALERT_TRIM_HELD) /* per server */
                bw_alerts_resolve(consumer.alerts, (bw_alert_kind_t)k, p->shard);
        bw_metrics_assigned(consumer.metrics, BW_METRIC_PER_SHARD, p->shard, 0);
    }
    free(shards);
    bw_scheduler_apply_budgets(bw_now_us()); /* fewer shards held: smaller shares of their servers' budgets */
    rd_kafka_assign(rk, NULL);
}

void bw_rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t *l, void *opaque) {
    (void)opaque;
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        assign_partitions(l);
    } else {
        bw_info(COMPONENT, "revoking %d partitions", l->cnt);
        revoke_partitions(rk, l);
    }
}

/* ---- a failover behind an address that stays ----------------------------------------- */

/* A failover that keeps the server's address (a VIP, a DNS name) puts an older copy of
 * the shards' databases behind a running consumer without a word. A batch applied there
 * finds its ledger behind (apply.h, BW_APPLY_REWIND); a shard with nothing to apply would
 * never look. So the ledgers of the partitions held here are read every
 * LEDGER_CHECK_US (one query per server, on a worker) and compared with what this
 * consumer had applied when it asked: a ledger behind that is the truth, and the
 * partition is fetched again from its offset (bw_partition_rewind). A server that cannot
 * be read is left to the batches and the health checks. */
#define LEDGER_CHECK_US 5000000

/* One connection per server for the checks, kept open (a check every few seconds must not
 * connect each time). @locality the worker running the server's check: one in flight per
 * server at a time (ledger_checks), handed over through the pool's mutex. */
static MYSQL **check_conns;

/* @locality worker thread */
static void check_ledger(bw_job_t *j, bw_applier_t *ap) {
    MYSQL **db = &check_conns[j->server];
    bw_buf_t scratch;
    bw_buf_init(&scratch);
    if (!*db && !(*db = bw_db_connect(ap->conf, j->server, j->res.error, sizeof(j->res.error)))) {
        j->ledger_errno = CR_CONNECTION_ERROR;
    } else if ((j->ledger_errno = bw_ledger_read_offsets(*db, ap->conf, j->shards, j->cnt, j->offsets, &scratch))) {
        snprintf(j->res.error, sizeof(j->res.error), "reading bw_offsets: %s (%u)", mysql_error(*db), j->ledger_errno);
        mysql_close(*db);
        *db = NULL;
    } else {
        mysql_rollback(*db); /* end the read's snapshot */
    }
    bw_buf_free(&scratch);
}

static void ledger_checked(bw_job_t *j) {
    consumer.ledger_checks--;
    for (size_t i = 0; i < j->cnt && !j->ledger_errno && !revoking; i++) {
        bw_partition_t *p = &consumer.partitions[j->shards[i]];
        int64_t stored = j->offsets[i], asked = j->asked[i];
        if (asked < 0 || stored >= asked || !p->assigned || p->ledger_pending || p->revoking) continue;
        /* a batch in flight or buffered since finds it itself; one applied since asked: asked
         * again next time */
        if (consumer.shards[p->shard].job || p->len || p->applied != asked) continue;
        char msg[400];
        snprintf(msg, sizeof(msg),
                 "the ledger of partition %d on %s says offset %lld comes next, behind %lld this consumer applied "
                 "there: the database is an older copy (a failover to a replica, a restored backup); fetching again "
                 "from %lld", j->shards[i], consumer.conf->servers[j->server].name, (long long)stored,
                 (long long)asked, (long long)(stored >= 0 ? stored : 0));
        bw_log(BW_LOG_WARN, COMPONENT, p->shard, NULL, "%s", msg);
        bw_partition_note_error(p->shard, "ledger", msg);
        bw_partition_rewind(j->shards[i], stored);
    }
    free(j->shards);
    free(j->offsets);
    free(j->asked);
    free(j);
}

void bw_rebalance_close_checks(void) {
    for (int v = 0; check_conns && v < consumer.conf->server_cnt; v++)
        if (check_conns[v]) mysql_close(check_conns[v]);
    free(check_conns);
    check_conns = NULL;
}

void bw_rebalance_check_ledgers(int64_t now_us) {
    static int64_t next_us;
    if (now_us < next_us || consumer.ledger_checks || consumer.awaiting || revoking) return;
    next_us = now_us + LEDGER_CHECK_US;
    int *held = malloc(sizeof(int) * (size_t)consumer.slot_count);
    if (!held) abort();
    size_t n = 0;
    for (int s = 0; s < consumer.slot_count; s++) {
        const bw_partition_t *p = &consumer.partitions[s];
        /* idle ones only: a batch finds it itself (apply.h), and a held shard's buffered
         * batch is its probe; a gap, or a server down, is not this check's to judge */
        if (p->assigned && !p->ledger_pending && !p->revoking && p->applied >= 0 && !p->len &&
            !(bw_gate_slot(s, now_us) & (BW_GATE_BLOCKED | BW_GATE_BIT(BW_GATE_GAP))))
            held[n++] = s;
    }
    if (!check_conns && !(check_conns = calloc((size_t)consumer.conf->server_cnt, sizeof(*check_conns)))) abort();
    if (n) submit_reads(held, n, ledger_checked, &consumer.ledger_checks);
    free(held);
}
