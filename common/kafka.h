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

/* Makes sure the topic exists with exactly conf->shard_count partitions: creates it when
 * missing (if kafka.create_topic), fails when the count differs. */
bw_err_t bw_kafka_ensure_topic(rd_kafka_t *rk, const bw_config_t *conf, int timeout_ms,
                               char *errstr, size_t errstr_size);

typedef enum {
    BW_TOPIC_LOG,      /* a plain log (the dead letters) */
    BW_TOPIC_TABLE,    /* cleanup.policy=compact: the latest value per key, kept forever */
    BW_TOPIC_EXPIRING, /* compact,delete: per key, for kafka.jobs_retention_ms */
} bw_topic_kind_t;

/* Makes sure a side topic exists (any partition count; created with one partition when
 * missing, if kafka.create_topic). */
bw_err_t bw_kafka_ensure_side_topic(rd_kafka_t *rk, const bw_config_t *conf, const char *topic,
                                    bw_topic_kind_t kind, int timeout_ms, char *errstr, size_t errstr_size);

#endif
