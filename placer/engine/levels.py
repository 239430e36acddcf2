"""The solver loop: hierarchical CP-SAT levels on one model, each optimum fixed before the next.

Used by the batch engine and the global plan alike. One budget rule: the decision has one time
limit counted from when it started (wall clock), or, with ``solver.deterministic``, one
deterministic budget; each level gets what is left of it. Every level is hinted with the best
solution so far, which satisfies every fixed level, so a level that finds nothing in time keeps
the previous answer (never worse than the hint).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from ortools.sat.python import cp_model, cp_model_helper

from placer.engine.exprs import evaluate
from placer.engine.objectives.strategy import Term
from placer.models import Config

__all__ = [
    "DETERMINISTIC_UNITS_PER_SECOND",
    "FREE_SHARE",
    "MIN_LEVEL_SHARE",
    "SHORT_BUDGET",
    "Budget",
    "BuildStoppedError",
    "Check",
    "LevelReport",
    "LevelSolver",
    "evaluate",
    "never_stop",
    "workers",
]

# ``solver.deterministic`` keeps ``solver.timeLimit`` in seconds: the decision gets
# ``timeLimit * DETERMINISTIC_UNITS_PER_SECOND`` of CP-SAT's deterministic time, the units 1 worker
# does in about a second of wall time on the reference machine (2 cores; measured on
# examples/tbesk.json, README "--deterministic"). The answer depends on the units only, so it is
# the same on every machine; only how long it takes varies with the machine's speed.
DETERMINISTIC_UNITS_PER_SECOND = 0.3

Clock = Callable[[], float]  # wall seconds, monotonic (``time.monotonic``; tests inject their own)
Check = Callable[[], None]  # called between the steps of a long build: raises ``BuildStoppedError`` to stop it


class BuildStoppedError(Exception):
    """A model's build reached the decision's deadline (``Budget.check``): whoever started it keeps
    the answer it had before (anytime: the greedy start, or no plan)."""


def never_stop() -> None:
    """The check of a build with no deadline."""


# A model's build stopped at the deadline still has its objects freed before the answer is out:
# 4-6 % of the time it ran on the reference machine (issue-1000's 0.92 s build: 57 ms to free;
# gangs-1000's 0.35 s: 14 ms); a build stops while what is left covers this share of its time.
FREE_SHARE = 0.1
# Below this many seconds left, a level solves without presolve and probing.
SHORT_BUDGET = 1.0
_MIN_SECONDS = 0.01
# A level is not started with less than this share of the limit left (beyond the spare): building
# its terms and loading the model into CP-SAT take time of their own, so a level started at the
# very end overshoots the limit instead of improving the answer.
MIN_LEVEL_SHARE = 0.02


class Budget:
    """One decision's time limit (``solver.timeLimit``): wall seconds counted from when the
    decision started, or with ``solver.deterministic`` CP-SAT deterministic units (``of`` converts
    the seconds). Everything the decision
    does (prefilter, greedy, every level, the plan, extraction) spends the same budget; a part may
    get a capped share of it (``capped``), which still spends the whole."""

    def __init__(
        self,
        limit: float,
        *,
        deterministic: bool,
        parent: Budget | None = None,
        clock: Clock | None = None,
        started: float | None = None,
    ) -> None:
        """``clock``: wall seconds (``time.monotonic`` unless a parent or caller gives another);
        ``started``: when the decision started on it, if before now (the work done since then,
        e.g. building the snapshot, counts against the limit)."""
        self.limit = limit
        self.deterministic = deterministic
        self.parent = parent
        self.clock: Clock = clock or (parent.clock if parent is not None else time.monotonic)
        self.started = self.clock() if started is None else started
        self.det_used = 0.0

    @classmethod
    def of(cls, config: Config, *, clock: Clock | None = None, started: float | None = None) -> Budget:
        """The decision's budget: ``solver.timeLimit`` seconds of wall time, or their deterministic
        equivalent (``DETERMINISTIC_UNITS_PER_SECOND``), counted from ``started`` (now by default)."""
        limit, deterministic = config.solver.time_limit, config.solver.deterministic
        limit = limit * DETERMINISTIC_UNITS_PER_SECOND if deterministic else limit
        return cls(limit, deterministic=deterministic, clock=clock, started=started)

    def left(self) -> float:
        own = self.limit - self.used()
        return min(own, self.parent.left()) if self.parent is not None else own

    def used(self) -> float:
        return self.det_used if self.deterministic else self.clock() - self.started

    def deadline(self, most: float = float("inf")) -> float | None:
        """The clock time by which a phase given at most ``most`` wall seconds must end: what is
        left beyond the spare, or less (None with a deterministic budget: no wall deadline)."""
        if self.deterministic:
            return None
        return self.clock() + max(min(most, self.left() - self.spare), 0.0)

    def fits(self, seconds: float) -> bool:
        """Whether work expected to take ``seconds`` of wall time ends before the deadline (what
        is left beyond the spare, which builds the answer). Always with a deterministic budget,
        whose answer must not depend on the machine's speed."""
        return self.deterministic or self.left() - self.spare > seconds

    def over(self) -> bool:
        """Whether the wall deadline has passed: work that only improves the answer so far is
        not started then (never with a deterministic budget)."""
        return not self.fits(0.0)

    def check(self) -> None:
        """For a long build to call between its steps (a ``Check``): raises ``BuildStoppedError`` once
        the deadline has passed (``over``), so that building a model the budget cannot use costs
        at most one step past it."""
        if self.over():
            raise BuildStoppedError

    def build_check(self) -> Check:
        """The ``check`` of a model build starting now: ``check``, and it also stops the build
        once what is left beyond the spare no longer covers freeing what it built
        (``FREE_SHARE`` of its time so far), so that a stopped build still answers by the
        deadline. A build that ended later would leave no time for a level anyway: a level needs
        what is left beyond the spare to cover the build's own time (``LevelSolver.margin``)."""
        started = self.clock()

        def check() -> None:
            self.check()
            if not self.fits(FREE_SHARE * (self.clock() - started)):
                raise BuildStoppedError

        return check

    def charge(self, deterministic_time: float) -> None:
        self.det_used += deterministic_time
        if self.parent is not None:
            self.parent.charge(deterministic_time)

    @property
    def spare(self) -> float:
        """Kept out of the solver calls for building the answer after them and for CP-SAT
        stopping late (up to 0.4 s past its limit on a loaded 2-core machine): 5 % of the limit."""
        root = self.parent.spare if self.parent is not None else 0.05 * self.limit
        return root

    def capped(self, share: float) -> Budget:
        """A part of this budget that may use at most ``share`` of what is left now."""
        return Budget(max(self.left(), 0.0) * share, deterministic=self.deterministic, parent=self)

    def ending_early(self, seconds: float) -> Budget:
        """A part of this budget that ends ``seconds`` of wall time before it, for work after it
        (checking or writing the answer); this budget itself when deterministic (its limit is not
        wall seconds) or when nothing is kept."""
        return self if self.deterministic or seconds <= 0 else self.keeping(seconds)

    def keeping(self, kept: float) -> Budget:
        """A part of this budget that leaves ``kept`` of what is left now to what comes after it."""
        return Budget(max(self.left() - kept, 0.0), deterministic=self.deterministic, parent=self)


@dataclass
class LevelReport:
    name: str
    status: str
    value: float  # in the level's float units (integer objective / Term.unit)
    bound: float
    seconds: float

    @property
    def solved(self) -> bool:
        return self.status in ("optimal", "feasible")


def workers(config: Config) -> int:
    """CP-SAT workers: as configured, else one per core (at most 8)."""
    return config.solver.workers or min(8, os.cpu_count() or 1)


def _value(expr: cp_model.LinearExprT, values: dict[int, int]) -> int:
    value = evaluate(expr, values)
    if value is None:
        raise ValueError("a level's side condition reads a variable outside the model's solution")
    return value


class LevelSolver:
    """Runs levels on ``cp`` over ``variables``; ``values`` (variable index -> value) is the best
    solution so far and must start as a solution of the model (the hint)."""

    def __init__(
        self,
        cp: cp_model.CpModel,
        variables: list[cp_model.IntVar],
        values: dict[int, int],
        config: Config,
        *,
        budget: Budget,
        build: float = 0.0,
    ) -> None:
        """``build``: wall seconds it took to build the model, the estimate of what building one
        level may take (the same Python work over the same variables, on the same machine and
        load)."""
        self.cp = cp
        self.variables = variables
        self.values = values
        self.config = config
        self.budget = budget
        self.proven = True
        self.reports: list[LevelReport] = []
        self.last_gap = 0.0
        self.overhead = build  # longest stretch between two solver calls (building levels), seconds
        # Longest a solver call ran past its own time limit (wall seconds): CP-SAT checks the
        # clock only once loading a model is done, and loading costs the same at every level.
        self.lag = 0.0
        self._mark = time.monotonic()  # when the last solver call ended

    def _solve(self, solver: cp_model.CpSolver, cp: cp_model.CpModel) -> cp_model_helper.CpSolverStatus:
        """One solver call; what passed since the last one is counted as overhead, and what it
        took beyond its time limit as lag."""
        started = time.monotonic()
        self.overhead = max(self.overhead, started - self._mark)
        status = solver.solve(cp)
        self._mark = time.monotonic()
        if not self.budget.deterministic:
            self.lag = max(self.lag, self._mark - started - solver.parameters.max_time_in_seconds)
        self.budget.charge(solver.response_proto.deterministic_time)
        return status

    def margin(self) -> float:
        """What a level needs beyond the spare to be worth starting (wall seconds; deterministic
        budgets need none): the longest build seen so far (the model's own build at first), plus
        the longest a solver call has run past its limit."""
        if self.budget.deterministic:
            return 0.0
        return max(self.overhead, MIN_LEVEL_SHARE * self.budget.limit) + self.lag

    def _solver(self, share: float = 1.0) -> cp_model.CpSolver:
        """A solver limited to ``share`` of the budget left."""
        solver = cp_model.CpSolver()
        params = solver.parameters
        params.random_seed = self.config.solver.seed
        left = max((self.budget.left() - self.budget.spare - self.lag) * share, _MIN_SECONDS)
        if self.config.solver.deterministic:
            params.num_workers = 1
            params.max_deterministic_time = left
        else:
            params.num_workers = workers(self.config)
            params.max_time_in_seconds = left
            if left < SHORT_BUDGET:
                # Presolve and probing alone can take a short budget; the complete hint then gives
                # CP-SAT a first solution at once and search improves it.
                params.cp_model_presolve = False
                params.cp_model_probing_level = 0
        return solver

    def exhausted(self) -> bool:
        """No budget left for another level (what is left builds the answer); the answer so far
        stays, unproven."""
        if self.budget.left() > self.budget.spare + self.margin():
            return False
        self.proven = False
        return True

    def _hint(self, cp: cp_model.CpModel) -> None:
        cp.clear_hints()  # type: ignore[no-untyped-call]
        for var in self.variables:
            cp.add_hint(var, self.values.get(var.index, 0))

    def feasible(
        self,
        name: str,
        restrict: Callable[[cp_model.CpModel], None],
        *,
        share: float,
        starting: Callable[[cp_model.CpSolver], bool] | None = None,
    ) -> bool:
        """Look for a solution of the model under extra constraints (``restrict`` adds them to a
        copy), within ``share`` of the budget left, with no objective: a feasibility search is
        often far faster than the optimisation it settles (a tight packing). On success the
        solution becomes the current answer; the model itself is unchanged. Not started (False)
        when the time left would not cover building it (``margin``), or when ``starting`` (given
        the solver just before the search, so that another thread may stop it) says no."""
        if self.budget.left() <= self.budget.spare + self.margin():
            return False
        cp = self.cp.clone()
        restrict(cp)
        cp.clear_objective()  # type: ignore[no-untyped-call]
        self._hint(cp)
        solver = self._solver(share)
        if starting is not None and not starting(solver):
            return False
        started = time.monotonic()
        status = self._solve(solver, cp)
        seconds = time.monotonic() - started
        found = status in (cp_model.OPTIMAL, cp_model.FEASIBLE)
        if found:
            for var in self.variables:
                self.values[var.index] = int(solver.value(var))
        status_name = "optimal" if found else solver.status_name(status).lower()
        self.reports.append(LevelReport(name, status_name, float("nan"), float("nan"), seconds))
        return found

    def _keep(self, term: Term) -> None:
        """Add the term's side conditions at their values in the answer so far (which therefore
        stays a solution)."""
        for expr in term.fixed:
            self.cp.add(expr == _value(expr, self.values))
        for expr in term.floors:
            self.cp.add(expr >= _value(expr, self.values))

    def _complete(self, term: Term) -> int | None:
        """Give the term's own variables their values in the answer so far, and hint them from
        now on; the term's value there (None if the answer does not decide it)."""
        for aux in term.aux:
            value = aux.value(self.values)
            if value is not None:
                self.values[aux.var.index] = value
            self.variables.append(aux.var)
        return evaluate(term.expr, self.values)

    def run(self, term: Term) -> LevelReport:
        cp = self.cp
        self._keep(term)
        held = self._complete(term)
        solver = self._solver()
        self._hint(cp)
        if term.maximize:
            cp.maximize(term.expr)
        else:
            cp.minimize(term.expr)
        started = time.monotonic()
        status = self._solve(solver, cp)
        seconds = time.monotonic() - started
        name = solver.status_name(status).lower()
        found = status in (cp_model.OPTIMAL, cp_model.FEASIBLE)
        value = float(solver.objective_value) if found else float("nan")
        worse = found and held is not None and (value < held if term.maximize else value > held)
        if not found or worse:
            # Nothing found, or a solution worse than the answer so far (CP-SAT may return one
            # when its search ends before it reaches the hint): the answer so far stays.
            self.proven = False
            bound = float(solver.best_objective_bound) if found else float("nan")
            self.last_gap = abs(held - bound) / max(abs(held), 1.0) if found and held is not None else float("nan")
            if held is not None and term.held:  # later levels must not undo what the answer achieves here
                self.hold(term, held)
            value = float("nan") if held is None else float(held)
            report = LevelReport(term.name, name, value / term.unit, bound / term.unit, seconds)
            self.reports.append(report)
            return report
        bound = float(solver.best_objective_bound)
        for var in self.variables:
            self.values[var.index] = int(solver.value(var))
        value_int = round(value)
        if term.held:
            cp.add(term.expr >= value_int if term.maximize else term.expr <= value_int)
        self.last_gap = abs(value - bound) / max(abs(value), 1.0)
        self.proven &= status == cp_model.OPTIMAL
        report = LevelReport(term.name, name, value / term.unit, bound / term.unit, seconds)
        self.reports.append(report)
        return report

    def hold(self, term: Term, value: int) -> None:
        """Keep a level at least as good as ``value`` without solving it."""
        self.cp.add(term.expr >= value if term.maximize else term.expr <= value)

    @property
    def gap(self) -> float:
        """Relative gap of the last level; 1.0 (unknown) when it found nothing in time."""
        return self.last_gap if self.last_gap == self.last_gap else 1.0
