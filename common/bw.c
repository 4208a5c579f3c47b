#define _POSIX_C_SOURCE 200809L
#include "bw.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

const char *bw_err2str(bw_err_t err) {
    switch (err) {
    case BW_OK: return "ok";
    case BW_ERR_INVALID: return "invalid";
    case BW_ERR_NOMEM: return "out of memory";
    case BW_ERR_IO: return "i/o error";
    case BW_ERR_KAFKA: return "kafka error";
    case BW_ERR_MYSQL_RETRY: return "retryable mysql error";
    case BW_ERR_MYSQL_DATA: return "mysql data error";
    case BW_ERR_TOO_LARGE: return "too large";
    }
    return "unknown error";
}

bw_err_t bw_seterr(char *errstr, size_t errstr_size, bw_err_t err, const char *fmt, ...) {
    if (errstr && errstr_size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(errstr, errstr_size, fmt, ap);
        va_end(ap);
    }
    return err;
}

int64_t bw_now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t bw_wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
