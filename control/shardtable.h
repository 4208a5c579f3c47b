/* shardtable.h — the compacted control and status topics read into one table: the
 * latest value of every key, folded as its kind says (records.h lists the kinds, their
 * keys, messages and folds; this table keeps each kind's values and answers for them):
 *
 *   control topic (durable: operators' changes, written by the proxy's admin API)
 *     a shard's setting, one key per field, folded into one setting per shard (the whole
 *     record "shard/N" that versions before per-field keys wrote is the base); a server's
 *     budget; a job's cancellation (a named job's parts share its id's first
 *     BW_JOB_CONTROL_PREFIX hex digits, store/ledger.h)
 *   status topic (written by the processes themselves)
 *     a shard's status (its consumer's); a process's presence, which comes and goes with
 *     the process, apart from the durable settings (fleet.h)
 *
 * Kafka keeps the table, so a setting survives restarts of every process and reaches
 * each reader as soon as its tail reads it (well under a second on a healthy cluster).
 *
 * @locality any thread (a mutex guards the table; the tails fill it). */
#ifndef BW_SHARDTABLE_H
#define BW_SHARDTABLE_H

#include <stddef.h>

#include "bulkwrite/internal/v1/records.pb-c.h"
#include "config.h"
#include "records.h"

typedef struct bw_shard_table bw_shard_table_t;

#define BW_CONTROL_HISTORY 20 /* changes a shard keeps, newest first (each key's record, and the fold) */

/* An operator's setting of one shard. Without has_rate (has_row_rate) the configured
 * conf->shard_rate (shard_row_rate) applies: bw_shard_effective_rate() and
 * bw_shard_effective_row_rate() say which value the shard runs at. */
typedef struct {
    int paused;
    int has_rate;
    double rate;           /* statements per second; 0 = unlimited */
    int has_row_rate;
    double row_rate;       /* rows per second; 0 = no row budget */
    int pinned;            /* the adaptive throttle leaves the shard at its cap */
    int64_t updated_at_ms; /* 0: never set */
    char reason[256];
    char changed_by[72];   /* who (audit): a client's name, "(open)" without a clients file */
    char changed_from[64]; /* the caller's address */
} bw_shard_setting_t;

/* Called on the status tail's thread with every status record read (st is freed after
 * the call). The proxy's backlog admission learns applied offsets this way, at once. */
typedef struct {
    void (*fn)(void *ud, int shard, const Bulkwrite__Internal__V1__ShardStatus *st);
    void *ud;
} bw_status_hook_t;

/* Follows the control topic, and the status topic too if status is not NULL (its fn
 * may be NULL: the table alone). */
bw_shard_table_t *bw_shard_table_start(const bw_config_t *conf, const char *brokers,
                                       const bw_status_hook_t *status, char *errstr, size_t errstr_size);
void bw_shard_table_stop(bw_shard_table_t *t);

/* Waits until everything written before the call has been read (or timeout). */
int bw_shard_table_sync(bw_shard_table_t *t, int timeout_ms);

void bw_shard_table_setting(bw_shard_table_t *t, int shard, bw_shard_setting_t *out);
/* 1 if an operator paused the shard (its own pause, or its server's), with the audit
 * (reason, changed_by, changed_from, updated_at_ms) of the change that paused it in *out:
 * the newest change of the shard may be a rate's, which says nothing of the pause. 0
 * (and *out zeroed) while it runs. */
int bw_shard_table_pause(bw_shard_table_t *t, int shard, bw_shard_setting_t *out);
/* The setting a control record holds. A rate outside the bounds (written by hand, or by a
 * version that accepted it) is clamped by bw_ratelimit_clamp() (a row rate by
 * bw_ratelimit_clamp_rows()): 1e-13 reads as the minimum, never as "unlimited"; the table
 * warns of such a record when it reads it. A record without has_row_rate (all records
 * older than row rates) leaves the configured row rate in force. */
void bw_shard_setting_from_record(const Bulkwrite__Internal__V1__ShardControl *c, bw_shard_setting_t *out);
/* What the shard runs at: the operator's value when set, else the configured one. */
double bw_shard_effective_rate(const bw_config_t *conf, int shard, const bw_shard_setting_t *set);
double bw_shard_effective_row_rate(const bw_config_t *conf, int shard, const bw_shard_setting_t *set);
/* Bumped by every control record read: re-read the settings when it moves. */
unsigned bw_shard_table_version(bw_shard_table_t *t);
/* The shard's setting folded from its records under every key (bw_shard_control_fold),
 * unpacked (free with bulkwrite__internal__v1__shard_control__free_unpacked(c, NULL)), or NULL when
 * no operator ever changed it: its fields, the audit of its newest change, its history. */
Bulkwrite__Internal__V1__ShardControl *bw_shard_table_control(bw_shard_table_t *t, int shard);
/* The latest record under one of the shard's keys, unpacked as above, or NULL: a change
 * continues that key's own history. */
Bulkwrite__Internal__V1__ShardControl *bw_shard_table_record(bw_shard_table_t *t, int shard, bw_control_key_t key);
/* One ShardControl (malloc'd, unpacked, free as above) from the shard's latest record
 * under each key (recs[k], NULL for none; all NULL: returns NULL), read in the order
 * order[k] (a higher number read later; NULL: in key order). Each field comes from its
 * own key's record when there is one, else from the whole record: paused from
 * BW_CONTROL_PAUSE, has_rate and rate from BW_CONTROL_RATE, has_row_rate and row_rate
 * from BW_CONTROL_ROW_RATE, pinned from BW_CONTROL_PINNED. updated_at_ms, reason,
 * changed_by and changed_from are those of the newest record (by updated_at_ms; at a
 * tie, the one read later). The history merges every record's, newest first by at_ms (at
 * a tie the record read later first, one record's order kept), a change found in several
 * records (one rate change setting rate and row_rate) once, at most BW_CONTROL_HISTORY. */
Bulkwrite__Internal__V1__ShardControl *bw_shard_control_fold(int shard, const Bulkwrite__Internal__V1__ShardControl *const recs[BW_CONTROL_KEYS],
                                                   const uint64_t order[BW_CONTROL_KEYS]);
/* The latest status record of the shard, unpacked (free with
 * bulkwrite__internal__v1__shard_status__free_unpacked(s, NULL)), or NULL. */
Bulkwrite__Internal__V1__ShardStatus *bw_shard_table_status(bw_shard_table_t *t, int shard);

/* The presence records of the deployment's processes read from the control topic
 * (fleet.h), unpacked: *out gets a malloc'd array of them; returns how many. Free with
 * bw_shard_table_members_free. */
size_t bw_shard_table_members(bw_shard_table_t *t, Bulkwrite__Internal__V1__FleetMember ***out);
void bw_shard_table_members_free(Bulkwrite__Internal__V1__FleetMember **members, size_t n);

/* ---- server budgets ----
 * Under "server/<name>/budget" (ServerBudget, written by POST /v1/servers/{name}/budget):
 * statements/s and rows/s for a whole server, shared by its shards that have work. The
 * table keeps the latest record per configured server; a record of a name not in
 * shards.servers is ignored. Each record bumps the version, as a shard's does. */
typedef struct {
    double rate;           /* statements per second for the whole server; 0 = none */
    double row_rate;       /* rows per second; 0 = none */
    int64_t updated_at_ms; /* 0: never set */
    char reason[256];
    char changed_by[72];
    char changed_from[64];
} bw_server_budget_t;

/* The budget a record holds; rates outside the bounds are clamped (bw_ratelimit_clamp,
 * bw_ratelimit_clamp_rows), 0 stays "none". */
void bw_server_budget_from_record(const Bulkwrite__Internal__V1__ServerBudget *r, bw_server_budget_t *out);
/* Server `server`'s (an index of conf->servers) budget into *out (zeroed when none was
 * ever set); 1 if it has a record. Cheap: the consumer asks on every settings change. */
int bw_shard_table_server_budget(bw_shard_table_t *t, int server, bw_server_budget_t *out);
/* Its latest record, unpacked (free with bulkwrite__internal__v1__server_budget__free_unpacked), or
 * NULL: a change continues its history; GET /v1/shards shows it. */
Bulkwrite__Internal__V1__ServerBudget *bw_shard_table_server_budget_record(bw_shard_table_t *t, int server);

/* ---- jobs ---- */
/* 1 if the job of a message (its job_id: a job's, or a named job's part's) was cancelled.
 * Cheap when nothing was ever cancelled (the consumer asks for every message). */
int bw_shard_table_job_cancelled(bw_shard_table_t *t, const char *job_id);
/* The job's cancellation, unpacked (free with bulkwrite__internal__v1__job_control__free_unpacked),
 * or NULL. */
Bulkwrite__Internal__V1__JobControl *bw_shard_table_job(bw_shard_table_t *t, const char *job_id);

#endif
