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

    def weights(self, s: Scorer) -> tuple[float, float, float]:
        """(intra-node skew, inter-node distance, pod class) weights."""
        return s.w_intra, s.w_inter, s.w_class

    def node_cost(self, s: Scorer, rows: IntArray, nodes: IntArray) -> FloatArray:
        w_intra, w_inter, _ = self.weights(s)
        intra, inter = s.node_terms(s.util_rows(rows, nodes), nodes)
        return w_intra * intra + w_inter * inter

    def pod_cost(self, s: Scorer, vec: IntArray, nodes: IntArray) -> FloatArray:
        w_class = self.weights(s)[2]
        if not w_class:
            return np.zeros(len(nodes))
        return w_class * s.class_cost(vec, nodes)

    def term(self, model: LoadModel) -> Term:
        s = model.scorer
        weights = [round(w * WEIGHT_SCALE) for w in self.weights(s)]
        nodes = node_utilisations(model)
        factor = resource_factor(nodes)
        terms = node_deviation_terms(model, nodes, factor, w_intra=weights[0], w_inter=weights[1])
        w_class = weights[2]
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
