/* bw-sqlbench — the consumer's statement paths against one MariaDB, on the feed's pin
 * rows (id, owner_id, board_id, title, like_count: the 6 columns of bw-workload's feed),
 * one transaction per statement, rows/s:
 *
 *   ceiling   the text multi-row INSERT, built before the clock starts (the bare statement)
 *   text      the same built by bw_sql_build on the clock (the consumer's text path)
 *   bound     bw_sqlbind_execute: one prepared INSERT over arrays (the array-bound path)
 *
 * for CREATE, then UPSERT of the same rows (every row changes). Each round runs the
 * three in a rotating order (the machine is noisy: compare within a round).
 *
 * usage: bw-sqlbench [-c CONF] PORT [ROUNDS [STATEMENTS [ROWS]]]
 * It creates and drops database bwsqlbench00000 on 127.0.0.1:PORT as root (empty password). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "db.h"
#include "shard.h"
#include "sql.h"
#include "sqlbind.h"
#include "bw.h"

static MYSQL *db;

/* Replaces a string the config owns. */
static void set(char **p, const char *v) {
    free(*p);
    if (!(*p = strdup(v))) abort();
}

static void q(const char *s, size_t n) {
    if (mysql_real_query(db, s, (unsigned long)n)) {
        fprintf(stderr, "bw-sqlbench: %s: %.200s\n", mysql_error(db), s);
        exit(1);
    }
}

int main(int argc, char **argv) {
    const char *conf_path = "conf/bulkwrite.conf";
    if (argc > 2 && strcmp(argv[1], "-c") == 0) {
        conf_path = argv[2];
        argv += 2;
        argc -= 2;
    }
    if (argc < 2) {
        fprintf(stderr, "usage: bw-sqlbench [-c CONF] PORT [ROUNDS [STATEMENTS [ROWS]]]\n");
        return 2;
    }
    int rounds = argc > 2 ? atoi(argv[2]) : 5, stmts = argc > 3 ? atoi(argv[3]) : 100;
    size_t n = argc > 4 ? (size_t)atoi(argv[4]) : 500;
    char err[1024];
    bw_config_t *conf = bw_config_load(conf_path, err, sizeof(err));
    if (!conf) {
        fprintf(stderr, "bw-sqlbench: %s\n", err);
        return 1;
    }
    /* one server, the one to measure; the pin type as configured, its batch size lifted */
    conf->servers[0].port = atoi(argv[1]);
    set(&conf->servers[0].host, "127.0.0.1");
    set(&conf->servers[0].user, "root");
    set(&conf->servers[0].password, "");
    bw_object_type_t ot = *bw_config_object_type(conf, "pin");
    ot.batch_size[BW_OP_CREATE] = ot.batch_size[BW_OP_UPSERT] = (int)n;
    if (!(db = bw_db_connect(conf, 0, err, sizeof(err)))) {
        fprintf(stderr, "bw-sqlbench: %s\n", err);
        return 1;
    }
    /* one shard database, bwsqlbench00000, made as bwctl schema makes it */
    set(&conf->database_prefix, "bwsqlbench");
    conf->servers[0].first_shard = conf->servers[0].last_shard = 0;
    const char *dbname = "bwsqlbench00000";
    q("DROP DATABASE IF EXISTS bwsqlbench00000", 39);
    bw_buf_t ddl;
    bw_buf_init(&ddl);
    bw_db_schema_sql(conf, 0, &ddl);
    for (char *line = ddl.data, *nl; *line; line = nl + 1) {
        nl = strchr(line, '\n');
        q(line, (size_t)(nl - line - 1)); /* without the ';' */
    }

    /* the feed's rows: batch columns owner_id, board_id, title, like_count */
    int colmap[4] = {bw_config_column(&ot, "owner_id"), bw_config_column(&ot, "board_id"),
                     bw_config_column(&ot, "title"), bw_config_column(&ot, "like_count")};
    Bulkwrite__V1__Value *vals = calloc(n * 4, sizeof(*vals));
    Bulkwrite__V1__RowField *fields = calloc(n * 4, sizeof(*fields)), **fp = calloc(n * 4, sizeof(*fp));
    bw_sql_row_t *rows = calloc(n, sizeof(*rows));
    char (*titles)[128] = calloc(n, 128);
    for (size_t r = 0; r < n; r++) {
        uint64_t id = bw_id_make(3, 1, r + 1);
        snprintf(titles[r], 128, "pin %" PRIu64 " \xe2\x80\x94 l'\xc3\xa9t\xc3\xa9 \"quoted\" \\ \xf0\x9f\x98\x80", id);
        for (int f = 0; f < 4; f++) {
            Bulkwrite__V1__Value *v = &vals[r * 4 + f];
            bulkwrite__v1__value__init(v);
            bulkwrite__v1__row_field__init(&fields[r * 4 + f]);
            fields[r * 4 + f].column = (uint32_t)f;
            fields[r * 4 + f].value = v;
            fp[r * 4 + f] = &fields[r * 4 + f];
            v->kind_case = f == 2 ? BULKWRITE__V1__VALUE__KIND_STRING_VALUE : BULKWRITE__V1__VALUE__KIND_INT_VALUE;
        }
        vals[r * 4 + 0].int_value = 211106232533034 + (int64_t)(r % 7);
        vals[r * 4 + 1].int_value = (int64_t)(r % 100);
        vals[r * 4 + 2].string_value = (ProtobufCBinaryData){strlen(titles[r]), (uint8_t *)titles[r]};
        rows[r] = (bw_sql_row_t){id, 4, fp + r * 4, colmap};
    }

    bw_sqlbind_t sb;
    bw_sqlbind_cache_t cache;
    bw_sqlbind_init(&sb);
    bw_sqlbind_cache_open(&cache, db);
    if (!cache.bulk) fprintf(stderr, "bw-sqlbench: the server cannot execute arrays: 'bound' is the text path\n");
    bw_buf_t sql;
    bw_buf_init(&sql);
    bw_buf_t *pre = calloc((size_t)stmts, sizeof(*pre));
    printf("%d statements of %zu rows per figure, rows/s\n", stmts, n);
    printf("round  op      ceiling     text    bound   bound/ceiling\n");
    uint64_t next = 1;
    for (int rd = 0; rd < rounds; rd++) {
        double rate[2][3];
        for (int k = 0; k < 3; k++) {
            int way = (k + rd) % 3;
            uint64_t base = next;
            next += (uint64_t)stmts * n;
            for (int op = BW_OP_CREATE; op <= BW_OP_UPSERT; op += BW_OP_UPSERT - BW_OP_CREATE) {
                int like = op == BW_OP_UPSERT;
                for (size_t r = 0; r < n; r++) vals[r * 4 + 3].int_value = like;
                if (way == 0)
                    for (int s = 0; s < stmts; s++) {
                        for (size_t r = 0; r < n; r++) rows[r].id = base + (uint64_t)s * n + r;
                        bw_sql_build(&pre[s], dbname, &ot, op, rows, n);
                    }
                int64_t t0 = bw_now_us();
                for (int s = 0; s < stmts; s++) {
                    for (size_t r = 0; r < n; r++) rows[r].id = base + (uint64_t)s * n + r;
                    if (way == 0) {
                        q(pre[s].data, pre[s].len);
                    } else if (way == 1) {
                        bw_sql_build(&sql, dbname, &ot, op, rows, n);
                        q(sql.data, sql.len);
                    } else {
                        unsigned e = 0;
                        const char *msg = "";
                        bw_sqlbind_status_t st = bw_sqlbind_execute(&sb, &cache, db, dbname, &ot, op, rows, n, &e, &msg);
                        if (st == BW_SQLBIND_TEXT) {
                            bw_sql_build(&sql, dbname, &ot, op, rows, n);
                            q(sql.data, sql.len);
                        } else if (st == BW_SQLBIND_ERROR) {
                            fprintf(stderr, "bw-sqlbench: bound %s: %s (%u)\n", bw_op_name(op), msg, e);
                            return 1;
                        }
                    }
                    q("COMMIT", 6);
                }
                rate[like][way] = (double)stmts * (double)n * 1e6 / (double)(bw_now_us() - t0);
            }
        }
        for (int like = 0; like < 2; like++)
            printf("%5d  %-6s %8.0f %8.0f %8.0f   %.2f\n", rd, like ? "upsert" : "create", rate[like][0], rate[like][1],
                   rate[like][2], rate[like][2] / rate[like][0]);
        fflush(stdout);
    }
    q("DROP DATABASE bwsqlbench00000", 29);
    bw_sqlbind_cache_close(&cache);
    bw_sqlbind_free(&sb);
    mysql_close(db);
    for (int s = 0; s < stmts; s++) bw_buf_free(&pre[s]);
    free(pre);
    bw_buf_free(&sql);
    bw_buf_free(&ddl);
    free(vals);
    free(fields);
    free(fp);
    free(rows);
    free(titles);
    bw_config_destroy(conf);
    return 0;
}
