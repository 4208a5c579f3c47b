/* reply.h — the page's JSON replies (GET /v1/shards, /v1/shards/{n}/history, /v1/fleet,
 * /v1/jobs): gzip'd when the client takes it, with an ETag and 304 for an If-None-Match
 * that names it (common/daemon.h).
 *
 * Members that move with the clock alone (an age, "now"), or with a heartbeat that says
 * nothing new (a live member's seen_at_ms), would change the ETag on every request though
 * nothing changed: a builder leaves them out of the tree and lists them here instead; the
 * ETag is the text without them, and they are set only when a body is sent. A client
 * keeping a body after a 304 adds the time since it got it to the ages.
 *
 * @locality the request's HTTP thread. */
#ifndef BW_REPLY_H
#define BW_REPLY_H

#include <jansson.h>
#include <microhttpd.h>
#include <stdint.h>

typedef struct {
    json_t *obj;     /* borrowed: a node of the reply's tree */
    const char *key; /* static */
    int64_t at_ms;   /* the member is now - at_ms; INT64_MIN: the member is now itself */
    int as_is;       /* the member is at_ms itself */
} bw_clock_member_t;

typedef struct {
    bw_clock_member_t *v;
    size_t n, cap;
} bw_clock_t;

/* obj[key] = now - at_ms once a body is sent. */
void bw_clock_age(bw_clock_t *k, json_t *obj, const char *key, int64_t at_ms);
/* obj[key] = at_ms once a body is sent: a time that moves with each heartbeat. */
void bw_clock_at(bw_clock_t *k, json_t *obj, const char *key, int64_t at_ms);
/* obj[key] = now (wall ms) once a body is sent. */
void bw_clock_now(bw_clock_t *k, json_t *obj, const char *key);

/* Replies root (taken) as described above; frees k's list. */
enum MHD_Result bw_reply_json_cacheable(struct MHD_Connection *c, json_t *root, bw_clock_t *k);

#endif
