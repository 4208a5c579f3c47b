/* request.c — a decoded request checked against the configuration: job ids, validation
 * and routing of each op, and the reply (request.h). */
#include "request.h"

#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "ledger.h"
#include "shard.h"
#include "utf8.h"

/* ---- validation -------------------------------------------------------------------- */

/* The checks a client's name for a job obeys (request_id, job): 0, or -1 with errstr. */
static int check_name(const char *what, const char *s, size_t len, char *errstr, size_t errstr_size) {
    if (len > BW_REQUEST_ID_MAX)
        return snprintf(errstr, errstr_size, "%s is %zu bytes; at most %d are allowed", what, len, BW_REQUEST_ID_MAX), -1;
    if (!bw_utf8_valid((const unsigned char *)s, len)) return snprintf(errstr, errstr_size, "%s is not valid UTF-8", what), -1;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return snprintf(errstr, errstr_size, "%s contains a control character at byte %zu", what, i), -1;
    return 0;
}

/* 32 hex digits of the digest of ns, the client's name and text (request.h). */
static void derive_id(const char *ns, const char *client, const void *key, size_t key_len, const char *text,
                      size_t len, char out[33]) {
    unsigned char d[EVP_MAX_MD_SIZE];
    size_t ns_len = strlen(ns);
    size_t client_len = client ? strlen(client) + 1 : 0; /* the NUL ends the name: no "ab"+"c" = "a"+"bc" */
    char msg[32 + 256 + BW_REQUEST_ID_MAX];
    if (client_len > 256) client_len = 256; /* client names are at most 64 (auth.h) */
    size_t n = ns_len;
    memcpy(msg, ns, n);
    if (client) {
        memcpy(msg + n, client, client_len - 1);
        msg[n + client_len - 1] = '\0';
        n += client_len;
    }
    memcpy(msg + n, text, len);
    n += len;
    unsigned md_len;
    if (!client) bw_md5(msg, n, d);
    else if (!HMAC(EVP_sha256(), key_len ? key : "", (int)key_len, (const unsigned char *)msg, n, d, &md_len))
        abort();
    for (int i = 0; i < 16; i++) snprintf(out + 2 * i, 3, "%02x", d[i]);
}

int bw_request_job_id(const Bulkwrite__V1__BatchWriteRequest *req, const char *client, const void *key,
                      size_t key_len, char out[33], char *errstr, size_t errstr_size) {
    const char *rid = req->request_id ? req->request_id : "";
    size_t len = strlen(rid);
    if (len == 0) {
        unsigned char d[16];
        if (getrandom(d, 16, 0) != 16) abort();
        for (int i = 0; i < 16; i++) snprintf(out + 2 * i, 3, "%02x", d[i]);
        return 0;
    }
    if (check_name("request_id", rid, len, errstr, errstr_size)) return -1;
    derive_id("bulkwrite.v1/", client, key, key_len, rid, len, out);
    return 0;
}

int bw_request_named_job_id(const Bulkwrite__V1__BatchWriteRequest *req, const char *client, const void *key,
                            size_t key_len, char job[33], char part[33], char *errstr, size_t errstr_size) {
    size_t len = strlen(req->job);
    if (req->request_id && req->request_id[0])
        return snprintf(errstr, errstr_size, "a part of a named job is named by job and job_part: leave request_id "
                                             "empty (a resent part is the same part)"), -1;
    if (check_name("job", req->job, len, errstr, errstr_size)) return -1;
    if (req->job_part > BW_JOB_PART_MAX)
        return snprintf(errstr, errstr_size, "job_part %u is over %d: a job has at most %d parts (send more ops per "
                                             "part, or a second job)", req->job_part, BW_JOB_PART_MAX,
                        BW_JOB_PART_MAX + 1), -1;
    derive_id("bulkwrite.v1.job/", client, key, key_len, req->job, len, job);
    bw_ledger_part_id(job, req->job_part, part);
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
            int digits = bw_id_digits(key, strlen(key), &owner);
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
        const char *fault = fmt == BW_FMT_JSON ? bw_json_op_fault(req->ops[i]) : NULL;
        if (fault) snprintf(why, sizeof(why), "%s", fault);
        else if (validate_op(conf, req->ops[i], fmt == BW_FMT_JSON, arena, &routes[i], why, sizeof(why)) == 0) continue;
        routes[i].shard = -1;
        if (cnt == cap) {
            cap = cap ? cap * 2 : 16;
            bw_rejection_t *n = bw_arena_alloc(arena, cap * sizeof(*n));
            if (rej) memcpy(n, rej, cnt * sizeof(*n));
            rej = n;
        }
        bw_utf8_sanitize(why);
        /* whole: an invalid op is never retryable (the arena's memory is not zeroed) */
        rej[cnt] = (bw_rejection_t){.index = (uint32_t)i, .reason = bw_arena_strndup(arena, why, strlen(why))};
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
