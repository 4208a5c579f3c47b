/* changes.c — every write to the control topic, made one way: under this proxy's lock
 * (its changes in order, each continuing its keys' history), the table read to its end,
 * the records built from the values before, produced and acknowledged by Kafka, and the
 * table read to its end again so the caller's reply and the next change start from it.
 * The shard and server control POSTs, the budget, and job cancels (an operator's, or the
 * release loop's for a cancelled prerequisite) all go through bw_change_make. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "proxy.h"

static pthread_mutex_t change_mu = PTHREAD_MUTEX_INITIALIZER;

void bw_change_add(bw_change_t *ch, const char *key, size_t klen, void *val, size_t vlen) {
    if (ch->n == ch->cap) {
        ch->cap = ch->cap ? ch->cap * 2 : 8;
        if (!(ch->keys = realloc(ch->keys, ch->cap * sizeof(*ch->keys))) ||
            !(ch->klens = realloc(ch->klens, ch->cap * sizeof(*ch->klens))) ||
            !(ch->vals = realloc(ch->vals, ch->cap * sizeof(*ch->vals))) ||
            !(ch->vlens = realloc(ch->vlens, ch->cap * sizeof(*ch->vlens))) ||
            !(ch->errs = realloc(ch->errs, ch->cap * sizeof(*ch->errs))))
            abort();
    }
    if (!(ch->keys[ch->n] = malloc(klen + 1))) abort();
    memcpy(ch->keys[ch->n], key, klen);
    ch->keys[ch->n][klen] = '\0';
    ch->klens[ch->n] = klen;
    ch->vals[ch->n] = val;
    ch->vlens[ch->n] = vlen;
    ch->errs[ch->n] = 0;
    ch->n++;
}

void bw_change_free(bw_change_t *ch) {
    for (size_t i = 0; i < ch->n; i++) {
        free(ch->keys[i]);
        free(ch->vals[i]);
    }
    free(ch->keys);
    free(ch->klens);
    free(ch->vals);
    free(ch->vlens);
    free(ch->errs);
    memset(ch, 0, sizeof(*ch));
}

int bw_change_make(bw_change_build_fn build, bw_change_done_fn done, void *ud, bw_change_t *ch,
                   rd_kafka_resp_err_t *kafka_err, char *err, size_t esz) {
    *kafka_err = 0;
    pthread_mutex_lock(&change_mu);
    bw_shard_table_sync(proxy.shards, 2000); /* continue the latest records */
    int refused = build(ud, ch, err, esz);
    if (!refused && ch->n) {
        *kafka_err = bw_producers_send_records(proxy.conf->control_topic, ch->n, (const char *const *)ch->keys,
                                               ch->klens, ch->vals, ch->vlens, ch->errs);
        int read = bw_shard_table_sync(proxy.shards, 2000); /* the reply shows it, a later change included */
        if (done) done(ud, ch, *kafka_err, read);
    }
    pthread_mutex_unlock(&change_mu);
    return refused ? -1 : 0;
}

typedef struct {
    const char *id, *by, *from, *reason;
    int already;
} cancel_t;

static int build_cancel(void *ud, bw_change_t *ch, char *err, size_t esz) {
    (void)err, (void)esz;
    cancel_t *c = ud;
    if ((c->already = bw_shard_table_job_cancelled(proxy.shards, c->id))) return 0;
    Bulkwrite__Internal__V1__JobControl jc = BULKWRITE__INTERNAL__V1__JOB_CONTROL__INIT;
    jc.job_id = (char *)c->id;
    jc.cancelled = 1;
    jc.at_ms = bw_wall_ms();
    jc.by = (char *)c->by;
    jc.from = (char *)c->from;
    jc.reason = (char *)c->reason;
    size_t len = bulkwrite__internal__v1__job_control__get_packed_size(&jc);
    void *val = malloc(len + 1);
    if (!val) abort();
    bulkwrite__internal__v1__job_control__pack(&jc, val);
    char key[BW_JOB_CONTROL_KEY_MAX];
    bw_change_add(ch, key, (size_t)bw_job_control_key(c->id, key), val, len);
    return 0;
}

rd_kafka_resp_err_t bw_change_cancel(const char *id, const char *by, const char *from, const char *reason,
                                     int *already) {
    cancel_t c = {id, by, from, reason, 0};
    bw_change_t ch = {0};
    rd_kafka_resp_err_t e;
    char err[8];
    bw_change_make(build_cancel, NULL, &c, &ch, &e, err, sizeof(err));
    bw_change_free(&ch);
    *already = c.already;
    return e;
}
