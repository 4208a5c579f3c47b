/* test_log.c — the log line (common/log.c): the three formats and their escaping, the
 * journald priority prefixes and their detection, the rate limit for librdkafka's lines,
 * and librdkafka's own lines brought into bulkwrite's format (common/kafka.c). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"
#include "kafka.h"
#include "log.h"

/* 2026-11-30T06:40:01.123Z */
#define T_MS 1796020801123LL

static const char *render(bw_log_format_t format, int journal, bw_log_level_t level, const bw_log_fields_t *f,
                          const char *msg) {
    static char line[4096];
    size_t n = bw_log_render(line, sizeof(line), format, journal, T_MS, level, f, msg);
    ck_assert_uint_lt(n, sizeof(line));
    line[n] = '\0';
    return line;
}

static const bw_log_fields_t named = {.component = "consumer", .shard = 3, .job = "0123456789abcdef0123456789abcdef",
                                      .part = 4};

START_TEST(text_line) {
    ck_assert_str_eq(render(BW_LOG_TEXT, 0, BW_LOG_INFO, &named, "applied 500 rows"),
                     "2026-11-30T06:40:01.123Z INFO  consumer shard=3 job=0123456789abcdef0123456789abcdef part=4 "
                     "applied 500 rows\n");
    bw_log_fields_t bare = {.component = "proxy", .shard = -1, .part = -1};
    ck_assert_str_eq(render(BW_LOG_TEXT, 0, BW_LOG_ERROR, &bare, "x"), "2026-11-30T06:40:01.123Z ERROR proxy x\n");
    /* a control character from outside cannot forge a second line */
    ck_assert_str_eq(render(BW_LOG_TEXT, 0, BW_LOG_WARN, &bare, "a\nb\tc\x1b"),
                     "2026-11-30T06:40:01.123Z WARN  proxy a?b?c?\n");
}
END_TEST

START_TEST(logfmt_line) {
    bw_log_kv_t kv[] = {{"client", "rdkafka#producer-1"}, {"facility", "CONF WARN"}, {"thread", NULL}};
    bw_log_fields_t f = {.component = "kafka", .shard = -1, .part = -1, .kv = kv, .kv_cnt = 3};
    ck_assert_str_eq(render(BW_LOG_LOGFMT, 0, BW_LOG_WARN, &f, "said \"no\"\nthen \\ left"),
                     "ts=2026-11-30T06:40:01.123Z level=warn component=kafka client=rdkafka#producer-1 "
                     "facility=\"CONF WARN\" msg=\"said \\\"no\\\"\\nthen \\\\ left\"\n");
    ck_assert_str_eq(render(BW_LOG_LOGFMT, 0, BW_LOG_DEBUG, &named, ""),
                     "ts=2026-11-30T06:40:01.123Z level=debug component=consumer shard=3 "
                     "job=0123456789abcdef0123456789abcdef part=4 msg=\"\"\n");
}
END_TEST

/* The line parsed by jansson: one object, the message as it was. */
static json_t *parse(const char *line) {
    ck_assert_ptr_nonnull(strchr(line, '\n'));
    ck_assert_ptr_eq(strchr(line, '\n'), line + strlen(line) - 1); /* one line */
    json_error_t err;
    json_t *j = json_loads(line, 0, &err);
    ck_assert_msg(j != NULL, "not JSON (%s): %s", err.text, line);
    return j;
}

START_TEST(json_line) {
    const char *msg = "op 3 failed: Duplicate entry '7' for key \"PRIMARY\"\n\tat \\ \x01 é";
    json_t *j = parse(render(BW_LOG_JSON, 0, BW_LOG_WARN, &named, msg));
    ck_assert_str_eq(json_string_value(json_object_get(j, "ts")), "2026-11-30T06:40:01.123Z");
    ck_assert_str_eq(json_string_value(json_object_get(j, "level")), "warn");
    ck_assert_str_eq(json_string_value(json_object_get(j, "component")), "consumer");
    ck_assert_int_eq(json_integer_value(json_object_get(j, "shard")), 3);
    ck_assert_str_eq(json_string_value(json_object_get(j, "job")), "0123456789abcdef0123456789abcdef");
    ck_assert_int_eq(json_integer_value(json_object_get(j, "part")), 4);
    ck_assert_str_eq(json_string_value(json_object_get(j, "msg")), msg);
    json_decref(j);
    /* escapes as written: \" \\ \n \t and \u0001 */
    ck_assert_ptr_nonnull(strstr(render(BW_LOG_JSON, 0, BW_LOG_WARN, &named, msg),
                                 "\\\"PRIMARY\\\"\\n\\tat \\\\ \\u0001 é\"}\n"));
}
END_TEST

START_TEST(long_lines_stay_whole) {
    char msg[6000];
    memset(msg, 'x', sizeof(msg) - 1);
    msg[sizeof(msg) - 1] = '\0';
    msg[100] = '"'; /* escapes count towards the length */
    char line[512 + 1]; /* a NUL after a full line */
    for (int format = BW_LOG_TEXT; format <= BW_LOG_JSON; format++) {
        size_t n = bw_log_render(line, 512, (bw_log_format_t)format, 1, T_MS, BW_LOG_INFO, &named, msg);
        ck_assert_uint_le(n, 512);
        ck_assert_uint_ge(n, 512 - 8); /* cut near the end, not dropped */
        ck_assert_int_eq(line[n - 1], '\n');
        ck_assert_ptr_eq(memchr(line, '\n', n), line + n - 1);
        if (format == BW_LOG_JSON) {
            line[n] = '\0';
            json_decref(parse(line + 3)); /* after "<6>" */
        }
    }
    /* an escape is never cut in half: a line that ends where "\"" would not fit */
    for (size_t cap = 200; cap < 260; cap++) {
        size_t n = bw_log_render(line, cap, BW_LOG_JSON, 0, T_MS, BW_LOG_INFO, &named, "\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\""
                                 "\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"");
        line[n] = '\0';
        json_decref(parse(line));
    }
}
END_TEST

START_TEST(journal_priorities) {
    bw_log_fields_t f = {.component = "proxy", .shard = -1, .part = -1};
    const char *want[] = {[BW_LOG_DEBUG] = "<7>", [BW_LOG_INFO] = "<6>", [BW_LOG_WARN] = "<4>", [BW_LOG_ERROR] = "<3>"};
    for (int level = BW_LOG_DEBUG; level <= BW_LOG_ERROR; level++)
        for (int format = BW_LOG_TEXT; format <= BW_LOG_JSON; format++) {
            const char *line = render((bw_log_format_t)format, 1, (bw_log_level_t)level, &f, "m");
            ck_assert_msg(strncmp(line, want[level], 3) == 0, "level %d format %d: %s", level, format, line);
            ck_assert_int_ne(render((bw_log_format_t)format, 0, (bw_log_level_t)level, &f, "m")[0], '<');
        }
}
END_TEST

START_TEST(journal_stream_detected) {
    char path[] = "/tmp/bw-log-test.XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    struct stat st;
    ck_assert_int_eq(fstat(fd, &st), 0);
    char js[64];
    snprintf(js, sizeof(js), "%llu:%llu", (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
    ck_assert_int_eq(bw_log_journal_detect(js, fd), 1);
    snprintf(js, sizeof(js), "%llu:%llu", (unsigned long long)st.st_dev, (unsigned long long)st.st_ino + 1);
    ck_assert_int_eq(bw_log_journal_detect(js, fd), 0); /* another stream: stderr was redirected */
    snprintf(js, sizeof(js), "%llu:%llux", (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
    ck_assert_int_eq(bw_log_journal_detect(js, fd), 0);
    ck_assert_int_eq(bw_log_journal_detect("", fd), 0);
    ck_assert_int_eq(bw_log_journal_detect(NULL, fd), 0);
    close(fd);
    unlink(path);
}
END_TEST

START_TEST(limit_per_kind) {
    static bw_log_limit_t l = BW_LOG_LIMIT_INIT(3, 1000);
    unsigned dropped = 99;
    /* "after 12ms" and "after 340ms" are one kind */
    ck_assert_int_eq(bw_log_limit_pass(&l, "FAIL", "connect failed after 12ms", 0, &dropped), 1);
    ck_assert_uint_eq(dropped, 0);
    ck_assert_int_eq(bw_log_limit_pass(&l, "FAIL", "connect failed after 340ms", 10, &dropped), 1);
    ck_assert_int_eq(bw_log_limit_pass(&l, "FAIL", "connect failed after 7ms", 20, &dropped), 1);
    ck_assert_int_eq(bw_log_limit_pass(&l, "FAIL", "connect failed after 9ms", 30, &dropped), 0);
    ck_assert_int_eq(bw_log_limit_pass(&l, "FAIL", "connect failed after 1ms", 40, &dropped), 0);
    /* another facility or another text is another kind */
    ck_assert_int_eq(bw_log_limit_pass(&l, "REQTMOUT", "connect failed after 1ms", 50, &dropped), 1);
    ck_assert_int_eq(bw_log_limit_pass(&l, "FAIL", "connect refused", 50, &dropped), 1);
    /* the next interval passes again and tells what was dropped */
    ck_assert_int_eq(bw_log_limit_pass(&l, "FAIL", "connect failed after 2ms", 999, &dropped), 0);
    ck_assert_int_eq(bw_log_limit_pass(&l, "FAIL", "connect failed after 3ms", 1000, &dropped), 1);
    ck_assert_uint_eq(dropped, 3);
    ck_assert_int_eq(bw_log_limit_pass(&l, "FAIL", "connect failed after 3ms", 1001, &dropped), 1);
    ck_assert_uint_eq(dropped, 0);
    /* more kinds than slots: each still gets its burst */
    for (int k = 0; k < 3 * BW_LOG_LIMIT_SLOTS; k++) {
        char fac[16];
        snprintf(fac, sizeof(fac), "F%c%c", 'a' + k % 26, 'a' + k / 26);
        ck_assert_int_eq(bw_log_limit_pass(&l, fac, "x", 2000 + k, &dropped), 1);
    }
}
END_TEST

/* Runs fn with stderr going to a file; returns what was written (malloc'd). */
static char *capture_stderr(void (*fn)(void)) {
    char path[] = "/tmp/bw-log-err.XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    int saved = dup(STDERR_FILENO);
    ck_assert_int_eq(dup2(fd, STDERR_FILENO), STDERR_FILENO);
    fn();
    ck_assert_int_eq(dup2(saved, STDERR_FILENO), STDERR_FILENO);
    close(saved);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    char *text = calloc(1, 65536);
    size_t n = fread(text, 1, 65535, f);
    text[n] = '\0';
    fclose(f);
    close(fd);
    unlink(path);
    return text;
}

static void log_some(void) {
    bw_log_set_format(BW_LOG_JSON);
    bw_log_part(BW_LOG_INFO, "consumer", 2, "0123456789abcdef0123456789abcdef", 7, "bad \xff byte and \"quotes\"");
    bw_log(BW_LOG_DEBUG, "consumer", -1, NULL, "below the level: not written");
    bw_log_set_format(BW_LOG_TEXT);
}

START_TEST(bw_log_writes_one_line) {
    char *text = capture_stderr(log_some);
    json_t *j = parse(text);
    ck_assert_str_eq(json_string_value(json_object_get(j, "msg")), "bad ? byte and \"quotes\""); /* valid UTF-8 */
    ck_assert_int_eq(json_integer_value(json_object_get(j, "part")), 7);
    json_decref(j);
    free(text);
}
END_TEST

/* Producers that each warn about a consumer property (librdkafka's CONFWARN, logged from
 * rd_kafka_new): 8 of the same warning, of which the limit lets 5 through. */
static void kafka_warns(void) {
    bw_log_set_format(BW_LOG_LOGFMT);
    for (int i = 0; i < 8; i++) {
        char err[256];
        rd_kafka_conf_t *kc = rd_kafka_conf_new();
        bw_kafka_conf_logging(kc);
        ck_assert_int_eq(rd_kafka_conf_set(kc, "enable.auto.commit", "false", err, sizeof(err)), RD_KAFKA_CONF_OK);
        rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, kc, err, sizeof(err));
        ck_assert_ptr_nonnull(rk);
        rd_kafka_destroy(rk);
    }
    bw_log_set_format(BW_LOG_TEXT);
}

START_TEST(librdkafka_lines_in_our_format) {
    char *text = capture_stderr(kafka_warns);
    int warns = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        ck_assert_msg(strncmp(line, "ts=", 3) == 0, "not in bulkwrite's format: %s", line); /* never "%4|…" */
        if (!strstr(line, "enable.auto.commit")) continue;
        warns++;
        ck_assert_ptr_nonnull(strstr(line, " level=warn component=kafka client=rdkafka#producer-"));
        ck_assert_ptr_nonnull(strstr(line, " facility=CONFWARN "));
    }
    ck_assert_int_eq(warns, 5);
    free(text);
}
END_TEST

Suite *log_suite(void) {
    Suite *s = suite_create("log");
    TCase *tc = tcase_create("format");
    tcase_add_test(tc, text_line);
    tcase_add_test(tc, logfmt_line);
    tcase_add_test(tc, json_line);
    tcase_add_test(tc, long_lines_stay_whole);
    tcase_add_test(tc, journal_priorities);
    tcase_add_test(tc, journal_stream_detected);
    tcase_add_test(tc, limit_per_kind);
    tcase_add_test(tc, bw_log_writes_one_line);
    tcase_add_test(tc, librdkafka_lines_in_our_format);
    suite_add_tcase(s, tc);
    return s;
}
