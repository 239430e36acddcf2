"""Kubernetes 1.37 workload objects for the e2e tests of placer's controller: v1beta1 PodGroups,
v1alpha3 CompositePodGroups, and member pods naming their group in ``spec.schedulingGroup``
(dict bodies: the Python client's models predate the field), and the ``priority_class`` fixture."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import kube_helpers as kh
import pytest
from kubernetes import client

GROUP = "scheduling.k8s.io"
RACK = "e2e.placer.io/rack"
ZONE = "e2e.placer.io/zone"


def create(api: client.ApiClient, version: str, namespace: str, plural: str, body: dict[str, Any]) -> None:
    body = {"apiVersion": f"{GROUP}/{version}", **body}
    client.CustomObjectsApi(api).create_namespaced_custom_object(GROUP, version, namespace, plural, body)


def pod_group(
    api: client.ApiClient,
    namespace: str,
    name: str,
    min_count: int,
    *,
    key: str | None = None,
    parent: str | None = None,
    disruption_all: bool = False,
    priority_class: str | None = None,
) -> None:
    """A v1beta1 PodGroup: a gang of ``min_count``, optionally in one domain of node label ``key``,
    below CompositePodGroup ``parent`` (of Workload ``parent``), disrupted only whole, of a
    PriorityClass (without one, admission sets the group's priority to 0, which its pods take)."""
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": min_count}}}
    if key is not None:
        spec["schedulingConstraints"] = {"topology": [{"key": key}]}
    if parent is not None:
        spec["parentCompositePodGroupName"] = parent
        spec["workloadRef"] = {"workloadName": parent, "templateName": name}
    if disruption_all:
        spec["disruptionMode"] = {"all": {}}
    if priority_class is not None:
        spec["priorityClassName"] = priority_class
    create(api, "v1beta1", namespace, "podgroups", {"kind": "PodGroup", "metadata": {"name": name}, "spec": spec})


def composite_pod_group(
    api: client.ApiClient, namespace: str, name: str, children: dict[str, tuple[int, str]], key: str
) -> None:
    """A v1alpha3 Workload ``name`` and its CompositePodGroup ``name``: all of its child groups
    (``children``: template name -> (gang size, topology key)) in one domain of ``key``."""
    policy = {"gang": {"minGroupCount": len(children)}}
    constraints = {"schedulingConstraints": {"topology": [{"key": key}]}}
    templates = [
        {"name": child, "schedulingPolicy": {"gang": {"minCount": size}},
         "schedulingConstraints": {"topology": [{"key": child_key}]}}
        for child, (size, child_key) in children.items()
    ]  # fmt: skip
    workload = {"podGroupTemplates": [],
                "compositePodGroupTemplates": [{"name": name, "schedulingPolicy": policy, **constraints,
                                                "podGroupTemplates": templates}]}  # fmt: skip
    create(api, "v1alpha3", namespace, "workloads", {"kind": "Workload", "metadata": {"name": name}, "spec": workload})
    spec = {"workloadRef": {"workloadName": name, "templateName": name}, "schedulingPolicy": policy, **constraints}
    create(api, "v1alpha3", namespace, "compositepodgroups",
           {"kind": "CompositePodGroup", "metadata": {"name": name}, "spec": spec})  # fmt: skip


def member(
    core: client.CoreV1Api,
    namespace: str,
    name: str,
    group: str,
    mark: dict[str, str],
    *,
    cpu: str = "1",
    priority_class: str | None = None,
    host_port: int | None = None,
) -> None:
    """A placer pod labelled ``gang=<group>`` naming PodGroup ``group``, kept on nodes ``mark``."""
    spec = client.ApiClient().sanitize_for_serialization(
        kh.pod_spec(cpu=cpu, scheduler_name="placer", node_selector=mark)
    )
    spec["schedulingGroup"] = {"podGroupName": group}
    if priority_class is not None:
        spec["priorityClassName"] = priority_class
    if host_port is not None:
        spec["containers"][0]["ports"] = [{"containerPort": host_port, "hostPort": host_port}]
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"gang": group}}, "spec": spec}
    core.create_namespaced_pod(namespace, body)
    raw = json.loads(core.read_namespaced_pod(name, namespace, _preload_content=False).data)
    assert raw["spec"].get("schedulingGroup") == {"podGroupName": group}, "the API server dropped the field"


def live(core: client.CoreV1Api, namespace: str, group: str) -> list[client.V1Pod]:
    return [p for p in kh.list_pods(core, namespace, {"gang": group}) if p.metadata.deletion_timestamp is None]


def bound(core: client.CoreV1Api, namespace: str, group: str) -> dict[str, str]:
    """Live members of ``group`` bound to a node: pod name -> node name."""
    return {p.metadata.name: p.spec.node_name for p in live(core, namespace, group) if p.spec.node_name}


def unschedulable_as_gang(core: client.CoreV1Api, namespace: str, group: str, size: int) -> bool:
    """Every one of ``size`` live members carries placer's PodScheduled=False saying the gang
    cannot be placed whole."""
    conds = [
        c
        for p in live(core, namespace, group)
        for c in (p.status.conditions or [])
        if c.type == "PodScheduled" and c.status == "False"
    ]
    return len(conds) == size and all("cannot be placed whole" in (c.message or "") for c in conds)


@pytest.fixture
def priority_class(api_client: client.ApiClient) -> Iterator[Callable[[int], str]]:
    """Factory: a PriorityClass of the given value (cluster-wide, deleted after the test)."""
    api = client.SchedulingV1Api(api_client)
    made: list[str] = []

    def make(value: int) -> str:
        name = kh.unique(f"prio-{value}")
        api.create_priority_class(client.V1PriorityClass(metadata=client.V1ObjectMeta(name=name), value=value))
        made.append(name)
        return name

    yield make
    for name in made:
        kh.delete_if_present(api.delete_priority_class, name)
