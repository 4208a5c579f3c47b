#include "scrub.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db.h"

const char *bw_scrub_mysql(unsigned err, char *out, size_t size) {
    snprintf(out, size, "MySQL error %u (%s)", err, bw_db_error_what(err));
    return out;
}

const char *bw_scrub_failure(unsigned code, const char *reason, char *out, size_t size) {
    return code ? bw_scrub_mysql(code, out, size) : reason;
}

/* The N of a trailing " (N)", or 0. */
static unsigned trailing_errno(const char *m) {
    size_t n = strlen(m), d = 0;
    if (n < 4 || m[n - 1] != ')') return 0;
    while (d < 6 && n >= d + 2 && m[n - 2 - d] >= '0' && m[n - 2 - d] <= '9') d++;
    if (!d || n < d + 3 || m[n - 2 - d] != '(' || m[n - 3 - d] != ' ') return 0;
    return (unsigned)strtoul(m + n - 1 - d, NULL, 10);
}

const char *bw_scrub_shard_error(const char *kind, const char *message, char *out, size_t size) {
    if (strcmp(kind, "data") == 0 || strcmp(kind, "lost") == 0) return message;
    unsigned err = trailing_errno(message);
    if (err >= 1000) return bw_scrub_mysql(err, out, size); /* below: an OS errno ("(111)") */
    snprintf(out, size, "%s error (details for admins)", kind);
    return out;
}

const char *bw_scrub_throttle_reason(const char *state, const char *reason, char *out, size_t size) {
    snprintf(out, size, "%s", reason ? reason : "");
    char *since = strstr(out, " since "), *error = since ? strstr(since, ": ") : NULL;
    if (error && state && strcmp(state, "unknown") == 0)
        snprintf(error, size - (size_t)(error - out), " (details for admins)");
    return out;
}
