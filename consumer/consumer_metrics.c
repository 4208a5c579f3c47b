/* consumer_metrics.c — the consumer's metric families, in the order /metrics shows them;
 * the metric list of docs/api.md is written from them too. Their index
 * (BW_METRIC_PER_*): a shard, a server (config order), a server and its listed replica,
 * a lane slot; an error's sub is its bw_fail_t, a signal's its bw_signal_t. */
#include "consumer_metrics.h"

#include "db.h"
#include "throttle.h"

static const char *const budget_kinds[2] = {"statements", "rows"};
static const char *const post_results[2] = {"ok", "failed"};

static const bw_metric_row_t rows[BW_CM_ROWS] = {
    [BW_CM_ROWS_APPLIED] = {
        .name = "bulkwrite_consumer_rows_applied_total", .type = BW_METRIC_COUNTER, .labels = "shard",
        .per = BW_METRIC_PER_SHARD, .show = BW_METRIC_SHOW_SEEN,
        .help = "Rows applied to the shard.",
        .doc = "rows applied to the shard"},
    [BW_CM_MESSAGES_REPLAYED] = {
        .name = "bulkwrite_consumer_messages_replayed_total", .type = BW_METRIC_COUNTER, .labels = "shard",
        .per = BW_METRIC_PER_SHARD, .show = BW_METRIC_SHOW_SEEN,
        .help = "Messages read again that the shard had already applied (skipped, not re-applied).",
        .doc = "messages read again that the shard had already applied; skipped, never re-applied"},
    [BW_CM_ROWS_FAILED] = {
        .name = "bulkwrite_consumer_rows_failed_total", .type = BW_METRIC_COUNTER, .labels = "shard",
        .per = BW_METRIC_PER_SHARD, .show = BW_METRIC_SHOW_SEEN,
        .help = "Rows the shard refused (data errors).",
        .doc = "ops the shard refused (data errors), and ops of messages that no longer match the "
               "configuration"},
    [BW_CM_BATCHES_APPLIED] = {
        .name = "bulkwrite_consumer_batches_applied_total", .type = BW_METRIC_COUNTER, .labels = "shard",
        .per = BW_METRIC_PER_SHARD, .show = BW_METRIC_SHOW_SEEN, .seen = 1,
        .help = "Batch transactions committed on the shard.",
        .doc = "apply transactions committed on the shard"},
    [BW_CM_STATEMENTS] = {
        .name = "bulkwrite_consumer_statements_total", .type = BW_METRIC_COUNTER, .labels = "shard",
        .per = BW_METRIC_PER_SHARD, .show = BW_METRIC_SHOW_SEEN, .seen = 1,
        .help = "SQL statements run on the shard (each takes one permit of its statements-per-second rate).",
        .doc = "SQL statements run on the shard; each takes one permit of its statements-per-second rate"},
    [BW_CM_ERRORS] = {
        .name = "bulkwrite_consumer_errors_total", .type = BW_METRIC_COUNTER, .labels = "shard,kind",
        .per = BW_METRIC_PER_SHARD, .subs = bw_fail_names, .sub_cnt = BW_FAIL_CLASSES,
        .show = BW_METRIC_SHOW_NONZERO, .seen = 1,
        .help = "Apply errors by kind; every retryable, timeout and connection error is followed by a retry.",
        .doc = "apply errors by kind: `timeout`, `connection` and `retryable` (per failed attempt; each is "
               "retried), `stop` (per attempt refused for a reason only an operator can fix: the shard stops "
               "and alerts), `data` (per refused row), `decode` (per unusable message)"},
    [BW_CM_MESSAGES_DUPLICATE] = {
        .name = "bulkwrite_consumer_messages_duplicate_total", .type = BW_METRIC_COUNTER, .labels = "shard",
        .per = BW_METRIC_PER_SHARD, .show = BW_METRIC_SHOW_SEEN,
        .help = "Messages of a resubmitted request (same request_id) already applied: skipped.",
        .doc = "messages of a resent request (same `request_id`) that the shard had applied; skipped"},
    [BW_CM_DEAD_LETTERS] = {
        .name = "bulkwrite_consumer_dead_letters_total", .type = BW_METRIC_COUNTER, .labels = "shard",
        .per = BW_METRIC_PER_SHARD, .show = BW_METRIC_SHOW_SEEN,
        .help = "Refused ops (or undecodable messages) written to the dead-letter topic.",
        .doc = "records written to the dead-letter topic (refused ops, undecodable messages)"},
    [BW_CM_UNHEALTHY] = {
        .name = "bulkwrite_consumer_unhealthy", .type = BW_METRIC_GAUGE, .labels = "shard",
        .per = BW_METRIC_PER_SHARD, .show = BW_METRIC_SHOW_ASSIGNED,
        .help = "1 while the shard is held back after consecutive timeouts (until a probe batch succeeds).",
        .doc = "1 while the shard is held back after consecutive timeouts or a stop error, until a probe "
               "batch succeeds"},
    [BW_CM_SERVER_DOWN] = {
        .name = "bulkwrite_consumer_server_down", .type = BW_METRIC_GAUGE, .labels = "server",
        .per = BW_METRIC_PER_SERVER,
        .help = "1 while the server is unreachable (its shards wait; see the BulkwriteServerDown alert).",
        .doc = "1 while the server is unreachable (`BulkwriteServerDown`) and this consumer holds one of its "
               "shards: its shards wait without workers, one probe per `consumer.pause_ms` decides"},
    [BW_CM_SERVER_BUDGET] = {
        .name = "bulkwrite_consumer_server_budget", .type = BW_METRIC_GAUGE, .labels = "server,kind",
        .per = BW_METRIC_PER_SERVER, .subs = budget_kinds, .sub_cnt = 2, .show = BW_METRIC_SHOW_SET, .real = 1,
        .help = "This consumer's share of the server's budget (POST /v1/servers/{name}/budget): statements or "
                "rows per second.",
        .doc = "this consumer's share of a server's budget (`POST /v1/servers/{name}/budget`), "
               "`kind=\"statements\"` per second or `kind=\"rows\"` per second: the budget × the server's "
               "shards held here / its shards; only for the kinds of budget the server has"},
    [BW_CM_KEPT_MESSAGES] = {
        .name = "bulkwrite_consumer_kept_messages", .type = BW_METRIC_GAUGE, .labels = "server",
        .per = BW_METRIC_PER_SERVER, .show = BW_METRIC_SHOW_SET,
        .help = "Applied messages of the server's shards held here that Kafka still keeps (consumer.keep_applied_ms, "
                "listed replicas behind).",
        .doc = "messages of the server's shards held here that were applied and are still in Kafka: what a "
               "failover to a lagging replica, or a restore, can replay (`consumer.keep_applied_ms`, and any "
               "listed replica not level yet); real brokers only"},
    [BW_CM_REPLICA_UNREAD_SECONDS] = {
        .name = "bulkwrite_consumer_replica_unread_seconds", .type = BW_METRIC_GAUGE, .labels = "server,replica",
        .per = BW_METRIC_PER_REPLICA, .show = BW_METRIC_SHOW_SET, .real = 1,
        .help = "Seconds since a listed replica's ledger was last read, while it cannot be read (0 while it can): "
                "Kafka keeps what the server's shards applied meanwhile.",
        .doc = "0 while a listed replica's ledger (`bw_offsets`) is read every round; else the seconds since it "
               "was last read (or since start): Kafka keeps every batch the server's shards applied meanwhile "
               "(`BulkwriteTrimHeld` after `consumer.replica_unread_alert_ms`); servers whose shards are held here"},
    [BW_CM_RECONNECTS] = {
        .name = "bulkwrite_consumer_reconnects_total", .type = BW_METRIC_COUNTER, .labels = "shard",
        .per = BW_METRIC_PER_SHARD, .show = BW_METRIC_SHOW_SEEN,
        .help = "Pooled connections found closed by the server or a load balancer and replaced at once (not "
                "errors, not retries).",
        .doc = "pooled connections found closed (the server's `wait_timeout`, a load balancer) and replaced "
               "at once: not errors, not retries"},
    [BW_CM_INCREMENTS_COALESCED] = {
        .name = "bulkwrite_consumer_increments_coalesced_total", .type = BW_METRIC_COUNTER, .labels = "shard",
        .per = BW_METRIC_PER_SHARD, .show = BW_METRIC_SHOW_SEEN,
        .help = "Increments added into an earlier increment of the same object (object_types[].coalesce_increments).",
        .doc = "increments summed into an earlier increment of the same object in one transaction "
               "(`object_types[].coalesce_increments`): ops applied without a row of their own"},
    [BW_CM_OPS_CANCELLED] = {
        .name = "bulkwrite_consumer_ops_cancelled_total", .type = BW_METRIC_COUNTER, .labels = "shard",
        .per = BW_METRIC_PER_SHARD, .show = BW_METRIC_SHOW_SEEN,
        .help = "Ops of cancelled jobs skipped (DELETE /v1/jobs/{id}): never applied.",
        .doc = "ops of cancelled jobs (`DELETE /v1/jobs/{id}`) the shard skipped: never applied, not in its ledger"},
    [BW_CM_ALERT_FIRING] = {
        .name = "bulkwrite_consumer_alert_firing", .type = BW_METRIC_GAUGE, .labels = "shard",
        .per = BW_METRIC_PER_SHARD, .show = BW_METRIC_SHOW_ASSIGNED, .seen = 1,
        .help = "1 while this consumer's BulkwriteShardUnhealthy alert for the shard is firing.",
        .doc = "1 while this consumer's `BulkwriteShardUnhealthy` alert for the shard fires"},
    [BW_CM_ALERT_POSTS] = {
        .name = "bulkwrite_consumer_alert_posts_total", .type = BW_METRIC_COUNTER, .labels = "result",
        .subs = post_results, .sub_cnt = 2,
        .help = "Posts to alerts.alertmanager_url, by result.",
        .doc = "posts to `alerts.alertmanager_url`, `ok` or `failed`"},
    [BW_CM_RATE_BATCHES_PER_SECOND] = {
        .name = "bulkwrite_consumer_rate_batches_per_second", .type = BW_METRIC_GAUGE, .labels = "shard",
        .per = BW_METRIC_PER_SHARD, .show = BW_METRIC_SHOW_ASSIGNED, .real = 1,
        .help = "Effective rate limit in statements per second (0 = unlimited); the name predates statement "
                "budgets.",
        .doc = "the shard's effective rate limit in statements per second (the name predates statement "
               "budgets): the operator's, else the configured one (0 = unlimited)"},
    [BW_CM_RATE_ROWS_PER_SECOND] = {
        .name = "bulkwrite_consumer_rate_rows_per_second", .type = BW_METRIC_GAUGE, .labels = "shard",
        .per = BW_METRIC_PER_SHARD, .show = BW_METRIC_SHOW_ASSIGNED, .real = 1,
        .help = "Effective row budget in rows per second (0 = none: statements alone limit the shard).",
        .doc = "the shard's effective row budget in rows per second: the operator's, else the configured one "
               "(0 = none)"},
    [BW_CM_PAUSED] = {
        .name = "bulkwrite_consumer_paused", .type = BW_METRIC_GAUGE, .labels = "shard",
        .per = BW_METRIC_PER_SHARD, .show = BW_METRIC_SHOW_ASSIGNED,
        .help = "1 while an operator has paused the shard.",
        .doc = "1 while an operator has paused the shard (`POST /v1/shards/{n}/pause`)"},
    [BW_CM_BUFFER_FULL] = {
        .name = "bulkwrite_consumer_buffer_full", .type = BW_METRIC_GAUGE, .labels = "shard",
        .per = BW_METRIC_PER_SHARD, .show = BW_METRIC_SHOW_ASSIGNED,
        .help = "1 while fetching for the shard is paused because its buffer is full (back-pressure).",
        .doc = "1 while fetching for the shard is paused because its buffer is full (back-pressure): "
               "`consumer.pull_count` messages, or its share of `consumer.buffer_max_bytes`"},
    [BW_CM_RETRIES] = {
        .name = "bulkwrite_consumer_retries_total", .type = BW_METRIC_COUNTER, .labels = "shard",
        .per = BW_METRIC_PER_SHARD, .show = BW_METRIC_SHOW_SEEN,
        .help = "Batches scheduled again after a retryable error (timeouts and connection errors included).",
        .doc = "batches scheduled again after a retryable error (timeouts and connection errors included)"},
    [BW_CM_LAG_MESSAGES] = {
        .name = "bulkwrite_consumer_lag_messages", .type = BW_METRIC_GAUGE, .labels = "shard",
        .per = BW_METRIC_PER_SHARD, .show = BW_METRIC_SHOW_ASSIGNED,
        .help = "Messages in Kafka the shard has not applied (high watermark minus its next offset).",
        .doc = "messages not yet applied: the partition's high watermark minus the next offset to apply "
               "(from the log start for a shard that never applied anything; the buffered count when the "
               "watermark is unknown). A shard stopped at lost messages counts them too. Refreshed every "
               "second. With lanes, the sum over the shard's lanes."},
    [BW_CM_LANE_LAG] = {
        .name = "bulkwrite_consumer_lane_lag", .type = BW_METRIC_GAUGE, .labels = "shard,lane",
        .per = BW_METRIC_PER_SLOT, .show = BW_METRIC_SHOW_ASSIGNED, .groups = BW_CONSUMER_METRICS_LANES,
        .help = "Messages of the shard's partition in the lane's topic not yet applied (config lanes).",
        .doc = "`bulkwrite_consumer_lag_messages` for one lane's partition of the shard; only with `lanes` "
               "configured"},
    [BW_CM_LANE_STATEMENTS] = {
        .name = "bulkwrite_consumer_lane_statements_total", .type = BW_METRIC_COUNTER, .labels = "shard,lane",
        .per = BW_METRIC_PER_SLOT, .show = BW_METRIC_SHOW_ASSIGNED, .groups = BW_CONSUMER_METRICS_LANES,
        .help = "Statements applied from the lane on the shard since this consumer was assigned it: the "
                "lanes' shares of the shard's budget.",
        .doc = "statements applied from the lane on the shard since this consumer was assigned it: the "
               "lanes' shares of the shard's budget; only with `lanes` configured"},
    [BW_CM_LOST_MESSAGES] = {
        .name = "bulkwrite_consumer_lost_messages", .type = BW_METRIC_GAUGE, .labels = "shard",
        .per = BW_METRIC_PER_SHARD, .show = BW_METRIC_SHOW_ASSIGNED,
        .help = "Messages Kafka deleted before the shard applied them (the shard stops; see the "
                "BulkwriteShardDataLost alert).",
        .doc = "messages Kafka deleted before the shard applied them; non-zero stops the shard and fires "
               "`BulkwriteShardDataLost`"},
    [BW_CM_THROTTLE_STATE] = {
        .name = "bulkwrite_consumer_throttle_state", .type = BW_METRIC_GAUGE, .labels = "shard,state",
        .per = BW_METRIC_PER_SHARD, .subs = bw_throttle_state_names, .sub_cnt = 4, .show = BW_METRIC_SHOW_ASSIGNED,
        .groups = BW_CONSUMER_METRICS_THROTTLE, .one_of = 1,
        .help = "1 for the shard's throttle state (running, throttled, unknown, critical), 0 for the others.",
        .doc = "1 for the adaptive throttle's state of the shard (`running`, `throttled`, `unknown`, "
               "`critical`), 0 for the others; absent while `throttle.mode` is off"},
    [BW_CM_THROTTLE_RATE] = {
        .name = "bulkwrite_consumer_throttle_rate", .type = BW_METRIC_GAUGE, .labels = "shard",
        .per = BW_METRIC_PER_SHARD, .show = BW_METRIC_SHOW_ASSIGNED, .groups = BW_CONSUMER_METRICS_THROTTLE,
        .real = 1,
        .help = "Statements per second the adaptive throttle decided for the shard (in dry_run, not applied).",
        .doc = "the statements/s the throttle runs the shard at (its cap while running; in `dry_run` the "
               "rate it would set)"},
    [BW_CM_SIGNAL] = {
        .name = "bulkwrite_consumer_signal", .type = BW_METRIC_GAUGE, .labels = "server,signal",
        .per = BW_METRIC_PER_SERVER, .subs = bw_signal_names, .sub_cnt = BW_SIGNAL_KINDS,
        .show = BW_METRIC_SHOW_SET, .groups = BW_CONSUMER_METRICS_THROTTLE, .real = 1,
        .help = "The throttle's last reading of a server signal (NaN: unknown); "
                "signal=\"statement_latency_ms\" is the most of the server's shards this consumer holds.",
        .doc = "the last reading of each throttle signal in use (`replication_lag_ms` only for servers with "
               "replicas, `threads_running`, `custom`; `statement_latency_ms` is the most of the server's "
               "shards that ran batches since the last step); NaN while unknown (never read, or its last "
               "good reading older than `throttle.stale_ms`)"},
    [BW_CM_SIGNAL_THRESHOLD] = {
        .name = "bulkwrite_consumer_signal_threshold", .type = BW_METRIC_GAUGE, .labels = "server,signal",
        .per = BW_METRIC_PER_SERVER, .subs = bw_signal_names, .sub_cnt = BW_SIGNAL_KINDS,
        .show = BW_METRIC_SHOW_SET, .groups = BW_CONSUMER_METRICS_THROTTLE, .real = 1,
        .help = "The threshold of a server signal (throttle.*); only signals in use are shown.",
        .doc = "the signal's threshold; only signals in use are shown. All four throttle series are absent "
               "while `throttle.mode` is off"},
    [BW_CM_APPLY_LATENCY_SECONDS] = {
        .name = "bulkwrite_consumer_apply_latency_seconds", .type = BW_METRIC_HISTOGRAM,
        .help = "Time to apply one batch transaction.",
        .doc = "time for one batch, from hand-off to a worker until the dispatcher collects the result"},
};

const bw_metrics_table_t bw_consumer_metrics = {
    "consumer/consumer_metrics.c",
    "Consumer: counters have one series per shard once the shard saw activity here; gauges\n"
    "only for the shards this consumer holds now (a revoked shard's gauges leave, its new\n"
    "owner reports them):",
    rows, BW_CM_ROWS};

bw_metrics_t *bw_consumer_metrics_new(const bw_config_t *conf) {
    bw_metrics_t *m = bw_metrics_new(conf, &bw_consumer_metrics);
    bw_metrics_switch(m, BW_CONSUMER_METRICS_LANES, conf->lane_cnt > 1);
    return m;
}

void bw_consumer_metrics_applied(bw_metrics_t *m, int shard, uint64_t rows, uint64_t failed_rows,
                                 uint64_t replayed_messages, uint64_t duplicate_messages, uint64_t dead_letters,
                                 int64_t latency_us) {
    bw_metrics_change_t c[] = {
        {BW_CM_ROWS_APPLIED, shard, 0, BW_METRICS_ADD, (double)rows},
        {BW_CM_ROWS_FAILED, shard, 0, BW_METRICS_ADD, (double)failed_rows},
        {BW_CM_MESSAGES_REPLAYED, shard, 0, BW_METRICS_ADD, (double)replayed_messages},
        {BW_CM_MESSAGES_DUPLICATE, shard, 0, BW_METRICS_ADD, (double)duplicate_messages},
        {BW_CM_DEAD_LETTERS, shard, 0, BW_METRICS_ADD, (double)dead_letters},
        {BW_CM_BATCHES_APPLIED, shard, 0, BW_METRICS_ADD, 1},
        {BW_CM_APPLY_LATENCY_SECONDS, 0, 0, BW_METRICS_OBSERVE, (double)latency_us},
    };
    bw_metrics_change(m, c, sizeof(c) / sizeof(c[0]));
}

void bw_consumer_metrics_shard(bw_metrics_t *m, int shard, double rate, double row_rate, int paused,
                               int buffer_full, int held, int64_t lag) {
    bw_metrics_change_t c[] = {
        {BW_CM_RATE_BATCHES_PER_SECOND, shard, 0, BW_METRICS_SET, rate},
        {BW_CM_RATE_ROWS_PER_SECOND, shard, 0, BW_METRICS_SET, row_rate},
        {BW_CM_PAUSED, shard, 0, BW_METRICS_SET, paused},
        {BW_CM_BUFFER_FULL, shard, 0, BW_METRICS_SET, buffer_full},
        {BW_CM_UNHEALTHY, shard, 0, BW_METRICS_SET, held},
        {BW_CM_LAG_MESSAGES, shard, 0, BW_METRICS_SET, (double)lag},
    };
    bw_metrics_change(m, c, sizeof(c) / sizeof(c[0]));
    bw_metrics_assigned(m, BW_METRIC_PER_SHARD, shard, 1); /* after its values: never shown without them */
}

void bw_consumer_metrics_lane(bw_metrics_t *m, int slot, int assigned, int64_t lag, uint64_t statements) {
    if (assigned) {
        bw_metrics_change_t c[] = {
            {BW_CM_LANE_LAG, slot, 0, BW_METRICS_SET, (double)lag},
            {BW_CM_LANE_STATEMENTS, slot, 0, BW_METRICS_SET, (double)statements},
        };
        bw_metrics_change(m, c, 2);
    }
    bw_metrics_assigned(m, BW_METRIC_PER_SLOT, slot, assigned);
}

void bw_consumer_metrics_budget(bw_metrics_t *m, int server, double statements, double rows) {
    bw_metrics_change_t c[] = {
        {BW_CM_SERVER_BUDGET, server, 0, BW_METRICS_SET, statements},
        {BW_CM_SERVER_BUDGET, server, 1, BW_METRICS_SET, rows},
    };
    bw_metrics_change(m, c, 2);
}

void bw_consumer_metrics_throttle(bw_metrics_t *m, int shard, int state, double rate) {
    bw_metrics_change_t c[] = {
        {BW_CM_THROTTLE_STATE, shard, 0, BW_METRICS_SET, state},
        {BW_CM_THROTTLE_RATE, shard, 0, BW_METRICS_SET, rate},
    };
    bw_metrics_change(m, c, 2);
    bw_metrics_switch(m, BW_CONSUMER_METRICS_THROTTLE, 1);
}

void bw_consumer_metrics_signal(bw_metrics_t *m, int server, int signal, double value, double threshold) {
    int used = threshold > 0;
    bw_metrics_change_t c[] = {
        {BW_CM_SIGNAL, server, signal, BW_METRICS_SET, used ? value : BW_METRICS_UNSET},
        {BW_CM_SIGNAL_THRESHOLD, server, signal, BW_METRICS_SET, used ? threshold : BW_METRICS_UNSET},
    };
    bw_metrics_change(m, c, 2);
    bw_metrics_switch(m, BW_CONSUMER_METRICS_THROTTLE, 1);
}
