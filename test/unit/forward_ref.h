/* forward_ref.h — the path the proxy no longer takes, kept as the tests' reference: a
 * request unpacked by protobuf-c, and each ShardBatch built as Row and RowField structs
 * and packed by protobuf-c, as the batcher did before it wrote the bytes itself. The
 * unit tests (test_forward.c) and the fuzz target (test/fuzz/fuzz_forward.c) hold the
 * hand-written reader and writer against it. No check.h here: the fuzzer links it too. */
#ifndef BW_TEST_FORWARD_REF_H
#define BW_TEST_FORWARD_REF_H

#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "batcher.h"
#include "bulkwrite/internal/v1/records.pb-c.h"
#include "config.h"

/* 1 if a and b hold the same request field for field (unknown fields aside; a field
 * without a value differs from one with an empty value); else 0 and why says where. */
int fref_request_eq(const Bulkwrite__V1__BatchWriteRequest *a, const Bulkwrite__V1__BatchWriteRequest *b, char *why,
                    size_t why_size);

/* 1 if a and b hold the same ShardBatch field for field (unknown fields aside); else 0
 * and why says where. */
int fref_shard_batch_eq(const Bulkwrite__Internal__V1__ShardBatch *a, const Bulkwrite__Internal__V1__ShardBatch *b, char *why,
                        size_t why_size);

/* Reads data as a ShardBatch both ways, the consumer's reader (pbdecode.h) and
 * protobuf-c's unpack, both into the arena: 1 if they accept and refuse alike and read an
 * accepted one the same (*accepted: whether they did); else 0 and why. */
int fref_shard_batch_agrees(const void *data, size_t len, bw_arena_t *a, int *accepted, char *why, size_t why_size);

/* Checks every message of a split of the request against protobuf-c: each payload must
 * equal, byte for byte, protobuf-c's pack of the ShardBatch built from `pbc` (the same
 * body unpacked by protobuf-c) for the message's rows and job (named_job: NULL or a named job's id) (columns in first-use order,
 * unknown fields dropped), unpack to n_rows == op_cnt, and read the same through the
 * consumer's reader (fref_shard_batch_agrees). 1 if all do; else 0 and why. */
int fref_check_split(const bw_config_t *conf, const Bulkwrite__V1__BatchWriteRequest *pbc, const bw_batch_set_t *set,
                     const char *job_id, const char *named_job, int64_t now_ms, char *why, size_t why_size);

/* The wire reader's one deliberate difference from protobuf-c: a NUL inside request_id,
 * job, replay_of or an after (which protobuf-c keeps, and every C string then cuts short) is
 * refused. 1 when err is that refusal. */
int fref_nul_refused(const char *err);

#endif
