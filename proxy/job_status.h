/* job_status.h — what the shards made of a job: its status (the receipt of jobs.h with
 * each shard's applied, failed, lost and cancelled ops, read from the shards' ledgers and
 * the consumers' status records), whether it lets a job after it go, its JSON, and its
 * failures a page at a time.
 *
 * @locality any thread; each call reads the ledgers on its own connections. */
#ifndef BW_JOB_STATUS_H
#define BW_JOB_STATUS_H

#include <stddef.h>
#include <stdint.h>

#include "backlog.h"
#include "bulkwrite/internal/v1/records.pb-c.h"
#include "config.h"
#include "jobs.h"
#include "shardtable.h"

/* Fills st from the record and the shards. job_id is the checked id (32 hex digits)
 * the record was found under; shards out of range are dropped from rec. table (may be
 * NULL) gives the consumers' status: pending ops in a range Kafka deleted before it was
 * applied are reported lost. admin 0: failure reasons and shard errors are scrubbed of
 * the server's text and names (scrub.h). The ledgers are read as the servers'
 * proxy_user (read-only). named (NULL for a job of one request): rec is a named job's
 * merged record (bw_jobs_record) and this the index's view of its parts: the ledgers are
 * read over all its parts, and it is finished only once sealed with every part in. A
 * cancelled job (table's JobControl) reports, per shard, the ops its consumer skipped
 * (pending ops behind the shard's applied offset) as cancelled. Every string and array of st is malloc'd: free with
 * bw_jobs_status_free. */
void bw_jobs_status(const bw_config_t *conf, Bulkwrite__Internal__V1__JobRecord *rec, const char *job_id,
                    bw_shard_table_t *table, int admin, const bw_jobs_named_t *named, Bulkwrite__V1__JobStatus *st);
void bw_jobs_status_free(Bulkwrite__V1__JobStatus *st);

/* A job's numbers as its status has them (bw_jobs_status, the same ledgers), for GET
 * /v1/jobs: unknown holds why when a shard's ledger could not be read (the numbers are
 * then not to be shown). A finished job's numbers no longer change: they are kept
 * (BW_JOBS_RECENT_MAX of them, the latest) and not read again. */
typedef struct {
    uint32_t submitted, applied, failed, pending, cancelled, lost;
    int finished, named, sealed;
    char unknown[300]; /* "" when the numbers are known */
} bw_jobs_summary_t;
void bw_jobs_summary(bw_jobs_t *j, const bw_config_t *conf, bw_shard_table_t *table,
                     Bulkwrite__Internal__V1__JobRecord *rec, const char *job_id, int admin, bw_jobs_summary_t *out);
/* Fills st->prerequisites: each job of st->after, as its own status says now (its
 * ledgers read), and on each shard whose held ops one of them holds back (not finished
 * there) a PREREQUISITE wait naming it (bw_jobs_waits decides). Freed by
 * bw_jobs_status_free. */
void bw_jobs_prerequisites(bw_jobs_t *j, const bw_config_t *conf, bw_shard_table_t *table, Bulkwrite__V1__JobStatus *st);
/* 1 when a job with status st, named in another's `after`, lets that job's ops on `shard`
 * go (-1: whether it can on some shard): it is not cancelled, every op of it is in (a
 * named job sealed with all its parts; a request not awaiting a resend), and none of its
 * ops on that shard is pending, held, lost (to be sent again) or unknown (a ledger that
 * did not answer). */
int bw_jobs_done_on(const Bulkwrite__V1__JobStatus *st, int shard);

/* ---- why a shard holds a job's ops back (JobShard.waits) -------------------------------
 * One answer per shard with pending ops of the job, the first obstacle in their way:
 *   1. the shard's own state, while some of the job's ops on it could run (in its
 *      partition, or held ops that are due and free to go): PAUSED by an operator (the
 *      shard or its server), then ERROR (the consumer's gate: a gap in Kafka, stopped, its
 *      server down, unhealthy, in that order), then THROTTLED by the adaptive throttle
 *      (throttled, unknown or critical; never in dry run). A pause first: it is a
 *      decision, and it stays after an error clears; an error before the throttle: the
 *      shard applies nothing, where the throttle slows it.
 *   2. the job's schedule: HELD while not_before is ahead (until_ms), else PREREQUISITE
 *      while a job of `after` is not finished on the shard (reason: its id).
 *   3. BACKLOG_FULL: the shard's backlog (as this proxy's admission sees it) is full: its
 *      ops wait behind it, and the job's next parts for the shard are refused (429).
 * None of these: no wait (the shard is applying, at its rate). */
typedef struct {
    int shard;
    uint32_t in_kafka;          /* the job's pending ops in the shard's partition */
    uint32_t held;              /* its ops the proxies still hold (scheduled) */
    int64_t held_until_ms;      /* the job's not_before while it is ahead, else 0 */
    const char *prerequisite;   /* a job of `after` not finished on the shard (its id), or NULL */
    const bw_shard_setting_t *pause;                 /* bw_shard_table_pause's, or NULL: not paused */
    Bulkwrite__Internal__V1__GateReason error;       /* GAP, STOPPED, SERVER_DOWN, UNHEALTHY, or NONE */
    Bulkwrite__Internal__V1__ThrottleState throttle; /* THROTTLED, UNKNOWN, CRITICAL, or NONE */
    Bulkwrite__Internal__V1__ThrottleSignal signal;
    const char *throttle_reason;                     /* in words, as the caller may see it */
    int backlog_full;
    int64_t backlog_messages, backlog_bytes;
} bw_wait_facts_t;

/* The wait the facts make (rules above; malloc'd, free with bw_jobs_wait_free), or NULL
 * when nothing holds the ops back. Pure. */
Bulkwrite__V1__ShardWait *bw_jobs_wait_pick(const bw_wait_facts_t *f);
void bw_jobs_wait_free(Bulkwrite__V1__ShardWait *w);
/* "shard 3 is paused by alice: reindex" (no reason: without ": …"). Returns out. */
const char *bw_jobs_pause_words(int shard, const bw_shard_setting_t *pause, char *out, size_t size);
/* Fills each shard's `waits` of st from the shard table (pause, the consumer's status)
 * and the backlog (NULL: not known), after bw_jobs_status and bw_jobs_prerequisites
 * (which notes the prerequisite a shard's held ops wait for). admin 0: the throttle's
 * reason scrubbed (scrub.h). Freed by bw_jobs_status_free. */
void bw_jobs_waits(const bw_config_t *conf, bw_shard_table_t *table, bw_backlog_t *backlog, int admin,
                   Bulkwrite__V1__JobStatus *st);

/* JSON text of a status (malloc'd). */
char *bw_jobs_status_json(const Bulkwrite__V1__JobStatus *st);

/* 1 if the shard's status names a range lost in Kafka that holds messages of the job
 * (its first and last offsets on the shard). */
int bw_jobs_lost_here(const Bulkwrite__Internal__V1__ShardStatus *st, const char *lane, const Bulkwrite__Internal__V1__ShardOps *ops);
/* The range [*from, *to) of `lane`'s partition of the shard lost in Kafka (empty if equal). */
void bw_jobs_lane_lost(const Bulkwrite__Internal__V1__ShardStatus *st, const char *lane, int64_t *from, int64_t *to);

#define BW_JOB_FAILURE_SAMPLE 20

/* Where a page of failures ends: the last failure it holds (shard, part, op_index). */
typedef struct {
    int set;
    int shard;
    uint32_t part, op_index;
} bw_jobs_cursor_t;
/* Reads a cursor as the API writes it ("SHARD-PART-OP_INDEX"). 0, or -1 if malformed. */
int bw_jobs_cursor_parse(const char *text, bw_jobs_cursor_t *c);

/* GET /v1/jobs/{id}/failures: one page (JSON, malloc'd) of at most `limit` failures of
 * the job, by shard, part and op index, after the cursor `after` (set: the page goes on
 * from there), each with its op as it was sent (for a replay: docs/jobs.md); of MySQL
 * error `code` when not 0, whose reason (as the caller sees it: scrubbed unless admin)
 * contains `reason` when not NULL. "next" is the cursor of the next page, null on the
 * last one. The ledgers are read as proxy_user. NULL with err when a shard's ledger
 * could not be read. */
char *bw_jobs_failures_json(const bw_config_t *conf, const Bulkwrite__Internal__V1__JobRecord *rec, const char *job_id,
                            int named, int admin, const bw_jobs_cursor_t *after, unsigned code, const char *reason,
                            size_t limit, char *err, size_t esz);

#endif
