#include "deadletter.h"

#include <inttypes.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apijson.h"
#include "bw.h"
#include "kafka.h"
#include "utf8.h"

struct bw_dead_letters {
    rd_kafka_t *rk;
    rd_kafka_topic_t *rkt;
    int timeout_ms;
    size_t max_value;  /* bytes of a record's JSON at most (under message.max.bytes) */
};

/* A record's opaque is its send call's acks (kafka.h); any thread polling the producer
 * (each worker waiting in bw_dead_letters_send) may serve the report. */
static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    (void)rk;
    (void)opaque;
    bw_kafka_acks_delivered(m->_private, 0, m);
}

bw_dead_letters_t *bw_dead_letters_new(const bw_config_t *conf, const char *brokers, char *errstr,
                                       size_t errstr_size) {
    rd_kafka_conf_t *kc = bw_kafka_conf(conf, BW_KAFKA_PRODUCER, brokers, errstr, errstr_size);
    if (!kc) return NULL;
    rd_kafka_conf_set_dr_msg_cb(kc, on_delivery);
    bw_dead_letters_t *dl = calloc(1, sizeof(*dl));
    dl->timeout_ms = conf->produce_timeout_ms;
    dl->max_value = bw_dead_letter_max_bytes(conf);
    if (!(dl->rk = rd_kafka_new(RD_KAFKA_PRODUCER, kc, errstr, errstr_size))) {
        free(dl);
        return NULL;
    }
    if (bw_kafka_ensure_side_topic(dl->rk, conf, conf->dead_letter_topic, BW_TOPIC_LOG, 10000, errstr, errstr_size)) {
        bw_dead_letters_destroy(dl);
        return NULL;
    }
    dl->rkt = rd_kafka_topic_new(dl->rk, conf->dead_letter_topic, NULL);
    return dl;
}

void bw_dead_letters_destroy(bw_dead_letters_t *dl) {
    if (!dl) return;
    rd_kafka_flush(dl->rk, 10000);
    if (dl->rkt) rd_kafka_topic_destroy(dl->rkt);
    rd_kafka_destroy(dl->rk);
    free(dl);
}

size_t bw_dead_letter_max_bytes(const bw_config_t *conf) {
    return (size_t)conf->message_max_bytes - 1024; /* the key and the record's framing */
}

static void sha256_hex(const void *data, size_t len, char out[65]) {
    unsigned char md[32];
    unsigned int md_len = 0;
    if (!EVP_Digest(data, len, md, &md_len, EVP_sha256(), NULL) || md_len != 32) abort();
    for (int i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", md[i]);
}

/* How much of the op's data a record carries: everything, the first KEEP_PREFIX bytes
 * of each long text or binary value, none of them, or no fields at all. */
enum { KEEP_ALL, KEEP_PREFIX, KEEP_NONE, KEEP_NO_FIELDS };
#define PREFIX_BYTES 1024

/* {"truncated": {"length": N, "sha256": "…", "prefix": <the first bytes, encoded as the
 * value is>}}: enough to recognise the value, never more than PREFIX_BYTES of it. */
static json_t *truncated_json(const Bulkwrite__V1__Value *v, const ProtobufCBinaryData *data, size_t keep) {
    Bulkwrite__V1__Value prefix = *v;
    ProtobufCBinaryData *pd = v->kind_case == BULKWRITE__V1__VALUE__KIND_STRING_VALUE ? &prefix.string_value
                                                                                        : &prefix.bytes_value;
    size_t n = keep;
    if (v->kind_case == BULKWRITE__V1__VALUE__KIND_STRING_VALUE)
        while (n > 0 && (data->data[n] & 0xC0) == 0x80) n--; /* whole UTF-8 characters */
    pd->len = n;
    char sha[65];
    sha256_hex(data->data, data->len, sha);
    return json_pack("{s:{s:I, s:s, s:o}}", "truncated", "length", (json_int_t)data->len, "sha256", sha, "prefix",
                     bw_value_json(&prefix));
}

/* A value as the API encodes it, or truncated when it is longer than `keep` bytes. */
static json_t *value_json(const Bulkwrite__V1__Value *v, size_t keep, int *truncated) {
    const ProtobufCBinaryData *data = !v ? NULL
                                      : v->kind_case == BULKWRITE__V1__VALUE__KIND_STRING_VALUE ? &v->string_value
                                      : v->kind_case == BULKWRITE__V1__VALUE__KIND_BYTES_VALUE  ? &v->bytes_value
                                                                                                : NULL;
    if (!data || data->len <= keep) return bw_value_json(v);
    *truncated = 1;
    return truncated_json(v, data, keep);
}

static size_t keep_bytes(int level) { return level == KEEP_ALL ? SIZE_MAX : level == KEEP_PREFIX ? PREFIX_BYTES : 0; }

/* The refused op (r->row) as the API encodes it, its values kept as `level` says. */
static json_t *op_json(const bw_dead_letter_t *r, int level, int *truncated) {
    const Bulkwrite__Internal__V1__Row *row = r->row;
    char id[24];
    snprintf(id, sizeof(id), "%" PRIu64, row->id);
    json_t *op = json_pack("{s:s, s:s, s:s}", "op", bw_op_name(r->op), "object_type", r->object_type, "id", id);
    if (r->shard_key) json_object_set_new(op, "shard_key", json_string(r->shard_key));
    if (level == KEEP_NO_FIELDS) return *truncated = 1, op;
    json_t *fields = json_object();
    for (size_t f = 0; f < row->n_fields; f++) {
        const Bulkwrite__Internal__V1__RowField *rf = row->fields[f];
        if (rf->column >= r->n_columns) { /* no name to give it: the op is not whole */
            *truncated = 1;
            continue;
        }
        json_t *v = value_json(rf->value, keep_bytes(level), truncated);
        if (rf->increment) v = json_pack("{s:o}", "increment", v);
        json_object_set_new(fields, r->columns[rf->column], v);
    }
    json_object_set_new(op, "fields", fields);
    return op;
}

static char *record_json(const bw_dead_letter_t *r, int level) {
    size_t keep = keep_bytes(level);
    int truncated = level == KEEP_NO_FIELDS;
    json_t *j = json_object();
    if (r->job_id) json_object_set_new(j, "job_id", json_string(r->job_id));
    if (r->job_id) json_object_set_new(j, "part", json_integer(r->part));
    json_object_set_new(j, "shard", json_integer(r->shard));
    if (r->topic) json_object_set_new(j, "kafka_topic", json_string(r->topic));
    json_object_set_new(j, "kafka_offset", json_integer(r->offset));
    json_object_set_new(j, "error_code", json_integer(r->error_code));
    /* a server's message may quote a key's bytes that are not UTF-8 (a duplicate key in a
     * binary column): repaired, or jansson would refuse it and the record lose its reason */
    char error[1024];
    snprintf(error, sizeof(error), "%s", r->error);
    bw_utf8_sanitize(error);
    json_object_set_new(j, "error", json_string(error));
    if (r->row) {
        json_object_set_new(j, "op_index", json_integer(r->row->op_index));
        json_object_set_new(j, "op", op_json(r, level, &truncated));
    } else if (r->raw) {
        size_t n = r->raw_len < keep ? r->raw_len : keep;
        char *b = bw_base64(r->raw, n);
        json_object_set_new(j, "payload_base64", json_string(b));
        free(b);
        if (n < r->raw_len) {
            char sha[65];
            sha256_hex(r->raw, r->raw_len, sha);
            json_object_set_new(j, "payload_length", json_integer((json_int_t)r->raw_len));
            json_object_set_new(j, "payload_sha256", json_string(sha));
            truncated = 1;
        }
    }
    /* a truncated record cannot be resubmitted as it is: say so at the top */
    if (truncated) json_object_set_new(j, "truncated", json_true());
    char *out = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(j);
    if (!out) abort();
    return out;
}

char *bw_dead_letter_json(const bw_dead_letter_t *r, size_t max_bytes) {
    for (int level = KEEP_ALL;; level++) {
        char *out = record_json(r, level);
        if (strlen(out) <= max_bytes || level == KEEP_NO_FIELDS) return out;
        free(out);
    }
}

char *bw_dead_letter_op_json(const bw_dead_letter_t *r, size_t max_bytes, int *truncated) {
    for (int level = KEEP_ALL;; level++) {
        *truncated = 0;
        json_t *op = op_json(r, level, truncated);
        char *out = json_dumps(op, JSON_COMPACT | JSON_SORT_KEYS);
        json_decref(op);
        if (!out) abort();
        if (strlen(out) <= max_bytes || level == KEEP_NO_FIELDS) return out;
        free(out);
    }
}

int bw_dead_letters_send(bw_dead_letters_t *dl, const bw_dead_letter_t *recs, size_t n, char *errstr,
                         size_t errstr_size) {
    bw_kafka_acks_t acks; /* no thread polls dl->rk: the waiter does */
    bw_kafka_acks_init(&acks, dl->rk, 1, dl->timeout_ms, NULL, NULL);
    for (size_t i = 0; i < n; i++) {
        const bw_dead_letter_t *r = &recs[i];
        char key[96];
        if (r->job_id)
            snprintf(key, sizeof(key), "%s/%" PRIu32 "/%" PRIu32, r->job_id, r->part, r->row ? r->row->op_index : 0);
        else
            snprintf(key, sizeof(key), "undecodable/%.40s/%d/%" PRId64, r->topic ? r->topic : "?", r->shard, r->offset);
        char *value = bw_dead_letter_json(r, dl->max_value);
        bw_kafka_msg_t km = {.rkt = dl->rkt, .partition = RD_KAFKA_PARTITION_UA, .key = key, .key_len = strlen(key),
                             .value = value, .value_len = strlen(value), .msgflags = RD_KAFKA_MSG_F_FREE};
        if (bw_kafka_acks_produce(&acks, &km, 0, &acks)) {
            free(value); /* not taken: still ours */
            break;
        }
    }
    /* message.timeout.ms bounds each message, so this ends */
    rd_kafka_resp_err_t err = bw_kafka_acks_wait(&acks);
    if (!err) return 0;
    snprintf(errstr, errstr_size, "dead-letter topic: %s", rd_kafka_err2str(err));
    return -1;
}
