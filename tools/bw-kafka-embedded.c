/* bw-kafka-embedded — hosts librdkafka's mock cluster: a real Kafka-protocol server on
 * loopback, in memory, for the demo and the fast tests.
 *
 * It creates the configured topic with one partition per logical shard (the mock has
 * no CreateTopics call), prints the bootstrap address on stdout (and to --bootstrap-file),
 * and serves until SIGINT/SIGTERM. Everything it holds is lost when it exits.
 *
 * The mock keeps a partition's newest 5 MiB and has no compaction, so the control and
 * status topics (tables: pauses, rates, budgets, cancels, shard statuses) are compacted
 * here: a thread follows them and writes a live record again before the bound reaches it
 * (control/compactor.h). A table too big for that is logged as an error. */
#include <getopt.h>
#include <inttypes.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compactor.h"
#include "config.h"
#include "kafka.h"
#include "log.h"

#define COMPONENT "kafka-embedded" /* its log lines' component, once the config has set their format */

static volatile sig_atomic_t run = 1;
static void on_signal(int sig) {
    (void)sig;
    run = 0;
}

/* ---- the tables' compaction ------------------------------------------------------------------ */

#define TABLES 2

typedef struct {
    const char *topic;
    int parts;
    bw_compactor_t **parts_c; /* one per partition */
    char *too_big;            /* per partition: said so, until it fits again */
} table_t;

typedef struct {
    rd_kafka_t *consumer, *producer;
    table_t tables[TABLES];
    pthread_t thread;
    atomic_int run;
} compaction_t;

/* A copy on its way: which compactor handed it out, and what (for bw_compactor_lost). */
typedef struct {
    bw_compactor_t *c;
    int64_t origin;
    size_t klen;
    char key[];
} copy_t;

/* Every copy's delivery report (on the compaction thread: it polls the producer). */
static void copy_delivered(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    (void)rk, (void)opaque;
    copy_t *cp = m->_private;
    if (m->err) {
        bw_warn(COMPONENT, "writing a live record of %s again: %s; trying again", rd_kafka_topic_name(m->rkt),
                rd_kafka_err2str(m->err));
        if (cp) bw_compactor_lost(cp->c, cp->key, cp->klen, cp->origin);
    }
    free(cp);
}

static void compact(compaction_t *k, table_t *t, const rd_kafka_message_t *m) {
    bw_compactor_t *c = t->parts_c[m->partition];
    int64_t origin = bw_kafka_origin(m);
    bw_compactor_read(c, m->offset, origin == m->offset ? -1 : origin, m->key, m->key_len, m->payload, m->len);
    const void *key, *value;
    size_t klen, vlen;
    while (bw_compactor_due(c, &key, &klen, &value, &vlen, &origin)) {
        char digits[24];
        snprintf(digits, sizeof(digits), "%" PRId64, origin);
        copy_t *cp = malloc(sizeof(*cp) + klen);
        if (!cp) abort();
        *cp = (copy_t){c, origin, klen};
        memcpy(cp->key, key, klen);
        rd_kafka_resp_err_t e = rd_kafka_producev(
            k->producer, RD_KAFKA_V_TOPIC(t->topic), RD_KAFKA_V_PARTITION(m->partition), RD_KAFKA_V_KEY(key, klen),
            RD_KAFKA_V_VALUE((void *)(vlen ? value : NULL), vlen), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
            RD_KAFKA_V_HEADER(BW_KAFKA_HEADER_ORIGIN, digits, (ssize_t)strlen(digits)), RD_KAFKA_V_OPAQUE(cp),
            RD_KAFKA_V_END);
        if (e) { /* not queued: no report comes; the next record read hands it out again */
            bw_warn(COMPONENT, "writing a live record of %s again: %s", t->topic, rd_kafka_err2str(e));
            bw_compactor_lost(c, cp->key, cp->klen, cp->origin);
            free(cp);
            break;
        }
    }
    /* above a quarter of the bound, the copies push live records out: said, not silent */
    int64_t live = bw_compactor_live_bytes(c);
    int too_big = live > BW_KAFKA_EMBEDDED_PARTITION_BYTES / 4 ||
                  (int64_t)bw_compactor_live_records(c) > BW_KAFKA_EMBEDDED_PARTITION_SETS / 4;
    if (too_big && !t->too_big[m->partition])
        bw_error(COMPONENT,
                 "%s partition %d holds %" PRId64 " bytes in %zu live records, more than "
                 "the embedded Kafka can keep (a quarter of its %lld-byte, %d-record partitions): the oldest "
                 "may be lost; run a real Kafka (docs/deployment.md)",
                t->topic, (int)m->partition, live, bw_compactor_live_records(c),
                (long long)BW_KAFKA_EMBEDDED_PARTITION_BYTES, BW_KAFKA_EMBEDDED_PARTITION_SETS);
    t->too_big[m->partition] = (char)too_big;
}

static void *compaction_main(void *arg) {
    compaction_t *k = arg;
    while (atomic_load(&k->run)) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(k->consumer, 200);
        rd_kafka_poll(k->producer, 0);
        if (!m) continue;
        if (m->err && m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            bw_warn(COMPONENT, "compacting: %s", rd_kafka_message_errstr(m));
        } else if (!m->err) {
            for (int i = 0; i < TABLES; i++)
                if (!strcmp(rd_kafka_topic_name(m->rkt), k->tables[i].topic) && m->partition >= 0 &&
                    m->partition < k->tables[i].parts)
                    compact(k, &k->tables[i], m);
        }
        rd_kafka_message_destroy(m);
    }
    return NULL;
}

static int compaction_start(compaction_t *k, const bw_config_t *conf, const char *bootstrap, const char *topics[TABLES],
                            const int parts[TABLES]) {
    char err[512];
    rd_kafka_conf_t *cc = bw_kafka_conf(conf, BW_KAFKA_CONSUMER, bootstrap, err, sizeof(err));
    rd_kafka_conf_t *pc = bw_kafka_conf(conf, BW_KAFKA_PRODUCER, bootstrap, err, sizeof(err));
    if (cc) rd_kafka_conf_set(cc, "auto.offset.reset", "earliest", NULL, 0);
    if (pc) rd_kafka_conf_set_dr_msg_cb(pc, copy_delivered);
    if (!cc || !pc || !(k->consumer = rd_kafka_new(RD_KAFKA_CONSUMER, cc, err, sizeof(err))) ||
        !(k->producer = rd_kafka_new(RD_KAFKA_PRODUCER, pc, err, sizeof(err)))) {
        bw_error(COMPONENT, "compacting the tables: %s", err);
        return -1;
    }
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(64);
    for (int i = 0; i < TABLES; i++) {
        table_t *t = &k->tables[i];
        t->topic = topics[i];
        t->parts = parts[i];
        t->parts_c = calloc((size_t)parts[i], sizeof(*t->parts_c));
        t->too_big = calloc((size_t)parts[i], 1);
        if (!t->parts_c || !t->too_big) abort();
        for (int p = 0; p < parts[i]; p++) {
            if (!(t->parts_c[p] = bw_compactor_new(BW_KAFKA_EMBEDDED_PARTITION_BYTES, BW_KAFKA_EMBEDDED_PARTITION_SETS)))
                abort();
            rd_kafka_topic_partition_list_add(l, topics[i], p)->offset = RD_KAFKA_OFFSET_BEGINNING;
        }
    }
    rd_kafka_assign(k->consumer, l);
    rd_kafka_topic_partition_list_destroy(l);
    atomic_init(&k->run, 1);
    return pthread_create(&k->thread, NULL, compaction_main, k) ? -1 : 0;
}

static void compaction_stop(compaction_t *k) {
    atomic_store(&k->run, 0);
    pthread_join(k->thread, NULL);
    rd_kafka_consumer_close(k->consumer);
    rd_kafka_destroy(k->consumer);
    rd_kafka_flush(k->producer, 1000);
    rd_kafka_destroy(k->producer);
    for (int i = 0; i < TABLES; i++) {
        for (int p = 0; p < k->tables[i].parts; p++) bw_compactor_free(k->tables[i].parts_c[p]);
        free(k->tables[i].parts_c);
        free(k->tables[i].too_big);
    }
}

int main(int argc, char **argv) {
    const char *config_path = "conf/bulkwrite.conf", *bootstrap_file = NULL;
    int brokers = 1;
    static const struct option opts[] = {{"config", required_argument, 0, 'c'},
                                         {"bootstrap-file", required_argument, 0, 'f'},
                                         {"brokers", required_argument, 0, 'n'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    for (int o; (o = getopt_long(argc, argv, "c:f:n:h", opts, NULL)) != -1;) {
        switch (o) {
        case 'c': config_path = optarg; break;
        case 'f': bootstrap_file = optarg; break;
        case 'n': brokers = atoi(optarg); break;
        default:
            fprintf(o == 'h' ? stdout : stderr,
                    "usage: bw-kafka-embedded [-c CONFIG] [--bootstrap-file F] [--brokers N]\n"
                    "Hosts an in-memory Kafka cluster (librdkafka mock) with the configured topic.\n");
            return o == 'h' ? 0 : 2;
        }
    }
    char err[512];
    bw_config_t *conf = bw_config_load(config_path, err, sizeof(err));
    if (!conf) {
        fprintf(stderr, "bw-kafka-embedded: %s\n", err);
        return 1;
    }
    bw_log_set_level((bw_log_level_t)conf->log_level);
    bw_log_set_format((bw_log_format_t)conf->log_format);
    rd_kafka_conf_t *kc = rd_kafka_conf_new();
    bw_kafka_conf_logging(kc); /* the mock cluster's lines too */
    char num[16];
    snprintf(num, sizeof(num), "%d", brokers);
    if (rd_kafka_conf_set(kc, "test.mock.num.brokers", num, err, sizeof(err)) != RD_KAFKA_CONF_OK) {
        bw_error(COMPONENT, "%s", err);
        return 1;
    }
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, kc, err, sizeof(err));
    if (!rk) {
        bw_error(COMPONENT, "%s", err);
        return 1;
    }
    rd_kafka_mock_cluster_t *mc = rd_kafka_handle_mock_cluster(rk);
    /* the mock has no CreateTopics: every topic the daemons need is made here */
    const struct {
        const char *name;
        int partitions;
    } topics[] = {{conf->topic, conf->shard_count}, {conf->dead_letter_topic, 1}, {conf->jobs_topic, 1},
                  /* the mock keeps a partition's newest 5 MiB: the operators' settings and
                   * cancels spread over 16 partitions keep 80 MiB of changes */
                  {conf->control_topic, BW_EMBEDDED_CONTROL_PARTITIONS}, {conf->status_topic, 1}};
    /* (the tables' partitions, as compaction_start is told below) */
    for (size_t i = 0; i < sizeof(topics) / sizeof(topics[0]); i++) {
        rd_kafka_resp_err_t e = rd_kafka_mock_topic_create(mc, topics[i].name, topics[i].partitions, 1);
        if (e) {
            bw_error(COMPONENT, "creating topic %s: %s", topics[i].name, rd_kafka_err2str(e));
            return 1;
        }
    }
    for (int lane = 1; lane < conf->lane_cnt; lane++) { /* lane 0's topic is conf->topic, made above */
        rd_kafka_resp_err_t e = rd_kafka_mock_topic_create(mc, conf->lanes[lane].topic, conf->shard_count, 1);
        if (e) {
            bw_error(COMPONENT, "creating topic %s: %s", conf->lanes[lane].topic, rd_kafka_err2str(e));
            return 1;
        }
    }
    const char *bootstrap = rd_kafka_mock_cluster_bootstraps(mc);
    printf("%s\n", bootstrap);
    fflush(stdout);
    if (bootstrap_file) {
        /* written whole, then renamed: a reader never sees half an address */
        char tmp[4096];
        snprintf(tmp, sizeof(tmp), "%s.tmp", bootstrap_file);
        FILE *f = fopen(tmp, "w");
        if (!f || fprintf(f, "%s\n", bootstrap) < 0 || fclose(f) || rename(tmp, bootstrap_file)) {
            bw_error(COMPONENT, "cannot write %s", bootstrap_file);
            return 1;
        }
    }
    bw_info(COMPONENT, "topic %s with %d partitions on %s", conf->topic, conf->shard_count, bootstrap);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    compaction_t compaction = {0};
    const char *tables[TABLES] = {conf->control_topic, conf->status_topic};
    const int table_parts[TABLES] = {BW_EMBEDDED_CONTROL_PARTITIONS, 1};
    if (compaction_start(&compaction, conf, bootstrap, tables, table_parts)) return 1;
    while (run) pause();
    compaction_stop(&compaction);
    rd_kafka_destroy(rk);
    bw_config_destroy(conf);
    return 0;
}
