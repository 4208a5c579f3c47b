#include "deadletter.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apijson.h"
#include "bw.h"
#include "kafka.h"

struct bw_dead_letters {
    rd_kafka_t *rk;
    rd_kafka_topic_t *rkt;
    int timeout_ms;
};

/* One send call's outstanding acknowledgements; lives on the caller's stack until
 * pending reaches 0 (any thread polling the producer may serve the callback). */
typedef struct {
    atomic_size_t pending;
    atomic_int err; /* first delivery error */
} delivery_t;

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    (void)rk;
    (void)opaque;
    delivery_t *d = m->_private;
    if (m->err) {
        int none = 0;
        atomic_compare_exchange_strong(&d->err, &none, (int)m->err);
    }
    atomic_fetch_sub(&d->pending, 1);
}

bw_dead_letters_t *bw_dead_letters_new(const bw_config_t *conf, const char *brokers, char *errstr,
                                       size_t errstr_size) {
    rd_kafka_conf_t *kc = bw_kafka_conf(conf, BW_KAFKA_PRODUCER, brokers, errstr, errstr_size);
    if (!kc) return NULL;
    rd_kafka_conf_set_dr_msg_cb(kc, on_delivery);
    bw_dead_letters_t *dl = calloc(1, sizeof(*dl));
    dl->timeout_ms = conf->produce_timeout_ms;
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

char *bw_dead_letter_json(const bw_dead_letter_t *r) {
    json_t *j = json_object();
    if (r->job_id) json_object_set_new(j, "job_id", json_string(r->job_id));
    if (r->job_id) json_object_set_new(j, "part", json_integer(r->part));
    json_object_set_new(j, "shard", json_integer(r->shard));
    json_object_set_new(j, "kafka_offset", json_integer(r->offset));
    json_object_set_new(j, "error_code", json_integer(r->error_code));
    json_object_set_new(j, "error", json_string(r->error));
    if (r->row) {
        const Bulkwrite__V1__Row *row = r->row;
        json_object_set_new(j, "op_index", json_integer(row->op_index));
        char id[24];
        snprintf(id, sizeof(id), "%" PRIu64, row->id);
        json_t *fields = json_object();
        for (size_t f = 0; f < row->n_fields; f++) {
            const Bulkwrite__V1__RowField *rf = row->fields[f];
            json_t *v = bw_value_json(rf->value);
            if (rf->increment) v = json_pack("{s:o}", "increment", v);
            json_object_set_new(fields, r->columns[rf->column], v);
        }
        json_object_set_new(j, "op", json_pack("{s:s, s:s, s:s, s:o}", "op", bw_op_name(r->op),
                                               "object_type", r->object_type, "id", id, "fields", fields));
    } else if (r->raw) {
        char *b = bw_base64(r->raw, r->raw_len);
        json_object_set_new(j, "payload_base64", json_string(b));
        free(b);
    }
    char *out = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(j);
    if (!out) abort();
    return out;
}

int bw_dead_letters_send(bw_dead_letters_t *dl, const bw_dead_letter_t *recs, size_t n, char *errstr,
                         size_t errstr_size) {
    delivery_t d;
    atomic_init(&d.pending, 0);
    atomic_init(&d.err, 0);
    int64_t deadline = bw_now_us() + (int64_t)dl->timeout_ms * 1000;
    for (size_t i = 0; i < n; i++) {
        const bw_dead_letter_t *r = &recs[i];
        char key[96];
        if (r->job_id)
            snprintf(key, sizeof(key), "%s/%" PRIu32 "/%" PRIu32, r->job_id, r->part, r->row ? r->row->op_index : 0);
        else
            snprintf(key, sizeof(key), "undecodable/%d/%" PRId64, r->shard, r->offset);
        char *value = bw_dead_letter_json(r);
        atomic_fetch_add(&d.pending, 1);
        rd_kafka_resp_err_t err;
        while ((err = rd_kafka_producev(dl->rk, RD_KAFKA_V_RKT(dl->rkt), RD_KAFKA_V_KEY(key, strlen(key)),
                                        RD_KAFKA_V_VALUE(value, strlen(value)),
                                        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_FREE), RD_KAFKA_V_OPAQUE(&d),
                                        RD_KAFKA_V_END)) == RD_KAFKA_RESP_ERR__QUEUE_FULL &&
               bw_now_us() < deadline)
            rd_kafka_poll(dl->rk, 10);
        if (err) {
            free(value);
            atomic_fetch_sub(&d.pending, 1);
            int none = 0;
            atomic_compare_exchange_strong(&d.err, &none, (int)err);
            break;
        }
    }
    /* message.timeout.ms bounds each message, so this ends */
    while (atomic_load(&d.pending) > 0) rd_kafka_poll(dl->rk, 10);
    int err = atomic_load(&d.err);
    if (!err) return 0;
    snprintf(errstr, errstr_size, "dead-letter topic: %s", rd_kafka_err2str((rd_kafka_resp_err_t)err));
    return -1;
}
