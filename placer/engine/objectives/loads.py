"""What an objective needs of a CP-SAT model, and integer utilisation built from it.

Both models place pod vectors on nodes through integer variables: the batch engine's ``y[g, n]``
(pods of group g on node n) and the global plan's ``y``, ``z`` (a moved pod's replacement lands
on n, its old node loses it) and ``p`` (a preempted pod leaves). A model exposes them as signed
*load entries* per node and as *placements* (pods this decision puts on a node, which the
TBESK pod-class cost scores); strategy objectives are written once against that view.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ortools.sat.python import cp_model

if TYPE_CHECKING:
    from placer.engine.scoring import IntArray, Scorer


__all__ = ["SCALE", "LoadEntry", "LoadModel", "NodeUtil", "node_utilisations"]

SCALE = 10_000  # utilisation in basis points


@dataclass(frozen=True)
class LoadEntry:
    vec: IntArray  # the pod's request vector
    var: cp_model.IntVar  # how many such pods (0..ub)
    sign: int  # +1 arrives on the node, -1 leaves it


class LoadModel(Protocol):
    cp: cp_model.CpModel
    scorer: Scorer

    def ub(self, var: cp_model.IntVar) -> int: ...

    def base_used(self) -> IntArray:
        """Each node's use with every decision variable at 0."""
        ...

    def load_entries(self) -> dict[int, list[LoadEntry]]:
        """Per node, the variables that change its use."""
        ...

    def placements(self) -> list[tuple[IntArray, int, LoadEntry]]:
        """(pod vector, node, entry) for every pod this decision places on a node (sign +1) or
        takes off the node it runs on (sign -1): the pods the per-pod strategy cost counts."""
        ...


@dataclass
class NodeUtil:
    node: int
    exprs: list[cp_model.LinearExprT]  # one per balance resource the node has, in basis points
    lows: list[int]
    highs: list[int]


def node_utilisations(model: LoadModel) -> list[NodeUtil]:
    """Integer utilisation (basis points) of each balance resource on every node a variable touches."""
    scorer = model.scorer
    base = model.base_used()
    out = []
    for n, entries in sorted(model.load_entries().items()):
        exprs: list[cp_model.LinearExprT] = []
        lows: list[int] = []
        highs: list[int] = []
        for i, col in enumerate(scorer.cols):
            if not scorer.valid[n, i]:
                continue
            inv = float(scorer.inv_alloc[n, i])
            start = round(SCALE * float(base[n, col]) * inv)
            terms = [(e.sign * round(SCALE * float(e.vec[col]) * inv), e.var) for e in entries]
            terms = [(c, v) for c, v in terms if c]
            exprs.append(start + cp_model.LinearExpr.weighted_sum([v for _, v in terms], [c for c, _ in terms]))
            lows.append(start + sum(min(c, 0) * model.ub(v) for c, v in terms))
            highs.append(start + sum(max(c, 0) * model.ub(v) for c, v in terms))
        out.append(NodeUtil(node=n, exprs=exprs, lows=lows, highs=highs))
    return out
