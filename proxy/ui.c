/* ui.c — the SRE page (docs/operations.md, "The page"): its files at /ui/, and the JSON
 * endpoints it needs besides those bwctl uses: GET /v1/whoami (may this caller change
 * things?), GET /v1/fleet (brokers, topics, the processes alive) and GET /v1/jobs (the
 * latest jobs). Also GET /v1/openapi.yaml, the API's description (docs/openapi.yaml). The files are built into bw-proxy (scripts/embed-ui.sh): no CDN, nothing
 * fetched, the same page for the same binary.
 *
 * @locality HTTP threads; everything read goes through its module's locks. */
#include "ui.h"

#include <jansson.h>
#include <math.h>
#include <openssl/sha.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "proxy.h"

const bw_ui_asset_t *bw_ui_asset(const char *name) {
    if (!name[0]) name = "index.html";
    for (const bw_ui_asset_t *a = bw_ui_assets; a->name; a++)
        if (strcmp(a->name, name) == 0) return a;
    return NULL;
}

/* JSON body (the tree is consumed) with 200. */
static enum MHD_Result reply_json(struct MHD_Connection *c, json_t *body) {
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    return bw_daemon_reply(c, MHD_HTTP_OK, "application/json", text, strlen(text), 1);
}

/* The page's files: no data in them, so no credentials needed; a strict policy keeps the
 * page to its own origin (no inline script, no other host). */
static enum MHD_Result serve_asset(struct MHD_Connection *c, const char *name) {
    const bw_ui_asset_t *a = bw_ui_asset(name);
    if (!a) return bw_reply_error(c, MHD_HTTP_NOT_FOUND, "no such file of the page: /ui/%.100s", name);
    struct MHD_Response *r = MHD_create_response_from_buffer(a->len, (void *)a->data, MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, a->type);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(r, "Content-Security-Policy",
                            "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

/* GET /v1/openapi.yaml: the API's description, as built into this binary; open like the
 * page's files (it holds no data), so a client generator needs no token. */
static enum MHD_Result serve_openapi(struct MHD_Connection *c) {
    const bw_ui_asset_t *a = &bw_api_assets[0];
    struct MHD_Response *r = MHD_create_response_from_buffer(a->len, (void *)a->data, MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, a->type);
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

/* GET /v1/whoami: the caller's name and roles, so the page shows controls to admins only
 * (the endpoints refuse others all the same). */
static enum MHD_Result whoami(struct MHD_Connection *c, const bw_auth_client_t *client) {
    unsigned roles = client ? client->roles : BW_ROLE_ANY; /* open: every caller is admin */
    json_t *r = json_array();
    static const char *const names[] = {"submit", "read", "admin"};
    for (int k = 0; k < 3; k++)
        if (roles & (1u << k)) json_array_append_new(r, json_string(names[k]));
    return reply_json(c, json_pack("{s:s, s:o, s:b, s:b}", "client", client ? client->name : "(open)", "roles", r,
                                   "admin", (roles & BW_ROLE_ADMIN) != 0, "open", client == NULL));
}

/* Kafka as this proxy's client sees it: brokers, and each of bulkwrite's topics with its
 * partitions, those with fewer replicas in sync than assigned, and those without a leader. */
static json_t *kafka_json(void) {
    json_t *k = json_pack("{s:[], s:[]}", "brokers", "topics");
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t err = rd_kafka_metadata(proxy.rk, 1, NULL, &md, 2000);
    if (err) {
        json_object_set_new(k, "error", json_string(rd_kafka_err2str(err)));
        return k;
    }
    for (int i = 0; i < md->broker_cnt; i++)
        json_array_append_new(json_object_get(k, "brokers"), json_pack("{s:i, s:s, s:i}", "id", md->brokers[i].id, "host",
                                                                      md->brokers[i].host, "port", md->brokers[i].port));
    const bw_config_t *conf = proxy.conf;
    for (int t = 0; t < md->topic_cnt; t++) {
        const struct rd_kafka_metadata_topic *mt = &md->topics[t];
        int ours = !strcmp(mt->topic, conf->jobs_topic) || !strcmp(mt->topic, conf->control_topic) ||
                   !strcmp(mt->topic, conf->status_topic) || !strcmp(mt->topic, conf->dead_letter_topic);
        for (int l = 0; l < conf->lane_cnt; l++) ours |= !strcmp(mt->topic, conf->lanes[l].topic);
        ours |= !strcmp(mt->topic, conf->topic);
        if (!ours) continue;
        int under = 0, offline = 0, replicas = 0;
        for (int p = 0; p < mt->partition_cnt; p++) {
            const struct rd_kafka_metadata_partition *mp = &mt->partitions[p];
            under += mp->isr_cnt < mp->replica_cnt;
            offline += mp->leader < 0;
            if (!p || mp->replica_cnt < replicas) replicas = mp->replica_cnt;
        }
        json_array_append_new(json_object_get(k, "topics"),
                              json_pack("{s:s, s:i, s:i, s:i, s:i}", "name", mt->topic, "partitions", mt->partition_cnt,
                                        "replicas", replicas, "under_replicated", under, "offline", offline));
    }
    rd_kafka_metadata_destroy(md);
    return k;
}

/* 16 hex digits standing for every setting print of a member: two members with the same
 * one run the same shared settings. */
static void fingerprint(const Bulkwrite__Internal__V1__FleetMember *m, char out[17]) {
    bw_buf_t b;
    bw_buf_init(&b);
    for (size_t i = 0; i < m->n_settings; i++) bw_buf_printf(&b, "%s=%s;", m->settings[i]->key, m->settings[i]->print);
    unsigned char d[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)(b.data ? b.data : ""), b.len, d);
    bw_buf_free(&b);
    for (int i = 0; i < 8; i++) snprintf(out + 2 * i, 3, "%02x", d[i]);
}

/* GET /v1/fleet: Kafka, the proxies and consumers (from their presence records in the
 * control topic), and the servers with their shards. Addresses are for admins. */
static enum MHD_Result fleet(struct MHD_Connection *c, int admin) {
    int64_t now = bw_wall_ms();
    bw_clock_t k = {0};
    json_t *members = json_array(), *servers = json_array();
    Bulkwrite__Internal__V1__FleetMember **ms;
    size_t n = bw_shard_table_members(proxy.shards, &ms);
    for (size_t i = 0; i < n; i++) {
        char print[17];
        fingerprint(ms[i], print);
        int64_t age = now - ms[i]->seen_at_ms;
        json_t *m = json_pack("{s:s, s:s, s:I, s:b, s:b, s:s}", "role", ms[i]->role, "instance", ms[i]->instance,
                              "started_at_ms", (json_int_t)ms[i]->started_at_ms, "alive", age < BW_FLEET_STALE_MS,
                              "agrees", ms[i]->agrees, "fingerprint", print);
        bw_clock_at(&k, m, "seen_at_ms", ms[i]->seen_at_ms); /* a heartbeat: alive says what changed */
        bw_clock_age(&k, m, "age_ms", ms[i]->seen_at_ms);
        if (!strcmp(ms[i]->role, "proxy")) json_object_set_new(m, "releases", json_boolean(ms[i]->releases));
        json_array_append_new(members, m);
    }
    bw_shard_table_members_free(ms, n);
    const bw_config_t *conf = proxy.conf;
    for (int s = 0; s < conf->server_cnt; s++) {
        const bw_server_t *sv = &conf->servers[s];
        json_t *o = json_pack("{s:s, s:i, s:i}", "name", sv->name, "first_shard", sv->first_shard, "last_shard",
                              sv->last_shard);
        if (admin) json_object_set_new(o, "address", json_sprintf("%s:%d", sv->host, sv->port));
        bw_history_sum_t sum; /* what its shards' consumers report: rows/s over rate_window_s, lag */
        bw_history_sum(proxy.history, sv->first_shard, sv->last_shard, &sum);
        json_object_set_new(o, "rows_per_s", isfinite(sum.rows_per_s) ? json_real(sum.rows_per_s) : json_null());
        json_object_set_new(o, "lag", json_integer(sum.lag));
        json_object_set_new(o, "shards_reporting", json_integer(sum.reporting));
        json_array_append_new(servers, o);
    }
    json_t *root = json_object();
    bw_clock_now(&k, root, "now_ms");
    json_object_set_new(root, "proxy", json_string(proxy.fleet.instance));
    json_object_set_new(root, "shards", json_integer(conf->shard_count));
    json_object_set_new(root, "rate_window_s", json_integer(BW_RATE_WINDOW_MS / 1000));
    json_object_set_new(root, "kafka", kafka_json());
    json_object_set_new(root, "members", members);
    json_object_set_new(root, "servers", servers);
    return bw_reply_json_cacheable(c, root, &k);
}

/* A client with more held jobs than this has them in the delay queue's line, not one by
 * one in the list (a delay queue of 50,000 timers is one thing). */
#define HELD_FOLD 10

/* The delay queue as one thing: what the held records hold, when the next is due, and
 * per client (a caller without the admin role: its own only), from clients[n]. */
static json_t *delay_queue(const bw_auth_client_t *client, int admin, const bw_timers_client_t *clients, size_t n) {
    bw_timers_stats_t st;
    bw_timers_stats(bw_jobs_timers(proxy.jobs), &st);
    json_t *by_client = json_array();
    size_t held = 0, ops = 0;
    for (size_t i = 0; i < n; i++) {
        if (!admin && strcmp(clients[i].client, client->name)) continue;
        held += clients[i].held, ops += clients[i].ops;
        if (json_array_size(by_client) < 20)
            json_array_append_new(by_client, json_pack("{s:s, s:I, s:I}", "client", clients[i].client, "held_jobs",
                                                       (json_int_t)clients[i].held, "held_ops", (json_int_t)clients[i].ops));
    }
    json_t *q = json_pack("{s:I, s:I, s:o}", "held_jobs", (json_int_t)(admin ? st.held : held), "held_ops",
                          (json_int_t)(admin ? st.ops : ops), "clients", by_client);
    if (admin) {
        json_object_set_new(q, "due_now", json_integer((json_int_t)st.due));
        json_object_set_new(q, "bytes", json_integer((json_int_t)st.bytes));
        if (st.next_due_ms) json_object_set_new(q, "next_due_ms", json_integer(st.next_due_ms));
    }
    return q;
}

/* Whether `name` holds more than HELD_FOLD jobs (clients[n], most held first). */
static int folded(const bw_timers_client_t *clients, size_t n, const char *name) {
    for (size_t i = 0; i < n && clients[i].held > HELD_FOLD; i++)
        if (strcmp(clients[i].client, name) == 0) return 1;
    return 0;
}

/* GET /v1/jobs[?limit=N]: the latest jobs this proxy read (its own, for a caller without
 * the admin role), newest first, each as its record says: name, client, when, ops
 * accepted, lane, schedule, cancel; and the delay queue in one object. A client's held
 * jobs are left out of the list while it holds more than HELD_FOLD: the delay queue
 * counts them. Each job has what the shards made of it (bw_jobs_summary: the numbers of
 * GET /v1/jobs/{id}, or why they are unknown); its shards one by one are there. */
static enum MHD_Result recent_jobs(struct MHD_Connection *c, const bw_auth_client_t *client) {
    const char *limit_s = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "limit");
    char *end;
    long limit = 50;
    if (limit_s && ((limit = strtol(limit_s, &end, 10)) < 1 || limit > BW_JOBS_RECENT_MAX || *end || end == limit_s))
        return bw_reply_error(c, MHD_HTTP_BAD_REQUEST, "limit: an integer from 1 to %d, not \"%.32s\"", BW_JOBS_RECENT_MAX,
                              limit_s);
    int admin = !client || (client->roles & BW_ROLE_ADMIN);
    bw_timers_client_t *clients = malloc(BW_TIMERS_CLIENTS_MAX * sizeof(*clients));
    if (!clients) abort();
    size_t n_clients = bw_timers_clients(bw_jobs_timers(proxy.jobs), clients, BW_TIMERS_CLIENTS_MAX);
    bw_jobs_recent_t recent[BW_JOBS_RECENT_MAX];
    size_t n = bw_jobs_recent(proxy.jobs, recent, BW_JOBS_RECENT_MAX);
    json_t *jobs = json_array();
    for (size_t i = 0; i < n && json_array_size(jobs) < (size_t)limit; i++) {
        if (!admin && strcmp(recent[i].client, client->name)) continue;
        void *raw;
        size_t len;
        if (bw_jobs_record(proxy.jobs, recent[i].id, &raw, &len)) continue;
        Bulkwrite__Internal__V1__JobRecord *rec = bulkwrite__internal__v1__job_record__unpack(NULL, len, raw);
        free(raw);
        if (!rec) continue;
        uint32_t submitted = 0, held = 0;
        json_t *shards = json_array();
        for (size_t k = 0; k < rec->n_shards; k++) {
            submitted += rec->shards[k]->ops;
            held += rec->shards[k]->held_ops;
            json_array_append_new(shards, json_integer(rec->shards[k]->shard));
        }
        int cancelled = bw_shard_table_job_cancelled(proxy.shards, recent[i].id);
        if (held && !cancelled && folded(clients, n_clients, recent[i].client)) {
            json_decref(shards);
            bulkwrite__internal__v1__job_record__free_unpacked(rec, NULL);
            continue;
        }
        json_t *o = json_pack("{s:s, s:s, s:I, s:I, s:I, s:s, s:o, s:b}", "job_id", recent[i].id, "client",
                              recent[i].client, "created_at_ms", (json_int_t)recent[i].created_at_ms, "submitted",
                              (json_int_t)submitted, "scheduled", (json_int_t)(cancelled ? 0 : held), "lane",
                              rec->lane && rec->lane[0] ? rec->lane : "default", "shards", shards, "cancelled",
                              cancelled);
        /* what the shards made of it, from the ledgers as GET /v1/jobs/{id} reads them */
        bw_jobs_summary_t sum;
        bw_jobs_summary(proxy.jobs, proxy.conf, proxy.shards, rec, recent[i].id, admin, &sum);
        if (sum.unknown[0]) {
            json_object_set_new(o, "unknown", json_string(sum.unknown));
        } else {
            json_object_set_new(o, "applied", json_integer(sum.applied));
            json_object_set_new(o, "failed", json_integer(sum.failed));
            json_object_set_new(o, "pending", json_integer(sum.pending));
            json_object_set_new(o, "cancelled_ops", json_integer(sum.cancelled));
            json_object_set_new(o, "lost", json_integer(sum.lost));
            json_object_set_new(o, "finished", json_boolean(sum.finished));
            if (sum.named) json_object_set_new(o, "sealed", json_boolean(sum.sealed));
        }
        if (rec->job_name && rec->job_name[0]) json_object_set_new(o, "job", json_string(rec->job_name));
        if (rec->request_id && rec->request_id[0]) json_object_set_new(o, "request_id", json_string(rec->request_id));
        if (rec->not_before_ms) json_object_set_new(o, "not_before_ms", json_integer(rec->not_before_ms));
        if (rec->n_after) {
            json_t *after = json_array();
            for (size_t k = 0; k < rec->n_after; k++) json_array_append_new(after, json_string(rec->after[k]));
            json_object_set_new(o, "after", after);
        }
        json_array_append_new(jobs, o);
        bulkwrite__internal__v1__job_record__free_unpacked(rec, NULL);
    }
    json_t *q = delay_queue(client, admin, clients, n_clients);
    free(clients);
    bw_clock_t k = {0};
    return bw_reply_json_cacheable(c, json_pack("{s:o, s:o}", "jobs", jobs, "delay_queue", q), &k);
}

static enum MHD_Result redirect_to_page(struct MHD_Connection *c, unsigned status) {
    struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(r, MHD_HTTP_HEADER_LOCATION, "/ui/");
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

int bw_ui_serve(struct MHD_Connection *c, const char *method, const char *url, const bw_auth_client_t *client,
                enum MHD_Result *ret) {
    if (strcmp(method, "GET")) return 0;
    int admin = !client || (client->roles & BW_ROLE_ADMIN);
    if (strcmp(url, "/ui") == 0) {
        *ret = redirect_to_page(c, MHD_HTTP_MOVED_PERMANENTLY);
    } else if (strcmp(url, "/") == 0) { /* found, not moved: / may serve something else one day */
        *ret = redirect_to_page(c, MHD_HTTP_FOUND);
    } else if (strncmp(url, "/ui/", 4) == 0) {
        *ret = serve_asset(c, url + 4);
    } else if (strcmp(url, "/v1/openapi.yaml") == 0) {
        *ret = serve_openapi(c);
    } else if (strcmp(url, "/v1/whoami") == 0) {
        *ret = whoami(c, client);
    } else if (strcmp(url, "/v1/fleet") == 0) {
        *ret = fleet(c, admin);
    } else if (strcmp(url, "/v1/jobs") == 0) {
        *ret = recent_jobs(c, client);
    } else {
        return 0;
    }
    return 1;
}
