/* helpers.h — shared by the unit-test suites: config variants written to temp files,
 * a small request builder over protobuf-c structs, and suite constructors. */
#ifndef BW_TEST_HELPERS_H
#define BW_TEST_HELPERS_H

#include <check.h>
#include <mysql.h>
#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "bulkwrite/internal/v1/records.pb-c.h"
#include "config.h"

/* Path of the reference configuration (env BW_TEST_CONF, else conf/bulkwrite.conf
 * relative to the working directory, which run-unit.sh sets to the repository root). */
const char *t_ref_conf_path(void);
/* The reference file's text (malloc'd, cached for the process; do not free). */
const char *t_ref_conf_text(void);

/* Writes `text` to a fresh temp file (mkstemps, suffix ".conf"); returns its malloc'd
 * path. The caller unlink()s and free()s it (t_unlink_free). */
char *t_write_temp(const char *text);
void t_unlink_free(char *path);

/* The reference text with the first occurrence of `find` replaced by `repl`, written to
 * a temp file. *line gets the 1-based line where `find` started (if line != NULL).
 * Fails the current test if `find` is absent. */
char *t_conf_variant(const char *find, const char *repl, int *line);
/* 1-based line of the first occurrence of `needle` in `text` (0 if absent); with
 * `after` != NULL, the search starts at the first occurrence of `after`. */
int t_line_of(const char *text, const char *after, const char *needle);

/* Loads the reference config; fails the test if it does not load. */
bw_config_t *t_ref_config(void);
/* Loads a variant; fails the test if it does not load. */
bw_config_t *t_conf_variant_load(const char *find, const char *repl);

/* A config for the throwaway MariaDB of test/run-unit.sh (env BW_TEST_MYSQL_PORT): two
 * logical shards in databases <prefix>00000 and <prefix>00001, the reference object
 * types, schema applied (twice: it must be idempotent). NULL, with a note, when no
 * server is set. The caller bw_config_destroy()s it. */
bw_config_t *t_live_config(const char *database_prefix);

/* The first column of the first row of `sql` on db as a number (-1 if none or NULL);
 * fails the test if the query fails. */
long long t_scalar(MYSQL *db, const char *sql);

/* ---- request builder (everything in the arena) ------------------------------------ */
typedef struct {
    bw_arena_t *a;
    Bulkwrite__V1__BatchWriteRequest *req;
    size_t cap;
} t_req_t;

void t_req_init(t_req_t *r, bw_arena_t *a, size_t cap_ops);
Bulkwrite__V1__Op *t_op(t_req_t *r, int op, const char *type, uint64_t id, const char *shard_key);
Bulkwrite__V1__Field *t_field(t_req_t *r, Bulkwrite__V1__Op *op, const char *name);
void t_f_int(t_req_t *r, Bulkwrite__V1__Op *op, const char *name, int64_t v);
void t_f_inc(t_req_t *r, Bulkwrite__V1__Op *op, const char *name, int64_t v);
void t_f_dbl(t_req_t *r, Bulkwrite__V1__Op *op, const char *name, double v);
void t_f_bool(t_req_t *r, Bulkwrite__V1__Op *op, const char *name, int v);
void t_f_null(t_req_t *r, Bulkwrite__V1__Op *op, const char *name);
void t_f_str(t_req_t *r, Bulkwrite__V1__Op *op, const char *name, const void *s, size_t len);
void t_f_bytes(t_req_t *r, Bulkwrite__V1__Op *op, const char *name, const void *s, size_t len);
/* A decimal string of `id` in the arena (for create shard_key). */
char *t_idstr(t_req_t *r, uint64_t id);

/* Deep equality of two values / requests (1 = equal). */
/* Values built by hand in arena a (the bytes of text and binary are copied). */
Bulkwrite__V1__Value *t_v_int(bw_arena_t *a, int64_t x);
Bulkwrite__V1__Value *t_v_dbl(bw_arena_t *a, double x);
Bulkwrite__V1__Value *t_v_bool(bw_arena_t *a, int x);
Bulkwrite__V1__Value *t_v_null(bw_arena_t *a);
Bulkwrite__V1__Value *t_v_str(bw_arena_t *a, const void *s, size_t len);
Bulkwrite__V1__Value *t_v_bytes(bw_arena_t *a, const void *s, size_t len);
int t_value_eq(const Bulkwrite__V1__Value *a, const Bulkwrite__V1__Value *b);
int t_request_eq(const Bulkwrite__V1__BatchWriteRequest *a, const Bulkwrite__V1__BatchWriteRequest *b,
                 char *why, size_t why_size);

/* Suites. */
Suite *shard_suite(void);
Suite *fleet_suite(void);
Suite *protojson_suite(void);
Suite *ratelimit_suite(void);
Suite *config_suite(void);
Suite *sql_suite(void);
Suite *sqlbind_suite(void);
Suite *batcher_suite(void);
Suite *request_suite(void);
Suite *apply_suite(void);
Suite *coalesce_suite(void);
Suite *ledger_suite(void);
Suite *kafka_suite(void);
Suite *alerts_suite(void);
Suite *admin_suite(void);
Suite *backlog_suite(void);
Suite *health_suite(void);
Suite *scheduler_suite(void);
Suite *metrics_suite(void);
Suite *forward_suite(void);
Suite *auth_suite(void);
Suite *quota_suite(void);
Suite *scrub_suite(void);
Suite *throttle_suite(void);
Suite *handover_suite(void);
Suite *retain_suite(void);
Suite *partset_suite(void);
Suite *compactor_suite(void);
Suite *records_suite(void);
Suite *timers_suite(void);
Suite *endpoints_suite(void);
Suite *jobs_suite(void);
Suite *gate_suite(void);
Suite *notify_suite(void);
Suite *cli_suite(void);
Suite *log_suite(void);
Suite *history_suite(void);

#endif
