/* config.h — the one configuration of every bulkwrite daemon and tool.
 *
 * Read from a libconfig file. Every key is described once, in the key tables of
 * config_keys.c; those tables drive parsing, validation (types, ranges, required keys,
 * unknown keys), `--dump-config` and the generated docs/configuration.md. */
#ifndef BW_CONFIG_H
#define BW_CONFIG_H

#include <stdio.h>

#include "bw.h"

typedef enum {
    BW_OP_CREATE = 1,
    BW_OP_UPDATE = 2,
    BW_OP_UPSERT = 3,
    BW_OP_DELETE = 4,
} bw_op_t; /* numbered as bulkwrite.v1.OpType */
#define BW_OP_MAX 5
const char *bw_op_name(int op); /* "create", … ; "?" for others */

typedef enum { BW_COL_INT, BW_COL_DOUBLE, BW_COL_STRING, BW_COL_BYTES, BW_COL_BOOL } bw_col_type_t;
const char *bw_col_type_name(bw_col_type_t t);

typedef struct {
    char *name;
    int type;          /* bw_col_type_t */
    int nullable;      /* NULL accepted */
    int required;      /* a CREATE must set it */
    int max_length;    /* string/bytes: bytes at most */
    int increment_null_as_zero; /* an increment of NULL starts from 0 */
} bw_column_t;

typedef enum { BW_ROUTE_ID, BW_ROUTE_MD5 } bw_route_t;

typedef struct {
    char *name;
    int type_id;          /* the 10-bit type in object ids */
    char *table;
    char *id_column;
    int create_route;     /* bw_route_t */
    int batch_size[BW_OP_MAX]; /* rows per statement, indexed by bw_op_t */
    int coalesce_increments; /* the consumer sums increments of one object (consumer/coalesce.h) */
    bw_column_t *columns;
    int column_cnt;
} bw_object_type_t;

typedef struct {
    char *name;
    char *host;
    int port;
    char *user;           /* the consumer's (writer) */
    char *password;       /* resolved: file:/env: already read (bw_config_load) */
    char *proxy_user;     /* the proxy's (read-only); "" = user */
    char *proxy_password;
    int first_shard, last_shard; /* logical shards held, inclusive */
    char **replicas; int replica_cnt; /* "host:port" of replicas read for replication lag (throttle) */
} bw_server_t;

/* A priority lane (lanes): its own topic with one partition per shard; a shard's
 * consumer shares its statements between the lanes with work by weight. Lane 0 is
 * always "default", on kafka.topic; lane L is on "<kafka.topic>.<name>". */
typedef struct {
    char *name;
    int weight;
    char *topic;     /* derived */
} bw_lane_t;
#define BW_LANES_MAX 8

/* One shards.rate_overrides entry. A member the file leaves out is filled with the
 * shard-wide default (shards.default_rate / default_row_rate) when the file is loaded. */
typedef struct {
    int shard;
    double rate;     /* statements per second; 0 = unlimited */
    double row_rate; /* rows per second; 0 = no row budget */
} bw_rate_override_t;

typedef struct {
    char *path;
    int log_level;          /* bw_log_level_t */
    int log_format;         /* bw_log_format_t */

    /* kafka */
    char *brokers;
    char *topic;
    char *consumer_group;
    char *dead_letter_topic;
    char *jobs_topic, *control_topic, *status_topic;
    int jobs_retention_ms;
    int create_topic;
    int allow_retention;    /* an operator's retention on the batches topic: warn, not refuse */
    int replication_factor;   /* of a topic bulkwrite creates; an existing one may not have fewer */
    int min_insync_replicas;  /* likewise: replicas that must have a write before it is acknowledged */
    int allow_weak_durability; /* a topic weaker than the two above: warn, not refuse */
    int message_max_bytes;
    char **properties; int property_cnt;                 /* both clients */
    char **producer_properties; int producer_property_cnt;
    char **consumer_properties; int consumer_property_cnt;

    /* shards */
    int shard_count;
    char *database_prefix;  /* logical shard N lives in database <prefix><N as %05d> */
    double default_rate;    /* statements per second; 0 = unlimited */
    double default_row_rate; /* rows per second; 0 = no row budget */
    bw_rate_override_t *rate_overrides; int rate_override_cnt;
    bw_server_t *servers; int server_cnt;

    /* mysql */
    int query_timeout_ms;
    int connect_timeout_ms;
    char *mysql_user_host; /* host part of the users bwctl schema --create-users makes */

    /* proxy */
    char *proxy_listen_address;
    int proxy_port;
    int proxy_max_connections;
    int proxy_max_connections_per_ip;
    int proxy_connection_timeout_s;
    int proxy_producers;
    int max_body_bytes;
    int max_ops;
    int produce_timeout_ms;
    int backlog_max_messages; /* per shard: unapplied messages admitted at most */
    int backlog_max_bytes;    /* per shard: unapplied bytes admitted at most */
    int backlog_retry_after_s;
    int backlog_wait_ms;
    char *proxy_auth_clients_file; /* "" = no authentication (proxy/auth.h) */
    int proxy_auth_open_metrics;   /* /metrics and /readyz without a token */
    int proxy_auth_allow_open;     /* no clients file on a non-loopback address: serve it open anyway */
    int proxy_jobs_index_max_bytes; /* proxy/jobs.h */
    char *proxy_auth_job_id_secret; /* HMAC key of job ids (proxy/request.h) */
    char *proxy_tls_cert_file, *proxy_tls_key_file; /* "" = plain HTTP (proxy/tls.h) */
    char *proxy_tls_client_ca_file;                /* "" = client certificates not asked for */
    int proxy_tls_require_client_cert;
    char *proxy_admin_listen_address;
    int proxy_admin_port;          /* 0 = the admin API shares proxy.port */

    /* consumer */
    int pull_count;
    int buffer_max_bytes;   /* over all partitions */
    int commit_interval_ms;
    int stall_alert_ms;
    int workers;
    char *consumer_listen_address;
    int consumer_port;
    char *consumer_instance_id; /* group.instance.id; "" = this host's name and consumer_port */
    int status_interval_ms;
    int progress_interval_ms;
    int delete_applied_interval_ms;
    int keep_applied_ms;          /* Kafka keeps an applied batch this long (consumer/retain.h) */
    int replica_unread_alert_ms;  /* BulkwriteTrimHeld after a listed replica is unread this long */
    int max_batch_bytes;
    int transaction_max_statements; /* statements one job (transaction) may run; see config_keys.c */
    int statement_packet_pct;     /* statements stay under this % of max_allowed_packet */
    int array_binding;            /* CREATE and UPSERT array-bound where the server can (sqlbind.h) */
    int connection_check_idle_ms; /* ping a pooled connection idle this long before use */
    int connection_idle_close_ms; /* close a pooled connection idle this long */
    int backlog_age_warn_pct;
    int retry_initial_ms, retry_max_ms;
    int pause_after_timeouts;
    int pause_ms;
    int handover_max_age_ms;      /* a moved shard resumes from a status record this recent (consumer/handover.h) */

    /* the adaptive throttle (consumer/throttle.h) */
    int throttle_mode;      /* bw_throttle_mode_t: off, dry_run, on */
    int throttle_interval_ms, throttle_stale_ms, throttle_quiet_ms, throttle_critical_ms;
    double throttle_floor, throttle_max_rate, throttle_decrease, throttle_increase, throttle_recover_ratio;
    double throttle_lag_ms, throttle_lag_critical_ms;
    double throttle_threads_running, throttle_threads_running_critical;
    int throttle_threads_running_samples;
    double throttle_latency_ms, throttle_latency_critical_ms;
    char *throttle_custom_query;
    double throttle_custom_threshold, throttle_custom_critical;
    char *throttle_heartbeat_table; /* in each server's first shard database */

    /* alerts */
    char *alertmanager_url;
    int alert_resend_ms;
    int alert_timeout_ms;
    char **alert_labels; int alert_label_cnt;

    bw_object_type_t *object_types; int object_type_cnt;
    bw_lane_t *lanes; int lane_cnt; /* lane 0 is "default" (validate() puts it first) */

    /* derived. The rates are atomic: a SIGHUP re-derives them on the reloading thread
     * while others (the proxy's HTTP threads) read them; each shard's value is whole. */
    _Atomic double *shard_rate;     /* [shard_count] configured statements per second (override, else default) */
    _Atomic double *shard_row_rate; /* [shard_count] configured rows per second (override, else default); 0 = none */
    int *shard_server;      /* [shard_count] index into servers */
} bw_config_t;

/* Loads and validates `path`. On error returns NULL and writes "file:line: what" to errstr.
 * The result is owned by the caller: bw_config_destroy(). */
bw_config_t *bw_config_load(const char *path, char *errstr, size_t errstr_size);
void bw_config_destroy(bw_config_t *conf);

const bw_object_type_t *bw_config_object_type(const bw_config_t *conf, const char *name);
/* Index of `name` in ot->columns, or -1. */
int bw_config_column(const bw_object_type_t *ot, const char *name);
/* The same, searching from column `hint` on and then the columns before it: an op's next
 * field is most often a later column (a client sends them in one order, leaving some
 * out), so the proxy's lookup takes a comparison or two a field. */
int bw_config_column_from(const bw_object_type_t *ot, const char *name, int hint);
/* Database name of a logical shard into buf ("db00042"). */
/* Lanes and slots: a consumer or proxy keeps one (lane, shard) pair of its state per
 * *slot*, slot = lane * shard_count + shard (lane 0's slots are the shard numbers). */
static inline int bw_config_slot_count(const bw_config_t *c) { return c->lane_cnt * c->shard_count; }
static inline int bw_config_slot(const bw_config_t *c, int lane, int shard) { return lane * c->shard_count + shard; }
/* The lane called `name` ("" or NULL: the default lane), or -1. */
int bw_config_lane(const bw_config_t *c, const char *name);
/* The lane whose topic is `topic`, or -1. */
int bw_config_topic_lane(const bw_config_t *c, const char *topic);

void bw_config_shard_db(const bw_config_t *conf, int shard, char *buf, size_t size);
/* A file a key names, relative to conf's folder unless absolute (malloc'd); NULL for "". */
char *bw_config_file(const bw_config_t *conf, const char *file);

/* 1 if `key` (a top-level dotted name such as "shards.servers") has the same value in
 * both, 0 if not, -1 if there is no such key. */
int bw_config_same(const bw_config_t *a, const bw_config_t *b, const char *key);

/* 1 if a librdkafka property of this name holds a secret: its name contains password,
 * secret, key, token or sasl.jaas (any case). Its value is redacted wherever it is shown,
 * and may be given as "file:PATH" or "env:NAME". */
int bw_config_secret_name(const char *name, size_t len);

/* A secret's value: "file:PATH" is the file's content (PATH relative to the folder of
 * conf_path; one trailing newline dropped), "env:NAME" the environment variable, anything
 * else the value itself. malloc'd; NULL with errstr "KEY: why" when the file or variable
 * is missing or empty. */
char *bw_config_secret_resolve(const char *key, const char *value, const char *conf_path, char *errstr,
                               size_t errstr_size);

/* ---- reload (SIGHUP) ----------------------------------------------------------------
 * Each key of the table says, for each daemon (process), what a changed value does on
 * SIGHUP: "restart" (only a restart takes it: the running value stays until then),
 * "applied" (copied into the running config, whose users read it fresh; then the role's
 * hook for it runs, if it has one), or "not read" (this process never reads it: the
 * change is noted and has no effect here). docs/configuration.md shows it; config_keys.c
 * decides it. */
typedef enum { BW_PROC_PROXY, BW_PROC_CONSUMER, BW_PROC_COUNT } bw_process_t;
const char *bw_process_name(bw_process_t role); /* "bw-proxy", "bw-consumer" */

/* What a daemon re-derives after applied keys changed (its bw_daemon_t.hooks). */
typedef enum {
    BW_HOOK_NONE,
    BW_HOOK_LOGGING,     /* the log's least level and format */
    BW_HOOK_SHARD_RATES, /* each shard's configured statement and row budgets */
    BW_HOOK_THROTTLE,    /* the adaptive throttle's limits */
    BW_HOOK_HEALTH,      /* the shard health tracker's pause limits */
    BW_HOOK_COUNT
} bw_reload_hook_t;
const char *bw_reload_hook_name(bw_reload_hook_t hook);

typedef struct {
    unsigned hooks;   /* 1u << bw_reload_hook_t of every hook an applied key has */
    int applied_cnt, restart_cnt, unused_cnt;
    char applied[2048]; /* changed keys, ", "-separated */
    char restart[2048]; /* changed keys that need a restart (not applied) */
    char unused[2048];  /* changed keys this role does not read */
} bw_reload_t;

/* The reload of `running` from `next` (a freshly loaded file) for one role: every changed
 * applied key's value is moved into `running` (`next` gets the old one; the caller
 * destroys it), the per-shard rates re-derived if a rate key changed; a changed key that
 * needs a restart keeps its running value and is named in r->restart. Returns the count
 * of applied keys. Applied keys never depend on restart-only ones but for the shard
 * count: a rate override beyond the running count waits for the restart that raises it.
 * The caller runs the hooks in r->hooks. Call it on the thread that owns the keys
 * applied. */
int bw_config_reload(bw_config_t *running, bw_config_t *next, bw_process_t role, bw_reload_t *r);
/* The bw_reload_hook_t set (1u << hook) the role's applied keys can ask for. */
unsigned bw_config_reload_hooks(bw_process_t role);

/* ---- editing a file (bwctl config-set) -------------------------------------------------
 * Sets each "KEY=VALUE" in the libconfig file `path` and writes it back through
 * libconfig (comments and @include are not kept: for scripts and generated copies, not
 * for hand-kept files). KEY is a table key, dotted through groups, with [N] into a
 * list's element (shards.servers[1].port); VALUE is libconfig syntax (42, 1.5, true,
 * "text", [ "a=b" ], ( { name = "urgent"; weight = 4; } )), or bare text for a string
 * or choice key. Each value is checked against its key (type, range, choices, a list's
 * elements); a missing group is created. Nothing is written unless every assignment is
 * good; errstr names the key and why. */
bw_err_t bw_config_set_file(const char *path, char *const *assignments, int n, char *errstr, size_t errstr_size);

/* Writes the effective configuration in libconfig syntax; every secret (passwords, the
 * secret kafka properties' values) is written as "(redacted)". */
void bw_config_dump(const bw_config_t *conf, FILE *out);
/* Writes docs/configuration.md from the key tables. */
void bw_config_doc(FILE *out);

#endif
