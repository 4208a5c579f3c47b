/* auth.h — who is calling the proxy, and what they may do.
 *
 * Clients are listed in a libconfig file of their own (proxy.auth.clients_file):
 *
 *   clients = (
 *     { name = "spam-cleanup"; token_sha256 = "<64 hex digits>"; roles = ["submit"];
 *       scopes = ["pin:delete"]; lanes = ["urgent", "default"]; ops_per_second = 20000; max_jobs_in_flight = 4; },
 *     { name = "sre"; token_sha256 = "..."; token_expires = "2027-03-01T00:00:00Z"; roles = ["admin"]; },
 *     { name = "feed-ingest"; roles = ["submit"]; scopes = ["pin:create"];   # a rotation under way:
 *       tokens = ( { sha256 = "<old>"; expires = "2026-12-08T00:00:00Z"; }, { sha256 = "<new>"; } ); }
 *   );
 *
 * A client has one token (token_sha256, token_expires), or several (tokens): several let a
 * token be rotated without a gap and without a new client name, which would change the
 * client's request_id namespace, its jobs and its quotas. A token past its expiry gets 401
 * "token expired at ...".
 *
 * A caller sends `Authorization: Bearer TOKEN`, or (over HTTPS with proxy.tls.client_ca_file)
 * a client certificate whose identity is a client's cert_identity (proxy/tls.h verifies
 * it and names the identity); a client may have a token, a certificate or both. A token
 * presented must be valid, and when both are presented they must be the same client's.
 *
 * For a token, the proxy hashes TOKEN with SHA-256 and
 * compares the digest with every client's, each in constant time (CRYPTO_memcmp), all of
 * them whatever matched: the file never holds a token, and the time taken does not say
 * which client or which prefix matched.
 *
 * Roles (a client holds one or more):
 *   submit  POST /v1/batches, each op within the client's scopes ("type:op", either side
 *           may be "*"); an op outside them is refused on its own, with the reason; with
 *           `lanes` only those priority lanes (config lanes; "default" for a request that
 *           names none): another lane is 403 for the whole request
 *   read    GET /v1/jobs/{id}, GET /v1/shards; /metrics and /readyz when they are not open
 *   admin   everything, shard and server control (POST /v1/shards/{n}/ACTION,
 *           /v1/servers/{name}/ACTION; ACTION rate, pause or resume) included
 * /healthz is always open; /metrics and /readyz are open with proxy.auth.open_metrics.
 *
 * A loaded set of clients (bw_auth_set_t) never changes. bw_auth_t holds the current one
 * and swaps in a new one on SIGHUP; a request holds a reference to the set it was
 * admitted with until it is answered, so a reload never pulls a client from under it.
 * Without a clients file there is no set (NULL): every caller is admin.
 * @locality any thread. */
#ifndef BW_AUTH_H
#define BW_AUTH_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "config.h"
#include "endpoints.h" /* the roles */
#include "quota.h"
#include "request.h"

#define BW_AUTH_DIGEST_LEN 32 /* SHA-256 */
#define BW_AUTH_NAME_MAX 64
#define BW_AUTH_IDENTITY_MAX 255 /* a certificate identity: 1 to 255 of ASCII '!' to '~' */


/* "pin:delete", "board:*", "*:create", "*:*" */
typedef struct {
    char *type; /* an object type's name; NULL = every type ("*") */
    int op;     /* bw_op_t; 0 = every op ("*") */
} bw_auth_scope_t;

#define BW_AUTH_TOKENS_MAX 8 /* a client's tokens at once: enough for any rotation */

typedef struct {
    uint8_t digest[BW_AUTH_DIGEST_LEN]; /* sha256 of the token */
    int64_t expires;                    /* Unix seconds, UTC; 0 = never */
} bw_auth_token_t;

typedef struct {
    char *name;                              /* [A-Za-z0-9_.-], at most 64: a metrics label */
    bw_auth_token_t tokens[BW_AUTH_TOKENS_MAX];
    int token_cnt;                           /* 0: a certificate client only */
    char *cert_identity;                     /* a client certificate's identity; NULL: none */
    unsigned roles;                          /* bw_role_t bits */
    bw_auth_scope_t *scopes;                 /* submit: what it may send */
    int scope_cnt;
    unsigned lanes;                          /* submit: a bit per lane index (config lanes) it may name; 0 = every lane */
    bw_quota_limits_t quota;                 /* submit: ops/s, bytes/s, jobs in flight (quota.h) */
    int line;                                /* in the clients file */
} bw_auth_client_t;

typedef struct {
    char *path;
    bw_auth_client_t *clients;
    int client_cnt;
    atomic_int refs; /* bw_auth_acquire / bw_auth_release */
} bw_auth_set_t;

/* The digest comparison, CRYPTO_memcmp; a test may wrap it to count the calls. */
extern int (*bw_auth_memcmp)(const void *a, const void *b, size_t len);

/* ---- pure functions ---------------------------------------------------------------- */

/* Reads and checks a clients file. With conf, every scope's object type must be one of
 * conf's. NULL on error with "path:line: client "name": what is wrong" in errstr (bad
 * hex, unknown role or op or object type, a duplicate name or token, unknown keys, a
 * submitter without scopes). The set (one reference) is freed by bw_auth_release. */
bw_auth_set_t *bw_auth_load(const char *path, const bw_config_t *conf, char *errstr, size_t errstr_size);

/* The client whose token this is, or NULL; *token_entry (may be NULL) gets which of its
 * tokens it is, expired or not. Every token's digest is compared, in constant time,
 * whatever matched. */
const bw_auth_client_t *bw_auth_find(const bw_auth_set_t *set, const char *token, size_t len,
                                     const bw_auth_token_t **token_entry);

/* The client whose certificate identity this is (exact match), or NULL. */
const bw_auth_client_t *bw_auth_find_identity(const bw_auth_set_t *set, const char *identity);

/* 1 if s can be a certificate identity: 1 to BW_AUTH_IDENTITY_MAX of ASCII '!' to '~'. */
int bw_auth_identity_ok(const char *s);

/* The token of an Authorization header ("Bearer TOKEN", the scheme in any case), or NULL
 * when the header is absent or is not a bearer credential. */
const char *bw_auth_bearer(const char *header, size_t *len);

/* 1 if client may send `op` on objects of `type`: an admin always, a submitter within
 * its scopes. A NULL client (no clients file) may do everything. */
int bw_auth_allows_op(const bw_auth_client_t *client, const char *type, int op);

/* Refuses, one by one, the valid ops of req (routes[i].shard >= 0) outside the client's
 * scopes: routes[i].shard becomes -1, so the batcher leaves them out, and each gets a
 * rejection "forbidden: client "NAME" may not OP TYPE (its scopes: ...)" merged into
 * *rejected (re-allocated in arena, sorted by index; *rejected_cnt grows). Returns how
 * many it refused: 0 for an admin or a NULL client. */
size_t bw_auth_refuse_ops(const bw_auth_client_t *client, const Bulkwrite__V1__BatchWriteRequest *req,
                          bw_op_route_t *routes, bw_rejection_t **rejected, size_t *rejected_cnt, bw_arena_t *arena);

/* Decides a request at time now (Unix seconds). authorization is the Authorization header (or NULL);
 * cert_identity the identity of the client certificate the caller presented, already
 * verified (tls.h), or NULL. 0: go on, *client is the caller (NULL when the endpoint is
 * open or there is no clients file); 401: no valid credential (a token presented is
 * unknown or expired, an identity is no client's and no token says who it is, or the two name
 * different clients); 403: the client's roles do not cover the endpoint (*client is set).
 * why gets the reason for 401 and 403. */
unsigned bw_auth_decide(const bw_auth_set_t *set, const char *method, const char *url,
                        const char *authorization, const char *cert_identity, int open_metrics, int64_t now,
                        const bw_auth_client_t **client, char *why, size_t why_size);

/* 1 if client may send a request in lane (an index of conf->lanes): an admin, a NULL
 * client or one without `lanes` always. */
int bw_auth_allows_lane(const bw_auth_client_t *client, int lane);
/* The client's lanes as text, "urgent, default" ("every lane" without `lanes`). */
void bw_auth_lanes_text(const bw_auth_client_t *client, const bw_config_t *conf, char *out, size_t size);

/* The roles as text, "submit, read" ("none" for 0). */
void bw_auth_roles_text(unsigned roles, char *out, size_t size);
/* The client's scopes as text, "pin:delete, board:*". */
void bw_auth_scopes_text(const bw_auth_client_t *client, char *out, size_t size);

/* conf's proxy.auth.clients_file, relative to conf's folder (malloc'd); NULL for none. */
char *bw_auth_path(const bw_config_t *conf);

/* Whether address (a listen address) can only be reached from this host: 127.0.0.0/8,
 * ::1, ::ffff:127.0.0.0/104 or "localhost". */
int bw_auth_is_loopback(const char *address);
/* Protected mode: without a clients file, a listener on an address other than loopback
 * is refused (-1, err names the key and the way out) unless proxy.auth.allow_open, then
 * 1 with err saying so (a warning); 0 when the API is authenticated or local only. */
int bw_auth_check_open(const bw_config_t *conf, char *err, size_t err_size);

/* ---- the live set -------------------------------------------------------------------- */

typedef struct bw_auth bw_auth_t;

/* Loads conf's proxy.auth.clients_file (relative to conf's folder), or none when it is
 * "": then every caller is admin, which is logged as a warning. NULL with errstr when the
 * file does not load. */
bw_auth_t *bw_auth_start(const bw_config_t *conf, char *errstr, size_t errstr_size);
/* Re-reads the clients file (SIGHUP). On an error the loaded set stays and the reason is
 * logged; returns 0 when the new set is in force. Nothing to do without a file. */
int bw_auth_reload(bw_auth_t *auth, const bw_config_t *conf);
/* The current set with a reference taken (NULL without a clients file), for one request:
 * its clients stay valid until bw_auth_release. */
bw_auth_set_t *bw_auth_acquire(bw_auth_t *auth);
void bw_auth_release(bw_auth_set_t *set);
void bw_auth_stop(bw_auth_t *auth);
/* Which client each loaded credential is: "t:HEX NAME" per token (16 hex digits of its
 * SHA-256), "c:HEX NAME" per certificate identity (of the identity's), sorted, one per
 * line (malloc'd; "" without a clients file). No credential may be two clients on two
 * proxies of one deployment (fleet.h). */
char *bw_auth_credentials(bw_auth_t *auth);

#endif
