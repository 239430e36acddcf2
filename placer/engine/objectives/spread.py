"""``spread`` (kube-scheduler's LeastAllocated in spirit): every node's mean utilisation as close
to the cluster's target as possible; the inter-node term of ``balance`` alone, unweighted."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ortools.sat.python import cp_model

from placer.engine.objectives.loads import SCALE, LoadModel, node_utilisations
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

__all__ = ["Spread"]


class Spread(StrategyObjective):
    name = StrategyName.SPREAD

    def node_cost(self, s: Scorer, rows: IntArray, nodes: IntArray) -> FloatArray:
        _, inter = s.node_terms(s.util_rows(rows, nodes), nodes)
        return inter

    def term(self, model: LoadModel) -> Term:
        nodes = node_utilisations(model)
        factor = resource_factor(nodes)
        terms = node_deviation_terms(model, nodes, factor, w_intra=0, w_inter=WEIGHT_SCALE)
        return Term(f"strategy-{self.name}", cp_model.LinearExpr.sum(terms), False, SCALE * factor * WEIGHT_SCALE)
