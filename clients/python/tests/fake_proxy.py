"""A scripted stand-in for the proxy's Connect endpoint (stdlib HTTP/1.1 server): each
method answers from its queue of replies (the last one repeats), and every request is
recorded, so the unit tests see the bytes the client sends and what it does with each
kind of answer (docs/clients.md's error table)."""

from __future__ import annotations

import base64
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf import json_format

PREFIX = "/bulkwrite.v1.BulkwriteService/"


@dataclass
class Err:
    status: int
    code: str
    message: str = "scripted"
    detail: object = None  # a BatchWriteResponse to carry as the error's detail
    headers: dict = field(default_factory=dict)


@dataclass
class Call:
    method: str
    headers: dict
    body: bytes


class FakeProxy:
    def __init__(self) -> None:
        self.replies: dict[str, list] = {}
        self.calls: list[Call] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                method = self.path.removeprefix(PREFIX)
                fake.calls.append(Call(method, {k.lower(): v for k, v in self.headers.items()}, body))
                queue = fake.replies.get(method)
                if not queue:
                    return self._send(404, "application/json", json.dumps({"code": "not_found", "message": self.path}).encode())
                reply = queue.pop(0) if len(queue) > 1 else queue[0]
                if callable(reply):
                    reply = reply(body)
                if isinstance(reply, Err):
                    e = {"code": reply.code, "message": reply.message}
                    if reply.detail is not None:  # unpadded standard base64, as the protocol says
                        v = base64.b64encode(reply.detail.SerializeToString()).decode().rstrip("=")
                        e["details"] = [{"type": reply.detail.DESCRIPTOR.full_name, "value": v}]
                    return self._send(reply.status, "application/json", json.dumps(e).encode(), reply.headers)
                if self.headers.get("content-type") == "application/json":
                    return self._send(200, "application/json", json_format.MessageToJson(reply).encode())
                self._send(200, "application/proto", reply.SerializeToString())

            def _send(self, status, ctype, data, headers=None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def calls_of(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
