#include "request.h"

#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "shard.h"

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

/* One JSON field value: a scalar, or {"base64": "..."} for bytes, or
 * {"increment": number} for an UPDATE increment. */
static int json_value(json_t *j, Bulkwrite__V1__Field *f, bw_arena_t *a, char *err, size_t esz) {
    Bulkwrite__V1__Value *v = bw_arena_alloc(a, sizeof(*v));
    bulkwrite__v1__value__init(v);
    f->value = v;
    if (json_is_object(j)) {
        json_t *b64 = json_object_get(j, "base64"), *inc = json_object_get(j, "increment");
        if (json_object_size(j) == 1 && json_is_string(b64)) {
            size_t len = json_string_length(b64);
            uint8_t *data = bw_arena_alloc(a, len * 3 / 4 + 3);
            long n = base64_decode(json_string_value(b64), len, data);
            if (n < 0) return snprintf(err, esz, "field \"%s\": invalid base64", f->name), -1;
            v->kind_case = BULKWRITE__V1__VALUE__KIND_BYTES_VALUE;
            v->bytes_value.data = data;
            v->bytes_value.len = (size_t)n;
            return 0;
        }
        if (json_object_size(j) == 1 && json_is_number(inc)) {
            f->increment = 1;
            j = inc;
        } else {
            return snprintf(err, esz,
                            "field \"%s\": an object value must be {\"base64\": \"...\"} or "
                            "{\"increment\": number}",
                            f->name),
                   -1;
        }
    }
    switch (json_typeof(j)) {
    case JSON_NULL:
        v->kind_case = BULKWRITE__V1__VALUE__KIND_NULL_VALUE;
        v->null_value = 1;
        return 0;
    case JSON_TRUE:
    case JSON_FALSE:
        v->kind_case = BULKWRITE__V1__VALUE__KIND_BOOL_VALUE;
        v->bool_value = json_is_true(j);
        return 0;
    case JSON_INTEGER:
        v->kind_case = BULKWRITE__V1__VALUE__KIND_INT_VALUE;
        v->int_value = json_integer_value(j);
        return 0;
    case JSON_REAL:
        v->kind_case = BULKWRITE__V1__VALUE__KIND_DOUBLE_VALUE;
        v->double_value = json_real_value(j);
        return 0;
    case JSON_STRING: {
        size_t len = json_string_length(j);
        v->kind_case = BULKWRITE__V1__VALUE__KIND_STRING_VALUE;
        v->string_value.data = (uint8_t *)bw_arena_strndup(a, json_string_value(j), len);
        v->string_value.len = len;
        return 0;
    }
    default:
        return snprintf(err, esz, "field \"%s\": arrays are not values", f->name), -1;
    }
}

/* "id" may be a JSON integer or a decimal string (for clients whose numbers are doubles). */
static int json_id(json_t *j, uint64_t *id) {
    if (!j) return 0;
    if (json_is_integer(j) && json_integer_value(j) >= 0) {
        *id = (uint64_t)json_integer_value(j);
        return 0;
    }
    if (json_is_string(j)) {
        const char *s = json_string_value(j);
        char *end;
        if (*s < '0' || *s > '9') return -1;
        unsigned long long v = strtoull(s, &end, 10);
        if (*end) return -1;
        *id = v;
        return 0;
    }
    return -1;
}

static Bulkwrite__V1__Op *json_op(json_t *j, size_t index, bw_arena_t *a, char *err, size_t esz) {
    Bulkwrite__V1__Op *op = bw_arena_alloc(a, sizeof(*op));
    bulkwrite__v1__op__init(op);
    if (!json_is_object(j)) return snprintf(err, esz, "ops[%zu]: not an object", index), NULL;
    const char *key;
    json_t *val;
    json_object_foreach(j, key, val) {
        if (strcmp(key, "op") == 0) {
            /* unknown words decode to OP_TYPE_UNSPECIFIED so validation rejects the op alone */
            int w = json_is_string(val) ? parse_op_word(json_string_value(val)) : -1;
            op->op = w > 0 ? (Bulkwrite__V1__OpType)w : BULKWRITE__V1__OP_TYPE__OP_TYPE_UNSPECIFIED;
            if (!json_is_string(val)) return snprintf(err, esz, "ops[%zu].op: not a string", index), NULL;
        } else if (strcmp(key, "object_type") == 0) {
            if (!json_is_string(val))
                return snprintf(err, esz, "ops[%zu].object_type: not a string", index), NULL;
            op->object_type = bw_arena_strndup(a, json_string_value(val), strlen(json_string_value(val)));
        } else if (strcmp(key, "id") == 0) {
            if (json_id(val, &op->id))
                return snprintf(err, esz, "ops[%zu].id: not an unsigned 64-bit integer", index), NULL;
        } else if (strcmp(key, "shard_key") == 0) {
            if (!json_is_string(val))
                return snprintf(err, esz, "ops[%zu].shard_key: not a string", index), NULL;
            op->shard_key = bw_arena_strndup(a, json_string_value(val), strlen(json_string_value(val)));
        } else if (strcmp(key, "fields") == 0) {
            if (!json_is_object(val))
                return snprintf(err, esz, "ops[%zu].fields: not an object", index), NULL;
            op->n_fields = json_object_size(val);
            op->fields = bw_arena_alloc(a, (op->n_fields + 1) * sizeof(*op->fields));
            size_t k = 0;
            const char *fname;
            json_t *fval;
            json_object_foreach(val, fname, fval) {
                Bulkwrite__V1__Field *f = bw_arena_alloc(a, sizeof(*f));
                bulkwrite__v1__field__init(f);
                f->name = bw_arena_strndup(a, fname, strlen(fname));
                char ferr[256];
                if (json_value(fval, f, a, ferr, sizeof(ferr)))
                    return snprintf(err, esz, "ops[%zu].fields: %s", index, ferr), NULL;
                op->fields[k++] = f;
            }
        } else {
            return snprintf(err, esz, "ops[%zu]: unknown member \"%s\"", index, key), NULL;
        }
    }
    if (!op->object_type) op->object_type = "";
    if (!op->shard_key) op->shard_key = "";
    return op;
}

static Bulkwrite__V1__BatchWriteRequest *decode_json(const void *body, size_t len, bw_arena_t *a,
                                                     char *err, size_t esz) {
    json_error_t jerr;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
    if (!root) return snprintf(err, esz, "malformed JSON at line %d column %d: %s", jerr.line, jerr.column, jerr.text), NULL;
    Bulkwrite__V1__BatchWriteRequest *req = bw_arena_alloc(a, sizeof(*req));
    bulkwrite__v1__batch_write_request__init(req);
    req->request_id = "";
    const char *key;
    json_t *val;
    if (!json_is_object(root)) {
        snprintf(err, esz, "the body must be a JSON object {\"ops\": [...]}");
        goto fail;
    }
    json_object_foreach(root, key, val) {
        if (strcmp(key, "request_id") == 0 && json_is_string(val)) {
            req->request_id = bw_arena_strndup(a, json_string_value(val), strlen(json_string_value(val)));
        } else if (strcmp(key, "ops") == 0 && json_is_array(val)) {
            req->n_ops = json_array_size(val);
            req->ops = bw_arena_alloc(a, (req->n_ops + 1) * sizeof(*req->ops));
            for (size_t i = 0; i < req->n_ops; i++)
                if (!(req->ops[i] = json_op(json_array_get(val, i), i, a, err, esz))) goto fail;
        } else {
            snprintf(err, esz, "unknown or mistyped member \"%s\" (expected request_id: string, ops: array)", key);
            goto fail;
        }
    }
    json_decref(root);
    return req;
fail:
    json_decref(root);
    return NULL;
}

Bulkwrite__V1__BatchWriteRequest *bw_request_decode(bw_format_t fmt, const void *body, size_t len,
                                                    bw_arena_t *arena, char *errstr,
                                                    size_t errstr_size) {
    if (fmt == BW_FMT_JSON) return decode_json(body, len, arena, errstr, errstr_size);
    Bulkwrite__V1__BatchWriteRequest *req =
        bulkwrite__v1__batch_write_request__unpack(&arena->pb, len, body);
    if (!req) snprintf(errstr, errstr_size, "malformed protobuf: not a bulkwrite.v1.BatchWriteRequest");
    return req;
}

/* ---- validation -------------------------------------------------------------------- */

int bw_request_job_id(const Bulkwrite__V1__BatchWriteRequest *req, char out[33], char *errstr,
                      size_t errstr_size) {
    unsigned char d[16];
    const char *rid = req->request_id ? req->request_id : "";
    size_t len = strlen(rid);
    if (len == 0) {
        if (getrandom(d, sizeof(d), 0) != (ssize_t)sizeof(d)) abort();
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
        char key[sizeof(ns) + BW_REQUEST_ID_MAX];
        memcpy(key, ns, sizeof(ns) - 1);
        memcpy(key + sizeof(ns) - 1, rid, len);
        bw_md5(key, sizeof(ns) - 1 + len, d);
    }
    for (int i = 0; i < 16; i++) snprintf(out + 2 * i, 3, "%02x", d[i]);
    return 0;
}

int bw_utf8_valid(const unsigned char *s, size_t len) {
    size_t i = 0;
    while (i < len) {
        unsigned char c = s[i];
        if (c < 0x80) { i++; continue; }
        size_t n;
        uint32_t cp;
        if ((c & 0xE0) == 0xC0) { n = 2; cp = c & 0x1F; }
        else if ((c & 0xF0) == 0xE0) { n = 3; cp = c & 0x0F; }
        else if ((c & 0xF8) == 0xF0) { n = 4; cp = c & 0x07; }
        else return 0;
        if (i + n > len) return 0;
        for (size_t k = 1; k < n; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return 0;
            cp = cp << 6 | (s[i + k] & 0x3F);
        }
        if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
            cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += n;
    }
    return 1;
}

/* Replaces, in place, every byte that does not start a valid UTF-8 sequence with '?'.
 * Reasons quote client text cut to a length (which may split a sequence) and protobuf
 * strings that were never checked; a reply must still be UTF-8 (jansson refuses to
 * build a JSON string otherwise, and proto3 clients reject such a string field). */
static void utf8_sanitize(char *s) {
    size_t len = strlen(s);
    for (size_t i = 0; i < len;) {
        unsigned char c = (unsigned char)s[i];
        size_t n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (n && i + n <= len && bw_utf8_valid((const unsigned char *)s + i, n)) {
            i += n;
        } else {
            s[i++] = '?';
        }
    }
}

#define REJECT(...) do { snprintf(why, why_size, __VA_ARGS__); return -1; } while (0)

/* Validates one field value against its column. */
static int check_value(const bw_column_t *col, const Bulkwrite__V1__Field *f, int op, char *why_out,
                       size_t why_size) {
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
        if (ok && !bw_utf8_valid(v->string_value.data, v->string_value.len)) {
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
static int validate_op(const bw_config_t *conf, const Bulkwrite__V1__Op *op, bw_arena_t *a,
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
            char *end;
            unsigned long long owner = strtoull(key, &end, 10);
            if (*key < '0' || *key > '9' || *end || !bw_id_well_formed(owner))
                REJECT("shard_key \"%.64s\" is not an object id (create_route is \"id\")", key);
            if ((int)bw_id_shard(owner) >= conf->shard_count)
                REJECT("shard_key %llu: shard %u is out of range (shards.count is %d)", owner,
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
        int c = bw_config_column(ot, fname);
        if (c < 0) {
            if (strcmp(fname, ot->id_column) == 0) REJECT("field \"%.64s\": set the id with the op's id", fname);
            REJECT("unknown column \"%.64s\" for object type %s", fname, ot->name);
        }
        for (size_t k = 0; k < i; k++)
            if (cols[k] == c) REJECT("field \"%.64s\" is given twice", fname);
        if (check_value(&ot->columns[c], f, kind, why, why_size)) return -1;
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

size_t bw_request_validate(const bw_config_t *conf, const Bulkwrite__V1__BatchWriteRequest *req,
                           bw_arena_t *arena, bw_op_route_t *routes, bw_rejection_t **rejected) {
    size_t cnt = 0, cap = 0;
    bw_rejection_t *rej = NULL;
    for (size_t i = 0; i < req->n_ops; i++) {
        char why[512];
        routes[i] = (bw_op_route_t){-1, 0, NULL};
        if (validate_op(conf, req->ops[i], arena, &routes[i], why, sizeof(why)) == 0) continue;
        routes[i].shard = -1;
        if (cnt == cap) {
            cap = cap ? cap * 2 : 16;
            bw_rejection_t *n = bw_arena_alloc(arena, cap * sizeof(*n));
            if (rej) memcpy(n, rej, cnt * sizeof(*n));
            rej = n;
        }
        rej[cnt].index = (uint32_t)i;
        utf8_sanitize(why);
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
            utf8_sanitize(reason);
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
