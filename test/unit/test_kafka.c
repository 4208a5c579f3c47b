/* test_kafka.c — produce and wait for the acknowledgements (kafka.h) on librdkafka's mock
 * cluster: offsets and errors per message, a full local queue retried until the
 * deadline, a refused produce reported and counted; the two librdkafka behaviours the
 * proxy's send-at-once rests on. */
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "kafka.h"

#include <librdkafka/rdkafka_mock.h> /* after rdkafka.h (kafka.h) */

typedef struct {
    bw_kafka_acks_t *acks;
    size_t index;
} opaque_t;

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    (void)rk;
    (void)opaque;
    opaque_t *o = m->_private;
    bw_kafka_acks_delivered(o->acks, o->index, m);
}

/* A producer on a fresh one-broker mock cluster with topic "t" of 2 partitions. */
static rd_kafka_t *producer(const char *max_messages, const char *linger_ms) {
    char err[256];
    rd_kafka_conf_t *kc = rd_kafka_conf_new();
    ck_assert_int_eq(rd_kafka_conf_set(kc, "test.mock.num.brokers", "1", err, sizeof(err)), RD_KAFKA_CONF_OK);
    ck_assert_int_eq(rd_kafka_conf_set(kc, "queue.buffering.max.messages", max_messages, err, sizeof(err)),
                     RD_KAFKA_CONF_OK);
    ck_assert_int_eq(rd_kafka_conf_set(kc, "linger.ms", linger_ms, err, sizeof(err)), RD_KAFKA_CONF_OK);
    ck_assert_int_eq(rd_kafka_conf_set(kc, "log_level", "3", err, sizeof(err)), RD_KAFKA_CONF_OK);
    rd_kafka_conf_set_dr_msg_cb(kc, on_delivery);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, kc, err, sizeof(err));
    ck_assert_msg(rk != NULL, "producer: %s", err);
    ck_assert_int_eq(rd_kafka_mock_topic_create(rd_kafka_handle_mock_cluster(rk), "t", 2, 1), 0);
    return rk;
}

START_TEST(acks_carry_offsets_and_errors_per_message) {
    rd_kafka_t *rk = producer("1000", "5");
    rd_kafka_resp_err_t errs[4];
    int64_t offsets[4] = {-1, -1, -1, -1};
    bw_kafka_acks_t acks;
    bw_kafka_acks_init(&acks, rk, 1, 10000, errs, offsets);
    opaque_t o[4];
    const char *headers[] = {"bw-type", "pin", "bw-op", "create"};
    for (size_t i = 0; i < 3; i++) {
        o[i] = (opaque_t){&acks, i};
        bw_kafka_msg_t m = {.topic = "t", .partition = 1, .key = "k", .key_len = 1, .value = "v", .value_len = 1,
                            .msgflags = RD_KAFKA_MSG_F_COPY, .headers = headers, .header_cnt = 2};
        ck_assert_int_eq(bw_kafka_acks_produce(&acks, &m, i, &o[i]), 0);
    }
    ck_assert_int_eq(bw_kafka_acks_wait(&acks), 0);
    for (size_t i = 0; i < 3; i++) {
        ck_assert_int_eq(errs[i], 0);
        ck_assert_int_eq(offsets[i], (int64_t)i);
    }
    /* the topic's metadata is known now: a partition it lacks is refused at once */
    bw_kafka_acks_init(&acks, rk, 1, 10000, errs, offsets);
    o[0] = (opaque_t){&acks, 0};
    o[1] = (opaque_t){&acks, 1};
    bw_kafka_msg_t good = {.topic = "t", .partition = 0, .value = "v", .value_len = 1, .msgflags = RD_KAFKA_MSG_F_COPY};
    bw_kafka_msg_t bad = good;
    bad.partition = 7;
    ck_assert_int_eq(bw_kafka_acks_produce(&acks, &good, 0, &o[0]), 0);
    ck_assert_int_eq(bw_kafka_acks_produce(&acks, &bad, 1, &o[1]), RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION);
    ck_assert_int_eq(bw_kafka_acks_wait(&acks), RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION);
    ck_assert_int_eq(errs[0], 0);
    ck_assert_int_eq(offsets[0], 0);
    ck_assert_int_eq(errs[1], RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION);
    rd_kafka_destroy(rk);
}
END_TEST

START_TEST(full_queue_is_retried_until_the_deadline) {
    rd_kafka_t *rk = producer("1", "200"); /* one message in the queue at a time */
    opaque_t o[3];
    bw_kafka_acks_t acks;
    /* a deadline: the second waits for the first's acknowledgement, then goes */
    bw_kafka_acks_init(&acks, rk, 1, 10000, NULL, NULL);
    for (size_t i = 0; i < 3; i++) {
        o[i] = (opaque_t){&acks, i};
        bw_kafka_msg_t m = {.topic = "t", .partition = RD_KAFKA_PARTITION_UA, .value = "v", .value_len = 1,
                            .msgflags = RD_KAFKA_MSG_F_COPY};
        ck_assert_int_eq(bw_kafka_acks_produce(&acks, &m, i, &o[i]), 0);
    }
    ck_assert_int_eq(bw_kafka_acks_wait(&acks), 0);
    /* no time left: the queue is full, and that is the answer */
    bw_kafka_acks_init(&acks, rk, 1, 0, NULL, NULL);
    o[0] = (opaque_t){&acks, 0};
    o[1] = (opaque_t){&acks, 1};
    bw_kafka_msg_t m = {.topic = "t", .partition = 0, .value = "v", .value_len = 1, .msgflags = RD_KAFKA_MSG_F_COPY};
    ck_assert_int_eq(bw_kafka_acks_produce(&acks, &m, 0, &o[0]), 0);
    ck_assert_int_eq(bw_kafka_acks_produce(&acks, &m, 1, &o[1]), RD_KAFKA_RESP_ERR__QUEUE_FULL);
    ck_assert_int_eq(bw_kafka_acks_wait(&acks), RD_KAFKA_RESP_ERR__QUEUE_FULL);
    rd_kafka_destroy(rk);
}
END_TEST

/* The proxy's send-at-once (proxy/producers.c send_now) rests on two librdkafka behaviours:
 * a flush sends what linger.ms holds, and a yield on the main queue wakes a poller blocked
 * in rd_kafka_poll from another thread. */
START_TEST(flush_sends_what_linger_holds) {
    rd_kafka_t *rk = producer("1000", "60000"); /* a batch would wait a minute */
    bw_kafka_acks_t acks;
    bw_kafka_acks_init(&acks, rk, 0, 60000, NULL, NULL);
    opaque_t o = {&acks, 0};
    bw_kafka_msg_t m = {.topic = "t", .partition = 0, .value = "v", .value_len = 1, .msgflags = RD_KAFKA_MSG_F_COPY};
    ck_assert_int_eq(bw_kafka_acks_produce(&acks, &m, 0, &o), 0);
    /* within 20 s only if the flush overrode the 60 s linger; its polls serve the report */
    ck_assert_int_eq(rd_kafka_flush(rk, 20000), RD_KAFKA_RESP_ERR_NO_ERROR);
    ck_assert_int_eq(bw_kafka_acks_wait(&acks), 0);
    rd_kafka_destroy(rk);
}
END_TEST

typedef struct {
    rd_kafka_t *rk;
    int64_t returned_after_us;
} poller_t;

static void *poll_once(void *arg) {
    poller_t *p = arg;
    int64_t start = bw_now_us();
    rd_kafka_poll(p->rk, 60000); /* nothing to report: only a yield ends it early */
    p->returned_after_us = bw_now_us() - start;
    return NULL;
}

START_TEST(queue_yield_wakes_a_blocked_poll) {
    rd_kafka_t *rk = producer("1000", "5");
    rd_kafka_queue_t *reports = rd_kafka_queue_get_main(rk);
    poller_t p = {rk, -1};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, poll_once, &p), 0);
    usleep(200000); /* the poller is blocked by now */
    rd_kafka_queue_yield(reports);
    pthread_join(t, NULL);
    ck_assert_msg(p.returned_after_us >= 0 && p.returned_after_us < 30000000,
                  "rd_kafka_poll returned after %lld us, not at the yield", (long long)p.returned_after_us);
    rd_kafka_queue_destroy(reports);
    rd_kafka_destroy(rk);
}
END_TEST

/* A topic weaker than the configuration is refused, naming the setting and the way out;
 * allow_weak_durability turns the refusal into a warning. */
START_TEST(weak_topics_are_refused) {
    bw_config_t *c = t_ref_config(); /* 3 replicas, min.insync.replicas 2 */
    char err[1024] = "";
    ck_assert_int_eq(bw_kafka_check_durability(c, "t", BW_TOPIC_BATCHES, 3, 2, "delete", err, sizeof(err)), BW_OK);
    ck_assert_int_eq(bw_kafka_check_durability(c, "t", BW_TOPIC_TABLE, 5, 3, "compact", err, sizeof(err)), BW_OK);
    ck_assert_int_eq(bw_kafka_check_durability(c, "t", BW_TOPIC_BATCHES, 1, 2, "delete", err, sizeof(err)), BW_ERR_INVALID);
    ck_assert_msg(strstr(err, "kafka topic t has 1 replica of its partitions (fewest) where kafka.replication_factor is 3: "
                              "an acknowledged write survives 0 lost brokers, not 2") &&
                  strstr(err, "kafka.allow_weak_durability = true"), "%s", err);
    ck_assert_int_eq(bw_kafka_check_durability(c, "j", BW_TOPIC_EXPIRING, 3, 1, "compact,delete", err, sizeof(err)),
                     BW_ERR_INVALID);
    ck_assert_msg(strstr(err, "kafka topic j has min.insync.replicas=1 where kafka.min_insync_replicas is 2"), "%s", err);
    ck_assert_int_eq(bw_kafka_check_durability(c, "c", BW_TOPIC_TABLE, 3, 2, "delete", err, sizeof(err)), BW_ERR_INVALID);
    ck_assert_msg(strstr(err, "kafka topic c has cleanup.policy=delete"), "%s", err);
    ck_assert_int_eq(bw_kafka_check_durability(c, "c", BW_TOPIC_TABLE, 3, 2, "compact,delete", err, sizeof(err)),
                     BW_ERR_INVALID);
    ck_assert_int_eq(bw_kafka_check_durability(c, "d", BW_TOPIC_LOG, 3, 2, "delete", err, sizeof(err)), BW_OK);
    c->allow_weak_durability = 1;
    err[0] = '\0';
    ck_assert_int_eq(bw_kafka_check_durability(c, "t", BW_TOPIC_BATCHES, 1, 1, "delete", err, sizeof(err)), BW_OK);
    ck_assert_msg(strstr(err, "has 1 replica") && strstr(err, "(kafka.allow_weak_durability is true)"), "%s", err);
    bw_config_destroy(c);
}
END_TEST

Suite *kafka_suite(void) {
    Suite *s = suite_create("kafka");
    TCase *tc = tcase_create("kafka");
    tcase_add_test(tc, acks_carry_offsets_and_errors_per_message);
    tcase_add_test(tc, full_queue_is_retried_until_the_deadline);
    tcase_add_test(tc, flush_sends_what_linger_holds);
    tcase_add_test(tc, queue_yield_wakes_a_blocked_poll);
    tcase_add_test(tc, weak_topics_are_refused);
    suite_add_tcase(s, tc);
    return s;
}
