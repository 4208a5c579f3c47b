/* sql.h — building multi-row statements for a batch, bounded in rows and bytes.
 *
 * Identifiers (database, table, columns) come only from the configuration, which
 * admits [A-Za-z0-9_] and is quoted with backticks anyway. Values are never spliced
 * raw: numbers are printed (integers by hand, doubles by %.17g), text is escaped for a utf8mb4 connection whose sql_mode
 * lacks NO_BACKSLASH_ESCAPES (the consumer sets both on connect), binary goes as a hex
 * literal X'…'. Byte-wise escaping is safe for utf8mb4 because no byte of a multi-byte
 * UTF-8 sequence is below 0x80, so none can be mistaken for a quote or a backslash.
 *
 * @locality any thread; the caller owns the output buffer. */
#ifndef BW_SQL_H
#define BW_SQL_H

#include <stdint.h>

#include "buf.h"
#include "bulkwrite/internal/v1/records.pb-c.h"
#include "config.h"

/* One row of a statement: the RowFields of a ShardBatch row and the map from the
 * batch's column numbers to the object type's columns (resolved by the consumer). */
typedef struct {
    uint64_t id;
    size_t field_cnt;
    Bulkwrite__Internal__V1__RowField *const *fields;
    const int *colmap;
} bw_sql_row_t;

/* Append a number in decimal (no printf on the statement path). */
void bw_sql_append_u64(bw_buf_t *b, uint64_t v);
void bw_sql_append_i64(bw_buf_t *b, int64_t v);
/* Appends `len` bytes escaped for use between single quotes. */
void bw_sql_append_escaped(bw_buf_t *b, const void *s, size_t len);
/* Appends a value as an SQL literal (NULL, 42, 1.5, 'text', X'00ff', 1). */
void bw_sql_append_value(bw_buf_t *b, const Bulkwrite__V1__Value *v);

/* How many leading rows of rows[0..n) may share one statement: at most the object
 * type's batch size for `op`; UPDATE and UPSERT stop before an id repeats (one
 * statement cannot apply two changes to one row in order); UPSERT also stops where the
 * set of columns changes (ON DUPLICATE KEY UPDATE names one column list). >= 1 if n > 0. */
size_t bw_sql_plan(const bw_object_type_t *ot, int op, const bw_sql_row_t *rows, size_t n);

/* The same, and the statement's length bounded by max_bytes: the rows taken are those
 * whose upper bound (what bw_sql_build may write for them into database `db`) fits.
 * Returns 0 when rows[0] alone does not fit (n > 0); *bytes (if not NULL) gets the
 * bound of the planned statement, or of rows[0] alone when 0 is returned. */
size_t bw_sql_plan_bytes(const bw_object_type_t *ot, int op, const char *db, const bw_sql_row_t *rows,
                         size_t n, size_t max_bytes, size_t *bytes);

/* Frees the calling thread's planning scratch (call when a thread that planned ends). */
void bw_sql_thread_done(void);

/* Writes the statement for rows[0..n) (a prefix bw_sql_plan admitted) into `out`,
 * replacing its contents. */
void bw_sql_build(bw_buf_t *out, const char *db, const bw_object_type_t *ot, int op,
                  const bw_sql_row_t *rows, size_t n);

/* Writes into `out` (replacing its contents) the statement that array binding prepares
 * for CREATE or UPSERT rows[0..n): bw_sql_build's INSERT with one row of placeholders,
 * "(?,?,…)", over the same columns (the id, then each config column some row sets, in
 * config order). cols[] (room for ot->column_cnt) gets the config column of each
 * placeholder after the id's. Returns the number of placeholders, the id's included. */
size_t bw_sql_build_prepared(bw_buf_t *out, const char *db, const bw_object_type_t *ot, int op,
                             const bw_sql_row_t *rows, size_t n, int *cols);

#endif
