/* test_cli.c — where a program's configuration comes from (common/cli.c): -c over
 * BULKWRITE_CONF over the compiled-in default, and the hint an unreadable one gets. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "helpers.h"

START_TEST(test_config_path_order) {
    unsetenv(BW_CONF_ENV);
    const char *def = bw_cli_config_path(NULL);
    ck_assert_str_eq(def, bw_cli_default_config());
    ck_assert_int_eq(def[0], '/'); /* the installed one: absolute, read from any folder */
    ck_assert_ptr_nonnull(strstr(def, "/bulkwrite/bulkwrite.conf"));
    setenv(BW_CONF_ENV, "/srv/bw.conf", 1);
    ck_assert_str_eq(bw_cli_config_path(NULL), "/srv/bw.conf");
    ck_assert_str_eq(bw_cli_config_path("given.conf"), "given.conf"); /* -c first */
    setenv(BW_CONF_ENV, "", 1); /* empty: as if unset */
    ck_assert_str_eq(bw_cli_config_path(NULL), def);
    unsetenv(BW_CONF_ENV);
}
END_TEST

START_TEST(test_config_hint) {
    setenv(BW_CONF_ENV, "/nonexistent/bw.conf", 1);
    ck_assert_str_eq(bw_cli_config_hint(NULL), " (from " BW_CONF_ENV ")");
    ck_assert_str_eq(bw_cli_config_hint("/nonexistent/bw.conf"), ""); /* -c names it itself */
    setenv(BW_CONF_ENV, t_ref_conf_path(), 1); /* readable: nothing to explain */
    ck_assert_str_eq(bw_cli_config_hint(NULL), "");
    unsetenv(BW_CONF_ENV);
}
END_TEST

Suite *cli_suite(void) {
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("config");
    tcase_add_test(tc, test_config_path_order);
    tcase_add_test(tc, test_config_hint);
    suite_add_tcase(s, tc);
    return s;
}
