/* helpers.c — see helpers.h. */
#include "helpers.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "db.h"

const char *t_ref_conf_path(void) {
    const char *p = getenv("BW_TEST_CONF");
    return p && *p ? p : "conf/bulkwrite.conf";
}

const char *t_ref_conf_text(void) {
    static char *text;
    if (text) return text;
    FILE *f = fopen(t_ref_conf_path(), "rb");
    ck_assert_msg(f != NULL, "cannot open %s (run from the repository root)", t_ref_conf_path());
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    text = malloc((size_t)n + 1);
    ck_assert_uint_eq(fread(text, 1, (size_t)n, f), (size_t)n);
    text[n] = '\0';
    fclose(f);
    return text;
}

char *t_write_temp(const char *text) {
    const char *dir = getenv("TMPDIR");
    if (!dir || !*dir) dir = "/tmp";
    size_t plen = strlen(dir) + 64;
    char *path = malloc(plen);
    snprintf(path, plen, "%s/bw-unit-XXXXXX.conf", dir);
    int fd = mkstemps(path, 5);
    ck_assert_msg(fd >= 0, "mkstemps %s failed", path);
    size_t len = strlen(text);
    ck_assert_int_eq(write(fd, text, len), (ssize_t)len);
    close(fd);
    return path;
}

void t_unlink_free(char *path) {
    if (!path) return;
    unlink(path);
    free(path);
}

int t_line_of(const char *text, const char *after, const char *needle) {
    const char *from = text;
    if (after) {
        from = strstr(text, after);
        if (!from) return 0;
    }
    const char *at = strstr(from, needle);
    if (!at) return 0;
    int line = 1;
    for (const char *p = text; p < at; p++) line += *p == '\n';
    return line;
}

char *t_conf_variant(const char *find, const char *repl, int *line) {
    const char *ref = t_ref_conf_text();
    const char *at = strstr(ref, find);
    ck_assert_msg(at != NULL, "reference config lacks \"%s\"", find);
    if (line) *line = t_line_of(ref, NULL, find);
    size_t pre = (size_t)(at - ref), flen = strlen(find), rlen = strlen(repl);
    size_t total = strlen(ref) - flen + rlen;
    char *text = malloc(total + 1);
    memcpy(text, ref, pre);
    memcpy(text + pre, repl, rlen);
    strcpy(text + pre + rlen, at + flen);
    char *path = t_write_temp(text);
    free(text);
    return path;
}

bw_config_t *t_ref_config(void) {
    char err[1024] = "";
    bw_config_t *c = bw_config_load(t_ref_conf_path(), err, sizeof(err));
    ck_assert_msg(c != NULL, "reference config does not load: %s", err);
    return c;
}

bw_config_t *t_conf_variant_load(const char *find, const char *repl) {
    char *path = t_conf_variant(find, repl, NULL);
    char err[1024] = "";
    bw_config_t *c = bw_config_load(path, err, sizeof(err));
    t_unlink_free(path);
    ck_assert_msg(c != NULL, "config variant does not load: %s", err);
    return c;
}

/* ---- request builder ------------------------------------------------------------- */

void t_req_init(t_req_t *r, bw_arena_t *a, size_t cap_ops) {
    r->a = a;
    r->cap = cap_ops;
    r->req = bw_arena_alloc(a, sizeof(*r->req));
    bulkwrite__v1__batch_write_request__init(r->req);
    r->req->ops = bw_arena_alloc(a, (cap_ops + 1) * sizeof(*r->req->ops));
}

Bulkwrite__V1__Op *t_op(t_req_t *r, int op, const char *type, uint64_t id, const char *shard_key) {
    ck_assert_uint_lt(r->req->n_ops, r->cap);
    Bulkwrite__V1__Op *o = bw_arena_alloc(r->a, sizeof(*o));
    bulkwrite__v1__op__init(o);
    o->op = (Bulkwrite__V1__OpType)op;
    o->object_type = bw_arena_strndup(r->a, type, strlen(type));
    o->id = id;
    if (shard_key) o->shard_key = bw_arena_strndup(r->a, shard_key, strlen(shard_key));
    o->fields = bw_arena_alloc(r->a, 16 * sizeof(*o->fields));
    r->req->ops[r->req->n_ops++] = o;
    return o;
}

Bulkwrite__V1__Field *t_field(t_req_t *r, Bulkwrite__V1__Op *op, const char *name) {
    ck_assert_uint_lt(op->n_fields, 16);
    Bulkwrite__V1__Field *f = bw_arena_alloc(r->a, sizeof(*f));
    bulkwrite__v1__field__init(f);
    f->name = bw_arena_strndup(r->a, name, strlen(name));
    f->value = bw_arena_alloc(r->a, sizeof(*f->value));
    bulkwrite__v1__value__init(f->value);
    op->fields[op->n_fields++] = f;
    return f;
}

void t_f_int(t_req_t *r, Bulkwrite__V1__Op *op, const char *name, int64_t v) {
    Bulkwrite__V1__Field *f = t_field(r, op, name);
    f->value->kind_case = BULKWRITE__V1__VALUE__KIND_INT_VALUE;
    f->value->int_value = v;
}
void t_f_inc(t_req_t *r, Bulkwrite__V1__Op *op, const char *name, int64_t v) {
    t_f_int(r, op, name, v);
    op->fields[op->n_fields - 1]->increment = 1;
}
void t_f_dbl(t_req_t *r, Bulkwrite__V1__Op *op, const char *name, double v) {
    Bulkwrite__V1__Field *f = t_field(r, op, name);
    f->value->kind_case = BULKWRITE__V1__VALUE__KIND_DOUBLE_VALUE;
    f->value->double_value = v;
}
void t_f_bool(t_req_t *r, Bulkwrite__V1__Op *op, const char *name, int v) {
    Bulkwrite__V1__Field *f = t_field(r, op, name);
    f->value->kind_case = BULKWRITE__V1__VALUE__KIND_BOOL_VALUE;
    f->value->bool_value = v != 0;
}
void t_f_null(t_req_t *r, Bulkwrite__V1__Op *op, const char *name) {
    Bulkwrite__V1__Field *f = t_field(r, op, name);
    f->value->kind_case = BULKWRITE__V1__VALUE__KIND_NULL_VALUE;
    f->value->null_value = 1;
}
void t_f_str(t_req_t *r, Bulkwrite__V1__Op *op, const char *name, const void *s, size_t len) {
    Bulkwrite__V1__Field *f = t_field(r, op, name);
    f->value->kind_case = BULKWRITE__V1__VALUE__KIND_STRING_VALUE;
    f->value->string_value.data = (uint8_t *)bw_arena_strndup(r->a, s, len);
    f->value->string_value.len = len;
}
void t_f_bytes(t_req_t *r, Bulkwrite__V1__Op *op, const char *name, const void *s, size_t len) {
    Bulkwrite__V1__Field *f = t_field(r, op, name);
    f->value->kind_case = BULKWRITE__V1__VALUE__KIND_BYTES_VALUE;
    f->value->bytes_value.data = (uint8_t *)bw_arena_strndup(r->a, s, len);
    f->value->bytes_value.len = len;
}

char *t_idstr(t_req_t *r, uint64_t id) {
    char buf[32];
    snprintf(buf, sizeof(buf), "%" PRIu64, id);
    return bw_arena_strndup(r->a, buf, strlen(buf));
}

/* ---- deep equality --------------------------------------------------------------- */

int t_value_eq(const Bulkwrite__V1__Value *a, const Bulkwrite__V1__Value *b) {
    int ka = a ? (int)a->kind_case : 0, kb = b ? (int)b->kind_case : 0;
    if (ka != kb) return 0;
    switch (ka) {
    case 0: return 1;
    case BULKWRITE__V1__VALUE__KIND_NULL_VALUE: return 1;
    case BULKWRITE__V1__VALUE__KIND_INT_VALUE: return a->int_value == b->int_value;
    case BULKWRITE__V1__VALUE__KIND_DOUBLE_VALUE:
        return memcmp(&a->double_value, &b->double_value, sizeof(double)) == 0;
    case BULKWRITE__V1__VALUE__KIND_BOOL_VALUE: return !a->bool_value == !b->bool_value;
    case BULKWRITE__V1__VALUE__KIND_STRING_VALUE:
        return a->string_value.len == b->string_value.len &&
               (a->string_value.len == 0 ||
                memcmp(a->string_value.data, b->string_value.data, a->string_value.len) == 0);
    case BULKWRITE__V1__VALUE__KIND_BYTES_VALUE:
        return a->bytes_value.len == b->bytes_value.len &&
               (a->bytes_value.len == 0 ||
                memcmp(a->bytes_value.data, b->bytes_value.data, a->bytes_value.len) == 0);
    }
    return 0;
}

static const char *nz(const char *s) { return s ? s : ""; }

int t_request_eq(const Bulkwrite__V1__BatchWriteRequest *a, const Bulkwrite__V1__BatchWriteRequest *b,
                 char *why, size_t why_size) {
#define DIFF(...) do { snprintf(why, why_size, __VA_ARGS__); return 0; } while (0)
    if (strcmp(nz(a->request_id), nz(b->request_id))) DIFF("request_id");
    if (a->n_ops != b->n_ops) DIFF("n_ops %zu vs %zu", a->n_ops, b->n_ops);
    for (size_t i = 0; i < a->n_ops; i++) {
        const Bulkwrite__V1__Op *x = a->ops[i], *y = b->ops[i];
        if (x->op != y->op) DIFF("ops[%zu].op", i);
        if (strcmp(nz(x->object_type), nz(y->object_type))) DIFF("ops[%zu].object_type", i);
        if (x->id != y->id) DIFF("ops[%zu].id", i);
        if (strcmp(nz(x->shard_key), nz(y->shard_key))) DIFF("ops[%zu].shard_key", i);
        if (x->n_fields != y->n_fields) DIFF("ops[%zu].n_fields", i);
        for (size_t f = 0; f < x->n_fields; f++) {
            if (strcmp(nz(x->fields[f]->name), nz(y->fields[f]->name))) DIFF("ops[%zu].fields[%zu].name", i, f);
            if (!x->fields[f]->increment != !y->fields[f]->increment) DIFF("ops[%zu].fields[%zu].increment", i, f);
            if (!t_value_eq(x->fields[f]->value, y->fields[f]->value)) DIFF("ops[%zu].fields[%zu].value", i, f);
        }
    }
    return 1;
#undef DIFF
}

bw_config_t *t_live_config(const char *database_prefix) {
    const char *port = getenv("BW_TEST_MYSQL_PORT");
    if (!port || !*port) {
        fprintf(stderr, "NOTE: BW_TEST_MYSQL_PORT is unset: skipping a live MariaDB test "
                        "(test/run-unit.sh starts a server and sets it)\n");
        return NULL;
    }
    const char *ot = strstr(t_ref_conf_text(), "object_types = (");
    ck_assert_ptr_nonnull(ot);
    size_t cap = strlen(ot) + 1024;
    char *text = malloc(cap);
    snprintf(text, cap,
             "shards = { count = 2; database_prefix = \"%s\"; default_rate = 0.0;\n"
             "  servers = ( { name = \"local\"; host = \"127.0.0.1\"; port = %s; user = \"root\";\n"
             "                password = \"\"; first_shard = 0; last_shard = 1; } ); };\n"
             "mysql = { query_timeout_ms = 20000; connect_timeout_ms = 5000; };\n%s",
             database_prefix, port, ot);
    char *path = t_write_temp(text);
    free(text);
    char err[1024] = "";
    bw_config_t *conf = bw_config_load(path, err, sizeof(err));
    t_unlink_free(path);
    ck_assert_msg(conf != NULL, "live config: %s", err);
    ck_assert_msg(bw_db_apply_schema(conf, err, sizeof(err)) == BW_OK, "schema: %s", err);
    ck_assert_msg(bw_db_apply_schema(conf, err, sizeof(err)) == BW_OK, "schema again: %s", err);
    return conf;
}

long long t_scalar(MYSQL *db, const char *sql) {
    ck_assert_msg(mysql_query(db, sql) == 0, "%s: %s", sql, mysql_error(db));
    MYSQL_RES *r = mysql_store_result(db);
    MYSQL_ROW row = mysql_fetch_row(r);
    long long v = row && row[0] ? atoll(row[0]) : -1;
    mysql_free_result(r);
    return v;
}

static Bulkwrite__V1__Value *t_v_new(bw_arena_t *a, int kind) {
    Bulkwrite__V1__Value *v = bw_arena_alloc(a, sizeof(*v));
    bulkwrite__v1__value__init(v);
    v->kind_case = (Bulkwrite__V1__Value__KindCase)kind;
    return v;
}
Bulkwrite__V1__Value *t_v_int(bw_arena_t *a, int64_t x) {
    Bulkwrite__V1__Value *v = t_v_new(a, BULKWRITE__V1__VALUE__KIND_INT_VALUE);
    v->int_value = x;
    return v;
}
Bulkwrite__V1__Value *t_v_dbl(bw_arena_t *a, double x) {
    Bulkwrite__V1__Value *v = t_v_new(a, BULKWRITE__V1__VALUE__KIND_DOUBLE_VALUE);
    v->double_value = x;
    return v;
}
Bulkwrite__V1__Value *t_v_bool(bw_arena_t *a, int x) {
    Bulkwrite__V1__Value *v = t_v_new(a, BULKWRITE__V1__VALUE__KIND_BOOL_VALUE);
    v->bool_value = x;
    return v;
}
Bulkwrite__V1__Value *t_v_null(bw_arena_t *a) {
    Bulkwrite__V1__Value *v = t_v_new(a, BULKWRITE__V1__VALUE__KIND_NULL_VALUE);
    v->null_value = 1;
    return v;
}
static Bulkwrite__V1__Value *t_v_data(bw_arena_t *a, int kind, const void *s, size_t len) {
    Bulkwrite__V1__Value *v = t_v_new(a, kind);
    ProtobufCBinaryData *d = kind == BULKWRITE__V1__VALUE__KIND_STRING_VALUE ? &v->string_value : &v->bytes_value;
    d->data = (uint8_t *)bw_arena_strndup(a, s, len);
    d->len = len;
    return v;
}
Bulkwrite__V1__Value *t_v_str(bw_arena_t *a, const void *s, size_t len) {
    return t_v_data(a, BULKWRITE__V1__VALUE__KIND_STRING_VALUE, s, len);
}
Bulkwrite__V1__Value *t_v_bytes(bw_arena_t *a, const void *s, size_t len) {
    return t_v_data(a, BULKWRITE__V1__VALUE__KIND_BYTES_VALUE, s, len);
}
