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

/* Connects to server `server_index`. NULL with errstr on failure. */
MYSQL *bw_db_connect(const bw_config_t *conf, int server_index, char *errstr, size_t errstr_size);

/* Whether a MySQL error number is worth retrying (the server, not the data, failed):
 * deadlock, lock wait timeout, statement timeout, lost connection, gone away, read-only
 * during failover, too many connections, and client-side connection errors. */
int bw_db_error_retryable(unsigned int err);

/* Reads the next offset of `shard`'s partition stored in the shard's bw_offsets table
 * (FOR UPDATE inside a transaction that will move it). *next = -1 when none is stored.
 * `scratch` holds the statement. Returns 0, or the MySQL error number. */
unsigned bw_db_read_offset(MYSQL *db, const bw_config_t *conf, int shard, int for_update,
                           bw_buf_t *scratch, int64_t *next);

/* Appends the DDL that creates every shard database and table of server `server_index`
 * (idempotent: IF NOT EXISTS), one statement per line, each ending with ";\n". */
void bw_db_schema_sql(const bw_config_t *conf, int server_index, bw_buf_t *out);

/* Runs bw_db_schema_sql against every server. */
bw_err_t bw_db_apply_schema(const bw_config_t *conf, char *errstr, size_t errstr_size);

#endif
