/* gate.c — why a shard is not running now (gate.h). Reads the consumer's state, changes
 * nothing. @locality dispatcher thread. */
#include "gate.h"

#include <stdio.h>

#include "consumer.h"

static const char *const names[BW_GATE_REASONS] = {
    [BW_GATE_UNASSIGNED] = "unassigned", [BW_GATE_REVOKING] = "revoking",       [BW_GATE_LEDGER] = "ledger",
    [BW_GATE_PAUSED] = "paused",         [BW_GATE_THROTTLE] = "throttle",       [BW_GATE_SERVER_DOWN] = "server_down",
    [BW_GATE_STOPPED] = "stopped",       [BW_GATE_UNHEALTHY] = "unhealthy",     [BW_GATE_GAP] = "gap",
    [BW_GATE_BUFFER_FULL] = "buffer_full", [BW_GATE_BACKOFF] = "backoff",
};

const char *bw_gate_reason_name(bw_gate_reason_t r) { return r < BW_GATE_REASONS ? names[r] : "?"; }

char *bw_gate_format(bw_gate_t set, char *out, size_t size) {
    size_t n = 0;
    if (size) out[0] = '\0';
    for (int r = 0; r < BW_GATE_REASONS; r++) {
        if (!(set & BW_GATE_BIT(r)) || n + 1 >= size) continue;
        int w = snprintf(out + n, size - n, "%s%s", n ? "," : "", names[r]);
        n = w < 0 ? n : n + (size_t)w < size ? n + (size_t)w : size - 1;
    }
    return out;
}

/* The shard's own reasons (an assigned shard). */
static bw_gate_t of_shard(int shard, int64_t now_us) {
    const bw_shard_t *sh = &consumer.shards[shard];
    bw_gate_t r = 0;
    if (sh->op_paused) r |= BW_GATE_BIT(BW_GATE_PAUSED);
    if (sh->throttle_paused) r |= BW_GATE_BIT(BW_GATE_THROTTLE);
    if (bw_health_server_down(consumer.health, consumer.conf->shard_server[shard])) r |= BW_GATE_BIT(BW_GATE_SERVER_DOWN);
    if (bw_health_shard_held(consumer.health, shard))
        r |= BW_GATE_BIT(bw_health_shard_stopped(consumer.health, shard) ? BW_GATE_STOPPED : BW_GATE_UNHEALTHY);
    /* ready_at_us alone is also the rate limiter's wait: pacing, not a reason */
    if (sh->backoff_us && sh->ready_at_us > now_us) r |= BW_GATE_BIT(BW_GATE_BACKOFF);
    return r;
}

/* A partition's own reasons (an assigned one). */
static bw_gate_t of_partition(const bw_partition_t *p) {
    bw_gate_t r = 0;
    if (p->revoking) r |= BW_GATE_BIT(BW_GATE_REVOKING);
    if (p->ledger_pending) r |= BW_GATE_BIT(BW_GATE_LEDGER);
    if (p->lost_to > p->lost_from) r |= BW_GATE_BIT(BW_GATE_GAP);
    if (p->buffer_full) r |= BW_GATE_BIT(BW_GATE_BUFFER_FULL);
    return r;
}

bw_gate_t bw_gate_shard(int shard, int64_t now_us) {
    if (!consumer.shards[shard].assigned_lanes) return BW_GATE_BIT(BW_GATE_UNASSIGNED);
    bw_gate_t r = of_shard(shard, now_us);
    for (int lane = 0; lane < consumer.conf->lane_cnt; lane++) {
        const bw_partition_t *p = &consumer.partitions[bw_config_slot(consumer.conf, lane, shard)];
        if (p->assigned) r |= of_partition(p);
    }
    return r;
}

bw_gate_t bw_gate_slot(int slot, int64_t now_us) {
    const bw_partition_t *p = &consumer.partitions[slot];
    if (!p->assigned) return BW_GATE_BIT(BW_GATE_UNASSIGNED);
    return of_shard(p->shard, now_us) | of_partition(p);
}
