/* compactor.h — compaction for a log that drops its oldest records at a size bound.
 *
 * The embedded Kafka (librdkafka's mock) has no compaction: it keeps a partition's newest
 * BW_KAFKA_EMBEDDED_PARTITION_BYTES (or _SETS) and drops what is older, live or not. A
 * compacted topic's latest record per key is the table's value, so bw-kafka-embedded
 * follows each partition with a compactor and writes a live record again (a copy, carrying
 * the offset it was first written at in the BW_KAFKA_HEADER_ORIGIN header) once a quarter
 * of the bound was written after it: the record is then always in the log.
 *
 * A copy can race a new value of its key (the copy is written after it). Readers take a
 * record's version as its origin (bw_tail_fn's version) and ignore one older than what
 * they hold; the compactor, reading its copy after a newer record, writes the newer one
 * again at once, so a reader that starts later still ends at the newest value.
 *
 * Pure: no I/O and no clock; the caller reads, and writes what bw_compactor_due hands out.
 * @locality one thread per compactor. */
#ifndef BW_COMPACTOR_H
#define BW_COMPACTOR_H

#include <stddef.h>
#include <stdint.h>

typedef struct bw_compactor bw_compactor_t;

/* A partition that drops its oldest records beyond bound_bytes or bound_records. */
bw_compactor_t *bw_compactor_new(int64_t bound_bytes, int64_t bound_records);
void bw_compactor_free(bw_compactor_t *c);

/* A record read at `offset`. `origin` is its BW_KAFKA_HEADER_ORIGIN (a copy), or -1 (an
 * original: its origin is its offset). An empty value is a tombstone; a record without a
 * key counts towards the bound and is not kept. */
void bw_compactor_read(bw_compactor_t *c, int64_t offset, int64_t origin, const void *key, size_t klen,
                       const void *value, size_t vlen);

/* The next record to write again, if any: its key, value (vlen 0: a tombstone) and origin,
 * valid until the next call. It counts as written from now on; a value whose copy is not
 * read back within another quarter of the bound is handed out again, and a copy Kafka
 * refused is reported with bw_compactor_lost. 1 if one is due. */
int bw_compactor_due(bw_compactor_t *c, const void **key, size_t *klen, const void **value, size_t *vlen,
                     int64_t *origin);

/* A copy bw_compactor_due handed out that Kafka did not take (its delivery failed): it is
 * not coming, and if it is still the key's newest it is handed out again at once. */
void bw_compactor_lost(bw_compactor_t *c, const void *key, size_t klen, int64_t origin);

/* What the live records take, as the bound counts them: above a quarter of the bound the
 * copies themselves push live records out; the caller says so loudly. */
int64_t bw_compactor_live_bytes(const bw_compactor_t *c);
size_t bw_compactor_live_records(const bw_compactor_t *c);

/* A record's size as the bound counts it: its key and value, and a single-record batch's
 * framing (61 bytes) with the record's own (up to 21) and the origin header. */
#define BW_COMPACTOR_RECORD_OVERHEAD 100

#endif
