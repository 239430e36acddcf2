"""One deadline per decision: every phase reads what the phases before it left of the time limit
(``Budget``, with the engine's clock injected; no timing). kube-scheduler's simulation inside a
decision, the guard and the levels after it, and each neighbourhood re-solve of a large batch
(``lns``) get less when earlier work (the snapshot, kube-scheduler's run beside a batched run, a
build) has used some of the limit."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest
from support import cluster, node, pod, validated

from placer import service
from placer.baseline import SimResult
from placer.engine import Budget, Scorer, build_batch, build_snapshot, counts_of, greedy, lns, solve
from placer.models import Config

LIMIT = 10.0
WALL = Config.model_validate({"solver": {"workers": 1, "seed": 0, "timeLimit": LIMIT}})


class Clock:
    """Wall seconds that move only when a test moves them (it starts at the real clock's time, so
    that a deadline handed to code reading the real clock lies ahead of it)."""

    def __init__(self) -> None:
        self.now = time.monotonic()

    def __call__(self) -> float:
        return self.now


class FrozenBudgets:
    """Stands in for ``Budget`` where a module makes its own (``Budget.of``): every budget reads
    ``clock``, counted from its now (a frozen clock: a budget's limit is what it leaves, exactly)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    def of(self, config: Config, *, started: float | None = None) -> Budget:
        return Budget.of(config, clock=self.clock)


def budgets_given(monkeypatch: pytest.MonkeyPatch, module: Any) -> list[Budget | None]:
    """The budget each call of ``module.decide`` is given, in order (the calls go on as before)."""
    given: list[Budget | None] = []
    real = module.decide

    def decided(*args: Any, budget: Budget | None = None, **kwargs: Any) -> Any:
        given.append(budget)
        return real(*args, budget=budget, **kwargs)

    monkeypatch.setattr(module, "decide", decided)
    return given


def test_a_budget_started_before_the_call_leaves_only_what_is_left() -> None:
    clock = Clock()
    fresh = Budget.of(WALL, clock=clock)
    late = Budget.of(WALL, clock=clock, started=clock.now - 8.0)  # 8 s went to earlier phases
    assert fresh.left() == pytest.approx(LIMIT)
    assert late.left() == pytest.approx(LIMIT - 8.0)
    # A phase given at most 3.5 s gets them from the fresh budget, and only what the late one
    # leaves beyond its spare (kept for building the answer).
    assert fresh.deadline(3.5) == pytest.approx(clock.now + 3.5)
    assert late.deadline(3.5) == pytest.approx(clock.now + LIMIT - 8.0 - late.spare)
    # Parts of a budget read the same clock: one capped now shrinks as the whole one is used.
    part = late.capped(0.5)
    clock.now += 0.5
    assert part.left() == pytest.approx((LIMIT - 8.0) / 2 - 0.5)
    assert late.deadline() == pytest.approx(clock.now + LIMIT - 8.5 - late.spare)
    assert Budget.of(Config.model_validate({"solver": {"deterministic": True}})).deadline() is None


def _tight() -> Any:
    """Two nodes of 4 cpu, eight pods of 1 cpu (cpu and memory only: the guard is on)."""
    return cluster([node(f"n{i}", cpu="4", memory="8Gi") for i in range(2)], [pod(f"p{i}") for i in range(8)])


def _decide(budget: Budget) -> tuple[list[float | None], list[float]]:
    """Decide the tight batch on ``budget``; the deadline kube-scheduler's simulation was given,
    and what the levels had left when they started."""
    deadlines: list[float | None] = []
    levels: list[float] = []
    real_simulate, real_levels = service.simulate, solve.LevelSolver

    def simulated(*args: Any, **kwargs: Any) -> Any:
        deadlines.append(kwargs.get("deadline"))
        return real_simulate(*args, **kwargs)

    def level_solver(*args: Any, budget: Budget, **kwargs: Any) -> Any:
        levels.append(budget.left())
        return real_levels(*args, budget=budget, **kwargs)

    c = _tight()
    batch = [p for p in c.pods if p.pending]
    state = build_snapshot(c.nodes, [], batch, c.namespaces)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(service, "simulate", simulated)
        patch.setattr(solve, "LevelSolver", level_solver)
        decision = service.decide(c, state, batch, WALL, budget=budget)
    assert len(decision.placements) == 8
    assert service.check_decision(c, state, batch, decision, WALL) == []
    return deadlines, levels


def test_a_decision_started_earlier_gives_its_simulation_and_levels_only_what_is_left() -> None:
    clock = Clock()
    fresh_deadlines, fresh_levels = _decide(Budget.of(WALL, clock=clock))
    late = Budget.of(WALL, clock=clock, started=clock.now - 9.0)  # 1 s of the 10 left
    late_deadlines, late_levels = _decide(late)
    # kube-scheduler's simulation: its share of the limit (NO_WORSE_SHARE) from a fresh budget,
    # what is left beyond the spare from the late one.
    assert fresh_deadlines == [pytest.approx(clock.now + service.NO_WORSE_SHARE * LIMIT)]
    assert late_deadlines == [pytest.approx(clock.now + 1.0 - late.spare)]
    # The levels start with no more than the decision has left.
    assert fresh_levels and max(fresh_levels) <= LIMIT
    assert late_levels and max(late_levels) <= 1.0


def test_a_batched_run_counts_each_batchs_time_from_the_batchs_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """``solve_cluster`` starts the first batch's budget before its snapshot and every batch's before
    kube-scheduler's run beside it: each decision receives a budget already running, a part of
    the batch's limit that ends early by what writing its answer takes."""
    given = budgets_given(monkeypatch, service)
    c = _tight()
    service.solve_cluster(c, service.SolveOptions(batch_size=4, config=WALL))
    assert len(given) == 2
    kept = 4 * service.ANSWER_SECONDS_PER_POD + 2 * service.ANSWER_SECONDS_PER_NODE  # 4 pods, 2 nodes
    assert all(b is not None and b.parent is not None and b.limit <= LIMIT - kept for b in given)
    first, second = (b.parent for b in given if b is not None)
    assert first is not None and second is not None
    assert first.limit == second.limit == LIMIT
    assert first.started < second.started  # each batch has the limit, counted from its own start


@pytest.mark.parametrize(("per_node", "capped"), [(service.ANSWER_SECONDS_PER_NODE, False), (1.0, True)])
def test_writing_the_answer_keeps_at_most_its_share_of_the_limit(
    monkeypatch: pytest.MonkeyPatch, per_node: float, capped: bool
) -> None:
    """``solve_cluster`` ends each decision early by what writing its answer takes for the batch
    and the cluster's nodes: for eight pods on two nodes, a few microseconds of a 0.1 s limit; at
    one second a node (as 25,000 nodes at the real rate), more than the limit, and the decision
    still gets 1 - ``ANSWER_SHARE`` of it to decide instead of nothing. The clock is frozen: what
    the decision is given is its budget's limit, exactly."""
    limit = 0.1
    config = Config.model_validate({"solver": {"workers": 1, "seed": 0, "timeLimit": limit}})
    monkeypatch.setattr(service, "Budget", FrozenBudgets(Clock()))
    given = budgets_given(monkeypatch, service)
    monkeypatch.setattr(service, "ANSWER_SECONDS_PER_NODE", per_node)
    c = _tight()
    outcome = validated(c, service.solve_cluster(c, service.SolveOptions(config=config)), config, "placer")
    assert len(outcome.result.placements) == 8
    (budget,) = given
    writing = 8 * service.ANSWER_SECONDS_PER_POD + 2 * per_node  # eight pods, two nodes
    deciding = (1.0 - service.ANSWER_SHARE) * limit if capped else limit - writing
    assert budget is not None and budget.limit == pytest.approx(deciding)
    assert budget.limit >= (1.0 - service.ANSWER_SHARE) * limit - 1e-12


def test_no_neighbourhood_resolve_runs_past_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every sub-model takes BUILD seconds to build and each solve runs LATE past its own limit
    (as a big model loading on a loaded machine does): re-solves stop while the next one, built
    and late as the worst before it, still ends by the deadline; the answer stays a solution."""
    build_seconds, late = 0.7, 0.4
    clock = Clock()
    real_build, real_solve = lns._build, lns._solve
    limits: list[float] = []

    def build(*args: Any, **kwargs: Any) -> Any:
        clock.now += build_seconds
        return real_build(*args, **kwargs)

    def solved(model: Any, config: Config, limit: float) -> Any:
        limits.append(limit)
        clock.now += limit + late
        return real_solve(model, config, 0.05)

    monkeypatch.setattr(lns, "_build", build)
    monkeypatch.setattr(lns, "_solve", solved)
    monkeypatch.setattr(lns, "descend", lambda batch, scorer, counts, **kw: (counts, 0, 0))
    c = cluster([node(f"n{i}", cpu="8") for i in range(6)], [pod(f"p{i}", cpu=str(1 + i % 3)) for i in range(12)])
    pending = [p for p in c.pods if p.pending]
    snap = build_snapshot(c.nodes, [], pending, c.namespaces)
    batch = build_batch(snap, pending, WALL)
    demand = sum((g.vec * g.size for g in batch.groups), np.zeros(len(snap.resources), dtype=np.int64))
    scorer = Scorer(snap, WALL, demand)
    budget = Budget(5.0, deterministic=False, clock=clock)
    counts, report = lns.improve(batch, scorer, counts_of(greedy(batch, scorer)), WALL, budget)
    assert report.iterations == len(limits) >= 2
    assert budget.used() <= budget.limit - budget.spare + 1e-9  # never past the deadline
    # After the first re-solve ran late, each limit left room for the lag: the solve's end (limit
    # plus LATE) fell within what the budget had left beyond its spare.
    assert all(limit <= 1.0 for limit in limits)
    placed = sum(counts.values())
    assert placed == len(pending)
    for (gi, n), k in counts.items():  # every node within its allocatable
        assert k >= 0 and n in batch.groups[gi].feasible
    used = snap.used.copy()
    for (gi, n), k in counts.items():
        used[n] += batch.groups[gi].vec * k
    assert (used <= snap.alloc).all()


def test_kube_schedulers_run_beside_a_batched_run_stops_at_the_batch_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """The run beside placer's batches (``DefaultRun``) is simulated within the batch's deadline,
    its share of the limit at most; one that does not finish in time is dropped (its state stopped
    inside a batch), and the batches go on without its target."""
    beside: list[float | None] = []
    targets: list[Any] = []
    real_simulate, real_decide = service.simulate, service.decide

    def simulated(*args: Any, **kwargs: Any) -> Any:
        if "replicasets" not in kwargs:  # kube-scheduler's answer inside ``decide``
            return real_simulate(*args, **kwargs)
        beside.append(kwargs.get("deadline"))
        return SimResult([], [], 0.0, stopped=True)  # the deadline came first

    def decided(*args: Any, target: Any = None, **kwargs: Any) -> Any:
        targets.append(target)
        return real_decide(*args, target=target, **kwargs)

    monkeypatch.setattr(service, "simulate", simulated)
    monkeypatch.setattr(service, "decide", decided)
    started = time.monotonic()
    out = service.solve_cluster(_tight(), service.SolveOptions(batch_size=4, config=WALL))
    assert len(beside) == 1  # dropped after the batch it could not finish
    deadline = beside[0]
    assert deadline is not None and started < deadline <= time.monotonic() + service.NO_WORSE_SHARE * LIMIT
    assert targets == [None, None]
    assert out.result.metrics.placed == 8
