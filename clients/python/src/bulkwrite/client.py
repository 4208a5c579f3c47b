"""A client team's jobs over the proxy's Connect endpoint: send ops as one named job in
parts, resume it after a crash, wait out a full backlog, follow, cancel, read failures.

The calls are the Connect client generated from proto/bulkwrite/v1/bulkwrite.proto
(v1/bulkwrite_connect.py); this module adds what every team would otherwise write
again: parts, resume, retries and the error details."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from connectrpc.client import ResponseMetadata
from connectrpc.code import Code
from connectrpc.compat import google_protobuf_binary_codec, google_protobuf_json_codec
from connectrpc.errors import ConnectError

from .ops import op_from_json, read_ops
from .v1.bulkwrite_connect import BulkwriteServiceClientSync
from .v1.bulkwrite_pb2 import (
    BatchWriteRequest,
    BatchWriteResponse,
    CancelJobRequest,
    GetJobRequest,
    JobFailure,
    JobStatus,
    ListFailuresRequest,
    Op,
    WaitKind,
)

# Answers that come and go (no answer, a proxy restarting, Kafka not acknowledging):
# the same request is sent again for up to `retry_for` seconds.
_TRANSIENT = {Code.UNAVAILABLE, Code.INTERNAL, Code.UNKNOWN, Code.DEADLINE_EXCEEDED}
_RESPONSE_DETAIL = "bulkwrite.v1.BatchWriteResponse"
MAX_BACKLOG_WAIT_S = 30  # a drained backlog is not left idle long on a large Retry-After


class BulkwriteError(Exception):
    """The proxy's final answer to a call, when it is not the reply asked for.

    `code` is the Connect code ("invalid_argument", "aborted", "resource_exhausted", …),
    `status` the HTTP status when there was an answer, `retry_after` the Retry-After
    header's seconds (None without one), and `response` the BatchWriteResponse a
    WriteBatch error carries as its detail (which ops were taken, which to resend)."""

    def __init__(self, code: str, message: str, status: int | None = None,
                 retry_after: int | None = None, response: BatchWriteResponse | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status
        self.retry_after = retry_after
        self.response = response


@dataclass
class Rejection:
    """An op of the job that the proxy refused for good (invalid, outside the client's
    scopes): its part, its index in the part, why, and the op."""
    part: int
    index: int
    reason: str
    op: Op


@dataclass
class SubmitResult:
    job_id: str = ""
    parts: int = 0          # the job's parts, the last one included
    sent: int = 0           # parts sent by this run
    skipped: int = 0        # parts below the job's next_part: a run before had them taken
    accepted: int = 0       # ops durably in Kafka (those of skipped parts included)
    rejected: list[Rejection] = field(default_factory=list)
    backlog_waits: int = 0  # 429 answers waited out
    last_backlog: BulkwriteError | None = None  # the latest of them: which shard, Retry-After
    resent: int = 0         # requests sent again after no answer or a 5xx

    @property
    def ok(self) -> bool:
        """Every op was accepted."""
        return not self.rejected


def _retry_after(meta: ResponseMetadata) -> int | None:
    v = meta.headers.get("retry-after")  # empty without an answer
    return int(v) if v is not None and v.strip().isdigit() else None


def _error(e: ConnectError, meta: ResponseMetadata) -> BulkwriteError:
    response = None
    for d in e.details:
        if d.type_name == _RESPONSE_DETAIL:
            response = BatchWriteResponse.FromString(d.message_bytes)
    return BulkwriteError(e.code.value, e.message, meta.http_status, _retry_after(meta), response)


def _as_op(op: Op | dict[str, Any]) -> Op:
    return op if isinstance(op, Op) else op_from_json(op)


def split_parts(ops: Iterable[Op | dict[str, Any]], part_size: int) -> Iterator[tuple[int, list[Op], bool]]:
    """(number, ops, last) for each part of `part_size` ops, reading one part ahead so
    that the last part is known to be the last when it is sent (it seals the job)."""
    if part_size < 1:
        raise ValueError("part_size is at least 1")
    it = (_as_op(op) for op in ops)
    cur = list(islice(it, part_size))
    number = 0
    while cur:
        nxt = list(islice(it, part_size))
        yield number, cur, not nxt
        cur, number = nxt, number + 1


def describe_waits(status: JobStatus) -> list[str]:
    """Why each shard holds the job back, in words ("shard 3: paused by alice: reindex"),
    from the per-shard `waits`; empty when no shard waits."""
    out = []
    for s in status.shards:
        if s.HasField("waits") and s.waits.kind != WaitKind.WAIT_KIND_UNSPECIFIED:
            out.append(f"shard {s.shard}: {s.waits.detail or WaitKind.Name(s.waits.kind)}")
    return out


class Client:
    """The proxy at `url` (its data port: "http://127.0.0.1:18080"). `token` is a
    client's bearer token (none when the proxy has no clients file). `retry_for` bounds,
    in seconds, how long one request is sent again after no answer or a 5xx; a full
    backlog (429) is waited out for as long as it takes, each wait as Retry-After says.
    `encoding` is "proto" (application/proto) or "json" (the proto3 JSON mapping)."""

    def __init__(self, url: str, *, token: str | None = None, timeout: float = 60.0,
                 retry_for: float = 60.0, encoding: str = "proto", sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic) -> None:
        codecs = {"proto": google_protobuf_binary_codec, "json": google_protobuf_json_codec}
        if encoding not in codecs:
            raise ValueError(f'encoding is "proto" or "json", not {encoding!r}')
        # No compression: the proxy takes no compressed request, and ops compress little anyway.
        self._rpc = BulkwriteServiceClientSync(url.rstrip("/"), codec=codecs[encoding](), send_compression=None,
                                               accept_compression=(), timeout_ms=int(timeout * 1000))
        self._headers = {"authorization": f"Bearer {token}"} if token else {}
        self.retry_for = retry_for
        self._sleep = sleep
        self._clock = clock

    def close(self) -> None:
        self._rpc.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: Callable[..., Any], request: Any) -> Any:
        """One call, once; a ConnectError becomes a BulkwriteError with its details."""
        with ResponseMetadata() as meta:
            try:
                return method(request, headers=self._headers)
            except ConnectError as e:
                raise _error(e, meta) from None

    def _retrying(self, method: Callable[..., Any], request: Any,
                  on_backlog: Callable[[BulkwriteError], None] | None = None,
                  on_resend: Callable[[BulkwriteError], None] | None = None) -> Any:
        """Sends the same request until it has a final answer. resource_exhausted (429: a
        shard's backlog is full, or a quota) is waited out per Retry-After, without
        counting against retry_for; transient failures are sent again until retry_for."""
        deadline = self._clock() + self.retry_for
        while True:
            start = self._clock()
            try:
                return self._call(method, request)
            except BulkwriteError as e:
                if e.code == Code.RESOURCE_EXHAUSTED.value and e.status == 429:
                    if on_backlog:
                        on_backlog(e)
                    self._sleep(min(max(e.retry_after or 1, 1), MAX_BACKLOG_WAIT_S))
                    deadline += self._clock() - start
                elif Code(e.code) in _TRANSIENT and self._clock() < deadline:
                    if on_resend:
                        on_resend(e)
                    self._sleep(min(max(e.retry_after or 1, 1), MAX_BACKLOG_WAIT_S))
                else:
                    raise

    def write_batch(self, request: BatchWriteRequest, **callbacks: Any) -> BatchWriteResponse:
        """Sends one request (the same bytes each time) until it has a final answer:
        every op taken, or refused for good. An answer that refused ops for good (422:
        none valid; 403: outside the client's scopes) is returned, its reasons in
        `rejected`; other errors raise BulkwriteError."""
        try:
            return self._retrying(self._rpc.write_batch, request, **callbacks)
        except BulkwriteError as e:
            if e.response is not None and not any(r.retryable for r in e.response.rejected):
                return e.response
            raise

    def status(self, job_id: str) -> JobStatus:
        return self._retrying(self._rpc.get_job, GetJobRequest(job_id=job_id))

    def submit(self, ops: Iterable[Op | dict[str, Any]], job: str, *, part_size: int = 1000,
               lane: str = "", on_progress: Callable[[str, SubmitResult], None] | None = None) -> SubmitResult:
        """Sends `ops` (Op messages, or dicts in the API's JSON encoding) as the named
        job `job`, in parts of `part_size` ops, one part at a time, so that every
        object's ops keep their order. Part 0 goes first (its answer names the job); then
        the job's `next_part` says which parts a run before had taken whole: those are
        read past, not sent. Run it again with the same ops, name and part size after a
        crash, and no op is applied twice or missed. `on_progress(event, result)` is told
        "job" once the job's id is known, "part" after each part, and "backlog" on each 429
        before it is waited out (`result.last_backlog` says why)."""
        result = SubmitResult()
        next_part = 0

        def backlog(e: BulkwriteError) -> None:
            result.backlog_waits += 1
            result.last_backlog = e
            if on_progress:
                on_progress("backlog", result)

        def resend(_: BulkwriteError) -> None:
            result.resent += 1

        for number, part_ops, last in split_parts(ops, part_size):
            result.parts = number + 1
            if 0 < number < next_part:
                result.skipped += 1
                result.accepted += len(part_ops)
                continue
            req = BatchWriteRequest(job=job, job_part=number, job_last=last, lane=lane, ops=part_ops)
            resp = self.write_batch(req, on_backlog=backlog, on_resend=resend)
            result.sent += 1
            result.accepted += resp.accepted
            result.rejected.extend(Rejection(number, r.index, r.reason, part_ops[r.index])
                                   for r in resp.rejected if r.index < len(part_ops))
            if number == 0:
                result.job_id = resp.job_id
                if on_progress:
                    on_progress("job", result)
                next_part = self._next_part(resp.job_id)
            if on_progress:
                on_progress("part", result)
        return result

    def _next_part(self, job_id: str) -> int:
        """Where a resumed upload goes on; 0 (send everything) for a job the proxy does not
        know, as after a part 0 whose every op was refused."""
        try:
            return self.status(job_id).next_part
        except BulkwriteError as e:
            if e.code == Code.NOT_FOUND.value:
                return 0
            raise

    def submit_file(self, path: str, job: str, *, on_error: Callable[[Exception], None] | None = None,
                    **kwargs: Any) -> SubmitResult:
        """submit() of a JSON-lines file of ops, as `bwctl submit` reads it. A line that
        does not parse raises OpError, or with `on_error` is passed to it and skipped."""
        return self.submit(read_ops(path, on_error), job, **kwargs)

    def follow(self, job_id: str, *, interval: float = 1.0, timeout: float | None = None,
               on_status: Callable[[JobStatus], None] | None = None) -> JobStatus:
        """Asks the job's status every `interval` seconds until it is finished (or
        cancelled with nothing pending), and returns it; `on_status` sees each status
        (describe_waits() says why shards hold it). TimeoutError after `timeout`."""
        deadline = None if timeout is None else self._clock() + timeout
        while True:
            st = self.status(job_id)
            if on_status:
                on_status(st)
            if st.finished or (st.cancelled_at_ms and st.pending == 0):
                return st
            if deadline is not None and self._clock() >= deadline:
                raise TimeoutError(f"job {job_id} not finished after {timeout} s: {st.pending} ops pending")
            self._sleep(interval)

    def cancel(self, job_id: str, reason: str = "") -> JobStatus:
        """Cancels the job: its ops not applied yet are skipped (those applied stay)."""
        return self._retrying(self._rpc.cancel_job, CancelJobRequest(job_id=job_id, reason=reason))

    def failures(self, job_id: str, *, code: int = 0, reason: str = "", page_size: int = 100) -> Iterator[JobFailure]:
        """Every op of the job a shard refused, page by page (by shard, part, op index),
        only those with MySQL error `code` and whose reason contains `reason` when given."""
        after = ""
        while True:
            page = self._retrying(self._rpc.list_failures, ListFailuresRequest(
                job_id=job_id, limit=page_size, after=after, code=code, reason=reason))
            yield from page.failures
            if not page.next:
                return
            after = page.next
