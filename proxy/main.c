/* bw-proxy — the bulk write API, job receipts and the SREs' shard API.
 *
 * POST /v1/batches takes a BatchWriteRequest (protobuf or JSON), validates each op,
 * hands the valid ones to the batcher, produces one Kafka message per batch to the
 * shard's partition, and answers only once Kafka has acknowledged every message
 * (acks=all, idempotent producer): 202 when every valid op is durable, 503 naming the
 * ops Kafka did not take otherwise. Invalid ops are rejected one by one with reasons.
 *
 * Then it records the job (accepted ops per shard) in the jobs topic, so that any
 * proxy can answer GET /v1/jobs/{id} (jobs.c). GET /v1/shards and POST
 * /v1/shards/{n}/rate|pause|resume read and write the control topic (admin.c).
 *
 * With proxy.auth.clients_file, every endpoint but /healthz (and /metrics, /readyz with
 * proxy.auth.open_metrics) needs a client's bearer token, and the client's roles and
 * scopes decide what it may do (auth.c); an op outside the scopes is refused on its own.
 * With proxy.tls both listeners speak HTTPS, and a verified client certificate is a
 * credential too (tls.c). With proxy.admin_port, shard control is served on a listener
 * of its own (admin.c decides which listener serves what).
 *
 * Threads: libmicrohttpd runs one thread per connection (a request blocks until its
 * acknowledgements arrive); a pool of proxy.producers idempotent producers, a batch
 * partition always on the same one, each with a poller thread serving its delivery
 * reports (and flushing, when a batch request alone asks it to: send_now); tails of the jobs, control and status topics each have a thread. */
#include <arpa/inet.h>
#include <math.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/sha.h>

#include "admin.h"
#include "arena.h"
#include "auth.h"
#include "backlog.h"
#include "batcher.h"
#include "daemon.h"
#include "jobs.h"
#include "kafka.h"
#include "log.h"
#include "metrics.h"
#include "quota.h"
#include "request.h"
#include "shardtable.h"
#include "tls.h"

#define COMPONENT "proxy"

/* One producer of the pool. */
typedef struct {
    rd_kafka_t *rk;
    rd_kafka_topic_t *rkt[BW_LANES_MAX]; /* each lane's batches topic */
    pthread_t poller;
    rd_kafka_queue_t *reports; /* its delivery reports' queue: a yield on it wakes the poller */
    int linger_ms;             /* its linger.ms */
    atomic_int send_now;       /* set by a request alone in the proxy: send, do not linger */
} producer_t;

typedef struct {
    bw_config_t *conf;
    producer_t *producers;  /* [conf->proxy_producers + 1]: the batches' pool, then the
                               records': one record at a time, acks awaited at once, so
                               it never lingers (linger.ms 0: 5 ms less per request) */
    rd_kafka_t *rk;         /* the records' producer; also metadata and offset queries */
    struct MHD_Daemon *httpd;
    struct MHD_Daemon *admin_httpd; /* NULL: the admin API is on httpd */
    bw_tls_t *tls;                  /* NULL: plain HTTP */
    atomic_int run;         /* main loop */
    atomic_int run_poller;  /* delivery-report pollers: outlive the HTTP server */
    atomic_int batches_open; /* admitted POST /v1/batches, from their headers until answered (send_now) */
    bw_metrics_t *metrics;
    bw_jobs_t *jobs;
    bw_shard_table_t *shards;
    bw_backlog_t *backlog;
    bw_auth_t *auth;
    bw_quota_t *quota; /* per client budgets (quota.h) */
} proxy_t;

static proxy_t proxy;

/* ---- delivery tracking ------------------------------------------------------------ */

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

/* Serves the producer's delivery reports; asked to send now, it flushes for up to
 * linger.ms (librdkafka sends at once while a flush lasts, whoever's messages it holds;
 * later ones linger again). */
static void *poller_main(void *arg) {
    producer_t *pr = arg;
    while (atomic_load(&proxy.run_poller)) {
        if (atomic_exchange(&pr->send_now, 0)) {
            bw_metrics_linger_flush(proxy.metrics);
            rd_kafka_flush(pr->rk, pr->linger_ms);
        } else {
            rd_kafka_poll(pr->rk, 100);
        }
    }
    return NULL;
}

/* linger.ms holds a producer's batch open for other requests' messages to the same
 * partitions. A request alone in the proxy has nobody to wait for: its producers send
 * at once (a 5,000-op request over 8 shards waited 11 ms for its acknowledgements with
 * linger.ms 5, 6 ms without; docs/performance.md). With another batch request open,
 * even one still uploading its body, that request's messages may join the batch, and
 * lingering pays (4 and 16 clients lost a third of their rate with linger.ms 0). */
static void send_now(const uint8_t *used) {
    if (atomic_load(&proxy.batches_open) != 1) return;
    for (int i = 0; i < proxy.conf->proxy_producers; i++) {
        producer_t *pr = &proxy.producers[i];
        if (!used[i] || pr->linger_ms <= 0) continue;
        atomic_store(&pr->send_now, 1);
        rd_kafka_queue_yield(pr->reports); /* rd_kafka_yield would stop only this thread's poll */
    }
}

/* What becomes of each message of a request. */
typedef enum {
    MSG_PRODUCE,      /* admitted to its shard's backlog: produce it */
    MSG_TAKEN_BEFORE, /* an earlier attempt of the same request_id had it acknowledged */
    MSG_BACKLOG_FULL, /* its shard's backlog is full: 429, resend later */
} msg_fate_t;

static const size_t header_bytes = 3 * 8; /* bw-type, bw-op, bw-rows: names and values, roughly */

static size_t message_bytes(const bw_batch_msg_t *m) {
    return bw_backlog_message_bytes(m->len, 32, header_bytes + strlen(m->type_name));
}

/* Produces the messages of `set` marked MSG_PRODUCE, waits for all acknowledgements and
 * fills errs[] and offsets[]. Payload ownership passes to librdkafka on a successful
 * produce call. */
static void produce_all(bw_batch_set_t *set, int lane, const msg_fate_t *fate, const char *job_id,
                        rd_kafka_resp_err_t *errs, int64_t *offsets, bw_arena_t *arena) {
    bw_kafka_acks_t acks; /* the pollers serve the reports */
    bw_kafka_acks_init(&acks, proxy.rk, 0, proxy.conf->produce_timeout_ms, errs, offsets);
    delivery_t *ds = bw_arena_alloc(arena, (set->msg_cnt + 1) * sizeof(*ds));
    uint8_t used[64] = {0}; /* proxy.producers is at most 64 */
    for (size_t i = 0; i < set->msg_cnt; i++) {
        bw_batch_msg_t *m = &set->msgs[i];
        if (fate[i] != MSG_PRODUCE) continue;
        int slot = bw_config_slot(proxy.conf, lane, m->shard);
        ds[i] = (delivery_t){&acks, i, slot, message_bytes(m)};
        const char *headers[] = {"bw-type", m->type_name, "bw-op", m->op_header, "bw-rows", m->rows_header};
        const producer_t *pr = &proxy.producers[m->shard % proxy.conf->proxy_producers];
        bw_kafka_msg_t km = {.rk = pr->rk, .rkt = pr->rkt[lane], .partition = m->shard, .key = job_id, .key_len = strlen(job_id),
                             .value = m->payload, .value_len = m->len, .msgflags = RD_KAFKA_MSG_F_FREE,
                             .headers = headers, .header_cnt = 3};
        if (bw_kafka_acks_produce(&acks, &km, i, &ds[i]) == 0) {
            m->payload = NULL; /* librdkafka frees it */
            used[m->shard % proxy.conf->proxy_producers] = 1;
        } else {
            bw_backlog_settle(proxy.backlog, slot, ds[i].bytes, -1);
        }
    }
    send_now(used);
    bw_kafka_acks_wait(&acks);
    bw_batcher_free_payloads(set); /* those never handed over */
}

/* Decides each message's fate: parts an earlier attempt of this request_id got
 * acknowledged are not produced again; the others are admitted in order while their
 * shard's backlog has room. Once a shard refuses one, its later messages of the request
 * are refused too, so that a shard's ops keep their request order across resends.
 * reasons[i] is set for refused messages. */
static size_t admit_all(const bw_batch_set_t *set, int lane, const Bulkwrite__V1__JobRecord *prev, msg_fate_t *fate,
                        const char **reasons, bw_arena_t *arena) {
    int shards = proxy.conf->shard_count;
    const char **refused = bw_arena_alloc(arena, sizeof(*refused) * (size_t)shards);
    memset(refused, 0, sizeof(*refused) * (size_t)shards);
    uint8_t *taken = bw_arena_alloc(arena, set->msg_cnt + 1);
    memset(taken, 0, set->msg_cnt + 1);
    for (size_t k = 0; prev && k < prev->n_accepted_parts; k++)
        if (prev->accepted_parts[k] < set->msg_cnt) taken[prev->accepted_parts[k]] = 1;
    /* parts on a shard that lost some of the job's messages in Kafka are produced again:
     * the shard skips the parts it had applied and applies the lost ones */
    uint8_t *requeue = bw_arena_alloc(arena, (size_t)shards);
    memset(requeue, 0, (size_t)shards);
    for (size_t k = 0; prev && k < prev->n_shards; k++) {
        if (prev->shards[k]->shard >= (uint32_t)shards) continue;
        Bulkwrite__V1__ShardStatus *st = bw_shard_table_status(proxy.shards, (int)prev->shards[k]->shard);
        if (st && bw_jobs_lost_here(st, prev->lane, prev->shards[k])) requeue[prev->shards[k]->shard] = 1;
        if (st) bulkwrite__v1__shard_status__free_unpacked(st, NULL);
    }
    for (size_t i = 0; i < set->msg_cnt; i++)
        if (requeue[set->msgs[i].shard]) taken[i] = 0;
    size_t refused_ops = 0;
    int64_t deadline = bw_now_us() + (int64_t)proxy.conf->backlog_wait_ms * 1000; /* for the whole request */
    for (size_t i = 0; i < set->msg_cnt; i++) {
        const bw_batch_msg_t *m = &set->msgs[i];
        bw_backlog_view_t v;
        reasons[i] = NULL;
        if (taken[i]) {
            fate[i] = MSG_TAKEN_BEFORE;
            bw_metrics_parts_taken_before(proxy.metrics, 1);
        } else if (!refused[m->shard] && bw_backlog_admit(proxy.backlog, bw_config_slot(proxy.conf, lane, m->shard),
                                                          message_bytes(m), deadline, &v)) {
            fate[i] = MSG_PRODUCE;
        } else {
            if (!refused[m->shard]) {
                char text[320];
                int len = snprintf(text, sizeof(text),
                                   "not accepted now: shard %d's backlog is full%s%s (%lld messages, %.1f MiB not yet "
                                   "applied; bounds %lld messages, %.1f MiB); resend after Retry-After",
                                   m->shard, lane ? " in lane " : "", lane ? proxy.conf->lanes[lane].name : "",
                                   (long long)v.messages, (double)v.bytes / 1048576.0,
                                   (long long)v.max_messages, (double)v.max_bytes / 1048576.0);
                refused[m->shard] = bw_arena_strndup(arena, text, (size_t)len);
            }
            fate[i] = MSG_BACKLOG_FULL;
            reasons[i] = refused[m->shard];
            refused_ops += m->op_cnt;
            bw_metrics_backlog_refused(proxy.metrics, m->shard, m->op_cnt);
        }
    }
    return refused_ops;
}

/* Produces one record to a side topic and waits for its acknowledgement. */
/* Produces n records to topic and waits for all of them together; errs[i] (may be NULL)
 * gets each one's error. Returns the first error, 0 when Kafka acknowledged every one. */
static rd_kafka_resp_err_t produce_records(const char *topic, size_t n, const char *const *keys, const size_t *klens,
                                           void *const *vals, const size_t *vlens, rd_kafka_resp_err_t *errs) {
    bw_kafka_acks_t acks;
    bw_kafka_acks_init(&acks, proxy.rk, 0, proxy.conf->produce_timeout_ms, errs, NULL);
    delivery_t *dvs = calloc(n, sizeof(*dvs));
    for (size_t i = 0; i < n; i++) {
        dvs[i] = (delivery_t){&acks, i, -1, 0};
        bw_kafka_msg_t km = {.topic = topic, .partition = RD_KAFKA_PARTITION_UA, .key = keys[i], .key_len = klens[i],
                             .value = vals[i], .value_len = vlens[i], .msgflags = RD_KAFKA_MSG_F_COPY};
        bw_kafka_acks_produce(&acks, &km, i, &dvs[i]);
    }
    rd_kafka_resp_err_t e = bw_kafka_acks_wait(&acks);
    free(dvs);
    return e;
}

static rd_kafka_resp_err_t produce_record(const char *topic, const void *key, size_t klen, const void *val,
                                          size_t vlen) {
    const char *k = key;
    void *v = (void *)val;
    return produce_records(topic, 1, &k, &klen, &v, &vlen, NULL);
}

/* The job's earlier record when the request has a request_id (a resend) and this proxy
 * knows it already, else NULL: parts it lists are not produced again. Not knowing it
 * only costs duplicates, which the shards skip. */
static Bulkwrite__V1__JobRecord *previous_record(const Bulkwrite__V1__BatchWriteRequest *req, const char *job_id) {
    void *raw;
    size_t len;
    if (!req->request_id || !req->request_id[0] || bw_jobs_lookup(proxy.jobs, job_id, &raw, &len)) return NULL;
    Bulkwrite__V1__JobRecord *prev = bulkwrite__v1__job_record__unpack(NULL, len, raw);
    free(raw);
    return prev;
}

/* Writes the job's record: the ops Kafka took per shard, with their offsets, and the
 * parts taken, merged with the earlier record of a resent request (same request_id):
 * each attempt may take other parts (a full backlog, a timeout), so the record holds the
 * union of the parts taken by every attempt, and the ops they carry. The earlier record
 * is the one this proxy knows (its own writes at once, other proxies' as its tail reads
 * them): a resend that reaches another proxy within the tail's lag can leave the
 * receipt short of ops taken earlier, never the data. */
static void record_job(const Bulkwrite__V1__BatchWriteRequest *req, const char *job_id, const char *client,
                       const uint8_t *body_sha256, const bw_batch_set_t *set,
                       const msg_fate_t *fate, const rd_kafka_resp_err_t *errs, const int64_t *offsets,
                       bw_arena_t *arena) {
    int shard_count = proxy.conf->shard_count;
    Bulkwrite__V1__JobRecord *prev = NULL;
    void *raw;
    size_t raw_len;
    if (req->request_id && req->request_id[0] && bw_jobs_lookup(proxy.jobs, job_id, &raw, &raw_len) == 0) {
        prev = bulkwrite__v1__job_record__unpack(NULL, raw_len, raw);
        free(raw);
    }
    uint8_t *taken = bw_arena_alloc(arena, set->msg_cnt + 1);
    for (size_t i = 0; i < set->msg_cnt; i++) taken[i] = fate[i] == MSG_TAKEN_BEFORE || (fate[i] == MSG_PRODUCE && !errs[i]);
    for (size_t k = 0; prev && k < prev->n_accepted_parts; k++)
        if (prev->accepted_parts[k] < set->msg_cnt) taken[prev->accepted_parts[k]] = 1;
    Bulkwrite__V1__ShardOps *per_shard = bw_arena_alloc(arena, sizeof(*per_shard) * (size_t)shard_count);
    for (int s = 0; s < shard_count; s++) {
        bulkwrite__v1__shard_ops__init(&per_shard[s]);
        per_shard[s].shard = (uint32_t)s;
        per_shard[s].first_offset = -1;
    }
    uint32_t *parts = bw_arena_alloc(arena, sizeof(uint32_t) * (set->msg_cnt + 1));
    size_t n_parts = 0;
    for (size_t i = 0; i < set->msg_cnt; i++) {
        if (!taken[i]) continue;
        Bulkwrite__V1__ShardOps *so = &per_shard[set->msgs[i].shard];
        so->ops += (uint32_t)set->msgs[i].op_cnt;
        parts[n_parts++] = (uint32_t)i;
        if (fate[i] != MSG_PRODUCE || errs[i]) continue; /* offsets: from this attempt's acks */
        if (so->first_offset < 0 || offsets[i] < so->first_offset) so->first_offset = offsets[i];
        if (offsets[i] > so->last_offset) so->last_offset = offsets[i];
    }
    int64_t created = bw_wall_ms();
    for (size_t i = 0; prev && i < prev->n_shards; i++) {
        const Bulkwrite__V1__ShardOps *p = prev->shards[i];
        if (p->shard >= (uint32_t)shard_count) continue;
        Bulkwrite__V1__ShardOps *so = &per_shard[p->shard];
        if (p->ops > so->ops) so->ops = p->ops; /* a record from another split of the request */
        if (so->first_offset < 0 || p->first_offset < so->first_offset) so->first_offset = p->first_offset;
        if (p->last_offset > so->last_offset) so->last_offset = p->last_offset;
    }
    if (prev && prev->created_at_ms) created = prev->created_at_ms;
    if (prev) bulkwrite__v1__job_record__free_unpacked(prev, NULL);
    Bulkwrite__V1__ShardOps **sop = bw_arena_alloc(arena, sizeof(*sop) * ((size_t)shard_count + 1));
    size_t n = 0;
    uint32_t total = 0;
    for (int s = 0; s < shard_count; s++) {
        if (!per_shard[s].ops) continue;
        total += per_shard[s].ops;
        if (per_shard[s].first_offset < 0) per_shard[s].first_offset = 0; /* not known: an old record */
        sop[n++] = &per_shard[s];
    }
    Bulkwrite__V1__JobRecord rec = BULKWRITE__V1__JOB_RECORD__INIT;
    rec.job_id = (char *)job_id;
    rec.request_id = req->request_id ? req->request_id : "";
    rec.lane = req->lane && strcmp(req->lane, "default") ? req->lane : "";
    rec.created_at_ms = created;
    rec.ops = (uint32_t)req->n_ops;
    rec.rejected = total < req->n_ops ? (uint32_t)req->n_ops - total : 0;
    rec.shards = sop;
    rec.n_shards = n;
    rec.accepted_parts = parts;
    rec.n_accepted_parts = n_parts;
    rec.client = (char *)client;
    if (body_sha256) {
        rec.body_sha256.data = (uint8_t *)body_sha256;
        rec.body_sha256.len = SHA256_DIGEST_LENGTH;
    }
    size_t len = bulkwrite__v1__job_record__get_packed_size(&rec);
    uint8_t *buf = bw_arena_alloc(arena, len + 1);
    bulkwrite__v1__job_record__pack(&rec, buf);
    rd_kafka_resp_err_t err = produce_record(proxy.conf->jobs_topic, job_id, strlen(job_id), buf, len);
    /* the ops are durable all the same; only the receipt is missing */
    if (err)
        bw_log(BW_LOG_ERROR, COMPONENT, -1, job_id, "job record not written to %s (%s): GET /v1/jobs/%s will not find it",
               proxy.conf->jobs_topic, rd_kafka_err2str(err), job_id);
    else bw_jobs_put(proxy.jobs, job_id, buf, len); /* a resend to this proxy sees it before the tail does */
}

/* ---- HTTP --------------------------------------------------------------------------- */

/* A POST's state, from its headers to its reply. @locality the connection's thread */
typedef struct {
    char *body;
    size_t len, cap;
    int too_large;
    bw_auth_set_t *auth;            /* a reference to the clients it was admitted with; NULL: open */
    const bw_auth_client_t *client; /* the caller (in auth), NULL when open */
    unsigned refused;               /* 401 or 403: the body is read and dropped, then refused */
    int batch;                      /* an admitted POST /v1/batches: counted in proxy.batches_open */
    char why[320];
} upload_t;

static int rejection_cmp(const void *a, const void *b) {
    uint32_t x = ((const bw_rejection_t *)a)->index, y = ((const bw_rejection_t *)b)->index;
    return x < y ? -1 : x > y;
}

static enum MHD_Result reply_error_with(struct MHD_Connection *c, unsigned status, const char *header,
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
    bw_metrics_count_status(proxy.metrics, status);
    return bw_daemon_reply_with(c, status, "application/json", b.data, b.len, 1, header, value);
}

static enum MHD_Result reply_error(struct MHD_Connection *c, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static enum MHD_Result reply_error(struct MHD_Connection *c, unsigned status, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return reply_error_with(c, status, NULL, NULL, msg);
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
    if (st == 403) bw_metrics_client_refused(proxy.metrics, (*client)->name, 1, 0);
    return st;
}

/* The 401 or 403 of authorize(). */
static enum MHD_Result refuse(struct MHD_Connection *c, unsigned status, const char *why) {
    if (status == MHD_HTTP_UNAUTHORIZED) {
        /* RFC 6750: a token presented and refused (unknown or expired) is invalid_token */
        int bad_token = strcmp(why, "unknown token") == 0 || strncmp(why, "the token expired", 17) == 0;
        return reply_error_with(c, status, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                                bad_token ? "Bearer realm=\"bulkwrite\", error=\"invalid_token\""
                                          : "Bearer realm=\"bulkwrite\"",
                                why);
    }
    return reply_error_with(c, status, NULL, NULL, why);
}

static enum MHD_Result handle_batch(struct MHD_Connection *c, upload_t *up) {
    int64_t started = bw_now_us();
    const char *ctype = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    bw_format_t fmt;
    if (ctype && strncmp(ctype, "application/x-protobuf", 22) == 0) fmt = BW_FMT_PROTOBUF;
    else if (ctype && strncmp(ctype, "application/json", 16) == 0) fmt = BW_FMT_JSON;
    else
        return reply_error(c, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE,
                           "Content-Type must be application/x-protobuf or application/json, not %s",
                           ctype ? ctype : "(none)");
    if (up->too_large)
        return reply_error(c, MHD_HTTP_CONTENT_TOO_LARGE, "request body over proxy.max_body_bytes (%d bytes)",
                           proxy.conf->max_body_bytes);

    bw_arena_t arena;
    bw_arena_init(&arena, 1 << 16);
    char err[512];
    enum MHD_Result ret;
    int too_many, in_flight = 0;
    Bulkwrite__V1__BatchWriteRequest *req = bw_request_decode_bounded(
        fmt, up->body ? up->body : "", up->len, (size_t)proxy.conf->max_ops, &arena, err, sizeof(err), &too_many);
    if (!req) {
        ret = reply_error(c, too_many ? MHD_HTTP_CONTENT_TOO_LARGE : MHD_HTTP_BAD_REQUEST, "%s", err);
        goto done;
    }
    if (req->n_ops == 0) {
        ret = reply_error(c, MHD_HTTP_BAD_REQUEST, "the request has no ops");
        goto done;
    }
    /* the lane, before the request costs anything (quota, records) */
    int lane = bw_config_lane(proxy.conf, req->lane);
    if (lane < 0) {
        char names[BW_LANES_MAX * 36] = "";
        for (int l = 0; l < proxy.conf->lane_cnt; l++)
            snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s", l ? ", " : "", proxy.conf->lanes[l].name);
        /* echoed only if it looks like a lane name: the reply is JSON, the value any bytes */
        size_t len = strlen(req->lane);
        int plain = len <= 64 && strspn(req->lane, "abcdefghijklmnopqrstuvwxyz0123456789_-") == len;
        ret = reply_error(c, MHD_HTTP_BAD_REQUEST, "unknown lane %s%s%s (the configured lanes: %s)", plain ? "\"" : "",
                          plain ? req->lane : "(not a lane name)", plain ? "\"" : "", names);
        goto done;
    }
    if (!bw_auth_allows_lane(up->client, lane)) {
        char lanes[BW_LANES_MAX * 36];
        bw_auth_lanes_text(up->client, proxy.conf, lanes, sizeof(lanes));
        bw_metrics_client_refused(proxy.metrics, up->client->name, 1, 0);
        ret = reply_error(c, MHD_HTTP_FORBIDDEN, "forbidden: client \"%s\" may not use lane \"%s\" (its lanes: %s)",
                          up->client->name, proxy.conf->lanes[lane].name, lanes);
        goto done;
    }
    /* the client's quotas, before any work for Kafka: over one, the request is refused whole */
    if (up->client) {
        bw_quota_kind_t kind;
        int retry_after_s;
        if (bw_quota_admit(proxy.quota, up->client->name, &up->client->quota, (double)req->n_ops, (double)up->len,
                           bw_now_us(), &kind, &retry_after_s, err, sizeof(err))) {
            bw_metrics_client_over_quota(proxy.metrics, up->client->name, kind);
            char retry_after[16];
            snprintf(retry_after, sizeof(retry_after), "%d", retry_after_s);
            ret = reply_error_with(c, MHD_HTTP_TOO_MANY_REQUESTS, MHD_HTTP_HEADER_RETRY_AFTER, retry_after, err);
            goto done;
        }
        in_flight = 1;
    }

    char job_id[33];
    const char *secret = proxy.conf->proxy_auth_job_id_secret;
    if (bw_request_job_id(req, up->client ? up->client->name : NULL, secret, strlen(secret), job_id, err,
                          sizeof(err))) {
        ret = reply_error(c, MHD_HTTP_BAD_REQUEST, "%s", err);
        goto done;
    }
    /* a request_id names one request: a resend must be the same body */
    uint8_t body_sha256[SHA256_DIGEST_LENGTH];
    int has_rid = req->request_id && req->request_id[0];
    if (has_rid) SHA256((const unsigned char *)(up->body ? up->body : ""), up->len, body_sha256);
    Bulkwrite__V1__JobRecord *prev = previous_record(req, job_id);
    if (prev && prev->body_sha256.len == sizeof(body_sha256) &&
        memcmp(prev->body_sha256.data, body_sha256, sizeof(body_sha256))) {
        char when[32];
        time_t secs = (time_t)(prev->created_at_ms / 1000);
        struct tm tm;
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&secs, &tm));
        bulkwrite__v1__job_record__free_unpacked(prev, NULL);
        ret = reply_error(c, MHD_HTTP_CONFLICT,
                          "request_id \"%s\" was used at %s for a different body (job %s); a resend must be "
                          "byte for byte the same request, and a new request needs a new request_id",
                          req->request_id, when, job_id);
        goto done;
    }
    bw_op_route_t *routes = bw_arena_alloc(&arena, req->n_ops * sizeof(*routes));
    bw_rejection_t *rejected;
    size_t rejected_cnt = bw_request_validate(proxy.conf, req, fmt, &arena, routes, &rejected);
    size_t scope_cnt = bw_auth_refuse_ops(up->client, req, routes, &rejected, &rejected_cnt, &arena);
    if (scope_cnt) bw_metrics_client_refused(proxy.metrics, up->client->name, 0, scope_cnt);

    bw_batch_set_t set;
    uint32_t *too_large;
    size_t too_large_cnt;
    bw_batcher_split(proxy.conf, req, routes, job_id, bw_wall_ms(), &arena, &set, &too_large,
                     &too_large_cnt);
    size_t cnt = set.msg_cnt + 1;
    rd_kafka_resp_err_t *errs = bw_arena_alloc(&arena, cnt * sizeof(*errs));
    int64_t *offsets = bw_arena_alloc(&arena, cnt * sizeof(*offsets));
    msg_fate_t *fate = bw_arena_alloc(&arena, cnt * sizeof(*fate));
    const char **full = bw_arena_alloc(&arena, cnt * sizeof(*full));
    memset(errs, 0, cnt * sizeof(*errs));
    memset(offsets, 0, cnt * sizeof(*offsets));
    size_t backlog_ops = admit_all(&set, lane, prev, fate, full, &arena);
    if (set.msg_cnt) produce_all(&set, lane, fate, job_id, errs, offsets, &arena);

    /* every reason in one list, in request order */
    size_t failed_ops = 0;
    for (size_t i = 0; i < set.msg_cnt; i++)
        if (errs[i]) failed_ops += set.msgs[i].op_cnt;
    size_t total = rejected_cnt + too_large_cnt + failed_ops + backlog_ops;
    bw_rejection_t *all = bw_arena_alloc(&arena, (total + 1) * sizeof(*all));
    if (rejected_cnt) memcpy(all, rejected, rejected_cnt * sizeof(*all));
    size_t n = rejected_cnt;
    for (size_t i = 0; i < too_large_cnt; i++) {
        all[n].index = too_large[i];
        all[n].retryable = 0;
        all[n++].reason = bw_arena_strndup(&arena, err,
            (size_t)snprintf(err, sizeof(err), "op too large for one Kafka message (kafka.message_max_bytes %d)",
                             proxy.conf->message_max_bytes));
    }
    for (size_t i = 0; i < set.msg_cnt; i++) {
        const char *reason = full[i];
        if (errs[i]) {
            int len = snprintf(err, sizeof(err), "not accepted: Kafka did not acknowledge it (%s); after a "
                               "timeout it may still have been stored", rd_kafka_err2str(errs[i]));
            reason = bw_arena_strndup(&arena, err, (size_t)len);
            bw_log(BW_LOG_ERROR, COMPONENT, set.msgs[i].shard, job_id, "kafka produce failed: %s",
                   rd_kafka_err2str(errs[i]));
        }
        if (!reason) continue;
        for (size_t k = 0; k < set.msgs[i].op_cnt; k++)
            all[n++] = (bw_rejection_t){set.msgs[i].ops[k], reason, fate[i] == MSG_BACKLOG_FULL};
    }
    /* by op index, so clients read it in request order (an op appears at most once) */
    qsort(all, n, sizeof(*all), rejection_cmp);
    uint32_t accepted = (uint32_t)(req->n_ops - n);
    if (accepted)
        record_job(req, job_id, up->client ? up->client->name : "", has_rid ? body_sha256 : NULL, &set, fate, errs,
                   offsets, &arena);
    if (prev) bulkwrite__v1__job_record__free_unpacked(prev, NULL);
    /* 503: Kafka failed us (resend soon); 429: a shard is full (resend after Retry-After);
     * 403: every op was outside the client's scopes */
    unsigned status = failed_ops                ? MHD_HTTP_SERVICE_UNAVAILABLE
                      : backlog_ops            ? MHD_HTTP_TOO_MANY_REQUESTS
                      : accepted               ? MHD_HTTP_ACCEPTED
                      : scope_cnt == req->n_ops ? MHD_HTTP_FORBIDDEN
                                               : MHD_HTTP_UNPROCESSABLE_CONTENT;
    if (up->client) bw_metrics_client_accepted(proxy.metrics, up->client->name, accepted, up->len);
    char *body;
    size_t body_len;
    bw_response_encode(fmt, job_id, accepted, all, n, &body, &body_len);
    bw_metrics_count_request(proxy.metrics, status, accepted, n - failed_ops - backlog_ops, failed_ops,
                             set.msg_cnt, bw_now_us() - started);
    bw_log(BW_LOG_DEBUG, COMPONENT, -1, job_id, "%zu ops: %u accepted in %zu messages, %zu rejected, %zu for a full backlog",
           req->n_ops, accepted, set.msg_cnt, n, backlog_ops);
    char retry_after[16];
    snprintf(retry_after, sizeof(retry_after), "%d", proxy.conf->backlog_retry_after_s);
    ret = bw_daemon_reply_with(c, status, fmt == BW_FMT_JSON ? "application/json" : "application/x-protobuf", body,
                               body_len, 1, backlog_ops ? MHD_HTTP_HEADER_RETRY_AFTER : NULL, retry_after);
done:
    if (in_flight) bw_quota_done(proxy.quota, up->client->name);
    bw_arena_destroy(&arena);
    return ret;
}

/* GET /v1/jobs/{id}: JSON, or protobuf (JobStatus) when the client accepts it. A client
 * without the admin role reads only its own jobs; another's is "no job", as if it did not
 * exist. Others than admins see errors scrubbed (scrub.h). */
static enum MHD_Result handle_job(struct MHD_Connection *c, const char *id, const bw_auth_client_t *client) {
    int admin = !client || (client->roles & BW_ROLE_ADMIN);
    if (strlen(id) != 32 || strspn(id, "0123456789abcdef") != 32)
        return reply_error(c, MHD_HTTP_BAD_REQUEST, "a job id is 32 lower-case hex digits, not \"%.64s\"", id);
    void *raw;
    size_t raw_len;
    if (bw_jobs_record(proxy.jobs, id, &raw, &raw_len))
        return reply_error(c, MHD_HTTP_NOT_FOUND, "no job %s (jobs are kept as long as %s keeps them)", id,
                           proxy.conf->jobs_topic);
    Bulkwrite__V1__JobRecord *rec = bulkwrite__v1__job_record__unpack(NULL, raw_len, raw);
    free(raw);
    if (!rec) return reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "job %s: unreadable record", id);
    if (client && !(client->roles & BW_ROLE_ADMIN) && strcmp(rec->client, client->name)) {
        bulkwrite__v1__job_record__free_unpacked(rec, NULL);
        return reply_error(c, MHD_HTTP_NOT_FOUND, "no job %s (jobs are kept as long as %s keeps them)", id,
                           proxy.conf->jobs_topic);
    }
    Bulkwrite__V1__JobStatus st;
    char *record_id = rec->job_id; /* freed with the record */
    bw_jobs_status(proxy.conf, rec, id, proxy.shards, admin, &st);
    rec->job_id = record_id;
    bulkwrite__v1__job_record__free_unpacked(rec, NULL);
    const char *accept = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);
    enum MHD_Result ret;
    if (accept && strstr(accept, "application/x-protobuf")) {
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

/* POST /v1/shards/{n}/rate|pause|resume: a new control record for the shard, acknowledged
 * by Kafka before the reply. */
/* POST /v1/shards/{n}/ACTION and /v1/servers/{name}/ACTION: the change to each shard's
 * record, produced together, then the shard's setting (or the server's shards'). */
static enum MHD_Result handle_control(struct MHD_Connection *c, const char *url, upload_t *up) {
    char err[512];
    bw_admin_target_t t;
    if (bw_admin_parse_url(proxy.conf, url, &t, err, sizeof(err))) return reply_error(c, MHD_HTTP_NOT_FOUND, "%s", err);
    if (up->too_large) return reply_error(c, MHD_HTTP_CONTENT_TOO_LARGE, "body too large");
    size_t n = (size_t)(t.last_shard - t.first_shard + 1);
    bw_shard_setting_t *sets = calloc(n, sizeof(*sets));
    void **recs = calloc(n, sizeof(*recs));
    size_t *rec_lens = calloc(n, sizeof(*rec_lens)), *key_lens = calloc(n, sizeof(*key_lens));
    char (*keys)[24] = calloc(n, sizeof(*keys));
    const char **key_ptrs = calloc(n, sizeof(*key_ptrs));
    rd_kafka_resp_err_t *errs = calloc(n, sizeof(*errs));
    char from[INET6_ADDRSTRLEN];
    caller_address(c, from, sizeof(from));
    bw_admin_caller_t caller = {up->client ? up->client->name : "(open)", from, t.server};
    /* read-modify-write of the shards' records: one change at a time in this proxy (two
     * proxies changing one shard at once can still race; the last write wins) */
    static pthread_mutex_t control_mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&control_mu);
    bw_shard_table_sync(proxy.shards, 2000); /* start from the latest settings */
    int bad = 0;
    for (size_t i = 0; i < n && !bad; i++) {
        int shard = t.first_shard + (int)i;
        Bulkwrite__V1__ShardControl *prev = bw_shard_table_control(proxy.shards, shard);
        if (prev) bw_shard_setting_from_record(prev, &sets[i]);
        bad = bw_admin_control_update(shard, t.action, up->body ? up->body : "", up->len, prev, &caller, &sets[i],
                                      &recs[i], &rec_lens[i], err, sizeof(err));
        if (prev) bulkwrite__v1__shard_control__free_unpacked(prev, NULL);
        key_lens[i] = (size_t)bw_shard_key(shard, keys[i]);
        key_ptrs[i] = keys[i];
    }
    rd_kafka_resp_err_t e = 0;
    if (!bad) {
        e = produce_records(proxy.conf->control_topic, n, key_ptrs, key_lens, recs, rec_lens, errs);
        bw_shard_table_sync(proxy.shards, 2000); /* the next change starts from this one */
    }
    pthread_mutex_unlock(&control_mu);
    size_t stored = 0;
    for (size_t i = 0; i < n; i++) {
        stored += !bad && !errs[i];
        free(recs[i]);
    }
    enum MHD_Result ret;
    char setting[160];
    bw_admin_setting_text(&sets[0], setting, sizeof(setting));
    if (bad) {
        ret = reply_error(c, MHD_HTTP_BAD_REQUEST, "%s", err);
    } else if (e) {
        /* the records are independent: say how many shards took the change (retrying is safe) */
        ret = reply_error(c, MHD_HTTP_SERVICE_UNAVAILABLE,
                          "the change was stored for %zu of %zu shards: Kafka did not acknowledge the rest (%s); "
                          "send it again", stored, n, rd_kafka_err2str(e));
    } else if (!t.server) {
        bw_log(BW_LOG_INFO, COMPONENT, t.first_shard, NULL, "operator: %s by %s from %s, now %s%s%s", t.action,
               caller.by, from, setting, sets[0].reason[0] ? ": " : "", sets[0].reason);
        char *body = bw_admin_setting_json(proxy.conf, t.first_shard, &sets[0]);
        ret = bw_daemon_reply(c, MHD_HTTP_OK, "application/json", body, strlen(body), 1);
    } else {
        bw_log(BW_LOG_INFO, COMPONENT, -1, NULL, "operator: %s of server %s (shards %d to %d) by %s from %s, shard %d "
               "now %s: %s", t.action, t.server, t.first_shard, t.last_shard, caller.by, from, t.first_shard, setting,
               sets[0].reason);
        char *body = bw_admin_server_json(proxy.conf, &t, sets);
        ret = bw_daemon_reply(c, MHD_HTTP_OK, "application/json", body, strlen(body), 1);
    }
    free(sets);
    free(recs);
    free(rec_lens);
    free(key_lens);
    free(keys);
    free(key_ptrs);
    free(errs);
    return ret;
}

/* /readyz: ready while a broker answers a metadata request. @locality an HTTP thread */
static int kafka_reachable(void) {
    const struct rd_kafka_metadata *md;
    if (rd_kafka_metadata(proxy.rk, 0, proxy.producers[proxy.conf->proxy_producers].rkt[0], &md, 2000) != RD_KAFKA_RESP_ERR_NO_ERROR) return 0;
    rd_kafka_metadata_destroy(md);
    return 1;
}

static enum MHD_Result serve_get(struct MHD_Connection *c, const char *method, const char *url,
                                 const bw_auth_client_t *client);

/* cls: the bw_listener_t of the listener */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *data,
                                  size_t *data_size, void **con_cls) {
    (void)version;
    bw_listener_t on = *(const bw_listener_t *)cls;
    if (strcmp(method, "POST") == 0) {
        upload_t *up = *con_cls;
        if (!up) { /* the headers: who is calling decides whether the body is kept */
            *con_cls = up = calloc(1, sizeof(*up));
            if (!up) return MHD_NO;
            up->refused = authorize(c, on, method, url, &up->auth, &up->client, up->why, sizeof(up->why));
            /* a refused caller holding a POST open must not keep the others' batches lingering */
            if (!up->refused && strcmp(url, "/v1/batches") == 0) {
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
        if (up->refused) return refuse(c, up->refused, up->why);
        if (strcmp(url, "/v1/batches") == 0) return handle_batch(c, up);
        if (bw_admin_is_control(method, url)) return handle_control(c, url, up);
    } else {
        bw_auth_set_t *set;
        const bw_auth_client_t *client;
        char why[320];
        unsigned st = authorize(c, on, method, url, &set, &client, why, sizeof(why));
        enum MHD_Result ret = st ? refuse(c, st, why) : serve_get(c, method, url, client);
        bw_auth_release(set);
        return ret;
    }
    return serve_get(c, method, url, NULL);
}

/* Every endpoint but the POSTs handled above; client (NULL when open) is authorized. */
static enum MHD_Result serve_get(struct MHD_Connection *c, const char *method, const char *url,
                                 const bw_auth_client_t *client) {
    enum MHD_Result ret;
    if (strcmp(url, "/metrics") == 0) {
        bw_jobs_stats_t js;
        bw_jobs_stats(proxy.jobs, &js);
        bw_metrics_jobs_index(proxy.metrics, js.entries, js.bytes, js.max_bytes, js.evicted, js.found_in_topic);
    }
    if (bw_daemon_serve_ops(c, method, url, proxy.metrics, kafka_reachable, &ret)) return ret;
    int admin = !client || (client->roles & BW_ROLE_ADMIN); /* others see errors scrubbed (scrub.h) */
    if (strcmp(method, "GET") == 0 && strncmp(url, "/v1/jobs/", 9) == 0) return handle_job(c, url + 9, client);
    if (strcmp(method, "GET") == 0 && strcmp(url, "/v1/shards") == 0) {
        char *body = bw_admin_shards_json(proxy.conf, proxy.shards, proxy.backlog, admin);
        return bw_daemon_reply(c, MHD_HTTP_OK, "application/json", body, strlen(body), 1);
    }
    if (strcmp(method, "GET") == 0 && strncmp(url, "/v1/check/", 10) == 0) { /* any client: am I throttled, and why */
        char *end;
        long shard = strtol(url + 10, &end, 10);
        if (end == url + 10 || *end || shard < 0 || shard >= proxy.conf->shard_count)
            return reply_error(c, MHD_HTTP_NOT_FOUND, "expected /v1/check/{shard}, a shard from 0 to %d",
                               proxy.conf->shard_count - 1);
        char *body = bw_admin_check_json(proxy.conf, proxy.shards, (int)shard, admin);
        return bw_daemon_reply(c, MHD_HTTP_OK, "application/json", body, strlen(body), 1);
    }
    if (strcmp(url, "/v1/batches") == 0 || strncmp(url, "/v1/shards/", 11) == 0 || strncmp(url, "/v1/servers/", 12) == 0)
        return reply_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "use POST for %s", url);
    if (strncmp(url, "/v1/jobs/", 9) == 0 || strcmp(url, "/v1/shards") == 0)
        return reply_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "use GET for %s", url);
    return reply_error(c, MHD_HTTP_NOT_FOUND, "no such endpoint: %s %s", method, url);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    (void)cls;
    (void)c;
    (void)toe;
    upload_t *up = *con_cls;
    if (up) {
        if (up->batch) atomic_fetch_sub(&proxy.batches_open, 1);
        bw_auth_release(up->auth);
        free(up->body);
        free(up);
        *con_cls = NULL;
    }
}

/* ---- main --------------------------------------------------------------------------- */

int main(int argc, char **argv) {
    bw_daemon_t d = {.name = "bw-proxy", .port_help = "HTTP port (overrides proxy.port)", .process = BW_PROC_PROXY};
    int exit_code;
    if (!(proxy.conf = bw_daemon_init(&d, argc, argv, &exit_code))) return exit_code;
    if (d.port >= 0) proxy.conf->proxy_port = d.port;
    char err[512];
    /* who may call: before any connection, so a bad clients file stops startup at once */
    proxy.quota = bw_quota_new();
    if (!(proxy.auth = bw_auth_start(proxy.conf, err, sizeof(err)))) {
        bw_error(COMPONENT, "proxy.auth.clients_file: %s", err);
        return 1;
    }
    if (proxy.conf->proxy_auth_clients_file[0] && !proxy.conf->proxy_auth_job_id_secret[0])
        bw_log(BW_LOG_WARN, COMPONENT, -1, NULL, "proxy.auth.job_id_secret is empty: anyone who knows a client's "
               "name and request_id can compute its job id (docs/security.md)");
    if (bw_tls_load(proxy.conf, &proxy.tls, err, sizeof(err))) {
        bw_error(COMPONENT, "%s", err);
        bw_auth_stop(proxy.auth);
        return 1;
    }
    int nprod = proxy.conf->proxy_producers + 1;
    proxy.producers = calloc((size_t)nprod, sizeof(*proxy.producers));
    for (int i = 0; i < nprod; i++) {
        rd_kafka_conf_t *kc = bw_kafka_conf(proxy.conf, BW_KAFKA_PRODUCER, d.brokers, err, sizeof(err));
        if (!kc || (i == nprod - 1 && rd_kafka_conf_set(kc, "linger.ms", "0", err, sizeof(err)))) {
            bw_error(COMPONENT, "%s", err);
            return 1;
        }
        rd_kafka_conf_set_dr_msg_cb(kc, on_delivery);
        char linger[32];
        size_t linger_len = sizeof(linger);
        if (rd_kafka_conf_get(kc, "linger.ms", linger, &linger_len) == RD_KAFKA_CONF_OK)
            proxy.producers[i].linger_ms = (int)ceil(strtod(linger, NULL)); /* 0.5 ms: a 1 ms flush */
        if (!(proxy.producers[i].rk = rd_kafka_new(RD_KAFKA_PRODUCER, kc, err, sizeof(err)))) {
            bw_error(COMPONENT, "kafka producer: %s", err);
            return 1;
        }
        proxy.producers[i].reports = rd_kafka_queue_get_main(proxy.producers[i].rk);
    }
    proxy.rk = proxy.producers[nprod - 1].rk;
    bw_topic_retention_t retention;
    if (bw_kafka_ensure_topic(proxy.rk, proxy.conf, 10000, &retention, err, sizeof(err)) != BW_OK) {
        bw_error(COMPONENT, "%s", err);
        for (int i = 0; i < nprod; i++) {
            rd_kafka_queue_destroy(proxy.producers[i].reports);
            rd_kafka_destroy(proxy.producers[i].rk);
        }
        return 1;
    }
    if (bw_kafka_ensure_side_topic(proxy.rk, proxy.conf, proxy.conf->jobs_topic, BW_TOPIC_EXPIRING, 10000, err, sizeof(err)) ||
        bw_kafka_ensure_side_topic(proxy.rk, proxy.conf, proxy.conf->control_topic, BW_TOPIC_TABLE, 10000, err, sizeof(err)) ||
        bw_kafka_ensure_side_topic(proxy.rk, proxy.conf, proxy.conf->status_topic, BW_TOPIC_TABLE, 10000, err, sizeof(err)) ||
        !(proxy.jobs = bw_jobs_start(proxy.conf, d.brokers, err, sizeof(err))) ||
        !(proxy.backlog = bw_backlog_new(proxy.conf, proxy.rk, retention.embedded)) ||
        !(proxy.shards = bw_shard_table_start(proxy.conf, d.brokers, &(bw_status_hook_t){bw_backlog_on_status, proxy.backlog},
                                              err, sizeof(err)))) {
        bw_error(COMPONENT, "jobs, control and status topics: %s", err);
        return 1;
    }
    proxy.metrics = bw_metrics_new(proxy.conf, BW_METRICS_PROXY);
    atomic_store(&proxy.run, 1);
    atomic_store(&proxy.run_poller, 1);
    for (int i = 0; i < nprod; i++) {
        producer_t *pr = &proxy.producers[i];
        for (int lane = 0; lane < proxy.conf->lane_cnt; lane++) {
            pr->rkt[lane] = rd_kafka_topic_new(pr->rk, proxy.conf->lanes[lane].topic, NULL);
            /* each producer learns the partitions' leaders now, not on a client's first
             * request (which then waited for the metadata); its partitions exist before
             * any HTTP thread produces to them */
            const struct rd_kafka_metadata *md;
            rd_kafka_resp_err_t e = rd_kafka_metadata(pr->rk, 0, pr->rkt[lane], &md, 10000);
            if (e) bw_log(BW_LOG_WARN, COMPONENT, -1, NULL, "producer %d: metadata of %s: %s (learnt on first use)", i,
                          proxy.conf->lanes[lane].topic, rd_kafka_err2str(e));
            else rd_kafka_metadata_destroy(md);
        }
        pthread_create(&pr->poller, NULL, poller_main, pr);
    }

    /* one thread per connection: a request's thread waits for its acknowledgements; both
     * listeners have the same TLS and bounds (each its own connections) */
    static const bw_listener_t listeners[] = {BW_LISTENER_ONLY, BW_LISTENER_DATA, BW_LISTENER_ADMIN};
    int split = proxy.conf->proxy_admin_port != 0, bound, admin_bound = 0;
    bw_listen_limits_t limits = {(unsigned)proxy.conf->proxy_max_connections,
                                 (unsigned)proxy.conf->proxy_max_connections_per_ip,
                                 (unsigned)proxy.conf->proxy_connection_timeout_s};
    const bw_listen_tls_t *tls = proxy.tls ? &proxy.tls->listen : NULL;
    const char *scheme = tls ? "https" : "http";
    proxy.httpd = bw_daemon_listen(&d, proxy.conf->proxy_listen_address, proxy.conf->proxy_port,
                                   MHD_USE_THREAD_PER_CONNECTION, on_request,
                                   (void *)&listeners[split ? BW_LISTENER_DATA : BW_LISTENER_ONLY],
                                   on_completed, &limits, tls, &bound);
    if (!proxy.httpd) return 1;
    if (split) {
        bw_daemon_t admin_d = d;
        admin_d.port_file = NULL; /* --port-file names the data port */
        proxy.admin_httpd = bw_daemon_listen(&admin_d, proxy.conf->proxy_admin_listen_address,
                                             proxy.conf->proxy_admin_port, MHD_USE_THREAD_PER_CONNECTION, on_request,
                                             (void *)&listeners[BW_LISTENER_ADMIN], on_completed, &limits, tls,
                                             &admin_bound);
        if (!proxy.admin_httpd) return 1;
    }
    bw_info(COMPONENT, "listening on %s://%s:%d%s, topic %s, %d shards", scheme, proxy.conf->proxy_listen_address,
            bound, split ? "" : " (the admin API too)", proxy.conf->topic, proxy.conf->shard_count);
    if (split)
        bw_info(COMPONENT, "admin API on %s://%s:%d", scheme, proxy.conf->proxy_admin_listen_address, admin_bound);
    if (proxy.tls)
        bw_info(COMPONENT, "TLS: client certificates %s", !proxy.tls->ca_pem ? "not asked for"
                                                          : proxy.tls->require_client_cert ? "required"
                                                                                           : "verified when presented");
    atomic_int reload = 0;
    bw_daemon_handle_signals(&proxy.run, &reload);
    while (atomic_load(&proxy.run)) {
        usleep(100000);
        /* SIGHUP: the keys the table applies for the proxy, and the clients file */
        if (atomic_exchange(&reload, 0)) {
            bw_daemon_reload(&d, proxy.conf);
            bw_auth_reload(proxy.auth, proxy.conf); /* the file the running config names */
        }
    }

    bw_info(COMPONENT, "shutting down: finishing requests in flight");
    MHD_stop_daemon(proxy.httpd); /* the pollers still serve acks while requests finish */
    if (proxy.admin_httpd) MHD_stop_daemon(proxy.admin_httpd);
    atomic_store(&proxy.run_poller, 0);
    for (int i = 0; i < nprod; i++) pthread_join(proxy.producers[i].poller, NULL);
    bw_jobs_stop(proxy.jobs);
    bw_shard_table_stop(proxy.shards);
    bw_backlog_destroy(proxy.backlog);
    for (int i = 0; i < nprod; i++) {
        rd_kafka_flush(proxy.producers[i].rk, 10000);
        rd_kafka_queue_destroy(proxy.producers[i].reports);
        for (int lane = 0; lane < proxy.conf->lane_cnt; lane++)
            if (proxy.producers[i].rkt[lane]) rd_kafka_topic_destroy(proxy.producers[i].rkt[lane]);
        rd_kafka_destroy(proxy.producers[i].rk);
    }
    free(proxy.producers);
    bw_auth_stop(proxy.auth);
    bw_quota_free(proxy.quota);
    bw_tls_free(proxy.tls);
    bw_metrics_destroy(proxy.metrics);
    bw_config_destroy(proxy.conf);
    return 0;
}
