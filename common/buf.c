#include "buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void bw_buf_init(bw_buf_t *b) { memset(b, 0, sizeof(*b)); }

void bw_buf_free(bw_buf_t *b) {
    free(b->data);
    bw_buf_init(b);
}

void bw_buf_reserve(bw_buf_t *b, size_t extra) {
    if (b->len + extra + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1) cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p) {
        fputs("bulkwrite: out of memory growing a buffer\n", stderr);
        abort();
    }
    b->data = p;
    b->cap = cap;
}

void bw_buf_append(bw_buf_t *b, const void *data, size_t len) {
    bw_buf_reserve(b, len);
    memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = '\0';
}

void bw_buf_puts(bw_buf_t *b, const char *s) { bw_buf_append(b, s, strlen(s)); }

void bw_buf_printf(bw_buf_t *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char small[128];
    int n = vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof(small)) {
        bw_buf_append(b, small, (size_t)n);
        return;
    }
    bw_buf_reserve(b, (size_t)n);
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}
