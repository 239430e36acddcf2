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

Kubernetes 1.37 serves the Workload API's PodGroup as ``scheduling.k8s.io/v1beta1`` (and
``v1alpha3``, beside ``CompositePodGroup``); the pod names it the same way. What 1.37 adds (a
topology domain, composite parents, ``disruptionMode``, the group's priority) is read by
``placer.inputs.workloads`` and given to every member pod by ``resolve_gangs``. A PodGroup the
controller's cache holds but placer cannot read (``PodGroup.problem``) makes its pending pods
``Invalid``, naming the field; a file with one is refused.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from placer.errors import InputError
from placer.inputs.fields import Field, api_object
from placer.inputs.workloads import COMPOSITE_API, COMPOSITE_KIND, WORKLOAD_APIS, GroupRules, read_rules, resolve_chain
from placer.models import Pod

__all__ = [
    "PLUGINS_API",
    "WORKLOAD_API",
    "PodGroup",
    "missing_group_gate",
    "parse_composite_pod_group",
    "parse_plugins_pod_group",
    "parse_workload_pod_group",
    "read_pod_group",
    "resolve_gangs",
]

WORKLOAD_API = "scheduling.k8s.io/v1alpha2"
PLUGINS_API = "scheduling.x-k8s.io/v1alpha1"
GangApi = Literal["workload", "plugins", "composite"]
_APIS: dict[str, GangApi] = {**dict.fromkeys(WORKLOAD_APIS, "workload"), PLUGINS_API: "plugins"}


@dataclass(frozen=True)
class PodGroup:
    api: GangApi
    namespace: str
    name: str
    # The gang's size; None: the Workload API's ``basic`` policy (no gang), or scheduler-plugins'
    # ``minMember`` 0 (the members present).
    size: int | None
    min_resources: dict[str, int] = field(default_factory=dict)  # scheduler-plugins only
    rules: GroupRules = field(default_factory=GroupRules)  # the Workload API's 1.37 rules
    problem: str | None = None  # unreadable (controller caches only): its pending pods are Invalid

    @property
    def key(self) -> tuple[GangApi, str, str]:
        return (self.api, self.namespace, self.name)


def is_pod_group(item: Field) -> bool:
    """A PodGroup of a gang API, or a CompositePodGroup (kept beside them, ``api`` composite)."""
    kind, api = item.get("kind").text(), item.get("apiVersion").text()
    return (kind == "PodGroup" and api in _APIS) or (kind == COMPOSITE_KIND and api == COMPOSITE_API)


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
    if item.get("kind").text() == COMPOSITE_KIND:
        return _read(item, "composite")
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
    rules = read_rules(spec)
    if api == "composite":  # its gang's minGroupCount: that many child groups together, or none
        if gang.present():
            rules = replace(rules, min_groups=_positive(gang.get("minGroupCount")))
        return PodGroup(api, namespace, name, None, rules=rules)
    return PodGroup(api, namespace, name, _positive(gang.get("minCount")) if gang.present() else None, rules=rules)


def _isolated(raw: Any, source: str, api: GangApi, kind: str) -> PodGroup:
    """An object of the controller's caches: unreadable rules make it a ``problem`` (its pending
    pods Invalid) rather than no object at all (its pods would wait for ever)."""
    item = api_object(raw, kind, source)
    try:
        return _read(item, api)
    except InputError as exc:
        meta = item.get("metadata")
        name = meta.get("name").required_str()  # no name: not identifiable, the index drops it
        namespace = meta.get("namespace").text("default") or "default"
        return PodGroup(api, namespace, name, None, problem=f"{exc.where}: {exc.message}")


def parse_workload_pod_group(raw: Any, source: str = "api") -> PodGroup:
    """One Workload API PodGroup (``v1alpha2``, ``v1beta1``) as the API returns it."""
    return _isolated(raw, source, "workload", "PodGroup")


def parse_composite_pod_group(raw: Any, source: str = "api") -> PodGroup:
    """One ``scheduling.k8s.io/v1alpha3`` CompositePodGroup as the API returns it."""
    return _isolated(raw, source, "composite", COMPOSITE_KIND)


def parse_plugins_pod_group(raw: Any, source: str = "api") -> PodGroup:
    """One ``scheduling.x-k8s.io/v1alpha1`` PodGroup as the API returns it."""
    return _read(api_object(raw, "PodGroup", source), "plugins")


def missing_group_gate(namespace: str, name: str) -> str:
    """What holds a pod whose Workload PodGroup does not exist (shown as a scheduling gate)."""
    return f"PodGroup {namespace}/{name} not found"


def resolve_gangs(pods: Sequence[Pod], groups: Iterable[PodGroup], warnings: list[str]) -> list[Pod]:
    """Each pod whose gang an object declares gets that object's size and its 1.37 rules; a
    Workload PodGroup (or a composite parent) that does not exist holds its pending pods (a gate),
    a ``basic`` one makes them no gang, an unreadable one makes them Invalid."""
    groups = list(groups)
    by_key: Mapping[tuple[str, str, str], PodGroup] = {g.key: g for g in groups}
    composites = {(g.namespace, g.name): g.rules for g in groups if g.api == "composite" and g.problem is None}
    missing: dict[str, int] = {}
    out = []
    for pod in pods:
        if pod.gang is None or pod.gang_object is None:
            out.append(pod)
            continue
        group = by_key.get((pod.gang_object, pod.namespace, pod.gang))
        if group is not None:
            out.append(_member(pod, group, composites, missing))
        elif pod.gang_object == "workload" and pod.pending:
            gate = missing_group_gate(pod.namespace, pod.gang)
            missing[gate] = missing.get(gate, 0) + 1
            out.append(pod.model_copy(update={"scheduling_gates": (*pod.scheduling_gates, gate)}))
        else:
            out.append(pod)
    broken = sorted({g.problem for g in groups if g.problem is not None})
    warnings += [f"{problem} (its pending pods are Invalid)" for problem in broken]
    for gate, count in sorted(missing.items()):
        what = gate.removesuffix(" not found")
        warnings.append(f"{what} is not in the input: its {count} pending pod(s) wait for it")
    return out


def _basic_below_quorum(group: PodGroup, composite: str) -> str:
    """Why a pod of a ``basic`` PodGroup below a composite gang is not placed: the validator's
    rule that a pod left out must not fit anywhere knows gangs, not composite gangs, and would
    refuse every answer that leaves such a pod out for its composite's sake."""
    return (
        f"PodGroup {group.namespace}/{group.name} has a basic policy below {composite}, whose gang "
        "(minGroupCount) placer applies only to child groups that are gangs"
    )


def _member(
    pod: Pod, group: PodGroup, composites: Mapping[tuple[str, str], GroupRules], missing: dict[str, int]
) -> Pod:
    """``pod`` as a member of ``group``."""
    if group.problem is not None:
        if not pod.pending:
            return pod
        return pod.model_copy(update={"unsupported": group.problem, "invalid": True})
    gang = None if group.api == "workload" and group.size is None else pod.gang
    update: dict[str, Any] = {"gang": gang, "gang_size": group.size if gang else None}
    if group.api == "workload":
        chain = resolve_chain(group.namespace, group.name, group.rules, composites)
        if chain.problem is not None and pod.pending:
            update.update(unsupported=chain.problem, invalid=True)
        elif chain.quorums and gang is None and pod.pending:
            update["unsupported"] = _basic_below_quorum(group, chain.quorums[0].group)
        elif chain.missing is not None and pod.pending:
            missing[chain.missing] = missing.get(chain.missing, 0) + 1
            update["scheduling_gates"] = (*pod.scheduling_gates, chain.missing)
        update.update(group_domains=chain.domains, group_quorums=chain.quorums, disruption_unit=chain.disruption_unit)
        if chain.priority is not None:
            update["priority"] = chain.priority
    return pod.model_copy(update=update)
