"""The one time budget of a decision: a solver call that runs past its limit is charged to what
every later call may use (a fake clock, no timing)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from ortools.sat.python import cp_model

from placer.engine import Budget, LevelSolver, levels
from placer.models import Config

CONFIG = Config.model_validate({"solver": {"workers": 1, "timeLimit": 10}})
LATE = 1.0  # how long the fake solver call runs past its own time limit


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """``placer.engine.levels`` reads this clock; every CP-SAT call advances it by its own limit
    plus ``LATE`` (as a model that takes long to load does)."""
    fake = Clock()
    monkeypatch.setattr(levels, "time", SimpleNamespace(monotonic=fake))
    solve = cp_model.CpSolver.solve

    def late(self: cp_model.CpSolver, model: cp_model.CpModel, *args: Any, **kwargs: Any) -> Any:
        status = solve(self, model, *args, **kwargs)
        fake.now += self.parameters.max_time_in_seconds + LATE
        return status

    monkeypatch.setattr(cp_model.CpSolver, "solve", late)
    return fake


def _solver() -> LevelSolver:
    """A level solver of a tiny model with a 10 s budget read from the fake clock."""
    cp = cp_model.CpModel()
    x = [cp.new_bool_var(f"x{i}") for i in range(3)]
    cp.add(sum(x) <= 2)
    budget = Budget(CONFIG.solver.time_limit, deterministic=False)
    return LevelSolver(cp, x, {v.index: 0 for v in x}, CONFIG, budget=budget)


def test_a_solver_call_past_its_limit_shortens_every_later_one(clock: Clock) -> None:
    solver = _solver()
    assert solver.feasible("half", lambda cp: None, share=0.5)
    assert solver.lag == pytest.approx(LATE)
    left = solver.budget.left()
    assert left == pytest.approx(CONFIG.solver.time_limit - (CONFIG.solver.time_limit - solver.budget.spare) / 2 - LATE)
    later = solver._solver().parameters.max_time_in_seconds
    assert later == pytest.approx(left - solver.budget.spare - LATE)
    assert later + LATE <= left  # the next call, late as much again, still ends within the budget


def test_no_level_starts_that_its_lag_would_take_past_the_limit(clock: Clock) -> None:
    solver = _solver()
    assert solver.feasible("half", lambda cp: None, share=0.5)
    without = solver.margin() - solver.lag  # what a level would need were the call not late
    clock.now += solver.budget.left() - solver.budget.spare - without - LATE / 2
    assert solver.exhausted()
    assert not solver.feasible("place-all", lambda cp: None, share=1.0)
