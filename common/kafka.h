/* kafka.h — librdkafka setup shared by the proxy and the consumer, and the one way to
 * produce and wait for Kafka's acknowledgements. */
#ifndef BW_KAFKA_H
#define BW_KAFKA_H

#include <librdkafka/rdkafka.h>
#include <pthread.h>

#include "config.h"

typedef enum { BW_KAFKA_PRODUCER, BW_KAFKA_CONSUMER } bw_kafka_role_t;

/* A librdkafka configuration for `role`: bootstrap servers (`brokers` overrides the
 * config when not NULL), the role's safe defaults (idempotent acks=all producer; manual
 * commits for the consumer), then kafka.properties and the role's property list, which
 * win. NULL with errstr naming the bad property. */
rd_kafka_conf_t *bw_kafka_conf(const bw_config_t *conf, bw_kafka_role_t role, const char *brokers,
                               char *errstr, size_t errstr_size);

/* Sends librdkafka's log lines through bw_log in bulkwrite's format (component "kafka",
 * the fields client, facility and thread), at bulkwrite's level for their syslog level
 * (0-3 error, 4 warn, 5-6 info, 7 debug), at most 5 of a kind a minute (bw_log_limit_t).
 * bw_kafka_conf does it; a conf made otherwise calls it. */
void bw_kafka_conf_logging(rd_kafka_conf_t *kc);

typedef enum {
    BW_TOPIC_LOG,      /* a plain log with the broker's retention (the dead letters) */
    BW_TOPIC_TABLE,    /* cleanup.policy=compact: the latest value per key, kept forever */
    BW_TOPIC_EXPIRING, /* compact,delete: per key, for kafka.jobs_retention_ms */
    BW_TOPIC_BATCHES,  /* delete, retention.ms=retention.bytes=-1: kept until the consumer
                        * deletes applied batches (bw_kafka_ensure_topic uses it) */
} bw_topic_kind_t;

/* What may delete a batch of the batches topic before the consumer does; -1 = no bound. */
typedef struct {
    int embedded;            /* the embedded Kafka (bw_kafka_is_embedded) */
    int64_t retention_ms;    /* a batch older than this is deleted */
    int64_t retention_bytes; /* a partition's oldest batches beyond this size are deleted */
} bw_topic_retention_t;

/* The embedded Kafka (librdkafka 2.0.2's mock) keeps only the newest 5 MiB (and 100000
 * message sets) of each partition and drops older ones, applied or not; it cannot be
 * configured. */
#define BW_KAFKA_EMBEDDED_PARTITION_BYTES (5LL * 1024 * 1024)
#define BW_KAFKA_EMBEDDED_PARTITION_SETS 100000
/* The embedded Kafka's control topic: the settings spread over this many partitions. */
#define BW_EMBEDDED_CONTROL_PARTITIONS 16
/* The header of a record written again by the embedded Kafka's compactor (a copy): the
 * decimal offset its value was first written at (control/compactor.h). */
#define BW_KAFKA_HEADER_ORIGIN "bw-origin"

/* A record's version for a table's reader: its BW_KAFKA_HEADER_ORIGIN, or its offset. */
int64_t bw_kafka_origin(const rd_kafka_message_t *m);

/* Makes sure the batches topic of every lane (conf->lanes[].topic; lane 0's is
 * conf->topic) exists with exactly conf->shard_count partitions and deletes nothing
 * before it is applied; *ret holds the strictest bounds of them. Creates it when missing (if kafka.create_topic)
 * as BW_TOPIC_BATCHES; fails when the count differs. On a real broker its configuration is
 * read (DescribeConfigs): cleanup.policy with compact is refused; a retention.ms or
 * retention.bytes other than -1 is refused, or warned about if kafka.allow_retention; its
 * replication is checked as bw_kafka_check_durability says. On
 * the embedded Kafka the check is skipped (ret->embedded = 1, retention_bytes =
 * BW_KAFKA_EMBEDDED_PARTITION_BYTES). On BW_OK *ret (if not NULL) holds the bounds.
 * @locality any thread; blocks up to about timeout_ms per request, plus up to 30 s while
 *           a topic it created appears in the metadata. */
bw_err_t bw_kafka_ensure_topic(rd_kafka_t *rk, const bw_config_t *conf, int timeout_ms,
                               bw_topic_retention_t *ret, char *errstr, size_t errstr_size);

/* Makes sure a side topic exists (any partition count; created with one partition when
 * missing, if kafka.create_topic), and on a real broker that it is as durable as
 * bw_kafka_check_durability asks. */
bw_err_t bw_kafka_ensure_side_topic(rd_kafka_t *rk, const bw_config_t *conf, const char *topic,
                                    bw_topic_kind_t kind, int timeout_ms, char *errstr, size_t errstr_size);

/* Whether a topic on a real broker keeps what the configuration asks: at least
 * kafka.replication_factor replicas (`replicas`: the fewest of its partitions), a
 * min.insync.replicas of at least kafka.min_insync_replicas, and for a BW_TOPIC_TABLE
 * (policy not NULL) compaction without deletion. BW_OK, or BW_ERR_INVALID with errstr
 * naming the topic, the setting and the way out; with kafka.allow_weak_durability a
 * weaker topic is logged as a warning (errstr holds it) and BW_OK returned. Topics
 * bulkwrite creates get those settings (and segment.ms, min.compaction.lag.ms on
 * compacted ones). */
bw_err_t bw_kafka_check_durability(const bw_config_t *conf, const char *topic, bw_topic_kind_t kind, int replicas,
                                   int min_isr, const char *policy, char *errstr, size_t errstr_size);

/* 1 if rk is connected to the embedded Kafka (librdkafka's mock cluster, which has no
 * CreateTopics, DescribeConfigs or DeleteRecords), 0 otherwise or when the cluster id is
 * not known within timeout_ms. */
int bw_kafka_is_embedded(rd_kafka_t *rk, int timeout_ms);

/* DeleteRecords without blocking, for a loop that must never wait on Kafka.
 *
 * _start sends the request: in `topic`, delete every record before offsets[i] of
 * partitions[i] (i < n, n >= 1, partitions distinct; RD_KAFKA_OFFSET_END = everything).
 * An offset at or below the log start is no error (nothing more goes); one past the high
 * watermark is (offset out of range). librdkafka delivers the result within about
 * timeout_ms (a timeout is a result too): one result per start arrives on q, which must
 * carry nothing but these results; several requests may be in flight on one q. The
 * request's copy stays allocated until its result is polled, so drain q before destroying
 * it. The embedded Kafka has no DeleteRecords: there every partition comes back -1.
 *
 * _poll never blocks: 0 when no result has arrived; 1 when one has. Then, in the order of
 * that request, partitions[i] is its i-th partition and low[i] that partition's new log
 * start offset, or -1 if its records were not deleted (errstr then holds the first error).
 * *n_out is the request's n (at most cap: size the arrays by the largest n started).
 * @locality any thread; the queue's owner polls it. */
void bw_kafka_delete_records_start(rd_kafka_t *rk, const char *topic, const int32_t *partitions,
                                   const int64_t *offsets, size_t n, int timeout_ms, rd_kafka_queue_t *q);
int bw_kafka_delete_records_poll(rd_kafka_queue_t *q, int32_t *partitions, int64_t *low, size_t cap,
                                 size_t *n_out, char *errstr, size_t errstr_size);

/* Asks the partitions' leaders for the offset at `which` (RD_KAFKA_OFFSET_END: the high
 * watermark; RD_KAFKA_OFFSET_BEGINNING: the log start) of partitions[0..n) of topic, or of
 * every partition 0..n-1 when partitions is NULL: one ListOffsets request per broker,
 * however many partitions, waiting at most timeout_ms. NULL on failure; else a list the
 * caller destroys, whose elements carry their own err.
 * @locality any thread. */
rd_kafka_topic_partition_list_t *bw_kafka_list_offsets(rd_kafka_t *rk, const char *topic, const int32_t *partitions,
                                                       size_t n, int64_t which, int timeout_ms);

/* ---- produce and wait for the acknowledgements ------------------------------------
 *
 * A caller's messages in flight on a producer, counted until Kafka acknowledged or
 * refused each: bw_kafka_acks_init, bw_kafka_acks_produce per message, then
 * bw_kafka_acks_wait. The producer's delivery report callback (dr_msg_cb) calls
 * bw_kafka_acks_delivered for each message with the acks and index it was produced with
 * (the message's opaque leads the callback to them).
 *
 * Deadlines: a full local queue (RD_KAFKA_RESP_ERR__QUEUE_FULL) drains as
 * acknowledgements arrive, so a produce is retried every 10 ms until timeout_ms after
 * init; any other produce error is final. The wait is bounded by the producer's
 * message.timeout.ms (proxy.produce_timeout_ms, bw_kafka_conf), after which librdkafka
 * reports the message failed.
 *
 * @locality any thread. The acks live on the caller's stack until bw_kafka_acks_wait
 * returns. Delivery reports are served by another thread polling rk (poll = 0: the
 * waiter sleeps on a condition), or by the caller (poll = 1: it polls rk while it
 * retries and waits, and so serves other callers' reports too).
 * @locks mu guards pending and first_err, and orders the errs/offsets writes before
 * bw_kafka_acks_wait returns. */
typedef struct {
    rd_kafka_t *rk;
    int poll;
    int64_t deadline_us;            /* produce retries end here (bw_now_us) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t pending;                 /* produced, not yet reported */
    rd_kafka_resp_err_t first_err;  /* of a produce or a delivery */
    rd_kafka_resp_err_t *errs;      /* [index]: each message's error, or NULL */
    int64_t *offsets;               /* [index]: each message's offset once acknowledged, or NULL */
} bw_kafka_acks_t;

/* One message to produce. Every field is meant: 0 is partition 0, and msgflags 0 means
 * librdkafka uses `value` in place until the message is reported. */
typedef struct {
    rd_kafka_t *rk;                 /* the producer, or NULL: the acks' (rkt must be its) */
    rd_kafka_topic_t *rkt;          /* the topic, or NULL and: */
    const char *topic;
    int32_t partition;              /* RD_KAFKA_PARTITION_UA: the partitioner picks by key */
    const void *key;
    size_t key_len;
    void *value;
    size_t value_len;
    int msgflags;                   /* RD_KAFKA_MSG_F_COPY, or RD_KAFKA_MSG_F_FREE: librdkafka
                                       frees value once it took the message (not on an error) */
    const char *const *headers;     /* header_cnt (name, value) pairs of strings, or NULL */
    size_t header_cnt;              /* at most BW_KAFKA_MAX_HEADERS */
} bw_kafka_msg_t;
#define BW_KAFKA_MAX_HEADERS 8

/* errs and offsets (either may be NULL) are indexed by the index given to
 * bw_kafka_acks_produce; the caller sizes them. */
void bw_kafka_acks_init(bw_kafka_acks_t *a, rd_kafka_t *rk, int poll, int timeout_ms, rd_kafka_resp_err_t *errs,
                        int64_t *offsets);

/* Produces m with `opaque` as its delivery report's _private, retrying while the local
 * queue is full until the deadline. Returns 0 when librdkafka took it (its report will
 * come), else the error, also recorded in errs[index] and first_err. */
rd_kafka_resp_err_t bw_kafka_acks_produce(bw_kafka_acks_t *a, const bw_kafka_msg_t *m, size_t index, void *opaque);

/* For the delivery report callback: message `index` of `a` was reported (m->err, and
 * m->offset when acknowledged). After the last one, the waiter returns. */
void bw_kafka_acks_delivered(bw_kafka_acks_t *a, size_t index, const rd_kafka_message_t *m);

/* Waits until every message produced was reported, then frees what init set up.
 * Returns the first error of a produce or a delivery, 0 if none. */
rd_kafka_resp_err_t bw_kafka_acks_wait(bw_kafka_acks_t *a);

#endif
