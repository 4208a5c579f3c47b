/* kafka.h — librdkafka setup shared by the proxy and the consumer. */
#ifndef BW_KAFKA_H
#define BW_KAFKA_H

#include <librdkafka/rdkafka.h>

#include "config.h"

typedef enum { BW_KAFKA_PRODUCER, BW_KAFKA_CONSUMER } bw_kafka_role_t;

/* A librdkafka configuration for `role`: bootstrap servers (`brokers` overrides the
 * config when not NULL), the role's safe defaults (idempotent acks=all producer; manual
 * commits for the consumer), then kafka.properties and the role's property list, which
 * win. NULL with errstr naming the bad property. */
rd_kafka_conf_t *bw_kafka_conf(const bw_config_t *conf, bw_kafka_role_t role, const char *brokers,
                               char *errstr, size_t errstr_size);

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

/* Makes sure the batches topic conf->topic exists with exactly conf->shard_count partitions
 * and deletes nothing before it is applied. Creates it when missing (if kafka.create_topic)
 * as BW_TOPIC_BATCHES; fails when the count differs. On a real broker its configuration is
 * read (DescribeConfigs): cleanup.policy with compact is refused; a retention.ms or
 * retention.bytes other than -1 is refused, or warned about if kafka.allow_retention. On
 * the embedded Kafka the check is skipped (ret->embedded = 1, retention_bytes =
 * BW_KAFKA_EMBEDDED_PARTITION_BYTES). On BW_OK *ret (if not NULL) holds the bounds.
 * @locality any thread; blocks up to about timeout_ms per request, plus up to 30 s while
 *           a topic it created appears in the metadata. */
bw_err_t bw_kafka_ensure_topic(rd_kafka_t *rk, const bw_config_t *conf, int timeout_ms,
                               bw_topic_retention_t *ret, char *errstr, size_t errstr_size);

/* Makes sure a side topic exists (any partition count; created with one partition when
 * missing, if kafka.create_topic). */
bw_err_t bw_kafka_ensure_side_topic(rd_kafka_t *rk, const bw_config_t *conf, const char *topic,
                                    bw_topic_kind_t kind, int timeout_ms, char *errstr, size_t errstr_size);

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

#endif
