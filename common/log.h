/* log.h — one line per event on stderr:
 *   2026-11-30T06:40:01.123Z INFO  consumer shard=3 job=ab12… applied 500 rows
 * @locality any thread (each line is written with one write(2)). */
#ifndef BW_LOG_H
#define BW_LOG_H

typedef enum { BW_LOG_DEBUG, BW_LOG_INFO, BW_LOG_WARN, BW_LOG_ERROR } bw_log_level_t;

void bw_log_set_level(bw_log_level_t level);
/* Parses "debug", "info", "warn", "error"; returns -1 if unknown. */
int bw_log_level_parse(const char *name);

/* shard < 0 and job == NULL leave those fields out. */
void bw_log(bw_log_level_t level, const char *component, int shard, const char *job,
            const char *fmt, ...) __attribute__((format(printf, 5, 6)));

#define bw_info(comp, ...) bw_log(BW_LOG_INFO, comp, -1, NULL, __VA_ARGS__)
#define bw_warn(comp, ...) bw_log(BW_LOG_WARN, comp, -1, NULL, __VA_ARGS__)
#define bw_error(comp, ...) bw_log(BW_LOG_ERROR, comp, -1, NULL, __VA_ARGS__)
#define bw_debug(comp, ...) bw_log(BW_LOG_DEBUG, comp, -1, NULL, __VA_ARGS__)

#endif
