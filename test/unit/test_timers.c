/* test_timers.c — the delay queue (proxy/timers.h): held records come due in release
 * order and leave once they hold nothing; a named job's later part knows an earlier one
 * holds batches; records to write again are found; an earlier record wakes the waiting
 * loop; a job may not wait for itself through its prerequisites; a hundred thousand
 * timers come out in order. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bw.h"
#include "helpers.h"
#include "timers.h"

/* Notes a record of job `job` (NULL: id) holding `held` batches, on shards `shards`
 * (NULL: shard 0). */
static void note_on(bw_timers_t *t, const char *id, const char *job, uint32_t part, int64_t not_before, int64_t created,
                    int held, char **after, size_t n_after, const uint32_t *shards) {
    Bulkwrite__Internal__V1__JobRecord r = BULKWRITE__INTERNAL__V1__JOB_RECORD__INIT;
    Bulkwrite__Internal__V1__HeldBatch hb[4], *hbp[4];
    for (int i = 0; i < 4; i++) {
        bulkwrite__internal__v1__held_batch__init(&hb[i]);
        hb[i].shard = shards ? shards[i] : 0;
        hbp[i] = &hb[i];
    }
    r.job_id = (char *)id;
    r.job = (char *)(job ? job : "");
    r.job_part = part;
    r.not_before_ms = not_before;
    r.created_at_ms = created;
    r.written_at_ms = created;
    r.held = held ? hbp : NULL;
    r.n_held = (size_t)held;
    r.after = after;
    r.n_after = n_after;
    size_t len = bulkwrite__internal__v1__job_record__get_packed_size(&r);
    uint8_t *buf = malloc(len + 1);
    bulkwrite__internal__v1__job_record__pack(&r, buf);
    Bulkwrite__Internal__V1__JobRecord *u = bulkwrite__internal__v1__job_record__unpack(NULL, len, buf);
    ck_assert_ptr_nonnull(u);
    bw_timers_note(t, id, u, buf, len, 100, 1);
    bulkwrite__internal__v1__job_record__free_unpacked(u, NULL);
    free(buf);
}

static void note(bw_timers_t *t, const char *id, const char *job, uint32_t part, int64_t not_before, int64_t created,
                 int held, char **after, size_t n_after) {
    note_on(t, id, job, part, not_before, created, held, after, n_after, NULL);
}

static void id_of(char out[33], int n) { snprintf(out, 33, "%032x", n); }

/* Due in order of not_before, then acceptance, then part; pending until due; gone once
 * a record holds nothing. */
START_TEST(due_in_release_order)
{
    bw_timers_t *t = bw_timers_new();
    int64_t now = bw_wall_ms();
    char a[33], b[33], c[33], d[33];
    id_of(a, 1), id_of(b, 2), id_of(c, 3), id_of(d, 4);
    note(t, a, NULL, 0, now - 10, 5, 1, NULL, 0);
    note(t, b, NULL, 0, now - 20, 9, 1, NULL, 0);
    note(t, c, NULL, 0, now - 20, 7, 1, NULL, 0);  /* as due as b, accepted before it */
    note(t, d, NULL, 0, now + 60000, 1, 1, NULL, 0); /* a minute ahead */
    bw_timer_t *due;
    size_t n = bw_timers_due(t, now, 100, NULL, 0, 0, 1000, &due);
    ck_assert_int_eq(n, 3);
    ck_assert_str_eq(due[0].id, c);
    ck_assert_str_eq(due[1].id, b);
    ck_assert_str_eq(due[2].id, a);
    ck_assert_int_gt(due[0].len, 0);
    bw_timers_copies_free(due, n);
    ck_assert_int_eq(bw_timers_next_due(t), now + 60000);
    bw_timers_stats_t st;
    bw_timers_stats(t, &st);
    ck_assert_int_eq(st.held, 4);
    ck_assert_int_eq(st.due, 3);
    ck_assert_int_gt(st.bytes, 0);

    note(t, b, NULL, 0, now - 20, 9, 0, NULL, 0); /* released: holds nothing */
    n = bw_timers_due(t, now, 1, NULL, 0, 0, 1000, &due);           /* at most one */
    ck_assert_int_eq(n, 1);
    ck_assert_str_eq(due[0].id, c);
    bw_timers_copies_free(due, n);
    n = bw_timers_due(t, now + 60000, 100, NULL, 0, 0, 1000, &due); /* a minute on: d too, last */
    ck_assert_int_eq(n, 3);
    ck_assert_str_eq(due[2].id, d);
    bw_timers_copies_free(due, n);
    ck_assert_int_eq(bw_timers_next_due(t), INT64_MAX);
    bw_timers_free(t);
}
END_TEST

static int gone_if_other(void *ud, const char *job) { return strcmp(job, ud) == 0; }

/* A named job's part waits while an earlier part of it holds batches; the job is known
 * held by its id; a record written long ago is found for its rewrite. */
START_TEST(parts_and_rewrites)
{
    bw_timers_t *t = bw_timers_new();
    int64_t now = bw_wall_ms();
    char job[33], p0[33], p1[33], other[33];
    id_of(job, 100), id_of(p0, 101), id_of(p1, 102), id_of(other, 103);
    note(t, p1, job, 1, now - 5, 2, 1, NULL, 0);
    note(t, p0, job, 0, now + 3600000, 1, 1, NULL, 0); /* part 0 an hour ahead */
    ck_assert(bw_timers_holds_job(t, job));
    ck_assert(!bw_timers_holds_job(t, other));
    bw_timer_t *due;
    size_t n = bw_timers_due(t, now, 10, NULL, 0, 0, 1000, &due);
    ck_assert_int_eq(n, 1);
    ck_assert_str_eq(due[0].id, p1);
    ck_assert_str_eq(due[0].job, job);
    ck_assert_int_eq(due[0].part_before_held, 1);
    bw_timers_copies_free(due, n);
    note(t, p0, job, 0, now + 3600000, 1, 0, NULL, 0); /* part 0 released (or cancelled) */
    n = bw_timers_due(t, now, 10, NULL, 0, 0, 1000, &due);
    ck_assert_int_eq(due[0].part_before_held, 0);
    bw_timers_copies_free(due, n);

    note(t, other, NULL, 0, now + 3600000, 1, 1, NULL, 0); /* written at 1 ms past the epoch */
    n = bw_timers_stale(t, now - 1000, 0, 0, NULL, NULL, NULL, 0, 10, &due); /* due or not: p1, other */
    ck_assert_int_eq(n, 2);
    ck_assert(!strcmp(due[0].id, other) || !strcmp(due[1].id, other));
    ck_assert(!strcmp(due[0].id, p1) || !strcmp(due[1].id, p1));
    bw_timers_copies_free(due, n);
    const uint8_t not_mine[1] = {0};
    n = bw_timers_stale(t, now - 1000, 0, 0, NULL, NULL, not_mine, 1, 10, &due); /* their owner writes them */
    ck_assert_int_eq(n, 0);
    bw_timers_copies_free(due, n);
    n = bw_timers_stale(t, 0, 0, 0, NULL, NULL, NULL, 0, 10, &due); /* nothing written at or before 0 */
    ck_assert_int_eq(n, 0);
    bw_timers_copies_free(due, n);
    n = bw_timers_stale(t, 0, 0, 0, gone_if_other, other, NULL, 0, 10, &due); /* other's job cancelled: dropped at once */
    ck_assert_int_eq(n, 1);
    ck_assert_str_eq(due[0].id, other);
    bw_timers_copies_free(due, n);

    /* a record with prerequisites, an hour ahead, is among the dependents; once it holds
     * nothing it is not */
    char dep[33], *after[] = {job};
    id_of(dep, 104);
    note(t, dep, NULL, 0, now + 3600000, 3, 1, after, 1);
    n = bw_timers_dependents(t, &due);
    ck_assert_int_eq(n, 1);
    ck_assert_str_eq(due[0].id, dep);
    ck_assert_int_eq(due[0].n_after, 1);
    ck_assert_str_eq(due[0].after[0], job);
    bw_timers_copies_free(due, n);
    note(t, dep, NULL, 0, now + 3600000, 3, 0, after, 1);
    n = bw_timers_dependents(t, &due);
    ck_assert_int_eq(n, 0);
    bw_timers_copies_free(due, n);
    bw_timers_free(t);
}
END_TEST

typedef struct {
    bw_timers_t *t;
    char id[33];
    int64_t at;
} noter_t;

static void *note_later(void *arg) {
    noter_t *n = arg;
    usleep(200000);
    note(n->t, n->id, NULL, 0, n->at, 1, 1, NULL, 0);
    return NULL;
}

/* A named job's parts, noted out of order: only the lowest held part may go; 20,000
 * parts cost a step each, not a walk of the job. */
START_TEST(named_job_parts_in_order)
{
    bw_timers_t *t = bw_timers_new();
    int64_t now = bw_wall_ms();
    char job[33], id[33];
    id_of(job, 900000);
    static const int order[] = {3, 1, 2, 0};
    for (int k = 0; k < 4; k++) {
        id_of(id, 900001 + order[k]);
        note(t, id, job, (uint32_t)order[k], now - 10, 1, 1, NULL, 0);
    }
    for (int p = 4; p < 20000; p++) {
        id_of(id, 900001 + p);
        note(t, id, job, (uint32_t)p, now - 10, 1, 1, NULL, 0);
    }
    bw_timer_t *due;
    size_t n = bw_timers_due(t, now, 20000, NULL, 0, 0, 1000, &due);
    ck_assert_int_eq(n, 20000);
    for (size_t i = 0; i < n; i++) ck_assert_int_eq(due[i].part_before_held, due[i].job_part != 0);
    bw_timers_copies_free(due, n);
    id_of(id, 900001); /* part 0 released */
    note(t, id, job, 0, now - 10, 1, 0, NULL, 0);
    n = bw_timers_due(t, now, 3, NULL, 0, 0, 1000, &due);
    ck_assert_int_eq(due[0].job_part, 1);
    ck_assert_int_eq(due[0].part_before_held, 0);
    ck_assert_int_eq(due[1].part_before_held, 1);
    bw_timers_copies_free(due, n);
    ck_assert(bw_timers_holds_job(t, job));
    bw_timers_free(t);
}
END_TEST

/* With a shard owner each: this proxy gets the records of its shards, those of another's
 * once late, and a record on several shards (copied, not owned) so its shards wait. */
START_TEST(owned_shards_only)
{
    bw_timers_t *t = bw_timers_new();
    int64_t now = bw_wall_ms();
    char a[33], b[33], c[33];
    id_of(a, 1), id_of(b, 2), id_of(c, 3);
    const uint32_t on0[] = {0, 0, 0, 0}, on1[] = {1, 1, 1, 1}, on1and0[] = {1, 0, 0, 0};
    note_on(t, a, NULL, 0, now - 100, 1, 1, NULL, 0, on0);
    note_on(t, b, NULL, 0, now - 50, 2, 1, NULL, 0, on1);
    note_on(t, c, NULL, 0, now - 10, 3, 2, NULL, 0, on1and0);
    const uint8_t mine[2] = {1, 0};
    bw_timer_t *due;
    size_t n = bw_timers_due(t, now, 10, mine, 2, now - 5000, 1000, &due);
    ck_assert_int_eq(n, 2); /* a (shard 0), c (shards 1 and 0: copied, not owned); b is another's */
    ck_assert_str_eq(due[0].id, a);
    ck_assert_int_eq(due[0].owned, 1);
    ck_assert_str_eq(due[1].id, c);
    ck_assert_int_eq(due[1].owned, 0);
    bw_timers_copies_free(due, n);
    n = bw_timers_due(t, now + 500, 10, mine, 2, now - 50, 1000, &due); /* b parked for a second */
    ck_assert_int_eq(n, 2);
    bw_timers_copies_free(due, n);
    ck_assert_int_eq(bw_timers_next_due(t), now + 1000);
    n = bw_timers_due(t, now + 1000, 10, mine, 2, now - 50, 1000, &due); /* back, 50 ms late: taken over */
    ck_assert_int_eq(n, 3);
    ck_assert_str_eq(due[1].id, b);
    ck_assert_int_eq(due[1].owned, 1);
    bw_timers_copies_free(due, n);

    /* a due record that cannot go waits a while out of the due ones' way */
    const char *ids[] = {a};
    bw_timers_park(t, ids, 1, now + 5000);
    n = bw_timers_due(t, now + 1000, 10, NULL, 0, 0, 1000, &due);
    ck_assert_int_eq(n, 2); /* b, c */
    ck_assert_str_ne(due[0].id, a);
    bw_timers_copies_free(due, n);
    n = bw_timers_due(t, now + 5000, 10, NULL, 0, 0, 1000, &due);
    ck_assert_int_eq(n, 3);
    ck_assert_str_eq(due[0].id, a); /* in its place again */
    bw_timers_copies_free(due, n);
    bw_timers_free(t);
}
END_TEST

/* The loop sleeping until a minute from now wakes when a record due now arrives. */
START_TEST(an_earlier_record_wakes_the_loop)
{
    bw_timers_t *t = bw_timers_new();
    noter_t n = {t, "", bw_wall_ms()};
    id_of(n.id, 7);
    pthread_t th;
    pthread_create(&th, NULL, note_later, &n);
    int64_t start = bw_now_us();
    bw_timers_wait(t, bw_wall_ms() + 60000);
    ck_assert_int_lt(bw_now_us() - start, 30000000); /* generous: woken, not timed out */
    pthread_join(th, NULL);
    bw_timers_free(t);
}
END_TEST

/* A job may not wait, through the held records' prerequisites, for itself. */
START_TEST(after_cycles_are_found)
{
    static const char *a = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", *b = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
                      *c = "cccccccccccccccccccccccccccccccc", *d = "dddddddddddddddddddddddddddddddd";
    bw_timers_t *t = bw_timers_new();
    char *after_a[] = {(char *)a}, *after_b[] = {(char *)b}, *after_c[] = {(char *)c}, *after_d[] = {(char *)d};
    ck_assert_int_eq(bw_timers_would_cycle(t, a, after_c, 1), 0); /* nothing held: nothing waits */
    note(t, "b000000000000000000000000000000a", b, 1, 0, 1, 1, after_a, 1); /* b's part 1 waits for a */
    note(t, c, NULL, 0, 0, 2, 1, after_b, 1);                                /* c waits for b */
    ck_assert_int_eq(bw_timers_would_cycle(t, a, after_c, 1), 1); /* a -> c -> b -> a */
    ck_assert_int_eq(bw_timers_would_cycle(t, b, after_c, 1), 1); /* b -> c -> b */
    ck_assert_int_eq(bw_timers_would_cycle(t, a, after_d, 1), 0); /* d waits for nothing */
    ck_assert_int_eq(bw_timers_would_cycle(t, d, after_c, 1), 0); /* c, b, a: none waits for d */
    ck_assert_int_eq(bw_timers_would_cycle(t, c, after_b, 1), 0); /* b waits for a only */
    bw_timers_free(t);
}
END_TEST

/* 100,000 timers noted in a scrambled order come out due in order, the heaps kept
 * through removals of every third. */
START_TEST(many_timers_in_order)
{
    bw_timers_t *t = bw_timers_new();
    enum { N = 100000 };
    int64_t base = bw_wall_ms() - 2 * N;
    char id[33];
    for (int i = 0; i < N; i++) {
        int k = (int)(((unsigned)i * 40503u) % N); /* a permutation of 0..N-1 */
        id_of(id, k + 1);
        note(t, id, NULL, 0, base + k, 1, 1, NULL, 0);
    }
    for (int k = 0; k < N; k += 3) {
        id_of(id, k + 1);
        note(t, id, NULL, 0, base + k, 1, 0, NULL, 0);
    }
    bw_timer_t *due;
    size_t n = bw_timers_due(t, bw_wall_ms(), N, NULL, 0, 0, 1000, &due);
    ck_assert_int_eq(n, N - (N + 2) / 3);
    for (size_t i = 1; i < n; i++) ck_assert_int_lt(due[i - 1].not_before_ms, due[i].not_before_ms);
    for (size_t i = 0; i < n; i++) ck_assert_int_ne((due[i].not_before_ms - base) % 3, 0);
    bw_timers_copies_free(due, n);
    bw_timers_free(t);
}
END_TEST

Suite *timers_suite(void) {
    Suite *s = suite_create("timers");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, due_in_release_order);
    tcase_add_test(tc, parts_and_rewrites);
    tcase_add_test(tc, named_job_parts_in_order);
    tcase_add_test(tc, owned_shards_only);
    tcase_add_test(tc, an_earlier_record_wakes_the_loop);
    tcase_add_test(tc, after_cycles_are_found);
    tcase_add_test(tc, many_timers_in_order);
    suite_add_tcase(s, tc);
    return s;
}
