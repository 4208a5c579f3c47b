"""`python -m bulkwrite` (or `bulkwrite`): the client's calls from the shell, for scripts
and for the live tests, which kill it half-way (clients/python/README.md)."""

from __future__ import annotations

import argparse
import os
import sys

from google.protobuf.json_format import MessageToJson

from .client import BulkwriteError, Client, describe_waits


def _client(a: argparse.Namespace) -> Client:
    token = os.environ.get("BW_TOKEN")
    if a.token_file:
        with open(a.token_file, encoding="utf-8") as f:
            token = f.read().strip()
    return Client(a.url, token=token, retry_for=a.retry_for)


def _submit(c: Client, a: argparse.Namespace) -> int:
    def progress(event: str, r) -> None:
        if event == "job":
            print(r.job_id, flush=True)  # at once: a run killed half-way has named its job
        elif a.verbose:
            print(f"part {r.parts - 1} answered: {r.sent} sent, {r.skipped} skipped, {r.accepted} accepted",
                  file=sys.stderr, flush=True)

    r = c.submit_file(a.file, a.job, part_size=a.part_size, lane=a.lane, on_progress=progress,
                      on_error=lambda e: print(f"bulkwrite: {e}", file=sys.stderr))
    for rej in r.rejected:
        print(f"part {rej.part} op {rej.index}: {rej.reason}", file=sys.stderr)
    print(f"job {r.job_id}: {r.parts} parts ({r.sent} sent, {r.skipped} taken before), {r.accepted} ops accepted, "
          f"{len(r.rejected)} rejected", file=sys.stderr)
    return 0 if r.ok else 1


def _follow(c: Client, a: argparse.Namespace) -> int:
    def show(st) -> None:
        waits = "; ".join(describe_waits(st))
        print(f"{st.applied}/{st.submitted} applied, {st.failed} failed, {st.pending} pending"
              + (f" ({waits})" if waits else ""), file=sys.stderr, flush=True)

    st = c.follow(a.job_id, interval=a.interval, timeout=a.timeout, on_status=show)
    print(MessageToJson(st, preserving_proto_field_name=True))
    return 0 if st.failed == 0 and st.cancelled == 0 and not st.cancelled_at_ms else 1


def _cancel(c: Client, a: argparse.Namespace) -> int:
    print(MessageToJson(c.cancel(a.job_id, a.reason), preserving_proto_field_name=True))
    return 0


def _failures(c: Client, a: argparse.Namespace) -> int:
    for f in c.failures(a.job_id, code=a.code, reason=a.reason):
        print(MessageToJson(f, preserving_proto_field_name=True, indent=None))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bulkwrite", description="bulkwrite's Python client")
    p.add_argument("--url", default=os.environ.get("BW_PROXY_URL", "http://127.0.0.1:18080"),
                   help="the proxy's data port (BW_PROXY_URL)")
    p.add_argument("--token-file", help="a file holding the client's bearer token (else BW_TOKEN)")
    p.add_argument("--retry-for", type=float, default=60.0,
                   help="seconds a request is sent again after no answer or a 5xx (60)")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("submit", help="send a JSON-lines file of ops as one named job; prints its id")
    s.add_argument("--job", required=True, help="the job's name: the same name resumes it")
    s.add_argument("--part-size", type=int, default=1000, help="ops per part (1000)")
    s.add_argument("--lane", default="")
    s.add_argument("-v", "--verbose", action="store_true", help="a line per part on stderr")
    s.add_argument("file")
    f = sub.add_parser("follow", help="wait until the job is finished; print its status")
    f.add_argument("--interval", type=float, default=1.0)
    f.add_argument("--timeout", type=float)
    f.add_argument("job_id")
    c = sub.add_parser("cancel", help="cancel the job")
    c.add_argument("--reason", default="")
    c.add_argument("job_id")
    fl = sub.add_parser("failures", help="every refused op of the job, one JSON a line")
    fl.add_argument("--code", type=int, default=0)
    fl.add_argument("--reason", default="")
    fl.add_argument("job_id")
    a = p.parse_args(argv)
    try:
        with _client(a) as cl:
            return {"submit": _submit, "follow": _follow, "cancel": _cancel, "failures": _failures}[a.cmd](cl, a)
    except BulkwriteError as e:
        print(f"bulkwrite: {e}", file=sys.stderr)
        return 1
    except (OSError, TimeoutError) as e:
        print(f"bulkwrite: {e}", file=sys.stderr)
        return 1
