/* test_alerts.c — the Alertmanager v2 body of shard alerts (the fault tests post it to a
 * real Alertmanager). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "alerts.h"
#include "helpers.h"

static json_t *body_of(bw_alerts_t *a, int shard) {
    char *s = bw_alerts_body(a, &shard, 1, 0);
    json_error_t je;
    json_t *j = json_loads(s, 0, &je);
    ck_assert_msg(j != NULL && json_is_array(j) && json_array_size(j) == 1, "body: %s", s);
    free(s);
    return j;
}

static int is_rfc3339(const char *s) {
    /* 2026-11-30T09:13:21.757Z */
    return s && strlen(s) == 24 && s[4] == '-' && s[10] == 'T' && s[19] == '.' && s[23] == 'Z';
}

START_TEST(firing_then_resolved) {
    bw_config_t *conf = t_ref_config(); /* no webhook: no thread, the body is built all the same */
    bw_metrics_t *m = bw_metrics_new(conf, BW_METRICS_CONSUMER);
    bw_alerts_t *a = bw_alerts_new(conf, m, "http://127.0.0.1:18081/metrics");
    ck_assert(!bw_alerts_firing(a, 5));
    bw_alerts_fire(a, 5, "statement on db00005: Lock wait timeout exceeded (1205)");
    ck_assert(bw_alerts_firing(a, 5));
    bw_buf_t out;
    bw_buf_init(&out);
    bw_metrics_render(m, &out);
    ck_assert_ptr_nonnull(strstr(out.data, "bulkwrite_consumer_alert_firing{shard=\"5\"} 1\n"));
    json_t *j = body_of(a, 5), *al = json_array_get(j, 0), *labels = json_object_get(al, "labels");
    ck_assert_str_eq(json_string_value(json_object_get(labels, "alertname")), "BulkwriteShardUnhealthy");
    ck_assert_str_eq(json_string_value(json_object_get(labels, "shard")), "5");
    ck_assert_str_eq(json_string_value(json_object_get(labels, "database")), "db00005");
    ck_assert_str_eq(json_string_value(json_object_get(labels, "server")), "mysql-b");
    ck_assert_str_eq(json_string_value(json_object_get(labels, "team")), "storage"); /* alerts.labels */
    json_t *ann = json_object_get(al, "annotations");
    ck_assert_str_eq(json_string_value(json_object_get(ann, "error")),
                     "statement on db00005: Lock wait timeout exceeded (1205)");
    ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(ann, "summary")), "127.0.0.1:13307"));
    ck_assert(is_rfc3339(json_string_value(json_object_get(al, "startsAt"))));
    ck_assert_ptr_null(json_object_get(al, "endsAt")); /* firing: Alertmanager keeps it until resolve_timeout */
    ck_assert_str_eq(json_string_value(json_object_get(al, "generatorURL")), "http://127.0.0.1:18081/metrics");
    char starts[32];
    snprintf(starts, sizeof(starts), "%s", json_string_value(json_object_get(al, "startsAt")));
    json_decref(j);

    /* firing again only updates the error; the start stays */
    bw_alerts_fire(a, 5, "connect to mysql-b: refused");
    j = body_of(a, 5);
    al = json_array_get(j, 0);
    ck_assert_str_eq(json_string_value(json_object_get(al, "startsAt")), starts);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(al, "annotations"), "error")),
                     "connect to mysql-b: refused");
    json_decref(j);

    bw_alerts_resolve(a, 5);
    ck_assert(!bw_alerts_firing(a, 5));
    j = body_of(a, 5);
    al = json_array_get(j, 0);
    ck_assert(is_rfc3339(json_string_value(json_object_get(al, "endsAt"))));
    ck_assert(strcmp(json_string_value(json_object_get(al, "endsAt")), starts) >= 0);
    json_decref(j);
    bw_buf_reset(&out);
    bw_metrics_render(m, &out);
    ck_assert_ptr_null(strstr(out.data, "bulkwrite_consumer_alert_firing{shard=\"5\"} 1\n"));
    bw_buf_free(&out);
    bw_alerts_destroy(a);
    bw_metrics_destroy(m);
    bw_config_destroy(conf);
}
END_TEST

Suite *alerts_suite(void) {
    Suite *s = suite_create("alerts");
    TCase *tc = tcase_create("alerts");
    tcase_add_test(tc, firing_then_resolved);
    suite_add_tcase(s, tc);
    return s;
}
