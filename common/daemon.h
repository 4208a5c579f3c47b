/* daemon.h — what every bulkwrite daemon does before its own work.
 *
 * The shared command line (-c/--config, -b/--brokers, -p/--port, --port-file,
 * --dump-config, -h/--help), loading and validating the configuration, the log level,
 * the HTTP listener, the signals that ask for a clean shutdown, and what systemd is told
 * of startup and reloads (notify.h). */
#ifndef BW_DAEMON_H
#define BW_DAEMON_H

#include <microhttpd.h>
#include <stdatomic.h>

#include "config.h"
#include "metrics.h"

/* After a SIGHUP applied keys with this hook (config.h, bw_reload_hook_t); called on
 * the thread that called bw_daemon_reload, with the running config. */
typedef void (*bw_reload_hook_fn)(const bw_config_t *conf);

typedef struct {
    const char *name;      /* "bw-proxy": usage and error prefix */
    const char *port_help; /* what --port serves, for the usage text */
    bw_process_t process;  /* which column of the reload policy is this daemon's */
    /* the daemon's hooks, one for each hook its applied keys name (bw_daemon_init
     * refuses to start without one); the logging one is daemon.c's own */
    bw_reload_hook_fn hooks[BW_HOOK_COUNT];
    /* filled by bw_daemon_init */
    const char *config_path;
    const char *brokers;   /* --brokers, or NULL for kafka.brokers */
    const char *port_file; /* --port-file, or NULL */
    int port;              /* --port, or -1 for the config's port */
    int ready;             /* READY=1 was sent (bw_daemon_ready) */
} bw_daemon_t;

/* Parses the command line and loads the configuration. Returns it (owned by the caller)
 * or NULL with *exit_code set: 0 after --help or --dump-config, 1 for a bad config,
 * 2 for bad usage. */
bw_config_t *bw_daemon_init(bw_daemon_t *d, int argc, char **argv, int *exit_code);

/* What one HTTP server lets its callers hold: with a thread per connection, idle or
 * slow sockets (slowloris) are bounded per client address and closed when idle. */
typedef struct {
    unsigned connections; /* at once, in all */
    unsigned per_ip;      /* at once from one address (0: no bound of its own) */
    unsigned timeout_s;   /* a connection idle this long is closed */
} bw_listen_limits_t;

/* HTTPS for one HTTP server: PEM text, which must outlive the server (libmicrohttpd
 * keeps the pointers). */
typedef struct {
    const char *cert_pem;  /* the server's certificate (chain) */
    const char *key_pem;   /* its private key */
    const char *trust_pem; /* CAs of client certificates: each client is asked for one
                              (and the handler verifies it); NULL: none asked */
} bw_listen_tls_t;

/* Starts libmicrohttpd on address:port (port 0 = any free port) with `flags` and
 * `handler` (called with handler_cls); HTTPS only with tls (NULL: plain HTTP). Writes
 * the bound port to --port-file if one was given. NULL on failure, logged. *bound_port
 * gets the port actually bound. */
struct MHD_Daemon *bw_daemon_listen(const bw_daemon_t *d, const char *address, int port,
                                    unsigned flags, MHD_AccessHandlerCallback handler, void *handler_cls,
                                    MHD_RequestCompletedCallback completed,
                                    const bw_listen_limits_t *limits, const bw_listen_tls_t *tls,
                                    int *bound_port);

/* A reply kept instead of sent: what a handler answered, for a caller that answers in
 * another protocol (the proxy's Connect calls). */
typedef struct {
    unsigned status;
    char type[64];
    char *body; /* malloc'd: the taker frees it */
    size_t len;
    char header[32], value[128]; /* the one extra header, "" for none */
} bw_daemon_reply_t;
/* From now on, this thread's replies are kept in *into instead of sent (NULL: sent again).
 * A handler answers synchronously on its thread, so a caller brackets it with two calls. */
void bw_daemon_capture(bw_daemon_reply_t *into);

/* Queues a response; with free_body the body (malloc'd) passes to libmicrohttpd. */
enum MHD_Result bw_daemon_reply(struct MHD_Connection *c, unsigned status, const char *type, void *body,
                                size_t len, int free_body);
/* The same with one more header (e.g. Retry-After). */
enum MHD_Result bw_daemon_reply_with(struct MHD_Connection *c, unsigned status, const char *type, void *body,
                                     size_t len, int free_body, const char *header, const char *value);

/* A 200 a client may keep and ask again for (the page's polls): ETag `etag` (W/"…",
 * bw_daemon_etag), and, when the request's If-None-Match names it, 304 with no body
 * instead; gzip'd (Content-Encoding: gzip) when its Accept-Encoding takes gzip. body is
 * malloc'd and taken (freed here). */
enum MHD_Result bw_daemon_reply_cacheable(struct MHD_Connection *c, const char *type, char *body, size_t len,
                                          const char *etag);
/* 1 when the request's If-None-Match names `etag` (or is *): answer 304. */
int bw_daemon_not_modified(struct MHD_Connection *c, const char *etag);
/* A weak ETag (W/"16 hex digits") for a representation whose text is text[len]. */
void bw_daemon_etag(const void *text, size_t len, char out[24]);
/* 304 Not Modified for `etag`. */
enum MHD_Result bw_daemon_reply_not_modified(struct MHD_Connection *c, const char *etag);
/* Whether an Accept-Encoding header value takes gzip (a "gzip" or "*" coding without q=0). */
int bw_daemon_accepts_gzip(const char *accept_encoding);
/* gzip of in[len] (malloc'd, *out_len its size), or NULL when zlib fails. */
unsigned char *bw_daemon_gzip(const void *in, size_t len, size_t *out_len);

/* Serves the operations endpoints every daemon has: GET /metrics (Prometheus text),
 * /healthz (the process answers) and /readyz (ready() says; NULL = always ready).
 * Returns 1 with *ret set when `url` was one of them. @locality an HTTP thread. */
int bw_daemon_serve_ops(struct MHD_Connection *c, const char *method, const char *url,
                        bw_metrics_t *metrics, int (*ready)(void), enum MHD_Result *ret);

/* SIGINT and SIGTERM set *run to 0; SIGHUP sets *reload to 1 (the daemon reloads its
 * config file); SIGPIPE is ignored (a client hanging up is not fatal). */
void bw_daemon_handle_signals(atomic_int *run, atomic_int *reload);

/* Tells systemd the daemon is ready (READY=1, with `status` for systemctl status), once:
 * later calls do nothing. A no-op outside systemd (notify.h). */
void bw_daemon_ready(bw_daemon_t *d, const char *status);

/* SIGHUP: reloads d->config_path into `running` as the key table's reload column says
 * for d->process (bw_config_reload), then runs d's hooks of the applied keys. Logs one
 * line: the keys applied, every changed key that needs a restart (kept at its running
 * value; the line is then a WARN) and the changed ones this daemon does not read; or
 * why the file does not load (nothing applied). Tells systemd RELOADING=1 before and
 * READY=1 after, with the outcome as its STATUS (only once the daemon said READY=1: a
 * reload during startup does not end it early). Returns the number of keys applied, -1
 * if the file does not load. */
int bw_daemon_reload(const bw_daemon_t *d, bw_config_t *running);

#endif
