/* test_sql.c — escaping and literals, statement planning, exact statement text, and a
 * live round trip through MariaDB (when BW_TEST_MYSQL_PORT names a throwaway server). */
#include <inttypes.h>
#include <math.h>
#include <mysql.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "helpers.h"
#include "shard.h"
#include "sql.h"

/* ---- small builders ------------------------------------------------------------- */

static bw_arena_t A;
static void setup(void) { bw_arena_init(&A, 1 << 16); }
static void teardown(void) { bw_arena_destroy(&A); }

#define S(lit) t_v_str(&A, lit, sizeof(lit) - 1)

static Bulkwrite__Internal__V1__RowField *rf(unsigned col, Bulkwrite__V1__Value *v, int inc) {
    Bulkwrite__Internal__V1__RowField *f = bw_arena_alloc(&A, sizeof(*f));
    bulkwrite__internal__v1__row_field__init(f);
    f->column = col;
    f->value = v;
    f->increment = inc;
    return f;
}

/* Batch columns are the config columns (identity map) unless a colmap is given. */
static const int IDENTITY[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

static bw_sql_row_t row(uint64_t id, size_t n, ...) {
    bw_sql_row_t r = {id, n, NULL, IDENTITY};
    Bulkwrite__Internal__V1__RowField **f = bw_arena_alloc(&A, (n + 1) * sizeof(*f));
    va_list ap;
    va_start(ap, n);
    for (size_t i = 0; i < n; i++) f[i] = va_arg(ap, Bulkwrite__Internal__V1__RowField *);
    va_end(ap);
    r.fields = f;
    return r;
}

static char *lit(const Bulkwrite__V1__Value *v) {
    static bw_buf_t b;
    bw_buf_reset(&b);
    bw_sql_append_value(&b, v);
    return b.data;
}

static void expect_escaped(const char *in, size_t len, const char *want, size_t want_len) {
    bw_buf_t b;
    bw_buf_init(&b);
    bw_buf_puts(&b, "<"); /* appends after existing content */
    bw_sql_append_escaped(&b, in, len);
    ck_assert_uint_eq(b.len, want_len + 1);
    ck_assert_msg(memcmp(b.data + 1, want, want_len) == 0, "escaped \"%s\" gave \"%s\", want \"%s\"", in,
                  b.data + 1, want);
    ck_assert_int_eq(b.data[b.len], '\0');
    bw_buf_free(&b);
}
#define ESC(in, want) expect_escaped(in, sizeof(in) - 1, want, sizeof(want) - 1)

/* ---- escaping and literals ------------------------------------------------------- */

START_TEST(escape_hostile) {
    ESC("", "");
    ESC("plain text 123", "plain text 123");
    ESC("it's", "it\\'s");
    ESC("say \"hi\"", "say \\\"hi\\\"");
    ESC("back\\slash\\", "back\\\\slash\\\\");
    ESC("\\'", "\\\\\\'"); /* a backslash before a quote cannot un-escape it */
    ESC("nul\0in\0side", "nul\\0in\\0side");
    ESC("\0", "\\0");
    ESC("line\nfeed\rcr\x1asub", "line\\nfeed\\rcr\\Zsub");
    ESC("'; DROP TABLE pins; --", "\\'; DROP TABLE pins; --");
    ESC("tab\there % _", "tab\there % _");
    ESC("\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80", "\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80");
    ESC("''", "\\'\\'");
    /* a long value grows the buffer correctly: 10,000 quotes double */
    bw_buf_t b;
    bw_buf_init(&b);
    char q[10000];
    memset(q, '\'', sizeof(q));
    bw_sql_append_escaped(&b, q, sizeof(q));
    ck_assert_uint_eq(b.len, 20000);
    for (size_t i = 0; i < b.len; i += 2) ck_assert(b.data[i] == '\\' && b.data[i + 1] == '\'');
    bw_buf_free(&b);
}
END_TEST

START_TEST(literal_values) {
    ck_assert_str_eq(lit(NULL), "NULL");
    ck_assert_str_eq(lit(t_v_null(&A)), "NULL");
    Bulkwrite__V1__Value unset = BULKWRITE__V1__VALUE__INIT; /* no kind at all */
    ck_assert_str_eq(lit(&unset), "NULL");
    ck_assert_str_eq(lit(t_v_int(&A, 0)), "0");
    ck_assert_str_eq(lit(t_v_int(&A, -42)), "-42");
    ck_assert_str_eq(lit(t_v_int(&A, INT64_MAX)), "9223372036854775807");
    ck_assert_str_eq(lit(t_v_int(&A, INT64_MIN)), "-9223372036854775808");
    ck_assert_str_eq(lit(t_v_bool(&A, 1)), "1");
    ck_assert_str_eq(lit(t_v_bool(&A, 0)), "0");
    ck_assert_str_eq(lit(S("")), "''");
    ck_assert_str_eq(lit(S("it's")), "'it\\'s'");
    ck_assert_str_eq(lit(S("'; DROP TABLE pins; --")), "'\\'; DROP TABLE pins; --'");
    Bulkwrite__V1__Value *nul = S("a\0b");
    ck_assert_str_eq(lit(nul), "'a\\0b'");
    ck_assert_str_eq(lit(t_v_bytes(&A, "", 0)), "X''");
    ck_assert_str_eq(lit(t_v_bytes(&A, "\x00\xff\x27\x5c\x0a\x1a", 6)), "X'00ff275c0a1a'");
    ck_assert_str_eq(lit(t_v_bytes(&A, "AZaz", 4)), "X'415a617a'");
    /* text carried as bytes stays binary: no quote is ever spliced */
    ck_assert_str_eq(lit(t_v_bytes(&A, "'", 1)), "X'27'");
}
END_TEST

START_TEST(literal_doubles_round_trip) {
    const double vals[] = {0.0,     -0.0,    0.1,    1.0 / 3,  -2.5,   1e308,  -1e308, 1.7976931348623157e308,
                           5e-324,  2.2250738585072014e-308,   123456789012345678.0, 3.141592653589793,
                           1e-7,    100.0,   9007199254740993.0};
    for (size_t i = 0; i < BW_ARRAY_LEN(vals); i++) {
        const char *s = lit(t_v_dbl(&A, vals[i]));
        char *end;
        double back = strtod(s, &end);
        ck_assert_msg(*end == '\0', "\"%s\" is not a whole number literal", s);
        ck_assert_msg(memcmp(&back, &vals[i], sizeof(double)) == 0, "%.17g printed as %s reads back as %.17g",
                      vals[i], s, back);
        ck_assert_msg(strspn(s, "0123456789+-.e") == strlen(s), "\"%s\" has characters SQL would not read", s);
    }
    ck_assert_str_eq(lit(t_v_dbl(&A, 0.1)), "0.10000000000000001");
    ck_assert_str_eq(lit(t_v_dbl(&A, 1.5)), "1.5");
}
END_TEST

/* ---- planning --------------------------------------------------------------------- */

static bw_object_type_t pin_with_batches(const bw_config_t *c, int create, int update, int upsert, int del) {
    bw_object_type_t ot = *bw_config_object_type(c, "pin");
    ot.batch_size[BW_OP_CREATE] = create;
    ot.batch_size[BW_OP_UPDATE] = update;
    ot.batch_size[BW_OP_UPSERT] = upsert;
    ot.batch_size[BW_OP_DELETE] = del;
    return ot;
}

START_TEST(plan_batch_cap) {
    bw_config_t *c = t_ref_config();
    bw_object_type_t ot = pin_with_batches(c, 5, 4, 3, 7);
    bw_sql_row_t rows[20];
    for (int i = 0; i < 20; i++) rows[i] = row(bw_id_make(0, 1, (uint64_t)i + 1), 1, rf(0, t_v_int(&A, i), 0));
    ck_assert_uint_eq(bw_sql_plan(&ot, BW_OP_CREATE, rows, 20), 5);
    ck_assert_uint_eq(bw_sql_plan(&ot, BW_OP_UPDATE, rows, 20), 4);
    ck_assert_uint_eq(bw_sql_plan(&ot, BW_OP_UPSERT, rows, 20), 3);
    ck_assert_uint_eq(bw_sql_plan(&ot, BW_OP_DELETE, rows, 20), 7);
    ck_assert_uint_eq(bw_sql_plan(&ot, BW_OP_CREATE, rows, 2), 2);
    ck_assert_uint_eq(bw_sql_plan(&ot, BW_OP_DELETE, rows, 1), 1);
    /* the reference sizes */
    const bw_object_type_t *pin = bw_config_object_type(c, "pin");
    ck_assert_uint_eq(bw_sql_plan(pin, BW_OP_UPDATE, rows, 20), 20);
    bw_config_destroy(c);
}
END_TEST

START_TEST(plan_update_repeated_id) {
    bw_config_t *c = t_ref_config();
    const bw_object_type_t *pin = bw_config_object_type(c, "pin");
    uint64_t ids[] = {11, 12, 13, 12, 15};
    bw_sql_row_t rows[5];
    for (int i = 0; i < 5; i++) rows[i] = row(ids[i], 1, rf(0, t_v_int(&A, i), 0));
    ck_assert_uint_eq(bw_sql_plan(pin, BW_OP_UPDATE, rows, 5), 3);
    ck_assert_uint_eq(bw_sql_plan(pin, BW_OP_UPSERT, rows, 5), 3);
    ck_assert_uint_eq(bw_sql_plan(pin, BW_OP_UPDATE, rows + 3, 2), 2);
    /* the very first two equal: one row per statement */
    rows[1].id = rows[0].id;
    ck_assert_uint_eq(bw_sql_plan(pin, BW_OP_UPDATE, rows, 5), 1);
    /* CREATE and DELETE are not split by ids */
    ck_assert_uint_eq(bw_sql_plan(pin, BW_OP_CREATE, rows, 5), 5);
    ck_assert_uint_eq(bw_sql_plan(pin, BW_OP_DELETE, rows, 5), 5);
    bw_config_destroy(c);
}
END_TEST

START_TEST(plan_upsert_column_set) {
    bw_config_t *c = t_ref_config();
    const bw_object_type_t *pin = bw_config_object_type(c, "pin");
    bw_sql_row_t rows[6];
    rows[0] = row(1, 2, rf(0, t_v_int(&A, 1), 0), rf(2, S("a"), 0));
    rows[1] = row(2, 2, rf(2, S("b"), 0), rf(0, t_v_int(&A, 2), 0)); /* same set, other order */
    rows[2] = row(3, 2, rf(0, t_v_int(&A, 3), 0), rf(2, S("c"), 0));
    rows[3] = row(4, 1, rf(0, t_v_int(&A, 4), 0));                     /* fewer columns */
    rows[4] = row(5, 2, rf(0, t_v_int(&A, 5), 0), rf(3, S("d"), 0));   /* same count, other set */
    rows[5] = row(6, 2, rf(0, t_v_int(&A, 6), 0), rf(3, S("e"), 0));
    ck_assert_uint_eq(bw_sql_plan(pin, BW_OP_UPSERT, rows, 6), 3);
    ck_assert_uint_eq(bw_sql_plan(pin, BW_OP_UPSERT, rows + 3, 3), 1);
    ck_assert_uint_eq(bw_sql_plan(pin, BW_OP_UPSERT, rows + 4, 2), 2);
    ck_assert_uint_eq(bw_sql_plan(pin, BW_OP_UPSERT, rows + 2, 3), 1);
    /* CREATE and UPDATE tolerate differing columns */
    ck_assert_uint_eq(bw_sql_plan(pin, BW_OP_CREATE, rows, 6), 6);
    ck_assert_uint_eq(bw_sql_plan(pin, BW_OP_UPDATE, rows, 6), 6);
    /* the column set is compared through the colmap, not by batch column numbers */
    static const int MAP_A[] = {0, 2}, MAP_B[] = {2, 0};
    bw_sql_row_t m[2];
    m[0] = row(7, 2, rf(0, t_v_int(&A, 7), 0), rf(1, S("x"), 0));
    m[0].colmap = MAP_A;
    m[1] = row(8, 2, rf(1, t_v_int(&A, 8), 0), rf(0, S("y"), 0));
    m[1].colmap = MAP_B;
    ck_assert_uint_eq(bw_sql_plan(pin, BW_OP_UPSERT, m, 2), 2);
    m[1].colmap = MAP_A; /* now row 8 sets title=8, owner_id='y': the same set still */
    ck_assert_uint_eq(bw_sql_plan(pin, BW_OP_UPSERT, m, 2), 2);
    static const int MAP_C[] = {0, 3};
    m[1].colmap = MAP_C; /* owner_id, description: another set */
    ck_assert_uint_eq(bw_sql_plan(pin, BW_OP_UPSERT, m, 2), 1);
    bw_config_destroy(c);
}
END_TEST

/* ---- exact statements --------------------------------------------------------------- */

static char *build(const bw_object_type_t *ot, int op, const bw_sql_row_t *rows, size_t n) {
    static bw_buf_t b;
    bw_buf_puts(&b, "stale text that must be replaced");
    bw_sql_build(&b, "db00003", ot, op, rows, n);
    ck_assert_uint_eq(strlen(b.data), b.len);
    return b.data;
}

START_TEST(build_create) {
    bw_config_t *c = t_ref_config();
    const bw_object_type_t *pin = bw_config_object_type(c, "pin");
    uint64_t x1 = bw_id_make(3, 1, 1);
    bw_sql_row_t rows[3];
    rows[0] = row(x1, 2, rf(0, t_v_int(&A, 5), 0), rf(2, S("a'b"), 0));
    rows[1] = row(0, 2, rf(0, t_v_int(&A, 6), 0), rf(1, t_v_null(&A), 0)); /* no id, no title */
    rows[2] = row(x1 + 1, 2, rf(5, t_v_bytes(&A, "\x01\xfe", 2), 0), rf(0, t_v_int(&A, -7), 0));
    char want[1024];
    snprintf(want, sizeof(want),
             "INSERT INTO `db00003`.`pins` (`id`,`owner_id`,`board_id`,`title`,`image`) VALUES "
             "(%" PRIu64 ",5,DEFAULT,'a\\'b',DEFAULT),(DEFAULT,6,NULL,DEFAULT,DEFAULT),"
             "(%" PRIu64 ",-7,DEFAULT,DEFAULT,X'01fe')",
             x1, x1 + 1);
    ck_assert_str_eq(build(pin, BW_OP_CREATE, rows, 3), want);
    /* one row, only the id */
    rows[0] = row(x1, 0);
    snprintf(want, sizeof(want), "INSERT INTO `db00003`.`pins` (`id`) VALUES (%" PRIu64 ")", x1);
    ck_assert_str_eq(build(pin, BW_OP_CREATE, rows, 1), want);
    /* a colmap that is not the identity: batch column 0 is config column 4 */
    static const int MAP[] = {4, 0};
    rows[0] = row(x1, 2, rf(0, t_v_int(&A, 9), 0), rf(1, t_v_int(&A, 1), 0));
    rows[0].colmap = MAP;
    snprintf(want, sizeof(want),
             "INSERT INTO `db00003`.`pins` (`id`,`owner_id`,`like_count`) VALUES (%" PRIu64 ",1,9)", x1);
    ck_assert_str_eq(build(pin, BW_OP_CREATE, rows, 1), want);
    /* board: doubles and bools */
    const bw_object_type_t *board = bw_config_object_type(c, "board");
    rows[0] = row(7, 4, rf(0, S("acme"), 0), rf(1, S("n"), 0), rf(2, t_v_dbl(&A, 0.5), 0), rf(3, t_v_bool(&A, 1), 0));
    ck_assert_str_eq(build(board, BW_OP_CREATE, rows, 1),
                     "INSERT INTO `db00003`.`boards` (`id`,`partner`,`name`,`score`,`archived`) VALUES "
                     "(7,'acme','n',0.5,1)");
    bw_config_destroy(c);
}
END_TEST

START_TEST(build_upsert) {
    bw_config_t *c = t_ref_config();
    const bw_object_type_t *pin = bw_config_object_type(c, "pin");
    bw_sql_row_t rows[2];
    rows[0] = row(101, 2, rf(2, S("x"), 0), rf(0, t_v_int(&A, 5), 0));
    rows[1] = row(102, 2, rf(0, t_v_int(&A, 6), 0), rf(2, S("y"), 0));
    ck_assert_str_eq(build(pin, BW_OP_UPSERT, rows, 2),
                     "INSERT INTO `db00003`.`pins` (`id`,`owner_id`,`title`) VALUES (101,5,'x'),(102,6,'y') "
                     "ON DUPLICATE KEY UPDATE `owner_id`=VALUES(`owner_id`),`title`=VALUES(`title`)");
    rows[0] = row(101, 0);
    ck_assert_str_eq(build(pin, BW_OP_UPSERT, rows, 1),
                     "INSERT INTO `db00003`.`pins` (`id`) VALUES (101) ON DUPLICATE KEY UPDATE `id`=`id`");
    bw_config_destroy(c);
}
END_TEST

START_TEST(build_update) {
    bw_config_t *c = t_ref_config();
    const bw_object_type_t *pin = bw_config_object_type(c, "pin");
    bw_sql_row_t rows[3];
    rows[0] = row(101, 2, rf(2, S("t'1"), 0), rf(4, t_v_int(&A, 2), 1));
    rows[1] = row(102, 1, rf(4, t_v_int(&A, 7), 0));
    rows[2] = row(103, 2, rf(4, t_v_int(&A, -3), 1), rf(1, t_v_null(&A), 0));
    ck_assert_str_eq(build(pin, BW_OP_UPDATE, rows, 3),
                     "UPDATE `db00003`.`pins` SET "
                     "`board_id`=CASE `id` WHEN 103 THEN NULL ELSE `board_id` END,"
                     "`title`=CASE `id` WHEN 101 THEN 't\\'1' ELSE `title` END,"
                     "`like_count`=CASE `id` WHEN 101 THEN COALESCE(`like_count`,0)+2 WHEN 102 THEN 7 "
                     "WHEN 103 THEN COALESCE(`like_count`,0)+-3 ELSE `like_count` END "
                     "WHERE `id` IN (101,102,103)");
    /* a column without increment_null_as_zero: NULL + n, as SQL has it */
    const bw_object_type_t *board = bw_config_object_type(c, "board");
    rows[0] = row(101, 1, rf(2, t_v_int(&A, 2), 1));
    ck_assert(!board->columns[2].increment_null_as_zero && pin->columns[4].increment_null_as_zero);
    ck_assert_str_eq(build(board, BW_OP_UPDATE, rows, 1),
                     "UPDATE `db00003`.`boards` SET `score`=CASE `id` WHEN 101 THEN `score`+2 ELSE `score` END "
                     "WHERE `id` IN (101)");
    rows[0] = row(UINT64_C(0x3fffffffffffffff), 1, rf(0, t_v_int(&A, 1), 0));
    ck_assert_str_eq(build(pin, BW_OP_UPDATE, rows, 1),
                     "UPDATE `db00003`.`pins` SET `owner_id`=CASE `id` WHEN 4611686018427387903 THEN 1 "
                     "ELSE `owner_id` END WHERE `id` IN (4611686018427387903)");
    bw_config_destroy(c);
}
END_TEST

START_TEST(build_delete) {
    bw_config_t *c = t_ref_config();
    const bw_object_type_t *pin = bw_config_object_type(c, "pin");
    bw_sql_row_t rows[3] = {row(5, 0), row(6, 0), row(4611686018427387903ull, 0)};
    ck_assert_str_eq(build(pin, BW_OP_DELETE, rows, 3),
                     "DELETE FROM `db00003`.`pins` WHERE `id` IN (5,6,4611686018427387903)");
    ck_assert_str_eq(build(pin, BW_OP_DELETE, rows, 1), "DELETE FROM `db00003`.`pins` WHERE `id` IN (5)");
    bw_config_destroy(c);
}
END_TEST

/* ---- live round trip ---------------------------------------------------------------- */

static const struct {
    const char *s;
    size_t len;
} HOSTILE[] = {
#define H(lit) {lit, sizeof(lit) - 1}
    H("it's"),
    H("say \"hi\""),
    H("back\\slash\\"),
    H("\\'"),
    H("nul\0in\0side"),
    H("\0"),
    H("line\nfeed\rcr\x1asub"),
    H("'; DROP TABLE pins; --"),
    H("\"; DROP TABLE pins; --"),
    H("\\'; DROP TABLE pins; -- "),
    H("\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80"),
    H(""),
    H("trailing spaces   "),
    H("tab\t% _ ` `backtick`"),
    H("\\\0'\"\n\r\x1a\\"),
#undef H
};
#define NH BW_ARRAY_LEN(HOSTILE)

static MYSQL *live_db;
static bw_config_t *live_conf;

static int live_setup(void) {
    if (!(live_conf = t_live_config("bwunit"))) return 0;
    char err[512];
    live_db = bw_db_connect(live_conf, 0, err, sizeof(err));
    ck_assert_msg(live_db != NULL, "connect: %s", err);
    return 1;
}

static void live_teardown(void) {
    if (live_db) mysql_close(live_db);
    live_db = NULL;
    bw_config_destroy(live_conf);
    live_conf = NULL;
}

static void q(const char *sql, size_t len) {
    ck_assert_msg(mysql_real_query(live_db, sql, (unsigned long)len) == 0, "query failed: %s\n%.*s",
                  mysql_error(live_db), (int)(len > 2000 ? 2000 : len), sql);
}
static void qs(const char *sql) { q(sql, strlen(sql)); }

static MYSQL_RES *select_all(const char *sql) {
    qs(sql);
    MYSQL_RES *res = mysql_store_result(live_db);
    ck_assert_msg(res != NULL, "%s: %s", sql, mysql_error(live_db));
    return res;
}

static void run_build(const bw_object_type_t *ot, const char *db, int op, bw_sql_row_t *rows, size_t n) {
    bw_buf_t b;
    bw_buf_init(&b);
    size_t done = 0;
    while (done < n) {
        size_t k = bw_sql_plan(ot, op, rows + done, n - done);
        ck_assert_uint_ge(k, 1);
        bw_sql_build(&b, db, ot, op, rows + done, k);
        q(b.data, b.len);
        done += k;
    }
    bw_buf_free(&b);
}

static void expect_cell(MYSQL_ROW r, unsigned long *lens, int col, const void *want, size_t want_len,
                        const char *what, size_t index) {
    ck_assert_msg(r[col] != NULL, "%s of row %zu is NULL", what, index);
    ck_assert_msg(lens[col] == want_len, "%s of row %zu: %lu bytes back, %zu sent", what, index, lens[col], want_len);
    ck_assert_msg(memcmp(r[col], want, want_len) == 0, "%s of row %zu differs", what, index);
}

START_TEST(live_round_trip) {
    if (!live_setup()) return;
    const bw_object_type_t *pin = bw_config_object_type(live_conf, "pin");
    qs("TRUNCATE TABLE `bwunit00000`.`pins`"); /* also restarts AUTO_INCREMENT at 1 */

    unsigned char all_bytes[256];
    for (int i = 0; i < 256; i++) all_bytes[i] = (unsigned char)i;

    /* CREATE: every hostile string as title and as description, all 256 bytes as image,
     * int64 extremes as owner_id; then one row without id and without title */
    bw_sql_row_t rows[NH + 1];
    rows[NH] = row(0, 1, rf(0, t_v_int(&A, 77), 0));
    for (size_t i = 0; i < NH; i++)
        rows[i] = row(bw_id_make(0, 1, i + 1), 5, rf(0, t_v_int(&A, i % 2 ? INT64_MIN : INT64_MAX - (int64_t)i), 0),
                      rf(2, t_v_str(&A, HOSTILE[i].s, HOSTILE[i].len), 0), rf(3, t_v_str(&A, HOSTILE[i].s, HOSTILE[i].len), 0),
                      rf(5, t_v_bytes(&A, all_bytes, i == 0 ? 256 : i), 0), rf(4, t_v_int(&A, 10), 0));
    /* the id-less row first, so AUTO_INCREMENT gives it 1 (ids above set the counter) */
    bw_sql_row_t first = rows[NH];
    memmove(rows + 1, rows, NH * sizeof(rows[0]));
    rows[0] = first;
    run_build(pin, "bwunit00000", BW_OP_CREATE, rows, NH + 1);
    qs("COMMIT");

    MYSQL_RES *res = select_all("SELECT `id`,`owner_id`,`title`,`description`,`image`,`like_count`,`board_id` "
                                "FROM `bwunit00000`.`pins` ORDER BY `id`");
    ck_assert_uint_eq(mysql_num_rows(res), NH + 1);
    MYSQL_ROW r;
    char num[32];
    size_t seen = 0, defaults = 0;
    while ((r = mysql_fetch_row(res))) {
        unsigned long *lens = mysql_fetch_lengths(res);
        uint64_t id = strtoull(r[0], NULL, 10);
        if (id < (1ull << 36)) { /* the auto-increment row */
            defaults++;
            ck_assert_str_eq(r[0], "1");
            ck_assert_str_eq(r[1], "77");
            ck_assert_ptr_null(r[2]); /* DEFAULT of a nullable column is NULL */
            ck_assert_ptr_null(r[4]);
            continue;
        }
        size_t i = (size_t)bw_id_local(id) - 1;
        ck_assert_uint_lt(i, NH);
        snprintf(num, sizeof(num), "%" PRId64, i % 2 ? INT64_MIN : INT64_MAX - (int64_t)i);
        ck_assert_str_eq(r[1], num);
        expect_cell(r, lens, 2, HOSTILE[i].s, HOSTILE[i].len, "title", i);
        expect_cell(r, lens, 3, HOSTILE[i].s, HOSTILE[i].len, "description", i);
        expect_cell(r, lens, 4, all_bytes, i == 0 ? 256 : i, "image", i);
        ck_assert_str_eq(r[5], "10");
        ck_assert_ptr_null(r[6]);
        seen++;
    }
    mysql_free_result(res);
    ck_assert_uint_eq(seen, NH);
    ck_assert_uint_eq(defaults, 1);

    /* UPDATE: titles rotate, like_count increments, board_id set; one statement */
    for (size_t i = 0; i < NH; i++) {
        size_t j = (i + 1) % NH;
        rows[i] = row(bw_id_make(0, 1, i + 1), 3, rf(2, t_v_str(&A, HOSTILE[j].s, HOSTILE[j].len), 0),
                      rf(4, t_v_int(&A, (int64_t)i), 1), rf(1, t_v_int(&A, -(int64_t)i), 0));
    }
    ck_assert_uint_eq(bw_sql_plan(pin, BW_OP_UPDATE, rows, NH), NH);
    run_build(pin, "bwunit00000", BW_OP_UPDATE, rows, NH);
    /* UPSERT: two existing rows get a new description, one new row appears */
    bw_sql_row_t up[3];
    up[0] = row(bw_id_make(0, 1, 1), 2, rf(0, t_v_int(&A, 1), 0), rf(3, S("upserted \\ '"), 0));
    up[1] = row(bw_id_make(0, 1, 2), 2, rf(3, S("upserted 2"), 0), rf(0, t_v_int(&A, 2), 0));
    up[2] = row(bw_id_make(0, 1, 1000), 2, rf(0, t_v_int(&A, 3), 0), rf(3, S("new"), 0));
    run_build(pin, "bwunit00000", BW_OP_UPSERT, up, 3);
    qs("COMMIT");

    res = select_all("SELECT `id`,`title`,`like_count`,`board_id`,`description`,`owner_id` FROM "
                     "`bwunit00000`.`pins` WHERE `id` >= 68719476736 ORDER BY `id`");
    ck_assert_uint_eq(mysql_num_rows(res), NH + 1);
    while ((r = mysql_fetch_row(res))) {
        unsigned long *lens = mysql_fetch_lengths(res);
        size_t i = (size_t)bw_id_local(strtoull(r[0], NULL, 10)) - 1;
        if (i == 999) {
            ck_assert_str_eq(r[4], "new");
            ck_assert_str_eq(r[5], "3");
            continue;
        }
        size_t j = (i + 1) % NH;
        expect_cell(r, lens, 1, HOSTILE[j].s, HOSTILE[j].len, "updated title", i);
        snprintf(num, sizeof(num), "%zu", 10 + i);
        ck_assert_str_eq(r[2], num);
        snprintf(num, sizeof(num), "%lld", -(long long)i);
        ck_assert_str_eq(r[3], num);
        if (i == 0) {
            ck_assert_str_eq(r[4], "upserted \\ '");
            ck_assert_str_eq(r[5], "1");
        } else if (i == 1) {
            ck_assert_str_eq(r[4], "upserted 2");
            ck_assert_str_eq(r[5], "2");
        } else {
            expect_cell(r, lens, 4, HOSTILE[i].s, HOSTILE[i].len, "description", i);
        }
    }
    mysql_free_result(res);

    /* stored as real utf8mb4 text, not as bytes mis-read in another charset: the
     * server sees the characters (CHAR_LENGTH) and stores exactly the UTF-8 bytes */
    for (size_t i = 0; i < NH; i++) {
        char sql[256];
        snprintf(sql, sizeof(sql), "SELECT HEX(`description`), CHAR_LENGTH(`description`) FROM `bwunit00000`.`pins` WHERE `id` = %" PRIu64,
                 bw_id_make(0, 1, i + 1));
        if (i < 2) continue; /* upserted */
        res = select_all(sql);
        r = mysql_fetch_row(res);
        ck_assert_ptr_nonnull(r);
        char hex[512] = "";
        size_t chars = 0;
        for (size_t k = 0; k < HOSTILE[i].len; k++) {
            unsigned char ch = (unsigned char)HOSTILE[i].s[k];
            sprintf(hex + 2 * k, "%02X", ch);
            chars += (ch & 0xC0) != 0x80;
        }
        ck_assert_msg(strcmp(r[0], hex) == 0, "row %zu stored as %s, sent %s", i, r[0], hex);
        snprintf(num, sizeof(num), "%zu", chars);
        ck_assert_msg(strcmp(r[1], num) == 0, "row %zu: %s characters, want %s", i, r[1], num);
        mysql_free_result(res);
    }

    /* DELETE every other row */
    bw_sql_row_t del[NH];
    size_t nd = 0;
    for (size_t i = 0; i < NH; i += 2) del[nd++] = row(bw_id_make(0, 1, i + 1), 0);
    run_build(pin, "bwunit00000", BW_OP_DELETE, del, nd);
    qs("COMMIT");
    res = select_all("SELECT COUNT(*) FROM `bwunit00000`.`pins`");
    r = mysql_fetch_row(res);
    snprintf(num, sizeof(num), "%zu", NH + 2 - nd); /* + auto-increment row + upserted new row */
    ck_assert_str_eq(r[0], num);
    mysql_free_result(res);

    /* the injection strings dropped nothing: both tables of both shard databases remain */
    res = select_all("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema IN "
                     "('bwunit00000','bwunit00001') AND table_name IN ('pins','boards','bw_offsets')");
    r = mysql_fetch_row(res);
    ck_assert_str_eq(r[0], "6");
    mysql_free_result(res);
    live_teardown();
}
END_TEST

START_TEST(live_doubles_and_bools) {
    if (!live_setup()) return;
    const bw_object_type_t *board = bw_config_object_type(live_conf, "board");
    qs("DELETE FROM `bwunit00001`.`boards`");
    const double vals[] = {0.1, 1.0 / 3, -2.5, 1e308, -1.7976931348623157e308, 2.2250738585072014e-308,
                           3.141592653589793, 9007199254740993.0, 0.0, 123456.789};
    size_t n = BW_ARRAY_LEN(vals);
    bw_sql_row_t rows[16];
    for (size_t i = 0; i < n; i++)
        rows[i] = row(bw_id_make(1, 2, i + 1), 4, rf(0, S("partner \xf0\x9f\x98\x80"), 0), rf(1, S("b"), 0),
                      rf(2, t_v_dbl(&A, vals[i]), 0), rf(3, t_v_bool(&A, (int)(i % 2)), 0));
    run_build(board, "bwunit00001", BW_OP_CREATE, rows, n);
    qs("COMMIT");
    MYSQL_RES *res = select_all("SELECT `id`,`score`,`archived`,`partner` FROM `bwunit00001`.`boards` ORDER BY `id`");
    ck_assert_uint_eq(mysql_num_rows(res), n);
    MYSQL_ROW r;
    size_t i = 0;
    while ((r = mysql_fetch_row(res))) {
        double back = strtod(r[1], NULL);
        ck_assert_msg(back == vals[i], "score %.17g came back as %s", vals[i], r[1]);
        ck_assert_str_eq(r[2], i % 2 ? "1" : "0");
        ck_assert_str_eq(r[3], "partner \xf0\x9f\x98\x80");
        i++;
    }
    mysql_free_result(res);
    live_teardown();
}
END_TEST

Suite *sql_suite(void) {
    Suite *s = suite_create("sql");
    TCase *tc = tcase_create("text");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, escape_hostile);
    tcase_add_test(tc, literal_values);
    tcase_add_test(tc, literal_doubles_round_trip);
    tcase_add_test(tc, plan_batch_cap);
    tcase_add_test(tc, plan_update_repeated_id);
    tcase_add_test(tc, plan_upsert_column_set);
    tcase_add_test(tc, build_create);
    tcase_add_test(tc, build_upsert);
    tcase_add_test(tc, build_update);
    tcase_add_test(tc, build_delete);
    suite_add_tcase(s, tc);
    tc = tcase_create("live");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, live_round_trip);
    tcase_add_test(tc, live_doubles_and_bools);
    suite_add_tcase(s, tc);
    return s;
}
