/* handover.c — what a shard's latest status record hands to its new holder (handover.h). */
#include "handover.h"

#include <stdio.h>
#include <string.h>

#include "db.h"
#include "gate.h"

/* Whether the record names gate reason r: by its code, or by its name in a record of a
 * consumer older than the codes. */
static int has_reason(const Bulkwrite__Internal__V1__ShardStatus *st, bw_gate_reason_t r) {
    for (size_t i = 0; i < st->n_reason_codes; i++)
        if ((int)st->reason_codes[i] == (int)r + 1) return 1;
    for (size_t i = 0; !st->n_reason_codes && i < st->n_reasons; i++)
        if (st->reasons[i] && !strcmp(st->reasons[i], bw_gate_reason_name(r))) return 1;
    return 0;
}

/* The static name of an error's kind, as bw_partition_note_error keeps it. */
static const char *kind_of(const char *kind) {
    static const char *const others[] = {"ledger", "lost"};
    for (int f = BW_FAIL_NONE + 1; f < BW_FAIL_CLASSES; f++)
        if (kind && !strcmp(kind, bw_fail_name((bw_fail_t)f))) return bw_fail_name((bw_fail_t)f);
    for (size_t i = 0; i < sizeof(others) / sizeof(*others); i++)
        if (kind && !strcmp(kind, others[i])) return others[i];
    return "other";
}

/* The throttle's state in the record, resumed: 1 if there is one to keep. */
static int seed_throttle(const Bulkwrite__Internal__V1__ShardStatus *st, const bw_throttle_limits_t *tl, int64_t now_us,
                         bw_throttle_shard_t *t) {
    if (tl->mode == BW_THROTTLE_OFF) return 0;
    int state = (int)st->throttle_state_code - 1, signal = (int)st->throttle_signal_code - 1;
    if (!st->throttle_state_code) /* a consumer older than the codes wrote only the names */
        for (int k = 0; k <= BW_THROTTLE_CRITICAL && st->throttle_state; k++) {
            if (!strcmp(st->throttle_state, bw_throttle_state_names[k])) state = k;
            for (int g = 0; g < BW_SIGNAL_KINDS && st->throttle_signal; g++)
                if (!strcmp(st->throttle_signal, bw_signal_names[g])) signal = g;
        }
    /* running (or a state this version does not know): afresh */
    if (state < BW_THROTTLE_THROTTLED || state > BW_THROTTLE_CRITICAL) return 0;
    memset(t, 0, sizeof(*t));
    t->initialised = 1; /* not "arriving": bw_throttle_step goes on from here */
    t->state = (bw_throttle_state_t)state;
    t->signal = signal >= 0 && signal < BW_SIGNAL_KINDS ? signal : -1;
    t->value = st->throttle_value;
    t->level = st->throttle_level;
    t->since_ms = st->throttle_since_ms;
    snprintf(t->why, sizeof(t->why), "%s", st->throttle_reason ? st->throttle_reason : "");
    /* unknown and critical run at the floor; a throttled rate is kept, never under it */
    t->rate = state == BW_THROTTLE_THROTTLED && st->throttle_rate > tl->floor ? st->throttle_rate : tl->floor;
    /* the climb back goes in steps of the cap it had (its own rate if unlimited) */
    t->in_trouble = 1;
    t->trouble_rate = st->cap_rate > 0 ? st->cap_rate : t->rate;
    t->last_step_us = now_us; /* the next cut, or step up, an interval from now */
    if (state == BW_THROTTLE_CRITICAL) t->critical_since_us = now_us - tl->critical_us; /* over it long enough */
    return 1;
}

bw_handover_result_t bw_handover_seed(const Bulkwrite__Internal__V1__ShardStatus *st, const bw_handover_limits_t *l,
                                      const bw_throttle_limits_t *tl, int64_t now_us, int64_t now_ms,
                                      bw_handover_t *out) {
    memset(out, 0, sizeof(*out));
    if (!st) return BW_HANDOVER_NONE;
    out->age_ms = now_ms - st->updated_at_ms;
    if (out->age_ms < 0) out->age_ms = 0; /* another host's clock a little ahead */
    if (!l->max_age_ms || st->updated_at_ms <= 0 || out->age_ms > l->max_age_ms) return BW_HANDOVER_STALE;
    out->throttle = seed_throttle(st, tl, now_us, &out->t);
    out->stopped = has_reason(st, BW_GATE_STOPPED);
    out->held = out->stopped || has_reason(st, BW_GATE_UNHEALTHY);
    if (out->held) {
        int64_t wait_ms = l->probe_every_ms - out->age_ms; /* as its holder would have probed */
        out->probe_at_us = now_us + (wait_ms > 0 ? wait_ms * 1000 : 0);
    }
    if (has_reason(st, BW_GATE_BACKOFF)) out->backoff_us = l->retry_initial_ms * 1000;
    size_t n = st->n_recent_errors < 5 ? st->n_recent_errors : 5;
    for (size_t i = 0; i < n; i++) { /* the record's are newest first */
        const Bulkwrite__Internal__V1__ShardError *e = st->recent_errors[n - 1 - i];
        if (!e || !e->at_ms) continue;
        out->errors[out->n_errors].at_ms = e->at_ms;
        out->errors[out->n_errors].kind = kind_of(e->kind);
        snprintf(out->errors[out->n_errors].message, sizeof(out->errors[0].message), "%s", e->message ? e->message : "");
        out->n_errors++;
    }
    return out->throttle || out->held || out->backoff_us || out->n_errors ? BW_HANDOVER_SEEDED : BW_HANDOVER_NONE;
}
