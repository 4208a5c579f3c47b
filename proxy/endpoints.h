/* endpoints.h — the proxy's HTTP surface as one table (Redis's command table habit).
 *
 * Each row is an endpoint: method and path, the roles that may call it, the listeners
 * that serve it, what its 405 calls it, and the line docs/api.md lists. Authorization
 * (auth.c), the listener check (admin.c), dispatch (routes.c, by the row's id), the 405
 * answers and the endpoint table of docs/api.md (bwctl endpoints-doc, checked by make
 * docs-check) all read it: an endpoint is added here once.
 *
 * Pure: no proxy state, so bwctl links it. */
#ifndef BW_ENDPOINTS_H
#define BW_ENDPOINTS_H

#include <stddef.h>

/* Who may call an endpoint: a client's roles (auth.h reads them from the clients file). */
typedef enum {
    BW_ROLE_SUBMIT = 1u << 0,
    BW_ROLE_READ = 1u << 1,
    BW_ROLE_ADMIN = 1u << 2,
} bw_role_t;
#define BW_ROLE_ANY (BW_ROLE_SUBMIT | BW_ROLE_READ | BW_ROLE_ADMIN)

/* Which listener a request came in on: the only one (proxy.admin_port 0), or the data or
 * the admin listener of a proxy that has both. */
typedef enum { BW_LISTENER_ONLY, BW_LISTENER_DATA, BW_LISTENER_ADMIN } bw_listener_t;

typedef enum {
    BW_EP_BATCHES,
    BW_EP_JOB_FAILURES,
    BW_EP_JOB,
    BW_EP_JOB_CANCEL,
    BW_EP_JOBS,
    BW_EP_SHARDS,
    BW_EP_SHARD_HISTORY,
    BW_EP_CHECK,
    BW_EP_SHARD_CONTROL,
    BW_EP_SERVER_CONTROL,
    BW_EP_FLEET,
    BW_EP_WHOAMI,
    BW_EP_OPENAPI,
    BW_EP_ROOT,
    BW_EP_UI_ROOT,
    BW_EP_UI,
    BW_EP_HEALTHZ,
    BW_EP_READYZ,
    BW_EP_METRICS,
    BW_EP_RPC_WRITE_BATCH, /* the Connect protocol's calls of bulkwrite.v1.BulkwriteService (connect.c) */
    BW_EP_RPC_GET_JOB,
    BW_EP_RPC_CANCEL_JOB,
    BW_EP_RPC_LIST_FAILURES,
    BW_EP_COUNT
} bw_endpoint_id_t;

/* How a row's path matches a URL. */
typedef enum {
    BW_PATH_EXACT,  /* the whole URL */
    BW_PATH_PREFIX, /* the URL starts with it; the rest is the endpoint's argument */
    BW_PATH_JOB_SUB, /* path is "/v1/jobs/" and sub the suffix after a 32-digit job id */
    BW_PATH_SUFFIX   /* starts with path, ends with sub, something between (the argument) */
} bw_path_match_t;

/* Roles: bits of auth.h's bw_role_t; 0 = anyone, even without credentials. */
#define BW_EP_OPS_ROLES 0x100u /* read or admin, or anyone with proxy.auth.open_metrics */

/* Listeners: bits (1u << bw_listener_t). With one listener (BW_LISTENER_ONLY) every row
 * is served. */
#define BW_ON_DATA (1u << BW_LISTENER_DATA)
#define BW_ON_ADMIN (1u << BW_LISTENER_ADMIN)
#define BW_ON_BOTH (BW_ON_DATA | BW_ON_ADMIN)

typedef struct {
    bw_endpoint_id_t id;
    const char *method;
    const char *path;
    bw_path_match_t match;
    const char *sub;       /* BW_PATH_JOB_SUB's and BW_PATH_SUFFIX's suffix */
    const char *shown;     /* as docs/api.md and the 405s name it: "/v1/jobs/{id}" */
    unsigned roles;        /* BW_ROLE_* bits, or BW_EP_OPS_ROLES, or 0 */
    unsigned listeners;    /* BW_ON_* */
    const char *verb;      /* in a 405's "use GET (status) or DELETE (cancel)"; NULL: none */
    const char *admin_why; /* when not on the data listener, why not (the URL's row says) */
    const char *doc;       /* what it does, for docs/api.md */
} bw_endpoint_t;

extern const bw_endpoint_t bw_endpoints[BW_EP_COUNT];

/* The row serving `method` `url`, or NULL. */
const bw_endpoint_t *bw_endpoint_find(const char *method, const char *url);

/* The roles that may call `method` `url` (auth.h's bits): 0 for an open endpoint,
 * BW_ROLE_ANY for one not in the table (it is a 404 for any caller). */
unsigned bw_endpoint_roles(const char *method, const char *url, int open_metrics);

/* Whether `url` is served with another method: writes "use GET (status) or DELETE
 * (cancel) for URL" to out and returns 1 (the 405's text), else 0 (a 404). */
int bw_endpoint_other_methods(const char *method, const char *url, char *out, size_t size);

/* docs/api.md with its endpoint table (between the markers) written from the rows;
 * malloc'd, or NULL with errstr when the markers are missing. */
char *bw_endpoints_doc(const char *api_md, char *errstr, size_t errstr_size);

#endif
