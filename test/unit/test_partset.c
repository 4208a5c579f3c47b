/* test_partset.c — a named job's part numbers as ranges (proxy/partset.h): in order, out
 * of order, holes filled, the extremes of uint32, and the memory one far part costs. */
#include "helpers.h"
#include "partset.h"

START_TEST(ranges_merge_and_count) {
    bw_partset_t s = BW_PARTSET_INIT;
    ck_assert_int_eq(bw_partset_first_missing(&s), 0);
    ck_assert_int_eq(bw_partset_max(&s), -1);
    for (uint32_t p = 0; p < 1000; p++) ck_assert_int_eq(bw_partset_add(&s, p), 1);
    ck_assert_uint_eq(s.n, 1); /* a thousand parts in order: one range */
    ck_assert_int_eq(bw_partset_add(&s, 500), 0);
    ck_assert_int_eq(bw_partset_first_missing(&s), 1000);
    /* 0, 1 and 5, then 3: two holes, the count 4, the first missing 2 */
    bw_partset_t t = BW_PARTSET_INIT;
    bw_partset_add(&t, 5), bw_partset_add(&t, 0), bw_partset_add(&t, 1), bw_partset_add(&t, 3);
    ck_assert_int_eq(bw_partset_count(&t), 4);
    ck_assert_int_eq(bw_partset_first_missing(&t), 2);
    ck_assert_int_eq(bw_partset_max(&t), 5);
    ck_assert(!bw_partset_has(&t, 2) && bw_partset_has(&t, 3) && !bw_partset_has(&t, 4));
    ck_assert_uint_eq(t.n, 3);
    bw_partset_add(&t, 2); /* joins [0,1] and [3] */
    bw_partset_add(&t, 4); /* joins [0,3] and [5] */
    ck_assert_uint_eq(t.n, 1);
    ck_assert_int_eq(bw_partset_first_missing(&t), 6);
    bw_partset_free(&s);
    bw_partset_free(&t);
}
END_TEST

START_TEST(far_parts_cost_a_range) {
    bw_partset_t s = BW_PARTSET_INIT;
    ck_assert_int_eq(bw_partset_add(&s, UINT32_MAX), 1);
    ck_assert_int_eq(bw_partset_add(&s, 0), 1);
    ck_assert_int_eq(bw_partset_add(&s, UINT32_MAX - 1), 1);
    ck_assert_uint_eq(s.n, 2);
    ck_assert_int_eq(bw_partset_max(&s), UINT32_MAX);
    ck_assert_int_eq(bw_partset_count(&s), 3);
    ck_assert(bw_partset_bytes(&s) <= 64); /* not 512 MiB of bits */
    /* every other part: as many ranges, found by halving */
    bw_partset_t t = BW_PARTSET_INIT;
    for (uint32_t p = 0; p < 20000; p += 2) bw_partset_add(&t, p);
    ck_assert_uint_eq(t.n, 10000);
    ck_assert(bw_partset_has(&t, 19998) && !bw_partset_has(&t, 19999) && !bw_partset_has(&t, 7));
    for (uint32_t p = 1; p < 20000; p += 2) bw_partset_add(&t, p);
    ck_assert_uint_eq(t.n, 1);
    ck_assert_int_eq(bw_partset_count(&t), 20000);
    bw_partset_free(&s);
    bw_partset_free(&t);
}
END_TEST

Suite *partset_suite(void) {
    Suite *s = suite_create("partset");
    TCase *tc = tcase_create("partset");
    tcase_add_test(tc, ranges_merge_and_count);
    tcase_add_test(tc, far_parts_cost_a_range);
    suite_add_tcase(s, tc);
    return s;
}
