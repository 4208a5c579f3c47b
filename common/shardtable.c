#include "shardtable.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet.h"
#include "log.h"
#include "ratelimit.h"
#include "tail.h"

typedef struct {
    void *data;
    size_t len;
} blob_t;

/* A member's presence record (fleet.h), by its key. */
typedef struct {
    char *key;
    blob_t value;
} member_t;

/* @locks mu guards control[], status[], members[] */
struct bw_shard_table {
    int shard_count;
    pthread_mutex_t mu;
    blob_t *control, *status;
    member_t *members;
    size_t member_cnt, member_cap;
    atomic_uint version;
    bw_tail_t *control_tail, *status_tail;
    bw_status_hook_t hook;
};

int bw_shard_key(int shard, char key[24]) { return snprintf(key, 24, "shard/%d", shard); }

static int parse_key(const void *key, size_t len, int shard_count) {
    char k[24];
    if (!key || len < 7 || len >= sizeof(k)) return -1;
    memcpy(k, key, len);
    k[len] = '\0';
    char *end;
    long s = strtol(k + 6, &end, 10);
    if (strncmp(k, "shard/", 6) || *end || end == k + 6 || s < 0 || s >= shard_count) return -1;
    return (int)s;
}

/* The shard the record is for, or -1 when it is not ours (another layout). */
static int store(bw_shard_table_t *t, blob_t *slots, const void *key, size_t klen, const void *val, size_t vlen) {
    int s = parse_key(key, klen, t->shard_count);
    if (s < 0) return -1;
    void *copy = NULL;
    if (vlen) {
        copy = malloc(vlen);
        memcpy(copy, val, vlen);
    }
    pthread_mutex_lock(&t->mu);
    free(slots[s].data);
    slots[s] = (blob_t){copy, vlen}; /* an empty value (tombstone) clears it */
    pthread_mutex_unlock(&t->mu);
    return s;
}

/* A member's record: replaces its earlier one; an empty value (it stopped) removes it. */
static void store_member(bw_shard_table_t *t, const void *key, size_t klen, const void *val, size_t vlen) {
    pthread_mutex_lock(&t->mu);
    size_t i = 0;
    while (i < t->member_cnt && (strlen(t->members[i].key) != klen || memcmp(t->members[i].key, key, klen))) i++;
    if (i < t->member_cnt) free(t->members[i].value.data);
    if (i == t->member_cnt && vlen) {
        if (t->member_cnt == t->member_cap) {
            t->member_cap = t->member_cap ? t->member_cap * 2 : 8;
            t->members = realloc(t->members, t->member_cap * sizeof(*t->members));
            if (!t->members) abort();
        }
        t->members[t->member_cnt++].key = strndup(key, klen);
    }
    if (vlen) {
        void *copy = malloc(vlen);
        if (!copy) abort();
        memcpy(copy, val, vlen);
        t->members[i].value = (blob_t){copy, vlen};
    } else if (i < t->member_cnt) {
        free(t->members[i].key);
        t->members[i] = t->members[--t->member_cnt];
    }
    pthread_mutex_unlock(&t->mu);
}

size_t bw_shard_table_members(bw_shard_table_t *t, Bulkwrite__V1__FleetMember ***out) {
    pthread_mutex_lock(&t->mu);
    *out = calloc(t->member_cnt + 1, sizeof(**out));
    size_t n = 0;
    for (size_t i = 0; *out && i < t->member_cnt; i++) {
        Bulkwrite__V1__FleetMember *m =
            bulkwrite__v1__fleet_member__unpack(NULL, t->members[i].value.len, t->members[i].value.data);
        if (m) (*out)[n++] = m;
    }
    pthread_mutex_unlock(&t->mu);
    return n;
}

void bw_shard_table_members_free(Bulkwrite__V1__FleetMember **members, size_t n) {
    for (size_t i = 0; i < n; i++) bulkwrite__v1__fleet_member__free_unpacked(members[i], NULL);
    free(members);
}

static void on_control(void *ud, const void *key, size_t klen, const void *val, size_t vlen) {
    bw_shard_table_t *t = ud;
    if (bw_fleet_is_key(key, klen)) { /* a presence, not a setting: the version stays */
        store_member(t, key, klen, val, vlen);
        return;
    }
    int s = store(t, t->control, key, klen, val, vlen);
    atomic_fetch_add(&t->version, 1);
    /* said once, when read: the record is clamped each time it is used */
    Bulkwrite__V1__ShardControl *c = s >= 0 && vlen ? bulkwrite__v1__shard_control__unpack(NULL, vlen, val) : NULL;
    char why[256];
    if (c && c->has_rate && bw_ratelimit_check(c->rate, why, sizeof(why)))
        bw_log(BW_LOG_WARN, "shards", s, NULL, "control record: %s; using %g", why, bw_ratelimit_clamp(c->rate));
    if (c && c->has_row_rate && bw_ratelimit_check_rows(c->row_rate, why, sizeof(why)))
        bw_log(BW_LOG_WARN, "shards", s, NULL, "control record: %s; using %g", why,
               bw_ratelimit_clamp_rows(c->row_rate));
    if (c) bulkwrite__v1__shard_control__free_unpacked(c, NULL);
}

unsigned bw_shard_table_version(bw_shard_table_t *t) { return atomic_load(&t->version); }

static void on_status(void *ud, const void *key, size_t klen, const void *val, size_t vlen) {
    bw_shard_table_t *t = ud;
    int s = store(t, t->status, key, klen, val, vlen);
    if (s < 0 || !t->hook.fn || !vlen) return;
    Bulkwrite__V1__ShardStatus *st = bulkwrite__v1__shard_status__unpack(NULL, vlen, val);
    if (!st) return;
    t->hook.fn(t->hook.ud, s, st);
    bulkwrite__v1__shard_status__free_unpacked(st, NULL);
}

bw_shard_table_t *bw_shard_table_start(const bw_config_t *conf, const char *brokers,
                                       const bw_status_hook_t *status, char *errstr, size_t errstr_size) {
    bw_shard_table_t *t = calloc(1, sizeof(*t));
    if (status) t->hook = *status;
    t->shard_count = conf->shard_count;
    pthread_mutex_init(&t->mu, NULL);
    t->control = calloc((size_t)conf->shard_count, sizeof(blob_t));
    t->status = calloc((size_t)conf->shard_count, sizeof(blob_t));
    if (!(t->control_tail = bw_tail_start(conf, brokers, conf->control_topic, on_control, t, errstr, errstr_size)) ||
        (status &&
         !(t->status_tail = bw_tail_start(conf, brokers, conf->status_topic, on_status, t, errstr, errstr_size)))) {
        bw_shard_table_stop(t);
        return NULL;
    }
    return t;
}

void bw_shard_table_stop(bw_shard_table_t *t) {
    if (!t) return;
    bw_tail_stop(t->control_tail);
    bw_tail_stop(t->status_tail);
    for (int s = 0; s < t->shard_count; s++) {
        free(t->control[s].data);
        free(t->status[s].data);
    }
    free(t->control);
    free(t->status);
    for (size_t i = 0; i < t->member_cnt; i++) {
        free(t->members[i].key);
        free(t->members[i].value.data);
    }
    free(t->members);
    pthread_mutex_destroy(&t->mu);
    free(t);
}

int bw_shard_table_sync(bw_shard_table_t *t, int timeout_ms) {
    int ok = bw_tail_sync(t->control_tail, timeout_ms);
    if (t->status_tail) ok = bw_tail_sync(t->status_tail, timeout_ms) && ok;
    return ok;
}

Bulkwrite__V1__ShardControl *bw_shard_table_control(bw_shard_table_t *t, int shard) {
    pthread_mutex_lock(&t->mu);
    Bulkwrite__V1__ShardControl *c =
        t->control[shard].data ? bulkwrite__v1__shard_control__unpack(NULL, t->control[shard].len, t->control[shard].data)
                               : NULL;
    pthread_mutex_unlock(&t->mu);
    return c;
}

void bw_shard_table_setting(bw_shard_table_t *t, int shard, bw_shard_setting_t *out) {
    memset(out, 0, sizeof(*out));
    Bulkwrite__V1__ShardControl *c = bw_shard_table_control(t, shard);
    if (!c) return;
    bw_shard_setting_from_record(c, out);
    bulkwrite__v1__shard_control__free_unpacked(c, NULL);
}

void bw_shard_setting_from_record(const Bulkwrite__V1__ShardControl *c, bw_shard_setting_t *out) {
    memset(out, 0, sizeof(*out));
    out->paused = c->paused;
    out->has_rate = c->has_rate;
    out->rate = c->has_rate ? bw_ratelimit_clamp(c->rate) : 0;
    out->has_row_rate = c->has_row_rate;
    out->row_rate = c->has_row_rate ? bw_ratelimit_clamp_rows(c->row_rate) : 0;
    out->pinned = c->pinned;
    out->updated_at_ms = c->updated_at_ms;
    snprintf(out->reason, sizeof(out->reason), "%s", c->reason ? c->reason : "");
    snprintf(out->changed_by, sizeof(out->changed_by), "%s", c->changed_by ? c->changed_by : "");
    snprintf(out->changed_from, sizeof(out->changed_from), "%s", c->changed_from ? c->changed_from : "");
}

double bw_shard_effective_rate(const bw_config_t *conf, int shard, const bw_shard_setting_t *set) {
    return set->has_rate ? set->rate : conf->shard_rate[shard];
}

double bw_shard_effective_row_rate(const bw_config_t *conf, int shard, const bw_shard_setting_t *set) {
    return set->has_row_rate ? set->row_rate : conf->shard_row_rate[shard];
}

Bulkwrite__V1__ShardStatus *bw_shard_table_status(bw_shard_table_t *t, int shard) {
    pthread_mutex_lock(&t->mu);
    Bulkwrite__V1__ShardStatus *s =
        t->status[shard].data ? bulkwrite__v1__shard_status__unpack(NULL, t->status[shard].len, t->status[shard].data)
                              : NULL;
    pthread_mutex_unlock(&t->mu);
    return s;
}
