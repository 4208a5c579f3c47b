/* bw-workload — deterministic jobs for the demo, the end-to-end tests and the benchmarks.
 *
 *   bw-workload submit  --url URL JOB...     send the jobs' ops to a proxy (its bearer token
 *                       [--token-file FILE]    from FILE or $BW_TOKEN). Every request
 *                       [--request-id PREFIX]  carries a request_id, PREFIX/J:JOB/FIRST-OP
 *                       [--retry-for S]        (J: the job's position; PREFIX defaults to
 *                       [--lane LANE]          bw-workload-PID-EPOCHMS), so a resend applies once.
 *                                            With --lane the requests name that priority lane.
 *                                            A request that fails (connection, 5xx) is resent
 *                                            as it was for up to S seconds, the way a careful
 *                                            client retries; a 429 (a shard's backlog is full)
 *                                            is resent as it was after Retry-After until it is
 *                                            taken, however long that is
 *   bw-workload jsonl   JOB...               print the jobs' ops as JSON lines, the file
 *                                            bwctl submit reads (what a user sends)
 *   bw-workload verify  [--wait S] JOB...    compare every shard, row by row, with the state
 *                                            the jobs imply; print a per-shard table
 *   bw-workload audit   --brokers B          read every lane's topic: every message must sit in
 *                                            its shard's partition
 *   bw-workload dead-letters --brokers B     print every dead-letter record (JSON lines)
 *   bw-workload offsets --brokers B SHARD    print the low and high watermarks of the shard's
 *                                            partition of the batches topic
 *   bw-workload delete-records --brokers B SHARD OFFSET|end
 *                                            delete that partition's messages before OFFSET
 *                                            (end: all), as an operator's retention would;
 *                                            print the new low watermark
 *   bw-workload hold ADDR HOST:PORT N SECONDS
 *                                            a slowloris: N connections to the proxy from the
 *                                            local address ADDR (any of 127.0.0.0/8 on
 *                                            loopback), each sending half a request's headers
 *                                            and then nothing, held SECONDS; print how many the
 *                                            server accepted and how many it had closed by then
 *   bw-workload flood --brokers B SHARD BYTES
 *                                            produce at least BYTES of pin creates (60 KB
 *                                            images, local ids from 2,000,000,000 on) straight
 *                                            to the shard's partition, past the proxy and its
 *                                            backlog bound, as a runaway producer would; print
 *                                            the first and last offsets written
 *   bw-workload flood-topic --brokers B TOPIC BYTES [KEYS]
 *                                            produce at least BYTES of 1 KiB records into each
 *                                            partition of a compacted topic, under random keys
 *                                            (new records) or KEYS keys written again in turn
 *                                            (changed settings), as other jobs and processes
 *                                            would (the embedded bound's test)
 *
 * A JOB is NAME:COUNT[:ARG], generated the same way by submit and verify:
 *   feed:N:SHARD     N pin creates for one partner whose user id lives on SHARD (the hot shard)
 *   spread:N         N pin creates spread over every shard
 *   cleanup:N:SHARD  deletes of every 10th pin among the first N of the feed on SHARD (spam cleanup)
 *   like:N:SHARD     like_count += 1 on every 10th+1 pin among the first N of the feed on SHARD
 *   counter:N:SHARD  N increments (like_count += 1) scattered over the first 1,000 pins of the
 *                    feed on SHARD, each pin repeated about N / 1,000 times (counter coalescing)
 *   image:N:SHARD    N pin creates for the feed's partner on SHARD, each with a 60,000-byte
 *                    image that does not compress (derived from the pin id); local ids from
 *                    1,000,000,000 on, apart from the feed's; at most 100 per request
 * Texts carry quotes, backslashes and multi-byte UTF-8 on purpose. */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apijson.h"
#include "cli.h"
#include "bulkwrite/internal/v1/records.pb-c.h"
#include "config.h"
#include "db.h"
#include "kafka.h"
#include "shard.h"
#include "token.h"
#include "workload.h"

#define IMAGE_BYTES 60000          /* under the image column's max_length (65535) */
#define IMAGE_PER_REQUEST 100      /* ~6 MB protobuf, ~8 MB JSON: under proxy.max_body_bytes */

static bw_config_t *conf;

/* A pin's image: xorshift64* seeded from its id, so every run makes the same bytes, and
 * they do not compress (Kafka's lz4 cannot shrink the backlog they fill). */
static void pin_image(uint64_t id, uint8_t *out) {
    uint64_t x = id * 0x9e3779b97f4a7c15ULL | 1;
    for (size_t i = 0; i < IMAGE_BYTES; i += 8) {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        uint64_t r = x * 0x2545f4914f6cdd1dULL;
        memcpy(out + i, &r, IMAGE_BYTES - i < 8 ? IMAGE_BYTES - i : 8);
    }
}

/* ---- expected state ------------------------------------------------------------------ */

typedef struct {
    pin_t *pins;
    size_t len, cap;
} pinset_t;

static void pin_add(pinset_t *ps, pin_t p) {
    if (ps->len == ps->cap) {
        ps->cap = ps->cap ? ps->cap * 2 : 1024;
        ps->pins = realloc(ps->pins, ps->cap * sizeof(*ps->pins));
    }
    ps->pins[ps->len++] = p;
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
    for (int j = 0; j < job_cnt; j++)
        for (long i = 0; is_create(jobs[j].kind) && i < jobs[j].count; i++) {
            pin_t p = created_pin(conf->shard_count, &jobs[j], i);
            pin_add(&sets[bw_id_shard(p.id)], p);
        }
    for (int s = 0; s < conf->shard_count; s++)
        if (sets[s].len) qsort(sets[s].pins, sets[s].len, sizeof(pin_t), pin_cmp); /* pins is NULL when empty */
    for (int j = 0; j < job_cnt; j++) {
        const job_t *jb = &jobs[j];
        for (long i = 0; (jb->kind == JOB_COUNTER || jb->kind == JOB_BUMP) && i < jb->count; i++) {
            uint64_t id = touched_pin(conf->shard_count, jb, i);
            pin_t *p = pin_find(&sets[bw_id_shard(id)], id);
            if (p) p->likes++; /* a pin no feed made: the update is a no-op */
        }
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
    const char *request_id_prefix;
    const char *lane;        /* the requests' lane; NULL: none named (the default) */
    int retry_for_s;
    const char *auth_header; /* "Authorization: Bearer TOKEN", or NULL */
    CURL *curl;
    long sent, accepted, rejected, retries;
    long backlog_waits;      /* 429 answers */
    int64_t backlog_us;      /* time spent waiting them out */
    int64_t backlog_note_us; /* when the last "shard backlog full" line was printed */
    int64_t start_at_ms;     /* --start-at: encode every request first, send from then on */
    struct encoded {         /* with --start-at: the requests encoded, in order */
        void *body;
        size_t len;
        long ops;
        int64_t not_before_ms;
    } *queue;
    size_t queued, queue_cap;
    /* --not-before FROM:WINDOW: a job's request r of R is scheduled at FROM + r * WINDOW / R
     * (ms since the epoch), so two jobs of one size pair up their requests' times */
    int64_t not_before_from_ms, not_before_window_ms;
    int part_k, part_m;   /* --part K/M: only a job's requests r with r %% M == K */
    FILE *jobs_out;       /* --jobs-out: "JOB_ID NOT_BEFORE_MS" per request accepted */
    int64_t not_before_ms; /* of the request being encoded or sent; 0: none */
} sender_t;

/* One answer of the proxy. */
typedef struct {
    long status;        /* HTTP status; 0: no answer */
    long accepted;      /* -1: no reply body */
    long retry_after_s; /* Retry-After; 0 when absent */
    char backlog[256];  /* a 429's reason: its first retryable rejection */
    char job_id[33];    /* the reply's */
} answer_t;

static size_t collect_body(char *p, size_t sz, size_t n, void *ud) {
    bw_buf_t *b = ud;
    bw_buf_append(b, p, sz * n);
    return sz * n;
}

/* Keeps the first retryable reason (the 429's "why"); prints the others when print. */
static void note_rejection(answer_t *a, uint32_t index, const char *reason, int retryable, int print) {
    if (retryable && !a->backlog[0]) snprintf(a->backlog, sizeof(a->backlog), "%s", reason);
    if (print && !retryable) fprintf(stderr, "bw-workload: op %u rejected: %s\n", index, reason);
}

/* Reads a reply body (the BatchWriteResponse shape, in the request's format): accepted
 * and a 429's reason; prints the rejected ops when print. */
static void read_reply(int protobuf, const bw_buf_t *resp, answer_t *a, int print) {
    if (protobuf) {
        Bulkwrite__V1__BatchWriteResponse *r =
            bulkwrite__v1__batch_write_response__unpack(NULL, resp->len, (const uint8_t *)resp->data);
        if (!r) return;
        a->accepted = r->accepted;
        snprintf(a->job_id, sizeof(a->job_id), "%s", r->job_id ? r->job_id : "");
        for (size_t i = 0; i < r->n_rejected; i++)
            note_rejection(a, r->rejected[i]->index, r->rejected[i]->reason, r->rejected[i]->retryable, print);
        bulkwrite__v1__batch_write_response__free_unpacked(r, NULL);
        return;
    }
    json_t *j = json_loadb(resp->data, resp->len, 0, NULL), *rej;
    size_t i;
    if (json_is_string(json_object_get(j, "job_id")))
        snprintf(a->job_id, sizeof(a->job_id), "%s", json_string_value(json_object_get(j, "job_id")));
    if (json_is_integer(json_object_get(j, "accepted")))
        a->accepted = (long)json_integer_value(json_object_get(j, "accepted"));
    json_array_foreach(json_object_get(j, "rejected"), i, rej) {
        const char *reason = json_string_value(json_object_get(rej, "reason"));
        note_rejection(a, (uint32_t)json_integer_value(json_object_get(rej, "index")), reason ? reason : "",
                       json_is_true(json_object_get(rej, "retryable")), print);
    }
    json_decref(j);
}

/* POSTs the body once; prints why when there is no answer or an unexpected one. */
static void post(sender_t *s, const void *body, size_t len, answer_t *a) {
    bw_buf_t resp;
    bw_buf_init(&resp);
    struct curl_slist *h = curl_slist_append(NULL, s->protobuf ? "Content-Type: application/x-protobuf"
                                                                : "Content-Type: application/json");
    h = curl_slist_append(h, "Expect:");
    if (s->auth_header) h = curl_slist_append(h, s->auth_header);
    curl_easy_setopt(s->curl, CURLOPT_URL, s->url);
    curl_easy_setopt(s->curl, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(s->curl, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(s->curl, CURLOPT_POSTFIELDSIZE, (long)len);
    curl_easy_setopt(s->curl, CURLOPT_WRITEFUNCTION, collect_body);
    curl_easy_setopt(s->curl, CURLOPT_WRITEDATA, &resp);
    curl_easy_setopt(s->curl, CURLOPT_TIMEOUT, 120L);
    CURLcode rc = curl_easy_perform(s->curl);
    curl_slist_free_all(h);
    *a = (answer_t){.accepted = -1};
    curl_off_t retry_after = 0;
    if (rc != CURLE_OK) {
        fprintf(stderr, "bw-workload: POST %s: %s\n", s->url, curl_easy_strerror(rc));
    } else {
        curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &a->status);
        curl_easy_getinfo(s->curl, CURLINFO_RETRY_AFTER, &retry_after);
        a->retry_after_s = (long)retry_after;
        /* 202, 422, 429 and 503 carry the reply shape; the others {"error": ...} */
        long st = a->status;
        if (st == 202 || st == 403 || st == 422 || st == 429 || st == 503) read_reply(s->protobuf, &resp, a, st == 202);
        if (st != 202 && st != 429)
            fprintf(stderr, "bw-workload: POST %s: HTTP %ld: %.500s\n", s->url, st, resp.data ? resp.data : "");
    }
    bw_buf_free(&resp);
}

/* Waits out a 429: Retry-After seconds (1 when absent, at most 30, so a drained backlog
 * is not left idle long), saying why on stderr at most once a second. */
static void backlog_wait(sender_t *s, const answer_t *a) {
    long secs = a->retry_after_s < 1 ? 1 : a->retry_after_s > 30 ? 30 : a->retry_after_s;
    int64_t now = bw_now_us();
    s->backlog_waits++;
    if (now - s->backlog_note_us >= 1000000) {
        fprintf(stderr, "submit: %s; waiting %ld s (%ld waits so far)\n",
                a->backlog[0] ? a->backlog : "shard backlog full (HTTP 429)", secs, s->backlog_waits);
        s->backlog_note_us = now;
    }
    sleep((unsigned)secs);
    s->backlog_us += bw_now_us() - now;
}

/* Sends one request, always as it was, until it has a final answer. A 429 is resent
 * after Retry-After for as long as it takes: the backlog drains as the consumers apply,
 * and that time does not count against --retry-for, which bounds outages (no answer,
 * 5xx). Counts the final answer; 0 when every op was accepted, else -1. */
static int send_request(sender_t *s, const void *body, size_t len, long ops) {
    int64_t deadline = bw_now_us() + (int64_t)s->retry_for_s * 1000000;
    answer_t a;
    for (;;) {
        int64_t start = bw_now_us();
        post(s, body, len, &a);
        if (a.status == 429) {
            backlog_wait(s, &a);
            deadline += bw_now_us() - start;
        } else if ((a.status == 0 || a.status >= 500) && bw_now_us() < deadline) {
            s->retries++;
            usleep(300000);
        } else {
            break;
        }
    }
    /* the final answer counts every op of the request that is durable, earlier attempts' too */
    long acc = a.accepted > 0 ? a.accepted : 0;
    if (s->jobs_out && acc && a.job_id[0]) fprintf(s->jobs_out, "%s %" PRId64 "\n", a.job_id, s->not_before_ms);
    s->sent += ops;
    s->accepted += acc;
    s->rejected += ops - acc;
    return a.status == 202 && acc == ops ? 0 : -1;
}

/* One op, in protobuf-c structs backed by caller storage. */
typedef struct {
    Bulkwrite__V1__Op op;
    Bulkwrite__V1__Field f[5], *fp[5];
    Bulkwrite__V1__Value v[5];
    char key[32], title[160];
    uint8_t *image; /* IMAGE_BYTES, allocated by the first image op made here */
} op_buf_t;

static Bulkwrite__V1__Value *add_field(op_buf_t *o, char *name, Bulkwrite__V1__Value__KindCase kind) {
    size_t k = o->op.n_fields++;
    bulkwrite__v1__field__init(&o->f[k]);
    bulkwrite__v1__value__init(&o->v[k]);
    o->f[k].name = name;
    o->f[k].value = &o->v[k];
    o->fp[k] = &o->f[k];
    o->v[k].kind_case = kind;
    return &o->v[k];
}

static void add_int(op_buf_t *o, char *name, int64_t value) {
    add_field(o, name, BULKWRITE__V1__VALUE__KIND_INT_VALUE)->int_value = value;
}

static void add_data(op_buf_t *o, char *name, Bulkwrite__V1__Value__KindCase kind, const void *data, size_t len) {
    Bulkwrite__V1__Value *v = add_field(o, name, kind);
    ProtobufCBinaryData *b = kind == BULKWRITE__V1__VALUE__KIND_BYTES_VALUE ? &v->bytes_value : &v->string_value;
    b->data = (uint8_t *)data;
    b->len = len;
}

static void make_op(const job_t *jb, long i, op_buf_t *o) {
    bulkwrite__v1__op__init(&o->op);
    o->op.object_type = "pin";
    o->op.shard_key = "";
    o->op.fields = o->fp;
    if (is_create(jb->kind)) {
        pin_t p = created_pin(conf->shard_count, jb, i);
        o->op.op = BULKWRITE__V1__OP_TYPE__CREATE;
        o->op.id = p.id;
        snprintf(o->key, sizeof(o->key), "%" PRIu64, p.owner);
        o->op.shard_key = o->key;
        pin_title(o->title, sizeof(o->title), p.id);
        add_int(o, "owner_id", (int64_t)p.owner);
        add_int(o, "board_id", p.board);
        add_data(o, "title", BULKWRITE__V1__VALUE__KIND_STRING_VALUE, o->title, strlen(o->title));
        add_int(o, "like_count", 0);
        if (p.image) {
            if (!o->image) o->image = malloc(IMAGE_BYTES);
            pin_image(p.id, o->image);
            add_data(o, "image", BULKWRITE__V1__VALUE__KIND_BYTES_VALUE, o->image, IMAGE_BYTES);
        }
    } else if (jb->kind == JOB_CLEANUP) {
        o->op.op = BULKWRITE__V1__OP_TYPE__DELETE;
        o->op.id = touched_pin(conf->shard_count, jb, i);
    } else {
        o->op.op = BULKWRITE__V1__OP_TYPE__UPDATE;
        o->op.id = touched_pin(conf->shard_count, jb, i);
        add_int(o, "like_count", 1);
        o->f[0].increment = 1;
    }
}

/* The request body of n ops, in the sender's format; the caller frees it. */
static void *encode_request(const sender_t *s, char *rid, Bulkwrite__V1__Op **ops, long n, size_t *len) {
    if (s->protobuf) {
        Bulkwrite__V1__BatchWriteRequest req = BULKWRITE__V1__BATCH_WRITE_REQUEST__INIT;
        req.request_id = rid;
        req.lane = (char *)(s->lane ? s->lane : "");
        req.not_before_ms = s->not_before_ms;
        req.n_ops = (size_t)n;
        req.ops = ops;
        *len = bulkwrite__v1__batch_write_request__get_packed_size(&req);
        void *body = malloc(*len);
        bulkwrite__v1__batch_write_request__pack(&req, body);
        return body;
    }
    bw_buf_t b;
    bw_buf_init(&b);
    bw_apijson_request(&b, rid, s->lane, ops, (size_t)n);
    *len = b.len;
    return b.data;
}

/* Sends job number j of the command line. Cleanup and like touch pins i*10 (resp.
 * i*10+1) < N of the feed on their shard. */
static int submit_job(sender_t *s, const job_t *jb, int j) {
    long total = job_ops(jb);
    long per = jb->kind == JOB_IMAGE && s->per_request > IMAGE_PER_REQUEST ? IMAGE_PER_REQUEST : s->per_request;
    op_buf_t *bufs = calloc((size_t)per, sizeof(*bufs));
    Bulkwrite__V1__Op **ops = calloc((size_t)per, sizeof(*ops));
    int ret = 0;
    long requests = (total + per - 1) / per;
    for (long start = 0; start < total && !ret; start += per) {
        long n = total - start < per ? total - start : per, r = start / per;
        if (s->part_m && r % s->part_m != s->part_k) continue;
        if (s->not_before_window_ms || s->not_before_from_ms)
            s->not_before_ms = s->not_before_from_ms + r * s->not_before_window_ms / requests;
        for (long k = 0; k < n; k++) {
            make_op(jb, start + k, &bufs[k]);
            ops[k] = &bufs[k].op;
        }
        /* j: the same job twice on one command line is two jobs, not a resend */
        char rid[160];
        snprintf(rid, sizeof(rid), "%s/%d:%s:%ld:%d/%ld", s->request_id_prefix, j, job_names[jb->kind], jb->count,
                 jb->shard, start);
        size_t len;
        void *body = encode_request(s, rid, ops, n, &len);
        if (s->start_at_ms) { /* sent later, all at once with the other clients */
            if (s->queued == s->queue_cap) {
                s->queue_cap = s->queue_cap ? 2 * s->queue_cap : 16;
                if (!(s->queue = realloc(s->queue, s->queue_cap * sizeof(*s->queue)))) abort();
            }
            s->queue[s->queued++] = (struct encoded){body, len, n, s->not_before_ms};
            continue;
        }
        ret = send_request(s, body, len, n);
        free(body);
    }
    for (long k = 0; k < per; k++) free(bufs[k].image);
    free(bufs);
    free(ops);
    return ret;
}

/* The jobs' ops, one JSON line each, on stdout: bwctl submit's input. */
static int print_jsonl(const job_t *jobs, int cnt) {
    op_buf_t o = {0};
    bw_buf_t line;
    bw_buf_init(&line);
    for (int j = 0; j < cnt; j++) {
        for (long i = 0, total = job_ops(&jobs[j]); i < total; i++) {
            make_op(&jobs[j], i, &o);
            line.len = 0;
            bw_apijson_op(&line, &o.op);
            bw_buf_append(&line, "\n", 1);
            if (fwrite(line.data, 1, line.len, stdout) != line.len) break;
        }
    }
    free(o.image);
    bw_buf_free(&line);
    return fflush(stdout) || ferror(stdout) ? 1 : 0;
}

/* ---- verify ----------------------------------------------------------------------------- */

typedef struct {
    long expected, actual, missing, unexpected, wrong;
} shard_check_t;

/* Whether a row (id, owner_id, board_id, title, like_count, image) holds pin p. */
static int row_matches(const pin_t *p, MYSQL_ROW row, const unsigned long *lens) {
    char title[160];
    pin_title(title, sizeof(title), p->id);
    if (strtoull(row[1], NULL, 10) != p->owner || !row[2] || atol(row[2]) != p->board || !row[3] ||
        lens[3] != strlen(title) || memcmp(row[3], title, lens[3]) != 0 || !row[4] || atol(row[4]) != p->likes)
        return 0;
    if (!p->image) return !row[5];
    uint8_t image[IMAGE_BYTES];
    pin_image(p->id, image);
    return row[5] && lens[5] == IMAGE_BYTES && memcmp(row[5], image, IMAGE_BYTES) == 0;
}

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
    snprintf(q, sizeof(q), "SELECT id, owner_id, board_id, title, like_count, image FROM `%s`.`pins` ORDER BY id",
             dbname);
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
        if (!row_matches(&want->pins[w++], row, lens)) out->wrong++;
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

/* ---- lateness: scheduled jobs against the shards' ledgers ------------------------------ */

typedef struct {
    char id[33];
    int64_t not_before_ms, applied_ms;
    int parts; /* ledger rows of the job: a one-op job has one */
} scheduled_t;

static int scheduled_cmp(const void *a, const void *b) {
    return strcmp(((const scheduled_t *)a)->id, ((const scheduled_t *)b)->id);
}

static int int64_cmp(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Reads the ledger rows of the jobs in sch (sorted by id) from every shard. */
static int read_ledgers(MYSQL **conns, scheduled_t *sch, size_t n) {
    for (size_t i = 0; i < n; i++) sch[i].parts = 0, sch[i].applied_ms = 0;
    for (int s = 0; s < conf->shard_count; s++) {
        char dbname[80], q[256];
        bw_config_shard_db(conf, s, dbname, sizeof(dbname));
        snprintf(q, sizeof(q), "SELECT job_id, CAST(UNIX_TIMESTAMP(applied_at) * 1000 AS SIGNED) FROM `%s`.`bw_job_parts`",
                 dbname);
        MYSQL *db = conns[conf->shard_server[s]];
        if (mysql_query(db, q)) return fprintf(stderr, "bw-workload: shard %d: %s\n", s, mysql_error(db)), -1;
        MYSQL_RES *r = mysql_use_result(db);
        for (MYSQL_ROW row; r && (row = mysql_fetch_row(r));) {
            scheduled_t key;
            if (!row[0] || !row[1] || strlen(row[0]) != 32) continue;
            memcpy(key.id, row[0], sizeof(key.id));
            scheduled_t *t = bsearch(&key, sch, n, sizeof(*sch), scheduled_cmp);
            if (!t) continue; /* another test's job */
            int64_t at = strtoll(row[1], NULL, 10);
            if (!t->parts++ || at < t->applied_ms) t->applied_ms = at;
        }
        if (r) mysql_free_result(r);
        mysql_commit(db);
    }
    return 0;
}

/* The jobs of the --jobs-out files against the shards' ledgers, waiting up to wait_s for
 * the last ones: none missing, none applied before its not_before, none applied twice,
 * and the lateness (applied_at - not_before) of those applied. 0 when all is well. */
static int lateness(char **paths, int path_cnt, int wait_s) {
    scheduled_t *sch = NULL;
    size_t n = 0, cap = 0;
    for (int f = 0; f < path_cnt; f++) {
        FILE *in = fopen(paths[f], "r");
        if (!in) return fprintf(stderr, "bw-workload: %s: %s\n", paths[f], strerror(errno)), 1;
        char id[33];
        long long nb;
        while (fscanf(in, "%32s %lld", id, &nb) == 2) {
            if (n == cap && !(sch = realloc(sch, (cap = cap ? cap * 2 : 4096) * sizeof(*sch)))) abort();
            memcpy(sch[n].id, id, sizeof(id));
            sch[n++].not_before_ms = nb;
        }
        fclose(in);
    }
    if (n) qsort(sch, n, sizeof(*sch), scheduled_cmp);
    MYSQL **conns = calloc((size_t)conf->server_cnt, sizeof(*conns));
    int64_t *late = malloc((n + 1) * sizeof(*late));
    char err[512];
    int ret = 1;
    for (int i = 0; i < conf->server_cnt; i++)
        if (!(conns[i] = bw_db_connect(conf, i, err, sizeof(err)))) {
            fprintf(stderr, "bw-workload: %s\n", err);
            goto done;
        }
    size_t applied = 0;
    for (int t = 0;; t++) {
        if (read_ledgers(conns, sch, n)) goto done;
        applied = 0;
        for (size_t i = 0; i < n; i++) applied += sch[i].parts > 0;
        if (applied == n || t >= wait_s) break;
        if (t % 10 == 0) fprintf(stderr, "lateness: %zu of %zu jobs applied\n", applied, n);
        sleep(1);
    }
    size_t early = 0, twice = 0, k = 0;
    int64_t first = INT64_MAX, last = 0;
    for (size_t i = 0; i < n; i++) {
        if (!sch[i].parts) continue;
        if (sch[i].applied_ms < first) first = sch[i].applied_ms;
        if (sch[i].applied_ms > last) last = sch[i].applied_ms;
        early += sch[i].applied_ms < sch[i].not_before_ms;
        twice += sch[i].parts > 1;
        late[k++] = sch[i].applied_ms - sch[i].not_before_ms;
    }
    if (k) qsort(late, k, sizeof(*late), int64_cmp);
    printf("lateness: %zu jobs, %zu applied, %zu missing, %zu early, %zu twice; applied_at - not_before ms: "
           "p50 %" PRId64 ", p99 %" PRId64 ", max %" PRId64 "\n",
           n, applied, n - applied, early, twice, k ? late[k / 2] : 0, k ? late[k * 99 / 100] : 0, k ? late[k - 1] : 0);
    if (k) printf("applied: from %" PRId64 " to %" PRId64 " (epoch ms)\n", first, last);
    ret = n && applied == n && !early && !twice ? 0 : 1;
done:
    for (int i = 0; i < conf->server_cnt; i++)
        if (conns[i]) mysql_close(conns[i]);
    free(conns);
    free(late);
    free(sch);
    return ret;
}

/* ---- audit ------------------------------------------------------------------------------- */

/* Reads every partition of `topic` from its beginning to its end (or until timeout_s),
 * handing each message to fn. Returns how many partitions were read to the end, and
 * their count in *parts; -1 if the topic cannot be read. */
static int read_topic(const char *brokers, const char *topic, int timeout_s,
                      void (*fn)(const rd_kafka_message_t *m, void *ud), void *ud, int *parts) {
    char err[512];
    rd_kafka_conf_t *kc = rd_kafka_conf_new();
    bw_kafka_conf_logging(kc);
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
    Bulkwrite__Internal__V1__ShardBatch *sb = bulkwrite__internal__v1__shard_batch__unpack(NULL, m->len, m->payload);
    a->msgs++;
    if (!sb || (int)sb->shard != m->partition) a->bad++;
    else {
        for (size_t r = 0; r < sb->n_rows; r++)
            if (sb->rows[r]->id && (int)bw_id_shard(sb->rows[r]->id) != m->partition) a->bad++;
        a->rows += (long)sb->n_rows;
    }
    if (sb) bulkwrite__internal__v1__shard_batch__free_unpacked(sb, NULL);
}

static int audit(const char *brokers) {
    audit_t a = {0};
    int bad_topic = 0, parts_all = 0, eof_all = 0;
    for (int lane = 0; lane < conf->lane_cnt; lane++) { /* every lane's topic */
        int parts = 0, eof = read_topic(brokers, conf->lanes[lane].topic, 120, audit_message, &a, &parts);
        if (eof < 0) return 1;
        bad_topic |= parts != conf->shard_count;
        parts_all += parts, eof_all += eof;
    }
    printf("audit: %ld messages, %ld rows, %ld misplaced, %d of %d partitions read to the end\n", a.msgs, a.rows,
           a.bad, eof_all, parts_all);
    return a.bad || eof_all < parts_all || bad_topic || !a.msgs ? 1 : 0;
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

/* ---- offsets and delete-records ----------------------------------------------------------- */

/* A shard number given on the command line (its partition of the batches topic), or -1. */
static int parse_shard(const char *arg) {
    char *end;
    long v = strtol(arg, &end, 10);
    if (*end || end == arg || v < 0 || v >= conf->shard_count) {
        fprintf(stderr, "bw-workload: \"%s\" is not a shard (0 to %d)\n", arg, conf->shard_count - 1);
        return -1;
    }
    return (int)v;
}

/* A client of the cluster, with the configuration's kafka.properties (security and the like). */
static rd_kafka_t *kafka_client(const char *brokers) {
    char err[512];
    rd_kafka_conf_t *kc = bw_kafka_conf(conf, BW_KAFKA_PRODUCER, brokers, err, sizeof(err));
    rd_kafka_t *rk = kc ? rd_kafka_new(RD_KAFKA_PRODUCER, kc, err, sizeof(err)) : NULL;
    if (!rk) fprintf(stderr, "bw-workload: %s\n", err);
    if (!rk && kc) rd_kafka_conf_destroy(kc);
    return rk;
}

/* Prints "LOW HIGH", the watermarks of the shard's partition. */
static int offsets(const char *brokers, const char *shard_arg) {
    int shard = parse_shard(shard_arg);
    if (shard < 0) return 2;
    rd_kafka_t *rk = kafka_client(brokers);
    if (!rk) return 1;
    int64_t low, high;
    rd_kafka_resp_err_t err = rd_kafka_query_watermark_offsets(rk, conf->topic, shard, &low, &high, 10000);
    if (err) fprintf(stderr, "bw-workload: watermarks of %s [%d]: %s\n", conf->topic, shard, rd_kafka_err2str(err));
    else printf("%" PRId64 " %" PRId64 "\n", low, high);
    rd_kafka_destroy(rk);
    return err ? 1 : 0;
}

/* Deletes the shard's messages before offset OFFSET (end: all) and prints the new low
 * watermark: Kafka's own deletion, the kind retention does, applied or not. */
static int delete_records(const char *brokers, const char *shard_arg, const char *offset_arg) {
    char *end;
    int64_t before = strcmp(offset_arg, "end") == 0 ? RD_KAFKA_OFFSET_END : strtoll(offset_arg, &end, 10);
    if (before != RD_KAFKA_OFFSET_END && (*end || end == offset_arg || before < 0))
        return fprintf(stderr, "bw-workload: \"%s\" is not an offset (a number, or end)\n", offset_arg), 2;
    int32_t shard = parse_shard(shard_arg);
    if (shard < 0) return 2;
    rd_kafka_t *rk = kafka_client(brokers);
    if (!rk) return 1;
    char err[512] = "the embedded Kafka has no DeleteRecords";
    int64_t low = -1;
    size_t n = 0;
    if (!bw_kafka_is_embedded(rk, 10000)) {
        rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
        bw_kafka_delete_records_start(rk, conf->topic, &shard, &before, 1, 60000, q);
        while (!bw_kafka_delete_records_poll(q, &shard, &low, 1, &n, err, sizeof(err))) usleep(100000);
        rd_kafka_queue_destroy(q);
    }
    if (low >= 0) printf("%" PRId64 "\n", low);
    else fprintf(stderr, "bw-workload: %s\n", err);
    rd_kafka_destroy(rk);
    return low >= 0 ? 0 : 1;
}

/* ---- flood ---------------------------------------------------------------------------------- */

#define FLOOD_LOCAL_BASE 2000000000ULL
#define FLOOD_ROWS 8 /* rows of 60 KB per message: ~480 KB, under kafka.message_max_bytes */

typedef struct {
    long delivered, failed;
    int64_t first, last;
    char error[256];
} flood_t;

static void flood_delivered(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    (void)rk;
    flood_t *f = opaque;
    if (m->err) {
        if (!f->failed++) snprintf(f->error, sizeof(f->error), "%s", rd_kafka_err2str(m->err));
        return;
    }
    f->delivered++;
    if (f->first < 0 || m->offset < f->first) f->first = m->offset;
    if (m->offset > f->last) f->last = m->offset;
}

/* One message of the flood: a ShardBatch of FLOOD_ROWS pin creates, the way the batcher
 * makes them (its headers included), so a consumer that reached it would apply it. */
static void *flood_message(int shard, long first_row, uint32_t part, uint8_t *image, size_t *len) {
    Bulkwrite__Internal__V1__ShardBatch b = BULKWRITE__INTERNAL__V1__SHARD_BATCH__INIT;
    Bulkwrite__Internal__V1__Row rows[FLOOD_ROWS], *row_ptrs[FLOOD_ROWS];
    Bulkwrite__Internal__V1__RowField fields[FLOOD_ROWS][2], *field_ptrs[FLOOD_ROWS][2];
    Bulkwrite__V1__Value values[FLOOD_ROWS][2];
    char *columns[] = {"owner_id", "image"};
    b.job_id = "bw-workload-flood";
    b.shard = (uint32_t)shard;
    b.object_type = "pin";
    b.op = BULKWRITE__V1__OP_TYPE__CREATE;
    b.n_columns = 2;
    b.columns = columns;
    b.enqueued_at_ms = bw_wall_ms();
    b.part = part;
    b.n_rows = FLOOD_ROWS;
    b.rows = row_ptrs;
    for (int r = 0; r < FLOOD_ROWS; r++) {
        bulkwrite__internal__v1__row__init(&rows[r]);
        rows[r].op_index = (uint32_t)(first_row + r);
        rows[r].id = bw_id_make((unsigned)shard, PIN_TYPE, FLOOD_LOCAL_BASE + (uint64_t)(first_row + r));
        pin_image(rows[r].id, image + (size_t)r * IMAGE_BYTES);
        for (int c = 0; c < 2; c++) {
            bulkwrite__internal__v1__row_field__init(&fields[r][c]);
            bulkwrite__v1__value__init(&values[r][c]);
            fields[r][c].column = (uint32_t)c;
            fields[r][c].value = &values[r][c];
            field_ptrs[r][c] = &fields[r][c];
        }
        values[r][0].kind_case = BULKWRITE__V1__VALUE__KIND_INT_VALUE;
        values[r][0].int_value = (int64_t)feed_owner(shard);
        values[r][1].kind_case = BULKWRITE__V1__VALUE__KIND_BYTES_VALUE;
        values[r][1].bytes_value.data = image + (size_t)r * IMAGE_BYTES;
        values[r][1].bytes_value.len = IMAGE_BYTES;
        rows[r].n_fields = 2;
        rows[r].fields = field_ptrs[r];
        row_ptrs[r] = &rows[r];
    }
    *len = bulkwrite__internal__v1__shard_batch__get_packed_size(&b);
    void *payload = malloc(*len);
    if (!payload) abort();
    bulkwrite__internal__v1__shard_batch__pack(&b, payload);
    return payload;
}

/* A producer whose delivery reports count into f; NULL (said on stderr) if none. */
static rd_kafka_t *flood_producer(const char *brokers, flood_t *f) {
    char err[512];
    rd_kafka_conf_t *kc = bw_kafka_conf(conf, BW_KAFKA_PRODUCER, brokers, err, sizeof(err));
    if (!kc) return fprintf(stderr, "bw-workload: %s\n", err), NULL;
    rd_kafka_conf_set_dr_msg_cb(kc, flood_delivered);
    rd_kafka_conf_set_opaque(kc, f);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, kc, err, sizeof(err));
    if (!rk) {
        rd_kafka_conf_destroy(kc);
        fprintf(stderr, "bw-workload: %s\n", err);
    }
    return rk;
}

/* Waits for every message's report, prints the first and last offsets written (or says
 * what was not acknowledged), frees rk. Exit code: 1 if any was not acknowledged. */
static int flood_finish(rd_kafka_t *rk, flood_t *f, long msgs, long long sent, const char *topic, int partition) {
    rd_kafka_flush(rk, 60000);
    long unacked = msgs - f->delivered - f->failed;
    if (f->failed || unacked)
        fprintf(stderr, "bw-workload: flood: %ld of %ld messages not acknowledged: %s\n", f->failed + unacked, msgs,
                f->failed ? f->error : "timed out");
    else printf("%" PRId64 " %" PRId64 "\n", f->first, f->last);
    fprintf(stderr, "flood: %ld messages, %lld bytes to %s [%d]\n", msgs, sent, topic, partition);
    rd_kafka_destroy(rk);
    return f->failed || unacked ? 1 : 0;
}

static long long flood_bytes(const char *arg) {
    char *end;
    long long want = strtoll(arg, &end, 10);
    if (*end || end == arg || want <= 0) return fprintf(stderr, "bw-workload: \"%s\" is not a byte count\n", arg), -1;
    return want;
}

/* Writes at least BYTES of valid pin creates to the shard's partition of the batches
 * topic, straight to Kafka (the proxy's backlog bound never sees them), and prints the
 * first and last offsets written. On the embedded Kafka, whose partitions keep ~5 MiB,
 * this deletes the oldest messages of the shard as a retention would. Exit 1 if any
 * message was not acknowledged. */
static int flood(const char *brokers, const char *shard_arg, const char *bytes_arg) {
    long long want = flood_bytes(bytes_arg);
    int shard = parse_shard(shard_arg);
    if (want < 0 || shard < 0) return 2;
    flood_t f = {.first = -1, .last = -1};
    rd_kafka_t *rk = flood_producer(brokers, &f);
    if (!rk) return 1;
    uint8_t *image = malloc((size_t)FLOOD_ROWS * IMAGE_BYTES);
    if (!image) abort();
    long long sent = 0;
    long msgs = 0;
    char rows_header[24];
    snprintf(rows_header, sizeof(rows_header), "%d", FLOOD_ROWS);
    while (sent < want) {
        size_t len;
        void *payload = flood_message(shard, msgs * FLOOD_ROWS, (uint32_t)msgs, image, &len);
        rd_kafka_resp_err_t e;
        /* the payload is freed by librdkafka once the message is delivered (F_FREE) */
        while ((e = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(conf->topic), RD_KAFKA_V_PARTITION(shard),
                                      RD_KAFKA_V_VALUE(payload, len), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_FREE),
                                      RD_KAFKA_V_HEADER("bw-type", "pin", -1), RD_KAFKA_V_HEADER("bw-op", "1", -1),
                                      RD_KAFKA_V_HEADER("bw-rows", rows_header, -1), RD_KAFKA_V_END)) ==
               RD_KAFKA_RESP_ERR__QUEUE_FULL)
            rd_kafka_poll(rk, 100);
        if (e) {
            free(payload);
            snprintf(f.error, sizeof(f.error), "%s", rd_kafka_err2str(e));
            f.failed++;
            break;
        }
        sent += (long long)len;
        msgs++;
        rd_kafka_poll(rk, 0);
    }
    free(image);
    return flood_finish(rk, &f, msgs, sent, conf->topic, shard);
}

/* Writes at least BYTES of 1 KiB records under random 32-hex-digit keys to every
 * partition of TOPIC (one of the compacted ones: jobs, control, status), as other jobs'
 * records and other processes' would: on the embedded Kafka, which keeps a partition's
 * newest 5 MiB, they push the oldest records out. The daemons ignore what they cannot
 * read. */
static int flood_topic(const char *brokers, const char *topic, const char *bytes_arg, const char *keys_arg) {
    long long want = flood_bytes(bytes_arg);
    long keys = keys_arg ? strtol(keys_arg, NULL, 10) : 0;
    if (want < 0) return 2;
    if (keys_arg && keys <= 0) {
        fprintf(stderr, "bw-workload: flood-topic: KEYS must be a positive count, not %s\n", keys_arg);
        return 2;
    }
    flood_t f = {.first = -1, .last = -1};
    rd_kafka_t *rk = flood_producer(brokers, &f);
    if (!rk) return 1;
    const struct rd_kafka_metadata *md;
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    rd_kafka_resp_err_t me = rd_kafka_metadata(rk, 0, rkt, &md, 10000);
    rd_kafka_topic_destroy(rkt);
    if (me || md->topic_cnt != 1 || md->topics[0].err || md->topics[0].partition_cnt < 1) {
        fprintf(stderr, "bw-workload: flood-topic: topic %s: %s\n", topic,
                rd_kafka_err2str(me ? me : md->topic_cnt == 1 ? md->topics[0].err : RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC));
        if (!me) rd_kafka_metadata_destroy(md);
        rd_kafka_destroy(rk);
        return 1;
    }
    int parts = md->topics[0].partition_cnt;
    rd_kafka_metadata_destroy(md);
    char value[1024];
    uint64_t noise = 0x9e3779b97f4a7c15ULL;
    long long sent = 0;
    long msgs = 0;
    while (sent < want * parts) { /* BYTES into each partition, in turn */
        /* bytes that do not compress: the embedded Kafka bounds what it stores, compressed */
        for (size_t i = 0; i < sizeof(value); i += 8) {
            noise ^= noise << 13, noise ^= noise >> 7, noise ^= noise << 17;
            memcpy(value + i, &noise, 8);
        }
        char key[33];
        if (keys) snprintf(key, sizeof(key), "%032lx", (long)(msgs % keys));
        else
            for (int i = 0; i < 32; i++) key[i] = "0123456789abcdef"[rand() % 16];
        key[32] = '\0';
        rd_kafka_resp_err_t e;
        while ((e = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION((int32_t)(msgs % parts)),
                                      RD_KAFKA_V_KEY(key, 32), RD_KAFKA_V_VALUE(value, sizeof(value)),
                                      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END)) ==
               RD_KAFKA_RESP_ERR__QUEUE_FULL)
            rd_kafka_poll(rk, 100);
        if (e) {
            snprintf(f.error, sizeof(f.error), "%s", rd_kafka_err2str(e));
            f.failed++;
            break;
        }
        sent += (long long)sizeof(value) + 32;
        msgs++;
        rd_kafka_poll(rk, 0);
    }
    return flood_finish(rk, &f, msgs, sent, topic, -1);
}

/* ---- main ----------------------------------------------------------------------------------- */

/* The jobs of the command line, or NULL (named on stderr) when one is not a job. */
static job_t *parse_jobs(int cnt, char **args) {
    job_t *jobs = calloc((size_t)cnt + 1, sizeof(*jobs));
    for (int i = 0; i < cnt; i++)
        if (parse_job(conf, args[i], &jobs[i])) {
            fprintf(stderr, "bw-workload: bad job \"%s\"\n", args[i]);
            free(jobs);
            return NULL;
        }
    return jobs;
}

static const char *tls_cacert, *tls_cert, *tls_key; /* submit over HTTPS: --cacert, --cert, --key */

static int submit(sender_t *s, const job_t *jobs, int job_cnt) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    s->curl = curl_easy_init();
    if (tls_cacert) curl_easy_setopt(s->curl, CURLOPT_CAINFO, tls_cacert);
    if (tls_cert) curl_easy_setopt(s->curl, CURLOPT_SSLCERT, tls_cert);
    if (tls_key) curl_easy_setopt(s->curl, CURLOPT_SSLKEY, tls_key);
    int ret = 0;
    /* the clock starts here, after the process's start (libcurl's libraries, the config,
     * OpenSSL's init): a benchmark times what it sends, as bw-bench starts after connecting */
    int64_t t0 = bw_now_us(), started_ms = bw_wall_ms();
    for (int i = 0; i < job_cnt && !ret; i++) ret = submit_job(s, &jobs[i], i);
    if (s->start_at_ms) {
        /* the proxy's own speed: the requests' encoding (a client's cost, on the same
         * cores in a benchmark) is done before the agreed moment */
        int64_t wait_ms = s->start_at_ms - bw_wall_ms();
        if (wait_ms > 0) usleep((useconds_t)(wait_ms * 1000));
        else fprintf(stderr, "submit: encoding ended %" PRId64 " ms after --start-at\n", -wait_ms);
        t0 = bw_now_us();
        for (size_t i = 0; i < s->queued; i++) {
            s->not_before_ms = s->queue[i].not_before_ms;
            if (!ret) ret = send_request(s, s->queue[i].body, s->queue[i].len, s->queue[i].ops);
            free(s->queue[i].body);
        }
        free(s->queue);
        started_ms = s->start_at_ms;
    }
    fprintf(stderr, "submit: sent from %" PRId64 " to %" PRId64 " (epoch ms)\n", started_ms, bw_wall_ms());
    double secs = (double)(bw_now_us() - t0) / 1e6;
    /* "N requests resent, in T s" stays last: test/tiers/fault.sh reads the count from the end */
    fprintf(stderr, "submit: %ld ops sent, %ld accepted, %ld not accepted, %ld backlog waits (%.1f s), "
                    "%ld requests resent, in %.2f s\n",
            s->sent, s->accepted, s->rejected, s->backlog_waits, (double)s->backlog_us / 1e6, s->retries, secs);
    curl_easy_cleanup(s->curl);
    curl_global_cleanup();
    return ret ? 1 : 0;
}

/* ---- hold: idle connections, as a slowloris attack opens them ---------------------------- */

static int hold(const char *from, const char *target, const char *count_s, const char *seconds_s) {
    struct sockaddr_in src = {.sin_family = AF_INET}, dst = {.sin_family = AF_INET};
    char host[64];
    const char *colon = strrchr(target, ':');
    long n = atol(count_s), secs = atol(seconds_s);
    if (!colon || (size_t)(colon - target) >= sizeof(host) || n < 1 || n > 4096 || secs < 1)
        return fprintf(stderr, "bw-workload hold: want ADDR HOST:PORT N SECONDS\n"), 2;
    memcpy(host, target, (size_t)(colon - target));
    host[colon - target] = '\0';
    dst.sin_port = htons((uint16_t)atoi(colon + 1));
    if (inet_pton(AF_INET, from, &src.sin_addr) != 1 || inet_pton(AF_INET, host, &dst.sin_addr) != 1)
        return fprintf(stderr, "bw-workload hold: %s or %s is not an IPv4 address\n", from, host), 2;
    int *fds = calloc((size_t)n, sizeof(int));
    if (!fds) abort();
    static const char half[] = "POST /v1/batches HTTP/1.1\r\nHost: bulkwrite\r\n"; /* never finished */
    long connected = 0;
    for (long i = 0; i < n; i++) {
        fds[i] = socket(AF_INET, SOCK_STREAM, 0);
        if (fds[i] < 0 || bind(fds[i], (struct sockaddr *)&src, sizeof(src)) ||
            connect(fds[i], (struct sockaddr *)&dst, sizeof(dst)) ||
            send(fds[i], half, sizeof(half) - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof(half) - 1)) {
            fprintf(stderr, "bw-workload hold: connection %ld: %s\n", i, strerror(errno));
            if (fds[i] >= 0) close(fds[i]);
            fds[i] = -1;
            continue;
        }
        connected++;
    }
    sleep((unsigned)secs);
    long open = 0;
    for (long i = 0; i < n; i++) {
        if (fds[i] < 0) continue;
        char c;
        ssize_t r = recv(fds[i], &c, 1, MSG_DONTWAIT | MSG_PEEK);
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) open++; /* 0 or an error: closed */
        close(fds[i]);
    }
    free(fds);
    printf("hold: %ld connections from %s, %ld connected, %ld still open after %ld s\n", n, from, connected, open,
           secs);
    return 0;
}

static int usage(FILE *out, int code) {
    fprintf(out, "usage: bw-workload [-c CONFIG] submit --url URL [--per-request N] [--protobuf]\n"
          "                          [--request-id PREFIX] [--retry-for SECONDS] [--token-file FILE] [--lane LANE]\n"
          "                          [--cacert FILE] [--cert FILE --key FILE] [--start-at EPOCH_MS]\n"
          "                          [--not-before FROM_MS:WINDOW_MS] [--part K/M] [--jobs-out FILE] JOB...\n"
          "       bw-workload [-c CONFIG] verify [--wait SECONDS] JOB...\n"
          "       bw-workload [-c CONFIG] lateness [--wait SECONDS] FILE...\n"
          "       bw-workload [-c CONFIG] jsonl JOB...   (the ops as JSON lines, for bwctl submit)\n"
          "       bw-workload [-c CONFIG] audit --brokers LIST\n"
          "       bw-workload [-c CONFIG] dead-letters --brokers LIST\n"
          "       bw-workload [-c CONFIG] offsets --brokers LIST SHARD\n"
          "       bw-workload [-c CONFIG] delete-records --brokers LIST SHARD OFFSET|end\n"
          "       bw-workload [-c CONFIG] flood --brokers LIST SHARD BYTES\n"
          "       bw-workload [-c CONFIG] flood-topic --brokers LIST TOPIC BYTES [KEYS]\n"
          "       bw-workload [-c CONFIG] hold FROM_ADDR HOST:PORT N SECONDS\n"
          "JOB: feed:N:SHARD | spread:N | cleanup:N:SHARD | like:N:SHARD | image:N:SHARD | counter:N:SHARD | bump:N\n"
          "submit: request ids are PREFIX/J:JOB/FIRST-OP (default PREFIX bw-workload-PID-EPOCHMS);\n"
          "  no answer or a 5xx is resent for up to --retry-for seconds (default 0), a 429 (a\n"
          "  shard's backlog is full) after Retry-After until it is taken; the proxy's bearer token\n"
          "  is read from --token-file FILE, else from the environment's BW_TOKEN; over https://,\n"
          "  --cacert FILE trusts the proxy's CA, --cert FILE --key FILE present a client certificate;\n"
          "  --start-at EPOCH_MS encodes every request first and sends them from that moment on\n"
          "  (benchmarks: clients that start together, their encoding untimed); it prints\n"
          "  \"submit: sent from START to END (epoch ms)\", START the agreed moment, or without\n"
          "  --start-at when it began the first request (after its own start)\n"
          "  --not-before FROM_MS:WINDOW_MS schedules a job's request r of R at FROM + r * WINDOW / R\n"
          "  (protobuf only; spread:N bump:N pair each create with its bump at one time);\n"
          "  --part K/M sends only a job's requests r with r %% M == K (M clients share a job);\n"
          "  --jobs-out FILE writes \"JOB_ID NOT_BEFORE_MS\" per request accepted\n"
          "lateness: the jobs of the FILEs against the shards' ledgers (bw_job_parts): fails when\n"
          "  one is missing after --wait, applied before its not_before, or applied twice; prints\n"
          "  the p50, p99 and max of applied_at - not_before, and when the first and last were applied\n"
          "flood: at least BYTES of pin creates with 60 KB images (local ids from 2,000,000,000)\n"
          "  produced straight to SHARD's partition, past the proxy's backlog bound; prints the\n"
          "  first and last offsets written\n"
          "flood-topic: at least BYTES of 1 KiB records into each partition of TOPIC (a compacted\n"
          "  one), under random keys, or KEYS keys written again in turn, as other jobs and\n"
          "  processes would write them\n"
          "Options stand anywhere; -c CONFIG defaults to $" BW_CONF_ENV ", else %s.\n"
          "--version prints the version and the commit built.\n",
          bw_cli_default_config());
    return code;
}

/* Each command: whether it reads Kafka (--brokers), and its operands. */
typedef struct {
    const char *name;
    int needs_brokers, min_args, max_args;
    const char *operands; /* for the error naming them */
} command_t;
static const command_t commands[] = {
    {"submit", 0, 1, INT_MAX, "JOB..."},          {"verify", 0, 1, INT_MAX, "JOB..."},
    {"jsonl", 0, 1, INT_MAX, "JOB..."},           {"lateness", 0, 1, INT_MAX, "FILE..."},
    {"audit", 1, 0, 0, "no operands"},            {"dead-letters", 1, 0, 0, "no operands"},
    {"offsets", 1, 1, 1, "SHARD"},                {"delete-records", 1, 2, 2, "SHARD OFFSET|end"},
    {"flood", 1, 2, 2, "SHARD BYTES"},            {"flood-topic", 1, 2, 3, "TOPIC BYTES [KEYS]"},
    {"hold", 0, 4, 4, "FROM_ADDR HOST:PORT N SECONDS"},
};
static const command_t *find_command(const char *name) {
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (strcmp(commands[i].name, name) == 0) return &commands[i];
    return NULL;
}

int main(int argc, char **argv) {
    const char *config_path = NULL, *url = NULL, *brokers = NULL; /* -c; NULL: bw_cli_config_path's */
    long per_request = 5000;
    int protobuf = 0, wait_s = 0, retry_for = 0;
    int64_t start_at_ms = 0, nb_from = 0, nb_window = 0;
    int part_k = 0, part_m = 0;
    const char *request_id = NULL, *token_file = NULL, *lane = NULL, *jobs_out = NULL;
    static const struct option opts[] = {{"config", required_argument, 0, 'c'},
                                         {"token-file", required_argument, 0, 'T'},
                                         {"url", required_argument, 0, 'u'},
                                         {"per-request", required_argument, 0, 'n'},
                                         {"protobuf", no_argument, 0, 'P'},
                                         {"wait", required_argument, 0, 'w'},
                                         {"brokers", required_argument, 0, 'b'},
                                         {"request-id", required_argument, 0, 'r'},
                                         {"retry-for", required_argument, 0, 'R'},
                                         {"lane", required_argument, 0, 'L'},
                                         {"cacert", required_argument, 0, 'C'},
                                         {"cert", required_argument, 0, 'E'},
                                         {"key", required_argument, 0, 'K'},
                                         {"start-at", required_argument, 0, 'S'},
                                         {"not-before", required_argument, 0, 'N'},
                                         {"part", required_argument, 0, 'p'},
                                         {"jobs-out", required_argument, 0, 'o'},
                                         {"help", no_argument, 0, 'h'},
                                         {"version", no_argument, 0, 'V'},
                                         {0, 0, 0, 0}};
    argv[0] = "bw-workload"; /* getopt's messages begin with it, not with the path */
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
        case 'L': lane = optarg; break;
        case 'T': token_file = optarg; break;
        case 'C': tls_cacert = optarg; break;
        case 'E': tls_cert = optarg; break;
        case 'K': tls_key = optarg; break;
        case 'S': {
            char *end;
            start_at_ms = strtoll(optarg, &end, 10);
            if (*end || start_at_ms <= 0) return bw_cli_usage_error(argv[0], "--start-at wants epoch ms, not \"%s\"", optarg);
            break;
        }
        case 'N':
            if (sscanf(optarg, "%" SCNd64 ":%" SCNd64, &nb_from, &nb_window) != 2 || nb_from <= 0 || nb_window < 0)
                return bw_cli_usage_error(argv[0], "--not-before wants FROM_MS:WINDOW_MS, not \"%s\"", optarg);
            break;
        case 'p':
            if (sscanf(optarg, "%d/%d", &part_k, &part_m) != 2 || part_m < 1 || part_k < 0 || part_k >= part_m)
                return bw_cli_usage_error(argv[0], "--part wants K/M with 0 <= K < M, not \"%s\"", optarg);
            break;
        case 'o': jobs_out = optarg; break;
        case 'h': return usage(stdout, 0);
        case 'V': return bw_cli_print_version(argv[0]), 0;
        default: return bw_cli_usage_error(argv[0], NULL); /* getopt named it */
        }
    }
    if (nb_from && !protobuf) return bw_cli_usage_error(argv[0], "--not-before needs --protobuf");
    if (per_request < 1) return bw_cli_usage_error(argv[0], "--per-request: at least 1 op");
    if (optind >= argc) return usage(stderr, 2);
    const char *cmd = argv[optind++];
    int args = argc - optind, ret;
    const command_t *c = find_command(cmd);
    if (!c) return bw_cli_usage_error(argv[0], "unknown command \"%s\"", cmd);
    if (c->needs_brokers && !brokers) return bw_cli_usage_error(argv[0], "%s: --brokers is required", cmd);
    if (!strcmp(cmd, "submit") && !url) return bw_cli_usage_error(argv[0], "submit: --url is required");
    if (args < c->min_args || args > c->max_args)
        return bw_cli_usage_error(argv[0], "%s takes %s", cmd, c->operands);
    char err[512];
    conf = bw_config_load(bw_cli_config_path(config_path), err, sizeof(err));
    if (!conf) return fprintf(stderr, "bw-workload: %s%s\n", err, bw_cli_config_hint(config_path)), 1;
    job_t *jobs = NULL;
    if (strcmp(cmd, "audit") == 0) ret = audit(brokers);
    else if (strcmp(cmd, "dead-letters") == 0) ret = dead_letters(brokers);
    else if (strcmp(cmd, "offsets") == 0) ret = offsets(brokers, argv[optind]);
    else if (strcmp(cmd, "delete-records") == 0) ret = delete_records(brokers, argv[optind], argv[optind + 1]);
    else if (strcmp(cmd, "hold") == 0) ret = hold(argv[optind], argv[optind + 1], argv[optind + 2], argv[optind + 3]);
    else if (strcmp(cmd, "lateness") == 0) ret = lateness(argv + optind, args, wait_s);
    else if (strcmp(cmd, "flood") == 0) ret = flood(brokers, argv[optind], argv[optind + 1]);
    else if (strcmp(cmd, "flood-topic") == 0)
        ret = flood_topic(brokers, argv[optind], argv[optind + 1], args == 3 ? argv[optind + 2] : NULL);
    else if (!(jobs = parse_jobs(args, argv + optind))) ret = bw_cli_usage_error(argv[0], NULL); /* parse_jobs named it */
    else if (strcmp(cmd, "verify") == 0) ret = verify(jobs, args, wait_s);
    else if (strcmp(cmd, "jsonl") == 0) ret = print_jsonl(jobs, args);
    else {
        /* always a request id: a resend (after a 429 or an outage) must apply once */
        char prefix[64];
        snprintf(prefix, sizeof(prefix), "bw-workload-%d-%" PRId64, (int)getpid(), bw_wall_ms());
        char *auth_header;
        if (bw_token_header(token_file, &auth_header, err, sizeof(err))) {
            fprintf(stderr, "bw-workload: %s\n", err);
            ret = 1;
        } else {
            sender_t s = {.url = url, .protobuf = protobuf, .per_request = per_request,
                          .request_id_prefix = request_id ? request_id : prefix, .lane = lane, .retry_for_s = retry_for,
                          .auth_header = auth_header, .start_at_ms = start_at_ms,
                          .not_before_from_ms = nb_from, .not_before_window_ms = nb_window,
                          .part_k = part_k, .part_m = part_m};
            if (jobs_out && !(s.jobs_out = fopen(jobs_out, "w"))) {
                fprintf(stderr, "bw-workload: %s: %s\n", jobs_out, strerror(errno));
                ret = 1;
            } else {
                ret = submit(&s, jobs, args);
            }
            if (s.jobs_out && fclose(s.jobs_out)) ret = 1;
            free(auth_header);
        }
    }
    free(jobs);
    bw_config_destroy(conf);
    return ret;
}
