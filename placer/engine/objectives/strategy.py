"""Objective (4), the placement strategy, as one integer expression to minimise.

``balance``: per touched node, the L1 deviation of each resource's utilisation from the node's
mean (intra-node skew, a linear proxy of TBESK's Z) plus the distance of the node's mean
utilisation from the cluster target (inter-node spread, a proxy of std_score), plus the TBESK
pod-class cost (the class-weighted utilisation a pod meets on its node). ``spread``: the
inter-node term alone. ``pack``: open as few empty nodes as possible, then prefer full nodes.
The integer objective equals the float cost in ``placer.engine.scoring`` times ``UNIT``.
"""

from __future__ import annotations

import numpy as np
from ortools.sat.python import cp_model

from placer.engine.model import SCALE, Model
from placer.engine.objectives.utilisation import node_utilisations

__all__ = ["UNIT", "build"]

_LCM = 12  # lcm(1, 2, 3, 4): the number of balance resources a node can have
_W = 100  # float weights are kept to two decimals
UNIT = SCALE * _LCM * _W


def _abs_var(model: Model, expr: cp_model.LinearExprT, bound: int, name: str) -> cp_model.IntVar:
    var = model.cp.new_int_var(0, max(bound, 0), name)
    model.cp.add(var >= expr)
    model.cp.add(var >= -expr)
    return var


def _node_terms(model: Model, *, intra: bool) -> list[cp_model.LinearExprT]:
    scorer = model.scorer
    w_intra = round(scorer.w_intra * _W)
    w_inter = round(scorer.w_inter * _W) if intra else _W
    target = round(SCALE * scorer.target)
    terms: list[cp_model.LinearExprT] = []
    for nu in node_utilisations(model):
        k = len(nu.exprs)
        if k == 0:
            continue
        total = cp_model.LinearExpr.sum(nu.exprs)
        top = sum(nu.highs)
        factor = _LCM // k
        if intra and w_intra:
            for j, u in enumerate(nu.exprs):
                dev = _abs_var(
                    model,
                    cp_model.LinearExpr.weighted_sum([u, total], [k, -1]),
                    k * max(nu.highs[j], top),
                    f"dev{nu.node}_{j}",
                )
                terms.append(w_intra * factor * dev)
        if w_inter:
            d = _abs_var(model, total - k * target, max(top, k * target), f"spread{nu.node}")
            terms.append(w_inter * factor * d)
    return terms


def _class_terms(model: Model) -> list[cp_model.LinearExprT]:
    scorer = model.scorer
    w = round(scorer.w_class * _W)
    if not w:
        return []
    used = model.batch.snapshot.used
    terms: list[cp_model.LinearExprT] = []
    for gi, row in enumerate(model.by_group):
        if not row:
            continue
        nodes = np.array([n for n, _ in row], dtype=np.int64)
        cost = scorer.class_cost(model.batch.groups[gi].vec, nodes, used)
        for (_, var), c in zip(row, cost.tolist(), strict=True):
            coef = round(c * SCALE * _LCM) * w
            if coef:
                terms.append(coef * var)
    return terms


def _pack(model: Model) -> cp_model.LinearExprT:
    snap = model.batch.snapshot
    scorer = model.scorer
    terms: list[cp_model.LinearExprT] = []
    fullness_terms: list[cp_model.LinearExprT] = []
    for n in model.touched.tolist():
        entries = model.by_node[n]
        if snap.used[n].sum() == 0:
            active = model.cp.new_bool_var(f"active{n}")
            for _, var in entries:
                model.cp.add(var <= model.ub(var) * active)
            terms.append(active)
        k = max(int(scorer.valid[n].sum()), 1)
        fullness = float((snap.used[n, scorer.cols] * scorer.inv_alloc[n]).sum()) / k
        emptiness = SCALE - min(SCALE, round(SCALE * fullness))
        fullness_terms.extend(emptiness * var for _, var in entries)
    big = SCALE * sum(g.size for g in model.batch.groups) + 1
    return big * cp_model.LinearExpr.sum(terms) + cp_model.LinearExpr.sum(fullness_terms)


def build(model: Model, strategy: str) -> cp_model.LinearExprT:
    if strategy == "pack":
        return _pack(model)
    if strategy == "spread":
        return cp_model.LinearExpr.sum(_node_terms(model, intra=False))
    return cp_model.LinearExpr.sum(_node_terms(model, intra=True) + _class_terms(model))
