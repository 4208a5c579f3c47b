#include "fleet.h"

#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "log.h"

/* 16 hex digits of SHA-256(text), or of HMAC-SHA-256 under key when key is not NULL (a
 * secret's print must not be a plain hash of it). */
static void print_of(const bw_buf_t *text, const char *key, char out[17]) {
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    if (key) HMAC(EVP_sha256(), key, (int)strlen(key), (const unsigned char *)text->data, text->len, d, &len);
    else SHA256((const unsigned char *)(text->data ? text->data : ""), text->len, d);
    for (int i = 0; i < 8; i++) snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static void add(bw_fleet_print_t *out, int *n, const char *key, bw_buf_t *text, const char *hmac_key) {
    out[*n].key = key;
    print_of(text, hmac_key, out[*n].print);
    (*n)++;
    text->len = 0;
}

int bw_fleet_prints(const bw_config_t *conf, int proxy, bw_fleet_print_t out[BW_FLEET_PRINTS_MAX]) {
    bw_buf_t b;
    bw_buf_init(&b);
    int n = 0;
    /* the shard map: which server holds which shard, in which database */
    bw_buf_printf(&b, "%d %s", conf->shard_count, conf->database_prefix);
    for (int i = 0; i < conf->server_cnt; i++)
        bw_buf_printf(&b, "\n%s %d %d", conf->servers[i].name, conf->servers[i].first_shard, conf->servers[i].last_shard);
    add(out, &n, "shards", &b, NULL);
    for (int i = 0; i < conf->object_type_cnt; i++) {
        const bw_object_type_t *o = &conf->object_types[i];
        bw_buf_printf(&b, "%s %d %s %s %d", o->name, o->type_id, o->table, o->id_column, o->create_route);
        for (int op = 0; op < BW_OP_MAX; op++) bw_buf_printf(&b, " %d", o->batch_size[op]);
        for (int c = 0; c < o->column_cnt; c++)
            bw_buf_printf(&b, "\n  %s %d %d %d %d", o->columns[c].name, o->columns[c].type, o->columns[c].nullable,
                          o->columns[c].required, o->columns[c].max_length);
        bw_buf_puts(&b, "\n");
    }
    add(out, &n, "object_types", &b, NULL);
    for (int l = 0; l < conf->lane_cnt; l++)
        bw_buf_printf(&b, "%s %d %s\n", conf->lanes[l].name, conf->lanes[l].weight, conf->lanes[l].topic);
    add(out, &n, "lanes", &b, NULL);
    bw_buf_printf(&b, "%d", conf->message_max_bytes);
    add(out, &n, "kafka.message_max_bytes", &b, NULL);
    if (proxy) {
        bw_buf_puts(&b, "bulkwrite fleet: job ids");
        add(out, &n, "proxy.auth.job_id_secret", &b, conf->proxy_auth_job_id_secret);
        /* open proxies share one request_id namespace; with clients, each has its own */
        bw_buf_puts(&b, conf->proxy_auth_clients_file[0] ? "clients" : "open");
        add(out, &n, "proxy.auth.clients_file", &b, NULL);
    }
    bw_buf_free(&b);
    return n;
}

void bw_fleet_host_id(int port, const char *fallback, char *out, size_t size) {
    char host[256];
    if (gethostname(host, sizeof(host))) snprintf(host, sizeof(host), "%s", fallback);
    int n = (int)strnlen(host, sizeof(host));
    if (port) snprintf(out, size, "%.*s:%d", n, host, port);
    else snprintf(out, size, "%.*s:pid%ld", n, host, (long)getpid());
}


/* The lines of text (newline-separated) as pointers into a copy; *cnt of them. */
static char **split_lines(const char *text, size_t *cnt, char **copy) {
    *cnt = 0;
    *copy = strdup(text ? text : "");
    size_t cap = 1;
    for (const char *p = *copy; p && *p; p++) cap += *p == '\n';
    char **lines = calloc(cap + 1, sizeof(*lines));
    if (!lines || !*copy) return lines;
    char *save;
    for (char *line = strtok_r(*copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) lines[(*cnt)++] = line;
    return lines;
}

/* bw_fleet_pack, with what hook (may be NULL) fills in. */
/* The member record of this process into *m, pointing into ps, pp and *copy (free
 * m->credentials and *copy after use). */
typedef struct {
    Bulkwrite__Internal__V1__FleetMember m;
    Bulkwrite__Internal__V1__SettingPrint ps[BW_FLEET_PRINTS_MAX], *pp[BW_FLEET_PRINTS_MAX];
    char *copy;
} member_rec_t;

static void member_fill(member_rec_t *r, const char *role, const char *instance, int64_t started_at_ms, int64_t now_ms,
                        const bw_fleet_print_t *prints, int n, const char *credentials, int agrees,
                        const bw_fleet_hook_t *hook) {
    Bulkwrite__Internal__V1__FleetMember *m = &r->m;
    bulkwrite__internal__v1__fleet_member__init(m);
    for (int i = 0; i < n && i < BW_FLEET_PRINTS_MAX; i++) {
        bulkwrite__internal__v1__setting_print__init(&r->ps[i]);
        r->ps[i].key = (char *)prints[i].key;
        r->ps[i].print = (char *)prints[i].print;
        r->pp[i] = &r->ps[i];
    }
    m->role = (char *)role;
    m->instance = (char *)instance;
    m->started_at_ms = started_at_ms;
    m->seen_at_ms = now_ms;
    m->agrees = agrees != 0;
    m->settings = r->pp;
    m->n_settings = (size_t)(n < BW_FLEET_PRINTS_MAX ? n : BW_FLEET_PRINTS_MAX);
    m->credentials = split_lines(credentials, &m->n_credentials, &r->copy);
    if (hook && hook->fill) hook->fill(hook->arg, m, now_ms);
}

static void member_release(member_rec_t *r) {
    free(r->m.credentials);
    free(r->copy);
}

void *bw_fleet_pack(const char *role, const char *instance, int64_t started_at_ms, int64_t now_ms,
                    const bw_fleet_print_t *prints, int n, const char *credentials, int agrees, size_t *len) {
    member_rec_t r;
    member_fill(&r, role, instance, started_at_ms, now_ms, prints, n, credentials, agrees, NULL);
    *len = bulkwrite__internal__v1__fleet_member__get_packed_size(&r.m);
    void *buf = malloc(*len ? *len : 1);
    if (buf) bulkwrite__internal__v1__fleet_member__pack(&r.m, buf);
    member_release(&r);
    return buf;
}

/* Whether member m started before this process (ties: by instance name). */
static int earlier(const Bulkwrite__Internal__V1__FleetMember *m, const char *instance, int64_t started_at_ms) {
    return m->started_at_ms < started_at_ms ||
           (m->started_at_ms == started_at_ms && strcmp(m->instance ? m->instance : "", instance) < 0);
}

/* A credential this process knows as another client than member m does: 1 with why. */
static int credential_differs(const char *credentials, const Bulkwrite__Internal__V1__FleetMember *m, char *why, size_t why_size) {
    for (const char *line = credentials; line && *line;) {
        const char *nl = strchr(line, '\n'), *sp = memchr(line, ' ', nl ? (size_t)(nl - line) : strlen(line));
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        for (size_t i = 0; sp && i < m->n_credentials; i++) {
            const char *theirs = m->credentials[i], *tsp = strchr(theirs, ' ');
            if (!tsp || (size_t)(tsp - theirs) != (size_t)(sp - line) || memcmp(theirs, line, (size_t)(sp - line)))
                continue;
            if (strlen(tsp) == (size_t)(line + len - sp) && !memcmp(tsp, sp, strlen(tsp))) continue;
            snprintf(why, why_size, "proxy.auth.clients_file: a credential (%.*s) of client \"%.*s\" here is client "
                     "\"%s\" on %s %s, running since before this one: a resend through the other proxy would be "
                     "another job (docs/deployment.md)", (int)(sp - line), line, (int)(line + len - sp - 1), sp + 1,
                     tsp + 1, m->role ? m->role : "?", m->instance);
            return 1;
        }
        line = nl ? nl + 1 : line + len;
    }
    return 0;
}

int bw_fleet_check(const char *instance, int64_t started_at_ms, const bw_fleet_print_t *prints, int n,
                   const char *credentials, Bulkwrite__Internal__V1__FleetMember *const *members, size_t member_cnt,
                   int64_t now_ms, char *why, size_t why_size) {
    for (size_t i = 0; i < member_cnt; i++) {
        const Bulkwrite__Internal__V1__FleetMember *m = members[i];
        if (!m->instance || !strcmp(m->instance, instance) || now_ms - m->seen_at_ms > BW_FLEET_STALE_MS || !m->agrees)
            continue;
        if (!earlier(m, instance, started_at_ms)) continue;
        for (int p = 0; p < n; p++)
            for (size_t s = 0; s < m->n_settings; s++) {
                const Bulkwrite__Internal__V1__SettingPrint *sp = m->settings[s];
                if (!sp->key || strcmp(sp->key, prints[p].key) || !sp->print || !strcmp(sp->print, prints[p].print))
                    continue;
                snprintf(why, why_size, "%s differs from that of %s %s, running since before this one (print %s here, "
                         "%s there): every process of a deployment needs the same (docs/deployment.md)",
                         prints[p].key, m->role ? m->role : "?", m->instance, prints[p].print, sp->print);
                return -1;
            }
        if (credential_differs(credentials, m, why, why_size)) return -1;
    }
    return 0;
}

void bw_fleet_self_init(bw_fleet_self_t *self, const char *role, const char *instance, int64_t started_at_ms,
                        const bw_config_t *conf, const char *credentials) {
    memset(self, 0, sizeof(*self));
    self->role = role;
    snprintf(self->instance, sizeof(self->instance), "%s", instance);
    self->started_at_ms = started_at_ms;
    self->print_cnt = bw_fleet_prints(conf, strcmp(role, "proxy") == 0, self->prints);
    bw_fleet_self_set_credentials(self, credentials);
    self->agrees = 1;
}

void bw_fleet_self_set_credentials(bw_fleet_self_t *self, const char *credentials) {
    free(self->credentials);
    self->credentials = credentials ? strdup(credentials) : NULL;
    self->next_ms = 0; /* publish and check at once */
}

void bw_fleet_self_free(bw_fleet_self_t *self) {
    free(self->credentials);
    self->credentials = NULL;
}

/* This process's presence (NULL: a tombstone, it leaves). */
static void produce(const bw_fleet_self_t *self, rd_kafka_t *rk, const char *topic, const Bulkwrite__Internal__V1__FleetMember *m) {
    char key[340];
    int klen = bw_member_key(self->role, self->instance, key, sizeof(key));
    rd_kafka_resp_err_t e = bw_record_produce(rk, topic, BW_RECORD_PRESENCE, key, (size_t)klen, m ? &m->base : NULL);
    if (e) bw_log(BW_LOG_DEBUG, "fleet", -1, NULL, "presence record not sent: %s", rd_kafka_err2str(e));
}

int bw_fleet_turn(bw_fleet_self_t *self, rd_kafka_t *rk, const char *topic, bw_shard_table_t *table, int64_t now_ms) {
    if (now_ms < self->next_ms) return self->agrees;
    self->next_ms = now_ms + BW_FLEET_INTERVAL_MS;
    Bulkwrite__Internal__V1__FleetMember **members;
    size_t n = bw_shard_table_members(table, &members);
    char why[sizeof(self->why)];
    int agrees = bw_fleet_check(self->instance, self->started_at_ms, self->prints, self->print_cnt, self->credentials,
                                members, n, now_ms, why, sizeof(why)) == 0;
    if (!agrees && (self->agrees || strcmp(why, self->why)))
        bw_log(BW_LOG_ERROR, "fleet", -1, NULL, "%s %s: %s; not ready until it is the same", self->role, self->instance,
               why);
    else if (agrees && !self->agrees)
        bw_log(BW_LOG_INFO, "fleet", -1, NULL, "%s %s: its settings agree with the fleet's again", self->role,
               self->instance);
    snprintf(self->why, sizeof(self->why), "%s", agrees ? "" : why);
    self->agrees = agrees;
    member_rec_t rec;
    member_fill(&rec, self->role, self->instance, self->started_at_ms, now_ms, self->prints, self->print_cnt,
                self->credentials, agrees, self->hook);
    produce(self, rk, topic, &rec.m);
    member_release(&rec);
    if (self->hook && self->hook->read) self->hook->read(self->hook->arg, self->instance, members, n, now_ms);
    bw_shard_table_members_free(members, n);
    rd_kafka_poll(rk, 0);
    return agrees;
}

void bw_fleet_leave(const bw_fleet_self_t *self, rd_kafka_t *rk, const char *topic) {
    produce(self, rk, topic, NULL);
    rd_kafka_flush(rk, 2000);
}
