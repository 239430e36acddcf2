"""The solver loop's guarantee: a level never leaves the answer worse than it found it on that level."""

from __future__ import annotations

import pytest
from ortools.sat.python import cp_model

from placer.engine import Aux, Budget, LevelSolver, Term, evaluate
from placer.models import Config

CONFIG = Config.model_validate({"solver": {"workers": 1, "timeLimit": 5}})


def _model(start: list[int]) -> tuple[cp_model.CpModel, list[cp_model.IntVar], dict[int, int], Term]:
    """Three counts summing to 12; the term is their total distance from 4 (absolute values as
    added variables, as the strategies write them)."""
    cp = cp_model.CpModel()
    xs = [cp.new_int_var(0, 10, f"x{i}") for i in range(3)]
    cp.add(sum(xs) == 12)
    aux, devs = [], []
    for i, x in enumerate(xs):
        d = cp.new_int_var(0, 10, f"d{i}")
        cp.add(d >= x - 4)
        cp.add(d >= 4 - x)
        aux.append(Aux(d, lambda values, x=x: abs(values[x.index] - 4)))
        devs.append(d)
    values = {x.index: v for x, v in zip(xs, start, strict=True)}
    return cp, xs, values, Term("distance", cp_model.LinearExpr.sum(devs), False, aux=tuple(aux))


def _loop(cp: cp_model.CpModel, xs: list[cp_model.IntVar], values: dict[int, int]) -> LevelSolver:
    return LevelSolver(cp, list(xs), values, CONFIG, budget=Budget(5.0, deterministic=False))


def test_a_level_improves_the_answer_so_far() -> None:
    cp, xs, values, term = _model([6, 4, 2])
    report = _loop(cp, xs, values).run(term)
    assert report.status == "optimal"
    assert [values[x.index] for x in xs] == [4, 4, 4]
    assert report.value == 0


def test_a_level_keeps_the_answer_so_far_when_the_solver_returns_a_worse_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """CP-SAT may stop with a solution worse than the hint (it had not reached the hint yet): the
    loop keeps the answer it had, reports its value, and holds later levels to it."""
    cp, xs, values, term = _model([4, 4, 4])
    real = LevelSolver._solve

    def worse(self: LevelSolver, solver: cp_model.CpSolver, model: cp_model.CpModel) -> object:
        forced = model.clone()
        forced.add(term.expr >= 2)  # what a search that missed the hint returns
        return real(self, solver, forced)

    monkeypatch.setattr(LevelSolver, "_solve", worse)
    loop = _loop(cp, xs, values)
    report = loop.run(term)
    assert [values[x.index] for x in xs] == [4, 4, 4]
    assert report.value == 0
    assert evaluate(term.expr, values) == 0
    assert not loop.proven
    monkeypatch.undo()
    cp.maximize(xs[0])  # a later level: the distance stays held at 0
    solver = cp_model.CpSolver()
    assert solver.solve(cp) == cp_model.OPTIMAL
    assert solver.value(xs[0]) == 4
