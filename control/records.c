/* records.c — the registry of record kinds (records.h), their keys, and the one way a
 * process produces a record of its own. */
#include "records.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bulkwrite/internal/v1/records.pb-c.h"

static const bw_record_def_t registry[BW_RECORD_KINDS] = {
    [BW_RECORD_SHARD_SETTING] = {"shard setting", BW_TOPIC_CONTROL, "shard/N[/pause|/rate|/row_rate|/pinned]",
                                 &bulkwrite__internal__v1__shard_control__descriptor, BW_FOLD_PER_FIELD,
                                 "proxy: the shard admin API (changes.c)", 1},
    [BW_RECORD_SERVER_BUDGET] = {"server budget", BW_TOPIC_CONTROL, "server/<name>/budget",
                                 &bulkwrite__internal__v1__server_budget__descriptor, BW_FOLD_LAST_WINS,
                                 "proxy: the server admin API (changes.c)", 1},
    [BW_RECORD_JOB_CANCEL] = {"job cancellation", BW_TOPIC_CONTROL, "job/<id>", &bulkwrite__internal__v1__job_control__descriptor,
                              BW_FOLD_ONCE, "proxy: DELETE /v1/jobs/{id}, the release loop (changes.c)", 1},
    [BW_RECORD_SHARD_STATUS] = {"shard status", BW_TOPIC_STATUS, "shard/N", &bulkwrite__internal__v1__shard_status__descriptor,
                                BW_FOLD_LAST_WINS, "consumer: the shard's owner, its main loop (progress.c)", 0},
    [BW_RECORD_PRESENCE] = {"presence", BW_TOPIC_STATUS, "member/<role>/<instance>",
                            &bulkwrite__internal__v1__fleet_member__descriptor, BW_FOLD_LAST_WINS,
                            "every process: its main loop (fleet.c)", 0},
};

const bw_record_def_t *bw_record_def(bw_record_kind_t k) {
    return (unsigned)k < BW_RECORD_KINDS ? &registry[k] : NULL;
}

/* ---- a shard's setting ---- */

/* Each key's suffix after "shard/N" and the fields it owns (bw_control_key_t's order). */
static const struct {
    const char *suffix;
    const char *fields[BW_CONTROL_FIELDS_MAX + 1];
} control_keys[BW_CONTROL_KEYS] = {
    [BW_CONTROL_WHOLE] = {"", {NULL}},
    [BW_CONTROL_PAUSE] = {"/pause", {"paused", NULL}},
    [BW_CONTROL_RATE] = {"/rate", {"has_rate", "rate", NULL}},
    [BW_CONTROL_ROW_RATE] = {"/row_rate", {"has_row_rate", "row_rate", NULL}},
    [BW_CONTROL_PINNED] = {"/pinned", {"pinned", NULL}},
};

const char *const *bw_control_key_fields(bw_control_key_t k) { return control_keys[k].fields; }

int bw_shard_key(int shard, char key[24]) { return snprintf(key, 24, "shard/%d", shard); }

int bw_shard_control_key(int shard, bw_control_key_t k, char key[BW_CONTROL_KEY_MAX]) {
    return snprintf(key, BW_CONTROL_KEY_MAX, "shard/%d%s", shard, control_keys[k].suffix);
}

int bw_shard_key_parse(const void *key, size_t len, int shard_count, bw_control_key_t *k) {
    char buf[BW_CONTROL_KEY_MAX];
    if (!key || len < 7 || len >= sizeof(buf) || memchr(key, '\0', len)) return -1;
    memcpy(buf, key, len);
    buf[len] = '\0';
    if (strncmp(buf, "shard/", 6) || buf[6] < '0' || buf[6] > '9') return -1;
    char *end;
    long s = strtol(buf + 6, &end, 10);
    if (s < 0 || s >= shard_count) return -1;
    for (int i = 0; i < BW_CONTROL_KEYS; i++)
        if (strcmp(end, control_keys[i].suffix) == 0) {
            *k = (bw_control_key_t)i;
            return (int)s;
        }
    return -1;
}

/* ---- a server's budget ---- */

int bw_server_budget_key(const char *server, char key[BW_SERVER_BUDGET_KEY_MAX]) {
    int n = snprintf(key, BW_SERVER_BUDGET_KEY_MAX, "server/%s/budget", server);
    return n < BW_SERVER_BUDGET_KEY_MAX ? n : -1;
}

int bw_server_budget_key_parse(const void *key, size_t len, char name[BW_SERVER_BUDGET_KEY_MAX]) {
    static const char prefix[] = "server/", suffix[] = "/budget";
    size_t pl = sizeof(prefix) - 1, sl = sizeof(suffix) - 1;
    if (!key || len <= pl + sl || len - pl - sl >= BW_SERVER_BUDGET_KEY_MAX || memchr(key, '\0', len) ||
        memcmp(key, prefix, pl) || memcmp((const char *)key + len - sl, suffix, sl))
        return -1;
    memcpy(name, (const char *)key + pl, len - pl - sl);
    name[len - pl - sl] = '\0';
    return 0;
}

/* ---- a job's cancellation ---- */

int bw_job_control_key(const char *job_id, char key[BW_JOB_CONTROL_KEY_MAX]) {
    return snprintf(key, BW_JOB_CONTROL_KEY_MAX, "job/%.32s", job_id);
}

const char *bw_job_control_key_parse(const void *key, size_t len) {
    const char *k = key;
    if (!key || len != 36 || memcmp(k, "job/", 4)) return NULL;
    for (size_t i = 4; i < len; i++)
        if (!((k[i] >= '0' && k[i] <= '9') || (k[i] >= 'a' && k[i] <= 'f'))) return NULL;
    return k + 4;
}

/* ---- a process's presence ---- */

int bw_member_key(const char *role, const char *instance, char *key, size_t size) {
    int len = snprintf(key, size, "member/%s/%s", role, instance);
    return len < 0 ? 0 : len >= (int)size ? (int)size - 1 : len;
}

int bw_member_key_is(const void *key, size_t klen) { return key && klen > 7 && memcmp(key, "member/", 7) == 0; }

/* ---- reading and writing ---- */

int bw_record_key_parse(bw_record_topic_t topic, const void *key, size_t klen, int shard_count, bw_record_key_t *out) {
    memset(out, 0, sizeof(*out));
    if (bw_member_key_is(key, klen)) {
        out->kind = BW_RECORD_PRESENCE;
        return 0;
    }
    if ((out->shard = bw_shard_key_parse(key, klen, shard_count, &out->field)) >= 0) {
        if (topic == BW_TOPIC_CONTROL) out->kind = BW_RECORD_SHARD_SETTING;
        else if (out->field == BW_CONTROL_WHOLE) out->kind = BW_RECORD_SHARD_STATUS;
        else return -1;
        return 0;
    }
    if (topic != BW_TOPIC_CONTROL) return -1;
    char name[BW_SERVER_BUDGET_KEY_MAX];
    if (bw_server_budget_key_parse(key, klen, name) == 0) {
        out->kind = BW_RECORD_SERVER_BUDGET;
        return 0;
    }
    if (bw_job_control_key_parse(key, klen)) {
        out->kind = BW_RECORD_JOB_CANCEL;
        return 0;
    }
    return -1;
}

rd_kafka_resp_err_t bw_record_produce(rd_kafka_t *rk, const char *topic, bw_record_kind_t kind, const char *key,
                                      size_t klen, const ProtobufCMessage *msg) {
    if (msg && msg->descriptor != registry[kind].message) abort(); /* a writer's bug: never a wrong record */
    uint8_t small[4096], *buf = small;
    size_t len = msg ? protobuf_c_message_get_packed_size(msg) : 0;
    if (len > sizeof(small) && !(buf = malloc(len))) abort();
    if (msg) protobuf_c_message_pack(msg, buf);
    rd_kafka_resp_err_t e = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_KEY(key, klen),
                                              RD_KAFKA_V_VALUE(msg ? buf : NULL, len),
                                              RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
    if (buf != small) free(buf);
    return e;
}
