"""``balance`` (the default strategy): even load inside each node and across nodes, TBESK-style.

Per node: the L1 deviation of each balance resource's utilisation from the node's mean (intra-node
skew, a linear proxy of TBESK's Z), weighted ``intraNode``, plus the distance of the node's mean
utilisation from the cluster's target (inter-node spread, a proxy of std_score), weighted
``interNode``. Per pod: the TBESK pod-class cost, the class-weighted utilisation the pod meets on
its node, weighted ``podClass``. Any number of balance resources (``balance.resources``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from ortools.sat.python import cp_model

from placer.engine.objectives.loads import SCALE, LoadEntry, LoadModel, node_utilisations
from placer.engine.objectives.strategy import (
    WEIGHT_SCALE,
    StrategyObjective,
    Term,
    node_deviation_terms,
    resource_factor,
)
from placer.models import StrategyName

if TYPE_CHECKING:
    from placer.engine.scoring import FloatArray, IntArray, Scorer

__all__ = ["Balance"]


class Balance(StrategyObjective):
    name = StrategyName.BALANCE

    def node_cost(self, s: Scorer, rows: IntArray, nodes: IntArray) -> FloatArray:
        intra, inter = s.node_terms(s.util_rows(rows, nodes), nodes)
        return s.w_intra * intra + s.w_inter * inter

    def pod_cost(self, s: Scorer, vec: IntArray, nodes: IntArray) -> FloatArray:
        if not s.w_class:
            return np.zeros(len(nodes))
        return s.w_class * s.class_cost(vec, nodes)

    def term(self, model: LoadModel) -> Term:
        s = model.scorer
        nodes = node_utilisations(model)
        factor = resource_factor(nodes)
        terms = node_deviation_terms(
            model,
            nodes,
            factor,
            w_intra=round(s.w_intra * WEIGHT_SCALE),
            w_inter=round(s.w_inter * WEIGHT_SCALE),
        )
        w_class = round(s.w_class * WEIGHT_SCALE)
        if w_class:
            by_vec: dict[bytes, tuple[IntArray, list[tuple[int, LoadEntry]]]] = {}
            for vec, n, entry in model.placements():
                by_vec.setdefault(vec.tobytes(), (vec, []))[1].append((n, entry))
            for vec, entries in by_vec.values():
                at = np.array([n for n, _ in entries], dtype=np.int64)
                cost = s.class_cost(vec, at)
                for (_, entry), c in zip(entries, cost.tolist(), strict=True):
                    coef = round(c * SCALE * factor) * w_class
                    if coef:
                        terms.append(entry.sign * coef * entry.var)
        return Term(f"strategy-{self.name}", cp_model.LinearExpr.sum(terms), False, SCALE * factor * WEIGHT_SCALE)
