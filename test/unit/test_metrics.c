/* test_metrics.c — the consumer's per-shard budget series: the statement and row rates
 * in force and the statements counter, with their units in HELP. */
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "metrics.h"

static char *render(bw_metrics_t *m) {
    bw_buf_t out;
    bw_buf_init(&out);
    bw_metrics_render(m, &out);
    return out.data; /* the buffer's storage, freed by the caller */
}

START_TEST(budgets_and_statements) {
    bw_config_t *conf = t_ref_config();
    bw_metrics_t *m = bw_metrics_new(conf, BW_METRICS_CONSUMER);
    char *text = render(m);
    /* nothing held, nothing run: HELP and TYPE only */
    ck_assert_ptr_nonnull(strstr(text, "# HELP bulkwrite_consumer_rate_rows_per_second Effective row budget in rows per second"));
    ck_assert_ptr_nonnull(strstr(text, "# TYPE bulkwrite_consumer_rate_rows_per_second gauge\n"));
    ck_assert_ptr_nonnull(strstr(text, "# HELP bulkwrite_consumer_rate_batches_per_second Effective rate limit in statements per second"));
    ck_assert_ptr_nonnull(strstr(text, "# HELP bulkwrite_consumer_statements_total SQL statements run on the shard"));
    ck_assert_ptr_nonnull(strstr(text, "# TYPE bulkwrite_consumer_statements_total counter\n"));
    ck_assert_ptr_null(strstr(text, "{shard=\"2\"}"));
    free(text);

    bw_metrics_shard_state(m, 2, 40, 0, 0, 0);
    bw_metrics_shard_row_rate(m, 2, 2500);
    bw_metrics_shard_statements(m, 2, 3);
    bw_metrics_shard_statements(m, 2, 4); /* adds */
    bw_metrics_shard_statements(m, 6, 1); /* a shard not held: its counter shows, no gauges */
    text = render(m);
    ck_assert_ptr_nonnull(strstr(text, "\nbulkwrite_consumer_rate_batches_per_second{shard=\"2\"} 40\n"));
    ck_assert_ptr_nonnull(strstr(text, "\nbulkwrite_consumer_rate_rows_per_second{shard=\"2\"} 2500\n"));
    ck_assert_ptr_nonnull(strstr(text, "\nbulkwrite_consumer_statements_total{shard=\"2\"} 7\n"));
    ck_assert_ptr_nonnull(strstr(text, "\nbulkwrite_consumer_statements_total{shard=\"6\"} 1\n"));
    ck_assert_ptr_null(strstr(text, "bulkwrite_consumer_rate_rows_per_second{shard=\"6\"}"));
    free(text);

    /* revoked: the gauges leave, the counter stays */
    bw_metrics_shard_forget(m, 2);
    text = render(m);
    ck_assert_ptr_null(strstr(text, "bulkwrite_consumer_rate_rows_per_second{shard=\"2\"}"));
    ck_assert_ptr_nonnull(strstr(text, "\nbulkwrite_consumer_statements_total{shard=\"2\"} 7\n"));
    free(text);
    /* held again: the row budget starts from none until it is set */
    bw_metrics_shard_state(m, 2, 40, 0, 0, 0);
    text = render(m);
    ck_assert_ptr_nonnull(strstr(text, "\nbulkwrite_consumer_rate_rows_per_second{shard=\"2\"} 0\n"));
    free(text);
    bw_metrics_destroy(m);
    bw_config_destroy(conf);
}
END_TEST

START_TEST(client_refusals) {
    bw_config_t *conf = t_ref_config();
    bw_metrics_t *m = bw_metrics_new(conf, BW_METRICS_PROXY);
    char *text = render(m);
    ck_assert_ptr_nonnull(strstr(text, "# TYPE bulkwrite_proxy_client_forbidden_total counter\n"));
    ck_assert_ptr_null(strstr(text, "{client="));
    free(text);
    bw_metrics_client_refused(m, "spam-cleanup", 0, 3);
    bw_metrics_client_refused(m, "feed", 1, 0);
    bw_metrics_client_refused(m, "spam-cleanup", 1, 2); /* adds */
    text = render(m);
    ck_assert_ptr_nonnull(strstr(text, "\nbulkwrite_proxy_client_ops_out_of_scope_total{client=\"spam-cleanup\"} 5\n"));
    ck_assert_ptr_nonnull(strstr(text, "\nbulkwrite_proxy_client_forbidden_total{client=\"spam-cleanup\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(text, "\nbulkwrite_proxy_client_forbidden_total{client=\"feed\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(text, "\nbulkwrite_proxy_client_ops_out_of_scope_total{client=\"feed\"} 0\n"));
    free(text);
    /* bounded: 2 names, then c0 … c997 make 1,000; c998 … c1099 add up under "(other)" */
    char name[32];
    for (int i = 0; i < 1100; i++) {
        snprintf(name, sizeof(name), "c%d", i);
        bw_metrics_client_refused(m, name, 1, 0);
    }
    text = render(m);
    ck_assert_ptr_nonnull(strstr(text, "\nbulkwrite_proxy_client_forbidden_total{client=\"(other)\"} 102\n"));
    ck_assert_ptr_null(strstr(text, "{client=\"c1000\"}"));
    free(text);
    bw_metrics_destroy(m);
    bw_config_destroy(conf);
}
END_TEST

Suite *metrics_suite(void) {
    Suite *s = suite_create("metrics");
    TCase *tc = tcase_create("metrics");
    tcase_add_test(tc, budgets_and_statements);
    tcase_add_test(tc, client_refusals);
    suite_add_tcase(s, tc);
    return s;
}
