/* bwctl — the command line for clients and SREs.
 *
 *   bwctl [-c CONFIG] [--url URL] COMMAND [ARGS]   (bwctl COMMAND --help for each)
 *
 * bwctl's own options (-c, --url, --admin-url, --token-file, --cacert, --cert, --key,
 * --version) stand before the command or among its arguments alike (main, split_options).
 * The configuration is -c FILE, else $BULKWRITE_CONF, else the installed one (cli.h).
 *
 *   submit FILE          send ops from JSON lines or CSV, in batches, with a progress bar
 *   watch JOB_ID         follow a job until it is finished: progress bar and ETA
 *   job JOB_ID           print a job's status (JSON)
 *   cancel JOB_ID        skip the job's ops not applied yet
 *   dead-letters JOB_ID  the job's refused ops, as a file to fix and submit again
 *   shards               a table of every shard: budgets, paused, lag, recent errors
 *   set-rate SHARD [RATE] [--rows ROWS] [--pin|--unpin]
 *                        set a shard's budget: statements/s (0 = unlimited) and/or rows/s
 *                        (0 = no row budget); "default" = back to the configured value
 *   pause SHARD          stop applying a shard's batches (they wait in Kafka)
 *   resume SHARD         apply them again
 *                        (set-rate, pause, resume: --server NAME for every shard of a server)
 *   set-budget --server NAME [RATE|none] [--rows ROWS|none] --reason TEXT
 *                        a budget for the whole server (statements/s, rows/s), shared by
 *                        its shards with work
 *   schema [--print] [--create-users]
 *                        create every shard database and table (or print the DDL), and
 *                        the consumer's and the proxy's least-privilege users
 *   check-config         load and validate the configuration (and the proxy's TLS files and clients file)
 *   dump-config          print the effective configuration
 *   config-doc           print docs/configuration.md
 *   metrics-doc [FILE]   print the metric list of docs/api.md; with FILE (docs/api.md), the
 *                        file with its generated list replaced
 *   endpoints-doc FILE   print FILE (docs/api.md) with its endpoint table regenerated
 *
 * The URL defaults to the proxy of the configuration (proxy.listen_address:proxy.port,
 * https with proxy.tls.cert_file); set-rate, pause, resume and set-budget go to --admin-url, else to
 * the proxy's admin listener when the configuration has one (proxy.admin_port), else to
 * the URL. Over HTTPS, --cacert FILE trusts the proxy's CA, --cert FILE and --key FILE
 * present a client certificate (libcurl's options of those names).
 * The bearer token for a proxy with clients (docs/security.md) comes from --token-file
 * FILE or the environment variable BW_TOKEN, never from the command line itself.
 * Exit codes: 0 success; 1 failure (message on stderr; for submit: some ops were not
 * accepted; for watch: the job finished with failed ops); 2 usage; 3 watch timed out. */
#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <mysqld_error.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>
#include <yajl/yajl_parse.h>

#include "arena.h"
#include "auth.h"
#include "buf.h"
#include "cli.h"
#include "config.h"
#include "db.h"
#include "endpoints.h"
#include "consumer_metrics.h"
#include "metrics.h"
#include "protojson.h"
#include "proxy_metrics.h"
#include "ratelimit.h"
#include "request_decode.h"
#include "tls.h"
#include "token.h"
#include "utf8.h"

static bw_config_t *conf;
static char base_url[512];
static char *auth_header; /* "Authorization: Bearer TOKEN", or NULL without a token */
static const char *tls_cacert, *tls_cert, *tls_key; /* --cacert, --cert, --key; NULL: libcurl's defaults */
static char who[80] = "bwctl"; /* "bwctl COMMAND": who speaks in a usage error (bw_cli_usage_error) */

/* ---- HTTP ------------------------------------------------------------------------------ */

static size_t collect(char *p, size_t sz, size_t n, void *ud) {
    bw_buf_append(ud, p, sz * n);
    return sz * n;
}

/* method GET (body NULL) or another with a body of len bytes of type ctype. Returns the
 * HTTP status, or -1 with the transport error in resp; resp gets the body
 * (NUL-terminated), *retry_after_s (when not NULL) the Retry-After header's seconds, 0
 * without one. */
static long http_body(const char *method, const char *path, const char *ctype, const void *body, size_t len,
                      bw_buf_t *resp, long *retry_after_s) {
    CURL *c = curl_easy_init();
    bw_buf_t url; /* never cut: a cut query would ask for something else */
    bw_buf_init(&url);
    bw_buf_printf(&url, "%s%s", base_url, path);
    char content_type[64];
    snprintf(content_type, sizeof(content_type), "Content-Type: %s", ctype);
    struct curl_slist *h = curl_slist_append(NULL, content_type);
    h = curl_slist_append(h, "Expect:");
    if (auth_header) h = curl_slist_append(h, auth_header);
    bw_buf_reset(resp);
    curl_easy_setopt(c, CURLOPT_URL, url.data);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, resp);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 300L);
    if (tls_cacert) curl_easy_setopt(c, CURLOPT_CAINFO, tls_cacert);
    if (tls_cert) curl_easy_setopt(c, CURLOPT_SSLCERT, tls_cert);
    if (tls_key) curl_easy_setopt(c, CURLOPT_SSLKEY, tls_key);
    if (strcmp(method, "POST") == 0) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(body ? len : 0));
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body ? body : "");
    } else if (strcmp(method, "GET")) {
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    }
    CURLcode rc = curl_easy_perform(c);
    long status = -1;
    curl_off_t retry_after = 0;
    if (rc == CURLE_OK) {
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_getinfo(c, CURLINFO_RETRY_AFTER, &retry_after);
    } else {
        bw_buf_printf(resp, "%s: %s", url.data, curl_easy_strerror(rc));
    }
    if (retry_after_s) *retry_after_s = (long)retry_after;
    bw_buf_append(resp, "", 1);
    resp->len--;
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    bw_buf_free(&url);
    return status;
}

/* The same with a JSON body (a string, or NULL). */
static long http(const char *method, const char *path, const char *body, bw_buf_t *resp, long *retry_after_s) {
    return http_body(method, path, "application/json", body, body ? strlen(body) : 0, resp, retry_after_s);
}

/* The "error" of a JSON error body, or the body itself. */
static const char *error_text(bw_buf_t *resp, char *out, size_t size) {
    json_t *j = json_loadb(resp->data, resp->len, 0, NULL);
    const char *e = json_string_value(json_object_get(j, "error"));
    snprintf(out, size, "%s", e ? e : resp->data ? resp->data : "");
    json_decref(j);
    return out;
}

static long jint(json_t *o, const char *k) { return (long)json_integer_value(json_object_get(o, k)); }
/* a member as text, "" when absent or not a string */
static const char *jstr(json_t *o, const char *k) {
    const char *v = json_string_value(json_object_get(o, k));
    return v ? v : "";
}

/* ---- progress --------------------------------------------------------------------------- */

/* The line on a terminal, redrawn in place. It must not wrap, or \r would not return to
 * its start: the bar gives up width to a note (down to 10), and the note is cut to what
 * is left. */
static void draw_bar(const char *what, double frac, const char *stats, const char *note, int final) {
    struct winsize ws;
    int cols = ioctl(2, TIOCGWINSZ, &ws) == 0 && ws.ws_col ? ws.ws_col : 80;
    int fixed = (int)strlen(what) + 4 + (int)strlen(stats) + (*note ? 3 : 0); /* "WHAT [" "] " */
    int width = *note ? cols - 1 - fixed - (int)strlen(note) : 30;
    width = width < 10 ? 10 : width > 30 ? 30 : width;
    int room = cols - 1 - fixed - width;
    char bar[31];
    for (int i = 0; i < width; i++) bar[i] = i < (int)(frac * width) ? '#' : '.';
    bar[width] = '\0';
    /* \033[K clears what a longer line left behind */
    fprintf(stderr, "\r%s [%s] %s%s%.*s\033[K%s", what, bar, stats, *note ? "   " : "", room > 0 ? room : 0, note,
            final ? "\n" : "");
}

/* A bar on a terminal, a plain line every 2 s otherwise; note (may be NULL) says why it
 * is slow, and shows at once when it changes. */
static void progress(const char *what, double done, double total, double rate, const char *note, int final) {
    static int64_t last_us;
    static char last_note[128];
    static int tty = -1; /* asked once: submit reports every line it reads */
    int64_t now = bw_now_us();
    if (tty < 0) tty = isatty(2);
    note = note ? note : "";
    if (!final && strcmp(note, last_note) == 0 && now - last_us < (tty ? 100000 : 2000000)) return;
    last_us = now;
    snprintf(last_note, sizeof(last_note), "%s", note);
    double frac = total > 0 ? done / total : 1;
    if (frac > 1) frac = 1;
    char eta[32] = "", stats[128];
    if (rate > 0 && total > done) snprintf(eta, sizeof(eta), " ETA %.0fs", (total - done) / rate);
    snprintf(stats, sizeof(stats), "%3.0f%% %.0f/%.0f %.0f/s%s", frac * 100, done, total, rate, eta);
    if (tty) draw_bar(what, frac, stats, note, final);
    else fprintf(stderr, "%s %s%s%s\n", what, stats, *note ? "   " : "", note);
}

/* ---- submit ----------------------------------------------------------------------------- */

/* Parts in flight at once by default: enough to keep a shard's pipeline busy while each
 * part waits for its Kafka acknowledgement (docs/performance.md, hot-shard-bwctl). */
#define SUBMIT_IN_FLIGHT_DEFAULT 8
#define SUBMIT_IN_FLIGHT_MAX 16
/* Ops a part by default: as many as bw-workload's protobuf requests, so that the proxy
 * and Kafka pay for as few requests; a scheduled or dependent part is held whole in one
 * Kafka record (kafka.message_max_bytes, 1 MB), which 1,000 ops of up to 900 bytes fit. */
#define SUBMIT_BATCH_DEFAULT 5000
#define SUBMIT_NAME_OPS 1000 /* a derived job name hashes the file's first ops: so many */
#define SUBMIT_BATCH_HELD 1000

/* The object keys of the parts in flight (queued or being sent): a part that shares one
 * with them waits until they are answered, so two ops on one object never travel
 * together and each shard gets them in the file's order. An op's key is a 64-bit hash
 * of its object type and id (see op_key): a collision only holds a part back longer.
 * Open addressing with linear probing, 0 = an empty slot; sized once for every op that
 * can be in flight, so it never grows. No two parts in flight share a key, so a key is
 * one part's, and a part's repeated key is added and removed as one. */
typedef struct {
    uint64_t *slot;
    size_t mask;
} keyset_t;

static void keyset_init(keyset_t *ks, size_t keys) {
    size_t cap = 16;
    while (cap < 2 * keys) cap <<= 1;
    ks->slot = calloc(cap, sizeof(uint64_t));
    if (!ks->slot) abort();
    ks->mask = cap - 1;
}

static size_t keyset_find(const keyset_t *ks, uint64_t k) {
    size_t i = (size_t)(k ^ k >> 32) & ks->mask;
    while (ks->slot[i] && ks->slot[i] != k) i = (i + 1) & ks->mask;
    return i;
}

static int keyset_has(const keyset_t *ks, uint64_t k) { return ks->slot[keyset_find(ks, k)] != 0; }

static void keyset_add(keyset_t *ks, uint64_t k) { ks->slot[keyset_find(ks, k)] = k; }

/* Removes k, moving back the keys after it in its run so that every key stays reachable
 * from its home slot (no tombstones). */
static void keyset_del(keyset_t *ks, uint64_t k) {
    size_t i = keyset_find(ks, k);
    if (!ks->slot[i]) return;
    for (size_t j = (i + 1) & ks->mask;; j = (j + 1) & ks->mask) {
        uint64_t m = ks->slot[j];
        if (!m) break;
        size_t home = (size_t)(m ^ m >> 32) & ks->mask;
        /* m may move to i unless its home lies cyclically in (i, j] */
        if (((j - home) & ks->mask) >= ((j - i) & ks->mask)) {
            ks->slot[i] = m;
            i = j;
        }
    }
    ks->slot[i] = 0;
}

/* FNV-1a over bytes, continuing from h. */
static uint64_t fnv1a(uint64_t h, const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ULL;
    return h;
}
#define FNV_BASIS 0xcbf29ce484222325ULL

/* An op's id as it came (a JSON number, or a string of its decimal digits), as a number;
 * text that is no decimal id is hashed, so that the same text still names one object. */
static uint64_t id_of_text(const unsigned char *p, size_t n) {
    uint64_t id = 0;
    size_t i = 0;
    while (i < n && p[i] >= '0' && p[i] <= '9' && id <= (UINT64_MAX - 9) / 10) id = id * 10 + (uint64_t)(p[i++] - '0');
    return i == n ? id : fnv1a(FNV_BASIS, p, n) | 1;
}

/* The key of the object an op names (type hashed, id), 0 for none: a create without an
 * id gets a new one from its table, so nothing else in the file can name it. */
static uint64_t op_key(uint64_t type_hash, uint64_t id) {
    if (!id) return 0;
    uint64_t h = type_hash ^ id * 0x9e3779b97f4a7c15ULL; /* splitmix64's finaliser */
    h = (h ^ h >> 30) * 0xbf58476d1ce4e5b9ULL;
    h = (h ^ h >> 27) * 0x94d049bb133111ebULL;
    h ^= h >> 31;
    return h ? h : 1;
}

/* The key of an op read (bw_json_op_read). */
static uint64_t op_key_of(const Bulkwrite__V1__Op *op) {
    const char *type = op->object_type ? op->object_type : "";
    return op_key(fnv1a(FNV_BASIS, (const unsigned char *)type, strlen(type)), op->id);
}

/* ---- a JSON line, read without building it ---------------------------------------------- */

/* A line as bwctl read it before it sent protobuf, and still reads a line the op reader
 * refuses: one JSON object or array (a line that is not is named and left out), with
 * its top-level "object_type" and "id" (its key) and "replay_of" (a dead-letters file's
 * first line). Such a line is in its part as before, so that a job an older bwctl began
 * keeps its name and its parts; the part goes as JSON, and the proxy judges the line. yajl's callbacks
 * give them without a tree or a malloc per line: one handle reads every line, each a
 * value of its own (yajl_allow_multiple_values), and is made anew only after a bad one. */
typedef struct {
    yajl_handle h;
    int depth, values, members; /* nesting now; values begun at the top; top object's members */
    int top_map;                /* the line is an object */
    enum { M_OTHER, M_TYPE, M_ID, M_REPLAY } member; /* whose value comes next at depth 1 */
    uint64_t type_hash, id;
    int replay_seen;    /* a top-level "replay_of" string */
    char replay_of[33]; /* its value when 32 characters long, else "" */
    const char *refusal; /* why a callback stopped the parse */
} jline_t;

/* Every value passes here first: at the top only an object or array may begin, once. */
static int jl_value(jline_t *jl, int container) {
    if (jl->depth == 0) {
        if (!container || jl->values++) return jl->refusal = "'[' or '{' expected, one value a line", 0;
    }
    return 1;
}

/* a scalar: kept when it is the value of a member we read */
static int jl_scalar(jline_t *jl, const unsigned char *p, size_t n, int string) {
    if (!jl_value(jl, 0)) return 0;
    if (jl->depth == 1 && jl->top_map) {
        if (jl->member == M_TYPE && string) jl->type_hash = fnv1a(FNV_BASIS, p, n);
        else if (jl->member == M_ID) jl->id = id_of_text(p, n);
        else if (jl->member == M_REPLAY && string) {
            jl->replay_seen = 1;
            if (n == 32) snprintf(jl->replay_of, sizeof(jl->replay_of), "%.*s", 32, (const char *)p);
        }
        jl->member = M_OTHER;
    }
    return 1;
}

static int jl_null(void *ud) { return jl_scalar(ud, NULL, 0, 0); }
static int jl_bool(void *ud, int b) { return (void)b, jl_scalar(ud, NULL, 0, 0); }
static int jl_number(void *ud, const char *p, size_t n) { return jl_scalar(ud, (const unsigned char *)p, n, 0); }
/* text as the proxy takes it (request_json.c): UTF-8 by bw_utf8_valid, which refuses what
 * yajl lets by (overlong forms, encoded surrogates): a line it would refuse is refused
 * here alone, not with its whole part */
static int jl_string(void *ud, const unsigned char *p, size_t n) {
    if (!bw_utf8_valid(p, n)) return ((jline_t *)ud)->refusal = "text that is not valid UTF-8", 0;
    return jl_scalar(ud, p, n, 1);
}

static int jl_open(jline_t *jl, int map) {
    if (!jl_value(jl, 1)) return 0;
    if (jl->depth == 0) jl->top_map = map;
    if (jl->depth == 1) jl->member = M_OTHER;
    jl->depth++;
    return 1;
}
static int jl_start_map(void *ud) { return jl_open(ud, 1); }
static int jl_start_array(void *ud) { return jl_open(ud, 0); }
static int jl_close(void *ud) { return ((jline_t *)ud)->depth--, 1; }

static int jl_key(void *ud, const unsigned char *k, size_t n) {
    jline_t *jl = ud;
    if (memchr(k, 0, n)) return jl->refusal = "a NUL in a member's name", 0;
    if (!bw_utf8_valid(k, n)) return jl->refusal = "a member's name that is not valid UTF-8", 0;
    if (jl->depth != 1) return 1;
    jl->members++;
    jl->member = n == 11 && !memcmp(k, "object_type", 11) ? M_TYPE : n == 2 && !memcmp(k, "id", 2) ? M_ID
               : n == 9 && !memcmp(k, "replay_of", 9) ? M_REPLAY : M_OTHER;
    return 1;
}

static const yajl_callbacks jl_callbacks = {
    .yajl_null = jl_null, .yajl_boolean = jl_bool, .yajl_number = jl_number, .yajl_string = jl_string,
    .yajl_start_map = jl_start_map, .yajl_map_key = jl_key, .yajl_end_map = jl_close,
    .yajl_start_array = jl_start_array, .yajl_end_array = jl_close,
};

static void jline_open(jline_t *jl) {
    jl->h = yajl_alloc(&jl_callbacks, NULL, jl);
    if (!jl->h) abort();
    yajl_config(jl->h, yajl_allow_multiple_values, 1);
}

/* Reads one line: 0 when it is one JSON object or array (its key in *key), else -1 with
 * why in err. */
static int jline_read(jline_t *jl, const char *line, size_t len, uint64_t *key, char *err, size_t esz) {
    yajl_handle h = jl->h;
    *jl = (jline_t){.h = h, .type_hash = FNV_BASIS};
    yajl_status st = yajl_parse(h, (const unsigned char *)line, len);
    if (st == yajl_status_ok) st = yajl_parse(h, (const unsigned char *)" ", 1); /* ends a number at the end */
    if (st == yajl_status_ok && jl->values == 1 && jl->depth == 0) {
        *key = jl->top_map ? op_key(jl->type_hash, jl->id) : 0;
        return 0;
    }
    if (st == yajl_status_error) {
        unsigned char *e = yajl_get_error(h, 0, (const unsigned char *)line, len);
        int n = (int)strcspn((const char *)e, "\n"); /* its first line: the rest repeats the input */
        snprintf(err, esz, "malformed JSON: %.*s", n, (const char *)e);
        yajl_free_error(h, e);
    } else {
        snprintf(err, esz, "malformed JSON: %s",
                 jl->refusal ? jl->refusal : jl->values ? "the line ends inside a value" : "'[' or '{' expected");
    }
    yajl_free(h); /* what it holds of the bad line must not reach the next */
    jline_open(jl);
    return -1;
}

/* ---- submit ----------------------------------------------------------------------------- */

typedef struct {
    size_t batch;
    char job[140];           /* the job's name: --job, or derived from the first request's ops */
    char job_id[33];         /* from the first reply */
    char replay_of[33];      /* the file's {"replay_of": JOB_ID} line (bwctl dead-letters), or "" */
    const char *lane;        /* --lane NAME, or NULL: the default lane */
    const char *not_before;  /* --not-before: a UTC time, or NULL */
    char after[16][33];      /* --after: the job ids it runs after */
    int n_after;
    long next_part;          /* parts below it the proxy has whole already (a resumed run): not sent */
    int retry_s;
    long sent, accepted, rejected, requests, resent, skipped;
    long backlog_waits;      /* 429 answers */
    int64_t backlog_us;      /* time spent waiting them out */
    long held_back;          /* parts that waited for an earlier part on one of their objects */
    long lineno, total_lines;
    int64_t t0;
    size_t n;                /* ops in the batch being filled */
    Bulkwrite__V1__Op **read; /* [batch]: their structs, as read (request_decode.h) */
    bw_arena_t *arena;       /* where they are; the part takes it along */
    bw_arena_t *spare;       /* an op read when the batch is full: it begins the next part */
    bw_buf_t raw;            /* their JSON, comma-separated: each input line as it came */
    bw_json_ops_reader_t *reader; /* reads each line as the proxy would */
    int as_json;             /* the batch has a line the reader refused (jline_t): it goes as JSON */
    json_t *ops;             /* the first part's ops, parsed, while the job's name is to derive */
    long *lines;             /* input line of each op in the batch */
    uint64_t *keys;          /* the key of each op in the batch (op_key; 0: none) */
    int failed;
    /* a part the proxy did not take (an HTTP error after the retries): no later part is
     * sent, so that none overtakes one of its ops; a run of the same command resumes */
    int halted;
    long not_sent; /* ops of the parts not sent for it */
    /* parts after the first go out from `in_flight` sender threads at once, the last one
     * alone once all before it are answered; mu guards the counters above, the queue and
     * the keys in flight */
    int in_flight;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct submit_part *queue; /* [in_flight]: parts handed over, not yet taken by a sender */
    int q_head, q_len, busy, stop; /* q_len + busy <= in_flight */
    /* part 0 is answered: the job's id and a resumed run's next_part are known, so the
     * parts read meanwhile may go (or be skipped); until then only part 0 is taken */
    int job_known;
    keyset_t flying;           /* the keys of the queued and busy parts */
    pthread_t senders[SUBMIT_IN_FLIGHT_MAX];
    int n_senders;
} submit_t;

/* One part, built: its request body, its ops' input lines and keys. */
typedef struct submit_part {
    long part;
    size_t n;
    /* the request: its members and ops, in arena; packed (body, len) by the thread that
     * sends it, so that the reading thread only reads */
    Bulkwrite__V1__BatchWriteRequest *req;
    bw_arena_t *arena;
    char *body;
    size_t len;
    /* the same request in the API's JSON, as bwctl sent parts before 2026-12-08: sent when
     * the protobuf one gets a 409 (a resent part must be the same bytes), i.e. when this
     * run resumes a job an older bwctl began; and sent alone when as_json */
    char *json;
    int as_json;
    long *lines;
    uint64_t *keys;
} submit_part_t;

static bw_arena_t *arena_new(void) {
    bw_arena_t *a = malloc(sizeof(*a));
    if (!a) abort();
    bw_arena_init(a, 1 << 20);
    return a;
}

static void arena_free(bw_arena_t *a) {
    if (!a) return;
    bw_arena_destroy(a);
    free(a);
}

static void part_free(submit_part_t *p) {
    arena_free(p->arena);
    free(p->body);
    free(p->json);
    free(p->lines);
    free(p->keys);
}

/* Its keys leave the flying set: parts held back for them may go. @locks mu MUST be held */
static void keys_release(submit_t *sb, const submit_part_t *p) {
    for (size_t i = 0; p->keys && i < p->n; i++)
        if (p->keys[i]) keyset_del(&sb->flying, p->keys[i]);
}

/* A part's answer (202, 422, 429, 503, 403), from either encoding; NULL when none is
 * readable. Free it with protobuf_c_message_free_unpacked. */
static Bulkwrite__V1__BatchWriteResponse *batch_reply(const bw_buf_t *resp, int json) {
    char err[256];
    if (!resp->len) return NULL;
    if (json)
        return (Bulkwrite__V1__BatchWriteResponse *)bw_protojson_decode(&bulkwrite__v1__batch_write_response__descriptor,
                                                                         resp->data, resp->len, err, sizeof(err));
    return bulkwrite__v1__batch_write_response__unpack(NULL, resp->len, (const uint8_t *)resp->data);
}

static void batch_reply_free(Bulkwrite__V1__BatchWriteResponse *r) {
    if (r) protobuf_c_message_free_unpacked(&r->base, NULL);
}

/* The submit bar: input lines read, ops sent per second; note says why it waits. */
static void submit_progress(const submit_t *sb, const char *note, int final) {
    double secs = (double)(bw_now_us() - sb->t0) / 1e6;
    progress("submit", (double)sb->lineno, (double)(sb->total_lines ? sb->total_lines : sb->lineno),
             secs > 0 ? sb->sent / secs : 0, note, final);
}

/* Why a 429 came, short enough for a progress line: the gist of its first retryable
 * rejection's reason, i.e. the clause before any "(", without a leading "label: "
 * ("not accepted now: shard 3's backlog is full (...)" -> "shard 3's backlog is full"). */
static void backlog_reason(const bw_buf_t *resp, int json, char *out, size_t size) {
    Bulkwrite__V1__BatchWriteResponse *r = batch_reply(resp, json);
    const char *why = "shard backlog full";
    for (size_t i = 0; r && i < r->n_rejected; i++) {
        if (!r->rejected[i]->retryable) continue;
        why = r->rejected[i]->reason;
        break;
    }
    const char *end = why + strcspn(why, "("), *gist = why;
    while (end > why && end[-1] == ' ') end--;
    for (const char *p = why; p + 2 < end; p++)
        if (p[0] == ':' && p[1] == ' ') gist = p + 2;
    snprintf(out, size, "%.*s", (int)(end - gist), gist);
    batch_reply_free(r);
}

/* Waits out a 429 (a shard's backlog is full): Retry-After seconds (1 when absent, at
 * most 30, so a drained backlog is not left idle long), shown on the progress line. */
static void backlog_wait(submit_t *sb, const bw_buf_t *resp, int json, long retry_after_s) {
    long secs = retry_after_s < 1 ? 1 : retry_after_s > 30 ? 30 : retry_after_s;
    char why[100], note[128];
    backlog_reason(resp, json, why, sizeof(why));
    snprintf(note, sizeof(note), "waiting %ld s: %s", secs, why);
    pthread_mutex_lock(&sb->mu);
    submit_progress(sb, note, 0);
    pthread_mutex_unlock(&sb->mu);
    int64_t start = bw_now_us();
    sleep((unsigned)secs);
    pthread_mutex_lock(&sb->mu);
    sb->backlog_waits++;
    sb->backlog_us += bw_now_us() - start;
    pthread_mutex_unlock(&sb->mu);
}

/* Sends one request, always as it was, until it has a final answer; returns its status
 * (-1: no answer). A 429 is resent after Retry-After for as long as it takes: the backlog
 * drains as the consumers apply, and that time does not count against --retry-for, which
 * bounds outages (no answer, 5xx). The request_id makes every resend apply once. */
static long post_batch(submit_t *sb, const submit_part_t *p, int json, bw_buf_t *resp) {
    int64_t deadline = bw_now_us() + (int64_t)sb->retry_s * 1000000;
    for (;;) {
        int64_t start = bw_now_us();
        long retry_after_s, status =
            json ? http_body("POST", "/v1/batches", "application/json", p->json, strlen(p->json), resp, &retry_after_s)
                 : http_body("POST", "/v1/batches", "application/x-protobuf", p->body, p->len, resp, &retry_after_s);
        if (status == 429) {
            backlog_wait(sb, resp, json, retry_after_s);
            deadline += bw_now_us() - start;
        } else if ((status < 0 || status >= 500) && bw_now_us() < deadline) {
            pthread_mutex_lock(&sb->mu);
            sb->resent++;
            pthread_mutex_unlock(&sb->mu);
            sleep(1);
        } else {
            return status;
        }
    }
}

static json_t *get_job(const char *id, char *err, size_t esz, long *status);

/* The parts job_id already has whole, asked once the job's id is known: a resumed run
 * goes on from there. */
static long resume_point(const char *job_id) {
    char err[512];
    long status;
    json_t *j = get_job(job_id, err, sizeof(err), &status);
    if (!j) return 0;
    long next_part = jint(j, "next_part");
    json_decref(j);
    return next_part;
}

/* Sends a built part until it has a final answer, and counts what the proxy said (any
 * thread). The first answer names the job: its id is printed, and the parts the proxy
 * already holds are asked for (part 0's answer is the first: no other part is taken
 * before it, job_known). Once answered, the part's keys leave the flying set: parts held back for them may go. */
static void send_part(submit_t *sb, submit_part_t *p) {
    bw_buf_t resp;
    bw_buf_init(&resp);
    int json = p->as_json;
    if (!json) {
        p->len = bulkwrite__v1__batch_write_request__get_packed_size(p->req);
        if (!(p->body = malloc(p->len))) abort();
        bulkwrite__v1__batch_write_request__pack(p->req, (uint8_t *)p->body);
    }
    long status = post_batch(sb, p, json, &resp);
    if (status == 409 && !json) status = post_batch(sb, p, json = 1, &resp); /* begun by an older bwctl? */
    Bulkwrite__V1__BatchWriteResponse *r = status == 202 || status == 422 ? batch_reply(&resp, json) : NULL;
    /* only part 0 can give the first answer (job_known), so only its thread names the job
     * and asks where it goes on (without the lock: the reading goes on meanwhile) */
    int names_job = p->part == 0 && r && r->job_id && r->job_id[0];
    long next_part = 0;
    if (names_job) {
        pthread_mutex_lock(&sb->mu);
        snprintf(sb->job_id, sizeof(sb->job_id), "%s", r->job_id);
        printf("%s\n", sb->job_id);
        fflush(stdout); /* known at once: a submit killed half-way has printed its job */
        pthread_mutex_unlock(&sb->mu);
        next_part = resume_point(r->job_id);
    }
    pthread_mutex_lock(&sb->mu);
    sb->sent += (long)p->n;
    if (r) {
        long acc = (long)r->accepted;
        sb->accepted += acc;
        if (names_job) sb->next_part = next_part;
        for (size_t i = 0; i < r->n_rejected; i++) {
            size_t idx = r->rejected[i]->index;
            fprintf(stderr, "line %ld: %s\n", idx < p->n ? p->lines[idx] : -1L, r->rejected[i]->reason);
            sb->rejected++;
        }
        if (acc < (long)p->n) sb->failed = 1;
    } else {
        char e[512];
        /* a 403 or 503 answers a BatchWriteResponse too: its ops' reasons */
        Bulkwrite__V1__BatchWriteResponse *x = status == 403 || status == 503 ? batch_reply(&resp, json) : NULL;
        if (x && x->n_rejected)
            snprintf(e, sizeof(e), "%s (the first of %zu reasons)", x->rejected[0]->reason, x->n_rejected);
        else if (status == 202 || status == 422) snprintf(e, sizeof(e), "an answer that is no BatchWriteResponse");
        else error_text(&resp, e, sizeof(e));
        batch_reply_free(x);
        fprintf(stderr, "bwctl: lines %ld-%ld (part %ld) not accepted: HTTP %ld: %s\n", p->lines[0],
                p->lines[p->n - 1], p->part, status, e);
        sb->rejected += (long)p->n;
        sb->failed = 1;
        sb->halted = 1;
    }
    keys_release(sb, p);
    if (p->part == 0) sb->job_known = 1; /* whatever its answer: a halt drops the rest */
    pthread_mutex_unlock(&sb->mu);
    batch_reply_free(r);
    bw_buf_free(&resp);
    part_free(p);
}

/* With mu held: 1 when parts are no longer sent (halted), p dropped and counted. */
static int dropped(submit_t *sb, submit_part_t *p) {
    if (!sb->halted) return 0;
    sb->not_sent += (long)p->n;
    part_free(p);
    return 1;
}

/* A sender thread: parts from the queue, each sent to its final answer. */
static void *sender(void *arg) {
    submit_t *sb = arg;
    pthread_mutex_lock(&sb->mu);
    for (;;) {
        while (!sb->stop && !(sb->q_len && (sb->job_known || sb->queue[sb->q_head].part == 0)))
            pthread_cond_wait(&sb->cv, &sb->mu);
        if (!sb->q_len) break;
        submit_part_t p = sb->queue[sb->q_head];
        sb->q_head = (sb->q_head + 1) % sb->in_flight;
        sb->q_len--;
        /* read before part 0's answer said the proxy holds it whole: not sent */
        int skip = p.part && p.part < sb->next_part;
        if (skip || sb->halted) {
            keys_release(sb, &p);
            if (!dropped(sb, &p)) {
                sb->skipped++;
                sb->accepted += (long)p.n; /* taken by an earlier run */
                part_free(&p);
            }
            pthread_cond_broadcast(&sb->cv);
            continue;
        }
        sb->busy++;
        pthread_mutex_unlock(&sb->mu);
        send_part(sb, &p);
        pthread_mutex_lock(&sb->mu);
        sb->busy--;
        pthread_cond_broadcast(&sb->cv); /* room in flight, keys freed */
    }
    pthread_mutex_unlock(&sb->mu);
    return NULL;
}

/* Waits until every part handed over is answered. @locks mu MUST be held */
static void drain_parts(submit_t *sb) {
    while (sb->q_len || sb->busy) pthread_cond_wait(&sb->cv, &sb->mu);
}

/* The first of p's keys that a part in flight holds, from *from on (*from moves to it),
 * or 0 when none does. @locks mu MUST be held */
static uint64_t shared_key(submit_t *sb, const submit_part_t *p, size_t *from) {
    for (; *from < p->n; (*from)++)
        if (p->keys[*from] && keyset_has(&sb->flying, p->keys[*from])) return p->keys[*from];
    return 0;
}

/* Hands a part to the senders (started with the first) once fewer than in_flight parts
 * are in flight and none of them has an object of this part: until then it is held back
 * (keys are checked from the first one held, as keys only ever leave the set meanwhile). */
static void queue_part(submit_t *sb, submit_part_t *p) {
    pthread_mutex_lock(&sb->mu);
    while (sb->n_senders < sb->in_flight &&
           pthread_create(&sb->senders[sb->n_senders], NULL, sender, sb) == 0)
        sb->n_senders++;
    if (!sb->n_senders) { /* no thread: sent here, alone */
        drain_parts(sb);
        if (dropped(sb, p)) return (void)pthread_mutex_unlock(&sb->mu);
        pthread_mutex_unlock(&sb->mu);
        free(p->keys);
        p->keys = NULL;
        send_part(sb, p);
        return;
    }
    size_t from = 0;
    int held = 0;
    for (;;) {
        if (dropped(sb, p)) return (void)pthread_mutex_unlock(&sb->mu);
        if (sb->q_len + sb->busy == sb->in_flight) pthread_cond_wait(&sb->cv, &sb->mu);
        else if (shared_key(sb, p, &from)) held = 1, pthread_cond_wait(&sb->cv, &sb->mu);
        else break;
    }
    sb->held_back += held;
    for (size_t i = 0; i < p->n; i++)
        if (p->keys[i]) keyset_add(&sb->flying, p->keys[i]);
    sb->queue[(sb->q_head + sb->q_len) % sb->in_flight] = *p;
    sb->q_len++;
    pthread_cond_broadcast(&sb->cv);
    pthread_mutex_unlock(&sb->mu);
}

/* Every part answered, the senders gone. */
static void stop_senders(submit_t *sb) {
    pthread_mutex_lock(&sb->mu);
    drain_parts(sb);
    sb->stop = 1;
    pthread_cond_broadcast(&sb->cv);
    pthread_mutex_unlock(&sb->mu);
    for (int i = 0; i < sb->n_senders; i++) pthread_join(sb->senders[i], NULL);
    sb->n_senders = 0;
}

/* The job's name when --job gave none: resumable, as the same file gives the same name
 * (and each part the same body); a replay's job, a scheduled or dependent job and a job
 * in another lane each differ from the same ops sent otherwise. It hashes the file's
 * first SUBMIT_NAME_OPS ops (fewer when the first part is smaller), not the first part:
 * the part size's default changed (1,000, then 5,000), and a job an older bwctl began
 * must keep its name, or a resumed run would send every op again as another job. */
static void derive_job_name(submit_t *sb) {
    char *ops = json_dumps(sb->ops, JSON_COMPACT);
    unsigned char d[SHA256_DIGEST_LENGTH];
    bw_buf_t named;
    bw_buf_init(&named);
    bw_buf_printf(&named, "%s%s", sb->replay_of, sb->not_before ? sb->not_before : "");
    for (int i = 0; i < sb->n_after; i++) bw_buf_printf(&named, "%s", sb->after[i]);
    if (sb->lane) bw_buf_printf(&named, "lane=%s;", sb->lane); /* nothing without: older names stay */
    bw_buf_printf(&named, "%s", ops);
    SHA256((const unsigned char *)named.data, named.len, d);
    bw_buf_free(&named);
    free(ops);
    int k = snprintf(sb->job, sizeof(sb->job), "bwctl-");
    for (int i = 0; i < 12; i++) k += snprintf(sb->job + k, sizeof(sb->job) - (size_t)k, "%02x", d[i]);
}

/* Reads one op's JSON text as the proxy would, into a (*op, and its key): 0, or -1 with
 * why in err. A text the proxy would refuse is refused here alone, not with its whole
 * part; so is an op its JSON decoder would let through only to reject
 * (bw_json_op_fault: a value protobuf cannot carry). */
static int read_op(submit_t *sb, bw_arena_t *a, const char *text, size_t len, Bulkwrite__V1__Op **op, uint64_t *key,
                   char *err, size_t esz) {
    if (!(*op = bw_json_op_read(sb->reader, a, text, len, err, esz))) return -1;
    if (bw_json_op_fault(*op)) return snprintf(err, esz, "%s", bw_json_op_fault(*op)), -1;
    *key = op_key_of(*op);
    return 0;
}

/* A string as JSON text, appended. */
static void append_json_string(bw_buf_t *b, const char *s) {
    json_t *v = json_string(s);
    char *text = json_dumps(v, JSON_ENCODE_ANY);
    if (!text) abort();
    bw_buf_puts(b, text);
    free(text);
    json_decref(v);
}

/* Sends the batch as part `requests` of the job (the last one when `last`). A part below
 * the job's next_part is not sent: the proxy has all of it. Part 0 goes first and alone
 * (its answer names the job and where a resumed run goes on) while the next parts are
 * read and queued; then the middle ones several at once (queue_part: none with an object
 * of a part still in flight; one read before part 0's answer and below next_part is
 * skipped when taken), the last one once every other part is answered, so that it seals
 * a job whose parts are all in. */
static int flush_batch(submit_t *sb, int last) {
    size_t n = sb->n;
    if (!n) return 0;
    sb->n = 0;
    int as_json = sb->as_json;
    sb->as_json = 0;
    long part = sb->requests++;
    if (!sb->job[0]) derive_job_name(sb);
    pthread_mutex_lock(&sb->mu);
    int skip = part && part < sb->next_part;
    if (skip) {
        sb->skipped++;
        sb->accepted += (long)n; /* taken by an earlier run */
    }
    pthread_mutex_unlock(&sb->mu);
    json_array_clear(sb->ops);
    bw_arena_t *arena = sb->arena; /* the part's; an op read past it is in the spare */
    sb->arena = sb->spare ? sb->spare : arena_new();
    sb->spare = NULL;
    if (skip) {
        bw_buf_reset(&sb->raw);
        bw_arena_reset(arena);
        sb->spare = arena;
        return 0;
    }
    /* the JSON form: the ops as they came, not parsed and printed again, so that the same
     * file gives the same bodies */
    bw_buf_t body;
    bw_buf_init(&body);
    bw_buf_reserve(&body, sb->raw.len + 512);
    bw_buf_puts(&body, "{\"job\":");
    append_json_string(&body, sb->job);
    bw_buf_printf(&body, ",\"job_part\":%ld,\"job_last\":%s", part, last ? "true" : "false");
    if (sb->lane) {
        bw_buf_puts(&body, ",\"lane\":");
        append_json_string(&body, sb->lane);
    }
    if (sb->replay_of[0]) bw_buf_printf(&body, ",\"replay_of\":\"%s\"", sb->replay_of);         /* 32 hex digits */
    if (sb->not_before) bw_buf_printf(&body, ",\"not_before\":\"%s\"", sb->not_before);      /* checked: a UTC time */
    for (int i = 0; i < sb->n_after; i++) bw_buf_printf(&body, "%s\"%s\"", i ? "," : ",\"after\":[", sb->after[i]);
    bw_buf_puts(&body, sb->n_after ? "],\"ops\":[" : ",\"ops\":[");
    submit_part_t p = {.part = part, .n = n, .arena = arena, .as_json = as_json,
                       .lines = malloc(n * sizeof(long)), .keys = malloc(n * sizeof(uint64_t))};
    /* the protobuf form, sent: these members as the proxy's JSON decoder reads them (one
     * mapping of names and times), and the ops as read */
    bw_buf_puts(&body, "]}");
    char err[512];
    p.req = bw_request_decode(BW_FMT_JSON, body.data, body.len, arena, err, sizeof(err));
    if (!p.req) fprintf(stderr, "bwctl: a request of its own making refused: %s\n", err), abort();
    p.req->ops = bw_arena_alloc(arena, n * sizeof(*p.req->ops));
    memcpy(p.req->ops, sb->read, n * sizeof(*p.req->ops));
    p.req->n_ops = n;
    body.len -= 2; /* "]}" */
    bw_buf_append(&body, sb->raw.data ? sb->raw.data : "", sb->raw.len); /* not through printf: 200 KB */
    bw_buf_puts(&body, "]}");
    bw_buf_reset(&sb->raw);
    p.json = body.data;
    if (!p.json || !p.lines || !p.keys) abort();
    memcpy(p.lines, sb->lines, n * sizeof(long));
    memcpy(p.keys, sb->keys, n * sizeof(uint64_t));
    if (last || sb->in_flight < 2) {
        pthread_mutex_lock(&sb->mu);
        drain_parts(sb);
        /* read before part 0's answer: the proxy may hold it whole */
        int held = part && part < sb->next_part && !sb->halted;
        if (held) {
            sb->skipped++;
            sb->accepted += (long)n; /* taken by an earlier run */
        }
        int gone = held || dropped(sb, &p);
        pthread_mutex_unlock(&sb->mu);
        if (held) part_free(&p);
        if (gone) return 0;
        free(p.keys); /* alone in flight: nothing to hold back */
        p.keys = NULL;
        send_part(sb, &p);
    } else {
        queue_part(sb, &p);
    }
    return 0;
}

/* Splits one CSV record (RFC 4180 quoting) in place; fields point into line. */
static int csv_split(char *line, char **fields, int max) {
    int n = 0;
    char *p = line;
    for (;;) {
        if (n == max) return -1;
        char *out = p;
        fields[n++] = p;
        if (*p == '"') {
            p++;
            for (;;) {
                if (!*p) return -1; /* unterminated quote */
                if (*p == '"' && p[1] == '"') { *out++ = '"'; p += 2; }
                else if (*p == '"') { p++; break; }
                else *out++ = *p++;
            }
            if (*p && *p != ',') return -1;
        } else {
            while (*p && *p != ',') *out++ = *p++;
        }
        int more = *p == ',';
        if (*p) p++;
        *out = '\0';
        if (!more) return n;
    }
}

/* One CSV row as an op in the API's JSON: columns op, object_type, id, shard_key, then
 * fields by name ("name+=" for an increment); an empty cell leaves the field out, \N is
 * null; values are typed by the configuration's column types. */
static json_t *csv_op(char **hdr, int nh, char **cell, int nc, char *err, size_t esz) {
    if (nc != nh) return snprintf(err, esz, "%d cells, the header has %d", nc, nh), NULL;
    json_t *op = json_object(), *fields = json_object();
    const bw_object_type_t *ot = NULL;
    for (int i = 0; i < nh; i++)
        if (strcmp(hdr[i], "object_type") == 0) ot = bw_config_object_type(conf, cell[i]);
    for (int i = 0; i < nh; i++) {
        const char *h = hdr[i], *v = cell[i];
        /* jansson refuses text that is not UTF-8, and a NULL value would leave the cell out */
        if (*v && !bw_utf8_valid((const unsigned char *)v, strlen(v))) {
            snprintf(err, esz, "column %s: not UTF-8 text (a bytes column takes base64)", h);
            json_decref(op);
            json_decref(fields);
            return NULL;
        }
        if (strcmp(h, "op") == 0 || strcmp(h, "object_type") == 0 || strcmp(h, "shard_key") == 0 ||
            strcmp(h, "id") == 0) {
            if (*v) json_object_set_new(op, h, json_string(v));
            continue;
        }
        if (!*v) continue;
        char name[128];
        size_t hl = strlen(h);
        int inc = hl > 2 && strcmp(h + hl - 2, "+=") == 0;
        snprintf(name, sizeof(name), "%.*s", (int)(inc ? hl - 2 : hl), h);
        int col = ot ? bw_config_column(ot, name) : -1;
        json_t *jv;
        if (strcmp(v, "\\N") == 0) jv = json_null();
        else if (col < 0) jv = json_string(v); /* the proxy names the unknown column */
        else {
            char *end;
            errno = 0;
            switch (ot->columns[col].type) {
            case BW_COL_INT: {
                long long x = strtoll(v, &end, 10);
                if (*end || errno) goto bad;
                jv = json_integer(x);
                break;
            }
            case BW_COL_DOUBLE: {
                double x = strtod(v, &end);
                if (*end || errno) goto bad;
                jv = json_real(x);
                break;
            }
            case BW_COL_BOOL:
                if (strcmp(v, "true") && strcmp(v, "false")) goto bad;
                jv = json_boolean(strcmp(v, "true") == 0);
                break;
            case BW_COL_BYTES: jv = json_pack("{s:s}", "base64", v); break;
            default: jv = json_string(v);
            }
        }
        if (inc) jv = json_pack("{s:o}", "increment", jv);
        json_object_set_new(fields, name, jv);
        continue;
    bad:
        snprintf(err, esz, "column %s: \"%s\" is not of its type (%s)", name, v,
                 bw_col_type_name(ot->columns[col].type));
        json_decref(op);
        json_decref(fields);
        return NULL;
    }
    if (json_object_size(fields)) json_object_set(op, "fields", fields);
    json_decref(fields);
    return op;
}

/* The file's lines, for the bar's total (a last line without its newline counts). */
static long count_lines(FILE *f) {
    static char chunk[1 << 16];
    long n = 0;
    size_t got;
    char last = '\n';
    while ((got = fread(chunk, 1, sizeof(chunk), f)) > 0) {
        for (const char *p = chunk, *end = chunk + got; (p = memchr(p, '\n', (size_t)(end - p))); p++) n++;
        last = chunk[got - 1];
    }
    if (last != '\n') n++;
    rewind(f);
    return n;
}

static const struct option submit_opts[] = {{"format", required_argument, 0, 'f'}, {"batch", required_argument, 0, 'n'},
                                            {"job", required_argument, 0, 'j'}, {"retry-for", required_argument, 0, 'R'},
                                            {"not-before", required_argument, 0, 'T'}, {"after", required_argument, 0, 'A'},
                                            {"in-flight", required_argument, 0, 'P'}, {"lane", required_argument, 0, 'L'},
                                            {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
#define SUBMIT_SHORT "f:n:j:R:T:A:P:L:h"

static int cmd_submit(int argc, char **argv) {
    static const char help[] =
        "usage: bwctl submit [--format jsonl|csv] [--batch N] [--job NAME] [--lane NAME] [--retry-for S]\n"
        "                    [--not-before YYYY-MM-DDTHH:MM:SSZ] [--after JOB_ID]... [--in-flight K] FILE|-\n"
        "Sends the ops in FILE to the proxy as one job, in requests (its parts) of N ops (5000\n"
        "by default; 1000 with --not-before or --after, as such a part is held whole in one\n"
        "Kafka record), printing the job's id on stdout once it is known and each rejected op\n"
        "(with its input line) on stderr; the last part seals the job. Up to K parts (1 to 16,\n"
        "default 8) are on their way at once after the first, the last once all others are in;\n"
        "a part with an object (object type and id) of a part still on its way waits until that\n"
        "part is answered, so ops on one object apply in the file's order. --in-flight 1 sends\n"
        "one part at a time. --lane NAME sends the job in that priority lane (config lanes).\n"
        "  jsonl: one op per line in the API's JSON encoding, e.g.\n"
        "         {\"op\":\"delete\",\"object_type\":\"pin\",\"id\":68719476737}\n"
        "  csv:   a header of op,object_type,id,shard_key and column names (name+= increments);\n"
        "         an empty cell leaves a field out, \\N is null; cells are UTF-8 (bytes: base64),\n"
        "         a line with a cell that is not is refused and named, the others still sent\n"
        "A first line {\"replay_of\": JOB_ID} (bwctl dead-letters writes it) links the job to\n"
        "the one whose failed ops it sends again.\n"
        "--not-before T holds the job's ops until T (UTC; e.g. $(date -ud tomorrow\\ 02:00 +%FT%TZ));\n"
        "--after JOB_ID (up to 16) holds them, on each shard, until that job is finished there;\n"
        "a job cancelled there cancels this one. Give the same T again when resuming.\n"
        "The job is named by --job, or by the sha256 of its first 1,000 ops (bwctl-<hex>):\n"
        "running the same command again after a crash or a kill resumes the job, sending only\n"
        "the parts the proxy does not hold whole, and no op applies twice. To apply the same\n"
        "file again as new work, give it a new --job name.\n"
        "A request that gets no answer\n"
        "or a 5xx is resent for up to S seconds (default 60) and still applies once. A 429 (a\n"
        "shard's backlog is full) is resent after its Retry-After until it is taken, however\n"
        "long that is (not counted against S); the progress line shows the wait.\n"
        "Exit: 0 every op accepted; 1 some were not; 2 usage.\n";
    /* parts in flight together share no object (queue_part), so the file's order holds */
    submit_t sb = {.retry_s = 60, .in_flight = SUBMIT_IN_FLIGHT_DEFAULT};
    long batch = 0; /* --batch; 0: the default, known once the options are */
    int64_t secs;
    const char *format = NULL;
    optind = 0; /* 0: glibc re-initialises getopt (main parsed in "+" mode) */
    for (int o; (o = getopt_long(argc, argv, SUBMIT_SHORT, submit_opts, NULL)) != -1;) {
        if (o == 'f') format = optarg;
        else if (o == 'T' && bw_utc_time_parse(optarg, &secs))
            return fprintf(stderr, "bwctl: --not-before: a UTC time YYYY-MM-DDTHH:MM:SSZ, not \"%s\"\n", optarg), 2;
        else if (o == 'T') sb.not_before = optarg;
        else if (o == 'A' && (strlen(optarg) != 32 || strspn(optarg, "0123456789abcdef") != 32))
            return fprintf(stderr, "bwctl: --after: a job id (32 hex digits), not \"%s\"\n", optarg), 2;
        else if (o == 'A' && sb.n_after == 16) return fprintf(stderr, "bwctl: --after: at most 16 jobs\n"), 2;
        else if (o == 'A') snprintf(sb.after[sb.n_after++], 33, "%s", optarg);
        else if (o == 'n' && atol(optarg) < 1) return fprintf(stderr, "bwctl: --batch: at least 1 op\n"), 2;
        else if (o == 'n') batch = atol(optarg);
        else if (o == 'j') {
            if (!optarg[0] || strlen(optarg) > 128) return fprintf(stderr, "bwctl: --job: 1 to 128 bytes\n"), 2;
            snprintf(sb.job, sizeof(sb.job), "%s", optarg);
        }
        else if (o == 'R') sb.retry_s = atoi(optarg);
        else if (o == 'P' && (atoi(optarg) < 1 || atoi(optarg) > SUBMIT_IN_FLIGHT_MAX))
            return fprintf(stderr, "bwctl: --in-flight: 1 to %d parts\n", SUBMIT_IN_FLIGHT_MAX), 2;
        else if (o == 'P') sb.in_flight = atoi(optarg);
        else if (o == 'L' && (!optarg[0] || strlen(optarg) > 64))
            return fprintf(stderr, "bwctl: --lane: a lane's name, 1 to 64 bytes\n"), 2;
        else if (o == 'L') sb.lane = optarg;
        else return fputs(help, o == 'h' ? stdout : stderr), o == 'h' ? 0 : 2;
    }
    if (optind != argc - 1) return fputs(help, stderr), 2;
    sb.batch = batch ? (size_t)batch : sb.not_before || sb.n_after ? SUBMIT_BATCH_HELD : SUBMIT_BATCH_DEFAULT;
    const char *path = argv[optind];
    if (!format) {
        size_t l = strlen(path);
        format = l > 4 && strcmp(path + l - 4, ".csv") == 0 ? "csv" : "jsonl";
    }
    int csv = strcmp(format, "csv") == 0;
    if (!csv && strcmp(format, "jsonl")) return fprintf(stderr, "bwctl: unknown format %s (jsonl or csv)\n", format), 2;
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    if (!f) return fprintf(stderr, "bwctl: %s: %s\n", path, strerror(errno)), 1;
    sb.total_lines = f == stdin ? 0 : count_lines(f);
    sb.ops = json_array();
    bw_buf_init(&sb.raw);
    sb.lines = calloc(sb.batch, sizeof(long));
    sb.keys = calloc(sb.batch, sizeof(uint64_t));
    sb.queue = calloc((size_t)sb.in_flight, sizeof(*sb.queue));
    sb.read = calloc(sb.batch, sizeof(*sb.read));
    if (!sb.lines || !sb.keys || !sb.queue || !sb.read) abort();
    keyset_init(&sb.flying, sb.in_flight < 2 ? 0 : (size_t)sb.in_flight * sb.batch); /* 1: never used */
    sb.reader = bw_json_ops_reader_new();
    sb.arena = arena_new();
    pthread_mutex_init(&sb.mu, NULL);
    pthread_cond_init(&sb.cv, NULL);
    char *line = NULL, *hdr_line = NULL;
    size_t cap = 0;
    ssize_t len;
    long bad = 0;
    char *hdr[256], *cell[256];
    jline_t jl;
    jline_open(&jl);
    int nh = 0;
    sb.t0 = bw_now_us();
    while ((len = getline(&line, &cap, f)) >= 0) {
        pthread_mutex_lock(&sb.mu); /* the senders read it for their progress lines */
        long lineno = ++sb.lineno;
        pthread_mutex_unlock(&sb.mu);
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = '\0';
        if (!len) continue;
        char err[512] = "";
        json_t *op = NULL; /* parsed: a CSV row, or a JSON line while the job's name is to derive */
        uint64_t key = 0;
        if (csv && !nh) {
            hdr_line = strdup(line);
            if ((nh = csv_split(hdr_line, hdr, 256)) < 1) return fprintf(stderr, "bwctl: %s:1: bad CSV header\n", path), 1;
            continue;
        }
        int ok;
        char *text = line; /* the op's JSON: the line, or a CSV row's */
        size_t text_len = (size_t)len;
        if (csv) {
            int nc = csv_split(line, cell, 256);
            if (nc < 0) snprintf(err, sizeof(err), "malformed CSV");
            else op = csv_op(hdr, nh, cell, nc, err, sizeof(err));
            if ((ok = op != NULL)) {
                if (!(text = json_dumps(op, JSON_COMPACT))) abort();
                text_len = strlen(text);
            }
        } else {
            ok = 1;
        }
        Bulkwrite__V1__Op *read = NULL;
        int as_json = 0; /* a line the op reader refuses that bwctl sent before: its part goes as JSON */
        if (ok) {
            if (sb.n == sb.batch && !sb.spare) sb.spare = arena_new();
            char why[512];
            if (read_op(&sb, sb.n == sb.batch ? sb.spare : sb.arena, text, text_len, &read, &key, err, sizeof(err)) &&
                !(as_json = jline_read(&jl, text, text_len, &key, why, sizeof(why)) == 0))
                ok = 0; /* err: the reader's, which says more */
        }
        if (as_json && !csv && jl.replay_seen && jl.members == 1) {
            /* a dead-letters file's first line: the job it replays */
            if (sb.requests || sb.n || sb.replay_of[0] || strspn(jl.replay_of, "0123456789abcdef") != 32) {
                fprintf(stderr, "line %ld: {\"replay_of\": JOB_ID} is a file's first line, once, with a job id\n", lineno);
                bad++;
            } else {
                snprintf(sb.replay_of, sizeof(sb.replay_of), "%s", jl.replay_of);
            }
            continue;
        }
        if (ok && !csv && !sb.job[0] && json_array_size(sb.ops) < SUBMIT_NAME_OPS) {
            json_error_t je; /* a text value may hold NUL (\u0000) */
            if (!(ok = (op = json_loadb(line, (size_t)len, JSON_ALLOW_NUL, &je)) != NULL))
                snprintf(err, sizeof(err), "malformed JSON: %s", je.text);
        }
        if (!ok) {
            fprintf(stderr, "line %ld: %s\n", lineno, err);
            bad++;
            json_decref(op);
            if (text != line) free(text);
            continue;
        }
        /* a full batch goes once the next op shows it is not the last */
        if (sb.n == sb.batch) flush_batch(&sb, 0);
        sb.as_json |= as_json;
        sb.lines[sb.n] = lineno;
        sb.read[sb.n] = read;
        sb.keys[sb.n++] = key;
        if (sb.n > 1) bw_buf_puts(&sb.raw, ",");
        bw_buf_append(&sb.raw, text, text_len);
        if (text != line) free(text);
        if (op && !sb.job[0] && json_array_size(sb.ops) < SUBMIT_NAME_OPS)
            json_array_append_new(sb.ops, op); /* the job's name derives from them */
        else json_decref(op);
        pthread_mutex_lock(&sb.mu);
        submit_progress(&sb, NULL, 0);
        pthread_mutex_unlock(&sb.mu);
    }
    flush_batch(&sb, 1);
    stop_senders(&sb);
    submit_progress(&sb, NULL, 1);
    if (sb.not_sent)
        fprintf(stderr, "bwctl: %ld ops of the parts after the one not taken were not sent, so that none overtakes "
                        "one of its ops: run the same command again to resume\n", sb.not_sent);
    if (!sb.requests) fprintf(stderr, "bwctl: %s has no ops: no job\n", path), sb.failed = 1;
    else
        fprintf(stderr, "submit: job %s (\"%s\"): %ld parts, %ld ops sent, %ld accepted, %ld rejected, %ld unreadable "
                        "lines, %ld parts held before (not sent), %ld resent requests, %ld backlog waits (%.1f s), "
                        "%ld parts held back for an object in flight\n",
                sb.job_id[0] ? sb.job_id : "(not known)", sb.job, sb.requests, sb.sent, sb.accepted, sb.rejected, bad,
                sb.skipped, sb.resent, sb.backlog_waits, (double)sb.backlog_us / 1e6, sb.held_back);
    free(line);
    free(hdr_line);
    free(sb.lines);
    free(sb.keys);
    free(sb.queue);
    free(sb.flying.slot);
    bw_json_ops_reader_free(sb.reader);
    yajl_free(jl.h);
    arena_free(sb.arena);
    arena_free(sb.spare);
    free(sb.read);
    bw_buf_free(&sb.raw);
    pthread_mutex_destroy(&sb.mu);
    pthread_cond_destroy(&sb.cv);
    json_decref(sb.ops);
    if (f != stdin) fclose(f);
    return sb.failed || bad ? 1 : 0;
}

/* ---- jobs ------------------------------------------------------------------------------- */

static json_t *get_job(const char *id, char *err, size_t esz, long *status) {
    char path[128];
    snprintf(path, sizeof(path), "/v1/jobs/%s", id);
    bw_buf_t resp;
    bw_buf_init(&resp);
    *status = http("GET", path, NULL, &resp, NULL);
    json_t *j = *status == 200 ? json_loadb(resp.data, resp.len, 0, NULL) : NULL;
    if (!j) error_text(&resp, err, esz);
    bw_buf_free(&resp);
    return j;
}

/* What holds the job's pending ops back, from its shards' "waits" ({"for": …, "detail":
 * "shard 3 paused by alice: reindex"}, on a shard only while it holds them): a line per
 * distinct detail with its count of shards, the most shards first, at most WAITS_LINES,
 * then how many shards wait otherwise; "" when none waits. */
#define WAITS_LINES 3
typedef struct {
    const char *detail;
    long shards;
} wait_line_t;

static void waits_text(json_t *job, bw_buf_t *out) {
    wait_line_t seen[64];
    int n = 0;
    long other = 0; /* shards past the 64 distinct details kept */
    size_t i;
    json_t *s;
    bw_buf_reset(out);
    json_array_foreach(json_object_get(job, "shards"), i, s) {
        json_t *w = json_object_get(s, "waits");
        if (!json_is_object(w)) continue;
        const char *d = jstr(w, "detail")[0] ? jstr(w, "detail") : jstr(w, "for");
        int k = 0;
        while (k < n && strcmp(seen[k].detail, d)) k++;
        if (k < n) seen[k].shards++;
        else if (n < 64) seen[n++] = (wait_line_t){d, 1};
        else other++;
    }
    for (int line = 0; line < n; line++) {
        int top = line; /* the next most shards, ties in the order the shards came */
        for (int k = line + 1; k < n; k++)
            if (seen[k].shards > seen[top].shards) top = k;
        wait_line_t t = seen[top];
        memmove(&seen[line + 1], &seen[line], (size_t)(top - line) * sizeof(seen[0]));
        seen[line] = t;
        if (line < WAITS_LINES)
            bw_buf_printf(out, "  %ld shard%s waiting: %s\n", t.shards, t.shards == 1 ? "" : "s", t.detail);
        else other += t.shards;
    }
    if (other) bw_buf_printf(out, "  %ld more shard%s waiting for other reasons\n", other, other == 1 ? "" : "s");
}

static const struct option help_opts[] = {{"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};

/* A command's options after main checked them (split_options): 1 when --help was among
 * them (then its help is printed), and optind at its first operand. For the commands whose
 * only option is --help. */
static int asked_help(int argc, char **argv, const char *help) {
    optind = 0; /* 0: glibc re-initialises getopt */
    int h = 0;
    while (getopt_long(argc, argv, "h", help_opts, NULL) != -1) h = 1;
    if (h) fputs(help, stdout);
    return h;
}

/* "a JOB_ID is required" or "unexpected argument", when argv[optind..] is not one operand */
static int one_operand(int argc, char **argv, const char *what) {
    if (optind == argc) return bw_cli_usage_error(who, "%s is required", what);
    if (optind < argc - 1) return bw_cli_usage_error(who, "unexpected argument \"%s\"", argv[optind + 1]);
    return 0;
}

static int cmd_job(int argc, char **argv) {
    if (asked_help(argc, argv, "usage: bwctl job JOB_ID\nPrints the job's status as JSON (GET /v1/jobs/JOB_ID).\n"))
        return 0;
    if (one_operand(argc, argv, "a JOB_ID")) return 2;
    argv += optind - 1; /* the job id is argv[1] */
    char err[512];
    long status;
    json_t *j = get_job(argv[1], err, sizeof(err), &status);
    if (!j) return fprintf(stderr, "bwctl: %s\n", err), 1;
    char *s = json_dumps(j, JSON_INDENT(2));
    puts(s);
    free(s);
    bw_buf_t waits; /* stdout is the status as it came; what holds it back, readable, on stderr */
    bw_buf_init(&waits);
    waits_text(j, &waits);
    if (waits.len) fprintf(stderr, "job %s (lane %s) is held back:\n%s", argv[1], jstr(j, "lane"), waits.data);
    bw_buf_free(&waits);
    json_decref(j);
    return 0;
}



static const struct option watch_opts[] = {{"interval", required_argument, 0, 'i'}, {"timeout", required_argument, 0, 't'},
                                           {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
#define WATCH_SHORT "i:t:h"

static int cmd_watch(int argc, char **argv) {
    static const char help[] =
        "usage: bwctl watch [--interval S] [--timeout S] JOB_ID\n"
        "Follows the job until nothing is pending: a progress bar with rate and ETA on stderr,\n"
        "then the counts and a sample of failed ops; a scheduled or dependent job's line says\n"
        "what its held ops wait for, and while shards hold the job's ops back (paused,\n"
        "throttled, a full backlog, …) a line per reason says so, with its count of shards.\n"
        "A named job (bwctl submit) is finished once sealed (its last part sent) and applied.\n"
        "Exit: 0 finished, nothing failed; 1 finished with failed or cancelled ops (or the job\n"
        "is unknown);\n"
        "3 not finished within the timeout (default: none).\n";
    double interval = 1;
    int timeout = 0;
    optind = 0; /* 0: glibc re-initialises getopt */
    for (int o; (o = getopt_long(argc, argv, WATCH_SHORT, watch_opts, NULL)) != -1;) {
        if (o == 'i') interval = atof(optarg);
        else if (o == 't') timeout = atoi(optarg);
        else return fputs(help, stdout), 0;
    }
    if (interval <= 0) return bw_cli_usage_error(who, "--interval: more than 0 seconds");
    if (one_operand(argc, argv, "a JOB_ID")) return 2;
    const char *id = argv[optind];
    int64_t t0 = bw_now_us(), deadline = timeout > 0 ? t0 + (int64_t)timeout * 1000000 : INT64_MAX;
    long first_done = -1;
    bw_buf_t waits, shown; /* what holds the job back now, and as last printed */
    bw_buf_init(&waits);
    bw_buf_init(&shown);
    int rc = -1;
    while (rc < 0) {
        char err[512];
        long status;
        json_t *j = get_job(id, err, sizeof(err), &status);
        if (!j) {
            fprintf(stderr, "bwctl: %s\n", err);
            rc = 1;
            break;
        }
        long submitted = jint(j, "submitted"), done = jint(j, "applied") + jint(j, "failed");
        if (first_done < 0) first_done = done;
        double secs = (double)(bw_now_us() - t0) / 1e6;
        double rate = secs > 0 ? (double)(done - first_done) / secs : 0;
        int finished = json_is_true(json_object_get(j, "finished"));
        long cancelled = jint(j, "cancelled");
        done += cancelled;
        char note[160] = "";
        if (json_object_get(j, "cancelled_at_ms")) snprintf(note, sizeof(note), "cancelled by %s", jstr(j, "cancelled_by"));
        else if (jstr(j, "waiting")[0]) snprintf(note, sizeof(note), "%s", jstr(j, "waiting"));
        else if (json_is_false(json_object_get(j, "sealed")))
            snprintf(note, sizeof(note), "%ld parts in, not sealed yet", jint(j, "parts"));
        waits_text(j, &waits);
        if (strcmp(waits.data ? waits.data : "", shown.data ? shown.data : "")) { /* printed as it changes */
            if (isatty(2)) fputs("\r\033[K", stderr); /* above the bar, which is drawn again below */
            fprintf(stderr, "job %s (lane %s) %s", id, jstr(j, "lane"), waits.len ? "is held back:\n" : "is held back no more\n");
            fputs(waits.data ? waits.data : "", stderr);
            bw_buf_reset(&shown);
            bw_buf_append(&shown, waits.data ? waits.data : "", waits.len);
        }
        progress("watch", (double)done, (double)submitted, rate, note, finished);
        if (finished) {
            fprintf(stderr, "job %s (lane %s): %ld submitted, %ld applied, %ld failed, %ld cancelled, %ld rejected at submission\n",
                    id, jstr(j, "lane"), submitted, jint(j, "applied"), jint(j, "failed"), cancelled, jint(j, "rejected"));
            size_t i;
            json_t *fo;
            json_array_foreach(json_object_get(j, "failures"), i, fo)
                fprintf(stderr, "  op %ld (shard %ld, id %s): %s\n", jint(fo, "op_index"), jint(fo, "shard"),
                        jstr(fo, "id"), jstr(fo, "reason"));
            json_array_foreach(json_object_get(j, "prerequisites"), i, fo)
                fprintf(stderr, "  after job %s: %s%ld applied, %ld failed%s\n", jstr(fo, "job_id"),
                        json_is_true(json_object_get(fo, "finished")) ? "finished, " : "",
                        jint(fo, "applied"), jint(fo, "failed"),
                        json_is_true(json_object_get(fo, "was_cancelled")) ? ", cancelled" : "");
            rc = jint(j, "failed") || cancelled ? 1 : 0;
        } else if (bw_now_us() >= deadline) {
            fprintf(stderr, "bwctl: job %s not finished after %d s\n", id, timeout);
            rc = 3;
        }
        json_decref(j);
        if (rc < 0) usleep((useconds_t)(interval * 1e6));
    }
    bw_buf_free(&waits);
    bw_buf_free(&shown);
    return rc;
}

/* bwctl dead-letters: every failed op of a job, page by page (GET /v1/jobs/{id}/failures),
 * as a file bwctl submit sends again: a first line {"replay_of": JOB_ID}, then the ops. */
static const struct option dead_letters_opts[] = {{"code", required_argument, 0, 'e'}, {"reason", required_argument, 0, 'r'},
                                                  {"list", no_argument, 0, 'l'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
#define DEAD_LETTERS_SHORT "e:r:lh"

static int cmd_dead_letters(int argc, char **argv) {
    static const char help[] =
        "usage: bwctl dead-letters [--code N] [--reason TEXT] [--list] JOB_ID\n"
        "Prints the ops of the job that the shards refused, as JSON lines that bwctl submit\n"
        "accepts: fix the cause (or the ops), then send the file as a new job linked to this\n"
        "one (its first line, {\"replay_of\": JOB_ID}, makes the link; the new job's status\n"
        "shows it). --code keeps the ops refused with that MySQL error number, --reason those\n"
        "whose reason contains TEXT. --list prints each failure (shard, part, op, id, error,\n"
        "reason, op) instead. An op kept without its long values (over 16 KiB) cannot be\n"
        "sent again as it is: it is named on stderr (the dead-letter topic has it whole).\n"
        "Exit: 0 every op printed; 1 some could not be (or the job is unknown); 2 usage.\n";
    const char *reason = NULL;
    long code = 0;
    int list = 0;
    optind = 0; /* 0: glibc re-initialises getopt */
    for (int o; (o = getopt_long(argc, argv, DEAD_LETTERS_SHORT, dead_letters_opts, NULL)) != -1;) {
        if (o == 'e') code = atol(optarg);
        else if (o == 'r') reason = optarg;
        else if (o == 'l') list = 1;
        else return fputs(help, stdout), 0;
    }
    if (one_operand(argc, argv, "a JOB_ID")) return 2;
    const char *id = argv[optind];
    CURL *c = curl_easy_init();
    char *esc_id = curl_easy_escape(c, id, 0), *esc_reason = reason ? curl_easy_escape(c, reason, 0) : NULL;
    char next[64] = "";
    long written = 0, unreplayable = 0;
    int rc = 0;
    bw_buf_t resp;
    bw_buf_init(&resp);
    bw_buf_t path;
    bw_buf_init(&path);
    for (int first = 1;; first = 0) {
        /* built whole, however long the reason: a cut URL would drop the cursor and read
         * page 1 again for ever */
        bw_buf_reset(&path);
        bw_buf_printf(&path, "/v1/jobs/%s/failures?limit=1000", esc_id);
        if (code) bw_buf_printf(&path, "&code=%ld", code);
        if (esc_reason) bw_buf_printf(&path, "&reason=%s", esc_reason);
        if (next[0]) bw_buf_printf(&path, "&after=%s", next);
        long status = http("GET", path.data, NULL, &resp, NULL);
        json_t *page = status == 200 ? json_loadb(resp.data, resp.len, JSON_ALLOW_NUL, NULL) : NULL; /* a value may hold NUL */
        if (!page) {
            char e[512];
            fprintf(stderr, "bwctl: %s\n", error_text(&resp, e, sizeof(e)));
            rc = 1;
            break;
        }
        if (first && !list) printf("{\"replay_of\":\"%s\"}\n", id); /* the job is known: the link first */
        size_t i;
        json_t *f;
        json_array_foreach(json_object_get(page, "failures"), i, f) {
            json_t *op = json_object_get(f, "op");
            if (list) {
                char *s = json_dumps(f, JSON_COMPACT);
                puts(s);
                free(s);
                written++;
            } else if (!json_is_object(op) || json_is_true(json_object_get(f, "op_truncated"))) {
                fprintf(stderr, "shard %ld, part %ld, op %ld (id %s): not printed: %s\n", jint(f, "shard"),
                        jint(f, "job_part"), jint(f, "op_index"), jstr(f, "id"),
                        json_is_object(op) ? "kept without its long values (the dead-letter topic has them)"
                                           : "refused before its ops were kept (the dead-letter topic has it)");
                unreplayable++;
            } else {
                char *s = json_dumps(op, JSON_COMPACT | JSON_SORT_KEYS);
                puts(s);
                free(s);
                written++;
            }
        }
        const char *n = jstr(page, "next");
        snprintf(next, sizeof(next), "%s", n);
        json_decref(page);
        if (!next[0]) break;
    }
    fflush(stdout);
    fprintf(stderr, "dead-letters: job %s: %ld %s printed, %ld not\n", id, written, list ? "failures" : "ops",
            unreplayable);
    bw_buf_free(&resp);
    bw_buf_free(&path);
    curl_free(esc_id);
    curl_free(esc_reason);
    curl_easy_cleanup(c);
    return rc || unreplayable ? 1 : 0;
}

/* Sends a change (POST or DELETE) with body (consumed; NULL: none) to path: the reply on
 * stdout when 200 (0), else its error on stderr (1). */
static int send_change(const char *method, const char *path, json_t *body) {
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    bw_buf_t resp;
    bw_buf_init(&resp);
    long status = http(method, path, text, &resp, NULL);
    free(text);
    int rc = 0;
    if (status == 200) {
        printf("%s\n", resp.data);
    } else {
        char e[512];
        fprintf(stderr, "bwctl: %s\n", error_text(&resp, e, sizeof(e)));
        rc = 1;
    }
    bw_buf_free(&resp);
    return rc;
}

static const struct option cancel_opts[] = {{"reason", required_argument, 0, 'r'}, {"help", no_argument, 0, 'h'},
                                            {0, 0, 0, 0}};
#define CANCEL_SHORT "r:h"

static int cmd_cancel(int argc, char **argv) {
    static const char help[] =
        "usage: bwctl cancel [--reason TEXT] JOB_ID\n"
        "Cancels the job (DELETE /v1/jobs/JOB_ID): its ops not applied yet are skipped by\n"
        "every consumer within seconds and reported as cancelled; applied ones stay. Its\n"
        "owner or an admin may. Prints the job's status (JSON).\n"
        "Exit: 0 cancelled (or cancelled before); 1 refused or unknown job; 2 usage.\n";
    const char *reason = "";
    optind = 0; /* 0: glibc re-initialises getopt */
    for (int o; (o = getopt_long(argc, argv, CANCEL_SHORT, cancel_opts, NULL)) != -1;) {
        if (o == 'r') reason = optarg;
        else return fputs(help, stdout), 0;
    }
    if (one_operand(argc, argv, "a JOB_ID")) return 2;
    CURL *c = curl_easy_init();
    char *esc = curl_easy_escape(c, reason, 0), *id = curl_easy_escape(c, argv[optind], 0);
    char path[1024];
    snprintf(path, sizeof(path), "/v1/jobs/%s%s%s", id, reason[0] ? "?reason=" : "", reason[0] ? esc : "");
    curl_free(esc);
    curl_free(id);
    curl_easy_cleanup(c);
    return send_change("DELETE", path, NULL);
}

/* ---- shards ----------------------------------------------------------------------------- */

/* A budget for the table: "-" for 0 (no limit). */
static const char *budget_text(json_t *v, char *buf, size_t size) {
    double x = json_number_value(v);
    if (x == 0) snprintf(buf, size, "-");
    else snprintf(buf, size, "%g", x);
    return buf;
}

/* The operators' changes of every shard, newest first (bwctl shards --history). */
static void print_history(json_t *shards) {
    printf("\n%-6s %-24s %-7s %-16s %-16s %-44s %s\n", "SHARD", "WHEN (UTC)", "ACTION", "BY", "FROM", "SETTING AFTER",
           "REASON");
    size_t i, k;
    json_t *s, *h;
    json_array_foreach(shards, i, s) {
        json_array_foreach(json_object_get(s, "history"), k, h) {
            long long ms = jint(h, "at_ms");
            time_t secs = (time_t)(ms / 1000);
            struct tm tm;
            char when[32];
            strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", gmtime_r(&secs, &tm));
            printf("%-6ld %s.%03lldZ %-7s %-16s %-16s %-44s %s\n", jint(s, "shard"), when, ms % 1000, jstr(h, "action"),
                   jstr(h, "by"), jstr(h, "from"), jstr(h, "setting"), jstr(h, "reason"));
        }
    }
}

/* "2026-12-01T19:21:25.315Z" of a wall-clock ms. */
static const char *utc_text(long long ms, char *out, size_t size) {
    time_t secs = (time_t)(ms / 1000);
    struct tm tm;
    char when[32];
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", gmtime_r(&secs, &tm));
    snprintf(out, size, "%s.%03lldZ", when, ms % 1000);
    return out;
}

/* A line per server: its budget for the whole server (- = none), who set it, when, why;
 * with history, then each server's budget changes, newest first. Absent for a caller
 * without the admin role (no server names). */
static void print_budgets(json_t *servers, int history) {
    if (!json_is_array(servers)) return;
    printf("\n%-12s %13s %13s %-24s %-16s %s\n", "SERVER", "BUDGET STMT/S", "BUDGET ROWS/S", "CHANGED (UTC)", "BY",
           "REASON");
    size_t i, k;
    json_t *sv, *h;
    json_array_foreach(servers, i, sv) {
        json_t *b = json_object_get(sv, "budget");
        char r[32] = "-", rows[32] = "-", when[40] = "-";
        if (json_is_object(b)) {
            budget_text(json_object_get(b, "rate"), r, sizeof(r));
            budget_text(json_object_get(b, "row_rate"), rows, sizeof(rows));
            utc_text(json_integer_value(json_object_get(b, "changed_at_ms")), when, sizeof(when));
        }
        printf("%-12s %13s %13s %-24s %-16s %s\n", jstr(sv, "name"), r, rows, when,
               json_is_object(b) ? jstr(b, "changed_by") : "-", json_is_object(b) ? jstr(b, "reason") : "");
    }
    if (!history) return;
    printf("\n%-12s %-24s %-16s %-16s %-36s %s\n", "SERVER", "WHEN (UTC)", "BY", "FROM", "BUDGET AFTER", "REASON");
    json_array_foreach(servers, i, sv) {
        json_array_foreach(json_object_get(json_object_get(sv, "budget"), "history"), k, h) {
            char when[40];
            printf("%-12s %-24s %-16s %-16s %-36s %s\n", jstr(sv, "name"),
                   utc_text(json_integer_value(json_object_get(h, "at_ms")), when, sizeof(when)), jstr(h, "by"),
                   jstr(h, "from"), jstr(h, "setting"), jstr(h, "reason"));
        }
    }
}

/* bwctl shards --lanes: each shard's priority lanes, as its consumer last reported them. */
static void print_lanes(json_t *shards) {
    printf("%-6s %-12s %6s %10s %12s %14s %14s\n", "SHARD", "LANE", "WEIGHT", "LAG", "STATEMENTS", "APPLIED OFFSET",
           "HIGH WATERMARK");
    size_t i, k;
    json_t *s, *l;
    int any = 0;
    json_array_foreach(shards, i, s) {
        json_t *c = json_object_get(s, "consumer");
        json_array_foreach(json_is_object(c) ? json_object_get(c, "lanes") : NULL, k, l) {
            printf("%-6ld %-12s %6ld %10ld %12ld %14ld %14ld\n", jint(s, "shard"), jstr(l, "lane"), jint(l, "weight"),
                   jint(l, "lag"), jint(l, "statements"), jint(l, "applied_offset"), jint(l, "high_watermark"));
            any = 1;
        }
    }
    if (!any) printf("(no lanes: the configuration has only the default lane, or no consumer reported yet)\n");
}

static const struct option shards_opts[] = {{"history", no_argument, 0, 'H'}, {"lanes", no_argument, 0, 'L'},
                                            {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
#define SHARDS_SHORT "h"

static int cmd_shards(int argc, char **argv) {
    static const char help[] = "usage: bwctl shards [--history|--lanes]\nA table of every shard: its budgets in statements/s and rows/s as "
        "configured (CONF) and in force (the operator's, else the configured; - = no limit), "
        "paused, unhealthy, lag, the adaptive throttle (state(signal=value)@rate; pinned@rate when an operator\nholds it; \"-\" when off), why it is not running now (REASONS: paused, throttle, stopped,\nunhealthy, server_down, gap, buffer_full, ledger, backoff, revoking; \"-\" while it runs), its consumer,\nand the latest error; then a line per server: its budget for the whole server (bwctl set-budget;\n- = none), who set it, when and why.\n"
        "--history: then every operator change of each shard (the latest 20 per shard), newest "
        "first: when, rate|pause|resume, by which client, from which address, the setting after "
        "it, and the reason; and every server budget change.\n"
        "--lanes: instead, each shard's priority lanes (config lanes): weight, lag, statements applied "
        "from it,\nits applied offset and high watermark.\n";
    int history = 0, lanes = 0;
    optind = 0; /* 0: glibc re-initialises getopt */
    for (int o; (o = getopt_long(argc, argv, SHARDS_SHORT, shards_opts, NULL)) != -1;) {
        if (o == 'H') history = 1;
        else if (o == 'L') lanes = 1;
        else return fputs(help, stdout), 0;
    }
    if (history && lanes) return bw_cli_usage_error(who, "--history or --lanes, not both");
    if (optind < argc) return bw_cli_usage_error(who, "unexpected argument \"%s\"", argv[optind]);
    bw_buf_t resp;
    bw_buf_init(&resp);
    long status = http("GET", "/v1/shards", NULL, &resp, NULL);
    json_t *j = status == 200 ? json_loadb(resp.data, resp.len, 0, NULL) : NULL;
    if (!j) {
        char e[512];
        fprintf(stderr, "bwctl: %s\n", error_text(&resp, e, sizeof(e)));
        bw_buf_free(&resp);
        return 1;
    }
    if (lanes) {
        print_lanes(json_object_get(j, "shards"));
        json_decref(j);
        bw_buf_free(&resp);
        return 0;
    }
    printf("%-6s %-9s %-10s %11s %8s %11s %8s %-6s %-9s %8s %-34s %-16s %-22s %s\n", "SHARD", "DATABASE", "SERVER",
           "CONF STMT/S", "STMT/S", "CONF ROWS/S", "ROWS/S", "PAUSED", "UNHEALTHY", "LAG", "THROTTLE", "REASONS",
           "CONSUMER", "LAST ERROR");
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(j, "shards"), i, s) {
        json_t *c = json_object_get(s, "consumer");
        char lag[24] = "-", unhealthy[8] = "-", last[300] = "", throttle[80] = "-", reasons[160] = "-";
        json_t *t = json_is_object(c) ? json_object_get(c, "throttle") : NULL;
        if (json_is_object(t)) { /* one word: state, signal=value>level, the rate it decided */
            json_t *sig = json_object_get(t, "signal");
            char what[48] = "";
            if (json_is_object(sig) && strcmp(jstr(t, "state"), "running"))
                snprintf(what, sizeof(what), "(%s=%.4g)", jstr(sig, "name"), json_number_value(json_object_get(sig, "value")));
            const char *state = jstr(t, "state"); /* a pinned shard runs at its cap: say why */
            if (json_is_true(json_object_get(s, "pinned")) && !strcmp(state, "running")) state = "pinned";
            snprintf(throttle, sizeof(throttle), "%s%s@%g%s", state, what,
                     json_number_value(json_object_get(t, "rate")), json_is_true(json_object_get(t, "dry_run")) ? "(dry)" : "");
        }
        if (json_is_object(c)) {
            snprintf(lag, sizeof(lag), "%ld", jint(c, "lag"));
            snprintf(unhealthy, sizeof(unhealthy), "%s", json_is_true(json_object_get(c, "unhealthy")) ? "yes" : "no");
            size_t k, n = 0; /* one word: the names, comma-separated */
            json_t *r;
            json_array_foreach(json_object_get(c, "reasons"), k, r) if (n < sizeof(reasons))
                n += (size_t)snprintf(reasons + n, sizeof(reasons) - n, "%s%s", n ? "," : "", json_string_value(r) ? json_string_value(r) : "?");
            if (!n) snprintf(reasons, sizeof(reasons), "-");
            json_t *e = json_array_get(json_object_get(c, "recent_errors"), 0);
            if (e)
                snprintf(last, sizeof(last), "%s: %.200s", jstr(e, "kind"), jstr(e, "message"));
        }
        char b[4][32];
        printf("%-6ld %-9s %-10s %11s %8s %11s %8s %-6s %-9s %8s %-34s %-16s %-22s %s\n", jint(s, "shard"), jstr(s, "database"),
               jstr(s, "server"), budget_text(json_object_get(s, "configured_rate"), b[0], sizeof(b[0])),
               budget_text(json_object_get(s, "effective_rate"), b[1], sizeof(b[1])),
               budget_text(json_object_get(s, "configured_row_rate"), b[2], sizeof(b[2])),
               budget_text(json_object_get(s, "effective_row_rate"), b[3], sizeof(b[3])),
               json_is_true(json_object_get(s, "paused")) ? "yes" : "no", unhealthy, lag, throttle, reasons,
               json_is_object(c) ? jstr(c, "instance") : "-", last);
    }
    print_budgets(json_object_get(j, "servers"), history);
    if (history) print_history(json_object_get(j, "shards"));
    json_decref(j);
    bw_buf_free(&resp);
    return 0;
}

/* One budget into body[member] ("rate": statements/s, "row_rate": rows/s): a number checked
 * by the rule the proxy applies too (so a bad one is refused before anything is sent), or
 * the word `none_word` (null: set-rate's "default", set-budget's "none"). 0, or -1 with why
 * filled in. */
static int put_budget(json_t *body, const char *member, const char *text, const char *none_word, char *why,
                      size_t why_size) {
    int rows = strcmp(member, "row_rate") == 0;
    if (strcmp(text, none_word) == 0) return json_object_set_new(body, member, json_null()), 0;
    char *end;
    double v = strtod(text, &end);
    if (*end || end == text)
        return snprintf(why, why_size, "\"%s\" is not a %s (a number, or %s)", text, rows ? "row rate" : "rate",
                        none_word), -1;
    if (rows ? bw_ratelimit_check_rows(v, why, why_size) : bw_ratelimit_check(v, why, why_size)) return -1;
    json_object_set_new(body, member, json_real(v));
    return 0;
}

/* set-rate's options; pause and resume take --reason and --server */
static const struct option set_rate_opts[] = {{"reason", required_argument, 0, 'r'}, {"rows", required_argument, 0, 'R'},
                                              {"server", required_argument, 0, 's'}, {"pin", no_argument, 0, 'P'},
                                              {"unpin", no_argument, 0, 'U'},        {"help", no_argument, 0, 'h'},
                                              {0, 0, 0, 0}};
#define SET_RATE_SHORT "r:h"
static const struct option pause_opts[] = {{"reason", required_argument, 0, 'r'}, {"server", required_argument, 0, 's'},
                                           {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
#define PAUSE_SHORT "r:h"

static int cmd_control(int argc, char **argv) {
    const char *cmd = argv[0];
    int is_rate = strcmp(cmd, "set-rate") == 0;
    char help[1536];
    snprintf(help, sizeof(help),
             "usage: bwctl %s SHARD%s [--reason TEXT]\n"
             "       bwctl %s --server NAME%s [--reason TEXT]\n%s\n"
             "With --server, every shard of that server (shards.servers) gets the same change, each in\n"
             "its own record (the reason says \"server NAME\"). Every consumer applies it within\n"
             "seconds; it lasts until changed, across restarts.\n",
             cmd, is_rate ? " [RATE|default] [--rows ROWS|default] [--pin|--unpin]" : "", cmd,
             is_rate ? " [RATE|default] [--rows ROWS|default] [--pin|--unpin]" : "",
             is_rate ? "Sets the shard's budget: RATE statements per second (0 = unlimited, else "
                       BW_RATE_BOUNDS_TEXT "),\n--rows ROWS rows per second (0 = no row budget, else "
                       BW_ROW_RATE_BOUNDS_TEXT "), or both;\nwhichever binds first holds the shard back. "
                       "default = back to the configured value;\na budget not given stays as it is. --pin holds the rate by hand: "
                       "the adaptive\nthrottle leaves the shard at it until --unpin."
             : strcmp(cmd, "pause") == 0 ? "Stops applying the shard's batches; they wait in Kafka."
                                         : "Applies the shard's batches again.");
    const char *reason = "", *rows = NULL, *server = NULL;
    int pin = -1; /* --pin 1, --unpin 0, neither: as it was */
    optind = 0; /* 0: glibc re-initialises getopt */
    for (int o; (o = getopt_long(argc, argv, is_rate ? SET_RATE_SHORT : PAUSE_SHORT,
                                 is_rate ? set_rate_opts : pause_opts, NULL)) != -1;) {
        if (o == 'r') reason = optarg;
        else if (o == 's') server = optarg;
        else if (o == 'R') rows = optarg;
        else if (o == 'P' || o == 'U') pin = o == 'P';
        else return fputs(help, stdout), 0;
    }
    /* the target: SHARD, or --server NAME in its place */
    int operands = argc - optind, positional = operands + (server != NULL);
    if (!positional) return bw_cli_usage_error(who, "a SHARD (or --server NAME) is required");
    /* set-rate: SHARD and RATE, or SHARD alone with --rows or --pin/--unpin */
    if (is_rate && positional == 1 && !rows && pin < 0)
        return bw_cli_usage_error(who, "a RATE, --rows ROWS, --pin or --unpin is required");
    if (positional > (is_rate ? 2 : 1))
        return bw_cli_usage_error(who, "unexpected argument \"%s\"", argv[argc - 1]);
    char path[400];
    const char *rate = positional == 2 ? argv[argc - 1] : NULL;
    if (server) {
        char *escaped = curl_easy_escape(NULL, server, 0);
        snprintf(path, sizeof(path), "/v1/servers/%.200s/%s", escaped, is_rate ? "rate" : cmd);
        curl_free(escaped);
    } else {
        char *end;
        long shard = strtol(argv[optind], &end, 10);
        if (*end || end == argv[optind]) return fprintf(stderr, "bwctl: \"%s\" is not a shard number\n", argv[optind]), 2;
        snprintf(path, sizeof(path), "/v1/shards/%ld/%s", shard, is_rate ? "rate" : cmd);
    }
    json_t *body = json_pack("{s:s}", "reason", reason);
    char why[256] = "";
    if ((rate && put_budget(body, "rate", rate, "default", why, sizeof(why))) ||
        (rows && put_budget(body, "row_rate", rows, "default", why, sizeof(why)))) {
        json_decref(body);
        return fprintf(stderr, "bwctl: %s\n", why), 2;
    }
    if (pin >= 0) json_object_set_new(body, "pinned", json_boolean(pin));
    return send_change("POST", path, body);
}

static const struct option set_budget_opts[] = {{"reason", required_argument, 0, 'r'}, {"rows", required_argument, 0, 'R'},
                                                {"server", required_argument, 0, 's'}, {"help", no_argument, 0, 'h'},
                                                {0, 0, 0, 0}};
#define SET_BUDGET_SHORT "r:h"

static int cmd_set_budget(int argc, char **argv) {
    static const char help[] =
        "usage: bwctl set-budget --server NAME [RATE|none] [--rows ROWS|none] --reason TEXT\n"
        "Sets a budget for the whole server (shards.servers): RATE statements per second and/or\n"
        "ROWS rows per second (" BW_RATE_BOUNDS_TEXT " and " BW_ROW_RATE_BOUNDS_TEXT "), shared by the\n"
        "server's shards that have work; each shard's own rate, its lanes and the adaptive throttle\n"
        "still apply below it. none (or 0) = no budget of that kind; a budget not given stays as it\n"
        "is. With several consumers each runs the server's shards it holds at its share (budget x\n"
        "those shards / the server's). Every consumer applies it within seconds; it lasts until\n"
        "changed, across restarts. bwctl shards prints the budgets.\n";
    const char *reason = NULL, *rows = NULL, *server = NULL;
    optind = 0; /* 0: glibc re-initialises getopt */
    for (int o; (o = getopt_long(argc, argv, SET_BUDGET_SHORT, set_budget_opts, NULL)) != -1;) {
        if (o == 'r') reason = optarg;
        else if (o == 's') server = optarg;
        else if (o == 'R') rows = optarg;
        else return fputs(help, stdout), 0;
    }
    int positional = argc - optind;
    if (!server) return bw_cli_usage_error(who, "--server NAME is required (the server the budget is for)");
    if (!reason) return bw_cli_usage_error(who, "--reason is required (who changed it and why is audited)");
    if (positional == 0 && !rows) return bw_cli_usage_error(who, "a RATE, --rows ROWS, or both, is required");
    if (positional > 1) return bw_cli_usage_error(who, "unexpected argument \"%s\"", argv[optind + 1]);
    json_t *body = json_pack("{s:s}", "reason", reason);
    char why[256] = "";
    if ((positional && put_budget(body, "rate", argv[optind], "none", why, sizeof(why))) ||
        (rows && put_budget(body, "row_rate", rows, "none", why, sizeof(why)))) {
        json_decref(body);
        return fprintf(stderr, "bwctl: %s\n", why), 2;
    }
    char path[400], *escaped = curl_easy_escape(NULL, server, 0);
    snprintf(path, sizeof(path), "/v1/servers/%.200s/budget", escaped);
    curl_free(escaped);
    return send_change("POST", path, body);
}

/* ---- main ------------------------------------------------------------------------------- */

static int usage(FILE *out, int code) {
    fprintf(out,
          "usage: bwctl [OPTIONS] COMMAND [ARGS] (the options below before or after the command)\n"
          "commands (bwctl COMMAND --help for each):\n"
          "  submit FILE          send ops from JSON lines or CSV as one job, with a progress bar;\n"
          "                       run again after a crash, it resumes where it stopped\n"
          "  watch JOB_ID         follow a job until it is finished, with a progress bar and ETA\n"
          "  job JOB_ID           print a job's status (JSON)\n"
          "  cancel JOB_ID        skip a job's ops not applied yet (--reason TEXT)\n"
          "  dead-letters JOB_ID  print a job's refused ops as a file to fix and submit again\n"
          "  shards [--history]   a table of every shard: budgets, paused, lag, recent errors;\n"
          "                       --history: who changed which shard, when, from where, why\n"
          "  set-rate SHARD [RATE] [--rows ROWS] [--pin|--unpin]\n"
          "                       set a shard's budget in statements/s (0 = unlimited) and/or\n"
          "                       rows/s (0 = no row budget); default = the configured value\n"
          "  pause SHARD          stop applying a shard's batches (they wait in Kafka)\n"
          "  resume SHARD         apply them again\n"
          "                       set-rate, pause, resume --server NAME: every shard of a server\n"
          "  set-budget --server NAME [RATE|none] [--rows ROWS|none] --reason TEXT\n"
          "                       a budget for the whole server, shared by its shards with work\n"
          "  schema [--print] [--create-users]\n"
          "                       create the shard databases and tables on every server\n"
          "                       (idempotent), or print the DDL; --create-users: and the\n"
          "                       consumer's and the proxy's least-privilege users\n"
          "  check-config         validate the configuration, the proxy's TLS files and clients file;\n"
          "                       prints file:line: what on error\n"
          "  dump-config          print the effective configuration, defaults filled in\n"
          "  config-doc           print the configuration reference (docs/configuration.md)\n"
          "  config-set FILE KEY=VALUE...  set keys in a config file, each checked against the key table\n"
          "  metrics-doc [FILE]   print the metric list (docs/api.md); with FILE, print FILE with\n"
          "                       the list between its markers regenerated (make docs)\n"
          "  endpoints-doc FILE   print FILE (docs/api.md) with its endpoint table regenerated from\n"
          "                       the proxy's endpoint table (make docs)\n"
          "options:\n"
          "  -c, --config FILE  configuration (default: $" BW_CONF_ENV ", else %s)\n"
          "  -u, --url URL      the proxy (default http://proxy.listen_address:proxy.port, https\n"
          "                     with proxy.tls.cert_file)\n"
          "  --admin-url URL    the proxy for set-rate, pause, resume, set-budget (default the admin listener,\n"
          "                     proxy.admin_listen_address:proxy.admin_port, when it is set, else\n"
          "                     the URL)\n"
          "  --token-file FILE  the bearer token for the proxy (else the environment's BW_TOKEN)\n"
          "  --cacert FILE      over HTTPS: the CA certificate(s) to trust the proxy with\n"
          "  --cert FILE        over HTTPS: a client certificate (PEM) to present, with --key FILE\n"
          "  --key FILE         its private key (PEM)\n"
          "  --version          print the version and the commit built\n"
          "exit codes: 0 success, 1 failure, 2 usage, 3 watch timed out\n",
          bw_cli_default_config());
    return code;
}

static const struct option schema_opts[] = {{"print", no_argument, 0, 'p'}, {"create-users", no_argument, 0, 'U'},
                                            {"admin-user", required_argument, 0, 'a'},
                                            {"admin-password-file", required_argument, 0, 'P'},
                                            {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
#define SCHEMA_SHORT "h"

static int cmd_schema(int argc, char **argv) {
    static const char help[] =
        "usage: bwctl schema [--print] [--create-users] [--admin-user USER [--admin-password-file FILE]]\n"
        "Creates every shard database and table on every server (idempotent); --print writes the DDL instead.\n"
        "--create-users also makes each server's least-privilege users (docs/security.md): `user` (the\n"
        "consumer: SELECT, INSERT, UPDATE, DELETE on the ledger and object tables) and `proxy_user` (the\n"
        "proxy: SELECT on bw_job_parts and bw_job_failures), with their configured passwords.\n"
        "It connects as --admin-user (default: each server's user), whose password comes from\n"
        "--admin-password-file FILE or the environment's BW_ADMIN_PASSWORD (default: empty).\n";
    int print = 0, users = 0;
    const char *admin_user = NULL, *pw_file = NULL;
    optind = 0; /* 0: glibc re-initialises getopt */
    for (int o; (o = getopt_long(argc, argv, SCHEMA_SHORT, schema_opts, NULL)) != -1;) {
        if (o == 'p') print = 1;
        else if (o == 'U') users = 1;
        else if (o == 'a') admin_user = optarg;
        else if (o == 'P') pw_file = optarg;
        else return fputs(help, stdout), 0;
    }
    if (optind < argc) return bw_cli_usage_error(who, "unexpected argument \"%s\"", argv[optind]);
    if (pw_file && !admin_user) return bw_cli_usage_error(who, "--admin-password-file needs --admin-user (whose password it is)");
    if (print) {
        bw_buf_t b;
        bw_buf_init(&b);
        for (int i = 0; i < conf->server_cnt; i++) {
            bw_buf_printf(&b, "-- server %s (%s:%d)\n", conf->servers[i].name, conf->servers[i].host,
                          conf->servers[i].port);
            bw_db_schema_sql(conf, i, &b);
            if (users) bw_db_users_sql(conf, i, admin_user ? admin_user : conf->servers[i].user, 1, &b);
        }
        fwrite(b.data, 1, b.len, stdout);
        bw_buf_free(&b);
        return 0;
    }
    char err[512], *admin_pw = NULL;
    if (admin_user) { /* like every secret: from a file or the environment, never argv */
        const char *env = getenv("BW_ADMIN_PASSWORD");
        char ref[4200];
        snprintf(ref, sizeof(ref), "file:%s", pw_file ? pw_file : "");
        admin_pw = pw_file ? bw_config_secret_resolve("--admin-password-file", ref, NULL, err, sizeof(err))
                           : strdup(env ? env : "");
        if (!admin_pw) return fprintf(stderr, "bwctl: %s\n", err), 1;
    }
    unsigned errnum;
    bw_err_t rc = bw_db_apply_schema_as(conf, admin_user, admin_pw, users, &errnum, err, sizeof(err));
    free(admin_pw);
    if (rc != BW_OK) {
        fprintf(stderr, "bwctl: %s\n", err);
        /* the consumer's own account does not exist yet (refused at connect), or may not
         * create databases and users (refused at a statement) */
        int denied = errnum == ER_ACCESS_DENIED_ERROR || errnum == ER_DBACCESS_DENIED_ERROR ||
                     errnum == ER_TABLEACCESS_DENIED_ERROR || errnum == ER_SPECIFIC_ACCESS_DENIED_ERROR;
        if (users && !admin_user && denied)
            fputs("bwctl: --create-users connects as each server's `user` unless told otherwise: pass\n"
                  "       --admin-user USER (an account that may create users and grant, e.g. root), its\n"
                  "       password in --admin-password-file FILE or BW_ADMIN_PASSWORD\n",
                  stderr);
        return 1;
    }
    printf("schema: %d shard databases ready on %d servers%s\n", conf->shard_count, conf->server_cnt,
           users ? "; users and grants in place" : "");
    return 0;
}

/* check-config: the proxy's TLS files and clients file too, when the configuration names
 * them. */
static int check_proxy_files(void) {
    char *path = bw_auth_path(conf), err[1024];
    int open = bw_auth_check_open(conf, err, sizeof(err));
    if (open) fprintf(stderr, "bwctl: %s%s\n", open > 0 ? "warning: " : "", err);
    if (open < 0) {
        free(path);
        return 1;
    }
    bw_tls_t *tls;
    if (bw_tls_load(conf, &tls, err, sizeof(err))) {
        free(path);
        return fprintf(stderr, "bwctl: %s\n", err), 1;
    }
    if (tls) printf("proxy.tls: ok (certificate, key%s)\n", tls->ca_pem ? ", client CAs" : "");
    bw_tls_free(tls);
    if (!path) return 0;
    bw_auth_set_t *set = bw_auth_load(path, conf, err, sizeof(err));
    if (set) printf("%s: ok (%d clients)\n", path, set->client_cnt);
    else fprintf(stderr, "bwctl: %s\n", err);
    bw_auth_release(set);
    free(path);
    return set ? 0 : 1;
}

/* FILE's text, NUL-terminated, into *text: 0, or -1 said on stderr. */
static int read_text(const char *path, bw_buf_t *text) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "bwctl: %s: %s\n", path, strerror(errno));
        return -1;
    }
    char chunk[8192];
    for (size_t n; (n = fread(chunk, 1, sizeof(chunk), f)) > 0;) bw_buf_append(text, chunk, n);
    bw_buf_append(text, "", 1); /* a string */
    fclose(f);
    return 0;
}

/* bwctl metrics-doc [FILE]: the metric list from the daemons' tables (proxy_metrics.c, consumer_metrics.c). */
static int metrics_doc(int argc, char **argv) {
    if (asked_help(argc, argv, "usage: bwctl metrics-doc [FILE]\n  prints the metric list of docs/api.md; with FILE, "
                               "FILE with the list\n  between its generated markers replaced\n"))
        return 0;
    if (optind < argc - 1) return bw_cli_usage_error(who, "unexpected argument \"%s\"", argv[optind + 1]);
    argc -= optind - 1, argv += optind - 1; /* FILE, if any, is argv[1] */
    static const bw_metrics_table_t *const tables[] = {&bw_proxy_metrics, &bw_consumer_metrics};
    bw_buf_t out, text;
    bw_buf_init(&out);
    bw_buf_init(&text);
    int rc = 0;
    if (argc == 1) {
        bw_metrics_doc(tables, 2, &out);
    } else if (read_text(argv[1], &text)) {
        rc = 1;
    } else if (bw_metrics_doc_splice(text.data, tables, 2, &out)) {
        fprintf(stderr, "bwctl: %s: no generated metric list (its two marker lines) to replace\n", argv[1]);
        rc = 1;
    }
    if (!rc) fwrite(out.data, 1, out.len, stdout);
    bw_buf_free(&out);
    bw_buf_free(&text);
    return rc;
}

/* bwctl endpoints-doc FILE: FILE (docs/api.md) with its endpoint table written from the
 * proxy's endpoint table (proxy/endpoints.c). */
static int endpoints_doc(int argc, char **argv) {
    if (asked_help(argc, argv, "usage: bwctl endpoints-doc FILE\n  prints FILE (docs/api.md) with its endpoint table "
                               "between its markers regenerated\n"))
        return 0;
    if (one_operand(argc, argv, "FILE (docs/api.md)")) return 2;
    argv += optind - 1; /* FILE is argv[1] */
    bw_buf_t text;
    bw_buf_init(&text);
    char err[256];
    char *out = read_text(argv[1], &text) ? NULL : bw_endpoints_doc(text.data, err, sizeof(err));
    if (out) fputs(out, stdout);
    else if (text.len) fprintf(stderr, "bwctl: %s: %s\n", argv[1], err);
    free(out);
    bw_buf_free(&text);
    return out ? 0 : 1;
}

static const char check_config_help[] =
    "usage: bwctl check-config [-c CONFIG]\n"
    "Loads and validates CONFIG (bwctl's -c, else $" BW_CONF_ENV ", else the installed one) and the files it names;\n"
    "prints \"CONFIG: ok (…)\" or what is wrong (exit 1).\n";
static const char dump_config_help[] =
    "usage: bwctl dump-config [-c CONFIG]\n"
    "Prints the effective configuration (every default filled in, secrets redacted) in libconfig syntax.\n";
static const char config_doc_help[] =
    "usage: bwctl config-doc\n"
    "Prints docs/configuration.md from the key table: every key, its type, default, what SIGHUP does with it.\n";
static const char config_set_help[] =
    "usage: bwctl config-set FILE KEY=VALUE...\n"
    "Sets each key in the libconfig file FILE, checked against the key table first: an unknown key or a\n"
    "bad value (type, range, choice) is refused naming the key, and then nothing is written (exit 2).\n"
    "KEY is dotted through groups, with [N] into a list (shards.servers[1].port); VALUE is libconfig\n"
    "syntax (42, 1.5, true, \"text\", [\"a=b\"], ( { name = \"urgent\"; weight = 4; } )) or bare text for a\n"
    "string or choice. The file is written back through libconfig: its comments are not kept, so use it\n"
    "on copies and generated files (as the tests do), not on a hand-kept file.\n";

static int cmd_config_set(int argc, char **argv) {
    if (asked_help(argc, argv, config_set_help)) return 0;
    if (argc - optind < 2) return bw_cli_usage_error(who, "a FILE and at least one KEY=VALUE are required");
    char err[1024];
    if (bw_config_set_file(argv[optind], argv + optind + 1, argc - optind - 1, err, sizeof(err)) != BW_OK)
        return fprintf(stderr, "bwctl config-set: %s\n", err), 2;
    return 0;
}

static int cmd_config_doc(int argc, char **argv) {
    if (asked_help(argc, argv, config_doc_help)) return 0;
    if (optind < argc) return bw_cli_usage_error(who, "unexpected argument \"%s\"", argv[optind]);
    bw_config_doc(stdout);
    return 0;
}

static const char *config_path; /* the configuration read (bw_cli_config_path) */

static int cmd_check_config(int argc, char **argv) {
    if (asked_help(argc, argv, check_config_help)) return 0;
    if (optind < argc) return bw_cli_usage_error(who, "unexpected argument \"%s\"", argv[optind]);
    printf("%s: ok (%d shards on %d servers, %d object types)\n", config_path, conf->shard_count, conf->server_cnt,
           conf->object_type_cnt);
    return check_proxy_files();
}

static int cmd_dump_config(int argc, char **argv) {
    if (asked_help(argc, argv, dump_config_help)) return 0;
    if (optind < argc) return bw_cli_usage_error(who, "unexpected argument \"%s\"", argv[optind]);
    bw_config_dump(conf, stdout);
    return 0;
}

/* Each command: its handler, its own options (each with --help; their values are letters),
 * and what it needs first. */
enum { NEEDS_CONFIG = 1, CONTROL = 2 }; /* CONTROL: sent to the admin URL */
typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const struct option *opts;
    const char *short_opts;
    int flags;
} command_t;

static const command_t commands[] = {
    {"submit", cmd_submit, submit_opts, SUBMIT_SHORT, NEEDS_CONFIG},
    {"watch", cmd_watch, watch_opts, WATCH_SHORT, NEEDS_CONFIG},
    {"job", cmd_job, help_opts, "h", NEEDS_CONFIG},
    {"cancel", cmd_cancel, cancel_opts, CANCEL_SHORT, NEEDS_CONFIG},
    {"dead-letters", cmd_dead_letters, dead_letters_opts, DEAD_LETTERS_SHORT, NEEDS_CONFIG},
    {"shards", cmd_shards, shards_opts, SHARDS_SHORT, NEEDS_CONFIG},
    {"set-rate", cmd_control, set_rate_opts, SET_RATE_SHORT, NEEDS_CONFIG | CONTROL},
    {"pause", cmd_control, pause_opts, PAUSE_SHORT, NEEDS_CONFIG | CONTROL},
    {"resume", cmd_control, pause_opts, PAUSE_SHORT, NEEDS_CONFIG | CONTROL},
    {"set-budget", cmd_set_budget, set_budget_opts, SET_BUDGET_SHORT, NEEDS_CONFIG | CONTROL},
    {"schema", cmd_schema, schema_opts, SCHEMA_SHORT, NEEDS_CONFIG},
    {"check-config", cmd_check_config, help_opts, "h", NEEDS_CONFIG},
    {"dump-config", cmd_dump_config, help_opts, "h", NEEDS_CONFIG},
    {"config-doc", cmd_config_doc, help_opts, "h", 0},
    {"config-set", cmd_config_set, help_opts, "h", 0},
    {"metrics-doc", metrics_doc, help_opts, "h", 0},
    {"endpoints-doc", endpoints_doc, help_opts, "h", 0},
};

/* bwctl's own options, taken before the command and among its arguments alike. Their
 * values are 'c', 'u' and from 0x100 on: no command's option (a letter) has one. */
enum { OPT_ADMIN_URL = 0x100, OPT_TOKEN_FILE, OPT_CACERT, OPT_CERT, OPT_KEY, OPT_VERSION };
#define GLOBAL_SHORT "c:u:"
static const struct option global_opts[] = {{"config", required_argument, 0, 'c'},
                                            {"url", required_argument, 0, 'u'},
                                            {"admin-url", required_argument, 0, OPT_ADMIN_URL},
                                            {"token-file", required_argument, 0, OPT_TOKEN_FILE},
                                            {"cacert", required_argument, 0, OPT_CACERT},
                                            {"cert", required_argument, 0, OPT_CERT},
                                            {"key", required_argument, 0, OPT_KEY},
                                            {"version", no_argument, 0, OPT_VERSION},
                                            {0, 0, 0, 0}};
#define GLOBAL_OPTS_N (sizeof(global_opts) / sizeof(global_opts[0]) - 1)
static const char *given_config, *url, *admin_url, *token_file; /* -c (NULL: BULKWRITE_CONF, the default) … */
static int print_version, command_help; /* --version; the command's --help (it needs no configuration) */

/* One of bwctl's own options: 1 when `o` is one (its value kept), else 0. */
static int global_option(int o, const char *arg) {
    switch (o) {
    case 'c': given_config = arg; return 1;
    case 'u': url = arg; return 1;
    case OPT_ADMIN_URL: admin_url = arg; return 1;
    case OPT_TOKEN_FILE: token_file = arg; return 1;
    case OPT_CACERT: tls_cacert = arg; return 1;
    case OPT_CERT: tls_cert = arg; return 1;
    case OPT_KEY: tls_key = arg; return 1;
    case OPT_VERSION: print_version = 1; return 1;
    default: return 0;
    }
}

/* The command's arguments (argv[0] its name) with bwctl's own options taken out and
 * applied, wherever they stand, into *out: the command's own options as "--name[=VALUE]",
 * then "--" when an operand looks like an option, then its operands. getopt names a bad
 * option (then 2), else -1. *out (malloc'd) and each option in it are the caller's. */
static int split_options(const command_t *c, int argc, char **argv, char ***out, int *out_argc) {
    size_t own = 0;
    while (c->opts[own].name) own++;
    struct option *all = calloc(own + GLOBAL_OPTS_N + 1, sizeof(*all));
    char shorts[64];
    snprintf(shorts, sizeof(shorts), "%s" GLOBAL_SHORT, c->short_opts);
    *out = calloc((size_t)argc + 2, sizeof(char *));
    if (!all || !*out) abort();
    memcpy(all, c->opts, own * sizeof(*all));
    memcpy(all + own, global_opts, GLOBAL_OPTS_N * sizeof(*all));
    int n = 0;
    (*out)[n++] = argv[0];
    argv[0] = who; /* getopt's messages begin with it */
    optind = 0; /* 0: glibc re-initialises getopt */
    opterr = 1;
    int rc = -1;
    for (int o; rc < 0 && (o = getopt_long(argc, argv, shorts, all, NULL)) != -1;) {
        if (o == '?' || o == ':') rc = bw_cli_usage_error(who, NULL);
        else if (!global_option(o, optarg)) { /* the command's own: by its long name */
            command_help |= o == 'h';
            size_t k = 0;
            while (k < own && all[k].val != o) k++;
            if (k == own || asprintf(&(*out)[n++], "--%s%s%s", all[k].name, optarg ? "=" : "", optarg ? optarg : "") < 0)
                abort(); /* each short option of a command has a long one */
        }
    }
    int operands_from = n;
    for (int i = optind; rc < 0 && i < argc; i++)
        if (argv[i][0] == '-' && argv[i][1] && n == operands_from) (*out)[n++] = "--";
    for (int i = optind; rc < 0 && i < argc; i++) (*out)[n++] = argv[i];
    *out_argc = n;
    free(all);
    return rc;
}

static const command_t *find_command(const char *name) {
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (strcmp(commands[i].name, name) == 0) return &commands[i];
    return NULL;
}

int main(int argc, char **argv) {
    struct option before_command[GLOBAL_OPTS_N + 2]; /* bwctl's own options, and --help */
    memcpy(before_command, global_opts, GLOBAL_OPTS_N * sizeof(*before_command));
    before_command[GLOBAL_OPTS_N] = (struct option){"help", no_argument, 0, 'h'};
    before_command[GLOBAL_OPTS_N + 1] = (struct option){0, 0, 0, 0};
    argv[0] = "bwctl"; /* getopt's messages begin with it, not with the path */
    for (int o; (o = getopt_long(argc, argv, "+" GLOBAL_SHORT "h", before_command, NULL)) != -1;) {
        if (o == 'h') return usage(stdout, 0);
        if (!global_option(o, optarg)) return bw_cli_usage_error("bwctl", NULL);
    }
    if (print_version) return bw_cli_print_version("bwctl"), 0;
    if (optind >= argc) return usage(stderr, 2);
    const command_t *c = find_command(argv[optind]);
    if (!c) return bw_cli_usage_error("bwctl", "unknown command \"%s\"", argv[optind]);
    snprintf(who, sizeof(who), "bwctl %s", c->name);
    char **sub_argv;
    int sub_argc, ret = split_options(c, argc - optind, argv + optind, &sub_argv, &sub_argc);
    if (ret < 0 && print_version) ret = (bw_cli_print_version("bwctl"), 0);
    char err[512];
    if (ret < 0 && (c->flags & NEEDS_CONFIG) && !command_help) {
        config_path = bw_cli_config_path(given_config);
        if (bw_token_header(token_file, &auth_header, err, sizeof(err)))
            ret = (fprintf(stderr, "bwctl: %s\n", err), 1);
        else if (!(conf = bw_config_load(config_path, err, sizeof(err))))
            ret = (fprintf(stderr, "bwctl: %s%s\n", err, bw_cli_config_hint(given_config)), 1);
    }
    if (ret < 0 && conf) {
        const char *scheme = *conf->proxy_tls_cert_file ? "https" : "http";
        int control = c->flags & CONTROL;
        if (control && admin_url) snprintf(base_url, sizeof(base_url), "%s", admin_url);
        else if (control && !url && conf->proxy_admin_port)
            snprintf(base_url, sizeof(base_url), "%s://%s:%d", scheme, conf->proxy_admin_listen_address,
                     conf->proxy_admin_port);
        else if (url) snprintf(base_url, sizeof(base_url), "%s", url);
        else snprintf(base_url, sizeof(base_url), "%s://%s:%d", scheme, conf->proxy_listen_address, conf->proxy_port);
        size_t ul = strlen(base_url);
        if (ul && base_url[ul - 1] == '/') base_url[ul - 1] = '\0';
    }
    if (ret < 0) {
        curl_global_init(CURL_GLOBAL_DEFAULT);
        ret = c->run(sub_argc, sub_argv);
        curl_global_cleanup();
    }
    for (int i = 1; i < sub_argc && strncmp(sub_argv[i], "--", 2) == 0 && sub_argv[i][2]; i++)
        free(sub_argv[i]); /* the options split_options wrote */
    free(sub_argv);
    bw_config_destroy(conf);
    free(auth_header);
    return ret;
}
