"""kube-scheduler's DefaultPreemption, simulated for one pod that fits nowhere.

By spec.priority only (no restart tiers). Candidate nodes: those whose first failing filter is one
preemption may resolve (ports, resources, topology spread skew, anti-affinity of either side; see
``filters``), where the pod passes every filter once every pod of lower priority left. Like
upstream's dry run, the filters are run again on the node with the pods removed: resources and
ports, and the topology filters on a per-node copy of their PreFilter state updated pod by pod.
On each, victims are chosen by reprieve: all lower-priority pods are removed, then added back one
by one, most important first (higher priority, then earlier start), PDB-violating pods first,
keeping back each one the pod still passes with. The node is picked by: fewest PDB violations,
lowest highest-victim priority, smallest priority sum, fewest victims, latest start of the
highest-priority victims, then name. ``preemptionPolicy: Never`` pods never preempt.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from placer.baseline.filters import PodFilters, Trial
from placer.engine import BoolArray, Snapshot, pod_vector, ports_clash, selector_matches
from placer.models import Pod, PodDisruptionBudget

__all__ = ["Preemption", "preempt"]

_INT32 = 2**31


@dataclass(frozen=True)
class Preemption:
    node: int
    victims: tuple[Pod, ...]


def _fits(snap: Snapshot, pod: Pod, node: int, gone: Sequence[Pod]) -> bool:
    free = snap.free[node].copy()
    for v in gone:
        free += pod_vector(v, snap.resources)
    if not np.all(free >= pod_vector(pod, snap.resources)):
        return False
    keys = {v.key for v in gone}
    used_ports = [p for other in snap.running[node] if other.key not in keys for p in other.host_ports]
    return not ports_clash(pod.host_ports, used_ports)


def _violates(pod: Pod, pdbs: Sequence[PodDisruptionBudget], budget: dict[int, int]) -> list[int]:
    return [
        i
        for i, b in enumerate(pdbs)
        if b.namespace == pod.namespace and selector_matches(b.selector, pod.labels) and budget[i] <= 0
    ]


def _passes(snap: Snapshot, pod: Pod, node: int, gone: Sequence[Pod], trial: Trial) -> bool:
    return _fits(snap, pod, node, gone) and trial.passes()


def _victims(
    snap: Snapshot, pod: Pod, node: int, pdbs: Sequence[PodDisruptionBudget], trial: Trial
) -> tuple[list[Pod], int] | None:
    lower = [p for p in snap.running[node] if p.priority < pod.priority]
    for p in lower:
        trial.remove(p)
    if not lower or not _passes(snap, pod, node, lower, trial):
        return None
    budget = {i: b.disruptions_allowed for i, b in enumerate(pdbs)}
    important = sorted(lower, key=lambda p: (-p.priority, p.start_time or "~", p.key))
    violating = [p for p in important if _violates(p, pdbs, budget)]
    fine = [p for p in important if p not in violating]
    removed = list(lower)
    victims: list[Pod] = []
    violations = 0
    for group, is_violating in ((violating, True), (fine, False)):
        for p in group:
            removed.remove(p)
            trial.add(p)
            if not _passes(snap, pod, node, removed, trial):
                removed.append(p)
                trial.remove(p)
                victims.append(p)
                violations += int(is_violating)
    return victims, violations


def preempt(
    snap: Snapshot,
    filters: PodFilters,
    candidates: BoolArray,
    pdbs: Sequence[PodDisruptionBudget],
    name_rank: Sequence[int],
) -> Preemption | None:
    """The node and victims DefaultPreemption picks among ``candidates`` (nodes whose first failing
    filter is resolvable), or None."""
    pod = filters.pod
    if pod.preemption_policy == "Never":
        return None
    best: tuple[tuple[object, ...], Preemption] | None = None
    for node in np.flatnonzero(candidates & filters.static_ok).tolist():
        found = _victims(snap, pod, node, pdbs, filters.trial(node))
        if found is None or not found[0]:
            continue
        victims, violations = found
        top = max(v.priority for v in victims)
        top_start = min((v.start_time or "~") for v in victims if v.priority == top)
        rank = (
            violations,
            top,
            sum(v.priority + _INT32 for v in victims),
            len(victims),
            _Desc(top_start),
            name_rank[node],
        )
        if best is None or rank < best[0]:
            best = (rank, Preemption(node=node, victims=tuple(victims)))
    return best[1] if best else None


class _Desc:
    """Orders strings descending (the latest start time wins)."""

    def __init__(self, value: str) -> None:
        self.value = value

    def __lt__(self, other: _Desc) -> bool:
        return self.value > other.value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Desc) and self.value == other.value

    def __hash__(self) -> int:
        return hash(self.value)
