/* signals.h — reads each server's health signals for the throttle (throttle.h), on a
 * thread per server, so that a slow or dead server never stalls the dispatcher nor
 * delays the readings of the others.
 *
 * Every throttle.interval_ms, per server, on connections of its own as the server's user:
 *   - on the primary: writes this consumer's heartbeat row (REPLACE INTO <first shard
 *     db>.<heartbeat_table> (id, ts_us) VALUES (heartbeat_id, now)) when the server has
 *     replicas; reads Threads_running (SHOW GLOBAL STATUS) and reports the mean of that
 *     read and the throttle.threads_running_samples - 1 taken since the last, evenly
 *     spaced, less 1 for the reading query; runs throttle.custom_query when there is one;
 *   - on each replica: reads that row; the lag is the age of the oldest heartbeat this
 *     reader wrote that the replica has not applied (0 when it holds the newest), the most
 *     over the replicas. A row per consumer: another host's clock never reads as lag.
 *     When the row cannot be read but the replica answers: its Seconds_Behind_Master
 *     (REPLICA MONITOR), NULL being unknown. A heartbeat that could not be written leaves
 *     the lag unread (a replica holding the last one would read as no lag).
 * A read that fails keeps the signal's last reading (its age then makes it unknown after
 * throttle.stale_ms) and records why; a connection that failed is made again next time.
 * Readings that are not finite numbers are failures.
 *
 * @locality bw_signals_read: any thread (a mutex guards the readings). */
#ifndef BW_SIGNALS_H
#define BW_SIGNALS_H

#include <stdint.h>

#include "config.h"
#include "throttle.h"

typedef struct bw_signals bw_signals_t;

/* Starts the threads. conf's servers, throttle.interval_ms, threads_running_samples,
 * custom_query and heartbeat_table must not change while they run (they need a restart). heartbeat_id:
 * this consumer's row (bw_signals_heartbeat_id). */
bw_signals_t *bw_signals_start(const bw_config_t *conf, uint64_t heartbeat_id);
void bw_signals_stop(bw_signals_t *s);

/* A consumer's heartbeat row id: a hash of its name (hostname and listen address), so
 * a restart writes the same row; 1 to 2^63-1. */
uint64_t bw_signals_heartbeat_id(const char *name);


/* Server `server`'s readings, BW_SERVER_SIGNALS of them (bw_signal_t order). */
void bw_signals_read(bw_signals_t *s, int server, bw_signal_reading_t out[BW_SERVER_SIGNALS]);

#endif
