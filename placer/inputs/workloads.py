"""Kubernetes 1.37 workloads: what a Workload API PodGroup adds to its gang, and CompositePodGroups.

Field names as ``k8s.io/api`` v0.37.2 declares them (``scheduling/v1beta1`` and ``v1alpha3``); the
same fields are read from 1.36's ``v1alpha2`` PodGroups where they exist:

- ``spec.schedulingConstraints.topology[].key`` (at most one entry): every pod of the group in one
  domain of that node label (feature gate ``TopologyAwareWorkloadScheduling``);
- ``spec.parentCompositePodGroupName``: the CompositePodGroup (``scheduling.k8s.io/v1alpha3``,
  gate ``CompositePodGroup``) the group belongs to; a composite's own topology key holds every pod
  below it in one domain of its key (a job in one zone, each worker group in one rack);
- ``spec.disruptionMode``: the union ``{single: {}}`` (default) or ``{all: {}}``; with ``all`` the
  pods below that level are disrupted only together;
- ``spec.priority``: the group's priority, which its pods take (admission resolves
  ``priorityClassName`` into it; placer does not read PriorityClasses);
- a CompositePodGroup's ``spec.schedulingPolicy.gang.minGroupCount``: at least that many of its
  child groups placed together, or none (kube-scheduler's GangScheduling counts a child placed
  once its own gang is; a ``basic`` composite asks for one, which is no rule).

A level's parents are followed up to the Workload API's depth limit (4); a cycle, a chain deeper
than that, or a parent that is not in the input makes the group's pending pods wait or fail as
kube-scheduler's runtime validation does (``GroupChain.problem``, ``GroupChain.missing``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from placer.inputs.fields import Field
from placer.models import GroupDomain, GroupQuorum

__all__ = [
    "COMPOSITE_API",
    "COMPOSITE_KIND",
    "MAX_DEPTH",
    "WORKLOAD_APIS",
    "GroupChain",
    "GroupRules",
    "is_workload",
    "level_name",
    "read_rules",
    "resolve_chain",
]

# The Workload API's PodGroup versions, preferred first: 1.37's beta, 1.37's alpha (which also serves
# CompositePodGroup), 1.36's alpha. A server serving several holds the same objects in each.
WORKLOAD_APIS = ("scheduling.k8s.io/v1beta1", "scheduling.k8s.io/v1alpha3", "scheduling.k8s.io/v1alpha2")
COMPOSITE_API = "scheduling.k8s.io/v1alpha3"
COMPOSITE_KIND = "CompositePodGroup"
MAX_DEPTH = 4  # WorkloadMaxTreeDepth
_MAX_PRIORITY = 1_000_000_000  # HighestUserDefinablePriority


@dataclass(frozen=True)
class GroupRules:
    """The 1.37 rules of one PodGroup or CompositePodGroup."""

    topology_key: str | None = None
    parent: str | None = None  # parentCompositePodGroupName, same namespace
    disruption_all: bool = False
    priority: int | None = None
    min_groups: int | None = None  # a CompositePodGroup's gang minGroupCount (None: basic)


def is_workload(item: Field) -> bool:
    """A Workload object: its templates are what controllers copy into PodGroups, which carry
    every rule placer applies, so it is recognised and otherwise not read."""
    return item.get("kind").text() == "Workload" and item.get("apiVersion").text() in WORKLOAD_APIS


def _topology(constraints: Field) -> str | None:
    topology = constraints.get("topology")
    entries = list(topology.items()) if topology.present() else []
    if len(entries) > 1:
        raise topology.fail(f"at most one topology constraint is supported by the API, got {len(entries)}")
    if not entries:
        return None
    key = entries[0].get("key")
    text = key.required_str()
    if len(text) > 317 or any(c.isspace() for c in text):
        raise key.fail(f"must be a node label key, got {text!r}")
    return text


def _disruption_all(mode: Field) -> bool:
    if not mode.present():
        return False
    single, every = mode.get("single"), mode.get("all")
    if single.present() == every.present():
        raise mode.fail(f"exactly one of single and all must be set, got {mode.value!r}")
    if not isinstance(every.value if every.present() else single.value, dict):
        raise (every if every.present() else single).fail("expected an object ({})")
    return every.present()


def _priority(f: Field) -> int | None:
    if not f.present():
        return None
    value = f.int32(0)
    if value > _MAX_PRIORITY:
        raise f.fail(f"must be at most {_MAX_PRIORITY}, got {value}")
    return value


def read_rules(spec: Field) -> GroupRules:
    """The 1.37 rules of a PodGroup's or CompositePodGroup's ``spec``; a bad value raises naming
    the field."""
    parent = spec.get("parentCompositePodGroupName")
    return GroupRules(
        topology_key=_topology(spec.get("schedulingConstraints")),
        parent=(parent.required_str() if parent.present() and parent.value is not None else None),
        disruption_all=_disruption_all(spec.get("disruptionMode")),
        priority=_priority(spec.get("priority")),
    )


def level_name(kind: str, namespace: str, name: str) -> str:
    """How a level is named in the model, reasons and the validator: ``PodGroup ns/name``."""
    return f"{kind} {namespace}/{name}"


@dataclass(frozen=True)
class GroupChain:
    """What a group's levels give each of its pods."""

    domains: tuple[GroupDomain, ...] = ()
    quorums: tuple[GroupQuorum, ...] = ()
    disruption_unit: str | None = None
    priority: int | None = None
    missing: str | None = None  # a parent not in the input: the pods wait for it (a gate)
    problem: str | None = None  # an invalid layout (cycle, too deep): pending pods are Invalid


def resolve_chain(
    namespace: str, name: str, rules: GroupRules, composites: Mapping[tuple[str, str], GroupRules]
) -> GroupChain:
    """The levels of PodGroup ``namespace/name`` from itself up its composite parents."""
    levels = [(level_name("PodGroup", namespace, name), rules)]
    seen: set[str] = set()
    parent = rules.parent
    while parent is not None:
        if parent in seen:
            return GroupChain(problem=f"CompositePodGroup {namespace}/{parent}: a cycle of parentCompositePodGroupName")
        if len(levels) >= MAX_DEPTH:
            return GroupChain(
                problem=f"PodGroup {namespace}/{name}: its composite groups nest deeper than {MAX_DEPTH} levels"
            )
        seen.add(parent)
        found = composites.get((namespace, parent))
        if found is None:
            return GroupChain(missing=f"CompositePodGroup {namespace}/{parent} not found")
        levels.append((level_name(COMPOSITE_KIND, namespace, parent), found))
        parent = found.parent
    domains = tuple(GroupDomain(group=label, key=r.topology_key) for label, r in levels if r.topology_key)
    quorums = tuple(
        GroupQuorum(group=label, child=levels[k - 1][0], min_groups=r.min_groups)
        for k, (label, r) in enumerate(levels)
        if k and r.min_groups is not None and r.min_groups > 1
    )
    unit = next((label for label, r in reversed(levels) if r.disruption_all), None)
    priority = next((r.priority for _, r in levels if r.priority is not None), None)
    return GroupChain(domains=domains, quorums=quorums, disruption_unit=unit, priority=priority)
