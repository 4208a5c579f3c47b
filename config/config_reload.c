/* config_reload.c — SIGHUP: which keys changed, and what the key table's reload column
 * says each one does in this process (config.h): applied, kept until a restart, or not
 * read. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_int.h"

const char *bw_process_name(bw_process_t role) { return role == BW_PROC_PROXY ? "bw-proxy" : "bw-consumer"; }

const char *bw_reload_hook_name(bw_reload_hook_t hook) {
    static const char *const names[BW_HOOK_COUNT] = {"", "logging", "shard rates", "throttle limits",
                                                     "health limits"};
    return hook > BW_HOOK_NONE && hook < BW_HOOK_COUNT ? names[hook] : "";
}

/* k's value as text, for comparing two configs (secrets too: a changed password is a change) */
static char *value_text(const key_t_ *k, const void *base) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) abort();
    bw_config_dump_value(f, k, base, 0, 0);
    fclose(f);
    return text;
}

static void add_name(char *list, size_t size, const char *name) {
    size_t n = strlen(list);
    snprintf(list + n, size - n, "%s%s", n ? ", " : "", name);
}

/* Swaps key k's value (and a list's count) between a and b. */
static void swap_value(const key_t_ *k, void *a, void *b) {
    size_t size = k->kind == K_DBL                                 ? sizeof(double)
                  : k->kind == K_STR || k->kind == K_STRLIST || k->kind == K_LIST ? sizeof(void *)
                                                                   : sizeof(int);
    unsigned char tmp[sizeof(double) > sizeof(void *) ? sizeof(double) : sizeof(void *)];
    memcpy(tmp, (char *)a + k->off, size);
    memcpy((char *)a + k->off, (char *)b + k->off, size);
    memcpy((char *)b + k->off, tmp, size);
    if (k->kind == K_STRLIST || k->kind == K_LIST) {
        int *ca = (int *)((char *)a + k->cnt_off), *cb = (int *)((char *)b + k->cnt_off), t = *ca;
        *ca = *cb;
        *cb = t;
    }
}

/* Each changed key into r; with `apply`, its value moved into running. */
static void walk(const key_t_ *keys, const char *prefix, bw_config_t *running, bw_config_t *next, bw_process_t role,
                 bw_reload_t *r, int apply) {
    for (const key_t_ *k = keys; k->name; k++) {
        char full[256];
        snprintf(full, sizeof(full), "%.120s%.120s", prefix, k->name);
        if (k->kind == K_GROUP) {
            char sub[256];
            snprintf(sub, sizeof(sub), "%.200s.", full);
            walk(k->sub, sub, running, next, role, r, apply);
            continue;
        }
        char *a = value_text(k, running), *b = value_text(k, next);
        int same = strcmp(a, b) == 0;
        free(a);
        free(b);
        if (same) continue;
        switch (k->reload[role]) {
        case R_APPLY:
            if (apply) {
                swap_value(k, running, next);
                continue;
            }
            add_name(r->applied, sizeof(r->applied), full);
            r->applied_cnt++;
            if (k->hook) r->hooks |= 1u << k->hook;
            break;
        case R_UNUSED:
            if (apply) continue;
            add_name(r->unused, sizeof(r->unused), full);
            r->unused_cnt++;
            break;
        default: /* R_RESTART; an undecided key (test_config refuses those) is treated as one */
            if (apply) continue;
            add_name(r->restart, sizeof(r->restart), full);
            r->restart_cnt++;
        }
    }
}

int bw_config_reload(bw_config_t *running, bw_config_t *next, bw_process_t role, bw_reload_t *r) {
    memset(r, 0, sizeof(*r));
    walk(bw_config_top_keys, "", running, next, role, r, 0);
    walk(bw_config_top_keys, "", running, next, role, r, 1);
    /* in place, shard by shard: readers hold no pointer into the arrays but read them by
     * index, and shards.count (their size) needs a restart */
    if (r->hooks & 1u << BW_HOOK_SHARD_RATES) bw_config_derive_rates(running);
    return r->applied_cnt;
}

static unsigned hooks_of(const key_t_ *keys, bw_process_t role) {
    unsigned hooks = 0;
    for (const key_t_ *k = keys; k->name; k++) {
        if (k->kind == K_GROUP) hooks |= hooks_of(k->sub, role);
        else if (k->reload[role] == R_APPLY && k->hook) hooks |= 1u << k->hook;
    }
    return hooks;
}

unsigned bw_config_reload_hooks(bw_process_t role) { return hooks_of(bw_config_top_keys, role); }
