/* config_int.h — private to config/config_*.c: the key table's row and the parser's
 * helpers. config.h is the public header. */
#ifndef BW_CONFIG_INT_H
#define BW_CONFIG_INT_H

#include <libconfig.h>
#include <stddef.h>

#include "config.h"

typedef enum { K_STR, K_INT, K_DBL, K_BOOL, K_ENUM, K_STRLIST, K_LIST, K_GROUP } key_kind_t;

typedef struct key key_t_;
struct key {
    const char *name;      /* dotted names only inside K_GROUP tables */
    key_kind_t kind;
    size_t off;            /* of the value (K_LIST: of the array pointer) */
    size_t cnt_off;        /* K_LIST/K_STRLIST: of the int count */
    double min, max;       /* K_INT, K_DBL; K_STRLIST/K_LIST: element count */
    const char *def;       /* default as text; NULL = required; "" = optional without one
                              (K_GROUP: its members' defaults; a scalar: left 0, and
                              validate() fills it in from what the file sets) */
    const char *const *enums; /* K_ENUM: accepted words, stored as their index */
    const key_t_ *sub;     /* K_LIST element keys, K_GROUP member keys */
    size_t elem_size;      /* K_LIST */
    const char *doc;
    int secret;            /* SECRET_VALUE: the value; SECRET_PROPS: "name=value" elements whose
                              name bw_config_secret_name() matches (resolve_secrets, dumps) */
    /* What SIGHUP does with a changed value, per bw_process_t (config_reload.c). Every key
     * reachable from the top without entering a list has one (a list decides for its
     * elements; a group's members each decide); test_config's reload walk fails on
     * R_UNSET. */
    unsigned char reload[BW_PROC_COUNT];
    unsigned char hook;    /* R_APPLY: the bw_reload_hook_t the process runs after copying it */
    /* A top-level key's former name, still read: with a warning naming the new one, and
     * refused when both are set (parse_table). NULL for most keys. */
    const char *old_name;
};
enum { R_UNSET, R_UNUSED, R_RESTART, R_APPLY };
enum { SECRET_VALUE = 1, SECRET_PROPS = 2 };

/* every key reachable from the top without entering a list (K_LIST: the whole list) */
extern const key_t_ bw_config_top_keys[];
/* The top-level key whose old_name is `name`, or NULL. */
const key_t_ *bw_config_renamed_key(const char *name);

typedef struct {
    const char *file;
    char *errstr;
    size_t errstr_size;
} parse_ctx_t;

bw_err_t bw_config_fail_at(parse_ctx_t *ctx, const config_setting_t *s, const char *fmt, const char *a,
                           const char *b);
/* Looks `name` up under `group`, following dots ("kafka.brokers"); NULL for a NULL group. */
const config_setting_t *bw_config_lookup(const config_setting_t *group, const char *name);
/* Stores setting `s` as key k's value in `base`, checking its type and range. */
bw_err_t bw_config_store(parse_ctx_t *ctx, const config_setting_t *s, const key_t_ *k, void *base, const char *where);
/* Cross-key checks and derived fields, after every key was parsed. */
bw_err_t bw_config_validate(bw_config_t *c, const config_t *cf, parse_ctx_t *ctx);
/* Each shard's rates (c->shard_rate, shard_row_rate, allocated) from shards.default_rate,
 * default_row_rate and rate_overrides; an override beyond c->shard_count is left out. */
void bw_config_derive_rates(bw_config_t *c);
/* Writes key k's value in libconfig syntax (depth: indentation of nested lines). */
void bw_config_dump_value(FILE *out, const key_t_ *k, const void *base, int depth, int redact);
/* Frees what keys[] own in base. */
void bw_config_free_table(const key_t_ *keys, void *base);

#endif
