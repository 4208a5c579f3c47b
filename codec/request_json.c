/* request_json.c — the JSON request decoder (request_decode.h): yajl's callbacks build
 * the structs token by token, each member as its row in request_schema.h says. */
#include "request_decode.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yajl/yajl_parse.h>

#include "apijson.h"
#include "bw.h"
#include "config.h"
#include "request_schema.h"
#include "shard.h"
#include "utf8.h"

/* ---- op words ------------------------------------------------------------------------ */

static int parse_op_word(const char *s) {
    for (int i = 1; i < BW_OP_MAX; i++)
        if (strcasecmp(s, bw_op_name(i)) == 0) return i;
    return -1;
}

/* ---- JSON -> protobuf-c structs, streaming ----------------------------------------------
 *
 * yajl (Debian's libyajl) reads the body as a stream of events and calls back for each
 * token; the callbacks below build the request's structs as the tokens arrive, with no
 * document tree in between (jansson built one, with a malloc per node, and spent most
 * of the JSON path's time building and freeing it). What is accepted is what jansson
 * accepted: no duplicate keys, no NUL in a key, UTF-8 text (checked by bw_utf8_valid),
 * integers within 64 bits. */

typedef enum {
    X_ROOT,        /* the body's value */
    X_TOP_KEY,     /* a member of the request, or its end */
    X_TOP_VALUE,   /* the value of the request's member x->member */
    X_TOP_ITEM,    /* a string in that member's array (BW_MEMBER_NAMES), or its end */
    X_OP_ITEM,     /* an op, or the end of ops */
    X_OP_KEY,      /* a member of an op, or its end */
    X_OP_VALUE,    /* the value of the op's member x->member */
    X_FIELD_KEY,   /* a field's name, or the end of fields */
    X_FIELD_VALUE, /* a field's value */
    X_WRAP_KEY,    /* the one member of {"base64": ...} or {"increment": ...} */
    X_WRAP_B64,
    X_WRAP_INC,
    X_WRAP_END, /* the end of that object */
    X_DONE,
} json_expect_t;

typedef struct {
    bw_arena_t *a;
    const bw_schema_t *top, *ops; /* the request's members, an op's */
    Bulkwrite__V1__BatchWriteRequest *req;
    json_expect_t expect;
    int member; /* the row (of top or ops) whose value is read */
    unsigned seen_top, seen_op; /* the rows given so far (bit i: row i), to refuse duplicates */
    size_t ops_cap;
    size_t list_cap; /* room in the BW_MEMBER_NAMES list being read */
    Bulkwrite__V1__Op *op; /* the op being read */
    Bulkwrite__V1__Field *field; /* the field whose value is read */
    Bulkwrite__V1__Field **fields; /* the current op's fields, grown by doubling */
    size_t fields_cap;
    uint32_t *names; /* past 16 fields: a hash set of their indices + 1, to refuse duplicates */
    size_t names_cap;
    size_t max_ops; /* one more stops the parse before its struct is built */
    int too_many;
    char *err; /* what is wrong, when a callback stops the parse */
    size_t esz;
    int malformed; /* err is a syntax-level fault: reported as malformed JSON with its position */
    size_t one_value; /* bw_json_op_read: 1, one op a text (0: any number) */
} json_ctx_t;

typedef struct {
    Bulkwrite__V1__Field f;
    Bulkwrite__V1__Value v;
} json_field_block_t;

#define JFAIL(...) do { snprintf(x->err, x->esz, __VA_ARGS__); return 0; } while (0)
#define JMALFORMED(...) do { x->malformed = 1; snprintf(x->err, x->esz, __VA_ARGS__); return 0; } while (0)

static size_t json_op_index(const json_ctx_t *x) { return x->req->n_ops ? x->req->n_ops - 1 : 0; }

/* The row whose value is read, and what it is. */
static const bw_member_t *json_member(const json_ctx_t *x) {
    return &(x->expect == X_OP_VALUE ? x->ops : x->top)->members[x->member];
}
static bw_member_kind_t json_kind(const json_ctx_t *x) { return json_member(x)->kind; }

/* Where the struct keeps the value of the row being read. */
static void *json_slot(const json_ctx_t *x) {
    if (x->expect == X_OP_VALUE) return bw_schema_value(x->ops, x->op, x->member);
    return bw_schema_value(x->top, x->req, x->member);
}

/* "unknown or mistyped member "name" (what it should be)", for a request's member. */
static int json_top_refused(json_ctx_t *x, const unsigned char *name, size_t len, const char *mistyped) {
    char expected[512] = "";
    if (mistyped) snprintf(expected, sizeof(expected), "(%s)", mistyped);
    else bw_schema_expected(x->top, expected, sizeof(expected));
    JFAIL("unknown or mistyped member \"%.*s\" %s", (int)(len > 100 ? 100 : len), (const char *)name, expected);
}

/* A value where it does not belong: the message names the member at fault. */
static int json_mistyped(json_ctx_t *x, const char *what) {
    size_t i = json_op_index(x);
    switch (x->expect) {
    case X_ROOT: JFAIL("the body must be a JSON object {\"ops\": [...]}");
    case X_TOP_VALUE:
    case X_TOP_ITEM: {
        const bw_member_t *m = json_member(x);
        return json_top_refused(x, (const unsigned char *)m->name, strlen(m->name), m->mistyped);
    }
    case X_OP_ITEM: JFAIL("ops[%zu]: not an object", x->req->n_ops);
    case X_OP_VALUE: JFAIL("ops[%zu].%s: not %s", i, json_member(x)->name, json_member(x)->type);
    case X_FIELD_VALUE: JFAIL("ops[%zu].fields: field \"%s\": %s are not values", i, x->field->name, what);
    case X_WRAP_KEY:
    case X_WRAP_B64:
    case X_WRAP_INC:
    case X_WRAP_END:
        JFAIL("ops[%zu].fields: field \"%s\": an object value must be {\"base64\": \"...\"} or {\"increment\": number}",
              i, x->field->name);
    default: JMALFORMED("unexpected %s", what);
    }
}

/* The value of the field being read (or of its {"increment": ...}: whatever its type,
 * as protobuf carries it, so validation rejects a wrong-typed increment alone), and
 * where the next token goes after it. */
static Bulkwrite__V1__Value *json_field_value(json_ctx_t *x) {
    if (x->expect == X_WRAP_INC) {
        x->field->increment = 1;
        x->expect = X_WRAP_END;
    } else {
        x->expect = X_FIELD_KEY;
    }
    return x->field->value;
}

const char *bw_json_op_fault(const Bulkwrite__V1__Op *op) { return ((const bw_json_op_t *)op)->fault; }

/* The current op cannot be accepted (its first fault is kept); the parse goes on. */
#define JOP_FAULT(...)                                                          \
    do {                                                                        \
        bw_json_op_t *jo_ = (bw_json_op_t *)x->op;                              \
        if (!jo_->fault) {                                                      \
            char why_[256];                                                     \
            snprintf(why_, sizeof(why_), __VA_ARGS__);                          \
            jo_->fault = bw_arena_strndup(x->a, why_, strlen(why_));            \
        }                                                                       \
    } while (0)

static int j_null(void *ctx) {
    json_ctx_t *x = ctx;
    if (x->expect != X_FIELD_VALUE && x->expect != X_WRAP_INC) return json_mistyped(x, "null");
    Bulkwrite__V1__Value *v = json_field_value(x);
    v->kind_case = BULKWRITE__V1__VALUE__KIND_NULL_VALUE;
    v->null_value = 1;
    return 1;
}

static int j_bool(void *ctx, int b) {
    json_ctx_t *x = ctx;
    if (x->expect == X_TOP_VALUE && json_kind(x) == BW_MEMBER_BOOL) {
        *(protobuf_c_boolean *)json_slot(x) = b != 0;
        x->expect = X_TOP_KEY;
        return 1;
    }
    if (x->expect != X_FIELD_VALUE && x->expect != X_WRAP_INC) return json_mistyped(x, "booleans");
    Bulkwrite__V1__Value *v = json_field_value(x);
    v->kind_case = BULKWRITE__V1__VALUE__KIND_BOOL_VALUE;
    v->bool_value = b != 0;
    return 1;
}

/* Up to 18 decimal digits, with an optional '-': the value, which cannot overflow (ids
 * and counts, nearly every number of a request, read without a copy or strtoll). */
static int short_decimal(const char *s, size_t len, long long *out) {
    size_t i = len && s[0] == '-';
    if (len <= i || len - i > 18) return 0;
    long long v = 0;
    for (size_t k = i; k < len; k++) {
        if (s[k] < '0' || s[k] > '9') return 0;
        v = v * 10 + (s[k] - '0');
    }
    *out = i ? -v : v;
    return 1;
}

/* A JSON number as jansson read it: an integer (no fraction, no exponent) must fit in
 * 64 bits; a real must be finite. Where the number is an op's id or a field's value, a
 * number protobuf could not carry there rejects that op alone (bw_json_op_t); anywhere
 * else the request is refused. */
static int j_number(void *ctx, const char *s, size_t len) {
    json_ctx_t *x = ctx;
    long long iv = 0;
    double dv = 0;
    int is_id = x->expect == X_OP_VALUE && json_kind(x) == BW_MEMBER_ID;
    int is_int = short_decimal(s, len, &iv), in_op = is_id || x->expect == X_FIELD_VALUE || x->expect == X_WRAP_INC;
    if (!is_int) {
        char small[64], *text = len < sizeof(small) ? small : bw_arena_alloc(x->a, len + 1);
        memcpy(text, s, len);
        text[len] = '\0';
        is_int = !memchr(s, '.', len) && !memchr(s, 'e', len) && !memchr(s, 'E', len);
        errno = 0;
        if (is_int) {
            iv = strtoll(text, NULL, 10);
            if (errno == ERANGE && is_id) {
                /* 2^63 and up: an id as protobuf's uint64 carries it (validation then
                 * names its top bits); past 2^64 - 1 the op is rejected here */
                errno = 0;
                unsigned long long uv = text[0] == '-' ? 0 : strtoull(text, NULL, 10);
                if (text[0] == '-' || errno == ERANGE)
                    JOP_FAULT("%s %.40s is not an unsigned 64-bit integer", json_member(x)->name, text);
                else *(uint64_t *)json_slot(x) = (uint64_t)uv;
                x->expect = X_OP_KEY;
                return 1;
            }
            if (errno == ERANGE && in_op) {
                JOP_FAULT("field \"%.64s\": %.40s is out of the signed 64-bit range", x->field->name, text);
                (void)json_field_value(x);
                return 1;
            }
            if (errno == ERANGE) JMALFORMED("too big integer near '%.40s'", text);
        } else {
            dv = strtod(text, NULL);
            if (errno == ERANGE && (dv == HUGE_VAL || dv == -HUGE_VAL)) {
                if (x->expect == X_FIELD_VALUE || x->expect == X_WRAP_INC) {
                    JOP_FAULT("field \"%.64s\": %.40s is out of the double range", x->field->name, text);
                    (void)json_field_value(x);
                    return 1;
                }
                if (!is_id) JMALFORMED("real number overflow near '%.40s'", text);
            }
        }
    }
    Bulkwrite__V1__Value *v;
    int shown = (int)(len > 40 ? 40 : len);
    switch (x->expect) {
    case X_TOP_VALUE:
        if (json_kind(x) == BW_MEMBER_TIME_MS) {
            if (!is_int || iv < 0)
                JFAIL("%s %.*s is not a time (ms since the Unix epoch, or \"YYYY-MM-DDTHH:MM:SSZ\")",
                      json_member(x)->name, shown, s);
            *(int64_t *)json_slot(x) = iv;
        } else if (json_kind(x) == BW_MEMBER_UINT32) {
            if (!is_int || iv < 0 || iv > (long long)UINT32_MAX)
                JFAIL("%s %.*s is not an integer from 0 to 4294967295", json_member(x)->name, shown, s);
            *(uint32_t *)json_slot(x) = (uint32_t)iv;
        } else {
            return json_mistyped(x, "numbers");
        }
        x->expect = X_TOP_KEY;
        return 1;
    case X_OP_VALUE:
        if (!is_id) return json_mistyped(x, "numbers");
        if (!is_int || iv < 0) JOP_FAULT("%s %.*s is not an unsigned 64-bit integer", json_member(x)->name, shown, s);
        else *(uint64_t *)json_slot(x) = (uint64_t)iv;
        x->expect = X_OP_KEY;
        return 1;
    case X_WRAP_INC:
    case X_FIELD_VALUE: v = json_field_value(x); break;
    default: return json_mistyped(x, "numbers");
    }
    if (is_int) {
        v->kind_case = BULKWRITE__V1__VALUE__KIND_INT_VALUE;
        v->int_value = iv;
    } else {
        v->kind_case = BULKWRITE__V1__VALUE__KIND_DOUBLE_VALUE;
        v->double_value = dv;
    }
    return 1;
}

/* A string as C string: cut at an embedded NUL, as the members that are names were. */
static char *json_cstring(json_ctx_t *x, const unsigned char *s, size_t len) {
    return bw_arena_strndup(x->a, (const char *)s, strnlen((const char *)s, len));
}

/* An id (BW_MEMBER_ID) may also be a decimal string (for clients whose numbers are
 * doubles); any other string rejects the op. */
static int json_id_string(json_ctx_t *x, const unsigned char *s, size_t len) {
    uint64_t v;
    if (!bw_id_digits((const char *)s, len, &v)) { /* a 20-digit id, or not a number */
        const char *t = json_cstring(x, s, len);
        char *end;
        errno = 0;
        v = *t >= '0' && *t <= '9' ? strtoull(t, &end, 10) : 0;
        if (*t < '0' || *t > '9' || *end || errno == ERANGE || strlen(t) < len) {
            /* cut at 40 bytes; the rejection's text is made UTF-8 again (bw_utf8_sanitize) */
            JOP_FAULT("%s \"%.40s\" is not an unsigned 64-bit integer", json_member(x)->name, t);
            x->expect = X_OP_KEY;
            return 1;
        }
    }
    *(uint64_t *)json_slot(x) = v;
    x->expect = X_OP_KEY;
    return 1;
}

/* A name (BW_MEMBER_NAME, or one of a BW_MEMBER_NAMES list) as a C string, or NULL with
 * the request refused: a NUL would cut it short (two different names, one job). */
static char *json_name(json_ctx_t *x, const unsigned char *s, size_t len) {
    const unsigned char *nul = memchr(s, 0, len);
    if (!nul) return json_cstring(x, s, len);
    snprintf(x->err, x->esz, "%s contains a control character (NUL) at byte %zu", json_member(x)->name,
             (size_t)(nul - s));
    return NULL;
}

/* A string value of the request's member being read. */
static int json_top_string(json_ctx_t *x, const unsigned char *s, size_t len) {
    char *t;
    int64_t secs;
    switch (json_kind(x)) {
    case BW_MEMBER_NAME:
        if (!(t = json_name(x, s, len))) return 0;
        *(char **)json_slot(x) = t;
        break;
    case BW_MEMBER_TIME_MS:
        t = json_cstring(x, s, len);
        if (strlen(t) != len || bw_utc_time_parse(t, &secs))
            JFAIL("%s \"%.40s\" is not a UTC time \"YYYY-MM-DDTHH:MM:SSZ\" (or ms since the Unix epoch)",
                  json_member(x)->name, t);
        *(int64_t *)json_slot(x) = secs * 1000;
        break;
    default: return json_mistyped(x, "strings");
    }
    x->expect = X_TOP_KEY;
    return 1;
}

/* A string in the list (BW_MEMBER_NAMES) being read, appended to it. */
static int json_list_string(json_ctx_t *x, const unsigned char *s, size_t len) {
    char *t = json_name(x, s, len);
    if (!t) return 0;
    char ***list = json_slot(x);
    size_t *n = bw_schema_count(x->top, x->req, x->member);
    if (*n == x->list_cap) {
        x->list_cap = x->list_cap ? x->list_cap * 2 : 4;
        char **grown = bw_arena_alloc(x->a, x->list_cap * sizeof(*grown));
        if (*n) memcpy(grown, *list, *n * sizeof(*grown));
        *list = grown;
    }
    (*list)[(*n)++] = t;
    return 1;
}

/* A string value of the op's member being read. */
static int json_op_string(json_ctx_t *x, const unsigned char *s, size_t len) {
    switch (json_kind(x)) {
    case BW_MEMBER_OP_WORD: {
        char word[16];
        size_t n = strnlen((const char *)s, len);
        int w = -1;
        if (n < sizeof(word)) {
            memcpy(word, s, n);
            word[n] = '\0';
            w = parse_op_word(word);
        }
        /* unknown words decode to OP_TYPE_UNSPECIFIED so validation rejects the op alone */
        *(Bulkwrite__V1__OpType *)json_slot(x) = w > 0 ? (Bulkwrite__V1__OpType)w
                                                       : BULKWRITE__V1__OP_TYPE__OP_TYPE_UNSPECIFIED;
        break;
    }
    case BW_MEMBER_TEXT: *(char **)json_slot(x) = json_cstring(x, s, len); break;
    case BW_MEMBER_ID: return json_id_string(x, s, len);
    default: return json_mistyped(x, "strings");
    }
    x->expect = X_OP_KEY;
    return 1;
}

static int j_string(void *ctx, const unsigned char *s, size_t len) {
    json_ctx_t *x = ctx;
    if (!bw_utf8_valid(s, len)) JMALFORMED("invalid UTF-8 in a string");
    switch (x->expect) {
    case X_TOP_VALUE: return json_top_string(x, s, len);
    case X_TOP_ITEM: return json_list_string(x, s, len);
    case X_OP_VALUE: return json_op_string(x, s, len);
    case X_WRAP_INC:
    case X_FIELD_VALUE: {
        Bulkwrite__V1__Value *v = json_field_value(x);
        v->kind_case = BULKWRITE__V1__VALUE__KIND_STRING_VALUE;
        v->string_value.data = (uint8_t *)bw_arena_strndup(x->a, (const char *)s, len);
        v->string_value.len = len;
        return 1;
    }
    case X_WRAP_B64: {
        Bulkwrite__V1__Value *v = x->field->value;
        uint8_t *data = bw_arena_alloc(x->a, len * 3 / 4 + 3);
        long n = bw_base64_decode((const char *)s, len, data);
        if (n < 0) JFAIL("ops[%zu].fields: field \"%s\": invalid base64", json_op_index(x), x->field->name);
        v->kind_case = BULKWRITE__V1__VALUE__KIND_BYTES_VALUE;
        v->bytes_value.data = data;
        v->bytes_value.len = (size_t)n;
        x->expect = X_WRAP_END;
        return 1;
    }
    default: return json_mistyped(x, "strings");
    }
}

static int j_start_map(void *ctx) {
    json_ctx_t *x = ctx;
    switch (x->expect) {
    case X_ROOT: x->expect = X_TOP_KEY; return 1;
    case X_OP_ITEM: {
        Bulkwrite__V1__BatchWriteRequest *req = x->req;
        if (x->one_value && req->n_ops == x->one_value) JMALFORMED("one op a line");
        if (req->n_ops == x->max_ops) {
            x->too_many = 1;
            JFAIL("the request has more than %zu ops; proxy.max_ops is %zu", x->max_ops, x->max_ops);
        }
        if (req->n_ops == x->ops_cap) {
            size_t cap = x->ops_cap ? x->ops_cap * 2 : 64;
            Bulkwrite__V1__Op **ops = bw_arena_alloc(x->a, (cap + 1) * sizeof(*ops));
            if (req->n_ops) memcpy(ops, req->ops, req->n_ops * sizeof(*ops));
            req->ops = ops;
            x->ops_cap = cap;
        }
        bw_json_op_t *jo = bw_arena_alloc(x->a, sizeof(*jo));
        jo->fault = NULL;
        Bulkwrite__V1__Op *op = &jo->op;
        bulkwrite__v1__op__init(op);
        req->ops[req->n_ops++] = x->op = op;
        x->seen_op = 0;
        x->expect = X_OP_KEY;
        return 1;
    }
    case X_OP_VALUE:
        if (json_kind(x) != BW_MEMBER_FIELDS) return json_mistyped(x, "objects");
        x->names_cap = 0; /* a new op: a new name set */
        x->expect = X_FIELD_KEY;
        return 1;
    case X_FIELD_VALUE: x->expect = X_WRAP_KEY; return 1;
    default: return json_mistyped(x, "objects");
    }
}

static size_t json_name_hash(const char *s) {
    size_t h = 1469598103934665603u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h;
}

/* Adds field k of the current op to the name set; 0 if its name was there already. */
static int json_names_add(json_ctx_t *x, size_t k) {
    size_t mask = x->names_cap - 1, h = json_name_hash(x->fields[k]->name) & mask;
    for (; x->names[h]; h = (h + 1) & mask)
        if (strcmp(x->fields[x->names[h] - 1]->name, x->fields[k]->name) == 0) return 0;
    x->names[h] = (uint32_t)k + 1;
    return 1;
}

/* Whether the current op's newest field (the last of n) repeats a name (jansson refused
 * duplicate keys). A few fields are compared directly; many go through a hash set, so
 * a hostile op of a million fields costs linear time. */
static int json_field_unique(json_ctx_t *x, size_t n) {
    const char *name = x->fields[n - 1]->name;
    if (n <= 16) {
        for (size_t k = 0; k + 1 < n; k++)
            if (x->fields[k]->name[0] == name[0] && strcmp(x->fields[k]->name, name) == 0) return 0;
        return 1;
    }
    if (n * 2 > x->names_cap) { /* (re)build at twice the size */
        size_t cap = 64;
        while (cap < n * 4) cap *= 2;
        x->names = bw_arena_alloc(x->a, cap * sizeof(*x->names));
        memset(x->names, 0, cap * sizeof(*x->names));
        x->names_cap = cap;
        for (size_t k = 0; k + 1 < n; k++) json_names_add(x, k);
    }
    return json_names_add(x, n - 1);
}

/* Whether the member just named (x->member) is new in its object (seen: its rows so far);
 * jansson refused duplicate keys. */
static int json_first_time(json_ctx_t *x, unsigned *seen, const unsigned char *s, size_t len) {
    if (*seen & 1u << x->member) JMALFORMED("duplicate object key \"%.*s\"", (int)len, (const char *)s);
    *seen |= 1u << x->member;
    return 1;
}

static int j_map_key(void *ctx, const unsigned char *s, size_t len) {
    json_ctx_t *x = ctx;
    size_t plain = 0; /* names are short ASCII: one pass rules out NUL and needs no UTF-8 check */
    while (plain < len && s[plain] - 1u < 0x7fu) plain++;
    if (plain < len) {
        if (memchr(s, '\0', len)) JMALFORMED("NUL byte in object key not supported");
        if (!bw_utf8_valid(s, len)) JMALFORMED("invalid UTF-8 in a string");
    }
    switch (x->expect) {
    case X_TOP_KEY:
        if ((x->member = bw_schema_lookup(x->top, s, len)) < 0) return json_top_refused(x, s, len, NULL);
        if (!json_first_time(x, &x->seen_top, s, len)) return 0;
        x->expect = X_TOP_VALUE;
        return 1;
    case X_OP_KEY:
        if ((x->member = bw_schema_lookup(x->ops, s, len)) < 0)
            JFAIL("ops[%zu]: unknown member \"%.*s\"", json_op_index(x), (int)(len > 100 ? 100 : len), (const char *)s);
        if (!json_first_time(x, &x->seen_op, s, len)) return 0;
        x->expect = X_OP_VALUE;
        return 1;
    case X_FIELD_KEY: {
        Bulkwrite__V1__Op *op = x->op;
        if (op->n_fields == x->fields_cap) {
            size_t cap = x->fields_cap ? x->fields_cap * 2 : 16;
            Bulkwrite__V1__Field **f = bw_arena_alloc(x->a, cap * sizeof(*f));
            if (op->n_fields) memcpy(f, x->fields, op->n_fields * sizeof(*f));
            x->fields = f;
            x->fields_cap = cap;
        }
        json_field_block_t *b = bw_arena_alloc(x->a, sizeof(*b));
        bulkwrite__v1__field__init(&b->f);
        bulkwrite__v1__value__init(&b->v);
        b->f.name = bw_arena_strndup(x->a, (const char *)s, len);
        b->f.value = &b->v;
        x->fields[op->n_fields++] = x->field = &b->f;
        if (!json_field_unique(x, op->n_fields)) JMALFORMED("duplicate object key \"%.100s\"", b->f.name);
        x->expect = X_FIELD_VALUE;
        return 1;
    }
    case X_WRAP_KEY:
        if (len == strlen(BW_JSON_BASE64) && memcmp(s, BW_JSON_BASE64, len) == 0) {
            x->expect = X_WRAP_B64;
            return 1;
        }
        if (len == strlen(BW_JSON_INCREMENT) && memcmp(s, BW_JSON_INCREMENT, len) == 0) {
            x->expect = X_WRAP_INC;
            return 1;
        }
        return json_mistyped(x, "objects");
    default: return json_mistyped(x, "objects");
    }
}

static int j_end_map(void *ctx) {
    json_ctx_t *x = ctx;
    switch (x->expect) {
    case X_TOP_KEY: x->expect = X_DONE; return 1;
    case X_OP_KEY: x->expect = X_OP_ITEM; return 1;
    case X_FIELD_KEY: {
        /* the op's fields move from the scratch list into their own array */
        Bulkwrite__V1__Op *op = x->op;
        op->fields = bw_arena_alloc(x->a, (op->n_fields + 1) * sizeof(*op->fields));
        if (op->n_fields) memcpy(op->fields, x->fields, op->n_fields * sizeof(*op->fields));
        x->expect = X_OP_KEY;
        return 1;
    }
    case X_WRAP_END: x->expect = X_FIELD_KEY; return 1;
    default: return json_mistyped(x, "objects");
    }
}

static int j_start_array(void *ctx) {
    json_ctx_t *x = ctx;
    if (x->expect != X_TOP_VALUE) return json_mistyped(x, "arrays");
    if (json_kind(x) == BW_MEMBER_OPS) {
        x->expect = X_OP_ITEM;
        return 1;
    }
    if (json_kind(x) == BW_MEMBER_NAMES) {
        x->list_cap = 0;
        x->expect = X_TOP_ITEM;
        return 1;
    }
    return json_mistyped(x, "arrays");
}

static int j_end_array(void *ctx) {
    json_ctx_t *x = ctx;
    if (x->expect != X_OP_ITEM && x->expect != X_TOP_ITEM) return json_mistyped(x, "arrays");
    x->expect = X_TOP_KEY;
    return 1;
}

static const yajl_callbacks json_callbacks = {
    .yajl_null = j_null,
    .yajl_boolean = j_bool,
    .yajl_number = j_number,
    .yajl_string = j_string,
    .yajl_start_map = j_start_map,
    .yajl_map_key = j_map_key,
    .yajl_end_map = j_end_map,
    .yajl_start_array = j_start_array,
    .yajl_end_array = j_end_array,
};

/* "malformed JSON at line L column C: what" for a fault at byte offset `at`. */
static void json_malformed(const char *body, size_t len, size_t at, const char *what, char *err, size_t esz) {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < len; i++) {
        if (body[i] == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    snprintf(err, esz, "malformed JSON at line %zu column %zu: %s", line, col, what);
}

static int hex4(const char *s, unsigned *out) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1; /* not an escape yajl accepts: it reports it */
        v = v << 4 | (unsigned)d;
    }
    *out = v;
    return 0;
}

/* Where the body has a \u escape of a high surrogate not followed by an escaped low one,
 * or len if none. yajl would read it as "?", a silent change of the client's text;
 * jansson refused it, and so does bulkwrite. (A lone low surrogate becomes bytes that
 * are not UTF-8, which the string check refuses.) Backslashes only occur in strings of a
 * body yajl accepts, so a flat scan of the escapes suffices. */
static size_t json_lone_surrogate(const char *body, size_t len) {
    for (const char *p = memchr(body, '\\', len); p; p = memchr(p, '\\', len - (size_t)(p - body))) {
        size_t at = (size_t)(p - body);
        unsigned hi, lo;
        if (at + 1 >= len) break;
        if (p[1] != 'u' || at + 6 > len || hex4(p + 2, &hi)) {
            p += 2;
            if ((size_t)(p - body) >= len) break;
            continue;
        }
        if (hi >= 0xd800 && hi <= 0xdbff &&
            !(at + 12 <= len && p[6] == '\\' && p[7] == 'u' && !hex4(p + 8, &lo) && lo >= 0xdc00 && lo <= 0xdfff))
            return at;
        p += 6;
        if ((size_t)(p - body) >= len) break;
    }
    return len;
}

Bulkwrite__V1__BatchWriteRequest *bw_request_decode_json(const void *body, size_t len, size_t max_ops, bw_arena_t *a,
                                                         char *err, size_t esz, int *too_many) {
    Bulkwrite__V1__BatchWriteRequest *req = bw_arena_alloc(a, sizeof(*req));
    bulkwrite__v1__batch_write_request__init(req); /* its texts "", as protobuf-c's are */
    char cb_err[512] = "";
    json_ctx_t x = {.a = a,
                    .top = bw_schema_request(),
                    .ops = bw_schema_op(),
                    .req = req,
                    .expect = X_ROOT,
                    .max_ops = max_ops,
                    .err = cb_err,
                    .esz = sizeof(cb_err)};
    yajl_handle h = yajl_alloc(&json_callbacks, NULL, &x);
    if (!h) abort();
    yajl_config(h, yajl_dont_validate_strings, 1); /* bw_utf8_valid checks them, strictly */
    yajl_status st = yajl_parse(h, body, len);
    int at_end = st == yajl_status_ok; /* a fault now is at the end of the body */
    if (at_end) st = yajl_complete_parse(h);
    if (st == yajl_status_client_canceled) {
        if (x.malformed) json_malformed(body, len, yajl_get_bytes_consumed(h), cb_err, err, esz);
        else snprintf(err, esz, "%s", cb_err);
        req = NULL;
    } else if (st != yajl_status_ok) {
        unsigned char *e = yajl_get_error(h, 0, body, len);
        char what[256];
        snprintf(what, sizeof(what), "%s", e ? (const char *)e : "not JSON");
        what[strcspn(what, "\n")] = '\0';
        if (e) yajl_free_error(h, e);
        json_malformed(body, len, at_end ? len : yajl_get_bytes_consumed(h), what, err, esz);
        req = NULL;
    }
    size_t lone = json_lone_surrogate(body, len);
    /* the first fault in document order (a fault found by the final parse is at the end) */
    if (lone < len && (req || (at_end ? len : yajl_get_bytes_consumed(h)) > lone)) {
        json_malformed(body, len, lone, "a \\u escape of a high surrogate without its low surrogate", err, esz);
        req = NULL;
    }
    yajl_free(h);
    if (req && !req->ops) req->ops = bw_arena_alloc(a, sizeof(*req->ops));
    *too_many = !req && x.too_many;
    return req;
}

/* ---- ops one at a time (a JSON-lines file) -------------------------------------------- */

struct bw_json_ops_reader {
    yajl_handle h; /* reads every text, each a value of its own; made anew after a bad one */
    json_ctx_t x;
    Bulkwrite__V1__BatchWriteRequest one; /* the op's request while it is read */
    Bulkwrite__V1__Op *slot[2];
    char err[512];
};

static void ops_reader_open(bw_json_ops_reader_t *r) {
    if (!(r->h = yajl_alloc(&json_callbacks, NULL, &r->x))) abort();
    yajl_config(r->h, yajl_dont_validate_strings, 1);
    yajl_config(r->h, yajl_allow_multiple_values, 1);
}

bw_json_ops_reader_t *bw_json_ops_reader_new(void) {
    bw_json_ops_reader_t *r = calloc(1, sizeof(*r));
    if (!r) abort();
    r->x.top = bw_schema_request();
    r->x.ops = bw_schema_op();
    r->x.req = &r->one;
    r->x.max_ops = SIZE_MAX;
    r->x.one_value = 1;
    r->x.err = r->err;
    r->x.esz = sizeof(r->err);
    ops_reader_open(r);
    return r;
}

void bw_json_ops_reader_free(bw_json_ops_reader_t *r) {
    if (!r) return;
    yajl_free(r->h);
    free(r);
}

/* The decoder's message about an op, without the "ops[N]" it has in a request. */
static void ops_reader_error(const char *msg, char *err, size_t esz) {
    if (strncmp(msg, "ops[", 4) == 0 && strchr(msg, ']')) {
        msg = strchr(msg, ']') + 1;
        if (*msg == '.' || *msg == ':') msg++;
        while (*msg == ' ') msg++;
    }
    snprintf(err, esz, "%s", msg);
}

/* "malformed JSON at column C: what" for a fault at byte offset `at` of an op's text: a
 * line of its own, so the column is the place. */
static void op_malformed(size_t at, const char *what, char *err, size_t esz) {
    snprintf(err, esz, "malformed JSON at column %zu: %s", at + 1, what);
}

Bulkwrite__V1__Op *bw_json_op_read(bw_json_ops_reader_t *r, bw_arena_t *a, const char *text, size_t len, char *err,
                                   size_t esz) {
    json_ctx_t *x = &r->x;
    r->one.n_ops = 0;
    r->one.ops = r->slot;
    x->ops_cap = 1; /* one_value refuses a second op before it would grow */
    x->a = a;
    x->fields_cap = x->names_cap = 0; /* their lists were in another text's arena */
    x->expect = X_OP_ITEM;
    x->malformed = 0;
    r->err[0] = '\0';
    yajl_status st = yajl_parse(r->h, (const unsigned char *)text, len);
    if (st == yajl_status_ok) st = yajl_parse(r->h, (const unsigned char *)" ", 1); /* ends a number at the end */
    size_t lone = json_lone_surrogate(text, len);
    if (st == yajl_status_ok && x->expect == X_OP_ITEM && r->one.n_ops == 1 && lone == len) return r->slot[0];
    if (st == yajl_status_client_canceled) {
        if (x->malformed) op_malformed(yajl_get_bytes_consumed(r->h), r->err, err, esz);
        else ops_reader_error(r->err, err, esz);
    } else if (st == yajl_status_error) {
        unsigned char *e = yajl_get_error(r->h, 0, (const unsigned char *)text, len);
        char what[256];
        snprintf(what, sizeof(what), "%s", e ? (const char *)e : "not JSON");
        what[strcspn(what, "\n")] = '\0';
        if (e) yajl_free_error(r->h, e);
        op_malformed(yajl_get_bytes_consumed(r->h), what, err, esz);
    } else if (lone < len) {
        op_malformed(lone, "a \\u escape of a high surrogate without its low surrogate", err, esz);
    } else {
        snprintf(err, esz, "%s", r->one.n_ops ? "malformed JSON: the text ends inside the op"
                                              : "malformed JSON: an op ('{') expected");
    }
    yajl_free(r->h); /* what it holds of a bad text must not reach the next */
    ops_reader_open(r);
    return NULL;
}
