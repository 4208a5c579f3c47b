#include "apijson.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "request_schema.h"

/* base64 of data into o (room for 4 * ((len + 2) / 3) + 1), NUL-terminated; returns the end. */
static char *base64_into(char *o, const void *data, size_t len) {
    static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const uint8_t *in = data;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < len ? (uint32_t)in[i + 1] << 8 : 0) |
                     (i + 2 < len ? in[i + 2] : 0);
        *o++ = tbl[v >> 18 & 63];
        *o++ = tbl[v >> 12 & 63];
        *o++ = i + 1 < len ? tbl[v >> 6 & 63] : '=';
        *o++ = i + 2 < len ? tbl[v & 63] : '=';
    }
    *o = '\0';
    return o;
}

long bw_base64_decode(const char *in, size_t len, uint8_t *out) {
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

char *bw_base64(const void *data, size_t len) {
    char *out = malloc(4 * ((len + 2) / 3) + 1);
    if (!out) abort();
    base64_into(out, data, len);
    return out;
}

/* A JSON string: quotes, backslashes and control characters escaped; UTF-8 as it is. */
static void put_string(bw_buf_t *b, const char *s, size_t len) {
    bw_buf_reserve(b, len + 2);
    bw_buf_append(b, "\"", 1);
    size_t run = 0; /* bytes since the last escape, appended in one go */
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        bw_buf_append(b, s + run, i - run);
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            bw_buf_append(b, e, 2);
        } else {
            bw_buf_printf(b, "\\u%04x", c);
        }
        run = i + 1;
    }
    bw_buf_append(b, s + run, len - run);
    bw_buf_append(b, "\"", 1);
}

/* sep, then a member's name of sc's row i and the colon: `,"lane":`. (Names need no
 * escapes: they are protobuf field names.) */
static void put_member(bw_buf_t *b, const char *sep, const bw_schema_t *sc, int i) {
    bw_buf_puts(b, sep);
    bw_buf_append(b, "\"", 1);
    bw_buf_puts(b, sc->members[i].name);
    bw_buf_append(b, "\":", 2);
}

/* A value as bw_value_json writes it (a double keeps a ".0" as jansson writes it, so it
 * reads back as a double). */
static void put_value(bw_buf_t *b, const Bulkwrite__V1__Value *v) {
    switch (v ? v->kind_case : BULKWRITE__V1__VALUE__KIND__NOT_SET) {
    case BULKWRITE__V1__VALUE__KIND_INT_VALUE: bw_buf_printf(b, "%" PRId64, v->int_value); break;
    case BULKWRITE__V1__VALUE__KIND_DOUBLE_VALUE: {
        char d[40];
        int n = snprintf(d, sizeof(d), "%.17g", v->double_value);
        bw_buf_append(b, d, (size_t)n);
        if (!strpbrk(d, ".eEni")) bw_buf_append(b, ".0", 2); /* not 1e300, nan or inf */
        break;
    }
    case BULKWRITE__V1__VALUE__KIND_BOOL_VALUE: bw_buf_puts(b, v->bool_value ? "true" : "false"); break;
    case BULKWRITE__V1__VALUE__KIND_STRING_VALUE:
        put_string(b, v->string_value.len ? (const char *)v->string_value.data : "", v->string_value.len);
        break;
    case BULKWRITE__V1__VALUE__KIND_BYTES_VALUE: {
        size_t room = 4 * ((v->bytes_value.len + 2) / 3) + 1;
        bw_buf_puts(b, "{\"" BW_JSON_BASE64 "\":\"");
        bw_buf_reserve(b, room + 2);
        b->len = (size_t)(base64_into(b->data + b->len, v->bytes_value.data, v->bytes_value.len) - b->data);
        bw_buf_puts(b, "\"}");
        break;
    }
    default: bw_buf_puts(b, "null");
    }
}

void bw_apijson_request(bw_buf_t *out, const char *request_id, const char *lane, Bulkwrite__V1__Op *const *ops,
                        size_t n) {
    const bw_schema_t *sc = bw_schema_request();
    put_member(out, "{", sc, BW_REQ_REQUEST_ID);
    put_string(out, request_id, strlen(request_id));
    if (lane && *lane) {
        put_member(out, ",", sc, BW_REQ_LANE);
        put_string(out, lane, strlen(lane));
    }
    put_member(out, ",", sc, BW_REQ_OPS);
    bw_buf_append(out, "[", 1);
    for (size_t i = 0; i < n; i++) {
        if (i) bw_buf_append(out, ",", 1);
        bw_apijson_op(out, ops[i]);
    }
    bw_buf_puts(out, "]}");
}

void bw_apijson_op(bw_buf_t *out, const Bulkwrite__V1__Op *op) {
    const bw_schema_t *sc = bw_schema_op();
    put_member(out, "{", sc, BW_OP_OP);
    bw_buf_append(out, "\"", 1);
    bw_buf_puts(out, bw_op_name((int)op->op));
    bw_buf_append(out, "\"", 1);
    put_member(out, ",", sc, BW_OP_OBJECT_TYPE);
    put_string(out, op->object_type, strlen(op->object_type));
    put_member(out, ",", sc, BW_OP_ID);
    bw_buf_printf(out, "%" PRIu64, op->id);
    if (op->shard_key && *op->shard_key) {
        put_member(out, ",", sc, BW_OP_SHARD_KEY);
        put_string(out, op->shard_key, strlen(op->shard_key));
    }
    put_member(out, ",", sc, BW_OP_FIELDS);
    bw_buf_append(out, "{", 1);
    for (size_t k = 0; k < op->n_fields; k++) {
        if (k) bw_buf_append(out, ",", 1);
        put_string(out, op->fields[k]->name, strlen(op->fields[k]->name));
        bw_buf_append(out, ":", 1);
        if (op->fields[k]->increment) bw_buf_puts(out, "{\"" BW_JSON_INCREMENT "\":");
        put_value(out, op->fields[k]->value);
        if (op->fields[k]->increment) bw_buf_append(out, "}", 1);
    }
    bw_buf_puts(out, "}}");
}

json_t *bw_value_json(const Bulkwrite__V1__Value *v) {
    if (!v) return json_null();
    switch (v->kind_case) {
    case BULKWRITE__V1__VALUE__KIND_INT_VALUE: return json_integer(v->int_value);
    case BULKWRITE__V1__VALUE__KIND_DOUBLE_VALUE: return json_real(v->double_value);
    case BULKWRITE__V1__VALUE__KIND_BOOL_VALUE: return json_boolean(v->bool_value);
    case BULKWRITE__V1__VALUE__KIND_STRING_VALUE: /* protobuf-c leaves an empty one NULL: still "" */
        return json_stringn(v->string_value.len ? (const char *)v->string_value.data : "", v->string_value.len);
    case BULKWRITE__V1__VALUE__KIND_BYTES_VALUE: {
        char *b = bw_base64(v->bytes_value.data, v->bytes_value.len);
        json_t *j = json_pack("{s:s}", BW_JSON_BASE64, b);
        free(b);
        return j;
    }
    default: return json_null();
    }
}
