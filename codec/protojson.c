#include "protojson.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apijson.h"

/* "job_part" -> "jobPart": the name protojson writes (protoc's json_name, which
 * protobuf-c's descriptors do not keep). */
static void json_name(const char *name, char *out, size_t size) {
    size_t n = 0;
    for (int up = 0; *name && n + 1 < size; name++) {
        if (*name == '_') {
            up = 1;
            continue;
        }
        out[n++] = up ? (char)toupper((unsigned char)*name) : *name;
        up = 0;
    }
    out[n] = '\0';
}

/* ---- encoding ------------------------------------------------------------------------- */

static json_t *scalar_json(const ProtobufCFieldDescriptor *f, const void *p) {
    char num[24];
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32: return json_integer(*(const int32_t *)p);
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32: return json_integer(*(const uint32_t *)p);
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        snprintf(num, sizeof(num), "%" PRId64, *(const int64_t *)p);
        return json_string(num);
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        snprintf(num, sizeof(num), "%" PRIu64, *(const uint64_t *)p);
        return json_string(num);
    case PROTOBUF_C_TYPE_FLOAT: return isfinite(*(const float *)p) ? json_real(*(const float *)p) : json_string("NaN");
    case PROTOBUF_C_TYPE_DOUBLE:
        return isfinite(*(const double *)p) ? json_real(*(const double *)p) : json_string("NaN");
    case PROTOBUF_C_TYPE_BOOL: return json_boolean(*(const protobuf_c_boolean *)p);
    case PROTOBUF_C_TYPE_ENUM: {
        const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(f->descriptor, *(const int *)p);
        return v ? json_string(v->name) : json_integer(*(const int *)p);
    }
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(char *const *)p;
        return json_string(s ? s : "");
    }
    case PROTOBUF_C_TYPE_BYTES: {
        const ProtobufCBinaryData *b = p;
        char *t = bw_base64(b->data, b->len);
        json_t *j = json_string(t);
        free(t);
        return j;
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
        const ProtobufCMessage *m = *(ProtobufCMessage *const *)p;
        return m ? bw_protojson_encode(m) : json_object();
    }
    }
    return json_null();
}

static size_t element_size(ProtobufCType t) {
    switch (t) {
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64: return 8;
    case PROTOBUF_C_TYPE_DOUBLE: return sizeof(double);
    case PROTOBUF_C_TYPE_BOOL: return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_STRING: return sizeof(char *);
    case PROTOBUF_C_TYPE_BYTES: return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_MESSAGE: return sizeof(ProtobufCMessage *);
    default: return 4; /* the 32-bit integers, float and enum */
    }
}

/* proto3: a singular field at its default is not written */
static int is_default(const ProtobufCFieldDescriptor *f, const void *p) {
    switch (f->type) {
    case PROTOBUF_C_TYPE_STRING: return !*(char *const *)p || !**(char *const *)p;
    case PROTOBUF_C_TYPE_BYTES: return ((const ProtobufCBinaryData *)p)->len == 0;
    case PROTOBUF_C_TYPE_MESSAGE: return *(ProtobufCMessage *const *)p == NULL;
    case PROTOBUF_C_TYPE_FLOAT: return *(const float *)p == 0;
    case PROTOBUF_C_TYPE_DOUBLE: return *(const double *)p == 0;
    default: {
        static const uint8_t zero[8];
        return memcmp(p, zero, element_size(f->type)) == 0;
    }
    }
}

json_t *bw_protojson_encode(const ProtobufCMessage *m) {
    const ProtobufCMessageDescriptor *d = m->descriptor;
    json_t *o = json_object();
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        const char *base = (const char *)m;
        const void *p = base + f->offset;
        char name[128];
        json_name(f->name, name, sizeof(name));
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n = *(const size_t *)(base + f->quantifier_offset);
            if (!n) continue;
            json_t *a = json_array();
            const char *arr = *(char *const *)p;
            for (size_t k = 0; k < n; k++) json_array_append_new(a, scalar_json(f, arr + k * element_size(f->type)));
            json_object_set_new(o, name, a);
            continue;
        }
        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            if (*(const uint32_t *)(base + f->quantifier_offset) != f->id) continue;
        } else if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->quantifier_offset) {
            if (!*(const protobuf_c_boolean *)(base + f->quantifier_offset)) continue;
        } else if (is_default(f, p)) {
            continue;
        }
        json_object_set_new(o, name, scalar_json(f, p));
    }
    return o;
}

/* ---- decoding ------------------------------------------------------------------------- */

typedef struct {
    char *err;
    size_t esz;
    char path[256]; /* the field being read, for the error */
} reader_t;

static int fail(reader_t *r, const char *fmt, const char *what) {
    char msg[200];
    snprintf(msg, sizeof(msg), fmt, what);
    snprintf(r->err, r->esz, "%s: %s", r->path[0] ? r->path : "the body", msg);
    return -1;
}

static int integer_of(reader_t *r, json_t *v, int is_signed, int64_t min, uint64_t max, void *out, size_t size) {
    int64_t s = 0;
    uint64_t u = 0;
    if (json_is_integer(v)) {
        s = json_integer_value(v);
        if (!is_signed && s < 0) return fail(r, "%s", "a negative number for an unsigned field");
        u = (uint64_t)s;
    } else if (json_is_real(v)) {
        double d = json_real_value(v);
        if (d != floor(d) || fabs(d) > 9007199254740992.0) return fail(r, "%s", "not an integer");
        s = (int64_t)d;
        u = (uint64_t)(d < 0 ? 0 : d);
        if (!is_signed && d < 0) return fail(r, "%s", "a negative number for an unsigned field");
    } else if (json_is_string(v)) {
        const char *t = json_string_value(v);
        char *end;
        errno = 0;
        if (!isdigit((unsigned char)*t) && (!is_signed || *t != '-'))
            return fail(r, "\"%s\" is not an integer in range", t); /* strto*: no spaces, no sign to wrap */
        if (is_signed) s = strtoll(t, &end, 10), u = (uint64_t)s;
        else u = strtoull(t, &end, 10), s = (int64_t)u;
        if (!*t || *end || errno) return fail(r, "\"%s\" is not an integer in range", t);
    } else {
        return fail(r, "%s", "expected an integer (a number, or a string of one)");
    }
    if (is_signed ? (s < min || s > (int64_t)max) : u > max) return fail(r, "%s", "out of range");
    if (size == 8) memcpy(out, is_signed ? (void *)&s : (void *)&u, 8);
    else {
        int32_t s32 = (int32_t)s;
        uint32_t u32 = (uint32_t)u;
        memcpy(out, is_signed ? (void *)&s32 : (void *)&u32, 4);
    }
    return 0;
}

static ProtobufCMessage *decode_message(reader_t *r, const ProtobufCMessageDescriptor *d, json_t *o);

static int scalar_of(reader_t *r, const ProtobufCFieldDescriptor *f, json_t *v, void *out) {
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32: return integer_of(r, v, 1, INT32_MIN, INT32_MAX, out, 4);
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32: return integer_of(r, v, 0, 0, UINT32_MAX, out, 4);
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64: return integer_of(r, v, 1, INT64_MIN, INT64_MAX, out, 8);
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64: return integer_of(r, v, 0, 0, UINT64_MAX, out, 8);
    case PROTOBUF_C_TYPE_FLOAT:
    case PROTOBUF_C_TYPE_DOUBLE: {
        double d;
        if (json_is_number(v)) d = json_number_value(v);
        else if (json_is_string(v) && !strcmp(json_string_value(v), "NaN")) d = NAN;
        else if (json_is_string(v) && !strcmp(json_string_value(v), "Infinity")) d = INFINITY;
        else if (json_is_string(v) && !strcmp(json_string_value(v), "-Infinity")) d = -INFINITY;
        else return fail(r, "%s", "expected a number");
        if (f->type == PROTOBUF_C_TYPE_FLOAT) *(float *)out = (float)d;
        else *(double *)out = d;
        return 0;
    }
    case PROTOBUF_C_TYPE_BOOL:
        if (!json_is_boolean(v)) return fail(r, "%s", "expected true or false");
        *(protobuf_c_boolean *)out = json_is_true(v);
        return 0;
    case PROTOBUF_C_TYPE_ENUM: {
        const ProtobufCEnumDescriptor *e = f->descriptor;
        if (json_is_string(v)) {
            const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value_by_name(e, json_string_value(v));
            if (!ev) return fail(r, "\"%s\" is not a value of the enum", json_string_value(v));
            *(int *)out = ev->value;
            return 0;
        }
        return integer_of(r, v, 1, INT32_MIN, INT32_MAX, out, 4);
    }
    case PROTOBUF_C_TYPE_STRING: {
        if (!json_is_string(v)) return fail(r, "%s", "expected a string");
        char *s = strdup(json_string_value(v));
        if (!s) abort();
        *(char **)out = s;
        return 0;
    }
    case PROTOBUF_C_TYPE_BYTES: {
        if (!json_is_string(v)) return fail(r, "%s", "expected a base64 string");
        size_t len = json_string_length(v);
        uint8_t *data = malloc(len * 3 / 4 + 3);
        if (!data) abort();
        long n = bw_base64_decode(json_string_value(v), len, data);
        if (n < 0) {
            free(data);
            return fail(r, "%s", "not base64");
        }
        *(ProtobufCBinaryData *)out = (ProtobufCBinaryData){(size_t)n, data};
        return 0;
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
        if (!json_is_object(v)) return fail(r, "%s", "expected an object");
        ProtobufCMessage *m = decode_message(r, f->descriptor, v);
        if (!m) return -1;
        *(ProtobufCMessage **)out = m;
        return 0;
    }
    }
    return fail(r, "%s", "a field of a type this reader does not know");
}

static const ProtobufCFieldDescriptor *field_named(const ProtobufCMessageDescriptor *d, const char *key) {
    for (unsigned i = 0; i < d->n_fields; i++) {
        char name[128];
        json_name(d->fields[i].name, name, sizeof(name));
        if (!strcmp(key, name) || !strcmp(key, d->fields[i].name)) return &d->fields[i];
    }
    return NULL;
}

/* One field's value (not null) into m. */
static int decode_field(reader_t *r, const ProtobufCFieldDescriptor *f, json_t *v, ProtobufCMessage *m) {
    char *base = (char *)m;
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
        if (!json_is_array(v)) return fail(r, "%s", "expected an array");
        size_t n = json_array_size(v), es = element_size(f->type);
        char *arr = calloc(n ? n : 1, es);
        if (!arr) abort();
        *(void **)(base + f->offset) = arr;
        size_t *count = (size_t *)(base + f->quantifier_offset);
        for (size_t k = 0; k < n; k++) {
            if (scalar_of(r, f, json_array_get(v, k), arr + k * es)) return -1;
            *count = k + 1; /* what is freed on failure */
        }
        return 0;
    }
    if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
        uint32_t *c = (uint32_t *)(base + f->quantifier_offset);
        if (*c) return fail(r, "%s", "a second member of a oneof");
        if (scalar_of(r, f, v, base + f->offset)) return -1;
        *c = f->id;
        return 0;
    }
    if (scalar_of(r, f, v, base + f->offset)) return -1;
    if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->quantifier_offset)
        *(protobuf_c_boolean *)(base + f->quantifier_offset) = 1;
    return 0;
}

/* Decodes o into m, already initialized; on failure m holds what was read (freed by the caller). */
static int decode_into(reader_t *r, const ProtobufCMessageDescriptor *d, json_t *o, ProtobufCMessage *m) {
    const char *key;
    json_t *v;
    size_t path_len = strlen(r->path);
    uint8_t *seen = calloc(d->n_fields ? d->n_fields : 1, 1); /* "jobPart" and "job_part" are one field */
    if (!seen) abort();
    int ret = 0;
    json_object_foreach(o, key, v) {
        snprintf(r->path + path_len, sizeof(r->path) - path_len, "%s%s", path_len ? "." : "", key);
        const ProtobufCFieldDescriptor *f = field_named(d, key);
        if (!f) continue; /* a newer client's field: skipped, as protobuf skips an unknown number */
        if (seen[f - d->fields]++) {
            ret = fail(r, "%s", "given twice (by its JSON name and its proto name)");
            break;
        }
        if (!json_is_null(v) && (ret = decode_field(r, f, v, m))) break; /* null: the default */
    }
    free(seen);
    if (!ret) r->path[path_len] = '\0';
    return ret;
}

static ProtobufCMessage *decode_message(reader_t *r, const ProtobufCMessageDescriptor *d, json_t *o) {
    ProtobufCMessage *m = malloc(d->sizeof_message);
    if (!m) abort();
    d->message_init(m);
    if (decode_into(r, d, o, m)) {
        protobuf_c_message_free_unpacked(m, NULL);
        return NULL;
    }
    return m;
}

ProtobufCMessage *bw_protojson_decode(const ProtobufCMessageDescriptor *d, const char *text, size_t len, char *err,
                                      size_t esz) {
    json_error_t je;
    json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!o) {
        snprintf(err, esz, "malformed JSON at line %d column %d: %s", je.line, je.column, je.text);
        return NULL;
    }
    reader_t r = {.err = err, .esz = esz};
    ProtobufCMessage *m = NULL;
    if (!json_is_object(o)) snprintf(err, esz, "the body is not a JSON object (a %s message)", d->name);
    else m = decode_message(&r, d, o);
    json_decref(o);
    return m;
}
