#include "cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "version.h"

/* the Makefile defines it for this file alone (its install's SYSCONFDIR) */
#ifndef BW_DEFAULT_CONF
#error "BW_DEFAULT_CONF is not defined: build with the Makefile (it is $(SYSCONFDIR)/bulkwrite/bulkwrite.conf)"
#endif

const char *bw_cli_default_config(void) { return BW_DEFAULT_CONF; }

const char *bw_cli_config_path(const char *given) {
    if (given) return given;
    const char *env = getenv(BW_CONF_ENV);
    return env && env[0] ? env : BW_DEFAULT_CONF;
}

const char *bw_cli_config_hint(const char *given) {
    if (given || access(bw_cli_config_path(NULL), R_OK) == 0) return "";
    const char *env = getenv(BW_CONF_ENV);
    return env && env[0] ? " (from " BW_CONF_ENV ")" : " (the default; -c FILE or " BW_CONF_ENV "=FILE for another)";
}

void bw_cli_print_version(const char *program) { printf("%s %s (commit %s)\n", program, bw_version, bw_commit); }

int bw_cli_usage_error(const char *who, const char *fmt, ...) {
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "%s: ", who);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
    }
    fprintf(stderr, "try '%s --help'\n", who);
    return 2;
}
