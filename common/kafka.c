#include "kafka.h"

#include <stdio.h>
#include <string.h>

#include "log.h"

static int set(rd_kafka_conf_t *kc, const char *name, const char *value, char *errstr,
               size_t errstr_size) {
    char err[256];
    if (rd_kafka_conf_set(kc, name, value, err, sizeof(err)) != RD_KAFKA_CONF_OK) {
        bw_seterr(errstr, errstr_size, BW_ERR_INVALID, "kafka property %s=%s: %s", name, value, err);
        return -1;
    }
    return 0;
}

/* Properties whose value is part of bulkwrite's guarantees; a pass-through list may not
 * change them. */
static const char *const owned[] = {
    "bootstrap.servers", /* --brokers or kafka.brokers */
    "enable.idempotence", "acks", "request.required.acks", /* "accepted" means durable */
    "message.timeout.ms", "delivery.timeout.ms",            /* proxy.produce_timeout_ms */
    "message.max.bytes",                                    /* kafka.message_max_bytes */
    "group.id",                                             /* kafka.consumer_group */
    "enable.auto.commit", "enable.auto.offset.store",       /* offsets move with the data */
    "auto.offset.reset",
    NULL};

static int set_list(rd_kafka_conf_t *kc, char **props, int cnt, const char *key, char *errstr,
                    size_t errstr_size) {
    for (int i = 0; i < cnt; i++) {
        char name[256];
        const char *eq = strchr(props[i], '=');
        if (!eq || eq == props[i] || (size_t)(eq - props[i]) >= sizeof(name)) {
            bw_seterr(errstr, errstr_size, BW_ERR_INVALID,
                      "%s: \"%s\" is not of the form name=value", key, props[i]);
            return -1;
        }
        memcpy(name, props[i], (size_t)(eq - props[i]));
        name[eq - props[i]] = '\0';
        for (const char *const *o = owned; *o; o++)
            if (strcmp(name, *o) == 0) {
                bw_seterr(errstr, errstr_size, BW_ERR_INVALID,
                          "%s: %s is set by bulkwrite itself and cannot be overridden", key, name);
                return -1;
            }
        if (set(kc, name, eq + 1, errstr, errstr_size)) return -1;
    }
    return 0;
}

rd_kafka_conf_t *bw_kafka_conf(const bw_config_t *conf, bw_kafka_role_t role, const char *brokers,
                               char *errstr, size_t errstr_size) {
    rd_kafka_conf_t *kc = rd_kafka_conf_new();
    char num[32];
    if (set(kc, "bootstrap.servers", brokers ? brokers : conf->brokers, errstr, errstr_size))
        goto fail;
    if (role == BW_KAFKA_PRODUCER) {
        /* "accepted" means durable: every replica in sync has it, and retries never
         * duplicate or reorder within a partition */
        snprintf(num, sizeof(num), "%d", conf->produce_timeout_ms);
        snprintf(num + 16, 16, "%d", conf->message_max_bytes + 4096);
        if (set(kc, "enable.idempotence", "true", errstr, errstr_size) ||
            set(kc, "acks", "all", errstr, errstr_size) ||
            set(kc, "linger.ms", "5", errstr, errstr_size) ||
            /* rows of one batch repeat most of their bytes: lz4 shrinks them several times */
            set(kc, "compression.type", "lz4", errstr, errstr_size) ||
            set(kc, "message.timeout.ms", num, errstr, errstr_size) ||
            set(kc, "message.max.bytes", num + 16, errstr, errstr_size) ||
            set_list(kc, conf->properties, conf->property_cnt, "kafka.properties", errstr, errstr_size) ||
            set_list(kc, conf->producer_properties, conf->producer_property_cnt,
                     "kafka.producer_properties", errstr, errstr_size))
            goto fail;
    } else {
        /* offsets are committed by the consumer only after the shard's transaction */
        if (set(kc, "group.id", conf->consumer_group, errstr, errstr_size) ||
            set(kc, "enable.auto.commit", "false", errstr, errstr_size) ||
            set(kc, "enable.auto.offset.store", "false", errstr, errstr_size) ||
            /* where to start is decided from the shards' stored offsets (consumer/main.c);
             * an offset Kafka no longer holds must be an error, never a silent jump */
            set(kc, "auto.offset.reset", "error", errstr, errstr_size) ||
            set(kc, "enable.partition.eof", "false", errstr, errstr_size) ||
            set(kc, "queued.max.messages.kbytes", "4096", errstr, errstr_size) ||
            set_list(kc, conf->properties, conf->property_cnt, "kafka.properties", errstr, errstr_size) ||
            set_list(kc, conf->consumer_properties, conf->consumer_property_cnt,
                     "kafka.consumer_properties", errstr, errstr_size))
            goto fail;
    }
    return kc;
fail:
    rd_kafka_conf_destroy(kc);
    return NULL;
}

/* Partition count of the topic, 0 if it does not exist, -1 on error. */
static int partition_count(rd_kafka_t *rk, const char *topic, int timeout_ms, char *errstr,
                           size_t errstr_size) {
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t err = rd_kafka_metadata(rk, 0, rkt, &md, timeout_ms);
    rd_kafka_topic_destroy(rkt);
    if (err) {
        bw_seterr(errstr, errstr_size, BW_ERR_KAFKA, "kafka metadata for topic %s: %s", topic,
                  rd_kafka_err2str(err));
        return -1;
    }
    int cnt = -1;
    if (md->topic_cnt == 1) {
        const struct rd_kafka_metadata_topic *t = &md->topics[0];
        if (t->err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) cnt = 0;
        else if (t->err)
            bw_seterr(errstr, errstr_size, BW_ERR_KAFKA, "kafka topic %s: %s", topic, rd_kafka_err2str(t->err));
        else cnt = t->partition_cnt;
    }
    rd_kafka_metadata_destroy(md);
    return cnt;
}

static bw_err_t create_topic(rd_kafka_t *rk, const bw_config_t *conf, const char *topic, int partitions,
                             bw_topic_kind_t kind, int timeout_ms, char *errstr, size_t errstr_size) {
    char err[256];
    bw_err_t ret = BW_OK;
    rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(topic, partitions, conf->replication_factor, err,
                                                    sizeof(err));
    if (!nt) return bw_seterr(errstr, errstr_size, BW_ERR_KAFKA, "new topic: %s", err);
    if (kind == BW_TOPIC_TABLE) rd_kafka_NewTopic_set_config(nt, "cleanup.policy", "compact");
    if (kind == BW_TOPIC_EXPIRING) {
        char ms[24];
        snprintf(ms, sizeof(ms), "%lld", (long long)conf->jobs_retention_ms);
        rd_kafka_NewTopic_set_config(nt, "cleanup.policy", "compact,delete");
        rd_kafka_NewTopic_set_config(nt, "retention.ms", ms);
    }
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_AdminOptions_t *opt = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
    rd_kafka_AdminOptions_set_operation_timeout(opt, timeout_ms, err, sizeof(err));
    rd_kafka_CreateTopics(rk, &nt, 1, opt, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, timeout_ms + 2000);
    if (!ev) {
        ret = bw_seterr(errstr, errstr_size, BW_ERR_KAFKA, "creating topic %s: timed out", conf->topic);
    } else if (rd_kafka_event_error(ev)) {
        ret = bw_seterr(errstr, errstr_size, BW_ERR_KAFKA, "creating topic %s: %s", conf->topic,
                        rd_kafka_event_error_string(ev));
    } else {
        size_t cnt;
        const rd_kafka_topic_result_t **res =
            rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &cnt);
        if (cnt == 1 && rd_kafka_topic_result_error(res[0]) &&
            rd_kafka_topic_result_error(res[0]) != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS)
            ret = bw_seterr(errstr, errstr_size, BW_ERR_KAFKA, "creating topic %s: %s", conf->topic,
                            rd_kafka_topic_result_error_string(res[0]));
    }
    if (ev) rd_kafka_event_destroy(ev);
    rd_kafka_AdminOptions_destroy(opt);
    rd_kafka_queue_destroy(q);
    rd_kafka_NewTopic_destroy(nt);
    return ret;
}

/* The topic's partition count after creating it with `partitions` if missing; -1 on error. */
static int ensure_exists(rd_kafka_t *rk, const bw_config_t *conf, const char *topic, int partitions,
                         bw_topic_kind_t kind, int timeout_ms, char *errstr, size_t errstr_size) {
    int cnt = partition_count(rk, topic, timeout_ms, errstr, errstr_size);
    if (cnt != 0) return cnt;
    if (!conf->create_topic)
        return bw_seterr(errstr, errstr_size, BW_ERR_KAFKA,
                         "kafka topic %s does not exist and kafka.create_topic is false", topic), -1;
    if (create_topic(rk, conf, topic, partitions, kind, timeout_ms, errstr, errstr_size)) return -1;
    bw_info("kafka", "created topic %s with %d partitions", topic, partitions);
    /* metadata may lag the creation for a moment */
    for (int i = 0; i < 50 && cnt <= 0; i++) {
        cnt = partition_count(rk, topic, timeout_ms, errstr, errstr_size);
        if (cnt <= 0) rd_kafka_poll(rk, 100);
    }
    return cnt > 0 ? cnt : -1;
}

bw_err_t bw_kafka_ensure_side_topic(rd_kafka_t *rk, const bw_config_t *conf, const char *topic,
                                    bw_topic_kind_t kind, int timeout_ms, char *errstr, size_t errstr_size) {
    return ensure_exists(rk, conf, topic, 1, kind, timeout_ms, errstr, errstr_size) < 0 ? BW_ERR_KAFKA : BW_OK;
}

bw_err_t bw_kafka_ensure_topic(rd_kafka_t *rk, const bw_config_t *conf, int timeout_ms,
                               char *errstr, size_t errstr_size) {
    int cnt = ensure_exists(rk, conf, conf->topic, conf->shard_count, BW_TOPIC_LOG, timeout_ms, errstr, errstr_size);
    if (cnt < 0) return BW_ERR_KAFKA;
    if (cnt != conf->shard_count)
        return bw_seterr(errstr, errstr_size, BW_ERR_INVALID,
                         "kafka topic %s has %d partitions but shards.count is %d: one partition per "
                         "logical shard is required",
                         conf->topic, cnt, conf->shard_count);
    return BW_OK;
}
