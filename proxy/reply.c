#include "reply.h"

#include <stdlib.h>
#include <string.h>

#include "bw.h"
#include "daemon.h"

static void add(bw_clock_t *k, json_t *obj, const char *key, int64_t at_ms, int as_is) {
    if (k->n == k->cap) {
        k->cap = k->cap ? k->cap * 2 : 64;
        if (!(k->v = realloc(k->v, k->cap * sizeof(*k->v)))) abort();
    }
    k->v[k->n++] = (bw_clock_member_t){obj, key, at_ms, as_is};
}

void bw_clock_age(bw_clock_t *k, json_t *obj, const char *key, int64_t at_ms) { add(k, obj, key, at_ms, 0); }
void bw_clock_at(bw_clock_t *k, json_t *obj, const char *key, int64_t at_ms) { add(k, obj, key, at_ms, 1); }
void bw_clock_now(bw_clock_t *k, json_t *obj, const char *key) { add(k, obj, key, INT64_MIN, 0); }

enum MHD_Result bw_reply_json_cacheable(struct MHD_Connection *c, json_t *root, bw_clock_t *k) {
    char *text = json_dumps(root, JSON_COMPACT);
    char etag[24];
    bw_daemon_etag(text, strlen(text), etag);
    enum MHD_Result ret;
    if (bw_daemon_not_modified(c, etag)) {
        ret = bw_daemon_reply_not_modified(c, etag);
    } else {
        int64_t now = bw_wall_ms();
        for (size_t i = 0; i < k->n; i++) {
            const bw_clock_member_t *m = &k->v[i];
            json_object_set_new(m->obj, m->key, json_integer(m->as_is ? m->at_ms : m->at_ms == INT64_MIN ? now : now - m->at_ms));
        }
        if (k->n) {
            free(text);
            text = json_dumps(root, JSON_COMPACT);
        }
        ret = bw_daemon_reply_cacheable(c, "application/json", text, strlen(text), etag);
        text = NULL;
    }
    free(text);
    json_decref(root);
    free(k->v);
    *k = (bw_clock_t){0};
    return ret;
}
