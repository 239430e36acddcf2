"""A lower bound on the strategy cost of the full, unpruned model: a relaxation, solved apart.

The engine's answers are compared with what no answer can beat. CP-SAT's own bound on the
unpruned model is weak within a minute at 1,000 nodes (8.5 %) and absent at 5,000, so this module
writes the model as a mixed-integer program of its own and solves either its linear relaxation
with GLOP or the integer program itself, for a time limit, with SCIP, whose dual bound is then
the bound (both ship with OR-Tools: no new dependency):

- ``x[g, n]`` >= 0 (integer for SCIP, continuous for GLOP) for every node ``n`` feasible for group
  ``g`` (every node, not the engine's candidates), with ``sum_n x[g, n]`` = the pods of ``g`` the
  answer places (the levels before the strategy fix those counts);
- capacity: the batch's load on each node fits its free room, in every resource;
- the strategy cost as ``placer.engine.objectives.balance`` defines it (the one float
  definition): per node the intra-node L1 skew of the balance resources' utilisations and the
  distance of their mean from the cluster's target, written with the usual pair of inequalities
  per absolute value, plus the pod-class cost of every pod, linear in ``x``.

The preferences level enters as one constraint: the preferred node-affinity and taint weights of
the placements reach the level's value (the level also subtracts soft topology penalties, so an
answer at that value satisfies the constraint). Topology rules, host ports and gangs are left
out: dropping constraints only lowers the optimum, so the value stays a lower bound on every
answer that places the same counts and reaches that preference value. Only the ``balance``
strategy is written (the benchmarks' default).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from ortools.linear_solver import pywraplp

from placer.engine import Batch, Scorer
from placer.models import StrategyName

__all__ = ["BoundError", "lp_bound", "mip_bound"]


class BoundError(RuntimeError):
    """The relaxation could not be solved (it should always be feasible for a valid answer)."""


def lp_bound(
    batch: Batch, scorer: Scorer, placed: Mapping[int, int], nodes: np.ndarray, *, preferences: float | None = None
) -> float:
    """The linear relaxation's optimum: a lower bound on the strategy cost over ``nodes`` (which
    must hold every feasible node of every group) of any answer placing ``placed[g]`` pods of
    group g and, given ``preferences`` (the preferences level's value), reaching it."""
    solver = _solver("GLOP")
    objective = _write(solver, batch, scorer, placed, nodes, preferences, integer=False)
    if solver.Solve() != pywraplp.Solver.OPTIMAL:
        raise BoundError("GLOP did not solve the relaxation")
    return float(objective.Value())


def mip_bound(
    batch: Batch,
    scorer: Scorer,
    placed: Mapping[int, int],
    nodes: np.ndarray,
    *,
    preferences: float | None = None,
    seconds: float,
) -> tuple[float, bool]:
    """The same program with integer pods, solved by SCIP for at most ``seconds``: its dual bound
    (a lower bound like ``lp_bound``'s, and at least as high) and whether SCIP proved it optimal."""
    solver = _solver("SCIP")
    solver.SetTimeLimit(max(int(seconds * 1000), 1))
    objective = _write(solver, batch, scorer, placed, nodes, preferences, integer=True)
    status = solver.Solve()
    if status not in (pywraplp.Solver.OPTIMAL, pywraplp.Solver.FEASIBLE, pywraplp.Solver.NOT_SOLVED):
        raise BoundError(f"SCIP ended with status {status}")
    return float(objective.BestBound()), status == pywraplp.Solver.OPTIMAL


def _solver(name: str) -> pywraplp.Solver:
    solver = pywraplp.Solver.CreateSolver(name)
    if solver is None:
        raise BoundError(f"{name} is not available")
    return solver


def _write(
    solver: pywraplp.Solver,
    batch: Batch,
    scorer: Scorer,
    placed: Mapping[int, int],
    nodes: np.ndarray,
    preferences: float | None,
    *,
    integer: bool,
) -> pywraplp.Objective:
    """Write the program into ``solver``; its objective."""
    if scorer.config.strategy != StrategyName.BALANCE:
        raise BoundError(f"only the balance strategy has a written relaxation, not {scorer.config.strategy}")
    snap = batch.snapshot
    free = snap.alloc - snap.used
    w_intra, w_inter, w_class = scorer.w_intra, scorer.w_inter, scorer.w_class
    at_node: dict[int, list[tuple[int, pywraplp.Variable]]] = {}
    objective = solver.Objective()
    wished = solver.Constraint(preferences, solver.infinity()) if preferences is not None else None
    for gi, group in enumerate(batch.groups):
        count = placed.get(gi, 0)
        if not count:
            continue
        feasible = group.feasible
        cost = w_class * scorer.class_cost(group.vec, feasible) if w_class else np.zeros(len(feasible))
        row = solver.Constraint(count, count)
        wish = group.masks.preference[feasible]
        for n, c, w in zip(feasible.tolist(), cost.tolist(), wish.tolist(), strict=True):
            var = solver.IntVar(0.0, float(count), "") if integer else solver.NumVar(0.0, float(count), "")
            row.SetCoefficient(var, 1.0)
            if wished is not None and w:
                wished.SetCoefficient(var, float(w))
            objective.SetCoefficient(var, c)
            at_node.setdefault(n, []).append((gi, var))
    target = scorer.target
    for n in nodes.tolist():
        pods = at_node.get(n, [])
        for r in range(len(snap.resources)):
            if pods and any(batch.groups[gi].vec[r] for gi, _ in pods):
                cap = solver.Constraint(-solver.infinity(), float(free[n, r]))
                for gi, var in pods:
                    cap.SetCoefficient(var, float(batch.groups[gi].vec[r]))
        valid = scorer.valid[n]
        k = float(scorer.k[n])
        # u_j = base_j + sum_g x_g * rate_gj for each balance resource j (rows of the affine map)
        base = snap.used[n, scorer.cols] * scorer.inv_alloc[n]
        rates = [(var, batch.groups[gi].vec[scorer.cols] * scorer.inv_alloc[n]) for gi, var in pods]
        mean_base = float((base * valid).sum() / k)
        mean_rates = [(var, float((rate * valid).sum() / k)) for var, rate in rates]
        if w_inter:
            _absolute(solver, objective, w_inter, mean_base - target, mean_rates)
        if w_intra:
            for j in np.flatnonzero(valid).tolist():
                terms = [(var, float(rate[j]) - m) for (var, rate), (_, m) in zip(rates, mean_rates, strict=True)]
                _absolute(solver, objective, w_intra, float(base[j]) - mean_base, terms)
    objective.SetMinimization()
    return objective


def _absolute(
    solver: pywraplp.Solver,
    objective: pywraplp.Objective,
    weight: float,
    constant: float,
    terms: list[tuple[pywraplp.Variable, float]],
) -> None:
    """Add ``weight * |constant + sum coef * var|`` to the objective (a variable above both signs)."""
    live = [(var, coef) for var, coef in terms if coef]
    if not live:
        objective.SetOffset(objective.offset() + weight * abs(constant))
        return
    a = solver.NumVar(0.0, solver.infinity(), "")
    objective.SetCoefficient(a, weight)
    for sign in (1.0, -1.0):
        row = solver.Constraint(sign * constant, solver.infinity())  # a - sign*sum >= sign*constant
        row.SetCoefficient(a, 1.0)
        for var, coef in live:
            row.SetCoefficient(var, -sign * coef)
