/* scheduler.c — which shard gets a worker next, what a finished job changes, pacing.
 *
 * The dispatcher hands a partition's next run of messages to the pool once the shard
 * may go: no job of the partition is in flight (one at a time keeps partition order),
 * its retry backoff is over, its rate limiter has a token, and its health admits it
 * (health.c: a held shard or a server that is down gets one probe at a time). Shards are
 * visited round-robin from where the last visit stopped, so with backlog everywhere and
 * a full pool every shard gets its turn, not the low numbers first. Workers apply jobs
 * (apply.c) in the pool (pool.c); a hung shard holds one worker until its query timeout,
 * and the other shards go on with the rest. Whether a shard may go at all is the gate's
 * answer (gate.h).
 *
 * Lanes: a shard's job comes from one of its lanes' partitions, chosen by stride
 * scheduling: each partition's pass is the statements served from it over its lane's
 * weight, and the lane with work and the least pass goes next. While two lanes have
 * work they share the shard's statements by weight; a lane without work is skipped (its
 * share goes to the others), and one that gets work again starts at the shard's current
 * pass, not with credit saved while idle. Order holds within a lane (one job per shard
 * in flight, a partition's messages in offset order), not across lanes.
 *
 * Server budgets: a server with a budget (statements/s, rows/s for the whole server,
 * control topic) has two more buckets here, this consumer's share of it; each job of its
 * shards also waits for them and pays them. While they wait, its shards are passed over
 * (none is marked: the first to go once they allow it is the next in the server's own
 * turn, visit()). Without any budget, dispatch is as it was, but for one check.
 * @locality dispatcher thread, except run_apply (a worker). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "consumer.h"
#include "gate.h"
#include "log.h"

/* The most a job of a shard limited by rl may take: a tenth of a second of its rate (at
 * least one), so a limit paces the shard in small steps, not a burst and a long wait. */
static uint64_t job_cap(const bw_ratelimit_t *rl, uint64_t cap) {
    if (rl->rate <= 0) return cap;
    double tenth = rl->rate / 10;
    return tenth < 1 ? 1 : tenth < (double)cap ? (uint64_t)tenth : cap;
}

/* The slot of the shard's lane to serve next: of its partitions with buffered messages,
 * the one with the least pass; -1 if none has any. A partition behind the shard's pass
 * (its lane was idle) catches up to it first. */
static int next_slot(int shard) {
    const bw_config_t *conf = consumer.conf;
    int best = -1;
    double floor_pass = consumer.shards[shard].pass;
    for (int lane = 0; lane < conf->lane_cnt; lane++) {
        int slot = bw_config_slot(conf, lane, shard);
        bw_partition_t *p = &consumer.partitions[slot];
        if (!p->assigned || !p->len) continue;
        if (p->pass < floor_pass) p->pass = floor_pass;
        if (best < 0 || p->pass < consumer.partitions[best].pass) best = slot;
    }
    return best;
}

/* The shard the turn's visit at position `at` goes to (the turn started at `first`): `at`
 * itself, but for a budgeted server's shards, which are visited from the server's own
 * cursor on (its range rotated so that the turn meets the cursor first). The turn's
 * cursor moves past every server's shards, so it enters a range anywhere, mostly at its
 * start: without this the first shards of a server whose budget lets one job through at
 * a time would take most of it. */
static int visit(int at, int first) {
    const bw_config_t *conf = consumer.conf;
    int v = conf->shard_server[at];
    if (!consumer.servers[v].limited) return at;
    const bw_server_t *range = &conf->servers[v];
    int n = range->last_shard - range->first_shard + 1;
    int entry = first >= range->first_shard && first <= range->last_shard ? first - range->first_shard : 0;
    return range->first_shard + (at - range->first_shard - entry + consumer.servers[v].cursor + n) % n;
}

/* Microseconds until the server's buckets allow a job (0: now). */
static int64_t server_wait(const bw_server_state_t *sv, int64_t now) {
    int64_t w = bw_ratelimit_wait(&sv->rl, now), rows = bw_ratelimit_wait(&sv->rl_rows, now);
    return w > rows ? w : rows;
}

static void run_apply(bw_job_t *j, bw_applier_t *ap);
static void applied(bw_job_t *j);

int64_t bw_scheduler_dispatch(void) { return bw_scheduler_dispatch_at(bw_now_us()); }

/* Hands out every job that is due, round-robin. Returns microseconds until the next one
 * might be. */
int64_t bw_scheduler_dispatch_at(int64_t now) {
    int64_t next = 50000; /* new messages and finished jobs wake the poll sooner */
    int n = consumer.conf->shard_count, first = consumer.next_shard;
    for (int k = 0; k < n; k++) {
        int at = (first + k) % n; /* from where the last call stopped; the cursor moves below, the visit order not */
        int s = consumer.budgeted ? visit(at, first) : at;
        bw_shard_t *sh = &consumer.shards[s];
        if (sh->job || (bw_gate_shard(s, now) & BW_GATE_STOPS_DISPATCH)) continue;
        int slot = next_slot(s);
        if (slot < 0) continue;
        bw_partition_t *p = &consumer.partitions[slot];
        if (sh->ready_at_us > now) {
            if (sh->ready_at_us - now < next) next = sh->ready_at_us - now;
            continue;
        }
        if (bw_pool_full()) return next; /* a finished job wakes the poll; the turn stays with s */
        int64_t wait = 0;
        bw_server_state_t *sv = consumer.budgeted ? &consumer.servers[consumer.conf->shard_server[s]] : NULL;
        if (sv && !sv->limited) sv = NULL;
        if (sv && (wait = server_wait(sv, now)) > 0) { /* its server's budget: the shard stays unmarked */
            if (wait < next) next = wait;
            continue;
        }
        bw_admit_t admit = bw_health_admit(consumer.health, s, now, &wait);
        if (admit == BW_ADMIT_WAIT) {
            if (wait < next) next = wait;
            continue;
        }
        int64_t wait_rows = bw_ratelimit_wait(&sh->rl_rows, now);
        if ((wait = bw_ratelimit_wait(&sh->rl, now)) < wait_rows) wait = wait_rows;
        if (wait > 0) {
            if (admit == BW_ADMIT_PROBE) bw_health_unadmit(consumer.health, s);
            sh->ready_at_us = now + wait;
            if (wait < next) next = wait;
            continue;
        }
        bw_job_t *j = calloc(1, sizeof(*j));
        if (!j) abort();
        j->run = run_apply;
        j->done = applied;
        j->shard = s;
        j->slot = slot;
        j->applied = p->applied;
        j->server = consumer.conf->shard_server[s];
        j->probe = admit == BW_ADMIT_PROBE;
        /* every budget pays for the whole job; whichever binds first makes the next one wait */
        uint64_t max_statements = job_cap(&sh->rl, (uint64_t)consumer.conf->transaction_max_statements);
        uint64_t max_rows = job_cap(&sh->rl_rows, UINT64_MAX);
        if (sv) { /* a limited server is paced in small steps too */
            max_statements = job_cap(&sv->rl, max_statements);
            max_rows = job_cap(&sv->rl_rows, max_rows);
        }
        bw_job_cost_t cost;
        j->cnt = bw_partition_plan_job(slot, j->probe ? 1 : p->len, max_statements, max_rows, &cost);
        j->statements = cost.statements;
        bw_ratelimit_reserve(&sh->rl, (double)cost.statements, now);
        bw_ratelimit_reserve(&sh->rl_rows, (double)cost.rows, now);
        if (sv) {
            const bw_server_t *range = &consumer.conf->servers[consumer.conf->shard_server[s]];
            bw_ratelimit_reserve(&sv->rl, (double)cost.statements, now);
            bw_ratelimit_reserve(&sv->rl_rows, (double)cost.rows, now);
            sv->cursor = (s - range->first_shard + 1) % (range->last_shard - range->first_shard + 1);
        }
        /* the lane pays for the job by its weight; the shard's pass is where lanes are */
        sh->pass = p->pass;
        p->pass += (double)(cost.statements ? cost.statements : 1) / consumer.conf->lanes[p->lane].weight;
        j->msgs = malloc(j->cnt * sizeof(*j->msgs));
        if (!j->msgs) abort();
        memcpy(j->msgs, p->buf, j->cnt * sizeof(*j->msgs));
        j->started_us = now;
        sh->job = j;
        consumer.next_shard = (at + 1) % n; /* the next visit starts after the shard served */
        bw_pool_submit(j);
    }
    return next;
}

/* Logs, alerts and refetches what a health transition changed. */
void bw_scheduler_on_health(int shard, unsigned changed, bw_fail_t fail, const char *error) {
    int server = consumer.conf->shard_server[shard];
    const bw_server_t *sv = &consumer.conf->servers[server];
    if (changed & BW_HEALTH_SHARD_HELD)
        bw_log(BW_LOG_ERROR, COMPONENT, shard, NULL,
               "%d consecutive timeouts: not pulling the shard; one batch every %d ms decides",
               consumer.conf->pause_after_timeouts, consumer.conf->pause_ms);
    if ((changed & BW_HEALTH_SHARD_STOPPED) && !bw_alerts_firing(consumer.alerts, BW_ALERT_STOPPED, shard))
        bw_log(BW_LOG_ERROR, COMPONENT, shard, NULL, "stopped: %s; trying one batch every %d ms", error,
               consumer.conf->pause_ms);
    if (fail == BW_FAIL_TIMEOUT && bw_health_shard_held(consumer.health, shard))
        bw_alerts_fire(consumer.alerts, BW_ALERT_UNHEALTHY, shard, error); /* again: it carries the latest error */
    if (changed & BW_HEALTH_SHARD_STOPPED) bw_alerts_fire(consumer.alerts, BW_ALERT_STOPPED, shard, error);
    if (changed & (BW_HEALTH_SHARD_HELD | BW_HEALTH_SHARD_STOPPED | BW_HEALTH_SHARD_FREED)) /* at once, not at the next gauges */
        bw_metrics_set(consumer.metrics, BW_CM_UNHEALTHY, shard, 0, (bw_gate_shard(shard, bw_now_us()) & BW_GATE_HELD) != 0);
    if (changed & BW_HEALTH_SHARD_FREED) {
        bw_alerts_resolve(consumer.alerts, BW_ALERT_UNHEALTHY, shard);
        bw_alerts_resolve(consumer.alerts, BW_ALERT_STOPPED, shard);
    }
    if (changed & BW_HEALTH_SERVER_DOWN)
        bw_log(BW_LOG_ERROR, COMPONENT, shard, NULL,
               "server %s (%s:%d) unreachable: its shards wait without workers; one batch every %d ms decides",
               sv->name, sv->host, sv->port, consumer.conf->pause_ms);
    if (fail == BW_FAIL_CONNECTION && bw_health_server_down(consumer.health, server))
        bw_alerts_fire_server(consumer.alerts, server, error);
    if (changed & (BW_HEALTH_SERVER_DOWN | BW_HEALTH_SERVER_UP)) {
        int down = (changed & BW_HEALTH_SERVER_DOWN) != 0;
        bw_metrics_set(consumer.metrics, BW_CM_SERVER_DOWN, server, 0, down);
        if (!down) bw_alerts_resolve_server(consumer.alerts, server);
        for (int s = sv->first_shard; s <= sv->last_shard; s++) bw_partition_refresh_shard(s);
    }
    bw_partition_refresh_shard(shard);
}

/* A batch that was not applied stays first in its buffer; the shard backs off
 * exponentially with jitter. */
static void retry_later(bw_job_t *j, bw_fail_t fail, int64_t now) {
    bw_shard_t *p = &consumer.shards[j->shard];
    int64_t initial = (int64_t)consumer.conf->retry_initial_ms * 1000, max = (int64_t)consumer.conf->retry_max_ms * 1000;
    p->backoff_us = p->backoff_us ? p->backoff_us * 2 : initial;
    if (p->backoff_us > max) p->backoff_us = max;
    int64_t jitter = (int64_t)(rand() % 1000) * p->backoff_us / 4000; /* up to +25% */
    p->ready_at_us = now + p->backoff_us + jitter;
    bw_metrics_add(consumer.metrics, BW_CM_ERRORS, j->shard, (int)fail, 1);
    bw_metrics_add(consumer.metrics, BW_CM_RETRIES, j->shard, 0, 1);
    bw_partition_note_error(j->shard, bw_fail_name(fail), j->res.error);
    if (fail != BW_FAIL_STOP)
        bw_log(BW_LOG_WARN, COMPONENT, j->shard, NULL, "batch not applied, retrying in %lld ms: %s",
               (long long)(p->backoff_us + jitter) / 1000, j->res.error);
}

/* @locality worker thread: the job's transaction. */
static void run_apply(bw_job_t *j, bw_applier_t *ap) {
    bw_applier_apply(ap, j->slot, j->applied, j->msgs, j->cnt, &j->res);
}

/* Takes a finished apply job back. */
static void applied(bw_job_t *j) {
    int64_t now = bw_now_us();
    bw_shard_t *p = &consumer.shards[j->shard];
    if (j->res.status == BW_APPLY_REWIND) { /* the server answered; its ledger is the truth */
        unsigned answered = bw_health_report(consumer.health, j->shard, BW_FAIL_NONE, j->probe, now);
        bw_log(BW_LOG_WARN, COMPONENT, j->shard, NULL, "%s", j->res.error);
        bw_partition_note_error(j->shard, "ledger", j->res.error);
        bw_partition_rewind(j->slot, j->res.next_offset);
        p->job = NULL;
        bw_scheduler_on_health(j->shard, answered, BW_FAIL_NONE, "");
        free(j->msgs);
        free(j);
        return;
    }
    bw_fail_t fail = j->res.status == BW_APPLY_OK ? BW_FAIL_NONE : j->res.fail;
    if (j->res.reconnects) bw_metrics_add(consumer.metrics, BW_CM_RECONNECTS, j->shard, 0, j->res.reconnects);
    if (fail == BW_FAIL_NONE && j->res.rows_coalesced)
        bw_metrics_add(consumer.metrics, BW_CM_INCREMENTS_COALESCED, j->shard, 0, j->res.rows_coalesced);
    if (fail == BW_FAIL_NONE && j->res.ops_cancelled)
        bw_metrics_add(consumer.metrics, BW_CM_OPS_CANCELLED, j->shard, 0, j->res.ops_cancelled);
    unsigned changed = bw_health_report(consumer.health, j->shard, fail, j->probe, now);
    if (fail == BW_FAIL_NONE) {
        bw_partition_drop_head(j->slot, j->cnt);
        consumer.partitions[j->slot].statements += j->res.statements;
        p->backoff_us = 0;
        /* the throttle's latency signal: ms per statement, a moving average of the last batches */
        double ms = (double)(now - j->started_us) / 1000.0 / (double)(j->statements ? j->statements : 1);
        p->latency_ms = p->latency_ms > 0 ? 0.7 * p->latency_ms + 0.3 * ms : ms;
        p->latency_ms_ring[p->latency_next] = (float)ms; /* the status's percentiles */
        p->latency_next = (p->latency_next + 1) % BW_LATENCY_SAMPLES;
        if (p->latency_cnt < BW_LATENCY_SAMPLES) p->latency_cnt++;
        p->statements_done += j->statements;
        bw_progress_applied(j, now);
    } else {
        retry_later(j, fail, now);
    }
    p->job = NULL;
    bw_scheduler_on_health(j->shard, changed, fail, j->res.error);
    free(j->msgs);
    free(j);
}

/* Waits until no job of the listed partitions' shards, and no ledger read, is in flight. */
void bw_scheduler_drain(const int *slots, size_t n) {
    for (;;) {
        int in_flight = consumer.ledger_reads > 0 || consumer.ledger_checks > 0;
        for (size_t i = 0; i < n && !in_flight; i++)
            in_flight = consumer.shards[consumer.partitions[slots[i]].shard].job != NULL;
        if (!in_flight) return;
        bw_pool_collect(100000);
    }
}

/* Sets the shard's limiter to its rate in force: the cap (operator's or configured), or
 * the throttle's rate below it. why says where a change came from, for the log. */
static void apply_rate(int s, int64_t now, const char *why) {
    bw_shard_t *p = &consumer.shards[s];
    double rate = bw_throttle_rate(&consumer.throttle, &p->throttle, p->cap_rate);
    if (rate == p->rl.rate) return;
    bw_log(BW_LOG_INFO, COMPONENT, s, NULL, "rate %g -> %g statements/s%s", p->rl.rate, rate, why);
    bw_ratelimit_set_rate(&p->rl, rate, now);
    if (!p->backoff_us) p->ready_at_us = 0; /* a wait set by the old rate; a retry backoff stays */
}

/* Applies the operator's settings (and configured rates, after a reload) to every
 * assigned shard. */
void bw_scheduler_apply_settings(int64_t now) {
    for (int s = 0; s < consumer.conf->shard_count; s++) {
        bw_shard_t *p = &consumer.shards[s];
        if (!p->assigned_lanes) continue;
        bw_shard_setting_t set;
        bw_shard_table_setting(consumer.table, s, &set);
        /* who changed it, from where and why (the control record's audit) */
        char op[sizeof(set.changed_by) + sizeof(set.changed_from) + sizeof(set.reason) + 32];
        snprintf(op, sizeof(op), " (operator %s from %s%s%s)", set.changed_by[0] ? set.changed_by : "?",
                 set.changed_from[0] ? set.changed_from : "?", set.reason[0] ? ": " : "", set.reason);
        p->cap_rate = bw_shard_effective_rate(consumer.conf, s, &set);
        apply_rate(s, now, set.has_rate ? op : " (configured)");
        double row_rate = bw_shard_effective_row_rate(consumer.conf, s, &set);
        if (row_rate != p->rl_rows.rate) {
            bw_log(BW_LOG_INFO, COMPONENT, s, NULL, "row budget %g -> %g rows/s%s", p->rl_rows.rate, row_rate,
                   set.has_row_rate ? op : " (configured)");
            bw_ratelimit_set_rate(&p->rl_rows, row_rate, now);
            if (!p->backoff_us) p->ready_at_us = 0;
        }
        if (set.pinned != p->pinned) {
            bw_log(BW_LOG_INFO, COMPONENT, s, NULL, "rate %s%s", set.pinned ? "pinned: the throttle leaves it" : "unpinned",
                   op);
            p->pinned = set.pinned;
        }
        if (set.paused != p->op_paused) {
            bw_log(BW_LOG_INFO, COMPONENT, s, NULL, "%s%s", set.paused ? "paused" : "resumed", op);
            p->op_paused = set.paused;
            bw_partition_refresh_shard(s);
        }
    }
    bw_scheduler_apply_budgets(now); /* the servers' shares follow the shards held */
}

void bw_scheduler_servers_init(int64_t now) {
    consumer.servers = calloc((size_t)consumer.conf->server_cnt + 1, sizeof(*consumer.servers));
    if (!consumer.servers) abort();
    for (int v = 0; v < consumer.conf->server_cnt; v++) {
        bw_ratelimit_init(&consumer.servers[v].rl, 0, now);
        bw_ratelimit_init(&consumer.servers[v].rl_rows, 0, now);
    }
    consumer.budgeted = 0;
}

/* "40" or "-" (none), for the log. */
static const char *budget_word(double x, char *buf, size_t size) {
    if (x > 0) snprintf(buf, size, "%g", x);
    else snprintf(buf, size, "-");
    return buf;
}

void bw_scheduler_server_budget(int v, double rate, double row_rate, int64_t now, const char *why) {
    bw_server_state_t *sv = &consumer.servers[v];
    const bw_server_t *range = &consumer.conf->servers[v];
    int n = range->last_shard - range->first_shard + 1, held = 0;
    for (int s = range->first_shard; s <= range->last_shard; s++) held += consumer.shards[s].assigned_lanes > 0;
    if (rate == sv->rate && row_rate == sv->row_rate && held == sv->held) return;
    /* this consumer's part: the other holders of the server's shards take theirs */
    double share = rate * held / n, share_rows = row_rate * held / n;
    char b[4][32];
    if (rate != sv->rate || row_rate != sv->row_rate || (held != sv->held && (rate > 0 || row_rate > 0)))
        bw_log(BW_LOG_INFO, COMPONENT, -1, NULL,
               "server %s: budget %s statements/s, %s rows/s for the whole server; this consumer's share (%d of its %d "
               "shards held here) %s statements/s, %s rows/s%s", range->name, budget_word(rate, b[0], sizeof(b[0])),
               budget_word(row_rate, b[1], sizeof(b[1])), held, n, budget_word(share, b[2], sizeof(b[2])),
               budget_word(share_rows, b[3], sizeof(b[3])), why);
    sv->rate = rate, sv->row_rate = row_rate, sv->held = held;
    int limited = held > 0 && (rate > 0 || row_rate > 0);
    bw_ratelimit_set_rate(&sv->rl, limited ? share : 0, now);
    bw_ratelimit_set_rate(&sv->rl_rows, limited ? share_rows : 0, now);
    consumer.budgeted += limited - sv->limited;
    sv->limited = limited;
    if (consumer.metrics) /* only the kinds of budget the server has */
        bw_consumer_metrics_budget(consumer.metrics, v, rate > 0 ? share : BW_METRICS_UNSET,
                                   row_rate > 0 ? share_rows : BW_METRICS_UNSET);
}

void bw_scheduler_apply_budgets(int64_t now) {
    for (int v = 0; v < consumer.conf->server_cnt; v++) {
        bw_server_budget_t b;
        bw_shard_table_server_budget(consumer.table, v, &b);
        char why[sizeof(b.changed_by) + sizeof(b.changed_from) + sizeof(b.reason) + 32] = " (no operator budget)";
        if (b.updated_at_ms)
            snprintf(why, sizeof(why), " (operator %s from %s%s%s)", b.changed_by[0] ? b.changed_by : "?",
                     b.changed_from[0] ? b.changed_from : "?", b.reason[0] ? ": " : "", b.reason);
        bw_scheduler_server_budget(v, b.rate, b.row_rate, now, why);
    }
}

/* Every shard back to running, its cap in force (the throttle was switched off). */
static void throttle_off(int64_t now) {
    bw_signals_stop(consumer.signals);
    consumer.signals = NULL;
    for (int s = 0; s < consumer.conf->shard_count; s++) {
        bw_shard_t *p = &consumer.shards[s];
        int was_paused = p->throttle_paused;
        memset(&p->throttle, 0, sizeof(p->throttle));
        p->throttle_paused = 0;
        if (!p->assigned_lanes) continue;
        apply_rate(s, now, " (throttle.mode off)");
        if (was_paused) bw_partition_refresh_shard(s);
    }
    for (int v = 0; v < consumer.conf->server_cnt; v++) bw_alerts_resolve(consumer.alerts, BW_ALERT_SIGNAL_UNKNOWN, v);
    bw_metrics_switch(consumer.metrics, BW_CONSUMER_METRICS_THROTTLE, 0);
}

void bw_scheduler_throttle_tick(int64_t now) {
    const bw_throttle_limits_t *l = &consumer.throttle;
    if (l->mode == BW_THROTTLE_OFF) {
        if (consumer.signals) throttle_off(now);
        return;
    }
    if (!consumer.signals) {
        /* the heartbeat row: this host and port (a listen address of 0.0.0.0 is on every host) */
        char host[256 + sizeof(consumer.instance)] = "";
        gethostname(host, 256);
        host[255] = '\0';
        strcat(host, "/");
        strcat(host, consumer.instance);
        consumer.signals = bw_signals_start(consumer.conf, bw_signals_heartbeat_id(host));
        consumer.throttle_tick_us = consumer.signals_started_us = now;
        return;
    }
    if (now - consumer.throttle_tick_us < l->interval_us) return;
    double dt = (double)(now - consumer.throttle_tick_us) / 1e6;
    consumer.throttle_tick_us = now;
    int64_t now_ms = bw_wall_ms();
    const char *dry = l->mode == BW_THROTTLE_DRY_RUN ? " (dry run: not applied)" : "";
    int nsv = consumer.conf->server_cnt;
    bw_signal_reading_t(*server)[BW_SERVER_SIGNALS] = calloc((size_t)nsv, sizeof(*server));
    double *latency = calloc((size_t)nsv, sizeof(double)); /* the most of each server's shards, for metrics */
    if (!server || !latency) abort();
    /* just started: decide nothing until every signal in use was read once (or stale_ms
     * passed), so that a first read slower than an interval is no "unknown" at startup */
    int first_reads_pending = 0;
    for (int v = 0; v < nsv; v++) {
        bw_signals_read(consumer.signals, v, server[v]);
        for (int k = 0; k < BW_SERVER_SIGNALS; k++)
            if (l->limits[k].threshold > 0 && (k != BW_SIGNAL_REPLICATION_LAG || consumer.conf->servers[v].replica_cnt) &&
                !server[v][k].at_us && !server[v][k].error[0])
                first_reads_pending = 1;
    }
    if (first_reads_pending && now - consumer.signals_started_us < l->stale_us) {
        free(server);
        free(latency);
        return;
    }
    for (int v = 0; v < nsv; v++) {
        /* a server signal in use that is not read (or too old) is an alert of its own */
        int unknown = -1;
        for (int k = 0; k < BW_SERVER_SIGNALS && unknown < 0; k++)
            if (l->limits[k].threshold > 0 && (k != BW_SIGNAL_REPLICATION_LAG || consumer.conf->servers[v].replica_cnt) &&
                (!server[v][k].at_us || now - server[v][k].at_us > l->stale_us))
                unknown = k;
        if (unknown >= 0) {
            char error[240];
            snprintf(error, sizeof(error), "%s: %s", bw_signal_names[unknown],
                     server[v][unknown].error[0] ? server[v][unknown].error : "not read lately");
            bw_alerts_fire(consumer.alerts, BW_ALERT_SIGNAL_UNKNOWN, v, error);
        } else {
            bw_alerts_resolve(consumer.alerts, BW_ALERT_SIGNAL_UNKNOWN, v);
        }
        for (int k = 0; k < BW_SERVER_SIGNALS; k++) {
            int known = server[v][k].at_us && now - server[v][k].at_us <= l->stale_us;
            /* no replicas, no lag signal: not shown, rather than unknown forever */
            int used = k != BW_SIGNAL_REPLICATION_LAG || consumer.conf->servers[v].replica_cnt;
            bw_consumer_metrics_signal(consumer.metrics, v, k, known ? server[v][k].value : NAN,
                                       used ? l->limits[k].threshold : 0);
        }
    }
    for (int s = 0; s < consumer.conf->shard_count; s++) {
        bw_shard_t *p = &consumer.shards[s];
        if (!p->assigned_lanes) continue;
        int v = consumer.conf->shard_server[s];
        bw_signal_reading_t readings[BW_SIGNAL_KINDS];
        memcpy(readings, server[v], sizeof(server[v]));
        /* a server without replicas has no lag to read: the signal is off there, not unknown */
        if (!consumer.conf->servers[v].replica_cnt) readings[BW_SIGNAL_REPLICATION_LAG] = (bw_signal_reading_t){0, now, ""};
        /* the latency of its batches since the last tick; none ran (idle, or paused): no
         * evidence, 0 — an old value would keep a paused shard paused for good */
        int ran = p->statements_done != p->statements_at_tick;
        readings[BW_SIGNAL_LATENCY] = (bw_signal_reading_t){ran ? p->latency_ms : 0, now, ""};
        if (ran && p->latency_ms > latency[v]) latency[v] = p->latency_ms;
        double observed = (double)(p->statements_done - p->statements_at_tick) / dt;
        p->statements_at_tick = p->statements_done;
        bw_throttle_state_t before = p->throttle.state;
        int changed = p->pinned ? bw_throttle_pin(&p->throttle, now_ms)
                                : bw_throttle_step(l, &p->throttle, p->cap_rate, observed, readings, now, now_ms);
        if (changed) {
            bw_log_level_t level = p->throttle.state == BW_THROTTLE_UNKNOWN || p->throttle.state == BW_THROTTLE_CRITICAL
                                       ? BW_LOG_WARN
                                       : BW_LOG_INFO;
            bw_log(level, COMPONENT, s, NULL, "throttle: %s -> %s: %s; rate %g statements/s%s",
                   bw_throttle_state_names[before], bw_throttle_state_names[p->throttle.state], p->throttle.why,
                   p->throttle.state == BW_THROTTLE_RUNNING ? p->cap_rate : p->throttle.rate, dry);
        }
        char why[sizeof(p->throttle.why) + 16];
        snprintf(why, sizeof(why), " (throttle: %s)", p->throttle.why);
        apply_rate(s, now, why);
        int paused = bw_throttle_paused(l, &p->throttle);
        if (paused != p->throttle_paused) {
            p->throttle_paused = paused;
            bw_partition_refresh_shard(s);
        }
        bw_consumer_metrics_throttle(consumer.metrics, s, (int)p->throttle.state,
                                  p->throttle.state == BW_THROTTLE_RUNNING ? p->cap_rate : p->throttle.rate);
    }
    for (int v = 0; v < nsv; v++)
        bw_consumer_metrics_signal(consumer.metrics, v, BW_SIGNAL_LATENCY, latency[v], l->limits[BW_SIGNAL_LATENCY].threshold);
    free(server);
    free(latency);
}
