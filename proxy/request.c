#include "request.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <yajl/yajl_parse.h>

#include "pbdecode.h"
#include "shard.h"
#include "utf8.h"
#include "wire.h"

/* ---- JSON -> protobuf-c structs -------------------------------------------------- */

static const char *const op_words[] = {NULL, "create", "update", "upsert", "delete"};

static int parse_op_word(const char *s) {
    for (int i = 1; i < BW_OP_MAX; i++)
        if (strcasecmp(s, op_words[i]) == 0) return i;
    return -1;
}

/* Base64 (RFC 4648, padding optional) into the arena. -1 on a bad character. */
static long base64_decode(const char *in, size_t len, uint8_t *out) {
    uint32_t acc = 0;
    int bits = 0;
    long n = 0;
    for (size_t i = 0; i < len; i++) {
        char c = in[i];
        int v;
        if (c >= 'A' && c <= 'Z') v = c - 'A';
        else if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
        else if (c >= '0' && c <= '9') v = c - '0' + 52;
        else if (c == '+' || c == '-') v = 62;
        else if (c == '/' || c == '_') v = 63;
        else if (c == '=') break;
        else return -1;
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[n++] = (uint8_t)(acc >> bits);
        }
    }
    return n;
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
    X_ROOT,       /* the body's value */
    X_TOP_KEY,    /* a member of the request, or its end */
    X_REQUEST_ID, /* request_id's value */
    X_LANE,       /* lane's value */
    X_OPS,        /* ops' value */
    X_OP_ITEM,    /* an op, or the end of ops */
    X_OP_KEY,     /* a member of an op, or its end */
    X_OP_OP,      /* values of the op's members */
    X_OP_TYPE,
    X_OP_ID,
    X_OP_SHARD_KEY,
    X_OP_FIELDS,
    X_FIELD_KEY,   /* a field's name, or the end of fields */
    X_FIELD_VALUE, /* a field's value */
    X_WRAP_KEY,    /* the one member of {"base64": ...} or {"increment": ...} */
    X_WRAP_B64,
    X_WRAP_INC,
    X_WRAP_END, /* the end of that object */
    X_DONE,
} json_expect_t;

enum { SEEN_REQUEST_ID = 1, SEEN_OPS = 2, SEEN_LANE = 4, SEEN_OP = 1, SEEN_TYPE = 2, SEEN_ID = 4, SEEN_SHARD_KEY = 8, SEEN_FIELDS = 16 };

typedef struct {
    bw_arena_t *a;
    Bulkwrite__V1__BatchWriteRequest *req;
    json_expect_t expect;
    unsigned seen_top, seen_op;
    size_t ops_cap;
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
} json_ctx_t;

typedef struct {
    Bulkwrite__V1__Field f;
    Bulkwrite__V1__Value v;
} json_field_block_t;

#define JFAIL(...) do { snprintf(x->err, x->esz, __VA_ARGS__); return 0; } while (0)
#define JMALFORMED(...) do { x->malformed = 1; snprintf(x->err, x->esz, __VA_ARGS__); return 0; } while (0)

static size_t json_op_index(const json_ctx_t *x) { return x->req->n_ops ? x->req->n_ops - 1 : 0; }

/* A value where it does not belong: the message names the member at fault. */
static int json_mistyped(json_ctx_t *x, const char *what) {
    size_t i = json_op_index(x);
    switch (x->expect) {
    case X_ROOT: JFAIL("the body must be a JSON object {\"ops\": [...]}");
    case X_REQUEST_ID: JFAIL("unknown or mistyped member \"request_id\" (expected request_id: string, lane: string, ops: array)");
    case X_LANE: JFAIL("unknown or mistyped member \"lane\" (expected request_id: string, lane: string, ops: array)");
    case X_OPS: JFAIL("unknown or mistyped member \"ops\" (expected request_id: string, lane: string, ops: array)");
    case X_OP_ITEM: JFAIL("ops[%zu]: not an object", x->req->n_ops);
    case X_OP_OP: JFAIL("ops[%zu].op: not a string", i);
    case X_OP_TYPE: JFAIL("ops[%zu].object_type: not a string", i);
    case X_OP_ID: JFAIL("ops[%zu].id: not an unsigned 64-bit integer", i);
    case X_OP_SHARD_KEY: JFAIL("ops[%zu].shard_key: not a string", i);
    case X_OP_FIELDS: JFAIL("ops[%zu].fields: not an object", i);
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

/* The value of the field being read, and where the next token goes after it. */
static Bulkwrite__V1__Value *json_field_value(json_ctx_t *x) {
    x->expect = X_FIELD_KEY;
    return x->field->value;
}

static int j_null(void *ctx) {
    json_ctx_t *x = ctx;
    if (x->expect != X_FIELD_VALUE) return json_mistyped(x, "null");
    Bulkwrite__V1__Value *v = json_field_value(x);
    v->kind_case = BULKWRITE__V1__VALUE__KIND_NULL_VALUE;
    v->null_value = 1;
    return 1;
}

static int j_bool(void *ctx, int b) {
    json_ctx_t *x = ctx;
    if (x->expect != X_FIELD_VALUE) return json_mistyped(x, "booleans");
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
 * 64 bits; a real must be finite. */
static int j_number(void *ctx, const char *s, size_t len) {
    json_ctx_t *x = ctx;
    long long iv = 0;
    double dv = 0;
    int is_int = short_decimal(s, len, &iv);
    if (!is_int) {
        char small[64], *text = len < sizeof(small) ? small : bw_arena_alloc(x->a, len + 1);
        memcpy(text, s, len);
        text[len] = '\0';
        is_int = !memchr(s, '.', len) && !memchr(s, 'e', len) && !memchr(s, 'E', len);
        errno = 0;
        if (is_int) {
            iv = strtoll(text, NULL, 10);
            if (errno == ERANGE) JMALFORMED("too big integer near '%.40s'", text);
        } else {
            dv = strtod(text, NULL);
            if (errno == ERANGE && (dv == HUGE_VAL || dv == -HUGE_VAL))
                JMALFORMED("real number overflow near '%.40s'", text);
        }
    }
    Bulkwrite__V1__Value *v;
    switch (x->expect) {
    case X_OP_ID:
        if (!is_int || iv < 0) return json_mistyped(x, "numbers");
        x->op->id = (uint64_t)iv;
        x->expect = X_OP_KEY;
        return 1;
    case X_WRAP_INC:
        x->field->increment = 1;
        x->expect = X_WRAP_END;
        v = x->field->value;
        break;
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

/* 1 to 19 decimal digits, which every id is (its two top bits are zero): their value,
 * read without strtoull. Anything else is left to strtoull and the caller's checks. */
static int id_digits(const char *s, size_t len, uint64_t *out) {
    uint64_t v = 0;
    if (len == 0 || len > 19) return 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *out = v;
    return 1;
}

/* "id" may also be a decimal string (for clients whose numbers are doubles). */
static int json_id_string(json_ctx_t *x, const unsigned char *s, size_t len) {
    uint64_t v;
    if (!id_digits((const char *)s, len, &v)) { /* a 20-digit id, or not a number */
        const char *t = json_cstring(x, s, len);
        char *end;
        if (*t < '0' || *t > '9') return json_mistyped(x, "strings");
        errno = 0;
        v = strtoull(t, &end, 10);
        if (*end || errno == ERANGE || strlen(t) < len) return json_mistyped(x, "strings");
    }
    x->op->id = v;
    x->expect = X_OP_KEY;
    return 1;
}

static int j_string(void *ctx, const unsigned char *s, size_t len) {
    json_ctx_t *x = ctx;
    if (!bw_utf8_valid(s, len)) JMALFORMED("invalid UTF-8 in a string");
    switch (x->expect) {
    case X_REQUEST_ID: {
        /* a NUL would cut it short: two different ids, one job */
        const unsigned char *nul = memchr(s, 0, len);
        if (nul) JFAIL("request_id contains a control character (NUL) at byte %zu", (size_t)(nul - s));
        x->req->request_id = json_cstring(x, s, len);
        x->expect = X_TOP_KEY;
        return 1;
    }
    case X_LANE: {
        const unsigned char *nul = memchr(s, 0, len); /* it would cut the name short */
        if (nul) JFAIL("lane contains a control character (NUL) at byte %zu", (size_t)(nul - s));
        x->req->lane = json_cstring(x, s, len); /* checked against the config by the proxy */
        x->expect = X_TOP_KEY;
        return 1;
    }
    case X_OP_OP: {
        char word[16];
        size_t n = strnlen((const char *)s, len);
        int w = -1;
        if (n < sizeof(word)) {
            memcpy(word, s, n);
            word[n] = '\0';
            w = parse_op_word(word);
        }
        /* unknown words decode to OP_TYPE_UNSPECIFIED so validation rejects the op alone */
        x->op->op = w > 0 ? (Bulkwrite__V1__OpType)w : BULKWRITE__V1__OP_TYPE__OP_TYPE_UNSPECIFIED;
        x->expect = X_OP_KEY;
        return 1;
    }
    case X_OP_TYPE:
        x->op->object_type = json_cstring(x, s, len);
        x->expect = X_OP_KEY;
        return 1;
    case X_OP_SHARD_KEY:
        x->op->shard_key = json_cstring(x, s, len);
        x->expect = X_OP_KEY;
        return 1;
    case X_OP_ID: return json_id_string(x, s, len);
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
        long n = base64_decode((const char *)s, len, data);
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
        Bulkwrite__V1__Op *op = bw_arena_alloc(x->a, sizeof(*op));
        bulkwrite__v1__op__init(op);
        op->object_type = "";
        op->shard_key = "";
        req->ops[req->n_ops++] = x->op = op;
        x->seen_op = 0;
        x->expect = X_OP_KEY;
        return 1;
    }
    case X_OP_FIELDS:
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

static int j_map_key(void *ctx, const unsigned char *s, size_t len) {
    json_ctx_t *x = ctx;
    size_t plain = 0; /* names are short ASCII: one pass rules out NUL and needs no UTF-8 check */
    while (plain < len && s[plain] - 1u < 0x7fu) plain++;
    if (plain < len) {
        if (memchr(s, '\0', len)) JMALFORMED("NUL byte in object key not supported");
        if (!bw_utf8_valid(s, len)) JMALFORMED("invalid UTF-8 in a string");
    }
#define KEY_IS(lit) (len == sizeof(lit) - 1 && memcmp(s, lit, len) == 0)
#define MEMBER(set, bit, next)                                                                 \
    do {                                                                                       \
        if (x->set & (bit)) JMALFORMED("duplicate object key \"%.*s\"", (int)len, (const char *)s); \
        x->set |= (bit);                                                                       \
        x->expect = (next);                                                                    \
        return 1;                                                                              \
    } while (0)
    switch (x->expect) {
    case X_TOP_KEY:
        if (KEY_IS("request_id")) MEMBER(seen_top, SEEN_REQUEST_ID, X_REQUEST_ID);
        if (KEY_IS("ops")) MEMBER(seen_top, SEEN_OPS, X_OPS);
        if (KEY_IS("lane")) MEMBER(seen_top, SEEN_LANE, X_LANE);
        JFAIL("unknown or mistyped member \"%.*s\" (expected request_id: string, lane: string, ops: array)", (int)(len > 100 ? 100 : len),
              (const char *)s);
    case X_OP_KEY:
        if (KEY_IS("op")) MEMBER(seen_op, SEEN_OP, X_OP_OP);
        if (KEY_IS("object_type")) MEMBER(seen_op, SEEN_TYPE, X_OP_TYPE);
        if (KEY_IS("id")) MEMBER(seen_op, SEEN_ID, X_OP_ID);
        if (KEY_IS("shard_key")) MEMBER(seen_op, SEEN_SHARD_KEY, X_OP_SHARD_KEY);
        if (KEY_IS("fields")) MEMBER(seen_op, SEEN_FIELDS, X_OP_FIELDS);
        JFAIL("ops[%zu]: unknown member \"%.*s\"", json_op_index(x), (int)(len > 100 ? 100 : len), (const char *)s);
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
        if (KEY_IS("base64")) {
            x->expect = X_WRAP_B64;
            return 1;
        }
        if (KEY_IS("increment")) {
            x->expect = X_WRAP_INC;
            return 1;
        }
        return json_mistyped(x, "objects");
    default: return json_mistyped(x, "objects");
    }
#undef KEY_IS
#undef MEMBER
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
    if (x->expect == X_OPS) {
        x->expect = X_OP_ITEM;
        return 1;
    }
    return json_mistyped(x, "arrays");
}

static int j_end_array(void *ctx) {
    json_ctx_t *x = ctx;
    if (x->expect != X_OP_ITEM) return json_mistyped(x, "arrays");
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

static Bulkwrite__V1__BatchWriteRequest *decode_json(const void *body, size_t len, size_t max_ops, bw_arena_t *a,
                                                     char *err, size_t esz, int *too_many) {
    Bulkwrite__V1__BatchWriteRequest *req = bw_arena_alloc(a, sizeof(*req));
    bulkwrite__v1__batch_write_request__init(req);
    req->request_id = "";
    req->lane = "";
    char cb_err[512] = "";
    json_ctx_t x = {.a = a, .req = req, .expect = X_ROOT, .max_ops = max_ops, .err = cb_err, .esz = sizeof(cb_err)};
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

/* ---- protobuf -> protobuf-c structs, by hand ---------------------------------------- */

/* protobuf-c's unpack walks every message twice through its descriptors and allocates
 * each string, field and value on its own; this reads the request once with the rules
 * protobuf-c applies (wire.h, pbdecode.h) into the same structs, carved from the arena in few
 * blocks. Text and bytes values are not copied: they point into the body. Strings that
 * the validator reads as C strings (names, object type, shard key, request_id) are
 * copied with a terminating NUL, so an embedded NUL cuts them where protobuf-c's did. */

static Bulkwrite__V1__BatchWriteRequest *decode_protobuf(const void *body, size_t len, size_t max_ops, bw_arena_t *a,
                                                         char *err, size_t esz, int *too_many) {
    bw_wire_reader_t r = {body, (const uint8_t *)body + len};
    size_t n_ops;
    snprintf(err, esz, "malformed protobuf: not a bulkwrite.v1.BatchWriteRequest");
    if (bw_pbd_count(r, 2, &n_ops)) return NULL;
    /* counted on the wire, before any op's struct exists */
    if ((*too_many = n_ops > max_ops)) {
        snprintf(err, esz, "the request has %zu ops; proxy.max_ops is %zu", n_ops, max_ops);
        return NULL;
    }
    Bulkwrite__V1__BatchWriteRequest *req = bw_arena_alloc(a, sizeof(*req));
    bulkwrite__v1__batch_write_request__init(req);
    req->request_id = "";
    req->lane = "";
    Bulkwrite__V1__Op *ops = bw_arena_alloc(a, (n_ops + 1) * sizeof(*ops));
    req->ops = bw_arena_alloc(a, (n_ops + 1) * sizeof(*req->ops));
    while (r.p < r.end) {
        uint32_t field;
        int wt;
        const uint8_t *d;
        size_t n;
        if (bw_wire_tag(&r, &field, &wt)) return NULL;
        if (field == 1 || field == 2 || field == 3) {
            if (wt != BW_WIRE_LEN || bw_wire_bytes(&r, &d, &n)) return NULL;
            if (field == 3) {
                /* checked against the config by the proxy; a NUL would cut the name short,
                 * so such a lane reads as one no configuration has (and the proxy answers
                 * 400). Not refused here: this reader accepts what protobuf-c accepts. */
                req->lane = memchr(d, 0, n) ? (char *)"\x7f" : bw_pbd_string(a, d, n);
            } else if (field == 1) {
                const uint8_t *nul = memchr(d, 0, n); /* it would cut the id short */
                if (nul) {
                    snprintf(err, esz, "request_id contains a control character (NUL) at byte %zu", (size_t)(nul - d));
                    return NULL;
                }
                req->request_id = bw_pbd_string(a, d, n);
            } else {
                if (bw_pbd_op((bw_wire_reader_t){d, d + n}, &ops[req->n_ops], a)) return NULL;
                req->ops[req->n_ops] = &ops[req->n_ops];
                req->n_ops++;
            }
        } else if (bw_wire_skip(&r, wt)) {
            return NULL;
        }
    }
    return req;
}

Bulkwrite__V1__BatchWriteRequest *bw_request_decode_bounded(bw_format_t fmt, const void *body, size_t len,
                                                            size_t max_ops, bw_arena_t *arena, char *errstr,
                                                            size_t errstr_size, int *too_many) {
    if (fmt == BW_FMT_JSON) return decode_json(body, len, max_ops, arena, errstr, errstr_size, too_many);
    return decode_protobuf(body, len, max_ops, arena, errstr, errstr_size, too_many);
}

Bulkwrite__V1__BatchWriteRequest *bw_request_decode(bw_format_t fmt, const void *body, size_t len,
                                                    bw_arena_t *arena, char *errstr,
                                                    size_t errstr_size) {
    int too_many;
    return bw_request_decode_bounded(fmt, body, len, SIZE_MAX, arena, errstr, errstr_size, &too_many);
}

/* ---- validation -------------------------------------------------------------------- */

int bw_request_job_id(const Bulkwrite__V1__BatchWriteRequest *req, const char *client, const void *key,
                      size_t key_len, char out[33], char *errstr, size_t errstr_size) {
    unsigned char d[EVP_MAX_MD_SIZE];
    const char *rid = req->request_id ? req->request_id : "";
    size_t len = strlen(rid);
    if (len == 0) {
        if (getrandom(d, 16, 0) != 16) abort();
    } else {
        if (len > BW_REQUEST_ID_MAX)
            return snprintf(errstr, errstr_size, "request_id is %zu bytes; at most %d are allowed", len,
                            BW_REQUEST_ID_MAX), -1;
        if (!bw_utf8_valid((const unsigned char *)rid, len))
            return snprintf(errstr, errstr_size, "request_id is not valid UTF-8"), -1;
        for (size_t i = 0; i < len; i++)
            if ((unsigned char)rid[i] < 0x20 || rid[i] == 0x7f)
                return snprintf(errstr, errstr_size, "request_id contains a control character at byte %zu", i), -1;
        static const char ns[] = "bulkwrite.v1/";
        size_t client_len = client ? strlen(client) + 1 : 0; /* the NUL ends the name: no "ab"+"c" = "a"+"bc" */
        char msg[sizeof(ns) + 256 + BW_REQUEST_ID_MAX];
        if (client_len > 256) client_len = 256; /* client names are at most 64 (auth.h) */
        size_t n = sizeof(ns) - 1;
        memcpy(msg, ns, n);
        if (client) {
            memcpy(msg + n, client, client_len - 1);
            msg[n + client_len - 1] = '\0';
            n += client_len;
        }
        memcpy(msg + n, rid, len);
        n += len;
        unsigned md_len;
        if (!client) bw_md5(msg, n, d);
        else if (!HMAC(EVP_sha256(), key_len ? key : "", (int)key_len, (const unsigned char *)msg, n, d, &md_len))
            abort();
    }
    for (int i = 0; i < 16; i++) snprintf(out + 2 * i, 3, "%02x", d[i]);
    return 0;
}

#define REJECT(...) do { snprintf(why, why_size, __VA_ARGS__); return -1; } while (0)

/* Validates one field value against its column. */
static int check_value(const bw_column_t *col, const Bulkwrite__V1__Field *f, int op, int text_checked,
                       char *why_out, size_t why_size) {
    char why[512];
    const Bulkwrite__V1__Value *v = f->value;
    int kind = v ? (int)v->kind_case : 0;
    int ok = 1;
    if (kind == 0 || kind == BULKWRITE__V1__VALUE__KIND_NULL_VALUE) {
        if (!col->nullable) { snprintf(why, sizeof(why), "field \"%s\": null (or no value) in a column that is not nullable", f->name); goto bad; }
        if (f->increment) { snprintf(why, sizeof(why), "field \"%s\": cannot increment by null", f->name); goto bad; }
        return 0;
    }
    switch (col->type) {
    case BW_COL_INT: ok = kind == BULKWRITE__V1__VALUE__KIND_INT_VALUE; break;
    case BW_COL_DOUBLE:
        ok = kind == BULKWRITE__V1__VALUE__KIND_DOUBLE_VALUE || kind == BULKWRITE__V1__VALUE__KIND_INT_VALUE;
        if (ok && kind == BULKWRITE__V1__VALUE__KIND_DOUBLE_VALUE && !isfinite(v->double_value)) {
            snprintf(why, sizeof(why), "field \"%s\": NaN and infinity cannot be stored", f->name);
            goto bad;
        }
        break;
    case BW_COL_STRING:
        ok = kind == BULKWRITE__V1__VALUE__KIND_STRING_VALUE;
        if (ok && v->string_value.len > (size_t)col->max_length) {
            snprintf(why, sizeof(why), "field \"%s\": %zu bytes, longer than its max_length %d", f->name, v->string_value.len, col->max_length);
            goto bad;
        }
        if (ok && !text_checked && !bw_utf8_valid(v->string_value.data, v->string_value.len)) {
            snprintf(why, sizeof(why), "field \"%s\": text is not valid UTF-8", f->name);
            goto bad;
        }
        break;
    case BW_COL_BYTES:
        /* text is acceptable binary too */
        ok = kind == BULKWRITE__V1__VALUE__KIND_BYTES_VALUE || kind == BULKWRITE__V1__VALUE__KIND_STRING_VALUE;
        if (ok && v->bytes_value.len > (size_t)col->max_length) { /* same layout for both */
            snprintf(why, sizeof(why), "field \"%s\": %zu bytes, longer than its max_length %d", f->name, v->bytes_value.len, col->max_length);
            goto bad;
        }
        break;
    case BW_COL_BOOL: ok = kind == BULKWRITE__V1__VALUE__KIND_BOOL_VALUE; break;
    }
    if (!ok) {
        snprintf(why, sizeof(why), "field \"%s\": column type is %s, the value is not", f->name,
                 bw_col_type_name((bw_col_type_t)col->type));
        goto bad;
    }
    if (f->increment && (op != BW_OP_UPDATE || (col->type != BW_COL_INT && col->type != BW_COL_DOUBLE))) {
        snprintf(why, sizeof(why), "field \"%s\": increment is only for UPDATE of int or double columns", f->name);
        goto bad;
    }
    return 0;
bad:
    snprintf(why_out, why_size, "%s", why);
    return -1;
}

/* Validates and routes one op; on failure writes the reason into why. */
static int validate_op(const bw_config_t *conf, const Bulkwrite__V1__Op *op, int text_checked, bw_arena_t *a,
                       bw_op_route_t *rt, char *why, size_t why_size) {
    int kind = (int)op->op;
    if (kind < BW_OP_CREATE || kind > BW_OP_DELETE)
        REJECT("op must be one of create, update, upsert, delete");
    const char *tname = op->object_type ? op->object_type : "";
    const bw_object_type_t *ot = bw_config_object_type(conf, tname);
    if (!ot) REJECT("unknown object_type \"%.100s\"", tname);
    rt->type_index = (int)(ot - conf->object_types);

    int shard = -1;
    if (op->id) {
        if (!bw_id_well_formed(op->id)) REJECT("id %" PRIu64 ": the two top bits must be zero", op->id);
        if ((int)bw_id_shard(op->id) >= conf->shard_count)
            REJECT("id %" PRIu64 ": shard %u is out of range (shards.count is %d)", op->id,
                   bw_id_shard(op->id), conf->shard_count);
        if ((int)bw_id_type(op->id) != ot->type_id)
            REJECT("id %" PRIu64 ": type id %u is not %s's type id %d", op->id, bw_id_type(op->id),
                   ot->name, ot->type_id);
        shard = (int)bw_id_shard(op->id);
    } else if (kind != BW_OP_CREATE) {
        REJECT("%s needs the object's id", bw_op_name(kind));
    }
    if (kind == BW_OP_CREATE) {
        const char *key = op->shard_key ? op->shard_key : "";
        int routed;
        if (!*key) REJECT("create needs the owner's shard_key");
        if (ot->create_route == BW_ROUTE_MD5) {
            routed = (int)bw_shard_of_key(key, strlen(key), (unsigned)conf->shard_count);
        } else {
            uint64_t owner;
            int digits = id_digits(key, strlen(key), &owner);
            if (!digits) {
                char *end;
                owner = strtoull(key, &end, 10);
                digits = *key >= '0' && *key <= '9' && !*end;
            }
            if (!digits || !bw_id_well_formed(owner))
                REJECT("shard_key \"%.64s\" is not an object id (create_route is \"id\")", key);
            if ((int)bw_id_shard(owner) >= conf->shard_count)
                REJECT("shard_key %" PRIu64 ": shard %u is out of range (shards.count is %d)", owner,
                       bw_id_shard(owner), conf->shard_count);
            routed = (int)bw_id_shard(owner);
        }
        if (shard >= 0 && shard != routed)
            REJECT("id %" PRIu64 " names shard %d but its owner's shard_key routes to shard %d",
                   op->id, shard, routed);
        shard = routed;
    } else if (op->shard_key && *op->shard_key) {
        REJECT("shard_key is only for create; %s routes by id", bw_op_name(kind));
    }

    if (kind == BW_OP_DELETE && op->n_fields) REJECT("delete takes no fields");
    if (kind == BW_OP_UPDATE && !op->n_fields) REJECT("update needs at least one field");
    int *cols = bw_arena_alloc(a, (op->n_fields + 1) * sizeof(int));
    for (size_t i = 0; i < op->n_fields; i++) {
        const Bulkwrite__V1__Field *f = op->fields[i];
        const char *fname = f->name ? f->name : "";
        int c = bw_config_column_from(ot, fname, i ? cols[i - 1] + 1 : 0);
        if (c < 0) {
            if (strcmp(fname, ot->id_column) == 0) REJECT("field \"%.64s\": set the id with the op's id", fname);
            REJECT("unknown column \"%.64s\" for object type %s", fname, ot->name);
        }
        for (size_t k = 0; k < i; k++)
            if (cols[k] == c) REJECT("field \"%.64s\" is given twice", fname);
        if (check_value(&ot->columns[c], f, kind, text_checked, why, why_size)) return -1;
        cols[i] = c;
    }
    if (kind == BW_OP_CREATE || kind == BW_OP_UPSERT) {
        for (int c = 0; c < ot->column_cnt; c++) {
            if (!ot->columns[c].required) continue;
            int found = 0;
            for (size_t i = 0; i < op->n_fields && !found; i++) found = cols[i] == c;
            if (!found) REJECT("required column \"%s\" is missing", ot->columns[c].name);
        }
    }
    rt->shard = shard;
    rt->cols = cols;
    return 0;
}

size_t bw_request_validate(const bw_config_t *conf, const Bulkwrite__V1__BatchWriteRequest *req, bw_format_t fmt,
                           bw_arena_t *arena, bw_op_route_t *routes, bw_rejection_t **rejected) {
    size_t cnt = 0, cap = 0;
    bw_rejection_t *rej = NULL;
    for (size_t i = 0; i < req->n_ops; i++) {
        char why[512];
        routes[i] = (bw_op_route_t){-1, 0, NULL};
        if (validate_op(conf, req->ops[i], fmt == BW_FMT_JSON, arena, &routes[i], why, sizeof(why)) == 0) continue;
        routes[i].shard = -1;
        if (cnt == cap) {
            cap = cap ? cap * 2 : 16;
            bw_rejection_t *n = bw_arena_alloc(arena, cap * sizeof(*n));
            if (rej) memcpy(n, rej, cnt * sizeof(*n));
            rej = n;
        }
        rej[cnt].index = (uint32_t)i;
        bw_utf8_sanitize(why);
        rej[cnt].reason = bw_arena_strndup(arena, why, strlen(why));
        cnt++;
    }
    *rejected = rej;
    return cnt;
}

/* ---- reply ------------------------------------------------------------------------- */

void bw_response_encode(bw_format_t fmt, const char *job_id, uint32_t accepted,
                        const bw_rejection_t *rejected, size_t rejected_cnt, char **out,
                        size_t *out_len) {
    if (fmt == BW_FMT_JSON) {
        json_t *root = json_object();
        json_object_set_new(root, "job_id", json_string(job_id));
        json_object_set_new(root, "accepted", json_integer(accepted));
        json_t *arr = json_array();
        for (size_t i = 0; i < rejected_cnt; i++) {
            char *reason = strdup(rejected[i].reason); /* json_pack drops non-UTF-8 silently */
            bw_utf8_sanitize(reason);
            json_t *item = json_pack("{s:I,s:s}", "index", (json_int_t)rejected[i].index, "reason", reason);
            if (rejected[i].retryable) json_object_set_new(item, "retryable", json_true());
            json_array_append_new(arr, item);
            free(reason);
        }
        json_object_set_new(root, "rejected", arr);
        *out = json_dumps(root, JSON_COMPACT);
        *out_len = strlen(*out);
        json_decref(root);
        return;
    }
    Bulkwrite__V1__BatchWriteResponse resp = BULKWRITE__V1__BATCH_WRITE_RESPONSE__INIT;
    resp.job_id = (char *)job_id;
    resp.accepted = accepted;
    resp.n_rejected = rejected_cnt;
    Bulkwrite__V1__OpRejection *items = calloc(rejected_cnt + 1, sizeof(*items));
    Bulkwrite__V1__OpRejection **ptrs = calloc(rejected_cnt + 1, sizeof(*ptrs));
    for (size_t i = 0; i < rejected_cnt; i++) {
        bulkwrite__v1__op_rejection__init(&items[i]);
        items[i].index = rejected[i].index;
        items[i].reason = (char *)rejected[i].reason;
        items[i].retryable = rejected[i].retryable;
        ptrs[i] = &items[i];
    }
    resp.rejected = ptrs;
    *out_len = bulkwrite__v1__batch_write_response__get_packed_size(&resp);
    *out = malloc(*out_len + 1);
    bulkwrite__v1__batch_write_response__pack(&resp, (uint8_t *)*out);
    free(items);
    free(ptrs);
}
