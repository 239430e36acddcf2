"""/healthz, /readyz and Prometheus /metrics on one port.

The port faces the network (kubelet probes, Prometheus scrapes), so a client cannot hold the
server: a request must arrive whole within ``READ_DEADLINE`` seconds (a total, not per read: a
client sending a byte every few seconds is cut too), at most ``MAX_CONNECTIONS`` are served at
once, and when all are taken the one that has been reading its request longest is cut to make
room (a probe is never turned away by a crowd of half-sent requests). HTTP/1.0: one request per
connection. ``k8s/networkpolicy.yaml`` admits only this port.
"""

from __future__ import annotations

import contextlib
import io
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

__all__ = ["MAX_CONNECTIONS", "READ_DEADLINE", "Metrics", "serve"]

READ_DEADLINE = 5.0  # seconds for a whole request to arrive
WRITE_TIMEOUT = 10.0  # seconds for each write of the answer
MAX_CONNECTIONS = 16  # served at once


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.solve_gap = Gauge(
            "placer_solve_gap",
            "Relative gap to the bound of the last decided batch's strategy level (1: unknown)",
            registry=r,
        )
        self.batch_size = Histogram(
            "placer_batch_size", "Pods per solved batch", registry=r, buckets=(1, 5, 10, 25, 50, 75, 99, 150, 250)
        )
        self.solve_seconds = Histogram(
            "placer_solve_seconds",
            "Seconds to decide a batch",
            registry=r,
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60),
        )
        self.solve_budget = Histogram(
            "placer_solve_budget_seconds",
            "Time limit of a batch's solve: the floor with a backlog, up to maxSolveSeconds when arrivals are slow",
            registry=r,
            buckets=(0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60),
        )
        self.binds = Counter("placer_binds_total", "Bind calls by result", ["result"], registry=r)
        self.events = Counter(
            "placer_events_total",
            "Events by what became of them: created, series (a repeat patched into its event), merged "
            "(a repeat folded into a queued one), dropped (queue full), or the failed call's status",
            ["result"],
            registry=r,
        )
        self.evictions = Counter(
            "placer_evictions_total", "Evictions by kind and result", ["kind", "result"], registry=r
        )
        self.plan_aborts = Counter("placer_plan_aborts_total", "Plan steps abandoned", registry=r)
        self.rebalances = Counter(
            "placer_rebalance_decisions_total",
            "Rebalancing decisions by outcome (planned, dry-run, none)",
            ["outcome"],
            registry=r,
        )
        self.rebalance_moves = Counter("placer_rebalance_moves_total", "Moves in started rebalancing plans", registry=r)
        self.pending = Gauge("placer_pending_pods", "Pending pods addressed to placer", registry=r)
        self.pending_by_reason = Gauge(
            "placer_pending_pods_by_reason",
            "Pending pods addressed to placer, by why the last solve left them pending (new: not solved yet)",
            ["reason"],
            registry=r,
        )
        self.leader = Gauge("placer_leader", "1 while this replica holds the lease", registry=r)
        self.unplaced = Counter("placer_unplaced_total", "Pods left unplaced by a batch", ["code"], registry=r)
        self.refused = Counter(
            "placer_validation_refusals_total",
            "Batch answers the independent validator rejected before any write (nothing was written)",
            ["kind"],
            registry=r,
        )
        self.cycle_errors = Counter(
            "placer_cycle_errors_total",
            "Scheduling cycles (ticks) whose stage failed; the next cycle runs",
            ["stage"],
            registry=r,
        )
        self.reports = Counter(
            "placer_reports_total",
            "Unschedulable reports by what became of them: patched, unchanged (the pod already says so), "
            "coalesced (a newer one replaced it in the queue), dropped (queue full), failed",
            ["result"],
            registry=r,
        )
        self.group_conditions = Counter(
            "placer_group_conditions_total",
            "PodGroup status conditions by what became of them: patched, unchanged (already so), coalesced, "
            "dropped (queue full), gone (no such group), failed",
            ["result"],
            registry=r,
        )
        self.api_retries = Counter(
            "placer_api_retries_total", "API calls retried, by cause (connection or HTTP status)", ["cause"], registry=r
        )
        self.plan_in_progress = Gauge("placer_plan_in_progress", "1 while a global plan runs", registry=r)
        self.plan_age = Gauge("placer_plan_age_seconds", "Seconds since the running global plan started", registry=r)
        self.watch_event_age = Gauge(
            "placer_watch_event_age_seconds",
            "Seconds since the last list or watch event (bookmarks included), per kind",
            ["kind"],
            registry=r,
        )
        self.refresh: Callable[[], None] = lambda: None  # sets the ageing gauges before a scrape


Verdict = Callable[[], tuple[bool, str]]


class _Deadline(io.RawIOBase):
    """A socket's reads, all of them within one deadline."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self._sock, self._deadline = sock, deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("request not received in time")
        self._sock.settimeout(left)
        return self._sock.recv_into(buffer)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], limit: int) -> None:
        self._slots = threading.BoundedSemaphore(limit)
        self._lock = threading.Lock()
        self.reading: dict[socket.socket, float] = {}  # connections still receiving their request
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            with self._lock:
                oldest = min(self.reading, key=self.reading.__getitem__, default=None)
            if oldest is not None:
                with contextlib.suppress(OSError):  # already closed
                    oldest.shutdown(socket.SHUT_RDWR)  # its thread ends and frees a slot
            if not self._slots.acquire(timeout=1.0):
                self.shutdown_request(request)
                return
        with self._lock:
            self.reading[request] = time.monotonic()
        try:
            super().process_request(request, client_address)
        except Exception:
            self._done(request)
            raise

    def received(self, request: Any) -> None:
        with self._lock:
            self.reading.pop(request, None)

    def _done(self, request: Any) -> None:
        self.received(request)
        self._slots.release()

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._done(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        return  # a client cut or too slow: nothing to log per connection


def serve(
    port: int,
    metrics: Metrics,
    health: Verdict,
    readiness: Verdict,
    *,
    address: str = "0.0.0.0",
    limit: int = MAX_CONNECTIONS,
    read_deadline: float = READ_DEADLINE,
) -> ThreadingHTTPServer:
    """/healthz and /readyz answer 200 or 503 with the reason in the body."""

    class Handler(BaseHTTPRequestHandler):
        def setup(self) -> None:
            super().setup()
            self.rfile = io.BufferedReader(_Deadline(self.connection, time.monotonic() + read_deadline))

        def do_GET(self) -> None:
            server.received(self.connection)
            self.connection.settimeout(WRITE_TIMEOUT)
            if self.path == "/metrics":
                metrics.refresh()
                body, code, ctype = generate_latest(metrics.registry), 200, CONTENT_TYPE_LATEST
            elif self.path in ("/healthz", "/readyz"):
                ok, why = (health if self.path == "/healthz" else readiness)()
                body, code, ctype = why.encode(), (200 if ok else 503), "text/plain; charset=utf-8"
            else:
                body, code, ctype = b"not found", 404, "text/plain"
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    server = _Server((address, port), Handler, limit)
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    return server
