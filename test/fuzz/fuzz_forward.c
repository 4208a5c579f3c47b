/* fuzz_forward.c — libFuzzer harness over forwarding: the input is a protobuf request
 * body. The proxy's wire reader must accept exactly what protobuf-c's unpack accepts and
 * read it the same, field for field (one deliberate difference: a NUL inside request_id, job
 * or replay_of, which protobuf-c keeps and every C string then cuts short, is refused); then every
 * valid op is batched and each ShardBatch
 * the batcher wrote must be, byte for byte, protobuf-c's pack of the batch the old path
 * built from protobuf-c's own reading (test/unit/forward_ref.c), and read back by the
 * consumer's ShardBatch reader as protobuf-c reads it. The input is also read as a
 * ShardBatch both ways (seeds sb-*). Any difference, crash or sanitizer report is a
 * finding.
 *
 * Built with clang -fsanitize=fuzzer,address,undefined (make fuzz runs it after
 * fuzz_request.c, from the seeds in test/fuzz/corpus-forward). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "batcher.h"
#include "forward_ref.h"
#include "request.h"

static bw_config_t *conf, *small;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    const char *path = getenv("BW_FUZZ_CONF");
    char err[512];
    if (!(conf = bw_config_load(path ? path : "conf/bulkwrite.conf", err, sizeof(err)))) {
        fprintf(stderr, "fuzz: %s\n", err);
        abort();
    }
    /* the same with messages of at most 2,000 bytes: bodies cut into many parts */
    if (!(small = bw_config_load(path ? path : "conf/bulkwrite.conf", err, sizeof(err)))) abort();
    small->message_max_bytes = 2000;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    bw_arena_t arena;
    bw_arena_init(&arena, 1 << 14);
    char err[512], why[512];
    /* the same bytes as a ShardBatch: the consumer's reader against protobuf-c's */
    int accepted;
    if (!fref_shard_batch_agrees(data, size, &arena, &accepted, why, sizeof(why))) {
        fprintf(stderr, "fuzz: %s\n", why);
        abort();
    }
    Bulkwrite__V1__BatchWriteRequest *req = bw_request_decode(BW_FMT_PROTOBUF, data, size, &arena, err, sizeof(err));
    Bulkwrite__V1__BatchWriteRequest *pbc = bulkwrite__v1__batch_write_request__unpack(&arena.pb, size, data);
    if (!req && pbc && fref_nul_refused(err)) {
        bw_arena_destroy(&arena); /* the one deliberate difference */
        return 0;
    }
    if (!req != !pbc) {
        fprintf(stderr, "fuzz: the wire reader %s what protobuf-c %s\n", req ? "accepts" : "refuses",
                pbc ? "accepts" : "refuses");
        abort();
    }
    if (req && !fref_request_eq(req, pbc, why, sizeof(why))) {
        fprintf(stderr, "fuzz: read differently from protobuf-c: %s\n", why);
        abort();
    }
    if (req && req->n_ops && req->n_ops <= (size_t)conf->max_ops) {
        const bw_config_t *c = size % 2 ? small : conf;
        bw_op_route_t *routes = bw_arena_alloc(&arena, req->n_ops * sizeof(*routes));
        bw_rejection_t *rejected;
        bw_request_validate(c, req, BW_FMT_PROTOBUF, &arena, routes, &rejected);
        bw_batch_set_t set;
        uint32_t *too_large;
        size_t too_large_cnt;
        const char *job = "00112233445566778899aabbccddeeff";
        const char *named = size % 3 ? NULL : "ffeeddccbbaa99887766554433221100"; /* a named job's part too */
        bw_batcher_split(c, req, routes, job, named, (int64_t)size * 1000, &arena, &set, &too_large, &too_large_cnt);
        if (!fref_check_split(c, pbc, &set, job, named, (int64_t)size * 1000, why, sizeof(why))) {
            fprintf(stderr, "fuzz: %s\n", why);
            abort();
        }
        bw_batcher_free_payloads(&set);
    }
    bw_arena_destroy(&arena);
    return 0;
}
