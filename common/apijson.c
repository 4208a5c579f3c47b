#include "apijson.h"

#include <stdint.h>
#include <stdlib.h>

char *bw_base64(const void *data, size_t len) {
    static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const uint8_t *in = data;
    char *out = malloc(4 * ((len + 2) / 3) + 1), *o = out;
    if (!out) abort();
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < len ? (uint32_t)in[i + 1] << 8 : 0) |
                     (i + 2 < len ? in[i + 2] : 0);
        *o++ = tbl[v >> 18 & 63];
        *o++ = tbl[v >> 12 & 63];
        *o++ = i + 1 < len ? tbl[v >> 6 & 63] : '=';
        *o++ = i + 2 < len ? tbl[v & 63] : '=';
    }
    *o = '\0';
    return out;
}

json_t *bw_value_json(const Bulkwrite__V1__Value *v) {
    if (!v) return json_null();
    switch (v->kind_case) {
    case BULKWRITE__V1__VALUE__KIND_INT_VALUE: return json_integer(v->int_value);
    case BULKWRITE__V1__VALUE__KIND_DOUBLE_VALUE: return json_real(v->double_value);
    case BULKWRITE__V1__VALUE__KIND_BOOL_VALUE: return json_boolean(v->bool_value);
    case BULKWRITE__V1__VALUE__KIND_STRING_VALUE:
        return json_stringn((const char *)v->string_value.data, v->string_value.len);
    case BULKWRITE__V1__VALUE__KIND_BYTES_VALUE: {
        char *b = bw_base64(v->bytes_value.data, v->bytes_value.len);
        json_t *j = json_pack("{s:s}", "base64", b);
        free(b);
        return j;
    }
    default: return json_null();
    }
}
