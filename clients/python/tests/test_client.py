import json

import pytest

from bulkwrite import BulkwriteError, Client, describe_waits, pb, split_parts
from fake_proxy import Err


def ops(n, start=0):
    return [{"op": "update", "object_type": "pin", "id": start + i, "fields": {"like_count": {"increment": 1}}}
            for i in range(n)]


def accept(body):
    req = pb.BatchWriteRequest.FromString(body)
    return pb.BatchWriteResponse(job_id="j1", accepted=len(req.ops))


def sent_parts(fake):
    return [pb.BatchWriteRequest.FromString(c.body) for c in fake.calls_of("WriteBatch")]


def client(fake, clock, **kw):
    return Client(fake.url, sleep=clock.sleep, clock=clock, **kw)


def test_split_parts_reads_one_ahead_to_mark_the_last():
    assert [(n, len(p), last) for n, p, last in split_parts(ops(2500), 1000)] == [
        (0, 1000, False), (1, 1000, False), (2, 500, True)]
    assert [(n, len(p), last) for n, p, last in split_parts(ops(2000), 1000)] == [(0, 1000, False), (1, 1000, True)]
    assert list(split_parts([], 10)) == []
    with pytest.raises(ValueError):
        list(split_parts(ops(1), 0))


def test_a_job_goes_in_numbered_parts_one_at_a_time_the_last_sealing_it(fake, clock):
    fake.replies = {"WriteBatch": [accept], "GetJob": [pb.JobStatus(job_id="j1", next_part=0)]}
    with client(fake, clock, token="s3cret") as c:
        r = c.submit(ops(25), "feed-1", part_size=10)
    parts = sent_parts(fake)
    assert [(p.job, p.job_part, p.job_last, len(p.ops)) for p in parts] == [
        ("feed-1", 0, False, 10), ("feed-1", 1, False, 10), ("feed-1", 2, True, 5)]
    assert [op.id for p in parts for op in p.ops] == list(range(25))
    assert [c.method for c in fake.calls] == ["WriteBatch", "GetJob", "WriteBatch", "WriteBatch"]
    call = fake.calls[0]
    assert call.headers["content-type"] == "application/proto"
    assert call.headers["authorization"] == "Bearer s3cret"
    assert call.headers.get("content-encoding", "identity") == "identity"  # the proxy reads no gzip
    assert pb.GetJobRequest.FromString(fake.calls[1].body).job_id == "j1"
    assert (r.job_id, r.parts, r.sent, r.skipped, r.accepted, r.ok) == ("j1", 3, 3, 0, 25, True)


def test_a_resumed_job_sends_part_0_again_then_only_from_next_part(fake, clock):
    fake.replies = {"WriteBatch": [accept], "GetJob": [pb.JobStatus(job_id="j1", next_part=3, parts=3)]}
    r = client(fake, clock).submit(ops(45), "feed-1", part_size=10)
    assert [p.job_part for p in sent_parts(fake)] == [0, 3, 4]
    assert sent_parts(fake)[-1].job_last and [op.id for op in sent_parts(fake)[1].ops] == list(range(30, 40))
    assert (r.sent, r.skipped, r.accepted) == (3, 2, 45)


def test_a_full_backlog_is_waited_out_per_retry_after_and_the_same_part_resent(fake, clock):
    partial = pb.BatchWriteResponse(job_id="j1", accepted=4, rejected=[
        pb.OpRejection(index=i, reason="not accepted now: shard 3's backlog is full", retryable=True)
        for i in range(4, 10)])
    fake.replies = {"WriteBatch": [Err(429, "resource_exhausted", detail=partial, headers={"Retry-After": "3"}),
                                   Err(429, "resource_exhausted", detail=partial, headers={"Retry-After": "300"}),
                                   accept],
                    "GetJob": [pb.JobStatus(job_id="j1")]}
    r = client(fake, clock, retry_for=1).submit(ops(10), "feed-1", part_size=10)
    bodies = [c.body for c in fake.calls_of("WriteBatch")]
    assert len(bodies) == 3 and bodies[0] == bodies[1] == bodies[2]  # the same part, byte for byte
    assert clock.sleeps == [3, 30]  # Retry-After, at most 30 s a wait; not bounded by retry_for
    assert (r.backlog_waits, r.accepted, r.ok) == (2, 10, True)
    assert (r.last_backlog.status, r.last_backlog.retry_after, r.last_backlog.response) == (429, 300, partial)


def test_unavailable_is_resent_until_retry_for_then_raised_with_its_reply(fake, clock):
    lost = pb.BatchWriteResponse(job_id="j1", accepted=0, rejected=[
        pb.OpRejection(index=0, reason="not accepted: Kafka did not acknowledge it", retryable=True)])
    fake.replies = {"WriteBatch": [Err(503, "unavailable", "Kafka did not acknowledge", detail=lost,
                                       headers={"Retry-After": "2"})]}
    with pytest.raises(BulkwriteError) as e:
        client(fake, clock, retry_for=10).submit(ops(1), "feed-1")
    assert (e.value.code, e.value.status, e.value.retry_after) == ("unavailable", 503, 2)
    assert e.value.response == lost
    assert clock.sleeps == [2] * 5 and len(fake.calls_of("WriteBatch")) == 6


def test_no_answer_is_resent_then_raised_as_unavailable(clock):
    with pytest.raises(BulkwriteError) as e:
        Client("http://127.0.0.1:9", sleep=clock.sleep, clock=clock, retry_for=3).status("j1")
    assert e.value.code == "unavailable" and e.value.status is None
    assert clock.sleeps == [1, 1, 1]


def test_ops_refused_for_good_are_reported_and_the_job_goes_on(fake, clock):
    none_valid = pb.BatchWriteResponse(job_id="j1", accepted=0, rejected=[
        pb.OpRejection(index=i, reason=f"bad {i}") for i in range(2)])
    fake.replies = {"WriteBatch": [Err(422, "invalid_argument", detail=none_valid), accept],
                    "GetJob": [pb.JobStatus(job_id="j1")]}
    r = client(fake, clock).submit(ops(4), "feed-1", part_size=2)
    assert [(x.part, x.index, x.reason, x.op.id) for x in r.rejected] == [(0, 0, "bad 0", 0), (0, 1, "bad 1", 1)]
    assert (r.sent, r.accepted, r.ok, clock.sleeps) == (2, 2, False, [])


@pytest.mark.parametrize("status, code", [(409, "aborted"), (400, "invalid_argument"), (401, "unauthenticated"),
                                          (403, "permission_denied")])
def test_final_errors_are_raised_at_once(fake, clock, status, code):
    fake.replies = {"WriteBatch": [Err(status, code, "part 3 of job x was sent with a different body")]}
    with pytest.raises(BulkwriteError) as e:
        client(fake, clock).submit(ops(1), "x")
    assert (e.value.code, e.value.status, e.value.response) == (code, status, None)
    assert "different body" in e.value.message and len(fake.calls) == 1 and clock.sleeps == []


def test_follow_until_finished_with_the_shards_waits(fake, clock):
    waiting = pb.JobStatus(job_id="j1", pending=5, shards=[
        pb.JobShard(shard=3, pending=5, waits=pb.ShardWait(kind=pb.WAIT_KIND_PAUSED, detail="shard 3 is paused by alice: reindex")),
        pb.JobShard(shard=4, waits=pb.ShardWait(kind=pb.WAIT_KIND_THROTTLED)),
        pb.JobShard(shard=5)])
    fake.replies = {"GetJob": [waiting, waiting, pb.JobStatus(job_id="j1", applied=5, finished=True)]}
    seen = []
    st = client(fake, clock).follow("j1", interval=2, on_status=seen.append)
    assert st.finished and len(seen) == 3 and clock.sleeps == [2, 2]
    assert describe_waits(seen[0]) == ["shard 3: shard 3 is paused by alice: reindex", "shard 4: WAIT_KIND_THROTTLED"]
    assert describe_waits(st) == []


def test_follow_ends_on_a_cancelled_job_and_times_out_otherwise(fake, clock):
    fake.replies = {"GetJob": [pb.JobStatus(job_id="j1", cancelled_at_ms=1, cancelled=3, pending=0)]}
    assert client(fake, clock).follow("j1").cancelled == 3
    fake.replies = {"GetJob": [pb.JobStatus(job_id="j1", pending=1)]}
    with pytest.raises(TimeoutError):
        client(fake, clock).follow("j1", timeout=5)


def test_cancel_sends_the_reason(fake, clock):
    fake.replies = {"CancelJob": [pb.JobStatus(job_id="j1", cancel_reason="wrong list")]}
    assert client(fake, clock).cancel("j1", "wrong list").cancel_reason == "wrong list"
    assert pb.CancelJobRequest.FromString(fake.calls[0].body) == pb.CancelJobRequest(job_id="j1", reason="wrong list")


def test_failures_are_read_page_by_page(fake, clock):
    f = [pb.JobFailure(op_index=i, error_code=1062) for i in range(5)]
    fake.replies = {"ListFailures": [pb.ListFailuresResponse(job_id="j1", failures=f[:2], next="0-0-1"),
                                     pb.ListFailuresResponse(job_id="j1", failures=f[2:4], next="0-0-3"),
                                     pb.ListFailuresResponse(job_id="j1", failures=f[4:])]}
    got = list(client(fake, clock).failures("j1", code=1062, page_size=2))
    assert [x.op_index for x in got] == [0, 1, 2, 3, 4]
    reqs = [pb.ListFailuresRequest.FromString(c.body) for c in fake.calls]
    assert [(r.after, r.limit, r.code) for r in reqs] == [("", 2, 1062), ("0-0-1", 2, 1062), ("0-0-3", 2, 1062)]


def test_json_encoding_speaks_the_proto3_json_mapping(fake, clock):
    fake.replies = {"GetJob": [pb.JobStatus(job_id="j1", submitted=3, failures=[pb.FailedOp(id=2**63 + 1)])]}
    st = client(fake, clock, encoding="json").status("j1")
    assert st.submitted == 3 and st.failures[0].id == 2**63 + 1
    call = fake.calls[0]
    assert call.headers["content-type"] == "application/json" and json.loads(call.body) == {"jobId": "j1"}
    with pytest.raises(ValueError):
        Client(fake.url, encoding="xml")


def test_a_job_the_proxy_does_not_know_after_part_0_is_sent_whole(fake, clock):
    fake.replies = {"WriteBatch": [accept], "GetJob": [Err(404, "not_found", "no job j1")]}
    r = client(fake, clock).submit(ops(3), "x", part_size=1)
    assert [p.job_part for p in sent_parts(fake)] == [0, 1, 2] and r.skipped == 0
