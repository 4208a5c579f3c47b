/* test_metrics.c — the daemons' metric tables: every row rendered (one HELP and TYPE,
 * samples with its labels) and in docs/api.md, the text accepted by promtool; the
 * consumer's per-shard budget series; the clients' bounded labels; the failure classes'
 * kind labels; the engine's rules for which series show. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "consumer_metrics.h"
#include "db.h"
#include "helpers.h"
#include "metrics.h"
#include "proxy_metrics.h"
#include "quota.h"
#include "throttle.h"
#include "version.h"

/* Both daemons' tables, the proxy's first (as docs/api.md lists them). */
static const bw_metrics_table_t *const tables[] = {&bw_proxy_metrics, &bw_consumer_metrics};
#define TABLES 2

static char *render(bw_metrics_t *m) {
    bw_buf_t out;
    bw_buf_init(&out);
    bw_metrics_render(m, &out);
    return out.data; /* the buffer's storage, freed by the caller */
}

START_TEST(budgets_and_statements) {
    bw_config_t *conf = t_ref_config();
    bw_metrics_t *m = bw_consumer_metrics_new(conf);
    char *text = render(m);
    /* nothing held, nothing run: HELP and TYPE only */
    ck_assert_ptr_nonnull(strstr(text, "# HELP bulkwrite_consumer_rate_rows_per_second Effective row budget in rows per second"));
    ck_assert_ptr_nonnull(strstr(text, "# TYPE bulkwrite_consumer_rate_rows_per_second gauge\n"));
    ck_assert_ptr_nonnull(strstr(text, "# HELP bulkwrite_consumer_rate_batches_per_second Effective rate limit in statements per second"));
    ck_assert_ptr_nonnull(strstr(text, "# HELP bulkwrite_consumer_statements_total SQL statements run on the shard"));
    ck_assert_ptr_nonnull(strstr(text, "# TYPE bulkwrite_consumer_statements_total counter\n"));
    ck_assert_ptr_null(strstr(text, "{shard=\"2\"}"));
    free(text);

    bw_consumer_metrics_shard(m, 2, 40, 2500, 0, 0, 0, 0);
    bw_metrics_add(m, BW_CM_STATEMENTS, 2, 0, 3);
    bw_metrics_add(m, BW_CM_STATEMENTS, 2, 0, 4); /* adds */
    bw_metrics_add(m, BW_CM_STATEMENTS, 6, 0, 1); /* a shard not held: its counter shows, no gauges */
    text = render(m);
    ck_assert_ptr_nonnull(strstr(text, "\nbulkwrite_consumer_rate_batches_per_second{shard=\"2\"} 40\n"));
    ck_assert_ptr_nonnull(strstr(text, "\nbulkwrite_consumer_rate_rows_per_second{shard=\"2\"} 2500\n"));
    ck_assert_ptr_nonnull(strstr(text, "\nbulkwrite_consumer_statements_total{shard=\"2\"} 7\n"));
    ck_assert_ptr_nonnull(strstr(text, "\nbulkwrite_consumer_statements_total{shard=\"6\"} 1\n"));
    ck_assert_ptr_null(strstr(text, "bulkwrite_consumer_rate_rows_per_second{shard=\"6\"}"));
    free(text);

    /* revoked: the gauges leave, the counter stays */
    bw_metrics_assigned(m, BW_METRIC_PER_SHARD, 2, 0);
    text = render(m);
    ck_assert_ptr_null(strstr(text, "bulkwrite_consumer_rate_rows_per_second{shard=\"2\"}"));
    ck_assert_ptr_nonnull(strstr(text, "\nbulkwrite_consumer_statements_total{shard=\"2\"} 7\n"));
    free(text);
    /* held again: the row budget starts from none until it is set */
    bw_metrics_assigned(m, BW_METRIC_PER_SHARD, 2, 1);
    text = render(m);
    ck_assert_ptr_nonnull(strstr(text, "\nbulkwrite_consumer_rate_rows_per_second{shard=\"2\"} 0\n"));
    free(text);
    bw_metrics_destroy(m);
    bw_config_destroy(conf);
}
END_TEST

START_TEST(client_refusals) {
    bw_config_t *conf = t_ref_config();
    bw_metrics_t *m = bw_metrics_new(conf, &bw_proxy_metrics);
    char *text = render(m);
    ck_assert_ptr_nonnull(strstr(text, "# TYPE bulkwrite_proxy_client_forbidden_total counter\n"));
    ck_assert_ptr_null(strstr(text, "{client="));
    free(text);
    bw_proxy_metrics_client_refused(m, "spam-cleanup", 0, 3);
    bw_proxy_metrics_client_refused(m, "feed", 1, 0);
    bw_proxy_metrics_client_refused(m, "spam-cleanup", 1, 2); /* adds */
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
        bw_proxy_metrics_client_refused(m, name, 1, 0);
    }
    text = render(m);
    ck_assert_ptr_nonnull(strstr(text, "\nbulkwrite_proxy_client_forbidden_total{client=\"(other)\"} 102\n"));
    ck_assert_ptr_null(strstr(text, "{client=\"c1000\"}"));
    free(text);
    bw_metrics_destroy(m);
    bw_config_destroy(conf);
}
END_TEST


/* Every row of the daemon's table set, with lanes and the throttle on: every family shows. */
static bw_metrics_t *filled(const bw_config_t *conf, const bw_metrics_table_t *t) {
    if (t == &bw_proxy_metrics) {
        bw_metrics_t *m = bw_metrics_new(conf, t);
        bw_metrics_add(m, BW_PM_REQUESTS, 401, 0, 1);
        bw_proxy_metrics_request(m, 202, 10, 2, 1, 3, 1500);
        bw_proxy_metrics_request(m, 429, 1, 0, 0, 1, 2500000);
        bw_metrics_add(m, BW_PM_BACKLOG_REFUSED_OPS, 3, 0, 5);
        bw_metrics_add(m, BW_PM_PARTS_TAKEN_BEFORE, 0, 0, 2);
        bw_metrics_add(m, BW_PM_LINGER_FLUSHES, 0, 0, 1);
        bw_metrics_add(m, BW_PM_PRODUCERS_REBUILT, 0, 0, 1);
        bw_proxy_metrics_client_refused(m, "feed", 1, 2);
        int feed = bw_metrics_client(m, "feed");
        bw_metrics_add(m, BW_PM_CLIENT_OVER_QUOTA, feed, BW_QUOTA_BYTES, 1);
        bw_metrics_set(m, BW_PM_CLIENT_QUOTA_SHARE, feed, BW_QUOTA_OPS, 0.5); /* an ops quota shared by two proxies */
        bw_proxy_metrics_client_accepted(m, "spam", 7, 900);
        bw_proxy_metrics_jobs(m, &(bw_jobs_stats_t){.entries = 1, .bytes = 2, .max_bytes = 3, .evicted = 4,
                                                    .found_in_topic = 5},
                              &(bw_timers_stats_t){.held = 6, .due = 2, .bytes = 4096});
        bw_metrics_add(m, BW_PM_HELD_BATCHES_RELEASED, 0, 0, 7);
        return m;
    }
    bw_metrics_t *m = bw_consumer_metrics_new(conf);
    bw_consumer_metrics_applied(m, 1, 100, 2, 3, 4, 5, 2000);
    for (int f = BW_FAIL_RETRY; f < BW_FAIL_CLASSES; f++) bw_metrics_add(m, BW_CM_ERRORS, 4, f, f);
    bw_metrics_add(m, BW_CM_RETRIES, 1, 0, 1);
    bw_metrics_add(m, BW_CM_RECONNECTS, 1, 0, 2);
    bw_consumer_metrics_shard(m, 1, 40.5, 2500, 1, 1, 1, 17);
    bw_metrics_add(m, BW_CM_STATEMENTS, 1, 0, 9);
    bw_metrics_set(m, BW_CM_ALERT_FIRING, 1, 0, 1);
    bw_metrics_set(m, BW_CM_LOST_MESSAGES, 1, 0, 3);
    bw_consumer_metrics_lane(m, 1, 1, 4, 6);
    bw_consumer_metrics_lane(m, conf->shard_count + 1, 1, 5, 7);
    bw_metrics_set(m, BW_CM_SERVER_DOWN, 1, 0, 1);
    bw_consumer_metrics_throttle(m, 1, BW_THROTTLE_THROTTLED, 33.5);
    bw_consumer_metrics_signal(m, 0, BW_SIGNAL_REPLICATION_LAG, NAN, 1000);
    bw_consumer_metrics_signal(m, 1, BW_SIGNAL_LATENCY, 7.25, 100);
    bw_consumer_metrics_budget(m, 0, 12.5, BW_METRICS_UNSET);
    bw_metrics_set(m, BW_CM_KEPT_MESSAGES, 0, 0, 420);
    bw_metrics_set(m, BW_CM_REPLICA_UNREAD_SECONDS, 0, 0, 12.5);
    bw_metrics_add(m, BW_CM_ALERT_POSTS, 0, 0, 1); /* ok */
    return m;
}

/* Replaces the first `find` of text with repl (malloc'd). */
static char *replaced(const char *text, const char *find, const char *repl) {
    const char *at = strstr(text, find);
    ck_assert_msg(at != NULL, "reference config lacks \"%s\"", find);
    size_t pre = (size_t)(at - text);
    char *out = malloc(strlen(text) - strlen(find) + strlen(repl) + 1);
    memcpy(out, text, pre);
    strcpy(out + pre, repl);
    strcat(out, at + strlen(find));
    return out;
}

/* The reference config with two lanes besides the default, and a replica listed for the
 * first server: every family has series. */
static bw_config_t *lanes_config(void) {
    char *a = replaced(t_ref_conf_text(), "lanes = (", "lanes = ( { name = \"urgent\"; weight = 4; }, { name = \"bulk\"; }");
    char *b = replaced(a, "replicas = [ ];", "replicas = [ \"127.0.0.1:3307\" ];");
    char *path = t_write_temp(b), err[1024] = "";
    bw_config_t *c = bw_config_load(path, err, sizeof(err));
    ck_assert_msg(c != NULL, "config variant does not load: %s", err);
    t_unlink_free(path);
    free(a);
    free(b);
    return c;
}

static const char *const type_names[] = {"counter", "gauge", "histogram"};

/* How often `needle` occurs in `text`. */
static int count_of(const char *text, const char *needle) {
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

/* The label names of a sample line ("name{a=\"x\",b=\"y\"} 1"), "a,b"; "" for none. */
static void label_names(const char *line, char *out, size_t size) {
    size_t n = 0;
    out[0] = '\0';
    const char *p = strchr(line, '{'), *sp = strchr(line, ' ');
    if (!p || (sp && sp < p)) return;
    for (p++; *p && *p != '}';) {
        const char *eq = strchr(p, '=');
        n += (size_t)snprintf(out + n, size - n, "%s%.*s", n ? "," : "", (int)(eq - p), p);
        p = strchr(eq + 2, '"') + 1; /* past the value (no escaped quotes in ours) */
        if (*p == ',') p++;
    }
}

static const char *labels_of(const bw_metric_row_t *r) { return r->labels ? r->labels : ""; }

/* Each row of each table: one HELP and one TYPE, and samples, each with exactly its labels
 * (a histogram's buckets: le); no family of the other daemon, none the table does not have. */
START_TEST(every_row_rendered) {
    bw_config_t *conf = lanes_config();
    for (int t = 0; t < TABLES; t++) {
        bw_metrics_t *m = filled(conf, tables[t]);
        char *text = render(m);
        char head[512], sample[160];
        for (size_t i = 0; i < tables[!t]->row_cnt; i++) {
            snprintf(sample, sizeof(sample), "# HELP %s ", tables[!t]->rows[i].name);
            ck_assert_msg(!strstr(text, sample), "%s shown by the other daemon", tables[!t]->rows[i].name);
        }
        for (size_t i = 0; i < tables[t]->row_cnt; i++) {
            const bw_metric_row_t *d = &tables[t]->rows[i];
            snprintf(head, sizeof(head), "# HELP %s %s\n# TYPE %s %s\n", d->name, d->help, d->name, type_names[d->type]);
            snprintf(sample, sizeof(sample), "# HELP %s ", d->name);
            ck_assert_msg(count_of(text, head) == 1 && count_of(text, sample) == 1, "%s: not one HELP and TYPE", d->name);
            int samples = 0;
            snprintf(sample, sizeof(sample), "\n%s%s", d->name, d->type == BW_METRIC_HISTOGRAM ? "_bucket" : "");
            for (const char *p = text; (p = strstr(p, sample)); p++) {
                const char *after = p + strlen(sample);
                if (*after != '{' && *after != ' ') continue; /* another family's longer name */
                char got[128];
                label_names(p + 1, got, sizeof(got));
                ck_assert_msg(strcmp(got, d->type == BW_METRIC_HISTOGRAM ? "le" : labels_of(d)) == 0,
                              "%s: a sample labelled {%s}, the table says {%s}", d->name, got, labels_of(d));
                samples++;
            }
            ck_assert_msg(samples > 0, "%s: no sample", d->name);
        }
        ck_assert_int_eq(count_of(text, "# HELP "), (int)tables[t]->row_cnt + BW_METRICS_PROCESS_FAMILIES);
        ck_assert_int_eq(count_of(text, "# TYPE "), (int)tables[t]->row_cnt + BW_METRICS_PROCESS_FAMILIES);
        /* which build runs, and the process's own numbers, read from /proc */
        char build[160];
        snprintf(build, sizeof(build), "\nbulkwrite_build_info{version=\"%s\",commit=\"%s\"} 1\n", bw_version, bw_commit);
        ck_assert_msg(strstr(text, build), "no %s", build);
        const char *rss = strstr(text, "\nprocess_resident_memory_bytes ");
        ck_assert_msg(rss && atoll(rss + 31) > 1 << 20, "process_resident_memory_bytes missing or under 1 MiB");
        const char *fds = strstr(text, "\nprocess_open_fds ");
        ck_assert_msg(fds && atoi(fds + 18) >= 3, "process_open_fds missing or under 3 (stdin, stdout, stderr)");
        free(text);
        bw_metrics_destroy(m);
    }
    bw_config_destroy(conf);
}
END_TEST

/* What the tables promise of themselves: unique names under the daemon's prefix, counters
 * in _total, HELP and doc text that need no escaping, as many label names as the row's
 * per and second label give. */
START_TEST(table_rows_are_sound) {
    static const char *const prefix[TABLES] = {"bulkwrite_proxy_", "bulkwrite_consumer_"};
    static const int per_labels[] = {[BW_METRIC_PER_NONE] = 0,    [BW_METRIC_PER_SHARD] = 1, [BW_METRIC_PER_SERVER] = 1,
                                     [BW_METRIC_PER_REPLICA] = 2, [BW_METRIC_PER_SLOT] = 2,  [BW_METRIC_PER_CLIENT] = 1,
                                     [BW_METRIC_PER_CODE] = 1};
    size_t n = 0;
    for (int t = 0; t < TABLES; t++)
        for (size_t i = 0; i < tables[t]->row_cnt; i++, n++) {
            const bw_metric_row_t *d = &tables[t]->rows[i];
            ck_assert_msg(d->name != NULL, "%s row %zu: empty (the enum and the table differ)", tables[t]->file, i);
            for (int u = 0; u <= t; u++)
                for (size_t j = 0; j < (u < t ? tables[u]->row_cnt : i); j++) ck_assert_str_ne(tables[u]->rows[j].name, d->name);
            ck_assert_msg(strncmp(d->name, prefix[t], strlen(prefix[t])) == 0, "%s: not %s…", d->name, prefix[t]);
            size_t len = strlen(d->name);
            ck_assert_msg((d->type == BW_METRIC_COUNTER) == (len > 6 && strcmp(d->name + len - 6, "_total") == 0),
                          "%s: only counters end in _total", d->name);
            ck_assert_msg(*d->help && !strpbrk(d->help, "\\\n"), "%s: HELP", d->name);
            ck_assert_msg(*d->doc && !strpbrk(d->doc, "|\n"), "%s: doc", d->name);
            int labels = *labels_of(d) ? 1 + count_of(labels_of(d), ",") : 0;
            ck_assert_msg(labels == per_labels[d->per] + (d->subs != NULL), "%s: labels", d->name);
            ck_assert_msg(!d->subs == !d->sub_cnt, "%s: subs", d->name);
        }
    ck_assert_uint_ge(n, 46);
}
END_TEST

/* The list in docs/api.md is the tables': a row for each, and the file is what
 * `make docs` writes (the drift check of make docs-check, here too). */
START_TEST(doc_lists_every_row) {
    bw_buf_t doc;
    bw_buf_init(&doc);
    bw_metrics_doc(tables, TABLES, &doc);
    bw_buf_append(&doc, "", 1);
    FILE *f = fopen("docs/api.md", "rb");
    ck_assert_ptr_nonnull(f);
    static char api[256 * 1024];
    size_t len = fread(api, 1, sizeof(api) - 1, f);
    fclose(f);
    api[len] = '\0';
    for (int t = 0; t < TABLES; t++)
        for (size_t i = 0; i < tables[t]->row_cnt; i++) {
            const bw_metric_row_t *d = &tables[t]->rows[i];
            char row[256];
            snprintf(row, sizeof(row), "| `%s%s%s%s` | %s | ", d->name, *labels_of(d) ? "{" : "", labels_of(d),
                     *labels_of(d) ? "}" : "", type_names[d->type]);
            ck_assert_msg(count_of(doc.data, row) == 1, "%s: not in the list", d->name);
            ck_assert_msg(strstr(api, row), "docs/api.md lacks %s (make docs)", row);
        }
    bw_buf_t spliced;
    bw_buf_init(&spliced);
    ck_assert_int_eq(bw_metrics_doc_splice(api, tables, TABLES, &spliced), 0);
    ck_assert_msg(spliced.len == len && memcmp(spliced.data, api, len) == 0, "docs/api.md is stale: run make docs");
    /* a stale list is replaced, what is around it kept; no markers: refused */
    bw_buf_reset(&spliced);
    ck_assert_int_eq(bw_metrics_doc_splice("a\n" BW_METRICS_DOC_BEGIN "old\n" BW_METRICS_DOC_END "b\n", tables, TABLES,
                                           &spliced), 0);
    bw_buf_append(&spliced, "", 1);
    ck_assert_ptr_null(strstr(spliced.data, "old\n"));
    ck_assert_int_eq(strncmp(spliced.data, "a\n" BW_METRICS_DOC_BEGIN, strlen("a\n" BW_METRICS_DOC_BEGIN)), 0);
    ck_assert_ptr_nonnull(strstr(spliced.data, doc.data));
    ck_assert_ptr_nonnull(strstr(spliced.data, "\n" BW_METRICS_DOC_END "b\n"));
    bw_buf_reset(&spliced);
    ck_assert_int_eq(bw_metrics_doc_splice(BW_METRICS_DOC_END BW_METRICS_DOC_BEGIN, tables, TABLES, &spliced), -1);
    ck_assert_int_eq(bw_metrics_doc_splice("no list here\n", tables, TABLES, &spliced), -1);
    ck_assert_uint_eq(spliced.len, 0);
    bw_buf_free(&spliced);
    bw_buf_free(&doc);
}
END_TEST

/* Prometheus' own parser and linter take both daemons' text. */
START_TEST(promtool_accepts_both) {
    bw_config_t *conf = lanes_config();
    for (int t = 0; t < TABLES; t++) {
        bw_metrics_t *m = filled(conf, tables[t]);
        char *text = render(m);
        FILE *p = popen("promtool check metrics 1>&2", "w");
        ck_assert_msg(p != NULL, "promtool: cannot start (scripts/install-deps.sh installs it)");
        fputs(text, p);
        int status = pclose(p);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                      "promtool check metrics refused the %s's text (status %d)", tables[t]->file, status);
        free(text);
        bw_metrics_destroy(m);
    }
    bw_config_destroy(conf);
}
END_TEST

/* The failure classes' names are the kind labels that tiers, alerts and docs read. */
START_TEST(error_kinds_by_failure_class) {
    static const char *const want[BW_FAIL_CLASSES] = {
        [BW_FAIL_RETRY] = "retryable", [BW_FAIL_TIMEOUT] = "timeout", [BW_FAIL_CONNECTION] = "connection",
        [BW_FAIL_DATA] = "data",       [BW_FAIL_DECODE] = "decode",   [BW_FAIL_STOP] = "stop"};
    bw_config_t *conf = t_ref_config();
    bw_metrics_t *m = bw_consumer_metrics_new(conf);
    for (int f = BW_FAIL_RETRY; f < BW_FAIL_CLASSES; f++) {
        ck_assert_str_eq(bw_fail_name((bw_fail_t)f), want[f]);
        bw_metrics_add(m, BW_CM_ERRORS, 2, f, f + 10);
    }
    char *text = render(m);
    for (int f = BW_FAIL_RETRY; f < BW_FAIL_CLASSES; f++) {
        char line[128];
        snprintf(line, sizeof(line), "\nbulkwrite_consumer_errors_total{shard=\"2\",kind=\"%s\"} %d\n", want[f], f + 10);
        ck_assert_msg(strstr(text, line), "missing %s", line + 1);
    }
    ck_assert_int_eq(count_of(text, "bulkwrite_consumer_errors_total{"), BW_FAIL_CLASSES - 1);
    free(text);
    bw_metrics_destroy(m);
    bw_config_destroy(conf);
}
END_TEST

/* The engine alone, on a table of its own: which series each showing rule lets out, how
 * values print, what a shard's revocation leaves, and groups. */
enum { T_SEEN, T_MARK, T_GAUGE, T_NONZERO, T_SET, T_STATE, T_GROUPED, T_ROWS };
static const char *const t_states[3] = {"a", "b", "c"};
static const bw_metric_row_t t_rows[T_ROWS] = {
    [T_SEEN] = {.name = "t_seen_total", .type = BW_METRIC_COUNTER, .labels = "shard", .per = BW_METRIC_PER_SHARD,
                .show = BW_METRIC_SHOW_SEEN, .help = "h", .doc = "d"},
    [T_MARK] = {.name = "t_mark", .type = BW_METRIC_GAUGE, .labels = "shard", .per = BW_METRIC_PER_SHARD,
                .show = BW_METRIC_SHOW_ASSIGNED, .seen = 1, .help = "h", .doc = "d"},
    [T_GAUGE] = {.name = "t_gauge", .type = BW_METRIC_GAUGE, .labels = "server", .per = BW_METRIC_PER_SERVER,
                 .real = 1, .help = "h", .doc = "d"},
    [T_NONZERO] = {.name = "t_nonzero_total", .type = BW_METRIC_COUNTER, .labels = "code", .per = BW_METRIC_PER_CODE,
                   .show = BW_METRIC_SHOW_NONZERO, .help = "h", .doc = "d"},
    [T_SET] = {.name = "t_set", .type = BW_METRIC_GAUGE, .labels = "server", .per = BW_METRIC_PER_SERVER,
               .show = BW_METRIC_SHOW_SET, .help = "h", .doc = "d"},
    [T_STATE] = {.name = "t_state", .type = BW_METRIC_GAUGE, .labels = "shard,state", .per = BW_METRIC_PER_SHARD,
                 .subs = t_states, .sub_cnt = 3, .one_of = 1, .show = BW_METRIC_SHOW_ASSIGNED, .help = "h", .doc = "d"},
    [T_GROUPED] = {.name = "t_grouped", .type = BW_METRIC_GAUGE, .groups = 2, .help = "h", .doc = "d"},
};
static const bw_metrics_table_t t_table = {"t.c", "T:", t_rows, T_ROWS};

START_TEST(engine_showing_rules) {
    bw_config_t *conf = t_ref_config();
    bw_metrics_t *m = bw_metrics_new(conf, &t_table);
    char *text = render(m);
    ck_assert_ptr_null(strstr(text, "{shard=")); /* no shard seen or assigned */
    ck_assert_ptr_null(strstr(text, "t_set{"));  /* unset */
    ck_assert_ptr_null(strstr(text, "t_nonzero_total{"));
    ck_assert_ptr_null(strstr(text, "t_grouped"));
    ck_assert_ptr_nonnull(strstr(text, "\nt_gauge{server=\"mysql-a\"} 0\nt_gauge{server=\"mysql-b\"} 0\n"));
    free(text);

    bw_metrics_add(m, T_SEEN, 3, 0, 2); /* a counter alone does not make a shard seen */
    bw_metrics_add(m, T_NONZERO, 503, 0, 1);
    bw_metrics_add(m, T_NONZERO, 600, 0, 1); /* out of range: ignored */
    bw_metrics_set(m, T_SET, 1, 0, NAN);    /* set, though not a number */
    bw_metrics_set(m, T_GAUGE, 0, 0, 1234567.5);
    bw_metrics_set(m, T_MARK, 4, 0, 1); /* a marked row nonzero: shard 4 is seen */
    bw_metrics_switch(m, 3, 1);
    text = render(m);
    ck_assert_ptr_null(strstr(text, "t_seen_total{shard=\"3\"}"));
    ck_assert_ptr_nonnull(strstr(text, "\nt_seen_total{shard=\"4\"} 0\n"));
    ck_assert_ptr_null(strstr(text, "t_mark{")); /* not assigned */
    ck_assert_ptr_nonnull(strstr(text, "\nt_nonzero_total{code=\"503\"} 1\n# HELP t_set"));
    ck_assert_ptr_nonnull(strstr(text, "\nt_set{server=\"mysql-b\"} NaN\n# HELP t_state"));
    ck_assert_ptr_nonnull(strstr(text, "\nt_gauge{server=\"mysql-a\"} 1.23457e+06\n"));
    ck_assert_ptr_nonnull(strstr(text, "\nt_grouped 0\n"));
    free(text);

    /* assigned: its gauges show, a one_of row as one 1 among its subs */
    bw_metrics_set(m, T_STATE, 3, 0, 2);
    bw_metrics_assigned(m, BW_METRIC_PER_SHARD, 3, 1);
    text = render(m);
    ck_assert_ptr_nonnull(strstr(text, "\nt_seen_total{shard=\"3\"} 2\nt_seen_total{shard=\"4\"} 0\n"));
    ck_assert_ptr_nonnull(strstr(text, "\nt_state{shard=\"3\",state=\"a\"} 0\nt_state{shard=\"3\",state=\"b\"} 0\n"
                                       "t_state{shard=\"3\",state=\"c\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(text, "\nt_mark{shard=\"3\"} 0\n"));
    free(text);

    /* revoked: its gauges leave and start again from 0, its counter stays; a group off hides */
    bw_metrics_assigned(m, BW_METRIC_PER_SHARD, 3, 0);
    bw_metrics_switch(m, 2, 0);
    text = render(m);
    ck_assert_ptr_null(strstr(text, "{shard=\"3\",state="));
    ck_assert_ptr_null(strstr(text, "t_grouped"));
    free(text);
    bw_metrics_set(m, T_SET, 1, 0, BW_METRICS_UNSET);
    bw_metrics_assigned(m, BW_METRIC_PER_SHARD, 3, 1);
    text = render(m);
    ck_assert_ptr_nonnull(strstr(text, "\nt_state{shard=\"3\",state=\"a\"} 1\n"));
    ck_assert_ptr_null(strstr(text, "t_set{"));
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
    tcase_add_test(tc, every_row_rendered);
    tcase_add_test(tc, table_rows_are_sound);
    tcase_add_test(tc, doc_lists_every_row);
    tcase_add_test(tc, promtool_accepts_both);
    tcase_add_test(tc, error_kinds_by_failure_class);
    tcase_add_test(tc, engine_showing_rules);
    suite_add_tcase(s, tc);
    return s;
}
