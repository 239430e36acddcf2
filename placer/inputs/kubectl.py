"""Read a Kubernetes ``List`` (``kubectl get nodes,pods,pdb,rs,ns,pv,pvc,storageclass -A -o json``) into models."""

from __future__ import annotations

from typing import Any

from placer.inputs.fields import Field, api_object
from placer.inputs.requests import ContainerRequests, effective_requests, scoring_requests
from placer.inputs.shapes import (
    parse_host_ports,
    parse_label_selector,
    parse_node_affinity,
    parse_pod_affinity,
    parse_spread,
    parse_taints,
    parse_tolerations,
)
from placer.inputs.volumes import (
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    pod_volume_claims,
    read_claim,
    read_persistent_volume,
    read_storage_class,
)
from placer.models import Node, Owner, Pod, PodDisruptionBudget, ReplicaSet

__all__ = ["KubeObjects", "parse_namespace", "read_list"]

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
KINDS = (
    "Node",
    "Pod",
    "PodDisruptionBudget",
    "ReplicaSet",
    "Namespace",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "StorageClass",
)


class KubeObjects:
    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.pods: list[Pod] = []
        self.pdbs: list[PodDisruptionBudget] = []
        self.replicasets: list[ReplicaSet] = []
        self.namespaces: dict[str, dict[str, str]] = {}
        self.volumes: list[PersistentVolume] = []
        self.claims: list[PersistentVolumeClaim] = []
        self.classes: list[StorageClass] = []
        self.warnings: list[str] = []


def read_list(doc: Field) -> KubeObjects:
    out = KubeObjects()
    kind = doc.get("kind").text()
    items = [doc] if kind in KINDS else list(doc.get("items").items())
    if kind not in KINDS and not doc.get("items").present():
        raise doc.fail("expected a Kubernetes List with items, or placer's native schema (nodes, pods)")
    for item in items:
        item_kind = item.get("kind").text()
        if item_kind == "Node":
            out.nodes.append(_node(item))
        elif item_kind == "Pod":
            out.pods.append(_pod(item))
        elif item_kind == "PodDisruptionBudget":
            out.pdbs.append(_pdb(item))
        elif item_kind == "ReplicaSet":
            out.replicasets.append(_replicaset(item))
        elif item_kind == "Namespace":
            name, labels = parse_namespace_item(item)
            out.namespaces[name] = labels
        elif item_kind == "PersistentVolume":
            out.volumes.append(read_persistent_volume(item))
        elif item_kind == "PersistentVolumeClaim":
            out.claims.append(read_claim(item))
        elif item_kind == "StorageClass":
            out.classes.append(read_storage_class(item))
        else:
            out.warnings.append(f"{item.path}: kind {item_kind or '(none)'!r} ignored")
    return out


def _meta(item: Field) -> tuple[str, str, Field]:
    meta = item.get("metadata")
    name = meta.get("name").required_str()
    return meta.get("namespace").text("default") or "default", name, meta


def _owner(meta: Field) -> Owner | None:
    refs = list(meta.get("ownerReferences").items())
    chosen = next((r for r in refs if r.get("controller").flag()), refs[0] if refs else None)
    if chosen is None:
        return None
    return Owner(
        kind=chosen.get("kind").required_str(), name=chosen.get("name").required_str(), uid=chosen.get("uid").text()
    )


def _node(item: Field) -> Node:
    meta = item.get("metadata")
    spec, status = item.get("spec"), item.get("status")
    alloc = status.get("allocatable")
    if not alloc.present():
        alloc = status.get("capacity")
    return Node(
        name=meta.get("name").required_str(),
        labels=meta.get("labels").str_map(),
        allocatable=alloc.quantities(),
        taints=parse_taints(spec.get("taints")),
        unschedulable=spec.get("unschedulable").flag(),
    )


def _container_requests(c: Field) -> dict[str, int]:
    res = c.get("resources")
    requests = res.get("requests").quantities()
    # The API server defaults a missing request to the limit; a hand-written list may lack that.
    for name, value in res.get("limits").quantities().items():
        requests.setdefault(name, value)
    return requests


def pod_resources(spec: Field) -> tuple[dict[str, int], int, int]:
    """(effective requests, scoring cpu, scoring memory) of a pod spec."""
    containers = [_container_requests(c) for c in spec.get("containers").items()]
    inits = [
        ContainerRequests(_container_requests(c), sidecar=c.get("restartPolicy").text() == "Always")
        for c in spec.get("initContainers").items()
    ]
    pod_level = spec.get("resources").get("requests").quantities()
    overhead = spec.get("overhead").quantities()
    requests = effective_requests(containers=containers, inits=inits, pod_level=pod_level, overhead=overhead)
    cpu, mem = scoring_requests(containers=containers, inits=inits, pod_level=pod_level, overhead=overhead)
    return requests, cpu, mem


def parse_namespace_item(item: Field) -> tuple[str, dict[str, str]]:
    meta = item.get("metadata")
    name = meta.get("name").required_str()
    labels = {"kubernetes.io/metadata.name": name, **meta.get("labels").str_map()}
    return name, labels


GANG = "placer.io/gang"
GANG_SIZE = "placer.io/gang-size"
POD_GROUP = "scheduling.x-k8s.io/pod-group"


def gang_of(meta: Field, labels: dict[str, str], annotations: dict[str, str]) -> dict[str, Any]:
    """Gang membership: ``placer.io/gang`` (label or annotation) or the scheduler-plugins PodGroup
    label, with the size from ``placer.io/gang-size`` when given."""
    name = labels.get(GANG) or annotations.get(GANG) or labels.get(POD_GROUP)
    size_text = labels.get(GANG_SIZE) or annotations.get(GANG_SIZE)
    size = None
    if size_text is not None:
        if not size_text.isdigit() or int(size_text) < 1:
            raise meta.get("annotations").fail(f"{GANG_SIZE} must be a positive integer, got {size_text!r}")
        size = int(size_text)
    return {"gang": name or None, "gang_size": size if name else None}


def _pod(item: Field) -> Pod:
    namespace, name, meta = _meta(item)
    spec, status = item.get("spec"), item.get("status")
    requests, score_cpu, score_mem = pod_resources(spec)
    required, preferred = parse_node_affinity(spec.get("affinity"))
    restart = spec.get("restartPolicy").text("Always") or "Always"
    if restart not in ("Always", "OnFailure", "Never"):
        raise spec.get("restartPolicy").fail(f"invalid restartPolicy {restart!r}")
    preemption = spec.get("preemptionPolicy").text("PreemptLowerPriority") or "PreemptLowerPriority"
    if preemption not in ("PreemptLowerPriority", "Never"):
        raise spec.get("preemptionPolicy").fail(f"invalid preemptionPolicy {preemption!r}")
    annotations = meta.get("annotations").str_map()
    labels = meta.get("labels").str_map()
    node_name = spec.get("nodeName").text() or None
    claims, ephemeral = pod_volume_claims(spec, name)
    return Pod(
        namespace=namespace,
        name=name,
        uid=meta.get("uid").text(),
        node_name=node_name,
        phase=status.get("phase").text("Running" if node_name else "Pending") or "Pending",
        scheduler_name=spec.get("schedulerName").text("default-scheduler") or "default-scheduler",
        creation=meta.get("creationTimestamp").text(),
        start_time=status.get("startTime").text(),
        labels=labels,
        annotations=annotations,
        requests=requests,
        score_cpu=score_cpu,
        score_memory=score_mem,
        node_selector=spec.get("nodeSelector").str_map(),
        required_terms=required,
        preferred_terms=preferred,
        tolerations=parse_tolerations(spec.get("tolerations")),
        host_ports=parse_host_ports(list(spec.get("containers").items()) + list(spec.get("initContainers").items())),
        priority=spec.get("priority").integer(0),
        restart_policy=restart,
        preemption_policy=preemption,
        owner=_owner(meta),
        scheduling_gates=tuple(g.get("name").text() for g in spec.get("schedulingGates").items()),
        mirror=MIRROR_ANNOTATION in annotations,
        **gang_of(meta, labels, annotations),
        **parse_pod_affinity(spec.get("affinity"), namespace, labels),
        spread=parse_spread(spec.get("topologySpreadConstraints"), labels),
        claims=claims,
        ephemeral_claims=tuple(sorted(ephemeral)),
        terminating=meta.get("deletionTimestamp").present(),
        nominated_node=status.get("nominatedNodeName").text() or None,
    )


def _pdb(item: Field) -> PodDisruptionBudget:
    namespace, name, _ = _meta(item)
    return PodDisruptionBudget(
        namespace=namespace,
        name=name,
        selector=parse_label_selector(item.get("spec").get("selector")),
        disruptions_allowed=item.get("status").get("disruptionsAllowed").integer(0),
    )


def _replicaset(item: Field) -> ReplicaSet:
    namespace, name, meta = _meta(item)
    template_spec = item.get("spec").get("template").get("spec")
    return ReplicaSet(
        namespace=namespace,
        name=name,
        uid=meta.get("uid").text(),
        scheduler_name=template_spec.get("schedulerName").text("default-scheduler") or "default-scheduler",
        owner=_owner(meta),
        selector=parse_label_selector(item.get("spec").get("selector")),
    )


def is_list(data: Any) -> bool:
    return isinstance(data, dict) and ("items" in data or data.get("kind") in KINDS)


def parse_pod(raw: Any, source: str = "api") -> Pod:
    """One Pod object as the API returns it (watch/list), with errors naming the object."""
    return _pod(api_object(raw, "Pod", source))


def parse_node(raw: Any, source: str = "api") -> Node:
    return _node(api_object(raw, "Node", source))


def parse_pdb(raw: Any, source: str = "api") -> PodDisruptionBudget:
    return _pdb(api_object(raw, "PodDisruptionBudget", source))


def parse_replicaset(raw: Any, source: str = "api") -> ReplicaSet:
    return _replicaset(api_object(raw, "ReplicaSet", source))


def parse_namespace(raw: Any, source: str = "api") -> tuple[str, dict[str, str]]:
    return parse_namespace_item(api_object(raw, "Namespace", source))
