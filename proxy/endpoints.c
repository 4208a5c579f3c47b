#include "endpoints.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#define CONTROL_ONLY_THERE                                                                                     \
    "shard and server control are served on the admin listener only "                                          \
    "(proxy.admin_listen_address:proxy.admin_port), not on this port"
#define PAGE_ONLY_THERE "the page is served on the admin listener (proxy.admin_listen_address:proxy.admin_port)"
#define READERS (BW_ROLE_READ | BW_ROLE_ADMIN)

/* Found in this order: a longer path before the prefix that also matches it. */
const bw_endpoint_t bw_endpoints[BW_EP_COUNT] = {
    {BW_EP_BATCHES, "POST", "/v1/batches", BW_PATH_EXACT, NULL, "/v1/batches", BW_ROLE_SUBMIT | BW_ROLE_ADMIN,
     BW_ON_DATA, NULL, NULL, "a batch of creates, updates and deletes (protobuf or JSON): the reply says which ops were accepted"},
    {BW_EP_JOB_FAILURES, "GET", "/v1/jobs/", BW_PATH_JOB_SUB, "/failures", "/v1/jobs/{id}/failures", READERS,
     BW_ON_BOTH, "failures", NULL, "a job's refused ops, each with its reason and the op as JSON, a page at a time"},
    {BW_EP_JOB, "GET", "/v1/jobs/", BW_PATH_PREFIX, NULL, "/v1/jobs/{id}", READERS, BW_ON_BOTH, "status", NULL,
     "a job's status: its ops per state, per shard, its parts, what it waits for"},
    {BW_EP_JOB_CANCEL, "DELETE", "/v1/jobs/", BW_PATH_PREFIX, NULL, "/v1/jobs/{id}", BW_ROLE_SUBMIT | BW_ROLE_ADMIN,
     BW_ON_BOTH, "cancel", NULL, "cancels a job: its ops not yet applied are skipped (its owner or an admin)"},
    {BW_EP_JOBS, "GET", "/v1/jobs", BW_PATH_EXACT, NULL, "/v1/jobs", READERS, BW_ON_BOTH, NULL, NULL,
     "the latest jobs (the page's list)"},
    {BW_EP_SHARDS, "GET", "/v1/shards", BW_PATH_EXACT, NULL, "/v1/shards", READERS, BW_ON_BOTH, NULL, NULL,
     "every shard's settings, state and backlog (`?view=summary`: the page's compact form; `?shard=N`: one shard)"},
    {BW_EP_SHARD_HISTORY, "GET", "/v1/shards/", BW_PATH_SUFFIX, "/history", "/v1/shards/{n}/history", READERS,
     BW_ON_BOTH, NULL, NULL, "a shard's last hour: lag, oldest unapplied, rows/s and budgets every 10 s, and its "
     "pauses, rate changes and alerts"},
    {BW_EP_CHECK, "GET", "/v1/check/", BW_PATH_PREFIX, NULL, "/v1/check/{shard}", BW_ROLE_ANY, BW_ON_DATA, NULL,
     NULL, "whether a shard takes writes now: 200, or 429 when paused or throttled, the body saying why (any client)"},
    {BW_EP_SHARD_CONTROL, "POST", "/v1/shards/", BW_PATH_PREFIX, NULL, "/v1/shards/{n}/rate\\|pause\\|resume",
     BW_ROLE_ADMIN, BW_ON_ADMIN, NULL, CONTROL_ONLY_THERE, "a shard's rate, pause or resume"},
    {BW_EP_SERVER_CONTROL, "POST", "/v1/servers/", BW_PATH_PREFIX, NULL, "/v1/servers/{name}/rate\\|pause\\|resume\\|budget",
     BW_ROLE_ADMIN, BW_ON_ADMIN, NULL, CONTROL_ONLY_THERE, "every shard of a server at once, or the server's budget"},
    {BW_EP_FLEET, "GET", "/v1/fleet", BW_PATH_EXACT, NULL, "/v1/fleet", READERS, BW_ON_BOTH, NULL, NULL,
     "the proxies and consumers running, and whether their settings agree"},
    {BW_EP_WHOAMI, "GET", "/v1/whoami", BW_PATH_EXACT, NULL, "/v1/whoami", BW_ROLE_ANY, BW_ON_BOTH, NULL, NULL,
     "the caller's client name and roles"},
    {BW_EP_OPENAPI, "GET", "/v1/openapi.yaml", BW_PATH_EXACT, NULL, "/v1/openapi.yaml", 0, BW_ON_BOTH, NULL, NULL,
     "the OpenAPI 3.1 description of these endpoints ([openapi.yaml](openapi.yaml))"},
    {BW_EP_ROOT, "GET", "/", BW_PATH_EXACT, NULL, "/", 0, BW_ON_ADMIN, NULL, PAGE_ONLY_THERE,
     "redirects (302) to /ui/, the page"},
    {BW_EP_UI_ROOT, "GET", "/ui", BW_PATH_EXACT, NULL, "/ui", 0, BW_ON_ADMIN, NULL, PAGE_ONLY_THERE,
     "redirects to /ui/"},
    {BW_EP_UI, "GET", "/ui/", BW_PATH_PREFIX, NULL, "/ui/", 0, BW_ON_ADMIN, NULL, PAGE_ONLY_THERE,
     "the SRE page's files (no data: the page calls the endpoints above with the caller's token)"},
    {BW_EP_HEALTHZ, "GET", "/healthz", BW_PATH_EXACT, NULL, "/healthz", 0, BW_ON_BOTH, NULL, NULL,
     "200 while the process runs"},
    {BW_EP_READYZ, "GET", "/readyz", BW_PATH_EXACT, NULL, "/readyz", BW_EP_OPS_ROLES, BW_ON_DATA, NULL, NULL,
     "200 when Kafka is reachable and the settings agree with the fleet's; 503 otherwise"},
    {BW_EP_METRICS, "GET", "/metrics", BW_PATH_EXACT, NULL, "/metrics", BW_EP_OPS_ROLES, BW_ON_BOTH, NULL, NULL,
     "Prometheus metrics"},
    {BW_EP_RPC_WRITE_BATCH, "POST", "/bulkwrite.v1.BulkwriteService/WriteBatch", BW_PATH_EXACT, NULL,
     "/bulkwrite.v1.BulkwriteService/WriteBatch", BW_ROLE_SUBMIT | BW_ROLE_ADMIN, BW_ON_DATA, NULL, NULL,
     "`POST /v1/batches` as a Connect call (application/proto or application/json): [clients.md](clients.md)"},
    {BW_EP_RPC_GET_JOB, "POST", "/bulkwrite.v1.BulkwriteService/GetJob", BW_PATH_EXACT, NULL,
     "/bulkwrite.v1.BulkwriteService/GetJob", READERS, BW_ON_BOTH, NULL, NULL, "`GET /v1/jobs/{id}` as a Connect call"},
    {BW_EP_RPC_CANCEL_JOB, "POST", "/bulkwrite.v1.BulkwriteService/CancelJob", BW_PATH_EXACT, NULL,
     "/bulkwrite.v1.BulkwriteService/CancelJob", BW_ROLE_SUBMIT | BW_ROLE_ADMIN, BW_ON_BOTH, NULL, NULL,
     "`DELETE /v1/jobs/{id}` as a Connect call"},
    {BW_EP_RPC_LIST_FAILURES, "POST", "/bulkwrite.v1.BulkwriteService/ListFailures", BW_PATH_EXACT, NULL,
     "/bulkwrite.v1.BulkwriteService/ListFailures", READERS, BW_ON_BOTH, NULL, NULL,
     "`GET /v1/jobs/{id}/failures` as a Connect call"},
};

static int path_matches(const bw_endpoint_t *e, const char *url) {
    size_t len = strlen(e->path);
    switch (e->match) {
    case BW_PATH_EXACT: return strcmp(url, e->path) == 0;
    case BW_PATH_PREFIX: return strncmp(url, e->path, len) == 0;
    case BW_PATH_JOB_SUB: return strncmp(url, e->path, len) == 0 && strlen(url) == len + 32 + strlen(e->sub) &&
                                 strcmp(url + len + 32, e->sub) == 0;
    case BW_PATH_SUFFIX: {
        size_t ul = strlen(url), sl = strlen(e->sub);
        return strncmp(url, e->path, len) == 0 && ul > len + sl && strcmp(url + ul - sl, e->sub) == 0;
    }
    }
    return 0;
}

const bw_endpoint_t *bw_endpoint_find(const char *method, const char *url) {
    for (int i = 0; i < BW_EP_COUNT; i++)
        if (strcmp(bw_endpoints[i].method, method) == 0 && path_matches(&bw_endpoints[i], url)) return &bw_endpoints[i];
    return NULL;
}

unsigned bw_endpoint_roles(const char *method, const char *url, int open_metrics) {
    const bw_endpoint_t *e = bw_endpoint_find(method, url);
    if (!e) return BW_ROLE_ANY;
    if (e->roles == BW_EP_OPS_ROLES) return open_metrics ? 0 : READERS;
    return e->roles;
}

int bw_endpoint_other_methods(const char *method, const char *url, char *out, size_t size) {
    size_t n = (size_t)snprintf(out, size, "use ");
    const char *said[BW_EP_COUNT];
    int cnt = 0;
    for (int i = 0; i < BW_EP_COUNT; i++) {
        const bw_endpoint_t *e = &bw_endpoints[i];
        if (!strcmp(e->method, method) || !path_matches(e, url)) continue;
        int again = 0;
        for (int k = 0; k < cnt; k++) again |= !strcmp(said[k], e->method);
        if (again || n >= size) continue;
        n += (size_t)snprintf(out + n, size - n, "%s%s", cnt ? " or " : "", e->method);
        if (e->verb && n < size) n += (size_t)snprintf(out + n, size - n, " (%s)", e->verb);
        said[cnt++] = e->method;
    }
    if (n < size) snprintf(out + n, size - n, " for %s", url);
    return cnt > 0;
}

/* ---- docs/api.md's endpoint table ------------------------------------------------------------- */

#define DOC_BEGIN "<!-- endpoints: generated by `bwctl endpoints-doc` from proxy/endpoints.c -->\n"
#define DOC_END "<!-- end of endpoints -->\n"

static void roles_text(unsigned roles, char *out, size_t size) {
    if (roles == 0) snprintf(out, size, "anyone (no credential)");
    else if (roles == BW_EP_OPS_ROLES) snprintf(out, size, "`read`, `admin`; anyone with `proxy.auth.open_metrics`");
    else if (roles == BW_ROLE_ANY) snprintf(out, size, "any client");
    else
        snprintf(out, size, "%s%s%s", roles & BW_ROLE_SUBMIT ? "`submit`" : "",
                 roles & BW_ROLE_READ ? (roles & BW_ROLE_SUBMIT ? ", `read`" : "`read`") : "",
                 roles & BW_ROLE_ADMIN ? (roles & (BW_ROLE_SUBMIT | BW_ROLE_READ) ? ", `admin`" : "`admin`") : "");
}

char *bw_endpoints_doc(const char *api_md, char *errstr, size_t errstr_size) {
    const char *b = strstr(api_md, DOC_BEGIN), *e = b ? strstr(b, DOC_END) : NULL;
    if (!b || !e) {
        snprintf(errstr, errstr_size, "docs/api.md has no endpoint table markers (%.40s…)", DOC_BEGIN);
        return NULL;
    }
    size_t cap = strlen(api_md) + 16384, n = 0;
    char *out = malloc(cap);
    if (!out) return NULL;
    n += (size_t)snprintf(out, cap, "%.*s", (int)(b - api_md + strlen(DOC_BEGIN)), api_md);
    n += (size_t)snprintf(out + n, cap - n,
                          "| endpoint | who may call it (with `proxy.auth.clients_file`) | data listener | admin "
                          "listener | what it does |\n| --- | --- | --- | --- | --- |\n");
    for (int i = 0; i < BW_EP_COUNT && n < cap; i++) {
        const bw_endpoint_t *ep = &bw_endpoints[i];
        char roles[96];
        roles_text(ep->roles, roles, sizeof(roles));
        n += (size_t)snprintf(out + n, cap - n, "| `%s %s` | %s | %s | %s | %s |\n", ep->method, ep->shown, roles,
                              ep->listeners & BW_ON_DATA ? "yes" : "no", ep->listeners & BW_ON_ADMIN ? "yes" : "no",
                              ep->doc);
    }
    if (n < cap) snprintf(out + n, cap - n, "%s", e);
    return out;
}
