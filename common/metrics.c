#include "metrics.h"

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "version.h"

static const double buckets[] = {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
#define BUCKETS (sizeof(buckets) / sizeof(buckets[0]))

typedef struct {
    uint64_t counts[BUCKETS + 1];
    double sum;
    uint64_t cnt;
} histogram_t;

/* One series' value: a counter's in n, a gauge's in x. */
typedef union {
    uint64_t n;
    double x;
} cell_t;

#define CLIENTS_MAX 1000 /* names; then "(other)" */
#define CODES 600

struct bw_metrics {
    pthread_mutex_t mu;
    const bw_metrics_table_t *table;
    int shard_count, server_cnt, lane_cnt, slot_cnt, replica_max;
    char **server_names, **lane_names;
    const bw_server_t *servers; /* the config's (replica names) */
    cell_t **cells;             /* [row][index * subs + sub] */
    histogram_t *histograms;    /* [row], for the histogram rows */
    unsigned char *shard_assigned, *slot_assigned;
    char (*clients)[72];
    int client_cnt;
    unsigned groups; /* switched on */
};

/* How many indexes a row per `per` has room for. */
static int index_cap(const bw_metrics_t *m, bw_metric_per_t per) {
    switch (per) {
    case BW_METRIC_PER_NONE: return 1;
    case BW_METRIC_PER_SHARD: return m->shard_count;
    case BW_METRIC_PER_SERVER:
    case BW_METRIC_PER_REPLICA: return m->server_cnt;
    case BW_METRIC_PER_SLOT: return m->slot_cnt;
    case BW_METRIC_PER_CLIENT: return CLIENTS_MAX + 1;
    case BW_METRIC_PER_CODE: return CODES;
    }
    return 0;
}

/* How many values a row keeps per index (a one_of row: the one sub at 1). */
static int sub_cap(const bw_metrics_t *m, const bw_metric_row_t *r) {
    if (r->one_of) return 1;
    if (r->subs) return r->sub_cnt;
    return r->per == BW_METRIC_PER_REPLICA ? m->replica_max : 1;
}

static void reset(const bw_metric_row_t *r, cell_t *c) {
    if (r->type == BW_METRIC_COUNTER) c->n = 0;
    else c->x = r->show == BW_METRIC_SHOW_SET ? BW_METRICS_UNSET : 0;
}

static char *copy(const char *s) {
    char *d = strdup(s);
    if (!d) abort();
    return d;
}

static void *zalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size);
    if (!p) abort();
    return p;
}

bw_metrics_t *bw_metrics_new(const bw_config_t *conf, const bw_metrics_table_t *table) {
    bw_metrics_t *m = zalloc(1, sizeof(*m));
    pthread_mutex_init(&m->mu, NULL);
    m->table = table;
    m->shard_count = conf->shard_count;
    m->server_cnt = conf->server_cnt;
    m->slot_cnt = bw_config_slot_count(conf);
    m->servers = conf->servers;
    m->server_names = zalloc((size_t)conf->server_cnt, sizeof(char *));
    for (int v = 0; v < conf->server_cnt; v++) {
        m->server_names[v] = copy(conf->servers[v].name);
        if (conf->servers[v].replica_cnt > m->replica_max) m->replica_max = conf->servers[v].replica_cnt;
    }
    m->lane_cnt = conf->lane_cnt;
    m->lane_names = zalloc((size_t)conf->lane_cnt, sizeof(char *));
    for (int l = 0; l < conf->lane_cnt; l++) m->lane_names[l] = copy(conf->lanes[l].name);
    m->shard_assigned = zalloc((size_t)m->shard_count, 1);
    m->slot_assigned = zalloc((size_t)m->slot_cnt, 1);
    m->cells = zalloc(table->row_cnt, sizeof(cell_t *));
    m->histograms = zalloc(table->row_cnt, sizeof(histogram_t));
    for (size_t i = 0; i < table->row_cnt; i++) {
        const bw_metric_row_t *r = &table->rows[i];
        if (r->per == BW_METRIC_PER_CLIENT && !m->clients) m->clients = zalloc(CLIENTS_MAX + 1, sizeof(*m->clients));
        if (r->type == BW_METRIC_HISTOGRAM) continue;
        size_t n = (size_t)index_cap(m, r->per) * (size_t)sub_cap(m, r);
        m->cells[i] = zalloc(n, sizeof(cell_t));
        for (size_t k = 0; k < n; k++) reset(r, &m->cells[i][k]);
    }
    return m;
}

void bw_metrics_destroy(bw_metrics_t *m) {
    if (!m) return;
    pthread_mutex_destroy(&m->mu);
    for (size_t i = 0; i < m->table->row_cnt; i++) free(m->cells[i]);
    free(m->cells);
    free(m->histograms);
    for (int v = 0; v < m->server_cnt; v++) free(m->server_names[v]);
    free(m->server_names);
    for (int l = 0; l < m->lane_cnt; l++) free(m->lane_names[l]);
    free(m->lane_names);
    free(m->shard_assigned);
    free(m->slot_assigned);
    free(m->clients);
    free(m);
}

/* ---- updates ------------------------------------------------------------------------ */

/* The value of row at (index, sub); NULL out of its range. @locks m->mu held */
static cell_t *cell_at(const bw_metrics_t *m, size_t row, int index, int sub) {
    const bw_metric_row_t *r = &m->table->rows[row];
    int subs = sub_cap(m, r);
    int indexes = r->per == BW_METRIC_PER_CLIENT ? m->client_cnt : index_cap(m, r->per);
    if (index < 0 || index >= indexes || sub < 0 || sub >= subs) return NULL;
    return &m->cells[row][(size_t)index * (size_t)subs + (size_t)sub];
}

static void observe(histogram_t *h, double us) {
    double s = us / 1e6;
    size_t i = 0;
    while (i < BUCKETS && s > buckets[i]) i++;
    h->counts[i]++;
    h->sum += s;
    h->cnt++;
}

void bw_metrics_change(bw_metrics_t *m, const bw_metrics_change_t *c, size_t n) {
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < n; i++) {
        size_t row = (size_t)c[i].row;
        if (c[i].how == BW_METRICS_OBSERVE) {
            observe(&m->histograms[row], c[i].value);
            continue;
        }
        cell_t *v = cell_at(m, row, c[i].index, c[i].sub);
        if (!v) continue;
        int counter = m->table->rows[row].type == BW_METRIC_COUNTER;
        if (c[i].how == BW_METRICS_ADD && counter) v->n += (uint64_t)c[i].value;
        else if (c[i].how == BW_METRICS_ADD) v->x += c[i].value;
        else if (counter) v->n = (uint64_t)c[i].value;
        else v->x = c[i].value;
    }
    pthread_mutex_unlock(&m->mu);
}

void bw_metrics_add(bw_metrics_t *m, int row, int index, int sub, double delta) {
    bw_metrics_change(m, &(bw_metrics_change_t){row, index, sub, BW_METRICS_ADD, delta}, 1);
}

void bw_metrics_set(bw_metrics_t *m, int row, int index, int sub, double value) {
    bw_metrics_change(m, &(bw_metrics_change_t){row, index, sub, BW_METRICS_SET, value}, 1);
}

void bw_metrics_observe(bw_metrics_t *m, int row, int64_t latency_us) {
    bw_metrics_change(m, &(bw_metrics_change_t){row, 0, 0, BW_METRICS_OBSERVE, (double)latency_us}, 1);
}

/* @locks m->mu held */
static int client_find(const bw_metrics_t *m, const char *name) {
    for (int i = 0; i < m->client_cnt; i++)
        if (strcmp(m->clients[i], name) == 0) return i;
    return -1;
}

int bw_metrics_client(bw_metrics_t *m, const char *name) {
    pthread_mutex_lock(&m->mu);
    int i = client_find(m, name);
    if (i < 0 && m->client_cnt >= CLIENTS_MAX) i = client_find(m, name = "(other)");
    if (i < 0) { /* room for CLIENTS_MAX names and "(other)" */
        i = m->client_cnt++;
        snprintf(m->clients[i], sizeof(m->clients[i]), "%s", name);
    }
    pthread_mutex_unlock(&m->mu);
    return i;
}

void bw_metrics_assigned(bw_metrics_t *m, bw_metric_per_t per, int index, int assigned) {
    unsigned char *flags = per == BW_METRIC_PER_SLOT ? m->slot_assigned : m->shard_assigned;
    pthread_mutex_lock(&m->mu);
    if (index >= 0 && index < index_cap(m, per)) flags[index] = assigned != 0;
    for (size_t i = 0; !assigned && i < m->table->row_cnt; i++) {
        const bw_metric_row_t *r = &m->table->rows[i];
        if (r->per != per || r->type != BW_METRIC_GAUGE) continue;
        for (int k = 0; k < sub_cap(m, r); k++) {
            cell_t *v = cell_at(m, i, index, k);
            if (v) reset(r, v);
        }
    }
    pthread_mutex_unlock(&m->mu);
}

void bw_metrics_switch(bw_metrics_t *m, unsigned groups, int on) {
    pthread_mutex_lock(&m->mu);
    m->groups = on ? m->groups | groups : m->groups & ~groups;
    pthread_mutex_unlock(&m->mu);
}

/* ---- /metrics ------------------------------------------------------------------------
 * Each row's series in index order, each index's in its subs' order. @locks m->mu held */

static const char *const type_names[] = {"counter", "gauge", "histogram"};

static int nonzero(const bw_metric_row_t *r, const cell_t *v) {
    return r->type == BW_METRIC_COUNTER ? v->n != 0 : v->x != 0;
}

/* A shard shows in the per-shard counters once it was assigned or did anything. */
static int shard_seen(const bw_metrics_t *m, int shard) {
    if (m->shard_assigned[shard]) return 1;
    for (size_t i = 0; i < m->table->row_cnt; i++) {
        const bw_metric_row_t *r = &m->table->rows[i];
        for (int k = 0; r->seen && r->per == BW_METRIC_PER_SHARD && k < sub_cap(m, r); k++)
            if (nonzero(r, cell_at(m, i, shard, k))) return 1;
    }
    return 0;
}

static int shows(const bw_metrics_t *m, const bw_metric_row_t *r, int index, const cell_t *v) {
    switch (r->show) {
    case BW_METRIC_SHOW_ALWAYS: return 1;
    case BW_METRIC_SHOW_SEEN: return shard_seen(m, index);
    case BW_METRIC_SHOW_ASSIGNED: return (r->per == BW_METRIC_PER_SLOT ? m->slot_assigned : m->shard_assigned)[index];
    case BW_METRIC_SHOW_NONZERO: return nonzero(r, v);
    case BW_METRIC_SHOW_SET: return v->x != BW_METRICS_UNSET;
    }
    return 0;
}

/* `name{label="value",…} ` of the series at (index, sub). */
static void put_name(bw_buf_t *out, const bw_metrics_t *m, const bw_metric_row_t *r, int index, int sub) {
    const char *values[3];
    char num[16];
    size_t n = 0;
    switch (r->per) {
    case BW_METRIC_PER_NONE: break;
    case BW_METRIC_PER_SHARD:
    case BW_METRIC_PER_CODE:
        snprintf(num, sizeof(num), "%d", index);
        values[n++] = num;
        break;
    case BW_METRIC_PER_SERVER: values[n++] = m->server_names[index]; break;
    case BW_METRIC_PER_REPLICA:
        values[n++] = m->server_names[index];
        values[n++] = m->servers[index].replicas[sub];
        break;
    case BW_METRIC_PER_SLOT:
        snprintf(num, sizeof(num), "%d", index % m->shard_count);
        values[n++] = num;
        values[n++] = m->lane_names[index / m->shard_count];
        break;
    case BW_METRIC_PER_CLIENT: values[n++] = m->clients[index]; break;
    }
    if (r->subs) values[n++] = r->subs[sub];
    bw_buf_puts(out, r->name);
    const char *label = r->labels;
    for (size_t i = 0; i < n; i++) {
        size_t len = strcspn(label, ",");
        bw_buf_printf(out, "%s%.*s=\"%s\"", i ? "," : "{", (int)len, label, values[i]);
        label += len + (label[len] == ',');
    }
    bw_buf_puts(out, n ? "} " : " ");
}

/* Counters and integer gauges as integers, real gauges %g; NaN and infinities in Prometheus' spellings. */
static void put_value(bw_buf_t *out, const bw_metric_row_t *r, cell_t v) {
    if (r->type == BW_METRIC_COUNTER) bw_buf_printf(out, "%llu\n", (unsigned long long)v.n);
    else if (isnan(v.x)) bw_buf_puts(out, "NaN\n");
    else if (isinf(v.x)) bw_buf_puts(out, v.x > 0 ? "+Inf\n" : "-Inf\n");
    else bw_buf_printf(out, r->real ? "%g\n" : "%.0f\n", v.x);
}

static void put_histogram(bw_buf_t *out, const char *name, const histogram_t *h) {
    uint64_t cum = 0;
    for (size_t i = 0; i < BUCKETS; i++) {
        cum += h->counts[i];
        bw_buf_printf(out, "%s_bucket{le=\"%g\"} %llu\n", name, buckets[i], (unsigned long long)cum);
    }
    bw_buf_printf(out, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", name,
                  (unsigned long long)h->cnt, name, h->sum, name, (unsigned long long)h->cnt);
}

static void put_row(bw_buf_t *out, const bw_metrics_t *m, size_t row) {
    const bw_metric_row_t *r = &m->table->rows[row];
    if (r->type == BW_METRIC_HISTOGRAM) {
        put_histogram(out, r->name, &m->histograms[row]);
        return;
    }
    int indexes = r->per == BW_METRIC_PER_CLIENT ? m->client_cnt : index_cap(m, r->per);
    for (int index = 0; index < indexes; index++) {
        int subs = r->subs ? r->sub_cnt : r->per == BW_METRIC_PER_REPLICA ? m->servers[index].replica_cnt : 1;
        for (int sub = 0; sub < subs; sub++) {
            cell_t v = *cell_at(m, row, index, r->one_of ? 0 : sub);
            if (!shows(m, r, index, &v)) continue;
            if (r->one_of) v.x = v.x == sub;
            put_name(out, m, r, index, sub);
            put_value(out, r, v);
        }
    }
}

/* What every process exports besides its table: which build runs, and Prometheus's
 * process_* family from /proc/self (the names its client libraries use). */
static void put_process(bw_buf_t *out) {
    bw_buf_printf(out, "# HELP bulkwrite_build_info The version and commit of this build.\n"
                       "# TYPE bulkwrite_build_info gauge\nbulkwrite_build_info{version=\"%s\",commit=\"%s\"} 1\n",
                  bw_version, bw_commit);
    long tick = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
    unsigned long utime = 0, stime = 0, vsize = 0;
    unsigned long long start = 0;
    long rss = 0;
    FILE *f = fopen("/proc/self/stat", "r");
    char buf[1024];
    size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the command may hold spaces and parentheses */
    int got = p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu %*d %*d %*d %*d %*d %*d %llu %lu %ld",
                          &utime, &stime, &start, &vsize, &rss) == 5;
    long long btime = 0;
    if ((f = fopen("/proc/stat", "r"))) {
        while (fgets(buf, sizeof(buf), f))
            if (sscanf(buf, "btime %lld", &btime) == 1) break;
        fclose(f);
    }
    int fds = 0;
    DIR *dir = opendir("/proc/self/fd");
    for (struct dirent *e; dir && (e = readdir(dir));) fds += e->d_name[0] != '.';
    if (dir) closedir(dir);
    fds -= dir != NULL; /* the one opendir held */
    struct rlimit lim = {0};
    getrlimit(RLIMIT_NOFILE, &lim);
    if (got && tick > 0) {
        bw_buf_printf(out, "# HELP process_cpu_seconds_total User and system CPU time spent, in seconds.\n"
                           "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total %.2f\n",
                      (double)(utime + stime) / (double)tick);
        bw_buf_printf(out, "# HELP process_start_time_seconds Start time of the process since the Unix epoch, in seconds.\n"
                           "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds %.2f\n",
                      (double)btime + (double)start / (double)tick);
        bw_buf_printf(out, "# HELP process_virtual_memory_bytes Virtual memory size, in bytes.\n"
                           "# TYPE process_virtual_memory_bytes gauge\nprocess_virtual_memory_bytes %lu\n", vsize);
        bw_buf_printf(out, "# HELP process_resident_memory_bytes Resident memory size, in bytes.\n"
                           "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes %lld\n",
                      (long long)rss * page);
    }
    bw_buf_printf(out, "# HELP process_open_fds Open file descriptors.\n# TYPE process_open_fds gauge\n"
                       "process_open_fds %d\n# HELP process_max_fds The limit of open file descriptors.\n"
                       "# TYPE process_max_fds gauge\nprocess_max_fds %llu\n",
                  fds, (unsigned long long)lim.rlim_cur);
}

void bw_metrics_render(bw_metrics_t *m, bw_buf_t *out) {
    put_process(out);
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < m->table->row_cnt; i++) {
        const bw_metric_row_t *r = &m->table->rows[i];
        if ((r->groups & m->groups) != r->groups) continue;
        bw_buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", r->name, r->help, r->name, type_names[r->type]);
        put_row(out, m, i);
    }
    pthread_mutex_unlock(&m->mu);
}

/* ---- docs/api.md ------------------------------------------------------------------- */

static void doc_table(bw_buf_t *out, const bw_metrics_table_t *t) {
    bw_buf_puts(out, "| series | type | meaning |\n| --- | --- | --- |\n");
    for (size_t i = 0; i < t->row_cnt; i++) {
        const bw_metric_row_t *r = &t->rows[i];
        const char *labels = r->labels ? r->labels : "";
        bw_buf_printf(out, "| `%s%s%s%s` | %s | %s |\n", r->name, *labels ? "{" : "", labels, *labels ? "}" : "",
                      type_names[r->type], r->doc);
    }
}

void bw_metrics_doc(const bw_metrics_table_t *const *tables, size_t n, bw_buf_t *out) {
    bw_buf_printf(out, "Defined by the table%s in ", n > 1 ? "s" : "");
    for (size_t i = 0; i < n; i++) bw_buf_printf(out, "%s`%s`", i == 0 ? "" : i + 1 < n ? ", " : " and ", tables[i]->file);
    bw_buf_printf(out, ", which also write%s this list. Histograms have the buckets (seconds)", n > 1 ? "" : "s");
    for (size_t i = 0; i < BUCKETS; i++) bw_buf_printf(out, "%s %g", i ? "," : "", buckets[i]);
    bw_buf_puts(out, " and `+Inf`. Every process also has `bulkwrite_build_info{version,commit}` (1: the\n"
                     "release and the git commit it was built from, as `--version` prints them) and Prometheus's\n"
                     "`process_cpu_seconds_total`, `process_start_time_seconds`, `process_resident_memory_bytes`,\n"
                     "`process_virtual_memory_bytes`, `process_open_fds` and `process_max_fds`.\n");
    for (size_t i = 0; i < n; i++) {
        bw_buf_printf(out, "\n%s\n\n", tables[i]->title);
        doc_table(out, tables[i]);
    }
    bw_buf_puts(out, "\n"); /* the table ends before the marker line */
}

int bw_metrics_doc_splice(const char *text, const bw_metrics_table_t *const *tables, size_t n, bw_buf_t *out) {
    const char *begin = strstr(text, BW_METRICS_DOC_BEGIN);
    const char *end = begin ? strstr(begin, BW_METRICS_DOC_END) : NULL;
    if (!end) return -1;
    begin += strlen(BW_METRICS_DOC_BEGIN);
    bw_buf_append(out, text, (size_t)(begin - text));
    bw_metrics_doc(tables, n, out);
    bw_buf_puts(out, end);
    return 0;
}
