/* fuzz_request.c — libFuzzer harness over what the proxy does with a request body:
 * decode (JSON or protobuf, by the first byte's low bit), derive the job id, validate
 * every op against the reference config, and batch the valid ones into Kafka
 * messages. Any crash, leak, sanitizer report or broken invariant is a finding.
 *
 * Built with clang -fsanitize=fuzzer,address,undefined (make fuzz); `make check` runs
 * it for a bounded time from the committed seeds in test/fuzz/corpus. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "bulkwrite/internal/v1/records.pb-c.h"
#include "batcher.h"
#include "request_decode.h"
#include "request.h"
#include "utf8.h"

static bw_config_t *conf;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    const char *path = getenv("BW_FUZZ_CONF");
    char err[512];
    if (!(conf = bw_config_load(path ? path : "conf/bulkwrite.conf", err, sizeof(err)))) {
        fprintf(stderr, "fuzz: %s\n", err);
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    bw_format_t fmt = data[0] & 1 ? BW_FMT_PROTOBUF : BW_FMT_JSON;
    bw_arena_t arena;
    bw_arena_init(&arena, 1 << 14);
    char err[512];
    Bulkwrite__V1__BatchWriteRequest *req = bw_request_decode(fmt, data + 1, size - 1, &arena, err, sizeof(err));
    char job_id[33];
    if (!req || req->n_ops == 0 || req->n_ops > (size_t)conf->max_ops || bw_request_job_id(req, NULL, NULL, 0, job_id, err, sizeof(err))) {
        bw_arena_destroy(&arena);
        return 0;
    }
    bw_op_route_t *routes = bw_arena_alloc(&arena, req->n_ops * sizeof(*routes));
    bw_rejection_t *rejected;
    size_t rejected_cnt = bw_request_validate(conf, req, fmt, &arena, routes, &rejected);
    for (size_t i = 0; i < rejected_cnt; i++)
        if (rejected[i].index >= req->n_ops || !rejected[i].reason[0]) abort();
    /* an op the JSON decoder faulted is never routed */
    for (size_t i = 0; fmt == BW_FMT_JSON && i < req->n_ops; i++)
        if (bw_json_op_fault(req->ops[i]) && routes[i].shard >= 0) abort();
    /* what lets validation skip a JSON body's text values: all are UTF-8 once decoded */
    for (size_t i = 0; fmt == BW_FMT_JSON && i < req->n_ops; i++)
        for (size_t k = 0; k < req->ops[i]->n_fields; k++) {
            const Bulkwrite__V1__Value *v = req->ops[i]->fields[k]->value;
            if (v && v->kind_case == BULKWRITE__V1__VALUE__KIND_STRING_VALUE &&
                !bw_utf8_valid(v->string_value.data, v->string_value.len))
                abort();
        }
    bw_batch_set_t set;
    uint32_t *too_large;
    size_t too_large_cnt;
    bw_batcher_split(conf, req, routes, job_id, NULL, 0, &arena, &set, &too_large, &too_large_cnt);
    /* every routed op lands in exactly one message of its shard */
    size_t routed = 0, carried = 0;
    for (size_t i = 0; i < req->n_ops; i++) routed += routes[i].shard >= 0;
    for (size_t m = 0; m < set.msg_cnt; m++) {
        carried += set.msgs[m].op_cnt;
        if (set.msgs[m].len > (size_t)conf->message_max_bytes) abort();
        for (size_t k = 0; k < set.msgs[m].op_cnt; k++)
            if (routes[set.msgs[m].ops[k]].shard != set.msgs[m].shard) abort();
        Bulkwrite__Internal__V1__ShardBatch *sb = bulkwrite__internal__v1__shard_batch__unpack(NULL, set.msgs[m].len, set.msgs[m].payload);
        if (!sb || sb->n_rows != set.msgs[m].op_cnt || sb->part != m) abort();
        bulkwrite__internal__v1__shard_batch__free_unpacked(sb, NULL);
    }
    if (routed != carried) abort();
    char *body;
    size_t body_len;
    bw_response_encode(fmt, job_id, (uint32_t)carried, rejected, rejected_cnt, &body, &body_len);
    free(body);
    bw_batcher_free_payloads(&set);
    bw_arena_destroy(&arena);
    return 0;
}
