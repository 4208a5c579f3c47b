/* gate.h — why a shard is not running now: ONE answer, as a set of reasons, that
 * fetching (partition.c), dispatch (scheduler.c), the stall alert, the watermarks, the
 * gauges and the status record (progress.c) all ask, so they cannot disagree.
 *
 * A shard's reasons are its own (a pause, its health, a backoff) and every assigned
 * lane's (a gap, a full buffer, a ledger being read, a revocation); a slot's are the
 * shard's and its own partition's. An empty set: the shard runs (it may still wait for
 * its rate limiter: pacing is not a reason). @locality dispatcher thread. */
#ifndef BW_GATE_H
#define BW_GATE_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    BW_GATE_UNASSIGNED,  /* "unassigned": not held by this consumer */
    BW_GATE_REVOKING,    /* "revoking": the group takes the partition back; its jobs drain */
    BW_GATE_LEDGER,      /* "ledger": where it resumes is being read from its database (or could not be) */
    BW_GATE_PAUSED,      /* "paused": by an operator (control topic) */
    BW_GATE_THROTTLE,    /* "throttle": paused by the adaptive throttle, a signal over its critical level */
    BW_GATE_SERVER_DOWN, /* "server_down": its server is unreachable; one probe per server every pause_ms */
    BW_GATE_STOPPED,     /* "stopped": an error only an operator can fix; one probe every pause_ms */
    BW_GATE_UNHEALTHY,   /* "unhealthy": held after consecutive timeouts; one probe every pause_ms */
    BW_GATE_GAP,         /* "gap": its next messages were deleted from Kafka before it applied them */
    BW_GATE_BUFFER_FULL, /* "buffer_full": back-pressure, fetching waits until half of it is applied */
    BW_GATE_BACKOFF,     /* "backoff": its last batch failed and is retried after a backoff */
    BW_GATE_REASONS
} bw_gate_reason_t;

typedef unsigned bw_gate_t; /* a set of reasons: bit BW_GATE_BIT(reason) */
#define BW_GATE_BIT(r) (1u << (r))

/* What each reason stops. Fetching: not for a server down (one of its shards must have
 * a message to probe it with) nor a backoff (the batch stays buffered). Dispatch: only
 * the pauses and what is not ours; a held shard or a down server gets its probes
 * (health.c decides when), a backoff and a full buffer wait for their time. */
#define BW_GATE_STOPS_FETCH                                                                                         \
    (BW_GATE_BIT(BW_GATE_LEDGER) | BW_GATE_BIT(BW_GATE_PAUSED) | BW_GATE_BIT(BW_GATE_THROTTLE) |                    \
     BW_GATE_BIT(BW_GATE_STOPPED) | BW_GATE_BIT(BW_GATE_UNHEALTHY) | BW_GATE_BIT(BW_GATE_GAP) |                     \
     BW_GATE_BIT(BW_GATE_BUFFER_FULL))
#define BW_GATE_STOPS_DISPATCH                                                                                      \
    (BW_GATE_BIT(BW_GATE_UNASSIGNED) | BW_GATE_BIT(BW_GATE_REVOKING) | BW_GATE_BIT(BW_GATE_PAUSED) |                \
     BW_GATE_BIT(BW_GATE_THROTTLE))
/* Stopped on purpose: no stall alert. */
#define BW_GATE_INTENDED (BW_GATE_BIT(BW_GATE_PAUSED) | BW_GATE_BIT(BW_GATE_THROTTLE))
/* Not fetched for long: librdkafka's cached watermarks go stale (progress.c reads its own). */
#define BW_GATE_STALE_WATERMARKS                                                                                    \
    (BW_GATE_BIT(BW_GATE_PAUSED) | BW_GATE_BIT(BW_GATE_THROTTLE) | BW_GATE_BIT(BW_GATE_GAP) |                       \
     BW_GATE_BIT(BW_GATE_LEDGER))
/* Held by its health (bulkwrite_consumer_unhealthy), and with its server down too (the
 * status record's "unhealthy"). */
#define BW_GATE_HELD (BW_GATE_BIT(BW_GATE_STOPPED) | BW_GATE_BIT(BW_GATE_UNHEALTHY))
#define BW_GATE_BLOCKED (BW_GATE_HELD | BW_GATE_BIT(BW_GATE_SERVER_DOWN))

/* The shard's reasons at now_us (monotonic: a backoff ends then). */
bw_gate_t bw_gate_shard(int shard, int64_t now_us);
/* One partition's (slot, config.h): its shard's and its own. */
bw_gate_t bw_gate_slot(int slot, int64_t now_us);

/* "paused", "throttle", … as in the comments above (the status record, GET /v1/shards). */
const char *bw_gate_reason_name(bw_gate_reason_t r);
/* The set's names in enum order, comma-separated ("" for none), cut to fit out. Returns out. */
char *bw_gate_format(bw_gate_t set, char *out, size_t size);

#endif
