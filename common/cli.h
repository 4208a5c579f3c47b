/* cli.h — what every bulkwrite program's command line shares: where its configuration is,
 * --version, and the two lines a mistake on the command line gets.
 *
 * The configuration is -c FILE when given, else the environment's BULKWRITE_CONF, else
 * the installed one: BW_DEFAULT_CONF, $(SYSCONFDIR)/bulkwrite/bulkwrite.conf as the
 * Makefile's install computes it from PREFIX (compiled into cli.c alone, rebuilt when
 * PREFIX changes), so an installed bwctl works from any folder. */
#ifndef BW_CLI_H
#define BW_CLI_H

/* The environment variable that names the configuration when -c does not. */
#define BW_CONF_ENV "BULKWRITE_CONF"

/* The configuration to read: `given` (-c; NULL when absent), else $BULKWRITE_CONF when
 * set and not empty, else the compiled-in default. Never NULL; not to be freed. */
const char *bw_cli_config_path(const char *given);

/* For an error loading bw_cli_config_path(given): how that file was chosen when it cannot
 * be read and -c did not name it, " (from BULKWRITE_CONF)" or " (the default; -c FILE or
 * BULKWRITE_CONF=FILE for another)"; else "". */
const char *bw_cli_config_hint(const char *given);

/* The compiled-in default, for help texts. */
const char *bw_cli_default_config(void);

/* --version: "PROGRAM VERSION (commit HASH)" on stdout (version.h). */
void bw_cli_print_version(const char *program);

/* A usage mistake: "WHO: WHAT" (printf-style; none when fmt is NULL: getopt has already
 * said it) and "try 'WHO --help'" on stderr. WHO is the program, or "bwctl COMMAND".
 * Returns 2, the exit code of bad usage. */
int bw_cli_usage_error(const char *who, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
