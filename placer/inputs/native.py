"""placer's own compact schema for hand-written what-ifs (``placer schema`` publishes it)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from placer.errors import InputError
from placer.inputs.annotations import read_placer_fields
from placer.inputs.fields import Field as Doc
from placer.inputs.kubectl import (
    REBALANCE_ACCEPTS,
    REBALANCE_ANNOTATION,
    KubeObjects,
    ignores_disruption,
    placer_fields,
    refuse_if_unreadable,
)
from placer.inputs.requests import NONZERO_CPU, NONZERO_MEMORY
from placer.inputs.shapes import (
    parse_label_selector,
    parse_node_affinity,
    parse_pod_affinity,
    parse_spread,
    parse_taints,
    parse_tolerations,
)
from placer.inputs.volumes import read_claim, read_persistent_volume, read_storage_class
from placer.models import HostPort, Job, Node, Owner, Pod, PodDisruptionBudget, ReplicaSet

__all__ = ["NativeCluster", "cluster_schema", "is_native", "read_native"]

Quantity = str | int | float


class _Native(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class NativeNode(_Native):
    name: str = Field(min_length=1)
    labels: dict[str, str] = Field(default_factory=dict)
    allocatable: dict[str, Quantity] = Field(description="cpu, memory, ephemeral-storage, pods, extended resources")
    taints: list[dict[str, Any]] = Field(default_factory=list, description="Kubernetes taint objects")
    unschedulable: bool = False


class NativeHostPort(_Native):
    port: int = Field(ge=1, le=65535)
    protocol: Literal["TCP", "UDP", "SCTP"] = "TCP"
    host_ip: str = Field("0.0.0.0", alias="hostIP")


class NativeOwner(_Native):
    kind: str
    name: str
    uid: str = ""


class NativePod(_Native):
    name: str = Field(min_length=1)
    namespace: str = "default"
    node: str | None = Field(None, description="bound node; absent means pending")
    phase: Literal["Pending", "Running", "Succeeded", "Failed", "Unknown"] | None = None
    scheduler_name: str = Field("placer", alias="schedulerName")
    creation_timestamp: str = Field("", alias="creationTimestamp")
    start_time: str = Field("", alias="startTime")
    requests: dict[str, Quantity] = Field(default_factory=dict, description="the pod's total request")
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    node_selector: dict[str, str] = Field(default_factory=dict, alias="nodeSelector")
    affinity: dict[str, Any] = Field(
        default_factory=dict, description="Kubernetes affinity (nodeAffinity, podAffinity, podAntiAffinity)"
    )
    topology_spread_constraints: list[dict[str, Any]] = Field(
        default_factory=list, alias="topologySpreadConstraints", description="Kubernetes topology spread constraints"
    )
    tolerations: list[dict[str, Any]] = Field(default_factory=list)
    host_ports: list[NativeHostPort] = Field(default_factory=list, alias="hostPorts")
    priority: int = Field(0, ge=-(2**31), le=2**31 - 1)
    restart_policy: Literal["Always", "OnFailure", "Never"] = Field("Always", alias="restartPolicy")
    preemption_policy: Literal["PreemptLowerPriority", "Never"] = Field(
        "PreemptLowerPriority", alias="preemptionPolicy"
    )
    owner: NativeOwner | None = None
    scheduling_gates: list[str] = Field(default_factory=list, alias="schedulingGates")
    terminating: bool = Field(False, description="being deleted (metadata.deletionTimestamp is set)")
    nominated_node: str | None = Field(
        None, alias="nominatedNodeName", description="status.nominatedNodeName: room held for this pending pod"
    )
    claims: list[str] = Field(
        default_factory=list, description="names of the PersistentVolumeClaims the pod mounts (its namespace)"
    )


class NativePDB(_Native):
    name: str = Field(min_length=1)
    namespace: str = "default"
    selector: dict[str, Any] | None = None
    disruptions_allowed: int = Field(0, ge=0, alias="disruptionsAllowed")


class NativeReplicaSet(_Native):
    name: str = Field(min_length=1)
    namespace: str = "default"
    uid: str = ""
    scheduler_name: str = Field("placer", alias="schedulerName")
    selector: dict[str, Any] | None = Field(None, description="Kubernetes label selector of the ReplicaSet")
    ready_replicas: int = Field(0, ge=0, alias="readyReplicas", description="status.readyReplicas")


class NativeJob(_Native):
    """A Job as far as rebalancing goes: whether its pods may move and how its replacements come."""

    name: str = Field(min_length=1)
    namespace: str = "default"
    uid: str = ""
    scheduler_name: str = Field("placer", alias="schedulerName")
    completion_mode: Literal["NonIndexed", "Indexed"] = Field("NonIndexed", alias="completionMode")
    backoff_limit: int = Field(6, ge=0, alias="backoffLimit")
    failed: int = Field(0, ge=0, description="status.failed")
    pod_failure_policy: dict[str, Any] = Field(
        default_factory=dict, alias="podFailurePolicy", description="Kubernetes spec.podFailurePolicy"
    )
    annotations: dict[str, str] = Field(default_factory=dict)


class NativeCluster(_Native):
    """A cluster for what-if planning: nodes, pods (bound or pending), PDBs, ReplicaSets."""

    schema_: str | None = Field(None, alias="$schema")
    nodes: list[NativeNode]
    pods: list[NativePod] = Field(default_factory=list)
    pdbs: list[NativePDB] = Field(default_factory=list)
    replica_sets: list[NativeReplicaSet] = Field(default_factory=list, alias="replicaSets")
    jobs: list[NativeJob] = Field(default_factory=list)
    namespaces: dict[str, dict[str, str]] = Field(
        default_factory=dict, description="namespace name -> labels, for namespaceSelector in pod affinity terms"
    )
    persistent_volumes: list[dict[str, Any]] = Field(
        default_factory=list, alias="persistentVolumes", description="Kubernetes PersistentVolume objects"
    )
    persistent_volume_claims: list[dict[str, Any]] = Field(
        default_factory=list, alias="persistentVolumeClaims", description="Kubernetes PersistentVolumeClaim objects"
    )
    storage_classes: list[dict[str, Any]] = Field(
        default_factory=list, alias="storageClasses", description="Kubernetes StorageClass objects"
    )


def is_native(data: Any) -> bool:
    return isinstance(data, dict) and "nodes" in data and "items" not in data


def _loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def read_native(source: str, data: Any) -> KubeObjects:
    try:
        native = NativeCluster.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise InputError(source, _loc(tuple(err["loc"])), err["msg"]) from None
    nodes = [
        Node(
            name=n.name,
            labels=n.labels,
            allocatable=Doc(source, f"nodes[{i}].allocatable", n.allocatable).quantities(),
            taints=parse_taints(Doc(source, f"nodes[{i}].taints", n.taints)),
            unschedulable=n.unschedulable,
        )
        for i, n in enumerate(native.nodes)
    ]
    pods = [_pod(source, i, p) for i, p in enumerate(native.pods)]
    pdbs = [
        PodDisruptionBudget(
            namespace=b.namespace,
            name=b.name,
            selector=parse_label_selector(Doc(source, f"pdbs[{i}].selector", b.selector)),
            disruptions_allowed=b.disruptions_allowed,
        )
        for i, b in enumerate(native.pdbs)
    ]
    rss = [
        ReplicaSet(
            namespace=r.namespace,
            name=r.name,
            uid=r.uid,
            scheduler_name=r.scheduler_name,
            selector=parse_label_selector(Doc(source, f"replicaSets[{i}].selector", r.selector)),
            ready_replicas=r.ready_replicas,
        )
        for i, r in enumerate(native.replica_sets)
    ]
    objs = KubeObjects()
    objs.jobs = [
        Job(
            namespace=j.namespace,
            name=j.name,
            uid=j.uid or f"{j.namespace}/{j.name}",
            scheduler_name=j.scheduler_name,
            indexed=j.completion_mode == "Indexed",
            backoff_limit=j.backoff_limit,
            failed=j.failed,
            ignores_disruption=ignores_disruption(Doc(source, f"jobs[{i}].podFailurePolicy", j.pod_failure_policy)),
            accepts_restarts=j.annotations.get(REBALANCE_ANNOTATION) == REBALANCE_ACCEPTS,
        )
        for i, j in enumerate(native.jobs)
    ]
    objs.nodes, objs.pods, objs.pdbs, objs.replicasets = nodes, pods, pdbs, rss
    objs.warnings += [f"pod {pod.key}: {problem}" for pod in pods for problem in pod.problems]
    objs.namespaces = {
        name: {"kubernetes.io/metadata.name": name, **labels} for name, labels in native.namespaces.items()
    }
    objs.volumes = [
        read_persistent_volume(Doc(source, f"persistentVolumes[{i}]", v))
        for i, v in enumerate(native.persistent_volumes)
    ]
    objs.claims = [
        read_claim(Doc(source, f"persistentVolumeClaims[{i}]", c))
        for i, c in enumerate(native.persistent_volume_claims)
    ]
    objs.classes = [
        read_storage_class(Doc(source, f"storageClasses[{i}]", c)) for i, c in enumerate(native.storage_classes)
    ]
    return objs


def _pod(source: str, i: int, p: NativePod) -> Pod:
    where = f"pods[{i}]"
    requests = Doc(source, f"{where}.requests", p.requests).quantities()
    required, preferred = parse_node_affinity(Doc(source, f"{where}.affinity", p.affinity))
    own = read_placer_fields(p.labels, p.annotations)
    return refuse_if_unreadable(
        Pod(
            namespace=p.namespace,
            name=p.name,
            uid=f"{p.namespace}/{p.name}",
            node_name=p.node,
            phase=p.phase or ("Running" if p.node else "Pending"),
            scheduler_name=p.scheduler_name,
            creation=Doc(source, f"{where}.creationTimestamp", p.creation_timestamp).timestamp(),
            start_time=Doc(source, f"{where}.startTime", p.start_time).timestamp(),
            labels=p.labels,
            requests={k: v for k, v in requests.items() if v > 0},
            score_cpu=requests.get("cpu") or NONZERO_CPU,
            score_memory=requests.get("memory") or NONZERO_MEMORY,
            node_selector=p.node_selector,
            required_terms=required,
            preferred_terms=preferred,
            tolerations=parse_tolerations(Doc(source, f"{where}.tolerations", p.tolerations)),
            host_ports=tuple(
                HostPort(port=h.port, protocol=h.protocol, host_ip=h.host_ip or "0.0.0.0") for h in p.host_ports
            ),
            priority=p.priority,
            restart_policy=p.restart_policy,
            preemption_policy=p.preemption_policy,
            owner=Owner(kind=p.owner.kind, name=p.owner.name, uid=p.owner.uid) if p.owner else None,
            scheduling_gates=tuple(p.scheduling_gates),
            **placer_fields(own),
            **parse_pod_affinity(Doc(source, f"{where}.affinity", p.affinity), p.namespace, p.labels),
            spread=parse_spread(
                Doc(source, f"{where}.topologySpreadConstraints", p.topology_spread_constraints), p.labels
            ),
            claims=tuple(dict.fromkeys(p.claims)),
            terminating=p.terminating,
            nominated_node=p.nominated_node,
            problems=own.problems,
        )
    )


def cluster_schema() -> dict[str, Any]:
    return NativeCluster.model_json_schema(by_alias=True)
