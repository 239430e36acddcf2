"""Tight batches are packing problems: try to place every pod before maximising.

When the greedy pass leaves pods unplaced that have feasible nodes, the placed-by-key level is a
multi-dimensional packing problem. A feasibility search for "every placeable pod placed" (no
objective, largest pods decided first, first node first) settles such instances far faster than
maximising the count does, and when it succeeds the placed level is optimal. It runs only when the
volume bound allows it: per resource, what the pods ask for fits in the free room of the nodes
they may use. Together with the first-pod symmetry breaking among identical nodes
(``placer.engine.constraints.symmetry``) this is the packing formulation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from ortools.sat.python import cp_model

from placer.engine.batch import Batch
from placer.engine.constraints.symmetry import Symmetry
from placer.engine.greedy import Assignment
from placer.engine.model import Model
from placer.models import Pod

__all__ = [
    "PLACE_ALL",
    "PLACE_ALL_SHARE",
    "Alternative",
    "adopt",
    "better_start",
    "place_all",
    "volume_allows_all",
]

# Another answer for a tight batch, computed on demand (the service passes kube-scheduler's).
Alternative = Callable[[], Sequence[tuple[Pod, int]]]

PLACE_ALL = "place-all"
PLACE_ALL_SHARE = 0.6  # of the budget left; the maximising level keeps the rest


def _placeable(model: Model) -> list[int]:
    return [gi for gi, row in enumerate(model.by_group) if row and len(model.batch.groups[gi].feasible)]


def volume_allows_all(model: Model) -> bool:
    """Per resource, the placeable pods' total request fits the free room of their nodes, and every
    group has variables enough for all its pods."""
    batch: Batch = model.batch
    groups = _placeable(model)
    if not groups:
        return False
    demand = np.zeros(len(batch.snapshot.resources), dtype=np.int64)
    nodes: set[int] = set()
    for gi in groups:
        group = batch.groups[gi]
        if sum(model.ub(v) for _, v in model.by_group[gi]) < group.size:
            return False
        demand += group.vec * group.size
        nodes.update(n for n, _ in model.by_group[gi])
    free = batch.snapshot.free[sorted(nodes)].sum(axis=0)
    return bool(np.all(demand <= free))


def place_all(model: Model, symmetry: Symmetry) -> Callable[[cp_model.CpModel], None]:
    """Adds, to a copy of ``model``'s CP-SAT model, "every placeable pod placed" and the search
    order: largest groups first (the symmetry's pod order), each on the first node it can take."""
    groups = _placeable(model)
    order = symmetry.group_order or list(range(len(model.batch.groups)))

    def restrict(cp: cp_model.CpModel) -> None:
        def own(var: cp_model.IntVar) -> cp_model.IntVar:
            return cp.get_int_var_from_proto_index(var.index)

        for gi in groups:
            row = [own(v) for _, v in model.by_group[gi]]
            cp.add(cp_model.LinearExpr.sum(row) == model.batch.groups[gi].size)
        decisions = [own(v) for gi in order for _, v in sorted(model.by_group[gi], key=lambda e: e[0])]
        cp.add_decision_strategy(decisions, cp_model.CHOOSE_FIRST, cp_model.SELECT_MAX_VALUE)

    return restrict


def better_start(batch: Batch, first: Assignment, second: Assignment) -> Assignment:
    """The greedy answer that places more pods per key, compared from the highest key down."""

    def per_key(assignment: Assignment) -> list[int]:
        counts: dict[int, int] = {}
        for group, nodes in zip(batch.groups, assignment, strict=True):
            counts[batch.rank(group)] = counts.get(batch.rank(group), 0) + int((nodes >= 0).sum())
        return [counts.get(r, 0) for r in sorted(counts, reverse=True)]

    return second if per_key(second) > per_key(first) else first


def adopt(batch: Batch, placements: Sequence[tuple[Pod, int]]) -> Assignment | None:
    """Another answer as a start for this batch, if it is one: every pod on a node of its group's
    feasible set, no node over capacity, host-port groups at most one pod per node, no gang in
    part. Batches with inter-pod rules are left to the engine's own start (None). The nodes it
    uses join the groups' candidates, so it stays a solution of the pruned model."""
    if not batch.topology.empty:
        return None
    group_of = {pod.key: gi for gi, g in enumerate(batch.groups) for pod in g.pods}
    chosen: list[list[int]] = [[] for _ in batch.groups]
    used = batch.snapshot.used.copy()
    for pod, n in placements:
        gi = group_of.get(pod.key)
        if gi is None:
            return None
        chosen[gi].append(n)
        used[n] += batch.groups[gi].vec
    if np.any(used > batch.snapshot.alloc):
        return None
    gangs: dict[str, tuple[int, int]] = {}
    for gi, group in enumerate(batch.groups):
        nodes = np.array(chosen[gi], dtype=np.int64)
        if len(nodes) and not np.all(np.isin(nodes, group.feasible)):
            return None
        if group.has_ports and len(set(chosen[gi])) < len(chosen[gi]):
            return None
        if group.gang is not None:
            placed, size = gangs.get(group.gang, (0, 0))
            gangs[group.gang] = (placed + len(nodes), size + group.size)
    if any(0 < placed < size for placed, size in gangs.values()):
        return None
    out: Assignment = []
    for gi, group in enumerate(batch.groups):
        nodes = np.array(chosen[gi], dtype=np.int64)
        group.candidates = np.union1d(group.candidates, nodes).astype(np.int64)
        out.append(np.concatenate([nodes, np.full(group.size - len(nodes), -1, dtype=np.int64)]))
    return out
