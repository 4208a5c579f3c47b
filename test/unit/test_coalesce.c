/* test_coalesce.c — counter coalescing (consumer/coalesce.h): which rows are summed, into
 * what, and which keep their place. The live apply of sums is in test_apply.c. */
#include <stdint.h>
#include <string.h>

#include "coalesce.h"
#include "helpers.h"

/* Rows over a message whose columns are the pin's config columns 0..5 in order. */
static const int identity[] = {0, 1, 2, 3, 4, 5};
enum { OWNER = 0, TITLE = 2, LIKES = 4 };

typedef struct {
    Bulkwrite__V1__Value v[3];
    Bulkwrite__Internal__V1__RowField f[3], *fp[3];
} fields_t;

/* One row of id with up to 3 (column, value, increment) fields; kinds: 'i' int, 'd' double. */
static bw_sql_row_t row(fields_t *st, uint64_t id, const int *colmap, size_t n, const int *cols, const char *kinds,
                        const double *vals, const int *inc) {
    for (size_t k = 0; k < n; k++) {
        bulkwrite__internal__v1__row_field__init(&st->f[k]);
        bulkwrite__v1__value__init(&st->v[k]);
        st->f[k].column = (uint32_t)cols[k];
        st->f[k].increment = inc[k];
        st->f[k].value = &st->v[k];
        if (kinds[k] == 'i') {
            st->v[k].kind_case = BULKWRITE__V1__VALUE__KIND_INT_VALUE;
            st->v[k].int_value = (int64_t)vals[k];
        } else {
            st->v[k].kind_case = BULKWRITE__V1__VALUE__KIND_DOUBLE_VALUE;
            st->v[k].double_value = vals[k];
        }
        st->fp[k] = &st->f[k];
    }
    return (bw_sql_row_t){id, n, st->fp, colmap};
}

static bw_sql_row_t inc(fields_t *st, uint64_t id, int64_t by) {
    bw_sql_row_t r = row(st, id, identity, 1, (int[]){LIKES}, "i", (double[]){0}, (int[]){1});
    st->v[0].int_value = by; /* exact: a double holds no int64 near the limits */
    return r;
}

static int64_t int_on(const bw_sql_row_t *r, int col) {
    for (size_t f = 0; f < r->field_cnt; f++)
        if (r->colmap[r->fields[f]->column] == col) return r->fields[f]->value->int_value;
    ck_abort_msg("no field on column %d", col);
    return 0;
}

static void members_are(const bw_coalesced_t *co, size_t i, const uint32_t *want, size_t n) {
    ck_assert_uint_eq(co->first[i + 1] - co->first[i], n);
    for (size_t k = 0; k < n; k++) ck_assert_uint_eq(co->members[co->first[i] + k], want[k]);
}

START_TEST(increments_of_one_object_are_summed_in_its_first_place) {
    bw_config_t *conf = t_ref_config();
    const bw_object_type_t *pin = bw_config_object_type(conf, "pin");
    bw_arena_t a;
    bw_arena_init(&a, 1 << 16);
    static fields_t st[8];
    bw_sql_row_t in[] = {inc(&st[0], 1, 1), inc(&st[1], 2, 5), inc(&st[2], 1, 2), inc(&st[3], 1, -10),
                         inc(&st[4], 2, 1)};
    bw_coalesced_t co;
    ck_assert_uint_eq(bw_coalesce_increments(pin, in, 5, &a, &co), 3);
    ck_assert_uint_eq(co.n, 2);
    ck_assert_uint_eq(co.rows[0].id, 1);
    ck_assert_int_eq(int_on(&co.rows[0], LIKES), -7);
    ck_assert_uint_eq(co.rows[1].id, 2);
    ck_assert_int_eq(int_on(&co.rows[1], LIKES), 6);
    members_are(&co, 0, (uint32_t[]){0, 2, 3}, 3);
    members_are(&co, 1, (uint32_t[]){1, 4}, 2);
    ck_assert(co.rows[0].fields[0]->increment);
    /* the decoded rows are left as they came */
    ck_assert_int_eq(in[0].fields[0]->value->int_value, 1);
    ck_assert_int_eq(in[2].fields[0]->value->int_value, 2);
    bw_arena_destroy(&a);
    bw_config_destroy(conf);
}
END_TEST

START_TEST(a_change_that_is_not_an_increment_keeps_its_place) {
    bw_config_t *conf = t_ref_config();
    const bw_object_type_t *pin = bw_config_object_type(conf, "pin");
    bw_arena_t a;
    bw_arena_init(&a, 1 << 16);
    static fields_t st[8];
    bw_sql_row_t in[] = {
        inc(&st[0], 1, 1),
        row(&st[1], 1, identity, 1, (int[]){LIKES}, "i", (double[]){100}, (int[]){0}), /* like_count = 100 */
        inc(&st[2], 1, 2),
        inc(&st[3], 3, 1),
        inc(&st[4], 1, 3),
        /* an increment beside a plain set is not a pure increment: it stays alone */
        row(&st[5], 3, identity, 2, (int[]){LIKES, OWNER}, "ii", (double[]){1, 9}, (int[]){1, 0}),
        inc(&st[6], 3, 4),
    };
    bw_coalesced_t co;
    ck_assert_uint_eq(bw_coalesce_increments(pin, in, 7, &a, &co), 1);
    ck_assert_uint_eq(co.n, 6);
    members_are(&co, 0, (uint32_t[]){0}, 1);
    members_are(&co, 1, (uint32_t[]){1}, 1);
    members_are(&co, 2, (uint32_t[]){2, 4}, 2); /* after the set, never before it */
    ck_assert_int_eq(int_on(&co.rows[2], LIKES), 5);
    members_are(&co, 3, (uint32_t[]){3}, 1);
    members_are(&co, 4, (uint32_t[]){5}, 1);
    members_are(&co, 5, (uint32_t[]){6}, 1);
    ck_assert_int_eq(int_on(&co.rows[5], LIKES), 4);
    bw_arena_destroy(&a);
    bw_config_destroy(conf);
}
END_TEST

START_TEST(mixed_kinds_overflow_and_columns_of_other_messages) {
    bw_config_t *conf = t_ref_config();
    const bw_object_type_t *pin = bw_config_object_type(conf, "pin");
    bw_arena_t a;
    bw_arena_init(&a, 1 << 16);
    static fields_t st[8];
    /* a second message whose batch columns are (title, like_count, owner_id): its column 1
     * is config column 4 */
    static const int other[] = {TITLE, LIKES, OWNER};
    bw_sql_row_t in[] = {
        inc(&st[0], 1, INT64_MAX - 1),
        inc(&st[1], 1, 1),          /* reaches INT64_MAX: added */
        inc(&st[2], 1, 1),          /* would leave int64: starts a new row */
        row(&st[3], 1, identity, 1, (int[]){LIKES}, "d", (double[]){0.5}, (int[]){1}), /* a double: new row */
        inc(&st[4], 2, 3),
        row(&st[5], 2, other, 2, (int[]){1, 2}, "ii", (double[]){4, 7}, (int[]){1, 1}), /* likes + 4, owner + 7 */
    };
    bw_coalesced_t co;
    ck_assert_uint_eq(bw_coalesce_increments(pin, in, 6, &a, &co), 2);
    ck_assert_uint_eq(co.n, 4);
    ck_assert_int_eq(int_on(&co.rows[0], LIKES), INT64_MAX);
    members_are(&co, 0, (uint32_t[]){0, 1}, 2);
    members_are(&co, 1, (uint32_t[]){2}, 1);
    members_are(&co, 2, (uint32_t[]){3}, 1);
    members_are(&co, 3, (uint32_t[]){4, 5}, 2);
    ck_assert_uint_eq(co.rows[3].field_cnt, 2);
    ck_assert_int_eq(int_on(&co.rows[3], LIKES), 7);
    ck_assert_int_eq(int_on(&co.rows[3], OWNER), 7);
    bw_arena_destroy(&a);
    bw_config_destroy(conf);
}
END_TEST

Suite *coalesce_suite(void) {
    Suite *s = suite_create("coalesce");
    TCase *tc = tcase_create("coalesce");
    tcase_add_test(tc, increments_of_one_object_are_summed_in_its_first_place);
    tcase_add_test(tc, a_change_that_is_not_an_increment_keeps_its_place);
    tcase_add_test(tc, mixed_kinds_overflow_and_columns_of_other_messages);
    suite_add_tcase(s, tc);
    return s;
}
