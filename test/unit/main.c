/* main.c — runs every unit-test suite. Output CK_NORMAL (overridable with CK_VERBOSITY);
 * exits non-zero when any check fails. */
#include <stdlib.h>

#include "helpers.h"

int main(void) {
    SRunner *sr = srunner_create(shard_suite());
    srunner_add_suite(sr, ratelimit_suite());
    srunner_add_suite(sr, config_suite());
    srunner_add_suite(sr, sql_suite());
    srunner_add_suite(sr, sqlbind_suite());
    srunner_add_suite(sr, batcher_suite());
    srunner_add_suite(sr, request_suite());
    srunner_add_suite(sr, forward_suite());
    srunner_add_suite(sr, apply_suite());
    srunner_add_suite(sr, coalesce_suite());
    srunner_add_suite(sr, ledger_suite());
    srunner_add_suite(sr, kafka_suite());
    srunner_add_suite(sr, alerts_suite());
    srunner_add_suite(sr, admin_suite());
    srunner_add_suite(sr, backlog_suite());
    srunner_add_suite(sr, health_suite());
    srunner_add_suite(sr, scheduler_suite());
    srunner_add_suite(sr, metrics_suite());
    srunner_add_suite(sr, auth_suite());
    srunner_add_suite(sr, quota_suite());
    srunner_add_suite(sr, scrub_suite());
    srunner_add_suite(sr, throttle_suite());
    srunner_add_suite(sr, handover_suite());
    srunner_add_suite(sr, retain_suite());
    srunner_add_suite(sr, partset_suite());
    srunner_add_suite(sr, compactor_suite());
    srunner_add_suite(sr, records_suite());
    srunner_add_suite(sr, timers_suite());
    srunner_add_suite(sr, endpoints_suite());
    srunner_add_suite(sr, jobs_suite());
    srunner_add_suite(sr, gate_suite());
    srunner_add_suite(sr, notify_suite());
    srunner_add_suite(sr, cli_suite());
    srunner_add_suite(sr, log_suite());
    srunner_add_suite(sr, fleet_suite());
    srunner_add_suite(sr, protojson_suite());
    srunner_add_suite(sr, history_suite());
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
