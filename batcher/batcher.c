#include "batcher.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

/* Bytes a message may spend on rows: the limit less room for the header fields
 * (job id, shard, type, op, time) and the column list, which are counted separately. */
#define HEADER_RESERVE 512

typedef struct {
    const bw_config_t *conf;
    const Bulkwrite__V1__BatchWriteRequest *req;
    bw_op_route_t *routes;
    const char *job_id;
    const char *named_job; /* "" when none */
    int64_t now_ms;
    bw_arena_t *arena;
    /* output, grown by doubling in the arena */
    bw_batch_msg_t *msgs;
    size_t msg_cnt, msg_cap;
    uint32_t *too_large;
    size_t too_large_cnt, too_large_cap;
    /* per-batch column map: config column -> batch column + 1 (0 = absent) */
    int batch_col_of[1024];
} split_ctx_t;

static void *grow(bw_arena_t *a, void *old, size_t elem, size_t cnt, size_t *cap) {
    if (cnt < *cap) return old;
    size_t ncap = *cap ? *cap * 2 : 16;
    void *p = bw_arena_alloc(a, elem * ncap);
    if (old) memcpy(p, old, elem * cnt);
    *cap = ncap;
    return p;
}

static int key_cmp_ctx_less(const split_ctx_t *ctx, uint32_t a, uint32_t b) {
    const bw_op_route_t *ra = &ctx->routes[a], *rb = &ctx->routes[b];
    if (ra->type_index != rb->type_index) return ra->type_index < rb->type_index;
    int oa = ctx->req->ops[a]->op, ob = ctx->req->ops[b]->op;
    if (oa != ob) return oa < ob;
    return a < b; /* stable: request order within a (type, op) */
}

/* Sorts an epoch by (type, op, request index): a bottom-up merge sort with a scratch
 * array from the arena. */
static void sort_epoch(split_ctx_t *ctx, uint32_t *v, size_t n) {
    if (n < 2) return;
    uint32_t *tmp = bw_arena_alloc(ctx->arena, n * sizeof(*tmp));
    for (size_t width = 1; width < n; width *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * width) {
            size_t mid = lo + width < n ? lo + width : n;
            size_t hi = lo + 2 * width < n ? lo + 2 * width : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) tmp[k++] = key_cmp_ctx_less(ctx, v[j], v[i]) ? v[j++] : v[i++];
            while (i < mid) tmp[k++] = v[i++];
            while (j < hi) tmp[k++] = v[j++];
        }
        memcpy(v, tmp, n * sizeof(*v));
    }
}

/* ---- ShardBatch bytes, written directly ----------------------------------------------
 *
 * A row cannot be the op's bytes verbatim: a Field names its column, a RowField gives the
 * column's index in the batch's column list. So each row is written from the decoded op
 * (its text and bytes values still point into the request body) as protobuf-c would
 * pack the Row built from it: proto3 zero scalars omitted, a Value written as its one
 * set member. The consumer's protobuf-c unpack reads what it always read, and the sizes
 * that cut messages are the ones protobuf-c computed, so a request splits into the same
 * parts as before (a resent request must name its parts the same way). */

static size_t value_size(const Bulkwrite__V1__Value *v) {
    switch (v->kind_case) {
    case BULKWRITE__V1__VALUE__KIND_NULL_VALUE:
    case BULKWRITE__V1__VALUE__KIND_BOOL_VALUE: return 2;
    case BULKWRITE__V1__VALUE__KIND_INT_VALUE: return 1 + bw_wire_varint_size(bw_wire_zigzag64(v->int_value));
    case BULKWRITE__V1__VALUE__KIND_DOUBLE_VALUE: return 9;
    case BULKWRITE__V1__VALUE__KIND_STRING_VALUE:
    case BULKWRITE__V1__VALUE__KIND_BYTES_VALUE: return bw_wire_len_size(v->string_value.len);
    default: return 0; /* no member set: an empty Value */
    }
}

static uint8_t *put_value(uint8_t *p, const Bulkwrite__V1__Value *v) {
    switch (v->kind_case) {
    case BULKWRITE__V1__VALUE__KIND_NULL_VALUE:
        p = bw_wire_put_tag(p, 1, BW_WIRE_VARINT);
        *p++ = v->null_value ? 1 : 0;
        return p;
    case BULKWRITE__V1__VALUE__KIND_BOOL_VALUE:
        p = bw_wire_put_tag(p, 6, BW_WIRE_VARINT);
        *p++ = v->bool_value ? 1 : 0;
        return p;
    case BULKWRITE__V1__VALUE__KIND_INT_VALUE:
        return bw_wire_put_varint(bw_wire_put_tag(p, 2, BW_WIRE_VARINT), bw_wire_zigzag64(v->int_value));
    case BULKWRITE__V1__VALUE__KIND_DOUBLE_VALUE: {
        uint64_t bits;
        memcpy(&bits, &v->double_value, sizeof(bits));
        return bw_wire_put_fixed64(bw_wire_put_tag(p, 3, BW_WIRE_I64), bits);
    }
    case BULKWRITE__V1__VALUE__KIND_STRING_VALUE:
        return bw_wire_put_bytes(p, 4, v->string_value.data, v->string_value.len);
    case BULKWRITE__V1__VALUE__KIND_BYTES_VALUE:
        return bw_wire_put_bytes(p, 5, v->bytes_value.data, v->bytes_value.len);
    default: return p;
    }
}

/* A RowField's body: column (omitted when 0), value (when the op gave one), increment. */
static size_t row_field_size(uint32_t column, const Bulkwrite__V1__Field *f) {
    size_t n = column ? 1 + bw_wire_varint_size(column) : 0;
    if (f->value) n += bw_wire_len_size(value_size(f->value));
    return n + (f->increment ? 2 : 0);
}

/* Op i's Row body, with the batch's column map (config column -> batch column + 1). */
static size_t row_size(const split_ctx_t *ctx, uint32_t i) {
    const Bulkwrite__V1__Op *op = ctx->req->ops[i];
    const int *cols = ctx->routes[i].cols;
    size_t n = (i ? 1 + bw_wire_varint_size(i) : 0) + (op->id ? 9 : 0);
    for (size_t f = 0; f < op->n_fields; f++)
        n += bw_wire_len_size(row_field_size((uint32_t)(ctx->batch_col_of[cols[f]] - 1), op->fields[f]));
    return n;
}

static uint8_t *put_row(const split_ctx_t *ctx, uint8_t *p, uint32_t i, size_t body) {
    const Bulkwrite__V1__Op *op = ctx->req->ops[i];
    const int *cols = ctx->routes[i].cols;
    p = bw_wire_put_varint(bw_wire_put_tag(p, 6, BW_WIRE_LEN), body);
    if (i) p = bw_wire_put_varint(bw_wire_put_tag(p, 1, BW_WIRE_VARINT), i);
    if (op->id) p = bw_wire_put_fixed64(bw_wire_put_tag(p, 2, BW_WIRE_I64), op->id);
    for (size_t k = 0; k < op->n_fields; k++) {
        const Bulkwrite__V1__Field *f = op->fields[k];
        uint32_t column = (uint32_t)(ctx->batch_col_of[cols[k]] - 1);
        p = bw_wire_put_varint(bw_wire_put_tag(p, 3, BW_WIRE_LEN), row_field_size(column, f));
        if (column) p = bw_wire_put_varint(bw_wire_put_tag(p, 1, BW_WIRE_VARINT), column);
        if (f->value) p = put_value(bw_wire_put_varint(bw_wire_put_tag(p, 2, BW_WIRE_LEN), value_size(f->value)), f->value);
        if (f->increment) {
            p = bw_wire_put_tag(p, 3, BW_WIRE_VARINT);
            *p++ = 1;
        }
    }
    return p;
}

static size_t string_field_size(const char *s) {
    size_t n = strlen(s);
    return n ? bw_wire_len_size(n) : 0; /* proto3: an empty string is not written */
}

static uint8_t *put_string_field(uint8_t *p, unsigned field, const char *s) {
    size_t n = strlen(s);
    return n ? bw_wire_put_bytes(p, field, s, n) : p;
}

/* The ShardBatch of rows ops[0..row_cnt) (body sizes in sizes[]) into a malloc'd payload. */
static void *write_batch(const split_ctx_t *ctx, int shard, const bw_object_type_t *ot, int opk,
                         const char **col_names, size_t col_cnt, const uint32_t *ops, const size_t *sizes,
                         size_t row_cnt, uint32_t part, size_t *len_out) {
    size_t len = string_field_size(ctx->job_id) + (shard ? 1 + bw_wire_varint_size((uint32_t)shard) : 0) +
                 string_field_size(ot->name) + (opk ? 1 + bw_wire_varint_size((uint64_t)(int64_t)opk) : 0) +
                 (ctx->now_ms ? 1 + bw_wire_varint_size((uint64_t)ctx->now_ms) : 0) +
                 (part ? 1 + bw_wire_varint_size(part) : 0) + string_field_size(ctx->named_job);
    for (size_t c = 0; c < col_cnt; c++) len += bw_wire_len_size(strlen(col_names[c]));
    for (size_t r = 0; r < row_cnt; r++) len += bw_wire_len_size(sizes[r]);
    uint8_t *payload = malloc(len ? len : 1);
    if (!payload) abort();
    uint8_t *p = put_string_field(payload, 1, ctx->job_id);
    if (shard) p = bw_wire_put_varint(bw_wire_put_tag(p, 2, BW_WIRE_VARINT), (uint32_t)shard);
    p = put_string_field(p, 3, ot->name);
    if (opk) p = bw_wire_put_varint(bw_wire_put_tag(p, 4, BW_WIRE_VARINT), (uint64_t)(int64_t)opk);
    for (size_t c = 0; c < col_cnt; c++) p = bw_wire_put_bytes(p, 5, col_names[c], strlen(col_names[c]));
    for (size_t r = 0; r < row_cnt; r++) p = put_row(ctx, p, ops[r], sizes[r]);
    if (ctx->now_ms) p = bw_wire_put_varint(bw_wire_put_tag(p, 7, BW_WIRE_VARINT), (uint64_t)ctx->now_ms);
    if (part) p = bw_wire_put_varint(bw_wire_put_tag(p, 8, BW_WIRE_VARINT), part);
    p = put_string_field(p, 9, ctx->named_job);
    if ((size_t)(p - payload) != len) abort(); /* the sizes above and the bytes written disagree: a bug */
    *len_out = len;
    return payload;
}

/* Emits the ops v[0..n) — all of one (type, op) on one shard — as messages. */
static void emit_group(split_ctx_t *ctx, int shard, const uint32_t *v, size_t n) {
    const bw_op_route_t *rt0 = &ctx->routes[v[0]];
    const bw_object_type_t *ot = &ctx->conf->object_types[rt0->type_index];
    int opk = ctx->req->ops[v[0]]->op;
    size_t limit = (size_t)ot->batch_size[opk];
    size_t max_bytes = (size_t)ctx->conf->message_max_bytes;
    size_t budget = max_bytes > 2 * HEADER_RESERVE ? max_bytes - HEADER_RESERVE : max_bytes / 2;

    int *batch_cols = bw_arena_alloc(ctx->arena, sizeof(int) * (size_t)(ot->column_cnt + 1));
    const char **col_names = bw_arena_alloc(ctx->arena, sizeof(char *) * (size_t)(ot->column_cnt + 1));
    size_t *sizes = bw_arena_alloc(ctx->arena, sizeof(*sizes) * (n < limit ? n : limit));

    size_t i = 0;
    while (i < n) {
        size_t row_cnt = 0, bytes = 0, col_cnt = 0;
        size_t batch_cap = n - i < limit ? n - i : limit;
        uint32_t *ops = bw_arena_alloc(ctx->arena, sizeof(*ops) * batch_cap);
        while (i < n && row_cnt < limit) {
            size_t cols_before = col_cnt;
            const Bulkwrite__V1__Op *op = ctx->req->ops[v[i]];
            const bw_op_route_t *rt = &ctx->routes[v[i]];
            for (size_t f = 0; f < op->n_fields; f++) { /* columns in first-use order */
                int col = rt->cols[f];
                if (ctx->batch_col_of[col]) continue;
                batch_cols[col_cnt] = col;
                col_names[col_cnt] = ot->columns[col].name;
                ctx->batch_col_of[col] = (int)++col_cnt;
            }
            size_t body = row_size(ctx, v[i]);
            size_t rsize = 1 + bw_wire_varint_size(body) + body;
            for (size_t c = cols_before; c < col_cnt; c++) rsize += 2 + strlen(col_names[c]);
            if (bytes + rsize > budget) {
                /* undo the columns this row introduced */
                for (size_t c = cols_before; c < col_cnt; c++) ctx->batch_col_of[batch_cols[c]] = 0;
                col_cnt = cols_before;
                if (row_cnt > 0) break; /* the row starts the next message */
                ctx->routes[v[i]].shard = -1;
                ctx->too_large = grow(ctx->arena, ctx->too_large, sizeof(uint32_t),
                                      ctx->too_large_cnt, &ctx->too_large_cap);
                ctx->too_large[ctx->too_large_cnt++] = v[i];
                i++;
                continue;
            }
            bytes += rsize;
            sizes[row_cnt] = body;
            ops[row_cnt] = v[i];
            row_cnt++;
            i++;
        }
        if (row_cnt) {
            size_t len;
            /* part: deterministic, so the same request names the same parts */
            void *payload = write_batch(ctx, shard, ot, opk, col_names, col_cnt, ops, sizes, row_cnt,
                                        (uint32_t)ctx->msg_cnt, &len);
            ctx->msgs = grow(ctx->arena, ctx->msgs, sizeof(*ctx->msgs), ctx->msg_cnt, &ctx->msg_cap);
            bw_batch_msg_t *m = &ctx->msgs[ctx->msg_cnt++];
            memset(m, 0, sizeof(*m));
            m->shard = shard;
            m->type_name = ot->name;
            snprintf(m->op_header, sizeof(m->op_header), "%d", opk);
            snprintf(m->rows_header, sizeof(m->rows_header), "%zu", row_cnt);
            m->payload = payload;
            m->len = len;
            m->ops = ops;
            m->op_cnt = row_cnt;
        }
        for (size_t c = 0; c < col_cnt; c++) ctx->batch_col_of[batch_cols[c]] = 0;
    }
}

/* Emits one epoch: ops e[0..n) of one shard, no two of which conflict. */
static void emit_epoch(split_ctx_t *ctx, int shard, uint32_t *e, size_t n) {
    sort_epoch(ctx, e, n);
    size_t start = 0;
    for (size_t i = 1; i <= n; i++) {
        if (i < n && ctx->routes[e[i]].type_index == ctx->routes[e[start]].type_index &&
            ctx->req->ops[e[i]]->op == ctx->req->ops[e[start]]->op)
            continue;
        emit_group(ctx, shard, e + start, i - start);
        start = i;
    }
}

/* Open-addressing map object id -> (type, op) key of the epoch that last touched it,
 * with a generation stamp so that starting an epoch costs nothing. */
typedef struct {
    uint64_t id;
    uint32_t gen;
    int key;
} seen_t;

static void split_shard(split_ctx_t *ctx, int shard, uint32_t *v, size_t n) {
    size_t cap = 16;
    while (cap < n * 2) cap *= 2;
    seen_t *seen = bw_arena_alloc(ctx->arena, cap * sizeof(*seen));
    memset(seen, 0, cap * sizeof(*seen));
    uint32_t gen = 1;
    size_t epoch_start = 0;
    for (size_t i = 0; i < n; i++) {
        const Bulkwrite__V1__Op *op = ctx->req->ops[v[i]];
        if (op->id == 0) continue; /* CREATE without id: no earlier op can name it */
        int key = ctx->routes[v[i]].type_index * BW_OP_MAX + op->op;
        size_t h = (size_t)((op->id * 0x9E3779B97F4A7C15ull) >> 32) & (cap - 1);
        while (seen[h].gen == gen && seen[h].id != op->id) h = (h + 1) & (cap - 1);
        if (seen[h].gen == gen && seen[h].key != key) {
            emit_epoch(ctx, shard, v + epoch_start, i - epoch_start);
            epoch_start = i;
            gen++;
            h = (size_t)((op->id * 0x9E3779B97F4A7C15ull) >> 32) & (cap - 1);
            while (seen[h].gen == gen && seen[h].id != op->id) h = (h + 1) & (cap - 1);
        }
        seen[h] = (seen_t){op->id, gen, key};
    }
    emit_epoch(ctx, shard, v + epoch_start, n - epoch_start);
}

void bw_batcher_split(const bw_config_t *conf, const Bulkwrite__V1__BatchWriteRequest *req,
                      bw_op_route_t *routes, const char *job_id, const char *named_job, int64_t now_ms,
                      bw_arena_t *arena, bw_batch_set_t *out, uint32_t **too_large,
                      size_t *too_large_cnt) {
    split_ctx_t *ctx = bw_arena_alloc(arena, sizeof(*ctx));
    memset(ctx, 0, sizeof(*ctx));
    ctx->conf = conf;
    ctx->req = req;
    ctx->routes = routes;
    ctx->job_id = job_id;
    ctx->named_job = named_job ? named_job : "";
    ctx->now_ms = now_ms;
    ctx->arena = arena;

    /* Counting sort of the valid ops by shard keeps request order within each shard. */
    size_t n = req->n_ops;
    uint32_t *by_shard = bw_arena_alloc(arena, (n + 1) * sizeof(*by_shard));
    uint32_t *start = bw_arena_alloc(arena, ((size_t)conf->shard_count + 1) * sizeof(*start));
    memset(start, 0, ((size_t)conf->shard_count + 1) * sizeof(*start));
    for (size_t i = 0; i < n; i++)
        if (routes[i].shard >= 0) start[routes[i].shard + 1]++;
    for (int s = 0; s < conf->shard_count; s++) start[s + 1] += start[s];
    uint32_t *fill = bw_arena_alloc(arena, ((size_t)conf->shard_count + 1) * sizeof(*fill));
    memcpy(fill, start, ((size_t)conf->shard_count + 1) * sizeof(*fill));
    for (size_t i = 0; i < n; i++)
        if (routes[i].shard >= 0) by_shard[fill[routes[i].shard]++] = (uint32_t)i;
    for (int s = 0; s < conf->shard_count; s++)
        if (start[s + 1] > start[s]) split_shard(ctx, s, by_shard + start[s], start[s + 1] - start[s]);

    out->msgs = ctx->msgs;
    out->msg_cnt = ctx->msg_cnt;
    *too_large = ctx->too_large;
    *too_large_cnt = ctx->too_large_cnt;
}

void bw_batcher_free_payloads(bw_batch_set_t *set) {
    for (size_t i = 0; i < set->msg_cnt; i++) {
        free(set->msgs[i].payload);
        set->msgs[i].payload = NULL;
    }
}
