/* workload.h — the deterministic jobs of bw-workload, shared with bw-bench so that the
 * benchmark's direct baselines write exactly the rows the pipeline is fed.
 *
 * A JOB is NAME:COUNT[:SHARD] (see bw-workload.c for each kind). A job's op i always
 * makes the same pin, so a submit, a verify and a direct baseline agree row for row.
 * Header-only (static inline): tools/ programs are one object each.
 *
 * @locality any thread; pure functions of their arguments. */
#ifndef BW_TOOLS_WORKLOAD_H
#define BW_TOOLS_WORKLOAD_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "shard.h"

#define PIN_TYPE 1
#define USER_TYPE 0
#define IMAGE_LOCAL_BASE 1000000000ULL

/* bump:N adds 1 to the likes of spread:N's pin i (a delay queue's test: sent with the
 * spread at the same not_before, it must apply after the create) */
typedef enum { JOB_FEED, JOB_SPREAD, JOB_CLEANUP, JOB_LIKE, JOB_IMAGE, JOB_COUNTER, JOB_BUMP } job_kind_t;
static const char *const job_names[] = {"feed", "spread", "cleanup", "like", "image", "counter", "bump"};
#define COUNTER_PINS 1000 /* a counter job's increments fall on the feed's first 1,000 pins */
typedef struct {
    job_kind_t kind;
    long count;
    int shard;
} job_t;

/* A pin as a job leaves it. */
typedef struct {
    uint64_t id, owner;
    long board, likes;
    int present;
    int image; /* holds bw-workload's pin_image(id); else the image is NULL */
} pin_t;

static inline uint64_t feed_owner(int shard) { return bw_id_make((unsigned)shard, USER_TYPE, 42); }
static inline uint64_t feed_pin(int shard, long i) { return bw_id_make((unsigned)shard, PIN_TYPE, (uint64_t)i + 1); }
static inline uint64_t image_pin(int shard, long i) {
    return bw_id_make((unsigned)shard, PIN_TYPE, IMAGE_LOCAL_BASE + (uint64_t)i);
}
static inline int spread_shard(int shards, long i) { return (int)(i % shards); }
static inline uint64_t spread_owner(int shards, long i) {
    return bw_id_make((unsigned)spread_shard(shards, i), USER_TYPE, 1000 + (uint64_t)(i % 97));
}
static inline uint64_t spread_pin(int shards, long i) {
    return bw_id_make((unsigned)spread_shard(shards, i), PIN_TYPE, 10000000 + (uint64_t)i);
}

static inline void pin_title(char *buf, size_t size, uint64_t id) {
    snprintf(buf, size, "pin %" PRIu64 " \xe2\x80\x94 l'\xc3\xa9t\xc3\xa9 \"quoted\" \\ \xf0\x9f\x98\x80", id);
}

static inline int is_create(job_kind_t kind) { return kind == JOB_FEED || kind == JOB_SPREAD || kind == JOB_IMAGE; }

/* The pin that op i of a create job makes; submit sends it, verify expects it. */
static inline pin_t created_pin(int shards, const job_t *jb, long i) {
    pin_t p = {.board = i % 100, .present = 1, .image = jb->kind == JOB_IMAGE};
    if (jb->kind == JOB_SPREAD) {
        p.id = spread_pin(shards, i);
        p.owner = spread_owner(shards, i);
    } else {
        p.id = jb->kind == JOB_IMAGE ? image_pin(jb->shard, i) : feed_pin(jb->shard, i);
        p.owner = feed_owner(jb->shard);
    }
    return p;
}

/* How many ops a job sends: cleanup and like touch every 10th (10th+1) pin among the
 * first COUNT of the feed on their shard. */
static inline long job_ops(const job_t *jb) {
    if (jb->kind == JOB_CLEANUP) return (jb->count + 9) / 10;
    if (jb->kind == JOB_LIKE) return (jb->count + 8) / 10;
    return jb->count;
}

/* The feed index that op i of a counter job increments: scattered over the first
 * COUNTER_PINS (a multiplicative hash), so one pin repeats at random distances, as views
 * and likes of popular pins do. */
static inline long counter_index(long i) {
    uint64_t x = (uint64_t)i * 0x9E3779B97F4A7C15ull; /* not a permutation mod 1,000: repeats come at random */
    return (long)((x ^ x >> 31) % COUNTER_PINS);
}

/* The pin id that op i of a cleanup, like, counter or bump job names. */
static inline uint64_t touched_pin(int shards, const job_t *jb, long i) {
    if (jb->kind == JOB_BUMP) return spread_pin(shards, i);
    if (jb->kind == JOB_COUNTER) return feed_pin(jb->shard, counter_index(i));
    return feed_pin(jb->shard, jb->kind == JOB_CLEANUP ? i * 10 : i * 10 + 1);
}

static inline int parse_job(const bw_config_t *conf, const char *s, job_t *jb) {
    char name[16];
    long count = 0;
    int shard = 0;
    int n = sscanf(s, "%15[a-z]:%ld:%d", name, &count, &shard);
    if (n < 2 || count < 0) return -1;
    jb->count = count;
    jb->shard = shard;
    size_t k = 0, kinds = sizeof(job_names) / sizeof(job_names[0]);
    while (k < kinds && strcmp(name, job_names[k]) != 0) k++;
    if (k == kinds) return -1;
    jb->kind = (job_kind_t)k;
    if (jb->kind != JOB_SPREAD && jb->kind != JOB_BUMP && (n < 3 || shard < 0 || shard >= conf->shard_count)) return -1;
    return 0;
}

#endif
