"""The real HTTP edge (urllib3 through the client's pool) against a tiny local stand-in for the API.

Aspects: what urllib3 really raises is classified as the policy expects (a connection dropped
after a bind was sent is UNKNOWN and the pod is read back; a refused connection is retried); a
watch that goes silent without closing raises its read timeout; a paged list follows continue
tokens; every request carries the replica's user agent and no hidden retry is made.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest
from kubernetes import client
from urllib3.exceptions import ReadTimeoutError

from placer.kube.actions import Actions
from placer.kube.client import Http, user_agent
from placer.kube.informers import ApiListWatch, Informer
from placer.kube.policy import Budget, Policy, Result


class FakeApi(BaseHTTPRequestHandler):
    seen: ClassVar[list[tuple[str, str, str]]] = []  # (method, path, user agent)
    protocol_version = "HTTP/1.1"

    def _record(self) -> None:
        FakeApi.seen.append((self.command, self.path, self.headers.get("User-Agent", "")))

    def _json(self, body: Any, status: int = 200) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        self._record()
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        # The bind is "received", then the connection drops before any answer.
        self.close_connection = True
        self.connection.shutdown(socket.SHUT_RDWR)

    def do_GET(self) -> None:
        self._record()
        if self.path.startswith("/api/v1/namespaces/ns/pods/p"):
            self._json({"metadata": {"name": "p", "namespace": "ns", "uid": "u1"}, "spec": {"nodeName": "n1"}})
        elif "watch=true" in self.path:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            line = json.dumps({"type": "ADDED", "object": {"metadata": {"name": "b", "resourceVersion": "11"}}})
            chunk = (line + "\n").encode()
            self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            self.wfile.flush()
            time.sleep(5)  # silent, but the connection stays open
        elif "continue=2" in self.path:
            self._json({"items": [{"metadata": {"name": "c"}}], "metadata": {"resourceVersion": "10"}})
        else:
            page = {"items": [{"metadata": {"name": "a"}}], "metadata": {"resourceVersion": "10", "continue": "2"}}
            self._json(page)

    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture
def api() -> Iterator[client.ApiClient]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeApi)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    cfg = client.Configuration()
    cfg.host = f"http://127.0.0.1:{server.server_address[1]}"
    cfg.retries = False
    a = client.ApiClient(cfg)
    a.user_agent = user_agent("replica-1")
    FakeApi.seen = []
    yield a
    server.shutdown()


def test_a_bind_cut_off_after_sending_is_read_back_once_not_resent(api: client.ApiClient) -> None:
    actions = Actions(Http(api), Policy(), scheduler_name="placer", identity="replica-1")
    out = actions.bind("ns/p", "n1", "u1")
    assert out.ok and "confirmed" in out.reason
    assert [(m, p.split("?")[0]) for m, p, _ in FakeApi.seen] == [
        ("POST", "/api/v1/namespaces/ns/pods/p/binding"),
        ("GET", "/api/v1/namespaces/ns/pods/p"),
    ]
    assert {ua for _, _, ua in FakeApi.seen} == {"placer/0.1.0 (replica-1)"}


def test_a_silent_watch_is_cut_by_the_read_timeout_and_a_list_is_paged(api: client.ApiClient) -> None:
    lw = ApiListWatch(Http(api), Policy(), "/api/v1/pods", margin=-0.5)  # read timeout 0.5 s
    inf = Informer("Pod", lw, watch_timeout=1)
    inf.step()
    assert {o["metadata"]["name"] for o in inf.items()} == {"a", "c"} and inf.version == "10"
    with pytest.raises(ReadTimeoutError):  # the read timeout, not the server's close, ended it
        inf.step()
    assert inf.version == "11"  # what the watch delivered before going silent: resumed from there
    assert {o["metadata"]["name"] for o in inf.items()} == {"a", "b", "c"}


def test_a_refused_connection_is_retried_and_reported_unavailable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed when the block ends: nothing listens there
    cfg = client.Configuration()
    cfg.host = f"http://127.0.0.1:{port}"
    retried: list[str] = []
    policy = Policy(budget=Budget(attempts=3, deadline=5, backoff=0.01), retried=retried.append)
    out = Actions(Http(client.ApiClient(cfg)), policy, scheduler_name="placer", identity="r").bind("ns/p", "n1", "u1")
    assert out.result is Result.UNAVAILABLE and retried == ["connection", "connection"]
