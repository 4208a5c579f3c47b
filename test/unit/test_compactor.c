/* test_compactor.c — compaction for a log bounded by size (control/compactor.h): when a
 * live record is written again, a copy that races a newer value or a tombstone, a lost
 * copy; and a simulated bounded log under writers, the compactor's copies arriving late,
 * where a reader that starts at the end finds every key's newest value. */
#include <stdlib.h>
#include <string.h>

#include "compactor.h"
#include "helpers.h"

#define BOUND 100000 /* bytes: a quarter is 25,000 */
#define REC(k, v) ((int64_t)strlen(k) + (int64_t)strlen(v) + BW_COMPACTOR_RECORD_OVERHEAD)

static int due(bw_compactor_t *c, char *key, char *value, int64_t *origin) {
    const void *k, *v;
    size_t kl, vl;
    if (!bw_compactor_due(c, &k, &kl, &v, &vl, origin)) return 0;
    memcpy(key, k, kl), key[kl] = '\0';
    if (vl) memcpy(value, v, vl); /* a tombstone's value is NULL */
    value[vl] = '\0';
    return 1;
}

/* n records of other keys, each `size` bytes as the bound counts them, from *off on */
static void traffic(bw_compactor_t *c, int64_t *off, int n) {
    char key[32];
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof(key), "other/%d", i % 7);
        bw_compactor_read(c, (*off)++, -1, key, strlen(key), "x", 1);
    }
}

START_TEST(live_record_written_again_each_quarter) {
    bw_compactor_t *c = bw_compactor_new(BOUND, 1000000);
    int64_t off = 0, origin;
    char key[64], value[64];
    bw_compactor_read(c, off++, -1, "shard/1/pause", 13, "paused", 6);
    int per = (int)REC("other/0", "x");
    traffic(c, &off, 25000 / per - 2);
    ck_assert(!due(c, key, value, &origin)); /* a quarter is not yet written after it */
    traffic(c, &off, 3);
    int found = 0;
    while (due(c, key, value, &origin))
        if (!strcmp(key, "shard/1/pause")) {
            ck_assert_str_eq(value, "paused");
            ck_assert_int_eq(origin, 0);
            found = 1;
        }
    ck_assert(found);
    /* its copy read back: not due again until another quarter */
    bw_compactor_read(c, off++, 0, "shard/1/pause", 13, "paused", 6);
    traffic(c, &off, 25000 / per / 2);
    while (due(c, key, value, &origin)) ck_assert_str_ne(key, "shard/1/pause");
    ck_assert_uint_eq(bw_compactor_live_records(c), 8);
    bw_compactor_free(c);
}
END_TEST

START_TEST(stale_copy_is_followed_by_the_newest) {
    bw_compactor_t *c = bw_compactor_new(BOUND, 1000000);
    int64_t off = 0, origin;
    char key[64], value[64];
    bw_compactor_read(c, off++, -1, "k", 1, "v1", 2);
    traffic(c, &off, 300);
    ck_assert(due(c, key, value, &origin));
    ck_assert_str_eq(key, "k");
    ck_assert_str_eq(value, "v1");
    /* an operator writes v2 before the copy of v1 lands after it */
    int64_t v2 = off;
    bw_compactor_read(c, off++, -1, "k", 1, "v2", 2);
    bw_compactor_read(c, off++, 0, "k", 1, "v1", 2);
    ck_assert(due(c, key, value, &origin)); /* at once, not a quarter later */
    ck_assert_str_eq(key, "k");
    ck_assert_str_eq(value, "v2");
    ck_assert_int_eq(origin, v2);
    bw_compactor_free(c);
}
END_TEST

START_TEST(stale_copy_after_a_tombstone) {
    bw_compactor_t *c = bw_compactor_new(BOUND, 1000000);
    int64_t off = 0, origin;
    char key[64], value[64];
    bw_compactor_read(c, off++, -1, "k", 1, "v1", 2);
    traffic(c, &off, 300);
    ck_assert(due(c, key, value, &origin));
    int64_t tomb = off;
    bw_compactor_read(c, off++, -1, "k", 1, NULL, 0);
    ck_assert_uint_eq(bw_compactor_live_records(c), 7); /* the others; k is deleted */
    bw_compactor_read(c, off++, 0, "k", 1, "v1", 2); /* the copy resurrects v1 here... */
    ck_assert(due(c, key, value, &origin));           /* ...so the tombstone is written again */
    ck_assert_str_eq(key, "k");
    ck_assert_str_eq(value, "");
    ck_assert_int_eq(origin, tomb);
    /* Kafka refused that copy: it is handed out again at once, then read back */
    bw_compactor_lost(c, "k", 1, tomb);
    ck_assert(due(c, key, value, &origin));
    ck_assert_str_eq(key, "k");
    ck_assert_str_eq(value, "");
    ck_assert_int_eq(origin, tomb);
    bw_compactor_read(c, off++, tomb, "k", 1, NULL, 0);
    /* then k is forgotten: nothing of it is due however much is written */
    for (int i = 0; i < 20; i++) {
        traffic(c, &off, 100);
        while (due(c, key, value, &origin)) {
            ck_assert_str_ne(key, "k");
            bw_compactor_read(c, off++, origin, key, strlen(key), value, strlen(value));
        }
    }
    bw_compactor_free(c);
}
END_TEST

START_TEST(lost_copy_is_handed_out_again) {
    bw_compactor_t *c = bw_compactor_new(BOUND, 1000000);
    int64_t off = 0, origin;
    char key[64], value[64];
    bw_compactor_read(c, off++, -1, "k", 1, "v", 1);
    traffic(c, &off, 300);
    int times = 0;
    for (int round = 0; round < 3; round++) {
        while (due(c, key, value, &origin))
            if (!strcmp(key, "k")) times++; /* never read back: the produce failed */
            else bw_compactor_read(c, off++, origin, key, strlen(key), value, strlen(value));
        traffic(c, &off, 300);
    }
    ck_assert_int_eq(times, 3);
    /* a copy Kafka refused is handed out again at once, not a quarter later */
    traffic(c, &off, 300);
    while (due(c, key, value, &origin))
        if (strcmp(key, "k")) bw_compactor_read(c, off++, origin, key, strlen(key), value, strlen(value));
    ck_assert(!due(c, key, value, &origin));
    bw_compactor_lost(c, "k", 1, 0);
    ck_assert(due(c, key, value, &origin) && !strcmp(key, "k") && origin == 0);
    /* the record bound counts too: 40 records of a 100-record bound are past a quarter */
    bw_compactor_t *r = bw_compactor_new(INT64_MAX, 100);
    off = 0;
    bw_compactor_read(r, off++, -1, "k", 1, "v", 1);
    traffic(r, &off, 24);
    ck_assert(!due(r, key, value, &origin));
    traffic(r, &off, 1);
    ck_assert(due(r, key, value, &origin) && !strcmp(key, "k"));
    bw_compactor_free(r);
    bw_compactor_free(c);
}
END_TEST

/* ---- a bounded log under writers ----------------------------------------------------------- */

typedef struct {
    char key[16], value[16];
    int64_t offset, origin; /* origin -1: an original */
} rec_t;

#define LOG_CAP 400000
static rec_t sim_log[LOG_CAP];

START_TEST(bounded_log_keeps_every_newest_value) {
    bw_compactor_t *c = bw_compactor_new(BOUND, 1000000);
    int64_t start = 0, end = 0, size = 0, read = 0; /* the log: [start, end), size as bounded */
    char truth[40][16];                              /* "" = deleted or never written */
    memset(truth, 0, sizeof(truth));
    rec_t queue[64]; /* copies handed out and not yet in the log */
    int queued = 0;
    srand(7);
    for (int step = 0; step < 60000; step++) {
        rec_t r = {.origin = -1};
        int kind = rand() % 100;
        if (kind < 60 || queued == 0) { /* a writer */
            int k = rand() % 40;
            snprintf(r.key, sizeof(r.key), "key/%d", k);
            if (rand() % 20) snprintf(r.value, sizeof(r.value), "v%d", step);
            snprintf(truth[k], sizeof(truth[k]), "%s", r.value);
        } else { /* a copy lands, possibly after newer writes of its key */
            int q = rand() % queued;
            r = queue[q];
            queue[q] = queue[--queued];
        }
        r.offset = end;
        sim_log[end++ % LOG_CAP] = r;
        size += REC(r.key, r.value);
        while (size > BOUND) { /* the bound: the oldest records go, live or not */
            rec_t *old = &sim_log[start++ % LOG_CAP];
            size -= REC(old->key, old->value);
        }
        /* the compactor reads behind the end, and hands out what is due */
        while (read < end && (rand() % 3 || read + 20 < end)) {
            rec_t *x = &sim_log[read++ % LOG_CAP];
            bw_compactor_read(c, x->offset, x->origin, x->key, strlen(x->key), x->value, strlen(x->value));
        }
        const void *k, *v;
        size_t kl, vl;
        int64_t origin;
        while (queued < 64 && bw_compactor_due(c, &k, &kl, &v, &vl, &origin)) {
            rec_t *q = &queue[queued++];
            memset(q, 0, sizeof(*q));
            memcpy(q->key, k, kl);
            if (vl) memcpy(q->value, v, vl);
            q->origin = origin;
        }
    }
    ck_assert(start > end * 9 / 10); /* the log dropped nearly all that was written */
    /* a reader that starts now: the newest version per key, copies by their origin */
    char seen[40][16];
    int64_t version[40];
    memset(seen, 0, sizeof(seen));
    for (int k = 0; k < 40; k++) version[k] = -1;
    for (int64_t o = start; o < end; o++) {
        rec_t *x = &sim_log[o % LOG_CAP];
        int k = atoi(x->key + 4);
        int64_t v = x->origin >= 0 ? x->origin : x->offset;
        if (v < version[k]) continue;
        version[k] = v;
        snprintf(seen[k], sizeof(seen[k]), "%s", x->value);
    }
    /* copies still in the queue have not landed; one that would be stale is written over */
    for (int k = 0; k < 40; k++) ck_assert_msg(!strcmp(seen[k], truth[k]), "key/%d: %s, not %s", k, seen[k], truth[k]);
    bw_compactor_free(c);
}
END_TEST

Suite *compactor_suite(void) {
    Suite *s = suite_create("compactor");
    TCase *tc = tcase_create("compactor");
    tcase_add_test(tc, live_record_written_again_each_quarter);
    tcase_add_test(tc, stale_copy_is_followed_by_the_newest);
    tcase_add_test(tc, stale_copy_after_a_tombstone);
    tcase_add_test(tc, lost_copy_is_handed_out_again);
    tcase_add_test(tc, bounded_log_keeps_every_newest_value);
    suite_add_tcase(s, tc);
    return s;
}
