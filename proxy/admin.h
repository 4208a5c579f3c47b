/* admin.h — the SREs' per-shard API on the proxy: GET /v1/shards lists every shard
 * (configured and effective budgets in statements/s and rows/s, paused, lag, recent
 * errors); POST
 * /v1/shards/{n}/rate|pause|resume changes the shard's record in the control topic,
 * which every consumer follows.
 *
 * @locality any HTTP thread. */
#ifndef BW_ADMIN_H
#define BW_ADMIN_H

#include <stddef.h>

#include "config.h"
#include "backlog.h"
#include "shardtable.h"

/* JSON of every shard (malloc'd). backlog may be NULL (no backlog member then). admin 0:
 * no server name, no consumer instance, recent errors scrubbed (scrub.h). */
char *bw_admin_shards_json(const bw_config_t *conf, bw_shard_table_t *table, bw_backlog_t *backlog, int admin);
/* JSON of one shard's setting (malloc'd). */
char *bw_admin_setting_json(const bw_config_t *conf, int shard, const bw_shard_setting_t *set);

/* Parses "/v1/shards/{n}/{action}": the shard (or -1 with err naming what is wrong) and
 * the action ("rate", "pause", "resume"). */
int bw_admin_parse_url(const bw_config_t *conf, const char *url, const char **action, char *err, size_t esz);

/* The shard's next control record after `action` with request body `body` (JSON: rate:
 * {"rate"?: number|null, "row_rate"?: number|null, "reason"?} with at least one of the
 * two budgets, null = back to the configured value, a budget left out unchanged;
 * pause/resume: {"reason"?} or empty), starting from the current setting *set (updated in
 * place only on success). Packed into *out (malloc'd). -1 with err (the client's mistake)
 * otherwise. */
int bw_admin_control_update(int shard, const char *action, const char *body, size_t len, bw_shard_setting_t *set,
                            void **out, size_t *out_len, char *err, size_t esz);

#endif
