/* apply.h — applying a run of Kafka messages of one partition to its shard.
 *
 * One call = one transaction on the shard's database, the ledger's protocol
 * (store/ledger.h, which owns every statement on the ledger's tables):
 *   1. read the partition's stored next offset (SELECT … FOR UPDATE on bw_offsets);
 *   2. skip messages below it (applied before a crash or a rebalance);
 *   3. skip messages whose (job_id, part) is in bw_job_parts (a request resubmitted
 *      under the same request_id), and those of a cancelled job (not recorded: the
 *      proxy counts them cancelled once the shard's offset has passed them);
 *   4. apply the rest as multi-row statements (increments of one object summed first
 *      where the object type sets coalesce_increments, consumer/coalesce.h), each under the server's packet limit
 *      (consumer.statement_packet_pct of its max_allowed_packet): CREATE and UPSERT as
 *      one prepared INSERT executed over arrays of the rows' values where the server can
 *      (consumer.array_binding, store/sqlbind.h), the rest as text (store/sql.h);
 *   5. record each message in bw_job_parts (its applied and failed counts) and each
 *      refused op in bw_job_failures; store the new next offset;
 *   6. send the refused ops to the dead-letter topic and wait for Kafka's ack; COMMIT.
 * The offset moves only with the data, so a replayed message is never applied twice.
 * When a statement hits a data error (duplicate key, value too long, …), the rows are
 * applied one at a time under savepoints so that only the offending rows fail; a row
 * whose statement alone is over max_allowed_packet fails the same way (1153).
 *
 * Connections: one per server, opened on first use, pinged before use after
 * consumer.connection_check_idle_ms idle, closed after consumer.connection_idle_close_ms.
 * A reused connection that turns out closed (the server's wait_timeout, a load balancer)
 * is replaced and the batch applied again at once: only a failure on a fresh connection
 * is BW_FAIL_CONNECTION. A connection's prepared statements are closed with it.
 *
 * @locality worker thread; an applier is owned by one worker. */
#ifndef BW_APPLY_H
#define BW_APPLY_H

#include <librdkafka/rdkafka.h>
#include <mysql.h>

#include "arena.h"
#include "buf.h"
#include "config.h"
#include "db.h"
#include "deadletter.h"
#include "metrics.h"
#include "shardtable.h"
#include "sqlbind.h"

/* A pooled connection to one server. */
typedef struct {
    MYSQL *db;                /* NULL: none open */
    unsigned long max_packet; /* the server's max_allowed_packet, read when connected */
    int64_t used_us;          /* when its last batch ended (bw_now_us) */
    bw_sqlbind_cache_t stmts; /* its prepared statements, closed with it */
} bw_apply_conn_t;

typedef struct {
    const bw_config_t *conf;
    bw_apply_conn_t *conns;   /* [server_cnt] */
    bw_buf_t sql;
    bw_sqlbind_t bind;        /* bind arrays for array-bound statements */
    bw_arena_t arena;
    bw_metrics_t *metrics;
    bw_dead_letters_t *dead_letters;
    /* The control topic's table (NULL: none): messages of a job cancelled there are
     * skipped, neither applied nor recorded (DELETE /v1/jobs/{id}). */
    bw_shard_table_t *jobs;
} bw_applier_t;

typedef enum {
    BW_APPLY_OK,        /* committed (possibly with failed rows, see result) */
    BW_APPLY_RETRY,     /* nothing committed; retry the same messages later */
    BW_APPLY_REWIND,    /* nothing committed: the shard's ledger is behind what this consumer
                           applied (a failover to a replica, a restored backup): fetch again
                           from next_offset (-1: the log's beginning) */
} bw_apply_status_t;

typedef struct {
    bw_apply_status_t status;
    bw_fail_t fail;            /* why, when status is BW_APPLY_RETRY (db.h; never DATA or DECODE) */
    int64_t next_offset;       /* after commit: the partition's next offset; REWIND: where to fetch */
    uint64_t rows_applied;
    uint64_t rows_failed;
    uint64_t messages_skipped; /* applied before (a replay after a crash or rebalance) */
    uint64_t messages_duplicate; /* parts of a resubmitted request, applied before */
    uint64_t dead_letters;     /* records sent to the dead-letter topic */
    uint64_t messages_undecodable; /* passed whole to the dead-letter topic */
    uint64_t reconnects;       /* reused connections found closed and replaced (not errors) */
    uint64_t statements;       /* data statements run (a refused one and its rows retried one by one included) */
    uint64_t statements_bound; /* statements sent array-bound, refused ones included (consumer.array_binding) */
    uint64_t rows_coalesced;   /* increments added into another op's row (coalesce.h) */
    uint64_t ops_cancelled;    /* ops of cancelled jobs' messages, skipped */
    /* when rows_failed: the last refused op's job (its message's id), MySQL error and reason */
    char failure_job[33];
    unsigned failure_code;
    char failure_reason[160];
    char error[512];           /* what went wrong, for logs and alerts */
} bw_apply_result_t;

void bw_applier_init(bw_applier_t *ap, const bw_config_t *conf, bw_metrics_t *metrics,
                     bw_dead_letters_t *dead_letters);
void bw_applier_destroy(bw_applier_t *ap);

/* Applies msgs[0..cnt), all of one partition, in offset order: `slot` names it (config.h:
 * lane * shards.count + shard; its ledger row is the lane's). `applied` is the partition's
 * next offset as this consumer last committed or read it (-1 unknown): a ledger found
 * behind it answers BW_APPLY_REWIND. Closes the applier's idle connections first
 * (bw_applier_close_idle). */
void bw_applier_apply(bw_applier_t *ap, int slot, int64_t applied, rd_kafka_message_t *const *msgs, size_t cnt,
                      bw_apply_result_t *res);

/* Closes the connections idle for consumer.connection_idle_close_ms or longer at
 * `now_us` (bw_now_us). Returns how many it closed. A worker calls it when it wakes
 * without a job, so that an idle worker holds no server thread. */
int bw_applier_close_idle(bw_applier_t *ap, int64_t now_us);

#endif
