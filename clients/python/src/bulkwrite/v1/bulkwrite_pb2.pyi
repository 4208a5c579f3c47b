from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class OpType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OP_TYPE_UNSPECIFIED: _ClassVar[OpType]
    CREATE: _ClassVar[OpType]
    UPDATE: _ClassVar[OpType]
    UPSERT: _ClassVar[OpType]
    DELETE: _ClassVar[OpType]

class WaitKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    WAIT_KIND_UNSPECIFIED: _ClassVar[WaitKind]
    WAIT_KIND_PAUSED: _ClassVar[WaitKind]
    WAIT_KIND_THROTTLED: _ClassVar[WaitKind]
    WAIT_KIND_BACKLOG_FULL: _ClassVar[WaitKind]
    WAIT_KIND_HELD: _ClassVar[WaitKind]
    WAIT_KIND_PREREQUISITE: _ClassVar[WaitKind]
    WAIT_KIND_ERROR: _ClassVar[WaitKind]
OP_TYPE_UNSPECIFIED: OpType
CREATE: OpType
UPDATE: OpType
UPSERT: OpType
DELETE: OpType
WAIT_KIND_UNSPECIFIED: WaitKind
WAIT_KIND_PAUSED: WaitKind
WAIT_KIND_THROTTLED: WaitKind
WAIT_KIND_BACKLOG_FULL: WaitKind
WAIT_KIND_HELD: WaitKind
WAIT_KIND_PREREQUISITE: WaitKind
WAIT_KIND_ERROR: WaitKind

class GetJobRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class CancelJobRequest(_message.Message):
    __slots__ = ("job_id", "reason")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    reason: str
    def __init__(self, job_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class ListFailuresRequest(_message.Message):
    __slots__ = ("job_id", "limit", "after", "code", "reason")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    limit: int
    after: str
    code: int
    reason: str
    def __init__(self, job_id: _Optional[str] = ..., limit: _Optional[int] = ..., after: _Optional[str] = ..., code: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class ListFailuresResponse(_message.Message):
    __slots__ = ("job_id", "failures", "next")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    FAILURES_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    failures: _containers.RepeatedCompositeFieldContainer[JobFailure]
    next: str
    def __init__(self, job_id: _Optional[str] = ..., failures: _Optional[_Iterable[_Union[JobFailure, _Mapping]]] = ..., next: _Optional[str] = ...) -> None: ...

class JobFailure(_message.Message):
    __slots__ = ("shard", "op_index", "id", "error_code", "reason", "job_part", "op_json", "op_truncated")
    SHARD_FIELD_NUMBER: _ClassVar[int]
    OP_INDEX_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    JOB_PART_FIELD_NUMBER: _ClassVar[int]
    OP_JSON_FIELD_NUMBER: _ClassVar[int]
    OP_TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    shard: int
    op_index: int
    id: int
    error_code: int
    reason: str
    job_part: int
    op_json: str
    op_truncated: bool
    def __init__(self, shard: _Optional[int] = ..., op_index: _Optional[int] = ..., id: _Optional[int] = ..., error_code: _Optional[int] = ..., reason: _Optional[str] = ..., job_part: _Optional[int] = ..., op_json: _Optional[str] = ..., op_truncated: _Optional[bool] = ...) -> None: ...

class Value(_message.Message):
    __slots__ = ("null_value", "int_value", "double_value", "string_value", "bytes_value", "bool_value")
    NULL_VALUE_FIELD_NUMBER: _ClassVar[int]
    INT_VALUE_FIELD_NUMBER: _ClassVar[int]
    DOUBLE_VALUE_FIELD_NUMBER: _ClassVar[int]
    STRING_VALUE_FIELD_NUMBER: _ClassVar[int]
    BYTES_VALUE_FIELD_NUMBER: _ClassVar[int]
    BOOL_VALUE_FIELD_NUMBER: _ClassVar[int]
    null_value: bool
    int_value: int
    double_value: float
    string_value: bytes
    bytes_value: bytes
    bool_value: bool
    def __init__(self, null_value: _Optional[bool] = ..., int_value: _Optional[int] = ..., double_value: _Optional[float] = ..., string_value: _Optional[bytes] = ..., bytes_value: _Optional[bytes] = ..., bool_value: _Optional[bool] = ...) -> None: ...

class Field(_message.Message):
    __slots__ = ("name", "value", "increment")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    INCREMENT_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: Value
    increment: bool
    def __init__(self, name: _Optional[str] = ..., value: _Optional[_Union[Value, _Mapping]] = ..., increment: _Optional[bool] = ...) -> None: ...

class Op(_message.Message):
    __slots__ = ("op", "object_type", "id", "shard_key", "fields")
    OP_FIELD_NUMBER: _ClassVar[int]
    OBJECT_TYPE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    SHARD_KEY_FIELD_NUMBER: _ClassVar[int]
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    op: OpType
    object_type: str
    id: int
    shard_key: str
    fields: _containers.RepeatedCompositeFieldContainer[Field]
    def __init__(self, op: _Optional[_Union[OpType, str]] = ..., object_type: _Optional[str] = ..., id: _Optional[int] = ..., shard_key: _Optional[str] = ..., fields: _Optional[_Iterable[_Union[Field, _Mapping]]] = ...) -> None: ...

class BatchWriteRequest(_message.Message):
    __slots__ = ("request_id", "ops", "lane", "job", "job_part", "job_last", "replay_of", "not_before_ms", "after")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    OPS_FIELD_NUMBER: _ClassVar[int]
    LANE_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    JOB_PART_FIELD_NUMBER: _ClassVar[int]
    JOB_LAST_FIELD_NUMBER: _ClassVar[int]
    REPLAY_OF_FIELD_NUMBER: _ClassVar[int]
    NOT_BEFORE_MS_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    ops: _containers.RepeatedCompositeFieldContainer[Op]
    lane: str
    job: str
    job_part: int
    job_last: bool
    replay_of: str
    not_before_ms: int
    after: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, request_id: _Optional[str] = ..., ops: _Optional[_Iterable[_Union[Op, _Mapping]]] = ..., lane: _Optional[str] = ..., job: _Optional[str] = ..., job_part: _Optional[int] = ..., job_last: _Optional[bool] = ..., replay_of: _Optional[str] = ..., not_before_ms: _Optional[int] = ..., after: _Optional[_Iterable[str]] = ...) -> None: ...

class OpRejection(_message.Message):
    __slots__ = ("index", "reason", "retryable")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    RETRYABLE_FIELD_NUMBER: _ClassVar[int]
    index: int
    reason: str
    retryable: bool
    def __init__(self, index: _Optional[int] = ..., reason: _Optional[str] = ..., retryable: _Optional[bool] = ...) -> None: ...

class BatchWriteResponse(_message.Message):
    __slots__ = ("job_id", "accepted", "rejected")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    accepted: int
    rejected: _containers.RepeatedCompositeFieldContainer[OpRejection]
    def __init__(self, job_id: _Optional[str] = ..., accepted: _Optional[int] = ..., rejected: _Optional[_Iterable[_Union[OpRejection, _Mapping]]] = ...) -> None: ...

class JobShard(_message.Message):
    __slots__ = ("shard", "submitted", "applied", "failed", "pending", "error", "lost", "cancelled", "scheduled", "waits")
    SHARD_FIELD_NUMBER: _ClassVar[int]
    SUBMITTED_FIELD_NUMBER: _ClassVar[int]
    APPLIED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    LOST_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_FIELD_NUMBER: _ClassVar[int]
    WAITS_FIELD_NUMBER: _ClassVar[int]
    shard: int
    submitted: int
    applied: int
    failed: int
    pending: int
    error: str
    lost: int
    cancelled: int
    scheduled: int
    waits: ShardWait
    def __init__(self, shard: _Optional[int] = ..., submitted: _Optional[int] = ..., applied: _Optional[int] = ..., failed: _Optional[int] = ..., pending: _Optional[int] = ..., error: _Optional[str] = ..., lost: _Optional[int] = ..., cancelled: _Optional[int] = ..., scheduled: _Optional[int] = ..., waits: _Optional[_Union[ShardWait, _Mapping]] = ...) -> None: ...

class ShardWait(_message.Message):
    __slots__ = ("kind", "detail", "by", "reason", "signal", "until_ms")
    KIND_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    BY_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    UNTIL_MS_FIELD_NUMBER: _ClassVar[int]
    kind: WaitKind
    detail: str
    by: str
    reason: str
    signal: str
    until_ms: int
    def __init__(self, kind: _Optional[_Union[WaitKind, str]] = ..., detail: _Optional[str] = ..., by: _Optional[str] = ..., reason: _Optional[str] = ..., signal: _Optional[str] = ..., until_ms: _Optional[int] = ...) -> None: ...

class FailedOp(_message.Message):
    __slots__ = ("op_index", "shard", "id", "error_code", "reason", "job_part")
    OP_INDEX_FIELD_NUMBER: _ClassVar[int]
    SHARD_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    JOB_PART_FIELD_NUMBER: _ClassVar[int]
    op_index: int
    shard: int
    id: int
    error_code: int
    reason: str
    job_part: int
    def __init__(self, op_index: _Optional[int] = ..., shard: _Optional[int] = ..., id: _Optional[int] = ..., error_code: _Optional[int] = ..., reason: _Optional[str] = ..., job_part: _Optional[int] = ...) -> None: ...

class JobStatus(_message.Message):
    __slots__ = ("job_id", "request_id", "created_at_ms", "submitted", "applied", "failed", "pending", "rejected", "finished", "shards", "failures", "lost", "lane", "cancelled", "cancelled_at_ms", "cancelled_by", "cancel_reason", "job_name", "parts", "next_part", "sealed", "last_part", "named", "replay_of", "not_before_ms", "after", "scheduled", "waiting", "prerequisites", "resend_awaited")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    SUBMITTED_FIELD_NUMBER: _ClassVar[int]
    APPLIED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    FINISHED_FIELD_NUMBER: _ClassVar[int]
    SHARDS_FIELD_NUMBER: _ClassVar[int]
    FAILURES_FIELD_NUMBER: _ClassVar[int]
    LOST_FIELD_NUMBER: _ClassVar[int]
    LANE_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_BY_FIELD_NUMBER: _ClassVar[int]
    CANCEL_REASON_FIELD_NUMBER: _ClassVar[int]
    JOB_NAME_FIELD_NUMBER: _ClassVar[int]
    PARTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PART_FIELD_NUMBER: _ClassVar[int]
    SEALED_FIELD_NUMBER: _ClassVar[int]
    LAST_PART_FIELD_NUMBER: _ClassVar[int]
    NAMED_FIELD_NUMBER: _ClassVar[int]
    REPLAY_OF_FIELD_NUMBER: _ClassVar[int]
    NOT_BEFORE_MS_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_FIELD_NUMBER: _ClassVar[int]
    WAITING_FIELD_NUMBER: _ClassVar[int]
    PREREQUISITES_FIELD_NUMBER: _ClassVar[int]
    RESEND_AWAITED_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    request_id: str
    created_at_ms: int
    submitted: int
    applied: int
    failed: int
    pending: int
    rejected: int
    finished: bool
    shards: _containers.RepeatedCompositeFieldContainer[JobShard]
    failures: _containers.RepeatedCompositeFieldContainer[FailedOp]
    lost: int
    lane: str
    cancelled: int
    cancelled_at_ms: int
    cancelled_by: str
    cancel_reason: str
    job_name: str
    parts: int
    next_part: int
    sealed: bool
    last_part: int
    named: bool
    replay_of: str
    not_before_ms: int
    after: _containers.RepeatedScalarFieldContainer[str]
    scheduled: int
    waiting: str
    prerequisites: _containers.RepeatedCompositeFieldContainer[Prerequisite]
    resend_awaited: bool
    def __init__(self, job_id: _Optional[str] = ..., request_id: _Optional[str] = ..., created_at_ms: _Optional[int] = ..., submitted: _Optional[int] = ..., applied: _Optional[int] = ..., failed: _Optional[int] = ..., pending: _Optional[int] = ..., rejected: _Optional[int] = ..., finished: _Optional[bool] = ..., shards: _Optional[_Iterable[_Union[JobShard, _Mapping]]] = ..., failures: _Optional[_Iterable[_Union[FailedOp, _Mapping]]] = ..., lost: _Optional[int] = ..., lane: _Optional[str] = ..., cancelled: _Optional[int] = ..., cancelled_at_ms: _Optional[int] = ..., cancelled_by: _Optional[str] = ..., cancel_reason: _Optional[str] = ..., job_name: _Optional[str] = ..., parts: _Optional[int] = ..., next_part: _Optional[int] = ..., sealed: _Optional[bool] = ..., last_part: _Optional[int] = ..., named: _Optional[bool] = ..., replay_of: _Optional[str] = ..., not_before_ms: _Optional[int] = ..., after: _Optional[_Iterable[str]] = ..., scheduled: _Optional[int] = ..., waiting: _Optional[str] = ..., prerequisites: _Optional[_Iterable[_Union[Prerequisite, _Mapping]]] = ..., resend_awaited: _Optional[bool] = ...) -> None: ...

class Prerequisite(_message.Message):
    __slots__ = ("job_id", "found", "finished", "submitted", "applied", "failed", "cancelled", "was_cancelled", "expired")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    FOUND_FIELD_NUMBER: _ClassVar[int]
    FINISHED_FIELD_NUMBER: _ClassVar[int]
    SUBMITTED_FIELD_NUMBER: _ClassVar[int]
    APPLIED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    WAS_CANCELLED_FIELD_NUMBER: _ClassVar[int]
    EXPIRED_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    found: bool
    finished: bool
    submitted: int
    applied: int
    failed: int
    cancelled: int
    was_cancelled: bool
    expired: bool
    def __init__(self, job_id: _Optional[str] = ..., found: _Optional[bool] = ..., finished: _Optional[bool] = ..., submitted: _Optional[int] = ..., applied: _Optional[int] = ..., failed: _Optional[int] = ..., cancelled: _Optional[int] = ..., was_cancelled: _Optional[bool] = ..., expired: _Optional[bool] = ...) -> None: ...
