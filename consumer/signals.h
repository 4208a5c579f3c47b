/* signals.h — reads each server's health signals for the throttle (throttle.h), on a
 * thread of its own so that a slow or dead server never stalls the dispatcher.
 *
 * Every throttle.interval_ms, per server, on connections of its own as the server's user:
 *   - on the primary: writes the heartbeat row (REPLACE INTO <first shard db>.<heartbeat_table>
 *     (id, ts_us) VALUES (1, now)) when the server has replicas; reads Threads_running
 *     (SHOW GLOBAL STATUS); runs throttle.custom_query when there is one;
 *   - on each replica: reads the heartbeat row; the lag is the age of the oldest heartbeat
 *     this reader wrote that the replica has not applied (0 when it holds the newest), the
 *     most over the replicas. Clocks are the hosts' (pt-heartbeat's assumption: NTP).
 * A read that fails keeps the signal's last reading (its age then makes it unknown) and
 * records why; the connection is dropped and made again next time.
 *
 * @locality bw_signals_read: any thread (a mutex guards the readings). */
#ifndef BW_SIGNALS_H
#define BW_SIGNALS_H

#include "config.h"
#include "throttle.h"

typedef struct bw_signals bw_signals_t;

/* Starts the thread. conf's servers, throttle.interval_ms, custom_query and
 * heartbeat_table must not change while it runs (they need a restart). */
bw_signals_t *bw_signals_start(const bw_config_t *conf);
void bw_signals_stop(bw_signals_t *s);

/* Server `server`'s readings, BW_SERVER_SIGNALS of them (bw_signal_t order). */
void bw_signals_read(bw_signals_t *s, int server, bw_signal_reading_t out[BW_SERVER_SIGNALS]);

#endif
