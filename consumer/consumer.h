/* consumer.h — the world of bw-consumer: its partitions, its jobs and the one consumer
 * state that the files of consumer/ share (Redis's server.h habit). Not used outside
 * consumer/.
 *
 * Words: a *partition* of a batches topic is a logical *shard* (same number). Each
 * priority *lane* (config `lanes`) has its topic, so a shard has one partition per lane;
 * a *slot* numbers a (lane, shard) pair (config.h: lane * shards.count + shard; the
 * default lane's slots are the shard numbers). A *job* is a run of one slot's buffered
 * messages handed to a worker as one transaction. What is about the database (budgets,
 * the throttle, health, pauses, one job in flight) is per shard (bw_shard_t); what is
 * about Kafka (buffer, offsets, lag) is per slot (bw_partition_t).
 *
 * The files, in reading order:
 *   main.c       startup, the loop that turns every subsystem below, shutdown, HTTP, reload
 *   partition.c  a partition's buffer: fetching, pausing, seeking, and gaps (lost messages)
 *   rebalance.c  assignment and revocation: where each partition resumes (its ledger);
 *                the ledgers checked every few seconds (a failover behind a stable address)
 *   gate.c       why a shard is not running now: the one answer every file below asks
 *   scheduler.c  which shard gets a worker next (fair order, rate, health), what a
 *                finished batch changes, and pacing (rates, the throttle's step)
 *   pool.c       the worker threads: they run any job by its own run and done functions
 *   health.c     per-shard and per-server health: counts, holds, probes (no I/O; tested alone)
 *   handover.c   what a moved shard keeps from its latest status record (no I/O; tested alone)
 *   throttle.c   the adaptive throttle's decisions per shard (no I/O; tested alone)
 *   signals.c    the throttle's signals: heartbeat, Threads_running, a custom query (a thread)
 *   progress.c   what follows an applied batch: Kafka commits in batches, status
 *                records, gauges, age and stall alerts
 *   retain.c     what Kafka must keep of an applied partition (no I/O; tested alone)
 *   trim.c       deleting the rest (DeleteRecords), the listed replicas' ledgers read
 *   apply.c      one job = one transaction on the shard's database (worker threads)
 *   coalesce.c   a batch's increments of one object summed before apply (no I/O)
 *   consumer_metrics.c  the consumer's metric families, one row each (common/metrics.h
 *                renders them)
 *   alerts.c, deadletter.c
 *
 * The folders they build on (common/, config/, codec/, store/, control/) are toured in
 * docs/development.md.
 *
 * @locality everything here belongs to the dispatcher thread (main.c's loop and the
 * librdkafka callbacks it serves), except the pool fields guarded by consumer.mu. */
#ifndef BW_CONSUMER_H
#define BW_CONSUMER_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>

#include "alerts.h"
#include "apply.h"
#include "deadletter.h"
#include "fleet.h"
#include "health.h"
#include "kafka.h"
#include "consumer_metrics.h"
#include "ratelimit.h"
#include "shardtable.h"
#include "signals.h"
#include "throttle.h"

#define COMPONENT "consumer"

typedef struct bw_job bw_job_t;

/* One partition of a lane's batches topic (a slot), as this consumer holds it. */
typedef struct {
    int shard, lane;           /* set once at startup */
    int assigned;
    int ledger_pending;        /* assigned; its ledger is being read: not fetched yet */
    int64_t ledger_retry_at_us;/* its ledger could not be read: read again then; 0 while a read is in flight */
    int fetch_paused;          /* fetching paused (see bw_partition_refresh_fetch) */
    int buffer_full;           /* back-pressure: set when full, cleared once half drained (partition.c) */
    int revoking;              /* the group takes it back: its jobs drain (rebalance.c) */
    int64_t next_fetch;        /* offset after the last buffered message; -1 before any */
    int64_t assigned_from;     /* where fetching began at assignment (may be logical) */
    rd_kafka_message_t **buf;  /* buffered messages, offset order */
    size_t len, cap;
    size_t bytes;              /* bytes buffered: payloads, and each message's overhead (partition.c) */
    int64_t lag;               /* as last measured */
    int64_t applied;           /* the next offset to apply, as stored in the shard's ledger; -1 unknown */
    int64_t published_applied; /* applied as last published in a status record */
    int64_t commit_due;        /* applied, not yet sent to Kafka as a commit; -1 if none */
    int64_t high, low;         /* watermarks as last measured; -1 unknown */
    int64_t committed;         /* Kafka acknowledged this commit: resuming from it never meets our deletes */
    int64_t deleted_to;        /* Kafka's log start after our last DeleteRecords */
    int64_t lost_from, lost_to;/* messages deleted before they were applied; empty if equal */
    int64_t lagging_since_ms;  /* wall clock when lag was first seen without progress; 0 if none */
    int64_t progress_ms;       /* wall clock of the last applied batch (or assignment) */
    double pass;               /* the lanes' stride scheduling: statements served / weight (scheduler.c) */
    uint64_t statements;       /* statements applied from this slot since assigned (status, metrics) */
} bw_partition_t;

#define BW_LATENCY_SAMPLES 128 /* batches a shard's statement latency percentiles are over */

/* A committed batch with refused ops, for the shard's status (DeadLetterNote). */
typedef struct {
    int64_t at_ms;
    char job_id[33];
    uint32_t ops;
    unsigned error_code;
    char reason[160];
} bw_dead_note_t;

/* One logical shard, as this consumer holds it (any of its lanes' partitions). */
typedef struct {
    int assigned_lanes;        /* partitions of the shard assigned here; 0 = not ours */
    bw_job_t *job;             /* in flight (one per shard: its budget, its order), or NULL */
    double pass;               /* the pass of the lane served last (scheduler.c) */
    int64_t ready_at_us;       /* not before (rate limit or retry backoff) */
    int64_t backoff_us;
    int op_paused;             /* paused by an operator (control topic) */
    double cap_rate;           /* statements/s the operator or the file allows (0 = unlimited) */
    bw_throttle_shard_t throttle; /* the adaptive throttle's state (throttle.h) */
    int throttle_paused;       /* paused by the throttle: a signal over its critical level */
    int pinned;                /* an operator pinned the rate: the throttle leaves it at cap_rate */
    double latency_ms;         /* ms per statement of its recent batches (a moving average) */
    uint64_t statements_done;  /* statements of applied batches, since assigned */
    uint64_t statements_at_tick; /* statements_done at the throttle's last tick */
    bw_ratelimit_t rl;         /* statements per second */
    bw_ratelimit_t rl_rows;    /* rows per second */
    uint64_t rows_applied, rows_failed; /* since assigned, for the status record */
    struct {
        int64_t at_ms;
        const char *kind;
        char message[240];
    } errors[5];               /* recent errors, a ring; errors_next is the next slot */
    int errors_next;
    float latency_ms_ring[BW_LATENCY_SAMPLES]; /* ms per statement of its last batches (status: p99) */
    int latency_cnt, latency_next;
    uint64_t dead_letters;     /* ops refused and dead-lettered (undecodable messages too), since assigned */
    bw_dead_note_t dead[5];    /* the latest batches with refused ops, a ring; dead_next is the next slot */
    int dead_next;
} bw_shard_t;

/* A MariaDB server's budget as this consumer holds it (scheduler.c): its share of the
 * whole server's statements/s and rows/s, in two buckets its shards' jobs also pay. */
typedef struct {
    double rate, row_rate;     /* the whole server's budget (control topic); 0 = none */
    int held;                  /* of its shards, how many are assigned here */
    int limited;               /* rl or rl_rows has a rate: its shards' jobs pay it */
    int cursor;                /* its shard (from its first) whose turn is next: fair among them */
    bw_ratelimit_t rl;         /* this consumer's share: rate × held / the server's shards */
    bw_ratelimit_t rl_rows;
} bw_server_state_t;

/* Handed from the dispatcher to a worker and back; owned by whoever holds it. Two kinds:
 * an apply (scheduler.c: a run of a partition's messages, one transaction) and a ledger
 * read or check (rebalance.c: the stored offsets of `shards`, one server). */
struct bw_job {
    void (*run)(bw_job_t *j, bw_applier_t *ap); /* @locality a worker; ap: the worker's connections */
    void (*done)(bw_job_t *j);                  /* @locality dispatcher: takes the job back and frees it */
    int shard;                 /* apply: the shard */
    int slot;                  /* apply: the partition (its lane and shard) */
    int64_t applied;           /* apply: the partition's applied offset when handed out (bw_partition_t) */
    int server;                /* the server it talks to */
    int probe;                 /* a health probe: one message */
    rd_kafka_message_t **msgs; /* the partition's first cnt buffered messages (borrowed) */
    size_t cnt;
    int *shards;               /* ledger read: the partitions (slots) to read, [cnt] */
    int64_t *offsets;          /* ledger read: their stored offsets (-1 none), [cnt] */
    int64_t *asked;            /* ledger check: what each had applied when asked, [cnt]; else NULL */
    unsigned ledger_errno;     /* ledger read: 0, or why the server could not be read */
    int64_t started_us;
    uint64_t statements;       /* apply: as planned (the rate's cost) */
    bw_apply_result_t res;
    bw_job_t *next;
};

typedef struct {
    bw_config_t *conf;
    rd_kafka_t *rk;
    rd_kafka_queue_t *poll_q;  /* the consumer queue the dispatcher waits on; a worker that
                                  finishes a job yields it, so the job is collected at once */
    bw_partition_t *partitions; /* [slot count]: every lane's partitions */
    bw_shard_t *shards;         /* [shards.count] */
    bw_server_state_t *servers; /* [server count]: their budgets */
    int budgeted;               /* servers with a budget: 0 keeps dispatch as it was */
    int slot_count;
    int assigned_cnt;
    atomic_int run;
    int fatal;                 /* librdkafka raised a fatal error (a fenced instance id): exit 1 */
    bw_fleet_self_t fleet;     /* this consumer's presence and prints (fleet.h) */
    int64_t started_at_ms;
    char member[300];          /* its group.instance.id, "" for a dynamic member */
    int subscribed;            /* joined the group: only once its settings agree with the fleet's */
    atomic_int joined;         /* a first assignment (maybe empty) arrived */
    bw_metrics_t *metrics;
    bw_dead_letters_t *dead_letters;
    bw_alerts_t *alerts;
    bw_health_t *health;
    bw_shard_table_t *table;   /* operator settings */
    bw_throttle_limits_t throttle; /* throttle.* as in force (reload updates it) */
    bw_signals_t *signals;     /* the throttle's reader; NULL while throttle.mode is off */
    int64_t throttle_tick_us;  /* the throttle's last step */
    int64_t signals_started_us; /* when the signal reader started */
    unsigned table_version;    /* of the settings last applied */
    rd_kafka_t *status_rk;     /* status records (fire and forget) */
    bw_topic_retention_t retention; /* of the batches topic, as found at startup */
    char instance[300];        /* host:port of this consumer, in status records */
    int next_shard;            /* the scheduler's round-robin cursor */
    int ledger_reads;          /* ledger reads in flight (rebalance.c) */
    int ledger_checks;         /* ledger checks in flight (rebalance.c) */
    rd_kafka_topic_partition_list_t *awaiting; /* an assignment not yet handed to librdkafka:
                                                  its ledgers are being read (rebalance.c) */
    /* the worker pool. @locks mu guards todo, done, busy, stopping */
    pthread_mutex_t mu;
    pthread_cond_t todo_cv, done_cv;
    bw_job_t *todo, *todo_tail, *done;
    int busy;                  /* jobs handed out and not yet collected */
    int stopping;
    pthread_t *workers;
    struct MHD_Daemon *httpd;
} bw_consumer_t;

extern bw_consumer_t consumer;

/* partition.c (functions on a partition take its slot) */
void bw_partition_buffer(rd_kafka_message_t *m);
void bw_partition_refresh_fetch(int slot);
void bw_partition_refresh_shard(int shard); /* every assigned lane of the shard */
void bw_partition_drop_head(int slot, size_t cnt);
void bw_partition_drop_all(int slot);
/* The shard's ledger is behind what this consumer applied (apply.h, BW_APPLY_REWIND): the
 * buffer is dropped and fetching goes on from the ledger's `offset` (-1, no row: from 0). */
void bw_partition_rewind(int slot, int64_t offset);
void bw_partition_note_error(int shard, const char *kind, const char *message);
/* The slot of a message of one of our topics, or -1. */
int bw_partition_slot_of(const char *topic, int32_t partition);
/* What a job costs the shard's budgets: statements as the applier plans them, rows. */
typedef struct {
    uint64_t statements, rows;
} bw_job_cost_t;
size_t bw_partition_plan_job(int slot, size_t max_messages, uint64_t max_statements, uint64_t max_rows,
                             bw_job_cost_t *cost);
int64_t bw_partition_oldest_unapplied_ms(int slot);
int64_t bw_partition_shard_oldest_unapplied_ms(int shard); /* the oldest over its lanes */

/* rebalance.c */
void bw_rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t *l, void *opaque);
void bw_rebalance_retry_ledgers(int64_t now_us);
/* Every few seconds: the held partitions' ledgers read and compared with what was applied
 * (a failover behind an address that stays); one behind is fetched again from there. */
void bw_rebalance_check_ledgers(int64_t now_us);
void bw_rebalance_close_checks(void); /* after the pool stopped */

/* pool.c */
void bw_pool_start(void);
void bw_pool_stop(void);
void bw_pool_submit(bw_job_t *j);
int bw_pool_full(void); /* every worker has a job */
void bw_pool_collect(int64_t wait_us);

/* scheduler.c */
int64_t bw_scheduler_dispatch(void);
int64_t bw_scheduler_dispatch_at(int64_t now_us); /* the same at a given time (the tests' clock) */
void bw_scheduler_drain(const int *slots, size_t n);
void bw_scheduler_apply_settings(int64_t now_us);
/* consumer.servers, each without a budget. */
void bw_scheduler_servers_init(int64_t now_us);
/* Server `server`'s budget (rate statements/s, row_rate rows/s for the whole server; 0 =
 * none) into its buckets, as this consumer's share: the budget × its shards assigned here
 * / the server's shards. Called when the budget or the assignment changes. */
void bw_scheduler_server_budget(int server, double rate, double row_rate, int64_t now_us, const char *why);
/* Every server's budget from the control topic, at this consumer's share. */
void bw_scheduler_apply_budgets(int64_t now_us);
/* The adaptive throttle's step, every throttle.interval_ms: reads the signals, steps each
 * assigned shard, applies, logs and reports what changed (a no-op while throttle.mode is
 * off, which it also starts and stops the signal reader for). */
void bw_scheduler_throttle_tick(int64_t now_us);
/* Logs, alerts and refetches after a health transition (BW_HEALTH_* flags) of shard. */
void bw_scheduler_on_health(int shard, unsigned changed, bw_fail_t fail, const char *error);

/* progress.c */
void bw_progress_start(void); /* the watermarks thread */
void bw_progress_stop(void);
void bw_progress_applied(bw_job_t *j, int64_t now_us);
void bw_progress_commit(void);
void bw_progress_commit_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t *l, void *opaque);
void bw_progress_update_gauges(void);
void bw_progress_publish_status(int all);
/* The shard's status now (its default lane is held here: else 0, nothing sent). */
int bw_progress_publish_shard(int shard);

/* trim.c: deleting from Kafka what the shard's primary and every listed replica have
 * applied, kept consumer.keep_applied_ms (retain.h) */
void bw_trim_start(void); /* after the partitions exist: the replica reader thread */
void bw_trim_stop(void);  /* waits up to 2 s for a DeleteRecords in flight */
void bw_trim_round(void); /* every consumer.delete_applied_interval_ms */
void bw_trim_collect(void); /* each turn: a DeleteRecords answer, without waiting */
void bw_trim_report(int64_t now_ms); /* gauges and BulkwriteTrimHeld, once a second */
void bw_trim_rewound(int slot, int64_t offset); /* the margin's samples follow a rewind down */

#endif
