"""The health/metrics port cannot be held by its clients (issue 31): half-sent requests are cut
at a total deadline, at most a bounded number are served at once, a probe still gets its answer
while a crowd of slow clients is connected; the address it listens on is configurable; and the
shipped manifests admit only that port."""

from __future__ import annotations

import socket
import threading
import urllib.request
from pathlib import Path

import yaml

from placer.kube.serving import Metrics, serve

ROOT = Path(__file__).parent.parent


def _handlers() -> int:
    return sum(1 for t in threading.enumerate() if "process_request" in t.name)


def _loris(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # and never the blank line
    return s


def test_three_hundred_half_sent_requests_hold_a_bounded_number_of_threads_and_probes_answer() -> None:
    server = serve(0, Metrics(), lambda: (True, "ok"), lambda: (True, "ok"), address="127.0.0.1", limit=8)
    port = server.server_address[1]
    before = _handlers()
    held = [_loris(port) for _ in range(300)]
    try:
        for _ in range(3):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=20) as resp:
                assert resp.status == 200 and resp.read() == b"ok"
        assert _handlers() - before <= 8  # was one thread per connection: 300
    finally:
        for s in held:
            s.close()
        server.shutdown()


def test_a_request_that_trickles_in_is_cut_at_the_total_deadline() -> None:
    server = serve(0, Metrics(), lambda: (True, "ok"), lambda: (True, "ok"), address="127.0.0.1", read_deadline=0.3)
    port = server.server_address[1]
    s = _loris(port)
    s.settimeout(10)
    try:
        for _ in range(20):  # a byte at a time, each well within any per-read timeout
            try:
                s.sendall(b"X")
            except OSError:
                break
            threading.Event().wait(0.1)
        assert s.recv(1024) == b""  # the server closed it
    finally:
        s.close()
        server.shutdown()


def test_the_address_is_configurable() -> None:
    server = serve(0, Metrics(), lambda: (True, "ok"), lambda: (True, "ok"), address="127.0.0.1")
    try:
        assert server.server_address[0] == "127.0.0.1"
    finally:
        server.shutdown()


def test_the_manifests_ship_a_network_policy_admitting_only_the_probe_port() -> None:
    kustomization = yaml.safe_load((ROOT / "k8s" / "kustomization.yaml").read_text())
    assert "networkpolicy.yaml" in kustomization["resources"]
    policy = yaml.safe_load((ROOT / "k8s" / "networkpolicy.yaml").read_text())
    deployment = yaml.safe_load((ROOT / "k8s" / "deployment.yaml").read_text())
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    (port,) = container["ports"]
    assert policy["spec"]["podSelector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    assert [p["port"] for rule in policy["spec"]["ingress"] for p in rule["ports"]] == [port["containerPort"]]
