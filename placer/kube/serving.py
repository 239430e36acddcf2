"""/healthz, /readyz and Prometheus /metrics on one port."""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

__all__ = ["Metrics", "serve"]


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.batch_size = Histogram(
            "placer_batch_size", "Pods per solved batch", registry=r, buckets=(1, 5, 10, 25, 50, 75, 99, 150, 250)
        )
        self.solve_seconds = Histogram(
            "placer_solve_seconds",
            "Seconds to decide a batch",
            registry=r,
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60),
        )
        self.binds = Counter("placer_binds_total", "Bind calls by result", ["result"], registry=r)
        self.evictions = Counter(
            "placer_evictions_total", "Evictions by kind and result", ["kind", "result"], registry=r
        )
        self.plan_aborts = Counter("placer_plan_aborts_total", "Plan steps abandoned", registry=r)
        self.pending = Gauge("placer_pending_pods", "Pending pods addressed to placer", registry=r)
        self.leader = Gauge("placer_leader", "1 while this replica holds the lease", registry=r)
        self.unplaced = Counter("placer_unplaced_total", "Pods left unplaced by a batch", ["code"], registry=r)
        self.refused = Counter(
            "placer_validation_refusals_total",
            "Batch answers the independent validator rejected before any write (nothing was written)",
            ["kind"],
            registry=r,
        )


def serve(port: int, metrics: Metrics, healthy: Callable[[], bool], ready: Callable[[], bool]) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/metrics":
                body, code, ctype = generate_latest(metrics.registry), 200, CONTENT_TYPE_LATEST
            elif self.path == "/healthz":
                ok = healthy()
                body, code, ctype = (b"ok" if ok else b"stalled"), (200 if ok else 503), "text/plain"
            elif self.path == "/readyz":
                ok = ready()
                body, code, ctype = (b"ok" if ok else b"not ready"), (200 if ok else 503), "text/plain"
            else:
                body, code, ctype = b"not found", 404, "text/plain"
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("0.0.0.0", port), Handler)
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    return server
