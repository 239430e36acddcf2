"""The LP dive: every pod placed by rounding the linear relaxation of a cover by node contents.

Where nodes hold few pods each (two or three on the public corpus's hardest instances), a node's
possible *maximal contents* (``contents``: sets of pods that fit one node, no other pod fitting
beside them) can be listed outright. A packing of every pod into the nodes is then a cover of the
pods by at most that many contents, and the linear relaxation of that cover (minimise the
contents used, each pod covered at least once, every content between 0 and 1) is tight: the
classic set-covering relaxation of bin packing (Gilmore & Gomory, Operations Research 9, 1961).

A dive rounds it (diving heuristics, as in Berthold, *Primal heuristics for mixed integer
programs*, 2006): solve the LP (GLOP), fix the contents whose value is above a threshold to 1
(largest first, as far as they share no pod still uncovered; the largest at least), and solve
again from the previous basis, until every pod is covered, or give up as soon as the LP needs more
nodes than there are. The first dives take the thresholds of ``tuning.DIVE_THRESHOLDS`` in turn;
then they go on, thresholds in turn, with each content's cost drawn near 1 (``tuning.DIVE_NOISE``),
until one succeeds or the time runs out. A pod covered twice stays on the first node that covers it.

It answers only with a packing of every pod (or None: the contents are too many, a dive failed or
the race was stopped), and runs on a thread of its own in the race (``dispatch``): GLOP releases
the interpreter's lock while it solves, and a stopped race interrupts it.
"""

from __future__ import annotations

import math

import numpy as np
from ortools.linear_solver import pywraplp

from placer.engine.batch import Batch
from placer.engine.greedy import Assignment
from placer.engine.packing import clock, contents, kernel, tuning
from placer.engine.packing.ejection import Pods
from placer.engine.scoring import IntArray

__all__ = ["available", "search"]

_FIRST_VISITS = 1_000  # the listing's first slice (the next are sized by the clock)
_MEAN_PODS = 6  # room for this many pods per content on average in the listing (it stops when full)
_FIXED = 1 - 1e-6  # an LP value this close to 1 is 1
_PRICE_TOLERANCE = 1e-9  # a content joins the LP when its reduced cost is below minus this


def available() -> bool:
    """Whether the dive can run (its listing of contents is compiled)."""
    return kernel.contents() is not None


def _contents(vecs: IntArray, room: IntArray, deadline: float) -> tuple[IntArray, IntArray] | None:
    """Every maximal content of a node (``contents.maximal``'s ``flat`` and ``starts``, cut to
    length), or None when they are too many, the listing goes through more than
    ``tuning.DIVE_VISITS`` sets, ``deadline`` passes (or the race is stopped) or it is not
    compiled. The listing runs in slices of about ``tuning.EJECT_SLICE`` seconds."""
    listing = kernel.contents()
    if listing is None:
        return None
    flat: IntArray = np.zeros(tuning.DIVE_CONTENTS * _MEAN_PODS, dtype=np.int64)
    starts: IntArray = np.zeros(tuning.DIVE_CONTENTS + 1, dtype=np.int64)
    path: IntArray = np.zeros(len(vecs) + 1, dtype=np.int64)
    load: IntArray = np.zeros(len(room), dtype=np.int64)
    state: IntArray = np.zeros(3, dtype=np.int64)
    contents.begin(path, state)
    visits, left = _FIRST_VISITS, tuning.DIVE_VISITS
    while left > 0 and clock.now() <= deadline:
        began = clock.real()
        visits = min(visits, left)
        found = int(listing(vecs, room, tuning.DIVE_CONTENTS, visits, flat, starts, path, load, state))
        if found == contents.TOO_MANY:
            return None
        if found != contents.MORE:
            return flat[: starts[found]], starts[: found + 1]
        left -= visits
        visits = clock.slice_steps(visits, began, deadline)
    return None


class _Stop:
    """``clock.watched``'s handle on a GLOP solve."""

    def __init__(self, lp: pywraplp.Solver) -> None:
        self.lp = lp

    def stop_search(self) -> None:
        self.lp.InterruptSolve()


class _Cover:
    """The LP of a cover of ``pods`` pods by the listed contents (content ``c`` is
    ``flat[starts[c]:starts[c + 1]]``), kept between dives. Only the contents that pricing asks for
    are columns of the LP (column generation over the listing: each solve, the contents whose
    reduced cost under the pods' duals is negative join, the most negative first), so the LP stays
    small and GLOP's dual simplex re-solves it from the previous basis."""

    def __init__(self, flat: IntArray, starts: IntArray, pods: int) -> None:
        self.flat, self.starts = flat, starts
        self.costs = np.ones(len(starts) - 1)
        self.lp = pywraplp.Solver.CreateSolver("GLOP")
        self.lp.SetSolverSpecificParametersAsString("use_dual_simplex: true\nuse_preprocessing: false")
        self.rows = [self.lp.Constraint(1.0, self.lp.infinity()) for _ in range(pods)]
        self.lp.Objective().SetMinimization()
        self.columns: list[int] = []  # the contents in the LP, in the order of its variables
        self.x: list[pywraplp.Variable] = []
        self.in_lp = np.zeros(len(self.costs), dtype=bool)
        owner = np.repeat(np.arange(len(self.costs)), np.diff(starts))
        _, first = np.unique(flat, return_index=True)  # a content of each pod: the LP starts feasible
        self._add(np.unique(owner[first]))

    def content(self, c: int) -> IntArray:
        return self.flat[self.starts[c] : self.starts[c + 1]]

    def _add(self, contents: IntArray) -> None:
        objective = self.lp.Objective()
        for c in contents.tolist():
            var = self.lp.NumVar(0.0, 1.0, "")
            objective.SetCoefficient(var, float(self.costs[c]))
            for pod in self.content(c).tolist():
                self.rows[pod].SetCoefficient(var, 1.0)
            self.columns.append(c)
            self.x.append(var)
        self.in_lp[contents] = True

    def _solve(self, deadline: float) -> bool:
        """Solve the LP over every listed content (pricing in contents until none would lower
        it); False when it cannot be solved or ``deadline`` passed (or the race was stopped)."""
        while True:
            left = deadline - clock.now()
            if left <= 0:
                return False
            self.lp.SetTimeLimit(max(1, math.ceil(left * 1000)))
            with clock.watched(_Stop(self.lp)):
                status = self.lp.Solve()
            if status != pywraplp.Solver.OPTIMAL:
                return False
            duals = np.array([row.dual_value() for row in self.rows])
            reduced = self.costs - np.add.reduceat(duals[self.flat], self.starts[:-1])
            reduced[self.in_lp] = 0.0
            join = np.flatnonzero(reduced < -_PRICE_TOLERANCE)
            if not len(join):
                return True
            if len(join) > tuning.DIVE_PRICED:
                join = join[np.argpartition(reduced[join], tuning.DIVE_PRICED)[: tuning.DIVE_PRICED]]
            self._add(join)

    def dive(self, threshold: float, nodes: int, deadline: float, costs: np.ndarray) -> list[int] | None:
        """The contents of a packing into ``nodes`` nodes (indices), or None: the LP needs more
        nodes, it could not be solved, or ``deadline`` passed (or the race was stopped). Each
        content costs ``costs`` (about 1: the LP's many optima differ by the ties they break)."""
        self.costs = costs
        objective = self.lp.Objective()
        for var, c in zip(self.x, self.columns, strict=True):
            var.SetLb(0.0)
            objective.SetCoefficient(var, float(costs[c]))
        limit = nodes * float(costs.max()) + 1e-6
        open_ = np.ones(len(self.rows), dtype=bool)  # pods not yet covered by a fixed content
        chosen: list[int] = []
        while open_.any():
            if not self._solve(deadline) or self.lp.Objective().Value() > limit:
                return None
            values = np.array([var.solution_value() for var in self.x])
            fixed = self._fix(values, threshold, open_)
            for k in fixed:
                self.x[k].SetLb(1.0)
                open_[self.content(self.columns[k])] = False
            chosen += [self.columns[k] for k in fixed]
            if len(chosen) > nodes:
                return None
        return chosen

    def _fix(self, values: np.ndarray, threshold: float, open_: np.ndarray) -> list[int]:
        """This round's columns to fix: above ``threshold`` in decreasing value, each covering
        only open pods (at 1, covering some); at least the largest that covers an open pod."""
        fixed: list[int] = []
        claimed = np.zeros_like(open_)
        for k in np.argsort(-values, kind="stable").tolist():
            content = self.content(self.columns[k])
            covers = open_[content] & ~claimed[content]
            if values[k] <= threshold and fixed:
                break
            if not covers.any():
                continue
            if fixed and values[k] < _FIXED and not covers.all():
                continue
            fixed.append(k)
            claimed[content] = True
        return fixed


def search(batch: Batch, nodes: list[int], start: Assignment, *, seconds: float, seed: int = 0) -> Assignment | None:
    """Every pod with a feasible node placed on ``nodes`` (identical, from ``completion.applies``)
    by dives until one succeeds or ``seconds`` pass, or None (see the module). ``start`` only
    qualifies the batch (as for the other searches: ``Pods.of``); ``seed`` draws the contents'
    costs after the first dives."""
    deadline = clock.real() + seconds
    pods = Pods.of(batch, nodes, start)
    if pods is None or not available() or clock.now() > deadline:
        return None
    vecs, room = pods.asked()
    listed = _contents(vecs, room, deadline)
    if listed is None:
        return None
    cover = _Cover(*listed, len(vecs))
    count = len(listed[1]) - 1
    rng = np.random.default_rng(seed)
    dives = 0
    while clock.now() <= deadline:
        threshold = tuning.DIVE_THRESHOLDS[dives % len(tuning.DIVE_THRESHOLDS)]
        costs = np.ones(count)
        if dives >= len(tuning.DIVE_THRESHOLDS):  # the same dive again would fail again: other ties
            costs += tuning.DIVE_NOISE * rng.random(count)
        dives += 1
        chosen = cover.dive(threshold, len(nodes), deadline, costs)
        if chosen is not None:
            bin_of: IntArray = np.full(len(vecs), -1, dtype=np.int64)
            for b, c in enumerate(chosen):
                content = cover.content(c)
                bin_of[content[bin_of[content] < 0]] = b
            return pods.assignment(batch, nodes, bin_of)
    return None
