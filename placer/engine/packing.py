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

from placer.engine import completion
from placer.engine.batch import Batch
from placer.engine.constraints.symmetry import Symmetry
from placer.engine.greedy import Assignment
from placer.engine.levels import DETERMINISTIC_UNITS_PER_SECOND, Budget
from placer.engine.model import Model
from placer.engine.scoring import IntArray
from placer.engine.topology import TopologyState
from placer.models import Pod

__all__ = [
    "COMPLETION_SHARE",
    "PLACE_ALL",
    "PLACE_ALL_SHARE",
    "Alternative",
    "adopt",
    "better_start",
    "completed",
    "place_all",
    "volume_allows_all",
    "widen",
]

# Another answer for a tight batch, computed on demand (the service passes kube-scheduler's).
Alternative = Callable[[], Sequence[tuple[Pod, int]]]

PLACE_ALL = "place-all"
PLACE_ALL_SHARE = 0.6  # of the budget left; the maximising level keeps the rest
COMPLETION_SHARE = 0.7  # of the budget left, for the bin-completion search on identical nodes
WIDE_PAIRS = 20_000  # most (pod group, node) pairs a tight batch on identical nodes is widened to


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


def slack(model: Model) -> IntArray:
    """Per resource, the free room of the nodes the placeable pods may use minus what those pods
    ask for: once every placeable pod is placed, the room those nodes keep, in total."""
    batch: Batch = model.batch
    groups = _placeable(model)
    demand = sum(
        (batch.groups[gi].vec * batch.groups[gi].size for gi in groups),
        np.zeros(len(batch.snapshot.resources), dtype=np.int64),
    )
    nodes = sorted({n for gi in groups for n, _ in model.by_group[gi]})
    return np.asarray(batch.snapshot.free[nodes].sum(axis=0) - demand, dtype=np.int64)


def _fill(model: Model, cp: cp_model.CpModel, own: Callable[[cp_model.IntVar], cp_model.IntVar]) -> None:
    """Redundant bounds once every placeable pod must be placed (Shaw's packing constraint): no
    node may keep more room of a resource than all of them keep together, so a node's load is at
    least its free room minus the total slack; with no slack, every node is filled exactly, which
    propagates far better than the capacity inequalities alone."""
    free = model.batch.snapshot.free
    left = slack(model)
    groups = model.batch.groups
    for n, row in model.by_node.items():
        for j in np.flatnonzero(free[n] > left).tolist():
            terms = [(int(groups[gi].vec[j]), own(v)) for gi, v in row if groups[gi].vec[j] > 0]
            if terms:
                expr = cp_model.LinearExpr.weighted_sum([v for _, v in terms], [c for c, _ in terms])
                cp.add(expr >= int(free[n, j] - left[j]))


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
        _fill(model, cp, own)
        decisions = [own(v) for gi in order for _, v in sorted(model.by_group[gi], key=lambda e: e[0])]
        cp.add_decision_strategy(decisions, cp_model.CHOOSE_FIRST, cp_model.SELECT_MAX_VALUE)

    return restrict


def widen(batch: Batch) -> None:
    """A tight batch on identical nodes (``completion.applies``) may need every node, but the
    candidate sets keep the few best nodes per group, and on alike nodes the same few for every
    group: the model could not use the rest, and "every pod placed" would be infeasible in it.
    Every group gets all its feasible nodes, while the pairs stay within ``WIDE_PAIRS``."""
    if completion.applies(batch) is None:
        return
    if sum(len(g.feasible) for g in batch.groups) <= WIDE_PAIRS:
        for group in batch.groups:
            group.candidates = np.union1d(group.candidates, group.feasible).astype(np.int64)


def completed(batch: Batch, budget: Budget) -> Assignment | None:
    """Every placeable pod placed by bin completion (``placer.engine.completion``), when the batch
    is a plain packing on identical nodes and the search succeeds within ``COMPLETION_SHARE`` of
    the budget left (search steps under a deterministic budget, charged to it); the answer is
    checked like any other start (``adopt``)."""
    nodes = completion.applies(batch)
    if nodes is None:
        return None
    share = COMPLETION_SHARE * max(budget.left(), 0.0)
    if budget.deterministic:
        per_unit = completion.STEPS_PER_SECOND / DETERMINISTIC_UNITS_PER_SECOND
        found, used = completion.complete(batch, nodes, steps=int(share * per_unit))
        budget.charge(used / per_unit)
    else:
        found, _ = completion.complete(batch, nodes, seconds=share)
    if found is None:
        return None
    placements = [
        (pod, int(n))
        for group, picked in zip(batch.groups, found, strict=True)
        for pod, n in zip(group.pods, picked.tolist(), strict=True)
        if n >= 0
    ]
    return adopt(batch, placements)


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
    part, and, in a batch with inter-pod rules, every pod allowed by the hard rules where it goes,
    the pods taken in the answer's order (as the greedy pass places them, and as kube-scheduler
    does). The nodes it uses join the groups' candidates, so it stays a solution of the pruned
    model."""
    group_of = {pod.key: gi for gi, g in enumerate(batch.groups) for pod in g.pods}
    chosen: list[list[int]] = [[] for _ in batch.groups]
    used = batch.snapshot.used.copy()
    topo = None if batch.topology.empty else TopologyState(batch.topology, [g.size for g in batch.groups])
    for pod, n in placements:
        gi = group_of.get(pod.key)
        if gi is None:
            return None
        if topo is not None:
            if not topo.allowed(gi, np.array([n], dtype=np.int64), soft=False)[0]:
                return None
            topo.add(gi, n)
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
