/* fleet.h — the processes of one deployment agree on what they share.
 *
 * Every proxy and consumer writes a presence record (FleetMember) to the status topic
 * every BW_FLEET_INTERVAL_MS (not the control topic: presence comes and goes, and on the
 * embedded Kafka, which keeps only the newest 5 MiB of a partition, it would push the
 * operators' settings out), keyed "member/<role>/<instance>", with a fingerprint of
 * each setting the processes of a deployment must share: the shard map, the object
 * types (columns, batch sizes), the lanes, the message size, and in proxies the job-id
 * secret, whether there is a clients file, and which client each credential is (a job
 * id is an HMAC of the client's name and request_id under the secret: a resend that
 * reaches a proxy with another secret, or that knows its token as another client, is a
 * new job, applied twice). Proxies may know different clients; no credential may be
 * two clients. A proxy's record also carries its clients' demand, by which the proxies
 * share each client's quota (proxy/quota.h; through bw_fleet_hook_t). A process whose print of a
 * setting differs from that of a live member that started before it refuses to become
 * ready, naming the setting and the member; the earliest member never does, so a
 * deploy that brings a wrong setting stops at its first new process.
 *
 * @locality any thread: pure functions over their arguments. */
#ifndef BW_FLEET_H
#define BW_FLEET_H

#include <stddef.h>
#include <stdint.h>

#include "bulkwrite/internal/v1/records.pb-c.h"
#include "config.h"

#define BW_FLEET_INTERVAL_MS 2000
#define BW_FLEET_STALE_MS 10000 /* a member not seen for this long is gone */
#define BW_FLEET_PRINTS_MAX 8

typedef struct {
    const char *key;  /* the setting, as docs/configuration.md names it */
    char print[17];   /* 16 hex digits */
} bw_fleet_print_t;

/* The prints of conf's shared settings; `proxy` adds the proxy-only ones (the job-id
 * secret, and whether there is a clients file at all). Returns how many. */
int bw_fleet_prints(const bw_config_t *conf, int proxy, bw_fleet_print_t out[BW_FLEET_PRINTS_MAX]);

/* "HOST:PORT": this host's name (fallback when it has none) and port; with port 0,
 * "HOST:pidPID". Names a member, and a consumer's group.instance.id. */
void bw_fleet_host_id(int port, const char *fallback, char *out, size_t size);


/* The packed record (malloc'd, *len bytes); credentials: "CRED NAME" lines (NULL: none). */
void *bw_fleet_pack(const char *role, const char *instance, int64_t started_at_ms, int64_t now_ms,
                    const bw_fleet_print_t *prints, int n, const char *credentials, int agrees, size_t *len);

/* 0 when this process (instance, started_at_ms, its prints and credentials) agrees on
 * every setting it shares with each live member (seen within BW_FLEET_STALE_MS of
 * now_ms) that agrees itself and started before it (or at the same ms with a smaller
 * instance name), and
 * no credential both know is another client's there; else -1 with why naming the
 * setting and the member. Its own record among members is skipped. */
int bw_fleet_check(const char *instance, int64_t started_at_ms, const bw_fleet_print_t *prints, int n,
                   const char *credentials, Bulkwrite__Internal__V1__FleetMember *const *members, size_t member_cnt,
                   int64_t now_ms, char *why, size_t why_size);

/* ---- this process in the fleet ------------------------------------------------------ */

#include <librdkafka/rdkafka.h>

#include "shardtable.h"

/* What a process adds to its turn (a proxy: its clients' demand, for quotas shared by the
 * fleet, proxy/quota.h). fill adds to the record about to be written (what it points to
 * stays the hook's, valid until the next fill); read then sees the members the table
 * read (this process's own record among them, by instance), before they are freed.
 * @locality the turn's thread */
typedef struct {
    void (*fill)(void *arg, Bulkwrite__Internal__V1__FleetMember *rec, int64_t now_ms);
    void (*read)(void *arg, const char *instance, Bulkwrite__Internal__V1__FleetMember *const *members, size_t n,
                 int64_t now_ms);
    void *arg;
} bw_fleet_hook_t;

typedef struct {
    const char *role;      /* "proxy" or "consumer" */
    char instance[300];    /* HOST:PORT */
    int64_t started_at_ms;
    bw_fleet_print_t prints[BW_FLEET_PRINTS_MAX];
    int print_cnt;
    char *credentials;     /* a proxy's "CRED NAME" lines (malloc'd), NULL: none */
    int64_t next_ms;       /* the next turn */
    int agrees;            /* the last check's outcome; 1 before the first */
    char why[600];         /* what differs, while it does not agree */
    const bw_fleet_hook_t *hook; /* NULL: none (bw_fleet_self_init); set by the caller after it */
} bw_fleet_self_t;

/* Fills self: prints from conf (a proxy's: role "proxy"), and the credentials it takes
 * over (a copy). bw_fleet_self_set_credentials replaces them (a SIGHUP). */
void bw_fleet_self_init(bw_fleet_self_t *self, const char *role, const char *instance, int64_t started_at_ms,
                        const bw_config_t *conf, const char *credentials);
void bw_fleet_self_set_credentials(bw_fleet_self_t *self, const char *credentials);
void bw_fleet_self_free(bw_fleet_self_t *self);
/* Once every BW_FLEET_INTERVAL_MS (else at once): checks this process against the
 * members the table read, logs each change of the outcome, and writes its record (with
 * the outcome, and what self->hook fills in; then the hook reads the members) to topic
 * through rk without waiting (rk: a producer whose reports nobody
 * waits for). Returns self->agrees. @locality the caller's thread, one per self */
int bw_fleet_turn(bw_fleet_self_t *self, rd_kafka_t *rk, const char *topic, bw_shard_table_t *table, int64_t now_ms);
/* Writes the empty record that removes this process (at a clean stop). */
void bw_fleet_leave(const bw_fleet_self_t *self, rd_kafka_t *rk, const char *topic);

#endif
