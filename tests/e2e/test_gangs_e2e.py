"""Gangs declared by the Workload API (Kubernetes 1.37) on the session's control plane.

Aspects: a PodGroup of ``scheduling.k8s.io/v1beta1`` (``schedulingPolicy.gang.minCount``) and pods
naming it in ``spec.schedulingGroup.podGroupName``, scheduled by ``placer run`` under the RBAC of
k8s/: the gang is bound whole or not at all; pods whose PodGroup does not exist yet wait for it;
``placer solve --kubeconfig`` reads the PodGroups of the live cluster.

The session cluster serves the workload APIs with their gates (``Cluster(workloads=True)``); every
pod here names scheduler ``placer``, so kube-scheduler leaves them alone.
"""

from __future__ import annotations

import json
import time
from typing import Any

import kube_helpers as kh
import pytest
import workload_support as ws
from kubernetes import client
from typer.testing import CliRunner

from placer.cli.app import app
from testenv import cluster as testenv

pytestmark = pytest.mark.e2e


def test_a_workload_gang_is_bound_whole_or_not_at_all(
    api_client: client.ApiClient, core: client.CoreV1Api, namespace: str, make_nodes: Any, controllers: Any
) -> None:
    mark = {"gang-test": kh.unique("w")}
    make_nodes(2, cpu="3", labels=mark)  # room for two members of 2 cpu, not four
    ws.pod_group(api_client, namespace, "train", 4)
    for i in range(4):
        ws.member(core, namespace, f"train-{i}", "train", mark, cpu="2")
    controllers()
    kh.wait_for("all four members reported unschedulable as a gang of 4",
                lambda: ws.unschedulable_as_gang(core, namespace, "train", 4), 90)  # fmt: skip
    assert ws.bound(core, namespace, "train") == {}, "no member may run alone"
    make_nodes(2, cpu="4", labels=mark)  # room for the whole gang
    kh.wait_running(core, namespace, {"gang": "train"}, 4, timeout=120)


def test_pods_wait_for_their_pod_group_then_run_as_a_gang(
    api_client: client.ApiClient, core: client.CoreV1Api, namespace: str, make_nodes: Any, controllers: Any
) -> None:
    mark = {"gang-test": kh.unique("w")}
    make_nodes(2, cpu="4", labels=mark)
    for i in range(2):
        ws.member(core, namespace, f"late-{i}", "late", mark, cpu="2")
    controllers()
    time.sleep(6)  # several batch windows: nothing binds a pod whose PodGroup does not exist
    assert ws.bound(core, namespace, "late") == {}
    ws.pod_group(api_client, namespace, "late", 2)
    kh.wait_running(core, namespace, {"gang": "late"}, 2, timeout=120)


def test_placer_solve_on_the_live_cluster_reads_the_pod_groups(
    cluster: testenv.Cluster, api_client: client.ApiClient, core: client.CoreV1Api, namespace: str, make_nodes: Any
) -> None:
    """``placer solve --kubeconfig``: the PodGroup's minCount sizes the gang (read-only, no controller)."""
    mark = {"gang-test": kh.unique("w")}
    make_nodes(1, cpu="8", labels=mark)
    ws.pod_group(api_client, namespace, "three", 3)
    for i in range(2):
        ws.member(core, namespace, f"three-{i}", "three", mark, cpu="2")
    out = CliRunner().invoke(app, ["solve", "--kubeconfig", str(cluster.kubeconfig), "-o", "json"])
    assert out.exit_code == 0, out.output
    mine = [u for u in json.loads(out.stdout)["unplaced"] if u["pod"].startswith(f"{namespace}/")]
    assert len(mine) == 2 and all(
        u["detail"]["gang"] == {"gang": f"{namespace}/three", "size": 3, "pending": 2, "domain": None} for u in mine
    ), mine
