/* health.h — is a shard, or a whole server, fit to take batches?
 *
 * No I/O and no clock of its own: the scheduler reports each job's outcome with the
 * time and asks before each dispatch; the returned transitions tell it when to log and
 * alert. Tested alone (test/unit/test_health.c).
 *
 * A shard: consumer.pause_after_timeouts timeouts in a row hold it; an error only an
 * operator can fix (the error table's *stop*) holds it at once. A held shard is not
 * fetched, and one probe (one message) goes every consumer.pause_ms; its success frees
 * the shard.
 * A server: consumer.pause_after_timeouts connection failures in a row on any of its
 * shards (a fresh connection failed: the error table's *connection*) mark it down. Its
 * shards then wait without taking a worker, and ONE probe for the whole server goes
 * every consumer.pause_ms, so a server that drops packets costs one connect timeout per
 * interval, not one per shard; other servers' shards keep every worker.
 *
 * @locality dispatcher thread. */
#ifndef BW_HEALTH_H
#define BW_HEALTH_H

#include <stdint.h>

#include "db.h"

typedef struct bw_health bw_health_t;

/* Transitions returned by bw_health_report (bit flags). */
enum {
    BW_HEALTH_SHARD_HELD = 1,      /* newly held after timeouts */
    BW_HEALTH_SHARD_STOPPED = 2,   /* held for a stop error (every time: the error may be new) */
    BW_HEALTH_SHARD_FREED = 4,     /* was held, applied again */
    BW_HEALTH_SERVER_DOWN = 8,     /* newly down */
    BW_HEALTH_SERVER_UP = 16,      /* was down, answered again */
};

/* What the scheduler may do with a shard's next job now. */
typedef enum {
    BW_ADMIT_WAIT,  /* not now: *wait_us says until when it might */
    BW_ADMIT_RUN,   /* a normal job */
    BW_ADMIT_PROBE, /* one message, as the shard's or the server's probe */
} bw_admit_t;

/* shard_server[shard] is the index of the shard's server (copied). */
bw_health_t *bw_health_new(int shard_count, int server_cnt, const int *shard_server);
void bw_health_free(bw_health_t *h);
/* failures_to_hold: consumer.pause_after_timeouts; probe_every_us: consumer.pause_ms. */
void bw_health_set_limits(bw_health_t *h, int failures_to_hold, int64_t probe_every_us);

bw_admit_t bw_health_admit(bw_health_t *h, int shard, int64_t now_us, int64_t *wait_us);
/* A probe admitted but not sent after all (the rate limiter said wait). */
void bw_health_unadmit(bw_health_t *h, int shard);
/* What became of a job: `fail` is BW_FAIL_NONE when it was applied. NONE frees the shard
 * and its server; TIMEOUT counts toward the shard, CONNECTION toward the server; STOP
 * holds the shard at once; RETRY (a deadlock, …) counts for nothing. `probe`: the job was
 * admitted as BW_ADMIT_PROBE. Returns BW_HEALTH_* flags. */
unsigned bw_health_report(bw_health_t *h, int shard, bw_fail_t fail, int probe, int64_t now_us);
/* Something else proved the server answers (its ledger was read): it is up. Returns
 * BW_HEALTH_SERVER_UP if it was down. */
unsigned bw_health_server_answered(bw_health_t *h, int server);
/* A fresh connection to the server failed outside a batch (its ledger could not be
 * read): it counts toward the server as BW_FAIL_CONNECTION does. Returns
 * BW_HEALTH_SERVER_DOWN if that marked it down. */
unsigned bw_health_server_unreachable(bw_health_t *h, int server, int64_t now_us);
/* The shard is no longer ours: its own state is cleared (its server's stays). */
void bw_health_forget(bw_health_t *h, int shard);
/* The shard arrives here held (its previous holder's status, handover.h): held, for a
 * stop error if stopped, its probe not before probe_at_us. Its failures start at 0. */
void bw_health_seed_shard(bw_health_t *h, int shard, int stopped, int64_t probe_at_us);
/* None of the server's shards is ours any more: its state is cleared, as its shards'
 * were (their holder decides whether it is down). Returns BW_HEALTH_SERVER_UP if it
 * was down. */
unsigned bw_health_forget_server(bw_health_t *h, int server);

int bw_health_shard_held(const bw_health_t *h, int shard);
/* Held for a stop error (not for timeouts). */
int bw_health_shard_stopped(const bw_health_t *h, int shard);
int bw_health_server_down(const bw_health_t *h, int server);
/* Held, or its server is down: not fetched. */
int bw_health_blocked(const bw_health_t *h, int shard);

#endif
