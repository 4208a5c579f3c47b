#include "coalesce.h"

#include <string.h>

#include "bulkwrite/internal/v1/records.pb-c.h"

#define NONE UINT32_MAX

/* A sum being built: the row's own copy of fields and column map, made at the first add. */
typedef struct {
    int pure;                          /* it only increments: later increments may join it */
    int owned;                         /* fields and colmap are this row's copies */
    Bulkwrite__Internal__V1__RowField **fields;  /* [ot->column_cnt] once owned */
    int *colmap;                       /* [ot->column_cnt] once owned */
    uint32_t head, tail;               /* its members, linked through next[] */
} sum_t;

/* Whether row r only increments, each column once (the proxy refuses a column given
 * twice; a message that did so anyway is applied as it is). */
static int pure_increment(const bw_sql_row_t *r) {
    if (!r->field_cnt) return 0;
    for (size_t f = 0; f < r->field_cnt; f++) {
        const Bulkwrite__Internal__V1__RowField *rf = r->fields[f];
        if (!rf->increment || !rf->value) return 0;
        if (rf->value->kind_case != BULKWRITE__V1__VALUE__KIND_INT_VALUE &&
            rf->value->kind_case != BULKWRITE__V1__VALUE__KIND_DOUBLE_VALUE)
            return 0;
        for (size_t g = 0; g < f; g++)
            if (r->colmap[r->fields[g]->column] == r->colmap[rf->column]) return 0;
    }
    return 1;
}

/* The field of row r on config column c, or NULL. */
static Bulkwrite__Internal__V1__RowField *field_on(const bw_sql_row_t *r, int c) {
    for (size_t f = 0; f < r->field_cnt; f++)
        if (r->colmap[r->fields[f]->column] == c) return r->fields[f];
    return NULL;
}

static Bulkwrite__Internal__V1__RowField *copy_field(bw_arena_t *a, const Bulkwrite__Internal__V1__RowField *from, uint32_t column) {
    Bulkwrite__Internal__V1__RowField *f = bw_arena_alloc(a, sizeof(*f));
    Bulkwrite__V1__Value *v = bw_arena_alloc(a, sizeof(*v));
    *f = (Bulkwrite__Internal__V1__RowField)BULKWRITE__INTERNAL__V1__ROW_FIELD__INIT;
    *v = *from->value;
    f->column = column;
    f->value = v;
    f->increment = 1;
    return f;
}

/* Gives sum row r its own fields and column map, with room for every column of ot: the
 * decoded messages stay as they came (a retried transaction decodes them again anyway). */
static void own(const bw_object_type_t *ot, bw_sql_row_t *r, sum_t *s, bw_arena_t *a) {
    size_t cap = (size_t)ot->column_cnt;
    s->fields = bw_arena_alloc(a, cap * sizeof(*s->fields));
    s->colmap = bw_arena_alloc(a, cap * sizeof(*s->colmap));
    for (size_t f = 0; f < r->field_cnt; f++) {
        s->colmap[f] = r->colmap[r->fields[f]->column];
        s->fields[f] = copy_field(a, r->fields[f], (uint32_t)f);
    }
    r->fields = s->fields;
    r->colmap = s->colmap;
    s->owned = 1;
}

/* Whether pure row `add` can be added into pure row `into`: each of its columns is one
 * the sum lacks, or holds a value of the same kind whose int sum stays in int64. */
static int can_add(const bw_sql_row_t *into, const bw_sql_row_t *add) {
    for (size_t f = 0; f < add->field_cnt; f++) {
        const Bulkwrite__V1__Value *v = add->fields[f]->value;
        const Bulkwrite__Internal__V1__RowField *have = field_on(into, add->colmap[add->fields[f]->column]);
        if (!have) continue;
        if (have->value->kind_case != v->kind_case) return 0;
        int64_t sum;
        if (v->kind_case == BULKWRITE__V1__VALUE__KIND_INT_VALUE &&
            __builtin_add_overflow(have->value->int_value, v->int_value, &sum))
            return 0;
    }
    return 1;
}

/* Adds row `add` into sum row `into` (owned; can_add said yes). */
static void add_into(bw_sql_row_t *into, sum_t *s, const bw_sql_row_t *add, bw_arena_t *a) {
    for (size_t f = 0; f < add->field_cnt; f++) {
        const Bulkwrite__Internal__V1__RowField *rf = add->fields[f];
        int c = add->colmap[rf->column];
        Bulkwrite__Internal__V1__RowField *have = field_on(into, c);
        if (!have) {
            s->colmap[into->field_cnt] = c;
            s->fields[into->field_cnt] = copy_field(a, rf, (uint32_t)into->field_cnt);
            into->field_cnt++;
        } else if (have->value->kind_case == BULKWRITE__V1__VALUE__KIND_INT_VALUE) {
            have->value->int_value += rf->value->int_value;
        } else {
            have->value->double_value += rf->value->double_value;
        }
    }
}

size_t bw_coalesce_increments(const bw_object_type_t *ot, const bw_sql_row_t *in, size_t n, bw_arena_t *arena,
                              bw_coalesced_t *out) {
    out->rows = bw_arena_alloc(arena, (n + 1) * sizeof(*out->rows));
    out->first = bw_arena_alloc(arena, (n + 1) * sizeof(*out->first));
    out->members = bw_arena_alloc(arena, (n + 1) * sizeof(*out->members));
    sum_t *sums = bw_arena_alloc(arena, (n + 1) * sizeof(*sums));
    uint32_t *next = bw_arena_alloc(arena, (n + 1) * sizeof(*next));
    /* object id -> its latest output row: open addressing, twice the rows at least */
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    struct slot {
        uint64_t id;
        uint32_t row; /* NONE: empty */
    } *map = bw_arena_alloc(arena, cap * sizeof(*map));
    for (size_t i = 0; i < cap; i++) map[i].row = NONE;

    size_t m = 0, added = 0;
    for (size_t i = 0; i < n; i++) {
        next[i] = NONE;
        size_t h = (size_t)((in[i].id * 0x9E3779B97F4A7C15ull) >> 32) & (cap - 1);
        while (map[h].row != NONE && map[h].id != in[i].id) h = (h + 1) & (cap - 1);
        int pure = pure_increment(&in[i]);
        uint32_t j = map[h].row;
        if (pure && j != NONE && sums[j].pure && can_add(&out->rows[j], &in[i])) {
            if (!sums[j].owned) own(ot, &out->rows[j], &sums[j], arena);
            add_into(&out->rows[j], &sums[j], &in[i], arena);
            next[sums[j].tail] = (uint32_t)i;
            sums[j].tail = (uint32_t)i;
            added++;
            continue;
        }
        out->rows[m] = in[i];
        sums[m] = (sum_t){.pure = pure, .head = (uint32_t)i, .tail = (uint32_t)i};
        map[h] = (struct slot){in[i].id, (uint32_t)m};
        m++;
    }
    size_t k = 0;
    for (size_t j = 0; j < m; j++) {
        out->first[j] = (uint32_t)k;
        for (uint32_t i = sums[j].head; i != NONE; i = next[i]) out->members[k++] = i;
    }
    out->first[m] = (uint32_t)k;
    out->n = m;
    return added;
}
