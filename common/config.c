/* config.c — key tables and the one parser that reads them. */
#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <libconfig.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "log.h"
#include "ratelimit.h"

/* a rate's doc names the bounds ratelimit.h defines */
#define RATE_BOUNDS "0 = unlimited, else " BW_RATE_BOUNDS_TEXT
#define ROW_RATE_BOUNDS "0 = no row budget, else " BW_ROW_RATE_BOUNDS_TEXT

typedef enum { K_STR, K_INT, K_DBL, K_BOOL, K_ENUM, K_STRLIST, K_LIST, K_GROUP } key_kind_t;

typedef struct key key_t_;
struct key {
    const char *name;      /* dotted names only inside K_GROUP tables */
    key_kind_t kind;
    size_t off;            /* of the value (K_LIST: of the array pointer) */
    size_t cnt_off;        /* K_LIST/K_STRLIST: of the int count */
    double min, max;       /* K_INT, K_DBL; K_STRLIST/K_LIST: element count */
    const char *def;       /* default as text; NULL = required; "" = optional without one
                              (K_GROUP: its members' defaults; a scalar: left 0, and
                              validate() fills it in from what the file sets) */
    const char *const *enums; /* K_ENUM: accepted words, stored as their index */
    const key_t_ *sub;     /* K_LIST element keys, K_GROUP member keys */
    size_t elem_size;      /* K_LIST */
    const char *doc;
    int secret;            /* SECRET_VALUE: the value; SECRET_PROPS: "name=value" elements whose
                              name bw_config_secret_name() matches (resolve_secrets, dumps) */
};
enum { SECRET_VALUE = 1, SECRET_PROPS = 2 };
/* the tables below name `secret` only on the few keys that are secrets: 0 elsewhere */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#define END {NULL, 0, 0, 0, 0, 0, NULL, NULL, NULL, 0, NULL, 0}
#define OFF(f) offsetof(bw_config_t, f)

static const char *const col_types[] = {"int", "double", "string", "bytes", "bool", NULL};
static const char *const routes[] = {"id", "md5", NULL};
static const char *const log_levels[] = {"debug", "info", "warn", "error", NULL};

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
     "Replicas of this server, as \"host:port\" strings, where the adaptive throttle reads the "
     "heartbeat row for replication lag (throttle.replication_lag_ms), as `user`. [] = no "
     "replication lag signal for this server."},
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
     "force. SIGHUP applies a change."},
    {"interval_ms", K_INT, OFF(throttle_interval_ms), 0, 100, 600000, "1000", NULL, NULL, 0,
     "How often the signals are read (and the heartbeat written), and the least time between "
     "two steps of a shard's rate."},
    {"stale_ms", K_INT, OFF(throttle_stale_ms), 0, 100, 3600000, "5000", NULL, NULL, 0,
     "A signal not read for this long is unknown: the shard is held at floor (and "
     "BulkwriteThrottleSignalUnknown fires), never taken for healthy."},
    {"floor", K_DBL, OFF(throttle_floor), 0, BW_RATE_MIN, BW_RATE_MAX, "1.0", NULL, NULL, 0,
     "Statements per second a throttled shard never goes below, and an unknown one runs at."},
    {"max_rate", K_DBL, OFF(throttle_max_rate), 0, BW_RATE_MIN, BW_RATE_MAX, "1000.0", NULL, NULL, 0,
     "For a shard whose rate is unlimited (0): the rate it climbs back to before it runs "
     "unlimited again."},
    {"decrease", K_DBL, OFF(throttle_decrease), 0, 0.01, 0.99, "0.5", NULL, NULL, 0,
     "A signal over its threshold multiplies the shard's rate by this, once per interval."},
    {"increase", K_DBL, OFF(throttle_increase), 0, 0.001, 1, "0.1", NULL, NULL, 0,
     "After quiet_ms of calm, the rate grows per interval by this fraction of the rate it "
     "ran at when the trouble began, and past that rate by this fraction of its own."},
    {"recover_ratio", K_DBL, OFF(throttle_recover_ratio), 0, 0.1, 1, "0.8", NULL, NULL, 0,
     "Calm means every signal below its threshold times this (hysteresis: between the two the "
     "rate holds)."},
    {"quiet_ms", K_INT, OFF(throttle_quiet_ms), 0, 0, 3600000, "3000", NULL, NULL, 0,
     "How long every signal must be calm before a shard's rate grows again."},
    {"critical_ms", K_INT, OFF(throttle_critical_ms), 0, 0, 86400000, "10000", NULL, NULL, 0,
     "A signal over its critical level this long pauses the shard (nothing is dropped); it "
     "resumes at floor once the signal is back under its threshold."},
    {"replication_lag_ms", K_DBL, OFF(throttle_lag_ms), 0, 0, 1e9, "1000.0", NULL, NULL, 0,
     "Threshold of replication lag in ms: the most of the server's replicas, from a heartbeat "
     "row each consumer writes on the primary every interval_ms and reads on the replicas "
     "(pt-heartbeat style): the age of the oldest heartbeat a replica has not applied, so a "
     "replica that keeps up reads a few ms. Read only for servers with replicas. 0 = off."},
    {"replication_lag_critical_ms", K_DBL, OFF(throttle_lag_critical_ms), 0, 0, 1e9, "0.0", NULL, NULL, 0,
     "Critical level of replication lag in ms (critical_ms); 0 = none."},
    {"threads_running", K_DBL, OFF(throttle_threads_running), 0, 0, 1e6, "0.0", NULL, NULL, 0,
     "Threshold of the server's Threads_running (SHOW GLOBAL STATUS) besides the reading "
     "query itself, the mean of threads_running_samples reads an interval: 0.2 means other "
     "statements run a fifth of the time. 0 = off."},
    {"threads_running_samples", K_INT, OFF(throttle_threads_running_samples), 0, 1, 20, "4", NULL, NULL, 0,
     "Threads_running is read this many times per interval_ms, evenly spaced, and the signal "
     "is their mean: a statement that runs a fifth of the time reads about 0.2, where a "
     "single read sees 0 or 1 and the rate saws."},
    {"threads_running_critical", K_DBL, OFF(throttle_threads_running_critical), 0, 0, 1e6, "0.0", NULL, NULL, 0,
     "Critical level of Threads_running; 0 = none."},
    {"statement_latency_ms", K_DBL, OFF(throttle_latency_ms), 0, 0, 1e9, "0.0", NULL, NULL, 0,
     "Threshold of the shard's own ms per statement (its last batches, averaged). 0 = off."},
    {"statement_latency_critical_ms", K_DBL, OFF(throttle_latency_critical_ms), 0, 0, 1e9, "0.0", NULL, NULL, 0,
     "Critical level of the statement latency in ms; 0 = none."},
    {"custom_query", K_STR, OFF(throttle_custom_query), 0, 0, 0, "\"\"", NULL, NULL, 0,
     "A query run on each server every interval_ms that returns one number (one row, one "
     "column), e.g. \"SELECT COUNT(*) FROM information_schema.processlist WHERE command = "
     "'Query'\". \"\" = off. Written by operators, never built from requests."},
    {"custom_threshold", K_DBL, OFF(throttle_custom_threshold), 0, 0, 1e18, "0.0", NULL, NULL, 0,
     "Threshold of custom_query's number."},
    {"custom_critical", K_DBL, OFF(throttle_custom_critical), 0, 0, 1e18, "0.0", NULL, NULL, 0,
     "Critical level of custom_query's number; 0 = none."},
    {"heartbeat_table", K_STR, OFF(throttle_heartbeat_table), 0, 0, 0, "\"bw_heartbeat\"", NULL, NULL, 0,
     "Table of the heartbeat rows (one per consumer), in each server's first shard database "
     "(`bwctl schema` makes it, and grants the consumer's user on it)."},
    END};

static const key_t_ auth_keys[] = {
    {"clients_file", K_STR, OFF(proxy_auth_clients_file), 0, 0, 0, "\"\"", NULL, NULL, 0,
     "libconfig file of the API's clients: name, token_sha256, roles, scopes (docs/security.md; "
     "conf/clients.example.conf). A relative path is read from the configuration file's "
     "folder. Every endpoint but /healthz (and /metrics, /readyz with open_metrics) then needs "
     "`Authorization: Bearer TOKEN`. SIGHUP re-reads it; a file that does not parse keeps the "
     "clients loaded before. \"\" = no authentication: every caller is admin (a warning at "
     "startup). Changing the key itself needs a restart."},
    {"open_metrics", K_BOOL, OFF(proxy_auth_open_metrics), 0, 0, 0, "true", NULL, NULL, 0,
     "With a clients file: /metrics and /readyz answer without a token (scrapers, load "
     "balancers); false = they need the read or admin role. /healthz is always open."},
    {"job_id_secret", K_STR, OFF(proxy_auth_job_id_secret), 0, 0, 0, "\"\"", NULL, NULL, 0,
     "With a clients file: the key of the HMAC that makes a job id from the client's name "
     "and its request_id, so nobody can compute a job's id from its request_id. Every proxy "
     "of a deployment needs the same one; changing it makes a resend of an earlier request "
     "a new job (applied again). \"\" = an empty key: ids are still per client, but "
     "computable (a warning at startup). A secret: \"file:PATH\" or \"env:NAME\" reads it, "
     "dumps show it redacted.", SECRET_VALUE},
    END};

/* HTTPS and the admin listener (proxy/tls.h): the proxy checks the files at startup */
static const key_t_ tls_keys[] = {
    {"cert_file", K_STR, OFF(proxy_tls_cert_file), 0, 0, 0, "\"\"", NULL, NULL, 0,
     "PEM certificate (chain) the proxy's listeners present: with it they speak HTTPS only. "
     "\"\" = plain HTTP. A relative path is read from the configuration file's folder, as are the "
     "other two; all are read at startup (a restart takes new ones)."},
    {"key_file", K_STR, OFF(proxy_tls_key_file), 0, 0, 0, "\"\"", NULL, NULL, 0,
     "PEM private key of cert_file; required with it."},
    {"client_ca_file", K_STR, OFF(proxy_tls_client_ca_file), 0, 0, 0, "\"\"", NULL, NULL, 0,
     "PEM certificates of the CAs that sign client certificates. With it the proxy asks each "
     "client for a certificate; one presented is verified (signature, dates, key purpose) and "
     "refused with 401 and the reason otherwise. Its identity (the first DNS or URI subject "
     "alternative name, else the common name) is the client whose cert_identity it is in "
     "proxy.auth.clients_file. \"\" = client certificates are not asked for."},
    {"require_client_cert", K_BOOL, OFF(proxy_tls_require_client_cert), 0, 0, 0, "false", NULL, NULL, 0,
     "Refuse (401) every request without a verified client certificate but /healthz, even one "
     "with a valid token; needs client_ca_file."},
    END};

static const key_t_ top_keys[] = {
    {"log_level", K_ENUM, OFF(log_level), 0, 0, 0, "\"info\"", log_levels, NULL, 0,
     "Least level logged: debug, info, warn or error."},
    {"kafka.brokers", K_STR, OFF(brokers), 0, 0, 0, "\"127.0.0.1:9092\"", NULL, NULL, 0,
     "Bootstrap servers; the daemons' --brokers option overrides it."},
    {"kafka.topic", K_STR, OFF(topic), 0, 0, 0, "\"bulkwrite.batches\"", NULL, NULL, 0,
     "Topic of shard batches: exactly one partition per logical shard."},
    {"kafka.consumer_group", K_STR, OFF(consumer_group), 0, 0, 0, "\"bulkwrite-consumers\"", NULL,
     NULL, 0, "Consumer group the consumers share partitions in."},
    {"kafka.dead_letter_topic", K_STR, OFF(dead_letter_topic), 0, 0, 0, "\"bulkwrite.dead_letters\"",
     NULL, NULL, 0,
     "Topic the consumer writes each op a shard refused to (JSON, keyed job_id/part/op_index), "
     "before the batch commits; created with one partition if missing."},
    {"kafka.jobs_topic", K_STR, OFF(jobs_topic), 0, 0, 0, "\"bulkwrite.jobs\"", NULL, NULL, 0,
     "Compacted topic of job records (what the proxy accepted per shard, key = job id), "
     "read by every proxy to answer GET /v1/jobs/{id}."},
    {"kafka.jobs_retention_ms", K_INT, OFF(jobs_retention_ms), 0, 60000, 2147483647, "604800000", NULL,
     NULL, 0,
     "retention.ms of a jobs topic bulkwrite creates (compact,delete): how long GET /v1/jobs/{id} "
     "can find a job after it was submitted (default 7 days)."},
    {"kafka.control_topic", K_STR, OFF(control_topic), 0, 0, 0, "\"bulkwrite.control\"", NULL, NULL,
     0, "Compacted topic of per-shard operator settings (rate, pause; key = shard/N), read by "
        "every consumer; it survives restarts."},
    {"kafka.status_topic", K_STR, OFF(status_topic), 0, 0, 0, "\"bulkwrite.status\"", NULL, NULL, 0,
     "Compacted topic where consumers publish each shard's lag, rate and recent errors (key = "
     "shard/N), read by the proxy for GET /v1/shards."},
    {"kafka.create_topic", K_BOOL, OFF(create_topic), 0, 0, 0, "true", NULL, NULL, 0,
     "Create the topic at startup when it is missing."},
    {"kafka.allow_retention", K_BOOL, OFF(allow_retention), 0, 0, 0, "false", NULL, NULL, 0,
     "Start even if the batches topic has a retention.ms or retention.bytes that could delete "
     "messages before they are applied (logged as a warning with the bound it implies). When "
     "false such a topic stops startup. Topics bulkwrite creates have no time or size "
     "retention: the consumer deletes what every shard has applied (DeleteRecords)."},
    {"kafka.replication_factor", K_INT, OFF(replication_factor), 0, 1, 16, "1", NULL, NULL, 0,
     "Replication factor of a topic bulkwrite creates."},
    {"kafka.message_max_bytes", K_INT, OFF(message_max_bytes), 0, 1024, 100000000, "1000000", NULL,
     NULL, 0, "Largest Kafka message the batcher writes; bigger batches are split."},
    {"kafka.properties", K_STRLIST, OFF(properties), OFF(property_cnt), 0, 1000, "[]", NULL, NULL,
     0, "librdkafka properties for producer and consumer, as \"name=value\" strings. A property whose "
        "name contains password, secret, key, token or sasl.jaas is a secret: its value may be "
        "\"file:PATH\" or \"env:NAME\", and dumps show it redacted.", SECRET_PROPS},
    {"kafka.producer_properties", K_STRLIST, OFF(producer_properties),
     OFF(producer_property_cnt), 0, 1000, "[]", NULL, NULL, 0,
     "librdkafka properties for the proxy's producer only (secrets as in kafka.properties).", SECRET_PROPS},
    {"kafka.consumer_properties", K_STRLIST, OFF(consumer_properties),
     OFF(consumer_property_cnt), 0, 1000, "[]", NULL, NULL, 0,
     "librdkafka properties for the consumer only (secrets as in kafka.properties).", SECRET_PROPS},
    {"shards.count", K_INT, OFF(shard_count), 0, 1, 65536, NULL, NULL, NULL, 0,
     "Number of logical shards, and of Kafka partitions."},
    {"shards.database_prefix", K_STR, OFF(database_prefix), 0, 0, 0, "\"db\"", NULL, NULL, 0,
     "Logical shard N lives in database <prefix><N as 5 digits>, e.g. db00042."},
    {"shards.default_rate", K_DBL, OFF(default_rate), 0, 0, BW_RATE_MAX, "100.0", NULL, NULL, 0,
     "Statements per second each shard may run (every SQL statement of a batch counts, each "
     "carrying up to its object type's batch_size rows); " RATE_BOUNDS "."},
    {"shards.default_row_rate", K_DBL, OFF(default_row_rate), 0, 0, BW_ROW_RATE_MAX, "0.0", NULL, NULL, 0,
     "Rows per second each shard may take, over all its statements; " ROW_RATE_BOUNDS ". With both "
     "budgets set, whichever binds first holds the shard back (docs/operations.md has the measured "
     "cost of a statement and of a row)."},
    {"shards.rate_overrides", K_LIST, OFF(rate_overrides), OFF(rate_override_cnt), 0, 65536, "()",
     NULL, rate_override_keys, sizeof(bw_rate_override_t),
     "Per-shard budgets that differ from the defaults (a shard of hot users gets less)."},
    {"shards.servers", K_LIST, OFF(servers), OFF(server_cnt), 1, 65536, NULL, NULL, server_keys,
     sizeof(bw_server_t),
     "MySQL servers, each holding a contiguous range of logical shards; together they must "
     "hold every shard exactly once."},
    {"mysql.query_timeout_ms", K_INT, OFF(query_timeout_ms), 0, 1, 3600000, "5000", NULL, NULL, 0,
     "Longest a batch statement may run (max_statement_time and client read timeout)."},
    {"mysql.connect_timeout_ms", K_INT, OFF(connect_timeout_ms), 0, 1, 600000, "2000", NULL, NULL,
     0, "Longest a connection attempt may take."},
    {"mysql.user_host", K_STR, OFF(mysql_user_host), 0, 0, 0, "\"%\"", NULL, NULL, 0,
     "Host part of the accounts `bwctl schema --create-users` makes for each server's user and "
     "proxy_user ('NAME'@'HOST'): where the consumers and proxies connect from, e.g. \"10.1.%\"."},
    {"proxy.listen_address", K_STR, OFF(proxy_listen_address), 0, 0, 0, "\"127.0.0.1\"", NULL,
     NULL, 0, "Address the proxy's HTTP server binds."},
    {"proxy.port", K_INT, OFF(proxy_port), 0, 0, 65535, "8080", NULL, NULL, 0,
     "TCP port of the proxy's HTTP server (0 = any free port, printed at startup)."},
    {"proxy.max_connections", K_INT, OFF(proxy_max_connections), 0, 1, 65536, "128", NULL, NULL, 0,
     "Most HTTP connections served at once; each has its own thread, which waits for its "
     "request's Kafka acknowledgements."},
    {"proxy.max_connections_per_ip", K_INT, OFF(proxy_max_connections_per_ip), 0, 0, 65536, "32", NULL,
     NULL, 0,
     "Most HTTP connections from one client address at once (0 = only proxy.max_connections "
     "bounds them): idle or slow sockets from one address (slowloris) cannot take every "
     "connection."},
    {"proxy.connection_timeout_s", K_INT, OFF(proxy_connection_timeout_s), 0, 1, 3600, "30", NULL, NULL,
     0, "A connection idle this long (no byte received or sent) is closed."},
    {"proxy.producers", K_INT, OFF(proxy_producers), 0, 1, 64, "8", NULL, NULL, 0,
     "Idempotent Kafka producers (each its own broker connection) the proxy spreads the "
     "batch partitions over: partition modulo this, so a partition always uses the same one "
     "and keeps its order. librdkafka sends one partition per produce request and the broker "
     "serves a connection's requests one at a time, so a request touching 128 shards waits "
     "for 128 of them in turn on one connection."},
    {"proxy.jobs_index_max_bytes", K_INT, OFF(proxy_jobs_index_max_bytes), 0, 4096, 1073741824, "67108864", NULL,
     NULL, 0,
     "Memory for the index of job records that answers GET /v1/jobs/{id} (bytes, records and their entries; "
     "about 200 bytes per job touching a few shards). Past it the least recently used records are dropped; "
     "a dropped one is read back from kafka.jobs_topic when asked for (slow: the whole topic, one at a time). "
     "A fixed 8 MiB filter of every job id read answers ids never submitted at once."},
    {"proxy.max_body_bytes", K_INT, OFF(max_body_bytes), 0, 1024, 1073741824, "16777216", NULL,
     NULL, 0, "Largest request body; a bigger one gets 413."},
    {"proxy.max_ops", K_INT, OFF(max_ops), 0, 1, 10000000, "100000", NULL, NULL, 0,
     "Most ops in one request."},
    {"proxy.produce_timeout_ms", K_INT, OFF(produce_timeout_ms), 0, 100, 3600000, "30000", NULL,
     NULL, 0,
     "How long Kafka may take to acknowledge a request's batches (message.timeout.ms); "
     "ops not acknowledged by then are reported as not accepted."},
    {"proxy.backlog_max_messages", K_INT, OFF(backlog_max_messages), 0, 1, 2147483647, "1000000",
     NULL, NULL, 0,
     "Per shard: most messages Kafka may hold that the shard has not applied. Ops that would "
     "pass it get 429 with Retry-After (the rest of the request is accepted). On the embedded "
     "Kafka it is capped at 50000, below the mock cluster's per-partition limit."},
    {"proxy.backlog_max_bytes", K_INT, OFF(backlog_max_bytes), 0, 65536, 2147483647, "268435456",
     NULL, NULL, 0,
     "Per shard: most bytes of unapplied messages (uncompressed payload, key and headers). On the "
     "embedded Kafka it is capped at 4 MiB, below the mock cluster's 5 MiB per partition."},
    {"proxy.backlog_wait_ms", K_INT, OFF(backlog_wait_ms), 0, 0, 600000, "1000", NULL, NULL, 0,
     "How long one request may wait in the proxy for room in a full shard backlog (the "
     "consumers report progress every consumer.progress_interval_ms) before its ops for that "
     "shard get 429: a draining shard is fed without the client's round trip."},
    {"proxy.backlog_retry_after_s", K_INT, OFF(backlog_retry_after_s), 0, 1, 3600, "1", NULL, NULL,
     0, "Retry-After (seconds) of a 429 for a shard whose backlog is full."},
    {"proxy.auth", K_GROUP, 0, 0, 0, 0, "", NULL, auth_keys, 0,
     "Who may call the proxy's HTTP API, and what they may do (docs/security.md)."},
    {"proxy.tls", K_GROUP, 0, 0, 0, 0, "", NULL, tls_keys, 0, "HTTPS on both proxy listeners (docs/security.md)."},
    {"proxy.admin_listen_address", K_STR, OFF(proxy_admin_listen_address), 0, 0, 0, "\"127.0.0.1\"", NULL, NULL, 0,
     "Address of the proxy's admin listener (with proxy.admin_port)."},
    {"proxy.admin_port", K_INT, OFF(proxy_admin_port), 0, 0, 65535, "0", NULL, NULL, 0,
     "Port of the admin listener: shard control (POST /v1/shards/{n}/rate, /pause, /resume) is "
     "served there only, with GET /v1/shards, /healthz and /metrics; the data port then "
     "refuses shard control with 404. Same TLS and connection bounds as proxy.port (each "
     "listener has its own). 0 = no admin listener: the admin API shares proxy.port."},
    {"consumer.pull_count", K_INT, OFF(pull_count), 0, 1, 100000, "1000", NULL, NULL, 0,
     "Messages a consumer buffers per partition (pulled at once). Small batches need many: at "
     "100, a shard of 2-row batches applied about 950 statements/s, waiting for refills; at 1000, "
     "5,600 (docs/performance.md). Memory is bounded by consumer.buffer_max_bytes either way."},
    {"consumer.buffer_max_bytes", K_INT, OFF(buffer_max_bytes), 0, 1048576, 2147483647, "268435456",
     NULL, NULL, 0,
     "Message bytes a consumer buffers over all its partitions, shared evenly between them (each "
     "partition always buffers at least one message): with consumer.pull_count, bounds the "
     "consumer's memory whatever the partition count (see docs/operations.md for RSS measured per "
     "partition)."},
    {"consumer.commit_interval_ms", K_INT, OFF(commit_interval_ms), 0, 10, 60000, "1000", NULL, NULL,
     0,
     "How often a consumer commits applied offsets to Kafka, in one request for every partition "
     "that moved. The shards' ledgers hold the real offsets; this only saves re-reading."},
    {"consumer.stall_alert_ms", K_INT, OFF(stall_alert_ms), 0, 0, 86400000, "300000", NULL, NULL, 0,
     "A shard with unapplied messages and no batch applied for this long raises "
     "BulkwriteShardNoProgress, whatever the cause (an operator's pause excepted); stretched to "
     "three of the shard's batch intervals when its rate is slower. 0 = never."},
    {"consumer.workers", K_INT, OFF(workers), 0, 1, 1024, "4", NULL, NULL, 0,
     "Worker threads applying batches; a slow shard holds one worker, not the others."},
    {"consumer.listen_address", K_STR, OFF(consumer_listen_address), 0, 0, 0, "\"127.0.0.1\"",
     NULL, NULL, 0, "Address of the consumer's /metrics, /healthz and /readyz."},
    {"consumer.port", K_INT, OFF(consumer_port), 0, 0, 65535, "18081", NULL, NULL, 0,
     "Port of the consumer's HTTP endpoints (0 = any free port, logged at startup)."},
    {"consumer.status_interval_ms", K_INT, OFF(status_interval_ms), 0, 100, 3600000, "2000", NULL,
     NULL, 0, "How often a consumer publishes the status of its shards to kafka.status_topic."},
    {"consumer.progress_interval_ms", K_INT, OFF(progress_interval_ms), 0, 50, 3600000, "250",
     NULL, NULL, 0,
     "How often a consumer publishes the status of shards whose applied offset moved: the "
     "proxies' backlog admission sees room this soon after a batch is applied."},
    {"consumer.delete_applied_interval_ms", K_INT, OFF(delete_applied_interval_ms), 0, 0, 86400000,
     "10000", NULL, NULL, 0,
     "How often a consumer deletes from Kafka (DeleteRecords) what its shards have applied and "
     "stored in their ledgers; 0 = never. Skipped on the embedded Kafka, which has no such call."},
    {"consumer.max_batch_bytes", K_INT, OFF(max_batch_bytes), 0, 1024, 1073741824, "4194304", NULL,
     NULL, 0,
     "Most Kafka payload bytes a consumer hands to one apply (one transaction), besides the "
     "op's batch_size rows. Statements are sized separately, by consumer.statement_packet_pct."},
    {"consumer.transaction_max_statements", K_INT, OFF(transaction_max_statements), 0, 1, 10000, "16",
     NULL, NULL, 0,
     "Most statements one transaction runs when a shard has a backlog: several batches then share "
     "the ledger's bookkeeping and one commit. 1 = one statement per transaction. A rate-limited "
     "shard's transaction holds at most a tenth of a second of its rate."},
    {"consumer.statement_packet_pct", K_INT, OFF(statement_packet_pct), 0, 10, 90, "75", NULL, NULL,
     0,
     "Multi-row statements stay under this share (percent) of each server's max_allowed_packet, "
     "read when a connection is made; a batch becomes as many statements as that takes, in one "
     "transaction. A row too big for this share is sent alone; a row whose statement is over "
     "max_allowed_packet itself fails alone as a data error (1153) and is dead-lettered."},
    {"consumer.array_binding", K_BOOL, OFF(array_binding), 0, 0, 0, "true", NULL, NULL, 0,
     "Send CREATE and UPSERT statements as one prepared INSERT executed over arrays of values "
     "(MariaDB's bulk execution: parsed once per connection, values binary and unescaped), "
     "where the server supports it; false, or a MySQL server: text multi-row statements. "
     "UPDATE and DELETE are always text. The rows, their bounds and the error handling are "
     "the same either way."},
    {"consumer.connection_check_idle_ms", K_INT, OFF(connection_check_idle_ms), 0, 0, 86400000,
     "5000", NULL, NULL, 0,
     "A pooled MariaDB connection idle longer than this is checked (ping) before its next "
     "batch; one the server or a load balancer closed is replaced by a fresh connection without "
     "counting an error. 0 = before every batch."},
    {"consumer.connection_idle_close_ms", K_INT, OFF(connection_idle_close_ms), 0, 1000, 86400000,
     "60000", NULL, NULL, 0,
     "A pooled connection idle longer than this is closed, so idle consumers (consumers x "
     "workers x servers) do not hold server threads; keep it under the server's wait_timeout "
     "and any load balancer's idle timeout."},
    {"consumer.backlog_age_warn_pct", K_INT, OFF(backlog_age_warn_pct), 0, 1, 99, "50", NULL, NULL,
     0,
     "Where the batches topic has a retention.ms (kafka.allow_retention), a shard whose oldest "
     "unapplied message is older than this share of it raises the BulkwriteShardBacklogAging "
     "warning."},
    {"consumer.retry_initial_ms", K_INT, OFF(retry_initial_ms), 0, 1, 3600000, "100", NULL, NULL, 0,
     "First wait before retrying a batch that failed for a retryable reason (deadlock, lost "
     "connection, timeout, ...); each further failure doubles it, plus up to 25% jitter."},
    {"consumer.retry_max_ms", K_INT, OFF(retry_max_ms), 0, 1, 3600000, "10000", NULL, NULL, 0,
     "Longest wait between retries of a batch."},
    {"consumer.pause_after_timeouts", K_INT, OFF(pause_after_timeouts), 0, 1, 1000, "2", NULL,
     NULL, 0,
     "Consecutive timeouts (or lost connections) on a shard that raise an alert and stop "
     "pulling the shard for consumer.pause_ms."},
    {"consumer.pause_ms", K_INT, OFF(pause_ms), 0, 1, 86400000, "30000", NULL, NULL, 0,
     "How long an unhealthy shard is left alone before a probe batch (one message) is tried; "
     "success resumes it and resolves the alert, another timeout pauses it again."},
    {"throttle", K_GROUP, 0, 0, 0, 0, "", NULL, throttle_keys, 0,
     "The adaptive throttle: per-shard rates that follow the database's health "
     "(docs/operations.md, \"The adaptive throttle\")."},
    {"alerts.webhook_url", K_STR, OFF(alert_webhook_url), 0, 0, 0, "\"\"", NULL, NULL, 0,
     "Alertmanager v2 alerts endpoint (http://host:9093/api/v2/alerts) the consumer posts "
     "shard alerts to; empty = alerts go to the log and the metrics only."},
    {"alerts.resend_ms", K_INT, OFF(alert_resend_ms), 0, 1000, 86400000, "60000", NULL, NULL, 0,
     "How often a firing alert is posted again (Alertmanager resolves alerts it stops hearing "
     "about after its resolve_timeout)."},
    {"alerts.timeout_ms", K_INT, OFF(alert_timeout_ms), 0, 100, 600000, "5000", NULL, NULL, 0,
     "Longest one webhook post may take; a failed post is retried at the next resend."},
    {"alerts.labels", K_STRLIST, OFF(alert_labels), OFF(alert_label_cnt), 0, 100, "[]", NULL, NULL,
     0, "Extra labels on every alert, as \"name=value\" strings (e.g. \"team=storage\")."},
    {"object_types", K_LIST, OFF(object_types), OFF(object_type_cnt), 1, 1024, NULL, NULL,
     object_type_keys, sizeof(bw_object_type_t), "Object types clients may write."},
    {"lanes", K_LIST, OFF(lanes), OFF(lane_cnt), 0, BW_LANES_MAX, "()", NULL, lane_keys, sizeof(bw_lane_t),
     "Priority lanes besides \"default\" (which every request without a lane takes, weight 1 unless "
     "listed): a request names its lane, and an urgent cleanup does not wait behind a bulk "
     "ingestion's backlog on the same shard (docs/throttling.md). Each lane is a topic with one "
     "partition per shard; at most 8 lanes with the default."},
    END};

const char *bw_op_name(int op) {
    static const char *const names[] = {"?", "create", "update", "upsert", "delete"};
    return op > 0 && op < BW_OP_MAX ? names[op] : "?";
}

const char *bw_col_type_name(bw_col_type_t t) { return col_types[t]; }

/* ---- parsing ------------------------------------------------------------------ */

typedef struct {
    const char *file;
    char *errstr;
    size_t errstr_size;
} parse_ctx_t;

static int setting_line(const config_setting_t *s) {
    return s ? (int)config_setting_source_line(s) : 0;
}

static bw_err_t fail_at(parse_ctx_t *ctx, const config_setting_t *s, const char *fmt,
                        const char *a, const char *b) {
    char what[512];
    snprintf(what, sizeof(what), fmt, a, b);
    int line = setting_line(s);
    if (line <= 0) /* the root has no line */
        return bw_seterr(ctx->errstr, ctx->errstr_size, BW_ERR_INVALID, "%s: %s", ctx->file, what);
    return bw_seterr(ctx->errstr, ctx->errstr_size, BW_ERR_INVALID, "%s:%d: %s", ctx->file, line,
                     what);
}

static bw_err_t parse_table(parse_ctx_t *ctx, const config_setting_t *group, const key_t_ *keys,
                            void *base, const char *prefix);

/* Parses one scalar `text` (a default) through libconfig so defaults and file values
 * take the same path. */
static bw_err_t parse_default(parse_ctx_t *ctx, const key_t_ *k, void *base, const char *where);

static bw_err_t store_scalar(parse_ctx_t *ctx, const config_setting_t *s, const key_t_ *k,
                             void *base, const char *where) {
    char *p = (char *)base + k->off;
    char num[64];
    switch (k->kind) {
    case K_STR:
        if (config_setting_type(s) != CONFIG_TYPE_STRING)
            return fail_at(ctx, s, "%s: expected a string%s", where, "");
        *(char **)p = strdup(config_setting_get_string(s));
        return BW_OK;
    case K_INT: {
        int t = config_setting_type(s);
        if (t != CONFIG_TYPE_INT && t != CONFIG_TYPE_INT64)
            return fail_at(ctx, s, "%s: expected an integer%s", where, "");
        long long v = config_setting_get_int64(s);
        if ((double)v < k->min || (double)v > k->max) {
            snprintf(num, sizeof(num), "%lld (allowed %.0f..%.0f)", v, k->min, k->max);
            return fail_at(ctx, s, "%s: out of range: %s", where, num);
        }
        *(int *)p = (int)v;
        return BW_OK;
    }
    case K_DBL: {
        int t = config_setting_type(s);
        double v;
        if (t == CONFIG_TYPE_FLOAT) v = config_setting_get_float(s);
        else if (t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64) v = (double)config_setting_get_int64(s);
        else return fail_at(ctx, s, "%s: expected a number%s", where, "");
        if (!isfinite(v) || v < k->min || v > k->max) {
            snprintf(num, sizeof(num), "%g (allowed %g..%g)", v, k->min, k->max);
            return fail_at(ctx, s, "%s: out of range: %s", where, num);
        }
        *(double *)p = v;
        return BW_OK;
    }
    case K_BOOL:
        if (config_setting_type(s) != CONFIG_TYPE_BOOL)
            return fail_at(ctx, s, "%s: expected true or false%s", where, "");
        *(int *)p = config_setting_get_bool(s);
        return BW_OK;
    case K_ENUM: {
        if (config_setting_type(s) != CONFIG_TYPE_STRING)
            return fail_at(ctx, s, "%s: expected a string%s", where, "");
        const char *v = config_setting_get_string(s);
        for (int i = 0; k->enums[i]; i++)
            if (strcmp(v, k->enums[i]) == 0) {
                *(int *)p = i;
                return BW_OK;
            }
        return fail_at(ctx, s, "%s: unknown value \"%s\"", where, v);
    }
    case K_STRLIST: {
        if (!config_setting_is_array(s) && !config_setting_is_list(s))
            return fail_at(ctx, s, "%s: expected a list of strings%s", where, "");
        int n = config_setting_length(s);
        char **arr = calloc((size_t)n + 1, sizeof(*arr));
        for (int i = 0; i < n; i++) {
            const char *v = config_setting_get_string_elem(s, i);
            if (!v) {
                for (int j = 0; j < i; j++) free(arr[j]);
                free(arr);
                return fail_at(ctx, config_setting_get_elem(s, (unsigned)i),
                               "%s: element is not a string%s", where, "");
            }
            arr[i] = strdup(v);
        }
        *(char ***)p = arr;
        *(int *)((char *)base + k->cnt_off) = n;
        return BW_OK;
    }
    case K_LIST: {
        if (!config_setting_is_list(s))
            return fail_at(ctx, s, "%s: expected a list ( {...}, ... )%s", where, "");
        int n = config_setting_length(s);
        if (n < k->min || n > k->max) {
            snprintf(num, sizeof(num), "%d entries (allowed %.0f..%.0f)", n, k->min, k->max);
            return fail_at(ctx, s, "%s: %s", where, num);
        }
        char *arr = calloc((size_t)n + 1, k->elem_size);
        *(void **)p = arr;
        *(int *)((char *)base + k->cnt_off) = n;
        for (int i = 0; i < n; i++) {
            const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
            char sub[256];
            snprintf(sub, sizeof(sub), "%.200s[%d]", where, i);
            if (!config_setting_is_group(e))
                return fail_at(ctx, e, "%s: expected a group { ... }%s", sub, "");
            bw_err_t err = parse_table(ctx, e, k->sub, arr + (size_t)i * k->elem_size, sub);
            if (err) return err;
        }
        return BW_OK;
    }
    case K_GROUP:
        if (!config_setting_is_group(s))
            return fail_at(ctx, s, "%s: expected a group { ... }%s", where, "");
        return parse_table(ctx, s, k->sub, base, where);
    }
    return BW_ERR_INVALID;
}

static bw_err_t parse_default(parse_ctx_t *ctx, const key_t_ *k, void *base, const char *where) {
    if (k->kind == K_GROUP) return parse_table(ctx, NULL, k->sub, base, where);
    if (!*k->def) return BW_OK; /* optional without a default: validate() fills it in */
    config_t tmp;
    config_init(&tmp);
    char text[512];
    snprintf(text, sizeof(text), "v = %s;", k->def);
    bw_err_t err = BW_ERR_INVALID;
    if (config_read_string(&tmp, text) == CONFIG_TRUE)
        err = store_scalar(ctx, config_lookup(&tmp, "v"), k, base, where);
    config_destroy(&tmp);
    return err;
}

/* Looks `name` up under `group`, following dots ("kafka.brokers"). */
static const config_setting_t *lookup(const config_setting_t *group, const char *name) {
    return group ? config_setting_lookup((config_setting_t *)group, name) : NULL;
}

/* First dotted segment of every known key must match each member of `group`. */
static bw_err_t check_unknown(parse_ctx_t *ctx, const config_setting_t *group, const key_t_ *keys,
                              const char *prefix) {
    if (!group) return BW_OK;
    int n = config_setting_length(group);
    for (int i = 0; i < n; i++) {
        const config_setting_t *m = config_setting_get_elem(group, (unsigned)i);
        const char *mname = config_setting_name(m);
        int known = 0, exact = 0;
        for (const key_t_ *k = keys; k->name; k++) {
            size_t len = strlen(mname);
            if (strncmp(k->name, mname, len) != 0) continue;
            if (k->name[len] == '\0') exact = 1;
            if (k->name[len] == '\0' || k->name[len] == '.') known = 1;
        }
        if (!known) {
            char where[256];
            snprintf(where, sizeof(where), "%.100s%s%.150s", prefix, *prefix ? "." : "", mname);
            return fail_at(ctx, m, "unknown key \"%s\"%s", where, "");
        }
        if (!exact && !config_setting_is_group(m)) { /* a section such as "kafka" */
            char where[256];
            snprintf(where, sizeof(where), "%.100s%s%.150s", prefix, *prefix ? "." : "", mname);
            return fail_at(ctx, m, "%s: expected a group { ... }%s", where, "");
        }
        /* members of a dotted section ("kafka" in "kafka.brokers") are checked too */
        if (config_setting_is_group(m)) {
            for (const key_t_ *k = keys; k->name; k++) {
                size_t len = strlen(mname);
                if (strncmp(k->name, mname, len) == 0 && k->name[len] == '.') {
                    int found_all = 1;
                    int mn = config_setting_length(m);
                    for (int j = 0; j < mn && found_all; j++) {
                        const config_setting_t *c = config_setting_get_elem(m, (unsigned)j);
                        char full[256];
                        snprintf(full, sizeof(full), "%s.%s", mname, config_setting_name(c));
                        int ok = 0;
                        for (const key_t_ *k2 = keys; k2->name && !ok; k2++) ok = strcmp(k2->name, full) == 0;
                        if (!ok) {
                            char where[256];
                            snprintf(where, sizeof(where), "%.100s%s%.150s", prefix, *prefix ? "." : "", full);
                            return fail_at(ctx, c, "unknown key \"%s\"%s", where, "");
                        }
                    }
                    break;
                }
            }
        }
    }
    return BW_OK;
}

static bw_err_t parse_table(parse_ctx_t *ctx, const config_setting_t *group, const key_t_ *keys,
                            void *base, const char *prefix) {
    bw_err_t err = check_unknown(ctx, group, keys, prefix);
    if (err) return err;
    for (const key_t_ *k = keys; k->name; k++) {
        char where[256];
        snprintf(where, sizeof(where), "%.100s%s%.150s", prefix, *prefix ? "." : "", k->name);
        const config_setting_t *s = lookup(group, k->name);
        if (s) err = store_scalar(ctx, s, k, base, where);
        else if (k->def) err = parse_default(ctx, k, base, where);
        else {
            /* point at the section the key belongs in ("shards" for "shards.count") */
            const config_setting_t *at = group;
            const char *dot = strrchr(k->name, '.');
            if (dot) {
                char sec[128];
                snprintf(sec, sizeof(sec), "%.*s", (int)(dot - k->name), k->name);
                const config_setting_t *p = lookup(group, sec);
                if (p) at = p;
            }
            err = fail_at(ctx, at, "missing required key \"%s\"%s", where, "");
        }
        if (err) return err;
    }
    return BW_OK;
}

/* ---- cross-key validation ----------------------------------------------------- */

static int is_identifier(const char *s) {
    if (!*s || strlen(s) > 64) return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_'))
            return 0;
    return 1;
}

/* The member `name` of group `g`, for its line; `g` itself when absent. */
static const config_setting_t *member(const config_setting_t *g, const char *name) {
    const config_setting_t *m = g ? config_setting_get_member((config_setting_t *)g, name) : NULL;
    return m ? m : g;
}

static int is_lane_name(const char *s) {
    size_t n = strlen(s);
    if (n < 1 || n > 32) return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_' || *s == '-')) return 0;
    return 1;
}

/* Checks the lanes, puts "default" first (added with weight 1 when the file leaves it
 * out) and names each lane's topic. */
static bw_err_t validate_lanes(bw_config_t *c, const config_setting_t *root, parse_ctx_t *ctx) {
    const config_setting_t *ls = lookup(root, "lanes");
    int def = -1;
    for (int i = 0; i < c->lane_cnt; i++) {
        const config_setting_t *at = config_setting_get_elem(ls, (unsigned)i);
        if (!is_lane_name(c->lanes[i].name))
            return fail_at(ctx, at, "lanes: \"%s\" is not a lane name ([a-z0-9_-], 1 to 32 bytes)%s", c->lanes[i].name, "");
        for (int j = 0; j < i; j++)
            if (strcmp(c->lanes[i].name, c->lanes[j].name) == 0)
                return fail_at(ctx, at, "lanes: \"%s\" is listed twice%s", c->lanes[i].name, "");
        if (strcmp(c->lanes[i].name, "default") == 0) def = i;
    }
    if (def < 0) {
        if (c->lane_cnt >= BW_LANES_MAX)
            return fail_at(ctx, ls, "lanes: at most %s lanes besides \"default\"%s", "7", "");
        bw_lane_t *l = realloc(c->lanes, sizeof(*l) * ((size_t)c->lane_cnt + 2));
        if (!l) abort();
        memmove(l + 1, l, sizeof(*l) * (size_t)c->lane_cnt);
        memset(&l[0], 0, sizeof(l[0]));
        l[0].name = strdup("default");
        l[0].weight = 1;
        c->lanes = l;
        c->lane_cnt++;
    } else if (def > 0) {
        bw_lane_t d = c->lanes[def];
        memmove(c->lanes + 1, c->lanes, sizeof(*c->lanes) * (size_t)def);
        c->lanes[0] = d;
    }
    /* a shard's lanes must meet on one consumer: the range assignor (kafka.c) does that */
    for (int k = 0; k < 2 && c->lane_cnt > 1; k++) {
        char **props = k ? c->consumer_properties : c->properties;
        int cnt = k ? c->consumer_property_cnt : c->property_cnt;
        for (int i = 0; i < cnt; i++)
            if (strncmp(props[i], "partition.assignment.strategy=", 30) == 0 && strcmp(props[i] + 30, "range") != 0)
                return fail_at(ctx, lookup(root, k ? "kafka.consumer_properties" : "kafka.properties"),
                               "%s: with lanes the consumers need partition.assignment.strategy=range (it gives one "
                               "consumer every lane of a shard), not \"%s\"",
                               k ? "kafka.consumer_properties" : "kafka.properties", props[i] + 30);
    }
    for (int i = 0; i < c->lane_cnt; i++) {
        size_t n = strlen(c->topic) + strlen(c->lanes[i].name) + 2;
        c->lanes[i].topic = malloc(n);
        if (!c->lanes[i].topic) abort();
        if (i == 0) snprintf(c->lanes[i].topic, n, "%s", c->topic);
        else snprintf(c->lanes[i].topic, n, "%s.%s", c->topic, c->lanes[i].name);
    }
    return BW_OK;
}

static bw_err_t validate(bw_config_t *c, const config_t *cf, parse_ctx_t *ctx) {
    const config_setting_t *root = config_root_setting(cf);
    bw_err_t lanes_err = validate_lanes(c, root, ctx);
    if (lanes_err) return lanes_err;
    if (!is_identifier(c->database_prefix))
        return fail_at(ctx, lookup(root, "shards.database_prefix"),
                       "shards.database_prefix: \"%s\" is not an identifier [A-Za-z0-9_]%s",
                       c->database_prefix, "");
    if (!is_identifier(c->throttle_heartbeat_table))
        return fail_at(ctx, lookup(root, "throttle.heartbeat_table"),
                       "throttle.heartbeat_table: \"%s\" is not an identifier [A-Za-z0-9_]%s",
                       c->throttle_heartbeat_table, "");
    for (int i = 0; i < c->server_cnt; i++)
        for (int r = 0; r < c->servers[i].replica_cnt; r++) {
            const char *hp = c->servers[i].replicas[r], *colon = strrchr(hp, ':');
            char *end = NULL;
            long port = colon ? strtol(colon + 1, &end, 10) : 0;
            if (!colon || colon == hp || !end || *end || port < 1 || port > 65535)
                return fail_at(ctx, lookup(root, "shards.servers"),
                               "shards.servers[].replicas: \"%s\" of server %s is not \"host:port\"", hp,
                               c->servers[i].name);
        }
    c->shard_server = malloc(sizeof(int) * (size_t)c->shard_count);
    c->shard_rate = malloc(sizeof(double) * (size_t)c->shard_count);
    c->shard_row_rate = malloc(sizeof(double) * (size_t)c->shard_count);
    for (int s = 0; s < c->shard_count; s++) {
        c->shard_server[s] = -1;
        c->shard_rate[s] = c->default_rate;
        c->shard_row_rate[s] = c->default_row_rate;
    }
    char why[256];
    if (bw_ratelimit_check(c->default_rate, why, sizeof(why)))
        return fail_at(ctx, lookup(root, "shards.default_rate"), "shards.default_rate: %s%s", why, "");
    if (bw_ratelimit_check_rows(c->default_row_rate, why, sizeof(why)))
        return fail_at(ctx, lookup(root, "shards.default_row_rate"), "shards.default_row_rate: %s%s", why, "");
    const config_setting_t *servers = lookup(root, "shards.servers");
    for (int i = 0; i < c->server_cnt; i++) {
        const bw_server_t *sv = &c->servers[i];
        const config_setting_t *at = config_setting_get_elem(servers, (unsigned)i);
        if (sv->first_shard > sv->last_shard || sv->last_shard >= c->shard_count)
            return fail_at(ctx, member(at, sv->last_shard >= c->shard_count ? "last_shard" : "first_shard"),
                           "shards.servers \"%s\": shard range must lie within 0..shards.count-1 %s",
                           sv->name, "and first_shard <= last_shard");
        for (int s = sv->first_shard; s <= sv->last_shard; s++) {
            if (c->shard_server[s] >= 0) {
                char num[32];
                snprintf(num, sizeof(num), "%d", s);
                return fail_at(ctx, member(at, "first_shard"),
                               "shards.servers: shard %s is held by two servers (\"%s\")",
                               num, sv->name);
            }
            c->shard_server[s] = i;
        }
    }
    for (int s = 0; s < c->shard_count; s++)
        if (c->shard_server[s] < 0) {
            char num[32];
            snprintf(num, sizeof(num), "%d", s);
            return fail_at(ctx, servers, "shards.servers: no server holds shard %s%s", num, "");
        }
    const config_setting_t *ovs = lookup(root, "shards.rate_overrides");
    for (int i = 0; i < c->rate_override_cnt; i++) {
        bw_rate_override_t *o = &c->rate_overrides[i];
        const config_setting_t *at = config_setting_get_elem(ovs, (unsigned)i);
        if (o->shard >= c->shard_count)
            return fail_at(ctx, at, "shards.rate_overrides: shard beyond shards.count%s%s", "", "");
        /* a member left out is the default (and is dumped as it) */
        int has_rate = config_setting_get_member((config_setting_t *)at, "rate") != NULL;
        int has_row_rate = config_setting_get_member((config_setting_t *)at, "row_rate") != NULL;
        if (!has_rate && !has_row_rate) {
            char key[64];
            snprintf(key, sizeof(key), "shards.rate_overrides[%d]", i);
            return fail_at(ctx, at, "%s: set rate (statements per second), row_rate (rows per second) or %s",
                           key, "both");
        }
        if (!has_rate) o->rate = c->default_rate;
        if (!has_row_rate) o->row_rate = c->default_row_rate;
        if (bw_ratelimit_check(o->rate, why, sizeof(why)))
            return fail_at(ctx, member(at, "rate"), "shards.rate_overrides: %s%s", why, "");
        if (bw_ratelimit_check_rows(o->row_rate, why, sizeof(why)))
            return fail_at(ctx, member(at, "row_rate"), "shards.rate_overrides: %s%s", why, "");
        c->shard_rate[o->shard] = o->rate;
        c->shard_row_rate[o->shard] = o->row_rate;
    }
    const config_setting_t *ots = lookup(root, "object_types");
    for (int i = 0; i < c->object_type_cnt; i++) {
        const bw_object_type_t *ot = &c->object_types[i];
        const config_setting_t *at = config_setting_get_elem(ots, (unsigned)i);
        const char *idents[][2] = {{"name", ot->name}, {"table", ot->table}, {"id_column", ot->id_column}};
        for (size_t j = 0; j < 3; j++)
            if (!is_identifier(idents[j][1])) {
                char key[64];
                snprintf(key, sizeof(key), "object_types[%d].%s", i, idents[j][0]);
                return fail_at(ctx, member(at, idents[j][0]),
                               "%s: \"%s\" is not an identifier [A-Za-z0-9_]{1,64}", key, idents[j][1]);
            }
        for (int j = 0; j < i; j++) {
            if (strcmp(c->object_types[j].name, ot->name) == 0)
                return fail_at(ctx, member(at, "name"), "object type \"%s\": name used twice%s", ot->name, "");
            if (c->object_types[j].type_id == ot->type_id)
                return fail_at(ctx, member(at, "type_id"), "object type \"%s\": type_id used twice%s",
                               ot->name, "");
        }
        const config_setting_t *cols = member(at, "columns");
        for (int j = 0; j < ot->column_cnt; j++) {
            const char *cn = ot->columns[j].name;
            const config_setting_t *cat = member(config_setting_get_elem(cols, (unsigned)j), "name");
            if (!is_identifier(cn) || strcmp(cn, ot->id_column) == 0)
                return fail_at(ctx, cat, "object type \"%s\": bad column name \"%s\"", ot->name, cn);
            for (int k = 0; k < j; k++)
                if (strcmp(ot->columns[k].name, cn) == 0)
                    return fail_at(ctx, cat, "object type \"%s\": column \"%s\" listed twice",
                                   ot->name, cn);
        }
    }
    for (int i = 0; i < c->server_cnt; i++)
        for (int j = 0; j < i; j++)
            if (strcmp(c->servers[i].name, c->servers[j].name) == 0)
                return fail_at(ctx, member(config_setting_get_elem(servers, (unsigned)i), "name"),
                               "shards.servers: name \"%s\" used twice%s", c->servers[i].name, "");
    if (c->retry_max_ms < c->retry_initial_ms)
        return fail_at(ctx, lookup(root, "consumer.retry_max_ms"),
                       "consumer.retry_max_ms must be at least consumer.retry_initial_ms%s%s", "", "");
    if (c->alert_webhook_url[0] && strncmp(c->alert_webhook_url, "http://", 7) &&
        strncmp(c->alert_webhook_url, "https://", 8))
        return fail_at(ctx, lookup(root, "alerts.webhook_url"),
                       "alerts.webhook_url: \"%s\" is not an http:// or https:// URL%s", c->alert_webhook_url, "");
    for (int i = 0; i < c->alert_label_cnt; i++) {
        const char *l = c->alert_labels[i], *eq = strchr(l, '=');
        int ok = eq && eq > l && (isalpha((unsigned char)l[0]) || l[0] == '_');
        for (const char *p = l; ok && p < eq; p++) ok = isalnum((unsigned char)*p) || *p == '_';
        if (!ok)
            return fail_at(ctx, lookup(root, "alerts.labels"),
                           "alerts.labels: \"%s\" is not name=value with a label name [A-Za-z_][A-Za-z0-9_]*%s", l, "");
    }
    return BW_OK;
}

/* ---- secrets ------------------------------------------------------------------- */

int bw_config_secret_name(const char *name, size_t len) {
    static const char *const words[] = {"password", "secret", "key", "token", "sasl.jaas", NULL};
    for (const char *const *w = words; *w; w++) {
        size_t wl = strlen(*w);
        for (size_t i = 0; i + wl <= len; i++)
            if (strncasecmp(name + i, *w, wl) == 0) return 1;
    }
    return 0;
}

char *bw_config_secret_resolve(const char *key, const char *value, const char *conf_path, char *errstr,
                               size_t errstr_size) {
    if (strncmp(value, "env:", 4) == 0) {
        const char *v = getenv(value + 4);
        if (!v || !*v) {
            bw_seterr(errstr, errstr_size, BW_ERR_INVALID, "%s: the environment variable %s is %s", key, value + 4,
                      v ? "empty" : "not set");
            return NULL;
        }
        return strdup(v);
    }
    if (strncmp(value, "file:", 5) != 0) return strdup(value);
    const char *f = value + 5, *slash = conf_path ? strrchr(conf_path, '/') : NULL;
    char path[4096];
    if (f[0] == '/' || !slash) snprintf(path, sizeof(path), "%s", f);
    else snprintf(path, sizeof(path), "%.*s/%s", (int)(slash - conf_path), conf_path, f);
    FILE *in = fopen(path, "r");
    char *text = NULL;
    size_t cap = 0;
    ssize_t n = in ? getdelim(&text, &cap, '\0', in) : -1; /* the whole file */
    int e = errno;
    if (in) fclose(in);
    if (n > 0 && text[n - 1] == '\n') text[--n] = '\0';
    if (n > 0 && text[n - 1] == '\r') text[--n] = '\0';
    if (n <= 0) {
        if (!in) bw_seterr(errstr, errstr_size, BW_ERR_INVALID, "%s: cannot read %s: %s", key, path, strerror(e));
        else bw_seterr(errstr, errstr_size, BW_ERR_INVALID, "%s: %s is empty", key, path);
        free(text);
        return NULL;
    }
    return text;
}

/* Replaces every secret's "file:"/"env:" reference by its value (key tables' `secret`). */
static bw_err_t resolve_secrets(const bw_config_t *c, const key_t_ *keys, void *base, const char *prefix,
                                char *errstr, size_t errstr_size) {
    for (const key_t_ *k = keys; k->name; k++) {
        char where[256];
        snprintf(where, sizeof(where), "%.100s%s%.150s", prefix, *prefix ? "." : "", k->name);
        char *p = (char *)base + k->off;
        if (k->kind == K_STR && k->secret) {
            char *v = bw_config_secret_resolve(where, *(char **)p, c->path, errstr, errstr_size);
            if (!v) return BW_ERR_INVALID;
            free(*(char **)p);
            *(char **)p = v;
        } else if (k->kind == K_STRLIST && k->secret) {
            char **arr = *(char ***)p;
            for (int i = 0, n = *(int *)((char *)base + k->cnt_off); i < n; i++) {
                const char *eq = strchr(arr[i], '=');
                if (!eq || !bw_config_secret_name(arr[i], (size_t)(eq - arr[i]))) continue;
                char key[400];
                snprintf(key, sizeof(key), "%s: %.*s", where, (int)(eq - arr[i]), arr[i]);
                char *v = bw_config_secret_resolve(key, eq + 1, c->path, errstr, errstr_size);
                if (!v) return BW_ERR_INVALID;
                size_t len = (size_t)(eq - arr[i]) + 1 + strlen(v) + 1;
                char *prop = malloc(len);
                snprintf(prop, len, "%.*s=%s", (int)(eq - arr[i]), arr[i], v);
                free(v);
                free(arr[i]);
                arr[i] = prop;
            }
        } else if (k->kind == K_LIST) {
            char *arr = *(char **)p;
            for (int i = 0, n = *(int *)((char *)base + k->cnt_off); i < n; i++) {
                char sub[256];
                snprintf(sub, sizeof(sub), "%.200s[%d]", where, i);
                if (resolve_secrets(c, k->sub, arr + (size_t)i * k->elem_size, sub, errstr, errstr_size))
                    return BW_ERR_INVALID;
            }
        } else if (k->kind == K_GROUP && resolve_secrets(c, k->sub, base, where, errstr, errstr_size)) {
            return BW_ERR_INVALID;
        }
    }
    return BW_OK;
}

bw_config_t *bw_config_load(const char *path, char *errstr, size_t errstr_size) {
    config_t cf;
    config_init(&cf);
    bw_config_t *c = calloc(1, sizeof(*c));
    parse_ctx_t ctx = {path, errstr, errstr_size};
    if (config_read_file(&cf, path) != CONFIG_TRUE) {
        if (config_error_type(&cf) == CONFIG_ERR_FILE_IO)
            bw_seterr(errstr, errstr_size, BW_ERR_IO, "%s: cannot read file", path);
        else
            bw_seterr(errstr, errstr_size, BW_ERR_INVALID, "%s:%d: %s", path,
                      config_error_line(&cf), config_error_text(&cf));
        goto fail;
    }
    c->path = strdup(path);
    if (parse_table(&ctx, config_root_setting(&cf), top_keys, c, "") != BW_OK) goto fail;
    if (validate(c, &cf, &ctx) != BW_OK) goto fail;
    if (resolve_secrets(c, top_keys, c, "", errstr, errstr_size) != BW_OK) goto fail;
    config_destroy(&cf);
    return c;
fail:
    config_destroy(&cf);
    bw_config_destroy(c);
    return NULL;
}

/* ---- teardown, lookups ---------------------------------------------------------- */

static void free_table(const key_t_ *keys, void *base) {
    for (const key_t_ *k = keys; k->name; k++) {
        char *p = (char *)base + k->off;
        switch (k->kind) {
        case K_STR: free(*(char **)p); break;
        case K_STRLIST: {
            char **arr = *(char ***)p;
            int n = *(int *)((char *)base + k->cnt_off);
            for (int i = 0; arr && i < n; i++) free(arr[i]);
            free(arr);
            break;
        }
        case K_LIST: {
            char *arr = *(char **)p;
            int n = *(int *)((char *)base + k->cnt_off);
            for (int i = 0; arr && i < n; i++) free_table(k->sub, arr + (size_t)i * k->elem_size);
            free(arr);
            break;
        }
        case K_GROUP: free_table(k->sub, base); break;
        default: break;
        }
    }
}

void bw_config_destroy(bw_config_t *c) {
    if (!c) return;
    for (int i = 0; i < c->lane_cnt; i++) free(c->lanes[i].topic);
    free_table(top_keys, c);
    free(c->path);
    free(c->shard_rate);
    free(c->shard_row_rate);
    free(c->shard_server);
    free(c);
}

const bw_object_type_t *bw_config_object_type(const bw_config_t *c, const char *name) {
    for (int i = 0; i < c->object_type_cnt; i++)
        if (strcmp(c->object_types[i].name, name) == 0) return &c->object_types[i];
    return NULL;
}

int bw_config_column(const bw_object_type_t *ot, const char *name) { return bw_config_column_from(ot, name, 0); }

int bw_config_column_from(const bw_object_type_t *ot, const char *name, int hint) {
    int n = ot->column_cnt;
    if (hint < 0 || hint >= n) hint = 0;
    for (int k = 0; k < n; k++) { /* from the hint on, then the columns before it */
        int i = hint + k < n ? hint + k : hint + k - n;
        if (strcmp(ot->columns[i].name, name) == 0) return i;
    }
    return -1;
}

int bw_config_lane(const bw_config_t *c, const char *name) {
    if (!name || !name[0]) return 0;
    for (int i = 0; i < c->lane_cnt; i++)
        if (strcmp(c->lanes[i].name, name) == 0) return i;
    return -1;
}

int bw_config_topic_lane(const bw_config_t *c, const char *topic) {
    for (int i = 0; i < c->lane_cnt; i++)
        if (strcmp(c->lanes[i].topic, topic) == 0) return i;
    return -1;
}

void bw_config_shard_db(const bw_config_t *c, int shard, char *buf, size_t size) {
    snprintf(buf, size, "%s%05d", c->database_prefix, shard);
}

char *bw_config_file(const bw_config_t *c, const char *file) {
    if (!file || !*file) return NULL;
    const char *slash = c->path ? strrchr(c->path, '/') : NULL;
    if (file[0] == '/' || !slash) return strdup(file);
    size_t n = (size_t)(slash - c->path) + 1 + strlen(file) + 1;
    char *p = malloc(n);
    snprintf(p, n, "%.*s/%s", (int)(slash - c->path), c->path, file);
    return p;
}

/* ---- dump and docs -------------------------------------------------------------- */

static void indent(FILE *out, int depth) {
    for (int i = 0; i < depth; i++) fputs("  ", out);
}

static void dump_string(FILE *out, const char *s) {
    fputc('"', out);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', out);
        fputc(*s, out);
    }
    fputc('"', out);
}

static void dump_table(FILE *out, const key_t_ *keys, const void *base, int depth, int redact);

/* The shortest %g form that reads back as the same double, always with a '.' or an
 * exponent so libconfig reads a float. */
static void dump_double(FILE *out, double v) {
    char text[64];
    for (int prec = 6; prec <= 17; prec++) {
        snprintf(text, sizeof(text), "%.*g", prec, v);
        if (strtod(text, NULL) == v) break;
    }
    if (!strpbrk(text, ".eEn")) strcat(text, ".0");
    fputs(text, out);
}

/* A secret as a dump shows it: "(redacted)", or "" when it is empty. */
static void dump_secret(FILE *out, const char *prefix, int prefix_len, const char *value) {
    fprintf(out, "\"%.*s%s\"", prefix_len, prefix, *value ? "(redacted)" : "");
}

static void dump_value(FILE *out, const key_t_ *k, const void *base, int depth, int redact) {
    const char *p = (const char *)base + k->off;
    switch (k->kind) {
    case K_STR:
        if (redact && k->secret) dump_secret(out, "", 0, *(char *const *)p);
        else dump_string(out, *(char *const *)p);
        break;
    case K_INT: fprintf(out, "%d", *(const int *)p); break;
    case K_DBL: dump_double(out, *(const double *)p); break;
    case K_BOOL: fputs(*(const int *)p ? "true" : "false", out); break;
    case K_ENUM: dump_string(out, k->enums[*(const int *)p]); break;
    case K_STRLIST: {
        char *const *arr = *(char *const *const *)p;
        int n = *(const int *)((const char *)base + k->cnt_off);
        fputc('[', out);
        for (int i = 0; i < n; i++) {
            if (i) fputs(", ", out);
            const char *eq = strchr(arr[i], '=');
            if (redact && k->secret && eq && bw_config_secret_name(arr[i], (size_t)(eq - arr[i])))
                dump_secret(out, arr[i], (int)(eq - arr[i]) + 1, eq + 1);
            else dump_string(out, arr[i]);
        }
        fputc(']', out);
        break;
    }
    case K_LIST: {
        const char *arr = *(const char *const *)p;
        int n = *(const int *)((const char *)base + k->cnt_off);
        fputs("(\n", out);
        for (int i = 0; i < n; i++) {
            indent(out, depth + 1);
            fputs("{\n", out);
            dump_table(out, k->sub, arr + (size_t)i * k->elem_size, depth + 2, redact);
            indent(out, depth + 1);
            fputs(i + 1 < n ? "},\n" : "}\n", out);
        }
        indent(out, depth);
        fputc(')', out);
        break;
    }
    case K_GROUP:
        fputs("{\n", out);
        dump_table(out, k->sub, base, depth + 1, redact);
        indent(out, depth);
        fputc('}', out);
        break;
    }
}

static void dump_table(FILE *out, const key_t_ *keys, const void *base, int depth, int redact) {
    for (const key_t_ *k = keys; k->name; k++) {
        indent(out, depth);
        fprintf(out, "%s = ", k->name);
        dump_value(out, k, base, depth, redact);
        fputs(";\n", out);
    }
}

int bw_config_same(const bw_config_t *a, const bw_config_t *b, const char *key) {
    for (const key_t_ *k = top_keys; k->name; k++) {
        if (strcmp(k->name, key)) continue;
        char *ta = NULL, *tb = NULL;
        size_t la = 0, lb = 0;
        FILE *fa = open_memstream(&ta, &la), *fb = open_memstream(&tb, &lb);
        dump_value(fa, k, a, 0, 0); /* secrets too: a changed password is a change */
        dump_value(fb, k, b, 0, 0);
        fclose(fa);
        fclose(fb);
        int same = la == lb && memcmp(ta, tb, la) == 0;
        free(ta);
        free(tb);
        return same;
    }
    return -1;
}

void bw_config_dump(const bw_config_t *c, FILE *out) {
    fprintf(out, "# effective configuration of %s\n", c->path ? c->path : "(defaults)");
    /* dotted keys are written inside their section: kafka = { brokers = ...; }; */
    const char *section = NULL;
    size_t section_len = 0;
    for (const key_t_ *k = top_keys; k->name; k++) {
        const char *dot = strchr(k->name, '.');
        size_t len = dot ? (size_t)(dot - k->name) : 0;
        if (section && (len != section_len || strncmp(section, k->name, len) != 0)) {
            fputs("};\n", out);
            section = NULL;
        }
        if (dot && !section) {
            fprintf(out, "%.*s = {\n", (int)len, k->name);
            section = k->name;
            section_len = len;
        }
        int depth = section ? 1 : 0;
        indent(out, depth);
        fprintf(out, "%s = ", section ? dot + 1 : k->name);
        dump_value(out, k, c, depth, 1);
        fputs(";\n", out);
    }
    if (section) fputs("};\n", out);
}

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

static void doc_table(FILE *out, const key_t_ *keys, const char *prefix) {
    for (const key_t_ *k = keys; k->name; k++) {
        char full[256];
        snprintf(full, sizeof(full), "%.120s%.120s", prefix, k->name);
        if (k->kind == K_GROUP) {
            char sub[256];
            snprintf(sub, sizeof(sub), "%.200s.", full);
            doc_table(out, k->sub, sub);
            continue;
        }
        fprintf(out, "| `%s` | %s", full, kind_name(k));
        if (k->kind == K_ENUM) {
            fputs(": ", out);
            for (int i = 0; k->enums[i]; i++) fprintf(out, "%s`%s`", i ? ", " : "", k->enums[i]);
        }
        if (k->kind == K_INT || k->kind == K_DBL) fprintf(out, " (%g to %g)", k->min, k->max);
        const char *def = !k->def ? "**required**" : *k->def ? k->def : k->kind == K_GROUP ? "" : "*optional*";
        fprintf(out, " | %s | %s |\n", def, k->doc);
        if (k->kind == K_LIST) {
            char sub[256];
            snprintf(sub, sizeof(sub), "%.200s[].", full);
            doc_table(out, k->sub, sub);
        }
    }
}

void bw_config_doc(FILE *out) {
    fputs("# Configuration\n\n"
          "<!-- Generated by `bwctl config-doc` from the key tables in common/config.c; "
          "`make docs` rewrites it and `make check` fails when it drifts. -->\n\n"
          "bulkwrite reads one [libconfig](https://hyperrealm.github.io/libconfig/) file, "
          "`conf/bulkwrite.conf` by default. Unknown keys, wrong types and out-of-range "
          "values stop startup with `file:line: what is wrong`. `--dump-config` prints the "
          "effective configuration, defaults filled in.\n\n"
          "| key | type | default | meaning |\n| --- | --- | --- | --- |\n", out);
    doc_table(out, top_keys, "");
}
