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

from collections.abc import Callable

import numpy as np
from ortools.sat.python import cp_model

from placer.engine.batch import Batch
from placer.engine.constraints.symmetry import Symmetry
from placer.engine.model import Model
from placer.engine.packing import completion, tuning
from placer.engine.scoring import IntArray

__all__ = ["PLACE_ALL", "place_all", "slack", "volume_allows_all", "widen"]

PLACE_ALL = "place-all"


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
    Every group gets all its feasible nodes, while the pairs stay within ``tuning.WIDE_PAIRS``."""
    if completion.applies(batch) is None:
        return
    if sum(len(g.feasible) for g in batch.groups) <= tuning.WIDE_PAIRS:
        for group in batch.groups:
            group.candidates = np.union1d(group.candidates, group.feasible).astype(np.int64)
