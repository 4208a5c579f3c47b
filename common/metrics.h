/* metrics.h — counters, gauges and histograms, rendered in Prometheus text format.
 *
 * The engine knows no daemon. Each daemon owns a table of rows, one per family (the
 * proxy's in proxy/proxy_metrics.c, the consumer's in consumer/consumer_metrics.c), and an
 * enum naming them in the same order; it passes the table to bw_metrics_new. A row says
 * the family's name, type, labels, HELP and docs text, what it is per, its second label's
 * values, and when a sample shows. The engine keeps the values, renders /metrics in the
 * table's order, and writes the metric list of docs/api.md (`bwctl metrics-doc`, checked
 * by `make docs-check`).
 *
 * Updates name a row of the daemon's enum, the index of what it is per (a shard, a server,
 * a lane slot, a client index, an HTTP code; 0 for none) and the entry of its second
 * label (0 for none). Each call takes the mutex once — per request or per batch, never
 * per row; bw_metrics_change makes several changes under it. No update allocates.
 * @locality any thread. */
#ifndef BW_METRICS_H
#define BW_METRICS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "config.h"

typedef struct bw_metrics bw_metrics_t;

typedef enum { BW_METRIC_COUNTER, BW_METRIC_GAUGE, BW_METRIC_HISTOGRAM } bw_metric_type_t;

/* What a family has one series of; the index of an update, and the first label(s). */
typedef enum {
    BW_METRIC_PER_NONE,    /* one series (index 0) */
    BW_METRIC_PER_SHARD,   /* shard="n" */
    BW_METRIC_PER_SERVER,  /* server="name" (config order) */
    BW_METRIC_PER_REPLICA, /* server="name",replica="host:port": index the server, sub its listed replica */
    BW_METRIC_PER_SLOT,    /* shard="n",lane="name": index a lane slot (bw_config_slot) */
    BW_METRIC_PER_CLIENT,  /* client="name": index from bw_metrics_client */
    BW_METRIC_PER_CODE,    /* code="nnn": an HTTP status, 0 to 599 */
} bw_metric_per_t;

/* Which of a family's series show. */
typedef enum {
    BW_METRIC_SHOW_ALWAYS,
    BW_METRIC_SHOW_SEEN,     /* per shard: once assigned here, or a row marked `seen` is nonzero for it */
    BW_METRIC_SHOW_ASSIGNED, /* per shard or slot: while assigned (bw_metrics_assigned) */
    BW_METRIC_SHOW_NONZERO,  /* while its value is not 0 */
    BW_METRIC_SHOW_SET,      /* while its value is not BW_METRICS_UNSET, which it starts at */
} bw_metric_show_t;

/* A gauge's value that hides its series (BW_METRIC_SHOW_SET): not a reading, not NaN. */
#define BW_METRICS_UNSET (-INFINITY)

/* One metric family. */
typedef struct {
    const char *name;
    bw_metric_type_t type;
    const char *labels; /* the samples' label names, "shard,kind" (NULL for none) */
    const char *help;   /* the HELP line (no backslash, no newline) */
    const char *doc;    /* its meaning in docs/api.md (no "|") */
    bw_metric_per_t per;
    const char *const *subs; /* the second label's values, in the order shown; NULL: none */
    int sub_cnt;
    bw_metric_show_t show;
    unsigned groups; /* shown only while these groups are on (bw_metrics_switch); 0: always */
    int real;        /* a gauge printed as %g (NaN, +Inf); else as an integer */
    int one_of;      /* a gauge over subs whose value is the one sub at 1, the others 0 */
    int seen;        /* per shard: a nonzero value shows the shard in BW_METRIC_SHOW_SEEN rows */
} bw_metric_row_t;

/* A daemon's rows, in the order /metrics shows them. */
typedef struct {
    const char *file;  /* where the rows are, as docs/api.md names it */
    const char *title; /* in docs/api.md, the lines before the daemon's list (no newline at the end) */
    const bw_metric_row_t *rows;
    size_t row_cnt;
} bw_metrics_table_t;

/* The table lives as long as m; conf's servers too (their replicas' names are read from it). */
bw_metrics_t *bw_metrics_new(const bw_config_t *conf, const bw_metrics_table_t *table);
void bw_metrics_destroy(bw_metrics_t *m);

typedef enum { BW_METRICS_ADD, BW_METRICS_SET, BW_METRICS_OBSERVE } bw_metrics_how_t;
/* One change: add to the value, set it, or observe microseconds in a histogram row. An
 * index or sub out of the row's range is ignored. */
typedef struct {
    int row, index, sub;
    bw_metrics_how_t how;
    double value;
} bw_metrics_change_t;
void bw_metrics_change(bw_metrics_t *m, const bw_metrics_change_t *c, size_t n);

void bw_metrics_add(bw_metrics_t *m, int row, int index, int sub, double delta);
void bw_metrics_set(bw_metrics_t *m, int row, int index, int sub, double value);
void bw_metrics_observe(bw_metrics_t *m, int row, int64_t latency_us);

/* The index of a client's series (its name is a safe label), made on first use; its
 * series stay for good. Past 1,000 names the rest add up under "(other)". */
int bw_metrics_client(bw_metrics_t *m, const char *name);

/* A shard or lane slot (per BW_METRIC_PER_SHARD or _SLOT) assigned here now, or not any
 * more: its gauges leave /metrics and start again from 0 (its counters stay). */
void bw_metrics_assigned(bw_metrics_t *m, bw_metric_per_t per, int index, int assigned);
/* Turns groups of rows (a daemon's bits) on or off; all start off. */
void bw_metrics_switch(bw_metrics_t *m, unsigned groups, int on);

/* /metrics: every family of the table shown now, each with one HELP and TYPE. */
void bw_metrics_render(bw_metrics_t *m, bw_buf_t *out);
/* The families every process renders before its table's: bulkwrite_build_info and
 * process_cpu_seconds_total, _start_time_seconds, _virtual_memory_bytes,
 * _resident_memory_bytes, _open_fds, _max_fds. */
#define BW_METRICS_PROCESS_FAMILIES 7

/* The metric list of docs/api.md: the tables' lists, in order. */
void bw_metrics_doc(const bw_metrics_table_t *const *tables, size_t n, bw_buf_t *out);
/* The lines that bound that list in docs/api.md. */
#define BW_METRICS_DOC_BEGIN "<!-- begin: generated by `bwctl metrics-doc` from common/metrics.c (make docs) -->\n"
#define BW_METRICS_DOC_END "<!-- end: generated by `bwctl metrics-doc` -->\n"
/* Appends `text` (docs/api.md) with what is between its BEGIN and END lines replaced by
 * bw_metrics_doc. -1 (nothing appended) when it has not both lines, in that order. */
int bw_metrics_doc_splice(const char *text, const bw_metrics_table_t *const *tables, size_t n, bw_buf_t *out);

#endif
