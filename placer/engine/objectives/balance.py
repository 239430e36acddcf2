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
    Aux,
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
    spreads_ties = True  # the cost is flat past a node's target: the load tells nodes apart

    def weights(self, s: Scorer) -> tuple[float, float, float]:
        """(intra-node skew, inter-node distance, pod class) weights."""
        return s.w_intra, s.w_inter, s.w_class

    def preselect(self, s: Scorer, nodes: IntArray) -> FloatArray:
        """Aimed at per node (``Scorer.aim``): the nodes the batch should fill, most room to their
        aim first, then the others by load; otherwise by load."""
        load: FloatArray = s.load[nodes]
        if s.fill is None:
            return load
        room = s.fill[nodes] - load
        return np.where(room > 0, -room, load)

    def node_cost(self, s: Scorer, rows: IntArray, nodes: IntArray) -> FloatArray:
        return self._util_cost(s, s.util_rows(rows, nodes), nodes)

    def _util_cost(self, s: Scorer, util: FloatArray, nodes: IntArray) -> FloatArray:
        """``node_cost`` from the nodes' utilisations of the balance resources."""
        w_intra, w_inter, _ = self.weights(s)
        intra, inter = s.node_terms(util, nodes)
        return w_intra * intra + w_inter * inter

    # The greedy pass and descent call these per pod: the same definition, with the utilisations
    # computed once and shifted by the pod's share instead of from two sets of resource rows.
    def delta_rows(self, s: Scorer, vec: IntArray, nodes: IntArray, rows: IntArray) -> FloatArray:
        if len(nodes) == 0:
            return np.zeros(0)
        before = s.util_rows(rows, nodes)
        after = before + vec[s.cols] * s.inv_alloc[nodes]
        change = self._util_cost(s, after, nodes) - self._util_cost(s, before, nodes)
        # The class cost the pod meets as ``used`` stands: against the state before the decision,
        # a node the pass already filled still looked empty and drew identical pods (a 2nd, a 3rd)
        # that the nodes loaded before the batch should have had.
        w_class = self.weights(s)[2]
        return change + (w_class * s.class_cost_rows(vec, nodes, rows) if w_class else 0.0)

    def removal(self, s: Scorer, vec: IntArray, node: int, used: IntArray) -> float:
        at = np.array([node], dtype=np.int64)
        before = s.util(used, at)
        after = before - vec[s.cols] * s.inv_alloc[at]
        change = self._util_cost(s, after, at) - self._util_cost(s, before, at) - self.pod_cost(s, vec, at)
        return float(change[0])

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
        aux: list[Aux] = []
        terms = node_deviation_terms(model, nodes, factor, aux, w_intra=weights[0], w_inter=weights[1])
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
        unit = SCALE * factor * WEIGHT_SCALE
        return Term(f"strategy-{self.name}", cp_model.LinearExpr.sum(terms), False, unit, aux=tuple(aux))
