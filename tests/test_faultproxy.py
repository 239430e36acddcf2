"""The fault-injection suite's TCP proxy (testenv/faultproxy.py) in front of a local echo server.

Each mode is checked by what a client sees: bytes echoed unchanged (pass), an RST within the
period (reset), silence that ends with delivery of the held bytes on heal (blackhole), a round
trip no shorter than the delay (latency). Only lower bounds on time are asserted.
"""

from __future__ import annotations

import contextlib
import socket
import socketserver
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from testenv.faultproxy import FaultProxy, Mode  # noqa: E402


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        sock: socket.socket = self.request
        while data := sock.recv(65536):
            sock.sendall(data)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


@pytest.fixture
def echo() -> Iterator[int]:
    server = _Server(("127.0.0.1", 0), _Echo)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def proxy(echo: int) -> Iterator[FaultProxy]:
    with FaultProxy("127.0.0.1", echo) as p:
        yield p


def _connect(proxy: FaultProxy, timeout: float = 5.0) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", proxy.port), timeout=timeout)
    s.settimeout(timeout)
    return s


def _recv_exactly(s: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            break
        out += chunk
    return out


def _round_trip(s: socket.socket, payload: bytes) -> bytes:
    s.sendall(payload)
    return _recv_exactly(s, len(payload))


def test_pass_forwards_bytes_unchanged_both_ways(proxy: FaultProxy) -> None:
    payload = bytes(range(256)) * 1000  # larger than one chunk
    with _connect(proxy) as s:
        assert _round_trip(s, payload) == payload
        assert _round_trip(s, b"again") == b"again"
    assert proxy.stats.accepted == 1
    assert proxy.stats.bytes_up >= len(payload) and proxy.stats.bytes_down >= len(payload)


def test_it_listens_on_loopback_only(proxy: FaultProxy) -> None:
    assert proxy.address == f"127.0.0.1:{proxy.port}"
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as s:
        assert s.getpeername()[0] == "127.0.0.1"


def test_reset_aborts_open_connections_and_new_ones_still_work(proxy: FaultProxy) -> None:
    with _connect(proxy) as s:
        assert _round_trip(s, b"before") == b"before"
        proxy.set_reset(every=0.3)
        with pytest.raises((ConnectionResetError, BrokenPipeError, ConnectionAbortedError)):
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:  # an RST shows on the next send or receive
                s.sendall(b"x")
                if not s.recv(1):
                    raise ConnectionResetError("closed")
                time.sleep(0.05)
    assert proxy.stats.resets >= 1
    # Between two resets a fresh connection works.
    with _connect(proxy) as s2:
        s2.sendall(b"y")
        assert s2.recv(1) in (b"y", b"")  # may be cut by the next reset, never altered
    proxy.set_pass()
    with _connect(proxy) as s3:
        time.sleep(0.5)  # longer than the old period: no reset any more
        assert _round_trip(s3, b"after") == b"after"


def test_blackhole_holds_bytes_until_healed(proxy: FaultProxy) -> None:
    with _connect(proxy) as s:
        assert _round_trip(s, b"warm") == b"warm"
        proxy.set_blackhole()
        assert proxy.mode is Mode.BLACKHOLE
        s.sendall(b"held")
        s.settimeout(0.7)
        with pytest.raises(TimeoutError):
            s.recv(4)
        proxy.set_pass()
        s.settimeout(5)
        assert _recv_exactly(s, 4) == b"held", "held bytes are delivered once the path heals"


def test_blackhole_accepts_new_connections_but_forwards_nothing(proxy: FaultProxy, echo: int) -> None:
    proxy.set_blackhole()
    with _connect(proxy) as s:  # the TCP handshake with the proxy succeeds
        s.sendall(b"ping")
        s.settimeout(0.7)
        with pytest.raises(TimeoutError):
            s.recv(4)
        assert proxy.stats.bytes_up == 0
        proxy.set_pass()
        s.settimeout(5)
        assert _recv_exactly(s, 4) == b"ping"


def test_latency_delays_every_round_trip(proxy: FaultProxy) -> None:
    proxy.set_latency(0.3)
    with _connect(proxy) as s:
        t0 = time.monotonic()
        assert _round_trip(s, b"slow") == b"slow"
        assert time.monotonic() - t0 >= 0.55, "a round trip crosses the proxy twice"
    proxy.set_pass()
    assert proxy.mode is Mode.PASS


def test_reset_all_once_keeps_the_mode(proxy: FaultProxy) -> None:
    with _connect(proxy) as s:
        assert _round_trip(s, b"a") == b"a"
        assert proxy.reset_all() == 1
        with pytest.raises((ConnectionResetError, BrokenPipeError)):
            s.sendall(b"b")
            if not s.recv(1):
                raise ConnectionResetError("closed")
    assert proxy.mode is Mode.PASS
    with _connect(proxy) as s2:
        assert _round_trip(s2, b"c") == b"c"


def test_a_dead_upstream_closes_the_client_connection(echo: int) -> None:
    with socket.socket() as tmp:
        tmp.bind(("127.0.0.1", 0))
        dead = tmp.getsockname()[1]  # nothing listens here once closed
    # Closed means an orderly EOF or a reset, and a reset may already come at connect or send when
    # the proxy gives up quickly; a connection left open times out on recv and fails the test.
    with (
        FaultProxy("127.0.0.1", dead) as p,
        contextlib.suppress(ConnectionResetError, BrokenPipeError),
        _connect(p) as s,
    ):
        s.sendall(b"x")
        assert s.recv(1) == b""


def test_stop_closes_the_listening_socket(echo: int) -> None:
    p = FaultProxy("127.0.0.1", echo).start()
    port = p.port
    p.stop()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    with pytest.raises(RuntimeError):
        p.set_pass()


def test_bytes_of_a_connection_its_client_gave_up_during_a_blackhole_never_arrive() -> None:
    """A real partition drops what its sender aborts; the proxy, which acknowledged the bytes on
    the server's behalf, must drop them too, or a fenced client's request would land late."""
    received: list[bytes] = []
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(5)

    def accept() -> None:
        try:
            while True:
                conn, _ = server.accept()
                conn.settimeout(2)
                with conn, contextlib.suppress(OSError):
                    while chunk := conn.recv(1024):
                        received.append(chunk)
        except OSError:
            return

    threading.Thread(target=accept, daemon=True).start()
    with FaultProxy("127.0.0.1", server.getsockname()[1]).start() as proxy:
        host, port = proxy.address.rsplit(":", 1)
        proxy.set_blackhole()
        late = socket.create_connection((host, int(port)))
        late.sendall(b"bind queued during the partition")
        late.close()  # the client's request timeout: it gives the connection up
        kept = socket.create_connection((host, int(port)))
        kept.sendall(b"still wanted")
        time.sleep(0.3)
        proxy.set_pass()
        deadline = time.monotonic() + 5
        while b"still wanted" not in b"".join(received) and time.monotonic() < deadline:
            time.sleep(0.05)
        kept.close()
    server.close()
    assert b"still wanted" in b"".join(received)
    assert b"queued during the partition" not in b"".join(received)
    assert proxy.stats.dropped >= 1
