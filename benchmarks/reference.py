"""Yardsticks for placer's packing: a plain CP-SAT model and three greedy heuristics.

Each function takes a ``Problem`` (the pending pods of a batch as groups of identical demand
vectors, the nodes as bins with their free room) and returns an ``Answer``: pod key -> node name,
ready for the independent validator (``placer.validate.validate_placements``). Nothing here
imports ``placer.engine``'s search: these are what placer is judged against, so they stay
textbook.

- ``cpsat``: one CP-SAT model given the whole time limit. Integer counts y[g, b] of the pods of
  identical group g on bin b (booleans when a group has one pod), capacity per bin and resource
  (the ``pods`` slot count included), at most the group's size over all bins; symmetry breaking
  among identical bins (equal free room): bins ordered by decreasing load on the most demanded
  resource; objective: pods placed. No hint, no search tricks. Workers as placer's configuration
  uses them (``placer_workers``: the configured count, else one per core, at most 8). A
  time-limited answer can leave out a pod that still fits somewhere: a first-fit pass over the
  leftovers completes it (it never removes a pod), so that every answer is maximal as the
  validator requires.
- ``first_fit_decreasing``: pods by decreasing size (sum over resources of request / largest
  free room), each on the first node (in node order) where it fits.
- ``best_fit_decreasing``: same order, each on the node where it fits that is left with the least
  room (sum over resources of the normalised free room after placing).
- ``dot_product``: bin-centric, after Panigrahy et al. (2011): nodes filled one at a time, each
  time with the pod that fits and whose normalised request has the largest dot product with the
  node's normalised free room, until none fits; then the next node.

A pod that fits no node is left out by all four; none of them preempts or moves running pods.
Only resources and the pod slot count are modelled (no labels, taints or topology): use them on
clusters whose pods may go on any node, as the corpus benchmark's are.
"""

from __future__ import annotations

import itertools
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from ortools.sat.python import cp_model

from placer.models import Cluster, Config

__all__ = [
    "HEURISTICS",
    "Answer",
    "Problem",
    "best_fit_decreasing",
    "cpsat",
    "dot_product",
    "first_fit_decreasing",
    "placer_workers",
    "problem",
]

POD_SLOTS = "pods"
DEFAULT_MAX_PODS = 110  # Kubernetes' default when a node does not say
IntMatrix = npt.NDArray[np.int64]
FloatMatrix = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Problem:
    """Pending pods as groups of identical demand (``members[g]`` the pod keys of group ``g``,
    ``demand[g]`` one pod's demand per resource) and nodes as bins (``free[b]`` per resource)."""

    resources: tuple[str, ...]
    bins: tuple[str, ...]
    free: IntMatrix  # (bins, resources)
    demand: IntMatrix  # (groups, resources)
    members: tuple[tuple[str, ...], ...]

    @property
    def pods(self) -> int:
        return sum(len(m) for m in self.members)

    def scale(self) -> FloatMatrix:
        """Per resource, the largest free room of any bin (1 where no bin has any)."""
        top = self.free.max(axis=0).astype(np.float64) if len(self.bins) else np.ones(len(self.resources))
        return np.where(top > 0, top, 1.0)


@dataclass(frozen=True)
class Answer:
    placements: dict[str, str]  # pod key -> node name
    seconds: float
    status: str = "greedy"  # CP-SAT's status name for ``cpsat``


def problem(cluster: Cluster, scheduler_name: str = "placer") -> Problem:
    """The batch of ``cluster``: the pods awaiting ``scheduler_name`` (pending, not terminating, not
    gated), grouped by demand; each node's free room is its allocatable minus the requests of the
    pods running on it."""
    pending = [p for p in cluster.pods if p.awaits(scheduler_name)]
    resources = (*sorted({r for p in pending for r, v in p.requests.items() if v > 0} - {POD_SLOTS}), POD_SLOTS)
    used = {n.name: dict.fromkeys(resources, 0) for n in cluster.nodes}
    for p in cluster.pods:
        if p.running and p.node_name in used:
            for r in resources:
                used[p.node_name][r] += 1 if r == POD_SLOTS else max(p.requests.get(r, 0), 0)

    def offer(node_allocatable: dict[str, int], r: str) -> int:
        return node_allocatable.get(r, DEFAULT_MAX_PODS if r == POD_SLOTS else 0)

    free = np.array(
        [[offer(n.allocatable, r) - used[n.name][r] for r in resources] for n in cluster.nodes], dtype=np.int64
    ).reshape(len(cluster.nodes), len(resources))
    groups: dict[tuple[int, ...], list[str]] = {}
    for p in pending:
        vector = tuple(1 if r == POD_SLOTS else max(p.requests.get(r, 0), 0) for r in resources)
        groups.setdefault(vector, []).append(p.key)
    demand = np.array(list(groups), dtype=np.int64).reshape(len(groups), len(resources))
    return Problem(resources, tuple(n.name for n in cluster.nodes), free, demand, tuple(map(tuple, groups.values())))


def _size(prob: Problem) -> FloatMatrix:
    return prob.demand / prob.scale()


def _fsum_rows(m: FloatMatrix) -> list[float]:
    """Row sums of correctly rounded quotients, exact to one rounding (``math.fsum``): the same in
    any order of the resources and in any integer units, so two implementations of a heuristic
    rank pods and nodes alike (placer.engine.packing.starts does the same)."""
    return [math.fsum(row) for row in m.tolist()]


def _order(prob: Problem) -> list[int]:
    """Group index per pod, largest first (ties: group order, stable)."""
    size = _fsum_rows(_size(prob))
    groups = sorted(range(len(prob.members)), key=lambda g: -size[g])
    return [g for g in groups for _ in prob.members[g]]


def _assign(prob: Problem, picks: list[tuple[int, int]]) -> dict[str, str]:
    """(group, bin) per placed pod -> pod key -> node name, members of a group in their order."""
    taken = [0] * len(prob.members)
    out = {}
    for g, b in picks:
        out[prob.members[g][taken[g]]] = prob.bins[b]
        taken[g] += 1
    return out


def _fit_each(prob: Problem, choose: Callable[[IntMatrix, int], int | None]) -> Answer:
    """Item-centric greedy: pods by decreasing size, each where ``choose(free, group)`` says."""
    started = time.perf_counter()
    free = prob.free.copy()
    picks = []
    for g in _order(prob):
        b = choose(free, g)
        if b is not None:
            free[b] -= prob.demand[g]
            picks.append((g, b))
    return Answer(_assign(prob, picks), time.perf_counter() - started)


def first_fit_decreasing(prob: Problem) -> Answer:
    """Each pod, largest first, on the first node where it fits."""

    def first(free: IntMatrix, g: int) -> int | None:
        fits = np.flatnonzero((free >= prob.demand[g]).all(axis=1))
        return int(fits[0]) if len(fits) else None

    return _fit_each(prob, first)


def best_fit_decreasing(prob: Problem) -> Answer:
    """Each pod, largest first, on the node it leaves with the least normalised free room."""
    scale = prob.scale()

    def best(free: IntMatrix, g: int) -> int | None:
        fits = np.flatnonzero((free >= prob.demand[g]).all(axis=1))
        if not len(fits):
            return None
        left = _fsum_rows((free[fits] - prob.demand[g]) / scale)
        return int(fits[int(np.argmin(left))])

    return _fit_each(prob, best)


def dot_product(prob: Problem) -> Answer:
    """Nodes one at a time, each filled with the fitting pod of largest dot product between its
    normalised request and the node's normalised free room (Panigrahy et al. 2011, bin-centric)."""
    started = time.perf_counter()
    scale = prob.scale()
    size = _size(prob)
    left = np.array([len(m) for m in prob.members], dtype=np.int64)
    picks = []
    for b in range(len(prob.bins)):
        free = prob.free[b].copy()
        while True:
            fits = np.flatnonzero((left > 0) & (prob.demand <= free).all(axis=1))
            if not len(fits):
                break
            score = _fsum_rows(size[fits] * (free / scale))
            g = int(fits[int(np.argmax(score))])
            free -= prob.demand[g]
            left[g] -= 1
            picks.append((g, b))
    return Answer(_assign(prob, picks), time.perf_counter() - started)


HEURISTICS: dict[str, Callable[[Problem], Answer]] = {
    "ffd": first_fit_decreasing,
    "bfd": best_fit_decreasing,
    "dot": dot_product,
}


def _identical_runs(prob: Problem) -> list[list[int]]:
    """Bins grouped by equal free room, in bin order."""
    runs: dict[tuple[int, ...], list[int]] = {}
    for b in range(len(prob.bins)):
        runs.setdefault(tuple(int(v) for v in prob.free[b]), []).append(b)
    return [run for run in runs.values() if len(run) > 1]


def placer_workers(config: Config) -> int:
    """CP-SAT workers as placer's engine sets them for its own solves (``placer.engine.levels``,
    not part of the engine's public surface): as configured, else one per core, at most 8."""
    return config.solver.workers or min(8, os.cpu_count() or 1)


def cpsat(prob: Problem, time_limit: float, *, workers: int | None = None) -> Answer:
    """The plain model (module docstring) solved once with the whole ``time_limit`` (model
    building included); ``workers`` defaults to placer's rule for its own CP-SAT calls."""
    started = time.perf_counter()
    model = cp_model.CpModel()
    groups, bins = range(len(prob.members)), range(len(prob.bins))
    y: dict[tuple[int, int], cp_model.IntVar] = {}
    for g in groups:
        for b in bins:
            need = prob.demand[g]
            room = prob.free[b]
            most = min(int(min(room[r] // need[r] for r in range(len(need)) if need[r] > 0)), len(prob.members[g]))
            if most > 0:
                y[g, b] = model.new_int_var(0, most, f"y{g}_{b}")
    for g in groups:
        on = [y[g, b] for b in bins if (g, b) in y]
        if len(on) > 1:
            model.add(sum(on) <= len(prob.members[g]))
    for b in bins:
        on_b = [(g, y[g, b]) for g in groups if (g, b) in y]
        for r in range(len(prob.resources)):
            terms = [int(prob.demand[g][r]) * v for g, v in on_b if prob.demand[g][r] > 0]
            if terms:
                model.add(sum(terms) <= int(prob.free[b][r]))
    if len(prob.members):
        total = np.array([len(m) for m in prob.members]) @ _size(prob)
        key = int(np.argmax(total))
        for run in _identical_runs(prob):
            loads = [sum(int(prob.demand[g][key]) * v for (g, bb), v in y.items() if bb == b) for b in run]
            for a, c in itertools.pairwise(loads):
                model.add(a >= c)
    model.maximize(sum(y.values()))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(time_limit - (time.perf_counter() - started), 0.01)
    solver.parameters.num_workers = workers or placer_workers(Config())
    status = solver.solve(model)
    picks: list[tuple[int, int]] = []
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        picks = [(g, b) for (g, b), v in sorted(y.items()) for _ in range(solver.value(v))]
    placements = _complete(prob, picks)
    return Answer(placements, time.perf_counter() - started, solver.status_name(status))


def _complete(prob: Problem, picks: list[tuple[int, int]]) -> dict[str, str]:
    """``picks`` plus a first-fit pass (largest first) over the pods they leave out."""
    free = prob.free.copy()
    missing = [len(m) for m in prob.members]
    for g, b in picks:
        free[b] -= prob.demand[g]
        missing[g] -= 1
    extra = []
    for g in _order(prob):
        if missing[g] > 0:  # one try per pod left out (identical pods: the same answer)
            missing[g] -= 1
            fits = np.flatnonzero((free >= prob.demand[g]).all(axis=1))
            if len(fits):
                free[fits[0]] -= prob.demand[g]
                extra.append((g, int(fits[0])))
    return _assign(prob, picks + extra)
