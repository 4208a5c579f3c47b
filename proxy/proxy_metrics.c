/* proxy_metrics.c — the proxy's metric families, in the order /metrics shows them; the
 * metric list of docs/api.md is written from them too. Their index (BW_METRIC_PER_*):
 * a shard, a client's (bw_metrics_client), an HTTP status code; a quota's sub is its
 * bw_quota_kind_t. */
#include "proxy_metrics.h"

#include "quota.h"

static const bw_metric_row_t rows[BW_PM_ROWS] = {
    [BW_PM_REQUESTS] = {
        .name = "bulkwrite_proxy_requests_total", .type = BW_METRIC_COUNTER, .labels = "code",
        .per = BW_METRIC_PER_CODE, .show = BW_METRIC_SHOW_NONZERO,
        .help = "HTTP requests answered, by status code.",
        .doc = "answers to `/v1/batches`, and error replies, by HTTP status code (health and metrics "
               "requests are not counted)"},
    [BW_PM_OPS_ACCEPTED] = {
        .name = "bulkwrite_proxy_ops_accepted_total", .type = BW_METRIC_COUNTER,
        .help = "Ops durably written to Kafka.",
        .doc = "ops durably written to Kafka"},
    [BW_PM_OPS_REJECTED] = {
        .name = "bulkwrite_proxy_ops_rejected_total", .type = BW_METRIC_COUNTER,
        .help = "Ops rejected as invalid.",
        .doc = "ops rejected as invalid (validation, or too large for a message), or outside the client's "
               "scopes"},
    [BW_PM_KAFKA_PRODUCE_ERRORS] = {
        .name = "bulkwrite_proxy_kafka_produce_errors_total", .type = BW_METRIC_COUNTER,
        .help = "Ops not accepted because Kafka did not acknowledge their batch.",
        .doc = "ops not accepted because Kafka did not acknowledge their batch"},
    [BW_PM_KAFKA_MESSAGES] = {
        .name = "bulkwrite_proxy_kafka_messages_total", .type = BW_METRIC_COUNTER,
        .help = "Shard batches produced.",
        .doc = "shard batches (Kafka messages) produced"},
    [BW_PM_PARTS_TAKEN_BEFORE] = {
        .name = "bulkwrite_proxy_parts_taken_before_total", .type = BW_METRIC_COUNTER,
        .help = "Messages of a resent request (same request_id) not produced again: an earlier attempt had "
                "them acknowledged.",
        .doc = "messages of a resent request (same `request_id`) not produced again, because an earlier "
               "attempt had them acknowledged"},
    [BW_PM_LINGER_FLUSHES] = {
        .name = "bulkwrite_proxy_linger_flushes_total", .type = BW_METRIC_COUNTER,
        .help = "Producer flushes for a batch request alone in the proxy: its batches went to Kafka without "
                "waiting linger.ms.",
        .doc = "producer flushes for a batch request alone in the proxy: the batches the producer held went "
               "to Kafka without waiting `linger.ms` for other requests' messages (docs/architecture.md)"},
    [BW_PM_PRODUCERS_REBUILT] = {
        .name = "bulkwrite_proxy_producers_rebuilt_total", .type = BW_METRIC_COUNTER,
        .help = "Producers destroyed and made again after librdkafka raised a fatal error on them.",
        .doc = "producers destroyed and made again after librdkafka raised a fatal error on them (an "
               "idempotent producer that lost its sequence); their requests got 503 meanwhile, and /readyz "
               "failed (docs/reliability.md)"},
    [BW_PM_BACKLOG_REFUSED_OPS] = {
        .name = "bulkwrite_proxy_backlog_refused_ops_total", .type = BW_METRIC_COUNTER, .labels = "shard",
        .per = BW_METRIC_PER_SHARD, .show = BW_METRIC_SHOW_NONZERO,
        .help = "Valid ops answered 429 because their shard's backlog in Kafka was full (the client resends).",
        .doc = "valid ops answered 429 because the shard's backlog was full (the client resends them)"},
    [BW_PM_ACCEPT_LATENCY_SECONDS] = {
        .name = "bulkwrite_proxy_accept_latency_seconds", .type = BW_METRIC_HISTOGRAM,
        .help = "Time from request received to reply, including Kafka acknowledgement.",
        .doc = "time from request received to reply, including the Kafka acknowledgement (requests that "
               "reached validation)"},
    [BW_PM_CLIENT_FORBIDDEN] = {
        .name = "bulkwrite_proxy_client_forbidden_total", .type = BW_METRIC_COUNTER, .labels = "client",
        .per = BW_METRIC_PER_CLIENT,
        .help = "Requests answered 403 because the endpoint is outside the client's roles.",
        .doc = "requests answered 403 because the endpoint is outside the client's roles (401s, which have "
               "no client, are in `bulkwrite_proxy_requests_total{code=\"401\"}`)"},
    [BW_PM_CLIENT_OVER_QUOTA] = {
        .name = "bulkwrite_proxy_client_over_quota_total", .type = BW_METRIC_COUNTER, .labels = "client,quota",
        .per = BW_METRIC_PER_CLIENT, .subs = bw_quota_kind_names, .sub_cnt = BW_QUOTA_KINDS,
        .help = "Requests answered 429 because the client was over one of its quotas (clients file).",
        .doc = "requests answered 429 because the client was over its quota `ops_per_second`, "
               "`bytes_per_second` or `jobs_in_flight`"},
    [BW_PM_CLIENT_QUOTA_SHARE] = {
        .name = "bulkwrite_proxy_client_quota_share", .type = BW_METRIC_GAUGE, .labels = "client,quota",
        .per = BW_METRIC_PER_CLIENT,
        .subs = bw_quota_kind_names, .sub_cnt = 2, /* the rate quotas a proxy shares: ops, bytes */
        .show = BW_METRIC_SHOW_SET, .real = 1,
        .help = "This proxy's part of the client's ops or bytes quota among the live proxies (1 alone).",
        .doc = "this proxy's part (0 to 1) of the client's quota `ops_per_second` or `bytes_per_second`, as the "
               "live proxies split it from their clients' demand every 2 s: 1 alone, 0.5 each with two proxies "
               "asked alike ([security.md](security.md#quotas-across-proxies))"},
    [BW_PM_CLIENT_ACCEPTED_OPS] = {
        .name = "bulkwrite_proxy_client_accepted_ops_total", .type = BW_METRIC_COUNTER, .labels = "client",
        .per = BW_METRIC_PER_CLIENT,
        .help = "Ops of the client's requests that the proxy accepted (durable in Kafka).",
        .doc = "ops of the client's requests the proxy accepted"},
    [BW_PM_CLIENT_REQUEST_BYTES] = {
        .name = "bulkwrite_proxy_client_request_bytes_total", .type = BW_METRIC_COUNTER, .labels = "client",
        .per = BW_METRIC_PER_CLIENT,
        .help = "Bytes of the client's request bodies that passed its quotas.",
        .doc = "body bytes of the client's requests that passed its quotas"},
    [BW_PM_CLIENT_OPS_OUT_OF_SCOPE] = {
        .name = "bulkwrite_proxy_client_ops_out_of_scope_total", .type = BW_METRIC_COUNTER, .labels = "client",
        .per = BW_METRIC_PER_CLIENT,
        .help = "Ops of POST /v1/batches refused one by one because they are outside the client's scopes.",
        .doc = "ops of `POST /v1/batches` refused one by one because they are outside the client's scopes "
               "(also counted in `bulkwrite_proxy_ops_rejected_total`). Per client name; past 1,000 names "
               "the rest add up under `client=\"(other)\"`"},
    [BW_PM_JOBS_INDEX_ENTRIES] = {
        .name = "bulkwrite_proxy_jobs_index_entries", .type = BW_METRIC_GAUGE,
        .help = "Job records in the index behind GET /v1/jobs/{id}.",
        .doc = "job records in the index behind `GET /v1/jobs/{id}`"},
    [BW_PM_JOBS_INDEX_BYTES] = {
        .name = "bulkwrite_proxy_jobs_index_bytes", .type = BW_METRIC_GAUGE,
        .help = "Bytes the job index holds (records and entries).",
        .doc = "bytes the job index holds (records and entries)"},
    [BW_PM_JOBS_INDEX_MAX_BYTES] = {
        .name = "bulkwrite_proxy_jobs_index_max_bytes", .type = BW_METRIC_GAUGE,
        .help = "Its bound, proxy.jobs_index_max_bytes.",
        .doc = "the index's bound, `proxy.jobs_index_max_bytes`"},
    [BW_PM_JOBS_INDEX_EVICTED] = {
        .name = "bulkwrite_proxy_jobs_index_evicted_total", .type = BW_METRIC_COUNTER,
        .help = "Job records dropped from the index, least recently used first.",
        .doc = "job records dropped from the index, least recently used first, to stay under its bound"},
    [BW_PM_JOBS_READ_FROM_TOPIC] = {
        .name = "bulkwrite_proxy_jobs_read_from_topic_total", .type = BW_METRIC_COUNTER,
        .help = "Job records read back from the jobs topic for a GET, after the index had dropped them.",
        .doc = "job records read back from the jobs topic for a `GET /v1/jobs/{id}` after the index had "
               "dropped them"},
    [BW_PM_HELD_JOB_RECORDS] = {
        .name = "bulkwrite_proxy_held_job_records", .type = BW_METRIC_GAUGE,
        .help = "Job records that hold scheduled or dependent batches not yet released.",
        .doc = "job records (requests) that hold scheduled or dependent batches not yet released into their "
               "shards (`not_before` ahead, or `after` jobs not finished), as this proxy's index knows them"},
    [BW_PM_HELD_JOB_RECORDS_DUE] = {
        .name = "bulkwrite_proxy_held_job_records_due", .type = BW_METRIC_GAUGE,
        .help = "Of the held job records, those due now (not_before passed) and not released yet.",
        .doc = "of those records, the ones due now (`not_before` passed) and not released yet: waiting for "
               "their turn, their `after` jobs, an earlier part of their job, or a full shard backlog"},
    [BW_PM_HELD_BYTES] = {
        .name = "bulkwrite_proxy_held_bytes", .type = BW_METRIC_GAUGE,
        .help = "Memory the held job records take in this proxy (their records and entries).",
        .doc = "memory those records take in this proxy: each is kept whole until released (about 560 bytes "
               "for a one-op request)"},
    [BW_PM_HELD_BATCHES_RELEASED] = {
        .name = "bulkwrite_proxy_held_batches_released_total", .type = BW_METRIC_COUNTER,
        .help = "Held batches this proxy released into their shards' partitions.",
        .doc = "held (scheduled or dependent) batches this proxy released into their shards' partitions "
               "(another proxy may release the same batch: its shard applies it once)"},
    [BW_PM_HELD_RELEASE_LATENESS] = {
        .name = "bulkwrite_proxy_held_release_lateness_seconds", .type = BW_METRIC_HISTOGRAM,
        .help = "How long after its not_before a held record's batches were released (produced and acknowledged).",
        .doc = "per held record this proxy released: the time from its `not_before` (or, for a dependent "
               "job, from its acceptance) to its batches acknowledged by Kafka; the shard applies them "
               "after that at its rate"},
};

const bw_metrics_table_t bw_proxy_metrics = {"proxy/proxy_metrics.c", "Proxy:", rows, BW_PM_ROWS};

void bw_proxy_metrics_request(bw_metrics_t *m, unsigned status, uint64_t accepted, uint64_t rejected,
                              uint64_t not_accepted, uint64_t messages, int64_t latency_us) {
    bw_metrics_change_t c[] = {
        {BW_PM_REQUESTS, (int)status, 0, BW_METRICS_ADD, 1},
        {BW_PM_OPS_ACCEPTED, 0, 0, BW_METRICS_ADD, (double)accepted},
        {BW_PM_OPS_REJECTED, 0, 0, BW_METRICS_ADD, (double)rejected},
        {BW_PM_KAFKA_PRODUCE_ERRORS, 0, 0, BW_METRICS_ADD, (double)not_accepted},
        {BW_PM_KAFKA_MESSAGES, 0, 0, BW_METRICS_ADD, (double)messages},
        {BW_PM_ACCEPT_LATENCY_SECONDS, 0, 0, BW_METRICS_OBSERVE, (double)latency_us},
    };
    bw_metrics_change(m, c, sizeof(c) / sizeof(c[0]));
}

void bw_proxy_metrics_client_accepted(bw_metrics_t *m, const char *client, uint64_t ops, uint64_t bytes) {
    int i = bw_metrics_client(m, client);
    bw_metrics_change_t c[] = {
        {BW_PM_CLIENT_ACCEPTED_OPS, i, 0, BW_METRICS_ADD, (double)ops},
        {BW_PM_CLIENT_REQUEST_BYTES, i, 0, BW_METRICS_ADD, (double)bytes},
    };
    bw_metrics_change(m, c, 2);
}

void bw_proxy_metrics_client_refused(bw_metrics_t *m, const char *client, uint64_t requests, uint64_t ops) {
    int i = bw_metrics_client(m, client);
    bw_metrics_change_t c[] = {
        {BW_PM_CLIENT_FORBIDDEN, i, 0, BW_METRICS_ADD, (double)requests},
        {BW_PM_CLIENT_OPS_OUT_OF_SCOPE, i, 0, BW_METRICS_ADD, (double)ops},
    };
    bw_metrics_change(m, c, 2);
}

void bw_proxy_metrics_jobs(bw_metrics_t *m, const bw_jobs_stats_t *js, const bw_timers_stats_t *ts) {
    bw_metrics_change_t c[] = {
        {BW_PM_JOBS_INDEX_ENTRIES, 0, 0, BW_METRICS_SET, (double)js->entries},
        {BW_PM_JOBS_INDEX_BYTES, 0, 0, BW_METRICS_SET, (double)js->bytes},
        {BW_PM_JOBS_INDEX_MAX_BYTES, 0, 0, BW_METRICS_SET, (double)js->max_bytes},
        {BW_PM_JOBS_INDEX_EVICTED, 0, 0, BW_METRICS_SET, (double)js->evicted},
        {BW_PM_JOBS_READ_FROM_TOPIC, 0, 0, BW_METRICS_SET, (double)js->found_in_topic},
        {BW_PM_HELD_JOB_RECORDS, 0, 0, BW_METRICS_SET, (double)ts->held},
        {BW_PM_HELD_JOB_RECORDS_DUE, 0, 0, BW_METRICS_SET, (double)ts->due},
        {BW_PM_HELD_BYTES, 0, 0, BW_METRICS_SET, (double)ts->bytes},
    };
    bw_metrics_change(m, c, sizeof(c) / sizeof(c[0]));
}

void bw_proxy_metrics_quota_share(void *ud, const char *client, double ops_share, double bytes_share) {
    bw_metrics_t *m = ud;
    int i = bw_metrics_client(m, client);
    bw_metrics_change_t c[] = {
        {BW_PM_CLIENT_QUOTA_SHARE, i, BW_QUOTA_OPS, BW_METRICS_SET, ops_share >= 0 ? ops_share : BW_METRICS_UNSET},
        {BW_PM_CLIENT_QUOTA_SHARE, i, BW_QUOTA_BYTES, BW_METRICS_SET, bytes_share >= 0 ? bytes_share : BW_METRICS_UNSET},
    };
    bw_metrics_change(m, c, 2);
}
