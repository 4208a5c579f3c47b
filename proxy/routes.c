/* bw-proxy's HTTP routes: who is calling and may they call this (authorize: bearer
 * tokens and client certificates, auth.c and tls.c, on the listener that serves the
 * endpoint, admin.c), the handler of the endpoint's row (endpoints.c: the one table of
 * the HTTP surface), and the error replies.
 *
 * POST /v1/batches goes to submit.c; GET /v1/jobs/{id}, GET /v1/jobs/{id}/failures, GET /v1/shards, GET
 * /v1/check/{n} and the shard and server control POSTs are served here, with the ops
 * endpoints (/metrics, /healthz, /readyz) from daemon.c. With proxy.auth.clients_file
 * every endpoint but /healthz (and /metrics, /readyz with proxy.auth.open_metrics)
 * needs a client's credentials; without it every endpoint is open (docs/security.md). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon.h"
#include "endpoints.h"
#include "log.h"
#include "proxy.h"
#include "utf8.h"

enum MHD_Result bw_reply_error_with(struct MHD_Connection *c, unsigned status, const char *header,
                                        const char *value, const char *msg) {
    /* {"error": "..."} with the message JSON-escaped */
    bw_buf_t b;
    bw_buf_init(&b);
    bw_buf_puts(&b, "{\"error\":\"");
    for (const char *p = msg; *p; p++) {
        if (*p == '"' || *p == '\\') bw_buf_printf(&b, "\\%c", *p);
        else if ((unsigned char)*p < 0x20) bw_buf_printf(&b, "\\u%04x", *p);
        else bw_buf_append(&b, p, 1);
    }
    bw_buf_puts(&b, "\"}\n");
    bw_metrics_add(proxy.metrics, BW_PM_REQUESTS, (int)status, 0, 1);
    return bw_daemon_reply_with(c, status, "application/json", b.data, b.len, 1, header, value);
}

enum MHD_Result bw_reply_error(struct MHD_Connection *c, unsigned status, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return bw_reply_error_with(c, status, NULL, NULL, msg);
}

/* The caller's address as text ("?" when unknown). */
static void caller_address(struct MHD_Connection *c, char *out, size_t size) {
    snprintf(out, size, "?");
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (!ci || !ci->client_addr) return;
    if (ci->client_addr->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)ci->client_addr)->sin_addr, out, (socklen_t)size);
    else if (ci->client_addr->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)ci->client_addr)->sin6_addr, out, (socklen_t)size);
}

/* Who is calling, and may they call this endpoint on this listener: 0, or 401/403/404
 * with why. The set is acquired for the request (*set, released by the caller) so
 * *client stays valid. */
static unsigned authorize(struct MHD_Connection *c, bw_listener_t on, const char *method, const char *url,
                          bw_auth_set_t **set, const bw_auth_client_t **client, char *why, size_t why_size) {
    *set = bw_auth_acquire(proxy.auth);
    *client = NULL;
    int open_metrics = proxy.conf->proxy_auth_open_metrics;
    char identity[BW_AUTH_IDENTITY_MAX + 1];
    int peer = proxy.tls ? bw_tls_peer_identity(c, identity, sizeof(identity), why, why_size) : 0;
    const char *authz = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    unsigned st;
    if (peer < 0) { /* a certificate that does not verify is refused, whatever else the request carries */
        st = MHD_HTTP_UNAUTHORIZED;
    } else if (!peer && proxy.tls && proxy.tls->require_client_cert && strcmp(url, "/healthz")) {
        snprintf(why, why_size, "a client certificate is required (proxy.tls.require_client_cert)");
        st = MHD_HTTP_UNAUTHORIZED;
    } else {
        st = bw_auth_decide(*set, method, url, authz, peer > 0 ? identity : NULL, open_metrics, (int64_t)time(NULL),
                            client, why, why_size);
    }
    /* the listener is checked after the caller: without credentials every endpoint is 401 */
    if (!st && !bw_admin_served(method, url, on, why, why_size)) st = MHD_HTTP_NOT_FOUND;
    if (!st) return 0;
    char from[INET6_ADDRSTRLEN];
    caller_address(c, from, sizeof(from));
    bw_log(st == 403 ? BW_LOG_INFO : BW_LOG_DEBUG, COMPONENT, -1, NULL, "%u for %s %.200s from %s: %s", st, method, url,
           from, why);
    if (st == 403) bw_proxy_metrics_client_refused(proxy.metrics, (*client)->name, 1, 0);
    return st;
}

/* The 401 or 403 of authorize(). */
/* rpc: a Connect call's (answered as a Connect error) */
static enum MHD_Result refuse(struct MHD_Connection *c, unsigned status, const char *why, int rpc) {
    const char *header = NULL, *value = NULL;
    if (status == MHD_HTTP_UNAUTHORIZED) {
        /* RFC 6750: a token presented and refused (unknown or expired) is invalid_token */
        int bad_token = strcmp(why, "unknown token") == 0 || strncmp(why, "the token expired", 17) == 0;
        header = MHD_HTTP_HEADER_WWW_AUTHENTICATE;
        value = bad_token ? "Bearer realm=\"bulkwrite\", error=\"invalid_token\"" : "Bearer realm=\"bulkwrite\"";
    }
    if (rpc) return bw_connect_refuse(c, status, why, header, value);
    return bw_reply_error_with(c, status, header, value, why);
}

/* The record of job `id` for this caller: 0, or -1 with the reply sent (*ret). A client
 * without the admin role reaches only its own jobs; another's is "no job", as if it did
 * not exist. */
static int find_job(struct MHD_Connection *c, const char *id, const bw_auth_client_t *client,
                    Bulkwrite__Internal__V1__JobRecord **rec, enum MHD_Result *ret) {
    *rec = NULL;
    if (strlen(id) != 32 || strspn(id, "0123456789abcdef") != 32)
        return *ret = bw_reply_error(c, MHD_HTTP_BAD_REQUEST, "a job id is 32 lower-case hex digits, not \"%.64s\"", id),
               -1;
    void *raw;
    size_t raw_len;
    int found = bw_jobs_record(proxy.jobs, id, &raw, &raw_len);
    if (found == -2) /* not "no such job": the topic, or a part's record, cannot be read now */
        return *ret = bw_reply_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, "job %s cannot be read now (%s is not read to "
                                     "its end); ask again", id, proxy.conf->jobs_topic), -1;
    if (found == 0) {
        *rec = bulkwrite__internal__v1__job_record__unpack(NULL, raw_len, raw);
        free(raw);
        if (!*rec) return *ret = bw_reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "job %s: unreadable record", id), -1;
        if (!client || (client->roles & BW_ROLE_ADMIN) || strcmp((*rec)->client, client->name) == 0) return 0;
        bulkwrite__internal__v1__job_record__free_unpacked(*rec, NULL);
        *rec = NULL;
    }
    *ret = bw_reply_error(c, MHD_HTTP_NOT_FOUND, "no job %s (jobs are kept as long as %s keeps them)", id,
                          proxy.conf->jobs_topic);
    return -1;
}

/* GET /v1/jobs/{id}: JSON, or protobuf (JobStatus); the owner's or an admin's
 * (find_job). Others than admins see errors scrubbed (scrub.h). */
enum MHD_Result bw_routes_job(struct MHD_Connection *c, const char *id, const bw_auth_client_t *client, int protobuf) {
    int admin = !client || (client->roles & BW_ROLE_ADMIN);
    Bulkwrite__Internal__V1__JobRecord *rec;
    enum MHD_Result ret;
    if (find_job(c, id, client, &rec, &ret)) return ret;
    bw_jobs_named_t named;
    int is_named = rec->job && strcmp(rec->job, id) == 0 && bw_jobs_named(proxy.jobs, id, &named) == 0;
    Bulkwrite__V1__JobStatus st;
    char *record_id = rec->job_id; /* freed with the record */
    bw_jobs_status(proxy.conf, rec, id, proxy.shards, admin, is_named ? &named : NULL, &st);
    rec->job_id = record_id;
    bulkwrite__internal__v1__job_record__free_unpacked(rec, NULL);
    bw_jobs_prerequisites(proxy.jobs, proxy.conf, proxy.shards, &st);
    bw_jobs_waits(proxy.conf, proxy.shards, proxy.backlog, admin, &st);
    if (protobuf) {
        size_t len = bulkwrite__v1__job_status__get_packed_size(&st);
        uint8_t *body = malloc(len ? len : 1);
        bulkwrite__v1__job_status__pack(&st, body);
        ret = bw_daemon_reply(c, MHD_HTTP_OK, "application/x-protobuf", body, len, 1);
    } else {
        char *body = bw_jobs_status_json(&st);
        ret = bw_daemon_reply(c, MHD_HTTP_OK, "application/json", body, strlen(body), 1);
    }
    bw_jobs_status_free(&st);
    return ret;
}

/* GET /v1/jobs/{id}/failures[?limit=N&after=CURSOR&code=N&reason=TEXT]: the query. */
static enum MHD_Result handle_failures(struct MHD_Connection *c, const char *id, const bw_auth_client_t *client) {
    const char *limit_s = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "limit");
    const char *code_s = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "code");
    bw_failures_query_t q = {.limit = 100,
                             .after = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "after"),
                             .reason = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "reason")};
    char *end;
    if (limit_s && ((q.limit = strtol(limit_s, &end, 10)) < 1 || q.limit > 1000 || *end || end == limit_s))
        return bw_reply_error(c, MHD_HTTP_BAD_REQUEST, "limit: an integer from 1 to 1000, not \"%.32s\"", limit_s);
    if (code_s && ((q.code = strtol(code_s, &end, 10)) < 1 || q.code > 65535 || *end || end == code_s))
        return bw_reply_error(c, MHD_HTTP_BAD_REQUEST, "code: a MySQL error number (1 to 65535), not \"%.32s\"",
                              code_s);
    return bw_routes_failures(c, id, client, &q);
}

/* A page of the job's refused ops with the ops themselves (bw_jobs_failures_json); the
 * owner's or an admin's, reasons scrubbed for others (as the status). */
enum MHD_Result bw_routes_failures(struct MHD_Connection *c, const char *id, const bw_auth_client_t *client,
                                   const bw_failures_query_t *q) {
    int admin = !client || (client->roles & BW_ROLE_ADMIN);
    long limit = q->limit, code = q->code;
    const char *after_s = q->after && q->after[0] ? q->after : NULL, *reason = q->reason;
    if (limit < 1 || limit > 1000)
        return bw_reply_error(c, MHD_HTTP_BAD_REQUEST, "limit: an integer from 1 to 1000, not %ld", limit);
    if (code < 0 || code > 65535)
        return bw_reply_error(c, MHD_HTTP_BAD_REQUEST, "code: a MySQL error number (1 to 65535), not %ld", code);
    bw_jobs_cursor_t after = {0};
    if (after_s && bw_jobs_cursor_parse(after_s, &after))
        return bw_reply_error(c, MHD_HTTP_BAD_REQUEST, "after: a cursor from a page's \"next\", not \"%.64s\"", after_s);
    Bulkwrite__Internal__V1__JobRecord *rec;
    enum MHD_Result ret;
    if (find_job(c, id, client, &rec, &ret)) return ret;
    bw_jobs_named_t named;
    int is_named = rec->job && strcmp(rec->job, id) == 0 && bw_jobs_named(proxy.jobs, id, &named) == 0;
    char err[512] = "";
    char *body = bw_jobs_failures_json(proxy.conf, rec, id, is_named, admin, &after, (unsigned)code,
                                       reason && reason[0] ? reason : NULL, (size_t)limit, err, sizeof(err));
    bulkwrite__internal__v1__job_record__free_unpacked(rec, NULL);
    if (!body) return bw_reply_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, "job %s: %s; ask again", id, err);
    return bw_daemon_reply(c, MHD_HTTP_OK, "application/json", body, strlen(body), 1);
}

/* DELETE /v1/jobs/{id}[?reason=TEXT]: the job's cancellation goes to the control topic
 * (key "job/<id>"), acknowledged before the reply; every consumer then skips the job's
 * messages it has not applied (shardtable.h). Its owner or an admin may; a job already
 * cancelled keeps its first cancellation. The reply is the job's status. */
enum MHD_Result bw_routes_cancel(struct MHD_Connection *c, const char *id, const bw_auth_client_t *client,
                                 const char *reason, int protobuf) {
    Bulkwrite__Internal__V1__JobRecord *rec;
    enum MHD_Result ret;
    if (find_job(c, id, client, &rec, &ret)) return ret;
    bulkwrite__internal__v1__job_record__free_unpacked(rec, NULL);
    char from[INET6_ADDRSTRLEN];
    caller_address(c, from, sizeof(from));
    char why[256];
    /* a job cancelled before keeps its first cancellation: its status, whatever the reason */
    if (reason && !bw_utf8_valid((const unsigned char *)reason, strlen(reason)) &&
        !bw_shard_table_job_cancelled(proxy.shards, id))
        return bw_reply_error(c, MHD_HTTP_BAD_REQUEST, "reason is not valid UTF-8");
    snprintf(why, sizeof(why), "%s", reason ? reason : "");
    for (size_t n = strlen(why); n && !bw_utf8_valid((const unsigned char *)why, n);) why[--n] = '\0'; /* cut whole */
    const char *by = client ? client->name : "(open)";
    int already;
    rd_kafka_resp_err_t e = bw_change_cancel(id, by, from, why, &already);
    if (e)
        return bw_reply_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, "the cancellation was not stored: Kafka did not "
                              "acknowledge it (%s); send it again", rd_kafka_err2str(e));
    if (!already)
        bw_log(BW_LOG_INFO, COMPONENT, -1, id, "job cancelled by %s from %s%s%s", by, from, why[0] ? ": " : "", why);
    return bw_routes_job(c, id, client, protobuf);
}

/* A server budget's change (bw_change_make's ud). */
typedef struct {
    const bw_admin_target_t *t;
    const bw_upload_t *up;
    const bw_admin_caller_t *caller;
    int server;
    const char *key;
    size_t klen;
    bw_server_budget_t b;
    Bulkwrite__Internal__V1__ServerBudget *now; /* as read back, else as written */
} budget_change_t;

static int build_budget(void *ud, bw_change_t *ch, char *err, size_t esz) {
    budget_change_t *bc = ud;
    Bulkwrite__Internal__V1__ServerBudget *prev = bw_shard_table_server_budget_record(proxy.shards, bc->server);
    void *data;
    size_t dlen;
    int bad = bw_admin_budget_update(bc->t->server, bc->up->body ? bc->up->body : "", bc->up->len, prev, bc->caller,
                                     &bc->b, &data, &dlen, err, esz);
    if (prev) bulkwrite__internal__v1__server_budget__free_unpacked(prev, NULL);
    if (bad) return -1;
    bw_change_add(ch, bc->key, bc->klen, data, dlen);
    return 0;
}

/* the reply shows the record as read back (a later change included), else the one written */
static void budget_done(void *ud, const bw_change_t *ch, rd_kafka_resp_err_t e, int read) {
    budget_change_t *bc = ud;
    if (!e && !(read && (bc->now = bw_shard_table_server_budget_record(proxy.shards, bc->server))))
        bc->now = bulkwrite__internal__v1__server_budget__unpack(NULL, ch->vlens[0], ch->vals[0]);
}

/* POST /v1/servers/{name}/budget: the server's one budget record ("server/<name>/budget",
 * shardtable.h), acknowledged by Kafka before the reply, then the budget as this proxy
 * reads it after the change. */
static enum MHD_Result handle_budget(struct MHD_Connection *c, const bw_admin_target_t *t, bw_upload_t *up) {
    char err[512], key[BW_SERVER_BUDGET_KEY_MAX], from[INET6_ADDRSTRLEN];
    int klen = bw_server_budget_key(t->server, key);
    if (klen < 0) return bw_reply_error(c, MHD_HTTP_BAD_REQUEST, "the server's name is too long for a budget key");
    caller_address(c, from, sizeof(from));
    bw_admin_caller_t caller = {up->client ? up->client->name : "(open)", from, t->server};
    budget_change_t bc = {.t = t, .up = up, .caller = &caller, .server = proxy.conf->shard_server[t->first_shard],
                          .key = key, .klen = (size_t)klen};
    bw_change_t ch = {0};
    rd_kafka_resp_err_t e;
    int bad = bw_change_make(build_budget, budget_done, &bc, &ch, &e, err, sizeof(err));
    bw_change_free(&ch);
    if (bad) return bw_reply_error(c, MHD_HTTP_BAD_REQUEST, "%s", err);
    if (e)
        return bw_reply_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, "the budget was not stored: Kafka did not acknowledge it "
                              "(%s); send it again", rd_kafka_err2str(e));
    char setting[128];
    bw_admin_budget_text(&bc.b, setting, sizeof(setting));
    bw_log(BW_LOG_INFO, COMPONENT, -1, NULL, "operator: budget of server %s (shards %d to %d) by %s from %s, now %s%s%s",
           t->server, t->first_shard, t->last_shard, caller.by, from, setting, bc.b.reason[0] ? ": " : "", bc.b.reason);
    char *body = bw_admin_budget_json(proxy.conf, bc.server, bc.now);
    if (bc.now) bulkwrite__internal__v1__server_budget__free_unpacked(bc.now, NULL);
    return bw_daemon_reply(c, MHD_HTTP_OK, "application/json", body, strlen(body), 1);
}

/* A change of shards' settings (bw_change_make's ud): a change writes only the fields it
 * sets, each under its own key, so a change of another field at the same moment, on this
 * proxy or another, stands (Kafka's order decides between two changes of one field). */
typedef struct {
    const bw_admin_target_t *t;
    const bw_upload_t *up;
    const bw_admin_caller_t *caller;
    size_t n;                  /* shards */
    bw_shard_setting_t *sets;  /* each shard's setting after the change */
    size_t *records;           /* each shard's records in the change */
    char why[256];             /* the change's reason, for the log */
} control_change_t;

static int build_control(void *ud, bw_change_t *ch, char *err, size_t esz) {
    control_change_t *cc = ud;
    for (size_t i = 0; i < cc->n; i++) {
        int shard = cc->t->first_shard + (int)i;
        Bulkwrite__Internal__V1__ShardControl *prev[BW_CONTROL_KEYS];
        for (int k = 0; k < BW_CONTROL_KEYS; k++) prev[k] = bw_shard_table_record(proxy.shards, shard, (bw_control_key_t)k);
        bw_shard_table_setting(proxy.shards, shard, &cc->sets[i]);
        bw_admin_records_t recs;
        int bad = bw_admin_control_update(shard, cc->t->action, cc->up->body ? cc->up->body : "", cc->up->len, prev,
                                          cc->caller, &cc->sets[i], &recs, err, esz);
        for (int k = 0; k < BW_CONTROL_KEYS; k++)
            if (prev[k]) bulkwrite__internal__v1__shard_control__free_unpacked(prev[k], NULL);
        if (bad) return -1;
        for (size_t j = 0; j < recs.n; j++) {
            char key[BW_CONTROL_KEY_MAX];
            bw_change_add(ch, key, (size_t)bw_shard_control_key(shard, recs.key[j], key), recs.data[j], recs.len[j]);
        }
        cc->records[i] = recs.n; /* the values are the change's now */
    }
    snprintf(cc->why, sizeof(cc->why), "%s", cc->sets[0].reason);
    return 0;
}

/* the reply shows the fold, another proxy's change of another field included once read */
static void control_done(void *ud, const bw_change_t *ch, rd_kafka_resp_err_t e, int read) {
    (void)ch;
    control_change_t *cc = ud;
    if (read && !e)
        for (size_t i = 0; i < cc->n; i++) bw_shard_table_setting(proxy.shards, cc->t->first_shard + (int)i, &cc->sets[i]);
}

/* POST /v1/shards/{n}/ACTION and /v1/servers/{name}/ACTION: each shard's records of the
 * fields the change sets (one key per field, shardtable.h), produced together and
 * acknowledged by Kafka before the reply, then the shard's setting (or the server's
 * shards') as this proxy reads it after the change. */
static enum MHD_Result handle_control(struct MHD_Connection *c, const char *url, bw_upload_t *up) {
    char err[512];
    bw_admin_target_t t;
    if (bw_admin_parse_url(proxy.conf, url, &t, err, sizeof(err))) return bw_reply_error(c, MHD_HTTP_NOT_FOUND, "%s", err);
    if (up->too_large) return bw_reply_error(c, MHD_HTTP_CONTENT_TOO_LARGE, "body too large");
    if (strcmp(t.action, "budget") == 0) return handle_budget(c, &t, up);
    size_t n = (size_t)(t.last_shard - t.first_shard + 1);
    char from[INET6_ADDRSTRLEN];
    caller_address(c, from, sizeof(from));
    bw_admin_caller_t caller = {up->client ? up->client->name : "(open)", from, t.server};
    control_change_t cc = {.t = &t, .up = up, .caller = &caller, .n = n, .sets = calloc(n, sizeof(bw_shard_setting_t)),
                           .records = calloc(n, sizeof(size_t))};
    if (!cc.sets || !cc.records) abort();
    bw_change_t ch = {0};
    rd_kafka_resp_err_t e;
    int bad = bw_change_make(build_control, control_done, &cc, &ch, &e, err, sizeof(err));
    size_t stored = 0; /* shards all of whose records Kafka acknowledged */
    for (size_t i = 0, r = 0; i < n && !bad; i++) {
        int ok = 1;
        for (size_t j = 0; j < cc.records[i]; j++, r++) ok = ok && !ch.errs[r];
        stored += ok;
    }
    bw_change_free(&ch);
    const bw_shard_setting_t *set = &cc.sets[0];
    enum MHD_Result ret;
    char setting[160];
    bw_admin_setting_text(set, setting, sizeof(setting));
    if (bad) {
        ret = bw_reply_error(c, MHD_HTTP_BAD_REQUEST, "%s", err);
    } else if (e) {
        /* the records are independent: say how many shards took the change (retrying is safe) */
        ret = bw_reply_error(c, MHD_HTTP_SERVICE_UNAVAILABLE,
                             "the change was stored for %zu of %zu shards: Kafka did not acknowledge the rest (%s); "
                             "send it again", stored, n, rd_kafka_err2str(e));
    } else if (!t.server) {
        bw_log(BW_LOG_INFO, COMPONENT, t.first_shard, NULL, "operator: %s by %s from %s, now %s%s%s", t.action,
               caller.by, from, setting, cc.why[0] ? ": " : "", cc.why);
        char *body = bw_admin_setting_json(proxy.conf, t.first_shard, set);
        ret = bw_daemon_reply(c, MHD_HTTP_OK, "application/json", body, strlen(body), 1);
    } else {
        bw_log(BW_LOG_INFO, COMPONENT, -1, NULL, "operator: %s of server %s (shards %d to %d) by %s from %s, shard %d "
               "now %s: %s", t.action, t.server, t.first_shard, t.last_shard, caller.by, from, t.first_shard, setting,
               cc.why);
        char *body = bw_admin_server_json(proxy.conf, &t, cc.sets);
        ret = bw_daemon_reply(c, MHD_HTTP_OK, "application/json", body, strlen(body), 1);
    }
    free(cc.sets);
    free(cc.records);
    return ret;
}

/* /readyz: ready while a broker answers a metadata request. @locality an HTTP thread */
static int kafka_reachable(void) {
    char why[300];
    if (!bw_producers_ready(why, sizeof(why))) return 0; /* a producer is being rebuilt */
    if (!atomic_load(&proxy.fleet_agrees)) return 0;     /* its settings differ (fleet.h) */
    const struct rd_kafka_metadata *md;
    if (rd_kafka_metadata(proxy.rk, 0, proxy.rkt, &md, 2000) != RD_KAFKA_RESP_ERR_NO_ERROR) return 0;
    rd_kafka_metadata_destroy(md);
    return 1;
}

static enum MHD_Result serve(struct MHD_Connection *c, const char *method, const char *url,
                             const bw_auth_client_t *client, bw_upload_t *up);

/* cls: the bw_listener_t of the listener */
enum MHD_Result bw_routes_on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *data,
                                  size_t *data_size, void **con_cls) {
    (void)version;
    bw_listener_t on = *(const bw_listener_t *)cls;
    if (strcmp(method, "POST") == 0) {
        bw_upload_t *up = *con_cls;
        if (!up) { /* the headers: who is calling decides whether the body is kept */
            *con_cls = up = calloc(1, sizeof(*up));
            if (!up) return MHD_NO;
            up->refused = authorize(c, on, method, url, &up->auth, &up->client, up->why, sizeof(up->why));
            /* a refused caller holding a POST open must not keep the others' batches lingering */
            const bw_endpoint_t *e = bw_endpoint_find(method, url);
            up->rpc = e && e->id >= BW_EP_RPC_WRITE_BATCH && e->id <= BW_EP_RPC_LIST_FAILURES;
            if (!up->refused && e && (e->id == BW_EP_BATCHES || e->id == BW_EP_RPC_WRITE_BATCH)) {
                up->batch = 1;
                atomic_fetch_add(&proxy.batches_open, 1);
            }
            up->too_large = up->refused != 0; /* read to the end and dropped: then refused */
            return MHD_YES;
        }
        if (*data_size) {
            if (!up->too_large && up->len + *data_size > (size_t)proxy.conf->max_body_bytes) {
                up->too_large = 1; /* keep reading, drop the rest, answer 413 at the end */
                free(up->body);
                up->body = NULL;
                up->len = up->cap = 0;
            }
            if (!up->too_large) {
                if (up->len + *data_size > up->cap) {
                    size_t cap = up->cap ? up->cap * 2 : 65536;
                    while (cap < up->len + *data_size) cap *= 2;
                    char *nb = realloc(up->body, cap);
                    if (!nb) return MHD_NO;
                    up->body = nb;
                    up->cap = cap;
                }
                memcpy(up->body + up->len, data, *data_size);
                up->len += *data_size;
            }
            *data_size = 0;
            return MHD_YES;
        }
        if (up->refused) return refuse(c, up->refused, up->why, up->rpc);
        return serve(c, method, url, up->client, up);
    }
    bw_auth_set_t *set;
    const bw_auth_client_t *client;
    char why[320];
    unsigned st = authorize(c, on, method, url, &set, &client, why, sizeof(why));
    enum MHD_Result ret = st ? refuse(c, st, why, 0) : serve(c, method, url, client, NULL);
    bw_auth_release(set);
    return ret;
}

/* GET /v1/check/{shard}: any client may ask whether a shard takes writes now, and why
 * not. A paused or throttled shard answers 429, as freno does, so `curl -f` and a load
 * balancer's check read the answer from the status alone; the body says why either way. */
static enum MHD_Result handle_check(struct MHD_Connection *c, const char *arg, int admin) {
    char *end;
    long shard = strtol(arg, &end, 10);
    if (end == arg || *end || shard < 0 || shard >= proxy.conf->shard_count)
        return bw_reply_error(c, MHD_HTTP_NOT_FOUND, "expected /v1/check/{shard}, a shard from 0 to %d",
                              proxy.conf->shard_count - 1);
    int held;
    char *body = bw_admin_check_json(proxy.conf, proxy.shards, (int)shard, admin, &held);
    return bw_daemon_reply(c, held ? MHD_HTTP_TOO_MANY_REQUESTS : MHD_HTTP_OK, "application/json", body, strlen(body), 1);
}

/* GET /v1/shards[?view=summary|full][&shard=N]: gzip'd, with an ETag (reply.h). */
static enum MHD_Result handle_shards(struct MHD_Connection *c, int admin) {
    const char *view_s = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "view");
    const char *shard_s = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "shard");
    bw_admin_shards_view_t view = {.shard = -1};
    if (view_s && strcmp(view_s, "full") && !(view.summary = strcmp(view_s, "summary") == 0))
        return bw_reply_error(c, MHD_HTTP_BAD_REQUEST, "view: summary or full, not \"%.32s\"", view_s);
    if (shard_s) {
        char *end;
        long shard = strtol(shard_s, &end, 10);
        if (end == shard_s || *end || shard < 0 || shard >= proxy.conf->shard_count)
            return bw_reply_error(c, MHD_HTTP_NOT_FOUND, "shard: a shard from 0 to %d, not \"%.32s\"",
                                  proxy.conf->shard_count - 1, shard_s);
        view.shard = (int)shard;
    }
    bw_clock_t k = {0};
    json_t *root = bw_admin_shards_tree(proxy.conf, proxy.shards, proxy.backlog, proxy.history, &view, admin, &k);
    return bw_reply_json_cacheable(c, root, &k);
}

/* GET /v1/shards/{n}/history: arg is "{n}/history". */
static enum MHD_Result handle_history(struct MHD_Connection *c, const char *arg) {
    char *end;
    long shard = strtol(arg, &end, 10);
    if (end == arg || strcmp(end, "/history") || shard < 0 || shard >= proxy.conf->shard_count)
        return bw_reply_error(c, MHD_HTTP_NOT_FOUND, "expected /v1/shards/{n}/history, a shard from 0 to %d",
                              proxy.conf->shard_count - 1);
    bw_clock_t k = {0};
    return bw_reply_json_cacheable(c, bw_admin_history_tree(proxy.shards, proxy.history, (int)shard, bw_wall_ms()), &k);
}

/* The endpoint's handler (endpoints.c's row); client (NULL when open) is authorized and
 * the listener checked. up: a POST's body. */
static enum MHD_Result serve(struct MHD_Connection *c, const char *method, const char *url,
                             const bw_auth_client_t *client, bw_upload_t *up) {
    const bw_endpoint_t *e = bw_endpoint_find(method, url);
    if (!e) {
        char use[256];
        if (bw_endpoint_other_methods(method, url, use, sizeof(use)))
            return bw_reply_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "%s", use);
        return bw_reply_error(c, MHD_HTTP_NOT_FOUND, "no such endpoint: %s %s", method, url);
    }
    const char *arg = url + strlen(e->path); /* a prefix row's argument */
    int admin = !client || (client->roles & BW_ROLE_ADMIN); /* others see errors scrubbed (scrub.h) */
    enum MHD_Result ret = MHD_NO;
    switch (e->id) {
    case BW_EP_BATCHES: return bw_submit(c, up);
    case BW_EP_SHARD_CONTROL:
    case BW_EP_SERVER_CONTROL: return handle_control(c, url, up);
    case BW_EP_JOB_FAILURES: {
        char id[33];
        snprintf(id, sizeof(id), "%.32s", arg);
        return handle_failures(c, id, client);
    }
    case BW_EP_JOB: {
        const char *accept = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);
        return bw_routes_job(c, arg, client, accept && strstr(accept, "application/x-protobuf"));
    }
    case BW_EP_JOB_CANCEL: {
        const char *accept = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);
        return bw_routes_cancel(c, arg, client, MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "reason"),
                                accept && strstr(accept, "application/x-protobuf"));
    }
    case BW_EP_RPC_WRITE_BATCH:
    case BW_EP_RPC_GET_JOB:
    case BW_EP_RPC_CANCEL_JOB:
    case BW_EP_RPC_LIST_FAILURES: return bw_connect_serve(c, e->id, client, up);
    case BW_EP_SHARDS: return handle_shards(c, admin);
    case BW_EP_SHARD_HISTORY: return handle_history(c, arg);
    case BW_EP_CHECK: return handle_check(c, arg, admin);
    case BW_EP_JOBS:
    case BW_EP_FLEET:
    case BW_EP_WHOAMI:
    case BW_EP_OPENAPI:
    case BW_EP_ROOT:
    case BW_EP_UI_ROOT:
    case BW_EP_UI: bw_ui_serve(c, method, url, client, &ret); return ret;
    case BW_EP_METRICS: {
        bw_jobs_stats_t js;
        bw_timers_stats_t ts;
        bw_jobs_stats(proxy.jobs, &js);
        bw_timers_stats(bw_jobs_timers(proxy.jobs), &ts);
        bw_proxy_metrics_jobs(proxy.metrics, &js, &ts);
    } /* fall through */
    case BW_EP_HEALTHZ:
    case BW_EP_READYZ: bw_daemon_serve_ops(c, method, url, proxy.metrics, kafka_reachable, &ret); return ret;
    case BW_EP_COUNT: break;
    }
    return MHD_NO;
}

void bw_routes_on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    (void)cls;
    (void)c;
    (void)toe;
    bw_upload_t *up = *con_cls;
    if (up) {
        if (up->batch) atomic_fetch_sub(&proxy.batches_open, 1);
        bw_auth_release(up->auth);
        free(up->body);
        free(up);
        *con_cls = NULL;
    }
}
