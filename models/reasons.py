"""Why a pod stays unplaced, as data: the numbers behind kube-scheduler's FailedScheduling text.

The engine fills a ``Reason``; ``describe`` renders it, at the edge (the CLI, the JSON ``reason``
field, the controller's events and conditions), in kube-scheduler's words: "0/3 nodes are
available: 1 node(s) didn't match Pod's node affinity/selector, 2 Insufficient cpu.".
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["FilterCount", "GangWait", "Reason", "Shortfall", "describe"]


class _Data(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class FilterCount(_Data):
    """How many nodes a filter turned away (each node counts for the first filter it fails; the
    resource filter counts a node once per resource it lacks)."""

    filter: str  # kube-scheduler's words for it, e.g. "Insufficient cpu"
    nodes: int


class Shortfall(_Data):
    """A resource the pod asks for more of than nodes have free."""

    resource: str
    requested: int  # in the resource's base unit (cpu: millicores)
    most_free: int = Field(alias="mostFree")  # the most any node passing the other filters has free
    nodes: int  # nodes that pass the other filters but lack this resource


class GangWait(_Data):
    gang: str
    size: int
    pending: int  # members seen pending (fewer than size: the gang waits for the rest)


class Reason(_Data):
    nodes: int  # nodes in the cluster
    filters: tuple[FilterCount, ...] = ()
    shortfalls: tuple[Shortfall, ...] = ()
    volumes: str | None = None  # kube-scheduler's VolumeBinding message: no node can take the volumes
    gang: GangWait | None = None  # the pod's gang: incomplete, or not placeable whole
    solver: str | None = None  # the solver stopped (this status) before deciding the pod
    unsupported: str | None = None  # a constraint placer does not honour


def _filters(reason: Reason) -> str:
    if reason.volumes is not None:
        return f"0/{reason.nodes} nodes are available: {reason.volumes}."
    parts = sorted(f"{f.nodes} {f.filter}" for f in reason.filters)
    return f"0/{reason.nodes} nodes are available: {', '.join(parts)}."


def describe(reason: Reason) -> str:
    """kube-scheduler's message for the reason (placer's own words for gangs and the solver)."""
    if reason.unsupported is not None:
        return reason.unsupported
    gang = reason.gang
    if gang is not None and gang.pending < gang.size:
        return f"gang {gang.gang} waits for all of its {gang.size} pods ({gang.pending} pending)"
    text = _filters(reason)
    if gang is not None:
        detail = "each fits alone, not all together" if not reason.filters and reason.volumes is None else text
        text = f"gang {gang.gang} of {gang.size} pods cannot be placed whole: {detail}"
    if reason.solver is not None:
        text = f"the solver stopped ({reason.solver}) before deciding this pod; {text}"
    return text
