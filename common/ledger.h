/* ledger.h — the exactly-once ledger each shard database keeps about itself.
 *
 * bw_offsets holds, per partition of the batches topic, the next offset to apply; it
 * moves only inside the transaction that applies the batch (consumer/apply.c), so the
 * data and its offset can never disagree. A consumer that takes a partition over reads
 * it to know where to resume.
 *
 * @locality any thread; a MYSQL handle belongs to its caller. */
#ifndef BW_LEDGER_H
#define BW_LEDGER_H

#include <mysql.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "config.h"

/* Reads the stored next offsets of shards[0..n), all on `db`'s server, with one query
 * per BW_LEDGER_READ_CHUNK shards (a rebalance of 4,096 partitions costs a few round
 * trips per server, not 4,096). offsets[i] = -1 where none is stored. `scratch` holds
 * the statement. Returns 0, or the MySQL error number (offsets then undefined). */
#define BW_LEDGER_READ_CHUNK 512
unsigned bw_ledger_read_offsets(MYSQL *db, const bw_config_t *conf, const int *shards, size_t n,
                                int64_t *offsets, bw_buf_t *scratch);

#endif
