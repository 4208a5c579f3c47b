/* bw.h — conventions shared by every bulkwrite component.
 *
 * Errors: functions return bw_err_t (BW_OK == 0) and, where context helps, fill a
 * caller-supplied `char *errstr, size_t errstr_size` with a sentence naming what is
 * wrong. bw_err2str() names the kind. */
#ifndef BW_H
#define BW_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    BW_OK = 0,
    BW_ERR_INVALID,    /* bad input: config, request, op */
    BW_ERR_NOMEM,
    BW_ERR_IO,         /* file or socket */
    BW_ERR_KAFKA,
    BW_ERR_MYSQL_RETRY,/* MySQL error worth retrying (timeout, deadlock, gone away) */
    BW_ERR_MYSQL_DATA, /* MySQL rejected the data itself (duplicate key, too long) */
    BW_ERR_TOO_LARGE,
} bw_err_t;

const char *bw_err2str(bw_err_t err);

/* snprintf into errstr, tolerating errstr == NULL. Returns `err` for tail calls. */
bw_err_t bw_seterr(char *errstr, size_t errstr_size, bw_err_t err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Monotonic and wall clocks in microseconds / milliseconds. */
int64_t bw_now_us(void);
int64_t bw_wall_ms(void);

/* "2027-03-01T00:00:00Z" (UTC, the Z required) as Unix seconds into *secs; -1 if it is
 * not such a time (2027-02-30 included). Token expiries and scheduled ops use it. */
int bw_utc_time_parse(const char *text, int64_t *secs);
/* Unix ms as "2027-03-01T00:00:00Z" (whole seconds, rounded down) into out[21]. */
void bw_utc_time_format(int64_t ms, char out[21]);

#define BW_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif
