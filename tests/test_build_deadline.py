"""Anytime answers at short budgets: a phase that only improves the answer is not started once
the decision's deadline has passed, and building a model (the batch's, the global plan's) stops
at the deadline; the answer is then the greedy start (or no plan, unsettled), never less and
always valid. The engine's clock is injected (``Budget(clock=...)``); no timing."""

from __future__ import annotations

from typing import Any

import packgen
import pytest
from support import cluster, node, pod
from test_deadline import LIMIT, WALL, Clock, budgets_given

from placer import service
from placer.engine import Budget, BuildStoppedError, build_batch, build_snapshot, solve, upper_bounds, wholegang
from placer.engine import encoder as engine_encoder
from placer.kube import anytime
from placer.models import Cluster, Config
from placer.plan import planner
from placer.validate import validate_placements

DETERMINISTIC = Config.model_validate({"solver": {"workers": 1, "seed": 0, "timeLimit": 1, "deterministic": True}})


def _tight() -> Cluster:
    """Two nodes of 4 cpu and ten pods of 1 cpu: eight fit (a tight batch)."""
    return cluster([node(f"n{i}", cpu="4", memory="16Gi") for i in range(2)], [pod(f"p{i}") for i in range(10)])


def _solve(c: Cluster, budget: Budget, config: Config = WALL) -> solve.BatchResult:
    pending = [p for p in c.pods if p.pending]
    snap = build_snapshot(c.nodes, [], pending, c.namespaces)
    return solve.solve_batch(snap, pending, config, budget=budget)


def _valid(c: Cluster, res: solve.BatchResult) -> None:
    names = [n.name for n in c.nodes]
    placed = {pod.key: names[n] for pod, n in res.placements}
    assert validate_placements(c, placed) == []


def _start_runs_long(monkeypatch: pytest.MonkeyPatch, clock: Clock, seconds: float) -> list[int]:
    """The greedy start takes ``seconds`` of the injected clock; returns the pods it placed."""
    real = wholegang.greedy_start
    placed: list[int] = []

    def start(*args: Any, **kwargs: Any) -> Any:
        hint = real(*args, **kwargs)
        clock.now += seconds
        placed.append(int(sum(int((nodes >= 0).sum()) for nodes in hint)))
        return hint

    monkeypatch.setattr(solve, "greedy_start", start)
    return placed


def _never(name: str) -> Any:
    def called(*args: Any, **kwargs: Any) -> Any:
        pytest.fail(f"{name} ran after the deadline")

    return called


def test_a_start_that_takes_the_limit_is_the_answer_and_no_model_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    placed = _start_runs_long(monkeypatch, clock, LIMIT)
    for name in ("encode", "greedy", "LevelSolver"):
        monkeypatch.setattr(solve, name, _never(name))
    monkeypatch.setattr(solve.packing, "prepare", _never("packing.prepare"))
    c = _tight()
    res = _solve(c, Budget.of(WALL, clock=clock))
    assert res.status == "fallback"
    assert placed == [8] and len(res.placements) == 8 == res.greedy_placed  # the start, whole
    _valid(c, res)


def test_with_no_time_for_another_pass_the_guards_alternative_is_still_the_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A perfect packing (``packgen``) that the greedy start does not find, whose start takes the
    whole limit: no other greedy pass, no packing search and no model run, but the guard (on:
    ``no_worse``) has already computed the alternative (kube-scheduler's answer in the service;
    here the packing itself), which places more per key: it is the start, so the answer places
    every pod the alternative does."""
    inst = packgen.perfect(101, 60, 3, (3, 5))
    c = inst.cluster()
    clock = Clock()
    placed = _start_runs_long(monkeypatch, clock, LIMIT)
    for name in ("encode", "greedy", "LevelSolver"):
        monkeypatch.setattr(solve, name, _never(name))
    monkeypatch.setattr(solve.packing, "prepare", _never("packing.prepare"))
    pending = [p for p in c.pods if p.pending]
    snap = build_snapshot(c.nodes, [], pending, c.namespaces)
    by_name = {p.name: p for p in pending}
    planted = [(by_name[f"p{k:03d}"], snap.index[f"n{n:03d}"]) for k, n in enumerate(inst.home)]
    asked: list[int] = []

    def alternative() -> list[tuple[Any, int]]:
        asked.append(1)
        return planted

    res = solve.solve_batch(
        snap, pending, WALL, budget=Budget.of(WALL, clock=clock), alternative=alternative, no_worse=True
    )
    assert asked == [1]  # the guard computed it, once
    assert placed[0] < inst.pods  # the greedy start leaves pods out
    assert res.status == "fallback"
    assert len(res.placements) == inst.pods  # at least the alternative's, and it places every pod
    _valid(c, res)


def test_a_tight_batch_starts_no_other_greedy_pass_that_cannot_end_in_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """The start took 60 % of the limit: another pass (the pack strategy's, the queue order's)
    would take as long, more than the 40 % left; the model is still built and solved."""
    clock = Clock()
    _start_runs_long(monkeypatch, clock, 0.6 * LIMIT)
    monkeypatch.setattr(solve, "greedy", _never("greedy"))
    c = _tight()
    res = _solve(c, Budget.of(WALL, clock=clock))
    assert len(res.placements) == 8
    assert res.levels  # the levels ran on what was left
    _valid(c, res)


def test_a_build_that_reaches_the_deadline_stops_and_the_start_is_the_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """The clock passes the deadline while the capacity constraints are built: the build stops at
    the next check, no level runs, and the answer is the greedy start."""
    clock = Clock()
    placed = _start_runs_long(monkeypatch, clock, 0.0)
    real = engine_encoder.CONSTRAINTS["capacity"]
    checked: list[bool] = []

    def capacity(model: Any) -> Any:
        clock.now += LIMIT
        try:
            real(model)
            model.check()
        except BuildStoppedError:
            checked.append(True)
            raise

    monkeypatch.setitem(engine_encoder.CONSTRAINTS, "capacity", capacity)
    monkeypatch.setattr(solve, "LevelSolver", _never("LevelSolver"))
    c = _tight()
    res = _solve(c, Budget.of(WALL, clock=clock))
    assert checked == [True]
    assert res.status == "fallback" and res.levels == []
    assert len(res.placements) == placed[0] == 8
    _valid(c, res)


def test_a_deterministic_budget_ignores_the_wall_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--deterministic``: a start that took far longer than the limit in wall time changes
    nothing; the model is built and solved, and the answer is the one of an undisturbed run."""
    c = _tight()
    calm = _solve(c, Budget.of(DETERMINISTIC, clock=Clock()), DETERMINISTIC)
    clock = Clock()
    _start_runs_long(monkeypatch, clock, 100.0)
    late = _solve(c, Budget.of(DETERMINISTIC, clock=clock), DETERMINISTIC)
    assert late.status != "fallback" and late.levels
    assert sorted((p.key, n) for p, n in late.placements) == sorted((p.key, n) for p, n in calm.placements)


def _preemption() -> Cluster:
    """Two full nodes of low-priority pods; two high-priority pods that fit only by evicting."""
    low = [pod(f"low{i}", cpu="4", node=f"n{i}", priority=1) for i in range(2)]
    high = [pod(f"high{i}", cpu="2", priority=10) for i in range(2)]
    return cluster([node(f"n{i}", cpu="4", memory="16Gi") for i in range(2)], low + high)


def _decide(c: Cluster, budget: Budget) -> service.Decision:
    batch = [p for p in c.pods if p.pending]
    running = [p for p in c.pods if p.running]
    state = build_snapshot(c.nodes, running, batch, c.namespaces)
    decision = service.decide(c, state, batch, WALL, budget=budget)
    assert service.check_decision(c, state, batch, decision, WALL) == []
    return decision


def test_the_plan_is_planned_in_time_and_not_built_past_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    c = _preemption()
    planned = _decide(c, Budget.of(WALL, clock=Clock()))
    assert planned.plan is not None and len(planned.placements) == 2  # with time, two evictions
    clock = Clock()
    real = service.solve_batch

    def solve_batch(*args: Any, **kwargs: Any) -> Any:
        res = real(*args, **kwargs)
        clock.now += LIMIT  # the batch's solve took the whole limit
        return res

    monkeypatch.setattr(service, "solve_batch", solve_batch)
    monkeypatch.setattr(planner.PlanModel, "build", _never("PlanModel.build"))
    late = _decide(c, Budget.of(WALL, clock=clock))
    assert late.plan is None and not late.settled  # unsettled: a controller decides it again with more time
    assert late.placements == [] and len(late.unplaced) == 2


def test_a_plan_whose_build_reaches_the_deadline_is_dropped_unsettled(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    real = planner.PlanModel._capacity
    stopped: list[bool] = []

    def capacity(self: Any, free: Any) -> None:
        clock.now += LIMIT
        try:
            real(self, free)
        except BuildStoppedError:
            stopped.append(True)
            raise

    monkeypatch.setattr(planner.PlanModel, "_capacity", capacity)
    monkeypatch.setattr(planner, "LevelSolver", _never("the plan's levels"))
    late = _decide(_preemption(), Budget.of(WALL, clock=clock))
    assert stopped == [True]
    assert late.plan is None and not late.settled


def test_a_budget_fits_work_only_before_its_deadline() -> None:
    clock = Clock()
    budget = Budget.of(WALL, clock=clock)
    assert budget.fits(LIMIT - budget.spare - 0.1) and not budget.fits(LIMIT - budget.spare)
    assert not budget.over()
    budget.check()  # before the deadline: nothing happens
    clock.now += LIMIT - budget.spare
    assert budget.over() and not budget.fits(0.0)
    with pytest.raises(BuildStoppedError):
        budget.check()
    deterministic = Budget.of(DETERMINISTIC, clock=clock)
    clock.now += 1000.0
    assert deterministic.fits(1000.0) and not deterministic.over()
    deterministic.check()


def test_the_vectorised_upper_bounds_are_the_room_per_candidate() -> None:
    """Each candidate's bound is the most pods of the group its free room takes (at most the
    group's size, one per node with a host port); nodes without room get no variable."""
    c = cluster(
        [node("small", cpu="1"), node("mid", cpu="3"), node("big", cpu="16", memory="64Gi")],
        [pod(f"p{i}", cpu="1", memory="1Gi") for i in range(5)] + [pod("ported", cpu="1", hostPorts=[{"port": 80}])],
    )
    pending = [p for p in c.pods if p.pending]
    snap = build_snapshot(c.nodes, [], pending, c.namespaces)
    batch = build_batch(snap, pending, WALL)
    names = [n.name for n in c.nodes]
    for group in batch.groups:
        group.candidates = group.feasible
        bounds = {names[n]: ub for n, ub in upper_bounds(snap.free, group)}
        if group.has_ports:
            assert bounds == {"small": 1, "mid": 1, "big": 1}
        else:
            assert bounds == {"small": 1, "mid": 3, "big": 5}


def test_the_controllers_solve_keeps_the_time_of_its_check_out_of_the_decision(monkeypatch: pytest.MonkeyPatch) -> None:
    """``SolveJob``: the decision ends early by what checking its answer may take (the runner
    passes the longest recent check), so that decision and check end within the limit; a
    deterministic limit (not wall seconds) is left whole."""
    given = budgets_given(monkeypatch, anytime)
    c = _tight()
    batch = [p for p in c.pods if p.pending]
    state = build_snapshot(c.nodes, [], batch, c.namespaces)
    for config, kept in ((WALL, 2.0), (DETERMINISTIC, 0.0)):
        job = anytime.SolveJob(
            cluster=c, state=state, batch=batch, config=config, budget=config.solver.time_limit, planning=False,
            max_evictions=0, max_per_node=0, frozen=frozenset(), check_seconds=2.0,
        )  # fmt: skip
        answer = job.run()
        assert answer.problems == [] and len(answer.decision.placements) == 8
        budget = given.pop()
        assert budget is not None
        whole = Budget.of(config).limit
        assert budget.limit <= whole - kept and (kept or budget.limit == whole)


def test_with_no_time_left_to_load_the_plan_its_greedy_plan_is_the_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """The plan's model took 6 s of the 10 s limit to build: loading it into the solver would take
    about as long, more than is left, so its placed level is not solved; the greedy plan (two
    evictions at most, as planned with time) is the answer, and the validator accepts it."""
    clock = Clock()
    real_build = planner.PlanModel.build

    def build(self: Any, **kwargs: Any) -> None:
        real_build(self, **kwargs)
        clock.now += 0.6 * LIMIT

    class Levels(planner.LevelSolver):
        def run(self, term: Any) -> Any:
            pytest.fail("the plan's placed level was solved with no time to load its model")

    monkeypatch.setattr(planner.PlanModel, "build", build)
    monkeypatch.setattr(planner, "LevelSolver", Levels)
    late = _decide(_preemption(), Budget.of(WALL, clock=clock))
    assert late.plan is not None and len(late.placements) == 2
    assert 1 <= len(late.plan.evictions) <= 2
