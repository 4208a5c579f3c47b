#include "forward_ref.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pbdecode.h"

static const char *nz(const char *s) { return s ? s : ""; }

static int value_eq(const Bulkwrite__V1__Value *a, const Bulkwrite__V1__Value *b) {
    if (!a || !b) return a == b;
    if (a->kind_case != b->kind_case) return 0;
    switch (a->kind_case) {
    case BULKWRITE__V1__VALUE__KIND_NULL_VALUE: return !a->null_value == !b->null_value;
    case BULKWRITE__V1__VALUE__KIND_INT_VALUE: return a->int_value == b->int_value;
    case BULKWRITE__V1__VALUE__KIND_DOUBLE_VALUE: return memcmp(&a->double_value, &b->double_value, sizeof(double)) == 0;
    case BULKWRITE__V1__VALUE__KIND_BOOL_VALUE: return !a->bool_value == !b->bool_value;
    case BULKWRITE__V1__VALUE__KIND_STRING_VALUE:
    case BULKWRITE__V1__VALUE__KIND_BYTES_VALUE:
        return a->string_value.len == b->string_value.len &&
               (a->string_value.len == 0 || memcmp(a->string_value.data, b->string_value.data, a->string_value.len) == 0);
    default: return 1;
    }
}

int fref_request_eq(const Bulkwrite__V1__BatchWriteRequest *a, const Bulkwrite__V1__BatchWriteRequest *b, char *why,
                    size_t why_size) {
#define DIFF(...) do { snprintf(why, why_size, __VA_ARGS__); return 0; } while (0)
    if (strcmp(nz(a->request_id), nz(b->request_id))) DIFF("request_id");
    if (strcmp(nz(a->job), nz(b->job))) DIFF("job");
    if (a->job_part != b->job_part) DIFF("job_part %u vs %u", a->job_part, b->job_part);
    if (!a->job_last != !b->job_last) DIFF("job_last");
    if (strcmp(nz(a->replay_of), nz(b->replay_of))) DIFF("replay_of");
    if (a->not_before_ms != b->not_before_ms) DIFF("not_before_ms");
    if (a->n_after != b->n_after) DIFF("n_after %zu vs %zu", a->n_after, b->n_after);
    for (size_t i = 0; i < a->n_after; i++)
        if (strcmp(nz(a->after[i]), nz(b->after[i]))) DIFF("after[%zu]", i);
    if (a->n_ops != b->n_ops) DIFF("n_ops %zu vs %zu", a->n_ops, b->n_ops);
    for (size_t i = 0; i < a->n_ops; i++) {
        const Bulkwrite__V1__Op *x = a->ops[i], *y = b->ops[i];
        if (x->op != y->op) DIFF("ops[%zu].op %d vs %d", i, (int)x->op, (int)y->op);
        if (strcmp(nz(x->object_type), nz(y->object_type))) DIFF("ops[%zu].object_type", i);
        if (x->id != y->id) DIFF("ops[%zu].id", i);
        if (strcmp(nz(x->shard_key), nz(y->shard_key))) DIFF("ops[%zu].shard_key", i);
        if (x->n_fields != y->n_fields) DIFF("ops[%zu].n_fields %zu vs %zu", i, x->n_fields, y->n_fields);
        for (size_t f = 0; f < x->n_fields; f++) {
            if (strcmp(nz(x->fields[f]->name), nz(y->fields[f]->name))) DIFF("ops[%zu].fields[%zu].name", i, f);
            if (!x->fields[f]->increment != !y->fields[f]->increment) DIFF("ops[%zu].fields[%zu].increment", i, f);
            if (!value_eq(x->fields[f]->value, y->fields[f]->value)) DIFF("ops[%zu].fields[%zu].value", i, f);
        }
    }
    return 1;
#undef DIFF
}

int fref_shard_batch_eq(const Bulkwrite__Internal__V1__ShardBatch *a, const Bulkwrite__Internal__V1__ShardBatch *b, char *why,
                        size_t why_size) {
#define DIFF(...) do { snprintf(why, why_size, __VA_ARGS__); return 0; } while (0)
    if (strcmp(nz(a->job_id), nz(b->job_id))) DIFF("job_id");
    if (strcmp(nz(a->job), nz(b->job))) DIFF("job");
    if (a->shard != b->shard) DIFF("shard %u vs %u", a->shard, b->shard);
    if (strcmp(nz(a->object_type), nz(b->object_type))) DIFF("object_type");
    if (a->op != b->op) DIFF("op %d vs %d", (int)a->op, (int)b->op);
    if (a->enqueued_at_ms != b->enqueued_at_ms) DIFF("enqueued_at_ms");
    if (a->part != b->part) DIFF("part %u vs %u", a->part, b->part);
    if (a->n_columns != b->n_columns) DIFF("n_columns %zu vs %zu", a->n_columns, b->n_columns);
    for (size_t c = 0; c < a->n_columns; c++)
        if (strcmp(nz(a->columns[c]), nz(b->columns[c]))) DIFF("columns[%zu]", c);
    if (a->n_rows != b->n_rows) DIFF("n_rows %zu vs %zu", a->n_rows, b->n_rows);
    for (size_t i = 0; i < a->n_rows; i++) {
        const Bulkwrite__Internal__V1__Row *x = a->rows[i], *y = b->rows[i];
        if (x->op_index != y->op_index) DIFF("rows[%zu].op_index", i);
        if (x->id != y->id) DIFF("rows[%zu].id", i);
        if (x->n_fields != y->n_fields) DIFF("rows[%zu].n_fields %zu vs %zu", i, x->n_fields, y->n_fields);
        for (size_t f = 0; f < x->n_fields; f++) {
            if (x->fields[f]->column != y->fields[f]->column) DIFF("rows[%zu].fields[%zu].column", i, f);
            if (!x->fields[f]->increment != !y->fields[f]->increment) DIFF("rows[%zu].fields[%zu].increment", i, f);
            if (!value_eq(x->fields[f]->value, y->fields[f]->value)) DIFF("rows[%zu].fields[%zu].value", i, f);
        }
    }
    return 1;
#undef DIFF
}

int fref_shard_batch_agrees(const void *data, size_t len, bw_arena_t *a, int *accepted, char *why, size_t why_size) {
    Bulkwrite__Internal__V1__ShardBatch *mine = bw_pbd_shard_batch(data, len, a);
    Bulkwrite__Internal__V1__ShardBatch *pbc = bulkwrite__internal__v1__shard_batch__unpack(&a->pb, len, data);
    *accepted = mine != NULL;
    if (!mine != !pbc) {
        snprintf(why, why_size, "the ShardBatch reader %s what protobuf-c %s", mine ? "accepts" : "refuses",
                 pbc ? "accepts" : "refuses");
        return 0;
    }
    char diff[200];
    if (mine && !fref_shard_batch_eq(mine, pbc, diff, sizeof(diff))) {
        snprintf(why, why_size, "ShardBatch read differently from protobuf-c: %s", diff);
        return 0;
    }
    return 1;
}

/* protobuf-c's pack of the ShardBatch the old batcher built for message m. */
static uint8_t *ref_pack(const bw_config_t *conf, const Bulkwrite__V1__BatchWriteRequest *pbc, const bw_batch_msg_t *m,
                         const char *job_id, const char *named_job, int64_t now_ms, uint32_t part, size_t *len) {
    const Bulkwrite__V1__Op *op0 = pbc->ops[m->ops[0]];
    const bw_object_type_t *ot = bw_config_object_type(conf, op0->object_type);
    if (!ot) return NULL;
    const char **cols = calloc((size_t)ot->column_cnt + 1, sizeof(*cols));
    int *batch_col = calloc((size_t)ot->column_cnt + 1, sizeof(int));
    size_t n_cols = 0, n_fields = 0;
    for (size_t r = 0; r < m->op_cnt; r++) n_fields += pbc->ops[m->ops[r]]->n_fields;
    Bulkwrite__Internal__V1__Row *rows = calloc(m->op_cnt + 1, sizeof(*rows));
    Bulkwrite__Internal__V1__Row **row_ptrs = calloc(m->op_cnt + 1, sizeof(*row_ptrs));
    Bulkwrite__Internal__V1__RowField *rfs = calloc(n_fields + 1, sizeof(*rfs));
    Bulkwrite__Internal__V1__RowField **rf_ptrs = calloc(n_fields + 1, sizeof(*rf_ptrs));
    Bulkwrite__V1__Value *vals = calloc(n_fields + 1, sizeof(*vals));
    size_t k = 0;
    for (size_t r = 0; r < m->op_cnt; r++) {
        const Bulkwrite__V1__Op *op = pbc->ops[m->ops[r]];
        bulkwrite__internal__v1__row__init(&rows[r]);
        rows[r].op_index = m->ops[r];
        rows[r].id = op->id;
        rows[r].n_fields = op->n_fields;
        rows[r].fields = &rf_ptrs[k];
        for (size_t f = 0; f < op->n_fields; f++, k++) {
            int c = bw_config_column(ot, op->fields[f]->name);
            if (c < 0) abort(); /* a validated op names its columns */
            if (!batch_col[c]) {
                cols[n_cols] = ot->columns[c].name;
                batch_col[c] = (int)++n_cols;
            }
            bulkwrite__internal__v1__row_field__init(&rfs[k]);
            rfs[k].column = (uint32_t)(batch_col[c] - 1);
            rfs[k].increment = op->fields[f]->increment;
            if (op->fields[f]->value) { /* unknown fields are not forwarded */
                vals[k] = *op->fields[f]->value;
                vals[k].base.n_unknown_fields = 0;
                vals[k].base.unknown_fields = NULL;
                rfs[k].value = &vals[k];
            }
            rf_ptrs[k] = &rfs[k];
        }
        row_ptrs[r] = &rows[r];
    }
    Bulkwrite__Internal__V1__ShardBatch sb = BULKWRITE__INTERNAL__V1__SHARD_BATCH__INIT;
    sb.job_id = (char *)job_id;
    sb.shard = (uint32_t)m->shard;
    sb.object_type = ot->name;
    sb.op = op0->op;
    sb.n_columns = n_cols;
    sb.columns = (char **)cols;
    sb.n_rows = m->op_cnt;
    sb.rows = row_ptrs;
    sb.enqueued_at_ms = now_ms;
    sb.part = part;
    if (named_job) sb.job = (char *)named_job;
    *len = bulkwrite__internal__v1__shard_batch__get_packed_size(&sb);
    uint8_t *out = malloc(*len + 1);
    bulkwrite__internal__v1__shard_batch__pack(&sb, out);
    free(cols);
    free(batch_col);
    free(rows);
    free(row_ptrs);
    free(rfs);
    free(rf_ptrs);
    free(vals);
    return out;
}

int fref_check_split(const bw_config_t *conf, const Bulkwrite__V1__BatchWriteRequest *pbc, const bw_batch_set_t *set,
                     const char *job_id, const char *named_job, int64_t now_ms, char *why, size_t why_size) {
    for (size_t i = 0; i < set->msg_cnt; i++) {
        const bw_batch_msg_t *m = &set->msgs[i];
        size_t len;
        uint8_t *ref = ref_pack(conf, pbc, m, job_id, named_job, now_ms, (uint32_t)i, &len);
        int same = ref && len == m->len && memcmp(ref, m->payload, len) == 0;
        free(ref);
        if (!same) {
            snprintf(why, why_size, "message %zu (shard %d, %zu rows): %zu bytes, protobuf-c packs %zu different ones", i,
                     m->shard, m->op_cnt, m->len, ref ? len : 0);
            return 0;
        }
        Bulkwrite__Internal__V1__ShardBatch *sb = bulkwrite__internal__v1__shard_batch__unpack(NULL, m->len, m->payload);
        int ok = sb && sb->n_rows == m->op_cnt && sb->part == i && (int)sb->shard == m->shard;
        if (sb) bulkwrite__internal__v1__shard_batch__free_unpacked(sb, NULL);
        if (!ok) {
            snprintf(why, why_size, "message %zu does not unpack as its ShardBatch", i);
            return 0;
        }
        /* and the consumer's reader reads it as protobuf-c does */
        bw_arena_t a;
        bw_arena_init(&a, 1 << 14);
        int accepted;
        ok = fref_shard_batch_agrees(m->payload, m->len, &a, &accepted, why, why_size);
        if (ok && !accepted) /* both readers refuse it */
            snprintf(why, why_size, "message %zu (shard %d) does not read as a ShardBatch", i, m->shard);
        ok = ok && accepted;
        bw_arena_destroy(&a);
        if (!ok) return 0;
    }
    return 1;
}

int fref_nul_refused(const char *err) {
    static const char *const fields[] = {"request_id", "job", "replay_of", "after"};
    for (size_t i = 0; i < sizeof(fields) / sizeof(*fields); i++) {
        size_t n = strlen(fields[i]);
        if (strncmp(err, fields[i], n) == 0 && strncmp(err + n, " contains a control character (NUL)", 35) == 0)
            return 1;
    }
    return 0;
}
