/* partition.c — a partition's buffer: what is fetched, when fetching pauses, where it
 * resumes, and what happens when Kafka no longer holds the next message (a gap).
 *
 * Up to consumer.pull_count messages, and the partition's share of
 * consumer.buffer_max_bytes, are buffered per partition; a partition whose buffer is
 * full is paused, so a slow shard's backlog stays in Kafka, not in this process.
 * @locality dispatcher thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "consumer.h"
#include "gate.h"
#include "log.h"

/* What a buffered message costs besides its payload (librdkafka's message, headers and
 * buffer references): counted with it, so consumer.buffer_max_bytes bounds the memory of
 * small messages too, not only their payload. */
#define MESSAGE_OVERHEAD 256

static size_t message_cost(const rd_kafka_message_t *m) { return m->len + MESSAGE_OVERHEAD; }

static long header_long(rd_kafka_message_t *m, const char *name) {
    rd_kafka_headers_t *h;
    const void *v;
    size_t vlen;
    char tmp[24];
    if (rd_kafka_message_headers(m, &h) || rd_kafka_header_get_last(h, name, &v, &vlen) ||
        vlen >= sizeof(tmp))
        return -1;
    memcpy(tmp, v, vlen);
    tmp[vlen] = '\0';
    return strtol(tmp, NULL, 10);
}

/* The (object type, op, rows) a message's producer headers announce; 0 if it has none
 * that name a configured type and op (such a message goes alone). */
static int message_shape(rd_kafka_message_t *m, const bw_object_type_t **ot, long *op, long *rows) {
    rd_kafka_headers_t *h;
    const void *type;
    size_t type_len;
    char tname[128];
    if (rd_kafka_message_headers(m, &h) || rd_kafka_header_get_last(h, "bw-type", &type, &type_len) ||
        type_len >= sizeof(tname))
        return 0;
    memcpy(tname, type, type_len);
    tname[type_len] = '\0';
    *ot = bw_config_object_type(consumer.conf, tname);
    *op = header_long(m, "bw-op");
    *rows = header_long(m, "bw-rows");
    /* a message holds at most max_batch_bytes (≤ 1 GiB): a larger row count is a bogus
     * header, which must not overflow the planner's sums nor stall a row budget */
    return *ot && *op >= BW_OP_CREATE && *op <= BW_OP_DELETE && *rows >= 0 && *rows <= INT32_MAX;
}

/* A message of a job cancelled on the control topic (its key is the job's, or a named
 * job's part's, id): the applier skips it (apply.c), so it pays no rate. */
static int cancelled(const rd_kafka_message_t *m) {
    char id[33];
    if (!consumer.table || m->key_len != 32) return 0;
    memcpy(id, m->key, 32);
    id[32] = '\0';
    return bw_shard_table_job_cancelled(consumer.table, id);
}

static uint64_t limit_of(const bw_object_type_t *ot, long op) {
    return ot->batch_size[op] > 0 ? (uint64_t)ot->batch_size[op] : 1;
}

/* Statements of a run of `rows` rows of one (type, op), as the applier plans them:
 * full statements of the op's batch size, the rest in one more. */
static uint64_t run_statements(uint64_t rows, uint64_t limit) { return rows / limit + (rows % limit != 0); }

/* How many leading buffered messages form one job (one transaction), and what the job
 * costs the shard's budgets. The rows of consecutive messages of one (object type, op)
 * form a run that the applier cuts into statements of that op's batch size; a job takes
 * at most `max_statements` such statements and `max_rows` rows (the first message always
 * goes, whatever it costs: the limiter then makes the next job wait longer), and
 * consumer.max_batch_bytes of payload. (The applier may cut more: at repeated ids of an
 * UPDATE or UPSERT, and where a statement would pass the server's packet limit.)
 * Messages of cancelled jobs ride along for free: a job of only those costs nothing, so
 * a cancelled backlog is passed at once, not one rate token at a time. */
size_t bw_partition_plan_job(int slot, size_t max_messages, uint64_t max_statements, uint64_t max_rows,
                             bw_job_cost_t *cost) {
    const bw_partition_t *p = &consumer.partitions[slot];
    const bw_object_type_t *run_ot = NULL;
    long run_op = 0;
    uint64_t run_rows = 0, done_statements = 0; /* the run's rows; statements of runs before it */
    size_t n = 0, bytes = 0;
    *cost = (bw_job_cost_t){0, 0};
    if (max_messages > p->len) max_messages = p->len;
    int paid = 0; /* a message not cancelled is in the job */
    while (n < max_messages) {
        rd_kafka_message_t *m = p->buf[n];
        const bw_object_type_t *ot;
        long op, rows;
        if (cancelled(m)) { /* skipped by the applier: it costs neither statements nor rows */
            if (n > 0 && bytes + m->len > (size_t)consumer.conf->max_batch_bytes) break;
            bytes += m->len;
            n++;
            continue;
        }
        if (!message_shape(m, &ot, &op, &rows)) {
            if (n == 0) *cost = (bw_job_cost_t){1, 0}, n = 1; /* the applier dead-letters it, alone */
            break;
        }
        uint64_t limit = limit_of(ot, op);
        uint64_t before = done_statements, with = run_rows + (uint64_t)rows;
        if (ot != run_ot || op != run_op) { /* a new run */
            before += run_ot ? run_statements(run_rows, limit_of(run_ot, run_op)) : 0;
            with = (uint64_t)rows;
        }
        uint64_t statements = before + run_statements(with, limit);
        if (paid && (statements > max_statements || cost->rows + (uint64_t)rows > max_rows ||
                      bytes + m->len > (size_t)consumer.conf->max_batch_bytes))
            break;
        cost->statements = statements > 0 ? statements : 1; /* an empty message still costs its transaction */
        paid = 1;
        cost->rows += (uint64_t)rows;
        done_statements = before;
        run_ot = ot, run_op = op, run_rows = with;
        bytes += m->len;
        n++;
    }
    return n;
}

/* Where fetching resumes: after the last buffered message; before any message arrived,
 * where the partition was assigned (never the end of the log: a shard paused before it
 * applied anything must still get its backlog). */
static int64_t resume_point(int slot) {
    bw_partition_t *p = &consumer.partitions[slot];
    if (p->next_fetch >= 0) return p->next_fetch;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, consumer.conf->lanes[p->lane].topic, p->shard);
    int64_t at = RD_KAFKA_OFFSET_BEGINNING; /* the shard never stored an offset */
    if (p->assigned_from == RD_KAFKA_OFFSET_STORED) {
        /* its database could not be read at assignment: Kafka's committed offset */
        if (rd_kafka_committed(consumer.rk, l, 5000) == 0 && l->elems[0].offset >= 0) at = l->elems[0].offset;
    }
    rd_kafka_topic_partition_list_destroy(l);
    return at;
}

/* Fetching of the partition goes on at `offset` (librdkafka drops what it prefetched
 * for a paused partition, and stops a partition after an offset reset error). */
static void seek_to(int slot, int64_t offset) {
    const bw_partition_t *p = &consumer.partitions[slot];
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, consumer.conf->lanes[p->lane].topic, p->shard)->offset = offset;
    rd_kafka_error_t *e = rd_kafka_seek_partitions(consumer.rk, l, 5000);
    if (e) {
        bw_log(BW_LOG_ERROR, COMPONENT, p->shard, NULL, "seek %s to %lld: %s", consumer.conf->lanes[p->lane].topic,
               (long long)offset, rd_kafka_error_string(e));
        rd_kafka_error_destroy(e);
    }
    rd_kafka_topic_partition_list_destroy(l);
}

static void set_fetch_paused(int slot, int paused) {
    bw_partition_t *p = &consumer.partitions[slot];
    if (p->fetch_paused == paused) return;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, consumer.conf->lanes[p->lane].topic, p->shard);
    if (paused) {
        rd_kafka_pause_partitions(consumer.rk, l);
    } else {
        rd_kafka_resume_partitions(consumer.rk, l);
        seek_to(slot, resume_point(slot)); /* exactly after the buffer, whatever librdkafka's position */
    }
    rd_kafka_topic_partition_list_destroy(l);
    p->fetch_paused = paused;
}

/* A partition's share of consumer.buffer_max_bytes. */
static size_t byte_share(void) {
    int n = consumer.assigned_cnt > 0 ? consumer.assigned_cnt : 1;
    return (size_t)consumer.conf->buffer_max_bytes / (size_t)n;
}

/* Fetching runs unless the gate names a reason that stops it (gate.h: its ledger is
 * still being read, a pause, the shard is held — its failed batch stays buffered for the
 * probe —, its next messages are lost, or its buffer is full). The buffer is full at
 * consumer.pull_count messages or its share of the bytes, and stays full until half
 * drained: back-pressure's own state, apart from the other reasons. A server that is
 * down does not stop fetching: its shards' buffers stay bounded, and one of them must
 * have a message to probe the server with. */
void bw_partition_refresh_fetch(int slot) {
    bw_partition_t *p = &consumer.partitions[slot];
    size_t full = (size_t)consumer.conf->pull_count, share = byte_share();
    int over = p->len >= full || (p->len && p->bytes >= share);
    int under_half = p->len <= full / 2 && p->bytes <= share / 2;
    p->buffer_full = over || (p->buffer_full && !under_half);
    set_fetch_paused(slot, (bw_gate_slot(slot, bw_now_us()) & BW_GATE_STOPS_FETCH) != 0);
}

void bw_partition_refresh_shard(int shard) {
    for (int lane = 0; lane < consumer.conf->lane_cnt; lane++) {
        int slot = bw_config_slot(consumer.conf, lane, shard);
        if (consumer.partitions[slot].assigned) bw_partition_refresh_fetch(slot);
    }
}

int bw_partition_slot_of(const char *topic, int32_t partition) {
    if (partition < 0 || partition >= consumer.conf->shard_count) return -1;
    /* the default lane first: without lanes it is the only topic */
    int lane = strcmp(topic, consumer.conf->topic) == 0 ? 0 : bw_config_topic_lane(consumer.conf, topic);
    return lane < 0 ? -1 : bw_config_slot(consumer.conf, lane, partition);
}

void bw_partition_note_error(int shard, const char *kind, const char *message) {
    bw_shard_t *p = &consumer.shards[shard];
    p->errors[p->errors_next].at_ms = bw_wall_ms();
    p->errors[p->errors_next].kind = kind;
    snprintf(p->errors[p->errors_next].message, sizeof(p->errors[0].message), "%s", message);
    p->errors_next = (p->errors_next + 1) % 5;
}

/* The shard's next messages are gone from Kafka (an operator's retention, a truncated
 * log): deleted before they were applied. The shard stops at the gap, loudly: an alert
 * names the missing offsets, the status record carries them (jobs whose messages were
 * there report them lost), and the lag counts them. Nothing is skipped silently.
 * `failed` is the offset Kafka no longer holds (-1 if not known). */
static void on_lost(int slot, int64_t failed, const char *why) {
    bw_partition_t *p = &consumer.partitions[slot];
    int shard = p->shard;
    const char *topic = consumer.conf->lanes[p->lane].topic;
    int64_t lo = -1, hi = -1;
    /* fetching began where the ledger said (rebalance.c), so the position is the shard's */
    int64_t from = failed >= 0 ? failed : p->next_fetch >= 0 ? p->next_fetch : p->applied;
    rd_kafka_resp_err_t e = rd_kafka_query_watermark_offsets(consumer.rk, topic, shard, &lo, &hi, 5000);
    if (e || from < 0 || lo <= from) {
        /* not a gap (a stale position), or it cannot be told now: fetch again from there */
        bw_log(BW_LOG_WARN, COMPONENT, shard, NULL, "offset %lld was out of range (%s); fetching again from %lld%s%s",
               (long long)failed, why, (long long)(from >= 0 ? from : 0), e ? ": watermarks: " : "",
               e ? rd_kafka_err2str(e) : "");
        seek_to(slot, from >= 0 ? from : RD_KAFKA_OFFSET_BEGINNING);
        return;
    }
    p->lost_from = from;
    p->lost_to = lo;
    p->low = lo;
    p->high = hi;
    char msg[640];
    snprintf(msg, sizeof(msg),
             "offsets %lld to %lld of partition %d (%lld messages) were deleted from Kafka before the shard applied "
             "them; the shard stops at offset %lld (%s)%s%s%s%s",
             (long long)from, (long long)lo - 1, shard, (long long)(lo - from), (long long)from, why,
             consumer.conf->lane_cnt > 1 ? "; lane " : "", consumer.conf->lane_cnt > 1 ? consumer.conf->lanes[p->lane].name : "",
             consumer.conf->lane_cnt > 1 ? ", topic " : "", consumer.conf->lane_cnt > 1 ? topic : "");
    bw_log(BW_LOG_ERROR, COMPONENT, shard, NULL, "%s", msg);
    bw_partition_note_error(shard, "lost", msg);
    int64_t lost = 0; /* over the shard's lanes */
    for (int lane = 0; lane < consumer.conf->lane_cnt; lane++) {
        const bw_partition_t *q = &consumer.partitions[bw_config_slot(consumer.conf, lane, shard)];
        if (q->assigned && q->lost_to > q->lost_from) lost += q->lost_to - q->lost_from;
    }
    bw_metrics_set(consumer.metrics, BW_CM_LOST_MESSAGES, shard, 0, (double)lost);
    bw_alerts_fire(consumer.alerts, BW_ALERT_DATA_LOST, shard, msg);
    bw_partition_refresh_fetch(slot);
    p->published_applied = -2; /* publish at once */
}

/* Takes one message from the consumer queue into its partition's buffer.
 * Owns m from here on. */
void bw_partition_buffer(rd_kafka_message_t *m) {
    int slot = m->rkt ? bw_partition_slot_of(rd_kafka_topic_name(m->rkt), m->partition) : -1;
    int ours = slot >= 0 && consumer.partitions[slot].assigned;
    if (m->err == RD_KAFKA_RESP_ERR__FATAL) {
        /* e.g. FENCED_INSTANCE_ID: another consumer joined with this one's group.instance.id */
        char why[256];
        rd_kafka_resp_err_t cause = rd_kafka_fatal_error(consumer.rk, why, sizeof(why));
        bw_log(BW_LOG_ERROR, COMPONENT, -1, NULL, "kafka: fatal error %s: %s; this consumer stops (exit 1)%s",
               rd_kafka_err2name(cause), why, cause == RD_KAFKA_RESP_ERR_FENCED_INSTANCE_ID
               ? ": another consumer of the group runs with the same group.instance.id (consumer.instance_id)" : "");
        consumer.fatal = 1;
        atomic_store(&consumer.run, 0);
        rd_kafka_message_destroy(m);
        return;
    }
    if (m->err) {
        if (m->err == RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET && ours && !consumer.partitions[slot].ledger_pending)
            on_lost(slot, m->offset, rd_kafka_message_errstr(m));
        else if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF && m->err != RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET)
            bw_log(BW_LOG_WARN, COMPONENT, -1, NULL, "kafka: %s", rd_kafka_message_errstr(m));
        rd_kafka_message_destroy(m);
        return;
    }
    /* from a partition no longer ours, or fetched before its ledger said where to begin */
    if (!ours || consumer.partitions[slot].ledger_pending) {
        rd_kafka_message_destroy(m);
        return;
    }
    bw_partition_t *p = &consumer.partitions[slot];
    if ((p->len && m->offset <= p->buf[p->len - 1]->offset) || (p->next_fetch >= 0 && m->offset < p->next_fetch)) {
        /* a redelivery of what is already buffered or applied: keep the first copy */
        rd_kafka_message_destroy(m);
        return;
    }
    if (p->len == p->cap) {
        p->cap = p->cap ? p->cap * 2 : 16;
        p->buf = realloc(p->buf, p->cap * sizeof(*p->buf));
        if (!p->buf) abort();
    }
    p->buf[p->len++] = m;
    p->bytes += message_cost(m);
    p->next_fetch = m->offset + 1;
    bw_partition_refresh_fetch(slot);
}

/* The job's messages were applied: they leave the buffer (and this process). */
void bw_partition_drop_head(int slot, size_t cnt) {
    bw_partition_t *p = &consumer.partitions[slot];
    for (size_t i = 0; i < cnt; i++) {
        p->bytes -= message_cost(p->buf[i]);
        rd_kafka_message_destroy(p->buf[i]);
    }
    if (!cnt) return; /* a partition that never buffered has no buf (memmove from NULL is undefined) */
    memmove(p->buf, p->buf + cnt, (p->len - cnt) * sizeof(*p->buf));
    p->len -= cnt;
}

void bw_partition_drop_all(int slot) {
    bw_partition_drop_head(slot, consumer.partitions[slot].len);
}

void bw_partition_rewind(int slot, int64_t offset) {
    bw_partition_t *p = &consumer.partitions[slot];
    /* a ledger without the row applied nothing: from offset 0 itself, not the log's start,
     * so that messages Kafka deleted meanwhile are a gap (on_lost), never skipped */
    int64_t from = offset >= 0 ? offset : 0;
    bw_partition_drop_all(slot);
    p->applied = offset;
    p->next_fetch = p->assigned_from = from;
    p->commit_due = from; /* Kafka's commit follows the ledger back */
    if (p->committed > from) p->committed = from;
    p->published_applied = -2; /* publish at once */
    bw_trim_rewound(slot, from);
    if (!p->fetch_paused) seek_to(slot, from);
    bw_partition_refresh_fetch(slot); /* paused, it seeks to next_fetch when it resumes */
}

/* Wall clock (ms) of the oldest message the shard has not applied, as far as it is
 * known: the next buffered message's timestamp, or (a shard not fetched, e.g. paused)
 * no later than when its lag was first seen without progress. 0 if nothing waits. */
int64_t bw_partition_oldest_unapplied_ms(int slot) {
    const bw_partition_t *p = &consumer.partitions[slot];
    int64_t oldest = p->lagging_since_ms;
    if (p->len) {
        rd_kafka_timestamp_type_t type;
        int64_t ts = rd_kafka_message_timestamp(p->buf[0], &type);
        if (ts > 0 && (!oldest || ts < oldest)) oldest = ts;
    }
    return oldest;
}

int64_t bw_partition_shard_oldest_unapplied_ms(int shard) {
    int64_t oldest = 0;
    for (int lane = 0; lane < consumer.conf->lane_cnt; lane++) {
        int slot = bw_config_slot(consumer.conf, lane, shard);
        if (!consumer.partitions[slot].assigned) continue;
        int64_t t = bw_partition_oldest_unapplied_ms(slot);
        if (t && (!oldest || t < oldest)) oldest = t;
    }
    return oldest;
}
