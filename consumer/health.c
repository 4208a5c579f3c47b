#include "health.h"

#include <stdlib.h>

typedef struct {
    int failures; /* consecutive timeouts */
    int held;     /* not fetched; the next job is a probe */
    int stopped;  /* held for a stop error */
    int probing;  /* its probe is in flight */
    int64_t probe_at_us;
} shard_health_t;

typedef struct {
    int failures;    /* consecutive connection failures on any of its shards */
    int down;
    int probe_shard; /* the shard whose job probes the server; -1 if none in flight */
    int64_t probe_at_us;
} server_health_t;

struct bw_health {
    int shard_count, server_cnt;
    int *shard_server;
    shard_health_t *shards;
    server_health_t *servers;
    int failures_to_hold;
    int64_t probe_every_us;
};

bw_health_t *bw_health_new(int shard_count, int server_cnt, const int *shard_server) {
    bw_health_t *h = calloc(1, sizeof(*h));
    h->shard_count = shard_count;
    h->server_cnt = server_cnt;
    h->shard_server = malloc(sizeof(int) * (size_t)shard_count);
    for (int s = 0; s < shard_count; s++) h->shard_server[s] = shard_server[s];
    h->shards = calloc((size_t)shard_count, sizeof(*h->shards));
    h->servers = calloc((size_t)server_cnt, sizeof(*h->servers));
    for (int v = 0; v < server_cnt; v++) h->servers[v].probe_shard = -1;
    h->failures_to_hold = 2;
    h->probe_every_us = 30000000;
    if (!h->shard_server || !h->shards || !h->servers) abort();
    return h;
}

void bw_health_free(bw_health_t *h) {
    if (!h) return;
    free(h->shard_server);
    free(h->shards);
    free(h->servers);
    free(h);
}

void bw_health_set_limits(bw_health_t *h, int failures_to_hold, int64_t probe_every_us) {
    h->failures_to_hold = failures_to_hold;
    h->probe_every_us = probe_every_us;
}

bw_admit_t bw_health_admit(bw_health_t *h, int shard, int64_t now_us, int64_t *wait_us) {
    shard_health_t *sh = &h->shards[shard];
    server_health_t *sv = &h->servers[h->shard_server[shard]];
    if (sv->down) {
        /* one probe for the whole server; its shards wait without a worker */
        if (sv->probe_shard >= 0 || now_us < sv->probe_at_us) {
            *wait_us = sv->probe_shard >= 0 || sv->probe_at_us - now_us > h->probe_every_us
                           ? h->probe_every_us
                           : sv->probe_at_us - now_us;
            return BW_ADMIT_WAIT;
        }
        sv->probe_shard = shard;
        sh->probing = 1;
        return BW_ADMIT_PROBE;
    }
    if (sh->held) {
        if (sh->probing || now_us < sh->probe_at_us) {
            *wait_us = sh->probing ? h->probe_every_us : sh->probe_at_us - now_us;
            return BW_ADMIT_WAIT;
        }
        sh->probing = 1;
        return BW_ADMIT_PROBE;
    }
    return BW_ADMIT_RUN;
}

void bw_health_unadmit(bw_health_t *h, int shard) {
    server_health_t *sv = &h->servers[h->shard_server[shard]];
    h->shards[shard].probing = 0;
    if (sv->probe_shard == shard) sv->probe_shard = -1;
}

static unsigned server_failed(bw_health_t *h, server_health_t *sv, int64_t now_us) {
    if (++sv->failures < h->failures_to_hold) return 0;
    unsigned changed = sv->down ? 0 : BW_HEALTH_SERVER_DOWN;
    sv->down = 1;
    sv->probe_at_us = now_us + h->probe_every_us;
    return changed;
}

unsigned bw_health_report(bw_health_t *h, int shard, bw_fail_t fail, int probe, int64_t now_us) {
    shard_health_t *sh = &h->shards[shard];
    server_health_t *sv = &h->servers[h->shard_server[shard]];
    unsigned changed = 0;
    if (probe) {
        sh->probing = 0;
        if (sv->probe_shard == shard) sv->probe_shard = -1;
    }
    switch (fail) {
    case BW_FAIL_NONE:
        if (sh->held) changed |= BW_HEALTH_SHARD_FREED;
        sh->failures = sh->held = sh->stopped = 0;
        if (sv->down) changed |= BW_HEALTH_SERVER_UP;
        sv->failures = sv->down = 0;
        break;
    case BW_FAIL_RETRY:
    case BW_FAIL_DATA: /* data and decode: never a batch's failure (its rows are refused one by one) */
    case BW_FAIL_DECODE:
    case BW_FAIL_CLASSES:
        if (sh->held) sh->probe_at_us = now_us + h->probe_every_us; /* a probe that proved nothing */
        break;
    case BW_FAIL_TIMEOUT:
        sv->failures = 0; /* the server answered; this shard is slow */
        if (sv->down) changed |= BW_HEALTH_SERVER_UP;
        sv->down = 0;
        if (++sh->failures >= h->failures_to_hold) {
            if (!sh->held) changed |= BW_HEALTH_SHARD_HELD;
            sh->held = 1;
            sh->probe_at_us = now_us + h->probe_every_us;
        }
        break;
    case BW_FAIL_CONNECTION:
        changed |= server_failed(h, sv, now_us);
        break;
    case BW_FAIL_STOP:
        sh->held = sh->stopped = 1;
        sh->probe_at_us = now_us + h->probe_every_us;
        changed |= BW_HEALTH_SHARD_STOPPED;
        break;
    }
    return changed;
}

unsigned bw_health_server_answered(bw_health_t *h, int server) {
    server_health_t *sv = &h->servers[server];
    unsigned changed = sv->down ? BW_HEALTH_SERVER_UP : 0;
    sv->failures = sv->down = 0;
    return changed;
}

unsigned bw_health_server_unreachable(bw_health_t *h, int server, int64_t now_us) {
    return server_failed(h, &h->servers[server], now_us);
}

void bw_health_forget(bw_health_t *h, int shard) {
    server_health_t *sv = &h->servers[h->shard_server[shard]];
    if (sv->probe_shard == shard) sv->probe_shard = -1;
    h->shards[shard] = (shard_health_t){0};
}

void bw_health_seed_shard(bw_health_t *h, int shard, int stopped, int64_t probe_at_us) {
    shard_health_t *sh = &h->shards[shard];
    *sh = (shard_health_t){.held = 1, .stopped = stopped != 0, .probe_at_us = probe_at_us};
}

unsigned bw_health_forget_server(bw_health_t *h, int server) {
    server_health_t *sv = &h->servers[server];
    unsigned changed = sv->down ? BW_HEALTH_SERVER_UP : 0;
    *sv = (server_health_t){.probe_shard = -1};
    return changed;
}

int bw_health_shard_held(const bw_health_t *h, int shard) { return h->shards[shard].held; }
int bw_health_shard_stopped(const bw_health_t *h, int shard) { return h->shards[shard].stopped; }
int bw_health_server_down(const bw_health_t *h, int server) { return h->servers[server].down; }
int bw_health_blocked(const bw_health_t *h, int shard) {
    return h->shards[shard].held || h->servers[h->shard_server[shard]].down;
}
