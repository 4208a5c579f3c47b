/* test_config.c — the reference config, every kind of config error (with file:line and
 * the key named), the generated docs and the dump/reload round trip. */
#include <libconfig.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "kafka.h"
#include "helpers.h"
#include "ratelimit.h"

START_TEST(reference_loads) {
    bw_config_t *c = t_ref_config();
    ck_assert_int_eq(c->shard_count, 8);
    ck_assert_int_eq(c->server_cnt, 2);
    ck_assert_int_eq(c->object_type_cnt, 2);
    ck_assert_str_eq(c->brokers, "127.0.0.1:9092");
    ck_assert_str_eq(c->topic, "bulkwrite.batches");
    ck_assert_str_eq(c->consumer_group, "bulkwrite-consumers");
    ck_assert_int_eq(c->create_topic, 1);
    ck_assert_int_eq(c->replication_factor, 3);
    ck_assert_int_eq(c->message_max_bytes, 1000000);
    ck_assert_int_eq(c->property_cnt, 0);
    ck_assert_int_eq(c->producer_property_cnt, 1);
    ck_assert_str_eq(c->producer_properties[0], "linger.ms=5");
    ck_assert_int_eq(c->consumer_property_cnt, 1);
    ck_assert_str_eq(c->consumer_properties[0], "session.timeout.ms=10000");
    ck_assert_str_eq(c->database_prefix, "db");
    ck_assert(c->default_rate == 200.0);
    ck_assert_int_eq(c->rate_override_cnt, 1);
    ck_assert_int_eq(c->rate_overrides[0].shard, 7);
    ck_assert(c->rate_overrides[0].rate == 50.0);
    ck_assert(c->default_row_rate == 0);
    ck_assert(c->rate_overrides[0].row_rate == 0); /* left out: the default, no row budget */
    ck_assert_int_eq(c->query_timeout_ms, 5000);
    ck_assert_int_eq(c->connect_timeout_ms, 2000);
    ck_assert_str_eq(c->proxy_listen_address, "127.0.0.1");
    ck_assert_int_eq(c->proxy_port, 18080);
    ck_assert_int_eq(c->proxy_max_connections, 128);
    ck_assert_int_eq(c->max_body_bytes, 16777216);
    ck_assert_int_eq(c->max_ops, 100000);
    ck_assert_int_eq(c->produce_timeout_ms, 30000);
    ck_assert_int_eq(c->pull_count, 1000);
    ck_assert_int_eq(c->workers, 4);
    ck_assert_str_eq(c->consumer_listen_address, "127.0.0.1"); /* defaults */
    ck_assert_int_eq(c->consumer_port, 18081);
    ck_assert_int_eq(c->log_level, 1); /* info */

    /* derived: shard -> server and per-shard rate */
    for (int s = 0; s < 8; s++) {
        ck_assert_int_eq(c->shard_server[s], s < 4 ? 0 : 1);
        ck_assert(c->shard_rate[s] == (s == 7 ? 50.0 : 200.0));
        ck_assert(c->shard_row_rate[s] == 0);
    }
    ck_assert_str_eq(c->servers[0].name, "mysql-a");
    ck_assert_int_eq(c->servers[0].port, 13306);
    ck_assert_int_eq(c->servers[0].first_shard, 0);
    ck_assert_int_eq(c->servers[0].last_shard, 3);
    ck_assert_str_eq(c->servers[1].name, "mysql-b");
    ck_assert_int_eq(c->servers[1].port, 13307);
    ck_assert_int_eq(c->servers[1].first_shard, 4);
    ck_assert_int_eq(c->servers[1].last_shard, 7);
    ck_assert_str_eq(c->servers[1].user, "bw_consumer");
    ck_assert_str_eq(c->servers[1].password, "demo-consumer-pw");
    ck_assert_str_eq(c->servers[1].proxy_user, "bw_proxy");
    ck_assert_str_eq(c->servers[1].proxy_password, "demo-proxy-pw");
    ck_assert_str_eq(c->mysql_user_host, "127.0.0.1");

    const bw_object_type_t *pin = bw_config_object_type(c, "pin");
    const bw_object_type_t *board = bw_config_object_type(c, "board");
    ck_assert_ptr_nonnull(pin);
    ck_assert_ptr_nonnull(board);
    ck_assert_ptr_null(bw_config_object_type(c, "pins"));
    ck_assert_int_eq(pin->type_id, 1);
    ck_assert_str_eq(pin->table, "pins");
    ck_assert_str_eq(pin->id_column, "id");
    ck_assert_int_eq(pin->create_route, BW_ROUTE_ID);
    ck_assert_int_eq(pin->batch_size[BW_OP_CREATE], 500);
    ck_assert_int_eq(pin->batch_size[BW_OP_UPDATE], 200);
    ck_assert_int_eq(pin->batch_size[BW_OP_UPSERT], 200);
    ck_assert_int_eq(pin->batch_size[BW_OP_DELETE], 1000);
    ck_assert_int_eq(pin->column_cnt, 6);
    static const char *pin_cols[] = {"owner_id", "board_id", "title", "description", "like_count", "image"};
    static const int pin_types[] = {BW_COL_INT, BW_COL_INT, BW_COL_STRING, BW_COL_STRING, BW_COL_INT, BW_COL_BYTES};
    for (int i = 0; i < 6; i++) {
        ck_assert_str_eq(pin->columns[i].name, pin_cols[i]);
        ck_assert_int_eq(pin->columns[i].type, pin_types[i]);
        ck_assert_int_eq(bw_config_column(pin, pin_cols[i]), i);
    }
    ck_assert_int_eq(bw_config_column(pin, "id"), -1);
    ck_assert_int_eq(bw_config_column(pin, "nope"), -1);
    ck_assert_int_eq(pin->columns[0].required, 1);
    ck_assert_int_eq(pin->columns[0].nullable, 0);
    ck_assert_int_eq(pin->columns[1].nullable, 1);
    ck_assert_int_eq(pin->columns[1].required, 0);
    ck_assert_int_eq(pin->columns[2].max_length, 255);
    ck_assert_int_eq(pin->columns[3].max_length, 2000);
    ck_assert_int_eq(pin->columns[5].max_length, 65535);
    ck_assert_int_eq(board->type_id, 2);
    ck_assert_int_eq(board->create_route, BW_ROUTE_MD5);
    ck_assert_int_eq(board->column_cnt, 4);
    ck_assert_int_eq(board->columns[2].type, BW_COL_DOUBLE);
    ck_assert_int_eq(board->columns[3].type, BW_COL_BOOL);
    ck_assert_int_eq(board->columns[0].max_length, 128);

    char db[32];
    bw_config_shard_db(c, 7, db, sizeof(db));
    ck_assert_str_eq(db, "db00007");
    bw_config_shard_db(c, 0, db, sizeof(db));
    ck_assert_str_eq(db, "db00000");
    ck_assert_str_eq(bw_op_name(BW_OP_CREATE), "create");
    ck_assert_str_eq(bw_op_name(BW_OP_DELETE), "delete");
    ck_assert_str_eq(bw_op_name(0), "?");
    ck_assert_str_eq(bw_op_name(5), "?");
    bw_config_destroy(c);
}
END_TEST

START_TEST(defaults_fill_in) {
    /* remove optional keys: the documented defaults appear */
    bw_config_t *c = t_conf_variant_load("  default_rate = 200.0;\n", "");
    ck_assert(c->default_rate == 100.0);
    ck_assert(c->shard_rate[0] == 100.0);
    ck_assert(c->shard_rate[7] == 50.0); /* the override still applies */
    bw_config_destroy(c);
    c = t_conf_variant_load("nullable = true; max_length = 255; }", "}");
    const bw_object_type_t *pin = bw_config_object_type(c, "pin");
    ck_assert_int_eq(pin->columns[2].max_length, 255);
    ck_assert_int_eq(pin->columns[2].nullable, 0);
    bw_config_destroy(c);
    c = t_conf_variant_load("    batch_size = { create = 500; update = 200; upsert = 200; delete = 1000; };\n"
                            "    columns = (\n      { name = \"owner_id\"",
                            "    columns = (\n      { name = \"owner_id\"");
    pin = bw_config_object_type(c, "pin");
    ck_assert_int_eq(pin->batch_size[BW_OP_CREATE], 500);
    ck_assert_int_eq(pin->batch_size[BW_OP_DELETE], 1000);
    bw_config_destroy(c);
    /* a rate given as an integer is a number too */
    c = t_conf_variant_load("default_rate = 200.0;", "default_rate = 150;");
    ck_assert(c->default_rate == 150.0);
    bw_config_destroy(c);
}
END_TEST

/* Row budgets: a default, overrides that set rate, row_rate or both (what an entry leaves
 * out is the default, filled in so that the dump says it). */
START_TEST(row_rates) {
    bw_config_t *c = t_conf_variant_load("default_row_rate = 0.0;", "default_row_rate = 5000.0;");
    ck_assert(c->default_row_rate == 5000.0);
    ck_assert(c->shard_row_rate[0] == 5000.0);
    ck_assert(c->shard_rate[7] == 50.0 && c->shard_row_rate[7] == 5000.0); /* the entry sets only rate */
    ck_assert(c->rate_overrides[0].row_rate == 5000.0);
    bw_config_destroy(c);
    /* an entry with only row_rate keeps the default statement rate; one with both sets both */
    c = t_conf_variant_load("{ shard = 7; rate = 50.0; }",
                            "{ shard = 7; row_rate = 800.0; }, { shard = 6; rate = 5.0; row_rate = 100; }");
    ck_assert_int_eq(c->rate_override_cnt, 2);
    ck_assert(c->rate_overrides[0].rate == 200.0 && c->rate_overrides[0].row_rate == 800.0);
    ck_assert(c->shard_rate[7] == 200.0 && c->shard_row_rate[7] == 800.0);
    ck_assert(c->shard_rate[6] == 5.0 && c->shard_row_rate[6] == 100.0);
    ck_assert(c->shard_rate[0] == 200.0 && c->shard_row_rate[0] == 0);
    bw_config_destroy(c);
    /* left out: no row budget */
    c = t_conf_variant_load("  default_row_rate = 0.0;\n", "");
    ck_assert(c->default_row_rate == 0 && c->shard_row_rate[3] == 0);
    bw_config_destroy(c);
    /* the bounds load */
    c = t_conf_variant_load("default_row_rate = 0.0;", "default_row_rate = 1;");
    ck_assert(c->shard_row_rate[0] == BW_ROW_RATE_MIN);
    bw_config_destroy(c);
    c = t_conf_variant_load("{ shard = 7; rate = 50.0; }", "{ shard = 7; row_rate = 1e6; }");
    ck_assert(c->shard_row_rate[7] == BW_ROW_RATE_MAX);
    bw_config_destroy(c);
}
END_TEST

/* Loads the reference with `find` replaced by `repl`; asserts the load fails with an
 * error starting "<path>:<line>:" and containing every one of the NULL-ended needles. */
static void expect_error(const char *find, const char *repl, int line, ...) {
    char *path = t_conf_variant(find, repl, NULL);
    char err[1024] = "";
    bw_config_t *c = bw_config_load(path, err, sizeof(err));
    if (c) bw_config_destroy(c);
    ck_assert_msg(c == NULL, "replacing \"%s\" by \"%s\" should fail to load", find, repl);
    char want[1100];
    snprintf(want, sizeof(want), "%s:%d: ", path, line);
    ck_assert_msg(strncmp(err, want, strlen(want)) == 0, "error \"%s\" does not start with \"%s\"", err, want);
    va_list ap;
    va_start(ap, line);
    for (const char *needle; (needle = va_arg(ap, const char *));)
        ck_assert_msg(strstr(err, needle) != NULL, "error \"%s\" lacks \"%s\"", err, needle);
    va_end(ap);
    t_unlink_free(path);
}

#define REF t_ref_conf_text()

START_TEST(error_syntax) {
    expect_error("count = 8;", "count = = 8;", t_line_of(REF, NULL, "count = 8;"), "syntax error", NULL);
    expect_error("workers = 4;", "workers = 4 4;", t_line_of(REF, NULL, "workers = 4;"), "syntax error", NULL);
    expect_error("{ shard = 7; rate = 50.0; }", "{ shard = 7; rate = 50.0; ", t_line_of(REF, NULL, "{ shard = 7;") + 1,
                 "syntax error", NULL);
}
END_TEST

START_TEST(error_unknown_key) {
    expect_error("brokers = ", "brokerz = ", t_line_of(REF, NULL, "brokers = "), "unknown key", "kafka.brokerz", NULL);
    expect_error("log_level = \"info\";", "log_level = \"info\";\nlog_levle = \"debug\";",
                 t_line_of(REF, NULL, "log_level = \"info\";") + 1, "unknown key", "log_levle", NULL);
    expect_error("type_id = 2;", "type_id = 2; colour = \"red\";", t_line_of(REF, NULL, "type_id = 2;"),
                 "unknown key", "object_types[1].colour", NULL);
    expect_error("{ name = \"score\";", "{ name = \"score\"; width = 3;",
                 t_line_of(REF, NULL, "{ name = \"score\";"), "unknown key", "columns[2].width", NULL);
    expect_error("batch_size = { create = 500; update = 200; upsert = 200; delete = 1000; };\n    columns = (\n      { name = \"partner\"",
                 "batch_size = { create = 500; update = 200; upsert = 200; delete = 1000; insert = 3; };\n    columns = (\n      { name = \"partner\"",
                 t_line_of(REF, "name = \"board\"", "batch_size"), "unknown key", "batch_size.insert", NULL);
    expect_error("consumer = {", "consumr = {", t_line_of(REF, NULL, "consumer = {"), "unknown key", "consumr", NULL);
}
END_TEST

/* A renamed key: its old name is still read (as the new one); both names set is refused. */
START_TEST(renamed_key_old_name) {
    const char *url = "http://127.0.0.1:9093/api/v2/alerts";
    char old[200];
    snprintf(old, sizeof(old), "webhook_url = \"%s\";", url);
    bw_config_t *c = t_conf_variant_load("alertmanager_url = \"\";", old);
    ck_assert_str_eq(c->alertmanager_url, url);
    bw_config_destroy(c);
    char both[300];
    snprintf(both, sizeof(both), "alertmanager_url = \"\";\n  %s", old);
    expect_error("alertmanager_url = \"\";", both, t_line_of(REF, NULL, "alertmanager_url = \"\";") + 1,
                 "alerts.webhook_url is the old name of alerts.alertmanager_url, which is set too", NULL);
    char err[256];
    char *path = t_conf_variant("alertmanager_url", "alertmanager_url", NULL);
    char *assign[] = {old};
    snprintf(old, sizeof(old), "alerts.webhook_url=%s", url);
    ck_assert_int_ne(bw_config_set_file(path, assign, 1, err, sizeof(err)), BW_OK);
    ck_assert_str_eq(err, "alerts.webhook_url is the old name of alerts.alertmanager_url: set that");
    t_unlink_free(path);
}
END_TEST

/* Durable by default: 3 replicas, 2 in sync; min_insync_replicas above the replicas is refused. */
START_TEST(durability_defaults) {
    bw_config_t *c = t_ref_config();
    ck_assert_int_eq(c->replication_factor, 3);
    ck_assert_int_eq(c->min_insync_replicas, 2);
    ck_assert_int_eq(c->allow_weak_durability, 0);
    bw_config_destroy(c);
    expect_error("min_insync_replicas = 2;", "min_insync_replicas = 4;", t_line_of(REF, NULL, "min_insync_replicas = 2;"),
                 "kafka.min_insync_replicas: 4 is more than kafka.replication_factor (3)", NULL);
}
END_TEST

START_TEST(error_wrong_type) {
    expect_error("count = 8;", "count = \"8\";", t_line_of(REF, NULL, "count = 8;"), "shards.count", "integer", NULL);
    expect_error("create_topic = true;", "create_topic = 1;", t_line_of(REF, NULL, "create_topic = true;"),
                 "kafka.create_topic", "true or false", NULL);
    expect_error("topic = \"bulkwrite.batches\";", "topic = 5;", t_line_of(REF, NULL, "topic = \"bulkwrite.batches\";"),
                 "kafka.topic", "string", NULL);
    expect_error("default_rate = 200.0;", "default_rate = \"fast\";", t_line_of(REF, NULL, "default_rate = 200.0;"),
                 "shards.default_rate", "number", NULL);
    expect_error("port = 13307;", "port = 13307.5;", t_line_of(REF, NULL, "port = 13307;"),
                 "shards.servers[1].port", "integer", NULL);
    expect_error("producer_properties = [ \"linger.ms=5\" ];", "producer_properties = \"linger.ms=5\";",
                 t_line_of(REF, NULL, "producer_properties = ["), "kafka.producer_properties", "list of strings", NULL);
    /* a whole section given as a scalar */
    const char *from = strstr(REF, "mysql = {");
    char *block = strndup(from, (size_t)(strstr(from, "};\n") + 3 - from));
    expect_error(block, "mysql = 3;\n", t_line_of(REF, NULL, "mysql = {"), "mysql", "group", NULL);
    free(block);
    expect_error("batch_size = { create = 500; update = 200; upsert = 200; delete = 1000; };",
                 "batch_size = 500;", t_line_of(REF, NULL, "batch_size = {"), "object_types[0].batch_size", "group", NULL);
    from = strstr(REF, "columns = (");
    block = strndup(from, (size_t)(strstr(from, "    );\n") + 7 - from));
    expect_error(block, "columns = [ \"x\" ];\n", t_line_of(REF, NULL, "columns = ("), "object_types[0].columns",
                 "list", NULL);
    free(block);
}
END_TEST

START_TEST(error_out_of_range) {
    expect_error("replication_factor = 3;", "replication_factor = 0;", t_line_of(REF, NULL, "replication_factor = 3;"),
                 "kafka.replication_factor", "out of range", "0", NULL);
    expect_error("type_id = 2;", "type_id = 1024;", t_line_of(REF, NULL, "type_id = 2;"),
                 "object_types[1].type_id", "out of range", "1024", NULL);
    expect_error("port = 13306;", "port = 65536;", t_line_of(REF, NULL, "port = 13306;"),
                 "shards.servers[0].port", "out of range", NULL);
    expect_error("message_max_bytes = 1000000;", "message_max_bytes = 1023;",
                 t_line_of(REF, NULL, "message_max_bytes = 1000000;"), "kafka.message_max_bytes", "out of range", NULL);
    expect_error("{ shard = 7; rate = 50.0; }", "{ shard = 7; rate = -1.0; }", t_line_of(REF, NULL, "{ shard = 7; rate = 50.0; }"),
                 "shards.rate_overrides[0].rate", "out of range", NULL);
    /* a positive rate below the minimum (once it overflowed the limiter to "unlimited"), as
     * default and as override; the reason names the bounds */
    expect_error("default_rate = 200.0;", "default_rate = 1e-13;", t_line_of(REF, NULL, "default_rate = 200.0;"),
                 "shards.default_rate: rate 1e-13 is out of range", "0 (unlimited) or 0.001 to 1e6", NULL);
    expect_error("{ shard = 7; rate = 50.0; }", "{ shard = 7; rate = 0.0009; }", t_line_of(REF, NULL, "{ shard = 7; rate = 50.0; }"),
                 "shards.rate_overrides: rate 0.0009 is out of range", "0.001 to 1e6", NULL);
    expect_error("{ shard = 7; rate = 50.0; }", "{ shard = 7; rate = 1000001.0; }",
                 t_line_of(REF, NULL, "{ shard = 7; rate = 50.0; }"), "shards.rate_overrides[0].rate", "out of range", NULL);
    /* the bounds themselves and 0 load */
    bw_config_t *c = t_conf_variant_load("default_rate = 200.0;", "default_rate = 0.001;");
    ck_assert(c->default_rate == BW_RATE_MIN && c->shard_rate[0] == BW_RATE_MIN);
    bw_config_destroy(c);
    c = t_conf_variant_load("{ shard = 7; rate = 50.0; }", "{ shard = 7; rate = 1e6; }, { shard = 6; rate = 0.0; }");
    ck_assert(c->shard_rate[7] == BW_RATE_MAX && c->shard_rate[6] == 0);
    bw_config_destroy(c);
    /* an int64 literal beyond int is out of range, not truncated */
    expect_error("workers = 4;", "workers = 4294967297L;", t_line_of(REF, NULL, "workers = 4;"),
                 "consumer.workers", "out of range", NULL);
    /* cross-key range: an override for a shard beyond shards.count */
    expect_error("{ shard = 7; rate = 50.0; }", "{ shard = 8; rate = 50.0; }", t_line_of(REF, NULL, "{ shard = 7; rate = 50.0; }"),
                 "rate_overrides", "shard", NULL);
    /* a server range beyond shards.count */
    expect_error("last_shard = 7;", "last_shard = 8;", t_line_of(REF, "mysql-b", "last_shard"),
                 "shards.servers", "mysql-b", NULL);
}
END_TEST

START_TEST(error_row_rates) {
    int def = t_line_of(REF, NULL, "default_row_rate = 0.0;"), ov = t_line_of(REF, NULL, "{ shard = 7; rate = 50.0; }");
    /* within the key table's range but below the minimum: the reason names the bounds */
    expect_error("default_row_rate = 0.0;", "default_row_rate = 0.5;", def,
                 "shards.default_row_rate: row_rate 0.5 is out of range", "0 (no row budget) or 1 to 1e6 rows per second",
                 NULL);
    expect_error("default_row_rate = 0.0;", "default_row_rate = 2e6;", def, "shards.default_row_rate", "out of range",
                 NULL);
    expect_error("default_row_rate = 0.0;", "default_row_rate = -1.0;", def, "shards.default_row_rate", "out of range",
                 NULL);
    expect_error("default_row_rate = 0.0;", "default_row_rate = \"fast\";", def, "shards.default_row_rate", "number",
                 NULL);
    expect_error("{ shard = 7; rate = 50.0; }", "{ shard = 7; row_rate = 0.5; }", ov,
                 "shards.rate_overrides: row_rate 0.5 is out of range", "1 to 1e6", NULL);
    expect_error("{ shard = 7; rate = 50.0; }", "{ shard = 7; rate = 50.0; row_rate = 1000001.0; }", ov,
                 "shards.rate_overrides[0].row_rate", "out of range", NULL);
    /* an entry must set something */
    expect_error("{ shard = 7; rate = 50.0; }", "{ shard = 7; }", ov, "shards.rate_overrides[0]: set rate",
                 "row_rate (rows per second) or both", NULL);
    expect_error("{ shard = 7; rate = 50.0; }", "{ shard = 7; rows = 5.0; }", ov, "unknown key",
                 "shards.rate_overrides[0].rows", NULL);
}
END_TEST

START_TEST(error_missing_required) {
    /* the line is that of the section the key belongs in */
    expect_error("  count = 8;\n", "", t_line_of(REF, NULL, "shards = {"), "missing required key", "shards.count", NULL);
    expect_error("    type_id = 1;             # type bits of pin ids\n", "", t_line_of(REF, NULL, "name = \"pin\"") - 2,
                 "missing required key", "object_types[0].type_id", NULL);
    expect_error("first_shard = 4;", "", t_line_of(REF, NULL, "name = \"mysql-b\"") - 1, "missing required key",
                 "shards.servers[1].first_shard", NULL);
    expect_error("{ name = \"score\";    type = \"double\";", "{ name = \"score\";",
                 t_line_of(REF, NULL, "name = \"score\""), "missing required key", "columns[2].type", NULL);
}
END_TEST

START_TEST(error_shard_ownership) {
    /* shard 3 held by mysql-a and mysql-b */
    expect_error("first_shard = 4;", "first_shard = 3;", t_line_of(REF, "mysql-b", "first_shard"), "shard 3",
                 "two servers", "mysql-b", NULL);
    /* shard 7 held by none */
    expect_error("last_shard = 7;", "last_shard = 6;", t_line_of(REF, NULL, "servers = ("), "no server holds shard 7",
                 "shards.servers", NULL);
    /* a gap in the middle */
    expect_error("last_shard = 3;", "last_shard = 2;", t_line_of(REF, NULL, "servers = ("), "no server holds shard 3", NULL);
    /* reversed range */
    expect_error("first_shard = 4;", "first_shard = 8;", t_line_of(REF, "mysql-b", "first_shard"), "mysql-b",
                 "first_shard <= last_shard", NULL);
    /* two servers with one name */
    expect_error("name = \"mysql-b\";", "name = \"mysql-a\";", t_line_of(REF, NULL, "name = \"mysql-b\";"), "mysql-a",
                 "used twice", NULL);
}
END_TEST

START_TEST(error_identifiers) {
    expect_error("table = \"pins\";", "table = \"pins; DROP TABLE x\";", t_line_of(REF, NULL, "table = \"pins\";"),
                 "table", "pins; DROP TABLE x", NULL);
    expect_error("id_column = \"id\";", "id_column = \"id`\";", t_line_of(REF, NULL, "id_column = \"id\";"),
                 "id_column", "id`", NULL);
    expect_error("name = \"pin\";", "name = \"pin pin\";", t_line_of(REF, NULL, "name = \"pin\";"), "name",
                 "pin pin", NULL);
    expect_error("{ name = \"title\";", "{ name = \"ti-tle\";", t_line_of(REF, NULL, "{ name = \"title\";"),
                 "ti-tle", NULL);
    expect_error("database_prefix = \"db\";", "database_prefix = \"db.\";", t_line_of(REF, NULL, "database_prefix"),
                 "shards.database_prefix", "db.", NULL);
    /* 65 characters: too long for MySQL */
    expect_error("table = \"pins\";",
                 "table = \"p2345678901234567890123456789012345678901234567890123456789012345\";",
                 t_line_of(REF, NULL, "table = \"pins\";"), "table", NULL);
    /* a column named like the id column */
    expect_error("{ name = \"board_id\";", "{ name = \"id\";", t_line_of(REF, NULL, "{ name = \"board_id\";"), "\"id\"", NULL);
}
END_TEST

START_TEST(error_duplicates) {
    expect_error("{ name = \"board_id\";", "{ name = \"owner_id\";", t_line_of(REF, NULL, "{ name = \"board_id\";"),
                 "owner_id", "twice", NULL);
    expect_error("type_id = 2;", "type_id = 1;", t_line_of(REF, NULL, "type_id = 2;"), "type_id", "twice", NULL);
    expect_error("name = \"board\";", "name = \"pin\";", t_line_of(REF, NULL, "name = \"board\";"), "pin", "twice", NULL);
}
END_TEST

START_TEST(error_enum) {
    expect_error("create_route = \"md5\";", "create_route = \"sha1\";", t_line_of(REF, NULL, "create_route = \"md5\";"),
                 "object_types[1].create_route", "unknown value", "sha1", NULL);
    expect_error("log_level = \"info\";", "log_level = \"verbose\";", t_line_of(REF, NULL, "log_level = \"info\";"),
                 "log_level", "verbose", NULL);
    expect_error("type = \"bool\";", "type = \"boolean\";", t_line_of(REF, NULL, "type = \"bool\";"),
                 "object_types[1].columns[3].type", "boolean", NULL);
}
END_TEST

/* Pass-through Kafka properties may tune librdkafka but not undo bulkwrite's guarantees. */
START_TEST(kafka_properties_cannot_override_guarantees) {
    char err[512] = "";
    bw_config_t *ok = t_conf_variant_load("producer_properties = [ \"linger.ms=5\" ];",
                                          "producer_properties = [ \"linger.ms=7\", \"batch.num.messages=500\" ];");
    rd_kafka_conf_t *kc = bw_kafka_conf(ok, BW_KAFKA_PRODUCER, NULL, err, sizeof(err));
    ck_assert_msg(kc != NULL, "%s", err);
    char val[64];
    size_t len = sizeof(val);
    ck_assert_int_eq(rd_kafka_conf_get(kc, "linger.ms", val, &len), RD_KAFKA_CONF_OK);
    ck_assert_str_eq(val, "7");
    len = sizeof(val);
    ck_assert_int_eq(rd_kafka_conf_get(kc, "acks", val, &len), RD_KAFKA_CONF_OK);
    ck_assert_str_eq(val, "-1"); /* all */
    rd_kafka_conf_destroy(kc);
    bw_config_destroy(ok);

    static const char *const owned[][2] = {
        {"producer_properties = [ \"linger.ms=5\" ];", "producer_properties = [ \"acks=1\" ];"},
        {"producer_properties = [ \"linger.ms=5\" ];", "producer_properties = [ \"enable.idempotence=false\" ];"},
        {"properties = [ ];", "properties = [ \"enable.auto.commit=true\" ];"},
        {"consumer_properties = [ \"session.timeout.ms=10000\" ];",
         "consumer_properties = [ \"auto.offset.reset=earliest\" ];"},
    };
    for (size_t i = 0; i < sizeof(owned) / sizeof(owned[0]); i++) {
        bw_config_t *c = t_conf_variant_load(owned[i][0], owned[i][1]);
        /* a shared or producer list fails the producer, a consumer list the consumer */
        char perr[512] = "", cerr[512] = "";
        rd_kafka_conf_t *p = bw_kafka_conf(c, BW_KAFKA_PRODUCER, NULL, perr, sizeof(perr));
        rd_kafka_conf_t *q = bw_kafka_conf(c, BW_KAFKA_CONSUMER, NULL, cerr, sizeof(cerr));
        ck_assert_msg(!p || !q, "case %zu accepted by both clients", i);
        ck_assert_msg(strstr(perr, "cannot be overridden") || strstr(cerr, "cannot be overridden"),
                      "case %zu: %s / %s", i, perr, cerr);
        if (p) rd_kafka_conf_destroy(p);
        if (q) rd_kafka_conf_destroy(q);
        bw_config_destroy(c);
    }
}
END_TEST

START_TEST(error_unreadable_file) {
    char err[512] = "";
    ck_assert_ptr_null(bw_config_load("/nonexistent/bulkwrite.conf", err, sizeof(err)));
    ck_assert_msg(strstr(err, "/nonexistent/bulkwrite.conf") != NULL, "%s", err);
    /* errstr may be NULL */
    ck_assert_ptr_null(bw_config_load("/nonexistent/bulkwrite.conf", NULL, 0));
}
END_TEST

/* ---- docs ----------------------------------------------------------------------- */

static char *doc_text(void) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    bw_config_doc(f);
    fclose(f);
    return text;
}

/* Every setting of the reference file, as the doc names it ("shards.servers[].port"). */
static void check_documented(const char *doc, const config_setting_t *s, const char *prefix) {
    int n = config_setting_length(s);
    for (int i = 0; i < n; i++) {
        const config_setting_t *m = config_setting_get_elem(s, (unsigned)i);
        char path[512];
        const char *name = config_setting_name(m);
        if (name) snprintf(path, sizeof(path), "%s%s%s", prefix, *prefix ? "." : "", name);
        else snprintf(path, sizeof(path), "%s[]", prefix);
        if (config_setting_is_group(m) && name) {
            /* a section ("kafka") or a K_GROUP ("batch_size"): its members are documented */
            check_documented(doc, m, path);
            continue;
        }
        if (name) {
            char want[600];
            snprintf(want, sizeof(want), "| `%s` |", path);
            ck_assert_msg(strstr(doc, want) != NULL, "docs lack %s", want);
        }
        if (config_setting_is_list(m)) check_documented(doc, m, path);
        else if (config_setting_is_group(m)) check_documented(doc, m, path); /* list element */
    }
}

START_TEST(doc_mentions_every_key) {
    char *doc = doc_text();
    static const char *keys[] = {
        "log_level", "log_format", "kafka.brokers", "kafka.topic", "kafka.consumer_group", "kafka.create_topic",
        "kafka.replication_factor", "kafka.message_max_bytes", "kafka.properties",
        "kafka.producer_properties", "kafka.consumer_properties", "shards.count",
        "shards.database_prefix", "shards.default_rate", "shards.default_row_rate", "shards.rate_overrides",
        "shards.rate_overrides[].row_rate", "shards.servers",
        "mysql.query_timeout_ms", "mysql.connect_timeout_ms", "proxy.listen_address", "proxy.port",
        "proxy.max_connections", "proxy.max_body_bytes", "proxy.max_ops", "proxy.produce_timeout_ms",
        "consumer.pull_count", "consumer.workers", "consumer.listen_address", "consumer.port", "object_types",
        "shards.servers[].first_shard", "shards.rate_overrides[].rate", "object_types[].type_id",
        "object_types[].batch_size.create", "object_types[].batch_size.delete",
        "object_types[].columns[].max_length", "object_types[].create_route"};
    for (size_t i = 0; i < BW_ARRAY_LEN(keys); i++) {
        char want[128];
        snprintf(want, sizeof(want), "| `%s` |", keys[i]);
        ck_assert_msg(strstr(doc, want) != NULL, "docs lack %s", want);
    }
    /* required keys say so; enums list their words */
    ck_assert_ptr_nonnull(strstr(doc, "| `shards.count` | integer (1 to 65536) | **required** |"));
    ck_assert_ptr_nonnull(strstr(doc, "`id`, `md5`"));
    /* independently: every key the reference file uses is documented */
    config_t cf;
    config_init(&cf);
    ck_assert(config_read_file(&cf, t_ref_conf_path()) == CONFIG_TRUE);
    check_documented(doc, config_root_setting(&cf), "");
    config_destroy(&cf);
    free(doc);
}
END_TEST

/* ---- dump and reload -------------------------------------------------------------- */

static void assert_same_config(const bw_config_t *a, const bw_config_t *b) {
#define SAME_STR(f) ck_assert_str_eq(a->f, b->f)
#define SAME_INT(f) ck_assert_int_eq(a->f, b->f)
#define SAME_DBL(f) ck_assert_msg(a->f == b->f, #f ": %.17g vs %.17g", a->f, b->f)
    SAME_INT(log_level);
    SAME_INT(log_format);
    SAME_STR(brokers);
    SAME_STR(topic);
    SAME_STR(consumer_group);
    SAME_INT(create_topic);
    SAME_INT(replication_factor);
    SAME_INT(message_max_bytes);
    SAME_INT(property_cnt);
    for (int i = 0; i < a->property_cnt; i++) SAME_STR(properties[i]);
    SAME_INT(producer_property_cnt);
    for (int i = 0; i < a->producer_property_cnt; i++) SAME_STR(producer_properties[i]);
    SAME_INT(consumer_property_cnt);
    for (int i = 0; i < a->consumer_property_cnt; i++) SAME_STR(consumer_properties[i]);
    SAME_INT(shard_count);
    SAME_STR(database_prefix);
    SAME_DBL(default_rate);
    SAME_DBL(default_row_rate);
    SAME_INT(rate_override_cnt);
    for (int i = 0; i < a->rate_override_cnt; i++) {
        SAME_INT(rate_overrides[i].shard);
        SAME_DBL(rate_overrides[i].rate);
        SAME_DBL(rate_overrides[i].row_rate);
    }
    SAME_INT(server_cnt);
    for (int i = 0; i < a->server_cnt; i++) {
        SAME_STR(servers[i].name);
        SAME_STR(servers[i].host);
        SAME_INT(servers[i].port);
        SAME_STR(servers[i].user);
        /* a dump redacts secrets: "" stays "", anything else reads back as "(redacted)" */
        ck_assert_str_eq(b->servers[i].password, *a->servers[i].password ? "(redacted)" : "");
        SAME_STR(servers[i].proxy_user);
        SAME_INT(servers[i].first_shard);
        SAME_INT(servers[i].last_shard);
    }
    SAME_INT(query_timeout_ms);
    SAME_INT(connect_timeout_ms);
    SAME_STR(proxy_listen_address);
    SAME_INT(proxy_port);
    SAME_INT(proxy_max_connections);
    SAME_INT(max_body_bytes);
    SAME_INT(max_ops);
    SAME_INT(produce_timeout_ms);
    SAME_INT(pull_count);
    SAME_INT(workers);
    SAME_STR(consumer_listen_address);
    SAME_INT(consumer_port);
    SAME_INT(object_type_cnt);
    for (int i = 0; i < a->object_type_cnt; i++) {
        SAME_STR(object_types[i].name);
        SAME_INT(object_types[i].type_id);
        SAME_STR(object_types[i].table);
        SAME_STR(object_types[i].id_column);
        SAME_INT(object_types[i].create_route);
        for (int o = 1; o < BW_OP_MAX; o++) SAME_INT(object_types[i].batch_size[o]);
        SAME_INT(object_types[i].column_cnt);
        for (int j = 0; j < a->object_types[i].column_cnt; j++) {
            SAME_STR(object_types[i].columns[j].name);
            SAME_INT(object_types[i].columns[j].type);
            SAME_INT(object_types[i].columns[j].nullable);
            SAME_INT(object_types[i].columns[j].required);
            SAME_INT(object_types[i].columns[j].max_length);
        }
    }
    for (int s = 0; s < a->shard_count; s++) {
        SAME_INT(shard_server[s]);
        SAME_DBL(shard_rate[s]);
        SAME_DBL(shard_row_rate[s]);
    }
#undef SAME_STR
#undef SAME_INT
#undef SAME_DBL
}

static char *dump_text(const bw_config_t *c) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    bw_config_dump(c, f);
    fclose(f);
    return text;
}

static void dump_reload(bw_config_t *c) {
    char *text = dump_text(c);
    char *path = t_write_temp(text);
    char err[1024] = "";
    bw_config_t *d = bw_config_load(path, err, sizeof(err));
    ck_assert_msg(d != NULL, "the dump does not load: %s\n%s", err, text);
    assert_same_config(c, d);
    /* and dumping again gives the same text, past the header line naming the file */
    char *text2 = dump_text(d);
    ck_assert_str_eq(strchr(text, '\n'), strchr(text2, '\n'));
    free(text2);
    bw_config_destroy(d);
    t_unlink_free(path);
    free(text);
}

START_TEST(dump_reloads_same_values) {
    bw_config_t *c = t_ref_config();
    dump_reload(c);
    bw_config_destroy(c);
}
END_TEST

START_TEST(dump_reloads_awkward_values) {
    /* rates needing all 17 digits, strings needing escapes, an empty list */
    char *p1 = t_conf_variant("default_rate = 200.0;", "default_rate = 0.1234567890123;", NULL);
    bw_config_t *c = NULL;
    char err[1024] = "";
    c = bw_config_load(p1, err, sizeof(err));
    ck_assert_msg(c != NULL, "%s", err);
    ck_assert(c->default_rate == 0.1234567890123);
    dump_reload(c);
    bw_config_destroy(c);
    t_unlink_free(p1);

    c = t_conf_variant_load("{ shard = 7; rate = 50.0; }", "{ shard = 7; rate = 0.0010000000000000002; }, { shard = 2; rate = 999999.99; }");
    ck_assert(c->shard_rate[7] == 0.0010000000000000002);
    ck_assert(c->shard_rate[2] == 999999.99);
    dump_reload(c);
    bw_config_destroy(c);

    /* row rates, and an entry whose left-out rate is dumped as the default it took */
    c = t_conf_variant_load("{ shard = 7; rate = 50.0; }", "{ shard = 7; row_rate = 1234.5; }, { shard = 1; rate = 3; row_rate = 0; }");
    ck_assert(c->shard_rate[7] == 200.0 && c->shard_row_rate[7] == 1234.5);
    dump_reload(c);
    bw_config_destroy(c);

    c = t_conf_variant_load("name = \"mysql-a\";", "name = \"p\\\"w\\\\d\";");
    ck_assert_str_eq(c->servers[0].name, "p\"w\\d");
    dump_reload(c);
    bw_config_destroy(c);

    c = t_conf_variant_load("name = \"mysql-a\";", "name = \"tab\\there\\nnew line\\r\\f\\x01\";");
    ck_assert_str_eq(c->servers[0].name, "tab\there\nnew line\r\f\x01");
    dump_reload(c);
    bw_config_destroy(c);

    c = t_conf_variant_load("rate_overrides = (\n    # Shard 7 holds hot users: keep bulk traffic gentle there.\n"
                            "    { shard = 7; rate = 50.0; }\n  );",
                            "rate_overrides = ( );");
    ck_assert_int_eq(c->rate_override_cnt, 0);
    ck_assert(c->shard_rate[7] == 200.0);
    dump_reload(c);
    bw_config_destroy(c);
}
END_TEST

/* ---- secrets ---------------------------------------------------------------------- */

START_TEST(secret_names) {
    const char *secret[] = {"sasl.password", "ssl.key.password", "ssl.key.pem", "SASL.JAAS.config",
                            "sasl.oauthbearer.client.secret", "my_token"};
    const char *plain[] = {"sasl.mechanism", "security.protocol", "sasl.username", "linger.ms", "ssl.ca.location"};
    for (size_t i = 0; i < sizeof(secret) / sizeof(*secret); i++)
        ck_assert_msg(bw_config_secret_name(secret[i], strlen(secret[i])), "%s", secret[i]);
    for (size_t i = 0; i < sizeof(plain) / sizeof(*plain); i++)
        ck_assert_msg(!bw_config_secret_name(plain[i], strlen(plain[i])), "%s", plain[i]);
}
END_TEST

#define MARK "Sup3r-s3cret-MARK"

START_TEST(secrets_are_redacted_in_dumps) {
    bw_config_t *c = t_conf_variant_load(
        "properties = [ ];",
        "properties = [ \"sasl.mechanism=PLAIN\", \"sasl.password=" MARK "1\", \"ssl.key.password=" MARK "2\" ];");
    char *text = dump_text(c);
    bw_config_destroy(c);
    ck_assert_msg(!strstr(text, MARK), "a secret in the dump:\n%s", text);
    ck_assert_ptr_nonnull(strstr(text, "\"sasl.password=(redacted)\""));
    ck_assert_ptr_nonnull(strstr(text, "\"sasl.mechanism=PLAIN\""));
    free(text);
    c = t_conf_variant_load("password = \"demo-consumer-pw\";\n      proxy_user = \"bw_proxy\";             "
                            "# \"\" = the proxy uses user\n      proxy_password = \"demo-proxy-pw\";",
                            "password = \"" MARK "\"; proxy_user = \"bw_reader\"; proxy_password = \"" MARK "x\";");
    ck_assert_str_eq(c->servers[0].password, MARK);
    text = dump_text(c);
    ck_assert_msg(!strstr(text, MARK), "a secret in the dump:\n%s", text);
    ck_assert_ptr_nonnull(strstr(text, "password = \"(redacted)\";"));
    ck_assert_ptr_nonnull(strstr(text, "proxy_user = \"bw_reader\";"));
    ck_assert_ptr_nonnull(strstr(text, "proxy_password = \"(redacted)\";"));
    free(text);
    bw_config_destroy(c);
    /* a kafka error names the property, never its value */
    c = t_conf_variant_load("properties = [ ];", "properties = [ \"sasl.password=" MARK "\", \"ssl.key.password=" MARK "\" ];");
    char err[512] = "";
    rd_kafka_conf_t *kc = bw_kafka_conf(c, BW_KAFKA_PRODUCER, NULL, err, sizeof(err));
    if (kc) rd_kafka_conf_destroy(kc);
    ck_assert_msg(!strstr(err, MARK), "%s", err);
    bw_config_destroy(c);
}
END_TEST

START_TEST(secrets_from_file_and_env) {
    char *secret_file = t_write_temp(MARK "-from-file\n");
    char find[] = "password = \"demo-consumer-pw\";", repl[1024];
    snprintf(repl, sizeof(repl), "password = \"file:%s\";", secret_file);
    setenv("BW_TEST_PROXY_PW", MARK "-from-env", 1);
    bw_config_t *c = t_conf_variant_load(find, repl);
    ck_assert_str_eq(c->servers[0].password, MARK "-from-file"); /* the newline dropped */
    bw_config_destroy(c);
    c = t_conf_variant_load("proxy_password = \"demo-proxy-pw\";", "proxy_password = \"env:BW_TEST_PROXY_PW\";");
    ck_assert_str_eq(c->servers[0].proxy_password, MARK "-from-env");
    bw_config_destroy(c);
    c = t_conf_variant_load("properties = [ ];", "properties = [ \"sasl.password=env:BW_TEST_PROXY_PW\", "
                                                 "\"client.id=env:BW_TEST_PROXY_PW\" ];");
    ck_assert_str_eq(c->properties[0], "sasl.password=" MARK "-from-env");
    ck_assert_str_eq(c->properties[1], "client.id=env:BW_TEST_PROXY_PW"); /* not a secret: as written */
    bw_config_destroy(c);

    /* missing: the error names the key and what is missing */
    unsetenv("BW_TEST_PROXY_PW");
    struct { const char *find, *repl, *want; } bad[] = {
        {find, "password = \"env:BW_TEST_PROXY_PW\";",
         "shards.servers[0].password: the environment variable BW_TEST_PROXY_PW is not set"},
        {find, "password = \"file:/nonexistent/pw\";",
         "shards.servers[0].password: cannot read /nonexistent/pw: No such file or directory"},
        {"producer_properties = [ \"linger.ms=5\" ];", "producer_properties = [ \"sasl.password=file:no-such.pw\" ];",
         "kafka.producer_properties: sasl.password: "},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        char *path = t_conf_variant(bad[i].find, bad[i].repl, NULL);
        char err[1024] = "";
        bw_config_t *d = bw_config_load(path, err, sizeof(err));
        ck_assert_ptr_null(d);
        ck_assert_msg(strstr(err, bad[i].want), "%s lacks %s", err, bad[i].want);
        t_unlink_free(path);
    }
    char *empty = t_write_temp("\n");
    snprintf(repl, sizeof(repl), "password = \"file:%s\";", empty);
    char *path = t_conf_variant(find, repl, NULL), err[1024] = "";
    ck_assert_ptr_null(bw_config_load(path, err, sizeof(err)));
    ck_assert_msg(strstr(err, "is empty"), "%s", err);
    t_unlink_free(path);
    t_unlink_free(empty);
    t_unlink_free(secret_file);
}
END_TEST

void t_config_reload_tcases(Suite *s); /* test_config_reload.c */

Suite *config_suite(void) {
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("load");
    tcase_add_test(tc, reference_loads);
    tcase_add_test(tc, defaults_fill_in);
    tcase_add_test(tc, row_rates);
    tcase_add_test(tc, renamed_key_old_name);
    suite_add_tcase(s, tc);
    tc = tcase_create("secrets");
    tcase_add_test(tc, secret_names);
    tcase_add_test(tc, secrets_are_redacted_in_dumps);
    tcase_add_test(tc, secrets_from_file_and_env);
    suite_add_tcase(s, tc);
    tc = tcase_create("errors");
    tcase_add_test(tc, error_syntax);
    tcase_add_test(tc, error_unknown_key);
    tcase_add_test(tc, error_wrong_type);
    tcase_add_test(tc, durability_defaults);
    tcase_add_test(tc, error_out_of_range);
    tcase_add_test(tc, error_row_rates);
    tcase_add_test(tc, error_missing_required);
    tcase_add_test(tc, error_shard_ownership);
    tcase_add_test(tc, error_identifiers);
    tcase_add_test(tc, error_duplicates);
    tcase_add_test(tc, error_enum);
    tcase_add_test(tc, error_unreadable_file);
    tcase_add_test(tc, kafka_properties_cannot_override_guarantees);
    suite_add_tcase(s, tc);
    tc = tcase_create("dump");
    tcase_add_test(tc, doc_mentions_every_key);
    tcase_add_test(tc, dump_reloads_same_values);
    tcase_add_test(tc, dump_reloads_awkward_values);
    suite_add_tcase(s, tc);
    t_config_reload_tcases(s);
    return s;
}
