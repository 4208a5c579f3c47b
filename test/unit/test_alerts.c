/* test_alerts.c — the Alertmanager v2 body of shard alerts (the fault tests post it to a
 * real Alertmanager). */
#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alerts.h"
#include "consumer_metrics.h"
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
    bw_metrics_t *m = bw_consumer_metrics_new(conf);
    bw_alerts_t *a = bw_alerts_new(conf, m, "http://127.0.0.1:18081/metrics");
    bw_metrics_assigned(m, BW_METRIC_PER_SHARD, 5, 1); /* the consumer holds shard 5: its gauges show */
    ck_assert(!bw_alerts_firing(a, BW_ALERT_UNHEALTHY, 5));
    bw_alerts_fire(a, BW_ALERT_UNHEALTHY, 5, "statement on db00005: Lock wait timeout exceeded (1205)");
    ck_assert(bw_alerts_firing(a, BW_ALERT_UNHEALTHY, 5));
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
    bw_alerts_fire(a, BW_ALERT_UNHEALTHY, 5, "connect to mysql-b: refused");
    j = body_of(a, 5);
    al = json_array_get(j, 0);
    ck_assert_str_eq(json_string_value(json_object_get(al, "startsAt")), starts);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(al, "annotations"), "error")),
                     "connect to mysql-b: refused");
    json_decref(j);

    bw_alerts_resolve(a, BW_ALERT_UNHEALTHY, 5);
    ck_assert(!bw_alerts_firing(a, BW_ALERT_UNHEALTHY, 5));
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

/* ---- a local Alertmanager stand-in: records the latest posted state of each shard ---- */

#define SHARDS 8
static pthread_mutex_t rx_mu = PTHREAD_MUTEX_INITIALIZER;
static int rx_posts;
static int rx_resolved[SHARDS]; /* latest post for the shard had endsAt */
static int rx_bad;              /* a post that was not a v2 alerts array of complete alerts */

typedef struct {
    char *data;
    size_t len;
} rx_body_t;

static enum MHD_Result rx_handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *data, size_t *size, void **state) {
    (void)cls;
    (void)version;
    rx_body_t *b = *state;
    if (!b) {
        *state = calloc(1, sizeof(rx_body_t));
        return MHD_YES;
    }
    if (*size) {
        b->data = realloc(b->data, b->len + *size + 1);
        memcpy(b->data + b->len, data, *size);
        b->len += *size;
        b->data[b->len] = '\0';
        *size = 0;
        return MHD_YES;
    }
    json_t *j = b->data ? json_loads(b->data, 0, NULL) : NULL;
    pthread_mutex_lock(&rx_mu);
    if (strcmp(method, "POST") || strcmp(url, "/api/v2/alerts") || !json_is_array(j)) rx_bad++;
    size_t i;
    json_t *al;
    json_array_foreach(j, i, al) {
        json_t *labels = json_object_get(al, "labels");
        const char *shard = json_string_value(json_object_get(labels, "shard"));
        if (!shard || !json_string_value(json_object_get(labels, "alertname")) ||
            !json_string_value(json_object_get(json_object_get(al, "annotations"), "error")) ||
            !json_string_value(json_object_get(al, "startsAt")) || atoi(shard) >= SHARDS)
            rx_bad++;
        else
            rx_resolved[atoi(shard)] = json_object_get(al, "endsAt") != NULL;
    }
    rx_posts++;
    pthread_mutex_unlock(&rx_mu);
    json_decref(j);
    free(b->data);
    free(b);
    *state = NULL;
    struct MHD_Response *r = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

static bw_alerts_t *racing;
static void *flapper(void *arg) {
    int shard = (int)(intptr_t)arg;
    for (int i = 0; i < 200; i++) {
        char err[64];
        snprintf(err, sizeof(err), "timeout %d", i);
        bw_alerts_fire(racing, BW_ALERT_UNHEALTHY, shard, err);
        if (i % 3 == 0) usleep(100);
        bw_alerts_resolve(racing, BW_ALERT_UNHEALTHY, shard);
    }
    return NULL;
}

/* Threads fire and resolve alerts while the sender thread posts them: every post is a
 * well-formed v2 array, and the receiver ends with every shard resolved. (Also run
 * under ThreadSanitizer by make check.) */
START_TEST(concurrent_alerts_reach_the_webhook) {
    struct MHD_Daemon *d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL, NULL, rx_handler, NULL,
                                            MHD_OPTION_END);
    ck_assert_ptr_nonnull(d);
    unsigned port = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT)->port;
    char url[128];
    snprintf(url, sizeof(url), "alertmanager_url = \"http://127.0.0.1:%u/api/v2/alerts\";", port);
    bw_config_t *conf = t_conf_variant_load("alertmanager_url = \"\";", url);
    bw_metrics_t *m = bw_consumer_metrics_new(conf);
    racing = bw_alerts_new(conf, m, "http://127.0.0.1:1/metrics");
    pthread_t th[4];
    for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, flapper, (void *)(intptr_t)(i + 2));
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    int done = 0;
    for (int tries = 0; tries < 100 && !done; tries++) {
        usleep(100000);
        pthread_mutex_lock(&rx_mu);
        done = rx_posts > 0 && rx_resolved[2] && rx_resolved[3] && rx_resolved[4] && rx_resolved[5];
        pthread_mutex_unlock(&rx_mu);
    }
    bw_alerts_destroy(racing);
    MHD_stop_daemon(d);
    pthread_mutex_lock(&rx_mu);
    ck_assert_msg(done, "the receiver did not end with shards 2-5 resolved (%d posts)", rx_posts);
    ck_assert_int_eq(rx_bad, 0);
    pthread_mutex_unlock(&rx_mu);
    bw_metrics_destroy(m);
    bw_config_destroy(conf);
}
END_TEST

static long seconds_of(const char *rfc3339) { /* 2026-11-30T09:13:21.757Z, UTC */
    struct tm tm = {0};
    ck_assert(sscanf(rfc3339, "%d-%d-%dT%d:%d:%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
                     &tm.tm_sec) == 6);
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return (long)timegm(&tm);
}

/* BulkwriteServerDown is one alert per server: labelled with the server and its address,
 * no shard; it goes with the same metrics and the same firing/resolved contract. */
START_TEST(server_alert_names_the_server) {
    bw_config_t *conf = t_ref_config();
    bw_metrics_t *m = bw_consumer_metrics_new(conf);
    bw_alerts_t *a = bw_alerts_new(conf, m, "http://127.0.0.1:18081/metrics");
    bw_alerts_fire_server(a, 1, "connect to mysql-b (127.0.0.1:13307): Connection refused");
    ck_assert(bw_alerts_firing(a, BW_ALERT_SERVER_DOWN, 1));
    ck_assert(!bw_alerts_firing(a, BW_ALERT_SERVER_DOWN, 0));
    /* each of its shards' status names it (ShardStatus.alerts), with the shard's own */
    const char *names[BW_ALERT_KINDS];
    bw_alerts_fire(a, BW_ALERT_NO_PROGRESS, 5, "no batch for 60 s");
    ck_assert_int_eq(bw_alerts_of_shard(a, 5, names, BW_ALERT_KINDS), 2);
    ck_assert_str_eq(names[0], "BulkwriteShardNoProgress");
    ck_assert_str_eq(names[1], "BulkwriteServerDown");
    ck_assert_int_eq(bw_alerts_of_shard(a, 4, names, BW_ALERT_KINDS), 1);
    ck_assert_int_eq(bw_alerts_of_shard(a, 1, names, BW_ALERT_KINDS), 0); /* mysql-a's */
    bw_alerts_resolve(a, BW_ALERT_NO_PROGRESS, 5);
    int index = BW_ALERT_SERVER_DOWN * conf->shard_count + 1;
    json_t *j = body_of(a, index), *al = json_array_get(j, 0), *labels = json_object_get(al, "labels");
    ck_assert_str_eq(json_string_value(json_object_get(labels, "alertname")), "BulkwriteServerDown");
    ck_assert_str_eq(json_string_value(json_object_get(labels, "server")), "mysql-b");
    ck_assert_str_eq(json_string_value(json_object_get(labels, "address")), "127.0.0.1:13307");
    ck_assert_str_eq(json_string_value(json_object_get(labels, "team")), "storage");
    ck_assert_ptr_null(json_object_get(labels, "shard"));
    ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(json_object_get(al, "annotations"), "summary")),
                                 "shards 4 to 7"));
    json_decref(j);
    bw_alerts_resolve_server(a, 1);
    ck_assert(!bw_alerts_firing(a, BW_ALERT_SERVER_DOWN, 1));
    j = body_of(a, index);
    const char *resolved_at = json_string_value(json_object_get(json_array_get(j, 0), "endsAt"));
    ck_assert(is_rfc3339(resolved_at));
    char now[32];
    snprintf(now, sizeof(now), "%s", resolved_at);
    json_decref(j);
    /* handed over (its shards went to another consumer): it ends an hour on, not now, so
     * that Alertmanager keeps it until the new holder fires it */
    bw_alerts_fire_server(a, 1, "connect to mysql-b (127.0.0.1:13307): Connection refused");
    bw_alerts_hand_over_server(a, 1, 3600 * 1000);
    ck_assert(!bw_alerts_firing(a, BW_ALERT_SERVER_DOWN, 1));
    j = body_of(a, index);
    const char *ends = json_string_value(json_object_get(json_array_get(j, 0), "endsAt"));
    ck_assert(is_rfc3339(ends));
    long later = seconds_of(ends) - seconds_of(now);
    ck_assert_msg(later >= 3599 && later <= 3601, "handed over at %s, ends %s: not an hour on", now, ends);
    json_decref(j);
    bw_alerts_destroy(a);
    bw_metrics_destroy(m);
    bw_config_destroy(conf);
}
END_TEST

Suite *alerts_suite(void) {
    Suite *s = suite_create("alerts");
    TCase *tc = tcase_create("alerts");
    tcase_add_test(tc, firing_then_resolved);
    tcase_add_test(tc, server_alert_names_the_server);
    tcase_add_test(tc, concurrent_alerts_reach_the_webhook);
    suite_add_tcase(s, tc);
    return s;
}
