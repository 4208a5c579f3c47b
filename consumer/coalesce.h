/* coalesce.h — counter coalescing: the increments of one object that reach a shard
 * together are applied as their sum.
 *
 * A counter-heavy load (view counts, like counts) names the same objects again and
 * again. One UPDATE statement cannot change a row twice in order, so without this every
 * repeat of an id ends a statement (store/sql.h) and the load runs as tiny statements.
 * Within one transaction's UPDATE run of an object type that sets coalesce_increments,
 * a row that only increments numeric columns is added into the latest earlier row of the
 * same id when that row only increments too; the sum takes the earlier row's place.
 *
 * Why this keeps every guarantee:
 *  - order per object: a row that does anything but increment ends the object's sum (a
 *    later increment starts a new one after it), and rows of other objects commute with
 *    it;
 *  - exactly-once: the sum commits in the transaction that records every message it came
 *    from in the ledger, so a replay skips all of them or none;
 *  - per-op reporting: a row stands for its members (the original rows, in order), and
 *    the caller counts each member as applied, or retries a refused sum member by member
 *    so that each op fails alone, as it would have uncoalesced.
 * Two ints whose sum would leave int64, or an int and a double, are not added (the later
 * one starts a new row), so a sum never differs from the ops applied one by one except
 * where an intermediate value would have been out of the column's range.
 *
 * @locality any thread; everything lives in the caller's arena. */
#ifndef BW_CONSUMER_COALESCE_H
#define BW_CONSUMER_COALESCE_H

#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "config.h"
#include "sql.h"

typedef struct {
    bw_sql_row_t *rows;     /* [n] the rows to apply */
    uint32_t *first;        /* [n + 1] rows[i] stands for members[first[i] .. first[i + 1]) */
    uint32_t *members;      /* indices of the input rows, ascending within each row */
    size_t n;
} bw_coalesced_t;

/* Coalesces UPDATE rows in[0..n) of `ot` (column types from ot, values as validated by
 * the proxy). Rows that are not summed are passed through unchanged (same fields, same
 * colmap); a sum gets fields and a column map of its own. Returns how many input rows
 * were added into an earlier one (n - out->n). */
size_t bw_coalesce_increments(const bw_object_type_t *ot, const bw_sql_row_t *in, size_t n, bw_arena_t *arena,
                              bw_coalesced_t *out);

#endif
