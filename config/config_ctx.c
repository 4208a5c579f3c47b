/* config_ctx.c — where a configuration error is: the file, the line of the setting,
 * and what is wrong (the parser's and the cross-key checks' one way to say it). */
#include <stdio.h>

#include "config_int.h"

bw_err_t bw_config_fail_at(parse_ctx_t *ctx, const config_setting_t *s, const char *fmt,
                           const char *a, const char *b) {
    char what[512];
    snprintf(what, sizeof(what), fmt, a, b);
    int line = s ? (int)config_setting_source_line(s) : 0;
    if (line <= 0) /* the root has no line */
        return bw_seterr(ctx->errstr, ctx->errstr_size, BW_ERR_INVALID, "%s: %s", ctx->file, what);
    return bw_seterr(ctx->errstr, ctx->errstr_size, BW_ERR_INVALID, "%s:%d: %s", ctx->file, line, what);
}

const config_setting_t *bw_config_lookup(const config_setting_t *group, const char *name) {
    return group ? config_setting_lookup((config_setting_t *)group, name) : NULL;
}
