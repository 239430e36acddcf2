"""``pack`` (kube-scheduler's MostAllocated in spirit): open as few empty nodes as possible, then
prefer the nodes that were fullest before the decision.

Node cost: ``OPEN`` for a node that was empty before the decision and holds pods after it. Pod
cost: the node's emptiness before the decision (1 - its mean utilisation, at least 0). ``OPEN``
exceeds any batch's total emptiness, so opening a node always costs more than any fill order.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import TYPE_CHECKING

import numpy as np
from ortools.sat.python import cp_model

from placer.engine.objectives.loads import SCALE, LoadEntry, LoadModel
from placer.engine.objectives.strategy import Aux, StrategyObjective, Term
from placer.models import StrategyName

if TYPE_CHECKING:
    from placer.engine.scoring import FloatArray, IntArray, Scorer

__all__ = ["OPEN", "Pack"]

OPEN = 100_000.0  # cost of opening an empty node, in pods' worth of emptiness


def _emptiness(s: Scorer, nodes: IntArray) -> FloatArray:
    fullness = s.util(s.snapshot.used, nodes).sum(axis=1) / s.k[nodes]
    return 1.0 - np.minimum(fullness, 1.0)  # type: ignore[no-any-return]


class Pack(StrategyObjective):
    name = StrategyName.PACK
    descends = False

    def node_cost(self, s: Scorer, rows: IntArray, nodes: IntArray) -> FloatArray:
        empty_before = s.snapshot.used[nodes].sum(axis=1) == 0
        return OPEN * (empty_before & (rows.sum(axis=1) > 0))  # type: ignore[no-any-return]

    def pod_cost(self, s: Scorer, vec: IntArray, nodes: IntArray) -> FloatArray:
        return _emptiness(s, nodes)

    def preselect(self, s: Scorer, nodes: IntArray) -> FloatArray:
        return -s.load[nodes]  # type: ignore[no-any-return]

    def term(self, model: LoadModel) -> Term:
        s = model.scorer
        base = model.base_used()
        terms: list[cp_model.LinearExprT] = []
        aux: list[Aux] = []
        for n, entries in sorted(model.load_entries().items()):
            if base[n].sum() != 0:
                continue
            arriving = [e.var for e in entries if e.sign > 0]
            if not arriving:
                continue
            active = model.cp.new_bool_var(f"active{n}")
            for var in arriving:
                model.cp.add(var <= model.ub(var) * active)
            aux.append(Aux(active, partial(_in_use, arriving)))
            terms.append(round(OPEN * SCALE) * active)
        by_node: dict[int, list[LoadEntry]] = {}
        for _, n, entry in model.placements():
            by_node.setdefault(n, []).append(entry)
        if by_node:
            at = np.array(sorted(by_node), dtype=np.int64)
            for n, e in zip(at.tolist(), _emptiness(s, at).tolist(), strict=True):
                coef = round(SCALE * e)
                if coef:
                    terms.extend(entry.sign * coef * entry.var for entry in by_node[n])
        return Term(f"strategy-{self.name}", cp_model.LinearExpr.sum(terms), False, SCALE, aux=tuple(aux))


def _in_use(arriving: list[cp_model.IntVar], values: Mapping[int, int]) -> int | None:
    """1 when a pod arrives on the node in ``values``, else 0 (None if one is not decided)."""
    if any(var.index not in values for var in arriving):
        return None
    return int(any(values[var.index] for var in arriving))
