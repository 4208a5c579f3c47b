/* buf.h — a growable byte buffer. Hot paths keep one per thread and bw_buf_reset() it
 * between uses, so building a statement allocates only when it outgrows every earlier one. */
#ifndef BW_BUF_H
#define BW_BUF_H

#include <stddef.h>

typedef struct {
    char *data; /* always NUL-terminated after any append */
    size_t len;
    size_t cap;
} bw_buf_t;

void bw_buf_init(bw_buf_t *b);
void bw_buf_free(bw_buf_t *b);
static inline void bw_buf_reset(bw_buf_t *b) {
    b->len = 0;
    if (b->data) b->data[0] = '\0';
}
/* Makes room for `extra` more bytes plus the terminator; aborts on out-of-memory
 * (a daemon that cannot allocate a statement buffer cannot go on). */
void bw_buf_reserve(bw_buf_t *b, size_t extra);
void bw_buf_append(bw_buf_t *b, const void *data, size_t len);
void bw_buf_puts(bw_buf_t *b, const char *s);
void bw_buf_printf(bw_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
