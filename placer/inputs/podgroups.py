"""Gangs declared by objects: the Workload API's PodGroup and scheduler-plugins' PodGroup.

A pod names its gang in one of three ways (``read_placer_fields`` picks the first present):

1. ``placer.io/gang`` (label or annotation), size from ``placer.io/gang-size``;
2. ``spec.schedulingGroup.podGroupName`` (Kubernetes 1.36, feature gate ``GenericWorkload``): a
   ``PodGroup`` of ``scheduling.k8s.io/v1alpha2`` in the pod's namespace. Its
   ``spec.schedulingPolicy.gang.minCount`` is the gang's size; a ``basic`` policy means no gang
   (each pod is placed on its own). While the PodGroup does not exist the pods wait, as
   kube-scheduler's GangScheduling plugin keeps them out of its queue (PreEnqueue);
3. the label ``scheduling.x-k8s.io/pod-group``: a ``PodGroup`` of ``scheduling.x-k8s.io/v1alpha1``
   (scheduler-plugins' Coscheduling) whose ``spec.minMember`` is the gang's size. Without the
   object the gang is the members present, as before objects were read.

``spec.minResources`` of a scheduler-plugins PodGroup is validated and kept. placer places a gang
whole or not at all, so the members' own requests are always placed together; Coscheduling's
extra check (the cluster's free room must cover ``minResources`` before any member is admitted)
guards against partly admitted gangs, which placer never makes, so it is not applied.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from placer.inputs.fields import Field, api_object
from placer.models import Pod

__all__ = [
    "PLUGINS_API",
    "WORKLOAD_API",
    "PodGroup",
    "missing_group_gate",
    "parse_plugins_pod_group",
    "parse_workload_pod_group",
    "read_pod_group",
    "resolve_gangs",
]

WORKLOAD_API = "scheduling.k8s.io/v1alpha2"
PLUGINS_API = "scheduling.x-k8s.io/v1alpha1"
GangApi = Literal["workload", "plugins"]
_APIS: dict[str, GangApi] = {WORKLOAD_API: "workload", PLUGINS_API: "plugins"}


@dataclass(frozen=True)
class PodGroup:
    api: GangApi
    namespace: str
    name: str
    # The gang's size; None: the Workload API's ``basic`` policy (no gang), or scheduler-plugins'
    # ``minMember`` 0 (the members present).
    size: int | None
    min_resources: dict[str, int] = field(default_factory=dict)  # scheduler-plugins only

    @property
    def key(self) -> tuple[GangApi, str, str]:
        return (self.api, self.namespace, self.name)


def is_pod_group(item: Field) -> bool:
    return item.get("kind").text() == "PodGroup" and item.get("apiVersion").text() in _APIS


def _positive(f: Field) -> int:
    value = f.int32(0)
    if value < 1:
        raise f.fail(f"must be a positive integer, got {f.value!r}")
    return value


def _min_member(f: Field) -> int | None:
    """scheduler-plugins' ``minMember``: 0 or absent asks for no minimum (the members present)."""
    value = f.int32(0)
    if value < 0:
        raise f.fail(f"must be 0 or more, got {value}")
    return value or None


def read_pod_group(item: Field) -> PodGroup:
    """A PodGroup item of a List; its ``apiVersion`` says which API declares it."""
    return _read(item, _APIS[item.get("apiVersion").text()])


def _read(item: Field, api: GangApi) -> PodGroup:
    meta = item.get("metadata")
    namespace = meta.get("namespace").text("default") or "default"
    name = meta.get("name").required_str()
    spec = item.get("spec")
    if api == "plugins":
        return PodGroup(
            api,
            namespace,
            name,
            _min_member(spec.get("minMember")),
            spec.get("minResources").quantities(),
        )
    policy = spec.get("schedulingPolicy")
    gang, basic = policy.get("gang"), policy.get("basic")
    if gang.present() == basic.present():
        raise policy.fail("exactly one of basic and gang must be set")
    return PodGroup(api, namespace, name, _positive(gang.get("minCount")) if gang.present() else None)


def parse_workload_pod_group(raw: Any, source: str = "api") -> PodGroup:
    """One ``scheduling.k8s.io/v1alpha2`` PodGroup as the API returns it."""
    return _read(api_object(raw, "PodGroup", source), "workload")


def parse_plugins_pod_group(raw: Any, source: str = "api") -> PodGroup:
    """One ``scheduling.x-k8s.io/v1alpha1`` PodGroup as the API returns it."""
    return _read(api_object(raw, "PodGroup", source), "plugins")


def missing_group_gate(namespace: str, name: str) -> str:
    """What holds a pod whose Workload PodGroup does not exist (shown as a scheduling gate)."""
    return f"PodGroup {namespace}/{name} not found"


def resolve_gangs(pods: Sequence[Pod], groups: Iterable[PodGroup], warnings: list[str]) -> list[Pod]:
    """Each pod whose gang an object declares gets that object's size; a Workload PodGroup that
    does not exist holds its pending pods (a gate) and a ``basic`` one makes them no gang."""
    by_key: Mapping[tuple[str, str, str], PodGroup] = {g.key: g for g in groups}
    missing: dict[str, int] = {}
    out = []
    for pod in pods:
        if pod.gang is None or pod.gang_object is None:
            out.append(pod)
            continue
        group = by_key.get((pod.gang_object, pod.namespace, pod.gang))
        if group is not None:
            gang = None if group.api == "workload" and group.size is None else pod.gang
            out.append(pod.model_copy(update={"gang": gang, "gang_size": group.size if gang else None}))
        elif pod.gang_object == "workload" and pod.pending:
            missing[f"{pod.namespace}/{pod.gang}"] = missing.get(f"{pod.namespace}/{pod.gang}", 0) + 1
            gate = missing_group_gate(pod.namespace, pod.gang)
            out.append(pod.model_copy(update={"scheduling_gates": (*pod.scheduling_gates, gate)}))
        else:
            out.append(pod)
    for key, count in sorted(missing.items()):
        warnings.append(f"PodGroup {key} ({WORKLOAD_API}) is not in the input: its {count} pending pod(s) wait for it")
    return out
