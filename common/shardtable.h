/* shardtable.h — the operator's settings and the consumers' status of every shard, as
 * the latest record per key ("shard/N") of the compacted control and status topics.
 *
 * The proxy writes control records (admin API) and reads both topics (GET /v1/shards);
 * consumers read the control topic and write status records. Kafka keeps the table, so
 * a setting survives restarts of every process and reaches each consumer as soon as
 * its tail reads it (well under a second on a healthy cluster).
 *
 * @locality any thread (a mutex guards the table; the tails fill it). */
#ifndef BW_SHARDTABLE_H
#define BW_SHARDTABLE_H

#include "bulkwrite.pb-c.h"
#include "config.h"

typedef struct bw_shard_table bw_shard_table_t;

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
    void (*fn)(void *ud, int shard, const Bulkwrite__V1__ShardStatus *st);
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
/* The setting a control record holds. A rate outside the bounds (written by hand, or by a
 * version that accepted it) is clamped by bw_ratelimit_clamp() (a row rate by
 * bw_ratelimit_clamp_rows()): 1e-13 reads as the minimum, never as "unlimited"; the table
 * warns of such a record when it reads it. A record without has_row_rate (all records
 * older than row rates) leaves the configured row rate in force. */
void bw_shard_setting_from_record(const Bulkwrite__V1__ShardControl *c, bw_shard_setting_t *out);
/* What the shard runs at: the operator's value when set, else the configured one. */
double bw_shard_effective_rate(const bw_config_t *conf, int shard, const bw_shard_setting_t *set);
double bw_shard_effective_row_rate(const bw_config_t *conf, int shard, const bw_shard_setting_t *set);
/* Bumped by every control record read: re-read the settings when it moves. */
unsigned bw_shard_table_version(bw_shard_table_t *t);
/* The latest control record of the shard, unpacked (free with
 * bulkwrite__v1__shard_control__free_unpacked(c, NULL)), or NULL: its history. */
Bulkwrite__V1__ShardControl *bw_shard_table_control(bw_shard_table_t *t, int shard);
/* The latest status record of the shard, unpacked (free with
 * bulkwrite__v1__shard_status__free_unpacked(s, NULL)), or NULL. */
Bulkwrite__V1__ShardStatus *bw_shard_table_status(bw_shard_table_t *t, int shard);

/* The presence records of the deployment's processes read from the control topic
 * (fleet.h), unpacked: *out gets a malloc'd array of them; returns how many. Free with
 * bw_shard_table_members_free. */
size_t bw_shard_table_members(bw_shard_table_t *t, Bulkwrite__V1__FleetMember ***out);
void bw_shard_table_members_free(Bulkwrite__V1__FleetMember **members, size_t n);

/* "shard/N" into key; returns its length. Both topics use it. */
int bw_shard_key(int shard, char key[24]);

#endif
