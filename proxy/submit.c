/* POST /v1/batches: decode → validate → admit → batch → produce → record → reply.
 *
 * One submit_t carries a request through the steps; a step that ends the request sets
 * its status and message and the reply goes out from one place, with one cleanup. The
 * answer comes only once Kafka has acknowledged every message (acks=all, idempotent
 * producer): 202 when every valid op is durable, 503 naming the ops Kafka did not take,
 * 429 for ops a full shard backlog refused; invalid ops are rejected one by one with
 * reasons (docs/api.md). Then the job's record (the ops taken per shard, with their
 * offsets) goes to the jobs topic, so that any proxy can answer GET /v1/jobs/{id}. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/sha.h>

#include "arena.h"
#include "daemon.h"
#include "log.h"
#include "proxy.h"
#include "request.h"

/* One POST /v1/batches, from its body to its reply. @locality the connection's thread */
typedef struct {
    struct MHD_Connection *c;
    bw_upload_t *up;
    const char *client;      /* the caller's name, NULL when open */
    int64_t started_us;
    bw_arena_t arena;        /* everything below that is not freed by name */
    /* an early end: status, err and at most one header */
    unsigned status;
    char err[512];
    const char *header;
    char header_value[16];
    int in_flight;           /* counted in the client's quota until the reply */
    /* decode, validate */
    bw_format_t fmt;
    Bulkwrite__V1__BatchWriteRequest *req;
    int lane;
    char job_id[33];         /* the request's own (a named job's part's) */
    char named_job[33];      /* a named job's id; "" for a job of one request */
    int has_rid;             /* a request_id or a named job's part: a resend is the same request */
    int hold;                /* scheduled (not_before later) or dependent (after): held in the record */
    uint8_t body_sha256[SHA256_DIGEST_LENGTH];
    Bulkwrite__Internal__V1__JobRecord *prev; /* an earlier attempt's record (same request_id), owned */
    bw_op_route_t *routes;
    bw_rejection_t *rejected;       /* op by op: validation and scopes */
    size_t rejected_cnt, scope_cnt;
    /* batch, admit, produce */
    bw_batch_set_t set;
    uint32_t *too_large;
    size_t too_large_cnt;
    bw_msg_fate_t *fate;
    const char **full_reason;       /* a full backlog's reason, per message */
    rd_kafka_resp_err_t *errs;
    int64_t *offsets;
    size_t backlog_ops, failed_ops;
    /* reply */
    bw_rejection_t *all;            /* every rejected op, by op index */
    size_t all_cnt;
    uint32_t accepted;
} submit_t;

/* The job as logs name it: the id its client holds (the named job's, not its part's),
 * and a named job's part number (-1 for a job of one request). */
static const char *client_job(const submit_t *s) { return s->named_job[0] ? s->named_job : s->job_id; }
static int64_t named_part(const submit_t *s) { return s->named_job[0] ? (int64_t)s->req->job_part : -1; }

/* Ends the request early with status and a message. Returns the status. */
static unsigned stop(submit_t *s, unsigned status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static unsigned stop(submit_t *s, unsigned status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->err, sizeof(s->err), fmt, ap);
    va_end(ap);
    return s->status = status;
}

/* The job's earlier record when the request has a request_id (a resend) and this proxy
 * knows it already, else NULL: parts it lists are not produced again. Not knowing it
 * only costs duplicates, which the shards skip. */
static Bulkwrite__Internal__V1__JobRecord *previous_record(const submit_t *s) {
    void *raw;
    size_t len;
    if (!s->has_rid || bw_jobs_lookup(proxy.jobs, s->job_id, &raw, &len)) return NULL;
    Bulkwrite__Internal__V1__JobRecord *prev = bulkwrite__internal__v1__job_record__unpack(NULL, len, raw);
    free(raw);
    return prev;
}

/* The content type, the body's size, the decoding, and that there are ops. */
static unsigned decode(submit_t *s) {
    if (!atomic_load(&proxy.fleet_agrees)) { /* a resend could become another job: take nothing */
        s->header = MHD_HTTP_HEADER_RETRY_AFTER;
        snprintf(s->header_value, sizeof(s->header_value), "%d", proxy.conf->backlog_retry_after_s);
        return stop(s, MHD_HTTP_SERVICE_UNAVAILABLE, "this proxy's settings differ from those of the processes that "
                    "started before it (its log names the setting): it takes no batch until they agree; send to "
                    "another proxy");
    }
    const char *ctype = s->up->content_type ? s->up->content_type
                                            : MHD_lookup_connection_value(s->c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    if (ctype && strncmp(ctype, "application/x-protobuf", 22) == 0) s->fmt = BW_FMT_PROTOBUF;
    else if (ctype && strncmp(ctype, "application/json", 16) == 0) s->fmt = BW_FMT_JSON;
    else
        return stop(s, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE,
                    "Content-Type must be application/x-protobuf or application/json, not %s", ctype ? ctype : "(none)");
    if (s->up->too_large)
        return stop(s, MHD_HTTP_CONTENT_TOO_LARGE, "request body over proxy.max_body_bytes (%d bytes)",
                    proxy.conf->max_body_bytes);
    int too_many;
    s->req = bw_request_decode_bounded(s->fmt, s->up->body ? s->up->body : "", s->up->len,
                                       (size_t)proxy.conf->max_ops, &s->arena, s->err, sizeof(s->err), &too_many);
    if (!s->req) return s->status = too_many ? MHD_HTTP_CONTENT_TOO_LARGE : MHD_HTTP_BAD_REQUEST;
    if (s->req->n_ops == 0) return stop(s, MHD_HTTP_BAD_REQUEST, "the request has no ops");
    return 0;
}

/* The lane and the client's quotas, before the request costs anything (records, Kafka):
 * over a quota, the request is refused whole. */
static unsigned admit_request(submit_t *s) {
    const Bulkwrite__V1__BatchWriteRequest *req = s->req;
    const bw_auth_client_t *client = s->up->client;
    s->lane = bw_config_lane(proxy.conf, req->lane);
    if (s->lane < 0) {
        char names[BW_LANES_MAX * 36] = "";
        for (int l = 0; l < proxy.conf->lane_cnt; l++)
            snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s", l ? ", " : "", proxy.conf->lanes[l].name);
        /* echoed only if it looks like a lane name: the reply is JSON, the value any bytes */
        size_t len = strlen(req->lane);
        int plain = len <= 64 && strspn(req->lane, "abcdefghijklmnopqrstuvwxyz0123456789_-") == len;
        return stop(s, MHD_HTTP_BAD_REQUEST, "unknown lane %s%s%s (the configured lanes: %s)", plain ? "\"" : "",
                    plain ? req->lane : "(not a lane name)", plain ? "\"" : "", names);
    }
    if (!bw_auth_allows_lane(client, s->lane)) {
        char lanes[BW_LANES_MAX * 36];
        bw_auth_lanes_text(client, proxy.conf, lanes, sizeof(lanes));
        bw_proxy_metrics_client_refused(proxy.metrics, client->name, 1, 0);
        return stop(s, MHD_HTTP_FORBIDDEN, "forbidden: client \"%s\" may not use lane \"%s\" (its lanes: %s)",
                    client->name, proxy.conf->lanes[s->lane].name, lanes);
    }
    if (!client) return 0;
    bw_quota_kind_t kind;
    int retry_after_s;
    if (bw_quota_admit(proxy.quota, client->name, &client->quota, (double)req->n_ops, (double)s->up->len, bw_now_us(),
                       &kind, &retry_after_s, s->err, sizeof(s->err))) {
        bw_metrics_add(proxy.metrics, BW_PM_CLIENT_OVER_QUOTA, bw_metrics_client(proxy.metrics, client->name), (int)kind, 1);
        s->header = MHD_HTTP_HEADER_RETRY_AFTER;
        snprintf(s->header_value, sizeof(s->header_value), "%d", retry_after_s);
        return s->status = MHD_HTTP_TOO_MANY_REQUESTS;
    }
    s->in_flight = 1;
    return 0;
}

/* A named job's part may join it: not cancelled, not past its last part, in its lane. */
static unsigned join_named(submit_t *s) {
    const Bulkwrite__V1__BatchWriteRequest *req = s->req;
    bw_jobs_named_t info;
    /* every part first reads the jobs topic to its end: a seal sees the parts the other
     * proxies took, and a part the seal another proxy took (only requests in flight at the
     * same moment pass each other) */
    bw_jobs_sync(proxy.jobs);
    if (bw_jobs_named(proxy.jobs, s->named_job, &info)) return 0; /* its first part this proxy sees */
    const char *lane = req->lane && strcmp(req->lane, "default") ? req->lane : "";
    if (info.last >= 0 && (req->job_part > info.last || (req->job_last && req->job_part != info.last)))
        return stop(s, MHD_HTTP_CONFLICT, "job \"%s\" (%s) was sealed with part %lld as its last: part %u %s", req->job,
                    s->named_job, (long long)info.last, req->job_part,
                    req->job_part > info.last ? "is past its end; a new job needs a new name" : "cannot be its last too");
    if (req->job_last && info.last < 0 && info.max_part > (int64_t)req->job_part)
        return stop(s, MHD_HTTP_CONFLICT, "job \"%s\" (%s) has part %lld already: part %u cannot be its last (the last "
                    "part is the highest)", req->job, s->named_job, (long long)info.max_part, req->job_part);
    if (strcmp(info.lane, lane))
        return stop(s, MHD_HTTP_CONFLICT, "job \"%s\" (%s) runs in lane \"%s\": every part of a job is in its lane",
                    req->job, s->named_job, info.lane[0] ? info.lane : "default");
    return 0;
}

/* 1 if job `id` exists and this caller may read it (its own, or any for an admin). A named
 * job's part is found by its own id too: with part_of, its record is then handed there. */
static int job_visible(const submit_t *s, const char *id, Bulkwrite__Internal__V1__JobRecord **part_of) {
    const bw_auth_client_t *caller = s->up->client;
    int admin = !caller || (caller->roles & BW_ROLE_ADMIN), found = 0;
    bw_jobs_named_t info;
    void *raw;
    size_t len;
    if (bw_jobs_named(proxy.jobs, id, &info) == 0) {
        found = admin || strcmp(info.client, s->client) == 0;
    } else if (bw_jobs_record(proxy.jobs, id, &raw, &len) == 0) {
        Bulkwrite__Internal__V1__JobRecord *rec = bulkwrite__internal__v1__job_record__unpack(NULL, len, raw);
        found = rec && (admin || strcmp(rec->client, s->client) == 0);
        if (found && part_of && rec->job && rec->job[0] && strcmp(rec->job, id)) *part_of = rec, rec = NULL;
        if (rec) bulkwrite__internal__v1__job_record__free_unpacked(rec, NULL);
        free(raw);
    }
    return found;
}

/* A job id named by member `what`: 32 lower-case hex digits, not the request's own job. */
static unsigned check_job_ref(submit_t *s, const char *what, const char *id) {
    if (strlen(id) != 32 || strspn(id, "0123456789abcdef") != 32)
        return stop(s, MHD_HTTP_BAD_REQUEST, "%s: a job id is 32 lower-case hex digits, not \"%.64s\"", what, id);
    const char *own = client_job(s);
    if (strcmp(id, own) == 0) return stop(s, MHD_HTTP_BAD_REQUEST, "%s: job %s names the request's own job", what, id);
    return 0;
}

/* replay_of, when set, names a job this caller may read, other than the request's own.
 * A resend was checked when it first came. */
static unsigned check_replay_of(submit_t *s) {
    const char *id = s->req->replay_of;
    if (!id || !id[0] || s->prev) return 0;
    if (check_job_ref(s, "replay_of", id)) return s->status;
    if (!job_visible(s, id, NULL))
        return stop(s, MHD_HTTP_BAD_REQUEST, "replay_of: no job %s (a replay names the job whose failed ops it sends "
                    "again: bwctl dead-letters)", id);
    return 0;
}

/* not_before and after (docs/jobs.md): a time not too far ahead, and prerequisites that
 * exist, that the caller may read, and that do not wait for this job. Sets s->hold. */
static unsigned check_schedule(submit_t *s) {
    const Bulkwrite__V1__BatchWriteRequest *req = s->req;
    int64_t now = bw_wall_ms();
    if (req->not_before_ms < 0)
        return stop(s, MHD_HTTP_BAD_REQUEST, "not_before %lld is before 1970", (long long)req->not_before_ms);
    if (req->not_before_ms > now + BW_NOT_BEFORE_MAX_MS)
        return stop(s, MHD_HTTP_BAD_REQUEST, "not_before is more than %d days ahead", (int)(BW_NOT_BEFORE_MAX_MS / 86400000));
    if (req->n_after > BW_AFTER_MAX)
        return stop(s, MHD_HTTP_BAD_REQUEST, "after names %zu jobs; at most %d", req->n_after, BW_AFTER_MAX);
    for (size_t i = 0; i < req->n_after; i++) {
        if (check_job_ref(s, "after", req->after[i])) return s->status;
        for (size_t k = 0; k < i; k++)
            if (strcmp(req->after[k], req->after[i]) == 0)
                return stop(s, MHD_HTTP_BAD_REQUEST, "after: job %s is named twice", req->after[i]);
        Bulkwrite__Internal__V1__JobRecord *part = NULL;
        if (!s->prev && !job_visible(s, req->after[i], &part))
            return stop(s, MHD_HTTP_BAD_REQUEST, "after: no job %s (a prerequisite must be accepted first)", req->after[i]);
        if (part) { /* a part alone is not finished when its job is: its other parts, its cancel */
            stop(s, MHD_HTTP_BAD_REQUEST, "after: %s is part %u of job %s; name the job's id", req->after[i],
                 part->job_part, part->job);
            bulkwrite__internal__v1__job_record__free_unpacked(part, NULL);
            return s->status;
        }
    }
    const char *own = client_job(s);
    /* every held record the other proxies took first: a cycle through one of them counts */
    if (!s->prev && req->n_after && !bw_jobs_sync(proxy.jobs)) {
        s->header = MHD_HTTP_HEADER_RETRY_AFTER;
        snprintf(s->header_value, sizeof(s->header_value), "%d", 1);
        return stop(s, MHD_HTTP_SERVICE_UNAVAILABLE, "after: the jobs topic could not be read to its end, so whether "
                    "this job would wait for itself cannot be told now; send it again");
    }
    if (!s->prev && req->n_after && bw_release_would_cycle(own, req->after, req->n_after))
        return stop(s, MHD_HTTP_CONFLICT, "after: a job named there waits, through its prerequisites, for job %s: "
                    "the two would wait for each other forever", own);
    /* a named job's part sent once its time has come still joins its parts held before
     * (this proxy's index): the release loop sends them out in part order, so the part's
     * ops on an object do not pass theirs. A resend too: it keeps its place behind them,
     * and a resend of a request whose batches are still held stays held. */
    s->hold = req->not_before_ms > now || req->n_after > 0 || (s->prev && s->prev->n_held) ||
              (s->named_job[0] && bw_timers_holds_job(bw_jobs_timers(proxy.jobs), s->named_job));
    return 0;
}

/* The job id, and a request_id's (or a named job's part's) earlier use: a resend must be
 * the same body. A cancelled job takes nothing more. */
static unsigned name_job(submit_t *s) {
    const char *secret = proxy.conf->proxy_auth_job_id_secret;
    const Bulkwrite__V1__BatchWriteRequest *req = s->req;
    if (req->job && req->job[0]) {
        if (bw_request_named_job_id(req, s->client, secret, strlen(secret), s->named_job, s->job_id, s->err,
                                    sizeof(s->err)))
            return s->status = MHD_HTTP_BAD_REQUEST;
    } else if (req->job_part || req->job_last) {
        return stop(s, MHD_HTTP_BAD_REQUEST, "job_part and job_last are a named job's: set job too");
    } else if (bw_request_job_id(req, s->client, secret, strlen(secret), s->job_id, s->err, sizeof(s->err))) {
        return s->status = MHD_HTTP_BAD_REQUEST;
    }
    s->has_rid = s->named_job[0] || (req->request_id && req->request_id[0]);
    const char *job = client_job(s);
    if (s->has_rid && bw_shard_table_job_cancelled(proxy.shards, job))
        return stop(s, MHD_HTTP_CONFLICT, "job %s was cancelled (GET /v1/jobs/%s says when and by whom): it takes no "
                    "more ops; send them as a new job", job, job);
    if (s->named_job[0] && join_named(s)) return s->status;
    if (s->has_rid) SHA256((const unsigned char *)(s->up->body ? s->up->body : ""), s->up->len, s->body_sha256);
    s->prev = previous_record(s);
    const Bulkwrite__Internal__V1__JobRecord *prev = s->prev;
    if (prev && prev->body_sha256.len == sizeof(s->body_sha256) &&
        memcmp(prev->body_sha256.data, s->body_sha256, sizeof(s->body_sha256))) {
        char when[32];
        time_t secs = (time_t)(prev->created_at_ms / 1000);
        struct tm tm;
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&secs, &tm));
        if (s->named_job[0])
            return stop(s, MHD_HTTP_CONFLICT,
                        "part %u of job \"%s\" (%s) was sent at %s with a different body; a resent part must be "
                        "byte for byte the same request, and new ops need a new part number or a new job",
                        req->job_part, req->job, s->named_job, when);
        return stop(s, MHD_HTTP_CONFLICT,
                    "request_id \"%s\" was used at %s for a different body (job %s); a resend must be "
                    "byte for byte the same request, and a new request needs a new request_id",
                    req->request_id, when, s->job_id);
    }
    if (check_replay_of(s) || check_schedule(s)) return s->status;
    return 0;
}

/* Each op: valid, routed to its shard, and inside the client's scopes. */
static void validate(submit_t *s) {
    s->routes = bw_arena_alloc(&s->arena, s->req->n_ops * sizeof(*s->routes));
    s->rejected_cnt = bw_request_validate(proxy.conf, s->req, s->fmt, &s->arena, s->routes, &s->rejected);
    s->scope_cnt = bw_auth_refuse_ops(s->up->client, s->req, s->routes, &s->rejected, &s->rejected_cnt, &s->arena);
    if (s->scope_cnt) bw_proxy_metrics_client_refused(proxy.metrics, s->client, 0, s->scope_cnt);
}

/* The valid ops, as one message per (shard, op type) run (batcher.h). */
static void batch(submit_t *s) {
    bw_batcher_split(proxy.conf, s->req, s->routes, s->job_id, s->named_job, bw_wall_ms(), &s->arena, &s->set, &s->too_large,
                     &s->too_large_cnt);
    size_t cnt = s->set.msg_cnt + 1;
    s->errs = bw_arena_alloc(&s->arena, cnt * sizeof(*s->errs));
    s->offsets = bw_arena_alloc(&s->arena, cnt * sizeof(*s->offsets));
    s->fate = bw_arena_alloc(&s->arena, cnt * sizeof(*s->fate));
    s->full_reason = bw_arena_alloc(&s->arena, cnt * sizeof(*s->full_reason));
    memset(s->errs, 0, cnt * sizeof(*s->errs));
    memset(s->offsets, 0, cnt * sizeof(*s->offsets));
}

/* Decides each message's fate: parts an earlier attempt of this request_id got
 * acknowledged are not produced again; the others are admitted in order while their
 * shard's backlog has room. Once a shard refuses one, its later messages of the request
 * are refused too, so that a shard's ops keep their request order across resends.
 * full_reason[i] is set for refused messages. */
static void admit_messages(submit_t *s) {
    const bw_batch_set_t *set = &s->set;
    const Bulkwrite__Internal__V1__JobRecord *prev = s->prev;
    int shards = proxy.conf->shard_count, lane = s->lane;
    const char **refused = bw_arena_alloc(&s->arena, sizeof(*refused) * (size_t)shards);
    memset(refused, 0, sizeof(*refused) * (size_t)shards);
    uint8_t *taken = bw_arena_alloc(&s->arena, set->msg_cnt + 1);
    memset(taken, 0, set->msg_cnt + 1);
    for (size_t k = 0; prev && k < prev->n_accepted_parts; k++)
        if (prev->accepted_parts[k] < set->msg_cnt) taken[prev->accepted_parts[k]] = 1;
    /* parts on a shard that lost some of the job's messages in Kafka are produced again:
     * the shard skips the parts it had applied and applies the lost ones */
    uint8_t *requeue = bw_arena_alloc(&s->arena, (size_t)shards);
    memset(requeue, 0, (size_t)shards);
    for (size_t k = 0; prev && k < prev->n_shards; k++) {
        if (prev->shards[k]->shard >= (uint32_t)shards) continue;
        Bulkwrite__Internal__V1__ShardStatus *st = bw_shard_table_status(proxy.shards, (int)prev->shards[k]->shard);
        if (st && bw_jobs_lost_here(st, prev->lane, prev->shards[k])) requeue[prev->shards[k]->shard] = 1;
        if (st) bulkwrite__internal__v1__shard_status__free_unpacked(st, NULL);
    }
    for (size_t i = 0; i < set->msg_cnt; i++)
        if (requeue[set->msgs[i].shard]) taken[i] = 0;
    int64_t deadline = bw_now_us() + (int64_t)proxy.conf->backlog_wait_ms * 1000; /* for the whole request */
    for (size_t i = 0; i < set->msg_cnt; i++) {
        const bw_batch_msg_t *m = &set->msgs[i];
        bw_backlog_view_t v;
        s->full_reason[i] = NULL;
        if (taken[i]) {
            s->fate[i] = BW_MSG_TAKEN_BEFORE;
            bw_metrics_add(proxy.metrics, BW_PM_PARTS_TAKEN_BEFORE, 0, 0, 1);
        } else if (!refused[m->shard] && bw_backlog_admit(proxy.backlog, bw_config_slot(proxy.conf, lane, m->shard),
                                                          bw_producers_message_bytes(m), deadline, &v)) {
            s->fate[i] = BW_MSG_PRODUCE;
        } else {
            if (!refused[m->shard]) {
                /* a paused shard's backlog fills and stays full: the client's error names the
                 * pause, after the clause clients show as the gist (bwctl: up to the "(") */
                char text[800], because[400] = "";
                bw_shard_setting_t pause;
                if (bw_shard_table_pause(proxy.shards, m->shard, &pause))
                    snprintf(because, sizeof(because), ", because %s", bw_jobs_pause_words(m->shard, &pause, text, sizeof(text)));
                int len = snprintf(text, sizeof(text),
                                   "not accepted now: shard %d's backlog is full%s%s (%lld messages, %.1f MiB not yet "
                                   "applied; bounds %lld messages, %.1f MiB)%s; resend after Retry-After",
                                   m->shard, lane ? " in lane " : "", lane ? proxy.conf->lanes[lane].name : "",
                                   (long long)v.messages, (double)v.bytes / 1048576.0,
                                   (long long)v.max_messages, (double)v.max_bytes / 1048576.0, because);
                if (len >= (int)sizeof(text)) len = (int)sizeof(text) - 1;
                refused[m->shard] = bw_arena_strndup(&s->arena, text, (size_t)len);
            }
            s->fate[i] = BW_MSG_BACKLOG_FULL;
            s->full_reason[i] = refused[m->shard];
            s->backlog_ops += m->op_cnt;
            bw_metrics_add(proxy.metrics, BW_PM_BACKLOG_REFUSED_OPS, m->shard, 0, m->op_cnt);
        }
    }
}

/* A scheduled or dependent request: its messages wait in the job's record (record_job),
 * not in the shards' partitions. A resend's parts that an earlier attempt held or had
 * released are taken before. */
static void hold_messages(submit_t *s) {
    const Bulkwrite__Internal__V1__JobRecord *prev = s->prev;
    for (size_t i = 0; i < s->set.msg_cnt; i++) {
        s->fate[i] = BW_MSG_HELD;
        s->full_reason[i] = NULL;
        for (size_t k = 0; prev && k < prev->n_accepted_parts; k++)
            if (prev->accepted_parts[k] == i) s->fate[i] = BW_MSG_TAKEN_BEFORE;
        for (size_t k = 0; prev && k < prev->n_held; k++)
            if (prev->held[k]->part == i) s->fate[i] = BW_MSG_TAKEN_BEFORE;
    }
}

static void produce(submit_t *s) {
    if (s->set.msg_cnt)
        bw_producers_send_batches(&s->set, s->lane, s->fate, s->job_id, NULL, s->errs, s->offsets, &s->arena);
    for (size_t i = 0; i < s->set.msg_cnt; i++)
        if (s->errs[i]) s->failed_ops += s->set.msgs[i].op_cnt;
}

static int rejection_cmp(const void *a, const void *b) {
    uint32_t x = ((const bw_rejection_t *)a)->index, y = ((const bw_rejection_t *)b)->index;
    return x < y ? -1 : x > y;
}

/* Every reason in one list, in request order (an op appears at most once). */
static void collect_rejections(submit_t *s) {
    char *err = s->err;
    size_t total = s->rejected_cnt + s->too_large_cnt + s->failed_ops + s->backlog_ops;
    bw_rejection_t *all = s->all = bw_arena_alloc(&s->arena, (total + 1) * sizeof(*all));
    if (s->rejected_cnt) memcpy(all, s->rejected, s->rejected_cnt * sizeof(*all));
    size_t n = s->rejected_cnt;
    for (size_t i = 0; i < s->too_large_cnt; i++) {
        all[n].index = s->too_large[i];
        all[n].retryable = 0;
        all[n++].reason = bw_arena_strndup(&s->arena, err,
            (size_t)snprintf(err, sizeof(s->err), "op too large for one Kafka message (kafka.message_max_bytes %d)",
                             proxy.conf->message_max_bytes));
    }
    for (size_t i = 0; i < s->set.msg_cnt; i++) {
        const char *reason = s->full_reason[i];
        if (s->errs[i]) {
            int len = snprintf(err, sizeof(s->err), "not accepted: Kafka did not acknowledge it (%s); after a "
                               "timeout it may still have been stored", rd_kafka_err2str(s->errs[i]));
            reason = bw_arena_strndup(&s->arena, err, (size_t)len);
            bw_log_part(BW_LOG_ERROR, COMPONENT, s->set.msgs[i].shard, client_job(s), named_part(s),
                        "kafka produce failed: %s", rd_kafka_err2str(s->errs[i]));
        }
        if (!reason) continue;
        for (size_t k = 0; k < s->set.msgs[i].op_cnt; k++)
            all[n++] = (bw_rejection_t){s->set.msgs[i].ops[k], reason, s->fate[i] == BW_MSG_BACKLOG_FULL};
    }
    qsort(all, n, sizeof(*all), rejection_cmp);
    s->all_cnt = n;
    s->accepted = (uint32_t)(s->req->n_ops - n);
}

/* Writes the job's record: the ops Kafka took per shard, with their offsets, and the
 * parts taken, merged with the earlier record of a resent request (same request_id):
 * each attempt may take other parts (a full backlog, a timeout), so the record holds the
 * union of the parts taken by every attempt, and the ops they carry. The earlier record
 * is the one this proxy knows now (its own writes at once, other proxies' as its tail
 * reads them): a resend that reaches another proxy within the tail's lag can leave the
 * receipt short of ops taken earlier, never the data. */
static rd_kafka_resp_err_t record_job(submit_t *s) {
    const Bulkwrite__V1__BatchWriteRequest *req = s->req;
    const bw_batch_set_t *set = &s->set;
    int shard_count = proxy.conf->shard_count;
    Bulkwrite__Internal__V1__JobRecord *prev = previous_record(s); /* again: attempts may have raced */
    uint8_t *taken = bw_arena_alloc(&s->arena, set->msg_cnt + 1);
    Bulkwrite__Internal__V1__HeldBatch **held_before = bw_arena_alloc(&s->arena, (set->msg_cnt + 1) * sizeof(*held_before));
    memset(held_before, 0, (set->msg_cnt + 1) * sizeof(*held_before));
    for (size_t i = 0; i < set->msg_cnt; i++)
        taken[i] = s->fate[i] == BW_MSG_TAKEN_BEFORE || s->fate[i] == BW_MSG_HELD ||
                   (s->fate[i] == BW_MSG_PRODUCE && !s->errs[i]);
    for (size_t k = 0; prev && k < prev->n_accepted_parts; k++)
        if (prev->accepted_parts[k] < set->msg_cnt) taken[prev->accepted_parts[k]] = 1;
    for (size_t k = 0; prev && k < prev->n_held; k++)
        if (prev->held[k]->part < set->msg_cnt) held_before[prev->held[k]->part] = prev->held[k];
    Bulkwrite__Internal__V1__ShardOps *per_shard = bw_arena_alloc(&s->arena, sizeof(*per_shard) * (size_t)shard_count);
    for (int sh = 0; sh < shard_count; sh++) {
        bulkwrite__internal__v1__shard_ops__init(&per_shard[sh]);
        per_shard[sh].shard = (uint32_t)sh;
        per_shard[sh].first_offset = -1;
    }
    uint32_t *parts = bw_arena_alloc(&s->arena, sizeof(uint32_t) * (set->msg_cnt + 1));
    size_t n_parts = 0, n_held = 0;
    Bulkwrite__Internal__V1__HeldBatch *fresh = bw_arena_alloc(&s->arena, sizeof(*fresh) * (set->msg_cnt + 1));
    Bulkwrite__Internal__V1__HeldBatch **held = bw_arena_alloc(&s->arena, sizeof(*held) * (set->msg_cnt + 1));
    for (size_t i = 0; i < set->msg_cnt; i++) {
        if (!taken[i]) continue;
        const bw_batch_msg_t *m = &set->msgs[i];
        Bulkwrite__Internal__V1__ShardOps *so = &per_shard[m->shard];
        so->ops += (uint32_t)m->op_cnt;
        if (s->fate[i] == BW_MSG_HELD || held_before[i]) { /* waits in this record, not in Kafka's partition */
            so->held_ops += (uint32_t)m->op_cnt;
            if (held_before[i]) {
                held[n_held++] = held_before[i];
                continue;
            }
            Bulkwrite__Internal__V1__HeldBatch *h = &fresh[n_held];
            bulkwrite__internal__v1__held_batch__init(h);
            h->shard = (uint32_t)m->shard;
            h->part = (uint32_t)i;
            h->payload = (ProtobufCBinaryData){m->len, m->payload};
            h->object_type = (char *)m->type_name;
            h->op = (uint32_t)atoi(m->op_header);
            h->rows = (uint32_t)m->op_cnt;
            held[n_held++] = h;
            continue;
        }
        parts[n_parts++] = (uint32_t)i;
        if (s->fate[i] != BW_MSG_PRODUCE || s->errs[i]) continue; /* offsets: from this attempt's acks */
        if (so->first_offset < 0 || s->offsets[i] < so->first_offset) so->first_offset = s->offsets[i];
        if (s->offsets[i] > so->last_offset) so->last_offset = s->offsets[i];
    }
    int64_t created = bw_wall_ms();
    for (size_t i = 0; prev && i < prev->n_shards; i++) {
        const Bulkwrite__Internal__V1__ShardOps *p = prev->shards[i];
        if (p->shard >= (uint32_t)shard_count) continue;
        Bulkwrite__Internal__V1__ShardOps *so = &per_shard[p->shard];
        if (p->ops > so->ops) so->ops = p->ops; /* a record from another split of the request */
        if (p->first_offset >= 0 && p->ops > p->held_ops && (so->first_offset < 0 || p->first_offset < so->first_offset))
            so->first_offset = p->first_offset;
        if (p->last_offset > so->last_offset) so->last_offset = p->last_offset;
    }
    if (prev && prev->created_at_ms) created = prev->created_at_ms;
    Bulkwrite__Internal__V1__ShardOps **sop = bw_arena_alloc(&s->arena, sizeof(*sop) * ((size_t)shard_count + 1));
    size_t n = 0;
    uint32_t total = 0;
    for (int sh = 0; sh < shard_count; sh++) {
        if (!per_shard[sh].ops) continue;
        total += per_shard[sh].ops;
        if (per_shard[sh].first_offset < 0) per_shard[sh].first_offset = 0; /* not known: an old record, or held */
        sop[n++] = &per_shard[sh];
    }
    Bulkwrite__Internal__V1__JobRecord rec = BULKWRITE__INTERNAL__V1__JOB_RECORD__INIT;
    rec.job_id = s->job_id;
    rec.request_id = req->request_id ? req->request_id : "";
    rec.lane = req->lane && strcmp(req->lane, "default") ? req->lane : "";
    rec.created_at_ms = created;
    rec.ops = (uint32_t)req->n_ops;
    rec.rejected = total < req->n_ops ? (uint32_t)req->n_ops - total : 0;
    rec.shards = sop;
    rec.n_shards = n;
    rec.accepted_parts = parts;
    rec.n_accepted_parts = n_parts;
    rec.client = (char *)(s->client ? s->client : "");
    rec.complete = !s->backlog_ops && !s->failed_ops;
    rec.replay_of = (char *)(req->replay_of ? req->replay_of : "");
    rec.not_before_ms = req->not_before_ms;
    rec.after = req->after;
    rec.n_after = req->n_after;
    rec.held = held;
    rec.n_held = n_held;
    rec.written_at_ms = bw_wall_ms();
    if (prev && !n_held) rec.released_at_ms = prev->released_at_ms;
    if (s->named_job[0]) {
        rec.job = s->named_job;
        rec.job_name = req->job;
        rec.job_part = req->job_part;
        rec.job_last = req->job_last;
    }
    if (s->has_rid) {
        rec.body_sha256.data = s->body_sha256;
        rec.body_sha256.len = SHA256_DIGEST_LENGTH;
    }
    size_t len = bulkwrite__internal__v1__job_record__get_packed_size(&rec);
    rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE;
    if (n_held && len + 1024 > (size_t)proxy.conf->message_max_bytes) { /* held ops would not fit in their one record */
        stop(s, MHD_HTTP_CONTENT_TOO_LARGE, "a scheduled or dependent request is held whole in one Kafka record of the "
             "jobs topic: its batches take %zu bytes, over kafka.message_max_bytes (%d); send it in smaller parts "
             "(bwctl submit --batch)", len, proxy.conf->message_max_bytes);
        goto done;
    }
    if (n_held && proxy.embedded) { /* held records must fit where the embedded Kafka keeps them */
        bw_timers_stats_t ts;
        bw_timers_stats(bw_jobs_timers(proxy.jobs), &ts);
        /* an eighth of the partition: its held records are written again once a quarter
         * of it came after them, so they must stay well under that to settle */
        if (ts.bytes + len > BW_KAFKA_EMBEDDED_PARTITION_BYTES / 8) {
            err = RD_KAFKA_RESP_ERR__QUEUE_FULL;
            s->header = MHD_HTTP_HEADER_RETRY_AFTER; /* as every 503 of a batch: when to send it again */
            snprintf(s->header_value, sizeof(s->header_value), "%d", proxy.conf->backlog_retry_after_s);
            stop(s, MHD_HTTP_SERVICE_UNAVAILABLE, "the embedded Kafka keeps %lld MiB of the jobs topic, and the %zu "
                 "scheduled or dependent jobs held now take %zu KiB of the eighth held jobs may use: send this one "
                 "again once some are released, or run a real broker for a larger delay queue (docs/jobs.md)",
                 BW_KAFKA_EMBEDDED_PARTITION_BYTES >> 20, ts.held, ts.bytes >> 10);
            goto done;
        }
    }
    uint8_t *buf = bw_arena_alloc(&s->arena, len + 1);
    bulkwrite__internal__v1__job_record__pack(&rec, buf);
    const char *key = s->job_id;
    size_t key_len = strlen(key);
    void *val = buf;
    err = bw_producers_send_records(proxy.conf->jobs_topic, 1, &key, &key_len, &val, &len, NULL);
    /* the ops are durable all the same, unless held here; else only the receipt is missing */
    if (err)
        bw_log_part(BW_LOG_ERROR, COMPONENT, -1, client_job(s), named_part(s), "job record not written to %s (%s)%s",
                    proxy.conf->jobs_topic, rd_kafka_err2str(err), n_held ? ": its held ops are not accepted" : "");
    else bw_jobs_put(proxy.jobs, s->job_id, buf, len); /* a resend to this proxy sees it before the tail does */
done:
    if (prev) bulkwrite__internal__v1__job_record__free_unpacked(prev, NULL);
    return err;
}

/* A held request lives in its record alone: not written, nothing of it is accepted. */
static void hold_failed(submit_t *s, rd_kafka_resp_err_t err) {
    for (size_t i = 0; i < s->set.msg_cnt; i++)
        if (s->fate[i] == BW_MSG_HELD) {
            s->errs[i] = err;
            s->failed_ops += s->set.msgs[i].op_cnt;
        }
}

/* 503: Kafka failed us (resend soon); 429: a shard is full (resend after Retry-After);
 * 403: every op was outside the client's scopes. */
static enum MHD_Result reply(submit_t *s) {
    unsigned status = s->failed_ops                   ? MHD_HTTP_SERVICE_UNAVAILABLE
                      : s->backlog_ops                ? MHD_HTTP_TOO_MANY_REQUESTS
                      : s->accepted                   ? MHD_HTTP_ACCEPTED
                      : s->scope_cnt == s->req->n_ops ? MHD_HTTP_FORBIDDEN
                                                      : MHD_HTTP_UNPROCESSABLE_CONTENT;
    if (s->client) bw_proxy_metrics_client_accepted(proxy.metrics, s->client, s->accepted, s->up->len);
    char *body;
    size_t body_len;
    bw_response_encode(s->fmt, client_job(s), s->accepted, s->all, s->all_cnt, &body, &body_len);
    bw_proxy_metrics_request(proxy.metrics, status, s->accepted, s->all_cnt - s->failed_ops - s->backlog_ops,
                             s->failed_ops, s->set.msg_cnt, bw_now_us() - s->started_us);
    bw_log_part(BW_LOG_DEBUG, COMPONENT, -1, client_job(s), named_part(s), "%zu ops: %u accepted in %zu messages, %zu "
                "rejected, %zu for a full backlog", s->req->n_ops, s->accepted, s->set.msg_cnt, s->all_cnt, s->backlog_ops);
    char retry_after[16];
    snprintf(retry_after, sizeof(retry_after), "%d", proxy.conf->backlog_retry_after_s);
    int retry = s->backlog_ops || s->failed_ops; /* 429 and 503 both say when to resend */
    return bw_daemon_reply_with(s->c, status, s->fmt == BW_FMT_JSON ? "application/json" : "application/x-protobuf",
                                body, body_len, 1, retry ? MHD_HTTP_HEADER_RETRY_AFTER : NULL, retry_after);
}

enum MHD_Result bw_submit(struct MHD_Connection *c, bw_upload_t *up) {
    submit_t s = {.c = c, .up = up, .client = up->client ? up->client->name : NULL, .started_us = bw_now_us()};
    bw_arena_init(&s.arena, 1 << 16);
    enum MHD_Result ret;
    if (decode(&s) || admit_request(&s) || name_job(&s)) {
        ret = bw_reply_error_with(c, s.status, s.header, s.header_value, s.err);
        goto done;
    }
    validate(&s);
    batch(&s);
    if (s.hold) {
        hold_messages(&s);
        size_t fresh = 0;
        for (size_t i = 0; i < s.set.msg_cnt; i++) fresh += s.fate[i] == BW_MSG_HELD;
        rd_kafka_resp_err_t err = fresh || s.named_job[0] ? record_job(&s) : RD_KAFKA_RESP_ERR_NO_ERROR;
        bw_batcher_free_payloads(&s.set);
        if (s.status) {
            ret = bw_reply_error_with(c, s.status, s.header, s.header_value, s.err);
            goto done;
        }
        if (err) hold_failed(&s, err);
        collect_rejections(&s);
    } else {
        admit_messages(&s);
        produce(&s);
        collect_rejections(&s);
        /* a named job's part is recorded also when all its ops were refused for good: it was received */
        if (s.accepted || (s.named_job[0] && !s.backlog_ops && !s.failed_ops)) record_job(&s);
    }
    ret = reply(&s);
done:
    if (s.in_flight) bw_quota_done(proxy.quota, s.client);
    if (s.prev) bulkwrite__internal__v1__job_record__free_unpacked(s.prev, NULL);
    bw_arena_destroy(&s.arena);
    return ret;
}
