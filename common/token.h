/* token.h — the bearer token a client of the proxy sends (proxy/auth.h).
 *
 * Tools take it from a file (--token-file FILE) or from the environment (BW_TOKEN),
 * never from their command line, where ps and shell histories would show it. */
#ifndef BW_TOKEN_H
#define BW_TOKEN_H

#include <stddef.h>

#define BW_TOKEN_MAX 4096

/* The token from `file` when it is not NULL (one line; a trailing newline and spaces are
 * dropped), else from $BW_TOKEN. 0 with *token malloc'd, or NULL when neither is set (the
 * proxy is open); -1 with errstr when the file cannot be read or the token is empty, too
 * long or not printable ASCII without spaces. */
int bw_token_load(const char *file, char **token, char *errstr, size_t errstr_size);

/* The same token as the HTTP header "Authorization: Bearer TOKEN" (malloc'd), for curl. */
int bw_token_header(const char *file, char **header, char *errstr, size_t errstr_size);

#endif
