/* ledger.h — the exactly-once ledger each shard database keeps about itself. This file
 * pair owns its three tables: their DDL, every read and every write. Nothing else names
 * them in SQL.
 *
 *   bw_offsets       (topic, kafka_partition) -> next_offset: the next offset of the
 *                    batches topic's partition (= the shard) still to apply; one row
 *                    per lane (each lane has its topic). The functions name a row by
 *                    its *slot* (config.h: lane * shards.count + shard).
 *   bw_job_parts     (job_id, part) -> kafka_offset, rows_applied, rows_failed: one row
 *                    per message of a job applied on this shard.
 *   bw_job_failures  (job_id, op_index) -> part, object_id, error_code, reason: one row
 *                    per op the shard refused.
 *
 * The protocol (consumer/apply.c runs it; one apply = one transaction on the shard):
 *   1. bw_ledger_lock_offset reads the partition's next offset FOR UPDATE: the row lock
 *      serialises two consumers that both believe they hold the partition (a rebalance
 *      in flight); messages below it were applied before and are skipped.
 *   2. bw_ledger_find_applied dedups by (job_id, part): a part already in bw_job_parts,
 *      or repeated within the batch, is a resubmitted request's and is not applied again.
 *   3. the data statements run (not the ledger's business).
 *   4. bw_ledger_write_parts, bw_ledger_write_failures and bw_ledger_write_offset write,
 *      in that same transaction, the parts applied now with their counts, the refused
 *      ops, and the new next offset. The refused ops then go to the dead-letter topic
 *      (acknowledged before the commit). COMMIT makes the data and its ledger durable
 *      together: the offset can never disagree with the data, so a replayed message is
 *      never applied twice and an applied one never lost.
 * Outside that transaction, without locks:
 *   - a consumer taking partitions over reads where each resumes (bw_ledger_read_offsets,
 *     one query per server for many shards);
 *   - the proxy answers GET /v1/jobs/{id} from bw_job_parts' sums (bw_ledger_read_job)
 *     and a sample of bw_job_failures (bw_ledger_read_job_failures). Both see only
 *     committed batches, so the counts are exact.
 *
 * Statements: database names come from the config (bw_config_shard_db), values are
 * escaped (bw_sql_append_escaped) or numbers. `scratch` holds each statement; a
 * function allocates nothing per row.
 *
 * Errors: each function returns 0, or the MySQL error number of `db` (mysql_error(db)
 * says more; CR_UNKNOWN_ERROR when the client library gave none).
 *
 * @locality any thread; a MYSQL handle and its scratch buffer belong to their caller. */
#ifndef BW_LEDGER_H
#define BW_LEDGER_H

#include <mysql.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "config.h"

/* Appends the DDL of the three tables in shard database `dbname` (IF NOT EXISTS), one
 * statement per line, each ending with ";\n" (bw_db_schema_sql calls it). */
void bw_ledger_schema_sql(const char *dbname, bw_buf_t *out);

/* ---- bw_offsets ------------------------------------------------------------------- */

/* Reads the stored next offsets of slots[0..n), all on `db`'s server, with one query
 * per BW_LEDGER_READ_CHUNK shards (a rebalance of 4,096 partitions costs a few round
 * trips per server, not 4,096). offsets[i] = -1 where none is stored. Offsets are
 * undefined on error. */
#define BW_LEDGER_READ_CHUNK 512
unsigned bw_ledger_read_offsets(MYSQL *db, const bw_config_t *conf, const int *slots, size_t n,
                                int64_t *offsets, bw_buf_t *scratch);

/* Step 1: reads `slot`'s next offset FOR UPDATE, in the caller's open transaction.
 * *next = -1 when none is stored. */
unsigned bw_ledger_lock_offset(MYSQL *db, const bw_config_t *conf, int slot, int64_t *next,
                               bw_buf_t *scratch);

/* Step 4: stores `next` as `slot`'s next offset (insert or update). */
unsigned bw_ledger_write_offset(MYSQL *db, const bw_config_t *conf, int slot, int64_t next,
                                bw_buf_t *scratch);

/* ---- bw_job_parts ----------------------------------------------------------------- */

/* A message of a job, as bw_job_parts keeps it. */
typedef struct {
    const char *job_id;      /* NULL: not a job's message (skipped, undecodable): ignored */
    uint32_t part;           /* the message's number within its job */
    int64_t kafka_offset;
    uint32_t rows_applied, rows_failed;
    int duplicate;           /* set by bw_ledger_find_applied */
} bw_ledger_part_t;

/* Step 2: sets parts[i].duplicate where (job_id, part) is in bw_job_parts of `shard`, or
 * repeats an earlier entry of parts[]. One query for all of them (none if every entry
 * is ignored or a repeat). */
unsigned bw_ledger_find_applied(MYSQL *db, const bw_config_t *conf, int shard, bw_ledger_part_t *parts,
                                size_t n, bw_buf_t *scratch);

/* Step 4: inserts the entries that are neither ignored nor duplicates, in one statement. */
unsigned bw_ledger_write_parts(MYSQL *db, const bw_config_t *conf, int shard, const bw_ledger_part_t *parts,
                               size_t n, bw_buf_t *scratch);

/* A named job's parts (docs/jobs.md) carry ids of their own, made from the job's id:
 * its first BW_LEDGER_JOB_PREFIX hex digits, then the part number in 12. The ledger
 * rows of every part of a job are then one range of the primary key, which the reads
 * below scan when asked for a named job. */
#define BW_LEDGER_JOB_PREFIX 20
/* The highest part number a named job may have (a million parts): the proxy refuses a
 * higher job_part (400), so no request can make a job's bookkeeping large. */
#define BW_JOB_PART_MAX 999999
void bw_ledger_part_id(const char job_id[33], uint32_t part, char out[33]);
/* The part number of a part's id (its last 12 hex digits). */
uint32_t bw_ledger_part_of(const char *part_id);

/* A job's counts on one shard: the sums over its parts there. */
typedef struct {
    int shard;
    uint32_t applied, failed;
} bw_ledger_job_shard_t;

/* Fills applied and failed of shards[0..n), all on `db`'s server, for job `job_id`
 * (0 where nothing was applied), in one query; `named`: the sums over every part of the
 * named job `job_id` (bw_ledger_part_id). */
unsigned bw_ledger_read_job(MYSQL *db, const bw_config_t *conf, const char *job_id, int named,
                            bw_ledger_job_shard_t *shards, size_t n, bw_buf_t *scratch);

/* ---- bw_job_failures -------------------------------------------------------------- */

/* An op a shard refused, as bw_job_failures keeps it. */
typedef struct {
    const char *job_id;      /* written; not filled by a read (it asks for one job) */
    int shard;               /* read: the shard that refused it; not written (each shard has its table) */
    uint32_t part;           /* written; not filled by a read */
    uint32_t job_part;       /* read, of a named job: the part the op came in */
    uint32_t op_index;       /* the op's number in its request */
    uint64_t object_id;
    unsigned error_code;     /* MySQL error number; 0 if not from MySQL */
    char *reason;            /* written: its first 1000 bytes; read: malloc'd, the caller frees it */
    /* the op as the API's JSON (the dead-letter record's "op"), for a replay; NULL: none
     * (written before failures kept their ops). Read by bw_ledger_read_failures_page only (malloc'd). */
    const char *op;
    int op_truncated;        /* op lacks values too long to keep: it cannot be sent again as it is */
    char part_id[33];        /* read by bw_ledger_read_failures_page: the row's job_id (a page's cursor) */
} bw_ledger_failure_t;

/* Step 4: inserts failures[0..n) into `shard`'s table, in as many statements as keep each
 * under `max_bytes` (reasons are cut to 1000 bytes, so a row is at most ~2.4 KB besides
 * its op, which the caller keeps well under max_bytes / 2). An op
 * refused again by a re-split resubmission keeps its latest reason and code. */
unsigned bw_ledger_write_failures(MYSQL *db, const bw_config_t *conf, int shard, const bw_ledger_failure_t *failures,
                                  size_t n, size_t max_bytes, bw_buf_t *scratch);

/* Reads, in one query, the first `per_shard` failures (by part, then op_index) of job
 * `job_id` (`named`: of every part of it) on each of shards[0..n) whose failed count is
 * not 0 (as bw_ledger_read_job filled it), all on `db`'s server. Appends them to
 * out[*cnt..cap) and advances *cnt; rows past cap are dropped. */
unsigned bw_ledger_read_job_failures(MYSQL *db, const bw_config_t *conf, const char *job_id, int named,
                                     const bw_ledger_job_shard_t *shards, size_t n, int per_shard,
                                     bw_ledger_failure_t *out, size_t cap, size_t *cnt, bw_buf_t *scratch);

/* One page of the failures of job `job_id` (`named`: of every part) on `shard`: at most
 * `limit` rows (out has room for them) by (part, op_index), after the row (after_id, the
 * row's job_id or part id, and after_op) when after_id is not NULL, of error number
 * `code` when not 0; with their ops. *cnt rows read; each row's reason and op are
 * malloc'd (bw_ledger_failure_free). */
unsigned bw_ledger_read_failures_page(MYSQL *db, const bw_config_t *conf, const char *job_id, int named, int shard,
                                      const char *after_id, uint32_t after_op, unsigned code, size_t limit,
                                      bw_ledger_failure_t *out, size_t *cnt, bw_buf_t *scratch);
/* Frees what a read allocated in f (its reason and op). */
void bw_ledger_failure_free(bw_ledger_failure_t *f);

#endif
