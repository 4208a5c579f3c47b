#include "history.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* A point as kept: compact types (20 bytes), the time is the tick's (ticks[]). */
typedef struct {
    uint32_t lag;           /* saturated at UINT32_MAX - 1 */
    uint32_t oldest_age_ms; /* NO_AGE: none waits, or not known; saturated below it */
    float rows_per_s;       /* NaN: not known */
    float rate, row_rate;
} point_t;

#define NO_AGE UINT32_MAX
#define POINT_HAS 1u    /* the shard had a fresh report at that tick */
#define POINT_PAUSED 2u

/* One reading of a consumer's rows_applied counter. */
typedef struct {
    int64_t at_ms; /* 0: none */
    uint64_t rows;
} reading_t;

#define READINGS 8 /* spaced at least a step apart: 70 s and more of them */

typedef struct {
    /* the latest report */
    int64_t at_ms; /* 0: none yet */
    uint32_t consumer;
    int64_t lag, oldest_unapplied_ms;
    float rate, row_rate;
    int paused;
    uint32_t alerts; /* bits of h->names */
    reading_t last;                /* the latest reading of the counter */
    reading_t readings[READINGS];  /* older ones, a step apart at least; readings[head] the newest */
    int head, n;
    reading_t step_base;           /* the reading the current point's rows_per_s starts from */
    struct {
        int64_t at_ms;
        uint8_t name, resolved;
    } events[BW_HISTORY_ALERT_EVENTS]; /* a ring: events[(ev_head + i) % N] oldest first */
    int ev_head, ev_n;
    point_t points[BW_HISTORY_POINTS]; /* aligned with h->ticks */
    uint8_t flags[BW_HISTORY_POINTS];
} shard_t;

/* @locks mu guards everything but shard_count and stale_ms */
struct bw_history {
    pthread_mutex_t mu;
    int shard_count;
    int64_t stale_ms;
    int64_t ticks[BW_HISTORY_POINTS]; /* each tick's time; the ring's slot i across every shard */
    int tick_head, tick_n;            /* ticks[tick_head] the newest */
    int64_t last_step;
    char names[BW_HISTORY_ALERT_NAMES][48];
    int n_names;
    shard_t *shards;
};

bw_history_t *bw_history_new(int shard_count, int64_t stale_ms) {
    bw_history_t *h = calloc(1, sizeof(*h));
    if (!h || !(h->shards = calloc((size_t)shard_count, sizeof(shard_t)))) abort();
    pthread_mutex_init(&h->mu, NULL);
    h->shard_count = shard_count;
    h->stale_ms = stale_ms;
    h->tick_head = -1;
    h->last_step = -1;
    return h;
}

void bw_history_free(bw_history_t *h) {
    if (!h) return;
    pthread_mutex_destroy(&h->mu);
    free(h->shards);
    free(h);
}

size_t bw_history_bytes(const bw_history_t *h) { return sizeof(*h) + (size_t)h->shard_count * sizeof(shard_t); }

double bw_history_counter_rate(int64_t from_ms, uint64_t from, int64_t to_ms, uint64_t to) {
    if (to_ms <= from_ms || to < from) return NAN;
    return (double)(to - from) * 1000.0 / (double)(to_ms - from_ms);
}

/* FNV-1a of the consumer's instance: a change restarts the counter's readings. */
static uint32_t consumer_id(const char *s) {
    uint32_t x = 2166136261u;
    for (; s && *s; s++) x = (x ^ (uint8_t)*s) * 16777619u;
    return x;
}

/* The name's bit (interned); -1 when the table of names is full. @locks mu held */
static int name_bit(bw_history_t *h, const char *name) {
    for (int i = 0; i < h->n_names; i++)
        if (strcmp(h->names[i], name) == 0) return i;
    if (h->n_names == BW_HISTORY_ALERT_NAMES || strlen(name) >= sizeof(h->names[0])) return -1;
    strcpy(h->names[h->n_names], name);
    return h->n_names++;
}

static void alert_event(shard_t *s, int64_t at_ms, int bit, int resolved) {
    int i = (s->ev_head + s->ev_n) % BW_HISTORY_ALERT_EVENTS;
    if (s->ev_n == BW_HISTORY_ALERT_EVENTS) s->ev_head = (s->ev_head + 1) % BW_HISTORY_ALERT_EVENTS; /* drop the oldest */
    else s->ev_n++;
    s->events[i].at_ms = at_ms;
    s->events[i].name = (uint8_t)bit;
    s->events[i].resolved = (uint8_t)resolved;
}

void bw_history_observe(bw_history_t *h, int shard, const bw_history_report_t *r) {
    if (shard < 0 || shard >= h->shard_count) return;
    pthread_mutex_lock(&h->mu);
    shard_t *s = &h->shards[shard];
    if (r->at_ms <= s->at_ms) goto done; /* older than what we have, or the same again */
    uint32_t who = consumer_id(r->consumer);
    if (s->at_ms && (who != s->consumer || r->rows_applied < s->last.rows)) { /* another consumer's counter */
        s->n = 0;
        s->step_base.at_ms = 0;
    }
    s->last = (reading_t){r->at_ms, r->rows_applied};
    if (!s->step_base.at_ms) s->step_base = s->last;
    if (!s->n || r->at_ms - s->readings[s->head].at_ms >= BW_HISTORY_STEP_MS) {
        s->head = (s->head + 1) % READINGS;
        s->readings[s->head] = s->last;
        if (s->n < READINGS) s->n++;
    }
    uint32_t alerts = 0;
    for (size_t i = 0; i < r->n_alerts; i++) {
        int bit = name_bit(h, r->alerts[i]);
        if (bit >= 0) alerts |= 1u << bit;
    }
    for (int bit = 0; bit < h->n_names; bit++)
        if (((alerts ^ s->alerts) >> bit) & 1u) alert_event(s, r->at_ms, bit, !((alerts >> bit) & 1u));
    s->alerts = alerts;
    s->at_ms = r->at_ms;
    s->consumer = who;
    s->lag = r->lag;
    s->oldest_unapplied_ms = r->oldest_unapplied_ms;
    s->rate = (float)r->rate;
    s->row_rate = (float)r->row_rate;
    s->paused = r->paused;
done:
    pthread_mutex_unlock(&h->mu);
}

static uint32_t saturate(int64_t v, uint32_t max) { return v < 0 ? 0 : v >= (int64_t)max ? max : (uint32_t)v; }

int bw_history_tick(bw_history_t *h, int64_t now_ms) {
    int64_t step = now_ms / BW_HISTORY_STEP_MS;
    pthread_mutex_lock(&h->mu);
    if (step <= h->last_step) {
        pthread_mutex_unlock(&h->mu);
        return 0;
    }
    h->last_step = step;
    int slot = h->tick_head = (h->tick_head + 1) % BW_HISTORY_POINTS;
    h->ticks[slot] = now_ms;
    if (h->tick_n < BW_HISTORY_POINTS) h->tick_n++;
    for (int i = 0; i < h->shard_count; i++) {
        shard_t *s = &h->shards[i];
        s->flags[slot] = 0;
        if (!s->at_ms || now_ms - s->at_ms > h->stale_ms) continue;
        point_t *p = &s->points[slot];
        p->lag = saturate(s->lag, UINT32_MAX - 1);
        p->oldest_age_ms = s->lag > 0 && s->oldest_unapplied_ms > 0 ? saturate(now_ms - s->oldest_unapplied_ms, NO_AGE - 1)
                                                                    : NO_AGE;
        p->rows_per_s = (float)bw_history_counter_rate(s->step_base.at_ms, s->step_base.rows, s->last.at_ms, s->last.rows);
        s->step_base = s->last;
        p->rate = s->rate;
        p->row_rate = s->row_rate;
        s->flags[slot] = POINT_HAS | (s->paused ? POINT_PAUSED : 0);
    }
    pthread_mutex_unlock(&h->mu);
    return 1;
}

/* The newest reading at least the window before the latest, else the oldest kept. @locks mu held */
static double window_rate(const shard_t *s) {
    const reading_t *from = NULL;
    for (int k = 0; k < s->n; k++) {
        from = &s->readings[(s->head - k + READINGS) % READINGS];
        if (s->last.at_ms - from->at_ms >= BW_RATE_WINDOW_MS) break;
    }
    return from ? bw_history_counter_rate(from->at_ms, from->rows, s->last.at_ms, s->last.rows) : NAN;
}

double bw_history_rows_per_s(bw_history_t *h, int shard) {
    if (shard < 0 || shard >= h->shard_count) return NAN;
    pthread_mutex_lock(&h->mu);
    double rate = window_rate(&h->shards[shard]);
    pthread_mutex_unlock(&h->mu);
    return rate;
}

void bw_history_sum(bw_history_t *h, int first, int last, bw_history_sum_t *out) {
    *out = (bw_history_sum_t){.rows_per_s = NAN};
    if (first < 0) first = 0;
    if (last >= h->shard_count) last = h->shard_count - 1;
    pthread_mutex_lock(&h->mu);
    for (int i = first; i <= last; i++) {
        const shard_t *s = &h->shards[i];
        if (!s->at_ms) continue;
        out->reporting++;
        out->lag += s->lag;
        double r = window_rate(s);
        if (isfinite(r)) out->rows_per_s = isfinite(out->rows_per_s) ? out->rows_per_s + r : r;
    }
    pthread_mutex_unlock(&h->mu);
}

size_t bw_history_points(bw_history_t *h, int shard, bw_history_point_t *out, size_t max) {
    size_t n = 0;
    if (shard < 0 || shard >= h->shard_count) return 0;
    pthread_mutex_lock(&h->mu);
    const shard_t *s = &h->shards[shard];
    for (int k = h->tick_n - 1; k >= 0 && n < max; k--) { /* oldest first */
        int slot = (h->tick_head - k + BW_HISTORY_POINTS) % BW_HISTORY_POINTS;
        if (!(s->flags[slot] & POINT_HAS)) continue;
        const point_t *p = &s->points[slot];
        out[n++] = (bw_history_point_t){.at_ms = h->ticks[slot],
                                        .lag = p->lag,
                                        .oldest_unapplied_ms = p->oldest_age_ms == NO_AGE ? -1 : (int64_t)p->oldest_age_ms,
                                        .rows_per_s = p->rows_per_s,
                                        .rate = p->rate,
                                        .row_rate = p->row_rate,
                                        .paused = (s->flags[slot] & POINT_PAUSED) != 0};
    }
    pthread_mutex_unlock(&h->mu);
    return n;
}

size_t bw_history_alerts(bw_history_t *h, int shard, int64_t since_ms, bw_history_alert_t *out, size_t max) {
    size_t n = 0;
    if (shard < 0 || shard >= h->shard_count) return 0;
    pthread_mutex_lock(&h->mu);
    const shard_t *s = &h->shards[shard];
    for (int k = 0; k < s->ev_n && n < max; k++) {
        int i = (s->ev_head + k) % BW_HISTORY_ALERT_EVENTS;
        if (s->events[i].at_ms < since_ms) continue;
        /* names are never removed nor moved: the pointer stays valid after the unlock */
        out[n++] = (bw_history_alert_t){s->events[i].at_ms, h->names[s->events[i].name], s->events[i].resolved};
    }
    pthread_mutex_unlock(&h->mu);
    return n;
}
