/* config_keys.c — the key table: every key of the configuration, its type, bounds,
 * default, meaning and what SIGHUP does with it; and docs/configuration.md rendered
 * from it. The parser (config_parse.c), the checks (config_validate.c), the dump and
 * the reload (config_reload.c) all walk this one table. */
#include <stdio.h>
#include <string.h>

#include "config_int.h"
#include "ratelimit.h"

/* a rate's doc names the bounds ratelimit.h defines */
#define RATE_BOUNDS "0 = unlimited, else " BW_RATE_BOUNDS_TEXT
#define ROW_RATE_BOUNDS "0 = no row budget, else " BW_ROW_RATE_BOUNDS_TEXT

/* the tables below name `secret` only on the few keys that are secrets: 0 elsewhere */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#define END {NULL, 0, 0, 0, 0, 0, NULL, NULL, NULL, 0, NULL, 0}

/* The reload column: what SIGHUP does with a changed value in the proxy and in the
 * consumer (config.h). Applied keys are read only by the thread that reloads (the
 * consumer's dispatcher) or through their hook; a key other threads read (workers, the
 * HTTP threads, the signal reader, the alert sender) or that built something at startup
 * (connections, listeners, topics, pools) needs a restart. */
#define RL(proxy, consumer) .reload = {[BW_PROC_PROXY] = (proxy), [BW_PROC_CONSUMER] = (consumer)}
#define RESTART RL(R_RESTART, R_RESTART)
#define PROXY_RESTART RL(R_RESTART, R_UNUSED)       /* the consumer does not read it */
#define CONSUMER_RESTART RL(R_UNUSED, R_RESTART)    /* the proxy does not read it */
#define CONSUMER_APPLY(h) RL(R_UNUSED, R_APPLY), .hook = (h)
#define APPLY(h) RL(R_APPLY, R_APPLY), .hook = (h)
#define NOT_READ RL(R_UNUSED, R_UNUSED)              /* tools only (bwctl) */
/* the consumer runs the configured rates and the proxy shows them (GET /v1/shards): both
 * take a change, or bwctl shards would show a rate the consumers no longer run; the
 * per-shard arrays the proxy's HTTP threads read are atomic (config.h) */
#define RATES APPLY(BW_HOOK_SHARD_RATES)
#define OFF(f) offsetof(bw_config_t, f)

static const char *const col_types[] = {"int", "double", "string", "bytes", "bool", NULL};
static const char *const routes[] = {"id", "md5", NULL};
static const char *const log_levels[] = {"debug", "info", "warn", "error", NULL};
static const char *const log_formats[] = {"text", "logfmt", "json", NULL}; /* bw_log_format_t */

static const key_t_ column_keys[] = {
    {"name", K_STR, offsetof(bw_column_t, name), 0, 0, 0, NULL, NULL, NULL, 0,
     "Column name in the table; also the field name clients use."},
    {"type", K_ENUM, offsetof(bw_column_t, type), 0, 0, 0, NULL, col_types, NULL, 0,
     "Value type: int (64-bit signed), double, string (UTF-8), bytes, bool."},
    {"nullable", K_BOOL, offsetof(bw_column_t, nullable), 0, 0, 0, "false", NULL, NULL, 0,
     "Whether clients may set it to null."},
    {"required", K_BOOL, offsetof(bw_column_t, required), 0, 0, 0, "false", NULL, NULL, 0,
     "Whether a CREATE or UPSERT must set it."},
    {"max_length", K_INT, offsetof(bw_column_t, max_length), 0, 1, 16777215, "255", NULL, NULL, 0,
     "string and bytes: longest value accepted, in bytes."},
    {"increment_null_as_zero", K_BOOL, offsetof(bw_column_t, increment_null_as_zero), 0, 0, 0, "false", NULL, NULL, 0,
     "int and double: an increment of a NULL value starts from 0 (COALESCE(col, 0) + n). False: NULL + n stays "
     "NULL, as in SQL, and the increment is lost without a word."},
    END};

static const key_t_ batch_size_keys[] = {
    {"create", K_INT, offsetof(bw_object_type_t, batch_size[BW_OP_CREATE]), 0, 1, 100000, "500",
     NULL, NULL, 0, "Rows per CREATE statement."},
    {"update", K_INT, offsetof(bw_object_type_t, batch_size[BW_OP_UPDATE]), 0, 1, 100000, "200",
     NULL, NULL, 0, "Rows per UPDATE statement."},
    {"upsert", K_INT, offsetof(bw_object_type_t, batch_size[BW_OP_UPSERT]), 0, 1, 100000, "200",
     NULL, NULL, 0, "Rows per UPSERT statement."},
    {"delete", K_INT, offsetof(bw_object_type_t, batch_size[BW_OP_DELETE]), 0, 1, 100000, "1000",
     NULL, NULL, 0, "Rows per DELETE statement."},
    END};

static const key_t_ object_type_keys[] = {
    {"name", K_STR, offsetof(bw_object_type_t, name), 0, 0, 0, NULL, NULL, NULL, 0,
     "Object type name used in requests."},
    {"type_id", K_INT, offsetof(bw_object_type_t, type_id), 0, 0, 1023, NULL, NULL, NULL, 0,
     "The 10-bit type id carried in this type's object ids (bits 36-45)."},
    {"table", K_STR, offsetof(bw_object_type_t, table), 0, 0, 0, NULL, NULL, NULL, 0,
     "Table in every shard database."},
    {"id_column", K_STR, offsetof(bw_object_type_t, id_column), 0, 0, 0, "\"id\"", NULL, NULL, 0,
     "Primary key column holding the 64-bit object id."},
    {"create_route", K_ENUM, offsetof(bw_object_type_t, create_route), 0, 0, 0, "\"id\"", routes,
     NULL, 0,
     "How CREATE picks a shard from the op's shard_key: \"id\" (the shard bits of an id) or "
     "\"md5\" (md5(key) mod shards.count)."},
    {"batch_size", K_GROUP, 0, 0, 0, 0, "", NULL, batch_size_keys, 0,
     "Rows per statement for each operation (each op has its own best size)."},
    {"coalesce_increments", K_BOOL, offsetof(bw_object_type_t, coalesce_increments), 0, 0, 0, "true", NULL, NULL, 0,
     "The consumer sums the increments of one object's column that reach a shard together (one "
     "transaction's UPDATE run) into one row of the statement: a counter-heavy load applies in "
     "large statements instead of one per repeat of an id. Ops of the object that are not pure "
     "increments keep their place; a refused sum is retried op by op, so each op still fails alone "
     "(docs/api.md)."},
    {"columns", K_LIST, offsetof(bw_object_type_t, columns), offsetof(bw_object_type_t, column_cnt),
     1, 1000, NULL, NULL, column_keys, sizeof(bw_column_t),
     "Columns clients may write, besides the id column."},
    END};

static const key_t_ server_keys[] = {
    {"name", K_STR, offsetof(bw_server_t, name), 0, 0, 0, NULL, NULL, NULL, 0,
     "Name used in logs and metrics."},
    {"host", K_STR, offsetof(bw_server_t, host), 0, 0, 0, "\"127.0.0.1\"", NULL, NULL, 0,
     "MySQL server address."},
    {"port", K_INT, offsetof(bw_server_t, port), 0, 1, 65535, "3306", NULL, NULL, 0,
     "MySQL server TCP port."},
    {"user", K_STR, offsetof(bw_server_t, user), 0, 0, 0, "\"root\"", NULL, NULL, 0,
     "MySQL user of the consumer (and the tools): the writer `bwctl schema --create-users` makes."},
    {"password", K_STR, offsetof(bw_server_t, password), 0, 0, 0, "\"\"", NULL, NULL, 0,
     "MySQL password of `user`; a secret: \"file:PATH\" or \"env:NAME\" reads it from a file (PATH "
     "relative to the configuration's folder) or the environment (docs/security.md).", SECRET_VALUE},
    {"proxy_user", K_STR, offsetof(bw_server_t, proxy_user), 0, 0, 0, "\"\"", NULL, NULL, 0,
     "MySQL user the proxy reads the job ledger with (GET /v1/jobs): the read-only user "
     "`bwctl schema --create-users` makes. \"\" = the proxy uses `user`."},
    {"proxy_password", K_STR, offsetof(bw_server_t, proxy_password), 0, 0, 0, "\"\"", NULL, NULL, 0,
     "MySQL password of `proxy_user`; a secret, as `password`.", SECRET_VALUE},
    {"first_shard", K_INT, offsetof(bw_server_t, first_shard), 0, 0, 65535, NULL, NULL, NULL, 0,
     "First logical shard this server holds."},
    {"last_shard", K_INT, offsetof(bw_server_t, last_shard), 0, 0, 65535, NULL, NULL, NULL, 0,
     "Last logical shard this server holds (inclusive)."},
    {"replicas", K_STRLIST, offsetof(bw_server_t, replicas), offsetof(bw_server_t, replica_cnt), 0, 64, "[]", NULL,
     NULL, 0,
     "Replicas of this server, as \"host:port\" strings, read as `user`: the consumer keeps in "
     "Kafka every batch a replica has not applied yet (its bw_offsets), so a failover to it loses "
     "nothing; the adaptive throttle reads the heartbeat row there for replication lag "
     "(throttle.replication_lag_ms). [] = neither (consumer.keep_applied_ms still keeps a margin)."},
    END};

static const key_t_ rate_override_keys[] = {
    {"shard", K_INT, offsetof(bw_rate_override_t, shard), 0, 0, 65535, NULL, NULL, NULL, 0,
     "Logical shard."},
    {"rate", K_DBL, offsetof(bw_rate_override_t, rate), 0, 0, BW_RATE_MAX, "", NULL, NULL, 0,
     "Statements per second for this shard; " RATE_BOUNDS ". Left out: shards.default_rate. "
     "An entry sets rate, row_rate or both."},
    {"row_rate", K_DBL, offsetof(bw_rate_override_t, row_rate), 0, 0, BW_ROW_RATE_MAX, "", NULL, NULL, 0,
     "Rows per second for this shard; " ROW_RATE_BOUNDS ". Left out: shards.default_row_rate."},
    END};

static const key_t_ lane_keys[] = {
    {"name", K_STR, offsetof(bw_lane_t, name), 0, 0, 0, NULL, NULL, NULL, 0,
     "What requests call it (\"lane\": \"urgent\"): [a-z0-9_-], 1 to 32 bytes. Its topic is "
     "<kafka.topic>.<name>; \"default\" is kafka.topic itself, and sets the default lane's weight."},
    {"weight", K_INT, offsetof(bw_lane_t, weight), 0, 1, 1000, "1", NULL, NULL, 0,
     "Its share of a shard's statements while other lanes of the shard have work too (weights "
     "4 and 1: 4/5 and 1/5); a lane without work leaves its share to the others."},
    END};

static const char *const throttle_modes[] = {"off", "dry_run", "on", NULL};
static const key_t_ throttle_keys[] = {
    {"mode", K_ENUM, OFF(throttle_mode), 0, 0, 0, "\"off\"", throttle_modes, NULL, 0,
     "off: rates are what operators and this file set. on: each shard's rate follows its "
     "server's health signals below, between floor and its rate (the cap). dry_run: the same "
     "decisions are made, logged and reported (GET /v1/shards, metrics), and the caps stay in "
     "force. SIGHUP applies a change.", CONSUMER_APPLY(BW_HOOK_THROTTLE)},
    {"interval_ms", K_INT, OFF(throttle_interval_ms), 0, 100, 600000, "1000", NULL, NULL, 0,
     "How often the signals are read (and the heartbeat written), and the least time between "
     "two steps of a shard's rate.", CONSUMER_RESTART},
    {"stale_ms", K_INT, OFF(throttle_stale_ms), 0, 100, 3600000, "5000", NULL, NULL, 0,
     "A signal not read for this long is unknown: the shard is held at floor (and "
     "BulkwriteThrottleSignalUnknown fires), never taken for healthy.", CONSUMER_APPLY(BW_HOOK_THROTTLE)},
    {"floor", K_DBL, OFF(throttle_floor), 0, BW_RATE_MIN, BW_RATE_MAX, "1.0", NULL, NULL, 0,
     "Statements per second a throttled shard never goes below, and an unknown one runs at.", CONSUMER_APPLY(BW_HOOK_THROTTLE)},
    {"max_rate", K_DBL, OFF(throttle_max_rate), 0, BW_RATE_MIN, BW_RATE_MAX, "1000.0", NULL, NULL, 0,
     "For a shard whose rate is unlimited (0): the rate it climbs back to before it runs "
     "unlimited again.", CONSUMER_APPLY(BW_HOOK_THROTTLE)},
    {"decrease", K_DBL, OFF(throttle_decrease), 0, 0.01, 0.99, "0.5", NULL, NULL, 0,
     "A signal over its threshold multiplies the shard's rate by this, once per interval.", CONSUMER_APPLY(BW_HOOK_THROTTLE)},
    {"increase", K_DBL, OFF(throttle_increase), 0, 0.001, 1, "0.1", NULL, NULL, 0,
     "After quiet_ms of calm, the rate grows per interval by this fraction of the rate it "
     "ran at when the trouble began, and past that rate by this fraction of its own.", CONSUMER_APPLY(BW_HOOK_THROTTLE)},
    {"recover_ratio", K_DBL, OFF(throttle_recover_ratio), 0, 0.1, 1, "0.8", NULL, NULL, 0,
     "Calm means every signal below its threshold times this (hysteresis: between the two the "
     "rate holds).", CONSUMER_APPLY(BW_HOOK_THROTTLE)},
    {"quiet_ms", K_INT, OFF(throttle_quiet_ms), 0, 0, 3600000, "3000", NULL, NULL, 0,
     "How long every signal must be calm before a shard's rate grows again.", CONSUMER_APPLY(BW_HOOK_THROTTLE)},
    {"critical_ms", K_INT, OFF(throttle_critical_ms), 0, 0, 86400000, "10000", NULL, NULL, 0,
     "A signal over its critical level this long pauses the shard (nothing is dropped); it "
     "resumes at floor once the signal is back under its threshold.", CONSUMER_APPLY(BW_HOOK_THROTTLE)},
    {"replication_lag_ms", K_DBL, OFF(throttle_lag_ms), 0, 0, 1e9, "1000.0", NULL, NULL, 0,
     "Threshold of replication lag in ms: the most of the server's replicas, from a heartbeat "
     "row each consumer writes on the primary every interval_ms and reads on the replicas "
     "(pt-heartbeat style): the age of the oldest heartbeat a replica has not applied, so a "
     "replica that keeps up reads a few ms. Read only for servers with replicas. 0 = off.", CONSUMER_APPLY(BW_HOOK_THROTTLE)},
    {"replication_lag_critical_ms", K_DBL, OFF(throttle_lag_critical_ms), 0, 0, 1e9, "0.0", NULL, NULL, 0,
     "Critical level of replication lag in ms (critical_ms); 0 = none.", CONSUMER_APPLY(BW_HOOK_THROTTLE)},
    {"threads_running", K_DBL, OFF(throttle_threads_running), 0, 0, 1e6, "0.0", NULL, NULL, 0,
     "Threshold of the server's Threads_running (SHOW GLOBAL STATUS) besides the reading "
     "query itself, the mean of threads_running_samples reads an interval: 0.2 means other "
     "statements run a fifth of the time. 0 = off.", CONSUMER_APPLY(BW_HOOK_THROTTLE)},
    {"threads_running_samples", K_INT, OFF(throttle_threads_running_samples), 0, 1, 20, "4", NULL, NULL, 0,
     "Threads_running is read this many times per interval_ms, evenly spaced, and the signal "
     "is their mean: a statement that runs a fifth of the time reads about 0.2, where a "
     "single read sees 0 or 1 and the rate saws.", CONSUMER_RESTART},
    {"threads_running_critical", K_DBL, OFF(throttle_threads_running_critical), 0, 0, 1e6, "0.0", NULL, NULL, 0,
     "Critical level of Threads_running; 0 = none.", CONSUMER_APPLY(BW_HOOK_THROTTLE)},
    {"statement_latency_ms", K_DBL, OFF(throttle_latency_ms), 0, 0, 1e9, "0.0", NULL, NULL, 0,
     "Threshold of the shard's own ms per statement (its last batches, averaged). 0 = off.", CONSUMER_APPLY(BW_HOOK_THROTTLE)},
    {"statement_latency_critical_ms", K_DBL, OFF(throttle_latency_critical_ms), 0, 0, 1e9, "0.0", NULL, NULL, 0,
     "Critical level of the statement latency in ms; 0 = none.", CONSUMER_APPLY(BW_HOOK_THROTTLE)},
    {"custom_query", K_STR, OFF(throttle_custom_query), 0, 0, 0, "\"\"", NULL, NULL, 0,
     "A query run on each server every interval_ms that returns one number (one row, one "
     "column), e.g. \"SELECT COUNT(*) FROM information_schema.processlist WHERE command = "
     "'Query'\". \"\" = off. Written by operators, never built from requests.", CONSUMER_RESTART},
    {"custom_threshold", K_DBL, OFF(throttle_custom_threshold), 0, 0, 1e18, "0.0", NULL, NULL, 0,
     "Threshold of custom_query's number.", CONSUMER_APPLY(BW_HOOK_THROTTLE)},
    {"custom_critical", K_DBL, OFF(throttle_custom_critical), 0, 0, 1e18, "0.0", NULL, NULL, 0,
     "Critical level of custom_query's number; 0 = none.", CONSUMER_APPLY(BW_HOOK_THROTTLE)},
    {"heartbeat_table", K_STR, OFF(throttle_heartbeat_table), 0, 0, 0, "\"bw_heartbeat\"", NULL, NULL, 0,
     "Table of the heartbeat rows (one per consumer), in each server's first shard database "
     "(`bwctl schema` makes it, and grants the consumer's user on it).", CONSUMER_RESTART},
    END};

static const key_t_ auth_keys[] = {
    {"clients_file", K_STR, OFF(proxy_auth_clients_file), 0, 0, 0, "\"\"", NULL, NULL, 0,
     "libconfig file of the API's clients: name, token_sha256, roles, scopes (docs/security.md; "
     "conf/clients.example.conf). A relative path is read from the configuration file's "
     "folder. Every endpoint but /healthz and /v1/openapi.yaml (and /metrics, /readyz with open_metrics) then needs "
     "`Authorization: Bearer TOKEN`. SIGHUP re-reads it; a file that does not parse keeps the "
     "clients loaded before. \"\" = no authentication: every caller is admin (a warning at "
     "startup). Changing the key itself needs a restart.", PROXY_RESTART},
    {"open_metrics", K_BOOL, OFF(proxy_auth_open_metrics), 0, 0, 0, "true", NULL, NULL, 0,
     "With a clients file: /metrics and /readyz answer without a token (scrapers, load "
     "balancers); false = they need the read or admin role. /healthz is always open.", PROXY_RESTART},
    {"allow_open", K_BOOL, OFF(proxy_auth_allow_open), 0, 0, 0, "false", NULL, NULL, 0,
     "Without a clients file the API, shard control included, is open to every caller, so the "
     "proxy then listens on loopback addresses only (127.0.0.0/8, ::1, localhost): with "
     "proxy.listen_address or proxy.admin_listen_address on any other address it refuses to "
     "start. true = serve the open API on that address anyway (a warning at startup): only "
     "behind something else that decides who may call.", PROXY_RESTART},
    {"job_id_secret", K_STR, OFF(proxy_auth_job_id_secret), 0, 0, 0, "\"\"", NULL, NULL, 0,
     "With a clients file: the key of the HMAC that makes a job id from the client's name "
     "and its request_id, so nobody can compute a job's id from its request_id. Every proxy "
     "of a deployment needs the same one; changing it makes a resend of an earlier request "
     "a new job (applied again). \"\" = an empty key: ids are still per client, but "
     "computable (a warning at startup). A secret: \"file:PATH\" or \"env:NAME\" reads it, "
     "dumps show it redacted.", SECRET_VALUE, PROXY_RESTART},
    END};

/* HTTPS and the admin listener (proxy/tls.h): the proxy checks the files at startup */
static const key_t_ tls_keys[] = {
    {"cert_file", K_STR, OFF(proxy_tls_cert_file), 0, 0, 0, "\"\"", NULL, NULL, 0,
     "PEM certificate (chain) the proxy's listeners present: with it they speak HTTPS only. "
     "\"\" = plain HTTP. A relative path is read from the configuration file's folder, as are the "
     "other two; all are read at startup (a restart takes new ones).", PROXY_RESTART},
    {"key_file", K_STR, OFF(proxy_tls_key_file), 0, 0, 0, "\"\"", NULL, NULL, 0,
     "PEM private key of cert_file; required with it.", PROXY_RESTART},
    {"client_ca_file", K_STR, OFF(proxy_tls_client_ca_file), 0, 0, 0, "\"\"", NULL, NULL, 0,
     "PEM certificates of the CAs that sign client certificates. With it the proxy asks each "
     "client for a certificate; one presented is verified (signature, dates, key purpose) and "
     "refused with 401 and the reason otherwise. Its identity (the first DNS or URI subject "
     "alternative name, else the common name) is the client whose cert_identity it is in "
     "proxy.auth.clients_file. \"\" = client certificates are not asked for.", PROXY_RESTART},
    {"require_client_cert", K_BOOL, OFF(proxy_tls_require_client_cert), 0, 0, 0, "false", NULL, NULL, 0,
     "Refuse (401) every request without a verified client certificate but /healthz, even one "
     "with a valid token; needs client_ca_file.", PROXY_RESTART},
    END};

const key_t_ bw_config_top_keys[] = {
    {"log_level", K_ENUM, OFF(log_level), 0, 0, 0, "\"info\"", log_levels, NULL, 0,
     "Least level logged: debug, info, warn or error.", APPLY(BW_HOOK_LOGGING)},
    {"log_format", K_ENUM, OFF(log_format), 0, 0, 0, "\"text\"", log_formats, NULL, 0,
     "How each line on stderr is written: \"text\" (time, LEVEL, component, then key=value fields and the "
     "message), \"logfmt\" (every part a key=value, the message as msg) or \"json\" (one JSON object a line). "
     "Under journald each line also starts with its syslog priority (docs/operations.md#logs).",
     APPLY(BW_HOOK_LOGGING)},
    {"kafka.brokers", K_STR, OFF(brokers), 0, 0, 0, "\"127.0.0.1:9092\"", NULL, NULL, 0,
     "Bootstrap servers; the daemons' --brokers option overrides it.", RESTART},
    {"kafka.topic", K_STR, OFF(topic), 0, 0, 0, "\"bulkwrite.batches\"", NULL, NULL, 0,
     "Topic of shard batches: exactly one partition per logical shard.", RESTART},
    {"kafka.consumer_group", K_STR, OFF(consumer_group), 0, 0, 0, "\"bulkwrite-consumers\"", NULL,
     NULL, 0, "Consumer group the consumers share partitions in.", RESTART},
    {"kafka.dead_letter_topic", K_STR, OFF(dead_letter_topic), 0, 0, 0, "\"bulkwrite.dead_letters\"",
     NULL, NULL, 0,
     "Topic the consumer writes each op a shard refused to (JSON, keyed job_id/part/op_index), "
     "before the batch commits; created with one partition if missing.", CONSUMER_RESTART},
    {"kafka.jobs_topic", K_STR, OFF(jobs_topic), 0, 0, 0, "\"bulkwrite.jobs\"", NULL, NULL, 0,
     "Compacted topic of job records (what the proxy accepted per shard, key = job id), "
     "read by every proxy to answer GET /v1/jobs/{id}.", PROXY_RESTART},
    {"kafka.jobs_retention_ms", K_INT, OFF(jobs_retention_ms), 0, 60000, 2147483647, "604800000", NULL,
     NULL, 0,
     "retention.ms of a jobs topic bulkwrite creates (compact,delete): how long GET /v1/jobs/{id} "
     "can find a job after it was submitted (default 7 days).", RESTART},
    {"kafka.control_topic", K_STR, OFF(control_topic), 0, 0, 0, "\"bulkwrite.control\"", NULL, NULL,
     0, "Compacted topic of the operators' settings, one record per field (keys shard/N/pause, "
        "shard/N/rate, shard/N/row_rate, shard/N/pinned), of server budgets (server/NAME/budget) and of "
        "job cancels (job/ID); read by every proxy and consumer; it survives restarts.", RESTART},
    {"kafka.status_topic", K_STR, OFF(status_topic), 0, 0, 0, "\"bulkwrite.status\"", NULL, NULL, 0,
     "Compacted topic where consumers publish each shard's lag, rate and recent errors (key = "
     "shard/N), read by the proxy for GET /v1/shards, and where every proxy and consumer writes "
     "its presence every 2 s (member/ROLE/ID).", RESTART},
    {"kafka.create_topic", K_BOOL, OFF(create_topic), 0, 0, 0, "true", NULL, NULL, 0,
     "Create the topic at startup when it is missing.", RESTART},
    {"kafka.allow_retention", K_BOOL, OFF(allow_retention), 0, 0, 0, "false", NULL, NULL, 0,
     "Start even if the batches topic has a retention.ms or retention.bytes that could delete "
     "messages before they are applied (logged as a warning with the bound it implies). When "
     "false such a topic stops startup. Topics bulkwrite creates have no time or size "
     "retention: the consumer deletes what every shard has applied (DeleteRecords).", RESTART},
    {"kafka.replication_factor", K_INT, OFF(replication_factor), 0, 1, 16, "3", NULL, NULL, 0,
     "Replicas of each partition of a topic bulkwrite creates (batches, jobs, control, status, "
     "dead letters). At startup an existing topic with fewer stops the daemon (or a warning with "
     "allow_weak_durability). A single test broker needs 1 (and min_insync_replicas 1). The "
     "embedded Kafka has one replica whatever this says.", RESTART},
    {"kafka.min_insync_replicas", K_INT, OFF(min_insync_replicas), 0, 1, 16, "2", NULL, NULL, 0,
     "min.insync.replicas of a topic bulkwrite creates: with acks=all a write is acknowledged (and "
     "the proxy answers 202) only once this many replicas have it, so one lost disk loses nothing "
     "accepted. While fewer replicas are in sync the proxy answers 503. At most "
     "replication_factor; an existing topic with less stops startup as above.", RESTART},
    {"kafka.allow_weak_durability", K_BOOL, OFF(allow_weak_durability), 0, 0, 0, "false", NULL, NULL, 0,
     "Start even if an existing topic has fewer replicas or a lower min.insync.replicas than "
     "configured, or a control topic whose records can expire (a warning naming the setting). "
     "false: such a topic stops startup.", RESTART},
    {"kafka.message_max_bytes", K_INT, OFF(message_max_bytes), 0, 1024, 100000000, "1000000", NULL,
     NULL, 0, "Largest Kafka message the batcher writes; bigger batches are split.", RESTART},
    {"kafka.properties", K_STRLIST, OFF(properties), OFF(property_cnt), 0, 1000, "[]", NULL, NULL,
     0, "librdkafka properties for producer and consumer, as \"name=value\" strings. A property whose "
        "name contains password, secret, key, token or sasl.jaas is a secret: its value may be "
        "\"file:PATH\" or \"env:NAME\", and dumps show it redacted.", SECRET_PROPS, RESTART},
    {"kafka.producer_properties", K_STRLIST, OFF(producer_properties),
     OFF(producer_property_cnt), 0, 1000, "[]", NULL, NULL, 0,
     "librdkafka properties for the proxy's producer only (secrets as in kafka.properties).", SECRET_PROPS, RESTART},
    {"kafka.consumer_properties", K_STRLIST, OFF(consumer_properties),
     OFF(consumer_property_cnt), 0, 1000, "[]", NULL, NULL, 0,
     "librdkafka properties for the consumer only (secrets as in kafka.properties).", SECRET_PROPS, RESTART},
    {"shards.count", K_INT, OFF(shard_count), 0, 1, 65536, NULL, NULL, NULL, 0,
     "Number of logical shards, and of Kafka partitions.", RESTART},
    {"shards.database_prefix", K_STR, OFF(database_prefix), 0, 0, 0, "\"db\"", NULL, NULL, 0,
     "Logical shard N lives in database <prefix><N as 5 digits>, e.g. db00042.", RESTART},
    {"shards.default_rate", K_DBL, OFF(default_rate), 0, 0, BW_RATE_MAX, "100.0", NULL, NULL, 0,
     "Statements per second each shard may run (every SQL statement of a batch counts, each "
     "carrying up to its object type's batch_size rows); " RATE_BOUNDS ".", RATES},
    {"shards.default_row_rate", K_DBL, OFF(default_row_rate), 0, 0, BW_ROW_RATE_MAX, "0.0", NULL, NULL, 0,
     "Rows per second each shard may take, over all its statements; " ROW_RATE_BOUNDS ". With both "
     "budgets set, whichever binds first holds the shard back (docs/operations.md has the measured "
     "cost of a statement and of a row).", RATES},
    {"shards.rate_overrides", K_LIST, OFF(rate_overrides), OFF(rate_override_cnt), 0, 65536, "()",
     NULL, rate_override_keys, sizeof(bw_rate_override_t),
     "Per-shard budgets that differ from the defaults (a shard of hot users gets less).", RATES},
    {"shards.servers", K_LIST, OFF(servers), OFF(server_cnt), 1, 65536, NULL, NULL, server_keys,
     sizeof(bw_server_t),
     "MySQL servers, each holding a contiguous range of logical shards; together they must "
     "hold every shard exactly once.", RESTART},
    {"mysql.query_timeout_ms", K_INT, OFF(query_timeout_ms), 0, 1, 3600000, "5000", NULL, NULL, 0,
     "Longest a batch statement may run (max_statement_time and client read timeout).", RESTART},
    {"mysql.connect_timeout_ms", K_INT, OFF(connect_timeout_ms), 0, 1, 600000, "2000", NULL, NULL,
     0, "Longest a connection attempt may take.", RESTART},
    {"mysql.user_host", K_STR, OFF(mysql_user_host), 0, 0, 0, "\"%\"", NULL, NULL, 0,
     "Host part of the accounts `bwctl schema --create-users` makes for each server's user and "
     "proxy_user ('NAME'@'HOST'): where the consumers and proxies connect from, e.g. \"10.1.%\".", NOT_READ},
    {"proxy.listen_address", K_STR, OFF(proxy_listen_address), 0, 0, 0, "\"127.0.0.1\"", NULL,
     NULL, 0, "Address the proxy's HTTP server binds.", PROXY_RESTART},
    {"proxy.port", K_INT, OFF(proxy_port), 0, 0, 65535, "8080", NULL, NULL, 0,
     "TCP port of the proxy's HTTP server (0 = any free port, printed at startup).", PROXY_RESTART},
    {"proxy.max_connections", K_INT, OFF(proxy_max_connections), 0, 1, 65536, "128", NULL, NULL, 0,
     "Most HTTP connections served at once; each has its own thread, which waits for its "
     "request's Kafka acknowledgements.", PROXY_RESTART},
    {"proxy.max_connections_per_ip", K_INT, OFF(proxy_max_connections_per_ip), 0, 0, 65536, "32", NULL,
     NULL, 0,
     "Most HTTP connections from one client address at once (0 = only proxy.max_connections "
     "bounds them): idle or slow sockets from one address (slowloris) cannot take every "
     "connection.", PROXY_RESTART},
    {"proxy.connection_timeout_s", K_INT, OFF(proxy_connection_timeout_s), 0, 1, 3600, "30", NULL, NULL,
     0, "A connection idle this long (no byte received or sent) is closed.", PROXY_RESTART},
    {"proxy.producers", K_INT, OFF(proxy_producers), 0, 1, 64, "8", NULL, NULL, 0,
     "Idempotent Kafka producers (each its own broker connection) the proxy spreads the "
     "batch partitions over: partition modulo this, so a partition always uses the same one "
     "and keeps its order. librdkafka sends one partition per produce request and the broker "
     "serves a connection's requests one at a time, so a request touching 128 shards waits "
     "for 128 of them in turn on one connection.", PROXY_RESTART},
    {"proxy.jobs_index_max_bytes", K_INT, OFF(proxy_jobs_index_max_bytes), 0, 4096, 1073741824, "67108864", NULL,
     NULL, 0,
     "Memory for the index of job records that answers GET /v1/jobs/{id} (bytes, records and their entries; "
     "about 200 bytes per job touching a few shards). Past it the least recently used records are dropped; "
     "a dropped one is read back from kafka.jobs_topic when asked for (slow: the whole topic, one at a time). "
     "A fixed 8 MiB filter of every job id read answers ids never submitted at once.", PROXY_RESTART},
    {"proxy.max_body_bytes", K_INT, OFF(max_body_bytes), 0, 1024, 1073741824, "16777216", NULL,
     NULL, 0, "Largest request body; a bigger one gets 413.", PROXY_RESTART},
    {"proxy.max_ops", K_INT, OFF(max_ops), 0, 1, 10000000, "100000", NULL, NULL, 0,
     "Most ops in one request.", PROXY_RESTART},
    {"proxy.produce_timeout_ms", K_INT, OFF(produce_timeout_ms), 0, 100, 3600000, "30000", NULL,
     NULL, 0,
     "How long Kafka may take to acknowledge a request's batches (message.timeout.ms); "
     "ops not acknowledged by then are reported as not accepted.", RESTART},
    {"proxy.backlog_max_messages", K_INT, OFF(backlog_max_messages), 0, 1, 2147483647, "1000000",
     NULL, NULL, 0,
     "Per shard: most messages Kafka may hold that the shard has not applied. Ops that would "
     "pass it get 429 with Retry-After (the rest of the request is accepted). On the embedded "
     "Kafka it is capped at 50000, below the mock cluster's per-partition limit.", PROXY_RESTART},
    {"proxy.backlog_max_bytes", K_INT, OFF(backlog_max_bytes), 0, 65536, 2147483647, "268435456",
     NULL, NULL, 0,
     "Per shard: most bytes of unapplied messages (uncompressed payload, key and headers). On the "
     "embedded Kafka it is capped at 4 MiB, below the mock cluster's 5 MiB per partition.", PROXY_RESTART},
    {"proxy.backlog_wait_ms", K_INT, OFF(backlog_wait_ms), 0, 0, 600000, "1000", NULL, NULL, 0,
     "How long one request may wait in the proxy for room in a full shard backlog (the "
     "consumers report progress every consumer.progress_interval_ms) before its ops for that "
     "shard get 429: a draining shard is fed without the client's round trip.", PROXY_RESTART},
    {"proxy.backlog_retry_after_s", K_INT, OFF(backlog_retry_after_s), 0, 1, 3600, "1", NULL, NULL,
     0, "Retry-After (seconds) of a 429 for a shard whose backlog is full.", PROXY_RESTART},
    {"proxy.auth", K_GROUP, 0, 0, 0, 0, "", NULL, auth_keys, 0,
     "Who may call the proxy's HTTP API, and what they may do (docs/security.md)."},
    {"proxy.tls", K_GROUP, 0, 0, 0, 0, "", NULL, tls_keys, 0, "HTTPS on both proxy listeners (docs/security.md)."},
    {"proxy.admin_listen_address", K_STR, OFF(proxy_admin_listen_address), 0, 0, 0, "\"127.0.0.1\"", NULL, NULL, 0,
     "Address of the proxy's admin listener (with proxy.admin_port).", PROXY_RESTART},
    {"proxy.admin_port", K_INT, OFF(proxy_admin_port), 0, 0, 65535, "0", NULL, NULL, 0,
     "Port of the admin listener: shard control (POST /v1/shards/{n}/rate, /pause, /resume) is "
     "served there only, with GET /v1/shards, /healthz and /metrics; the data port then "
     "refuses shard control with 404. Same TLS and connection bounds as proxy.port (each "
     "listener has its own). 0 = no admin listener: the admin API shares proxy.port.", PROXY_RESTART},
    {"consumer.pull_count", K_INT, OFF(pull_count), 0, 1, 100000, "1000", NULL, NULL, 0,
     "Messages a consumer buffers per partition (pulled at once). Small batches need many: at "
     "100, a shard of 2-row batches applied about 950 statements/s, waiting for refills; at 1000, "
     "5,600 (docs/performance.md). Memory is bounded by consumer.buffer_max_bytes either way.", CONSUMER_RESTART},
    {"consumer.buffer_max_bytes", K_INT, OFF(buffer_max_bytes), 0, 1048576, 2147483647, "268435456",
     NULL, NULL, 0,
     "Message bytes a consumer buffers over all its partitions, shared evenly between them (each "
     "partition always buffers at least one message): with consumer.pull_count, bounds the "
     "consumer's memory whatever the partition count (see docs/operations.md for RSS measured per "
     "partition).", CONSUMER_RESTART},
    {"consumer.commit_interval_ms", K_INT, OFF(commit_interval_ms), 0, 10, 60000, "1000", NULL, NULL,
     0,
     "How often a consumer commits applied offsets to Kafka, in one request for every partition "
     "that moved. The shards' ledgers hold the real offsets; this only saves re-reading.", CONSUMER_APPLY(BW_HOOK_NONE)},
    {"consumer.stall_alert_ms", K_INT, OFF(stall_alert_ms), 0, 0, 86400000, "300000", NULL, NULL, 0,
     "A shard with unapplied messages and no batch applied for this long raises "
     "BulkwriteShardNoProgress, whatever the cause (an operator's pause excepted); stretched to "
     "three of the shard's batch intervals when its rate is slower. 0 = never.", CONSUMER_APPLY(BW_HOOK_NONE)},
    {"consumer.workers", K_INT, OFF(workers), 0, 1, 1024, "4", NULL, NULL, 0,
     "Worker threads applying batches; a slow shard holds one worker, not the others.", CONSUMER_RESTART},
    {"consumer.listen_address", K_STR, OFF(consumer_listen_address), 0, 0, 0, "\"127.0.0.1\"",
     NULL, NULL, 0, "Address of the consumer's /metrics, /healthz and /readyz.", CONSUMER_RESTART},
    {"consumer.port", K_INT, OFF(consumer_port), 0, 0, 65535, "18081", NULL, NULL, 0,
     "Port of the consumer's HTTP endpoints (0 = any free port, logged at startup).", CONSUMER_RESTART},
    {"consumer.instance_id", K_STR, OFF(consumer_instance_id), 0, 0, 0, "\"\"", NULL, NULL, 0,
     "The consumer's group.instance.id (Kafka's static membership): a consumer restarted within "
     "session.timeout.ms (kafka.consumer_properties; 10 s in the example) rejoins as the same member "
     "and gets its partitions back without a rebalance of the group. \"auto\" = this host's name and "
     "the consumer's port (\"HOST:PORT\"; with port 0, dynamic); \"\" = a dynamic member (the "
     "default: librdkafka 2.0.2 fences its own static members after a broker restart, and the "
     "consumer then stops). Two running consumers with one id: Kafka fences the older, which stops "
     "with an error naming the id (docs/deployment.md, upgrades).", CONSUMER_RESTART},
    {"consumer.status_interval_ms", K_INT, OFF(status_interval_ms), 0, 100, 3600000, "2000", NULL,
     NULL, 0, "How often a consumer publishes the status of its shards to kafka.status_topic.", CONSUMER_APPLY(BW_HOOK_NONE)},
    {"consumer.progress_interval_ms", K_INT, OFF(progress_interval_ms), 0, 50, 3600000, "250",
     NULL, NULL, 0,
     "How often a consumer publishes the status of shards whose applied offset moved: the "
     "proxies' backlog admission sees room this soon after a batch is applied.", CONSUMER_APPLY(BW_HOOK_NONE)},
    {"consumer.delete_applied_interval_ms", K_INT, OFF(delete_applied_interval_ms), 0, 0, 86400000,
     "10000", NULL, NULL, 0,
     "How often a consumer deletes from Kafka (DeleteRecords) what its shards have applied and "
     "stored in their ledgers, every listed replica has applied too, and was applied "
     "consumer.keep_applied_ms ago; 0 = never. Skipped on the embedded Kafka, which has no such call.",
     CONSUMER_APPLY(BW_HOOK_NONE)},
    {"consumer.keep_applied_ms", K_INT, OFF(keep_applied_ms), 0, 0, 604800000, "3600000", NULL, NULL, 0,
     "How long Kafka keeps a batch after its shard applied it, before the consumer deletes it: a "
     "failover to a replica that lags by less than this (listed in shards.servers[].replicas or "
     "not), or a backup restored from within it, is brought level from Kafka instead of losing "
     "writes. It costs this much of the write stream on the brokers' disks (docs/deployment.md, "
     "failover). 0 = delete as soon as the primary and every listed replica have applied it.",
     CONSUMER_APPLY(BW_HOOK_NONE)},
    {"consumer.replica_unread_alert_ms", K_INT, OFF(replica_unread_alert_ms), 0, 0, 86400000, "600000", NULL,
     NULL, 0,
     "A listed replica whose ledger (bw_offsets) cannot be read holds back the deleting of its "
     "server's applied batches (Kafka's disk grows); after this long the BulkwriteTrimHeld warning "
     "fires. 0 = never.", CONSUMER_APPLY(BW_HOOK_NONE)},
    {"consumer.max_batch_bytes", K_INT, OFF(max_batch_bytes), 0, 1024, 1073741824, "4194304", NULL,
     NULL, 0,
     "Most Kafka payload bytes a consumer hands to one apply (one transaction), besides the "
     "op's batch_size rows. Statements are sized separately, by consumer.statement_packet_pct.", CONSUMER_APPLY(BW_HOOK_NONE)},
    {"consumer.transaction_max_statements", K_INT, OFF(transaction_max_statements), 0, 1, 10000, "16",
     NULL, NULL, 0,
     "Most statements one transaction runs when a shard has a backlog: several batches then share "
     "the ledger's bookkeeping and one commit. 1 = one statement per transaction. A rate-limited "
     "shard's transaction holds at most a tenth of a second of its rate.", CONSUMER_APPLY(BW_HOOK_NONE)},
    {"consumer.statement_packet_pct", K_INT, OFF(statement_packet_pct), 0, 10, 90, "75", NULL, NULL,
     0,
     "Multi-row statements stay under this share (percent) of each server's max_allowed_packet, "
     "read when a connection is made; a batch becomes as many statements as that takes, in one "
     "transaction. A row too big for this share is sent alone; a row whose statement is over "
     "max_allowed_packet itself fails alone as a data error (1153) and is dead-lettered.", CONSUMER_RESTART},
    {"consumer.array_binding", K_BOOL, OFF(array_binding), 0, 0, 0, "true", NULL, NULL, 0,
     "Send CREATE and UPSERT statements as one prepared INSERT executed over arrays of values "
     "(MariaDB's bulk execution: parsed once per connection, values binary and unescaped), "
     "where the server supports it; false, or a MySQL server: text multi-row statements. "
     "UPDATE and DELETE are always text. The rows, their bounds and the error handling are "
     "the same either way.", CONSUMER_RESTART},
    {"consumer.connection_check_idle_ms", K_INT, OFF(connection_check_idle_ms), 0, 0, 86400000,
     "5000", NULL, NULL, 0,
     "A pooled MariaDB connection idle longer than this is checked (ping) before its next "
     "batch; one the server or a load balancer closed is replaced by a fresh connection without "
     "counting an error. 0 = before every batch.", CONSUMER_RESTART},
    {"consumer.connection_idle_close_ms", K_INT, OFF(connection_idle_close_ms), 0, 1000, 86400000,
     "60000", NULL, NULL, 0,
     "A pooled connection idle longer than this is closed, so idle consumers (consumers x "
     "workers x servers) do not hold server threads (each consumer keeps one connection per "
     "server for its ledger check every 5 s); keep it under the server's wait_timeout and any "
     "load balancer's idle timeout.", CONSUMER_RESTART},
    {"consumer.backlog_age_warn_pct", K_INT, OFF(backlog_age_warn_pct), 0, 1, 99, "50", NULL, NULL,
     0,
     "Where the batches topic has a retention.ms (kafka.allow_retention), a shard whose oldest "
     "unapplied message is older than this share of it raises the BulkwriteShardBacklogAging "
     "warning.", CONSUMER_APPLY(BW_HOOK_NONE)},
    {"consumer.retry_initial_ms", K_INT, OFF(retry_initial_ms), 0, 1, 3600000, "100", NULL, NULL, 0,
     "First wait before retrying a batch that failed for a retryable reason (deadlock, lost "
     "connection, timeout, ...); each further failure doubles it, plus up to 25% jitter.", CONSUMER_APPLY(BW_HOOK_NONE)},
    {"consumer.retry_max_ms", K_INT, OFF(retry_max_ms), 0, 1, 3600000, "10000", NULL, NULL, 0,
     "Longest wait between retries of a batch.", CONSUMER_APPLY(BW_HOOK_NONE)},
    {"consumer.pause_after_timeouts", K_INT, OFF(pause_after_timeouts), 0, 1, 1000, "2", NULL,
     NULL, 0,
     "Consecutive timeouts (or lost connections) on a shard that raise an alert and stop "
     "pulling the shard for consumer.pause_ms.", CONSUMER_APPLY(BW_HOOK_HEALTH)},
    {"consumer.pause_ms", K_INT, OFF(pause_ms), 0, 1, 86400000, "30000", NULL, NULL, 0,
     "How long an unhealthy shard is left alone before a probe batch (one message) is tried; "
     "success resumes it and resolves the alert, another timeout pauses it again.", CONSUMER_APPLY(BW_HOOK_HEALTH)},
    {"consumer.handover_max_age_ms", K_INT, OFF(handover_max_age_ms), 0, 0, 86400000, "120000", NULL, NULL, 0,
     "A shard given to this consumer (a rebalance, a consumer lost) keeps the throttle and "
     "health state of its latest status record (kafka.status_topic), whoever wrote it, when "
     "that record is at most this old: a throttled shard resumes at its throttled rate, not "
     "its cap; a held one stays held until its probe. Longer than session.timeout.ms plus a "
     "rebalance, so a consumer killed without a goodbye still hands over. 0 = every moved shard "
     "starts afresh (docs/throttling.md).", CONSUMER_APPLY(BW_HOOK_NONE)},
    {"throttle", K_GROUP, 0, 0, 0, 0, "", NULL, throttle_keys, 0,
     "The adaptive throttle: per-shard rates that follow the database's health "
     "(docs/operations.md, \"The adaptive throttle\")."},
    {"alerts.alertmanager_url", K_STR, OFF(alertmanager_url), 0, 0, 0, "\"\"", NULL, NULL, 0,
     "Alertmanager's v2 alerts API (http://host:9093/api/v2/alerts) the consumer posts shard "
     "alerts to; empty = alerts go to the log and the metrics only. Its old name, "
     "alerts.webhook_url, is still read, with a warning (both set: startup stops).",
     CONSUMER_RESTART, .old_name = "alerts.webhook_url"},
    {"alerts.resend_ms", K_INT, OFF(alert_resend_ms), 0, 1000, 86400000, "60000", NULL, NULL, 0,
     "How often a firing alert is posted again (Alertmanager resolves alerts it stops hearing "
     "about after its resolve_timeout).", CONSUMER_RESTART},
    {"alerts.timeout_ms", K_INT, OFF(alert_timeout_ms), 0, 100, 600000, "5000", NULL, NULL, 0,
     "Longest one post to Alertmanager may take; a failed post is retried at the next resend.", CONSUMER_RESTART},
    {"alerts.labels", K_STRLIST, OFF(alert_labels), OFF(alert_label_cnt), 0, 100, "[]", NULL, NULL,
     0, "Extra labels on every alert, as \"name=value\" strings (e.g. \"team=storage\").", CONSUMER_RESTART},
    {"object_types", K_LIST, OFF(object_types), OFF(object_type_cnt), 1, 1024, NULL, NULL,
     object_type_keys, sizeof(bw_object_type_t), "Object types clients may write.", RESTART},
    {"lanes", K_LIST, OFF(lanes), OFF(lane_cnt), 0, BW_LANES_MAX, "()", NULL, lane_keys, sizeof(bw_lane_t),
     "Priority lanes besides \"default\" (which every request without a lane takes, weight 1 unless "
     "listed): a request names its lane, and an urgent cleanup does not wait behind a bulk "
     "ingestion's backlog on the same shard (docs/throttling.md). Each lane is a topic with one "
     "partition per shard; at most 8 lanes with the default.", RESTART},
    END};

const key_t_ *bw_config_renamed_key(const char *name) {
    for (const key_t_ *k = bw_config_top_keys; k->name; k++)
        if (k->old_name && strcmp(k->old_name, name) == 0) return k;
    return NULL;
}

const char *bw_op_name(int op) {
    static const char *const names[] = {"?", "create", "update", "upsert", "delete"};
    return op > 0 && op < BW_OP_MAX ? names[op] : "?";
}

const char *bw_col_type_name(bw_col_type_t t) { return col_types[t]; }

static const char *kind_name(const key_t_ *k) {
    switch (k->kind) {
    case K_STR: return "string";
    case K_INT: return "integer";
    case K_DBL: return "number";
    case K_BOOL: return "bool";
    case K_ENUM: return "choice";
    case K_STRLIST: return "list of strings";
    case K_LIST: return "list of groups";
    case K_GROUP: return "group";
    }
    return "?";
}

/* The SIGHUP column: what a reload does with a changed value, naming each daemon that
 * reads the key. `in_list`: an element's member, decided by its list. */
static void doc_reload(FILE *out, const key_t_ *k, int in_list) {
    if (in_list) {
        fputs("as its list", out);
        return;
    }
    static const char *const what[] = {[R_UNSET] = "**undecided**", [R_RESTART] = "restart", [R_APPLY] = "applied"};
    const unsigned char *rl = k->reload;
    int readers = 0;
    for (int role = 0; role < BW_PROC_COUNT; role++) readers += rl[role] != R_UNUSED;
    if (!readers) {
        fputs("not read by the daemons", out);
        return;
    }
    int same = 1;
    for (int role = 1; role < BW_PROC_COUNT; role++) same &= rl[role] == rl[0];
    int n = 0;
    for (int role = 0; role < BW_PROC_COUNT; role++) {
        if (rl[role] == R_UNUSED || (same && role > 0)) continue;
        if (!same) fprintf(out, "%s%s: ", n++ ? "; " : "", bw_process_name((bw_process_t)role) + 3);
        fputs(what[rl[role]], out);
        if (rl[role] == R_APPLY && k->hook) fprintf(out, " (%s)", bw_reload_hook_name((bw_reload_hook_t)k->hook));
    }
}

static void doc_table(FILE *out, const key_t_ *keys, const char *prefix, int in_list) {
    for (const key_t_ *k = keys; k->name; k++) {
        char full[256];
        snprintf(full, sizeof(full), "%.120s%.120s", prefix, k->name);
        if (k->kind == K_GROUP) {
            char sub[256];
            snprintf(sub, sizeof(sub), "%.200s.", full);
            doc_table(out, k->sub, sub, in_list);
            continue;
        }
        fprintf(out, "| `%s` | %s", full, kind_name(k));
        if (k->kind == K_ENUM) {
            fputs(": ", out);
            for (int i = 0; k->enums[i]; i++) fprintf(out, "%s`%s`", i ? ", " : "", k->enums[i]);
        }
        if (k->kind == K_INT || k->kind == K_DBL) fprintf(out, " (%g to %g)", k->min, k->max);
        const char *def = !k->def ? "**required**" : *k->def ? k->def : k->kind == K_GROUP ? "" : "*optional*";
        fprintf(out, " | %s | ", def);
        doc_reload(out, k, in_list);
        fprintf(out, " | %s |\n", k->doc);
        if (k->kind == K_LIST) {
            char sub[256];
            snprintf(sub, sizeof(sub), "%.200s[].", full);
            doc_table(out, k->sub, sub, 1);
        }
    }
}

void bw_config_doc(FILE *out) {
    fputs("# Configuration\n\n"
          "<!-- Generated by `bwctl config-doc` from the key table in config/config_keys.c; "
          "`make docs` rewrites it and `make check` fails when it drifts. -->\n\n"
          "bulkwrite reads one [libconfig](https://hyperrealm.github.io/libconfig/) file, "
          "the one `-c FILE` names, else the one the `BULKWRITE_CONF` environment variable names, "
          "else the installed one (`/etc/bulkwrite/bulkwrite.conf` for `PREFIX=/usr`, "
          "`$PREFIX/etc/bulkwrite/bulkwrite.conf` for another; the source tree's example is "
          "`conf/bulkwrite.conf`). Unknown keys, wrong types and out-of-range "
          "values stop startup with `file:line: what is wrong`. `--dump-config` prints the "
          "effective configuration, defaults filled in; `bwctl config-set FILE KEY=VALUE...` "
          "edits a file, checking each value against its key (it rewrites the file through "
          "libconfig, dropping comments).\n\n"
          "The SIGHUP column says what `kill -HUP` does with a changed value, in each daemon "
          "that reads the key (docs/operations.md, \"Reload the configuration\"): *applied* "
          "takes effect at once (with what it re-derives in parentheses); *restart* only "
          "takes effect at a restart: a reload applies the other changes and keeps such a "
          "key at its running value, naming every such key in one warning; a daemon not "
          "named does not read the key, and notes its change without effect. A list's "
          "members go with their list.\n\n"
          "| key | type | default | SIGHUP | meaning |\n| --- | --- | --- | --- | --- |\n", out);
    doc_table(out, bw_config_top_keys, "", 0);
}
