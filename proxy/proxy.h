/* proxy.h — the world of bw-proxy: the one proxy state that main.c, submit.c,
 * producers.c and routes.c share (as consumer/consumer.h is the consumer's). Not used
 * outside proxy/.
 *
 * The files, in reading order:
 *   main.c       startup, the loop (signals, SIGHUP), shutdown
 *   endpoints.c  the HTTP surface as one table: each endpoint's method, path, roles,
 *                listeners and docs line (auth, the listener check, dispatch and 405s read it)
 *   routes.c     HTTP: who is calling (authorize), the endpoint's handler by its row, error
 *                replies; GET /v1/jobs/{id}, the shard control POSTs, /readyz
 *   submit.c     POST /v1/batches: decode → validate → admit → batch → produce → record → reply
 *   connect.c    bulkwrite.v1.BulkwriteService's calls in the Connect protocol: the same
 *                handlers, their replies answered as messages or Connect errors
 *   producers.c  the producer pool, its pollers and delivery reports, send-at-once
 *   request.c    a decoded request (codec/request_decode.h) validated op by op against the
 *                configuration, its job id, the reply; batcher/ splits it
 *   timers.c     the delay queue: the records that hold batches, in two heaps by due time
 *   release.c    scheduled and dependent batches: held in their job's record, released when due
 *   ui.c         the SRE page: its files at /ui/, and GET /v1/whoami, /v1/fleet, /v1/jobs
 *   jobs.c       the jobs topic read into an index: receipts, named jobs, held records
 *   job_status.c what the shards made of a job: its status, its failures
 *   changes.c    every write to the control topic, one way (lock, read, build, produce, read back)
 *   proxy_metrics.c  the proxy's metric families, one row each (common/metrics.h renders them)
 *   history.c    each shard's last hour from its consumers' status: points, rows/s, alerts
 *   reply.c      the page's JSON replies: gzip, ETag and 304
 *   backlog.c, quota.c, auth.c, tls.c, admin.c
 *
 * The folders they build on (common/, config/, codec/, store/, control/, batcher/) are
 * toured in docs/development.md.
 *
 * @locality the state is set up by main() before the listeners start and torn down
 * after they stop; HTTP threads read it and call the modules' own locking. */
#ifndef BW_PROXY_H
#define BW_PROXY_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>

#include "admin.h"
#include "auth.h"
#include "backlog.h"
#include "batcher.h"
#include "config.h"
#include "fleet.h"
#include "job_status.h"
#include "jobs.h"
#include "kafka.h"
#include "proxy_metrics.h"
#include "quota.h"
#include "shardtable.h"
#include "tls.h"

#define COMPONENT "proxy"

/* One producer of the pool. */
typedef struct {
    int index;
    rd_kafka_t *rk;
    rd_kafka_topic_t *rkt[BW_LANES_MAX]; /* each lane's batches topic */
    pthread_t poller;
    rd_kafka_queue_t *reports; /* its delivery reports' queue: a yield on it wakes the poller */
    int linger_ms;             /* its linger.ms */
    atomic_int send_now;       /* set by a request alone in the proxy: send, do not linger */
    atomic_int stop;           /* its poller ends (a rebuild) */
    atomic_int fatal;          /* librdkafka raised a fatal error: rebuild it (bw_producers_recover) */
    char fatal_why[256];       /* what it said, for /readyz and the log (written before fatal is set) */
} bw_producer_t;

typedef struct {
    bw_config_t *conf;
    bw_producer_t *producers; /* [conf->proxy_producers + 1]: the batches' pool, then the
                                 records': one record at a time, acks awaited at once, so
                                 it never lingers (linger.ms 0: 5 ms less per request) */
    int producer_cnt;         /* conf->proxy_producers + 1 */
    pthread_rwlock_t producers_lock; /* read: a request producing and awaiting acks; write: a rebuild */
    rd_kafka_t *rk;           /* metadata, topics and offset queries: a client that never produces (so
                                 never fatal), kept while producers are rebuilt */
    rd_kafka_topic_t *rkt;    /* the batches topic on rk (/readyz) */
    const char *brokers;      /* -b, or NULL: kafka.brokers (a rebuilt producer's) */
    struct MHD_Daemon *httpd;
    struct MHD_Daemon *admin_httpd; /* NULL: the admin API is on httpd */
    bw_tls_t *tls;                  /* NULL: plain HTTP */
    atomic_int run;           /* main loop */
    atomic_int run_poller;    /* delivery-report pollers: outlive the HTTP server */
    atomic_int batches_open;  /* admitted POST /v1/batches, from their headers until answered (send_now) */
    bw_metrics_t *metrics;
    bw_jobs_t *jobs;
    bw_shard_table_t *shards;
    bw_backlog_t *backlog;
    bw_history_t *history; /* each shard's last hour, from the status records (history.h) */
    int embedded;             /* the embedded Kafka: its partitions keep only their newest 5 MiB */
    bw_auth_t *auth;
    bw_quota_t *quota; /* per client budgets (quota.h) */
    bw_fleet_self_t fleet;   /* this proxy's presence and prints (main loop only) */
    atomic_int fleet_agrees; /* its settings agree with the earlier members': ready, and takes batches */
} bw_proxy_t;

extern bw_proxy_t proxy;

/* A POST's state, from its headers to its reply. @locality the connection's thread */
typedef struct {
    char *body;
    size_t len, cap;
    int too_large;
    bw_auth_set_t *auth;            /* a reference to the clients it was admitted with; NULL: open */
    const bw_auth_client_t *client; /* the caller (in auth), NULL when open */
    unsigned refused;               /* 401 or 403: the body is read and dropped, then refused */
    int batch;                      /* an admitted POST /v1/batches: counted in proxy.batches_open */
    const char *content_type;       /* the body's, when not the request's header (a Connect call's) */
    int rpc;                        /* a Connect call (connect.c): refused as a Connect error */
    char why[320];
} bw_upload_t;

/* What becomes of each message of a request. */
typedef enum {
    BW_MSG_PRODUCE,      /* admitted to its shard's backlog: produce it */
    BW_MSG_TAKEN_BEFORE, /* an earlier attempt of the same request_id had it acknowledged */
    BW_MSG_BACKLOG_FULL, /* its shard's backlog is full: 429, resend later */
    BW_MSG_HELD,         /* scheduled or dependent: kept in the job's record until released */
} bw_msg_fate_t;

/* ---- producers.c ---- */
/* The pool and the records' producer, each with its delivery-report callback; 0, or -1
 * with err. The pollers start with bw_producers_run. */
int bw_producers_start(const char *brokers, char *err, size_t err_size);
/* Opens each lane's topic on every producer, learns its leaders, starts the pollers. */
void bw_producers_run(void);
/* Rebuilds every producer librdkafka raised a fatal error on (an idempotent producer
 * that lost its sequence; librdkafka 2.0.2 can after a broker disconnect): its queued
 * messages fail (their requests answer 503, resend-safe), it is destroyed and made
 * again. The main loop calls it. Returns how many were rebuilt. */
int bw_producers_recover(void);
/* 1 when no producer is in a fatal state; else 0 with why (/readyz). */
int bw_producers_ready(char *why, size_t why_size);
/* Stops the pollers (after the listeners: requests in flight still get their acks). */
void bw_producers_stop_polling(void);
/* Flushes and destroys every producer. */
void bw_producers_destroy(void);
/* What a message counts for in its shard's backlog (admission and settling agree). */
size_t bw_producers_message_bytes(const bw_batch_msg_t *m);
/* Produces the messages of `set` marked BW_MSG_PRODUCE to their shards' partitions,
 * keyed by job_id (or, with keys, message i by keys[i]: the release loop's, many jobs'
 * batches at once, sent without waiting out linger.ms), waits for all acknowledgements
 * and fills errs[] and offsets[]. Payload ownership passes to librdkafka on a successful
 * produce call. */
void bw_producers_send_batches(bw_batch_set_t *set, int lane, const bw_msg_fate_t *fate, const char *job_id,
                               const char *const *keys, rd_kafka_resp_err_t *errs, int64_t *offsets,
                               bw_arena_t *arena);
/* Produces n records to a side topic and waits for all of them together; errs[i] (may
 * be NULL) gets each one's error. Returns the first error, 0 when Kafka acknowledged
 * every one. */
rd_kafka_resp_err_t bw_producers_send_records(const char *topic, size_t n, const char *const *keys,
                                              const size_t *klens, void *const *vals, const size_t *vlens,
                                              rd_kafka_resp_err_t *errs);

/* ---- submit.c ---- */
/* POST /v1/batches, its body read: the reply (202, 4xx or 503, docs/api.md). */
enum MHD_Result bw_submit(struct MHD_Connection *c, bw_upload_t *up);

/* ---- release.c ---- */
/* not_before at most this far ahead (400 days): a typo in the year is refused. */
#define BW_NOT_BEFORE_MAX_MS (400LL * 86400000)
/* Starts the thread that releases scheduled and dependent batches when they are due
 * (every proxy runs one; a batch released twice is applied once by its shard). */
void bw_release_start(void);
void bw_release_stop(void);
/* 1 once the release loop runs (the jobs and control topics read to their end). */
int bw_release_running(void);
/* 1 if job `id` (a job's id, named or not) is reachable from `after` through the
 * prerequisites of batches still held: holding `id` after them would make a cycle. */
int bw_release_would_cycle(const char *id, char *const *after, size_t n_after);

/* ---- changes.c ---- */
/* The records of one control change: keys copied, values malloc'd and owned by it. */
typedef struct {
    size_t n, cap;
    char **keys;
    size_t *klens;
    void **vals;
    size_t *vlens;
    rd_kafka_resp_err_t *errs; /* each record's answer from Kafka */
} bw_change_t;
void bw_change_add(bw_change_t *ch, const char *key, size_t klen, void *val, size_t vlen);
void bw_change_free(bw_change_t *ch);
/* Builds a change's records from the table as it is now: 0 (no record: nothing to
 * write), or -1 with err (refused: the caller's mistake; nothing is written). */
typedef int (*bw_change_build_fn)(void *ud, bw_change_t *ch, char *err, size_t esz);
/* Once Kafka answered for the records (e: the first error, 0 when every one was
 * acknowledged) and the table was read again (read: 1 if to its end). */
typedef void (*bw_change_done_fn)(void *ud, const bw_change_t *ch, rd_kafka_resp_err_t e, int read);
/* One change of the control topic: under the proxy's lock, the table read to its end,
 * build, produce and wait for Kafka, the table read again, done (may be NULL). -1 if
 * build refused it (err), else 0 with *kafka_err (0: stored). ch is the caller's
 * (bw_change_free). */
int bw_change_make(bw_change_build_fn build, bw_change_done_fn done, void *ud, bw_change_t *ch,
                   rd_kafka_resp_err_t *kafka_err, char *err, size_t esz);
/* Job `id`'s cancellation ("job/<id>", JobControl) as a change: *already when the job
 * was cancelled before (its first cancellation stands; nothing written). 0 or Kafka's
 * error. The caller has checked who may. */
rd_kafka_resp_err_t bw_change_cancel(const char *id, const char *by, const char *from, const char *reason,
                                     int *already);

/* ---- ui.c ---- */
/* The page's files (GET /ui/...) and its endpoints (GET /v1/whoami, /v1/fleet, /v1/jobs):
 * 1 with *ret set when `url` is one of them. */
int bw_ui_serve(struct MHD_Connection *c, const char *method, const char *url, const bw_auth_client_t *client,
                enum MHD_Result *ret);

/* ---- routes.c ---- */
/* libmicrohttpd's request and completion callbacks; cls: the listener's bw_listener_t. */
enum MHD_Result bw_routes_on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                     const char *version, const char *data, size_t *data_size, void **con_cls);
void bw_routes_on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                            enum MHD_RequestTerminationCode toe);
/* {"error": msg} with status, and one optional header (NULL: none). */
enum MHD_Result bw_reply_error_with(struct MHD_Connection *c, unsigned status, const char *header,
                                    const char *value, const char *msg);
enum MHD_Result bw_reply_error(struct MHD_Connection *c, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The job endpoints' handlers, whichever protocol asked (REST here, Connect in
 * connect.c): the job's status (JobStatus as protobuf, else JSON), its cancellation (the
 * status after it), a page of its failures (JSON). */
typedef struct {
    long limit;         /* 1 to 1000 */
    long code;          /* a MySQL error number, 0 for any */
    const char *after;  /* a page's "next"; NULL or "": the first page */
    const char *reason; /* only failures whose reason contains it; NULL: any */
} bw_failures_query_t;
enum MHD_Result bw_routes_job(struct MHD_Connection *c, const char *id, const bw_auth_client_t *client, int protobuf);
enum MHD_Result bw_routes_cancel(struct MHD_Connection *c, const char *id, const bw_auth_client_t *client,
                                 const char *reason, int protobuf);
enum MHD_Result bw_routes_failures(struct MHD_Connection *c, const char *id, const bw_auth_client_t *client,
                                   const bw_failures_query_t *q);

/* ---- connect.c ---- */
/* A call of bulkwrite.v1.BulkwriteService (an endpoint row BW_EP_RPC_*) in the Connect
 * protocol: the request message decoded (application/proto or application/json), the
 * REST handler called with its reply kept, the reply answered as the response message
 * or a Connect error. up: the POST's body. */
enum MHD_Result bw_connect_serve(struct MHD_Connection *c, bw_endpoint_id_t id, const bw_auth_client_t *client,
                                 bw_upload_t *up);
/* A call refused before its handler (401, 403: routes.c's authorize), as a Connect error. */
enum MHD_Result bw_connect_refuse(struct MHD_Connection *c, unsigned status, const char *why, const char *header,
                                  const char *value);

#endif
