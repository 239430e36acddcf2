"""Builders for Kubernetes 1.37 workload dumps (``kubectl get ... -o json`` Lists): racks of nodes,
pods naming a PodGroup, v1beta1 PodGroups and v1alpha3 CompositePodGroups."""

from __future__ import annotations

import json
from typing import Any

from placer.inputs import parse_cluster
from placer.models import Cluster

Json = dict[str, Any]
RACK = "topology.kubernetes.io/rack"
ZONE = "topology.kubernetes.io/zone"
BETA = "scheduling.k8s.io/v1beta1"
ALPHA3 = "scheduling.k8s.io/v1alpha3"


def node(name: str, cpu: int, **labels: str) -> Json:
    keys = {"rack": RACK, "zone": ZONE}
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": {keys.get(k, k): v for k, v in labels.items()}},
        "status": {"allocatable": {"cpu": str(cpu), "memory": "64Gi", "pods": "110"}},
    }


def pod(
    name: str, group: str | None = None, *, node: str | None = None, cpu: str = "1", priority: int = 0, **meta: Any
) -> Json:
    spec: Json = {
        "schedulerName": "placer",
        "priority": priority,
        "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
    }
    if group is not None:
        spec["schedulingGroup"] = {"podGroupName": group}
    if node is not None:
        spec["nodeName"] = node
    created = meta.pop("created", "2026-01-01T00:00:00Z")
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml", "creationTimestamp": created, **meta},
        "spec": spec,
        "status": {"phase": "Running" if node else "Pending"},
    }


def _rules(key: str | None, parent: str | None, disruption: str | None) -> Json:
    """The spec fields a PodGroup and a CompositePodGroup share."""
    spec: Json = {}
    if key is not None:
        spec["schedulingConstraints"] = {"topology": [{"key": key}]}
    if parent is not None:
        spec["parentCompositePodGroupName"] = parent
    if disruption is not None:
        spec["disruptionMode"] = {disruption: {}}
    return spec


def pod_group(
    name: str,
    min_count: int | None,
    *,
    key: str | None = RACK,
    parent: str | None = None,
    disruption: str | None = None,
    priority: int | None = None,
    api: str = BETA,
) -> Json:
    spec = _rules(key, parent, disruption)
    spec["schedulingPolicy"] = {"gang": {"minCount": min_count}} if min_count else {"basic": {}}
    if priority is not None:
        spec["priority"] = priority
    return {"apiVersion": api, "kind": "PodGroup", "metadata": {"name": name, "namespace": "ml"}, "spec": spec}


def composite(
    name: str,
    *,
    key: str | None = ZONE,
    parent: str | None = None,
    disruption: str | None = None,
    min_groups: int | None = None,
) -> Json:
    """A CompositePodGroup: ``basic``, or a gang of ``min_groups`` child groups (minGroupCount)."""
    spec = _rules(key, parent, disruption)
    policy = {"gang": {"minGroupCount": min_groups}} if min_groups is not None else {"basic": {}}
    spec.update(schedulingPolicy=policy, workloadRef={"workloadName": "w", "templateName": name})
    return {
        "apiVersion": ALPHA3,
        "kind": "CompositePodGroup",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": spec,
    }


def gang(name: str, size: int, **group: Any) -> list[Json]:
    """A PodGroup of ``size`` pending pods, all required in one domain (a rack by default)."""
    return [pod_group(name, size, **group), *(pod(f"{name}-{i}", name) for i in range(size))]


def dump_json(*items: Json | list[Json]) -> str:
    flat: list[Json] = []
    for item in items:
        flat += item if isinstance(item, list) else [item]
    return json.dumps({"kind": "List", "apiVersion": "v1", "items": flat})


def dump(*items: Json | list[Json]) -> Cluster:
    return parse_cluster("dump.json", dump_json(*items))


def racks(sizes: dict[str, int], *, zone: dict[str, str] | None = None) -> list[Json]:
    """One node of 1 cpu per slot, labelled with its rack (and the rack's zone when given)."""
    out = []
    for rack, slots in sizes.items():
        extra = {"zone": zone[rack]} if zone else {}
        out += [node(f"{rack}-{i}", 1, rack=rack, **extra) for i in range(slots)]
    return out
