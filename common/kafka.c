#include "kafka.h"

#include <assert.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bw.h"
#include "log.h"

static int set(rd_kafka_conf_t *kc, const char *name, const char *value, char *errstr,
               size_t errstr_size) {
    char err[256];
    if (rd_kafka_conf_set(kc, name, value, err, sizeof(err)) != RD_KAFKA_CONF_OK) {
        /* a secret's value never reaches an error (a log line) */
        bw_seterr(errstr, errstr_size, BW_ERR_INVALID, "kafka property %s=%s: %s", name,
                  bw_config_secret_name(name, strlen(name)) ? "(redacted)" : value, err);
        return -1;
    }
    return 0;
}

/* Properties whose value is part of bulkwrite's guarantees; a pass-through list may not
 * change them. */
static const char *const owned[] = {
    "bootstrap.servers", /* --brokers or kafka.brokers */
    "allow.auto.create.topics", /* topics are made by bw_kafka_ensure_*() */
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

/* librdkafka's lines of one kind at most this often: a flapping broker repeats its few
 * lines for as long as it flaps */
static bw_log_limit_t kafka_log_limit = BW_LOG_LIMIT_INIT(5, 60000);

/* @locality any librdkafka thread */
static void kafka_log(const rd_kafka_t *rk, int level, const char *facility, const char *buf) {
    bw_log_level_t bl = level <= 3 ? BW_LOG_ERROR : level == 4 ? BW_LOG_WARN : level <= 6 ? BW_LOG_INFO : BW_LOG_DEBUG;
    unsigned dropped;
    if (!bw_log_enabled(bl) || !bw_log_limit_pass(&kafka_log_limit, facility, buf, bw_now_us() / 1000, &dropped))
        return;
    /* "[thrd:main]: text": the thread is a field of its own */
    char thread[64] = "";
    const char *end = strncmp(buf, "[thrd:", 6) == 0 ? strstr(buf, "]: ") : NULL;
    if (end && end - buf - 6 < (ptrdiff_t)sizeof(thread)) {
        snprintf(thread, sizeof(thread), "%.*s", (int)(end - buf - 6), buf + 6);
        buf = end + 3;
    }
    bw_log_kv_t kv[] = {{"client", rd_kafka_name(rk)}, {"facility", facility}, {"thread", thread[0] ? thread : NULL}};
    bw_log_fields_t f = {.component = "kafka", .shard = -1, .part = -1, .kv = kv, .kv_cnt = BW_ARRAY_LEN(kv)};
    if (dropped)
        bw_log_fields(bl, &f, "%s (and %u more like it, not logged: at most %u a minute)", buf, dropped,
                      kafka_log_limit.burst);
    else
        bw_log_fields(bl, &f, "%s", buf);
}

void bw_kafka_conf_logging(rd_kafka_conf_t *kc) { rd_kafka_conf_set_log_cb(kc, kafka_log); }

rd_kafka_conf_t *bw_kafka_conf(const bw_config_t *conf, bw_kafka_role_t role, const char *brokers,
                               char *errstr, size_t errstr_size) {
    rd_kafka_conf_t *kc = rd_kafka_conf_new();
    bw_kafka_conf_logging(kc);
    char num[32];
    if (set(kc, "bootstrap.servers", brokers ? brokers : conf->brokers, errstr, errstr_size) ||
        /* topics are made by bw_kafka_ensure_*() with their partitions and retention, never
         * by a metadata request with the broker's defaults (7 days' retention) */
        set(kc, "allow.auto.create.topics", "false", errstr, errstr_size))
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
            /* per topic, partition N goes to the same member: a shard's lanes (a topic
             * each) meet on one consumer, which shares the shard's budget between them */
            set(kc, "partition.assignment.strategy", "range", errstr, errstr_size) ||
            /* librdkafka's own prefetch queue, which the dispatcher empties into the
             * partitions' buffers (consumer.buffer_max_bytes bounds those). Below 2.1
             * (Debian 12 has 2.0.2) a fetch that finds the queue over this bound backs off
             * a fixed second, even if the queue drains a millisecond later: at 4 MiB a
             * hot shard's drain stalled 0.7-0.8 s every ~110 messages (docs/performance.md) */
            set(kc, "queued.max.messages.kbytes", "65536", errstr, errstr_size) ||
            /* librdkafka lowers fetch.max.bytes to that bound; at 64 MiB one response could
             * carry a few partitions' whole backlogs and the rest came later, so those few
             * ran alone at start-up (test/tiers/fairness.sh: two shards of 32 done before the
             * others' first sample). 4 MiB per response keeps the partitions abreast. */
            set(kc, "fetch.max.bytes", "4194304", errstr, errstr_size) ||
            /* a shard whose buffer is full pauses its fetching; the fetch in flight then
             * names only idle partitions, and the broker holds it for fetch.wait.max.ms:
             * at the default 500 ms the resumed shard's refill waited that long and a hot
             * shard applied 150k instead of 270k rows/s (docs/performance.md) */
            set(kc, "fetch.wait.max.ms", "100", errstr, errstr_size) ||
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

/* ---------------------------------------------------------------- admin requests */

/* Options for an admin request: librdkafka gives up after timeout_ms, and so does the
 * broker for the requests it carries out over time (creating a topic, deleting records). */
static rd_kafka_AdminOptions_t *admin_options(rd_kafka_t *rk, rd_kafka_admin_op_t op, int timeout_ms) {
    char err[256];
    rd_kafka_AdminOptions_t *opt = rd_kafka_AdminOptions_new(rk, op);
    rd_kafka_AdminOptions_set_request_timeout(opt, timeout_ms, err, sizeof(err));
    if (op == RD_KAFKA_ADMIN_OP_CREATETOPICS || op == RD_KAFKA_ADMIN_OP_DELETERECORDS)
        rd_kafka_AdminOptions_set_operation_timeout(opt, timeout_ms, err, sizeof(err));
    return opt;
}

/* Blocks for the result of the admin request just sent to q: the event, or NULL with
 * errstr "<doing> topic <topic>: <why>" when the request failed as a whole. */
static rd_kafka_event_t *admin_wait(rd_kafka_queue_t *q, int timeout_ms, const char *doing,
                                    const char *topic, char *errstr, size_t errstr_size) {
    /* librdkafka answers by timeout_ms (a timeout is an answer); the margin only guards */
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, timeout_ms + 2000);
    if (!ev) {
        bw_seterr(errstr, errstr_size, BW_ERR_KAFKA, "%s topic %s: no answer within %d ms", doing, topic,
                  timeout_ms);
    } else if (rd_kafka_event_error(ev)) {
        bw_seterr(errstr, errstr_size, BW_ERR_KAFKA, "%s topic %s: %s", doing, topic,
                  rd_kafka_event_error_string(ev));
        rd_kafka_event_destroy(ev);
        ev = NULL;
    }
    return ev;
}

/* ---------------------------------------------------------------- topics */

/* Partition count of the topic, 0 if it does not exist, -1 on error; *replicas gets the
 * fewest replicas of any of its partitions. */
static int partition_count(rd_kafka_t *rk, const char *topic, int timeout_ms, int *replicas, char *errstr,
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
    if (md->topic_cnt != 1)
        bw_seterr(errstr, errstr_size, BW_ERR_KAFKA, "kafka metadata for topic %s: %d topics in the answer",
                  topic, md->topic_cnt);
    else if (md->topics[0].err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART)
        cnt = 0;
    else if (md->topics[0].err)
        bw_seterr(errstr, errstr_size, BW_ERR_KAFKA, "kafka topic %s: %s", topic,
                  rd_kafka_err2str(md->topics[0].err));
    else
        cnt = md->topics[0].partition_cnt;
    *replicas = 0;
    for (int i = 0; cnt > 0 && i < md->topics[0].partition_cnt; i++)
        if (!i || md->topics[0].partitions[i].replica_cnt < *replicas) *replicas = md->topics[0].partitions[i].replica_cnt;
    rd_kafka_metadata_destroy(md);
    return cnt;
}

/* Broker-side settings of a topic bulkwrite creates. */
static void set_topic_configs(rd_kafka_NewTopic_t *nt, const bw_config_t *conf, bw_topic_kind_t kind) {
    char ms[24], isr[8];
    snprintf(isr, sizeof(isr), "%d", conf->min_insync_replicas);
    rd_kafka_NewTopic_set_config(nt, "min.insync.replicas", isr);
    switch (kind) {
    case BW_TOPIC_LOG:
        break;
    case BW_TOPIC_BATCHES:
        /* kept until applied: the consumer deletes applied batches itself (DeleteRecords) */
        rd_kafka_NewTopic_set_config(nt, "cleanup.policy", "delete");
        rd_kafka_NewTopic_set_config(nt, "retention.ms", "-1");
        rd_kafka_NewTopic_set_config(nt, "retention.bytes", "-1");
        break;
    case BW_TOPIC_TABLE:
        rd_kafka_NewTopic_set_config(nt, "cleanup.policy", "compact");
        /* compaction cleans closed segments only: one an hour keeps the status records
         * (every shard's, every few seconds) at about one per key plus an hour's */
        rd_kafka_NewTopic_set_config(nt, "segment.ms", "3600000");
        break;
    case BW_TOPIC_EXPIRING:
        snprintf(ms, sizeof(ms), "%lld", (long long)conf->jobs_retention_ms);
        rd_kafka_NewTopic_set_config(nt, "cleanup.policy", "compact,delete");
        rd_kafka_NewTopic_set_config(nt, "retention.ms", ms);
        /* a job's latest record holds every attempt's parts (proxy/submit.c), so compaction
         * may drop the earlier ones; none is dropped within the hour a client resends in */
        rd_kafka_NewTopic_set_config(nt, "segment.ms", "3600000");
        rd_kafka_NewTopic_set_config(nt, "min.compaction.lag.ms", "3600000");
        break;
    }
}

/* Whether a topic that failed to be created may still appear: the controller goes on
 * creating after a request timed out, and a broker that is starting answers later. */
static int create_may_settle(rd_kafka_resp_err_t err) {
    return err == RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT || err == RD_KAFKA_RESP_ERR__TIMED_OUT ||
           err == RD_KAFKA_RESP_ERR__TRANSPORT || err == RD_KAFKA_RESP_ERR_NOT_CONTROLLER ||
           err == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN;
}

/* The outcome of CreateTopics for one topic: 0 created (or created first by another
 * process), 1 not known yet (errstr says why; the metadata decides), -1 refused. */
static int create_outcome(rd_kafka_event_t *ev, const bw_config_t *conf, const char *topic, int partitions,
                          char *errstr, size_t errstr_size) {
    size_t cnt;
    const rd_kafka_topic_result_t **res =
        rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &cnt);
    if (cnt != 1)
        return bw_seterr(errstr, errstr_size, BW_ERR_KAFKA, "creating topic %s: %zu results", topic, cnt), -1;
    rd_kafka_resp_err_t err = rd_kafka_topic_result_error(res[0]);
    const char *why = rd_kafka_topic_result_error_string(res[0]);
    if (err == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
        bw_info("kafka", "topic %s was created meanwhile by another process", topic);
        return 0;
    }
    if (err == RD_KAFKA_RESP_ERR_INVALID_REPLICATION_FACTOR)
        return bw_seterr(errstr, errstr_size, BW_ERR_KAFKA, "creating topic %s: %s (kafka.replication_factor is %d: "
                         "the cluster needs at least that many brokers; a single test broker needs "
                         "kafka.replication_factor = 1 and kafka.min_insync_replicas = 1)",
                         topic, why ? why : rd_kafka_err2str(err), conf->replication_factor), -1;
    if (err) {
        bw_seterr(errstr, errstr_size, BW_ERR_KAFKA, "creating topic %s: %s", topic, why ? why : rd_kafka_err2str(err));
        return create_may_settle(err) ? 1 : -1;
    }
    bw_info("kafka", "created topic %s with %d partitions, %d replicas, min.insync.replicas %d", topic, partitions,
            conf->replication_factor, conf->min_insync_replicas);
    return 0;
}

/* Asks for the topic to be created; the result as create_outcome(). */
static int create_topic(rd_kafka_t *rk, const bw_config_t *conf, const char *topic, int partitions,
                        bw_topic_kind_t kind, int timeout_ms, char *errstr, size_t errstr_size) {
    char err[256];
    rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(topic, partitions, conf->replication_factor, err,
                                                    sizeof(err));
    if (!nt) return bw_seterr(errstr, errstr_size, BW_ERR_KAFKA, "creating topic %s: %s", topic, err), -1;
    set_topic_configs(nt, conf, kind);
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_AdminOptions_t *opt = admin_options(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS, timeout_ms);
    rd_kafka_CreateTopics(rk, &nt, 1, opt, q);
    rd_kafka_event_t *ev = admin_wait(q, timeout_ms, "creating", topic, errstr, errstr_size);
    /* no answer at all, or a request that failed as a whole: the metadata decides */
    int ret = ev ? create_outcome(ev, conf, topic, partitions, errstr, errstr_size) : 1;
    if (ev) rd_kafka_event_destroy(ev);
    rd_kafka_AdminOptions_destroy(opt);
    rd_kafka_queue_destroy(q);
    rd_kafka_NewTopic_destroy(nt);
    return ret;
}

/* How long a topic check may take in all: a broker still starting, or creating 4,096
 * partitions, answers metadata late or shows the new topic seconds after creating it. */
#define TOPIC_DEADLINE_MS 60000
/* A topic the broker said it created is waited for longer: a broker busy creating thousands
 * of partitions (4,096 on a loaded two-core machine took 73 s) shows it late, and giving up
 * would only restart the wait. */
#define CREATED_TOPIC_DEADLINE_MS 300000

/* The topic's partition count after creating it with `partitions` if missing; -1 on error.
 * Until TOPIC_DEADLINE_MS has passed (CREATED_TOPIC_DEADLINE_MS once the broker confirmed
 * creating it), a failed metadata request, a topic not shown yet or a creation whose outcome
 * is unknown are waited out; the error then names the topic and the
 * last reason. */
static int ensure_exists(rd_kafka_t *rk, const bw_config_t *conf, const char *topic, int partitions,
                         bw_topic_kind_t kind, int timeout_ms, int *replicas, char *errstr, size_t errstr_size) {
    int64_t give_up = bw_now_us() + TOPIC_DEADLINE_MS * 1000LL;
    char why[384] = "";
    int asked = 0, cnt;
    int64_t next_note = bw_now_us() + 30000000LL;
    while ((cnt = partition_count(rk, topic, timeout_ms, replicas, why, sizeof(why))) <= 0) {
        if (cnt == 0 && !asked) {
            if (!conf->create_topic)
                return bw_seterr(errstr, errstr_size, BW_ERR_KAFKA,
                                 "kafka topic %s does not exist and kafka.create_topic is false", topic), -1;
            asked = 1;
            int created = create_topic(rk, conf, topic, partitions, kind, timeout_ms, why, sizeof(why));
            if (created < 0) return bw_seterr(errstr, errstr_size, BW_ERR_KAFKA, "%s", why), -1;
            if (created > 0) bw_warn("kafka", "%s; waiting for the metadata to show the topic", why);
            else give_up = bw_now_us() + CREATED_TOPIC_DEADLINE_MS * 1000LL;
            continue;
        }
        if (cnt == 0 && !why[0]) /* created, not in the metadata yet */
            snprintf(why, sizeof(why), "kafka topic %s: created, but the metadata shows no partitions", topic);
        int64_t now = bw_now_us();
        if (now >= give_up) /* librdkafka logged the cause, e.g. a refused SASL login */
            return bw_seterr(errstr, errstr_size, BW_ERR_KAFKA, "%s (still after %d s; librdkafka's log lines say "
                             "why: an unreachable broker, refused credentials, ...)", why,
                             (asked && cnt == 0 ? CREATED_TOPIC_DEADLINE_MS : TOPIC_DEADLINE_MS) / 1000), -1;
        if (cnt == 0 && asked && now >= next_note) { /* a slow broker, not a stuck proxy */
            bw_info("kafka", "%s; still waiting for the broker to show it", why);
            next_note = now + 30000000LL;
        }
        rd_kafka_poll(rk, 200);
    }
    return cnt;
}

int bw_kafka_is_embedded(rd_kafka_t *rk, int timeout_ms) {
    /* librdkafka's mock names its cluster "mockCluster<address>"; a real one is a UUID */
    char *id = rd_kafka_clusterid(rk, timeout_ms);
    int embedded = id && strncmp(id, "mockCluster", strlen("mockCluster")) == 0;
    if (id) rd_kafka_mem_free(rk, id);
    return embedded;
}

int64_t bw_kafka_origin(const rd_kafka_message_t *m) {
    rd_kafka_headers_t *h = NULL;
    const void *v;
    size_t len;
    char digits[24];
    if (rd_kafka_message_headers(m, &h) || rd_kafka_header_get_last(h, BW_KAFKA_HEADER_ORIGIN, &v, &len) || !v ||
        len == 0 || len >= sizeof(digits))
        return m->offset;
    memcpy(digits, v, len);
    digits[len] = '\0';
    char *end;
    long long origin = strtoll(digits, &end, 10);
    return *end || origin < 0 || origin > m->offset ? m->offset : origin; /* not ours: the record's own */
}

/* ---------------------------------------------------------------- the batches topic's retention */

typedef struct {
    int64_t size;
    const char *name;
} unit_t;

static const unit_t time_units[] = {{86400000, "d"}, {3600000, "h"}, {60000, "min"}, {1000, "s"}, {1, "ms"}};
static const unit_t byte_units[] = {{1LL << 40, "TiB"}, {1LL << 30, "GiB"}, {1LL << 20, "MiB"},
                                    {1LL << 10, "KiB"}, {1, "bytes"}};

/* v in the largest unit that divides it: "1 h", "90 min", "1 GiB". `u` ends with size 1. */
static const char *amount(int64_t v, const unit_t *u, char *buf, size_t size) {
    while (u->size > 1 && (v < u->size || v % u->size)) u++;
    snprintf(buf, size, "%lld %s", (long long)(v / u->size), u->name);
    return buf;
}

/* The settings that bound the topic ("retention.ms=3600000") and, in words, when Kafka
 * deletes a batch by them ("after 1 h"), for the refusal and the warning. */
static void describe_bound(const bw_topic_retention_t *r, char *settings, char *bound, size_t size) {
    char t[32], b[32];
    amount(r->retention_ms, time_units, t, sizeof(t));
    amount(r->retention_bytes, byte_units, b, sizeof(b));
    if (r->retention_bytes == -1) {
        snprintf(settings, size, "retention.ms=%lld", (long long)r->retention_ms);
        snprintf(bound, size, "after %s", t);
    } else if (r->retention_ms == -1) {
        snprintf(settings, size, "retention.bytes=%lld", (long long)r->retention_bytes);
        snprintf(bound, size, "once its partition holds more than %s", b);
    } else {
        snprintf(settings, size, "retention.ms=%lld and retention.bytes=%lld", (long long)r->retention_ms,
                 (long long)r->retention_bytes);
        snprintf(bound, size, "after %s, or once its partition holds more than %s", t, b);
    }
}

/* Refuses a batches topic that could lose a batch before it is applied; with
 * kafka.allow_retention a time or size bound is warned about instead. */
static bw_err_t check_retention(const bw_config_t *conf, const char *topic, const char *policy, const bw_topic_retention_t *r,
                                char *errstr, size_t errstr_size) {
    char settings[128], bound[128];
    /* compaction keeps one record per key: never acceptable, whatever allow_retention says */
    if (strstr(policy, "compact"))
        return bw_seterr(errstr, errstr_size, BW_ERR_INVALID,
                         "kafka topic %s has cleanup.policy=%s: compaction keeps only the latest batch per "
                         "key and would drop batches not yet applied. Set cleanup.policy=delete "
                         "(kafka.allow_retention does not cover compaction)",
                         topic, policy);
    if (r->retention_ms == -1 && r->retention_bytes == -1) return BW_OK;
    describe_bound(r, settings, bound, sizeof(bound));
    if (!conf->allow_retention)
        return bw_seterr(errstr, errstr_size, BW_ERR_INVALID,
                         "kafka topic %s has %s: Kafka would delete batches not yet applied %s. Set "
                         "retention.ms=-1 and retention.bytes=-1 (bulkwrite deletes applied batches itself), "
                         "or set kafka.allow_retention = true to accept the risk",
                         topic, settings, bound);
    bw_warn("kafka",
            "kafka topic %s has %s and kafka.allow_retention is true: Kafka deletes a batch %s, applied or "
            "not; a shard whose backlog goes beyond that loses batches",
            topic, settings, bound);
    return BW_OK;
}

/* What a topic keeps and for how long, as the broker reports it (DescribeConfigs). */
typedef struct {
    char policy[64];
    int64_t retention_ms, retention_bytes;
    int min_isr;
} topic_settings_t;

enum { HAS_POLICY = 1, HAS_RETENTION_MS = 2, HAS_RETENTION_BYTES = 4, HAS_MIN_ISR = 8 };

/* Takes one of the settings from a DescribeConfigs entry; returns its HAS_ bit (0 for
 * any other entry, or a value that is not a number where one is expected). */
static int read_entry(const rd_kafka_ConfigEntry_t *e, topic_settings_t *t) {
    const char *name = rd_kafka_ConfigEntry_name(e), *value = rd_kafka_ConfigEntry_value(e);
    char *end;
    if (!value) return 0;
    if (strcmp(name, "cleanup.policy") == 0) {
        snprintf(t->policy, sizeof(t->policy), "%s", value);
        return HAS_POLICY;
    }
    int64_t v = strtoll(value, &end, 10);
    if (end == value || *end) return 0;
    if (strcmp(name, "retention.ms") == 0) return t->retention_ms = v, HAS_RETENTION_MS;
    if (strcmp(name, "retention.bytes") == 0) return t->retention_bytes = v, HAS_RETENTION_BYTES;
    if (strcmp(name, "min.insync.replicas") == 0) return t->min_isr = (int)v, HAS_MIN_ISR;
    return 0;
}

static bw_err_t read_settings(rd_kafka_event_t *ev, const char *topic, int need, topic_settings_t *t,
                              rd_kafka_resp_err_t *code, char *errstr, size_t errstr_size) {
    size_t cnt, n;
    const rd_kafka_ConfigResource_t **res =
        rd_kafka_DescribeConfigs_result_resources(rd_kafka_event_DescribeConfigs_result(ev), &cnt);
    if (cnt != 1)
        return bw_seterr(errstr, errstr_size, BW_ERR_KAFKA, "describing topic %s: %zu results", topic, cnt);
    if ((*code = rd_kafka_ConfigResource_error(res[0])))
        return bw_seterr(errstr, errstr_size, BW_ERR_KAFKA, "describing topic %s: %s", topic,
                         rd_kafka_ConfigResource_error_string(res[0]));
    const rd_kafka_ConfigEntry_t **e = rd_kafka_ConfigResource_configs(res[0], &n);
    int found = 0;
    for (size_t i = 0; i < n; i++) found |= read_entry(e[i], t);
    if ((found & need) != need)
        return bw_seterr(errstr, errstr_size, BW_ERR_KAFKA,
                         "describing topic %s: the broker did not report a cleanup.policy, a numeric "
                         "retention.ms, a numeric retention.bytes and a numeric min.insync.replicas",
                         topic);
    return BW_OK;
}

/* The topic's settings in `need` (HAS_ bits), from DescribeConfigs. A broker that has
 * not heard of a topic just created yet answers "unknown topic": asked again, for up to
 * TOPIC_DEADLINE_MS. */
static bw_err_t describe_topic(rd_kafka_t *rk, const char *topic, int timeout_ms, int need, topic_settings_t *t,
                               char *errstr, size_t errstr_size) {
    int64_t give_up = bw_now_us() + TOPIC_DEADLINE_MS * 1000LL;
    for (;;) {
        rd_kafka_ConfigResource_t *cr = rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, topic);
        rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
        rd_kafka_AdminOptions_t *opt = admin_options(rk, RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS, timeout_ms);
        rd_kafka_DescribeConfigs(rk, &cr, 1, opt, q);
        rd_kafka_event_t *ev = admin_wait(q, timeout_ms, "describing", topic, errstr, errstr_size);
        rd_kafka_resp_err_t code = 0;
        bw_err_t ret = ev ? read_settings(ev, topic, need, t, &code, errstr, errstr_size) : BW_ERR_KAFKA;
        if (ev) rd_kafka_event_destroy(ev);
        rd_kafka_AdminOptions_destroy(opt);
        rd_kafka_queue_destroy(q);
        rd_kafka_ConfigResource_destroy(cr);
        if (code != RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART || bw_now_us() >= give_up) return ret;
        rd_kafka_poll(rk, 200);
    }
}

bw_err_t bw_kafka_check_durability(const bw_config_t *conf, const char *topic, bw_topic_kind_t kind, int replicas,
                                   int min_isr, const char *policy, char *errstr, size_t errstr_size) {
    char why[400] = "";
    if (replicas < conf->replication_factor)
        snprintf(why, sizeof(why), "kafka topic %s has %d replica%s of its partitions (fewest) where "
                 "kafka.replication_factor is %d: an acknowledged write survives %d lost broker%s, not %d", topic,
                 replicas, replicas == 1 ? "" : "s", conf->replication_factor, replicas > 0 ? replicas - 1 : 0,
                 replicas == 2 ? "" : "s", conf->replication_factor - 1);
    else if (min_isr < conf->min_insync_replicas)
        snprintf(why, sizeof(why), "kafka topic %s has min.insync.replicas=%d where kafka.min_insync_replicas is %d: "
                 "Kafka acknowledges a write that only %d broker%s ha%s", topic, min_isr, conf->min_insync_replicas,
                 min_isr, min_isr == 1 ? "" : "s", min_isr == 1 ? "s" : "ve");
    else if (kind == BW_TOPIC_TABLE && policy && (!strstr(policy, "compact") || strstr(policy, "delete")))
        snprintf(why, sizeof(why), "kafka topic %s has cleanup.policy=%s: its records (an operator's pause or rate, "
                 "a shard's status) would be deleted by retention, not kept per key", topic, policy);
    if (!why[0]) return BW_OK;
    if (!conf->allow_weak_durability)
        return bw_seterr(errstr, errstr_size, BW_ERR_INVALID, "%s. Raise it on the topic (kafka-reassign-partitions, "
                         "kafka-configs), or set kafka.allow_weak_durability = true to start anyway", why);
    snprintf(errstr, errstr_size, "%s (kafka.allow_weak_durability is true)", why);
    bw_warn("kafka", "%s", errstr);
    return BW_OK;
}

/* A topic found on a real broker: its durability (and the batches topic's retention). */
static bw_err_t check_topic(rd_kafka_t *rk, const bw_config_t *conf, const char *topic, bw_topic_kind_t kind,
                            int replicas, int timeout_ms, topic_settings_t *t, char *errstr, size_t errstr_size) {
    int need = HAS_POLICY | HAS_MIN_ISR | (kind == BW_TOPIC_BATCHES ? HAS_RETENTION_MS | HAS_RETENTION_BYTES : 0);
    bw_err_t err = describe_topic(rk, topic, timeout_ms, need, t, errstr, errstr_size);
    if (!err) err = bw_kafka_check_durability(conf, topic, kind, replicas, t->min_isr, t->policy, errstr, errstr_size);
    if (!err && kind == BW_TOPIC_BATCHES) {
        bw_topic_retention_t r = {.retention_ms = t->retention_ms, .retention_bytes = t->retention_bytes};
        err = check_retention(conf, topic, t->policy, &r, errstr, errstr_size);
    }
    return err;
}

bw_err_t bw_kafka_ensure_side_topic(rd_kafka_t *rk, const bw_config_t *conf, const char *topic,
                                    bw_topic_kind_t kind, int timeout_ms, char *errstr, size_t errstr_size) {
    int replicas;
    if (ensure_exists(rk, conf, topic, 1, kind, timeout_ms, &replicas, errstr, errstr_size) < 0) return BW_ERR_KAFKA;
    if (bw_kafka_is_embedded(rk, timeout_ms)) return BW_OK; /* the mock: one replica, no DescribeConfigs */
    topic_settings_t t = {.retention_ms = -1, .retention_bytes = -1};
    return check_topic(rk, conf, topic, kind, replicas, timeout_ms, &t, errstr, errstr_size);
}

bw_err_t bw_kafka_ensure_topic(rd_kafka_t *rk, const bw_config_t *conf, int timeout_ms,
                               bw_topic_retention_t *ret, char *errstr, size_t errstr_size) {
    bw_topic_retention_t r = {.embedded = bw_kafka_is_embedded(rk, timeout_ms), .retention_ms = -1, .retention_bytes = -1};
    for (int lane = 0; lane < conf->lane_cnt; lane++) { /* every lane's topic, each its own partitions */
        const char *topic = conf->lanes[lane].topic;
        int replicas;
        int cnt = ensure_exists(rk, conf, topic, conf->shard_count, BW_TOPIC_BATCHES, timeout_ms, &replicas, errstr,
                                errstr_size);
        if (cnt < 0) return BW_ERR_KAFKA;
        if (cnt != conf->shard_count)
            return bw_seterr(errstr, errstr_size, BW_ERR_INVALID,
                             "kafka topic %s has %d partitions but shards.count is %d: one partition per "
                             "logical shard is required",
                             topic, cnt, conf->shard_count);
        if (r.embedded) {
            /* the mock has no DescribeConfigs, and no settings: it keeps the newest
             * BW_KAFKA_EMBEDDED_PARTITION_BYTES of each partition */
            r.retention_bytes = BW_KAFKA_EMBEDDED_PARTITION_BYTES;
            continue;
        }
        topic_settings_t t = {.retention_ms = -1, .retention_bytes = -1};
        bw_err_t err = check_topic(rk, conf, topic, BW_TOPIC_BATCHES, replicas, timeout_ms, &t, errstr, errstr_size);
        if (err) return err;
        /* the strictest bound of the lanes is the one to watch */
        if (t.retention_ms >= 0 && (r.retention_ms < 0 || t.retention_ms < r.retention_ms)) r.retention_ms = t.retention_ms;
        if (t.retention_bytes >= 0 && (r.retention_bytes < 0 || t.retention_bytes < r.retention_bytes))
            r.retention_bytes = t.retention_bytes;
    }
    if (ret) *ret = r;
    return BW_OK;
}

/* ---------------------------------------------------------------- deleting applied batches */

void bw_kafka_delete_records_start(rd_kafka_t *rk, const char *topic, const int32_t *partitions,
                                   const int64_t *offsets, size_t n, int timeout_ms, rd_kafka_queue_t *q) {
    assert(n > 0); /* librdkafka refuses an empty request */
    rd_kafka_topic_partition_list_t *req = rd_kafka_topic_partition_list_new((int)n);
    for (size_t i = 0; i < n; i++)
        rd_kafka_topic_partition_list_add(req, topic, partitions[i])->offset = offsets[i];
    rd_kafka_DeleteRecords_t *dr = rd_kafka_DeleteRecords_new(req); /* copies req */
    rd_kafka_AdminOptions_t *opt = admin_options(rk, RD_KAFKA_ADMIN_OP_DELETERECORDS, timeout_ms);
    /* the request rides along to the result, which librdkafka returns sorted and, when the
     * request failed as a whole, without partitions: poll answers for each requested one */
    rd_kafka_AdminOptions_set_opaque(opt, req);
    rd_kafka_DeleteRecords(rk, &dr, 1, opt, q);
    rd_kafka_AdminOptions_destroy(opt);
    rd_kafka_DeleteRecords_destroy(dr);
}

/* The new log start offset of the requested partition `want`, or -1 with the first error
 * text kept in errstr. `res` is NULL when the request failed as a whole. */
static int64_t new_low(const rd_kafka_topic_partition_list_t *res, const rd_kafka_topic_partition_t *want,
                       char *errstr, size_t errstr_size) {
    const rd_kafka_topic_partition_t *p =
        res ? rd_kafka_topic_partition_list_find(res, want->topic, want->partition) : NULL;
    if (p && !p->err) return p->offset;
    if (errstr && errstr_size && !errstr[0])
        bw_seterr(errstr, errstr_size, BW_ERR_KAFKA, "deleting records of %s [%d] before offset %lld: %s",
                  want->topic, (int)want->partition, (long long)want->offset,
                  p ? rd_kafka_err2str(p->err) : "no result");
    return -1;
}

int bw_kafka_delete_records_poll(rd_kafka_queue_t *q, int32_t *partitions, int64_t *low, size_t cap,
                                 size_t *n_out, char *errstr, size_t errstr_size) {
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 0);
    if (!ev) return 0;
    assert(rd_kafka_event_type(ev) == RD_KAFKA_EVENT_DELETERECORDS_RESULT);
    rd_kafka_topic_partition_list_t *req = rd_kafka_event_opaque(ev);
    const rd_kafka_topic_partition_list_t *res = NULL;
    if (errstr && errstr_size) errstr[0] = '\0';
    /* the result accessor asserts on a request that failed as a whole: read its error */
    if (rd_kafka_event_error(ev))
        bw_seterr(errstr, errstr_size, BW_ERR_KAFKA, "deleting records of %s: %s", req->elems[0].topic,
                  rd_kafka_event_error_string(ev));
    else
        res = rd_kafka_DeleteRecords_result_offsets(rd_kafka_event_DeleteRecords_result(ev));
    size_t n = 0;
    for (; n < cap && n < (size_t)req->cnt; n++) {
        partitions[n] = req->elems[n].partition;
        low[n] = new_low(res, &req->elems[n], errstr, errstr_size);
    }
    *n_out = n;
    rd_kafka_topic_partition_list_destroy(req);
    rd_kafka_event_destroy(ev);
    return 1;
}

rd_kafka_topic_partition_list_t *bw_kafka_list_offsets(rd_kafka_t *rk, const char *topic, const int32_t *partitions,
                                                       size_t n, int64_t which, int timeout_ms) {
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new((int)n);
    for (size_t i = 0; i < n; i++)
        rd_kafka_topic_partition_list_add(l, topic, partitions ? partitions[i] : (int32_t)i)->offset = which;
    /* offsets_for_times sends each offset as ListOffsets' timestamp: -1 latest, -2 earliest */
    rd_kafka_resp_err_t err = rd_kafka_offsets_for_times(rk, l, timeout_ms);
    if (err) {
        bw_log(BW_LOG_DEBUG, "kafka", -1, NULL, "ListOffsets of %s: %s", topic, rd_kafka_err2str(err));
        rd_kafka_topic_partition_list_destroy(l);
        return NULL;
    }
    return l;
}

/* ---- produce and wait for the acknowledgements ---------------------------------------- */

void bw_kafka_acks_init(bw_kafka_acks_t *a, rd_kafka_t *rk, int poll, int timeout_ms, rd_kafka_resp_err_t *errs,
                        int64_t *offsets) {
    *a = (bw_kafka_acks_t){.rk = rk, .poll = poll, .deadline_us = bw_now_us() + (int64_t)timeout_ms * 1000,
                           .errs = errs, .offsets = offsets};
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cv, NULL);
}

/* One produce call, retried while librdkafka's local queue is full (it drains as
 * acknowledgements arrive) until deadline_us; any other error is final. */
static rd_kafka_resp_err_t produce_retry(rd_kafka_t *rk, const bw_kafka_msg_t *m, void *opaque, int64_t deadline_us,
                                         int poll) {
    rd_kafka_vu_t vu[6 + BW_KAFKA_MAX_HEADERS];
    size_t n = 0;
    assert(m->header_cnt <= BW_KAFKA_MAX_HEADERS);
    if (m->rkt) vu[n++] = (rd_kafka_vu_t){.vtype = RD_KAFKA_VTYPE_RKT, .u.rkt = m->rkt};
    else vu[n++] = (rd_kafka_vu_t){.vtype = RD_KAFKA_VTYPE_TOPIC, .u.cstr = m->topic};
    vu[n++] = (rd_kafka_vu_t){.vtype = RD_KAFKA_VTYPE_PARTITION, .u.i32 = m->partition};
    vu[n++] = (rd_kafka_vu_t){.vtype = RD_KAFKA_VTYPE_KEY, .u.mem = {(void *)m->key, m->key_len}};
    vu[n++] = (rd_kafka_vu_t){.vtype = RD_KAFKA_VTYPE_VALUE, .u.mem = {m->value, m->value_len}};
    vu[n++] = (rd_kafka_vu_t){.vtype = RD_KAFKA_VTYPE_MSGFLAGS, .u.i = m->msgflags};
    vu[n++] = (rd_kafka_vu_t){.vtype = RD_KAFKA_VTYPE_OPAQUE, .u.ptr = opaque};
    for (size_t h = 0; h < m->header_cnt; h++)
        vu[n++] = (rd_kafka_vu_t){.vtype = RD_KAFKA_VTYPE_HEADER,
                                  .u.header = {m->headers[2 * h], m->headers[2 * h + 1], -1}};
    for (;;) {
        rd_kafka_error_t *e = rd_kafka_produceva(rk, vu, n);
        rd_kafka_resp_err_t err = e ? rd_kafka_error_code(e) : RD_KAFKA_RESP_ERR_NO_ERROR;
        if (e) rd_kafka_error_destroy(e);
        if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL || bw_now_us() >= deadline_us) return err;
        if (poll) rd_kafka_poll(rk, 10);
        else usleep(10000);
    }
}

/* Records message `index`'s outcome and counts it reported. @locks a->mu MUST be held */
static void settle(bw_kafka_acks_t *a, size_t index, rd_kafka_resp_err_t err) {
    if (a->errs) a->errs[index] = err;
    if (err && !a->first_err) a->first_err = err;
    if (--a->pending == 0) pthread_cond_signal(&a->cv);
}

rd_kafka_resp_err_t bw_kafka_acks_produce(bw_kafka_acks_t *a, const bw_kafka_msg_t *m, size_t index, void *opaque) {
    pthread_mutex_lock(&a->mu);
    a->pending++; /* before the produce: its report may come at once */
    pthread_mutex_unlock(&a->mu);
    rd_kafka_resp_err_t err = produce_retry(m->rk ? m->rk : a->rk, m, opaque, a->deadline_us, a->poll);
    if (err) {
        pthread_mutex_lock(&a->mu);
        settle(a, index, err);
        pthread_mutex_unlock(&a->mu);
    }
    return err;
}

void bw_kafka_acks_delivered(bw_kafka_acks_t *a, size_t index, const rd_kafka_message_t *m) {
    pthread_mutex_lock(&a->mu);
    if (a->offsets) a->offsets[index] = m->offset;
    settle(a, index, m->err);
    pthread_mutex_unlock(&a->mu);
}

rd_kafka_resp_err_t bw_kafka_acks_wait(bw_kafka_acks_t *a) {
    pthread_mutex_lock(&a->mu);
    while (a->pending) {
        if (!a->poll) {
            pthread_cond_wait(&a->cv, &a->mu);
            continue;
        }
        pthread_mutex_unlock(&a->mu);
        rd_kafka_poll(a->rk, 10); /* may call bw_kafka_acks_delivered */
        pthread_mutex_lock(&a->mu);
    }
    rd_kafka_resp_err_t err = a->first_err;
    pthread_mutex_unlock(&a->mu);
    pthread_mutex_destroy(&a->mu);
    pthread_cond_destroy(&a->cv);
    return err;
}
