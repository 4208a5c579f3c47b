/* request_schema.c — the request's members, one row each (request_schema.h). */
#include "request_schema.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static const bw_member_t request_members[BW_REQ_MEMBERS] = {
    [BW_REQ_REQUEST_ID] = {.name = "request_id", .kind = BW_MEMBER_NAME, .type = "string"},
    /* checked against the configuration's lanes by the proxy */
    [BW_REQ_LANE] = {.name = "lane", .kind = BW_MEMBER_NAME, .type = "string", .nul_names_nothing = 1},
    /* checked with request_id's rules by the proxy (request.h) */
    [BW_REQ_JOB] = {.name = "job", .kind = BW_MEMBER_NAME, .type = "string"},
    [BW_REQ_JOB_PART] = {.name = "job_part", .kind = BW_MEMBER_UINT32, .type = "integer",
                         .mistyped = "an integer from 0 to 4294967295"},
    [BW_REQ_JOB_LAST] = {.name = "job_last", .kind = BW_MEMBER_BOOL, .type = "boolean", .mistyped = "true or false"},
    /* a job id, checked by the proxy */
    [BW_REQ_REPLAY_OF] = {.name = "replay_of", .kind = BW_MEMBER_NAME, .type = "string",
                          .mistyped = "a job id: 32 hex digits"},
    [BW_REQ_NOT_BEFORE] = {.name = "not_before", .proto_name = "not_before_ms", .kind = BW_MEMBER_TIME_MS,
                           .type = "string or integer",
                           .mistyped = "a UTC time \"YYYY-MM-DDTHH:MM:SSZ\", or ms since the Unix epoch"},
    /* job ids, checked by the proxy */
    [BW_REQ_AFTER] = {.name = "after", .kind = BW_MEMBER_NAMES, .type = "array", .mistyped = "an array of job ids"},
    [BW_REQ_OPS] = {.name = "ops", .kind = BW_MEMBER_OPS, .type = "array"},
};

static const bw_member_t op_members[BW_OP_MEMBERS] = {
    /* an unknown word decodes to OP_TYPE_UNSPECIFIED, so validation rejects the op alone */
    [BW_OP_OP] = {.name = "op", .kind = BW_MEMBER_OP_WORD, .type = "a string"},
    [BW_OP_OBJECT_TYPE] = {.name = "object_type", .kind = BW_MEMBER_TEXT, .type = "a string"},
    [BW_OP_ID] = {.name = "id", .kind = BW_MEMBER_ID, .type = "an unsigned 64-bit integer"},
    [BW_OP_SHARD_KEY] = {.name = "shard_key", .kind = BW_MEMBER_TEXT, .type = "a string"},
    [BW_OP_FIELDS] = {.name = "fields", .kind = BW_MEMBER_FIELDS, .type = "an object"},
};

/* Whether a member of this kind can live in field fd (the decoders store it there as the
 * kind's C type). */
static int kind_fits(bw_member_kind_t kind, const ProtobufCFieldDescriptor *fd) {
    int one = fd->label != PROTOBUF_C_LABEL_REPEATED;
    switch (kind) {
    case BW_MEMBER_NAME:
    case BW_MEMBER_TEXT: return one && fd->type == PROTOBUF_C_TYPE_STRING;
    case BW_MEMBER_NAMES: return !one && fd->type == PROTOBUF_C_TYPE_STRING;
    case BW_MEMBER_UINT32: return one && fd->type == PROTOBUF_C_TYPE_UINT32;
    case BW_MEMBER_BOOL: return one && fd->type == PROTOBUF_C_TYPE_BOOL;
    case BW_MEMBER_TIME_MS: return one && fd->type == PROTOBUF_C_TYPE_INT64;
    case BW_MEMBER_OPS: return !one && fd->descriptor == &bulkwrite__v1__op__descriptor;
    case BW_MEMBER_OP_WORD: return one && fd->descriptor == &bulkwrite__v1__op_type__descriptor;
    case BW_MEMBER_ID: return one && fd->type == PROTOBUF_C_TYPE_FIXED64;
    case BW_MEMBER_FIELDS: return !one && fd->descriptor == &bulkwrite__v1__field__descriptor;
    }
    return 0;
}

/* Looks every row's field up in the message's descriptor; a row that does not fit is a
 * bug in the table, and stops the program. */
static void schema_resolve(bw_schema_t *sc, const ProtobufCMessageDescriptor *pb, const bw_member_t *members,
                           size_t n) {
    sc->pb = pb;
    sc->members = members;
    sc->n = n;
    memset(sc->by_number, -1, sizeof(sc->by_number));
    memset(sc->by_first, -1, sizeof(sc->by_first));
    sc->lists = 0;
    if (n > BW_SCHEMA_MEMBERS_MAX) abort();
    for (size_t i = 0; i < n; i++) {
        const char *proto = members[i].proto_name ? members[i].proto_name : members[i].name;
        const ProtobufCFieldDescriptor *fd = protobuf_c_message_descriptor_get_field_by_name(pb, proto);
        if (!fd || !kind_fits(members[i].kind, fd) || fd->id >= BW_SCHEMA_NUMBER_MAX || sc->by_number[fd->id] >= 0 ||
            strlen(members[i].name) > UINT8_MAX) {
            fprintf(stderr, "request_schema.c: member \"%s\" has no fitting field \"%s\" in %s\n", members[i].name,
                    proto, pb->name);
            abort();
        }
        sc->field[i] = fd;
        sc->offset[i] = fd->offset;
        sc->name_len[i] = (uint8_t)strlen(members[i].name);
        sc->next_first[i] = -1;
        int8_t *last = &sc->by_first[members[i].name[0] & 31]; /* rows of one first byte, in order */
        while (*last >= 0) last = &sc->next_first[*last];
        *last = (int8_t)i;
        if (members[i].kind == BW_MEMBER_NAMES) sc->lists |= 1u << i;
        sc->by_number[fd->id] = (int8_t)i;
    }
}

static bw_schema_t request_schema, op_schema;
static pthread_once_t resolved = PTHREAD_ONCE_INIT;

static void schemas_resolve(void) {
    schema_resolve(&request_schema, &bulkwrite__v1__batch_write_request__descriptor, request_members,
                   BW_REQ_MEMBERS);
    schema_resolve(&op_schema, &bulkwrite__v1__op__descriptor, op_members, BW_OP_MEMBERS);
}

const bw_schema_t *bw_schema_request(void) {
    pthread_once(&resolved, schemas_resolve);
    return &request_schema;
}

const bw_schema_t *bw_schema_op(void) {
    pthread_once(&resolved, schemas_resolve);
    return &op_schema;
}

void bw_schema_expected(const bw_schema_t *sc, char *buf, size_t size) {
    size_t len = (size_t)snprintf(buf, size, "(expected ");
    for (size_t i = 0; i < sc->n && len < size; i++)
        len += (size_t)snprintf(buf + len, size - len, "%s%s: %s", i ? ", " : "", sc->members[i].name,
                                sc->members[i].type);
    if (len < size) snprintf(buf + len, size - len, ")");
}
