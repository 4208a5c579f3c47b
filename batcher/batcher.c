#include "batcher.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bytes a message may spend on rows: the limit less room for the header fields
 * (job id, shard, type, op, time) and the column list, which are counted separately. */
#define HEADER_RESERVE 512

typedef struct {
    const bw_config_t *conf;
    const Bulkwrite__V1__BatchWriteRequest *req;
    bw_op_route_t *routes;
    const char *job_id;
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

static Bulkwrite__V1__Row *make_row(split_ctx_t *ctx, uint32_t idx, int *batch_cols,
                                    size_t *batch_col_cnt, const char **col_names) {
    const Bulkwrite__V1__Op *op = ctx->req->ops[idx];
    const bw_op_route_t *rt = &ctx->routes[idx];
    const bw_object_type_t *ot = &ctx->conf->object_types[rt->type_index];
    Bulkwrite__V1__Row *row = bw_arena_alloc(ctx->arena, sizeof(*row));
    bulkwrite__v1__row__init(row);
    row->op_index = idx;
    row->id = op->id;
    row->n_fields = op->n_fields;
    if (op->n_fields) {
        row->fields = bw_arena_alloc(ctx->arena, op->n_fields * sizeof(*row->fields));
        Bulkwrite__V1__RowField *rf = bw_arena_alloc(ctx->arena, op->n_fields * sizeof(*rf));
        for (size_t f = 0; f < op->n_fields; f++) {
            int col = rt->cols[f];
            if (!ctx->batch_col_of[col]) {
                batch_cols[*batch_col_cnt] = col;
                col_names[*batch_col_cnt] = ot->columns[col].name;
                ctx->batch_col_of[col] = (int)++*batch_col_cnt;
            }
            bulkwrite__v1__row_field__init(&rf[f]);
            rf[f].column = (uint32_t)(ctx->batch_col_of[col] - 1);
            rf[f].value = op->fields[f]->value;
            rf[f].increment = op->fields[f]->increment;
            row->fields[f] = &rf[f];
        }
    }
    return row;
}

static size_t varint_size(size_t v) {
    size_t n = 1;
    while (v >= 128) {
        v >>= 7;
        n++;
    }
    return n;
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
    Bulkwrite__V1__Row **rows = bw_arena_alloc(ctx->arena, sizeof(*rows) * (n < limit ? n : limit));
    uint32_t *ops = NULL;

    size_t i = 0;
    while (i < n) {
        size_t row_cnt = 0, bytes = 0, col_cnt = 0;
        size_t batch_cap = n - i < limit ? n - i : limit;
        ops = bw_arena_alloc(ctx->arena, sizeof(*ops) * batch_cap);
        while (i < n && row_cnt < limit) {
            size_t cols_before = col_cnt;
            Bulkwrite__V1__Row *row = make_row(ctx, v[i], batch_cols, &col_cnt, col_names);
            size_t rsize = protobuf_c_message_get_packed_size(&row->base);
            rsize += 1 + varint_size(rsize);
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
            rows[row_cnt] = row;
            ops[row_cnt] = v[i];
            row_cnt++;
            i++;
        }
        for (size_t c = 0; c < col_cnt; c++) ctx->batch_col_of[batch_cols[c]] = 0;
        if (!row_cnt) continue;

        Bulkwrite__V1__ShardBatch sb = BULKWRITE__V1__SHARD_BATCH__INIT;
        sb.job_id = (char *)ctx->job_id;
        sb.shard = (uint32_t)shard;
        sb.object_type = ot->name;
        sb.op = (Bulkwrite__V1__OpType)opk;
        sb.n_columns = col_cnt;
        sb.columns = (char **)col_names;
        sb.n_rows = row_cnt;
        sb.rows = rows;
        sb.enqueued_at_ms = ctx->now_ms;
        sb.part = (uint32_t)ctx->msg_cnt; /* deterministic: same request, same parts */
        size_t len = protobuf_c_message_get_packed_size(&sb.base);
        void *payload = malloc(len ? len : 1);
        if (!payload) abort();
        protobuf_c_message_pack(&sb.base, payload);

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
                      bw_op_route_t *routes, const char *job_id, int64_t now_ms,
                      bw_arena_t *arena, bw_batch_set_t *out, uint32_t **too_large,
                      size_t *too_large_cnt) {
    split_ctx_t *ctx = bw_arena_alloc(arena, sizeof(*ctx));
    memset(ctx, 0, sizeof(*ctx));
    ctx->conf = conf;
    ctx->req = req;
    ctx->routes = routes;
    ctx->job_id = job_id;
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
