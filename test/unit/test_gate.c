/* test_gate.c — why a shard is not running (consumer/gate.c), and the gauges and status
 * that ask it (consumer/progress.c).
 *
 * The consumer's state is set up by hand as in test_scheduler.c (which defines the
 * `consumer` global the unit tests share): every shard assigned, nothing buffered. The
 * gauge test runs bw_progress_update_gauges against a mock Kafka cluster. */
#include <stdlib.h>
#include <string.h>

#include "consumer.h"
#include "gate.h"
#include "helpers.h"

#include <librdkafka/rdkafka_mock.h> /* after rdkafka.h (consumer.h) */

#define BIT(r) BW_GATE_BIT(BW_GATE_##r)

static void setup(void) {
    consumer = (bw_consumer_t){0};
    consumer.conf = t_ref_config();
    consumer.slot_count = bw_config_slot_count(consumer.conf);
    consumer.partitions = calloc((size_t)consumer.slot_count, sizeof(*consumer.partitions));
    consumer.shards = calloc((size_t)consumer.conf->shard_count, sizeof(*consumer.shards));
    for (int slot = 0; slot < consumer.slot_count; slot++) {
        bw_partition_t *p = &consumer.partitions[slot];
        p->shard = slot % consumer.conf->shard_count;
        p->lane = slot / consumer.conf->shard_count;
        p->assigned = 1;
        p->applied = p->high = p->low = p->next_fetch = -1;
        consumer.shards[p->shard].assigned_lanes++;
    }
    consumer.assigned_cnt = consumer.slot_count;
    consumer.health = bw_health_new(consumer.conf->shard_count, consumer.conf->server_cnt, consumer.conf->shard_server);
    bw_health_set_limits(consumer.health, 2, 30000000);
}

static void teardown(void) {
    free(consumer.partitions);
    free(consumer.shards);
    bw_health_free(consumer.health);
    bw_config_destroy(consumer.conf);
}

static bw_gate_t reasons_of(int shard) { return bw_gate_shard(shard, bw_now_us()); }

START_TEST(a_shard_that_runs_has_no_reason) {
    setup();
    for (int s = 0; s < consumer.conf->shard_count; s++) ck_assert_uint_eq(reasons_of(s), 0);
    char text[64];
    ck_assert_str_eq(bw_gate_format(0, text, sizeof(text)), "");
    teardown();
}
END_TEST

/* Each reason alone, as the state that causes it is set, and its name. */
START_TEST(each_reason_alone) {
    setup();
    int64_t now = bw_now_us();
    consumer.shards[0].op_paused = 1;
    consumer.shards[1].throttle_paused = 1;
    bw_health_report(consumer.health, 2, BW_FAIL_STOP, 0, now);
    bw_health_report(consumer.health, 3, BW_FAIL_TIMEOUT, 0, now);
    bw_health_report(consumer.health, 3, BW_FAIL_TIMEOUT, 0, now); /* held after 2 */
    consumer.partitions[4].lost_from = 10, consumer.partitions[4].lost_to = 20;
    consumer.partitions[5].buffer_full = 1;
    consumer.partitions[6].ledger_pending = 1;
    consumer.partitions[7].revoking = 1;
    static const struct {
        int shard;
        bw_gate_t want;
        const char *name;
    } cases[] = {{0, BIT(PAUSED), "paused"},      {1, BIT(THROTTLE), "throttle"}, {2, BIT(STOPPED), "stopped"},
                 {3, BIT(UNHEALTHY), "unhealthy"}, {4, BIT(GAP), "gap"},           {5, BIT(BUFFER_FULL), "buffer_full"},
                 {6, BIT(LEDGER), "ledger"},       {7, BIT(REVOKING), "revoking"}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char text[64];
        ck_assert_msg(reasons_of(cases[i].shard) == cases[i].want, "shard %d: %s", cases[i].shard,
                      bw_gate_format(reasons_of(cases[i].shard), text, sizeof(text)));
        ck_assert_str_eq(bw_gate_format(cases[i].want, text, sizeof(text)), cases[i].name);
    }
    teardown();

    setup(); /* a server down: every shard of it, and only those */
    for (int k = 0; k < 2; k++) bw_health_report(consumer.health, 5, BW_FAIL_CONNECTION, 0, now);
    const bw_server_t *sv = &consumer.conf->servers[consumer.conf->shard_server[5]];
    for (int s = 0; s < consumer.conf->shard_count; s++)
        ck_assert_uint_eq(reasons_of(s), s >= sv->first_shard && s <= sv->last_shard ? BIT(SERVER_DOWN) : 0);
    /* a retry's backoff, while it lasts */
    consumer.shards[1].backoff_us = 100000;
    consumer.shards[1].ready_at_us = now + 100000;
    ck_assert_uint_eq(bw_gate_shard(1, now), BIT(BACKOFF));
    ck_assert_uint_eq(bw_gate_shard(1, now + 100000), 0);
    consumer.shards[1].backoff_us = 0; /* a rate limit's wait is pacing, not a reason */
    ck_assert_uint_eq(bw_gate_shard(1, now), 0);
    /* not ours */
    consumer.shards[0].assigned_lanes = 0;
    consumer.partitions[0].assigned = 0;
    ck_assert_uint_eq(bw_gate_shard(0, now), BIT(UNASSIGNED));
    ck_assert_uint_eq(bw_gate_slot(0, now), BIT(UNASSIGNED));
    teardown();
}
END_TEST

/* Several at once are a set; the format lists them in the names' order. */
START_TEST(reasons_combine) {
    setup();
    int64_t now = bw_now_us();
    consumer.shards[2].op_paused = 1;
    consumer.shards[2].throttle_paused = 1;
    consumer.partitions[2].buffer_full = 1;
    bw_health_report(consumer.health, 2, BW_FAIL_STOP, 0, now);
    bw_gate_t r = reasons_of(2);
    ck_assert_uint_eq(r, BIT(PAUSED) | BIT(THROTTLE) | BIT(STOPPED) | BIT(BUFFER_FULL));
    char text[64];
    ck_assert_str_eq(bw_gate_format(r, text, sizeof(text)), "paused,throttle,stopped,buffer_full");
    ck_assert_str_eq(bw_gate_format(r, text, 12), "paused,thro"); /* cut to 11, still terminated */
    /* a shard's reasons are its own and every lane's; a slot's, its own and the shard's */
    ck_assert_uint_eq(bw_gate_slot(2, now), r);
    ck_assert_uint_eq(reasons_of(3), 0);
    /* fetching stops for a pause, a hold, a gap or a full buffer, not for a server down
     * (a probe needs a buffered message) nor a backoff; dispatch stops for pauses alone
     * (health gives held shards their probes) */
    ck_assert(r & BW_GATE_STOPS_FETCH);
    ck_assert(!(BIT(SERVER_DOWN) & BW_GATE_STOPS_FETCH));
    ck_assert(!(BIT(BACKOFF) & BW_GATE_STOPS_FETCH));
    ck_assert(BIT(STOPPED) & ~BW_GATE_STOPS_DISPATCH);
    ck_assert(BIT(THROTTLE) & BW_GATE_STOPS_DISPATCH);
    for (int k = 0; k < BW_GATE_REASONS; k++) ck_assert_ptr_nonnull(bw_gate_reason_name((bw_gate_reason_t)k));
    teardown();
}
END_TEST

/* ---- the gauges ask the gate ---- */

static rd_kafka_t *mock_consumer(void) {
    char err[256];
    rd_kafka_conf_t *cc = rd_kafka_conf_new();
    ck_assert_int_eq(rd_kafka_conf_set(cc, "test.mock.num.brokers", "1", err, sizeof(err)), RD_KAFKA_CONF_OK);
    ck_assert_int_eq(rd_kafka_conf_set(cc, "group.id", "gate-test", err, sizeof(err)), RD_KAFKA_CONF_OK);
    ck_assert_int_eq(rd_kafka_conf_set(cc, "log_level", "3", err, sizeof(err)), RD_KAFKA_CONF_OK);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, cc, err, sizeof(err));
    ck_assert_msg(rk != NULL, "consumer: %s", err);
    ck_assert_int_eq(rd_kafka_mock_topic_create(rd_kafka_handle_mock_cluster(rk), consumer.conf->topic,
                                                consumer.conf->shard_count, 1),
                     0);
    return rk;
}

static int gauge(const bw_buf_t *out, const char *name, int shard) {
    char line[128];
    snprintf(line, sizeof(line), "%s{shard=\"%d\"} ", name, shard);
    const char *at = strstr(out->data, line);
    ck_assert_msg(at != NULL, "no %s", line);
    return atoi(at + strlen(line));
}

/* A shard paused by the throttle, or stopped at a gap, is not fetched; its buffer is not
 * full, and bulkwrite_consumer_buffer_full says so (it read 1: "fetching paused, not by an
 * operator" was taken for back-pressure). Only a full buffer reads 1. */
START_TEST(buffer_full_reads_the_buffer_alone) {
    setup();
    consumer.rk = mock_consumer();
    consumer.metrics = bw_consumer_metrics_new(consumer.conf);
    consumer.alerts = bw_alerts_new(consumer.conf, consumer.metrics, "http://127.0.0.1:1/metrics");
    bw_progress_start();
    consumer.shards[1].throttle_paused = 1; /* a signal over its critical level */
    consumer.partitions[1].fetch_paused = 1;
    consumer.partitions[2].lost_from = 5, consumer.partitions[2].lost_to = 9;
    consumer.partitions[2].fetch_paused = 1;
    consumer.shards[3].op_paused = 1;
    consumer.partitions[3].fetch_paused = 1;
    consumer.partitions[4].buffer_full = 1;
    consumer.partitions[4].fetch_paused = 1;
    bw_progress_update_gauges();
    bw_buf_t out;
    bw_buf_init(&out);
    bw_metrics_render(consumer.metrics, &out);
    ck_assert_int_eq(gauge(&out, "bulkwrite_consumer_buffer_full", 1), 0);
    ck_assert_int_eq(gauge(&out, "bulkwrite_consumer_paused", 1), 0);
    ck_assert_uint_eq(reasons_of(1), BIT(THROTTLE));
    char text[64];
    ck_assert_str_eq(bw_gate_format(reasons_of(1), text, sizeof(text)), "throttle");
    ck_assert_int_eq(gauge(&out, "bulkwrite_consumer_buffer_full", 2), 0);
    ck_assert_int_eq(gauge(&out, "bulkwrite_consumer_buffer_full", 3), 0);
    ck_assert_int_eq(gauge(&out, "bulkwrite_consumer_paused", 3), 1);
    ck_assert_int_eq(gauge(&out, "bulkwrite_consumer_buffer_full", 4), 1);
    ck_assert_int_eq(gauge(&out, "bulkwrite_consumer_buffer_full", 0), 0);
    bw_buf_free(&out);
    bw_progress_stop();
    bw_alerts_destroy(consumer.alerts);
    bw_metrics_destroy(consumer.metrics);
    rd_kafka_destroy(consumer.rk);
    teardown();
}
END_TEST

Suite *gate_suite(void) {
    Suite *s = suite_create("gate");
    TCase *tc = tcase_create("reasons");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, a_shard_that_runs_has_no_reason);
    tcase_add_test(tc, each_reason_alone);
    tcase_add_test(tc, reasons_combine);
    tcase_add_test(tc, buffer_full_reads_the_buffer_alone);
    suite_add_tcase(s, tc);
    return s;
}
