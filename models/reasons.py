"""Why a pod stays unplaced, as data: the numbers behind kube-scheduler's FailedScheduling text.

The engine (and the kube-scheduler simulation) fill a ``Reason``: per filter, keyed by what failed
(a resource, a taint, node affinity, ...), how many nodes it turned away. ``describe`` renders it,
at the edge (the CLI, the JSON ``reason`` field, the controller's events and conditions), in
kube-scheduler's words: "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector,
2 Insufficient cpu.". kube-scheduler's reason strings live here only, as the filters' labels.
"""

from __future__ import annotations

from collections import Counter
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from placer.models.cluster import POD_COUNT, Taint
from placer.models.codes import SolveStatus

__all__ = [
    "Filter",
    "GangWait",
    "Insufficient",
    "NodeFilter",
    "PlainFilter",
    "QuorumWait",
    "Reason",
    "Rejected",
    "Untolerated",
    "describe",
    "label",
]


class Filter(StrEnum):
    """A kube-scheduler filter (plugin, or one check of a plugin) that turns nodes away; the value
    is its name in the JSON ``detail``."""

    UNSCHEDULABLE = "NodeUnschedulable"
    TAINT = "TaintToleration"
    NODE_AFFINITY = "NodeAffinity"
    PORTS = "NodePorts"
    RESOURCES = "NodeResourcesFit"
    VOLUME_AFFINITY = "VolumeNodeAffinity"  # a bound PersistentVolume's node affinity
    SPREAD_LABEL = "PodTopologySpreadLabel"  # the node lacks a constraint's topology key
    SPREAD = "PodTopologySpread"  # one more pod there would exceed maxSkew
    POD_AFFINITY = "PodAffinity"
    POD_ANTI_AFFINITY = "PodAntiAffinity"
    EXISTING_ANTI_AFFINITY = "ExistingPodsAntiAffinity"  # a running pod's anti-affinity keeps it away


_SPREAD = "node(s) didn't match pod topology spread constraints"
# kube-scheduler's words for the filters that carry no detail of their own.
_LABELS: dict[Filter, str] = {
    Filter.UNSCHEDULABLE: "node(s) were unschedulable",
    Filter.NODE_AFFINITY: "node(s) didn't match Pod's node affinity/selector",
    Filter.PORTS: "node(s) didn't have free ports for the requested pod ports",
    Filter.VOLUME_AFFINITY: "node(s) had volume node affinity conflict",
    Filter.SPREAD_LABEL: f"{_SPREAD} (missing required label)",
    Filter.SPREAD: _SPREAD,
    Filter.POD_AFFINITY: "node(s) didn't match pod affinity rules",
    Filter.POD_ANTI_AFFINITY: "node(s) didn't match pod anti-affinity rules",
    Filter.EXISTING_ANTI_AFFINITY: "node(s) didn't satisfy existing pods anti-affinity rules",
}
PlainFilter = Literal[
    Filter.UNSCHEDULABLE,
    Filter.NODE_AFFINITY,
    Filter.PORTS,
    Filter.VOLUME_AFFINITY,
    Filter.SPREAD_LABEL,
    Filter.SPREAD,
    Filter.POD_AFFINITY,
    Filter.POD_ANTI_AFFINITY,
    Filter.EXISTING_ANTI_AFFINITY,
]


class _Data(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Rejected(_Data):
    """Nodes a filter with no detail of its own turned away."""

    filter: PlainFilter
    nodes: int


class Untolerated(_Data):
    """Nodes with a taint (NoSchedule/NoExecute) the pod does not tolerate."""

    filter: Literal[Filter.TAINT] = Filter.TAINT
    taint: Taint
    nodes: int


class Insufficient(_Data):
    """Nodes with less of a resource free than the pod requests (the ``pods`` resource: too many
    pods). Amounts are in the resource's base unit (cpu: millicores; memory: bytes)."""

    filter: Literal[Filter.RESOURCES] = Filter.RESOURCES
    resource: str
    nodes: int
    requested: int
    # The most free on any node the resource filter looked at (those passing cordon, taints, node
    # affinity and ports): what the pod would have to make do with.
    most_free: int = Field(alias="mostFree")


NodeFilter = Annotated[Rejected | Untolerated | Insufficient, Field(discriminator="filter")]


class GangWait(_Data):
    gang: str
    size: int
    pending: int  # members seen pending (fewer than size: the gang waits for the rest)
    domain: str | None = None  # the node label one of whose domains must hold the whole gang (1.37)


class QuorumWait(_Data):
    """A CompositePodGroup's ``minGroupCount`` (1.37): ``min_groups`` of its child groups placed
    together, of the ``children`` it has (pending or running)."""

    group: str
    min_groups: int
    children: int


class Reason(_Data):
    nodes: int  # nodes in the cluster
    # Each node counts for the first filter it fails, in kube-scheduler's order; the resource
    # filter counts a node once per resource it lacks.
    filters: tuple[NodeFilter, ...] = ()
    volumes: str | None = None  # kube-scheduler's VolumeBinding message: no node can take the volumes
    gang: GangWait | None = None  # the pod's gang: incomplete, or not placeable whole
    quorum: QuorumWait | None = None  # the composite gang above the pod: too few child groups
    solver: SolveStatus | None = None  # the solver stopped (this status) before deciding the pod
    unsupported: str | None = None  # a constraint placer does not honour
    invalid: str | None = None  # a field of the pod placer cannot read, named
    # PodDisruptionBudgets (namespace/name) allowing no disruption that alone keep the pod from a
    # node (preempting or moving through them would make room): kube-scheduler preempts through
    # them as a last resort, placer never does.
    pdbs: tuple[str, ...] = ()


def label(entry: Rejected | Untolerated | Insufficient) -> str:
    """kube-scheduler's words for one filter's nodes (without the count)."""
    if isinstance(entry, Insufficient):
        return "Too many pods" if entry.resource == POD_COUNT else f"Insufficient {entry.resource}"
    if isinstance(entry, Untolerated):
        return f"node(s) had untolerated taint {{{entry.taint.key}: {entry.taint.value}}}"
    return _LABELS[entry.filter]


def _filters(reason: Reason) -> str:
    if reason.volumes is not None:
        return f"0/{reason.nodes} nodes are available: {reason.volumes}."
    counts: Counter[str] = Counter()
    for f in reason.filters:  # a taint with two effects is one reason in kube-scheduler's words
        counts[label(f)] += f.nodes
    parts = sorted(f"{n} {text}" for text, n in counts.items())
    return f"0/{reason.nodes} nodes are available: {', '.join(parts)}."


def describe(reason: Reason) -> str:
    """kube-scheduler's message for the reason (placer's own words for gangs and the solver)."""
    if reason.invalid is not None:
        return f"placer cannot read this pod: {reason.invalid}"
    if reason.unsupported is not None:
        return reason.unsupported
    gang = reason.gang
    if gang is not None and gang.pending < gang.size:
        return f"gang {gang.gang} waits for all of its {gang.size} pods ({gang.pending} pending)"
    quorum = reason.quorum
    if quorum is not None and quorum.children < quorum.min_groups:
        return f"{quorum.group} waits for {quorum.min_groups} child groups (minGroupCount), {quorum.children} exist"
    text = _filters(reason)
    if gang is not None:
        detail = "each fits alone, not all together" if not reason.filters and reason.volumes is None else text
        where = f" in one domain of {gang.domain}" if gang.domain else ""
        text = f"gang {gang.gang} of {gang.size} pods cannot be placed whole{where}: {detail}"
    if quorum is not None:
        text = (
            f"{quorum.group}: fewer than {quorum.min_groups} of its {quorum.children} child groups "
            f"(minGroupCount) can be placed together: {text}"
        )
    if reason.solver is not None:
        text = f"the solver stopped ({reason.solver}) before deciding this pod; {text}"
    if reason.pdbs:
        budgets = ", ".join(reason.pdbs)
        text += (
            f" Evictions that would make room need PodDisruptionBudget {budgets}, which allows no"
            " disruption: placer never evicts through a PodDisruptionBudget."
        )
    return text
