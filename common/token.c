/* token.c — the client's bearer token (token.h). */
#include "token.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bw.h"

int bw_token_load(const char *file, char **token, char *errstr, size_t errstr_size) {
    char buf[BW_TOKEN_MAX + 2];
    const char *from = file;
    *token = NULL;
    if (file) {
        FILE *f = fopen(file, "r");
        if (!f) return bw_seterr(errstr, errstr_size, BW_ERR_INVALID, "%s: %s", file, strerror(errno)), -1;
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = '\0';
        while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ' || buf[n - 1] == '\t')) buf[--n] = '\0';
    } else {
        const char *env = getenv("BW_TOKEN");
        if (!env) return 0;
        from = "BW_TOKEN";
        snprintf(buf, sizeof(buf), "%s", env);
    }
    size_t n = strlen(buf);
    if (n == 0) return bw_seterr(errstr, errstr_size, BW_ERR_INVALID, "%s: the token is empty", from), -1;
    if (n > BW_TOKEN_MAX)
        return bw_seterr(errstr, errstr_size, BW_ERR_INVALID, "%s: the token is longer than %d bytes", from, BW_TOKEN_MAX), -1;
    for (size_t i = 0; i < n; i++)
        if (buf[i] < 0x21 || buf[i] > 0x7e)
            return bw_seterr(errstr, errstr_size, BW_ERR_INVALID,
                             "%s: the token must be printable ASCII without spaces (byte %zu is not)", from, i + 1), -1;
    *token = strdup(buf);
    return 0;
}

int bw_token_header(const char *file, char **header, char *errstr, size_t errstr_size) {
    char *token;
    *header = NULL;
    if (bw_token_load(file, &token, errstr, errstr_size)) return -1;
    if (!token) return 0;
    size_t n = strlen(token) + sizeof("Authorization: Bearer ");
    *header = malloc(n);
    snprintf(*header, n, "Authorization: Bearer %s", token);
    free(token);
    return 0;
}
