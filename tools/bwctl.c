/* bwctl — the operator's command line.
 *
 *   bwctl [-c CONFIG] schema [--print]   create every shard database and table (or print the DDL)
 *   bwctl [-c CONFIG] check-config       load and validate the configuration
 *   bwctl [-c CONFIG] dump-config        print the effective configuration
 *   bwctl config-doc                     print docs/configuration.md
 *
 * Exit codes: 0 success, 1 failure (message on stderr), 2 usage. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "buf.h"
#include "config.h"
#include "db.h"

static int usage(FILE *out, int code) {
    fputs("usage: bwctl [-c CONFIG] COMMAND\n"
          "commands:\n"
          "  schema [--print]   create the shard databases and tables on every server\n"
          "                     (idempotent), or print the DDL\n"
          "  check-config       validate the configuration; prints file:line: what on error\n"
          "  dump-config        print the effective configuration, defaults filled in\n"
          "  config-doc         print the configuration reference (docs/configuration.md)\n"
          "options:\n"
          "  -c, --config FILE  configuration (default conf/bulkwrite.conf)\n",
          out);
    return code;
}

int main(int argc, char **argv) {
    const char *config_path = "conf/bulkwrite.conf";
    static const struct option opts[] = {{"config", required_argument, 0, 'c'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    for (int o; (o = getopt_long(argc, argv, "+c:h", opts, NULL)) != -1;) {
        if (o == 'c') config_path = optarg;
        else return usage(o == 'h' ? stdout : stderr, o == 'h' ? 0 : 2);
    }
    if (optind >= argc) return usage(stderr, 2);
    const char *cmd = argv[optind];
    if (strcmp(cmd, "config-doc") == 0) {
        bw_config_doc(stdout);
        return 0;
    }
    char err[512];
    bw_config_t *conf = bw_config_load(config_path, err, sizeof(err));
    if (!conf) {
        fprintf(stderr, "bwctl: %s\n", err);
        return 1;
    }
    int ret = 0;
    if (strcmp(cmd, "check-config") == 0) {
        printf("%s: ok (%d shards on %d servers, %d object types)\n", config_path, conf->shard_count,
               conf->server_cnt, conf->object_type_cnt);
    } else if (strcmp(cmd, "dump-config") == 0) {
        bw_config_dump(conf, stdout);
    } else if (strcmp(cmd, "schema") == 0) {
        if (optind + 1 < argc && strcmp(argv[optind + 1], "--print") == 0) {
            bw_buf_t b;
            bw_buf_init(&b);
            for (int i = 0; i < conf->server_cnt; i++) {
                bw_buf_printf(&b, "-- server %s (%s:%d)\n", conf->servers[i].name, conf->servers[i].host,
                              conf->servers[i].port);
                bw_db_schema_sql(conf, i, &b);
            }
            fwrite(b.data, 1, b.len, stdout);
            bw_buf_free(&b);
        } else if (bw_db_apply_schema(conf, err, sizeof(err)) != BW_OK) {
            fprintf(stderr, "bwctl: %s\n", err);
            ret = 1;
        } else {
            printf("schema: %d shard databases ready on %d servers\n", conf->shard_count, conf->server_cnt);
        }
    } else {
        ret = usage(stderr, 2);
    }
    bw_config_destroy(conf);
    return ret;
}
