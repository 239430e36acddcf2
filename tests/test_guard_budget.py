"""What the no-worse-than-kube-scheduler guard keeps of a decision's budget (``dominance.need``).

The guard runs after the search (the objective levels); it keeps only what its descents may need,
at most ``dominance.SHARE`` of the limit, and the search gets the rest. Observed through the budget
the levels are given (no timing): under a deterministic budget the guard spends no deterministic
units, so the levels get the same budget as without it; on wall time they get all but what the
guard says it needs. The guard still replaces an answer worse than kube-scheduler's.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pytest
from support import cluster, node, pod, validated

from placer.engine import (
    DETERMINISTIC_UNITS_PER_SECOND,
    Assignment,
    Batch,
    Budget,
    LevelSolver,
    Scorer,
    build_batch,
    build_snapshot,
    counts_of,
    dominance,
    solve,
)
from placer.models import Cluster, Config
from placer.service import SolveOptions, solve_cluster

SOLVER = {"workers": 1, "deterministic": True, "seed": 0, "timeLimit": 1}
DETERMINISTIC = Config.model_validate({"solver": SOLVER})
PACK = Config.model_validate({"solver": SOLVER, "strategy": "pack"})  # not guarded: not the balance strategy
WALL = Config.model_validate({"solver": {"workers": 1, "seed": 0, "timeLimit": 4}})


def _tight() -> Cluster:
    """Two nodes of 4 cpu and eight pods of 1 cpu: the pods fill the nodes exactly, cpu and memory
    only (the balance measures' resources, so the guard is on)."""
    return cluster([node(f"n{i}", cpu="4", memory="8Gi") for i in range(2)], [pod(f"p{i}") for i in range(8)])


class _Levels(LevelSolver):
    """The engine's level solver, remembering what each one was given."""

    given: ClassVar[list[float]] = []

    def __init__(self, *args: Any, budget: Budget, **kwargs: Any) -> None:
        _Levels.given.append(budget.left())
        super().__init__(*args, budget=budget, **kwargs)


@pytest.fixture
def given(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """What the levels had left when each decision built its level solver."""
    _Levels.given.clear()
    monkeypatch.setattr(solve, "LevelSolver", _Levels)
    return _Levels.given


def _guarded(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the guard's runs (``dominance.no_worse``)."""
    runs: list[int] = []
    real = dominance.no_worse

    def counted(*args: Any, **kwargs: Any) -> Any:
        runs.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(dominance, "no_worse", counted)
    return runs


def test_under_a_deterministic_budget_the_guard_leaves_the_levels_all_of_it(
    monkeypatch: pytest.MonkeyPatch, given: list[float]
) -> None:
    """Its descents end by their sweeps and spend no deterministic units: keeping a share of the
    units for them would only cut the search short."""
    runs = _guarded(monkeypatch)
    c = _tight()
    guarded = solve_cluster(c, SolveOptions(policy="placer", config=DETERMINISTIC))
    validated(c, guarded, DETERMINISTIC, "placer")
    assert runs, "a cpu/memory batch under the balance strategy is guarded"
    runs.clear()
    solve_cluster(c, SolveOptions(policy="placer", config=PACK))
    assert runs == []
    (with_guard, without) = given
    assert with_guard == pytest.approx(without)
    assert with_guard == pytest.approx(DETERMINISTIC.solver.time_limit * DETERMINISTIC_UNITS_PER_SECOND)


@pytest.mark.parametrize("needs", [0.3, 1.2])
def test_on_wall_time_the_levels_get_all_but_what_the_guard_needs(
    monkeypatch: pytest.MonkeyPatch, given: list[float], needs: float
) -> None:
    """The guard keeps what ``dominance.need`` says it may take (here said by the test), never more
    than its share; the levels get the rest of the limit."""
    monkeypatch.setattr(dominance, "need", lambda *args, **kwargs: needs)
    runs = _guarded(monkeypatch)
    c = _tight()
    validated(c, solve_cluster(c, SolveOptions(policy="placer", config=WALL)), WALL, "placer")
    assert runs
    (levels,) = given
    limit = WALL.solver.time_limit
    kept = min(needs, dominance.SHARE * limit)
    # The phases before the levels (greedy, kube-scheduler's answer, the encoding) took a little.
    assert limit - kept - 0.5 <= levels <= limit - kept


def test_a_guard_that_needs_more_than_its_share_keeps_its_share(
    monkeypatch: pytest.MonkeyPatch, given: list[float]
) -> None:
    monkeypatch.setattr(dominance, "need", lambda *args, **kwargs: float("inf"))
    c = _tight()
    validated(c, solve_cluster(c, SolveOptions(policy="placer", config=WALL)), WALL, "placer")
    (levels,) = given
    limit = WALL.solver.time_limit
    assert limit * (1 - dominance.SHARE) - 0.5 <= levels <= limit * (1 - dominance.SHARE)


def _lopsided(batch: Batch, scorer: Scorer, budget: Budget | None = None) -> Assignment:
    """Every pod on the first node (the test's nodes have room for all of them there)."""
    return [np.zeros(g.size, dtype=np.int64) for g in batch.groups]


@pytest.mark.parametrize("config", [DETERMINISTIC, WALL], ids=["deterministic", "wall"])
def test_the_guard_still_replaces_an_answer_worse_than_kube_schedulers(
    monkeypatch: pytest.MonkeyPatch, config: Config
) -> None:
    """The engine's answer is made lopsided (every pod on one node, no level or descent to even
    it out) and the guard says it needs nothing: the answer returned is still no worse than
    kube-scheduler's on imbalance and std_score, and places as many pods."""
    monkeypatch.setattr(solve, "greedy", _lopsided)
    monkeypatch.setattr(solve, "_widened", lambda batch, scorer, hint, config, budget: counts_of(hint))
    monkeypatch.setattr(solve, "LEVELS", ())
    monkeypatch.setattr(dominance, "need", lambda *args, **kwargs: 0.0)
    runs = _guarded(monkeypatch)
    c = cluster([node(f"n{i}", cpu="8", memory="16Gi") for i in range(3)], [pod(f"p{i}") for i in range(6)])
    mine = validated(c, solve_cluster(c, SolveOptions(policy="placer", config=config)), config, "placer").result
    theirs = solve_cluster(c, SolveOptions(policy="default", config=config)).result
    assert runs
    assert len(mine.placements) == len(theirs.placements) == 6
    assert len({p.node for p in mine.placements}) > 1  # the guard moved pods off the first node
    assert mine.metrics.imbalance <= theirs.metrics.imbalance
    assert mine.metrics.std_score <= theirs.metrics.std_score


def test_the_guards_need_is_measured_only_where_it_can_be_kept() -> None:
    """``dominance.need`` bounds the guard's work from a sample of the other answer's pods: a
    finite number of seconds when there are pods to weigh, infinite (the caller keeps its whole
    share) when the other answer places none, or when the bound exceeds what the caller would keep
    (here nothing at all: the measurement stops at its first timing)."""
    c = _tight()
    pending = [p for p in c.pods if p.pending]
    batch = build_batch(build_snapshot(c.nodes, [], pending, c.namespaces), pending, WALL)
    (gi,) = range(len(batch.groups))
    other = {(gi, 0): 4, (gi, 1): 4}
    found = dominance.need(batch, other, starts=2, targeted=False, seed=0)
    assert 0.0 < found < float("inf")
    assert dominance.need(batch, {}, starts=2, targeted=False, seed=0) == float("inf")
    assert dominance.need(batch, other, starts=2, targeted=False, seed=0, most=0.0) == float("inf")
