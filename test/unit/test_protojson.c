/* test_protojson.c — the proto3 JSON mapping (codec/protojson.h) of the Connect calls:
 * what protojson writes reads back to the same message, both name forms are read, and
 * what is wrong is named. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "protojson.h"

static Bulkwrite__V1__BatchWriteRequest *decode_request(const char *text, char *err, size_t esz) {
    return (Bulkwrite__V1__BatchWriteRequest *)bw_protojson_decode(&bulkwrite__v1__batch_write_request__descriptor,
                                                                   text, strlen(text), err, esz);
}

/* A request with every kind of field (and one this proxy does not know, skipped): read,
 * packed, unpacked, written, read again. */
START_TEST(request_round_trips)
{
    const char *text =
        "{\"requestId\": \"r-1\", \"fromANewerProto\": {\"x\": [1]}, \"lane\": \"urgent\", \"job_part\": 7, \"notBeforeMs\": \"1765000000000\","
        " \"after\": [\"a\", \"b\"],"
        " \"ops\": [{\"op\": \"UPDATE\", \"objectType\": \"pin\", \"id\": \"18446744073709551615\","
        "   \"fields\": [{\"name\": \"t\", \"value\": {\"stringValue\": \"aMOp\"}},"
        "              {\"name\": \"n\", \"value\": {\"intValue\": -5}, \"increment\": true},"
        "              {\"name\": \"z\", \"value\": {\"nullValue\": true}},"
        "              {\"name\": \"d\", \"value\": {\"doubleValue\": 2.5}}]},"
        "  {\"op\": 4, \"objectType\": \"pin\", \"id\": 12}]}";
    char err[256] = "";
    Bulkwrite__V1__BatchWriteRequest *r = decode_request(text, err, sizeof(err));
    ck_assert_msg(r != NULL, "%s", err);
    ck_assert_str_eq(r->request_id, "r-1");
    ck_assert_str_eq(r->lane, "urgent");
    ck_assert_uint_eq(r->job_part, 7);
    ck_assert_int_eq(r->not_before_ms, 1765000000000LL);
    ck_assert_uint_eq(r->n_after, 2);
    ck_assert_str_eq(r->after[1], "b");
    ck_assert_uint_eq(r->n_ops, 2);
    Bulkwrite__V1__Op *op = r->ops[0];
    ck_assert_int_eq(op->op, BULKWRITE__V1__OP_TYPE__UPDATE);
    ck_assert(op->id == UINT64_MAX);
    ck_assert_uint_eq(op->n_fields, 4);
    ck_assert_int_eq(op->fields[0]->value->kind_case, BULKWRITE__V1__VALUE__KIND_STRING_VALUE);
    ck_assert_uint_eq(op->fields[0]->value->string_value.len, 3); /* base64 of "hé" */
    ck_assert_int_eq(memcmp(op->fields[0]->value->string_value.data, "h\xc3\xa9", 3), 0);
    ck_assert_int_eq(op->fields[1]->value->int_value, -5);
    ck_assert(op->fields[1]->increment);
    ck_assert_int_eq(op->fields[2]->value->kind_case, BULKWRITE__V1__VALUE__KIND_NULL_VALUE);
    ck_assert(op->fields[3]->value->double_value == 2.5);
    ck_assert_int_eq(r->ops[1]->op, BULKWRITE__V1__OP_TYPE__DELETE);
    ck_assert(r->ops[1]->id == 12);

    /* written by protojson and read back: the same bytes packed */
    json_t *j = bw_protojson_encode(&r->base);
    ck_assert_str_eq(json_string_value(json_object_get(j, "notBeforeMs")), "1765000000000");
    ck_assert_ptr_null(json_object_get(j, "replayOf")); /* a default is left out */
    char *again = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    Bulkwrite__V1__BatchWriteRequest *r2 = decode_request(again, err, sizeof(err));
    ck_assert_msg(r2 != NULL, "%s", err);
    size_t n1 = protobuf_c_message_get_packed_size(&r->base), n2 = protobuf_c_message_get_packed_size(&r2->base);
    ck_assert_uint_eq(n1, n2);
    uint8_t *b1 = malloc(n1), *b2 = malloc(n2);
    protobuf_c_message_pack(&r->base, b1);
    protobuf_c_message_pack(&r2->base, b2);
    ck_assert_int_eq(memcmp(b1, b2, n1), 0);
    free(b1);
    free(b2);
    free(again);
    protobuf_c_message_free_unpacked(&r->base, NULL);
    protobuf_c_message_free_unpacked(&r2->base, NULL);
}
END_TEST

/* What is wrong is named, by its path; nothing leaks on the way out (ASan). */
START_TEST(errors_name_the_field)
{
    static const struct {
        const char *text, *says;
    } cases[] = {
        {"{\"ops\": [{\"op\": \"MERGE\"}]}", "ops.op: \"MERGE\" is not a value of the enum"},
        {"{\"jobPart\": -1}", "jobPart: a negative number for an unsigned field"},
        {"{\"jobPart\": 4294967296}", "jobPart: out of range"},
        {"{\"notBeforeMs\": \"12x\"}", "notBeforeMs: \"12x\" is not an integer in range"},
        {"{\"job_part\": 1, \"jobPart\": 2}", "given twice"},
        {"{\"requestId\": \"\", \"request_id\": \"r1\"}", "request_id: given twice"}, /* the first at its default */
        {"{\"after\": [], \"after\": [\"x\"]}", "malformed JSON"},                    /* jansson: a duplicate key */
        {"{\"ops\": [{\"id\": \" -1\"}]}", "ops.id: \" -1\" is not an integer in range"}, /* not wrapped to 2^64-1 */
        {"{\"ops\": [{\"id\": \"-1\"}]}", "ops.id: \"-1\" is not an integer in range"},
        {"{\"ops\": [{\"fields\": [{\"value\": {\"intValue\": 1, \"boolValue\": true}}]}]}", "a second member of a oneof"},
        {"{\"ops\": [{\"fields\": [{\"value\": {\"bytesValue\": \"!!\"}}]}]}", "not base64"},
        {"{\"ops\": {}}", "ops: expected an array"},
        {"[1]", "not a JSON object"},
        {"{\"lane\": ", "malformed JSON"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char err[256] = "";
        Bulkwrite__V1__BatchWriteRequest *r = decode_request(cases[i].text, err, sizeof(err));
        ck_assert_msg(r == NULL, "%s was read", cases[i].text);
        ck_assert_msg(strstr(err, cases[i].says), "%s: \"%s\" does not say \"%s\"", cases[i].text, err, cases[i].says);
    }
}
END_TEST

/* A JobStatus as written: lowerCamelCase, 64-bit integers as strings, enums by name. */
START_TEST(status_is_written_as_protojson)
{
    Bulkwrite__V1__JobStatus st = BULKWRITE__V1__JOB_STATUS__INIT;
    Bulkwrite__V1__JobShard sh = BULKWRITE__V1__JOB_SHARD__INIT;
    Bulkwrite__V1__ShardWait w = BULKWRITE__V1__SHARD_WAIT__INIT;
    Bulkwrite__V1__JobShard *shards[] = {&sh};
    st.job_id = "0123";
    st.created_at_ms = 5;
    st.finished = 1;
    st.n_shards = 1;
    st.shards = shards;
    sh.shard = 3;
    sh.pending = 2;
    sh.waits = &w;
    w.kind = BULKWRITE__V1__WAIT_KIND__WAIT_KIND_PAUSED;
    w.by = "alice";
    json_t *j = bw_protojson_encode(&st.base);
    char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    ck_assert_str_eq(text, "{\"createdAtMs\":\"5\",\"finished\":true,\"jobId\":\"0123\",\"shards\":[{\"pending\":2,"
                           "\"shard\":3,\"waits\":{\"by\":\"alice\",\"kind\":\"WAIT_KIND_PAUSED\"}}]}");
    free(text);
    json_decref(j);
}
END_TEST

Suite *protojson_suite(void) {
    Suite *s = suite_create("protojson");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, request_round_trips);
    tcase_add_test(tc, errors_name_the_field);
    tcase_add_test(tc, status_is_written_as_protojson);
    suite_add_tcase(s, tc);
    return s;
}
