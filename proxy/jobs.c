#include "jobs.h"

#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "db.h"
#include "ledger.h"
#include "log.h"
#include "scrub.h"
#include "shardtable.h"
#include "tail.h"

static void on_record(void *ud, const void *key, size_t klen, const void *val, size_t vlen);

/* Open-addressing index: job id (32 hex digits) -> latest packed JobRecord. */
typedef struct {
    char id[33];
    void *rec;
    size_t len;
} slot_t;

/* @locks mu guards slots, cap, cnt */
struct bw_jobs {
    pthread_mutex_t mu;
    slot_t *slots;
    size_t cap, cnt;
    bw_tail_t *tail;
};

static uint64_t hash_id(const char *id) {
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *id; id++) h = (h ^ (unsigned char)*id) * 1099511628211ULL;
    return h;
}

static slot_t *find(bw_jobs_t *j, const char *id) {
    size_t i = hash_id(id) & (j->cap - 1);
    while (j->slots[i].id[0] && strcmp(j->slots[i].id, id)) i = (i + 1) & (j->cap - 1);
    return &j->slots[i];
}

static void grow(bw_jobs_t *j) {
    slot_t *old = j->slots;
    size_t old_cap = j->cap;
    j->cap = old_cap ? old_cap * 2 : 1024;
    j->slots = calloc(j->cap, sizeof(slot_t));
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].id[0]) *find(j, old[i].id) = old[i];
    free(old);
}

void bw_jobs_put(bw_jobs_t *j, const char *job_id, const void *rec, size_t len) {
    on_record(j, job_id, strlen(job_id), rec, len);
}

/* Parts a record says were taken: they only grow from one attempt to the next. */
static size_t parts_taken(const void *rec, size_t len) {
    Bulkwrite__V1__JobRecord *r = bulkwrite__v1__job_record__unpack(NULL, len, rec);
    size_t n = r ? r->n_accepted_parts : 0;
    if (r) bulkwrite__v1__job_record__free_unpacked(r, NULL);
    return n;
}

static void on_record(void *ud, const void *key, size_t klen, const void *val, size_t vlen) {
    bw_jobs_t *j = ud;
    if (klen != 32 || !vlen) return;
    char id[33];
    memcpy(id, key, 32);
    id[32] = '\0';
    void *copy = malloc(vlen);
    memcpy(copy, val, vlen);
    pthread_mutex_lock(&j->mu);
    if ((j->cnt + 1) * 2 > j->cap) grow(j);
    slot_t *s = find(j, id);
    if (!s->id[0]) {
        memcpy(s->id, id, 33);
        j->cnt++;
    }
    if (s->rec && parts_taken(s->rec, s->len) > parts_taken(copy, vlen)) {
        free(copy); /* an older attempt's record read after this proxy put a newer one */
    } else {
        free(s->rec);
        s->rec = copy;
        s->len = vlen;
    }
    pthread_mutex_unlock(&j->mu);
}

bw_jobs_t *bw_jobs_start(const bw_config_t *conf, const char *brokers, char *errstr, size_t errstr_size) {
    bw_jobs_t *j = calloc(1, sizeof(*j));
    pthread_mutex_init(&j->mu, NULL);
    grow(j);
    if (!(j->tail = bw_tail_start(conf, brokers, conf->jobs_topic, on_record, j, errstr, errstr_size))) {
        bw_jobs_stop(j);
        return NULL;
    }
    return j;
}

void bw_jobs_stop(bw_jobs_t *j) {
    if (!j) return;
    bw_tail_stop(j->tail);
    for (size_t i = 0; i < j->cap; i++) free(j->slots[i].rec);
    free(j->slots);
    pthread_mutex_destroy(&j->mu);
    free(j);
}

int bw_jobs_caught_up(bw_jobs_t *j) { return bw_tail_caught_up(j->tail); }

int bw_jobs_lookup(bw_jobs_t *j, const char *id, void **out, size_t *len) {
    pthread_mutex_lock(&j->mu);
    slot_t *s = find(j, id);
    int found = s->id[0] != '\0';
    if (found) {
        *out = malloc(s->len);
        memcpy(*out, s->rec, s->len);
        *len = s->len;
    }
    pthread_mutex_unlock(&j->mu);
    return found ? 0 : -1;
}

int bw_jobs_record(bw_jobs_t *j, const char *job_id, void **out, size_t *len) {
    if (bw_jobs_lookup(j, job_id, out, len) == 0) return 0;
    bw_tail_sync(j->tail, 3000);
    return bw_jobs_lookup(j, job_id, out, len);
}

/* ---- status from the shards ---------------------------------------------------------- */

static int failure_cmp(const void *a, const void *b) {
    uint32_t x = ((const bw_ledger_failure_t *)a)->op_index, y = ((const bw_ledger_failure_t *)b)->op_index;
    return x < y ? -1 : x > y;
}

/* Reads the counts and failure sample of the record's shards on server sv from their
 * ledgers. `mine` has room for every shard of the record. */
static void read_server(const bw_config_t *conf, int sv, const Bulkwrite__V1__JobRecord *rec,
                        Bulkwrite__V1__JobShard **shards, bw_ledger_job_shard_t *mine, bw_ledger_failure_t *fails,
                        size_t *fail_cnt, int admin) {
    char err[512] = "";
    MYSQL *db = NULL;
    bw_buf_t q;
    bw_buf_init(&q);
    size_t n = 0;
    for (size_t i = 0; i < rec->n_shards; i++)
        if (conf->shard_server[rec->shards[i]->shard] == sv)
            mine[n++] = (bw_ledger_job_shard_t){.shard = (int)rec->shards[i]->shard};
    if (!n) goto done; /* no shard of the job here: no connection */
    /* job ids are 32 hex digits (checked by the caller) */
    if (!(db = bw_db_connect_as(conf, sv, BW_DB_PROXY, err, sizeof(err))) || bw_ledger_read_job(db, conf, rec->job_id, mine, n, &q))
        goto failed;
    for (size_t k = 0; k < n; k++)
        for (size_t i = 0; i < rec->n_shards; i++)
            if ((int)shards[i]->shard == mine[k].shard) {
                shards[i]->applied = mine[k].applied;
                shards[i]->failed = mine[k].failed;
            }
    if (bw_ledger_read_job_failures(db, conf, rec->job_id, mine, n, BW_JOB_FAILURE_SAMPLE, fails,
                                    (size_t)BW_JOB_FAILURE_SAMPLE * rec->n_shards, fail_cnt, &q))
        goto failed;
    goto done;
failed:
    if (db && admin) {
        snprintf(err, sizeof(err), "%s: %s", conf->servers[sv].name, mysql_error(db));
    } else if (!admin) { /* no server name, no server text (scrub.h) */
        char what[128];
        snprintf(err, sizeof(err), "the shard's ledger could not be read: %s",
                 db ? bw_scrub_mysql(mysql_errno(db), what, sizeof(what)) : "no connection to its server");
    }
    for (size_t i = 0; i < rec->n_shards; i++)
        if (conf->shard_server[rec->shards[i]->shard] == sv) shards[i]->error = strdup(err);
done:
    if (db) {
        mysql_rollback(db);
        mysql_close(db);
    }
    bw_buf_free(&q);
}

int bw_jobs_lost_here(const Bulkwrite__V1__ShardStatus *st, const Bulkwrite__V1__ShardOps *ops) {
    return st->lost_to > st->lost_from && ops->first_offset < st->lost_to && ops->last_offset >= st->lost_from;
}

/* Ops of the job still pending on a shard whose consumer found messages deleted from
 * Kafka before they were applied: lost where the job had messages in that gap (the ops
 * of its messages behind the gap are counted with them), blocked where all of them lie
 * behind it. */
static void mark_lost(bw_shard_table_t *table, const Bulkwrite__V1__ShardOps *ops, Bulkwrite__V1__JobShard *js) {
    Bulkwrite__V1__ShardStatus *st = table && js->pending ? bw_shard_table_status(table, (int)js->shard) : NULL;
    if (!st) return;
    if (st->lost_to > st->lost_from && ops->first_offset >= st->lost_to) {
        /* all of its messages are still in Kafka, behind the gap: pending, but stuck */
        free(js->error);
        js->error = strdup("blocked: the shard stopped at messages lost in Kafka before this job's (see the "
                           "shard's alert); applied once an operator moves the shard past the gap");
    } else if (bw_jobs_lost_here(st, ops)) {
        char msg[300];
        snprintf(msg, sizeof(msg),
                 "lost in Kafka: offsets %lld to %lld of partition %u were deleted before the shard applied them; "
                 "%u ops of this job were there or behind them: send the same request again (same request_id)",
                 (long long)st->lost_from, (long long)st->lost_to - 1, js->shard, js->pending);
        free(js->error);
        js->error = strdup(msg);
        js->lost = js->pending;
        js->pending = 0;
    }
    bulkwrite__v1__shard_status__free_unpacked(st, NULL);
}

void bw_jobs_status(const bw_config_t *conf, Bulkwrite__V1__JobRecord *rec, const char *job_id,
                    bw_shard_table_t *table, int admin, Bulkwrite__V1__JobStatus *st) {
    /* the record comes from Kafka: trust only what was checked (the id from the URL,
     * shards in range) */
    rec->job_id = (char *)job_id;
    size_t kept = 0;
    for (size_t i = 0; i < rec->n_shards; i++)
        if (rec->shards[i]->shard < (uint32_t)conf->shard_count) rec->shards[kept++] = rec->shards[i];
    rec->n_shards = kept;
    bulkwrite__v1__job_status__init(st);
    st->job_id = strdup(rec->job_id);
    st->request_id = strdup(rec->request_id ? rec->request_id : "");
    st->created_at_ms = rec->created_at_ms;
    st->rejected = rec->rejected;
    st->n_shards = rec->n_shards;
    st->shards = calloc(rec->n_shards + 1, sizeof(*st->shards));
    for (size_t i = 0; i < rec->n_shards; i++) {
        st->shards[i] = calloc(1, sizeof(Bulkwrite__V1__JobShard));
        bulkwrite__v1__job_shard__init(st->shards[i]);
        st->shards[i]->shard = rec->shards[i]->shard;
        st->shards[i]->submitted = rec->shards[i]->ops;
        st->shards[i]->error = NULL;
    }
    bw_ledger_failure_t *fails = calloc((size_t)BW_JOB_FAILURE_SAMPLE * rec->n_shards + 1, sizeof(*fails));
    bw_ledger_job_shard_t *mine = calloc(rec->n_shards + 1, sizeof(*mine));
    size_t fail_cnt = 0;
    for (int sv = 0; sv < conf->server_cnt; sv++) read_server(conf, sv, rec, st->shards, mine, fails, &fail_cnt, admin);
    free(mine);
    int complete = 1;
    for (size_t i = 0; i < rec->n_shards; i++) {
        Bulkwrite__V1__JobShard *js = st->shards[i];
        if (!js->error) js->error = strdup("");
        else complete = 0;
        uint32_t done = js->applied + js->failed;
        js->pending = js->submitted > done ? js->submitted - done : 0;
        mark_lost(table, rec->shards[i], js);
        st->lost += js->lost;
        st->submitted += js->submitted;
        st->applied += js->applied;
        st->failed += js->failed;
        st->pending += js->pending;
    }
    st->finished = complete && st->pending == 0;
    qsort(fails, fail_cnt, sizeof(*fails), failure_cmp);
    size_t keep = fail_cnt < BW_JOB_FAILURE_SAMPLE ? fail_cnt : BW_JOB_FAILURE_SAMPLE;
    st->failures = calloc(keep + 1, sizeof(*st->failures));
    st->n_failures = keep;
    for (size_t i = 0; i < fail_cnt; i++) {
        if (i >= keep) {
            free(fails[i].reason);
            continue;
        }
        Bulkwrite__V1__FailedOp *f = calloc(1, sizeof(*f));
        bulkwrite__v1__failed_op__init(f);
        f->op_index = fails[i].op_index;
        f->shard = (uint32_t)fails[i].shard;
        f->id = fails[i].object_id;
        f->error_code = fails[i].error_code;
        f->reason = fails[i].reason;
        char what[128];
        if (!admin && f->reason != bw_scrub_failure(f->error_code, f->reason, what, sizeof(what))) {
            free(f->reason); /* the server's text can quote the row's values */
            f->reason = strdup(what);
        }
        st->failures[i] = f;
    }
    free(fails);
}

void bw_jobs_status_free(Bulkwrite__V1__JobStatus *st) {
    free(st->job_id);
    free(st->request_id);
    for (size_t i = 0; i < st->n_shards; i++) {
        free(st->shards[i]->error);
        free(st->shards[i]);
    }
    free(st->shards);
    for (size_t i = 0; i < st->n_failures; i++) {
        free(st->failures[i]->reason);
        free(st->failures[i]);
    }
    free(st->failures);
}

char *bw_jobs_status_json(const Bulkwrite__V1__JobStatus *st) {
    json_t *shards = json_array(), *fails = json_array();
    for (size_t i = 0; i < st->n_shards; i++) {
        const Bulkwrite__V1__JobShard *s = st->shards[i];
        json_t *o = json_pack("{s:i, s:i, s:i, s:i, s:i}", "shard", (json_int_t)s->shard, "submitted",
                              (json_int_t)s->submitted, "applied", (json_int_t)s->applied, "failed",
                              (json_int_t)s->failed, "pending", (json_int_t)s->pending);
        if (s->lost) json_object_set_new(o, "lost", json_integer(s->lost));
        if (s->error && s->error[0]) json_object_set_new(o, "error", json_string(s->error));
        json_array_append_new(shards, o);
    }
    for (size_t i = 0; i < st->n_failures; i++) {
        const Bulkwrite__V1__FailedOp *f = st->failures[i];
        char id[24];
        snprintf(id, sizeof(id), "%" PRIu64, f->id);
        json_array_append_new(fails, json_pack("{s:i, s:i, s:s, s:i, s:s}", "op_index", (json_int_t)f->op_index,
                                               "shard", (json_int_t)f->shard, "id", id, "error_code",
                                               (json_int_t)f->error_code, "reason", f->reason));
    }
    json_t *j = json_pack("{s:s, s:s, s:I, s:i, s:i, s:i, s:i, s:i, s:b, s:o, s:o}", "job_id", st->job_id,
                          "request_id", st->request_id, "created_at_ms", (json_int_t)st->created_at_ms,
                          "submitted", (json_int_t)st->submitted, "applied", (json_int_t)st->applied, "failed",
                          (json_int_t)st->failed, "pending", (json_int_t)st->pending, "rejected",
                          (json_int_t)st->rejected, "finished", st->finished, "shards", shards, "failures", fails);
    json_object_set_new(j, "lost", json_integer(st->lost));
    char *out = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    return out;
}
