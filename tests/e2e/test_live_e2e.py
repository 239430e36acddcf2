"""``placer solve`` reading the live cluster (issue 16 item 5): read-only, and as a kubectl plugin."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import kube_helpers as kh
import pytest
from kubernetes import client
from test_controller_e2e import NodeFactory, _group

from testenv import cluster as testenv

pytestmark = pytest.mark.e2e

BIN = Path(sys.executable).parent


def _versions(core: client.CoreV1Api, ns: str) -> dict[str, str]:
    return {p.metadata.name: p.metadata.resource_version for p in core.list_namespaced_pod(ns).items}


def test_solve_reads_the_live_cluster_read_only_also_as_a_kubectl_plugin(
    cluster: testenv.Cluster, core: client.CoreV1Api, namespace: str, make_nodes: NodeFactory
) -> None:
    nodes = make_nodes(2, cpu="4")
    group = _group(core, nodes[0])
    for i in range(3):
        kh.create_pod(core, namespace, f"web-{i}", cpu="2", scheduler_name="placer", node_selector=group)
    before = _versions(core, namespace)
    cmd = [str(BIN / "placer"), "solve", "--kubeconfig", str(cluster.kubeconfig), "-o", "json"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout)
    ours = {p["pod"]: p["node"] for p in answer["placements"] if p["pod"].startswith(f"{namespace}/")}
    assert len(ours) == 3 and set(ours.values()) == set(nodes)
    assert _versions(core, namespace) == before, "solve wrote to the cluster"
    # kubectl finds `kubectl-placer` on PATH; KUBECONFIG selects the cluster, as for any plugin.
    kubectl = testenv.find_kubectl() or "kubectl"
    env = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "KUBECONFIG": str(cluster.kubeconfig),
    }
    plugin = subprocess.run(
        [kubectl, "placer", "solve", "-o", "json"], capture_output=True, text=True, timeout=120, env=env, check=False
    )
    assert plugin.returncode == 0, plugin.stderr
    again = json.loads(plugin.stdout)
    assert {p["pod"] for p in again["placements"]} >= set(ours)
    # An unreachable cluster is one line, exit 2.
    bad = subprocess.run(
        [str(BIN / "placer"), "solve", "--kubeconfig", str(cluster.kubeconfig), "--context", "nope"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
