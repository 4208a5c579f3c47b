/* bw-workload — deterministic jobs for the demo, the end-to-end tests and the benchmarks.
 *
 *   bw-workload submit  --url URL JOB...     send the jobs' ops to a proxy; with
 *                       [--request-id PREFIX]  every request carries a request_id
 *                       [--retry-for S]        (PREFIX/JOB/FIRST-OP) and a request that fails
 *                                            (connection, 5xx) is resent as it was for up to
 *                                            S seconds, the way a careful client retries
 *   bw-workload verify  [--wait S] JOB...    compare every shard, row by row, with the state
 *                                            the jobs imply; print a per-shard table
 *   bw-workload audit   --brokers B          read the whole topic: every message must sit in
 *                                            its shard's partition
 *   bw-workload dead-letters --brokers B     print every dead-letter record (JSON lines)
 *
 * A JOB is NAME:COUNT[:ARG], generated the same way by submit and verify:
 *   feed:N:SHARD     N pin creates for one partner whose user id lives on SHARD (the hot shard)
 *   spread:N         N pin creates spread over every shard
 *   cleanup:N:SHARD  deletes of every 10th pin among the first N of the feed on SHARD (spam cleanup)
 *   like:N:SHARD     like_count += 1 on every 10th+1 pin among the first N of the feed on SHARD
 * Texts carry quotes, backslashes and multi-byte UTF-8 on purpose. */
#include <curl/curl.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bulkwrite.pb-c.h"
#include "config.h"
#include "db.h"
#include "shard.h"

#define PIN_TYPE 1
#define USER_TYPE 0

typedef enum { JOB_FEED, JOB_SPREAD, JOB_CLEANUP, JOB_LIKE } job_kind_t;
typedef struct {
    job_kind_t kind;
    long count;
    int shard;
} job_t;

static bw_config_t *conf;

static uint64_t feed_owner(int shard) { return bw_id_make((unsigned)shard, USER_TYPE, 42); }
static uint64_t feed_pin(int shard, long i) { return bw_id_make((unsigned)shard, PIN_TYPE, (uint64_t)i + 1); }
static int spread_shard(long i) { return (int)(i % conf->shard_count); }
static uint64_t spread_owner(long i) { return bw_id_make((unsigned)spread_shard(i), USER_TYPE, 1000 + (uint64_t)(i % 97)); }
static uint64_t spread_pin(long i) { return bw_id_make((unsigned)spread_shard(i), PIN_TYPE, 10000000 + (uint64_t)i); }

static void pin_title(char *buf, size_t size, uint64_t id) {
    snprintf(buf, size, "pin %" PRIu64 " \xe2\x80\x94 l'\xc3\xa9t\xc3\xa9 \"quoted\" \\ \xf0\x9f\x98\x80", id);
}

/* ---- expected state ------------------------------------------------------------------ */

typedef struct {
    uint64_t id, owner;
    long board, likes;
    int present;
} pin_t;

typedef struct {
    pin_t *pins;
    size_t len, cap;
} pinset_t;

static pin_t *pin_add(pinset_t *ps, uint64_t id) {
    if (ps->len == ps->cap) {
        ps->cap = ps->cap ? ps->cap * 2 : 1024;
        ps->pins = realloc(ps->pins, ps->cap * sizeof(*ps->pins));
    }
    pin_t *p = &ps->pins[ps->len++];
    memset(p, 0, sizeof(*p));
    p->id = id;
    return p;
}

static int pin_cmp(const void *a, const void *b) {
    uint64_t x = ((const pin_t *)a)->id, y = ((const pin_t *)b)->id;
    return x < y ? -1 : x > y;
}

static pin_t *pin_find(pinset_t *ps, uint64_t id) {
    pin_t key = {.id = id};
    return ps->len ? bsearch(&key, ps->pins, ps->len, sizeof(pin_t), pin_cmp) : NULL;
}

/* Expected pins per shard after all jobs, in id order. */
static pinset_t *expected_state(const job_t *jobs, int job_cnt) {
    pinset_t *sets = calloc((size_t)conf->shard_count, sizeof(*sets));
    for (int j = 0; j < job_cnt; j++) {
        const job_t *jb = &jobs[j];
        for (long i = 0; i < jb->count; i++) {
            if (jb->kind == JOB_FEED) {
                pin_t *p = pin_add(&sets[jb->shard], feed_pin(jb->shard, i));
                *p = (pin_t){feed_pin(jb->shard, i), feed_owner(jb->shard), i % 100, 0, 1};
            } else if (jb->kind == JOB_SPREAD) {
                pin_t *p = pin_add(&sets[spread_shard(i)], spread_pin(i));
                *p = (pin_t){spread_pin(i), spread_owner(i), i % 100, 0, 1};
            }
        }
    }
    for (int s = 0; s < conf->shard_count; s++)
        if (sets[s].len) qsort(sets[s].pins, sets[s].len, sizeof(pin_t), pin_cmp); /* pins is NULL when empty */
    for (int j = 0; j < job_cnt; j++) {
        const job_t *jb = &jobs[j];
        if (jb->kind != JOB_CLEANUP && jb->kind != JOB_LIKE) continue;
        for (int f = 0; f < job_cnt; f++) {
            if (jobs[f].kind != JOB_FEED || jobs[f].shard != jb->shard) continue;
            for (long i = 0; i < jb->count && i < jobs[f].count; i++) {
                pin_t *p = pin_find(&sets[jobs[f].shard], feed_pin(jobs[f].shard, i));
                if (jb->kind == JOB_CLEANUP && i % 10 == 0) p->present = 0;
                if (jb->kind == JOB_LIKE && i % 10 == 1) p->likes++;
            }
        }
    }
    return sets;
}

/* ---- submit --------------------------------------------------------------------------- */

typedef struct {
    const char *url;
    int protobuf;
    long per_request;
    const char *request_id_prefix; /* NULL: no request_id */
    int retry_for_s;
    CURL *curl;
    long sent, accepted, rejected, retries;
} sender_t;

static size_t collect_body(char *p, size_t sz, size_t n, void *ud) {
    bw_buf_t *b = ud;
    bw_buf_append(b, p, sz * n);
    return sz * n;
}

/* 0 when every op was accepted, 1 when the request may be resent (no answer, 5xx),
 * -1 otherwise. */
static int post(sender_t *s, const void *body, size_t len, long ops) {
    bw_buf_t resp;
    bw_buf_init(&resp);
    struct curl_slist *h = curl_slist_append(NULL, s->protobuf ? "Content-Type: application/x-protobuf"
                                                                : "Content-Type: application/json");
    h = curl_slist_append(h, "Expect:");
    curl_easy_setopt(s->curl, CURLOPT_URL, s->url);
    curl_easy_setopt(s->curl, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(s->curl, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(s->curl, CURLOPT_POSTFIELDSIZE, (long)len);
    curl_easy_setopt(s->curl, CURLOPT_WRITEFUNCTION, collect_body);
    curl_easy_setopt(s->curl, CURLOPT_WRITEDATA, &resp);
    curl_easy_setopt(s->curl, CURLOPT_TIMEOUT, 120L);
    CURLcode rc = curl_easy_perform(s->curl);
    long status = 0;
    curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(h);
    int ret = 0;
    if (rc != CURLE_OK) {
        fprintf(stderr, "bw-workload: POST %s: %s\n", s->url, curl_easy_strerror(rc));
        bw_buf_free(&resp);
        return 1;
    } else if (status != 202) {
        fprintf(stderr, "bw-workload: POST %s: HTTP %ld: %.500s\n", s->url, status, resp.data ? resp.data : "");
        bw_buf_free(&resp);
        return status >= 500 ? 1 : -1;
    } else {
        long acc = -1;
        if (s->protobuf) {
            Bulkwrite__V1__BatchWriteResponse *r =
                bulkwrite__v1__batch_write_response__unpack(NULL, resp.len, (uint8_t *)resp.data);
            if (r) {
                acc = r->accepted;
                for (size_t i = 0; i < r->n_rejected; i++)
                    fprintf(stderr, "bw-workload: op %u rejected: %s\n", r->rejected[i]->index, r->rejected[i]->reason);
                bulkwrite__v1__batch_write_response__free_unpacked(r, NULL);
            }
        } else {
            json_t *j = json_loadb(resp.data, resp.len, 0, NULL);
            if (j) acc = (long)json_integer_value(json_object_get(j, "accepted"));
            json_decref(j);
        }
        s->accepted += acc > 0 ? acc : 0;
        s->rejected += ops - (acc > 0 ? acc : 0);
        if (acc != ops) ret = -1;
    }
    s->sent += ops;
    bw_buf_free(&resp);
    return ret;
}

/* One op, in protobuf-c structs backed by caller storage. */
typedef struct {
    Bulkwrite__V1__Op op;
    Bulkwrite__V1__Field f[4], *fp[4];
    Bulkwrite__V1__Value v[4];
    char key[32], title[160];
} op_buf_t;

static void make_op(const job_t *jb, long i, op_buf_t *o) {
    bulkwrite__v1__op__init(&o->op);
    o->op.object_type = "pin";
    o->op.shard_key = "";
    for (int k = 0; k < 4; k++) {
        bulkwrite__v1__field__init(&o->f[k]);
        bulkwrite__v1__value__init(&o->v[k]);
        o->f[k].value = &o->v[k];
        o->fp[k] = &o->f[k];
    }
    o->op.fields = o->fp;
    if (jb->kind == JOB_FEED || jb->kind == JOB_SPREAD) {
        uint64_t id = jb->kind == JOB_FEED ? feed_pin(jb->shard, i) : spread_pin(i);
        uint64_t owner = jb->kind == JOB_FEED ? feed_owner(jb->shard) : spread_owner(i);
        o->op.op = BULKWRITE__V1__OP_TYPE__CREATE;
        o->op.id = id;
        snprintf(o->key, sizeof(o->key), "%" PRIu64, owner);
        o->op.shard_key = o->key;
        pin_title(o->title, sizeof(o->title), id);
        o->op.n_fields = 4;
        o->f[0].name = "owner_id";
        o->v[0].kind_case = BULKWRITE__V1__VALUE__KIND_INT_VALUE;
        o->v[0].int_value = (int64_t)owner;
        o->f[1].name = "board_id";
        o->v[1].kind_case = BULKWRITE__V1__VALUE__KIND_INT_VALUE;
        o->v[1].int_value = i % 100;
        o->f[2].name = "title";
        o->v[2].kind_case = BULKWRITE__V1__VALUE__KIND_STRING_VALUE;
        o->v[2].string_value.data = (uint8_t *)o->title;
        o->v[2].string_value.len = strlen(o->title);
        o->f[3].name = "like_count";
        o->v[3].kind_case = BULKWRITE__V1__VALUE__KIND_INT_VALUE;
        o->v[3].int_value = 0;
    } else if (jb->kind == JOB_CLEANUP) {
        o->op.op = BULKWRITE__V1__OP_TYPE__DELETE;
        o->op.id = feed_pin(jb->shard, i * 10);
        o->op.n_fields = 0;
    } else {
        o->op.op = BULKWRITE__V1__OP_TYPE__UPDATE;
        o->op.id = feed_pin(jb->shard, i * 10 + 1);
        o->op.n_fields = 1;
        o->f[0].name = "like_count";
        o->f[0].increment = 1;
        o->v[0].kind_case = BULKWRITE__V1__VALUE__KIND_INT_VALUE;
        o->v[0].int_value = 1;
    }
}

static json_t *op_json(const Bulkwrite__V1__Op *op) {
    static const char *const words[] = {"?", "create", "update", "upsert", "delete"};
    json_t *o = json_object();
    json_object_set_new(o, "op", json_string(words[op->op]));
    json_object_set_new(o, "object_type", json_string(op->object_type));
    json_object_set_new(o, "id", json_integer((json_int_t)op->id));
    if (*op->shard_key) json_object_set_new(o, "shard_key", json_string(op->shard_key));
    json_t *f = json_object();
    for (size_t k = 0; k < op->n_fields; k++) {
        const Bulkwrite__V1__Value *v = op->fields[k]->value;
        json_t *jv = v->kind_case == BULKWRITE__V1__VALUE__KIND_INT_VALUE
                         ? json_integer(v->int_value)
                         : json_stringn((const char *)v->string_value.data, v->string_value.len);
        if (op->fields[k]->increment) jv = json_pack("{s:o}", "increment", jv);
        json_object_set_new(f, op->fields[k]->name, jv);
    }
    json_object_set_new(o, "fields", f);
    return o;
}

/* Cleanup and like touch pins i*10 (resp. i*10+1) < N of the feed on their shard. */
static int submit_job(sender_t *s, job_t jb) {
    long total = jb.count;
    if (jb.kind == JOB_CLEANUP) total = (jb.count + 9) / 10;
    if (jb.kind == JOB_LIKE) total = (jb.count + 8) / 10;
    op_buf_t *bufs = calloc((size_t)s->per_request, sizeof(*bufs));
    Bulkwrite__V1__Op **ops = calloc((size_t)s->per_request, sizeof(*ops));
    int ret = 0;
    for (long start = 0; start < total; start += s->per_request) {
        long n = total - start < s->per_request ? total - start : s->per_request;
        for (long k = 0; k < n; k++) {
            make_op(&jb, start + k, &bufs[k]);
            ops[k] = &bufs[k].op;
        }
        static const char *const names[] = {"feed", "spread", "cleanup", "like"};
        char rid[160] = "";
        if (s->request_id_prefix)
            snprintf(rid, sizeof(rid), "%s/%s:%ld:%d/%ld", s->request_id_prefix, names[jb.kind], jb.count,
                     jb.shard, start);
        void *body;
        size_t len;
        if (s->protobuf) {
            Bulkwrite__V1__BatchWriteRequest req = BULKWRITE__V1__BATCH_WRITE_REQUEST__INIT;
            req.request_id = rid;
            req.n_ops = (size_t)n;
            req.ops = ops;
            len = bulkwrite__v1__batch_write_request__get_packed_size(&req);
            body = malloc(len);
            bulkwrite__v1__batch_write_request__pack(&req, body);
        } else {
            json_t *arr = json_array();
            for (long k = 0; k < n; k++) json_array_append_new(arr, op_json(ops[k]));
            json_t *root = json_pack("{s:o}", "ops", arr);
            if (rid[0]) json_object_set_new(root, "request_id", json_string(rid));
            body = json_dumps(root, JSON_COMPACT);
            len = strlen(body);
            json_decref(root);
        }
        int64_t deadline = bw_now_us() + (int64_t)s->retry_for_s * 1000000;
        int rc;
        while ((rc = post(s, body, len, n)) == 1 && bw_now_us() < deadline) {
            s->retries++;
            usleep(300000);
        }
        free(body);
        if (rc) {
            ret = -1;
            break;
        }
    }
    free(bufs);
    free(ops);
    return ret;
}

/* ---- verify ----------------------------------------------------------------------------- */

typedef struct {
    long expected, actual, missing, unexpected, wrong;
} shard_check_t;

static int check_shard(int shard, pinset_t *want, MYSQL *db, shard_check_t *out, int count_only) {
    char dbname[80], q[512];
    bw_config_shard_db(conf, shard, dbname, sizeof(dbname));
    memset(out, 0, sizeof(*out));
    for (size_t i = 0; i < want->len; i++) out->expected += want->pins[i].present;
    if (count_only) {
        snprintf(q, sizeof(q), "SELECT COUNT(*) FROM `%s`.`pins`", dbname);
        if (mysql_query(db, q)) return -1;
        MYSQL_RES *r = mysql_store_result(db);
        MYSQL_ROW row = r ? mysql_fetch_row(r) : NULL;
        out->actual = row ? atol(row[0]) : 0;
        if (r) mysql_free_result(r);
        mysql_commit(db);
        return 0;
    }
    snprintf(q, sizeof(q), "SELECT id, owner_id, board_id, title, like_count FROM `%s`.`pins` ORDER BY id", dbname);
    if (mysql_query(db, q)) return -1;
    MYSQL_RES *r = mysql_use_result(db);
    size_t w = 0;
    MYSQL_ROW row;
    while ((row = mysql_fetch_row(r))) {
        unsigned long *lens = mysql_fetch_lengths(r);
        uint64_t id = strtoull(row[0], NULL, 10);
        out->actual++;
        while (w < want->len && (want->pins[w].id < id || !want->pins[w].present)) {
            if (want->pins[w].present) out->missing++;
            w++;
        }
        if (w >= want->len || want->pins[w].id != id) {
            out->unexpected++;
            continue;
        }
        const pin_t *p = &want->pins[w++];
        char title[160];
        pin_title(title, sizeof(title), id);
        if (strtoull(row[1], NULL, 10) != p->owner || !row[2] || atol(row[2]) != p->board || !row[3] ||
            lens[3] != strlen(title) || memcmp(row[3], title, lens[3]) != 0 || !row[4] ||
            atol(row[4]) != p->likes)
            out->wrong++;
    }
    for (; w < want->len; w++) out->missing += want->pins[w].present;
    mysql_free_result(r);
    mysql_commit(db);
    return 0;
}

static int verify(const job_t *jobs, int job_cnt, int wait_s) {
    pinset_t *want = expected_state(jobs, job_cnt);
    MYSQL **conns = calloc((size_t)conf->server_cnt, sizeof(*conns));
    shard_check_t *res = calloc((size_t)conf->shard_count, sizeof(*res));
    char err[512];
    int ok = 0;
    for (int i = 0; i < conf->server_cnt; i++)
        if (!(conns[i] = bw_db_connect(conf, i, err, sizeof(err)))) {
            fprintf(stderr, "bw-workload: %s\n", err);
            goto done;
        }
    long total_expected = 0;
    for (int s = 0; s < conf->shard_count; s++)
        for (size_t i = 0; i < want[s].len; i++) total_expected += want[s].pins[i].present;
    /* progress: wait until every shard holds the expected row count (or time runs out) */
    for (int t = 0;; t++) {
        long total = 0, done = 1;
        for (int s = 0; s < conf->shard_count; s++) {
            check_shard(s, &want[s], conns[conf->shard_server[s]], &res[s], 1);
            total += res[s].actual;
            done &= res[s].actual == res[s].expected;
        }
        if (done || t >= wait_s) break;
        if (wait_s > 0) {
            fprintf(stderr, "progress: %ld of %ld rows in place\n", total, total_expected);
            sleep(1);
        }
    }
    /* then compare row by row; applies may still be finishing updates, so retry a while */
    for (int t = 0; t <= wait_s && !ok; t++) {
        if (t) sleep(1);
        ok = 1;
        for (int s = 0; s < conf->shard_count; s++) {
            if (check_shard(s, &want[s], conns[conf->shard_server[s]], &res[s], 0)) {
                fprintf(stderr, "bw-workload: shard %d: %s\n", s, mysql_error(conns[conf->shard_server[s]]));
                ok = 0;
                goto done;
            }
            ok &= !res[s].missing && !res[s].unexpected && !res[s].wrong && res[s].actual == res[s].expected;
        }
    }
    printf("%-6s %-10s %-10s %10s %10s %8s %10s %6s  %s\n", "shard", "server", "database", "expected", "actual",
           "missing", "unexpected", "wrong", "status");
    for (int s = 0; s < conf->shard_count; s++) {
        char dbname[80];
        bw_config_shard_db(conf, s, dbname, sizeof(dbname));
        int good = !res[s].missing && !res[s].unexpected && !res[s].wrong && res[s].actual == res[s].expected;
        printf("%-6d %-10s %-10s %10ld %10ld %8ld %10ld %6ld  %s\n", s, conf->servers[conf->shard_server[s]].name,
               dbname, res[s].expected, res[s].actual, res[s].missing, res[s].unexpected, res[s].wrong,
               good ? "ok" : "MISMATCH");
    }
    printf("verify: %s\n", ok ? "every shard matches the expected state row by row" : "MISMATCH");
done:
    for (int i = 0; i < conf->server_cnt; i++)
        if (conns[i]) mysql_close(conns[i]);
    for (int s = 0; s < conf->shard_count; s++) free(want[s].pins);
    free(want);
    free(conns);
    free(res);
    return ok ? 0 : 1;
}

/* ---- audit ------------------------------------------------------------------------------- */

/* Reads every partition of `topic` from its beginning to its end (or until timeout_s),
 * handing each message to fn. Returns how many partitions were read to the end, and
 * their count in *parts; -1 if the topic cannot be read. */
static int read_topic(const char *brokers, const char *topic, int timeout_s,
                      void (*fn)(const rd_kafka_message_t *m, void *ud), void *ud, int *parts) {
    char err[512];
    rd_kafka_conf_t *kc = rd_kafka_conf_new();
    rd_kafka_conf_set(kc, "bootstrap.servers", brokers, err, sizeof(err));
    rd_kafka_conf_set(kc, "group.id", "bw-workload-reader", err, sizeof(err));
    rd_kafka_conf_set(kc, "enable.partition.eof", "true", err, sizeof(err));
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, kc, err, sizeof(err));
    if (!rk) return fprintf(stderr, "bw-workload: %s\n", err), -1;
    const struct rd_kafka_metadata *md;
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    rd_kafka_resp_err_t merr = rd_kafka_metadata(rk, 0, rkt, &md, 10000);
    rd_kafka_topic_destroy(rkt);
    if (merr || md->topic_cnt != 1 || md->topics[0].err) {
        fprintf(stderr, "bw-workload: no topic %s\n", topic);
        if (!merr) rd_kafka_metadata_destroy(md);
        rd_kafka_destroy(rk);
        return -1;
    }
    *parts = md->topics[0].partition_cnt;
    rd_kafka_metadata_destroy(md);
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(*parts);
    for (int p = 0; p < *parts; p++)
        rd_kafka_topic_partition_list_add(l, topic, p)->offset = RD_KAFKA_OFFSET_BEGINNING;
    rd_kafka_assign(rk, l);
    rd_kafka_topic_partition_list_destroy(l);
    int eof = 0;
    int64_t deadline = bw_now_us() + timeout_s * 1000000LL;
    while (eof < *parts && bw_now_us() < deadline) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 1000);
        if (!m) continue;
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) eof++;
        else if (!m->err) fn(m, ud);
        rd_kafka_message_destroy(m);
    }
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return eof;
}

typedef struct {
    long msgs, rows, bad;
} audit_t;

static void audit_message(const rd_kafka_message_t *m, void *ud) {
    audit_t *a = ud;
    Bulkwrite__V1__ShardBatch *sb = bulkwrite__v1__shard_batch__unpack(NULL, m->len, m->payload);
    a->msgs++;
    if (!sb || (int)sb->shard != m->partition) a->bad++;
    else {
        for (size_t r = 0; r < sb->n_rows; r++)
            if (sb->rows[r]->id && (int)bw_id_shard(sb->rows[r]->id) != m->partition) a->bad++;
        a->rows += (long)sb->n_rows;
    }
    if (sb) bulkwrite__v1__shard_batch__free_unpacked(sb, NULL);
}

static int audit(const char *brokers) {
    audit_t a = {0};
    int parts = 0, eof = read_topic(brokers, conf->topic, 120, audit_message, &a, &parts);
    if (eof < 0) return 1;
    printf("audit: %ld messages, %ld rows, %ld misplaced, %d of %d partitions read to the end\n", a.msgs, a.rows,
           a.bad, eof, parts);
    return a.bad || eof < parts || parts != conf->shard_count || !a.msgs ? 1 : 0;
}

static void print_message(const rd_kafka_message_t *m, void *ud) {
    printf("%.*s\n", (int)m->len, (const char *)m->payload);
    (*(long *)ud)++;
}

/* Prints the dead-letter topic's records as JSON lines, then their count on stderr. */
static int dead_letters(const char *brokers) {
    long n = 0;
    int parts = 0, eof = read_topic(brokers, conf->dead_letter_topic, 60, print_message, &n, &parts);
    if (eof < 0) return 1;
    fprintf(stderr, "dead-letters: %ld records\n", n);
    return eof < parts ? 1 : 0;
}

/* ---- main ----------------------------------------------------------------------------------- */

static int parse_job(const char *s, job_t *jb) {
    char name[16];
    long count = 0;
    int shard = 0;
    int n = sscanf(s, "%15[a-z]:%ld:%d", name, &count, &shard);
    if (n < 2 || count < 0) return -1;
    jb->count = count;
    jb->shard = shard;
    if (strcmp(name, "feed") == 0) jb->kind = JOB_FEED;
    else if (strcmp(name, "spread") == 0) jb->kind = JOB_SPREAD;
    else if (strcmp(name, "cleanup") == 0) jb->kind = JOB_CLEANUP;
    else if (strcmp(name, "like") == 0) jb->kind = JOB_LIKE;
    else return -1;
    if (jb->kind != JOB_SPREAD && (n < 3 || shard < 0 || shard >= conf->shard_count)) return -1;
    return 0;
}

static int submit(sender_t *s, const job_t *jobs, int job_cnt);

static int usage(FILE *out, int code) {
    fputs("usage: bw-workload [-c CONFIG] submit --url URL [--per-request N] [--protobuf]\n"
          "                          [--request-id PREFIX] [--retry-for SECONDS] JOB...\n"
          "       bw-workload [-c CONFIG] verify [--wait SECONDS] JOB...\n"
          "       bw-workload [-c CONFIG] audit --brokers LIST\n"
          "       bw-workload [-c CONFIG] dead-letters --brokers LIST\n"
          "JOB: feed:N:SHARD | spread:N | cleanup:N:SHARD | like:N:SHARD\n",
          out);
    return code;
}

int main(int argc, char **argv) {
    const char *config_path = "conf/bulkwrite.conf", *url = NULL, *brokers = NULL;
    long per_request = 5000;
    int protobuf = 0, wait_s = 0, retry_for = 0;
    const char *request_id = NULL;
    static const struct option opts[] = {{"config", required_argument, 0, 'c'},
                                         {"url", required_argument, 0, 'u'},
                                         {"per-request", required_argument, 0, 'n'},
                                         {"protobuf", no_argument, 0, 'P'},
                                         {"wait", required_argument, 0, 'w'},
                                         {"brokers", required_argument, 0, 'b'},
                                         {"request-id", required_argument, 0, 'r'},
                                         {"retry-for", required_argument, 0, 'R'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    for (int o; (o = getopt_long(argc, argv, "c:u:n:w:b:h", opts, NULL)) != -1;) {
        switch (o) {
        case 'c': config_path = optarg; break;
        case 'u': url = optarg; break;
        case 'n': per_request = atol(optarg); break;
        case 'P': protobuf = 1; break;
        case 'w': wait_s = atoi(optarg); break;
        case 'b': brokers = optarg; break;
        case 'r': request_id = optarg; break;
        case 'R': retry_for = atoi(optarg); break;
        case 'h': return usage(stdout, 0);
        default: return usage(stderr, 2);
        }
    }
    if (optind >= argc || per_request < 1) return usage(stderr, 2);
    char err[512];
    conf = bw_config_load(config_path, err, sizeof(err));
    if (!conf) return fprintf(stderr, "bw-workload: %s\n", err), 1;
    const char *cmd = argv[optind++];
    int job_cnt = argc - optind, ret = 0;
    job_t *jobs = calloc((size_t)job_cnt + 1, sizeof(*jobs));
    for (int i = 0; i < job_cnt && !ret; i++)
        if (parse_job(argv[optind + i], &jobs[i])) {
            fprintf(stderr, "bw-workload: bad job \"%s\"\n", argv[optind + i]);
            ret = usage(stderr, 2);
        }
    if (!ret) {
        if (strcmp(cmd, "audit") == 0) ret = brokers ? audit(brokers) : usage(stderr, 2);
        else if (strcmp(cmd, "verify") == 0) ret = verify(jobs, job_cnt, wait_s);
        else if (strcmp(cmd, "dead-letters") == 0) ret = brokers ? dead_letters(brokers) : usage(stderr, 2);
        else if (strcmp(cmd, "submit") == 0 && url) {
            sender_t s = {.url = url, .protobuf = protobuf, .per_request = per_request,
                          .request_id_prefix = request_id, .retry_for_s = retry_for};
            ret = submit(&s, jobs, job_cnt);
        }
        else ret = usage(stderr, 2);
    }
    free(jobs);
    bw_config_destroy(conf);
    return ret;
}

static int submit(sender_t *s, const job_t *jobs, int job_cnt) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    s->curl = curl_easy_init();
    int ret = 0;
    int64_t t0 = bw_now_us();
    for (int i = 0; i < job_cnt && !ret; i++) ret = submit_job(s, jobs[i]);
    double secs = (double)(bw_now_us() - t0) / 1e6;
    fprintf(stderr, "submit: %ld ops sent, %ld accepted, %ld not accepted, %ld requests resent, in %.2f s\n",
            s->sent, s->accepted, s->rejected, s->retries, secs);
    curl_easy_cleanup(s->curl);
    curl_global_cleanup();
    return ret ? 1 : 0;
}
