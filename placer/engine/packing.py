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

__all__ = ["PLACE_ALL", "PLACE_ALL_SHARE", "place_all", "volume_allows_all"]

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
