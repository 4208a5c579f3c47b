#include "db.h"

#include <errmsg.h>
#include <mysqld_error.h>
#include <stdlib.h>
#include <string.h>

#include "ledger.h"
#include "log.h"
#include "sql.h"

int bw_db_charset_check(const char *const names[3], const char *const values[3], char *why, size_t why_size) {
    for (int i = 0; i < 3; i++)
        if (!values[i] || strcmp(values[i], "utf8mb4") != 0) {
            snprintf(why, why_size, "%s is %s, not utf8mb4", names[i], values[i] ? values[i] : "NULL");
            return -1;
        }
    return 0;
}

/* What the session really uses: a server started with --skip-character-set-client-handshake
 * ignores the charset the client asked for, and utf8mb4 text would be converted (and
 * mangled) on the way in and out. */
static int charset_verify(MYSQL *db, char *why, size_t why_size) {
    static const char *const names[3] = {"character_set_client", "character_set_connection",
                                         "character_set_results"};
    if (mysql_query(db, "SELECT @@character_set_client, @@character_set_connection, @@character_set_results")) {
        snprintf(why, why_size, "reading the character set: %s", mysql_error(db));
        return -1;
    }
    MYSQL_RES *r = mysql_store_result(db);
    MYSQL_ROW row = r ? mysql_fetch_row(r) : NULL;
    const char *values[3] = {row ? row[0] : NULL, row ? row[1] : NULL, row ? row[2] : NULL};
    int rc = bw_db_charset_check(names, values, why, why_size);
    mysql_free_result(r);
    return rc;
}

MYSQL *bw_db_connect(const bw_config_t *conf, int server_index, char *errstr, size_t errstr_size) {
    return bw_db_connect_as(conf, server_index, BW_DB_CONSUMER, errstr, errstr_size);
}

MYSQL *bw_db_connect_as(const bw_config_t *conf, int server_index, bw_db_role_t role, char *errstr,
                        size_t errstr_size) {
    const bw_server_t *sv = &conf->servers[server_index];
    if (role == BW_DB_PROXY && *sv->proxy_user)
        return bw_db_connect_user(conf, server_index, sv->proxy_user, sv->proxy_password, errstr, errstr_size);
    return bw_db_connect_user(conf, server_index, sv->user, sv->password, errstr, errstr_size);
}

/* A connection to host:port (name: for errors), set up as db.h says. A refused connect
 * leaves the server's error number in *errnum (NULL: not wanted). */
static MYSQL *connect_to(const bw_config_t *conf, const char *name, const char *host, int port, const char *user,
                         const char *password, unsigned *errnum, char *errstr, size_t errstr_size) {
    MYSQL *db = mysql_init(NULL);
    if (!db) {
        bw_seterr(errstr, errstr_size, BW_ERR_NOMEM, "mysql_init failed");
        return NULL;
    }
    unsigned int connect_s = (unsigned)(conf->connect_timeout_ms + 999) / 1000;
    unsigned int io_s = (unsigned)(conf->query_timeout_ms + 999) / 1000 + 2;
    my_bool off = 0;
    mysql_options(db, MYSQL_OPT_CONNECT_TIMEOUT, &connect_s);
    mysql_options(db, MYSQL_OPT_READ_TIMEOUT, &io_s);
    mysql_options(db, MYSQL_OPT_WRITE_TIMEOUT, &io_s);
    mysql_options(db, MYSQL_SET_CHARSET_NAME, "utf8mb4");
    mysql_options(db, MYSQL_OPT_RECONNECT, &off); /* a reconnect mid-transaction would lose it */
    if (!mysql_real_connect(db, host, user, password, NULL, (unsigned)port, NULL, 0)) {
        bw_seterr(errstr, errstr_size, BW_ERR_MYSQL_RETRY, "connect to %s (%s:%d) as %s: %s", name,
                  host, port, user, mysql_error(db));
        if (errnum) *errnum = mysql_errno(db);
        mysql_close(db);
        return NULL;
    }
    char why[256];
    if (charset_verify(db, why, sizeof(why))) {
        /* a configuration error, not a passing fault: say so, and which server */
        bw_seterr(errstr, errstr_size, BW_ERR_MYSQL_RETRY, "connect to %s (%s:%d): refused: the session's %s (the "
                  "server ignored the utf8mb4 the client asked for; is it run with "
                  "--skip-character-set-client-handshake?)", name, host, port, why);
        mysql_close(db);
        return NULL;
    }
    char q[256];
    snprintf(q, sizeof(q),
             "SET SESSION sql_mode='STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION,ERROR_FOR_DIVISION_BY_ZERO',"
             " max_statement_time=%.3f, autocommit=0, innodb_lock_wait_timeout=%d",
             conf->query_timeout_ms / 1000.0, (conf->query_timeout_ms + 999) / 1000);
    if (mysql_query(db, q)) {
        bw_seterr(errstr, errstr_size, BW_ERR_MYSQL_RETRY, "session setup on %s: %s", name,
                  mysql_error(db));
        mysql_close(db);
        return NULL;
    }
    return db;
}

MYSQL *bw_db_connect_user(const bw_config_t *conf, int server_index, const char *user, const char *password,
                          char *errstr, size_t errstr_size) {
    const bw_server_t *sv = &conf->servers[server_index];
    return connect_to(conf, sv->name, sv->host, sv->port, user, password, NULL, errstr, errstr_size);
}

MYSQL *bw_db_connect_replica(const bw_config_t *conf, int server_index, int replica, char *errstr, size_t errstr_size) {
    const bw_server_t *sv = &conf->servers[server_index];
    const char *hp = sv->replicas[replica], *colon = strrchr(hp, ':'); /* "host:port", checked by the config */
    char host[256], name[320];
    snprintf(host, sizeof(host), "%.*s", (int)(colon - hp), hp);
    snprintf(name, sizeof(name), "%s's replica", sv->name);
    return connect_to(conf, name, host, atoi(colon + 1), sv->user, sv->password, NULL, errstr, errstr_size);
}

unsigned long bw_db_max_packet(MYSQL *db) {
    if (mysql_query(db, "SELECT @@max_allowed_packet")) return 0;
    MYSQL_RES *r = mysql_store_result(db);
    if (!r) return 0;
    MYSQL_ROW row = mysql_fetch_row(r);
    unsigned long v = row && row[0] ? strtoul(row[0], NULL, 10) : 0;
    mysql_free_result(r);
    return v;
}

/* Every error number the consumer can meet, with its failure class (db.h) and what a
 * caller without the admin role is told instead of the server's text (which can quote
 * row values). Client errors (2000-2999, bw_db_error_is_client) not listed are connection
 * errors; anything else not listed stops the shard: an error nobody has classified must
 * not dead-letter good rows. */
static const struct {
    unsigned err;
    bw_fail_t cls;
    const char *what;
} error_table[] = {
    /* the row's data */
    {ER_DUP_ENTRY, BW_FAIL_DATA, "duplicate key"},                                      /* 1062 duplicate id on CREATE */
    {ER_DUP_KEY, BW_FAIL_DATA, "duplicate key"},                                        /* 1022 */
    {ER_DUP_UNIQUE, BW_FAIL_DATA, "duplicate key"},                                     /* 1169 */
    {ER_BAD_NULL_ERROR, BW_FAIL_DATA, "null in a NOT NULL column"},                     /* 1048 null in a NOT NULL column */
    {ER_WARN_NULL_TO_NOTNULL, BW_FAIL_DATA, "null in a NOT NULL column"},               /* 1263 */
    {ER_WARN_DATA_OUT_OF_RANGE, BW_FAIL_DATA, "value out of range"},                    /* 1264 */
    {WARN_DATA_TRUNCATED, BW_FAIL_DATA, "value truncated"},                             /* 1265 */
    {ER_TRUNCATED_WRONG_VALUE, BW_FAIL_DATA, "incorrect value"},                        /* 1292 */
    {ER_INVALID_CHARACTER_STRING, BW_FAIL_DATA, "invalid character string"},            /* 1300 */
    {ER_NO_DEFAULT_FOR_FIELD, BW_FAIL_DATA, "field without a default"},                 /* 1364 */
    {ER_DIVISION_BY_ZERO, BW_FAIL_DATA, "division by zero"},                            /* 1365 */
    {ER_TRUNCATED_WRONG_VALUE_FOR_FIELD, BW_FAIL_DATA, "incorrect value"},              /* 1366 incorrect value */
    {ER_DATA_TOO_LONG, BW_FAIL_DATA, "value too long"},                                 /* 1406 */
    {ER_WRONG_VALUE_FOR_TYPE, BW_FAIL_DATA, "incorrect value"},                         /* 1411 */
    {ER_ROW_IS_REFERENCED_2, BW_FAIL_DATA, "foreign key"},                              /* 1451 foreign key */
    {ER_NO_REFERENCED_ROW_2, BW_FAIL_DATA, "foreign key"},                              /* 1452 foreign key */
    {ER_DATA_OUT_OF_RANGE, BW_FAIL_DATA, "value out of range"},                         /* 1690 an increment overflows */
    {ER_CANNOT_CONVERT_CHARACTER, BW_FAIL_DATA, "character set conversion"},            /* 1977 */
    {ER_CONSTRAINT_FAILED, BW_FAIL_DATA, "check constraint"},                           /* 4025 CHECK constraint */
    /* transient: the server, not the data */
    {ER_LOCK_DEADLOCK, BW_FAIL_RETRY, "deadlock"},                                     /* 1213 */
    {ER_CON_COUNT_ERROR, BW_FAIL_RETRY, "too many connections"},                       /* 1040 too many connections */
    {ER_TOO_MANY_USER_CONNECTIONS, BW_FAIL_RETRY, "too many connections"},             /* 1203 */
    {ER_OUT_OF_RESOURCES, BW_FAIL_RETRY, "out of resources"},                          /* 1041 */
    {ER_OUTOFMEMORY, BW_FAIL_RETRY, "out of memory"},                                  /* 1037 */
    {ER_LOCK_TABLE_FULL, BW_FAIL_RETRY, "lock table full"},                            /* 1206 */
    {ER_SERVER_SHUTDOWN, BW_FAIL_RETRY, "server shutting down"},                       /* 1053 */
    {ER_NORMAL_SHUTDOWN, BW_FAIL_RETRY, "server shutting down"},                       /* 1077 */
    {ER_CONNECTION_KILLED, BW_FAIL_RETRY, "connection killed"},                        /* 1927 */
    {ER_NEED_REPREPARE, BW_FAIL_RETRY, "table changed"},                               /* 1615 a prepared statement's table changed
                                                                                           under it: prepared again on the retry */
    {ER_LOCK_WAIT_TIMEOUT, BW_FAIL_TIMEOUT, "lock wait timeout"},                      /* 1205 rows held by another transaction */
    {ER_STATEMENT_TIMEOUT, BW_FAIL_TIMEOUT, "statement timeout"},                      /* 1969 max_statement_time */
    {ER_QUERY_INTERRUPTED, BW_FAIL_TIMEOUT, "query interrupted"},                      /* 1317 */
    {CR_SERVER_LOST, BW_FAIL_TIMEOUT, "connection lost"},                              /* 2013 no answer within the read timeout */
    /* the shard cannot take writes until someone acts */
    {ER_BAD_FIELD_ERROR, BW_FAIL_STOP, "unknown column"},                              /* 1054 a column was dropped */
    {ER_NO_SUCH_TABLE, BW_FAIL_STOP, "missing table"},                                 /* 1146 a table (or the ledger) is missing */
    {ER_BAD_DB_ERROR, BW_FAIL_STOP, "missing database"},                               /* 1049 */
    {ER_WRONG_VALUE_COUNT_ON_ROW, BW_FAIL_STOP, "table shape changed"},                /* 1136 the table's shape changed */
    {ER_PARSE_ERROR, BW_FAIL_STOP, "syntax error"},                                    /* 1064 */
    {ER_DBACCESS_DENIED_ERROR, BW_FAIL_STOP, "access denied"},                         /* 1044 a grant was lost */
    {ER_ACCESS_DENIED_ERROR, BW_FAIL_STOP, "access denied"},                           /* 1045 */
    {ER_TABLEACCESS_DENIED_ERROR, BW_FAIL_STOP, "access denied"},                      /* 1142 */
    {ER_COLUMNACCESS_DENIED_ERROR, BW_FAIL_STOP, "access denied"},                     /* 1143 */
    {ER_SPECIFIC_ACCESS_DENIED_ERROR, BW_FAIL_STOP, "access denied"},                  /* 1227 */
    {ER_OPTION_PREVENTS_STATEMENT, BW_FAIL_STOP, "read-only server"},                  /* 1290 read_only (a failover, a replica) */
    {ER_READ_ONLY_MODE, BW_FAIL_STOP, "read-only server"},                             /* 1836 */
    {ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION, BW_FAIL_STOP, "read-only transaction"}, /* 1792 */
    {ER_RECORD_FILE_FULL, BW_FAIL_STOP, "table full"},                                 /* 1114 the disk or table is full */
    {ER_DISK_FULL, BW_FAIL_STOP, "disk full"},                                         /* 1021 */
    {ER_NET_PACKET_TOO_LARGE, BW_FAIL_STOP, "packet too large"},                       /* 1153 over max_allowed_packet */
};

int bw_db_error_is_client(unsigned int err) { return err >= CR_MIN_ERROR && err <= CR_MAX_ERROR; }

bw_fail_t bw_db_error_class(unsigned int err) {
    for (size_t i = 0; i < sizeof(error_table) / sizeof(error_table[0]); i++)
        if (error_table[i].err == err) return error_table[i].cls;
    return bw_db_error_is_client(err) ? BW_FAIL_CONNECTION : BW_FAIL_STOP;
}

const char *bw_db_error_what(unsigned int err) {
    for (size_t i = 0; i < sizeof(error_table) / sizeof(error_table[0]); i++)
        if (error_table[i].err == err) return error_table[i].what;
    return bw_db_error_is_client(err) ? "connection error" : "server error";
}

const char *const bw_fail_names[BW_FAIL_CLASSES] = {
    [BW_FAIL_NONE] = "none", [BW_FAIL_RETRY] = "retryable", [BW_FAIL_TIMEOUT] = "timeout",
    [BW_FAIL_CONNECTION] = "connection", [BW_FAIL_DATA] = "data", [BW_FAIL_DECODE] = "decode",
    [BW_FAIL_STOP] = "stop"};

const char *bw_fail_name(bw_fail_t f) { return (unsigned)f < BW_FAIL_CLASSES ? bw_fail_names[f] : "unknown"; }

static void column_sql(const bw_column_t *c, bw_buf_t *out) {
    bw_buf_printf(out, ", `%s` ", c->name);
    switch (c->type) {
    case BW_COL_INT: bw_buf_puts(out, "BIGINT"); break;
    case BW_COL_DOUBLE: bw_buf_puts(out, "DOUBLE"); break;
    case BW_COL_BOOL: bw_buf_puts(out, "TINYINT(1)"); break;
    case BW_COL_STRING:
        if (c->max_length <= 16000) bw_buf_printf(out, "VARCHAR(%d)", c->max_length);
        else bw_buf_puts(out, "MEDIUMTEXT");
        break;
    case BW_COL_BYTES:
        if (c->max_length <= 8000) bw_buf_printf(out, "VARBINARY(%d)", c->max_length);
        else bw_buf_puts(out, "MEDIUMBLOB");
        break;
    }
    if (c->nullable) bw_buf_puts(out, " NULL DEFAULT NULL");
    else if (c->required) bw_buf_puts(out, " NOT NULL");
    else if (c->type == BW_COL_STRING || c->type == BW_COL_BYTES) bw_buf_puts(out, " NOT NULL DEFAULT ''");
    else bw_buf_puts(out, " NOT NULL DEFAULT 0");
}

void bw_db_schema_sql(const bw_config_t *conf, int server_index, bw_buf_t *out) {
    const bw_server_t *sv = &conf->servers[server_index];
    for (int s = sv->first_shard; s <= sv->last_shard; s++) {
        char db[80];
        bw_config_shard_db(conf, s, db, sizeof(db));
        bw_buf_printf(out, "CREATE DATABASE IF NOT EXISTS `%s` CHARACTER SET utf8mb4;\n", db);
        bw_ledger_schema_sql(db, out); /* bw_offsets, bw_job_parts, bw_job_failures */
        for (int t = 0; t < conf->object_type_cnt; t++) {
            const bw_object_type_t *ot = &conf->object_types[t];
            bw_buf_printf(out, "CREATE TABLE IF NOT EXISTS `%s`.`%s` (`%s` BIGINT UNSIGNED NOT NULL AUTO_INCREMENT",
                          db, ot->table, ot->id_column);
            for (int c = 0; c < ot->column_cnt; c++) column_sql(&ot->columns[c], out);
            bw_buf_printf(out, ", PRIMARY KEY (`%s`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;\n", ot->id_column);
        }
    }
    /* the throttle's heartbeat: a row per consumer, written on the primary, read on replicas */
    char db[80];
    bw_config_shard_db(conf, sv->first_shard, db, sizeof(db));
    bw_buf_printf(out, "CREATE TABLE IF NOT EXISTS `%s`.`%s` (`id` BIGINT UNSIGNED NOT NULL, `ts_us` BIGINT NOT NULL, "
                       "PRIMARY KEY (`id`)) ENGINE=InnoDB;\n", db, conf->throttle_heartbeat_table);
}

/* 'user'@'host' with both escaped. */
static void account(bw_buf_t *out, const char *user, const char *host) {
    bw_buf_puts(out, "'");
    bw_sql_append_escaped(out, user, strlen(user));
    bw_buf_puts(out, "'@'");
    bw_sql_append_escaped(out, host, strlen(host));
    bw_buf_puts(out, "'");
}

/* One user: made if missing, its password set (so a changed one takes), and its grants. */
static void user_sql(const bw_config_t *conf, const bw_server_t *sv, const char *user, const char *password,
                     const char *privileges, const char *const *tables, int redact, bw_buf_t *out) {
    for (int alter = 0; alter < 2; alter++) { /* never without its password, not for a moment */
        bw_buf_puts(out, alter ? "ALTER USER " : "CREATE USER IF NOT EXISTS ");
        account(out, user, conf->mysql_user_host);
        bw_buf_puts(out, " IDENTIFIED BY '");
        if (redact) bw_buf_puts(out, "(redacted)");
        else bw_sql_append_escaped(out, password, strlen(password));
        bw_buf_puts(out, "';\n");
    }
    for (int s = sv->first_shard; s <= sv->last_shard; s++) {
        char db[80];
        bw_config_shard_db(conf, s, db, sizeof(db));
        for (const char *const *t = tables; *t; t++) {
            bw_buf_printf(out, "GRANT %s ON `%s`.`%s` TO ", privileges, db, *t);
            account(out, user, conf->mysql_user_host);
            bw_buf_puts(out, ";\n");
        }
    }
}

void bw_db_users_sql(const bw_config_t *conf, int server_index, const char *admin_user, int redact, bw_buf_t *out) {
    const bw_server_t *sv = &conf->servers[server_index];
    /* the proxy reads the job ledger; the consumer writes the objects and the ledger */
    static const char *const reader_tables[] = {"bw_job_parts", "bw_job_failures", NULL};
    const char **writer_tables = calloc((size_t)conf->object_type_cnt + 4, sizeof(char *));
    int n = 0;
    writer_tables[n++] = "bw_offsets";
    writer_tables[n++] = "bw_job_parts";
    writer_tables[n++] = "bw_job_failures";
    for (int t = 0; t < conf->object_type_cnt; t++) writer_tables[n++] = conf->object_types[t].table;
    if (strcmp(sv->user, admin_user) != 0) { /* the admin itself keeps what it has */
        user_sql(conf, sv, sv->user, sv->password, "SELECT, INSERT, UPDATE, DELETE", writer_tables, redact, out);
        char db[80];
        bw_config_shard_db(conf, sv->first_shard, db, sizeof(db));
        bw_buf_printf(out, "GRANT SELECT, INSERT, UPDATE, DELETE ON `%s`.`%s` TO ", db, conf->throttle_heartbeat_table);
        account(out, sv->user, conf->mysql_user_host);
        bw_buf_puts(out, ";\n");
    }
    if (*sv->proxy_user && strcmp(sv->proxy_user, admin_user) != 0)
        user_sql(conf, sv, sv->proxy_user, sv->proxy_password, "SELECT", reader_tables, redact, out);
    free(writer_tables);
}

bw_err_t bw_db_apply_schema(const bw_config_t *conf, char *errstr, size_t errstr_size) {
    return bw_db_apply_schema_as(conf, NULL, NULL, 0, NULL, errstr, errstr_size);
}

bw_err_t bw_db_apply_schema_as(const bw_config_t *conf, const char *admin_user, const char *admin_password,
                               int create_users, unsigned *mysql_errnum, char *errstr, size_t errstr_size) {
    bw_buf_t sql;
    bw_buf_init(&sql);
    bw_err_t ret = BW_OK;
    if (mysql_errnum) *mysql_errnum = 0;
    for (int i = 0; i < conf->server_cnt && ret == BW_OK; i++) {
        const bw_server_t *sv = &conf->servers[i];
        const char *user = admin_user ? admin_user : sv->user;
        MYSQL *db = connect_to(conf, sv->name, sv->host, sv->port, user, admin_user ? admin_password : sv->password,
                               mysql_errnum, errstr, errstr_size);
        if (!db) {
            ret = BW_ERR_MYSQL_RETRY;
            break;
        }
        bw_buf_reset(&sql);
        bw_db_schema_sql(conf, i, &sql);
        if (create_users) bw_db_users_sql(conf, i, user, 0, &sql);
        for (char *line = sql.data, *nl; line && *line; line = nl + 1) {
            nl = strchr(line, '\n');
            *nl = '\0';
            if (mysql_query(db, line)) { /* a user's line holds its password: not quoted */
                int secret = strstr(line, " IDENTIFIED BY ") != NULL;
                if (mysql_errnum) *mysql_errnum = mysql_errno(db);
                ret = bw_seterr(errstr, errstr_size, BW_ERR_MYSQL_DATA, "schema on %s: %s: %s",
                                conf->servers[i].name, mysql_error(db), secret ? "(a user's statement)" : line);
                break;
            }
        }
        if (ret == BW_OK && mysql_commit(db))
            ret = bw_seterr(errstr, errstr_size, BW_ERR_MYSQL_RETRY, "commit on %s: %s",
                            conf->servers[i].name, mysql_error(db));
        mysql_close(db);
    }
    bw_buf_free(&sql);
    return ret;
}
