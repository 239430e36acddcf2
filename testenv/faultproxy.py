"""A TCP fault proxy for the fault-injection suite (issue 13): placer -> proxy -> kube-apiserver.

One proxy per placer replica, listening on 127.0.0.1 only, forwarding bytes unchanged (TLS passes
through end to end). The test switches its mode at run time:

* ``pass``       forward everything;
* ``reset``      forward, and every ``every`` seconds abort every open connection with a TCP RST
                 (both sides), as a flaky load balancer or a NAT table flush would;
* ``blackhole``  accept connections but forward nothing in either direction: bytes already sent
                 stay in the kernel buffers (like packets a partition holds back and TCP
                 retransmits), new connections are accepted and never reach the API server. On
                 heal (any other mode) held bytes are delivered: a request a client queued
                 during the partition still lands afterwards, which is what fencing must prevent.
                 Unless the client gave the connection up meanwhile (it closed it, e.g. on its
                 request timeout): then the held bytes die with it, as unacknowledged data dies
                 with a connection in a real partition (the proxy acknowledged it on the server's
                 behalf, which a partition would not have);
* ``latency``    forward every chunk after ``seconds`` of delay.

The proxy runs its own asyncio loop in a daemon thread; every public method is thread-safe and
returns once the new mode is in force. Standard library only.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TypeVar

CHUNK = 65536
T = TypeVar("T")


class Mode(StrEnum):
    PASS = "pass"
    RESET = "reset"
    BLACKHOLE = "blackhole"
    LATENCY = "latency"


@dataclass
class Stats:
    accepted: int = 0
    resets: int = 0  # connections aborted with an RST by the proxy
    bytes_up: int = 0  # client -> upstream
    bytes_down: int = 0  # upstream -> client
    dropped: int = 0  # connections their client closed while the proxy held their bytes


@dataclass(eq=False)
class _Conn:
    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter | None = None


def _given_up(reader: asyncio.StreamReader) -> bool:
    """The client closed its side (its FIN is queued behind whatever it sent)."""
    return bool(getattr(reader, "_eof", False))


def _abort(writer: asyncio.StreamWriter | None) -> None:
    """Close with an RST (SO_LINGER 0), not a FIN."""
    if writer is None:
        return
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


@dataclass(eq=False)
class FaultProxy:
    upstream_host: str
    upstream_port: int
    listen_port: int = 0  # 0: any free port (see .port once started)
    name: str = "faultproxy"

    stats: Stats = field(init=False, default_factory=Stats)
    mode: Mode = field(init=False, default=Mode.PASS)
    port: int = field(init=False, default=0)
    _loop: asyncio.AbstractEventLoop | None = field(init=False, default=None)
    _thread: threading.Thread | None = field(init=False, default=None)
    _server: asyncio.Server | None = field(init=False, default=None)
    _flowing: asyncio.Event | None = field(init=False, default=None)
    _conns: set[_Conn] = field(init=False, default_factory=set)
    _latency: float = field(init=False, default=0.0)
    _reset_task: asyncio.Task[None] | None = field(init=False, default=None)

    # -- lifecycle (caller's thread) ------------------------------------------------------

    def start(self) -> FaultProxy:
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self._serve())
            except BaseException as exc:  # reported to start()
                failure.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._shutdown())
            loop.close()

        self._thread = threading.Thread(target=run, name=self.name, daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError(f"{self.name}: did not start")
        if failure:
            raise RuntimeError(f"{self.name}: could not listen") from failure[0]
        return self

    def stop(self) -> None:
        if self._loop is None or self._thread is None:
            return
        with contextlib.suppress(RuntimeError):  # loop already closed
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop = None

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    # -- mode switches (caller's thread) --------------------------------------------------

    def set_pass(self) -> None:
        self._switch(Mode.PASS)

    def set_reset(self, every: float) -> None:
        """Abort every open connection now and then every ``every`` seconds."""
        self._switch(Mode.RESET, every=every)

    def set_blackhole(self) -> None:
        self._switch(Mode.BLACKHOLE)

    def set_latency(self, seconds: float) -> None:
        self._switch(Mode.LATENCY, latency=seconds)

    def reset_all(self) -> int:
        """Abort every open connection once (mode unchanged); returns how many."""
        return self._call(self._reset_all)

    def open_connections(self) -> int:
        return self._call(lambda: len(self._conns))

    def _switch(self, mode: Mode, every: float = 0.0, latency: float = 0.0) -> None:
        def apply() -> None:
            assert self._flowing is not None
            if self._reset_task is not None:
                self._reset_task.cancel()
                self._reset_task = None
            self.mode = mode
            self._latency = latency if mode is Mode.LATENCY else 0.0
            if mode is Mode.BLACKHOLE:
                self._flowing.clear()
            else:
                self._flowing.set()
            if mode is Mode.RESET:
                if every <= 0:
                    raise ValueError("reset needs a period > 0")
                self._reset_task = asyncio.get_running_loop().create_task(self._reset_every(every))

        self._call(apply)

    def _call(self, fn: Callable[[], T]) -> T:
        if self._loop is None:
            raise RuntimeError(f"{self.name}: not running")

        async def wrapper() -> T:
            return fn()

        return asyncio.run_coroutine_threadsafe(wrapper(), self._loop).result(10)

    # -- the loop's side ------------------------------------------------------------------

    async def _serve(self) -> None:
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.listen_port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        self._reset_all(count=False)
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.sleep(0.05)  # let aborted transports run their connection_lost callbacks

    def _reset_all(self, count: bool = True) -> int:
        conns = list(self._conns)
        for c in conns:
            _abort(c.client)
            _abort(c.upstream)
        self._conns.clear()
        if count:
            self.stats.resets += len(conns)
        return len(conns)

    async def _reset_every(self, every: float) -> None:
        while True:
            self._reset_all()
            await asyncio.sleep(every)

    async def _handle(self, c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter) -> None:
        self.stats.accepted += 1
        conn = _Conn(c_writer)
        self._conns.add(conn)
        assert self._flowing is not None
        try:
            held = not self._flowing.is_set()
            await self._flowing.wait()  # a blackholed proxy accepts and never connects upstream
            if conn not in self._conns:  # reset while waiting
                return
            if held and _given_up(c_reader):  # the client closed it during the partition: nothing arrives
                self.stats.dropped += 1
                _abort(c_writer)
                return
            u_reader, u_writer = await asyncio.open_connection(self.upstream_host, self.upstream_port)
            conn.upstream = u_writer
            if conn not in self._conns:
                _abort(u_writer)
                return
            await asyncio.gather(
                self._pump(c_reader, u_writer, conn, up=True),
                self._pump(u_reader, c_writer, conn, up=False),
            )
        except (OSError, asyncio.IncompleteReadError):
            _abort(conn.upstream)
            _abort(c_writer)
        finally:
            self._conns.discard(conn)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, conn: _Conn, up: bool) -> None:
        assert self._flowing is not None
        try:
            while True:
                held = not self._flowing.is_set()
                await self._flowing.wait()
                data = await reader.read(CHUNK)
                if not data:
                    break
                if self._latency > 0:
                    await asyncio.sleep(self._latency)
                held = held or not self._flowing.is_set()
                await self._flowing.wait()  # a chunk read just before a blackhole is held, too
                if conn not in self._conns:
                    return
                if up and held and _given_up(reader):  # closed by the client during the partition: dropped
                    self.stats.dropped += 1
                    _abort(conn.client)
                    _abort(conn.upstream)
                    self._conns.discard(conn)
                    return
                writer.write(data)
                await writer.drain()
                if up:
                    self.stats.bytes_up += len(data)
                else:
                    self.stats.bytes_down += len(data)
            with contextlib.suppress(OSError):  # half-close: pass the FIN on
                if writer.can_write_eof():
                    writer.write_eof()
        except OSError:
            _abort(conn.client)
            _abort(conn.upstream)
            self._conns.discard(conn)
