/* test_batcher.c — shard batching and operation batching: every valid op exactly once,
 * partition = shard, one (type, op) per message, batch and byte limits, per-object
 * order across messages, and column maps that decode back to the values sent. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batcher.h"
#include "helpers.h"
#include "request.h"
#include "shard.h"

static bw_arena_t A;
static void setup(void) { bw_arena_init(&A, 1 << 20); }
static void teardown(void) { bw_arena_destroy(&A); }

#define PIN 1
#define BOARD 2

/* Where each op landed. */
typedef struct {
    long msg; /* -1 = in no message */
    long row;
} pos_t;

typedef struct {
    bw_op_route_t *routes;
    bw_rejection_t *rej;
    size_t rej_cnt;
    bw_batch_set_t set;
    uint32_t *too_large;
    size_t too_large_cnt;
    pos_t *pos;
    Bulkwrite__Internal__V1__ShardBatch **batches; /* unpacked, one per message */
} split_t;

static void split_free(split_t *s) {
    for (size_t m = 0; m < s->set.msg_cnt; m++)
        if (s->batches[m]) bulkwrite__internal__v1__shard_batch__free_unpacked(s->batches[m], NULL);
    free(s->batches);
    free(s->pos);
    bw_batcher_free_payloads(&s->set);
}

/* Validates and splits `req`, then checks every invariant that holds for any request. */
static void split_and_check(const bw_config_t *conf, const Bulkwrite__V1__BatchWriteRequest *req, split_t *s) {
    memset(s, 0, sizeof(*s));
    size_t n = req->n_ops;
    s->routes = bw_arena_alloc(&A, (n + 1) * sizeof(*s->routes));
    s->rej_cnt = bw_request_validate(conf, req, BW_FMT_PROTOBUF, &A, s->routes, &s->rej);
    int *valid = calloc(n + 1, sizeof(int));
    for (size_t i = 0; i < n; i++) valid[i] = s->routes[i].shard >= 0;
    const char *job = "job-0123456789abcdef";
    bw_batcher_split(conf, req, s->routes, job, NULL, 1234567890123LL, &A, &s->set, &s->too_large, &s->too_large_cnt);

    s->pos = malloc((n + 1) * sizeof(*s->pos));
    for (size_t i = 0; i < n; i++) s->pos[i] = (pos_t){-1, -1};
    s->batches = calloc(s->set.msg_cnt + 1, sizeof(*s->batches));

    for (size_t t = 0; t < s->too_large_cnt; t++) {
        uint32_t i = s->too_large[t];
        ck_assert_uint_lt(i, n);
        ck_assert_msg(valid[i], "op %u reported too large but was invalid", i);
        ck_assert_int_eq(s->routes[i].shard, -1);
    }
    int last_shard = -1;
    for (size_t m = 0; m < s->set.msg_cnt; m++) {
        const bw_batch_msg_t *msg = &s->set.msgs[m];
        ck_assert_ptr_nonnull(msg->payload);
        ck_assert_msg(msg->len <= (size_t)conf->message_max_bytes, "message %zu: %zu bytes > %d", m, msg->len,
                      conf->message_max_bytes);
        Bulkwrite__Internal__V1__ShardBatch *sb = bulkwrite__internal__v1__shard_batch__unpack(NULL, msg->len, msg->payload);
        ck_assert_msg(sb != NULL, "message %zu does not unpack as a ShardBatch", m);
        s->batches[m] = sb;
        ck_assert_int_eq((int)sb->shard, msg->shard); /* payload shard = partition */
        ck_assert_int_ge(msg->shard, 0);
        ck_assert_int_lt(msg->shard, conf->shard_count);
        ck_assert_int_ge(msg->shard, last_shard); /* shards come out in order */
        last_shard = msg->shard;
        ck_assert_str_eq(sb->job_id, job);
        /* the Kafka headers agree with the payload */
        ck_assert_str_eq(msg->type_name, sb->object_type);
        char hdr[32];
        snprintf(hdr, sizeof(hdr), "%d", (int)sb->op);
        ck_assert_str_eq(msg->op_header, hdr);
        snprintf(hdr, sizeof(hdr), "%zu", sb->n_rows);
        ck_assert_str_eq(msg->rows_header, hdr);
        ck_assert_int_eq(sb->enqueued_at_ms, 1234567890123LL);
        ck_assert_uint_eq(sb->n_rows, msg->op_cnt);
        ck_assert_uint_ge(sb->n_rows, 1);
        const bw_object_type_t *ot = bw_config_object_type(conf, sb->object_type);
        ck_assert_ptr_nonnull(ot);
        ck_assert_int_ge(sb->op, BW_OP_CREATE);
        ck_assert_int_le(sb->op, BW_OP_DELETE);
        ck_assert_uint_le(sb->n_rows, (size_t)ot->batch_size[sb->op]);
        /* columns: each a column of the type, each once, each used */
        int *used = calloc(sb->n_columns + 1, sizeof(int));
        for (size_t c = 0; c < sb->n_columns; c++) {
            ck_assert_int_ge(bw_config_column(ot, sb->columns[c]), 0);
            for (size_t d = 0; d < c; d++) ck_assert_str_ne(sb->columns[c], sb->columns[d]);
        }
        for (size_t r = 0; r < sb->n_rows; r++) {
            const Bulkwrite__Internal__V1__Row *row = sb->rows[r];
            uint32_t i = row->op_index;
            ck_assert_uint_eq(i, msg->ops[r]);
            ck_assert_uint_lt(i, n);
            ck_assert_msg(valid[i], "op %u was rejected yet batched", i);
            ck_assert_msg(s->routes[i].shard == msg->shard, "op %u routed to %d, in a message for %d", i,
                          s->routes[i].shard, msg->shard);
            ck_assert_msg(s->pos[i].msg < 0, "op %u is in messages %ld and %zu", i, s->pos[i].msg, m);
            s->pos[i] = (pos_t){(long)m, (long)r};
            const Bulkwrite__V1__Op *op = req->ops[i];
            ck_assert_int_eq((int)op->op, (int)sb->op);
            ck_assert_str_eq(op->object_type, sb->object_type);
            ck_assert_uint_eq(row->id, op->id);
            ck_assert_uint_eq(row->n_fields, op->n_fields);
            for (size_t f = 0; f < row->n_fields; f++) {
                const Bulkwrite__Internal__V1__RowField *rf = row->fields[f];
                ck_assert_uint_lt(rf->column, sb->n_columns);
                used[rf->column] = 1;
                ck_assert_str_eq(sb->columns[rf->column], op->fields[f]->name);
                ck_assert_msg(t_value_eq(rf->value, op->fields[f]->value), "op %u field %zu: value differs", i, f);
                ck_assert_int_eq(!rf->increment, !op->fields[f]->increment);
            }
        }
        for (size_t c = 0; c < sb->n_columns; c++) ck_assert_msg(used[c], "column %s listed, unused", sb->columns[c]);
        free(used);
    }
    /* every valid op exactly once, or reported too large */
    for (size_t i = 0; i < n; i++) {
        if (!valid[i]) continue;
        int big = 0;
        for (size_t t = 0; t < s->too_large_cnt; t++) big |= s->too_large[t] == i;
        ck_assert_msg(big || s->pos[i].msg >= 0, "valid op %zu is in no message", i);
        ck_assert_msg(!(big && s->pos[i].msg >= 0), "op %zu both too large and batched", i);
    }
    /* ops on one object keep request order */
    for (size_t i = 0; i < n; i++) {
        if (s->pos[i].msg < 0 || !req->ops[i]->id) continue;
        for (size_t j = i + 1; j < n; j++) {
            if (s->pos[j].msg < 0 || req->ops[j]->id != req->ops[i]->id) continue;
            ck_assert_msg(s->pos[i].msg < s->pos[j].msg || (s->pos[i].msg == s->pos[j].msg && s->pos[i].row < s->pos[j].row),
                          "ops %zu and %zu on id %" PRIu64 " out of order: (%ld,%ld) vs (%ld,%ld)", i, j,
                          req->ops[i]->id, s->pos[i].msg, s->pos[i].row, s->pos[j].msg, s->pos[j].row);
        }
    }
    free(valid);
}

/* ---- request building shortcuts ------------------------------------------------------ */

static uint64_t owner_on(unsigned shard) { return bw_id_make(shard, 7, 4242); }

static Bulkwrite__V1__Op *pin_create(t_req_t *r, unsigned shard, uint64_t local) {
    Bulkwrite__V1__Op *o = t_op(r, BW_OP_CREATE, "pin", local ? bw_id_make(shard, PIN, local) : 0,
                                t_idstr(r, owner_on(shard)));
    t_f_int(r, o, "owner_id", (int64_t)owner_on(shard));
    return o;
}
static Bulkwrite__V1__Op *pin_update(t_req_t *r, unsigned shard, uint64_t local) {
    Bulkwrite__V1__Op *o = t_op(r, BW_OP_UPDATE, "pin", bw_id_make(shard, PIN, local), NULL);
    t_f_inc(r, o, "like_count", 1);
    return o;
}
static Bulkwrite__V1__Op *pin_upsert(t_req_t *r, unsigned shard, uint64_t local) {
    Bulkwrite__V1__Op *o = t_op(r, BW_OP_UPSERT, "pin", bw_id_make(shard, PIN, local), NULL);
    t_f_int(r, o, "owner_id", (int64_t)owner_on(shard));
    return o;
}
static Bulkwrite__V1__Op *pin_delete(t_req_t *r, unsigned shard, uint64_t local) {
    return t_op(r, BW_OP_DELETE, "pin", bw_id_make(shard, PIN, local), NULL);
}

/* ---- tests ----------------------------------------------------------------------- */

START_TEST(groups_by_type_and_op) {
    bw_config_t *c = t_ref_config();
    t_req_t r;
    t_req_init(&r, &A, 32);
    pin_create(&r, 0, 1);  /* 0 */
    pin_create(&r, 0, 2);  /* 1 */
    pin_update(&r, 0, 3);  /* 2 */
    pin_delete(&r, 0, 4);  /* 3 */
    pin_create(&r, 0, 5);  /* 4 */
    pin_update(&r, 0, 6);  /* 5 */
    pin_create(&r, 0, 0);  /* 6: no id */
    pin_delete(&r, 0, 7);  /* 7 */
    split_t s;
    split_and_check(c, r.req, &s);
    ck_assert_uint_eq(s.rej_cnt, 0);
    /* one epoch: one message per (type, op), request order inside */
    ck_assert_uint_eq(s.set.msg_cnt, 3);
    static const uint32_t want[3][4] = {{0, 1, 4, 6}, {2, 5}, {3, 7}};
    static const size_t want_n[3] = {4, 2, 2};
    static const int want_op[3] = {BW_OP_CREATE, BW_OP_UPDATE, BW_OP_DELETE};
    for (int m = 0; m < 3; m++) {
        ck_assert_uint_eq(s.set.msgs[m].op_cnt, want_n[m]);
        ck_assert_int_eq(s.batches[m]->op, want_op[m]);
        for (size_t k = 0; k < want_n[m]; k++) ck_assert_uint_eq(s.set.msgs[m].ops[k], want[m][k]);
    }
    /* the create message lists only owner_id; the delete message no columns */
    ck_assert_uint_eq(s.batches[0]->n_columns, 1);
    ck_assert_str_eq(s.batches[0]->columns[0], "owner_id");
    ck_assert_uint_eq(s.batches[2]->n_columns, 0);
    ck_assert_uint_eq(s.batches[0]->rows[3]->id, 0);
    split_free(&s);
    bw_config_destroy(c);
}
END_TEST

START_TEST(partition_is_shard) {
    bw_config_t *c = t_ref_config();
    t_req_t r;
    t_req_init(&r, &A, 64);
    for (unsigned i = 0; i < 32; i++) pin_create(&r, (i * 5) % 8, i + 1);
    /* boards route by md5 of the partner name */
    char key[32];
    for (int i = 0; i < 16; i++) {
        snprintf(key, sizeof(key), "partner-%d", i);
        Bulkwrite__V1__Op *o = t_op(&r, BW_OP_CREATE, "board", 0, key);
        t_f_str(&r, o, "partner", key, strlen(key));
        t_f_str(&r, o, "name", "n", 1);
    }
    split_t s;
    split_and_check(c, r.req, &s);
    ck_assert_uint_eq(s.rej_cnt, 0);
    for (unsigned i = 0; i < 32; i++) ck_assert_int_eq(s.routes[i].shard, (int)((i * 5) % 8));
    for (int i = 0; i < 16; i++) {
        snprintf(key, sizeof(key), "partner-%d", i);
        ck_assert_int_eq(s.routes[32 + i].shard, (int)bw_shard_of_key(key, strlen(key), 8));
    }
    /* per shard: one pin-create message and at most one board-create message */
    int pins[8] = {0}, boards[8] = {0};
    for (size_t m = 0; m < s.set.msg_cnt; m++) {
        if (strcmp(s.batches[m]->object_type, "pin") == 0) pins[s.set.msgs[m].shard]++;
        else boards[s.set.msgs[m].shard]++;
    }
    for (int sh = 0; sh < 8; sh++) {
        ck_assert_int_eq(pins[sh], 1);
        ck_assert_int_le(boards[sh], 1);
    }
    split_free(&s);
    bw_config_destroy(c);
}
END_TEST

START_TEST(batch_size_limits) {
    bw_config_t *c = t_ref_config();
    t_req_t r;
    t_req_init(&r, &A, 5000);
    for (unsigned i = 0; i < 1200; i++) pin_create(&r, 2, i + 1);
    for (unsigned i = 0; i < 450; i++) pin_update(&r, 3, i + 1);
    for (unsigned i = 0; i < 2500; i++) pin_delete(&r, 4, i + 1);
    for (unsigned i = 0; i < 201; i++) pin_upsert(&r, 5, i + 1);
    split_t s;
    split_and_check(c, r.req, &s);
    size_t want[] = {500, 500, 200, 200, 200, 50, 1000, 1000, 500, 200, 1};
    ck_assert_uint_eq(s.set.msg_cnt, BW_ARRAY_LEN(want));
    for (size_t m = 0; m < BW_ARRAY_LEN(want); m++) ck_assert_uint_eq(s.set.msgs[m].op_cnt, want[m]);
    split_free(&s);
    bw_config_destroy(c);
}
END_TEST

START_TEST(message_byte_limit) {
    bw_config_t *c = t_conf_variant_load("message_max_bytes = 1000000;", "message_max_bytes = 4096;");
    t_req_t r;
    t_req_init(&r, &A, 64);
    char big[2001];
    memset(big, 'x', sizeof(big));
    for (unsigned i = 0; i < 20; i++) {
        Bulkwrite__V1__Op *o = pin_create(&r, 1, i + 1);
        t_f_str(&r, o, "description", big, 1000 + i); /* ~1 kB rows: 3 fit in 3.5 kB */
    }
    /* an op too large alone: a 5,000-byte image (allowed by max_length 65535) */
    Bulkwrite__V1__Op *o = pin_create(&r, 1, 100); /* index 20 */
    unsigned char img[5000];
    memset(img, 0xAB, sizeof(img));
    t_f_bytes(&r, o, "image", img, sizeof(img));
    pin_create(&r, 1, 101); /* 21: small, after the big one */
    o = pin_update(&r, 1, 5); /* 22: an update of an object created above */
    t_f_str(&r, o, "description", big, 2000);
    split_t s;
    split_and_check(c, r.req, &s);
    ck_assert_uint_eq(s.too_large_cnt, 1);
    ck_assert_uint_eq(s.too_large[0], 20);
    ck_assert_int_eq(s.routes[20].shard, -1);
    ck_assert_int_eq(s.pos[20].msg, -1);
    ck_assert_int_ge(s.pos[21].msg, 0);
    ck_assert_int_ge(s.pos[22].msg, 0);
    /* splitting by bytes happened: 21 creates in at least 7 messages, each well filled */
    size_t create_msgs = 0, rows = 0;
    for (size_t m = 0; m < s.set.msg_cnt; m++)
        if ((int)s.batches[m]->op == BW_OP_CREATE) {
            create_msgs++;
            rows += s.batches[m]->n_rows;
            ck_assert_uint_le(s.batches[m]->n_rows, 3);
        }
    ck_assert_uint_eq(rows, 21);
    ck_assert_uint_ge(create_msgs, 7);
    ck_assert_uint_le(create_msgs, 8);
    split_free(&s);
    bw_config_destroy(c);
}
END_TEST

START_TEST(message_byte_limit_many_small_rows) {
    /* thousands of small rows: messages are cut by bytes, filled close to the limit,
     * and never above it once the header (job id, type, op, columns) is added */
    static const int limits[] = {1024, 4096, 65536};
    for (size_t l = 0; l < BW_ARRAY_LEN(limits); l++) {
        char repl[64];
        snprintf(repl, sizeof(repl), "message_max_bytes = %d;", limits[l]);
        bw_config_t *c = t_conf_variant_load("message_max_bytes = 1000000;", repl);
        t_req_t r;
        t_req_init(&r, &A, 5000);
        for (unsigned i = 0; i < 5000; i++) {
            Bulkwrite__V1__Op *o = pin_create(&r, 4, i + 1);
            t_f_str(&r, o, "title", "some title text", 5 + i % 11);
            if (i % 3 == 0) t_f_int(&r, o, "board_id", (int64_t)i * 1000003);
        }
        split_t s;
        split_and_check(c, r.req, &s); /* asserts len <= message_max_bytes for each */
        ck_assert_uint_eq(s.too_large_cnt, 0);
        ck_assert_uint_gt(s.set.msg_cnt, 1);
        for (size_t m = 0; m + 1 < s.set.msg_cnt; m++) {
            if (s.set.msgs[m].op_cnt == 500) continue; /* cut by the batch size */
            /* the batcher keeps 512 bytes for the header (half the limit below 1 KiB) */
            size_t floor = limits[l] > 1024 ? (size_t)limits[l] - 600 : (size_t)limits[l] * 2 / 5;
            ck_assert_msg(s.set.msgs[m].len >= floor,
                          "limit %d: message %zu only %zu bytes", limits[l], m, s.set.msgs[m].len);
        }
        split_free(&s);
        bw_config_destroy(c);
        bw_arena_reset(&A);
    }
}
END_TEST

START_TEST(message_byte_limit_smallest) {
    /* the smallest limit the config admits, with rows that barely fit or not */
    bw_config_t *c = t_conf_variant_load("message_max_bytes = 1000000;", "message_max_bytes = 1024;");
    t_req_t r;
    t_req_init(&r, &A, 300);
    char big[2000];
    memset(big, 'y', sizeof(big));
    for (unsigned i = 0; i < 200; i++) {
        Bulkwrite__V1__Op *o = pin_create(&r, i % 3, i + 1);
        t_f_str(&r, o, "description", big, (i * 37) % 600);
    }
    split_t s;
    split_and_check(c, r.req, &s);
    /* every row that is reported too large really is big */
    for (size_t t = 0; t < s.too_large_cnt; t++)
        ck_assert_uint_gt(r.req->ops[s.too_large[t]]->fields[1]->value->string_value.len, 400);
    split_free(&s);
    bw_config_destroy(c);
}
END_TEST

START_TEST(same_object_keeps_order) {
    bw_config_t *c = t_ref_config();
    t_req_t r;
    t_req_init(&r, &A, 32);
    pin_create(&r, 6, 1);  /* 0: create X */
    pin_create(&r, 6, 2);  /* 1: create Y */
    pin_update(&r, 6, 1);  /* 2: update X */
    pin_update(&r, 6, 3);  /* 3: update Z */
    pin_delete(&r, 6, 1);  /* 4: delete X */
    pin_create(&r, 6, 1);  /* 5: create X again */
    pin_delete(&r, 6, 9);  /* 6: delete W */
    split_t s;
    split_and_check(c, r.req, &s);
    ck_assert_int_lt(s.pos[0].msg, s.pos[2].msg);
    ck_assert_int_lt(s.pos[2].msg, s.pos[4].msg);
    ck_assert_int_lt(s.pos[4].msg, s.pos[5].msg);
    /* epochs: [create X, create Y] [update X, update Z] [delete X] [create X, delete W] */
    ck_assert_int_eq(s.pos[0].msg, s.pos[1].msg);
    ck_assert_int_eq(s.pos[2].msg, s.pos[3].msg);
    ck_assert_uint_eq(s.set.msg_cnt, 5);
    ck_assert_int_eq(s.batches[4]->op, BW_OP_DELETE);
    ck_assert_uint_eq(s.batches[4]->rows[0]->op_index, 6);
    /* the same op twice on one object stays in one message, in order */
    t_req_init(&r, &A, 8);
    pin_update(&r, 6, 1);
    pin_update(&r, 6, 2);
    pin_update(&r, 6, 1);
    split_t s2;
    split_and_check(c, r.req, &s2);
    ck_assert_uint_eq(s2.set.msg_cnt, 1);
    ck_assert_uint_eq(s2.set.msgs[0].ops[0], 0);
    ck_assert_uint_eq(s2.set.msgs[0].ops[2], 2);
    split_free(&s2);
    split_free(&s);
    bw_config_destroy(c);
}
END_TEST

START_TEST(rejected_ops_not_batched) {
    bw_config_t *c = t_ref_config();
    t_req_t r;
    t_req_init(&r, &A, 8);
    pin_create(&r, 0, 1);
    t_op(&r, BW_OP_UPDATE, "pin", 0, NULL); /* no id: rejected */
    t_op(&r, BW_OP_DELETE, "nope", bw_id_make(0, 1, 1), NULL);
    split_t s;
    split_and_check(c, r.req, &s);
    ck_assert_uint_eq(s.rej_cnt, 2);
    ck_assert_uint_eq(s.set.msg_cnt, 1);
    ck_assert_uint_eq(s.set.msgs[0].op_cnt, 1);
    split_free(&s);
    /* nothing valid: nothing emitted */
    t_req_init(&r, &A, 2);
    t_op(&r, BW_OP_UPDATE, "pin", 0, NULL);
    split_and_check(c, r.req, &s);
    ck_assert_uint_eq(s.set.msg_cnt, 0);
    split_free(&s);
    t_req_init(&r, &A, 1);
    split_and_check(c, r.req, &s);
    ck_assert_uint_eq(s.set.msg_cnt, 0);
    split_free(&s);
    bw_config_destroy(c);
}
END_TEST

START_TEST(values_decode_back) {
    bw_config_t *c = t_ref_config();
    t_req_t r;
    t_req_init(&r, &A, 8);
    Bulkwrite__V1__Op *o = pin_create(&r, 3, 1);
    t_f_str(&r, o, "title", "a\0b", 3);
    t_f_null(&r, o, "board_id");
    t_f_bytes(&r, o, "image", "\0\1\2", 3);
    o = pin_create(&r, 3, 2); /* fields in another order, one shared column */
    t_f_str(&r, o, "description", "d", 1);
    t_f_int(&r, o, "like_count", INT64_MIN);
    o = t_op(&r, BW_OP_UPDATE, "pin", bw_id_make(3, PIN, 9), NULL);
    t_f_inc(&r, o, "like_count", -5);
    t_f_str(&r, o, "title", "\xf0\x9f\x98\x80", 4);
    split_t s;
    split_and_check(c, r.req, &s); /* compares every value through the column map */
    ck_assert_uint_eq(s.set.msg_cnt, 2);
    Bulkwrite__Internal__V1__ShardBatch *sb = s.batches[0];
    /* columns in first-use order: owner_id, title, board_id, image, description, like_count */
    ck_assert_uint_eq(sb->n_columns, 6);
    ck_assert_str_eq(sb->columns[0], "owner_id");
    ck_assert_str_eq(sb->columns[1], "title");
    ck_assert_str_eq(sb->columns[4], "description");
    ck_assert_uint_eq(sb->rows[1]->fields[0]->column, 0); /* owner_id shared */
    ck_assert_uint_eq(sb->rows[1]->fields[2]->column, 5);
    ck_assert_int_eq(sb->rows[1]->fields[2]->value->int_value, INT64_MIN);
    ck_assert_uint_eq(sb->rows[0]->fields[1]->value->string_value.len, 3);
    ck_assert_int_eq(sb->rows[0]->fields[2]->value->kind_case, BULKWRITE__V1__VALUE__KIND_NULL_VALUE);
    split_free(&s);
    bw_config_destroy(c);
}
END_TEST

/* xorshift: deterministic */
static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

START_TEST(random_requests_invariants) {
    /* small batch sizes and messages so that everything splits often */
    bw_config_t *c = t_conf_variant_load("batch_size = { create = 500; update = 200; upsert = 200; delete = 1000; };\n    columns = (\n      { name = \"owner_id\"",
                                         "batch_size = { create = 7; update = 5; upsert = 3; delete = 11; };\n    columns = (\n      { name = \"owner_id\"");
    bw_config_t *c2 = t_conf_variant_load("message_max_bytes = 1000000;", "message_max_bytes = 3000;");
    char text[400];
    memset(text, 'z', sizeof(text));
    for (int round = 0; round < 40; round++) {
        const bw_config_t *conf = round % 2 ? c2 : c;
        size_t n = 50 + rnd() % 1500;
        t_req_t r;
        t_req_init(&r, &A, n);
        for (size_t i = 0; i < n; i++) {
            unsigned shard = (unsigned)(rnd() % 8);
            uint64_t local = 1 + rnd() % 40; /* few objects: many ops per object */
            Bulkwrite__V1__Op *o;
            switch (rnd() % 6) {
            case 0: o = pin_create(&r, shard, rnd() % 5 ? local : 0); break;
            case 1: o = pin_update(&r, shard, local); break;
            case 2: o = pin_upsert(&r, shard, local); break;
            case 3: o = pin_delete(&r, shard, local); break;
            case 4: /* an invalid one now and then */
                o = t_op(&r, BW_OP_UPDATE, "pin", bw_id_make(shard, BOARD, local), NULL);
                t_f_int(&r, o, "owner_id", 1);
                break;
            default: {
                char key[24];
                snprintf(key, sizeof(key), "p%" PRIu64, local);
                o = t_op(&r, BW_OP_CREATE, "board", 0, key);
                t_f_str(&r, o, "partner", key, strlen(key));
                t_f_str(&r, o, "name", text, rnd() % 200);
                if (rnd() % 2) t_f_dbl(&r, o, "score", (double)(rnd() % 1000) / 7);
            }
            }
            if ((int)o->op == BW_OP_CREATE && !strcmp(o->object_type, "pin") && rnd() % 3 == 0)
                t_f_str(&r, o, "title", text, rnd() % 256);
            if ((int)o->op == BW_OP_UPDATE && !strcmp(o->object_type, "pin") && rnd() % 2)
                t_f_str(&r, o, "description", text, rnd() % 400);
        }
        split_t s;
        split_and_check(conf, r.req, &s);
        ck_assert_uint_eq(s.too_large_cnt, 0);
        split_free(&s);
        bw_arena_reset(&A);
    }
    bw_config_destroy(c);
    bw_config_destroy(c2);
}
END_TEST

Suite *batcher_suite(void) {
    Suite *s = suite_create("batcher");
    TCase *tc = tcase_create("split");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, groups_by_type_and_op);
    tcase_add_test(tc, partition_is_shard);
    tcase_add_test(tc, batch_size_limits);
    tcase_add_test(tc, message_byte_limit);
    tcase_add_test(tc, message_byte_limit_many_small_rows);
    tcase_add_test(tc, message_byte_limit_smallest);
    tcase_add_test(tc, same_object_keeps_order);
    tcase_add_test(tc, rejected_ops_not_batched);
    tcase_add_test(tc, values_decode_back);
    tcase_add_test(tc, random_requests_invariants);
    suite_add_tcase(s, tc);
    return s;
}
