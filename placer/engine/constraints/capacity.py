"""Capacity: on every touched node, the batch's requests fit the free room of every resource.

Each resource column is divided by the gcd of all its numbers in the model, so coefficients stay
small and exact: ten pods of 1G fit a node with 10G free.
"""

from __future__ import annotations

import math

from ortools.sat.python import cp_model

from placer.engine.model import Model

__all__ = ["build"]

CHECK_EVERY = 64  # nodes between two checks of the deadline (``Model.check``)


def build(model: Model) -> None:
    snap = model.batch.snapshot
    groups = model.batch.groups
    free = snap.free
    for j in range(len(snap.resources)):
        numbers = [int(g.vec[j]) for g in groups if g.vec[j] > 0]
        if not numbers:
            continue
        numbers += [int(free[n, j]) for n in model.touched.tolist() if free[n, j] > 0]
        unit = math.gcd(*numbers)
        for k, (n, entries) in enumerate(model.by_node.items()):
            if k % CHECK_EVERY == 0:
                model.check()
            terms = [(int(groups[gi].vec[j]) // unit, var) for gi, var in entries if groups[gi].vec[j] > 0]
            if not terms:
                continue
            room = int(free[n, j]) // unit if free[n, j] > 0 else 0
            worst = sum(c * model.ub(v) for c, v in terms)
            if worst <= room:
                continue  # cannot bind: every variable's bound already fits
            model.cp.add(cp_model.LinearExpr.weighted_sum([v for _, v in terms], [c for c, _ in terms]) <= room)
