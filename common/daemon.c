#include "daemon.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

#include "bw.h"
#include "cli.h"
#include "log.h"
#include "notify.h"

static void usage(const bw_daemon_t *d, FILE *out) {
    fprintf(out,
            "usage: %s [-c CONFIG] [--brokers HOST:PORT] [--port N] [--port-file F] [--dump-config] [--version]\n"
            "  -c, --config FILE    configuration (default: $" BW_CONF_ENV ", else %s)\n"
            "  -b, --brokers LIST   Kafka bootstrap servers (overrides kafka.brokers)\n"
            "  -p, --port N         %s (0 = any free port)\n"
            "      --port-file F    write the bound port to F once listening\n"
            "      --dump-config    print the effective configuration and exit\n"
            "  -V, --version        print the version and the commit built, and exit\n",
            d->name, bw_cli_default_config(), d->port_help);
}

static void set_logging(const bw_config_t *c);

/* A request's body, arena and batches take megabytes and are freed when it is answered.
 * glibc hands blocks that large back to the kernel at once (an mmap'd block unmapped, a
 * thread arena's top cut with madvise), so the next request faulted every page in again:
 * a fifth of the proxy's CPU under a bulk feed. Kept instead, up to these bounds. */
static void keep_freed_memory(void) {
    mallopt(M_MMAP_THRESHOLD, 32 << 20); /* blocks under 32 MiB from the heap (glibc's most) */
    mallopt(M_TRIM_THRESHOLD, 64 << 20); /* a heap's free top kept up to 64 MiB: more goes back */
}

bw_config_t *bw_daemon_init(bw_daemon_t *d, int argc, char **argv, int *exit_code) {
    keep_freed_memory();
    static const struct option opts[] = {{"config", required_argument, 0, 'c'},
                                         {"brokers", required_argument, 0, 'b'},
                                         {"port", required_argument, 0, 'p'},
                                         {"port-file", required_argument, 0, 'P'},
                                         {"dump-config", no_argument, 0, 'D'},
                                         {"help", no_argument, 0, 'h'},
                                         {"version", no_argument, 0, 'V'},
                                         {0, 0, 0, 0}};
    d->config_path = NULL; /* -c, else bw_cli_config_path's */
    d->brokers = d->port_file = NULL;
    d->port = -1;
    int dump = 0;
    argv[0] = (char *)d->name; /* getopt's messages begin with it, not with the path */
    for (int o; (o = getopt_long(argc, argv, "c:b:p:hV", opts, NULL)) != -1;) {
        char *end;
        switch (o) {
        case 'c': d->config_path = optarg; break;
        case 'b': d->brokers = optarg; break;
        case 'p':
            d->port = (int)strtol(optarg, &end, 10);
            if (*end || d->port < 0 || d->port > 65535) {
                *exit_code = bw_cli_usage_error(d->name, "--port %s is not a port number", optarg);
                return NULL;
            }
            break;
        case 'P': d->port_file = optarg; break;
        case 'D': dump = 1; break;
        case 'h': usage(d, stdout); *exit_code = 0; return NULL;
        case 'V': bw_cli_print_version(d->name); *exit_code = 0; return NULL;
        default: /* getopt said what is wrong, in one line */
            *exit_code = bw_cli_usage_error(d->name, NULL);
            return NULL;
        }
    }
    if (optind < argc) {
        *exit_code = bw_cli_usage_error(d->name, "unexpected argument \"%s\"", argv[optind]);
        return NULL;
    }
    const char *given = d->config_path;
    d->config_path = bw_cli_config_path(given);
    char err[512];
    bw_config_t *conf = bw_config_load(d->config_path, err, sizeof(err));
    if (!conf) {
        fprintf(stderr, "%s: %s%s\n", d->name, err, bw_cli_config_hint(given));
        *exit_code = 1;
        return NULL;
    }
    if (dump) {
        bw_config_dump(conf, stdout);
        bw_config_destroy(conf);
        *exit_code = 0;
        return NULL;
    }
    /* every hook the reload column can ask this daemon for is there (a programming error) */
    unsigned needed = bw_config_reload_hooks(d->process) & ~(1u << BW_HOOK_LOGGING);
    for (int h = BW_HOOK_NONE + 1; h < BW_HOOK_COUNT; h++)
        if (needed & 1u << h && !d->hooks[h]) {
            fprintf(stderr, "%s: no reload hook for %s\n", d->name, bw_reload_hook_name((bw_reload_hook_t)h));
            abort();
        }
    set_logging(conf);
    return conf;
}

struct MHD_Daemon *bw_daemon_listen(const bw_daemon_t *d, const char *address, int port,
                                    unsigned flags, MHD_AccessHandlerCallback handler, void *handler_cls,
                                    MHD_RequestCompletedCallback completed,
                                    const bw_listen_limits_t *limits, const bw_listen_tls_t *tls,
                                    int *bound_port) {
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, address, &addr.sin_addr) != 1) {
        bw_error(d->name, "listen address \"%s\" is not an IPv4 address", address);
        return NULL;
    }
    struct MHD_OptionItem tls_opts[5] = {{MHD_OPTION_END, 0, NULL}};
    if (tls) {
        /* TLS 1.2 and 1.3 only; the rest of GnuTLS' NORMAL set */
        static const char priorities[] = "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2";
        int n = 0;
        flags |= MHD_USE_TLS;
        tls_opts[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, (void *)tls->cert_pem};
        tls_opts[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, (void *)tls->key_pem};
        tls_opts[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_PRIORITIES, 0, (void *)priorities};
        if (tls->trust_pem) tls_opts[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_TRUST, 0, (void *)tls->trust_pem};
        tls_opts[n] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    }
    struct MHD_Daemon *httpd = MHD_start_daemon(
        flags | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL, handler, handler_cls,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr, MHD_OPTION_NOTIFY_COMPLETED, completed, NULL,
        MHD_OPTION_CONNECTION_LIMIT, limits->connections, MHD_OPTION_PER_IP_CONNECTION_LIMIT, limits->per_ip,
        MHD_OPTION_CONNECTION_TIMEOUT, limits->timeout_s, MHD_OPTION_ARRAY, tls_opts, MHD_OPTION_END);
    if (!httpd) {
        bw_error(d->name, "cannot listen on %s:%d: %s", address, port, strerror(errno));
        return NULL;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(httpd, MHD_DAEMON_INFO_BIND_PORT);
    *bound_port = di ? di->port : port;
    if (d->port_file) {
        /* written whole, then renamed: a reader never sees half a number */
        char tmp[4096];
        snprintf(tmp, sizeof(tmp), "%s.tmp", d->port_file);
        FILE *f = fopen(tmp, "w");
        if (!f || fprintf(f, "%d\n", *bound_port) < 0 || fclose(f) || rename(tmp, d->port_file))
            bw_error(d->name, "cannot write the port to %s", d->port_file);
    }
    return httpd;
}

enum MHD_Result bw_daemon_reply(struct MHD_Connection *c, unsigned status, const char *type, void *body,
                                size_t len, int free_body) {
    return bw_daemon_reply_with(c, status, type, body, len, free_body, NULL, NULL);
}

static _Thread_local bw_daemon_reply_t *capture;

void bw_daemon_capture(bw_daemon_reply_t *into) { capture = into; }

enum MHD_Result bw_daemon_reply_with(struct MHD_Connection *c, unsigned status, const char *type, void *body,
                                     size_t len, int free_body, const char *header, const char *value) {
    if (capture) {
        bw_daemon_reply_t *k = capture;
        *k = (bw_daemon_reply_t){.status = status, .len = len};
        snprintf(k->type, sizeof(k->type), "%s", type);
        snprintf(k->header, sizeof(k->header), "%s", header ? header : "");
        snprintf(k->value, sizeof(k->value), "%s", header && value ? value : "");
        if (free_body && body) {
            k->body = body;
        } else {
            k->body = malloc(len ? len : 1);
            if (!k->body) abort();
            if (len) memcpy(k->body, body, len);
        }
        return MHD_YES;
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(
        len, body ? body : (void *)"", free_body && body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_MUST_COPY);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (header) MHD_add_response_header(r, header, value);
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

void bw_daemon_etag(const void *text, size_t len, char out[24]) {
    uint64_t x = 14695981039346656037ull; /* FNV-1a, 64 bits: a cache key, not a secret */
    for (size_t i = 0; i < len; i++) x = (x ^ ((const unsigned char *)text)[i]) * 1099511628211ull;
    snprintf(out, 24, "W/\"%016llx\"", (unsigned long long)x);
}

int bw_daemon_not_modified(struct MHD_Connection *c, const char *etag) {
    const char *inm = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_IF_NONE_MATCH);
    if (!inm) return 0;
    if (strcmp(inm, "*") == 0) return 1;
    return strstr(inm, etag + 2) != NULL; /* weak comparison: the quoted opaque tag, W/ or not */
}

int bw_daemon_accepts_gzip(const char *ae) {
    for (const char *p = ae; p && *p;) {
        p += strspn(p, " \t,");
        size_t n = strcspn(p, ",;"), name = n;
        while (name && (p[name - 1] == ' ' || p[name - 1] == '\t')) name--;
        int ours = (name == 4 && strncasecmp(p, "gzip", 4) == 0) || (name == 1 && *p == '*');
        const char *end = p + strcspn(p, ",");
        int refused = 0; /* q=0, q=0.0, q=0.000 */
        for (const char *q = p + n; q < end; q++)
            if ((*q == 'q' || *q == 'Q') && q[1] == '=' && q[2] == '0' && strspn(q + 3, ".0") == (size_t)(end - q - 3))
                refused = 1;
        if (ours && !refused) return 1;
        p = end;
    }
    return 0;
}

unsigned char *bw_daemon_gzip(const void *in, size_t len, size_t *out_len) {
    z_stream z = {0};
    if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return NULL; /* 15 + 16: gzip */
    size_t cap = deflateBound(&z, (uLong)len);
    unsigned char *out = malloc(cap ? cap : 1);
    if (!out) abort();
    z.next_in = (Bytef *)in;
    z.avail_in = (uInt)len;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    int rc = deflate(&z, Z_FINISH);
    *out_len = z.total_out;
    deflateEnd(&z);
    if (rc != Z_STREAM_END) {
        free(out);
        return NULL;
    }
    return out;
}

enum MHD_Result bw_daemon_reply_not_modified(struct MHD_Connection *c, const char *etag) {
    struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(r, MHD_HTTP_HEADER_ETAG, etag);
    MHD_add_response_header(r, MHD_HTTP_HEADER_VARY, MHD_HTTP_HEADER_ACCEPT_ENCODING);
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_NOT_MODIFIED, r);
    MHD_destroy_response(r);
    return ret;
}

enum MHD_Result bw_daemon_reply_cacheable(struct MHD_Connection *c, const char *type, char *body, size_t len,
                                          const char *etag) {
    if (capture) return bw_daemon_reply(c, MHD_HTTP_OK, type, body, len, 1);
    if (bw_daemon_not_modified(c, etag)) {
        free(body);
        return bw_daemon_reply_not_modified(c, etag);
    }
    size_t zlen = 0;
    unsigned char *z = NULL;
    if (bw_daemon_accepts_gzip(MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT_ENCODING)) &&
        (z = bw_daemon_gzip(body, len, &zlen))) {
        free(body);
        body = (char *)z;
        len = zlen;
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(r, MHD_HTTP_HEADER_ETAG, etag);
    MHD_add_response_header(r, MHD_HTTP_HEADER_VARY, MHD_HTTP_HEADER_ACCEPT_ENCODING);
    /* a browser keeps it for the caller alone and asks with If-None-Match each time */
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "private, no-cache");
    if (z) MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_ENCODING, "gzip");
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

int bw_daemon_serve_ops(struct MHD_Connection *c, const char *method, const char *url,
                        bw_metrics_t *metrics, int (*ready)(void), enum MHD_Result *ret) {
    if (strcmp(method, "GET") != 0) return 0;
    if (strcmp(url, "/healthz") == 0) {
        *ret = bw_daemon_reply(c, MHD_HTTP_OK, "text/plain", "ok\n", 3, 0);
    } else if (strcmp(url, "/readyz") == 0) {
        *ret = !ready || ready() ? bw_daemon_reply(c, MHD_HTTP_OK, "text/plain", "ready\n", 6, 0)
                                 : bw_daemon_reply(c, MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain", "not ready\n", 10, 0);
    } else if (strcmp(url, "/metrics") == 0) {
        bw_buf_t b;
        bw_buf_init(&b);
        bw_metrics_render(metrics, &b);
        *ret = bw_daemon_reply(c, MHD_HTTP_OK, "text/plain; version=0.0.4", b.data, b.len, 1);
    } else {
        return 0;
    }
    return 1;
}

static atomic_int *signal_run, *signal_reload;

static void on_signal(int sig) {
    if (sig == SIGHUP) atomic_store(signal_reload, 1);
    else atomic_store(signal_run, 0);
}

void bw_daemon_handle_signals(atomic_int *run, atomic_int *reload) {
    signal_run = run;
    signal_reload = reload;
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGHUP, on_signal);
    signal(SIGPIPE, SIG_IGN);
}

static void set_logging(const bw_config_t *c) {
    bw_log_set_level((bw_log_level_t)c->log_level);
    bw_log_set_format((bw_log_format_t)c->log_format);
}

void bw_daemon_ready(bw_daemon_t *d, const char *status) {
    if (d->ready) return;
    char state[512];
    snprintf(state, sizeof(state), "READY=1\nSTATUS=%s", status);
    bw_notify(state);
    d->ready = 1;
}

/* RELOADING=1 carries the monotonic clock, as systemd 253's Type=notify-reload asks
 * (older systemd ignores it); the reload's end says its outcome. */
static void notify_reloading(const bw_daemon_t *d) {
    if (!d->ready) return;
    char state[64];
    snprintf(state, sizeof(state), "RELOADING=1\nMONOTONIC_USEC=%lld", (long long)bw_now_us());
    bw_notify(state);
}

static void notify_reloaded(const bw_daemon_t *d, const char *outcome) {
    if (!d->ready) return;
    char state[256];
    snprintf(state, sizeof(state), "READY=1\nSTATUS=%s", outcome);
    bw_notify(state);
}

static int reload_config(const bw_daemon_t *d, bw_config_t *running, int *restart);

int bw_daemon_reload(const bw_daemon_t *d, bw_config_t *running) {
    notify_reloading(d);
    int restart = 0, applied = reload_config(d, running, &restart);
    char outcome[128];
    if (applied < 0) snprintf(outcome, sizeof(outcome), "SIGHUP refused: the running config stays (see the log)");
    else if (restart)
        snprintf(outcome, sizeof(outcome), "SIGHUP reloaded: %d keys applied, %d kept until a restart (see the log)",
                 applied, restart);
    else snprintf(outcome, sizeof(outcome), "SIGHUP reloaded: %d keys applied", applied);
    notify_reloaded(d, outcome);
    return applied;
}

/* The applied keys' count (-1: the file does not load); *restart: changed keys kept
 * until a restart. One log line says what the reload did with every changed key. */
static int reload_config(const bw_daemon_t *d, bw_config_t *running, int *restart) {
    char err[1024];
    bw_config_t *next = bw_config_load(d->config_path, err, sizeof(err));
    if (!next) {
        bw_log(BW_LOG_ERROR, "config", -1, NULL, "SIGHUP: reload refused, the running config stays: %s", err);
        return -1;
    }
    /* the command line's --port overrides the file in both */
    if (d->port >= 0) {
        next->proxy_port = running->proxy_port;
        next->consumer_port = running->consumer_port;
    }
    bw_reload_t r;
    int applied = bw_config_reload(running, next, d->process, &r);
    bw_config_destroy(next);
    for (int h = BW_HOOK_NONE + 1; h < BW_HOOK_COUNT; h++) {
        if (!(r.hooks & 1u << h)) continue;
        if (h == BW_HOOK_LOGGING) set_logging(running);
        else d->hooks[h](running);
    }
    char restart_text[2200] = "", unused[2200] = "";
    if (r.restart_cnt)
        snprintf(restart_text, sizeof(restart_text), "; NOT applied, %s a restart (the running value stays until then): %s",
                 r.restart_cnt > 1 ? "need" : "needs", r.restart);
    if (r.unused_cnt) snprintf(unused, sizeof(unused), "; changed, not read by %s: %s", d->name, r.unused);
    bw_log(r.restart_cnt ? BW_LOG_WARN : BW_LOG_INFO, "config", -1, NULL, "SIGHUP: reloaded %s: %s%s%s%s",
           d->config_path, applied ? "applied " : "nothing to apply", r.applied, restart_text, unused);
    *restart = r.restart_cnt;
    return applied;
}
