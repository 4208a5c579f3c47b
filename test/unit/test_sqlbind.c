/* test_sqlbind.c — array-bound statements (store/sqlbind.h) against a live MariaDB:
 * every value lands byte for byte as the text statement lands it (NULLs, DEFAULTs, all
 * 256 byte values, 4-byte UTF-8, embedded NULs, int and double extremes); through the
 * applier, values at a column's max length apply and one over fails alone, a duplicate
 * key mid-array fails only its row, upserts count one per row, per message; prepared
 * statements are bounded per connection and closed with it. */
#include <inttypes.h>
#include <mysql.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "apply.h"
#include "consumer_metrics.h"
#include "db.h"
#include "helpers.h"
#include "shard.h"
#include "sql.h"
#include "sqlbind.h"

#define JOB_A "abababababababababababababababab"
#define JOB_B "cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd"

static bw_arena_t A;
static bw_config_t *conf;
static MYSQL *db;

static uint64_t pin(uint64_t local) { return bw_id_make(0, 1, local); }

static int setup(void) {
    bw_arena_init(&A, 1 << 16);
    if (!(conf = t_live_config("bwbind"))) return 0;
    char err[512];
    db = bw_db_connect(conf, 0, err, sizeof(err));
    ck_assert_msg(db != NULL, "connect: %s", err);
    mysql_autocommit(db, 1);
    const char *tables[] = {"pins", "boards", "bw_offsets", "bw_job_parts", "bw_job_failures"};
    for (int s = 0; s < 2; s++)
        for (size_t i = 0; i < BW_ARRAY_LEN(tables); i++) {
            char q[128];
            snprintf(q, sizeof(q), "TRUNCATE TABLE bwbind0000%d.%s", s, tables[i]);
            ck_assert_msg(mysql_query(db, q) == 0, "%s: %s", q, mysql_error(db));
        }
    return 1;
}

static void teardown(void) {
    if (db) mysql_close(db);
    db = NULL;
    bw_config_destroy(conf);
    conf = NULL;
    bw_arena_destroy(&A);
}

static long long scalar(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static long long scalar(const char *fmt, ...) {
    char q[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(q, sizeof(q), fmt, ap);
    va_end(ap);
    return t_scalar(db, q);
}

/* ---- values and rows ------------------------------------------------------------- */

#define S(lit) t_v_str(&A, lit, sizeof(lit) - 1)

/* A row setting batch columns (the identity map onto config columns) col_0, v_0, …. */
static const int IDENTITY[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
static bw_sql_row_t row(uint64_t id, size_t n, ...) {
    Bulkwrite__Internal__V1__RowField **f = bw_arena_alloc(&A, (n + 1) * sizeof(*f));
    va_list ap;
    va_start(ap, n);
    for (size_t i = 0; i < n; i++) {
        f[i] = bw_arena_alloc(&A, sizeof(**f));
        bulkwrite__internal__v1__row_field__init(f[i]);
        f[i]->column = (uint32_t)va_arg(ap, int);
        f[i]->value = va_arg(ap, Bulkwrite__V1__Value *);
    }
    va_end(ap);
    return (bw_sql_row_t){id, n, f, IDENTITY};
}

/* ---- bound against text, value by value ------------------------------------------ */

static const struct {
    const char *s;
    size_t len;
} HOSTILE[] = {
#define H(lit) {lit, sizeof(lit) - 1}
    H("it's"), H("back\\slash\\"), H("nul\0in\0side"), H("\0"), H("line\nfeed\rcr\x1asub"),
    H("'; DROP TABLE pins; --"), H("\xf0\x9f\x98\x80\xf0\x9f\x8d\x95 4-byte"), H(""), H("trailing   "),
    H("\\\0'\"\n\r\x1a\\"),
#undef H
};
#define NH BW_ARRAY_LEN(HOSTILE)

/* Applies rows with array binding into shard 0 and as text into shard 1. */
static void both_ways(const bw_object_type_t *ot, int op, bw_sql_row_t *rows, size_t n) {
    bw_sqlbind_t sb;
    bw_sqlbind_cache_t cache;
    bw_sqlbind_init(&sb);
    bw_sqlbind_cache_open(&cache, db);
    ck_assert_msg(cache.bulk, "MariaDB 10.11 announces bulk operations");
    unsigned err = 0;
    const char *msg = "";
    size_t done = 0;
    while (done < n) {
        size_t k = bw_sql_plan(ot, op, rows + done, n - done);
        bw_sqlbind_status_t st = bw_sqlbind_execute(&sb, &cache, db, "bwbind00000", ot, op, rows + done, k, &err, &msg);
        ck_assert_msg(st == BW_SQLBIND_OK, "bound %s: %s (%u)", bw_op_name(op), msg, err);
        done += k;
    }
    bw_sqlbind_cache_close(&cache);
    bw_sqlbind_free(&sb);
    bw_buf_t b;
    bw_buf_init(&b);
    for (done = 0; done < n;) {
        size_t k = bw_sql_plan(ot, op, rows + done, n - done);
        bw_sql_build(&b, "bwbind00001", ot, op, rows + done, k);
        ck_assert_msg(mysql_real_query(db, b.data, b.len) == 0, "text: %s", mysql_error(db));
        done += k;
    }
    bw_buf_free(&b);
}

/* Every row of `table` in both shards, each column as hex, and NULL as NULL: equal. */
static void expect_same_tables(const char *table, const char *cols) {
    char q[1024];
    snprintf(q, sizeof(q),
             "SELECT COUNT(*) FROM (SELECT %s FROM bwbind00000.%s UNION ALL SELECT %s FROM bwbind00001.%s) u", cols,
             table, cols, table);
    long long total = t_scalar(db, q);
    snprintf(q, sizeof(q),
             "SELECT COUNT(*) FROM (SELECT %s FROM bwbind00000.%s UNION SELECT %s FROM bwbind00001.%s) u", cols, table,
             cols, table);
    long long distinct = t_scalar(db, q);
    snprintf(q, sizeof(q), "SELECT COUNT(*) FROM bwbind00000.%s", table);
    long long rows = t_scalar(db, q);
    ck_assert_int_gt(rows, 0);
    ck_assert_msg(total == 2 * rows && distinct == rows, "%s: %lld rows, %lld in both, %lld distinct", table, rows,
                  total, distinct);
}

START_TEST(bound_values_land_as_text_does) {
    if (!setup()) return;
    const bw_object_type_t *pin_t = bw_config_object_type(conf, "pin"), *board = bw_config_object_type(conf, "board");
    unsigned char all[256];
    for (int i = 0; i < 256; i++) all[i] = (unsigned char)i;
    /* pins: hostile text, all bytes (and bytes with NULs), NULLs, left-out columns
     * (DEFAULT), int64 extremes, one row without an id (AUTO_INCREMENT) */
    bw_sql_row_t rows[NH + 2];
    for (size_t i = 0; i < NH; i++)
        rows[i] = row(pin(i + 1), 5, 0, t_v_int(&A, i % 2 ? INT64_MIN : INT64_MAX), 2, t_v_str(&A, HOSTILE[i].s, HOSTILE[i].len),
                      3, t_v_str(&A, HOSTILE[(i + 3) % NH].s, HOSTILE[(i + 3) % NH].len), 5,
                      t_v_bytes(&A, all + (i * 7) % 256, i == 0 ? 256 : 256 - (i * 7) % 256), 1,
                      i % 3 ? t_v_int(&A, -(int64_t)i) : t_v_null(&A));
    rows[NH] = row(pin(100), 3, 0, t_v_int(&A, 0), 5, t_v_bytes(&A, "\0\0\0", 3), 2, t_v_null(&A)); /* like_count etc. DEFAULT */
    rows[NH + 1] = row(0, 1, 0, t_v_int(&A, 77));
    both_ways(pin_t, BW_OP_CREATE, rows, NH + 2);
    ck_assert_int_eq(scalar("SELECT COUNT(*) FROM bwbind00000.pins"), NH + 2);
    /* the id-less row took AUTO_INCREMENT's next id, after the highest so far */
    ck_assert_int_eq(scalar("SELECT owner_id FROM bwbind00000.pins WHERE id = %" PRIu64, pin(101)), 77);
    expect_same_tables("pins", "id, owner_id, HEX(title), HEX(description), HEX(image), like_count, board_id, "
                               "title IS NULL, description IS NULL, image IS NULL, board_id IS NULL, CHAR_LENGTH(title)");
    /* the bytes are the bytes: row 0's image is all 256 values in order */
    ck_assert_int_eq(scalar("SELECT image = UNHEX('%s') FROM bwbind00000.pins WHERE id = %" PRIu64,
                            "000102030405060708090A0B0C0D0E0F101112131415161718191A1B1C1D1E1F202122232425262728292A2B2C2D2E2F"
                            "303132333435363738393A3B3C3D3E3F404142434445464748494A4B4C4D4E4F505152535455565758595A5B5C5D5E5F"
                            "606162636465666768696A6B6C6D6E6F707172737475767778797A7B7C7D7E7F808182838485868788898A8B8C8D8E8F"
                            "909192939495969798999A9B9C9D9E9FA0A1A2A3A4A5A6A7A8A9AAABACADAEAFB0B1B2B3B4B5B6B7B8B9BABBBCBDBEBF"
                            "C0C1C2C3C4C5C6C7C8C9CACBCCCDCECFD0D1D2D3D4D5D6D7D8D9DADBDCDDDEDFE0E1E2E3E4E5E6E7E8E9EAEBECEDEEEF"
                            "F0F1F2F3F4F5F6F7F8F9FAFBFCFDFEFF",
                            pin(1)),
                     1);
    /* 4-byte UTF-8 is characters, not bytes: 2 emoji and " 4-byte" */
    ck_assert_int_eq(scalar("SELECT CHAR_LENGTH(title) FROM bwbind00000.pins WHERE id = %" PRIu64, pin(7)), 9);
    ck_assert_int_eq(scalar("SELECT LENGTH(title) FROM bwbind00000.pins WHERE id = %" PRIu64, pin(3)), 11); /* NULs kept */

    /* upsert: the same rows, new text, some new rows; the column set fixed per statement */
    bw_sql_row_t up[NH];
    for (size_t i = 0; i < NH; i++)
        up[i] = row(i % 2 ? pin(i + 1) : pin(200 + i), 2, 0, t_v_int(&A, (int64_t)i), 3,
                    t_v_str(&A, HOSTILE[(i + 1) % NH].s, HOSTILE[(i + 1) % NH].len));
    both_ways(pin_t, BW_OP_UPSERT, up, NH);
    expect_same_tables("pins", "id, owner_id, HEX(title), HEX(description), HEX(image), like_count, board_id, "
                               "description IS NULL");

    /* boards: doubles (exact to the bit), bools, ints given for a double column */
    const double vals[] = {0.1, 1.0 / 3, -2.5, 1e308, -1.7976931348623157e308, 5e-324, 2.2250738585072014e-308,
                           9007199254740993.0, -0.0};
    bw_sql_row_t b[BW_ARRAY_LEN(vals) + 2];
    for (size_t i = 0; i < BW_ARRAY_LEN(vals); i++)
        b[i] = row(bw_id_make(0, 2, i + 1), 4, 0, S("partner \xf0\x9f\x98\x80"), 1, S("n"), 2, t_v_dbl(&A, vals[i]), 3,
                   t_v_bool(&A, (int)(i % 2)));
    b[BW_ARRAY_LEN(vals)] = row(bw_id_make(0, 2, 50), 3, 0, S("p"), 1, S("int score"), 2, t_v_int(&A, 9007199254740993));
    b[BW_ARRAY_LEN(vals) + 1] = row(bw_id_make(0, 2, 51), 4, 0, S("p"), 1, S("nulls"), 2, t_v_null(&A), 3, t_v_null(&A));
    both_ways(board, BW_OP_CREATE, b, BW_ARRAY_LEN(vals) + 2);
    expect_same_tables("boards", "id, HEX(partner), name, HEX(CAST(score AS CHAR)), score, archived, score IS NULL, "
                                 "SIGN(ATAN2(score, -1)), " /* the sign of a zero: +pi or -pi */
                                 "archived IS NULL");
    MYSQL_RES *res;
    ck_assert(mysql_query(db, "SELECT score FROM bwbind00000.boards ORDER BY id LIMIT 10") == 0);
    res = mysql_store_result(db);
    for (size_t i = 0; i < BW_ARRAY_LEN(vals); i++) {
        MYSQL_ROW r = mysql_fetch_row(res);
        ck_assert_ptr_nonnull(r);
        ck_assert_msg(strtod(r[0], NULL) == vals[i], "score %.17g came back as %s", vals[i], r[0]);
    }
    mysql_free_result(res);
    teardown();
}
END_TEST

/* ---- through the applier ---------------------------------------------------------- */

/* A Kafka message of one ShardBatch on shard 0 from rows whose colmap is the identity
 * over `cols` (the config's columns of the type, in order); payload malloc'd. */
static void make_msg(rd_kafka_message_t *m, int64_t offset, const char *job, uint32_t part, int op,
                     const char *type, const bw_sql_row_t *rows, size_t n) {
    const bw_object_type_t *ot = bw_config_object_type(conf, type);
    char **cols = bw_arena_alloc(&A, (size_t)ot->column_cnt * sizeof(*cols));
    for (int c = 0; c < ot->column_cnt; c++) cols[c] = ot->columns[c].name;
    Bulkwrite__Internal__V1__Row **rp = bw_arena_alloc(&A, (n + 1) * sizeof(*rp));
    for (size_t i = 0; i < n; i++) {
        rp[i] = bw_arena_alloc(&A, sizeof(**rp));
        bulkwrite__internal__v1__row__init(rp[i]);
        rp[i]->op_index = (uint32_t)i;
        rp[i]->id = rows[i].id;
        rp[i]->n_fields = rows[i].field_cnt;
        rp[i]->fields = (Bulkwrite__Internal__V1__RowField **)rows[i].fields;
    }
    Bulkwrite__Internal__V1__ShardBatch sb = BULKWRITE__INTERNAL__V1__SHARD_BATCH__INIT;
    sb.job_id = (char *)job;
    sb.part = part;
    sb.object_type = (char *)type;
    sb.op = (Bulkwrite__V1__OpType)op;
    sb.columns = cols;
    sb.n_columns = (size_t)ot->column_cnt;
    sb.rows = rp;
    sb.n_rows = n;
    memset(m, 0, sizeof(*m));
    m->payload = malloc(bulkwrite__internal__v1__shard_batch__get_packed_size(&sb));
    m->len = bulkwrite__internal__v1__shard_batch__pack(&sb, m->payload);
    m->offset = offset;
}

static void apply(bw_applier_t *ap, rd_kafka_message_t *m, size_t n, bw_apply_result_t *res) {
    rd_kafka_message_t *ms[8];
    for (size_t i = 0; i < n; i++) ms[i] = &m[i];
    bw_applier_apply(ap, 0, -1, ms, n, res);
    ck_assert_msg(res->status == BW_APPLY_OK, "apply failed: %s", res->error);
    for (size_t i = 0; i < n; i++) free(m[i].payload);
}

static long long part_count(const char *job, uint32_t part, const char *what) {
    return scalar("SELECT %s FROM bwbind00000.bw_job_parts WHERE job_id = '%s' AND part = %" PRIu32, what, job, part);
}

/* Values exactly at a column's max length apply (counted in characters for text: 255
 * emoji are 1,020 bytes); one over fails its row alone (1406). (An image over 65,535
 * bytes would fit its MEDIUMBLOB: the proxy's validation refuses it, not the table.) */
START_TEST(bound_max_lengths_fail_alone) {
    if (!setup()) return;
    bw_metrics_t *metrics = bw_consumer_metrics_new(conf);
    bw_applier_t ap;
    bw_applier_init(&ap, conf, metrics, NULL);
    size_t emoji_n = 256 * 4, desc_n = 2001, img_n = 65535;
    char *emoji = malloc(emoji_n), *desc = malloc(desc_n);
    unsigned char *img = malloc(img_n);
    for (size_t i = 0; i < emoji_n; i += 4) memcpy(emoji + i, "\xf0\x9f\x98\x80", 4);
    memset(desc, 'd', desc_n);
    for (size_t i = 0; i < img_n; i++) img[i] = (unsigned char)(i * 31 + 7);
    bw_sql_row_t rows[7];
    rows[0] = row(pin(1), 2, 0, t_v_int(&A, 1), 2, t_v_str(&A, emoji, 255 * 4));     /* title at 255 characters */
    rows[1] = row(pin(2), 2, 0, t_v_int(&A, 1), 2, t_v_str(&A, emoji, 256 * 4));     /* one over */
    rows[2] = row(pin(3), 2, 0, t_v_int(&A, 1), 3, t_v_str(&A, desc, 2000));         /* description at 2000 */
    rows[3] = row(pin(4), 2, 0, t_v_int(&A, 1), 3, t_v_str(&A, desc, 2001));         /* one over */
    rows[4] = row(pin(5), 2, 0, t_v_int(&A, 1), 5, t_v_bytes(&A, img, 65535));       /* image at 65535 */
    rows[5] = row(pin(6), 2, 0, t_v_int(&A, 1), 5, t_v_bytes(&A, "\0a\0", 3));      /* NULs in bytes */
    rows[6] = row(pin(7), 2, 0, t_v_int(&A, 1), 2, t_v_str(&A, "x\0y", 3));
    rd_kafka_message_t m[2];
    make_msg(&m[0], 0, JOB_A, 0, BW_OP_CREATE, "pin", rows, 4);
    make_msg(&m[1], 1, JOB_A, 1, BW_OP_CREATE, "pin", rows + 4, 3);
    bw_apply_result_t res;
    apply(&ap, m, 2, &res);
    ck_assert_uint_eq(res.rows_applied, 5);
    ck_assert_uint_eq(res.rows_failed, 2);
    ck_assert_uint_ge(res.statements_bound, 1);
    ck_assert_int_eq(part_count(JOB_A, 0, "rows_applied"), 2);
    ck_assert_int_eq(part_count(JOB_A, 0, "rows_failed"), 2);
    ck_assert_int_eq(part_count(JOB_A, 1, "rows_applied"), 3);
    ck_assert_int_eq(part_count(JOB_A, 1, "rows_failed"), 0);
    ck_assert_int_eq(scalar("SELECT COUNT(*) FROM bwbind00000.bw_job_failures WHERE error_code = 1406"), 2);
    ck_assert_int_eq(scalar("SELECT COUNT(*) FROM bwbind00000.bw_job_failures WHERE object_id IN (%" PRIu64 ",%" PRIu64
                            ")", pin(2), pin(4)),
                     2);
    ck_assert_int_eq(scalar("SELECT HEX(image) = '006100' FROM bwbind00000.pins WHERE id = %" PRIu64, pin(6)), 1);
    ck_assert_int_eq(scalar("SELECT CHAR_LENGTH(title) * 10000 + LENGTH(title) / 4 FROM bwbind00000.pins WHERE id = %" PRIu64,
                            pin(1)),
                     255 * 10000 + 255);
    ck_assert_int_eq(scalar("SELECT LENGTH(description) FROM bwbind00000.pins WHERE id = %" PRIu64, pin(3)), 2000);
    ck_assert_int_eq(scalar("SELECT LENGTH(image) FROM bwbind00000.pins WHERE id = %" PRIu64, pin(5)), 65535);
    ck_assert_int_eq(scalar("SELECT HEX(title) = '780079' FROM bwbind00000.pins WHERE id = %" PRIu64, pin(7)), 1);
    char *hex = malloc(2 * 65535 + 256);
    static const char digits[] = "0123456789ABCDEF";
    strcpy(hex, "SELECT image = UNHEX('");
    size_t o = strlen(hex);
    for (size_t i = 0; i < 65535; i++) {
        hex[o++] = digits[img[i] >> 4];
        hex[o++] = digits[img[i] & 15];
    }
    snprintf(hex + o, 256, "') FROM bwbind00000.pins WHERE id = %" PRIu64, pin(5));
    ck_assert_int_eq(t_scalar(db, hex), 1);
    free(hex);
    free(emoji);
    free(desc);
    free(img);
    bw_applier_destroy(&ap);
    bw_metrics_destroy(metrics);
    teardown();
}
END_TEST

/* A duplicate key in the middle of an array-bound CREATE: that row fails, every other
 * row of the statement applies, counts per message; then an UPSERT with changes counts
 * one per row (MySQL's affected rows count 2 per updated row: not used), and the text
 * path (consumer.array_binding = false) lands the same. */
START_TEST(bound_duplicate_and_upsert_counts) {
    if (!setup()) return;
    ck_assert(mysql_query(db, "INSERT INTO bwbind00000.pins (id, owner_id, title) VALUES (68719476739, 9, 'old')") == 0);
    bw_metrics_t *metrics = bw_consumer_metrics_new(conf);
    bw_applier_t ap;
    bw_applier_init(&ap, conf, metrics, NULL);
    bw_sql_row_t rows[6];
    for (int i = 0; i < 6; i++) rows[i] = row(pin((uint64_t)i + 1), 2, 0, t_v_int(&A, i), 2, S("new \xf0\x9f\x98\x80"));
    rd_kafka_message_t m[3];
    make_msg(&m[0], 0, JOB_A, 0, BW_OP_CREATE, "pin", rows, 2);
    make_msg(&m[1], 1, JOB_A, 1, BW_OP_CREATE, "pin", rows + 2, 4); /* pin(3) exists */
    bw_apply_result_t res;
    apply(&ap, m, 2, &res);
    ck_assert_uint_eq(res.rows_applied, 5);
    ck_assert_uint_eq(res.rows_failed, 1);
    ck_assert_uint_eq(res.statements_bound, 1); /* one statement for both messages, refused, then row by row */
    ck_assert_int_eq(part_count(JOB_A, 0, "rows_applied"), 2);
    ck_assert_int_eq(part_count(JOB_A, 1, "rows_applied"), 3);
    ck_assert_int_eq(part_count(JOB_A, 1, "rows_failed"), 1);
    ck_assert_int_eq(scalar("SELECT error_code FROM bwbind00000.bw_job_failures WHERE object_id = %" PRIu64, pin(3)),
                     1062);
    ck_assert_int_eq(scalar("SELECT owner_id FROM bwbind00000.pins WHERE id = %" PRIu64, pin(3)), 9);
    ck_assert_int_eq(scalar("SELECT COUNT(*) FROM bwbind00000.pins WHERE title = 'new \xf0\x9f\x98\x80'"), 5);

    /* UPSERT: 4 existing rows change, 1 stays the same, 2 are new */
    bw_sql_row_t up[7];
    for (int i = 0; i < 7; i++)
        up[i] = row(pin((uint64_t)i + 1), 2, 0, t_v_int(&A, i == 1 ? 1 : 100 + i), 2,
                    i == 1 ? S("new \xf0\x9f\x98\x80") : S("upserted"));
    make_msg(&m[0], 2, JOB_B, 0, BW_OP_UPSERT, "pin", up, 3);
    make_msg(&m[1], 3, JOB_B, 1, BW_OP_UPSERT, "pin", up + 3, 4);
    apply(&ap, m, 2, &res);
    ck_assert_uint_eq(res.rows_applied, 7);
    ck_assert_uint_eq(res.rows_failed, 0);
    ck_assert_uint_eq(res.statements_bound, 1);
    ck_assert_int_eq(part_count(JOB_B, 0, "rows_applied"), 3);
    ck_assert_int_eq(part_count(JOB_B, 1, "rows_applied"), 4);
    ck_assert_int_eq(scalar("SELECT COUNT(*) FROM bwbind00000.pins WHERE title = 'upserted' AND owner_id >= 100"), 6);
    ck_assert_int_eq(scalar("SELECT owner_id FROM bwbind00000.pins WHERE id = %" PRIu64, pin(2)), 1);

    /* the same through text: nothing bound, the same rows */
    conf->array_binding = 0;
    for (int i = 0; i < 2; i++) up[i] = row(pin((uint64_t)i + 300), 2, 0, t_v_int(&A, 5), 2, S("text"));
    make_msg(&m[0], 4, JOB_B, 2, BW_OP_UPSERT, "pin", up, 2);
    apply(&ap, m, 1, &res);
    ck_assert_uint_eq(res.rows_applied, 2);
    ck_assert_uint_eq(res.statements_bound, 0);
    conf->array_binding = 1;
    ck_assert_int_eq(scalar("SELECT next_offset FROM bwbind00000.bw_offsets"), 5);
    bw_applier_destroy(&ap);
    bw_metrics_destroy(metrics);
    teardown();
}
END_TEST

/* Statements prepared and not closed on connection c: its session's counters (the global
 * Prepared_stmt_count also counts other tiers' connections to the same server). */
static long long prepared_count(MYSQL *c) {
    ck_assert(mysql_query(c, "SHOW SESSION STATUS WHERE Variable_name IN ('Com_stmt_prepare', 'Com_stmt_close')") == 0);
    MYSQL_RES *r = mysql_store_result(c);
    long long v = 0;
    for (MYSQL_ROW row; (row = mysql_fetch_row(r));) v += strcmp(row[0], "Com_stmt_close") ? atoll(row[1]) : -atoll(row[1]);
    mysql_free_result(r);
    return v;
}

/* Statements are reused per connection, at most BW_SQLBIND_CACHE of them stay prepared
 * (the least recently used is closed), and all are closed with the connection. A value
 * that does not travel as its column's type goes as text. */
START_TEST(prepared_statements_bounded_and_closed) {
    if (!setup()) return;
    const bw_object_type_t *pin_t = bw_config_object_type(conf, "pin");
    bw_sqlbind_t sb;
    bw_sqlbind_cache_t cache;
    bw_sqlbind_init(&sb);
    MYSQL *c = bw_db_connect(conf, 0, (char[256]){0}, 256);
    ck_assert_ptr_nonnull(c);
    long long before = prepared_count(c);
    bw_sqlbind_cache_open(&cache, c);
    unsigned err = 0;
    const char *msg = "";
    /* 2 statements, each executed 3 times: 2 prepared */
    for (int k = 0; k < 6; k++) {
        bw_sql_row_t r = k % 2 ? row(pin(10 + (uint64_t)k), 1, 0, t_v_int(&A, k)) : row(pin(10 + (uint64_t)k), 2, 0, t_v_int(&A, k), 4, t_v_int(&A, 1));
        ck_assert_int_eq(bw_sqlbind_execute(&sb, &cache, c, "bwbind00000", pin_t, BW_OP_CREATE, &r, 1, &err, &msg), BW_SQLBIND_OK);
    }
    ck_assert_int_eq(prepared_count(c) - before, 2);
    /* 2 shard databases × 2 ops × 5 column sets = 20 statements: 16 stay prepared */
    for (int s = 0; s < 2; s++)
        for (int op = BW_OP_CREATE; op <= BW_OP_UPSERT; op += BW_OP_UPSERT - BW_OP_CREATE)
            for (int set = 0; set < 5; set++) {
                bw_sql_row_t r = row(pin(1000 + (uint64_t)(s * 100 + op * 10 + set)), 2, 0, t_v_int(&A, 1), 1 + set, t_v_null(&A));
                ck_assert_msg(bw_sqlbind_execute(&sb, &cache, c, s ? "bwbind00001" : "bwbind00000", pin_t, op, &r, 1, &err,
                                                 &msg) == BW_SQLBIND_OK,
                              "%s", msg);
            }
    ck_assert_int_eq(prepared_count(c) - before, BW_SQLBIND_CACHE);
    /* a string for an int column: not bound, the text statement decides */
    bw_sql_row_t bad = row(pin(5000), 1, 0, S("12"));
    ck_assert_int_eq(bw_sqlbind_execute(&sb, &cache, c, "bwbind00000", pin_t, BW_OP_CREATE, &bad, 1, &err, &msg), BW_SQLBIND_TEXT);
    /* UPDATE and DELETE stay text */
    ck_assert_int_eq(bw_sqlbind_execute(&sb, &cache, c, "bwbind00000", pin_t, BW_OP_DELETE, &bad, 1, &err, &msg), BW_SQLBIND_TEXT);
    ck_assert_int_eq(bw_sqlbind_execute(&sb, &cache, c, "bwbind00000", pin_t, BW_OP_UPDATE, &bad, 1, &err, &msg), BW_SQLBIND_TEXT);
    /* a data error keeps the statement; the row was not applied */
    bw_sql_row_t dup = row(pin(11), 1, 0, t_v_int(&A, 1));
    ck_assert_int_eq(bw_sqlbind_execute(&sb, &cache, c, "bwbind00000", pin_t, BW_OP_CREATE, &dup, 1, &err, &msg), BW_SQLBIND_ERROR);
    ck_assert_uint_eq(err, 1062);
    ck_assert_msg(strstr(msg, "Duplicate entry"), "%s", msg);
    bw_sqlbind_cache_close(&cache);
    ck_assert_int_eq(prepared_count(c), before);
    mysql_rollback(c);
    mysql_close(c);
    bw_sqlbind_free(&sb);
    teardown();
}
END_TEST

/* The integer formatter against printf, at the edges. */
START_TEST(integers_without_printf) {
    const int64_t is[] = {0, 1, -1, 9, 10, -10, 99, 100, INT64_MAX, INT64_MIN, INT64_MIN + 1, 1234567890123456789};
    const uint64_t us[] = {0, 1, 9, 10, UINT64_MAX, UINT64_MAX - 1, 10000000000000000000u, 4611686018427387903u};
    bw_buf_t b;
    bw_buf_init(&b);
    char want[32];
    for (size_t i = 0; i < BW_ARRAY_LEN(is); i++) {
        bw_buf_reset(&b);
        bw_sql_append_i64(&b, is[i]);
        snprintf(want, sizeof(want), "%" PRId64, is[i]);
        ck_assert_str_eq(b.data, want);
        ck_assert_uint_eq(b.len, strlen(want));
    }
    for (size_t i = 0; i < BW_ARRAY_LEN(us); i++) {
        bw_buf_reset(&b);
        bw_sql_append_u64(&b, us[i]);
        snprintf(want, sizeof(want), "%" PRIu64, us[i]);
        ck_assert_str_eq(b.data, want);
    }
    bw_buf_free(&b);
}
END_TEST

Suite *sqlbind_suite(void) {
    Suite *s = suite_create("sqlbind");
    TCase *tc = tcase_create("sqlbind");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, integers_without_printf);
    tcase_add_test(tc, bound_values_land_as_text_does);
    tcase_add_test(tc, bound_max_lengths_fail_alone);
    tcase_add_test(tc, bound_duplicate_and_upsert_counts);
    tcase_add_test(tc, prepared_statements_bounded_and_closed);
    suite_add_tcase(s, tc);
    return s;
}
