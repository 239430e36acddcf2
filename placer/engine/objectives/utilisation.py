"""Integer utilisation expressions (basis points) of the touched nodes, shared by strategies."""

from __future__ import annotations

from dataclasses import dataclass

from ortools.sat.python import cp_model

from placer.engine.model import SCALE, Model

__all__ = ["NodeUtil", "node_utilisations"]


@dataclass
class NodeUtil:
    node: int
    exprs: list[cp_model.LinearExprT]  # one per balance resource the node has
    lows: list[int]
    highs: list[int]


def node_utilisations(model: Model) -> list[NodeUtil]:
    scorer = model.scorer
    snap = model.batch.snapshot
    groups = model.batch.groups
    out = []
    for n in model.touched.tolist():
        exprs: list[cp_model.LinearExprT] = []
        lows: list[int] = []
        highs: list[int] = []
        for i, col in enumerate(scorer.cols):
            if not scorer.valid[n, i]:
                continue
            inv = float(scorer.inv_alloc[n, i])
            base = round(SCALE * float(snap.used[n, col]) * inv)
            terms = [(round(SCALE * float(groups[gi].vec[col]) * inv), var) for gi, var in model.by_node[n]]
            terms = [(c, v) for c, v in terms if c]
            exprs.append(base + cp_model.LinearExpr.weighted_sum([v for _, v in terms], [c for c, _ in terms]))
            lows.append(base)
            highs.append(base + sum(c * model.ub(v) for c, v in terms))
        out.append(NodeUtil(node=n, exprs=exprs, lows=lows, highs=highs))
    return out
