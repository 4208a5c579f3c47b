/* retain.c — what Kafka must keep of an applied partition (retain.h). */
#include "retain.h"

#include <stdlib.h>
#include <string.h>

struct bw_retain {
    size_t slots;
    int next, cnt;                /* ring over the samples: next is written next */
    int64_t at_ms[BW_RETAIN_SAMPLES];
    int64_t *applied;             /* [BW_RETAIN_SAMPLES][slots] */
};

bw_retain_t *bw_retain_new(size_t slots) {
    bw_retain_t *r = calloc(1, sizeof(*r));
    if (!r || !(r->applied = malloc(sizeof(int64_t) * BW_RETAIN_SAMPLES * (slots ? slots : 1)))) abort();
    r->slots = slots;
    return r;
}

void bw_retain_free(bw_retain_t *r) {
    if (!r) return;
    free(r->applied);
    free(r);
}

int bw_retain_sample(bw_retain_t *r, const int64_t *applied, int64_t now_ms, int64_t keep_ms) {
    if (keep_ms <= 0) return 0;
    int last = (r->next + BW_RETAIN_SAMPLES - 1) % BW_RETAIN_SAMPLES;
    if (r->cnt && now_ms - r->at_ms[last] < keep_ms / (BW_RETAIN_SAMPLES - 1)) return 0;
    r->at_ms[r->next] = now_ms;
    memcpy(&r->applied[(size_t)r->next * r->slots], applied, sizeof(int64_t) * r->slots);
    r->next = (r->next + 1) % BW_RETAIN_SAMPLES;
    if (r->cnt < BW_RETAIN_SAMPLES) r->cnt++;
    return 1;
}

void bw_retain_clamp(bw_retain_t *r, size_t slot, int64_t offset) {
    for (int k = 0; k < r->cnt; k++) {
        int64_t *v = &r->applied[(size_t)k * r->slots + slot];
        if (*v > offset) *v = offset;
    }
}

int64_t bw_retain_applied_before(const bw_retain_t *r, size_t slot, int64_t now_ms, int64_t keep_ms) {
    for (int i = 1; i <= r->cnt; i++) { /* newest first */
        int k = (r->next + BW_RETAIN_SAMPLES - i) % BW_RETAIN_SAMPLES;
        if (now_ms - r->at_ms[k] >= keep_ms) return r->applied[(size_t)k * r->slots + slot];
    }
    return -1;
}

static int64_t least(int64_t a, int64_t b) { return a < b ? a : b; }

int64_t bw_retain_trim_to(const bw_retain_in_t *in) {
    /* only what the ledger holds, and only up to an acknowledged Kafka commit, so a
     * consumer that resumes from Kafka's commit finds it */
    int64_t to = least(in->applied, in->committed);
    if (in->keep_ms > 0) to = least(to, in->applied_before);
    if (in->replicas > 0) to = least(to, in->replicas_applied);
    return to < 0 ? -1 : to;
}
