#include "ledger.h"

#include <errmsg.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "sql.h"

/* The error of the last call on db: never 0 (a client that gave no number). */
static unsigned db_error(MYSQL *db) { return mysql_errno(db) ? mysql_errno(db) : CR_UNKNOWN_ERROR; }

static unsigned run(MYSQL *db, const bw_buf_t *b) {
    return mysql_real_query(db, b->data, (unsigned long)b->len) ? db_error(db) : 0;
}

/* Runs a SELECT and takes its rows: NULL with *err set on failure. */
static MYSQL_RES *select_rows(MYSQL *db, const bw_buf_t *b, unsigned *err) {
    MYSQL_RES *r = NULL;
    if (!(*err = run(db, b)) && !(r = mysql_store_result(db))) *err = db_error(db);
    return r;
}

/* Appends 'value', escaped. */
static void append_quoted(bw_buf_t *b, const char *s) {
    bw_buf_puts(b, "'");
    bw_sql_append_escaped(b, s, strlen(s));
    bw_buf_puts(b, "'");
}

/* Appends `dbNNNNN`.`table`: the ledger table of `shard`. */
static void append_table(bw_buf_t *b, const bw_config_t *conf, int shard, const char *table) {
    char dbname[80];
    bw_config_shard_db(conf, shard, dbname, sizeof(dbname));
    bw_buf_printf(b, "`%s`.`%s`", dbname, table);
}

/* Starts a statement on `shard`'s ledger table: head, `dbNNNNN`.`table`, tail. */
static void statement(bw_buf_t *b, const char *head, const bw_config_t *conf, int shard, const char *table,
                      const char *tail) {
    bw_buf_reset(b);
    bw_buf_puts(b, head);
    append_table(b, conf, shard, table);
    bw_buf_puts(b, tail);
}

/* Appends the condition that picks `slot`'s row of bw_offsets: its lane's topic, its shard's partition. */
static void append_partition(bw_buf_t *b, const bw_config_t *conf, int slot) {
    bw_buf_puts(b, " WHERE topic=");
    append_quoted(b, conf->lanes[slot / conf->shard_count].topic);
    bw_buf_printf(b, " AND kafka_partition=%d", slot % conf->shard_count);
}

void bw_ledger_schema_sql(const char *dbname, bw_buf_t *out) {
    /* where the consumer keeps each partition's next offset, committed with the batch */
    bw_buf_printf(out,
                  "CREATE TABLE IF NOT EXISTS `%s`.`bw_offsets` (topic VARCHAR(249) NOT NULL, "
                  "kafka_partition INT NOT NULL, next_offset BIGINT NOT NULL, "
                  "PRIMARY KEY (topic, kafka_partition)) ENGINE=InnoDB;\n",
                  dbname);
    /* one row per applied message, written in its batch's transaction: a message
     * resubmitted under the same request_id is found here and not applied again,
     * and the job's applied/failed counts on this shard are the sums */
    bw_buf_printf(out,
                  "CREATE TABLE IF NOT EXISTS `%s`.`bw_job_parts` (job_id CHAR(32) CHARACTER SET ascii NOT NULL, "
                  "part INT UNSIGNED NOT NULL, kafka_offset BIGINT NOT NULL, "
                  "rows_applied INT UNSIGNED NOT NULL, rows_failed INT UNSIGNED NOT NULL, "
                  "applied_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3), "
                  "PRIMARY KEY (job_id, part)) ENGINE=InnoDB;\n",
                  dbname);
    /* every op the shard refused, with the reason (also sent to the dead-letter topic) */
    bw_buf_printf(out,
                  "CREATE TABLE IF NOT EXISTS `%s`.`bw_job_failures` (job_id CHAR(32) CHARACTER SET ascii NOT NULL, "
                  "op_index INT UNSIGNED NOT NULL, part INT UNSIGNED NOT NULL, object_id BIGINT UNSIGNED NOT NULL, "
                  "error_code INT UNSIGNED NOT NULL, reason VARCHAR(1024) NOT NULL, "
                  "failed_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3), "
                  "op MEDIUMBLOB NULL, op_truncated TINYINT NOT NULL DEFAULT 0, "
                  "PRIMARY KEY (job_id, op_index)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;\n",
                  dbname);
    /* the op itself (its JSON, for a replay) is a later column: tables made before get it */
    bw_buf_printf(out,
                  "ALTER TABLE `%s`.`bw_job_failures` ADD COLUMN IF NOT EXISTS op MEDIUMBLOB NULL, "
                  "ADD COLUMN IF NOT EXISTS op_truncated TINYINT NOT NULL DEFAULT 0;\n",
                  dbname);
}

/* ---- bw_offsets ------------------------------------------------------------------- */

unsigned bw_ledger_read_offsets(MYSQL *db, const bw_config_t *conf, const int *slots, size_t n,
                                int64_t *offsets, bw_buf_t *scratch) {
    for (size_t i = 0; i < n; i++) offsets[i] = -1;
    for (size_t at = 0; at < n; at += BW_LEDGER_READ_CHUNK) {
        size_t end = n - at < BW_LEDGER_READ_CHUNK ? n : at + BW_LEDGER_READ_CHUNK;
        bw_buf_reset(scratch);
        for (size_t i = at; i < end; i++) {
            /* the index i comes back with the row, so rows may arrive in any order */
            bw_buf_printf(scratch, "%sSELECT %zu, next_offset FROM ", i > at ? " UNION ALL " : "", i);
            append_table(scratch, conf, slots[i] % conf->shard_count, "bw_offsets");
            append_partition(scratch, conf, slots[i]);
        }
        unsigned err;
        MYSQL_RES *r = select_rows(db, scratch, &err);
        if (!r) return err;
        MYSQL_ROW row;
        while ((row = mysql_fetch_row(r))) {
            size_t i = row[0] ? strtoull(row[0], NULL, 10) : n;
            if (i >= at && i < end && row[1]) offsets[i] = strtoll(row[1], NULL, 10);
        }
        mysql_free_result(r);
    }
    return 0;
}

unsigned bw_ledger_lock_offset(MYSQL *db, const bw_config_t *conf, int slot, int64_t *next,
                               bw_buf_t *scratch) {
    statement(scratch, "SELECT next_offset FROM ", conf, slot % conf->shard_count, "bw_offsets", "");
    append_partition(scratch, conf, slot);
    bw_buf_puts(scratch, " FOR UPDATE");
    unsigned err;
    MYSQL_RES *r = select_rows(db, scratch, &err);
    if (!r) return err;
    MYSQL_ROW row = mysql_fetch_row(r);
    *next = row && row[0] ? strtoll(row[0], NULL, 10) : -1;
    mysql_free_result(r);
    return 0;
}

unsigned bw_ledger_write_offset(MYSQL *db, const bw_config_t *conf, int slot, int64_t next,
                                bw_buf_t *scratch) {
    int shard = slot % conf->shard_count;
    statement(scratch, "INSERT INTO ", conf, shard, "bw_offsets", " (topic, kafka_partition, next_offset) VALUES (");
    append_quoted(scratch, conf->lanes[slot / conf->shard_count].topic);
    bw_buf_printf(scratch, ",%d,%" PRId64 ") ON DUPLICATE KEY UPDATE next_offset=VALUES(next_offset)", shard, next);
    return run(db, scratch);
}

/* ---- bw_job_parts ----------------------------------------------------------------- */

static int same_part(const bw_ledger_part_t *a, const bw_ledger_part_t *b) {
    return a->part == b->part && strcmp(a->job_id, b->job_id) == 0;
}

unsigned bw_ledger_find_applied(MYSQL *db, const bw_config_t *conf, int shard, bw_ledger_part_t *parts,
                                size_t n, bw_buf_t *scratch) {
    statement(scratch, "SELECT job_id, part FROM ", conf, shard, "bw_job_parts", " WHERE ");
    size_t asked = 0;
    for (size_t i = 0; i < n; i++) {
        bw_ledger_part_t *p = &parts[i];
        if (!p->job_id) continue;
        p->duplicate = 0;
        for (size_t k = 0; k < i && !p->duplicate; k++)
            if (parts[k].job_id && !parts[k].duplicate && same_part(&parts[k], p)) p->duplicate = 1;
        if (p->duplicate) continue;
        bw_buf_printf(scratch, "%s(job_id=", asked++ ? " OR " : "");
        append_quoted(scratch, p->job_id);
        bw_buf_printf(scratch, " AND part=%" PRIu32 ")", p->part);
    }
    if (!asked) return 0;
    unsigned err;
    MYSQL_RES *r = select_rows(db, scratch, &err);
    if (!r) return err;
    MYSQL_ROW row;
    while ((row = mysql_fetch_row(r))) {
        bw_ledger_part_t found = {.job_id = row[0], .part = (uint32_t)strtoul(row[1], NULL, 10)};
        for (size_t i = 0; i < n; i++)
            if (parts[i].job_id && same_part(&parts[i], &found)) parts[i].duplicate = 1;
    }
    mysql_free_result(r);
    return 0;
}

unsigned bw_ledger_write_parts(MYSQL *db, const bw_config_t *conf, int shard, const bw_ledger_part_t *parts,
                               size_t n, bw_buf_t *scratch) {
    statement(scratch, "INSERT INTO ", conf, shard, "bw_job_parts",
              " (job_id, part, kafka_offset, rows_applied, rows_failed) VALUES ");
    size_t rows = 0;
    for (size_t i = 0; i < n; i++) {
        const bw_ledger_part_t *p = &parts[i];
        if (!p->job_id || p->duplicate) continue;
        bw_buf_puts(scratch, rows++ ? ",(" : "(");
        append_quoted(scratch, p->job_id);
        bw_buf_printf(scratch, ",%" PRIu32 ",%" PRId64 ",%" PRIu32 ",%" PRIu32 ")", p->part, p->kafka_offset,
                      p->rows_applied, p->rows_failed);
    }
    return rows ? run(db, scratch) : 0;
}

void bw_ledger_part_id(const char job_id[33], uint32_t part, char out[33]) {
    snprintf(out, 33, "%.*s%012" PRIx32, BW_LEDGER_JOB_PREFIX, job_id, part);
}

uint32_t bw_ledger_part_of(const char *part_id) {
    return (uint32_t)strtoul(part_id + BW_LEDGER_JOB_PREFIX, NULL, 16);
}

/* " WHERE job_id=…", or the range of every part of a named job (ids are hex, checked by
 * the caller). */
static void append_job_match(bw_buf_t *b, const char *job_id, int named) {
    if (!named) {
        bw_buf_puts(b, " WHERE job_id=");
        append_quoted(b, job_id);
        return;
    }
    bw_buf_printf(b, " WHERE job_id BETWEEN '%.*s000000000000' AND '%.*sffffffffffff'", BW_LEDGER_JOB_PREFIX, job_id,
                  BW_LEDGER_JOB_PREFIX, job_id);
}

unsigned bw_ledger_read_job(MYSQL *db, const bw_config_t *conf, const char *job_id, int named,
                            bw_ledger_job_shard_t *shards, size_t n, bw_buf_t *scratch) {
    bw_buf_reset(scratch);
    for (size_t i = 0; i < n; i++) {
        shards[i].applied = shards[i].failed = 0;
        bw_buf_printf(scratch, "%sSELECT %d, COALESCE(SUM(rows_applied),0), COALESCE(SUM(rows_failed),0) FROM ",
                      i ? " UNION ALL " : "", shards[i].shard);
        append_table(scratch, conf, shards[i].shard, "bw_job_parts");
        append_job_match(scratch, job_id, named);
    }
    if (!n) return 0;
    unsigned err;
    MYSQL_RES *r = select_rows(db, scratch, &err);
    if (!r) return err;
    MYSQL_ROW row;
    while ((row = mysql_fetch_row(r))) {
        int s = atoi(row[0]);
        for (size_t i = 0; i < n; i++)
            if (shards[i].shard == s) {
                shards[i].applied = (uint32_t)strtoul(row[1], NULL, 10);
                shards[i].failed = (uint32_t)strtoul(row[2], NULL, 10);
            }
    }
    mysql_free_result(r);
    return 0;
}

/* ---- bw_job_failures -------------------------------------------------------------- */

unsigned bw_ledger_write_failures(MYSQL *db, const bw_config_t *conf, int shard, const bw_ledger_failure_t *failures,
                                  size_t n, size_t max_bytes, bw_buf_t *scratch) {
    size_t rows = 0;
    for (size_t i = 0; i <= n; i++) {
        /* a row: ~2.4 KB, and its op escaped (at most twice its length) */
        size_t next = i < n ? 2400 + 2 * (failures[i].op ? strlen(failures[i].op) : 0) : 0;
        if (rows && (i == n || scratch->len + next > max_bytes)) {
            /* an op refused again by a re-split resubmission keeps its latest reason and op */
            bw_buf_puts(scratch, " ON DUPLICATE KEY UPDATE reason=VALUES(reason), error_code=VALUES(error_code), "
                                 "op=VALUES(op), op_truncated=VALUES(op_truncated)");
            unsigned err = run(db, scratch);
            if (err) return err;
            rows = 0;
        }
        if (i == n) break;
        if (!rows) {
            statement(scratch, "INSERT INTO ", conf, shard, "bw_job_failures",
                      " (job_id, op_index, part, object_id, error_code, reason, op, op_truncated) VALUES ");
        }
        const bw_ledger_failure_t *f = &failures[i];
        size_t rlen = strlen(f->reason);
        bw_buf_puts(scratch, rows++ ? ",(" : "(");
        append_quoted(scratch, f->job_id);
        bw_buf_printf(scratch, ",%" PRIu32 ",%" PRIu32 ",%" PRIu64 ",%u,'", f->op_index, f->part, f->object_id,
                      f->error_code);
        bw_sql_append_escaped(scratch, f->reason, rlen > 1000 ? 1000 : rlen);
        bw_buf_puts(scratch, "',");
        if (f->op) append_quoted(scratch, f->op);
        else bw_buf_puts(scratch, "NULL");
        bw_buf_printf(scratch, ",%d)", f->op_truncated ? 1 : 0);
    }
    return 0;
}

unsigned bw_ledger_read_job_failures(MYSQL *db, const bw_config_t *conf, const char *job_id, int named,
                                     const bw_ledger_job_shard_t *shards, size_t n, int per_shard,
                                     bw_ledger_failure_t *out, size_t cap, size_t *cnt, bw_buf_t *scratch) {
    bw_buf_reset(scratch);
    size_t asked = 0;
    for (size_t i = 0; i < n; i++) {
        if (!shards[i].failed) continue;
        bw_buf_printf(scratch, "%s(SELECT %d, op_index, object_id, error_code, reason, job_id FROM ",
                      asked++ ? " UNION ALL " : "", shards[i].shard);
        append_table(scratch, conf, shards[i].shard, "bw_job_failures");
        append_job_match(scratch, job_id, named);
        bw_buf_printf(scratch, " ORDER BY job_id, op_index LIMIT %d)", per_shard);
    }
    if (!asked) return 0;
    unsigned err;
    MYSQL_RES *r = select_rows(db, scratch, &err);
    if (!r) return err;
    MYSQL_ROW row;
    while ((row = mysql_fetch_row(r)) && *cnt < cap)
        out[(*cnt)++] = (bw_ledger_failure_t){.shard = atoi(row[0]),
                                              .op_index = (uint32_t)strtoul(row[1], NULL, 10),
                                              .object_id = strtoull(row[2], NULL, 10),
                                              .error_code = (unsigned)strtoul(row[3], NULL, 10),
                                              .reason = strdup(row[4] ? row[4] : ""),
                                              .job_part = named && row[5] && strlen(row[5]) == 32 ? bw_ledger_part_of(row[5]) : 0};
    mysql_free_result(r);
    return 0;
}

unsigned bw_ledger_read_failures_page(MYSQL *db, const bw_config_t *conf, const char *job_id, int named, int shard,
                                      const char *after_id, uint32_t after_op, unsigned code, size_t limit,
                                      bw_ledger_failure_t *out, size_t *cnt, bw_buf_t *scratch) {
    *cnt = 0;
    bw_buf_reset(scratch);
    bw_buf_puts(scratch, "SELECT job_id, op_index, object_id, error_code, reason, op, op_truncated FROM ");
    append_table(scratch, conf, shard, "bw_job_failures");
    append_job_match(scratch, job_id, named);
    if (after_id) {
        bw_buf_puts(scratch, " AND (job_id>");
        append_quoted(scratch, after_id);
        bw_buf_puts(scratch, " OR (job_id=");
        append_quoted(scratch, after_id);
        bw_buf_printf(scratch, " AND op_index>%" PRIu32 "))", after_op);
    }
    if (code) bw_buf_printf(scratch, " AND error_code=%u", code);
    bw_buf_printf(scratch, " ORDER BY job_id, op_index LIMIT %zu", limit);
    unsigned err;
    MYSQL_RES *r = select_rows(db, scratch, &err);
    if (!r) return err;
    MYSQL_ROW row;
    while ((row = mysql_fetch_row(r)) && *cnt < limit) {
        unsigned long *len = mysql_fetch_lengths(r);
        bw_ledger_failure_t *f = &out[(*cnt)++];
        *f = (bw_ledger_failure_t){.shard = shard,
                                   .op_index = (uint32_t)strtoul(row[1], NULL, 10),
                                   .object_id = strtoull(row[2], NULL, 10),
                                   .error_code = (unsigned)strtoul(row[3], NULL, 10),
                                   .reason = strdup(row[4] ? row[4] : ""),
                                   .job_part = named && strlen(row[0]) == 32 ? bw_ledger_part_of(row[0]) : 0,
                                   .op_truncated = row[6] && atoi(row[6])};
        snprintf(f->part_id, sizeof(f->part_id), "%s", row[0]);
        if (row[5]) {
            char *op = malloc(len[5] + 1);
            if (!op) abort();
            memcpy(op, row[5], len[5]);
            op[len[5]] = '\0';
            f->op = op;
        }
    }
    mysql_free_result(r);
    return 0;
}

void bw_ledger_failure_free(bw_ledger_failure_t *f) {
    free(f->reason);
    free((char *)f->op);
    f->reason = NULL;
    f->op = NULL;
}
