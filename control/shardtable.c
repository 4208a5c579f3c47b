#include "shardtable.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "ratelimit.h"
#include "tail.h"

typedef struct {
    void *data;
    size_t len;
    uint64_t order;  /* when it was read */
    int64_t version; /* bw_tail_fn's: an older value read later (a compactor's copy) is ignored */
} blob_t;

/* A member's presence record (fleet.h), by its key. */
typedef struct {
    char *key;
    blob_t value;
} member_t;

/* A job's cancellation (key "job/<id>"), by the id's first BW_JOB_CONTROL_PREFIX hex
 * digits: those of a named job's parts are its own (store/ledger.h). */
typedef struct job_ctl {
    char prefix[BW_JOB_CONTROL_PREFIX + 1];
    blob_t value;
    struct job_ctl *next;
} job_ctl_t;

#define JOB_BUCKETS 1024

/* @locks mu guards control[], status[], members[], jobs[], budgets[] */
struct bw_shard_table {
    int shard_count;
    int server_cnt;
    char **server_names; /* conf's, copied: budgets[v] is server v's record */
    blob_t *budgets;
    pthread_mutex_t mu;
    blob_t *control; /* shard s's record under key k at [s * BW_CONTROL_KEYS + k] */
    blob_t *status;
    uint64_t reads; /* control records read, numbering them (blob_t.order) */
    member_t *members;
    size_t member_cnt, member_cap;
    job_ctl_t *jobs[JOB_BUCKETS];
    atomic_uint jobs_cancelled;
    atomic_uint version;
    bw_tail_t *control_tail, *status_tail;
    bw_status_hook_t hook;
};

/* Replaces *slot with a copy of the value unless it is not newer than the slot's (0: the
 * same record read again, or an older value); an empty value (a tombstone) clears it and
 * keeps its version. Slots start at version -1. */
static int store(bw_shard_table_t *t, blob_t *slot, const void *val, size_t vlen, int64_t version) {
    void *copy = NULL;
    if (vlen) {
        if (!(copy = malloc(vlen))) abort();
        memcpy(copy, val, vlen);
    }
    pthread_mutex_lock(&t->mu);
    int newer = version > slot->version;
    if (newer) {
        free(slot->data);
        *slot = (blob_t){copy, vlen, ++t->reads, version};
    }
    pthread_mutex_unlock(&t->mu);
    if (!newer) free(copy);
    return newer;
}

/* A member's record: replaces its earlier one unless not newer (version -1: one of the
 * control topic's, unordered with the status topic's); an empty value (it stopped) is
 * kept as an entry without data, so a copy of its presence read after it is known old. */
static void store_member(bw_shard_table_t *t, const void *key, size_t klen, const void *val, size_t vlen,
                         int64_t version) {
    void *copy = NULL;
    if (vlen && !(copy = malloc(vlen))) abort();
    if (vlen) memcpy(copy, val, vlen);
    pthread_mutex_lock(&t->mu);
    size_t i = 0;
    while (i < t->member_cnt && (strlen(t->members[i].key) != klen || memcmp(t->members[i].key, key, klen))) i++;
    if (i < t->member_cnt && version >= 0 && version <= t->members[i].value.version) {
        pthread_mutex_unlock(&t->mu);
        free(copy);
        return;
    }
    if (i == t->member_cnt) {
        if (t->member_cnt == t->member_cap) {
            t->member_cap = t->member_cap ? t->member_cap * 2 : 8;
            t->members = realloc(t->members, t->member_cap * sizeof(*t->members));
            if (!t->members) abort();
        }
        t->members[t->member_cnt++].key = strndup(key, klen);
    } else {
        free(t->members[i].value.data);
    }
    t->members[i].value = (blob_t){copy, vlen, 0, version};
    pthread_mutex_unlock(&t->mu);
}

size_t bw_shard_table_members(bw_shard_table_t *t, Bulkwrite__Internal__V1__FleetMember ***out) {
    pthread_mutex_lock(&t->mu);
    *out = calloc(t->member_cnt + 1, sizeof(**out));
    size_t n = 0;
    for (size_t i = 0; *out && i < t->member_cnt; i++) {
        if (!t->members[i].value.len) continue; /* it stopped */
        Bulkwrite__Internal__V1__FleetMember *m =
            bulkwrite__internal__v1__fleet_member__unpack(NULL, t->members[i].value.len, t->members[i].value.data);
        if (m) (*out)[n++] = m;
    }
    pthread_mutex_unlock(&t->mu);
    return n;
}

void bw_shard_table_members_free(Bulkwrite__Internal__V1__FleetMember **members, size_t n) {
    for (size_t i = 0; i < n; i++) bulkwrite__internal__v1__fleet_member__free_unpacked(members[i], NULL);
    free(members);
}

static size_t job_bucket(const char *prefix) {
    size_t h = 5381;
    for (int i = 0; i < BW_JOB_CONTROL_PREFIX; i++) h = h * 33 + (unsigned char)prefix[i];
    return h % JOB_BUCKETS;
}

static job_ctl_t *find_job(bw_shard_table_t *t, const char *job_id) {
    for (job_ctl_t *c = t->jobs[job_bucket(job_id)]; c; c = c->next)
        if (memcmp(c->prefix, job_id, BW_JOB_CONTROL_PREFIX) == 0) return c;
    return NULL;
}

/* A job's control record (BW_FOLD_ONCE): not ordered by version, the keys of one prefix
 * may sit in different partitions of the control topic, and a cancellation is one in
 * whichever order they are read. */
static void store_job(bw_shard_table_t *t, const char *id, const void *val, size_t vlen, int64_t version) {
    void *copy = NULL;
    if (vlen && !(copy = malloc(vlen))) abort();
    if (vlen) memcpy(copy, val, vlen);
    pthread_mutex_lock(&t->mu);
    job_ctl_t *c = find_job(t, id);
    if (!c) {
        if (!(c = calloc(1, sizeof(*c)))) abort();
        memcpy(c->prefix, id, BW_JOB_CONTROL_PREFIX);
        size_t b = job_bucket(id);
        c->next = t->jobs[b];
        t->jobs[b] = c;
        atomic_fetch_add(&t->jobs_cancelled, 1);
    }
    free(c->value.data);
    c->value = (blob_t){copy, vlen, ++t->reads, version};
    pthread_mutex_unlock(&t->mu);
}

int bw_shard_table_job_cancelled(bw_shard_table_t *t, const char *job_id) {
    if (!job_id || strlen(job_id) < BW_JOB_CONTROL_PREFIX || !atomic_load(&t->jobs_cancelled)) return 0;
    pthread_mutex_lock(&t->mu);
    job_ctl_t *c = find_job(t, job_id);
    int cancelled = c && c->value.len; /* records carry only cancellations */
    pthread_mutex_unlock(&t->mu);
    return cancelled;
}

Bulkwrite__Internal__V1__JobControl *bw_shard_table_job(bw_shard_table_t *t, const char *job_id) {
    if (!job_id || strlen(job_id) < BW_JOB_CONTROL_PREFIX) return NULL;
    pthread_mutex_lock(&t->mu);
    job_ctl_t *c = find_job(t, job_id);
    Bulkwrite__Internal__V1__JobControl *jc = c && c->value.len ? bulkwrite__internal__v1__job_control__unpack(NULL, c->value.len, c->value.data) : NULL;
    pthread_mutex_unlock(&t->mu);
    return jc;
}

void bw_server_budget_from_record(const Bulkwrite__Internal__V1__ServerBudget *r, bw_server_budget_t *out) {
    memset(out, 0, sizeof(*out));
    out->rate = bw_ratelimit_clamp(r->rate);
    out->row_rate = bw_ratelimit_clamp_rows(r->row_rate);
    out->updated_at_ms = r->updated_at_ms;
    snprintf(out->reason, sizeof(out->reason), "%s", r->reason ? r->reason : "");
    snprintf(out->changed_by, sizeof(out->changed_by), "%s", r->changed_by ? r->changed_by : "");
    snprintf(out->changed_from, sizeof(out->changed_from), "%s", r->changed_from ? r->changed_from : "");
}

/* A server budget's record: kept under its configured server; warned of when a rate is
 * out of bounds (it is clamped each time it is used). */
static void store_budget(bw_shard_table_t *t, const char *name, const void *val, size_t vlen, int64_t version) {
    int v = 0;
    while (v < t->server_cnt && strcmp(t->server_names[v], name)) v++;
    if (v == t->server_cnt) return; /* a server no longer (or not yet) in shards.servers */
    if (!store(t, &t->budgets[v], val, vlen, version)) return;
    atomic_fetch_add(&t->version, 1);
    Bulkwrite__Internal__V1__ServerBudget *b = vlen ? bulkwrite__internal__v1__server_budget__unpack(NULL, vlen, val) : NULL;
    char why[256];
    if (b && bw_ratelimit_check(b->rate, why, sizeof(why)))
        bw_log(BW_LOG_WARN, "shards", -1, NULL, "server %s's budget: %s; using %g", name, why, bw_ratelimit_clamp(b->rate));
    if (b && bw_ratelimit_check_rows(b->row_rate, why, sizeof(why)))
        bw_log(BW_LOG_WARN, "shards", -1, NULL, "server %s's budget: %s; using %g", name, why,
               bw_ratelimit_clamp_rows(b->row_rate));
    if (b) bulkwrite__internal__v1__server_budget__free_unpacked(b, NULL);
}

int bw_shard_table_server_budget(bw_shard_table_t *t, int server, bw_server_budget_t *out) {
    Bulkwrite__Internal__V1__ServerBudget *r = bw_shard_table_server_budget_record(t, server);
    if (!r) {
        memset(out, 0, sizeof(*out));
        return 0;
    }
    bw_server_budget_from_record(r, out);
    bulkwrite__internal__v1__server_budget__free_unpacked(r, NULL);
    return 1;
}

Bulkwrite__Internal__V1__ServerBudget *bw_shard_table_server_budget_record(bw_shard_table_t *t, int server) {
    if (server < 0 || server >= t->server_cnt) return NULL;
    pthread_mutex_lock(&t->mu);
    const blob_t *b = &t->budgets[server];
    Bulkwrite__Internal__V1__ServerBudget *r = b->data ? bulkwrite__internal__v1__server_budget__unpack(NULL, b->len, b->data) : NULL;
    pthread_mutex_unlock(&t->mu);
    return r;
}

/* ---- each kind's values --------------------------------------------------------------
 * One store function per kind of records.h, the table's half of the registry: where the
 * kind's values are kept. The topics' callbacks ask the registry which kind a key is. */

/* A record read: its key and value (vlen 0: a tombstone), its version (tail.h) and what
 * its key says. */
typedef struct {
    const void *key, *val;
    size_t klen, vlen;
    int64_t version;
    bw_record_topic_t topic;
    bw_record_key_t k;
} record_t;

/* A server's budget (last wins), under its configured server. */
static void budget_stored(bw_shard_table_t *t, const record_t *r) {
    char server[BW_SERVER_BUDGET_KEY_MAX];
    if (bw_server_budget_key_parse(r->key, r->klen, server) == 0) store_budget(t, server, r->val, r->vlen, r->version);
}

/* A job's cancellation: not a shard's, the table's version stays. */
static void cancel_stored(bw_shard_table_t *t, const record_t *r) {
    store_job(t, bw_job_control_key_parse(r->key, r->klen), r->val, r->vlen, r->version);
}

/* A process's presence. One an older version wrote to the control topic (a rolling
 * upgrade) is read, not ordered against the status topic's. */
static void presence_stored(bw_shard_table_t *t, const record_t *r) {
    store_member(t, r->key, r->klen, r->val, r->vlen, r->topic == BW_TOPIC_CONTROL ? -1 : r->version);
}

/* A field of a shard's setting (per field: the fold reads every key's latest). */
static void setting_stored(bw_shard_table_t *t, const record_t *r) {
    int s = r->k.shard;
    if (!store(t, &t->control[(size_t)s * BW_CONTROL_KEYS + r->k.field], r->val, r->vlen, r->version)) return;
    atomic_fetch_add(&t->version, 1);
    /* said once, when read: the record is clamped each time it is used */
    Bulkwrite__Internal__V1__ShardControl *c = r->vlen ? bulkwrite__internal__v1__shard_control__unpack(NULL, r->vlen, r->val) : NULL;
    char why[256];
    if (c && c->has_rate && bw_ratelimit_check(c->rate, why, sizeof(why)))
        bw_log(BW_LOG_WARN, "shards", s, NULL, "control record: %s; using %g", why, bw_ratelimit_clamp(c->rate));
    if (c && c->has_row_rate && bw_ratelimit_check_rows(c->row_rate, why, sizeof(why)))
        bw_log(BW_LOG_WARN, "shards", s, NULL, "control record: %s; using %g", why,
               bw_ratelimit_clamp_rows(c->row_rate));
    if (c) bulkwrite__internal__v1__shard_control__free_unpacked(c, NULL);
}

/* A shard's status (last wins), written by its consumer: the hook (handover) hears of it. */
static void status_stored(bw_shard_table_t *t, const record_t *r) {
    int s = r->k.shard;
    if (!store(t, &t->status[s], r->val, r->vlen, r->version) || !t->hook.fn || !r->vlen) return;
    Bulkwrite__Internal__V1__ShardStatus *st = bulkwrite__internal__v1__shard_status__unpack(NULL, r->vlen, r->val);
    if (!st) return;
    t->hook.fn(t->hook.ud, s, st);
    bulkwrite__internal__v1__shard_status__free_unpacked(st, NULL);
}

static void (*const stored[BW_RECORD_KINDS])(bw_shard_table_t *t, const record_t *r) = {
    [BW_RECORD_SHARD_SETTING] = setting_stored, [BW_RECORD_SERVER_BUDGET] = budget_stored,
    [BW_RECORD_JOB_CANCEL] = cancel_stored,     [BW_RECORD_SHARD_STATUS] = status_stored,
    [BW_RECORD_PRESENCE] = presence_stored,
};

/* A record of topic: kept as its kind says; a key of no kind (another layout's, or a
 * later version's) is skipped. */
static void demux(bw_shard_table_t *t, bw_record_topic_t topic, const void *key, size_t klen, const void *val,
                  size_t vlen, int64_t version) {
    record_t r = {key, val, klen, vlen, version, topic, {0}};
    if (bw_record_key_parse(topic, key, klen, t->shard_count, &r.k) == 0) stored[r.k.kind](t, &r);
}

static void on_control(void *ud, const void *key, size_t klen, const void *val, size_t vlen, int64_t version) {
    demux(ud, BW_TOPIC_CONTROL, key, klen, val, vlen, version);
}

static void on_status(void *ud, const void *key, size_t klen, const void *val, size_t vlen, int64_t version) {
    demux(ud, BW_TOPIC_STATUS, key, klen, val, vlen, version);
}

unsigned bw_shard_table_version(bw_shard_table_t *t) { return atomic_load(&t->version); }

bw_shard_table_t *bw_shard_table_start(const bw_config_t *conf, const char *brokers,
                                       const bw_status_hook_t *status, char *errstr, size_t errstr_size) {
    bw_shard_table_t *t = calloc(1, sizeof(*t));
    if (status) t->hook = *status;
    t->shard_count = conf->shard_count;
    t->server_cnt = conf->server_cnt;
    t->server_names = calloc((size_t)conf->server_cnt + 1, sizeof(char *));
    t->budgets = calloc((size_t)conf->server_cnt + 1, sizeof(blob_t));
    if (!t->server_names || !t->budgets) abort();
    for (int v = 0; v < conf->server_cnt; v++)
        if (!(t->server_names[v] = strdup(conf->servers[v].name))) abort();
    pthread_mutex_init(&t->mu, NULL);
    t->control = calloc((size_t)conf->shard_count * BW_CONTROL_KEYS, sizeof(blob_t));
    t->status = calloc((size_t)conf->shard_count, sizeof(blob_t));
    if (!t->control || !t->status) abort();
    /* before any record: the first one read, at offset 0 too, is newer (store) */
    for (size_t i = 0; i < (size_t)conf->shard_count * BW_CONTROL_KEYS; i++) t->control[i].version = -1;
    for (int s = 0; s < conf->shard_count; s++) t->status[s].version = -1;
    for (int v = 0; v < conf->server_cnt; v++) t->budgets[v].version = -1;
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
    for (size_t i = 0; t->control && i < (size_t)t->shard_count * BW_CONTROL_KEYS; i++) free(t->control[i].data);
    for (int s = 0; t->status && s < t->shard_count; s++) free(t->status[s].data);
    free(t->control);
    free(t->status);
    for (int v = 0; v < t->server_cnt; v++) {
        free(t->server_names[v]);
        free(t->budgets[v].data);
    }
    free(t->server_names);
    free(t->budgets);
    for (size_t i = 0; i < t->member_cnt; i++) {
        free(t->members[i].key);
        free(t->members[i].value.data);
    }
    free(t->members);
    for (size_t b = 0; b < JOB_BUCKETS; b++)
        for (job_ctl_t *c = t->jobs[b], *next; c; c = next) {
            next = c->next;
            free(c->value.data);
            free(c);
        }
    pthread_mutex_destroy(&t->mu);
    free(t);
}

int bw_shard_table_sync(bw_shard_table_t *t, int timeout_ms) {
    int ok = bw_tail_sync(t->control_tail, timeout_ms);
    if (t->status_tail) ok = bw_tail_sync(t->status_tail, timeout_ms) && ok;
    return ok;
}

Bulkwrite__Internal__V1__ShardControl *bw_shard_table_record(bw_shard_table_t *t, int shard, bw_control_key_t key) {
    pthread_mutex_lock(&t->mu);
    const blob_t *b = &t->control[(size_t)shard * BW_CONTROL_KEYS + key];
    Bulkwrite__Internal__V1__ShardControl *c = b->data ? bulkwrite__internal__v1__shard_control__unpack(NULL, b->len, b->data) : NULL;
    pthread_mutex_unlock(&t->mu);
    return c;
}

/* The shard's record under every key, unpacked into recs[] (NULL for none), and the
 * order they were read in; how many. */
static int records(bw_shard_table_t *t, int shard, Bulkwrite__Internal__V1__ShardControl *recs[BW_CONTROL_KEYS],
                   uint64_t order[BW_CONTROL_KEYS]) {
    int n = 0;
    pthread_mutex_lock(&t->mu);
    for (int k = 0; k < BW_CONTROL_KEYS; k++) {
        const blob_t *b = &t->control[(size_t)shard * BW_CONTROL_KEYS + k];
        recs[k] = b->data ? bulkwrite__internal__v1__shard_control__unpack(NULL, b->len, b->data) : NULL;
        order[k] = b->order;
        n += recs[k] != NULL;
    }
    pthread_mutex_unlock(&t->mu);
    return n;
}

static void records_free(Bulkwrite__Internal__V1__ShardControl *recs[BW_CONTROL_KEYS]) {
    for (int k = 0; k < BW_CONTROL_KEYS; k++)
        if (recs[k]) bulkwrite__internal__v1__shard_control__free_unpacked(recs[k], NULL);
}

static const char *str(const char *s) { return s ? s : ""; }

static int same_change(const Bulkwrite__Internal__V1__ControlChange *a, const Bulkwrite__Internal__V1__ControlChange *b) {
    return a->at_ms == b->at_ms && !strcmp(str(a->action), str(b->action)) && !strcmp(str(a->by), str(b->by)) &&
           !strcmp(str(a->from), str(b->from)) && !strcmp(str(a->reason), str(b->reason)) &&
           !strcmp(str(a->setting), str(b->setting));
}

/* Whether key a's record is later than key b's: (at_a, order[a]) after (at_b, order[b]). */
static int later(int64_t at_a, int a, int64_t at_b, int b, const uint64_t order[BW_CONTROL_KEYS]) {
    return at_a != at_b ? at_a > at_b : order[a] > order[b];
}

/* The records' histories merged into hist (BW_CONTROL_HISTORY places), newest first:
 * each record's list is newest first already, so the merge takes the newest head each
 * time (at a tie, the head of the record written later; one list's order kept); a change
 * already taken (the same change in two fields' records) is skipped. Returns how many. */
static size_t merge_history(const Bulkwrite__Internal__V1__ShardControl *const recs[BW_CONTROL_KEYS],
                            const uint64_t order[BW_CONTROL_KEYS], Bulkwrite__Internal__V1__ControlChange **hist) {
    size_t head[BW_CONTROL_KEYS] = {0}, n = 0;
    while (n < BW_CONTROL_HISTORY) {
        int best = -1;
        for (int k = 0; k < BW_CONTROL_KEYS; k++)
            if (recs[k] && head[k] < recs[k]->n_history &&
                (best < 0 || later(recs[k]->history[head[k]]->at_ms, k, recs[best]->history[head[best]]->at_ms, best,
                                   order)))
                best = k;
        if (best < 0) break;
        Bulkwrite__Internal__V1__ControlChange *h = recs[best]->history[head[best]++];
        int seen = 0;
        for (size_t i = n; i-- > 0 && hist[i]->at_ms == h->at_ms && !seen;) seen = same_change(hist[i], h);
        if (!seen) hist[n++] = h;
    }
    return n;
}

/* Copies the scalar ShardControl field `name` from src to dst, where protobuf-c's
 * descriptor says it is: the fold names fields as records.c's key rows do. */
static void copy_field(Bulkwrite__Internal__V1__ShardControl *dst, const Bulkwrite__Internal__V1__ShardControl *src, const char *name) {
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field_by_name(&bulkwrite__internal__v1__shard_control__descriptor, name);
    size_t size = !f ? 0
                  : f->type == PROTOBUF_C_TYPE_BOOL ? sizeof(protobuf_c_boolean)
                  : f->type == PROTOBUF_C_TYPE_DOUBLE || f->type == PROTOBUF_C_TYPE_INT64 ? 8
                  : f->type == PROTOBUF_C_TYPE_UINT32 ? 4
                                                       : 0;
    if (!size || f->label == PROTOBUF_C_LABEL_REPEATED) abort(); /* records.c names a field the fold cannot copy */
    memcpy((char *)dst + f->offset, (const char *)src + f->offset, size);
}

/* The fold of bw_shard_control_fold() into *out, pointing into recs (which must outlive
 * it) and hist (BW_CONTROL_HISTORY places). 0 when every recs[k] is NULL. */
static int fold(int shard, const Bulkwrite__Internal__V1__ShardControl *const recs[BW_CONTROL_KEYS],
                const uint64_t order_in[BW_CONTROL_KEYS], Bulkwrite__Internal__V1__ShardControl *out,
                Bulkwrite__Internal__V1__ControlChange **hist) {
    uint64_t order[BW_CONTROL_KEYS];
    for (int k = 0; k < BW_CONTROL_KEYS; k++) order[k] = order_in ? order_in[k] : (uint64_t)k;
    Bulkwrite__Internal__V1__ShardControl init = BULKWRITE__INTERNAL__V1__SHARD_CONTROL__INIT;
    *out = init;
    out->shard = (uint32_t)shard;
    out->reason = out->changed_by = out->changed_from = "";
    const Bulkwrite__Internal__V1__ShardControl *base = recs[BW_CONTROL_WHOLE], *r;
    int newest = -1;
    for (int k = 0; k < BW_CONTROL_KEYS; k++)
        if (recs[k] && (newest < 0 || later(recs[k]->updated_at_ms, k, recs[newest]->updated_at_ms, newest, order)))
            newest = k;
    if (newest < 0) return 0;
    for (int k = BW_CONTROL_WHOLE + 1; k < BW_CONTROL_KEYS; k++)
        if ((r = recs[k] ? recs[k] : base))
            for (const char *const *f = bw_control_key_fields((bw_control_key_t)k); *f; f++) copy_field(out, r, *f);
    out->updated_at_ms = recs[newest]->updated_at_ms;
    out->reason = (char *)str(recs[newest]->reason);
    out->changed_by = (char *)str(recs[newest]->changed_by);
    out->changed_from = (char *)str(recs[newest]->changed_from);
    out->n_history = merge_history(recs, order, hist);
    out->history = hist;
    return 1;
}

Bulkwrite__Internal__V1__ShardControl *bw_shard_control_fold(int shard, const Bulkwrite__Internal__V1__ShardControl *const recs[BW_CONTROL_KEYS],
                                                   const uint64_t order[BW_CONTROL_KEYS]) {
    Bulkwrite__Internal__V1__ShardControl c;
    Bulkwrite__Internal__V1__ControlChange *hist[BW_CONTROL_HISTORY];
    if (!fold(shard, recs, order, &c, hist)) return NULL;
    /* packed and unpacked again: one allocation the caller frees as any unpacked record */
    size_t len = bulkwrite__internal__v1__shard_control__get_packed_size(&c);
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf) abort();
    bulkwrite__internal__v1__shard_control__pack(&c, buf);
    Bulkwrite__Internal__V1__ShardControl *out = bulkwrite__internal__v1__shard_control__unpack(NULL, len, buf);
    free(buf);
    return out;
}

Bulkwrite__Internal__V1__ShardControl *bw_shard_table_control(bw_shard_table_t *t, int shard) {
    Bulkwrite__Internal__V1__ShardControl *recs[BW_CONTROL_KEYS];
    uint64_t order[BW_CONTROL_KEYS];
    if (!records(t, shard, recs, order)) return NULL;
    Bulkwrite__Internal__V1__ShardControl *c = bw_shard_control_fold(shard, (const Bulkwrite__Internal__V1__ShardControl *const *)recs, order);
    records_free(recs);
    return c;
}

void bw_shard_table_setting(bw_shard_table_t *t, int shard, bw_shard_setting_t *out) {
    memset(out, 0, sizeof(*out));
    Bulkwrite__Internal__V1__ShardControl *recs[BW_CONTROL_KEYS], c;
    Bulkwrite__Internal__V1__ControlChange *hist[BW_CONTROL_HISTORY];
    uint64_t order[BW_CONTROL_KEYS];
    if (records(t, shard, recs, order) && fold(shard, (const Bulkwrite__Internal__V1__ShardControl *const *)recs, order, &c, hist))
        bw_shard_setting_from_record(&c, out);
    records_free(recs);
}

int bw_shard_table_pause(bw_shard_table_t *t, int shard, bw_shard_setting_t *out) {
    Bulkwrite__Internal__V1__ShardControl *recs[BW_CONTROL_KEYS], c;
    Bulkwrite__Internal__V1__ControlChange *hist[BW_CONTROL_HISTORY];
    uint64_t order[BW_CONTROL_KEYS];
    memset(out, 0, sizeof(*out));
    if (records(t, shard, recs, order) && fold(shard, (const Bulkwrite__Internal__V1__ShardControl *const *)recs, order, &c, hist) &&
        c.paused) {
        /* the pause's own record; a record of a version before per-field keys holds it whole */
        const Bulkwrite__Internal__V1__ShardControl *p = recs[BW_CONTROL_PAUSE] ? recs[BW_CONTROL_PAUSE] : recs[BW_CONTROL_WHOLE];
        bw_shard_setting_from_record(p ? p : &c, out);
        out->paused = 1;
    }
    records_free(recs);
    return out->paused;
}

void bw_shard_setting_from_record(const Bulkwrite__Internal__V1__ShardControl *c, bw_shard_setting_t *out) {
    memset(out, 0, sizeof(*out));
    out->paused = c->paused;
    out->has_rate = c->has_rate;
    out->rate = c->has_rate ? bw_ratelimit_clamp(c->rate) : 0;
    out->has_row_rate = c->has_row_rate;
    out->row_rate = c->has_row_rate ? bw_ratelimit_clamp_rows(c->row_rate) : 0;
    out->pinned = c->pinned;
    out->updated_at_ms = c->updated_at_ms;
    snprintf(out->reason, sizeof(out->reason), "%s", str(c->reason));
    snprintf(out->changed_by, sizeof(out->changed_by), "%s", str(c->changed_by));
    snprintf(out->changed_from, sizeof(out->changed_from), "%s", str(c->changed_from));
}

double bw_shard_effective_rate(const bw_config_t *conf, int shard, const bw_shard_setting_t *set) {
    return set->has_rate ? set->rate : conf->shard_rate[shard];
}

double bw_shard_effective_row_rate(const bw_config_t *conf, int shard, const bw_shard_setting_t *set) {
    return set->has_row_rate ? set->row_rate : conf->shard_row_rate[shard];
}

Bulkwrite__Internal__V1__ShardStatus *bw_shard_table_status(bw_shard_table_t *t, int shard) {
    pthread_mutex_lock(&t->mu);
    Bulkwrite__Internal__V1__ShardStatus *s =
        t->status[shard].data ? bulkwrite__internal__v1__shard_status__unpack(NULL, t->status[shard].len, t->status[shard].data)
                              : NULL;
    pthread_mutex_unlock(&t->mu);
    return s;
}
