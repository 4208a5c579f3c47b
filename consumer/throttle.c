/* throttle.c — the adaptive throttle's decisions (throttle.h). */
#include "throttle.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

const char *const bw_signal_names[BW_SIGNAL_KINDS] = {"replication_lag_ms", "threads_running", "custom",
                                                       "statement_latency_ms"};
const char *const bw_throttle_state_names[4] = {"running", "throttled", "unknown", "critical"};

void bw_throttle_limits_from_config(const bw_config_t *c, bw_throttle_limits_t *l) {
    memset(l, 0, sizeof(*l));
    l->mode = (bw_throttle_mode_t)c->throttle_mode;
    l->floor = c->throttle_floor;
    l->max_rate = c->throttle_max_rate;
    l->decrease = c->throttle_decrease;
    l->increase = c->throttle_increase;
    l->recover_ratio = c->throttle_recover_ratio;
    l->interval_us = (int64_t)c->throttle_interval_ms * 1000;
    l->stale_us = (int64_t)c->throttle_stale_ms * 1000;
    l->quiet_us = (int64_t)c->throttle_quiet_ms * 1000;
    l->critical_us = (int64_t)c->throttle_critical_ms * 1000;
    l->limits[BW_SIGNAL_REPLICATION_LAG] = (bw_signal_limit_t){c->throttle_lag_ms, c->throttle_lag_critical_ms};
    l->limits[BW_SIGNAL_THREADS_RUNNING] =
        (bw_signal_limit_t){c->throttle_threads_running, c->throttle_threads_running_critical};
    l->limits[BW_SIGNAL_CUSTOM] = (bw_signal_limit_t){c->throttle_custom_query[0] ? c->throttle_custom_threshold : 0,
                                                      c->throttle_custom_critical};
    l->limits[BW_SIGNAL_LATENCY] = (bw_signal_limit_t){c->throttle_latency_ms, c->throttle_latency_critical_ms};
}

static void wall_text(int64_t ms, char out[32]) {
    time_t secs = (time_t)(ms / 1000);
    struct tm tm;
    strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&secs, &tm));
}

/* Sets the state and its reason; returns 1 if the state or its signal changed. */
static int become(bw_throttle_shard_t *t, bw_throttle_state_t state, int signal, double value, double level,
                  const char *error, int64_t now_ms) {
    int changed = t->state != state || t->signal != signal;
    if (changed) t->since_ms = now_ms;
    t->state = state;
    t->signal = signal;
    t->value = value;
    t->level = level;
    char since[32];
    wall_text(t->since_ms, since);
    const char *name = signal >= 0 ? bw_signal_names[signal] : "";
    switch (state) {
    case BW_THROTTLE_RUNNING:
        snprintf(t->why, sizeof(t->why), "every signal under its threshold since %s", since);
        break;
    case BW_THROTTLE_THROTTLED:
        if (value > level)
            snprintf(t->why, sizeof(t->why), "%s %.6g over its threshold %.6g since %s", name, value, level, since);
        else
            snprintf(t->why, sizeof(t->why), "recovering: %s %.6g, threshold %.6g, since %s", name, value, level, since);
        break;
    case BW_THROTTLE_UNKNOWN:
        snprintf(t->why, sizeof(t->why), "%s unknown since %s: %.190s", name, since, error && *error ? error : "not read");
        break;
    case BW_THROTTLE_CRITICAL:
        snprintf(t->why, sizeof(t->why), "%s %.6g over its critical level %.6g: paused since %s", name, value, level,
                 since);
        break;
    }
    return changed;
}

int bw_throttle_pin(bw_throttle_shard_t *t, int64_t now_ms) {
    if (t->pinned) return 0;
    memset(t, 0, sizeof(*t));
    t->pinned = 1;
    t->initialised = 1;
    t->signal = -1;
    t->since_ms = now_ms;
    char since[32];
    wall_text(now_ms, since);
    snprintf(t->why, sizeof(t->why), "pinned by an operator since %s: the signals do not move it", since);
    return 1;
}

/* Trouble begins (a signal over, unknown or critical after calm): remember the rate it ran
 * at, which recovery climbs back to in steps of `increase` of it. */
static void trouble_begins(bw_throttle_shard_t *t, double rate) {
    if (!t->in_trouble) t->trouble_rate = rate;
    t->in_trouble = 1;
}

int bw_throttle_step(const bw_throttle_limits_t *l, bw_throttle_shard_t *t, double cap, double observed,
                     const bw_signal_reading_t readings[BW_SIGNAL_KINDS], int64_t now_us, int64_t now_ms) {
    int arriving = !t->initialised; /* just assigned here (a start, a rebalance) */
    if (!t->initialised || t->pinned) {
        memset(t, 0, sizeof(*t));
        t->initialised = 1;
        t->signal = -1;
        t->since_ms = now_ms;
        snprintf(t->why, sizeof(t->why), "every signal under its threshold");
    }
    if (cap > 0 && t->rate > cap) t->rate = cap; /* the cap was lowered: cut from there */
    if (cap > 0 && t->trouble_rate > cap) t->trouble_rate = cap; /* and climb in steps of it */
    /* the worst of each kind of trouble: unknown, critical, over, and the highest ratio */
    int unknown = -1, critical = -1, over = -1, worst = -1, quiet = 1;
    double worst_ratio = -1;
    for (int k = 0; k < BW_SIGNAL_KINDS; k++) {
        const bw_signal_limit_t *lim = &l->limits[k];
        const bw_signal_reading_t *r = &readings[k];
        if (lim->threshold <= 0) continue;
        if (!r->at_us || now_us - r->at_us > l->stale_us) {
            if (unknown < 0) unknown = k;
            quiet = 0;
            continue;
        }
        double ratio = r->value / lim->threshold;
        if (ratio > worst_ratio) worst_ratio = ratio, worst = k;
        if (lim->critical > 0 && r->value >= lim->critical && critical < 0) critical = k;
        if (r->value > lim->threshold && (over < 0 || ratio > readings[over].value / l->limits[over].threshold)) over = k;
        if (r->value >= lim->threshold * l->recover_ratio) quiet = 0;
    }
    double ceiling = cap > 0 ? cap : l->max_rate;
    /* what it runs at now: while running, its cap, or for an unlimited shard what it did lately */
    double running_rate = cap > 0 ? cap : (observed > 0 && observed < l->max_rate ? observed : l->max_rate);
    double rate_now = arriving ? ceiling : t->state == BW_THROTTLE_RUNNING ? running_rate : t->rate;
    int changed = 0;

    /* critical: only after critical_us over the level, so a spike does not pause */
    if (critical >= 0) {
        if (!t->critical_since_us) t->critical_since_us = now_us;
    } else {
        t->critical_since_us = 0;
    }
    if (critical >= 0 && now_us - t->critical_since_us >= l->critical_us) {
        trouble_begins(t, rate_now);
        t->rate = l->floor;
        return become(t, BW_THROTTLE_CRITICAL, critical, readings[critical].value, l->limits[critical].critical, NULL,
                      now_ms);
    }
    if (t->state == BW_THROTTLE_CRITICAL && t->signal >= 0 && l->limits[t->signal].threshold > 0) {
        /* the signal that paused it, still over its threshold or not readable: stay paused */
        const bw_signal_reading_t *r = &readings[t->signal];
        int stale = !r->at_us || now_us - r->at_us > l->stale_us;
        if (stale || r->value > l->limits[t->signal].threshold)
            return become(t, BW_THROTTLE_CRITICAL, t->signal, stale ? t->value : r->value, t->level, NULL, now_ms);
    }

    if (unknown >= 0) {
        trouble_begins(t, rate_now);
        t->rate = l->floor;
        t->quiet_since_us = 0;
        return become(t, BW_THROTTLE_UNKNOWN, unknown, 0, l->limits[unknown].threshold, readings[unknown].error, now_ms);
    }
    if (over >= 0) {
        t->quiet_since_us = 0;
        trouble_begins(t, rate_now);
        if (arriving) {
            /* a shard that arrives while its server is in trouble starts at the floor, not
             * at its cap: each rebalance of an incident would flood the server again */
            t->rate = l->floor;
            t->last_step_us = now_us;
        } else if (t->state == BW_THROTTLE_RUNNING) {
            t->rate = running_rate; /* the first cut starts from what it ran at */
            t->last_step_us = 0;
        }
        if (!t->last_step_us || now_us - t->last_step_us >= l->interval_us) {
            t->rate = fmax(l->floor, t->rate * l->decrease);
            t->last_step_us = now_us;
        }
        return become(t, BW_THROTTLE_THROTTLED, over, readings[over].value, l->limits[over].threshold, NULL, now_ms);
    }
    if (t->state == BW_THROTTLE_RUNNING) {
        if (worst >= 0) t->value = readings[worst].value; /* for the report */
        return 0;
    }
    /* back from unknown or critical with nothing over: throttled at the floor, recovering */
    if (t->state != BW_THROTTLE_THROTTLED) {
        t->rate = l->floor;
        t->last_step_us = now_us;
    }
    int sig = worst >= 0 ? worst : t->signal;
    changed = become(t, BW_THROTTLE_THROTTLED, sig, sig >= 0 ? readings[sig].value : 0,
                     sig >= 0 ? l->limits[sig].threshold : 0, NULL, now_ms);
    if (!quiet) { /* between the recovery level and the threshold: hold */
        t->quiet_since_us = 0;
        return changed;
    }
    if (!t->quiet_since_us) t->quiet_since_us = now_us;
    if (now_us - t->quiet_since_us >= l->quiet_us && now_us - t->last_step_us >= l->interval_us) {
        /* additive, in steps of `increase` of the rate where the trouble began, back to it;
         * past it, `increase` of its own rate per step, probing towards the cap */
        t->rate = fmin(ceiling, t->rate + l->increase * fmax(t->trouble_rate, t->rate));
        /* it climbs: trouble from here on is a new bout, measured from the rate it then has
         * (a signal that flickers before quiet_ms does not end the bout) */
        t->in_trouble = 0;
        t->last_step_us = now_us;
        if (t->rate >= ceiling) {
            t->signal = -1;
            return become(t, BW_THROTTLE_RUNNING, -1, 0, 0, NULL, now_ms) | 1;
        }
    }
    return changed;
}

double bw_throttle_rate(const bw_throttle_limits_t *l, const bw_throttle_shard_t *t, double cap) {
    if (l->mode != BW_THROTTLE_ON || t->state == BW_THROTTLE_RUNNING) return cap;
    return cap > 0 && cap < t->rate ? cap : t->rate;
}

int bw_throttle_paused(const bw_throttle_limits_t *l, const bw_throttle_shard_t *t) {
    return l->mode == BW_THROTTLE_ON && t->state == BW_THROTTLE_CRITICAL;
}
