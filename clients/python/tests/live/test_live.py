"""The client against a real stack (test/tiers/client-python.sh): a job sent in parts, its
sender killed -9 half-way and run again (every row compared), a cancel, and failures."""

import json
import re
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

from bulkwrite import BulkwriteError, Client, describe_waits, op_from_json, pb
from stack import ADMIN_TOKEN, BACKLOG_MAX_MESSAGES, READ_TOKEN, TOKEN, URL, sql

pytestmark = pytest.mark.skipif(not URL, reason="no stack: BW_PROXY_URL is unset (test/tiers/client-python.sh)")

PIN = 1  # the demo configuration's pin type_id
SHARDS = 8


def pin_id(shard: int, local: int) -> int:
    return (shard << 46) | (PIN << 36) | local


def db(shard: int) -> str:
    return f"db{shard:05d}"


def rows(ids_by_shard: dict[int, list[int]], cols: str) -> dict[int, tuple]:
    got = {}
    for shard, ids in ids_by_shard.items():
        for r in sql(shard, f"SELECT id, {cols} FROM {db(shard)}.pins WHERE id IN ({','.join(map(str, ids))})"):
            assert int(r[0]) not in got, f"pin {r[0]} twice"
            got[int(r[0])] = tuple(r[1:])
    return got


def compare(expected: dict[int, tuple], got: dict[int, tuple]) -> None:
    """Row by row: every expected row once with its values, nothing else."""
    missing = sorted(set(expected) - set(got))
    unexpected = sorted(set(got) - set(expected))
    wrong = sorted(i for i in set(expected) & set(got) if expected[i] != got[i])
    assert not (missing or unexpected or wrong), (
        f"{len(missing)} missing {missing[:5]}, {len(unexpected)} unexpected {unexpected[:5]}, "
        f"{len(wrong)} wrong {[(i, expected[i], got[i]) for i in wrong[:5]]}")


def cli(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "bulkwrite", "--url", URL, *args], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


def test_a_job_resumed_after_kill_9_applies_every_op_once(client, tmp_path):
    """6,000 ops (2,000 pins over 8 shards, each created, then bumped twice) as one job of
    120 parts of 50; the sender is killed -9 after part 30 and run again."""
    n, local0 = 2000, 7_000_000
    ids = [pin_id(k % SHARDS, local0 + k) for k in range(n)]
    lines = []
    for k, i in enumerate(ids):
        lines.append({"op": "create", "object_type": "pin", "id": i, "shard_key": str(i),
                      "fields": {"owner_id": 42 + k, "title": f"py-{k}", "like_count": 0}})
    for _ in range(2):  # later parts: an increment applied twice would show in like_count
        lines += [{"op": "update", "object_type": "pin", "id": i, "fields": {"like_count": {"increment": 1}}}
                  for i in ids]
    f = tmp_path / "feed.jsonl"
    f.write_text("".join(json.dumps(line) + "\n" for line in lines))
    args = ("submit", "--job", "py-resume", "--part-size", "50", "-v", str(f))

    first = cli(*args)
    job_id = first.stdout.readline().strip()
    for line in first.stderr:  # one line a part: kill it half-way, wherever it is then
        if line.startswith("part 30 "):
            first.send_signal(signal.SIGKILL)
            break
    assert first.wait() == -signal.SIGKILL
    st = client.status(job_id)
    print(f"\n# killed with {st.parts} parts in, next_part {st.next_part}")
    assert st.named and not st.sealed and 31 <= st.next_part < 120, "killed half-way: the job is not sealed"

    second = cli(*args)
    out, err = second.communicate(timeout=600)
    assert second.returncode == 0, err
    assert out.splitlines()[0] == job_id, "the same name is the same job"
    m = re.search(r"job \w+: 120 parts \((\d+) sent, (\d+) taken before\), 6000 ops accepted, 0 rejected", err)
    assert m, err
    sent, skipped = int(m[1]), int(m[2])
    print(f"\n# the second run: {sent} parts sent (part 0 again), {skipped} taken before")
    assert skipped >= 30 and sent + skipped == 120  # parts 1-30 were answered before the kill

    st = client.follow(job_id, interval=0.5, timeout=300)
    assert (st.finished, st.sealed, st.parts, st.submitted, st.applied, st.failed, st.rejected) == \
        (True, True, 120, 3 * n, 3 * n, 0, 0)
    by_shard = {}
    for i in ids:
        by_shard.setdefault(i >> 46, []).append(i)
    compare({i: (str(42 + k), f"py-{k}", "2") for k, i in enumerate(ids)},
            rows(by_shard, "owner_id, title, like_count"))


def post(path: str, body: dict) -> dict:
    headers = {"Content-Type": "application/json"}
    if ADMIN_TOKEN:  # shard control is the admin's
        headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
    req = urllib.request.Request(URL + path, data=json.dumps(body).encode(), method="POST", headers=headers)
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)


def test_a_cancelled_job_is_skipped_and_takes_no_more_parts(client):
    """200 creates on paused shard 2, sealed, cancelled, the shard resumed: all 200
    counted cancelled, none in the table; a further part is refused (aborted, 409)."""
    ids = [pin_id(2, 8_000_000 + k) for k in range(200)]
    ops = [{"op": "create", "object_type": "pin", "id": i, "shard_key": str(i), "fields": {"owner_id": 7}}
           for i in ids]
    post("/v1/shards/2/pause", {"reason": "python client cancel test"})
    try:
        r = client.submit(ops, "py-cancel", part_size=50)
        assert (r.parts, r.accepted, r.ok) == (4, 200, True)
        st = client.status(r.job_id)
        assert st.pending == 200 and not st.finished
        waits = describe_waits(st)
        print(f"\n# while paused: {waits or 'no waits reported'}")
        assert all(w.startswith("shard 2:") for w in waits)
        st = client.cancel(r.job_id, "wrong list")
        assert st.cancel_reason == "wrong list" and st.cancelled_at_ms > 0
        with pytest.raises(BulkwriteError) as e:
            client.write_batch(pb.BatchWriteRequest(job="py-cancel", job_part=4, ops=[op_from_json(ops[0])]))
        assert (e.value.code, e.value.status) == ("aborted", 409), e.value
    finally:
        post("/v1/shards/2/resume", {"reason": "python client cancel test"})
    st = client.follow(r.job_id, interval=0.5, timeout=120)
    assert (st.submitted, st.applied, st.cancelled, st.pending) == (200, 0, 200, 0)
    assert rows({2: ids}, "owner_id") == {}


def test_failed_ops_are_listed_page_by_page(client):
    """Shard 1's title column cut to 20 characters under the proxy's 255: 10 creates with
    a 30-character title fail there (1406), 10 creates again of pins made in part 0 fail
    as duplicates (1062), and a 300-character title is refused by the proxy itself."""
    sql(1, f"ALTER TABLE {db(1)}.pins MODIFY title VARCHAR(20) NULL")
    ids = [pin_id(1, 9_000_000 + k) for k in range(30)]

    def create(i, title):
        return {"op": "create", "object_type": "pin", "id": i, "shard_key": str(i),
                "fields": {"owner_id": 42, "title": title}}

    ops = [create(i, f"ok-{k}") for k, i in enumerate(ids[:10])]          # part 0: applied
    ops += [create(i, f"again-{k}") for k, i in enumerate(ids[:10])]      # part 1: 1062
    ops += [create(i, "x" * 30) for i in ids[10:20]]                      # part 2: 1406
    ops += [create(ids[20], "y" * 300)]                                   # part 3: the proxy's
    r = client.submit(ops, "py-failures", part_size=10)
    assert [(x.part, x.index, x.op.id) for x in r.rejected] == [(3, 0, ids[20])]
    assert "longer than its max_length 255" in r.rejected[0].reason
    st = client.follow(r.job_id, interval=0.5, timeout=120)
    assert (st.submitted, st.applied, st.failed, st.rejected) == (30, 10, 20, 1)

    every = list(client.failures(r.job_id, page_size=7))  # three pages
    assert sorted((f.job_part, f.op_index, f.id, f.error_code) for f in every) == \
        [(1, k, ids[k], 1062) for k in range(10)] + [(2, k, ids[10 + k], 1406) for k in range(10)]
    assert all(f.shard == 1 and json.loads(f.op_json)["object_type"] == "pin" for f in every)
    long = list(client.failures(r.job_id, code=1406))
    assert [f.id for f in long] == ids[10:20] and all("too long" in f.reason for f in long)
    # as a submit client sees it: "MySQL error 1062 (duplicate key)", no row values
    assert [f.id for f in client.failures(r.job_id, reason="duplicate key")] == ids[:10]
    with Client(URL, token=TOKEN, encoding="json") as as_json:  # the proto3 JSON mapping reads the same
        assert list(as_json.failures(r.job_id, page_size=7)) == every
        assert as_json.status(r.job_id) == client.status(r.job_id)
    compare({i: (f"ok-{k}",) for k, i in enumerate(ids[:10])}, rows({1: ids}, "title"))


def test_a_full_backlog_is_waited_out_and_each_part_taken_once(client):
    """Shard 3 paused, its backlog bounded at BACKLOG_MAX_MESSAGES messages: a 40-part job
    on it (a message a part) gets 429s half-way; the client waits them out per
    Retry-After, sending the same part again, until the shard is resumed; then every
    part goes in and each row is written once."""
    ids = [pin_id(3, 10_000_000 + k) for k in range(200)]
    ops = [{"op": "create", "object_type": "pin", "id": i, "shard_key": str(i), "fields": {"owner_id": k}}
           for k, i in enumerate(ids)]
    post("/v1/shards/3/pause", {"reason": "python client backlog test"})
    job, out = {}, {}

    def send() -> None:
        out["r"] = client.submit(ops, "py-backlog", part_size=5,
                                 on_progress=lambda event, r: job.setdefault("id", r.job_id))

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    try:
        with Client(URL, token=TOKEN) as watcher:
            deadline = time.monotonic() + 60
            def full() -> bool:
                return "id" in job and watcher.status(job["id"]).parts >= BACKLOG_MAX_MESSAGES

            while not full() and time.monotonic() < deadline:
                time.sleep(0.2)
            time.sleep(4)  # a few rounds of 429 and Retry-After
            st = watcher.status(job["id"])
            print(f"\n# stuck at {st.parts} parts; waits: {describe_waits(st) or 'none reported'}")
            assert sender.is_alive() and BACKLOG_MAX_MESSAGES <= st.parts < 40 and not st.sealed
    finally:
        post("/v1/shards/3/resume", {"reason": "python client backlog test"})
    sender.join(120)
    r = out["r"]
    e = r.last_backlog
    print(f"# {r.backlog_waits} backlog waits, the last: {e}")
    assert (r.parts, r.sent, r.accepted, r.ok) == (40, 40, 200, True) and r.backlog_waits >= 1
    assert (e.code, e.status, e.retry_after) == ("resource_exhausted", 429, 1)  # proxy.backlog_retry_after_s
    assert e.response is not None and e.response.rejected and all(
        x.retryable and "shard 3's backlog is full" in x.reason for x in e.response.rejected), e.response
    st = client.follow(r.job_id, interval=0.5, timeout=120)
    assert (st.submitted, st.applied, st.failed, st.parts) == (200, 200, 0, 40)
    compare({i: (str(k),) for k, i in enumerate(ids)}, rows({3: ids}, "owner_id"))


@pytest.mark.skipif(not READ_TOKEN, reason="the stack has no clients file")
def test_tokens_and_roles(client):
    """The token goes as a bearer token: a read-only client may not send (403), another
    client's job is not found for it (404), no token or a wrong one is 401."""
    i = pin_id(4, 11_000_000)
    r = client.submit([{"op": "delete", "object_type": "pin", "id": i}], "py-auth")
    assert r.ok and client.follow(r.job_id, interval=0.5, timeout=60).applied == 1
    with Client(URL, token=READ_TOKEN) as reader:
        with pytest.raises(BulkwriteError) as e:
            reader.submit([{"op": "delete", "object_type": "pin", "id": i}], "py-auth-read")
        assert (e.value.code, e.value.status) == ("permission_denied", 403), e.value
        with pytest.raises(BulkwriteError) as e:
            reader.status(r.job_id)
        assert (e.value.code, e.value.status) == ("not_found", 404), e.value
    for token in (None, "not-a-token"):
        with Client(URL, token=token) as stranger, pytest.raises(BulkwriteError) as e:
            stranger.status(r.job_id)
        assert (e.value.code, e.value.status) == ("unauthenticated", 401), e.value
