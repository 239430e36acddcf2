"""Workload groups in the global plan (Kubernetes 1.37).

- A group with ``disruptionMode: all`` (``Pod.disruption_unit``) is disrupted whole or not at all:
  its running pods are preempted together, through one decision, or all stay. If some of them
  cannot be evicted (ineligible, outside the plan's movers), none is. Its pods never move (a move
  disrupts too). The unit is preempted only where some pending pod that may preempt every member
  lands on one of the members' nodes.
- A running pod held in a topology domain with its group (``Pod.group_domains``) is not moved:
  its replacement could land outside the domain.
- Victims are counted by group (``units``): the disruption level compares the number of groups
  and lone pods evicted per key, then the pods of evicted groups beyond the first of each.

``whole_units`` widens the plan's candidate victims so that a group's members on other nodes are
decisions too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ortools.sat.python import cp_model

from placer.engine import Snapshot
from placer.models import Pod

if TYPE_CHECKING:
    from placer.plan.model import PlanModel

__all__ = ["build", "members", "units", "whole_units"]


def members(snapshot: Snapshot) -> dict[str, list[tuple[Pod, int]]]:
    """Running pods of every ``disruptionMode: all`` group, with their nodes."""
    out: dict[str, list[tuple[Pod, int]]] = {}
    for n, pods in enumerate(snapshot.running):
        for pod in pods:
            if pod.disruption_unit is not None:
                out.setdefault(pod.disruption_unit, []).append((pod, n))
    return out


def whole_units(
    chosen: Sequence[tuple[Pod, int]], snapshot: Snapshot, may_evict: Callable[[Pod], bool]
) -> list[tuple[Pod, int]]:
    """``chosen`` with every running member of the groups it touches added, or, where some
    member may not be evicted, the group's members left out."""
    groups = members(snapshot)
    touched = {pod.disruption_unit for pod, _ in chosen if pod.disruption_unit is not None}
    whole = {u for u in touched if all(may_evict(p) for p, _ in groups.get(u, []))}
    have = {pod.key for pod, _ in chosen}
    out = [(pod, n) for pod, n in chosen if pod.disruption_unit is None or pod.disruption_unit in whole]
    for unit in sorted(whole):
        out += [(pod, n) for pod, n in groups[unit] if pod.key not in have]
    return out


def units(model: PlanModel) -> dict[str, list[int]]:
    """Each ``disruptionMode: all`` group among the movers: its movers."""
    out: dict[str, list[int]] = {}
    for ri, mover in enumerate(model.movers):
        if mover.pod.disruption_unit is not None:
            out.setdefault(mover.pod.disruption_unit, []).append(ri)
    return out


def build(model: PlanModel) -> None:
    """The group rules above, on a built plan model (called by ``PlanModel.build``)."""
    for ri, mover in enumerate(model.movers):
        if mover.pod.disruption_unit is not None or mover.pod.group_domains:
            for var in model.moves.get(ri, []):
                model.cp.add(var == 0)
    everyone = members(model.current)
    for unit, ris in units(model).items():
        if len(ris) < len(everyone.get(unit, [])) or any(ri not in model.p for ri in ris):
            for ri in ris:
                if ri in model.p:
                    model.cp.add(model.p[ri] == 0)
            continue
        first = model.p[ris[0]]
        for ri in ris[1:]:
            model.cp.add(model.p[ri] == first)
        homes = {model.movers[ri].home for ri in ris}
        preemptors = [
            v
            for (gi, n), v in model.y.items()
            if n in homes and all(model.may_preempt(model.batch.groups[gi], model.movers[ri]) for ri in ris)
        ]
        model.cp.add(first <= cp_model.LinearExpr.sum(preemptors)) if preemptors else model.cp.add(first == 0)
