/* notify.h — tells systemd how a daemon is doing (the sd_notify protocol), without
 * libsystemd.
 *
 * A service of Type=notify gets the environment variable NOTIFY_SOCKET: the AF_UNIX
 * datagram socket of its service manager, a path or, when it begins with '@', an
 * abstract name. One datagram of newline-separated "KEY=VALUE" lines says what changed:
 * "READY=1" (startup is over: systemctl start returns, units ordered after this one
 * start), "RELOADING=1" (a reload began; READY=1 again ends it), "STOPPING=1",
 * "STATUS=text" (shown by systemctl status). systemd's sd_notify(3) has the full list.
 *
 * @locality any thread (it reads the environment: nothing may setenv meanwhile). */
#ifndef BW_NOTIFY_H
#define BW_NOTIFY_H

/* Sends `state` to $NOTIFY_SOCKET, never blocking. Returns 0 when sent, and when
 * NOTIFY_SOCKET is unset or empty (not run by systemd: nothing to do); -1 when it could
 * not be sent, with errno set and a WARN logged (the daemon goes on: systemd then times
 * the start out, which the log explains). */
int bw_notify(const char *state);

#endif
