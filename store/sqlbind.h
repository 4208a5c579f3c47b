/* sqlbind.h — array-bound prepared statements: many rows of one CREATE or UPSERT sent as
 * one prepared INSERT executed over arrays of values.
 *
 * MariaDB (10.2 and later) executes a prepared statement over arrays of parameters in
 * one command (COM_STMT_BULK_EXECUTE; the client's STMT_ATTR_ARRAY_SIZE): the statement
 * is parsed once per connection instead of once per batch, and values travel binary,
 * unescaped — text byte for byte (embedded NULs, 4-byte UTF-8), binary as is, doubles
 * as their 8 bytes. A NULL value is the NULL indicator; a column a row leaves out, or a
 * CREATE without an id, is the DEFAULT indicator, as the text statement says DEFAULT.
 *
 * Measured on MariaDB 10.11 (500-row statements of the feed's pin rows, docs/architecture.md):
 * CREATE about 1.45× and UPSERT about 1.2× the rows/s of the text statement; a DELETE
 * executed over an array of ids ran at 0.4× `DELETE … IN (…)`, so DELETE and UPDATE
 * (CASE per column, increments) stay text (bw_sqlbind_op_wins).
 *
 * The statement and its rows are exactly those of sql.h's text INSERT for the same rows
 * (bw_sql_build_prepared shares its column list and ON DUPLICATE KEY UPDATE), so the
 * caller plans with bw_sql_plan_bytes: the bulk command (per row: an indicator byte and
 * the value, 8 bytes for a number, a length and the bytes for text) is never longer
 * than that text bound.
 *
 * @locality a bw_sqlbind_t belongs to one thread (a worker's applier); a cache belongs to
 * its connection and is used only by the thread that owns the connection. */
#ifndef BW_SQLBIND_H
#define BW_SQLBIND_H

#include <mysql.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "config.h"
#include "sql.h"

/* Statements kept prepared per connection. A worker's connection serves every shard
 * database of its server, so this bounds the server's prepared statements at
 * BW_SQLBIND_CACHE × workers × consumers per server (max_prepared_stmt_count is 16382
 * by default); the least recently used statement is closed to make room. */
#define BW_SQLBIND_CACHE 16

typedef struct {
    MYSQL_STMT *stmt; /* NULL: a free slot */
    char *text;       /* the statement prepared: the cache key (malloc'd) */
    size_t len;
    uint64_t used;    /* when last executed (the cache's clock) */
} bw_sqlbind_entry_t;

/* The statements prepared on one connection. Zeroed, it is empty and unsupported. */
typedef struct {
    bw_sqlbind_entry_t entries[BW_SQLBIND_CACHE];
    uint64_t clock;
    int bulk; /* the server executes arrays (MariaDB's bulk capability) */
} bw_sqlbind_cache_t;

/* Starts the (empty) cache of a new connection: reads whether its server can execute
 * arrays (MariaDB >= 10.2 announces MARIADB_CLIENT_STMT_BULK_OPERATIONS; MySQL does not). */
void bw_sqlbind_cache_open(bw_sqlbind_cache_t *c, MYSQL *db);
/* Closes every statement of the cache; call before mysql_close() of its connection. */
void bw_sqlbind_cache_close(bw_sqlbind_cache_t *c);

/* A thread's bind arrays, reused for every execution and grown when a statement needs
 * more rows or columns than any before: nothing is allocated per row. */
typedef struct {
    bw_buf_t text;        /* the statement to prepare (the cache key) */
    int *cols;            /* [ot->column_cnt] config column of each placeholder after the id */
    size_t col_cap;
    MYSQL_BIND *binds;    /* [param_cap] */
    size_t param_cap, row_cap;
    unsigned char *cells; /* [param_cap][row_cap] values of 8 bytes: int64, double, char, pointer */
    unsigned long *lens;  /* [param_cap][row_cap] lengths of text and binary values */
    char *inds;           /* [param_cap][row_cap] STMT_INDICATOR_NONE / NULL / DEFAULT */
} bw_sqlbind_t;

void bw_sqlbind_init(bw_sqlbind_t *sb);
void bw_sqlbind_free(bw_sqlbind_t *sb);

/* Whether array binding beats the text statement for `op` (measured: see above). */
int bw_sqlbind_op_wins(int op);

typedef enum {
    BW_SQLBIND_OK,    /* executed: every row applied */
    BW_SQLBIND_TEXT,  /* not tried: a value that does not travel as its column's type, or a
                         statement the server would not prepare (too many prepared, …):
                         send the text statement, which decides */
    BW_SQLBIND_ERROR, /* the server or the client refused: *err and *errmsg (valid until
                         the next call on this cache); nothing is known about the rows, the
                         caller rolls back to its savepoint as for a text statement */
} bw_sqlbind_status_t;

/* Executes CREATE or UPSERT rows[0..n) (a prefix bw_sql_plan_bytes admitted, n >= 1)
 * into database `dbname` as one array-bound statement on `db`, whose cache `c` is. */
bw_sqlbind_status_t bw_sqlbind_execute(bw_sqlbind_t *sb, bw_sqlbind_cache_t *c, MYSQL *db, const char *dbname,
                                       const bw_object_type_t *ot, int op, const bw_sql_row_t *rows, size_t n,
                                       unsigned *err, const char **errmsg);

#endif
