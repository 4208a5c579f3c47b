/* test_records.c — the registry of record kinds (control/records.h): every key parses to
 * the kind that writes it, every ShardControl field is folded from exactly one place. */
#include <check.h>
#include <string.h>

#include "helpers.h"
#include "records.h"
#include "shardtable.h"

/* Every kind's row is filled in, and a key built for it parses back to it. */
START_TEST(each_kind_round_trips)
{
    bw_record_key_t k;
    for (int i = 0; i < BW_RECORD_KINDS; i++) {
        const bw_record_def_t *d = bw_record_def((bw_record_kind_t)i);
        ck_assert_ptr_nonnull(d);
        ck_assert(d->name && d->key && d->message && d->writer);
    }
    ck_assert_ptr_null(bw_record_def(BW_RECORD_KINDS));

    char key[BW_SERVER_BUDGET_KEY_MAX];
    for (int f = 0; f < BW_CONTROL_KEYS; f++) {
        int n = bw_shard_control_key(7, (bw_control_key_t)f, key);
        ck_assert_int_eq(bw_record_key_parse(BW_TOPIC_CONTROL, key, (size_t)n, 8, &k), 0);
        ck_assert_int_eq(k.kind, BW_RECORD_SHARD_SETTING);
        ck_assert_int_eq(k.shard, 7);
        ck_assert_int_eq(k.field, f);
        /* on the status topic only the whole key is a shard's: its status */
        ck_assert_int_eq(bw_record_key_parse(BW_TOPIC_STATUS, key, (size_t)n, 8, &k), f == BW_CONTROL_WHOLE ? 0 : -1);
        if (f == BW_CONTROL_WHOLE) ck_assert_int_eq(k.kind, BW_RECORD_SHARD_STATUS);
    }
    ck_assert_int_eq(bw_record_key_parse(BW_TOPIC_CONTROL, "shard/8", 7, 8, &k), -1); /* past shard_count */

    int n = bw_server_budget_key("db-a", key);
    ck_assert_int_eq(bw_record_key_parse(BW_TOPIC_CONTROL, key, (size_t)n, 8, &k), 0);
    ck_assert_int_eq(k.kind, BW_RECORD_SERVER_BUDGET);
    ck_assert_int_eq(bw_record_key_parse(BW_TOPIC_STATUS, key, (size_t)n, 8, &k), -1);

    n = bw_job_control_key("0123456789abcdef0123456789abcdef", key);
    ck_assert_int_eq(bw_record_key_parse(BW_TOPIC_CONTROL, key, (size_t)n, 8, &k), 0);
    ck_assert_int_eq(k.kind, BW_RECORD_JOB_CANCEL);
    ck_assert_str_eq(bw_job_control_key_parse(key, (size_t)n), "0123456789abcdef0123456789abcdef");
    ck_assert_ptr_null(bw_job_control_key_parse("job/0123456789ABCDEF0123456789abcdef", 36)); /* upper case */
    ck_assert_ptr_null(bw_job_control_key_parse("job/0123", 8));
    ck_assert_int_eq(bw_record_key_parse(BW_TOPIC_CONTROL, "job/xyz", 7, 8, &k), -1);

    n = bw_member_key("proxy", "p1", key, sizeof(key));
    ck_assert_int_eq(bw_record_key_parse(BW_TOPIC_STATUS, key, (size_t)n, 8, &k), 0);
    ck_assert_int_eq(k.kind, BW_RECORD_PRESENCE);
    /* as versions before the status topic wrote it */
    ck_assert_int_eq(bw_record_key_parse(BW_TOPIC_CONTROL, key, (size_t)n, 8, &k), 0);
    ck_assert_int_eq(k.kind, BW_RECORD_PRESENCE);

    ck_assert_int_eq(bw_record_key_parse(BW_TOPIC_CONTROL, "lane/x", 6, 8, &k), -1); /* a later version's */
}
END_TEST

/* Each ShardControl field is owned by one field key, or is the fold's own (the shard, the
 * newest change's audit, the merged history): a field added to the message without a
 * key would be silently dropped by the fold. */
START_TEST(every_setting_field_has_one_owner)
{
    static const char *const fold_own[] = {"shard", "updated_at_ms", "reason", "changed_by", "changed_from", "history"};
    const ProtobufCMessageDescriptor *d = &bulkwrite__internal__v1__shard_control__descriptor;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const char *name = d->fields[i].name;
        int owners = 0;
        for (size_t j = 0; j < sizeof(fold_own) / sizeof(*fold_own); j++) owners += strcmp(name, fold_own[j]) == 0;
        for (int k = 0; k < BW_CONTROL_KEYS; k++)
            for (const char *const *f = bw_control_key_fields((bw_control_key_t)k); *f; f++) owners += strcmp(*f, name) == 0;
        ck_assert_msg(owners == 1, "ShardControl.%s has %d owners", name, owners);
    }
    ck_assert_ptr_null(*bw_control_key_fields(BW_CONTROL_WHOLE)); /* the base owns nothing */
}
END_TEST

/* The fold takes each field from its own key's record, else from the whole record. */
START_TEST(fold_takes_each_field_from_its_key)
{
    Bulkwrite__Internal__V1__ShardControl whole = BULKWRITE__INTERNAL__V1__SHARD_CONTROL__INIT, rate = BULKWRITE__INTERNAL__V1__SHARD_CONTROL__INIT,
                                pause = BULKWRITE__INTERNAL__V1__SHARD_CONTROL__INIT;
    whole.paused = 1, whole.has_rate = 1, whole.rate = 5, whole.has_row_rate = 1, whole.row_rate = 70, whole.pinned = 1;
    whole.updated_at_ms = 100;
    rate.has_rate = 1, rate.rate = 20, rate.paused = 1; /* a key's record holds only its own fields */
    rate.updated_at_ms = 300;
    pause.paused = 0, pause.rate = 999;
    pause.updated_at_ms = 200;
    const Bulkwrite__Internal__V1__ShardControl *recs[BW_CONTROL_KEYS] = {[BW_CONTROL_WHOLE] = &whole, [BW_CONTROL_RATE] = &rate,
                                                                [BW_CONTROL_PAUSE] = &pause};
    Bulkwrite__Internal__V1__ShardControl *f = bw_shard_control_fold(2, recs, NULL);
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(f->paused, 0);                 /* its key's */
    ck_assert(f->has_rate && f->rate == 20);        /* its key's, not the pause record's 999 */
    ck_assert(f->has_row_rate && f->row_rate == 70); /* the base's */
    ck_assert_int_eq(f->pinned, 1);                  /* the base's */
    ck_assert_int_eq(f->updated_at_ms, 300);         /* the newest record's */
    bulkwrite__internal__v1__shard_control__free_unpacked(f, NULL);
}
END_TEST

Suite *records_suite(void) {
    Suite *s = suite_create("records");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, each_kind_round_trips);
    tcase_add_test(tc, every_setting_field_has_one_owner);
    tcase_add_test(tc, fold_takes_each_field_from_its_key);
    suite_add_tcase(s, tc);
    return s;
}
