/* bw-kafka-embedded — hosts librdkafka's mock cluster: a real Kafka-protocol server on
 * loopback, in memory, for the demo and the fast tests.
 *
 * It creates the configured topic with one partition per logical shard (the mock has
 * no CreateTopics call), prints the bootstrap address on stdout (and to --bootstrap-file),
 * and serves until SIGINT/SIGTERM. Everything it holds is lost when it exits. */
#include <getopt.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "config.h"
#include "kafka.h"

static volatile sig_atomic_t run = 1;
static void on_signal(int sig) {
    (void)sig;
    run = 0;
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
    rd_kafka_conf_t *kc = rd_kafka_conf_new();
    char num[16];
    snprintf(num, sizeof(num), "%d", brokers);
    if (rd_kafka_conf_set(kc, "test.mock.num.brokers", num, err, sizeof(err)) != RD_KAFKA_CONF_OK) {
        fprintf(stderr, "bw-kafka-embedded: %s\n", err);
        return 1;
    }
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, kc, err, sizeof(err));
    if (!rk) {
        fprintf(stderr, "bw-kafka-embedded: %s\n", err);
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
    for (size_t i = 0; i < sizeof(topics) / sizeof(topics[0]); i++) {
        rd_kafka_resp_err_t e = rd_kafka_mock_topic_create(mc, topics[i].name, topics[i].partitions, 1);
        if (e) {
            fprintf(stderr, "bw-kafka-embedded: creating topic %s: %s\n", topics[i].name, rd_kafka_err2str(e));
            return 1;
        }
    }
    for (int lane = 1; lane < conf->lane_cnt; lane++) { /* lane 0's topic is conf->topic, made above */
        rd_kafka_resp_err_t e = rd_kafka_mock_topic_create(mc, conf->lanes[lane].topic, conf->shard_count, 1);
        if (e) {
            fprintf(stderr, "bw-kafka-embedded: creating topic %s: %s\n", conf->lanes[lane].topic, rd_kafka_err2str(e));
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
            fprintf(stderr, "bw-kafka-embedded: cannot write %s\n", bootstrap_file);
            return 1;
        }
    }
    fprintf(stderr, "bw-kafka-embedded: topic %s with %d partitions on %s\n", conf->topic,
            conf->shard_count, bootstrap);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    while (run) pause();
    rd_kafka_destroy(rk);
    bw_config_destroy(conf);
    return 0;
}
