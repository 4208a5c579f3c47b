/* records.h — the kinds of record the compacted control and status topics carry, one
 * row each (records.c): the topic, the key's format and its parse, the protobuf message,
 * how readers fold a key's records into a value, who writes it, and whether it outlives
 * its writer. The table that reads the topics (shardtable.c) asks this registry which
 * kind a key is and names no key format itself; writers build their keys here and
 * produce their records through bw_record_produce (the proxy's control changes through
 * proxy/changes.c, which adds the read-back).
 *
 * A new kind is a row in records.c, its key functions here, and where the table keeps
 * its value (shardtable.c's store functions, one per kind).
 *
 * @locality any thread: the functions are pure, bw_record_produce uses the caller's
 * producer. */
#ifndef BW_RECORDS_H
#define BW_RECORDS_H

#include <librdkafka/rdkafka.h>
#include <protobuf-c/protobuf-c.h>
#include <stddef.h>

typedef enum { BW_TOPIC_CONTROL, BW_TOPIC_STATUS } bw_record_topic_t;

/* How readers turn a key's records into a value. */
typedef enum {
    BW_FOLD_LAST_WINS, /* the newest record under the key is the value (by version, tail.h) */
    BW_FOLD_PER_FIELD, /* several keys of one object each own some of its fields; the value is
                        * their merge, the audit of the newest and their histories merged */
    BW_FOLD_ONCE,      /* a fact that never changes back (a cancellation): kept in whatever
                        * order its records are read, as they may sit in different partitions */
} bw_record_fold_t;

typedef enum {
    BW_RECORD_SHARD_SETTING, /* control "shard/N[/field]"      ShardControl */
    BW_RECORD_SERVER_BUDGET, /* control "server/<name>/budget" ServerBudget */
    BW_RECORD_JOB_CANCEL,    /* control "job/<id>"             JobControl */
    BW_RECORD_SHARD_STATUS,  /* status  "shard/N"              ShardStatus */
    BW_RECORD_PRESENCE,      /* status  "member/<role>/<instance>" FleetMember */
    BW_RECORD_KINDS
} bw_record_kind_t;

typedef struct {
    const char *name;  /* in logs and docs: "shard setting" */
    bw_record_topic_t topic;
    const char *key;   /* the key's format, as docs/architecture.md shows it */
    const ProtobufCMessageDescriptor *message;
    bw_record_fold_t fold;
    const char *writer; /* who writes it, and on which thread */
    int durable;        /* 1: an operator's, kept until changed; 0: comes and goes with its writer */
} bw_record_def_t;

/* Row k of the registry (NULL past its end). */
const bw_record_def_t *bw_record_def(bw_record_kind_t k);

/* ---- a shard's setting: one key per field (BW_FOLD_PER_FIELD) ----
 * An SRE sets each field independently (a rate change may set the statement rate, the
 * row rate, the pin, or several), so each has its own key; two changes made at the same
 * moment on two proxies (one pausing the shard, one setting its rate) both take effect. */
typedef enum {
    BW_CONTROL_WHOLE,    /* "shard/N": every field; written by versions before per-field keys, read only */
    BW_CONTROL_PAUSE,    /* "shard/N/pause": paused (pause, resume) */
    BW_CONTROL_RATE,     /* "shard/N/rate": has_rate, rate */
    BW_CONTROL_ROW_RATE, /* "shard/N/row_rate": has_row_rate, row_rate */
    BW_CONTROL_PINNED,   /* "shard/N/pinned": pinned */
    BW_CONTROL_KEYS
} bw_control_key_t;

#define BW_CONTROL_FIELDS_MAX 2 /* ShardControl fields one key owns, at most */
/* The ShardControl fields (protobuf names) key k owns; NULL-terminated. The whole record
 * (BW_CONTROL_WHOLE) owns none: it is the base of every field without a record of its own. */
const char *const *bw_control_key_fields(bw_control_key_t k);

/* "shard/N" into key; returns its length. The status topic's key, and the control
 * topic's whole record. */
int bw_shard_key(int shard, char key[24]);
#define BW_CONTROL_KEY_MAX 40
/* The control topic's key of one of the shard's fields ("shard/N/rate") into key;
 * returns its length. */
int bw_shard_control_key(int shard, bw_control_key_t k, char key[BW_CONTROL_KEY_MAX]);
/* The shard a control or status key is for (0 to shard_count - 1) and which of its keys
 * (*k), or -1: not a shard's key (a presence "member/...", a key of another layout or of a
 * later version's field). */
int bw_shard_key_parse(const void *key, size_t len, int shard_count, bw_control_key_t *k);

/* ---- a server's budget ---- */
#define BW_SERVER_BUDGET_KEY_MAX 320
/* "server/<name>/budget" into key; returns its length (-1: the name does not fit). */
int bw_server_budget_key(const char *server, char key[BW_SERVER_BUDGET_KEY_MAX]);
/* The server name of a budget key into name (NUL-terminated), or -1: not a budget key. */
int bw_server_budget_key_parse(const void *key, size_t len, char name[BW_SERVER_BUDGET_KEY_MAX]);

/* ---- a job's cancellation ---- */
#define BW_JOB_CONTROL_PREFIX 20 /* = BW_LEDGER_JOB_PREFIX */
#define BW_JOB_CONTROL_KEY_MAX 40
/* "job/<job id>" into key; returns its length. */
int bw_job_control_key(const char *job_id, char key[BW_JOB_CONTROL_KEY_MAX]);
/* The job id of a cancellation's key ("job/" and 32 lower-case hex digits), or NULL. */
const char *bw_job_control_key_parse(const void *key, size_t len);

/* ---- a process's presence ---- */
/* "member/<role>/<instance>" into key (at most size bytes); its length. */
int bw_member_key(const char *role, const char *instance, char *key, size_t size);
/* 1 if key (klen bytes, not terminated) is a member record's key. */
int bw_member_key_is(const void *key, size_t klen);

/* ---- reading and writing ---- */
/* A key read from topic, parsed: its kind, and for a shard's key the shard and which of
 * its keys. */
typedef struct {
    bw_record_kind_t kind;
    int shard;              /* BW_RECORD_SHARD_SETTING, BW_RECORD_SHARD_STATUS */
    bw_control_key_t field; /* BW_RECORD_SHARD_SETTING */
} bw_record_key_t;

/* Which kind a key of topic is, into *out; -1: none (another layout's or a later
 * version's key, skipped). A presence read from the control topic (where versions before
 * the status topic wrote it) is a presence too. */
int bw_record_key_parse(bw_record_topic_t topic, const void *key, size_t klen, int shard_count, bw_record_key_t *out);

/* Produces msg (of kind's message; NULL: a tombstone, the key deleted) under key to the
 * topic named topic, with rk (copied: the caller keeps msg and key). The records a
 * process writes of itself (its status, its presence) go this way; they are not read
 * back (the next one replaces them). Returns librdkafka's error of the enqueue. */
rd_kafka_resp_err_t bw_record_produce(rd_kafka_t *rk, const char *topic, bw_record_kind_t kind, const char *key,
                                      size_t klen, const ProtobufCMessage *msg);

#endif
