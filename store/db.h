/* db.h — connections to the shard servers and their schema.
 *
 * Every connection is set up the same way: utf8mb4, a strict sql_mode without
 * NO_BACKSLASH_ESCAPES (sql.c escapes for exactly that), autocommit off, and the
 * per-query timeout both server-side (max_statement_time) and client-side (read and
 * write timeouts, a little longer, against a server that stops answering at all). */
#ifndef BW_DB_H
#define BW_DB_H

#include <mysql.h>

#include "buf.h"
#include "config.h"

/* Who connects: the consumer (and the tools) as the server's user, the proxy as its
 * proxy_user (read-only; the user when proxy_user is ""). */
typedef enum { BW_DB_CONSUMER, BW_DB_PROXY } bw_db_role_t;

/* Connects to server `server_index` as `role`. After connecting, the session's character
 * sets (client, connection, results) must all be utf8mb4, or the connection is refused
 * with an error naming the server and what it gave. NULL with errstr on failure. */
MYSQL *bw_db_connect_as(const bw_config_t *conf, int server_index, bw_db_role_t role, char *errstr,
                        size_t errstr_size);
/* Connects as user/password (bwctl schema's administrator). */
MYSQL *bw_db_connect_user(const bw_config_t *conf, int server_index, const char *user, const char *password,
                          char *errstr, size_t errstr_size);
/* Connects to replica `replica` ("host:port" of shards.servers[].replicas) of server
 * `server_index` as the server's user (the throttle reads the heartbeat there). */
MYSQL *bw_db_connect_replica(const bw_config_t *conf, int server_index, int replica, char *errstr, size_t errstr_size);
/* bw_db_connect_as(BW_DB_CONSUMER). */
MYSQL *bw_db_connect(const bw_config_t *conf, int server_index, char *errstr, size_t errstr_size);

/* The charset decision: 0 when every value (of the variables `names`) is utf8mb4; else -1
 * with why "character_set_client is latin1, not utf8mb4". */
int bw_db_charset_check(const char *const names[3], const char *const values[3], char *why, size_t why_size);

/* The server's max_allowed_packet as this connection sees it (read once per connection:
 * a server's SET GLOBAL applies to connections made after it). 0 on failure, with the
 * connection's mysql_errno()/mysql_error() set. */
unsigned long bw_db_max_packet(MYSQL *db);

/* What a failure means for a batch: the one failure class. MySQL's errors get theirs from
 * the error table in db.c (bw_db_error_class, documented in docs/reliability.md); the
 * consumer sets the ones that are not MySQL's (a message that does not decode, the
 * dead-letter topic down: retry). The scheduler, the health of shards and servers and the
 * metrics all read this one value; its name (bw_fail_name) is the `kind` label of
 * bulkwrite_consumer_errors_total and of a shard's recent errors (GET /v1/shards). */
typedef enum {
    BW_FAIL_NONE,       /* no failure: the batch was applied */
    BW_FAIL_RETRY,      /* transient (deadlock, too many connections, shutdown, dead-letter topic down):
                           back off, keep the batch; counts toward no health */
    BW_FAIL_TIMEOUT,    /* lock wait or statement timeout, or no answer in time: retry; counts toward
                           the shard's health */
    BW_FAIL_CONNECTION, /* cannot connect, or the connection broke: reconnect and retry; counts toward
                           the server's health */
    BW_FAIL_DATA,       /* the row's data is refused: isolate it, dead-letter it with the reason */
    BW_FAIL_DECODE,     /* a Kafka message that is not a valid ShardBatch: dead-lettered whole */
    BW_FAIL_STOP,       /* schema, grants, read-only, disk full, ledger missing, or unknown:
                           stop the shard and alert; nothing is dead-lettered, the offset stays */
    BW_FAIL_CLASSES
} bw_fail_t;

/* "none", "retryable", "timeout", "connection", "data", "decode", "stop". */
extern const char *const bw_fail_names[BW_FAIL_CLASSES];
const char *bw_fail_name(bw_fail_t f);
/* The class of a MySQL error number (never BW_FAIL_NONE or BW_FAIL_DECODE). */
bw_fail_t bw_db_error_class(unsigned int err);
/* 1 for the client library's own errors (2000-2999: CR_*, e.g. lost or refused
 * connections): the connection is gone or unusable and must be closed; 0 for the
 * server's (a refusal leaves the session usable) and for 0. */
int bw_db_error_is_client(unsigned int err);
/* A few words on the error that quote nothing of the server's text ("duplicate key",
 * "lock wait timeout"): what callers without the admin role see (proxy/scrub.h). */
const char *bw_db_error_what(unsigned int err);

/* Appends the DDL that creates every shard database and table of server `server_index`
 * (idempotent: IF NOT EXISTS), one statement per line, each ending with ";\n": the
 * ledger's tables (ledger.h), then the object types' tables. */
void bw_db_schema_sql(const bw_config_t *conf, int server_index, bw_buf_t *out);

/* Appends the statements that make the least-privilege users of server `server_index`,
 * one a line, idempotent: for `user` (the consumer) SELECT, INSERT, UPDATE, DELETE on the
 * ledger's and the object types' tables of each of its shard databases; for `proxy_user`
 * (when set) SELECT on bw_job_parts and bw_job_failures. Each is made if missing
 * (CREATE USER IF NOT EXISTS), gets its configured password (ALTER USER: a changed one
 * takes) and its table grants: no GRANT OPTION, no global or database-wide privileges.
 * Accounts are 'NAME'@'mysql.user_host'; names and passwords are escaped. A user named
 * admin_user is left alone (the administrator running it). redact writes "(redacted)" for
 * the passwords (for printing). */
void bw_db_users_sql(const bw_config_t *conf, int server_index, const char *admin_user, int redact, bw_buf_t *out);

/* Runs bw_db_schema_sql against every server, connected as each server's user. */
bw_err_t bw_db_apply_schema(const bw_config_t *conf, char *errstr, size_t errstr_size);
/* The same connected as admin_user/admin_password (NULL: each server's user), and with
 * create_users the users' statements of bw_db_users_sql after the tables. A refused
 * connect or statement leaves the server's error number in *mysql_errnum (else 0; NULL:
 * not wanted). */
bw_err_t bw_db_apply_schema_as(const bw_config_t *conf, const char *admin_user, const char *admin_password,
                               int create_users, unsigned *mysql_errnum, char *errstr, size_t errstr_size);

#endif
