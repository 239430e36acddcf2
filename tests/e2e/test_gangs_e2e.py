"""Gangs declared by the Workload API on a real control plane with its feature gate on.

Aspects: a PodGroup of ``scheduling.k8s.io/v1alpha2`` (``schedulingPolicy.gang.minCount``) and pods
naming it in ``spec.schedulingGroup.podGroupName``, scheduled by ``placer run`` under the RBAC of
k8s/: the gang is bound whole or not at all; pods whose PodGroup does not exist yet wait for it;
``placer solve --kubeconfig`` reads the PodGroups of the live cluster.

This module starts its own small control plane (the session's runs without feature gates): the
API server with ``GenericWorkload`` and ``scheduling.k8s.io/v1alpha2`` served, no kube-scheduler
(every pod here is placer's).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kube_helpers as kh
import pytest
from controller_support import service_account_kubeconfig
from kubernetes import client
from typer.testing import CliRunner

from placer.cli.app import app
from testenv import cluster as testenv

GROUP, VERSION = "scheduling.k8s.io", "v1alpha2"

# The testenv runs Kubernetes 1.37.2, which no longer serves scheduling.k8s.io/v1alpha2 (k8s.io/api
# v0.37.2 has scheduling v1, v1beta1 and v1alpha3 only). placer reads v1alpha2 PodGroups until
# issue 30 item 1 teaches it v1beta1; that change moves this module to v1beta1 (the session
# cluster serves it: Cluster(workloads=True)) and drops the skip.
pytestmark = pytest.mark.skip(
    reason="scheduling.k8s.io/v1alpha2 is not served by Kubernetes 1.37; placer's v1beta1 reader: issue 30 item 1"
)


@pytest.fixture(scope="module")
def cluster() -> Iterator[testenv.Cluster]:
    c = testenv.Cluster(
        with_scheduler=False,
        feature_gates="GenericWorkload=true",
        runtime_config=f"{GROUP}/{VERSION}=true",
    )
    c.start()
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def api_client(cluster: testenv.Cluster) -> Iterator[client.ApiClient]:
    with kh.admin_api(cluster.kubeconfig) as api:
        yield api


@pytest.fixture(scope="module")
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


@pytest.fixture(scope="module")
def placer_kubeconfig(cluster: testenv.Cluster, core: client.CoreV1Api, tmp_path_factory: Any) -> Path:
    return service_account_kubeconfig(cluster, core, tmp_path_factory.mktemp("placer-gated"))


def _pod_group(api: client.ApiClient, namespace: str, name: str, min_count: int) -> None:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
    }
    client.CustomObjectsApi(api).create_namespaced_custom_object(GROUP, VERSION, namespace, "podgroups", body)


def _member(core: client.CoreV1Api, namespace: str, name: str, group: str, mark: dict[str, str]) -> None:
    """A pod naming ``group`` (a dict body: the Python client's models predate schedulingGroup)."""
    spec = client.ApiClient().sanitize_for_serialization(
        kh.pod_spec(cpu="2", scheduler_name="placer", node_selector=mark)
    )
    spec["schedulingGroup"] = {"podGroupName": group}
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": group}}, "spec": spec}
    core.create_namespaced_pod(namespace, body)
    raw = json.loads(core.read_namespaced_pod(name, namespace, _preload_content=False).data)
    assert raw["spec"].get("schedulingGroup") == {"podGroupName": group}, "the API server dropped the field"


def _bound(core: client.CoreV1Api, namespace: str, app: str) -> list[str]:
    return [p.metadata.name for p in kh.list_pods(core, namespace, {"app": app}) if p.spec.node_name]


def test_a_workload_gang_is_bound_whole_or_not_at_all(
    api_client: client.ApiClient, core: client.CoreV1Api, namespace: str, make_nodes: Any, controllers: Any
) -> None:
    mark = {"gang-test": kh.unique("w")}
    make_nodes(2, cpu="3", labels=mark)  # room for two members of 2 cpu, not four
    _pod_group(api_client, namespace, "train", 4)
    for i in range(4):
        _member(core, namespace, f"train-{i}", "train", mark)
    controllers()

    def explained() -> bool:
        conds = [
            c
            for p in kh.list_pods(core, namespace, {"app": "train"})
            for c in (p.status.conditions or [])
            if c.type == "PodScheduled"
        ]
        return len(conds) == 4 and all("cannot be placed whole" in (c.message or "") for c in conds)

    kh.wait_for("all four members reported unschedulable as a gang of 4", explained, 60)
    assert _bound(core, namespace, "train") == [], "no member may run alone"
    make_nodes(2, cpu="4", labels=mark)  # room for the whole gang
    kh.wait_running(core, namespace, {"app": "train"}, 4, timeout=90)


def test_pods_wait_for_their_pod_group_then_run_as_a_gang(
    api_client: client.ApiClient, core: client.CoreV1Api, namespace: str, make_nodes: Any, controllers: Any
) -> None:
    mark = {"gang-test": kh.unique("w")}
    make_nodes(2, cpu="4", labels=mark)
    for i in range(2):
        _member(core, namespace, f"late-{i}", "late", mark)
    controllers()
    time.sleep(6)  # several batch windows: nothing binds a pod whose PodGroup does not exist
    assert _bound(core, namespace, "late") == []
    _pod_group(api_client, namespace, "late", 2)
    kh.wait_running(core, namespace, {"app": "late"}, 2, timeout=90)


def test_placer_solve_on_the_live_cluster_reads_the_pod_groups(
    cluster: testenv.Cluster, api_client: client.ApiClient, core: client.CoreV1Api, namespace: str, make_nodes: Any
) -> None:
    """``placer solve --kubeconfig``: the PodGroup's minCount sizes the gang (read-only, no controller)."""
    mark = {"gang-test": kh.unique("w")}
    make_nodes(1, cpu="8", labels=mark)
    _pod_group(api_client, namespace, "three", 3)
    for i in range(2):
        _member(core, namespace, f"three-{i}", "three", mark)
    out = CliRunner().invoke(app, ["solve", "--kubeconfig", str(cluster.kubeconfig), "-o", "json"])
    assert out.exit_code == 0, out.output
    mine = [u for u in json.loads(out.stdout)["unplaced"] if u["pod"].startswith(f"{namespace}/")]
    assert len(mine) == 2 and all(
        u["detail"]["gang"] == {"gang": f"{namespace}/three", "size": 3, "pending": 2} for u in mine
    ), mine
