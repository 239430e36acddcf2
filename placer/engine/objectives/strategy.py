"""Objective (4), the placement strategy: one definition per strategy, in every form it is used.

A strategy defines a float cost in two parts, and everything else derives from them:

- ``node_cost(rows, nodes)``: what each node's state costs (rows are full resource rows);
- ``pod_cost(vec, nodes)``: what placing one pod of ``vec`` on each node costs by itself.

The cost of an answer is the sum of ``node_cost`` over the nodes it changes plus ``pod_cost`` of
every pod it places; ``delta`` and ``removal`` (greedy, descent, candidates) are differences of
that cost, and ``term`` builds the integer CP-SAT expression whose value is the same cost times
the returned ``unit`` (up to rounding of utilisations to basis points and of weights to
hundredths). ``cost`` evaluates an answer for LNS, the benchmarks and the property tests.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, ClassVar

import numpy as np
from ortools.sat.python import cp_model

from placer.engine.exprs import evaluate
from placer.engine.objectives.loads import SCALE, LoadModel, NodeUtil
from placer.models import StrategyName

if TYPE_CHECKING:
    from placer.engine.scoring import FloatArray, IntArray, Scorer

__all__ = ["WEIGHT_SCALE", "Aux", "StrategyObjective", "Term"]

WEIGHT_SCALE = 100  # float weights are kept to hundredths in the integer form
_MAX_LCM = 840  # lcm(1..8): beyond, per-node factors are rounded (documented scaling error)


@dataclass(frozen=True)
class Aux:
    """A variable an objective adds (an absolute value, a node-in-use flag), with its best value
    given the model's values so far (None when they do not decide it). The solver loop completes
    the hint with it, so that a level starts from the whole answer so far and can only improve on
    it (CP-SAT left to complete a partial hint may settle for a worse solution)."""

    var: cp_model.IntVar
    value: Callable[[Mapping[int, int]], int | None]


@dataclass(frozen=True)
class Term:
    """An integer objective and the factor from its float meaning: float value = value / unit.

    ``fixed`` expressions keep the value they have in the answer so far while this objective is
    optimised (and after it); ``floors`` may grow but not fall below theirs; ``aux`` are the
    variables the objective added. ``held`` False: the optimum found is not kept for later levels
    (a reference answer whose next term keeps what matters of it through its floors)."""

    name: str
    expr: cp_model.LinearExprT
    maximize: bool
    unit: float = 1.0
    fixed: tuple[cp_model.LinearExprT, ...] = ()
    floors: tuple[cp_model.LinearExprT, ...] = ()
    aux: tuple[Aux, ...] = ()
    held: bool = True


class StrategyObjective(ABC):
    name: ClassVar[StrategyName]
    descends: ClassVar[bool] = True  # single-pod descent improves it (not for pack's step costs)
    # Among nodes it ranks alike, the less loaded comes first (``candidates.node_order``).
    spreads_ties: ClassVar[bool] = False
    labels: ClassVar[frozenset[str]] = frozenset()  # node labels its cost reads (nodes differing there differ)

    # -- the definition ----------------------------------------------------------------------------
    @abstractmethod
    def node_cost(self, s: Scorer, rows: IntArray, nodes: IntArray) -> FloatArray: ...

    def pod_cost(self, s: Scorer, vec: IntArray, nodes: IntArray) -> FloatArray:
        """What placing a pod of ``vec`` on each of ``nodes`` costs by itself (``vec`` may hold one
        request vector per node, row-wise)."""
        return np.zeros(len(nodes))

    @abstractmethod
    def term(self, model: LoadModel) -> Term: ...

    def preselect(self, s: Scorer, nodes: IntArray) -> FloatArray:
        """A cheap per-node key, lower first, to pre-select candidates on huge clusters."""
        return s.load[nodes]  # type: ignore[no-any-return]

    # -- derived forms -------------------------------------------------------------------------------
    def delta(self, s: Scorer, vec: IntArray, nodes: IntArray, used: IntArray) -> FloatArray:
        return self.delta_rows(s, vec, nodes, used[nodes])

    def delta_rows(self, s: Scorer, vec: IntArray, nodes: IntArray, rows: IntArray) -> FloatArray:
        """``delta`` with each node's row of ``used`` given (``rows``, one per entry of ``nodes``):
        a node may appear several times with different rows (the k-th pod of a group on it)."""
        if len(nodes) == 0:
            return np.zeros(0)
        return self.node_cost(s, rows + vec, nodes) - self.node_cost(s, rows, nodes) + self.pod_cost(s, vec, nodes)

    def removal(self, s: Scorer, vec: IntArray, node: int, used: IntArray) -> float:
        at = np.array([node], dtype=np.int64)
        rows = used[at]
        change = self.node_cost(s, rows - vec, at) - self.node_cost(s, rows, at) - self.pod_cost(s, vec, at)
        return float(change[0])

    def cost(self, s: Scorer, used: IntArray, nodes: IntArray, placed: Iterable[tuple[IntArray, int, int]]) -> float:
        """Cost of a state restricted to ``nodes``: node costs plus the pods placed on them."""
        total = float(self.node_cost(s, used[nodes], nodes).sum())
        inside = set(nodes.tolist())
        rows = [(vec, n, count) for vec, n, count in placed if count and n in inside]
        if rows:  # one call, a request vector per pod: pod_cost reads ``vec`` row-wise
            vecs = np.stack([vec for vec, _, _ in rows])
            at = np.array([n for _, n, _ in rows], dtype=np.int64)
            counts = np.array([c for _, _, c in rows], dtype=np.float64)
            total += float((self.pod_cost(s, vecs, at) * counts).sum())
        return total


def abs_var(model: LoadModel, expr: cp_model.LinearExprT, bound: int, name: str, aux: list[Aux]) -> cp_model.IntVar:
    """A variable at least |expr| (equal at any optimum that minimises it), recorded in ``aux``."""
    var = model.cp.new_int_var(0, max(bound, 0), name)
    model.cp.add(var >= expr)
    model.cp.add(var >= -expr)
    aux.append(Aux(var, partial(_absolute, expr)))
    return var


def _absolute(expr: cp_model.LinearExprT, values: Mapping[int, int]) -> int | None:
    value = evaluate(expr, values)
    return None if value is None else abs(value)


def resource_factor(nodes: list[NodeUtil]) -> int:
    """A common multiple of the nodes' resource counts k, so that deviations divided by k stay integral."""
    ks = {len(nu.exprs) for nu in nodes if nu.exprs}
    return min(math.lcm(*ks), _MAX_LCM) if ks else 1


def node_deviation_terms(
    model: LoadModel, nodes: list[NodeUtil], factor: int, aux: list[Aux], *, w_intra: int, w_inter: int
) -> list[cp_model.LinearExprT]:
    """Integer intra-node L1 skew and distance from the target, each times ``factor * SCALE``.

    For a node with k resources, sum_j |k u_j - total| / k is the float skew and
    |total - k target| / k the distance; the division by k is the per-node ``factor // k``.
    """
    aims = model.scorer.target_of(np.array([nu.node for nu in nodes], dtype=np.int64))
    terms: list[cp_model.LinearExprT] = []
    for nu, aim in zip(nodes, aims.tolist(), strict=True):
        k = len(nu.exprs)
        if k == 0:
            continue
        target = round(SCALE * aim)
        total = cp_model.LinearExpr.sum(nu.exprs)
        top = sum(max(abs(lo), abs(hi)) for lo, hi in zip(nu.lows, nu.highs, strict=True))
        per_node = max(round(factor / k), 1)
        if w_intra:
            for j, u in enumerate(nu.exprs):
                bound = k * max(abs(nu.lows[j]), abs(nu.highs[j])) + top
                dev = abs_var(
                    model, cp_model.LinearExpr.weighted_sum([u, total], [k, -1]), bound, f"dev{nu.node}_{j}", aux
                )
                terms.append(w_intra * per_node * dev)
        if w_inter:
            d = abs_var(model, total - k * target, top + k * abs(target), f"distance{nu.node}", aux)
            terms.append(w_inter * per_node * d)
    return terms
