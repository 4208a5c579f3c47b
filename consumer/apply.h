/* apply.h — applying a run of Kafka messages of one partition to its shard.
 *
 * One call = one transaction on the shard's database:
 *   1. read the partition's stored next offset (SELECT … FOR UPDATE on bw_offsets);
 *   2. skip messages below it (applied before a crash or a rebalance);
 *   3. skip messages whose (job_id, part) is in bw_job_parts (a request resubmitted
 *      under the same request_id);
 *   4. apply the rest as multi-row statements (normally one);
 *   5. record each message in bw_job_parts (its applied and failed counts) and each
 *      refused op in bw_job_failures;
 *   6. send the refused ops to the dead-letter topic and wait for Kafka's ack;
 *   7. store the new next offset; COMMIT.
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
#include "deadletter.h"
#include "metrics.h"

typedef struct {
    const bw_config_t *conf;
    MYSQL **conns;   /* [server_cnt], connected lazily */
    bw_buf_t sql;
    bw_arena_t arena;
    bw_metrics_t *metrics;
    bw_dead_letters_t *dead_letters;
} bw_applier_t;

typedef enum {
    BW_APPLY_OK,        /* committed (possibly with failed rows, see result) */
    BW_APPLY_RETRY,     /* nothing committed; retry the same messages later */
} bw_apply_status_t;

/* Why a batch must be retried; timeouts and connection failures count towards the
 * shard's alert (consumer.pause_after_timeouts). */
typedef enum {
    BW_FAIL_NONE,
    BW_FAIL_TIMEOUT,    /* statement or lock-wait timeout, or no answer in time */
    BW_FAIL_CONNECTION, /* cannot connect, or the connection broke */
    BW_FAIL_OTHER,      /* deadlock, too many connections, dead-letter topic down, … */
    BW_FAIL_STOP,       /* the shard cannot take writes (schema, grants, read-only, disk full):
                           stop it and alert; the batch is kept */
} bw_fail_kind_t;

typedef struct {
    bw_apply_status_t status;
    bw_fail_kind_t fail;       /* set when status is BW_APPLY_RETRY */
    int64_t next_offset;       /* after commit: the partition's next offset */
    uint64_t rows_applied;
    uint64_t rows_failed;
    uint64_t messages_skipped; /* applied before (a replay after a crash or rebalance) */
    uint64_t messages_duplicate; /* parts of a resubmitted request, applied before */
    uint64_t dead_letters;     /* records sent to the dead-letter topic */
    uint64_t messages_undecodable; /* passed whole to the dead-letter topic */
    char error[512];           /* what went wrong, for logs and alerts */
} bw_apply_result_t;

void bw_applier_init(bw_applier_t *ap, const bw_config_t *conf, bw_metrics_t *metrics,
                     bw_dead_letters_t *dead_letters);
void bw_applier_destroy(bw_applier_t *ap);

/* Applies msgs[0..cnt), all of partition `shard`, in offset order. */
void bw_applier_apply(bw_applier_t *ap, int shard, rd_kafka_message_t *const *msgs, size_t cnt,
                      bw_apply_result_t *res);

#endif
