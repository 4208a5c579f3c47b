/* scrub.h — what a caller without the admin role sees of the shards' errors.
 *
 * The MySQL server's error text can quote row values ("Duplicate entry 'alice@x' for key
 * 'email'"), and bulkwrite's own messages name servers and hosts ("connect to mysql-a
 * (10.0.0.7:3306)"). GET /v1/jobs/{id} and GET /v1/shards answer admins (and every caller
 * of a proxy without a clients file) with everything; other callers get the error number
 * and a few words from the error table of store/db.c instead, and no server, host or
 * consumer names. Pure functions.
 * @locality any thread. */
#ifndef BW_SCRUB_H
#define BW_SCRUB_H

#include <stddef.h>

/* "MySQL error 1062 (duplicate key)". Returns out. */
const char *bw_scrub_mysql(unsigned err, char *out, size_t size);

/* A failed op's reason as a non-admin sees it: code 0 is one of bulkwrite's own reasons
 * (the op's type, op or column is no longer configured), which quote no values: as is;
 * any other code: bw_scrub_mysql(code). Returns reason or out. */
const char *bw_scrub_failure(unsigned code, const char *reason, char *out, size_t size);

/* A shard's recent error (kind and message as the consumer noted them) as a non-admin
 * sees it: kinds "data" and "lost" are bulkwrite's own counts and offsets: as is; a
 * message ending in " (N)" with N a MySQL error number (1000 or more): bw_scrub_mysql(N);
 * anything else: "<kind> error (details for admins)". Returns message or out. */
const char *bw_scrub_shard_error(const char *kind, const char *message, char *out, size_t size);

/* The adaptive throttle's reason (ShardStatus.throttle_reason) as a non-admin sees it: an
 * unknown signal's reason ends in the error that made it unknown, which names hosts and
 * users: cut after "since <time>" with " (details for admins)". Any other state's as is.
 * Always writes out; returns out. */
const char *bw_scrub_throttle_reason(const char *state, const char *reason, char *out, size_t size);

#endif
