/* backlog.h — per-shard admission control: what Kafka holds that the shard has not
 * applied, and whether one more message may join it.
 *
 * "Accepted" means durable until applied: a shard whose backlog would pass
 * proxy.backlog_max_messages or proxy.backlog_max_bytes gets no new message; the
 * proxy answers 429 with Retry-After for those ops and accepts the rest of the request.
 * On the embedded Kafka (librdkafka's mock cluster, which deletes the oldest data of a
 * partition past 5 MiB or 100,000 message sets) the bounds are capped below those
 * limits, so the embedded default can never lose an accepted op.
 *
 * What the backlog is made of, per shard:
 *  - applied: the next offset the shard applies, from the consumers' status records
 *    (their ledgers), and at least Kafka's log start offset;
 *  - high: the high watermark, from the status records, from ListOffsets (every second,
 *    one request per broker) and from this proxy's own acknowledgements;
 *  - messages this proxy produced, with their exact sizes, until applied; messages of
 *    other proxies count at this proxy's mean message size for the shard, and on the
 *    embedded Kafka those older than its own (a restart) as kafka.message_max_bytes;
 *  - reservations: admitted messages not yet acknowledged or failed.
 *
 * With priority lanes (config `lanes`) each lane's partition of a shard has its own
 * backlog: the functions below that take `shard` take a slot (config.h's
 * bw_config_slot(conf, lane, shard); the default lane's slots are the shard numbers),
 * so a full bulk lane never refuses an urgent request.
 *
 * @locality any thread (a mutex guards the table; the refresher has its own thread). */
#ifndef BW_BACKLOG_H
#define BW_BACKLOG_H

#include <librdkafka/rdkafka.h>
#include <stddef.h>
#include <stdint.h>

#include "bulkwrite/internal/v1/records.pb-c.h"
#include "config.h"

typedef struct bw_backlog bw_backlog_t;

/* A shard's backlog as the proxy sees it now. */
typedef struct {
    int64_t messages, bytes;     /* unapplied, including reservations */
    int64_t applied, high, low;  /* offsets; -1 while unknown */
    int64_t max_messages, max_bytes;
} bw_backlog_view_t;

/* rk: a client on the cluster (ListOffsets); NULL = no refresher (tests). embedded: cap
 * the bounds below the mock cluster's per-partition limits. */
bw_backlog_t *bw_backlog_new(const bw_config_t *conf, rd_kafka_t *rk, int embedded);
void bw_backlog_destroy(bw_backlog_t *b);

/* The embedded caps, applied over the configured bounds. */
#define BW_BACKLOG_EMBEDDED_MAX_MESSAGES 50000
#define BW_BACKLOG_EMBEDDED_MAX_BYTES (4 * 1024 * 1024)

/* Bytes a message counts for: payload, key and headers, plus record overhead. */
size_t bw_backlog_message_bytes(size_t payload, size_t key, size_t headers);

/* Reserves room for one message of `bytes` on `shard`, waiting until deadline_us
 * (bw_now_us clock) for the shard to apply enough: 1 if admitted (settle it later), 0
 * if the shard is still full; *view (if not NULL) is the backlog before this message. A
 * shard with nothing unapplied always admits one message, so any message can pass. */
int bw_backlog_admit(bw_backlog_t *b, int shard, size_t bytes, int64_t deadline_us, bw_backlog_view_t *view);
/* The admitted message's fate: acknowledged at `offset`, or failed (offset < 0). */
void bw_backlog_settle(bw_backlog_t *b, int shard, size_t bytes, int64_t offset);

/* Offsets learned elsewhere (status records, ListOffsets); -1 = not known. */
void bw_backlog_observe(bw_backlog_t *b, int shard, int64_t applied, int64_t high, int64_t low);
/* The status-record hook of the shard table (shardtable.h). */
void bw_backlog_on_status(void *ud, int shard, const Bulkwrite__Internal__V1__ShardStatus *st);

void bw_backlog_view(bw_backlog_t *b, int shard, bw_backlog_view_t *view);

#endif
