"""The fault suite's TLS-terminating proxy (testenv/tlsproxy.py) in front of a local HTTPS server.

Checked from the client's side: requests and bodies relayed unchanged over kept-alive connections;
injected answers carry the status, Retry-After and a Status body and never reach the upstream;
a frozen watch goes silent without closing while a new watch streams; the audit log reader.
"""

from __future__ import annotations

import base64
import http.client
import json
import shutil
import ssl
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from testenv import audit  # noqa: E402
from testenv.cluster import Pki  # noqa: E402
from testenv.tlsproxy import TlsProxy  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")


class _Upstream(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: list[tuple[str, str, bytes]] = []  # noqa: RUF012 - shared by the test server's handlers

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.seen.append(("GET", self.path, b""))
        if "watch=true" in self.path:
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                for i in range(100):
                    data = json.dumps({"type": "ADDED", "n": i}).encode() + b"\n"
                    self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                    self.wfile.flush()
                    time.sleep(0.1)
                self.wfile.write(b"0\r\n\r\n")
            except OSError:
                pass
            return
        body = json.dumps({"path": self.path}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n)
        self.seen.append(("POST", self.path, body))
        out = json.dumps({"created": self.path}).encode()
        self.send_response(201)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Path]]:
    pki = Pki(tmp_path_factory.mktemp("upstream-pki"), leaves=False)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    server.daemon_threads = True
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(pki.path("apiserver.crt"), pki.path("apiserver.key"))
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        yield server.server_address[1], Path(pki.path("ca.crt"))
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def proxy(upstream: tuple[int, Path], tmp_path: Path) -> Iterator[TlsProxy]:
    _Upstream.seen.clear()
    p = TlsProxy("127.0.0.1", upstream[0], upstream[1], tmp_path / "proxy-pki").start()
    try:
        yield p
    finally:
        p.stop()


def _status(conn: http.client.HTTPSConnection) -> int:
    resp = conn.getresponse()
    resp.read()
    return resp.status


def _client(p: TlsProxy, timeout: float = 5.0) -> http.client.HTTPSConnection:
    ctx = ssl.create_default_context(cadata=base64.b64decode(p.ca_data).decode())
    return http.client.HTTPSConnection("127.0.0.1", p.port, context=ctx, timeout=timeout)


def test_requests_are_relayed_on_one_kept_alive_connection(proxy: TlsProxy) -> None:
    conn = _client(proxy)
    for i in range(3):
        conn.request("GET", f"/api/v1/pods?i={i}")
        resp = conn.getresponse()
        assert resp.status == 200
        assert json.loads(resp.read()) == {"path": f"/api/v1/pods?i={i}"}
    conn.request("POST", "/api/v1/namespaces/a/pods/p/binding", body=b'{"target":"n1"}')
    resp = conn.getresponse()
    assert (resp.status, resp.read()) == (201, b'{"created": "/api/v1/namespaces/a/pods/p/binding"}')
    conn.close()
    assert ("POST", "/api/v1/namespaces/a/pods/p/binding", b'{"target":"n1"}') in _Upstream.seen
    assert proxy.forwarded == 4


def test_injected_answers_never_reach_the_upstream(proxy: TlsProxy) -> None:
    proxy.inject(503, rate=1.0, retry_after=2, methods={"POST"}, path=r"/binding$")
    conn = _client(proxy)
    conn.request("POST", "/api/v1/namespaces/a/pods/p/binding", body=b"{}")
    resp = conn.getresponse()
    assert resp.status == 503
    assert resp.getheader("Retry-After") == "2"
    status = json.loads(resp.read())
    assert (status["kind"], status["code"], status["details"]["retryAfterSeconds"]) == ("Status", 503, 2)
    # Not matching (a GET, another path): relayed, on the same connection.
    conn.request("GET", "/api/v1/nodes")
    assert conn.getresponse().read() == b'{"path": "/api/v1/nodes"}'
    conn.request("POST", "/api/v1/namespaces/a/pods/p/eviction", body=b"{}")
    assert _status(conn) == 201
    proxy.inject(429, rate=1.0, methods={"POST"})
    conn.request("POST", "/api/v1/namespaces/a/pods/q/eviction", body=b"{}")
    resp = conn.getresponse()
    resp.read()
    assert resp.status == 429
    proxy.clear()
    conn.request("POST", "/api/v1/namespaces/a/pods/q/binding", body=b"{}")
    assert _status(conn) == 201
    conn.close()
    assert [p for m, p, _ in _Upstream.seen if m == "POST"] == [
        "/api/v1/namespaces/a/pods/p/eviction",
        "/api/v1/namespaces/a/pods/q/binding",
    ]
    assert proxy.injected_total() == 2


def test_a_rate_below_one_answers_a_share_of_matching_requests(proxy: TlsProxy) -> None:
    proxy.inject(503, rate=0.5, methods={"POST"})
    conn = _client(proxy)
    codes = []
    for _ in range(40):
        conn.request("POST", "/x/binding", body=b"{}")
        resp = conn.getresponse()
        resp.read()
        codes.append(resp.status)
    conn.close()
    assert set(codes) == {201, 503}
    assert codes.count(503) == proxy.injected_total()


def test_a_frozen_watch_goes_silent_without_closing_and_a_new_one_streams(proxy: TlsProxy) -> None:
    conn = _client(proxy, timeout=1.0)
    conn.request("GET", "/api/v1/pods?watch=true&resourceVersion=1")
    resp = conn.getresponse()
    assert resp.status == 200
    assert json.loads(resp.readline())["type"] == "ADDED"
    assert proxy.open_watches() == ["/api/v1/pods"]
    assert proxy.freeze_watches() == 1
    # Whatever was already in flight may still arrive; then nothing, and no end of stream.
    with pytest.raises(TimeoutError):
        for _ in range(50):
            assert resp.readline() != b""
    assert proxy.open_watches() == []
    fresh = _client(proxy, timeout=5.0)
    fresh.request("GET", "/api/v1/pods?watch=true&resourceVersion=2")
    resp2 = fresh.getresponse()
    assert json.loads(resp2.readline())["type"] == "ADDED"
    assert proxy.open_watches() == ["/api/v1/pods"]
    conn.close()
    fresh.close()


def test_audit_reader_keeps_completed_writes_with_their_replica(tmp_path: Path) -> None:
    def event(stage: str, verb: str, user: str, resource: str, sub: str, name: str, code: int, at: str) -> str:
        return json.dumps(
            {
                "stage": stage,
                "verb": verb,
                "user": {"username": user},
                "userAgent": "placer",
                "objectRef": {"resource": resource, "subresource": sub, "namespace": "ns", "name": name},
                "responseStatus": {"code": code},
                "requestReceivedTimestamp": at,
                "stageTimestamp": at,
            }
        )

    a, b = "system:serviceaccount:placer-system:a", "system:serviceaccount:placer-system:b"
    lines = [
        event("ResponseComplete", "create", a, "pods", "binding", "p1", 201, "2026-01-01T00:00:01.000000Z"),
        event("ResponseStarted", "create", a, "pods", "binding", "p2", 201, "2026-01-01T00:00:02.000000Z"),
        event("ResponseComplete", "get", a, "leases", "", "l", 200, "2026-01-01T00:00:03.000000Z"),
        event("ResponseComplete", "create", b, "pods", "eviction", "v", 201, "2026-01-01T00:00:04.000000Z"),
        event("ResponseComplete", "create", b, "pods", "eviction", "v", 201, "2026-01-01T00:00:05.000000Z"),
        event("ResponseComplete", "create", b, "pods", "eviction", "w", 429, "2026-01-01T00:00:06.000000Z"),
        '{"torn',
    ]
    log = tmp_path / "audit.log"
    log.write_text("\n".join(lines))
    writes = audit.read_writes(log)
    assert [(w.user, w.resource, w.name) for w in writes] == [
        (a, "pods/binding", "p1"),
        (b, "pods/eviction", "v"),
        (b, "pods/eviction", "v"),
        (b, "pods/eviction", "w"),
    ]
    assert writes[0].received.second == 1 and writes[0].ok
    assert list(audit.successful_evictions(writes)) == [("ns", "v")]
    assert audit.summary(writes)[b] == {"create pods/eviction 201": 2, "create pods/eviction 429": 1}
    assert set(audit.by_user(writes)) == {a, b}
    assert audit.read_writes(tmp_path / "missing.log") == []


def test_held_requests_land_on_release_and_are_dropped_when_their_client_leaves(proxy: TlsProxy) -> None:
    proxy.hold(methods={"POST"}, path=r"/binding$")
    gone = _client(proxy, timeout=0.5)
    gone.request("POST", "/api/v1/namespaces/a/pods/dropped/binding", body=b"{}")
    with pytest.raises(TimeoutError):
        gone.getresponse()
    gone.close()  # the client dies with its request held
    waiting = _client(proxy, timeout=10)
    waiting.request("POST", "/api/v1/namespaces/a/pods/kept/binding", body=b"{}")
    deadline = time.monotonic() + 5
    while proxy.held_count() < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proxy.held_count() == 2
    time.sleep(0.3)
    proxy.release()
    assert _status(waiting) == 201
    waiting.close()
    posted = [p for m, p, _ in _Upstream.seen if m == "POST"]
    assert posted == ["/api/v1/namespaces/a/pods/kept/binding"]


def test_watch_only_injections_answer_watches_with_their_message_and_let_lists_through(proxy: TlsProxy) -> None:
    proxy.inject(504, rate=1.0, methods={"GET"}, watches=True, message="Too large resource version: 9, current: 1")
    conn = _client(proxy)
    conn.request("GET", "/api/v1/pods?watch=true&resourceVersion=9")
    resp = conn.getresponse()
    body = json.loads(resp.read())
    assert resp.status == 504 and body["message"].startswith("Too large resource version")
    conn.request("GET", "/api/v1/pods?limit=500")
    assert _status(conn) == 200  # a list is relayed
    conn.close()


def test_a_lost_answer_lands_upstream_and_the_client_sees_its_connection_cut(proxy: TlsProxy) -> None:
    proxy.lose(methods={"POST"}, path=r"/binding$", count=1)
    conn = _client(proxy)
    conn.request("POST", "/api/v1/namespaces/a/pods/p/binding", body=b"{}")
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError, ssl.SSLError)):
        conn.getresponse()
    conn.close()
    assert ("POST", "/api/v1/namespaces/a/pods/p/binding", b"{}") in _Upstream.seen
    assert proxy.lost == ["POST /api/v1/namespaces/a/pods/p/binding"]
    again = _client(proxy)  # only ``count`` answers are lost
    again.request("POST", "/api/v1/namespaces/a/pods/q/binding", body=b"{}")
    assert _status(again) == 201
    again.close()
