/* alerts.h — shard alerts: to the log, to a metric, and to Alertmanager.
 *
 * Per shard, one alert of each kind (bw_alert_kind_t), labelled with the shard, its
 * database and server; BulkwriteServerDown is per server, labelled with the server. Firing it again only updates its error text; resolving sends
 * it once more with endsAt set. A background thread posts to alerts.alertmanager_url in
 * Alertmanager's v2 format (a JSON array of {labels, annotations, startsAt, endsAt,
 * generatorURL}), re-posting firing alerts every alerts.resend_ms, and retrying a
 * failed post, so an Alertmanager that was down hears the current state once it is back.
 *
 * @locality any thread. */
#ifndef BW_ALERTS_H
#define BW_ALERTS_H

#include "config.h"
#include "metrics.h"

typedef struct bw_alerts bw_alerts_t;

typedef enum {
    BW_ALERT_UNHEALTHY,      /* BulkwriteShardUnhealthy (page): consecutive timeouts, held back */
    BW_ALERT_DATA_LOST,      /* BulkwriteShardDataLost (page): Kafka deleted unapplied messages */
    BW_ALERT_BACKLOG_AGING,  /* BulkwriteShardBacklogAging (warning): nearing the topic's retention */
    BW_ALERT_STOPPED,        /* BulkwriteShardStopped (page): schema, grants, read-only, disk full */
    BW_ALERT_NO_PROGRESS,    /* BulkwriteShardNoProgress (page): lag and no applied batch, whatever the cause */
    BW_ALERT_SERVER_DOWN,    /* BulkwriteServerDown (page): a whole server unreachable; per server, not shard */
    BW_ALERT_SIGNAL_UNKNOWN, /* BulkwriteThrottleSignalUnknown (warning): per server; fire/resolve with the
                                server's index as `shard` */
    BW_ALERT_TRIM_HELD,      /* BulkwriteTrimHeld (warning): per server, as above: a listed replica's
                                ledger unread for consumer.replica_unread_alert_ms */
    BW_ALERT_KINDS
} bw_alert_kind_t;

const char *bw_alert_name(bw_alert_kind_t kind);

/* generator_url: where an SRE looks next (the consumer's /metrics). */
bw_alerts_t *bw_alerts_new(const bw_config_t *conf, bw_metrics_t *metrics, const char *generator_url);
/* Stops the thread after a last attempt to post what is pending. */
void bw_alerts_destroy(bw_alerts_t *a);

void bw_alerts_fire(bw_alerts_t *a, bw_alert_kind_t kind, int shard, const char *error);
void bw_alerts_resolve(bw_alerts_t *a, bw_alert_kind_t kind, int shard);
int bw_alerts_firing(bw_alerts_t *a, bw_alert_kind_t kind, int shard);
/* The names of the alerts firing now that concern `shard`: its own, and its server's
 * (per-server kinds), into names[max] (static strings); returns how many. */
size_t bw_alerts_of_shard(bw_alerts_t *a, int shard, const char **names, size_t max);
/* BW_ALERT_SERVER_DOWN of server index `server`. */
void bw_alerts_fire_server(bw_alerts_t *a, int server, const char *error);
void bw_alerts_resolve_server(bw_alerts_t *a, int server);
/* This consumer no longer holds any of the server's shards: it stops reporting the
 * alert, which Alertmanager keeps active for lapse_ms more (endsAt in the future), the
 * time the new holder takes to find the server down and fire the same alert; if it
 * does not, the alert lapses then. Resolving at once would page "resolved" and then
 * "firing" again on every rebalance during an outage. */
void bw_alerts_hand_over_server(bw_alerts_t *a, int server, int64_t lapse_ms);

/* The Alertmanager v2 body for the given alerts (malloc'd), each named by
 * kind * shards.count + shard (+ server for BW_ALERT_SERVER_DOWN). Exposed for tests. */
char *bw_alerts_body(const bw_alerts_t *a, const int *alerts, size_t n, int64_t now_ms);

#endif
