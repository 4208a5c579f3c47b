/* request.h — a decoded request (codec/request_decode.h: either encoding into the same
 * protobuf-c structs) checked against the configuration: its job id, each op validated and
 * routed, and the reply back. @locality any thread. */
#ifndef BW_REQUEST_H
#define BW_REQUEST_H

#include "arena.h"
#include "batcher.h"
#include "bulkwrite/v1/bulkwrite.pb-c.h"
#include "config.h"
#include "request_decode.h"

typedef struct {
    uint32_t index;
    const char *reason;
    int retryable; /* valid, not taken now (backlog full): resend the request later */
} bw_rejection_t;

#define BW_REQUEST_ID_MAX 128


/* The request's job id (32 hex digits) into out. Without a request_id it is random.
 * With one it is derived from it, so a resubmitted request is the same job and its
 * messages carry the same (job_id, part) names, which the consumer applies once:
 *   - client NULL (no clients file: every caller is admin, one namespace):
 *     md5("bulkwrite.v1/" request_id);
 *   - client named: the first 16 bytes of HMAC-SHA256(key, "bulkwrite.v1/" client NUL
 *     request_id), so each client has its own request_ids (another client's reuse is
 *     another job) and, with a secret key (proxy.auth.job_id_secret), nobody can compute
 *     a job's id from its request_id.
 * -1 with errstr if the request_id is unusable (too long, not UTF-8, control characters). */
int bw_request_job_id(const Bulkwrite__V1__BatchWriteRequest *req, const char *client, const void *key,
                      size_t key_len, char out[33], char *errstr, size_t errstr_size);

/* A part of a named job (req->job not empty): job gets the job's id, derived from the
 * client and the name as a request_id's job id is, in its own namespace
 * ("bulkwrite.v1.job/" instead of "bulkwrite.v1/", so a job and a request_id of the same
 * text are different jobs); part gets the part's own id, which its messages and record
 * carry (bw_ledger_part_id: the job's range of the ledgers). -1 with errstr if the name
 * is unusable (request_id's rules), job_part is over BW_JOB_PART_MAX, or the request also
 * has a request_id. */
int bw_request_named_job_id(const Bulkwrite__V1__BatchWriteRequest *req, const char *client, const void *key,
                            size_t key_len, char job[33], char part[33], char *errstr, size_t errstr_size);

/* Validates every op against the config and routes the valid ones. routes[i] gets the
 * shard (or -1); each invalid op gets a rejection with its reason. Returns the number of
 * rejections, stored in *rejected (arena). fmt is what req was decoded from: a JSON
 * body's strings were all checked as UTF-8 by bw_request_decode (request_decode.h), which refuses the body
 * otherwise, so its text values are not checked twice, and an op whose JSON held a value
 * protobuf could not carry is rejected with the decoder's reason (bw_json_op_t);
 * protobuf's are checked here (pass BW_FMT_PROTOBUF for structs built any other way). */
size_t bw_request_validate(const bw_config_t *conf, const Bulkwrite__V1__BatchWriteRequest *req, bw_format_t fmt,
                           bw_arena_t *arena, bw_op_route_t *routes, bw_rejection_t **rejected);

/* Encodes the reply into a malloc'd buffer (*out, *out_len). */
void bw_response_encode(bw_format_t fmt, const char *job_id, uint32_t accepted,
                        const bw_rejection_t *rejected, size_t rejected_cnt, char **out,
                        size_t *out_len);

#endif
