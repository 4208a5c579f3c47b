#include "sql.h"

#include <stdlib.h>
#include <string.h>

/* Appends a string literal without strlen. */
#define PUTS(b, lit) bw_buf_append(b, lit, sizeof(lit) - 1)

/* The escape letter of each byte that needs one inside '…' (0: the byte goes as is). */
static const char escapes[256] = {[0] = '0', ['\n'] = 'n', ['\r'] = 'r', [0x1a] = 'Z',
                                  ['\\'] = '\\', ['\''] = '\'', ['"'] = '"'};

void bw_sql_append_escaped(bw_buf_t *b, const void *s, size_t len) {
    const unsigned char *p = s;
    bw_buf_reserve(b, len * 2);
    char *o = b->data + b->len;
    for (size_t i = 0; i < len; i++) {
        char esc = escapes[p[i]];
        if (esc) {
            *o++ = '\\';
            *o++ = esc;
        } else {
            *o++ = (char)p[i];
        }
    }
    b->len = (size_t)(o - b->data);
    b->data[b->len] = '\0';
}

static size_t escaped_len(const unsigned char *p, size_t len) {
    size_t n = len;
    for (size_t i = 0; i < len; i++) n += escapes[p[i]] != 0;
    return n;
}

static void append_hex(bw_buf_t *b, const uint8_t *p, size_t len) {
    static const char hex[] = "0123456789abcdef";
    bw_buf_reserve(b, len * 2 + 3);
    char *o = b->data + b->len;
    *o++ = 'X';
    *o++ = '\'';
    for (size_t i = 0; i < len; i++) {
        *o++ = hex[p[i] >> 4];
        *o++ = hex[p[i] & 15];
    }
    *o++ = '\'';
    b->len = (size_t)(o - b->data);
    b->data[b->len] = '\0';
}

void bw_sql_append_u64(bw_buf_t *b, uint64_t v) {
    char tmp[20], *p = tmp + sizeof(tmp);
    do {
        *--p = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    bw_buf_append(b, p, (size_t)(tmp + sizeof(tmp) - p));
}

void bw_sql_append_i64(bw_buf_t *b, int64_t v) {
    if (v < 0) {
        bw_buf_append(b, "-", 1);
        bw_sql_append_u64(b, 0 - (uint64_t)v); /* INT64_MIN too: unsigned negation is defined */
    } else {
        bw_sql_append_u64(b, (uint64_t)v);
    }
}

void bw_sql_append_value(bw_buf_t *b, const Bulkwrite__V1__Value *v) {
    switch (v ? v->kind_case : BULKWRITE__V1__VALUE__KIND__NOT_SET) {
    case BULKWRITE__V1__VALUE__KIND_INT_VALUE: bw_sql_append_i64(b, v->int_value); break;
    /* the only printf left on the statement path: 17 significant digits read back exactly */
    case BULKWRITE__V1__VALUE__KIND_DOUBLE_VALUE: bw_buf_printf(b, "%.17g", v->double_value); break;
    case BULKWRITE__V1__VALUE__KIND_BOOL_VALUE: bw_buf_append(b, v->bool_value ? "1" : "0", 1); break;
    case BULKWRITE__V1__VALUE__KIND_STRING_VALUE:
        bw_buf_append(b, "'", 1);
        bw_sql_append_escaped(b, v->string_value.data, v->string_value.len);
        bw_buf_append(b, "'", 1);
        break;
    case BULKWRITE__V1__VALUE__KIND_BYTES_VALUE:
        append_hex(b, v->bytes_value.data, v->bytes_value.len);
        break;
    default: PUTS(b, "NULL"); break;
    }
}

/* The field of `row` that sets config column `col`, or NULL. */
static const Bulkwrite__Internal__V1__RowField *row_field(const bw_sql_row_t *row, int col) {
    for (size_t i = 0; i < row->field_cnt; i++)
        if (row->colmap[row->fields[i]->column] == col) return row->fields[i];
    return NULL;
}

static int same_columns(const bw_sql_row_t *a, const bw_sql_row_t *b) {
    if (a->field_cnt != b->field_cnt) return 0;
    for (size_t i = 0; i < a->field_cnt; i++)
        if (!row_field(b, a->colmap[a->fields[i]->column])) return 0;
    return 1;
}

/* The most bytes bw_sql_append_value writes for v (exact for text and binary, which
 * are what make statements big). */
static size_t value_len(const Bulkwrite__V1__Value *v) {
    switch (v ? v->kind_case : BULKWRITE__V1__VALUE__KIND__NOT_SET) {
    case BULKWRITE__V1__VALUE__KIND_INT_VALUE: return 20;
    case BULKWRITE__V1__VALUE__KIND_DOUBLE_VALUE: return 24;
    case BULKWRITE__V1__VALUE__KIND_BOOL_VALUE: return 1;
    case BULKWRITE__V1__VALUE__KIND_STRING_VALUE: return 2 + escaped_len(v->string_value.data, v->string_value.len);
    case BULKWRITE__V1__VALUE__KIND_BYTES_VALUE: return 3 + 2 * v->bytes_value.len;
    default: return 4;
    }
}

/* Upper bounds of a statement's length, in two parts: what it has whatever its rows
 * (table, column lists, one CASE or VALUES() per column), and what each row adds (its
 * id up to three times, its values, a column name and WHEN … THEN per field, DEFAULT
 * for each column it leaves out). Checked against bw_sql_build in the unit tests. */
static size_t fixed_bound(const bw_object_type_t *ot, const char *db) {
    size_t id = strlen(ot->id_column), n = 64 + strlen(db) + strlen(ot->table) + 3 * id;
    for (int c = 0; c < ot->column_cnt; c++) n += 3 * strlen(ot->columns[c].name) + id + 32;
    return n;
}

static size_t row_bound(const bw_object_type_t *ot, int op, const bw_sql_row_t *row) {
    if (op == BW_OP_DELETE) return 21;
    size_t n = 64 + 8 * (size_t)ot->column_cnt;
    for (size_t i = 0; i < row->field_cnt; i++)
        n += value_len(row->fields[i]->value) + strlen(ot->columns[row->colmap[row->fields[i]->column]].name) + 40;
    return n;
}

/* Ids seen in the statement being planned: an open-addressing set per thread, kept
 * across calls and invalidated by a generation stamp, so planning is linear in the
 * batch and allocates only when a batch outgrows every earlier one. */
typedef struct {
    uint64_t id;
    uint32_t gen;
} id_slot_t;
static _Thread_local id_slot_t *seen;
static _Thread_local size_t seen_cap;
static _Thread_local uint32_t seen_gen;

/* Adds id; returns 1 if it was already there. */
static int seen_add(uint64_t id) {
    size_t h = (size_t)((id * 0x9E3779B97F4A7C15ull) >> 32) & (seen_cap - 1);
    while (seen[h].gen == seen_gen) {
        if (seen[h].id == id) return 1;
        h = (h + 1) & (seen_cap - 1);
    }
    seen[h] = (id_slot_t){id, seen_gen};
    return 0;
}

void bw_sql_thread_done(void) {
    free(seen);
    seen = NULL;
    seen_cap = 0;
}

size_t bw_sql_plan_bytes(const bw_object_type_t *ot, int op, const char *db, const bw_sql_row_t *rows,
                         size_t n, size_t max_bytes, size_t *bytes) {
    size_t max = (size_t)ot->batch_size[op];
    if (n < max) max = n;
    int unique_ids = op == BW_OP_UPDATE || op == BW_OP_UPSERT;
    if (unique_ids && seen_cap < 2 * max) {
        size_t cap = 64;
        while (cap < 2 * max) cap *= 2;
        free(seen);
        seen = calloc(cap, sizeof(*seen));
        if (!seen) abort();
        seen_cap = cap;
        seen_gen = 0;
    }
    if (unique_ids && ++seen_gen == 0) { /* the stamp wrapped: clear once */
        memset(seen, 0, seen_cap * sizeof(*seen));
        seen_gen = 1;
    }
    size_t total = fixed_bound(ot, db), i;
    for (i = 0; i < max; i++) {
        if (i && op == BW_OP_UPSERT && !same_columns(&rows[0], &rows[i])) break;
        size_t r = row_bound(ot, op, &rows[i]);
        if (total + r > max_bytes) {
            if (i == 0) total += r; /* the caller learns how big the lone row is */
            break;
        }
        if (unique_ids && seen_add(rows[i].id)) break;
        total += r;
    }
    if (bytes) *bytes = total;
    return i;
}

size_t bw_sql_plan(const bw_object_type_t *ot, int op, const bw_sql_row_t *rows, size_t n) {
    return bw_sql_plan_bytes(ot, op, "", rows, n, SIZE_MAX, NULL);
}

static void append_ident(bw_buf_t *b, const char *name) {
    size_t n = strlen(name);
    bw_buf_reserve(b, n + 2);
    char *o = b->data + b->len;
    *o++ = '`';
    memcpy(o, name, n);
    o[n] = '`';
    b->len += n + 2;
    b->data[b->len] = '\0';
}

static void append_table(bw_buf_t *b, const char *db, const bw_object_type_t *ot) {
    append_ident(b, db);
    bw_buf_append(b, ".", 1);
    append_ident(b, ot->table);
}

static void append_id_list(bw_buf_t *b, const bw_sql_row_t *rows, size_t n) {
    bw_buf_append(b, "(", 1);
    for (size_t i = 0; i < n; i++) {
        if (i) bw_buf_append(b, ",", 1);
        bw_sql_append_u64(b, rows[i].id);
    }
    bw_buf_append(b, ")", 1);
}

/* The config columns set by some row of rows[0..n): used[c] = 1 (config.c caps columns
 * at 1000). */
static void columns_used(unsigned char used[1024], const bw_sql_row_t *rows, size_t n) {
    memset(used, 0, 1024);
    for (size_t r = 0; r < n; r++)
        for (size_t i = 0; i < rows[r].field_cnt; i++) used[rows[r].colmap[rows[r].fields[i]->column]] = 1;
}

/* "INSERT INTO `db`.`t` (`id`,`c1`,…) VALUES " over the used columns. */
static void insert_head(bw_buf_t *out, const char *db, const bw_object_type_t *ot, const unsigned char *used) {
    PUTS(out, "INSERT INTO ");
    append_table(out, db, ot);
    PUTS(out, " (");
    append_ident(out, ot->id_column);
    for (int c = 0; c < ot->column_cnt; c++)
        if (used[c]) {
            bw_buf_append(out, ",", 1);
            append_ident(out, ot->columns[c].name);
        }
    PUTS(out, ") VALUES ");
}

/* " ON DUPLICATE KEY UPDATE `c1`=VALUES(`c1`),…" for UPSERT. */
static void upsert_tail(bw_buf_t *out, const bw_object_type_t *ot, const unsigned char *used) {
    PUTS(out, " ON DUPLICATE KEY UPDATE ");
    int first = 1;
    for (int c = 0; c < ot->column_cnt; c++) {
        if (!used[c]) continue;
        if (!first) bw_buf_append(out, ",", 1);
        first = 0;
        append_ident(out, ot->columns[c].name);
        PUTS(out, "=VALUES(");
        append_ident(out, ot->columns[c].name);
        bw_buf_append(out, ")", 1);
    }
    if (first) { /* only the id: keep the row as it is */
        append_ident(out, ot->id_column);
        bw_buf_append(out, "=", 1);
        append_ident(out, ot->id_column);
    }
}

/* INSERT for CREATE and UPSERT: the columns are the union over the rows; a row that
 * leaves one out gets DEFAULT (UPSERT rows share one column set, see bw_sql_plan). */
static void build_insert(bw_buf_t *out, const char *db, const bw_object_type_t *ot, int op,
                         const bw_sql_row_t *rows, size_t n) {
    unsigned char used[1024];
    columns_used(used, rows, n);
    insert_head(out, db, ot, used);
    for (size_t r = 0; r < n; r++) {
        bw_buf_append(out, r ? ",(" : "(", r ? 2 : 1);
        if (rows[r].id) bw_sql_append_u64(out, rows[r].id);
        else PUTS(out, "DEFAULT");
        for (int c = 0; c < ot->column_cnt; c++) {
            if (!used[c]) continue;
            bw_buf_append(out, ",", 1);
            const Bulkwrite__Internal__V1__RowField *f = row_field(&rows[r], c);
            if (f) bw_sql_append_value(out, f->value);
            else PUTS(out, "DEFAULT");
        }
        bw_buf_append(out, ")", 1);
    }
    if (op == BW_OP_UPSERT) upsert_tail(out, ot, used);
}

size_t bw_sql_build_prepared(bw_buf_t *out, const char *db, const bw_object_type_t *ot, int op,
                             const bw_sql_row_t *rows, size_t n, int *cols) {
    unsigned char used[1024];
    columns_used(used, rows, n);
    bw_buf_reset(out);
    insert_head(out, db, ot, used);
    size_t params = 1;
    bw_buf_append(out, "(?", 2);
    for (int c = 0; c < ot->column_cnt; c++)
        if (used[c]) {
            bw_buf_append(out, ",?", 2);
            cols[params++ - 1] = c;
        }
    bw_buf_append(out, ")", 1);
    if (op == BW_OP_UPSERT) upsert_tail(out, ot, used);
    return params;
}

/* One UPDATE for many rows: each column set by some row becomes
 *   col = CASE id WHEN 1 THEN v1 WHEN 7 THEN col + v7 ELSE col END
 * and WHERE id IN (…) limits it to the batch. Ids are unique (bw_sql_plan). */
static void build_update(bw_buf_t *out, const char *db, const bw_object_type_t *ot,
                         const bw_sql_row_t *rows, size_t n) {
    PUTS(out, "UPDATE ");
    append_table(out, db, ot);
    PUTS(out, " SET ");
    int first_col = 1;
    for (int c = 0; c < ot->column_cnt; c++) {
        int any = 0;
        for (size_t r = 0; r < n && !any; r++) any = row_field(&rows[r], c) != NULL;
        if (!any) continue;
        if (!first_col) bw_buf_append(out, ",", 1);
        first_col = 0;
        append_ident(out, ot->columns[c].name);
        PUTS(out, "=CASE ");
        append_ident(out, ot->id_column);
        for (size_t r = 0; r < n; r++) {
            const Bulkwrite__Internal__V1__RowField *f = row_field(&rows[r], c);
            if (!f) continue;
            PUTS(out, " WHEN ");
            bw_sql_append_u64(out, rows[r].id);
            PUTS(out, " THEN ");
            if (f->increment && ot->columns[c].increment_null_as_zero) {
                PUTS(out, "COALESCE(");
                append_ident(out, ot->columns[c].name);
                PUTS(out, ",0)+");
            } else if (f->increment) {
                append_ident(out, ot->columns[c].name);
                bw_buf_append(out, "+", 1);
            }
            bw_sql_append_value(out, f->value);
        }
        PUTS(out, " ELSE ");
        append_ident(out, ot->columns[c].name);
        PUTS(out, " END");
    }
    PUTS(out, " WHERE ");
    append_ident(out, ot->id_column);
    PUTS(out, " IN ");
    append_id_list(out, rows, n);
}

void bw_sql_build(bw_buf_t *out, const char *db, const bw_object_type_t *ot, int op,
                  const bw_sql_row_t *rows, size_t n) {
    bw_buf_reset(out);
    switch (op) {
    case BW_OP_CREATE:
    case BW_OP_UPSERT: build_insert(out, db, ot, op, rows, n); break;
    case BW_OP_UPDATE: build_update(out, db, ot, rows, n); break;
    case BW_OP_DELETE:
        PUTS(out, "DELETE FROM ");
        append_table(out, db, ot);
        PUTS(out, " WHERE ");
        append_ident(out, ot->id_column);
        PUTS(out, " IN ");
        append_id_list(out, rows, n);
        break;
    }
}
