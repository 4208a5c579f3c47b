/* test_backlog.c — per-shard admission: what counts as backlog, when a shard is full,
 * and what moves it (acknowledgements, status records, log start offsets). */
#include "backlog.h"
#include "helpers.h"

#include <pthread.h>
#include <unistd.h>

/* 8 shards, at most 10 messages and 64 KiB unapplied per shard */
static bw_config_t *small_bounds(void) {
    bw_config_t *c = t_conf_variant_load("backlog_max_messages = 1000000;", "backlog_max_messages = 10;");
    ck_assert_ptr_nonnull(c);
    c->backlog_max_bytes = 65536;
    return c;
}

/* admits and acknowledges n messages of `bytes` on shard s at offsets from `first` */
static void produce(bw_backlog_t *b, int s, int n, size_t bytes, int64_t first) {
    for (int i = 0; i < n; i++) {
        ck_assert_msg(bw_backlog_admit(b, s, bytes, 0, NULL), "message %d refused", i);
        bw_backlog_settle(b, s, bytes, first + i);
    }
}

START_TEST(message_bound_refuses_then_status_frees) {
    bw_config_t *c = small_bounds();
    bw_backlog_t *b = bw_backlog_new(c, NULL, 0);
    produce(b, 3, 10, 100, 0);
    bw_backlog_view_t v;
    ck_assert(!bw_backlog_admit(b, 3, 100, 0, &v));
    ck_assert_int_eq(v.messages, 10);
    ck_assert_int_eq(v.bytes, 1000);
    ck_assert_int_eq(v.high, 10);
    /* another shard is not affected */
    ck_assert(bw_backlog_admit(b, 4, 100, 0, NULL));
    bw_backlog_settle(b, 4, 100, 0);
    /* a consumer applied 4 of shard 3's messages: 4 more fit, then it is full again */
    bw_backlog_observe(b, 3, 4, 10, -1);
    bw_backlog_view(b, 3, &v);
    ck_assert_int_eq(v.messages, 6);
    ck_assert_int_eq(v.bytes, 600);
    ck_assert_int_eq(v.applied, 4);
    produce(b, 3, 4, 100, 10);
    ck_assert(!bw_backlog_admit(b, 3, 100, 0, NULL));
    /* a stale status record (older applied offset) never shrinks what is known */
    bw_backlog_observe(b, 3, 2, 5, -1);
    bw_backlog_view(b, 3, &v);
    ck_assert_int_eq(v.applied, 4);
    ck_assert_int_eq(v.messages, 10);
    bw_backlog_destroy(b);
    bw_config_destroy(c);
}
END_TEST

START_TEST(byte_bound_and_oversized_message) {
    bw_config_t *c = small_bounds();
    bw_backlog_t *b = bw_backlog_new(c, NULL, 0);
    /* an empty shard takes a message bigger than the whole bound: progress is always possible */
    ck_assert(bw_backlog_admit(b, 1, 100000, 0, NULL));
    /* while it is reserved (not yet acknowledged), nothing else fits */
    ck_assert(!bw_backlog_admit(b, 1, 10, 0, NULL));
    bw_backlog_settle(b, 1, 100000, 0);
    ck_assert(!bw_backlog_admit(b, 1, 10, 0, NULL));
    bw_backlog_observe(b, 1, 1, 1, -1); /* applied */
    produce(b, 1, 2, 30000, 1);
    bw_backlog_view_t v;
    ck_assert(!bw_backlog_admit(b, 1, 10000, 0, &v)); /* 60000 + 10000 > 65536 */
    ck_assert_int_eq(v.bytes, 60000);
    ck_assert(bw_backlog_admit(b, 1, 5000, 0, NULL));
    bw_backlog_settle(b, 1, 5000, -1); /* failed: the reservation goes, nothing is added */
    bw_backlog_view(b, 1, &v);
    ck_assert_int_eq(v.bytes, 60000);
    ck_assert_int_eq(v.messages, 2);
    bw_backlog_destroy(b);
    bw_config_destroy(c);
}
END_TEST

/* Messages of other proxies (seen only as a higher watermark) count at this proxy's mean
 * size; Kafka's log start offset bounds what can still be unapplied. */
START_TEST(other_proxies_and_log_start) {
    bw_config_t *c = small_bounds();
    c->backlog_max_messages = 1000;
    bw_backlog_t *b = bw_backlog_new(c, NULL, 0);
    produce(b, 2, 2, 2000, 0);
    bw_backlog_observe(b, 2, 0, 12, -1); /* 10 more messages from elsewhere */
    bw_backlog_view_t v;
    bw_backlog_view(b, 2, &v);
    ck_assert_int_eq(v.messages, 12);
    ck_assert_int_eq(v.bytes, 2 * 2000 + 10 * 2000);
    /* a restarted proxy with no status yet: the log start offset is where unapplied data can begin */
    bw_backlog_t *fresh = bw_backlog_new(c, NULL, 0);
    bw_backlog_observe(fresh, 2, -1, 12, 5);
    bw_backlog_view(fresh, 2, &v);
    ck_assert_int_eq(v.messages, 7);
    ck_assert_int_eq(v.low, 5);
    bw_backlog_destroy(fresh);
    bw_backlog_destroy(b);
    bw_config_destroy(c);
}
END_TEST

/* On the embedded Kafka a restarted proxy counts what it did not write as the largest
 * message it could be: 5 unknown messages may be 5 MB, over the 4 MiB cap. */
START_TEST(embedded_restart_is_pessimistic) {
    bw_config_t *c = t_ref_config();
    bw_backlog_t *b = bw_backlog_new(c, NULL, 1);
    bw_backlog_observe(b, 2, 10, 15, -1);
    bw_backlog_view_t v;
    ck_assert(!bw_backlog_admit(b, 2, 100, 0, &v));
    ck_assert_int_eq(v.bytes, 5LL * c->message_max_bytes);
    bw_backlog_observe(b, 2, 12, 15, -1); /* 3 left: 3 MB, a small message fits */
    ck_assert(bw_backlog_admit(b, 2, 100, 0, NULL));
    bw_backlog_destroy(b);
    bw_config_destroy(c);
}
END_TEST

static bw_backlog_t *waking;
static void *apply_later(void *arg) {
    (void)arg;
    usleep(50000);
    bw_backlog_observe(waking, 3, 5, 10, -1); /* a consumer reports 5 messages applied */
    return NULL;
}

/* A full shard makes a request wait (up to its deadline) until the consumer reports
 * progress, instead of answering 429 at once. */
START_TEST(admission_waits_for_progress) {
    bw_config_t *c = small_bounds();
    waking = bw_backlog_new(c, NULL, 0);
    produce(waking, 3, 10, 100, 0);
    ck_assert(!bw_backlog_admit(waking, 3, 100, bw_now_us() + 20000, NULL)); /* nobody applies: refused */
    pthread_t t;
    pthread_create(&t, NULL, apply_later, NULL);
    int64_t t0 = bw_now_us();
    ck_assert(bw_backlog_admit(waking, 3, 100, t0 + 30 * 1000000LL, NULL));
    ck_assert_int_lt(bw_now_us() - t0, 20 * 1000000LL); /* woken by the report, not the deadline */
    pthread_join(t, NULL);
    bw_backlog_destroy(waking);
    bw_config_destroy(c);
}
END_TEST

/* On the embedded Kafka the bounds stay below the mock cluster's 5 MiB per partition. */
START_TEST(embedded_caps) {
    bw_config_t *c = t_ref_config();
    bw_backlog_t *b = bw_backlog_new(c, NULL, 1);
    bw_backlog_view_t v;
    bw_backlog_view(b, 0, &v);
    ck_assert_int_eq(v.max_bytes, BW_BACKLOG_EMBEDDED_MAX_BYTES);
    ck_assert_int_eq(v.max_messages, BW_BACKLOG_EMBEDDED_MAX_MESSAGES);
    ck_assert_int_lt(v.max_bytes, 5 * 1024 * 1024);
    bw_backlog_destroy(b);
    bw_backlog_t *real = bw_backlog_new(c, NULL, 0);
    bw_backlog_view(real, 0, &v);
    ck_assert_int_eq(v.max_bytes, c->backlog_max_bytes);
    bw_backlog_destroy(real);
    bw_config_destroy(c);
}
END_TEST

Suite *backlog_suite(void) {
    Suite *s = suite_create("backlog");
    TCase *tc = tcase_create("admission");
    tcase_add_test(tc, message_bound_refuses_then_status_frees);
    tcase_add_test(tc, byte_bound_and_oversized_message);
    tcase_add_test(tc, other_proxies_and_log_start);
    tcase_add_test(tc, embedded_caps);
    tcase_add_test(tc, embedded_restart_is_pessimistic);
    tcase_add_test(tc, admission_waits_for_progress);
    suite_add_tcase(s, tc);
    return s;
}
