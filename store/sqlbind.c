#include "sqlbind.h"

#include <errmsg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db.h"

/* Every bound value sits in a cell of 8 bytes, column-wise: a parameter's cells are an
 * array of int64_t, double or signed char (the client steps by the type's size), or of
 * pointers for text and binary (the client reads ((void **)buffer)[row]). */
#define CELL 8
_Static_assert(sizeof(int64_t) <= CELL && sizeof(double) <= CELL && sizeof(void *) <= CELL, "cell size");

static void *grow(void *p, size_t n, size_t size) {
    void *q = realloc(p, n * size);
    if (!q && n) abort(); /* as bw_buf: a worker that cannot allocate cannot go on */
    return q;
}

void bw_sqlbind_init(bw_sqlbind_t *sb) {
    memset(sb, 0, sizeof(*sb));
    bw_buf_init(&sb->text);
}

void bw_sqlbind_free(bw_sqlbind_t *sb) {
    bw_buf_free(&sb->text);
    free(sb->cols);
    free(sb->binds);
    free(sb->cells);
    free(sb->lens);
    free(sb->inds);
    memset(sb, 0, sizeof(*sb));
}

/* Room for `params` parameters of `rows` rows. */
static void reserve(bw_sqlbind_t *sb, size_t params, size_t rows) {
    if (params <= sb->param_cap && rows <= sb->row_cap) return;
    if (params > sb->param_cap) sb->param_cap = params;
    if (rows > sb->row_cap) sb->row_cap = rows;
    size_t cells = sb->param_cap * sb->row_cap;
    /* nothing in them outlives one execution: free and allocate, no copy */
    free(sb->cells);
    free(sb->lens);
    free(sb->inds);
    sb->cells = grow(NULL, cells, CELL);
    sb->lens = grow(NULL, cells, sizeof(*sb->lens));
    sb->inds = grow(NULL, cells, sizeof(*sb->inds));
    sb->binds = grow(sb->binds, sb->param_cap, sizeof(*sb->binds));
}

int bw_sqlbind_op_wins(int op) { return op == BW_OP_CREATE || op == BW_OP_UPSERT; }

void bw_sqlbind_cache_open(bw_sqlbind_cache_t *c, MYSQL *db) {
    memset(c, 0, sizeof(*c));
    unsigned long caps = 0, ext = 0;
    if (mariadb_get_infov(db, MARIADB_CONNECTION_SERVER_CAPABILITIES, &caps) ||
        mariadb_get_infov(db, MARIADB_CONNECTION_EXTENDED_SERVER_CAPABILITIES, &ext))
        return;
    /* the client's own test (MARIADB_STMT_BULK_SUPPORTED): a MariaDB server (no
     * CLIENT_MYSQL) announcing bulk operations in its extended capabilities */
    c->bulk = !(caps & CLIENT_MYSQL) && (ext & (MARIADB_CLIENT_STMT_BULK_OPERATIONS >> 32));
}

static void entry_close(bw_sqlbind_entry_t *e) {
    if (e->stmt) mysql_stmt_close(e->stmt);
    free(e->text);
    memset(e, 0, sizeof(*e));
}

void bw_sqlbind_cache_close(bw_sqlbind_cache_t *c) {
    for (int i = 0; i < BW_SQLBIND_CACHE; i++) entry_close(&c->entries[i]);
}

/* Copies the statement's error, which must outlive the statement. */
static void keep_error(MYSQL_STMT *stmt, unsigned *err, const char **errmsg) {
    static _Thread_local char msg[512];
    *err = mysql_stmt_errno(stmt);
    snprintf(msg, sizeof(msg), "%s", mysql_stmt_error(stmt));
    *errmsg = msg;
}

/* The statement prepared for `text`, preparing it (in the least recently used slot) if
 * needed. NULL when the server would not prepare it: *err and *errmsg say why. */
static bw_sqlbind_entry_t *cache_get(bw_sqlbind_cache_t *c, MYSQL *db, const bw_buf_t *text, unsigned *err,
                                     const char **errmsg) {
    bw_sqlbind_entry_t *lru = &c->entries[0];
    for (int i = 0; i < BW_SQLBIND_CACHE; i++) {
        bw_sqlbind_entry_t *e = &c->entries[i];
        if (e->stmt && e->len == text->len && memcmp(e->text, text->data, text->len) == 0) {
            e->used = ++c->clock;
            return e;
        }
        if (!e->stmt || (lru->stmt && e->used < lru->used)) lru = e;
    }
    entry_close(lru);
    MYSQL_STMT *stmt = mysql_stmt_init(db);
    if (!stmt) {
        *err = CR_OUT_OF_MEMORY;
        *errmsg = "mysql_stmt_init failed";
        return NULL;
    }
    if (mysql_stmt_prepare(stmt, text->data, text->len)) {
        keep_error(stmt, err, errmsg);
        mysql_stmt_close(stmt);
        return NULL;
    }
    lru->stmt = stmt;
    lru->text = grow(NULL, text->len + 1, 1);
    memcpy(lru->text, text->data, text->len + 1);
    lru->len = text->len;
    lru->used = ++c->clock;
    return lru;
}

/* ---- values: the one map from a protobuf Value to a bound MySQL value -------------- */

/* How a config column's values travel. Text goes as a string in the connection's
 * character set (utf8mb4, as the column's); binary as a BLOB, which the server takes
 * as binary (no character set conversion). */
static enum enum_field_types column_type(const bw_column_t *col) {
    switch (col->type) {
    case BW_COL_INT: return MYSQL_TYPE_LONGLONG;
    case BW_COL_DOUBLE: return MYSQL_TYPE_DOUBLE;
    case BW_COL_BOOL: return MYSQL_TYPE_TINY;
    case BW_COL_STRING: return MYSQL_TYPE_STRING;
    default: return MYSQL_TYPE_BLOB;
    }
}

/* Stores v, a value for `col`, in row r of a parameter's cells: its indicator, or -1 when
 * v does not travel as the column's type (a message written under another configuration:
 * the text statement then lets the server judge it, as it always has). Where the text
 * literal and the binary value could differ, the value is made what the server makes of
 * the literal: an int for a double column becomes the nearest double, -0.0 becomes 0. */
static int put_value(const bw_column_t *col, const Bulkwrite__V1__Value *v, unsigned char *cells,
                     unsigned long *lens, size_t r) {
    static const char empty[1] = "";
    int kind = v ? (int)v->kind_case : BULKWRITE__V1__VALUE__KIND__NOT_SET;
    if (kind == BULKWRITE__V1__VALUE__KIND__NOT_SET || kind == BULKWRITE__V1__VALUE__KIND_NULL_VALUE)
        return STMT_INDICATOR_NULL;
    switch (col->type) {
    case BW_COL_INT:
        if (kind != BULKWRITE__V1__VALUE__KIND_INT_VALUE) return -1;
        ((int64_t *)(void *)cells)[r] = v->int_value;
        return STMT_INDICATOR_NONE;
    case BW_COL_DOUBLE:
        if (kind == BULKWRITE__V1__VALUE__KIND_INT_VALUE) ((double *)(void *)cells)[r] = (double)v->int_value;
        /* -0.0 as +0.0: the text literal -0 reads back as 0, and a row lands the same by
         * either path (a refused statement's rows go again as text) */
        else if (kind == BULKWRITE__V1__VALUE__KIND_DOUBLE_VALUE)
            ((double *)(void *)cells)[r] = v->double_value == 0 ? 0.0 : v->double_value;
        else return -1;
        return STMT_INDICATOR_NONE;
    case BW_COL_BOOL:
        if (kind != BULKWRITE__V1__VALUE__KIND_BOOL_VALUE) return -1;
        ((signed char *)cells)[r] = v->bool_value ? 1 : 0;
        return STMT_INDICATOR_NONE;
    case BW_COL_STRING:
    case BW_COL_BYTES: {
        const ProtobufCBinaryData *d;
        if (col->type == BW_COL_STRING && kind == BULKWRITE__V1__VALUE__KIND_STRING_VALUE) d = &v->string_value;
        else if (col->type == BW_COL_BYTES && kind == BULKWRITE__V1__VALUE__KIND_BYTES_VALUE) d = &v->bytes_value;
        else return -1;
        ((const void **)(void *)cells)[r] = d->len ? (const void *)d->data : (const void *)empty;
        lens[r] = (unsigned long)d->len;
        return STMT_INDICATOR_NONE;
    }
    }
    return -1;
}

/* Fills the bind arrays with rows[0..n) over the placeholders of sb->cols (params - 1 of
 * them after the id). -1 when some value does not travel bound. */
static int fill(bw_sqlbind_t *sb, const bw_object_type_t *ot, const bw_sql_row_t *rows, size_t n, size_t params,
                int *param_of) {
    size_t rc = sb->row_cap;
    for (size_t p = 0; p < params; p++) {
        MYSQL_BIND *b = &sb->binds[p];
        memset(b, 0, sizeof(*b));
        b->buffer = sb->cells + p * rc * CELL;
        b->length = sb->lens + p * rc;
        b->u.indicator = sb->inds + p * rc;
        if (p == 0) {
            b->buffer_type = MYSQL_TYPE_LONGLONG;
            b->is_unsigned = 1;
        } else {
            b->buffer_type = column_type(&ot->columns[sb->cols[p - 1]]);
        }
    }
    for (size_t r = 0; r < n; r++) {
        /* the id, or DEFAULT (AUTO_INCREMENT) for a CREATE without one */
        ((uint64_t *)(void *)sb->cells)[r] = rows[r].id;
        sb->inds[r] = rows[r].id ? STMT_INDICATOR_NONE : STMT_INDICATOR_DEFAULT;
        for (size_t p = 1; p < params; p++) sb->inds[p * rc + r] = STMT_INDICATOR_DEFAULT; /* left out */
        for (size_t i = 0; i < rows[r].field_cnt; i++) {
            const Bulkwrite__Internal__V1__RowField *f = rows[r].fields[i];
            int c = rows[r].colmap[f->column];
            size_t p = (size_t)param_of[c];
            int ind = put_value(&ot->columns[c], f->value, sb->cells + p * rc * CELL, sb->lens + p * rc, r);
            if (ind < 0) return -1;
            sb->inds[p * rc + r] = (char)ind;
        }
    }
    return 0;
}

bw_sqlbind_status_t bw_sqlbind_execute(bw_sqlbind_t *sb, bw_sqlbind_cache_t *c, MYSQL *db, const char *dbname,
                                       const bw_object_type_t *ot, int op, const bw_sql_row_t *rows, size_t n,
                                       unsigned *err, const char **errmsg) {
    if (!c->bulk || !bw_sqlbind_op_wins(op) || n == 0) return BW_SQLBIND_TEXT;
    if (sb->col_cap < (size_t)ot->column_cnt * 2) {
        sb->col_cap = (size_t)ot->column_cnt * 2;
        sb->cols = grow(sb->cols, sb->col_cap, sizeof(*sb->cols));
    }
    size_t params = bw_sql_build_prepared(&sb->text, dbname, ot, op, rows, n, sb->cols);
    int *param_of = sb->cols + ot->column_cnt; /* config column -> placeholder */
    for (size_t p = 1; p < params; p++) param_of[sb->cols[p - 1]] = (int)p;
    reserve(sb, params, n);
    if (fill(sb, ot, rows, n, params, param_of)) return BW_SQLBIND_TEXT;

    bw_sqlbind_entry_t *e = cache_get(c, db, &sb->text, err, errmsg);
    if (!e) /* a lost connection fails as the text would; a refusal lets the text decide */
        return bw_db_error_is_client(*err) ? BW_SQLBIND_ERROR : BW_SQLBIND_TEXT;
    unsigned int size = (unsigned int)n;
    if (mysql_stmt_attr_set(e->stmt, STMT_ATTR_ARRAY_SIZE, &size) || mysql_stmt_bind_param(e->stmt, sb->binds) ||
        mysql_stmt_execute(e->stmt)) {
        keep_error(e->stmt, err, errmsg);
        /* a row's data leaves the statement sound; anything else (a lost connection, a
         * table changed under it: 1615) prepares it again next time */
        if (bw_db_error_class(*err) != BW_FAIL_DATA) entry_close(e);
        return BW_SQLBIND_ERROR;
    }
    return BW_SQLBIND_OK;
}
