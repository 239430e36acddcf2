"""A TLS-terminating HTTP/1.1 proxy in front of kube-apiserver that forges answers (issue 13).

A TCP proxy cannot forge a response inside TLS, so this one terminates TLS with its own CA (the
test kubeconfig trusts that CA; made with the testenv's openssl PKI), reads each request, and
either answers it itself or relays it to kube-apiserver over a fresh TLS connection:

* ``inject(status=503, rate=0.3, retry_after=1, methods={"POST"}, path=r"/binding$")``: that
  share of matching requests is answered with ``status`` and a ``Retry-After`` header and a
  Kubernetes ``Status`` body, without reaching the API server (seeded: runs are repeatable);
* ``freeze_watches()``: every watch stream open now stops delivering bytes while its
  connection stays open (a watch that goes silent without closing); watches opened later flow.
* ``inject(..., watches=True, message=...)``: only watch requests (``?watch=true``) get the forged
  answer, e.g. 410 Gone, or 504 with kube-apiserver's "Too large resource version" message;
* ``lose(methods, path, count)``: the next ``count`` matching requests reach the API server and
  are carried out, but their answer is dropped and the client's connection reset (a write whose
  outcome the client cannot know).

Bearer tokens pass through unchanged (client certificates cannot, which is why the suite gives
each replica a ServiceAccount token). Responses are relayed as they arrive, chunk by chunk, so
watches stream. The proxy runs its own asyncio loop in a daemon thread; methods are thread-safe.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import random
import re
import ssl
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from testenv.cluster import Pki

T = TypeVar("T")
HEAD_LIMIT = 1 << 20
REASONS = {
    410: "Gone",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


@dataclass(frozen=True)
class Injection:
    status: int = 503
    rate: float = 0.0
    retry_after: int = 1
    methods: frozenset[str] = frozenset({"POST", "PUT", "PATCH", "DELETE"})
    path: str = ""  # regex searched in the request path (query string excluded); "" matches all
    watches: bool | None = None  # True: only watch requests; False: none; None: either
    message: str = ""  # the Status message (default: "injected by the fault suite: <reason>")

    def matches(self, method: str, path: str, watch: bool = False) -> bool:
        return (
            method in self.methods
            and (not self.path or re.search(self.path, path) is not None)
            and (self.watches is None or self.watches == watch)
        )


def forged_response(status: int, retry_after: int, message: str = "") -> bytes:
    reason = REASONS.get(status, "Error")
    body = json.dumps(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message or f"injected by the fault suite: {reason}",
            "reason": "TooManyRequests" if status == 429 else "ServiceUnavailable",
            "details": {"retryAfterSeconds": retry_after},
            "code": status,
        }
    ).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
        f"Retry-After: {retry_after}\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


class _Sink:
    """A writer that drops what it is given (a lost answer)."""

    def write(self, data: bytes) -> None:
        return

    async def drain(self) -> None:
        return


@dataclass
class _Head:
    first: str
    headers: dict[str, str]
    raw: bytes

    @classmethod
    def parse(cls, raw: bytes) -> _Head:
        lines = raw.decode("latin-1").split("\r\n")
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if ":" in line:
                k, v = line.split(":", 1)
                headers[k.strip().lower()] = v.strip()
        return cls(lines[0], headers, raw)

    @property
    def chunked(self) -> bool:
        return "chunked" in self.headers.get("transfer-encoding", "").lower()

    @property
    def length(self) -> int | None:
        v = self.headers.get("content-length")
        return int(v) if v is not None else None

    @property
    def closes(self) -> bool:
        return self.headers.get("connection", "").lower() == "close"


@dataclass(eq=False)
class _Watch:
    path: str
    frozen: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass(eq=False)
class TlsProxy:
    upstream_host: str
    upstream_port: int
    upstream_ca: Path  # the cluster CA, to verify kube-apiserver
    workdir: Path  # the proxy's own CA and serving certificate go here
    seed: int = 13

    port: int = field(init=False, default=0)
    injected: Counter[tuple[int, str, str]] = field(init=False, default_factory=Counter)
    forwarded: int = field(init=False, default=0)
    _injection: Injection = field(init=False, default_factory=Injection)
    _rng: random.Random = field(init=False)
    _pki: Pki = field(init=False)
    _loop: asyncio.AbstractEventLoop | None = field(init=False, default=None)
    _thread: threading.Thread | None = field(init=False, default=None)
    _watches: set[_Watch] = field(init=False, default_factory=set)
    _writers: set[asyncio.StreamWriter] = field(init=False, default_factory=set)
    held: list[str] = field(init=False, default_factory=list)
    _hold: Injection | None = field(init=False, default=None)
    _lose: tuple[Injection, int] | None = field(init=False, default=None)
    lost: list[str] = field(init=False, default_factory=list)
    _release: asyncio.Event | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> TlsProxy:
        self._pki = Pki(self.workdir, leaves=False)  # its own CA + a 127.0.0.1 serving cert
        server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        server_ctx.load_cert_chain(self._pki.path("apiserver.crt"), self._pki.path("apiserver.key"))
        server_ctx.set_alpn_protocols(["http/1.1"])
        self._upstream_ctx = ssl.create_default_context(cafile=str(self.upstream_ca))
        self._upstream_ctx.set_alpn_protocols(["http/1.1"])
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            self._loop = loop
            try:
                server = loop.run_until_complete(
                    asyncio.start_server(self._handle, "127.0.0.1", 0, ssl=server_ctx, limit=HEAD_LIMIT)
                )
                self.port = server.sockets[0].getsockname()[1]
            except BaseException as exc:
                failure.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            server.close()
            for w in list(self._writers):
                w.transport.abort()
            tasks = asyncio.all_tasks(loop)
            for t in tasks:
                t.cancel()
            loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            loop.run_until_complete(asyncio.sleep(0.05))
            loop.close()

        self._thread = threading.Thread(target=run, name="tlsproxy", daemon=True)
        self._thread.start()
        if not ready.wait(10) or failure:
            raise RuntimeError("tlsproxy: could not start") from (failure[0] if failure else None)
        return self

    def stop(self) -> None:
        if self._loop is None or self._thread is None:
            return
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop = None

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def ca_data(self) -> str:
        return base64.b64encode(Path(self._pki.path("ca.crt")).read_bytes()).decode()

    # -- controls (caller's thread) -------------------------------------------------------

    def inject(
        self,
        status: int = 503,
        rate: float = 1.0,
        retry_after: int = 1,
        methods: frozenset[str] | set[str] = frozenset({"POST", "PUT", "PATCH", "DELETE"}),
        path: str = "",
        *,
        watches: bool | None = None,
        message: str = "",
    ) -> None:
        inj = Injection(status, rate, retry_after, frozenset(methods), path, watches, message)
        self._call(lambda: setattr(self, "_injection", inj))

    def lose(self, methods: frozenset[str] | set[str] = frozenset({"POST"}), path: str = "", count: int = 1) -> None:
        """Forward the next ``count`` matching requests, drop their answers, reset the client."""
        spec = Injection(rate=1.0, methods=frozenset(methods), path=path)
        self._call(lambda: setattr(self, "_lose", (spec, count)))

    def clear(self) -> None:
        self._call(lambda: setattr(self, "_injection", Injection()))

    def hold(self, methods: frozenset[str] | set[str] = frozenset({"POST"}), path: str = "") -> None:
        """Hold matching requests (not forwarded, no answer) until ``release()``; a held request
        whose client goes away is dropped, never forwarded."""
        spec = Injection(rate=1.0, methods=frozenset(methods), path=path)

        def apply() -> None:
            self._release = asyncio.Event()
            self._hold = spec

        self._call(apply)

    def release(self) -> None:
        def apply() -> None:
            self._hold = None
            if self._release is not None:
                self._release.set()

        self._call(apply)

    def held_count(self) -> int:
        return self._call(lambda: len(self.held))

    def freeze_watches(self, path: str = "") -> int:
        """Silence every open watch stream whose path matches; returns how many."""

        def freeze() -> int:
            hit = [w for w in self._watches if not path or re.search(path, w.path)]
            for w in hit:
                w.frozen.set()
            return len(hit)

        return self._call(freeze)

    def open_watches(self) -> list[str]:
        return self._call(lambda: sorted(w.path for w in self._watches if not w.frozen.is_set()))

    def injected_total(self) -> int:
        return self._call(lambda: sum(self.injected.values()))

    def _call(self, fn: Callable[[], T]) -> T:
        if self._loop is None:
            raise RuntimeError("tlsproxy: not running")

        async def wrapper() -> T:
            return fn()

        return asyncio.run_coroutine_threadsafe(wrapper(), self._loop).result(10)

    # -- the loop's side ------------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        up: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        try:
            while True:
                try:
                    raw = await reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError:
                    return
                req = _Head.parse(raw)
                body = await self._read_body(reader, req, writer=None)
                method, target = ([*req.first.split(" "), "", ""])[:2]
                path, _, query = target.partition("?")
                is_watch = re.search(r"(^|&)watch=(true|1)", query) is not None
                inj = self._injection
                if inj.rate > 0 and inj.matches(method, path, is_watch) and self._rng.random() < inj.rate:
                    self.injected[(inj.status, method, re.sub(r"/(namespaces|pods)/[^/]+(?=/)", r"/\1/*", path))] += 1
                    writer.write(forged_response(inj.status, inj.retry_after, inj.message))
                    await writer.drain()
                    continue
                if self._hold is not None and self._hold.matches(method, path):
                    self.held.append(f"{method} {path}")
                    if not await self._wait_release(reader):
                        return  # the client left while its request was held: it never lands
                if up is None or up[1].is_closing():
                    up = await asyncio.open_connection(
                        self.upstream_host,
                        self.upstream_port,
                        ssl=self._upstream_ctx,
                        server_hostname=self.upstream_host,
                        limit=HEAD_LIMIT,
                    )
                    self._writers.add(up[1])
                self.forwarded += 1
                up[1].write(raw + body)
                await up[1].drain()
                lose = self._lose
                if lose is not None and lose[1] > 0 and lose[0].matches(method, path):
                    self._lose = (lose[0], lose[1] - 1)
                    await self._relay_response(up[0], _Sink(), reader, method, None)  # type: ignore[arg-type]
                    self.lost.append(f"{method} {path}")
                    return  # the client's connection is reset (finally)
                keep = await self._relay_response(up[0], writer, reader, method, path if is_watch else None)
                if not keep or req.closes:
                    return
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ssl.SSLError, ValueError):
            return
        finally:
            for w in (writer, up[1] if up else None):
                if w is not None:
                    self._writers.discard(w)
                    w.transport.abort()

    async def _wait_release(self, reader: asyncio.StreamReader) -> bool:
        """True once released; False if the client closed its connection first."""
        assert self._release is not None
        released = asyncio.ensure_future(self._release.wait())
        gone = asyncio.ensure_future(reader.read(1))  # HTTP/1.1: nothing more comes before our answer
        done, _ = await asyncio.wait({released, gone}, return_when=asyncio.FIRST_COMPLETED)
        for f in (released, gone):
            f.cancel()
        return released in done and gone not in done

    async def _read_body(self, reader: asyncio.StreamReader, head: _Head, writer: asyncio.StreamWriter | None) -> bytes:
        """The message body after ``head``; with ``writer`` it is relayed piece by piece instead."""
        if head.chunked:
            out = bytearray()
            while True:
                line = await reader.readuntil(b"\r\n")
                size = int(line.split(b";")[0].strip(), 16)
                piece = line + (await reader.readexactly(size + 2) if size else b"")
                if size == 0:
                    while (trailer := await reader.readuntil(b"\r\n")) != b"\r\n":
                        piece += trailer
                    piece += b"\r\n"
                if writer is not None:
                    writer.write(piece)
                    await writer.drain()
                else:
                    out += piece
                if size == 0:
                    return bytes(out)
        n = head.length or 0
        data = await reader.readexactly(n) if n else b""
        if writer is not None and data:
            writer.write(data)
            await writer.drain()
        return data

    async def _relay_response(
        self,
        up: asyncio.StreamReader,
        client: asyncio.StreamWriter,
        client_reader: asyncio.StreamReader,
        method: str,
        watch_path: str | None,
    ) -> bool:
        """Relay one response; False when the connection must close afterwards."""
        head = _Head.parse(await up.readuntil(b"\r\n\r\n"))
        client.write(head.raw)
        await client.drain()
        status = int(head.first.split(" ")[1])
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            return not head.closes
        if watch_path is None:
            if head.chunked or head.length is not None:
                await self._read_body(up, head, writer=client)
                return not head.closes
            await self._copy_to_eof(up, client)
            return False
        watch = _Watch(watch_path)
        self._watches.add(watch)
        try:
            relay = asyncio.ensure_future(
                self._read_body(up, head, writer=client) if head.chunked else self._copy_to_eof(up, client)
            )
            frozen = asyncio.ensure_future(watch.frozen.wait())
            done, _ = await asyncio.wait({relay, frozen}, return_when=asyncio.FIRST_COMPLETED)
            if relay in done:
                frozen.cancel()
                relay.result()
                return head.chunked and not head.closes
            relay.cancel()  # silent from now on: hold the connection open until the client leaves
            with contextlib.suppress(asyncio.CancelledError):
                await relay
            await client_reader.read()  # returns at the client's FIN or RST
            return False
        finally:
            self._watches.discard(watch)

    @staticmethod
    async def _copy_to_eof(up: asyncio.StreamReader, client: asyncio.StreamWriter) -> bytes:
        while data := await up.read(65536):
            client.write(data)
            await client.drain()
        return b""
