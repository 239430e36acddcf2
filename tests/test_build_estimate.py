"""A model that cannot be built in the time left is not started (``encoder.build_seconds``: its
placement variables at the most a build makes per second), and the decision holds the cyclic
garbage collector, the plan's objects included. The engine's clock is injected; no timing."""

from __future__ import annotations

import gc
from typing import Any

import pytest
from support import cluster, node, pod
from test_build_deadline import DETERMINISTIC, _never, _solve, _start_runs_long, _tight, _valid
from test_deadline import LIMIT, WALL, Clock

from placer import service
from placer.engine import (
    Budget,
    BuildStoppedError,
    Scorer,
    batch_demand,
    build_batch,
    build_snapshot,
    select_candidates,
    solve,
)
from placer.engine import encoder as engine_encoder


def test_the_estimate_counts_the_models_placement_variables() -> None:
    """One per group and candidate with room for one of its pods: a full node and a node too
    small give none, a host port's group one per node with room."""
    c = cluster(
        [node("full", cpu="2"), node("small", cpu="1"), node("mid", cpu="3"), node("big", cpu="16", memory="64Gi")],
        [pod("run", cpu="2", node="full")]
        + [pod(f"p{i}", cpu="2", memory="1Gi") for i in range(5)]
        + [pod("ported", cpu="1", hostPorts=[{"port": 80}])],
    )
    pending = [p for p in c.pods if p.pending]
    snap = build_snapshot(c.nodes, [p for p in c.pods if p.running], pending, c.namespaces)
    batch = build_batch(snap, pending, WALL)
    scorer = Scorer(snap, WALL, batch_demand(batch))
    select_candidates(batch, scorer, WALL.solver.candidates)
    model, _ = engine_encoder.encode(batch, scorer)
    assert len(model.y) == 2 + 3  # p*: mid and big; ported: small, mid and big
    assert engine_encoder.build_seconds(batch) * engine_encoder.BUILD_VARIABLES_PER_SECOND == pytest.approx(5)


def _estimates(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The build estimates the solve reads."""
    real = solve.build_seconds
    seen: list[float] = []

    def build_seconds(*args: Any) -> float:
        seen.append(real(*args))
        return seen[-1]

    monkeypatch.setattr(solve, "build_seconds", build_seconds)
    return seen


def test_a_model_that_cannot_be_built_in_the_time_left_is_not_started(monkeypatch: pytest.MonkeyPatch) -> None:
    """A build made a variable in a fifth of the limit: the tight batch's model (one group on two
    nodes: 2 variables) would take 40 % of it, more than the start left; the start is the
    answer, whole and valid."""
    clock = Clock()
    placed = _start_runs_long(monkeypatch, clock, 0.7 * LIMIT)
    monkeypatch.setattr(engine_encoder, "BUILD_VARIABLES_PER_SECOND", 5.0 / LIMIT)
    seen = _estimates(monkeypatch)
    for name in ("encode", "greedy", "LevelSolver"):
        monkeypatch.setattr(solve, name, _never(name))
    c = _tight()
    res = _solve(c, Budget.of(WALL, clock=clock))
    assert seen == [pytest.approx(0.4 * LIMIT)]
    assert res.status == "fallback" and res.levels == []
    assert len(res.placements) == placed[0] == 8
    _valid(c, res)


def test_a_model_the_time_left_can_build_is_built_and_solved(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same start and the same 2 variables, made a variable in a tenth of the limit: 20 % of
    it, less than is left."""
    clock = Clock()
    _start_runs_long(monkeypatch, clock, 0.7 * LIMIT)
    monkeypatch.setattr(engine_encoder, "BUILD_VARIABLES_PER_SECOND", 10.0 / LIMIT)
    seen = _estimates(monkeypatch)
    c = _tight()
    res = _solve(c, Budget.of(WALL, clock=clock))
    assert seen == [pytest.approx(0.2 * LIMIT)]
    assert res.levels and len(res.placements) == 8
    _valid(c, res)


def test_a_deterministic_budget_builds_whatever_the_estimate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine_encoder, "BUILD_VARIABLES_PER_SECOND", 1e-9)
    c = _tight()
    res = _solve(c, Budget.of(DETERMINISTIC, clock=Clock()), DETERMINISTIC)
    assert res.status != "fallback" and res.levels and len(res.placements) == 8
    _valid(c, res)


def test_the_plan_is_made_with_the_cycle_collector_held(monkeypatch: pytest.MonkeyPatch) -> None:
    """The plan builds a model of its own after the batch's solve: a full collection then would
    walk every long-lived object; the collector runs again once the decision is made."""
    low = [pod(f"low{i}", cpu="4", node=f"n{i}", priority=1) for i in range(2)]
    c = cluster([node(f"n{i}", cpu="4", memory="16Gi") for i in range(2)], [*low, pod("high", cpu="2", priority=10)])
    real = service.plan_batch
    enabled: list[bool] = []

    def plan_batch(*args: Any, **kwargs: Any) -> Any:
        enabled.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(service, "plan_batch", plan_batch)
    batch = [p for p in c.pods if p.pending]
    state = build_snapshot(c.nodes, [p for p in c.pods if p.running], batch, c.namespaces)
    assert gc.isenabled()
    decision = service.decide(c, state, batch, WALL)
    assert enabled == [False] and gc.isenabled()
    assert decision.plan is not None and len(decision.placements) == 1
    assert service.check_decision(c, state, batch, decision, WALL) == []


def test_a_build_stops_once_what_is_left_would_not_cover_freeing_it() -> None:
    """A build that ran 8 of the 10 s may go on (freeing it takes a tenth of that: 0.8 s, and
    1.5 s are left beyond the spare); at 9 s it stops (0.9 s against 0.5 s), before the
    deadline. A deterministic budget never reads the wall clock for it."""
    clock = Clock()
    budget = Budget.of(WALL, clock=clock)
    check = budget.build_check()
    clock.now += 0.8 * LIMIT
    check()
    clock.now += 0.1 * LIMIT
    assert not budget.over()
    with pytest.raises(BuildStoppedError):
        check()
    deterministic = Budget.of(DETERMINISTIC, clock=clock)
    patient = deterministic.build_check()
    clock.now += 1000.0
    patient()


def test_a_build_stopped_before_the_deadline_answers_with_the_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """The capacity constraints take 90 % of the limit: the build stops at the next check, no
    level runs, and the answer is the greedy start, valid."""
    clock = Clock()
    placed = _start_runs_long(monkeypatch, clock, 0.0)
    real = engine_encoder.CONSTRAINTS["capacity"]

    def capacity(model: Any) -> Any:
        real(model)
        clock.now += 0.9 * LIMIT

    monkeypatch.setitem(engine_encoder.CONSTRAINTS, "capacity", capacity)
    monkeypatch.setattr(solve, "LevelSolver", _never("LevelSolver"))
    c = _tight()
    budget = Budget.of(WALL, clock=clock)
    res = _solve(c, budget)
    assert not budget.over()
    assert res.status == "fallback" and res.levels == []
    assert len(res.placements) == placed[0] == 8
    _valid(c, res)
