"""Scenario j: a slow-loris on the health port (issue 31).

While pods are batched, 300 connections to placer's /healthz port send half a request and never
the rest (reconnecting when cut). The server once held a thread per connection for ever; now a
request must arrive within its deadline and at most a bounded number are served at once. The
harness's kubelet-like liveness probe (every 10 s, 3 failures kill) must keep passing, placer's
thread count must stay bounded, and every pod must be bound.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable

import faults_harness as fh
import pytest
from kubernetes import client

from testenv import cluster as testenv

pytestmark = pytest.mark.e2e

CONNECTIONS, FOR = 300, 35.0
MAX_EXTRA_THREADS = 24  # the server's bound (16) and some slack


def _loris(port: int, stop: threading.Event, counts: dict[str, int]) -> None:
    conns: list[socket.socket] = []
    while not stop.is_set():
        alive = []
        for s in conns:
            try:
                s.setblocking(False)
                cut = s.recv(1) == b""
            except BlockingIOError:
                cut = False
            except OSError:
                cut = True
            if cut:
                s.close()
                counts["cut"] += 1
            else:
                alive.append(s)
        conns = alive
        while len(conns) < CONNECTIONS and not stop.is_set():
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=2)
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: placer\r\n")
                conns.append(s)
                counts["opened"] += 1
            except OSError:
                counts["refused"] += 1
                break
        stop.wait(0.5)
    for s in conns:
        s.close()


def test_j_a_slow_loris_on_the_health_port_holds_no_threads_and_fails_no_probe(
    cluster: testenv.Cluster,
    replicas: Callable[..., fh.Replica],
    workload: fh.Workload,
    sampler: fh.Sampler,
    lease: str,
    api_client: client.ApiClient,
) -> None:
    r = replicas("placer-j", lease)
    fh.wait_lease_holder(client.CoordinationV1Api(api_client), lease)
    workload.add("warm", 4)
    assert workload.wait_all_bound(60) is not None, r.output()
    base = r.threads()
    stop, counts = threading.Event(), {"opened": 0, "cut": 0, "refused": 0}
    attack = threading.Thread(target=_loris, args=(r.health_port, stop, counts), daemon=True)
    attack.start()
    t0 = time.monotonic()
    peak = base
    workload.add("during", 12)
    while time.monotonic() - t0 < FOR:
        peak = max(peak, r.threads())
        time.sleep(0.5)
    stop.set()
    attack.join(10)
    figs = fh.closing_checks(
        "j-slow-loris",
        workload,
        sampler,
        cluster.audit_log,
        healed_at=t0,
        notes={"threads_before": base, "threads_peak": peak, **counts, **r.notes()},
    )
    problems = figs.failures()
    if peak - base > MAX_EXTRA_THREADS:
        problems.append(f"{peak - base} more threads under the slow-loris")
    if r.liveness_kills or r.restarts:
        problems.append(f"liveness kills {r.liveness_kills}, restarts {r.restarts}")
    assert not problems, (problems, figs, r.output())
