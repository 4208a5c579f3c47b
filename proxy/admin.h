/* admin.h — the SREs' per-shard API on the proxy: GET /v1/shards lists every shard
 * (configured and effective budgets in statements/s and rows/s, paused, lag, recent
 * errors); POST
 * /v1/shards/{n}/rate|pause|resume writes the shard's records of the fields it changes
 * to the control topic (one key per field, shardtable.h), which every consumer follows;
 * POST /v1/servers/{name}/rate|pause|resume makes the same change to every shard of that
 * server; POST /v1/servers/{name}/budget sets the whole server's budget (one record,
 * "server/<name>/budget"), which its shards share.
 *
 * @locality any HTTP thread. */
#ifndef BW_ADMIN_H
#define BW_ADMIN_H

#include <stddef.h>

#include "config.h"
#include "endpoints.h" /* the listeners */
#include "backlog.h"
#include "history.h"
#include "reply.h"
#include "shardtable.h"

/* What GET /v1/shards answers: every shard (shard -1) or one (?shard=N), in full or
 * the summary (?view=summary: what the page polls, docs/api.md). */
typedef struct {
    int shard;
    int summary;
} bw_admin_shards_view_t;

/* GET /v1/shards as a tree (taken by the caller): {"now_ms", "rate_window_s", "shards":
 * [...], "servers": [...]}; ages and now_ms go to *k (reply.h). backlog and history may
 * be NULL (no backlog member, rows_per_s null). admin 0: no server name, no "servers",
 * no consumer instance, recent errors scrubbed (scrub.h). */
json_t *bw_admin_shards_tree(const bw_config_t *conf, bw_shard_table_t *table, bw_backlog_t *backlog,
                             bw_history_t *history, const bw_admin_shards_view_t *view, int admin, bw_clock_t *k);
/* GET /v1/shards/{n}/history as a tree: the shard's points and, within the window, its
 * operator changes (from the control records) and alerts (history.h), oldest first. */
json_t *bw_admin_history_tree(bw_shard_table_t *table, bw_history_t *history, int shard, int64_t now_ms);
/* GET /v1/check/{shard}: whether the shard takes writes now, and if not why (malloc'd
 * JSON): {"shard", "paused", "paused_by_operator", "throttled", "throttle": {state,
 * reason, signal, rate, cap, since_ms, dry_run} or null}. "paused": by an operator, or
 * by its consumer (its latest status record: after timeouts, or the throttle's critical
 * level). *held: 1 when paused or throttled (the endpoint's 429). */
char *bw_admin_check_json(const bw_config_t *conf, bw_shard_table_t *table, int shard, int admin, int *held);
/* JSON of one shard's setting (malloc'd). */
char *bw_admin_setting_json(const bw_config_t *conf, int shard, const bw_shard_setting_t *set);


/* 1 if method+url is shard or server control (POST /v1/shards/..., /v1/servers/...). */
int bw_admin_is_control(const char *method, const char *url);

/* 1 if the listener `on` serves method+url. With an admin listener, shard control is
 * served there only, and it serves nothing else but GET /v1/shards, /healthz and
 * /metrics. 0 with why (for a 404) otherwise. Unknown endpoints are "served" (they
 * answer 404 or 405 after). */
int bw_admin_served(const char *method, const char *url, bw_listener_t on, char *why, size_t why_size);

/* What a control request changes: one shard, or every shard of one server. */
typedef struct {
    int first_shard, last_shard; /* inclusive */
    const char *server;          /* the server's name (conf's) for /v1/servers/{name}/..., else NULL */
    const char *action;          /* "rate", "pause" or "resume"; "budget" for a server (points into the url) */
} bw_admin_target_t;

/* Parses "/v1/shards/{n}/{action}" or "/v1/servers/{name}/{action}" into *t. -1 with
 * err naming what is wrong (an unknown shard or server, an unknown action). */
int bw_admin_parse_url(const bw_config_t *conf, const char *url, bw_admin_target_t *t, char *err, size_t esz);

/* JSON of a server-wide change (malloc'd): the server, its shards, and each one's setting. */
char *bw_admin_server_json(const bw_config_t *conf, const bw_admin_target_t *t, const bw_shard_setting_t *sets);

/* Who changes a shard, for the audit trail: the client's name ("(open)" without a
 * clients file) and the caller's address; server: the server named in a server-wide
 * change (its shards' records say "server NAME: " before the reason), else NULL. */
typedef struct {
    const char *by;
    const char *from;
    const char *server;
} bw_admin_caller_t;

/* The records one control change writes: one per field it sets, each for its own key
 * of the shard (shardtable.h), packed ShardControls (data[i] malloc'd). */
typedef struct {
    size_t n;
    bw_control_key_t key[BW_CONTROL_KEYS];
    void *data[BW_CONTROL_KEYS];
    size_t len[BW_CONTROL_KEYS];
} bw_admin_records_t;

/* The shard's records after `action` with request body `body` (JSON: rate: {"rate"?:
 * number|null, "row_rate"?: number|null, "pinned"?: boolean, "reason"?} with at least one
 * of the three, null = back to the configured value; pause/resume: {"reason"?} or empty),
 * starting from the current setting *set (the fold of the shard's records; updated in
 * place only on success). Only the fields the change sets are written, each in its own
 * record: pause and resume write BW_CONTROL_PAUSE; rate writes BW_CONTROL_RATE for
 * "rate", BW_CONTROL_ROW_RATE for "row_rate", BW_CONTROL_PINNED for "pinned" — a budget
 * left out is not written, so a change of another field made at the same moment
 * elsewhere stands. Each record names the caller, and its history is this change
 * followed by prev[key]'s (the shard's current record under that key, prev or prev[key]
 * NULL for none), at most BW_CONTROL_HISTORY. Into *out (free with
 * bw_admin_records_free). -1 with err (the client's mistake) otherwise, *out empty. */
int bw_admin_control_update(int shard, const char *action, const char *body, size_t len,
                            Bulkwrite__Internal__V1__ShardControl *const *prev, const bw_admin_caller_t *caller,
                            bw_shard_setting_t *set, bw_admin_records_t *out, char *err, size_t esz);
void bw_admin_records_free(bw_admin_records_t *r);

/* The setting as one line: "paused; 20 stmt/s; configured rows/s". */
void bw_admin_setting_text(const bw_shard_setting_t *set, char *out, size_t size);

/* ---- a whole server's budget (POST /v1/servers/{name}/budget) ---- */

/* The server's next budget record after a change with request body `body` (JSON:
 * {"rate"?: number|null, "row_rate"?: number|null, "reason"?: string}, at least one of
 * the two; null or 0 = no budget of that kind; a member left out stays as it was),
 * starting from its current record prev (NULL: none). The record names the caller, and
 * its history is this change followed by prev's, at most BW_CONTROL_HISTORY. Packed
 * into *data (malloc'd, *dlen bytes), the budget it holds into *out. -1 with err (the
 * client's mistake: a rate out of bounds, an unknown member) otherwise, nothing made. */
int bw_admin_budget_update(const char *server, const char *body, size_t len, const Bulkwrite__Internal__V1__ServerBudget *prev,
                           const bw_admin_caller_t *caller, bw_server_budget_t *out, void **data, size_t *dlen,
                           char *err, size_t esz);
/* The budget as one line: "40 stmt/s; no row budget". */
void bw_admin_budget_text(const bw_server_budget_t *b, char *out, size_t size);
/* The reply to a budget change (malloc'd JSON): {"server", "first_shard", "last_shard",
 * "budget": {"rate", "row_rate", "changed_at_ms", "changed_by", "changed_from", "reason",
 * "history"} or null}, from the server's record r (NULL: none). */
char *bw_admin_budget_json(const bw_config_t *conf, int server, const Bulkwrite__Internal__V1__ServerBudget *r);

#endif
