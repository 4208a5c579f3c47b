#include "job_status.h"

#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "db.h"
#include "ledger.h"
#include "log.h"
#include "scrub.h"
#include "shardtable.h"

/* ---- status from the shards ---------------------------------------------------------- */

static int failure_cmp(const void *a, const void *b) {
    const bw_ledger_failure_t *x = a, *y = b;
    if (x->job_part != y->job_part) return x->job_part < y->job_part ? -1 : 1;
    return x->op_index < y->op_index ? -1 : x->op_index > y->op_index;
}

/* Reads the counts and failure sample of the record's shards on server sv from their
 * ledgers. `mine` has room for every shard of the record. */
static void read_server(const bw_config_t *conf, int sv, const Bulkwrite__Internal__V1__JobRecord *rec, int named,
                        Bulkwrite__V1__JobShard **shards, bw_ledger_job_shard_t *mine, bw_ledger_failure_t *fails,
                        size_t *fail_cnt, int admin) {
    char err[512] = "";
    MYSQL *db = NULL;
    bw_buf_t q;
    bw_buf_init(&q);
    size_t n = 0;
    for (size_t i = 0; i < rec->n_shards; i++)
        if (conf->shard_server[rec->shards[i]->shard] == sv)
            mine[n++] = (bw_ledger_job_shard_t){.shard = (int)rec->shards[i]->shard};
    if (!n) goto done; /* no shard of the job here: no connection */
    /* job ids are 32 hex digits (checked by the caller) */
    if (!(db = bw_db_connect_as(conf, sv, BW_DB_PROXY, err, sizeof(err))) || bw_ledger_read_job(db, conf, rec->job_id, named, mine, n, &q))
        goto failed;
    for (size_t k = 0; k < n; k++)
        for (size_t i = 0; i < rec->n_shards; i++)
            if ((int)shards[i]->shard == mine[k].shard) {
                shards[i]->applied = mine[k].applied;
                shards[i]->failed = mine[k].failed;
            }
    if (bw_ledger_read_job_failures(db, conf, rec->job_id, named, mine, n, BW_JOB_FAILURE_SAMPLE, fails,
                                    (size_t)BW_JOB_FAILURE_SAMPLE * rec->n_shards, fail_cnt, &q))
        goto failed;
    goto done;
failed:
    if (db && admin) {
        snprintf(err, sizeof(err), "%s: %s", conf->servers[sv].name, mysql_error(db));
    } else if (!admin) { /* no server name, no server text (scrub.h) */
        char what[128];
        snprintf(err, sizeof(err), "the shard's ledger could not be read: %s",
                 db ? bw_scrub_mysql(mysql_errno(db), what, sizeof(what)) : "no connection to its server");
    }
    for (size_t i = 0; i < rec->n_shards; i++)
        if (conf->shard_server[rec->shards[i]->shard] == sv) shards[i]->error = strdup(err);
done:
    if (db) {
        mysql_rollback(db);
        mysql_close(db);
    }
    bw_buf_free(&q);
}

void bw_jobs_lane_lost(const Bulkwrite__Internal__V1__ShardStatus *st, const char *lane, int64_t *from, int64_t *to) {
    *from = st->lost_from, *to = st->lost_to; /* the default lane's, also from consumers without lanes */
    if (!lane || !lane[0] || strcmp(lane, "default") == 0) return;
    *from = *to = 0;
    for (size_t i = 0; i < st->n_lanes; i++)
        if (st->lanes[i]->lane && strcmp(st->lanes[i]->lane, lane) == 0) *from = st->lanes[i]->lost_from, *to = st->lanes[i]->lost_to;
}

int bw_jobs_lost_here(const Bulkwrite__Internal__V1__ShardStatus *st, const char *lane, const Bulkwrite__Internal__V1__ShardOps *ops) {
    int64_t from, to;
    bw_jobs_lane_lost(st, lane, &from, &to);
    return to > from && ops->first_offset < to && ops->last_offset >= from;
}

/* Ops of the job still pending on a shard whose consumer found messages deleted from
 * Kafka before they were applied: lost where the job had messages in that gap (the ops
 * of its messages behind the gap are counted with them), blocked where all of them lie
 * behind it. */
static void mark_lost(bw_shard_table_t *table, const char *lane, const Bulkwrite__Internal__V1__ShardOps *ops,
                      Bulkwrite__V1__JobShard *js) {
    Bulkwrite__Internal__V1__ShardStatus *st = table && js->pending ? bw_shard_table_status(table, (int)js->shard) : NULL;
    if (!st) return;
    int64_t lost_from, lost_to;
    bw_jobs_lane_lost(st, lane, &lost_from, &lost_to);
    if (lost_to > lost_from && ops->first_offset >= lost_to) {
        /* all of its messages are still in Kafka, behind the gap: pending, but stuck */
        free(js->error);
        js->error = strdup("blocked: the shard stopped at messages lost in Kafka before this job's (see the "
                           "shard's alert); applied once an operator moves the shard past the gap");
    } else if (bw_jobs_lost_here(st, lane, ops)) {
        char msg[300];
        snprintf(msg, sizeof(msg),
                 "lost in Kafka: offsets %lld to %lld of partition %u were deleted before the shard applied them; "
                 "%u ops of this job were there or behind them: send the same request again (same request_id)",
                 (long long)lost_from, (long long)lost_to - 1, js->shard, js->pending);
        free(js->error);
        js->error = strdup(msg);
        js->lost = js->pending;
        js->pending = 0;
    }
    bulkwrite__internal__v1__shard_status__free_unpacked(st, NULL);
}

/* The next offset the shard applies in the lane (from its consumer's status), -1 unknown. */
static int64_t lane_applied(const Bulkwrite__Internal__V1__ShardStatus *st, const char *lane) {
    if (!lane || !lane[0] || strcmp(lane, "default") == 0) return st->applied_offset;
    for (size_t i = 0; i < st->n_lanes; i++)
        if (st->lanes[i]->lane && strcmp(st->lanes[i]->lane, lane) == 0) return st->lanes[i]->applied_offset;
    return -1;
}

/* A cancelled job's ops still pending on a shard whose consumer has passed the job's
 * last message there were skipped (not applied, not in the ledger): cancelled. */
static void mark_cancelled(bw_shard_table_t *table, const char *lane, const Bulkwrite__Internal__V1__ShardOps *ops,
                           Bulkwrite__V1__JobShard *js) {
    Bulkwrite__Internal__V1__ShardStatus *st = table && js->pending ? bw_shard_table_status(table, (int)js->shard) : NULL;
    if (!st) return;
    if (lane_applied(st, lane) > ops->last_offset) {
        js->cancelled = js->pending;
        js->pending = 0;
    }
    bulkwrite__internal__v1__shard_status__free_unpacked(st, NULL);
}

/* The schedule of the job (not_before, after) and, while ops are held, what they wait
 * for in words. */
static void describe_wait(const Bulkwrite__Internal__V1__JobRecord *rec, Bulkwrite__V1__JobStatus *st) {
    st->not_before_ms = rec->not_before_ms;
    st->n_after = rec->n_after;
    st->after = calloc(rec->n_after + 1, sizeof(*st->after));
    for (size_t i = 0; i < rec->n_after; i++) st->after[i] = strdup(rec->after[i]);
    bw_buf_t w = {0};
    if (st->scheduled) {
        char when[21];
        bw_utc_time_format(rec->not_before_ms, when);
        bw_buf_printf(&w, "%u ops held", st->scheduled);
        if (rec->not_before_ms > bw_wall_ms()) bw_buf_printf(&w, " until %s", when);
        for (size_t i = 0; i < rec->n_after; i++)
            bw_buf_printf(&w, "%s%s", i ? ", " : rec->not_before_ms > bw_wall_ms() ? ", then until job " : " until job ",
                          rec->after[i]);
        if (rec->n_after) bw_buf_printf(&w, " %s finished on their shards", rec->n_after > 1 ? "are" : "is");
    }
    st->waiting = strdup(w.data ? w.data : "");
    bw_buf_free(&w);
}

void bw_jobs_status(const bw_config_t *conf, Bulkwrite__Internal__V1__JobRecord *rec, const char *job_id,
                    bw_shard_table_t *table, int admin, const bw_jobs_named_t *named, Bulkwrite__V1__JobStatus *st) {
    /* the record comes from Kafka: trust only what was checked (the id from the URL,
     * shards in range) */
    rec->job_id = (char *)job_id;
    size_t kept = 0;
    for (size_t i = 0; i < rec->n_shards; i++)
        if (rec->shards[i]->shard < (uint32_t)conf->shard_count) rec->shards[kept++] = rec->shards[i];
    rec->n_shards = kept;
    bulkwrite__v1__job_status__init(st);
    st->job_id = strdup(rec->job_id);
    st->cancelled_by = strdup(""); /* init left them the library's static "": freed as ours */
    st->cancel_reason = strdup("");
    st->job_name = strdup("");
    st->request_id = strdup(rec->request_id ? rec->request_id : "");
    st->lane = strdup(rec->lane && rec->lane[0] ? rec->lane : "default");
    st->replay_of = strdup(rec->replay_of ? rec->replay_of : "");
    st->created_at_ms = rec->created_at_ms;
    st->rejected = rec->rejected;
    st->n_shards = rec->n_shards;
    st->shards = calloc(rec->n_shards + 1, sizeof(*st->shards));
    for (size_t i = 0; i < rec->n_shards; i++) {
        st->shards[i] = calloc(1, sizeof(Bulkwrite__V1__JobShard));
        bulkwrite__v1__job_shard__init(st->shards[i]);
        st->shards[i]->shard = rec->shards[i]->shard;
        st->shards[i]->submitted = rec->shards[i]->ops;
        st->shards[i]->error = NULL;
    }
    bw_ledger_failure_t *fails = calloc((size_t)BW_JOB_FAILURE_SAMPLE * rec->n_shards + 1, sizeof(*fails));
    bw_ledger_job_shard_t *mine = calloc(rec->n_shards + 1, sizeof(*mine));
    size_t fail_cnt = 0;
    for (int sv = 0; sv < conf->server_cnt; sv++)
        read_server(conf, sv, rec, named != NULL, st->shards, mine, fails, &fail_cnt, admin);
    free(mine);
    Bulkwrite__Internal__V1__JobControl *jc = table ? bw_shard_table_job(table, job_id) : NULL;
    if (jc && jc->cancelled) {
        st->cancelled_at_ms = jc->at_ms;
        free(st->cancelled_by);
        free(st->cancel_reason);
        st->cancelled_by = strdup(jc->by ? jc->by : "");
        st->cancel_reason = strdup(jc->reason ? jc->reason : "");
    }
    int complete = 1;
    for (size_t i = 0; i < rec->n_shards; i++) {
        Bulkwrite__V1__JobShard *js = st->shards[i];
        if (!js->error) js->error = strdup("");
        else complete = 0;
        uint32_t done = js->applied + js->failed;
        js->pending = js->submitted > done ? js->submitted - done : 0;
        /* held ops are not in Kafka: neither lost nor passed by the shard */
        uint32_t held = rec->shards[i]->held_ops < js->pending ? rec->shards[i]->held_ops : js->pending;
        js->pending -= held;
        mark_lost(table, rec->lane, rec->shards[i], js);
        if (st->cancelled_at_ms) mark_cancelled(table, rec->lane, rec->shards[i], js);
        if (st->cancelled_at_ms) js->cancelled += held; /* never released now */
        else js->pending += (js->scheduled = held);
        st->scheduled += js->scheduled;
        st->lost += js->lost;
        st->cancelled += js->cancelled;
        st->submitted += js->submitted;
        st->applied += js->applied;
        st->failed += js->failed;
        st->pending += js->pending;
    }
    if (jc) bulkwrite__internal__v1__job_control__free_unpacked(jc, NULL);
    describe_wait(rec, st);
    /* ops answered 429 or 503 that the client is to send again under the request_id */
    st->resend_awaited = !named && !rec->complete && rec->request_id && rec->request_id[0] && !st->cancelled_at_ms;
    st->finished = complete && st->pending == 0 && !st->resend_awaited;
    if (st->resend_awaited && !st->waiting[0]) {
        free(st->waiting);
        st->waiting = strdup("some ops were answered 429 or 503: finished once the same request (its request_id) is "
                             "sent again and taken whole");
    }
    if (named) { /* finished: every part of it is in, from 0 to the last (and any taken past it) */
        st->named = 1;
        free(st->job_name);
        st->job_name = strdup(named->name);
        st->parts = named->received;
        st->next_part = named->next_part;
        st->sealed = named->last >= 0;
        st->last_part = named->last >= 0 ? (uint32_t)named->last : 0;
        int64_t end = named->last > named->max_part ? named->last : named->max_part;
        st->finished = st->finished && st->sealed && (int64_t)named->next_part > end;
    }
    qsort(fails, fail_cnt, sizeof(*fails), failure_cmp);
    size_t keep = fail_cnt < BW_JOB_FAILURE_SAMPLE ? fail_cnt : BW_JOB_FAILURE_SAMPLE;
    st->failures = calloc(keep + 1, sizeof(*st->failures));
    st->n_failures = keep;
    for (size_t i = 0; i < fail_cnt; i++) {
        if (i >= keep) {
            free(fails[i].reason);
            continue;
        }
        Bulkwrite__V1__FailedOp *f = calloc(1, sizeof(*f));
        bulkwrite__v1__failed_op__init(f);
        f->op_index = fails[i].op_index;
        f->shard = (uint32_t)fails[i].shard;
        f->id = fails[i].object_id;
        f->error_code = fails[i].error_code;
        f->reason = fails[i].reason;
        f->job_part = fails[i].job_part;
        char what[128];
        if (!admin && f->reason != bw_scrub_failure(f->error_code, f->reason, what, sizeof(what))) {
            free(f->reason); /* the server's text can quote the row's values */
            f->reason = strdup(what);
        }
        st->failures[i] = f;
    }
    free(fails);
}

/* Finished jobs' summaries (they no longer change), a ring of the latest.
 * @locks summaries_mu guards summaries[], summaries_next */
static pthread_mutex_t summaries_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    char id[33];
    bw_jobs_summary_t sum;
} summaries[BW_JOBS_RECENT_MAX];
static size_t summaries_next;

static int summary_kept(const char *job_id, bw_jobs_summary_t *out) {
    int found = 0;
    pthread_mutex_lock(&summaries_mu);
    for (size_t i = 0; i < BW_JOBS_RECENT_MAX && !found; i++)
        if (strcmp(summaries[i].id, job_id) == 0) *out = summaries[i].sum, found = 1;
    pthread_mutex_unlock(&summaries_mu);
    return found;
}

static void summary_keep(const char *job_id, const bw_jobs_summary_t *sum) {
    pthread_mutex_lock(&summaries_mu);
    size_t i = summaries_next++ % BW_JOBS_RECENT_MAX;
    snprintf(summaries[i].id, sizeof(summaries[i].id), "%s", job_id);
    summaries[i].sum = *sum;
    pthread_mutex_unlock(&summaries_mu);
}

void bw_jobs_summary(bw_jobs_t *j, const bw_config_t *conf, bw_shard_table_t *table,
                     Bulkwrite__Internal__V1__JobRecord *rec, const char *job_id, int admin, bw_jobs_summary_t *out) {
    if (summary_kept(job_id, out)) return;
    bw_jobs_named_t named;
    int is_named = rec->job && strcmp(rec->job, job_id) == 0 && bw_jobs_named(j, job_id, &named) == 0;
    Bulkwrite__V1__JobStatus st;
    char *record_id = rec->job_id; /* freed with the record */
    bw_jobs_status(conf, rec, job_id, table, admin, is_named ? &named : NULL, &st);
    rec->job_id = record_id;
    *out = (bw_jobs_summary_t){.submitted = st.submitted, .applied = st.applied, .failed = st.failed,
                               .pending = st.pending, .cancelled = st.cancelled, .lost = st.lost,
                               .finished = st.finished, .named = st.named, .sealed = st.sealed};
    for (size_t i = 0; i < st.n_shards && !out->unknown[0]; i++)
        if (st.shards[i]->error && st.shards[i]->error[0])
            snprintf(out->unknown, sizeof(out->unknown), "shard %u: %s", st.shards[i]->shard, st.shards[i]->error);
    bw_jobs_status_free(&st);
    if (out->finished && !out->unknown[0]) summary_keep(job_id, out);
}

void bw_jobs_prerequisites(bw_jobs_t *j, const bw_config_t *conf, bw_shard_table_t *table, Bulkwrite__V1__JobStatus *st) {
    st->prerequisites = calloc(st->n_after + 1, sizeof(*st->prerequisites));
    for (size_t i = 0; i < st->n_after; i++) {
        Bulkwrite__V1__Prerequisite *p = calloc(1, sizeof(*p));
        bulkwrite__v1__prerequisite__init(p);
        p->job_id = strdup(st->after[i]);
        st->prerequisites[st->n_prerequisites++] = p;
        void *raw;
        size_t len;
        int rc = bw_jobs_record(j, st->after[i], &raw, &len);
        p->expired = rc == -1;
        if (rc) continue;
        Bulkwrite__Internal__V1__JobRecord *rec = bulkwrite__internal__v1__job_record__unpack(NULL, len, raw);
        free(raw);
        if (!rec) continue;
        bw_jobs_named_t named;
        int is_named = rec->job && strcmp(rec->job, st->after[i]) == 0 && bw_jobs_named(j, st->after[i], &named) == 0;
        Bulkwrite__V1__JobStatus ps;
        char *record_id = rec->job_id;
        bw_jobs_status(conf, rec, st->after[i], table, 1, is_named ? &named : NULL, &ps);
        rec->job_id = record_id;
        bulkwrite__internal__v1__job_record__free_unpacked(rec, NULL);
        p->found = 1;
        p->finished = ps.finished;
        p->submitted = ps.submitted;
        p->applied = ps.applied;
        p->failed = ps.failed;
        p->cancelled = ps.cancelled;
        p->was_cancelled = ps.cancelled_at_ms != 0;
        for (size_t k = 0; k < st->n_shards; k++) {
            Bulkwrite__V1__JobShard *js = st->shards[k];
            if (js->scheduled && !js->waits && !bw_jobs_done_on(&ps, (int)js->shard))
                js->waits = bw_jobs_wait_pick(&(bw_wait_facts_t){.shard = (int)js->shard, .held = js->scheduled,
                                                                 .prerequisite = p->job_id});
        }
        bw_jobs_status_free(&ps);
    }
}

int bw_jobs_done_on(const Bulkwrite__V1__JobStatus *st, int shard) {
    if (st->cancelled_at_ms || st->resend_awaited) return 0;
    if (st->named && !(st->sealed && st->parts == st->last_part + 1)) return 0;
    for (size_t i = 0; shard >= 0 && i < st->n_shards; i++) {
        const Bulkwrite__V1__JobShard *js = st->shards[i];
        if (js->shard == (uint32_t)shard && (js->pending || js->lost || (js->error && js->error[0]))) return 0;
    }
    return 1;
}

void bw_jobs_status_free(Bulkwrite__V1__JobStatus *st) {
    for (size_t i = 0; i < st->n_prerequisites; i++) {
        free(st->prerequisites[i]->job_id);
        free(st->prerequisites[i]);
    }
    free(st->prerequisites);
    free(st->job_id);
    free(st->cancelled_by);
    free(st->cancel_reason);
    free(st->job_name);
    free(st->replay_of);
    free(st->waiting);
    for (size_t i = 0; i < st->n_after; i++) free(st->after[i]);
    free(st->after);
    free(st->request_id);
    free(st->lane);
    for (size_t i = 0; i < st->n_shards; i++) {
        free(st->shards[i]->error);
        bw_jobs_wait_free(st->shards[i]->waits);
        free(st->shards[i]);
    }
    free(st->shards);
    for (size_t i = 0; i < st->n_failures; i++) {
        free(st->failures[i]->reason);
        free(st->failures[i]);
    }
    free(st->failures);
}

/* ---- why a shard waits ------------------------------------------------------------------ */

static Bulkwrite__V1__ShardWait *wait_new(Bulkwrite__V1__WaitKind kind, const char *detail) {
    Bulkwrite__V1__ShardWait *w = calloc(1, sizeof(*w));
    if (!w) abort();
    bulkwrite__v1__shard_wait__init(w);
    w->kind = kind;
    w->detail = strdup(detail);
    w->by = strdup(""); /* init left them the library's static "": freed as ours */
    w->reason = strdup("");
    w->signal = strdup("");
    return w;
}

void bw_jobs_wait_free(Bulkwrite__V1__ShardWait *w) {
    if (!w) return;
    free(w->detail);
    free(w->by);
    free(w->reason);
    free(w->signal);
    free(w);
}

static void wait_set(char **field, const char *value) {
    free(*field);
    *field = strdup(value ? value : "");
}

const char *bw_jobs_pause_words(int shard, const bw_shard_setting_t *pause, char *out, size_t size) {
    snprintf(out, size, "shard %d is paused by %s%s%s", shard, pause->changed_by[0] ? pause->changed_by : "an operator",
             pause->reason[0] ? ": " : "", pause->reason);
    return out;
}

/* The signal's name in ShardWait.signal. */
static const char *signal_name(Bulkwrite__Internal__V1__ThrottleSignal s) {
    switch (s) {
    case BULKWRITE__INTERNAL__V1__THROTTLE_SIGNAL__THROTTLE_SIGNAL_REPLICATION_LAG: return "replication_lag";
    case BULKWRITE__INTERNAL__V1__THROTTLE_SIGNAL__THROTTLE_SIGNAL_THREADS_RUNNING: return "threads_running";
    case BULKWRITE__INTERNAL__V1__THROTTLE_SIGNAL__THROTTLE_SIGNAL_LATENCY: return "latency";
    case BULKWRITE__INTERNAL__V1__THROTTLE_SIGNAL__THROTTLE_SIGNAL_CUSTOM: return "custom";
    default: return "";
    }
}

/* An error the consumer stops the shard on: its gate reason's name and the sentence. */
static Bulkwrite__V1__ShardWait *error_wait(int shard, Bulkwrite__Internal__V1__GateReason r) {
    const char *name, *words;
    switch (r) {
    case BULKWRITE__INTERNAL__V1__GATE_REASON__GATE_REASON_GAP:
        name = "gap", words = "stopped at messages lost in Kafka: it waits until an operator moves it past the gap";
        break;
    case BULKWRITE__INTERNAL__V1__GATE_REASON__GATE_REASON_STOPPED:
        name = "stopped", words = "stopped on an error only an operator can fix (see the shard's alert)";
        break;
    case BULKWRITE__INTERNAL__V1__GATE_REASON__GATE_REASON_SERVER_DOWN:
        name = "server_down", words = "waits for its server, which does not answer";
        break;
    default:
        name = "unhealthy", words = "is held back after consecutive timeouts on its server";
        break;
    }
    char detail[200];
    snprintf(detail, sizeof(detail), "shard %d %s", shard, words);
    Bulkwrite__V1__ShardWait *w = wait_new(BULKWRITE__V1__WAIT_KIND__WAIT_KIND_ERROR, detail);
    wait_set(&w->reason, name);
    return w;
}

Bulkwrite__V1__ShardWait *bw_jobs_wait_pick(const bw_wait_facts_t *f) {
    char detail[600];
    Bulkwrite__V1__ShardWait *w;
    /* ops the shard itself holds back: in its partition, or held ones due and free to go */
    int ready = f->in_kafka || (f->held && !f->held_until_ms && !f->prerequisite);
    if (ready && f->pause) {
        w = wait_new(BULKWRITE__V1__WAIT_KIND__WAIT_KIND_PAUSED, bw_jobs_pause_words(f->shard, f->pause, detail, sizeof(detail)));
        wait_set(&w->by, f->pause->changed_by);
        wait_set(&w->reason, f->pause->reason);
        return w;
    }
    if (ready && f->error) return error_wait(f->shard, f->error);
    if (ready && f->throttle) {
        int critical = f->throttle == BULKWRITE__INTERNAL__V1__THROTTLE_STATE__THROTTLE_STATE_CRITICAL;
        const char *why = f->throttle_reason && f->throttle_reason[0] ? f->throttle_reason : NULL;
        snprintf(detail, sizeof(detail), "shard %d is %s by the adaptive throttle%s%s", f->shard,
                 critical ? "paused" : "slowed", why ? ": " : "", why ? why : "");
        w = wait_new(BULKWRITE__V1__WAIT_KIND__WAIT_KIND_THROTTLED, detail);
        wait_set(&w->reason, f->throttle_reason);
        wait_set(&w->signal, signal_name(f->signal));
        return w;
    }
    if (f->held && f->held_until_ms) {
        char when[21];
        bw_utc_time_format(f->held_until_ms, when);
        snprintf(detail, sizeof(detail), "shard %d holds %u op%s of the job until %s (not_before)", f->shard, f->held,
                 f->held == 1 ? "" : "s", when);
        w = wait_new(BULKWRITE__V1__WAIT_KIND__WAIT_KIND_HELD, detail);
        w->until_ms = f->held_until_ms;
        return w;
    }
    if (f->held && f->prerequisite) {
        snprintf(detail, sizeof(detail), "shard %d holds %u op%s of the job until job %s is finished on it", f->shard,
                 f->held, f->held == 1 ? "" : "s", f->prerequisite);
        w = wait_new(BULKWRITE__V1__WAIT_KIND__WAIT_KIND_PREREQUISITE, detail);
        wait_set(&w->reason, f->prerequisite);
        return w;
    }
    if (ready && f->backlog_full) {
        snprintf(detail, sizeof(detail),
                 "shard %d's backlog is full (%lld messages, %.1f MiB not yet applied): the job's ops wait behind it, "
                 "and its next parts for the shard are refused (429) until it drains",
                 f->shard, (long long)f->backlog_messages, (double)f->backlog_bytes / 1048576.0);
        return wait_new(BULKWRITE__V1__WAIT_KIND__WAIT_KIND_BACKLOG_FULL, detail);
    }
    return NULL;
}

/* The error the consumer's status stops the shard on, the longest-lasting first; NONE. */
static Bulkwrite__Internal__V1__GateReason status_error(const Bulkwrite__Internal__V1__ShardStatus *st) {
    static const Bulkwrite__Internal__V1__GateReason order[] = {
        BULKWRITE__INTERNAL__V1__GATE_REASON__GATE_REASON_GAP, BULKWRITE__INTERNAL__V1__GATE_REASON__GATE_REASON_STOPPED,
        BULKWRITE__INTERNAL__V1__GATE_REASON__GATE_REASON_SERVER_DOWN,
        BULKWRITE__INTERNAL__V1__GATE_REASON__GATE_REASON_UNHEALTHY};
    for (size_t k = 0; k < sizeof(order) / sizeof(*order); k++)
        for (size_t i = 0; i < st->n_reason_codes; i++)
            if (st->reason_codes[i] == order[k]) return order[k];
    return BULKWRITE__INTERNAL__V1__GATE_REASON__GATE_REASON_NONE;
}

void bw_jobs_waits(const bw_config_t *conf, bw_shard_table_t *table, bw_backlog_t *backlog, int admin,
                   Bulkwrite__V1__JobStatus *st) {
    int64_t now = bw_wall_ms();
    int lane = bw_config_lane(conf, st->lane);
    if (lane < 0) lane = 0;
    for (size_t i = 0; i < st->n_shards; i++) {
        Bulkwrite__V1__JobShard *js = st->shards[i];
        Bulkwrite__V1__ShardWait *noted = js->waits; /* bw_jobs_prerequisites' */
        js->waits = NULL;
        int shard = (int)js->shard;
        if (js->pending && shard >= 0 && shard < conf->shard_count) {
            bw_wait_facts_t f = {
                .shard = shard,
                .in_kafka = js->pending - (js->scheduled < js->pending ? js->scheduled : js->pending),
                .held = js->scheduled,
                .held_until_ms = st->not_before_ms > now ? st->not_before_ms : 0,
                .prerequisite = noted && noted->kind == BULKWRITE__V1__WAIT_KIND__WAIT_KIND_PREREQUISITE ? noted->reason : NULL,
            };
            bw_shard_setting_t pause;
            if (table && bw_shard_table_pause(table, shard, &pause)) f.pause = &pause;
            Bulkwrite__Internal__V1__ShardStatus *ss = table ? bw_shard_table_status(table, shard) : NULL;
            char reason[300];
            if (ss) {
                f.error = status_error(ss);
                if (!ss->throttle_dry_run &&
                    ss->throttle_state_code > BULKWRITE__INTERNAL__V1__THROTTLE_STATE__THROTTLE_STATE_RUNNING) {
                    f.throttle = ss->throttle_state_code;
                    f.signal = ss->throttle_signal_code;
                    f.throttle_reason = admin ? ss->throttle_reason
                                              : bw_scrub_throttle_reason(ss->throttle_state, ss->throttle_reason, reason, sizeof(reason));
                }
            }
            if (backlog) {
                bw_backlog_view_t v;
                bw_backlog_view(backlog, bw_config_slot(conf, lane, shard), &v);
                f.backlog_full = v.messages >= v.max_messages || v.bytes >= v.max_bytes;
                f.backlog_messages = v.messages, f.backlog_bytes = v.bytes;
            }
            js->waits = bw_jobs_wait_pick(&f);
            if (ss) bulkwrite__internal__v1__shard_status__free_unpacked(ss, NULL);
        }
        bw_jobs_wait_free(noted);
    }
}

/* {"kind", "detail", and the members that apply}: the JSON of JobShard.waits. */
static json_t *wait_json(const Bulkwrite__V1__ShardWait *w) {
    static const char *const kinds[] = {"", "paused", "throttled", "backlog_full", "held", "prerequisite", "error"};
    json_t *o = json_pack("{s:s, s:s}", "kind", (unsigned)w->kind < sizeof(kinds) / sizeof(*kinds) ? kinds[w->kind] : "",
                          "detail", w->detail ? w->detail : "");
    if (w->kind == BULKWRITE__V1__WAIT_KIND__WAIT_KIND_PAUSED) json_object_set_new(o, "by", json_string(w->by ? w->by : ""));
    if (w->reason && w->reason[0]) json_object_set_new(o, "reason", json_string(w->reason));
    if (w->signal && w->signal[0]) json_object_set_new(o, "signal", json_string(w->signal));
    if (w->until_ms) json_object_set_new(o, "until_ms", json_integer(w->until_ms));
    return o;
}

char *bw_jobs_status_json(const Bulkwrite__V1__JobStatus *st) {
    json_t *shards = json_array(), *fails = json_array();
    for (size_t i = 0; i < st->n_shards; i++) {
        const Bulkwrite__V1__JobShard *s = st->shards[i];
        json_t *o = json_pack("{s:I, s:I, s:I, s:I, s:I}", "shard", (json_int_t)s->shard, "submitted",
                              (json_int_t)s->submitted, "applied", (json_int_t)s->applied, "failed",
                              (json_int_t)s->failed, "pending", (json_int_t)s->pending);
        if (s->lost) json_object_set_new(o, "lost", json_integer(s->lost));
        if (s->cancelled) json_object_set_new(o, "cancelled", json_integer(s->cancelled));
        if (s->scheduled) json_object_set_new(o, "scheduled", json_integer(s->scheduled));
        if (s->error && s->error[0]) json_object_set_new(o, "error", json_string(s->error));
        if (s->waits) json_object_set_new(o, "waits", wait_json(s->waits));
        json_array_append_new(shards, o);
    }
    for (size_t i = 0; i < st->n_failures; i++) {
        const Bulkwrite__V1__FailedOp *f = st->failures[i];
        char id[24];
        snprintf(id, sizeof(id), "%" PRIu64, f->id);
        json_t *o = json_pack("{s:I, s:I, s:s, s:I, s:s}", "op_index", (json_int_t)f->op_index, "shard",
                              (json_int_t)f->shard, "id", id, "error_code", (json_int_t)f->error_code, "reason", f->reason);
        if (st->named) json_object_set_new(o, "job_part", json_integer(f->job_part));
        json_array_append_new(fails, o);
    }
    json_t *j = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:b, s:o, s:o}", "job_id", st->job_id,
                          "request_id", st->request_id, "created_at_ms", (json_int_t)st->created_at_ms,
                          "submitted", (json_int_t)st->submitted, "applied", (json_int_t)st->applied, "failed",
                          (json_int_t)st->failed, "pending", (json_int_t)st->pending, "rejected",
                          (json_int_t)st->rejected, "finished", st->finished, "shards", shards, "failures", fails);
    json_object_set_new(j, "lost", json_integer(st->lost));
    json_object_set_new(j, "lane", json_string(st->lane ? st->lane : "default"));
    if (st->replay_of && st->replay_of[0]) json_object_set_new(j, "replay_of", json_string(st->replay_of));
    if (st->not_before_ms) {
        char when[21];
        bw_utc_time_format(st->not_before_ms, when);
        json_object_set_new(j, "not_before", json_string(when));
        json_object_set_new(j, "not_before_ms", json_integer(st->not_before_ms));
    }
    if (st->n_after) {
        json_t *after = json_array();
        for (size_t i = 0; i < st->n_after; i++) json_array_append_new(after, json_string(st->after[i]));
        json_object_set_new(j, "after", after);
    }
    if (st->scheduled || st->n_after || st->not_before_ms) json_object_set_new(j, "scheduled", json_integer(st->scheduled));
    if (st->waiting && st->waiting[0]) json_object_set_new(j, "waiting", json_string(st->waiting));
    if (st->n_prerequisites) {
        json_t *pre = json_array();
        for (size_t i = 0; i < st->n_prerequisites; i++) {
            const Bulkwrite__V1__Prerequisite *p = st->prerequisites[i];
            json_t *o = json_pack("{s:s, s:b}", "job_id", p->job_id, "found", p->found);
            if (p->expired) json_object_set_new(o, "expired", json_true());
            if (p->found) {
                json_object_set_new(o, "finished", json_boolean(p->finished));
                json_object_set_new(o, "submitted", json_integer(p->submitted));
                json_object_set_new(o, "applied", json_integer(p->applied));
                json_object_set_new(o, "failed", json_integer(p->failed));
                json_object_set_new(o, "cancelled", json_integer(p->cancelled));
                json_object_set_new(o, "was_cancelled", json_boolean(p->was_cancelled));
            }
            json_array_append_new(pre, o);
        }
        json_object_set_new(j, "prerequisites", pre);
    }
    if (!st->named) json_object_set_new(j, "resend_awaited", json_boolean(st->resend_awaited));
    if (st->named) {
        json_object_set_new(j, "job", json_string(st->job_name ? st->job_name : ""));
        json_object_set_new(j, "parts", json_integer(st->parts));
        json_object_set_new(j, "next_part", json_integer(st->next_part));
        json_object_set_new(j, "sealed", json_boolean(st->sealed));
        if (st->sealed) json_object_set_new(j, "last_part", json_integer(st->last_part));
    }
    if (st->cancelled_at_ms) {
        json_object_set_new(j, "cancelled", json_integer(st->cancelled));
        json_object_set_new(j, "cancelled_at_ms", json_integer(st->cancelled_at_ms));
        json_object_set_new(j, "cancelled_by", json_string(st->cancelled_by ? st->cancelled_by : ""));
        json_object_set_new(j, "cancel_reason", json_string(st->cancel_reason ? st->cancel_reason : ""));
    }
    char *out = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    return out;
}

/* ---- paged failures --------------------------------------------------------------------- */

int bw_jobs_cursor_parse(const char *text, bw_jobs_cursor_t *c) {
    unsigned long s, p, i;
    int used = -1;
    if (sscanf(text, "%lu-%lu-%lu%n", &s, &p, &i, &used) != 3 || used < 0 || text[used] || s > INT32_MAX ||
        p > UINT32_MAX || i > UINT32_MAX || strspn(text, "0123456789-") != strlen(text))
        return -1;
    *c = (bw_jobs_cursor_t){.set = 1, .shard = (int)s, .part = (uint32_t)p, .op_index = (uint32_t)i};
    return 0;
}

static int shard_cmp(const void *a, const void *b) {
    const bw_ledger_job_shard_t *x = a, *y = b;
    return (x->shard > y->shard) - (x->shard < y->shard);
}

/* One failure of the page as the API shows it; the stored op parsed back (null if none). */
static json_t *failure_json(const bw_ledger_failure_t *f, int named, const char *reason) {
    char id[24];
    snprintf(id, sizeof(id), "%" PRIu64, f->object_id);
    json_t *op = f->op ? json_loads(f->op, JSON_ALLOW_NUL, NULL) : NULL; /* a text value may hold NUL (\u0000) */
    json_t *o = json_pack("{s:I, s:I, s:s, s:I, s:s, s:o, s:b}", "shard", (json_int_t)f->shard, "op_index",
                          (json_int_t)f->op_index, "id", id, "error_code", (json_int_t)f->error_code, "reason", reason,
                          "op", op ? op : json_null(), "op_truncated", f->op_truncated);
    if (named) json_object_set_new(o, "job_part", json_integer(f->job_part));
    return o;
}

char *bw_jobs_failures_json(const bw_config_t *conf, const Bulkwrite__Internal__V1__JobRecord *rec, const char *job_id,
                            int named, int admin, const bw_jobs_cursor_t *after, unsigned code, const char *reason,
                            size_t limit, char *err, size_t esz) {
    /* the shards of the job from the cursor's on, by number, with their failed counts */
    bw_ledger_job_shard_t *shards = calloc(rec->n_shards + 1, sizeof(*shards));
    size_t n = 0;
    for (size_t i = 0; i < rec->n_shards; i++) {
        uint32_t sh = rec->shards[i]->shard; /* from Kafka: unsigned, so 2^31 and up is out of range too */
        if (sh < (uint32_t)conf->shard_count && (!after->set || (int)sh >= after->shard)) shards[n++].shard = (int)sh;
    }
    qsort(shards, n, sizeof(*shards), shard_cmp);
    size_t distinct = 0; /* a shard named twice in a record is read once */
    for (size_t i = 0; i < n; i++)
        if (!distinct || shards[distinct - 1].shard != shards[i].shard) shards[distinct++] = shards[i];
    n = distinct;
    MYSQL **dbs = calloc((size_t)conf->server_cnt, sizeof(*dbs));
    bw_ledger_job_shard_t *mine = calloc(n + 1, sizeof(*mine));
    size_t chunk = limit < 100 ? 100 : limit; /* rows read at a time: a filter may drop many */
    bw_ledger_failure_t *rows = calloc(chunk, sizeof(*rows));
    json_t *page = json_array();
    bw_buf_t q;
    bw_buf_init(&q);
    char *out = NULL;
    int failed = 0;
    for (int sv = 0; sv < conf->server_cnt && !failed; sv++) {
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (conf->shard_server[shards[i].shard] == sv) mine[m++].shard = shards[i].shard;
        if (!m) continue;
        if (!(dbs[sv] = bw_db_connect_as(conf, sv, BW_DB_PROXY, err, esz)) ||
            bw_ledger_read_job(dbs[sv], conf, job_id, named, mine, m, &q)) {
            failed = 1;
            if (dbs[sv]) snprintf(err, esz, "%s", mysql_error(dbs[sv]));
            if (!admin) snprintf(err, esz, "a shard's ledger could not be read");
            break;
        }
        for (size_t k = 0; k < m; k++)
            for (size_t i = 0; i < n; i++)
                if (shards[i].shard == mine[k].shard) shards[i].failed = mine[k].failed;
    }
    bw_jobs_cursor_t next = {0};
    size_t kept = 0;
    for (size_t i = 0; i < n && !failed && kept < limit; i++) {
        if (!shards[i].failed) continue;
        MYSQL *db = dbs[conf->shard_server[shards[i].shard]];
        char after_id[33];
        uint32_t after_op = 0;
        int from_cursor = after->set && shards[i].shard == after->shard;
        if (from_cursor) {
            if (named) bw_ledger_part_id(job_id, after->part, after_id);
            else snprintf(after_id, sizeof(after_id), "%s", job_id);
            after_op = after->op_index;
        }
        /* reasons are filtered as the caller sees them (scrubbed for others than admins),
         * so rows are read in chunks until the page is full or the shard has no more */
        for (;;) {
            size_t got;
            if (bw_ledger_read_failures_page(db, conf, job_id, named, shards[i].shard, from_cursor ? after_id : NULL,
                                             after_op, code, chunk, rows, &got, &q)) {
                snprintf(err, esz, "%s", admin ? mysql_error(db) : "a shard's ledger could not be read");
                failed = 1;
                break;
            }
            for (size_t r = 0; r < got; r++) {
                bw_ledger_failure_t *f = &rows[r];
                char what[128];
                const char *shown = admin ? f->reason : bw_scrub_failure(f->error_code, f->reason, what, sizeof(what));
                if (kept < limit && (!reason || strstr(shown, reason))) {
                    json_array_append_new(page, failure_json(f, named, shown));
                    if (++kept == limit) next = (bw_jobs_cursor_t){1, f->shard, f->job_part, f->op_index};
                }
                if (r == got - 1) {
                    snprintf(after_id, sizeof(after_id), "%s", f->part_id);
                    after_op = f->op_index;
                    from_cursor = 1;
                }
                bw_ledger_failure_free(f);
            }
            if (got < chunk || kept == limit) break;
        }
    }
    if (!failed) {
        json_t *j = json_pack("{s:s, s:o}", "job_id", job_id, "failures", page);
        page = NULL;
        if (next.set) {
            char c[64];
            snprintf(c, sizeof(c), "%d-%" PRIu32 "-%" PRIu32, next.shard, next.part, next.op_index);
            json_object_set_new(j, "next", json_string(c));
        } else {
            json_object_set_new(j, "next", json_null());
        }
        out = json_dumps(j, JSON_COMPACT);
        json_decref(j);
    }
    json_decref(page);
    for (int sv = 0; sv < conf->server_cnt; sv++)
        if (dbs[sv]) {
            mysql_rollback(dbs[sv]);
            mysql_close(dbs[sv]);
        }
    bw_buf_free(&q);
    free(dbs);
    free(mine);
    free(rows);
    free(shards);
    return out;
}
