#include "ledger.h"

#include <stdlib.h>
#include <errmsg.h>
#include <string.h>

#include "sql.h"

unsigned bw_ledger_read_offsets(MYSQL *db, const bw_config_t *conf, const int *shards, size_t n,
                                int64_t *offsets, bw_buf_t *scratch) {
    for (size_t i = 0; i < n; i++) offsets[i] = -1;
    for (size_t at = 0; at < n; at += BW_LEDGER_READ_CHUNK) {
        size_t end = n - at < BW_LEDGER_READ_CHUNK ? n : at + BW_LEDGER_READ_CHUNK;
        bw_buf_reset(scratch);
        for (size_t i = at; i < end; i++) {
            char dbname[80];
            bw_config_shard_db(conf, shards[i], dbname, sizeof(dbname));
            /* the index i comes back with the row, so rows may arrive in any order */
            bw_buf_printf(scratch, "%sSELECT %zu, next_offset FROM `%s`.`bw_offsets` WHERE topic='",
                          i > at ? " UNION ALL " : "", i, dbname);
            bw_sql_append_escaped(scratch, conf->topic, strlen(conf->topic));
            bw_buf_printf(scratch, "' AND kafka_partition=%d", shards[i]);
        }
        if (mysql_real_query(db, scratch->data, (unsigned long)scratch->len)) return mysql_errno(db);
        MYSQL_RES *r = mysql_store_result(db);
        if (!r) return mysql_errno(db) ? mysql_errno(db) : CR_UNKNOWN_ERROR;
        MYSQL_ROW row;
        while ((row = mysql_fetch_row(r))) {
            size_t i = row[0] ? strtoull(row[0], NULL, 10) : n;
            if (i >= at && i < end && row[1]) offsets[i] = strtoll(row[1], NULL, 10);
        }
        mysql_free_result(r);
    }
    return 0;
}
