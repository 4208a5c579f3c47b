/* apply.h — applying a run of Kafka messages of one partition to its shard.
 *
 * One call = one transaction on the shard's database:
 *   1. read the partition's stored next offset (SELECT … FOR UPDATE on bw_offsets);
 *   2. skip messages below it (applied before a crash or a rebalance);
 *   3. apply the rest as multi-row statements (normally one);
 *   4. store the new next offset;
 *   5. COMMIT.
 * The offset moves only with the data, so a replayed message is never applied twice.
 * When a statement hits a data error (duplicate key, value too long, …), the rows are
 * applied one at a time under savepoints so that only the offending rows fail.
 *
 * @locality worker thread; an applier is owned by one worker. */
#ifndef BW_APPLY_H
#define BW_APPLY_H

#include <librdkafka/rdkafka.h>
#include <mysql.h>

#include "arena.h"
#include "buf.h"
#include "config.h"
#include "metrics.h"

typedef struct {
    const bw_config_t *conf;
    MYSQL **conns;   /* [server_cnt], connected lazily */
    bw_buf_t sql;
    bw_arena_t arena;
    bw_metrics_t *metrics;
} bw_applier_t;

typedef enum {
    BW_APPLY_OK,        /* committed (possibly with failed rows, see result) */
    BW_APPLY_RETRY,     /* nothing committed; retry the same messages later */
} bw_apply_status_t;

typedef struct {
    bw_apply_status_t status;
    int timeout;               /* the retry was caused by a timeout */
    int64_t next_offset;       /* after commit: the partition's next offset */
    uint64_t rows_applied;
    uint64_t rows_failed;
    uint64_t messages_skipped; /* applied before (a replay after a crash or rebalance) */
    char error[512];           /* what went wrong, for logs and alerts */
} bw_apply_result_t;

void bw_applier_init(bw_applier_t *ap, const bw_config_t *conf, bw_metrics_t *metrics);
void bw_applier_destroy(bw_applier_t *ap);

/* Applies msgs[0..cnt), all of partition `shard`, in offset order. */
void bw_applier_apply(bw_applier_t *ap, int shard, rd_kafka_message_t *const *msgs, size_t cnt,
                      bw_apply_result_t *res);

#endif
