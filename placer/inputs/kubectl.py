"""Read the Kubernetes objects of a dump or of the API server into models: a file's items
(``read_*``, every problem refuses the file naming the field) and the controller's cached objects
(``parse_*``, a pod's problems isolated to it). Which kinds exist and who reads them:
``placer.inputs.kinds``; a whole List: ``placer.inputs.dump``."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from placer.errors import InputError
from placer.inputs.annotations import EVICTABLE, PlacerFields, read_placer_fields
from placer.inputs.fields import Field, api_object
from placer.inputs.podgroups import PodGroup
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
)
from placer.models import Job, Node, Owner, Pod, PodDisruptionBudget, ReplicaSet

__all__ = [
    "DRA_CLASS_PREFIX",
    "KubeObjects",
    "dra_reason",
    "parse_job",
    "parse_namespace",
    "parse_namespace_item",
    "read_job",
    "read_node",
    "read_pdb",
    "read_pod",
    "read_replicaset",
]

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
# A Job's annotation accepting that rebalancing restarts its pods' work (issue 15).
REBALANCE_ANNOTATION = "placer.io/rebalance"
REBALANCE_ACCEPTS = "restarts-work"
# The extended resource every DeviceClass implicitly backs (DRA extended resources, 1.34+).
DRA_CLASS_PREFIX = "deviceclass.resource.kubernetes.io/"


class KubeObjects:
    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.pods: list[Pod] = []
        self.pdbs: list[PodDisruptionBudget] = []
        self.replicasets: list[ReplicaSet] = []
        self.jobs: list[Job] = []
        self.namespaces: dict[str, dict[str, str]] = {}
        self.volumes: list[PersistentVolume] = []
        self.claims: list[PersistentVolumeClaim] = []
        self.classes: list[StorageClass] = []
        # Extended resources backed by a DeviceClass (``spec.extendedResourceName``): allocated
        # by DRA, which placer does not do.
        self.device_resources: set[str] = set()
        # PodGroups of the Workload API and of scheduler-plugins: the gangs they declare.
        self.pod_groups: list[PodGroup] = []
        self.warnings: list[str] = []


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


def read_node(item: Field) -> Node:
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


def resize_infeasible(status: Field) -> bool:
    """The kubelet refused an in-place resize as infeasible: ``status.resize: Infeasible`` before
    Kubernetes 1.33, a ``PodResizePending`` condition with reason ``Infeasible`` since."""
    if status.get("resize").text() == "Infeasible":
        return True
    return any(
        c.get("type").text() == "PodResizePending" and c.get("reason").text() == "Infeasible"
        for c in status.get("conditions").items()
    )


def _container_statuses(status: Field) -> dict[str, Field]:
    out: dict[str, Field] = {}
    for key in ("initContainerStatuses", "containerStatuses"):
        for cs in status.get(key).items():
            out.setdefault(cs.get("name").text(), cs)
    return out


@dataclass(frozen=True)
class _Container:
    """One container's requests as each party sees them (None: that party reports nothing)."""

    spec: dict[str, int]
    actual: dict[str, int] | None  # status ...resources.requests: what the kubelet actuated
    allocated: dict[str, int] | None  # status ...allocatedResources
    init: bool
    sidecar: bool


def _read_container(c: Field, statuses: Mapping[str, Field], *, init: bool) -> _Container:
    cs = statuses.get(c.get("name").text())
    actual = allocated = None
    if cs is not None:
        requests, allocated_field = cs.get("resources").get("requests"), cs.get("allocatedResources")
        if requests.present():
            actual = requests.quantities()
        if allocated_field.present():
            allocated = allocated_field.quantities()
    sidecar = init and c.get("restartPolicy").text() == "Always"
    return _Container(_container_requests(c), actual, allocated, init, sidecar)


Variant = tuple[list[dict[str, int]], list[ContainerRequests]]


def _variant(containers: Sequence[_Container], pick: Callable[[_Container], dict[str, int] | None]) -> Variant:
    return (
        [pick(c) or {} for c in containers if not c.init],
        [ContainerRequests(pick(c) or {}, sidecar=c.sidecar) for c in containers if c.init],
    )


def _max(lists: Sequence[Mapping[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for one in lists:
        for name, value in one.items():
            out[name] = max(out.get(name, 0), value)
    return out


def _minus(amounts: dict[str, int], overhead: Mapping[str, int]) -> dict[str, int]:
    return {k: max(0, v - overhead.get(k, 0)) for k, v in amounts.items()}


def pod_resources(spec: Field, status: Field | None = None) -> tuple[dict[str, int], int, int]:
    """(effective requests, scoring cpu, scoring memory) of a pod, as the kubelet holds them.

    During an in-place resize a pod holds the most of what its spec asks, what the kubelet
    actuated (``status.containerStatuses[].resources.requests``) and what it allocated
    (``allocatedResources``), each aggregated as kube-scheduler aggregates containers; when the
    resize is infeasible the spec side is dropped (it will never be granted). Pod-level requests
    likewise take the most of the spec and ``status.resources`` / ``status.allocatedResources``.
    """
    status = status if status is not None else Field(spec.source, spec.path, None)
    infeasible = resize_infeasible(status)
    statuses = _container_statuses(status)
    containers = [_read_container(c, statuses, init=False) for c in spec.get("containers").items()]
    containers += [_read_container(c, statuses, init=True) for c in spec.get("initContainers").items()]

    def spec_side(c: _Container) -> dict[str, int] | None:
        return None if infeasible else c.spec

    def allocated(c: _Container) -> dict[str, int] | None:
        return c.allocated if c.allocated is not None else spec_side(c)

    def actuated(c: _Container) -> dict[str, int] | None:
        return c.actual if c.actual is not None else allocated(c)

    resized = infeasible or any(c.actual is not None or c.allocated is not None for c in containers)
    picks = [actuated, allocated] if infeasible else [spec_side, actuated, allocated] if resized else [spec_side]
    variants = [_variant(containers, pick) for pick in picks]
    overhead = spec.get("overhead").quantities()
    pod_level = spec.get("resources").get("requests").quantities()
    if pod_level:
        sides = [
            _minus(status.get("resources").get("requests").quantities(), overhead),
            _minus(status.get("allocatedResources").quantities(), overhead),
        ]
        pod_level = _max(sides if infeasible else [pod_level, *sides])
    aggregate = _max([effective_requests(containers=c, inits=i) for c, i in variants])
    requests = effective_requests(containers=[aggregate], pod_level=pod_level, overhead=overhead)
    scores = [scoring_requests(containers=c, inits=i, pod_level=pod_level, overhead=overhead) for c, i in variants]
    return requests, max(s[0] for s in scores), max(s[1] for s in scores)


def parse_namespace_item(item: Field) -> tuple[str, dict[str, str]]:
    meta = item.get("metadata")
    name = meta.get("name").required_str()
    labels = {"kubernetes.io/metadata.name": name, **meta.get("labels").str_map()}
    return name, labels


def dra_reason(what: str) -> str:
    return (
        f"the pod uses dynamic resource allocation ({what}); placer does not allocate DRA devices, "
        "so it never binds such a pod: leave it to kube-scheduler"
    )


def _relative(exc: InputError, item: Field) -> str:
    """The error's field relative to its object: ``spec.containers[0].resources.requests.cpu: ...``."""
    where = exc.where[len(item.path) :].lstrip(".") if exc.where.startswith(item.path) else exc.where
    return f"{where}: {exc.message}" if where else exc.message


def _accounted(spec: Field, status: Field) -> dict[str, Any]:
    """What Kubernetes itself accounts for the pod on its node (validated by the API server)."""
    requests, cpu, mem = pod_resources(spec, status)
    return {"requests": requests, "score_cpu": cpu, "score_memory": mem}


def _constraints(item: Field, namespace: str, name: str) -> dict[str, Any]:
    """Everything else placer reads of the pod: its labels, annotations and scheduling constraints."""
    meta, spec, status = item.get("metadata"), item.get("spec"), item.get("status")
    required, preferred = parse_node_affinity(spec.get("affinity"))
    restart = spec.get("restartPolicy").text("Always") or "Always"
    if restart not in ("Always", "OnFailure", "Never"):
        raise spec.get("restartPolicy").fail(f"invalid restartPolicy {restart!r}")
    preemption = spec.get("preemptionPolicy").text("PreemptLowerPriority") or "PreemptLowerPriority"
    if preemption not in ("PreemptLowerPriority", "Never"):
        raise spec.get("preemptionPolicy").fail(f"invalid preemptionPolicy {preemption!r}")
    annotations = meta.get("annotations").str_map()
    labels = meta.get("labels").str_map()
    claims, ephemeral = pod_volume_claims(spec, name)
    dra = list(spec.get("resourceClaims").items())
    return {
        "scheduler_name": _scheduler_name(spec),
        "creation": meta.get("creationTimestamp").timestamp(),
        "start_time": _start_time(status),
        "labels": labels,
        "annotations": annotations,
        "node_selector": spec.get("nodeSelector").str_map(),
        "required_terms": required,
        "preferred_terms": preferred,
        "tolerations": parse_tolerations(spec.get("tolerations")),
        "host_ports": parse_host_ports(list(spec.get("containers").items()) + list(spec.get("initContainers").items())),
        "priority": spec.get("priority").int32(0),
        "restart_policy": restart,
        "preemption_policy": preemption,
        "owner": _owner(meta),
        "scheduling_gates": tuple(g.get("name").text() for g in spec.get("schedulingGates").items()),
        "mirror": MIRROR_ANNOTATION in annotations,
        **parse_pod_affinity(spec.get("affinity"), namespace, labels),
        "spread": parse_spread(spec.get("topologySpreadConstraints"), labels),
        "claims": claims,
        "ephemeral_claims": tuple(sorted(ephemeral)),
        "terminating": _deleting(meta.get("deletionTimestamp")),
        "nominated_node": _nominated(status),
        "unsupported": dra_reason("spec.resourceClaims") if dra else None,
        "pod_group": spec.get("schedulingGroup").get("podGroupName").text() or None,
    }


def _scheduler_name(spec: Field) -> str:
    return spec.get("schedulerName").text("default-scheduler") or "default-scheduler"


def _deleting(stamp: Field) -> bool:
    stamp.timestamp()  # validated like the other times
    return stamp.present()


def placer_fields(fields: PlacerFields) -> dict[str, Any]:
    """The Pod fields of placer's own annotations and labels (``read_placer_fields``)."""
    return {
        "gang": fields.gang,
        "gang_size": fields.gang_size,
        "gang_object": fields.gang_object,
        "moved_at": fields.moved_at,
        "completion_index": fields.completion_index,
        "annotations": fields.annotations,
    }


def refuse_if_unreadable(pod: Pod) -> Pod:
    """A pending pod with a field placer cannot read is refused (code Invalid, the first such
    field named); a running one keeps running in the model. A pod whose requests could not be read
    is never evicted, not even by preemption: nobody knows what its eviction would free."""
    update: dict[str, Any] = {}
    if pod.node_name is None and pod.problems:
        update.update(unsupported=pod.problems[0], invalid=True)
    if pod.unaccounted is not None:
        update["unevictable"] = "its requests cannot be read"
    return pod.model_copy(update=update) if update else pod


def _pod(item: Field, *, isolate: bool = False) -> Pod:
    """One Pod object. Identity, node and phase must be readable (otherwise ``InputError``).

    A file (``isolate`` False) is refused for anything the API server would refuse. The
    controller's caches (``isolate`` True) hold what the API server accepted, so a field placer
    still cannot read there affects only this pod: its requests are read apart from everything
    else, and what fails is named in ``problems``. placer's own annotations are isolated in both.
    """
    namespace, name, meta = _meta(item)
    spec, status = item.get("spec"), item.get("status")
    placement = _placement(spec, status)
    node_name = placement["node_name"]
    fields: dict[str, Any] = {"namespace": namespace, "name": name, "uid": meta.get("uid").text(), **placement}
    problems: list[str] = []
    if not spec.get("containers").value:  # the API server refuses it: "spec.containers: Required value"
        empty = spec.get("containers").fail("is required: a pod has at least one container")
        if not isolate:
            raise empty
        problems.append(_relative(empty, item))
    try:
        fields.update(_accounted(spec, status))
    except Exception as exc:  # whatever fails is this pod's problem (_unreadable)
        fields["unaccounted"] = _unreadable(exc, item, isolate=isolate)
        held = f"; node {node_name} takes no new pod until it is fixed" if node_name else ""
        problems.append(f"{fields['unaccounted']} (its requests cannot be read{held})")
    try:
        fields.update(_constraints(item, namespace, name))
    except Exception as exc:
        problems.append(_unreadable(exc, item, isolate=isolate))
        fields["unevictable"] = "its priority and owner cannot be read"
        with contextlib.suppress(Exception):  # whose pod it is: the scheduler that must report it
            fields["scheduler_name"] = _scheduler_name(spec)
    try:
        labels, annotations = fields.get("labels", {}), fields.get("annotations", {})
        own = read_placer_fields(labels, annotations, fields.pop("pod_group", None))
    except Exception as exc:  # placer's own annotations: isolated in both modes
        problems.append(_unreadable(exc, item, isolate=True))
        fields["annotations"] = {EVICTABLE: "false"}
        own = read_placer_fields({}, fields["annotations"])
    fields.update(placer_fields(own))
    fields["problems"] = (*problems, *own.problems)
    return refuse_if_unreadable(Pod(**fields))


def _unreadable(exc: Exception, item: Field, *, isolate: bool) -> str:
    """A failure to read part of a pod, as the line that names it. A file (``isolate`` False)
    is refused for it in one line; in the controller's caches it is the pod's problem only. Any
    exception counts, not just ``InputError``: a reader's bug or a value Python itself refuses
    (an int() of 5,000 digits) must not drop the pod, nor stop the cycle."""
    error = exc if isinstance(exc, InputError) else item.fail(f"cannot read: {type(exc).__name__}: {exc}"[:300])
    if not isolate:
        raise error from None
    return _relative(error, item)


def _not_negative(f: Field) -> int:
    value = f.int32(0)
    if value < 0:
        raise f.fail(f"must be 0 or more, got {value}")
    return value


def read_pdb(item: Field) -> PodDisruptionBudget:
    namespace, name, _ = _meta(item)
    return PodDisruptionBudget(
        namespace=namespace,
        name=name,
        selector=parse_label_selector(item.get("spec").get("selector")),
        disruptions_allowed=_not_negative(item.get("status").get("disruptionsAllowed")),
    )


def read_replicaset(item: Field) -> ReplicaSet:
    namespace, name, meta = _meta(item)
    template_spec = item.get("spec").get("template").get("spec")
    return ReplicaSet(
        namespace=namespace,
        name=name,
        uid=meta.get("uid").text(),
        scheduler_name=template_spec.get("schedulerName").text("default-scheduler") or "default-scheduler",
        owner=_owner(meta),
        selector=parse_label_selector(item.get("spec").get("selector")),
        ready_replicas=_not_negative(item.get("status").get("readyReplicas")),
    )


def ignores_disruption(policy: Field) -> bool:
    """spec.podFailurePolicy has a rule ``action: Ignore`` on the pod condition DisruptionTarget."""
    for rule in policy.get("rules").items():
        if rule.get("action").text() != "Ignore":
            continue
        if any(c.get("type").text() == "DisruptionTarget" for c in rule.get("onPodConditions").items()):
            return True
    return False


def read_job(item: Field) -> Job:
    namespace, name, meta = _meta(item)
    spec, status = item.get("spec"), item.get("status")
    template_spec = spec.get("template").get("spec")
    mode = spec.get("completionMode").text("NonIndexed") or "NonIndexed"
    if mode not in ("NonIndexed", "Indexed"):
        raise spec.get("completionMode").fail(f"expected NonIndexed or Indexed, got {mode!r}")
    return Job(
        namespace=namespace,
        name=name,
        uid=meta.get("uid").text(),
        scheduler_name=template_spec.get("schedulerName").text("default-scheduler") or "default-scheduler",
        indexed=mode == "Indexed",
        backoff_limit=_not_negative(spec.get("backoffLimit")) if spec.get("backoffLimit").present() else 6,
        failed=_not_negative(status.get("failed")),
        ignores_disruption=ignores_disruption(spec.get("podFailurePolicy")),
        accepts_restarts=meta.get("annotations").str_map().get(REBALANCE_ANNOTATION) == REBALANCE_ACCEPTS,
    )


def _placement(spec: Field, status: Field) -> dict[str, Any]:
    """Where the pod is: its node and phase (unreadable: the pod is)."""
    node_name = spec.get("nodeName").text() or None
    phase = status.get("phase").text("Running" if node_name else "Pending") or "Pending"
    return {"node_name": node_name, "phase": phase}


def _start_time(status: Field) -> str:
    return status.get("startTime").timestamp()


def _nominated(status: Field) -> str | None:
    return status.get("nominatedNodeName").text() or None


# Metadata that is either never read or read as the pod's placement (``reparse_pod``).
_PLACEMENT_META = ("resourceVersion", "managedFields", "deletionTimestamp", "deletionGracePeriodSeconds")
# Label domains the API server writes onto a pod as it binds it (the PodTopologyLabels admission
# plugin, on by default since Kubernetes 1.35, copies the node's zone and region): read with the
# placement; nothing else placer derives from a pod's labels reads them.
_BINDING_LABELS = ("topology.kubernetes.io/", "topology.k8s.io/")


def _unplaced_meta(meta: dict[str, Any]) -> dict[str, Any]:
    view = {k: v for k, v in meta.items() if k not in _PLACEMENT_META}
    labels = view.get("labels")
    if isinstance(labels, dict):
        view["labels"] = {k: v for k, v in labels.items() if not (isinstance(k, str) and k.startswith(_BINDING_LABELS))}
    return view


def _unplaced(raw: Any) -> tuple[Any, ...] | None:
    """Everything of a Pod object ``parse_pod`` reads but its placement (node, phase, start time,
    nominated node, deletion), as a comparable value; None for an object of an unexpected shape."""
    if not isinstance(raw, dict):
        return None
    meta, spec, status = raw.get("metadata"), raw.get("spec"), raw.get("status") or {}
    if not isinstance(meta, dict) or not isinstance(spec, dict) or not isinstance(status, dict):
        return None
    statuses = [status.get(key) or [] for key in ("initContainerStatuses", "containerStatuses")]
    conditions = status.get("conditions") or []
    if not all(isinstance(x, list) for x in (*statuses, conditions)):
        return None
    return (
        raw.get("kind"),
        raw.get("apiVersion"),
        _unplaced_meta(meta),
        {k: v for k, v in spec.items() if k != "nodeName"},
        [status.get(key) for key in ("resize", "resources", "allocatedResources")],
        [c for c in conditions if not isinstance(c, dict) or c.get("type") == "PodResizePending"],
        [  # a container status that reports no resources counts as none (``_read_container``)
            (cs.get("name"), cs.get("resources"), cs.get("allocatedResources")) if isinstance(cs, dict) else cs
            for group in statuses
            for cs in group
            if not isinstance(cs, dict) or "resources" in cs or "allocatedResources" in cs
        ],
    )


def reparse_pod(raw: Any, before: tuple[Any, Pod] | None) -> Pod:
    """``parse_pod(raw)``, given the previous version of the same pod (its object and its parse):
    when only its placement changed (bound, with the topology labels the API server adds then,
    started, nominated, being deleted: the versions a pod goes through on its way), the previous
    parse with the new placement; otherwise a full parse."""
    if before is not None and not before[1].problems:
        old_raw, old = before
        view = _unplaced(raw)
        if view is not None and view == _unplaced(old_raw):
            item = api_object(raw, "Pod")
            status = item.get("status")
            try:
                update = {**_placement(item.get("spec"), status), "start_time": _start_time(status)}
                update["nominated_node"] = _nominated(status)
                update["terminating"] = _deleting(item.get("metadata").get("deletionTimestamp"))
                update["labels"] = item.get("metadata").get("labels").str_map()
            except InputError:
                return parse_pod(raw)
            return old.model_copy(update=update)
    return parse_pod(raw)


def read_pod(item: Field) -> Pod:
    """A Pod item of a file, validated like the API server: any unreadable field refuses it."""
    return _pod(item)


def parse_pod(raw: Any, source: str = "api") -> Pod:
    """One Pod object as the API returns it (watch/list), with errors naming the object. Any
    field placer cannot read is isolated to this pod (``Pod.problems``, ``Pod.unaccounted``, code
    Invalid while pending); a bound pod whose phase or the like cannot be read is kept as holding
    its node whole (``_held_whole``). Only a pod placer cannot identify, or a pending one whose
    placement cannot be read, raises."""
    item = api_object(raw, "Pod", source)
    try:
        return _pod(item, isolate=True)
    except Exception as exc:
        held = _held_whole(raw, _unreadable(exc, item, isolate=True))
        if held is None:
            raise
        return held


def _held_whole(raw: Any, problem: str) -> Pod | None:
    """A bound pod of which only its name, namespace and node could be read: it holds its node
    (``unaccounted``: the node takes no new pod) and is never evicted. None when even those cannot."""
    meta = raw.get("metadata") if isinstance(raw, dict) else None
    spec = raw.get("spec") if isinstance(raw, dict) else None
    if not isinstance(meta, dict) or not isinstance(spec, dict):
        return None
    name, namespace, node = meta.get("name"), meta.get("namespace") or "default", spec.get("nodeName")
    if not (isinstance(name, str) and name and isinstance(namespace, str) and isinstance(node, str) and node):
        return None
    why = f"{problem} (node {node} takes no new pod until it is fixed)"
    return Pod(
        namespace=namespace,
        name=name,
        node_name=node,
        phase="Running",
        unaccounted=problem,
        unevictable="only its name and node can be read",
        problems=(why,),
    )


def parse_node(raw: Any, source: str = "api") -> Node:
    return read_node(api_object(raw, "Node", source))


def parse_pdb(raw: Any, source: str = "api") -> PodDisruptionBudget:
    return read_pdb(api_object(raw, "PodDisruptionBudget", source))


def parse_replicaset(raw: Any, source: str = "api") -> ReplicaSet:
    return read_replicaset(api_object(raw, "ReplicaSet", source))


def parse_job(raw: Any, source: str = "api") -> Job:
    return read_job(api_object(raw, "Job", source))


def parse_namespace(raw: Any, source: str = "api") -> tuple[str, dict[str, str]]:
    return parse_namespace_item(api_object(raw, "Namespace", source))
