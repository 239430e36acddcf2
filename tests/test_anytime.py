"""Anytime solving (issue 12 item 3): a batch is solved on the solver thread while the next one
gathers; the solve's time limit is the floor with a backlog and grows with the time left in the
batch window when arrivals are slow (the floor again once the batch's own pods are two windows
late); the next batch is taken only once this one's answer is
applied, so its model holds this batch's placements (never two batches on the same free room)."""

from __future__ import annotations

import itertools
import time
from typing import Any

import pytest
from runner_support import feed, make_runner
from test_scope import Recorder, _pod

from placer.controller.batcher import Batcher
from placer.kube import anytime
from placer.kube.anytime import solve_budget
from placer.kube.runner import MIN_SLEEP, TICK, Runner
from placer.models import Cluster, Config
from placer.service import Decision, decide


def test_a_backlog_gets_the_floor() -> None:
    assert solve_budget(floor=0.5, most=10, window=30, size=99, waiting=99, waited=3.0) == 0.5
    assert solve_budget(floor=0.5, most=10, window=30, size=99, waiting=250, waited=29.0) == 0.5


def test_the_tail_of_a_backlog_gets_the_floor() -> None:
    # Its own pods have waited two windows: no time for quality at their expense.
    assert solve_budget(floor=0.5, most=10, window=1, size=99, waiting=0, waited=None, overdue=8.0) == 0.5
    # A batch taken when its window ends (slow arrivals) still gets the time left to the next one.
    assert solve_budget(floor=0.5, most=10, window=30, size=99, waiting=0, waited=None, overdue=30.2) == 10


def test_slow_arrivals_get_what_is_left_of_the_window_up_to_the_most() -> None:
    assert solve_budget(floor=0.5, most=10, window=30, size=99, waiting=0, waited=None) == 10
    assert solve_budget(floor=0.5, most=60, window=30, size=99, waiting=0, waited=None) == 30
    assert solve_budget(floor=0.5, most=60, window=30, size=99, waiting=5, waited=26.0) == pytest.approx(4.0)
    # The next batch is (over)due already: never less than the floor.
    assert solve_budget(floor=0.5, most=60, window=30, size=99, waiting=5, waited=31.0) == 0.5
    # A most below the floor leaves the floor.
    assert solve_budget(floor=3, most=1, window=30, size=99, waiting=0, waited=None) == 3


def test_fast_arrivals_end_the_solve_when_the_next_batch_is_full() -> None:
    """A stream of pods fills the next batch before its window ends: the solve ends by then (at
    the recent rate), never below the floor; an unknown rate leaves the window's rule."""
    assert solve_budget(floor=0.1, most=10, window=30, size=99, waiting=9, waited=0.1, fills_in=0.45) == 0.45
    assert solve_budget(floor=0.1, most=10, window=30, size=99, waiting=9, waited=0.1, fills_in=0.01) == 0.1
    assert solve_budget(floor=0.1, most=10, window=30, size=99, waiting=9, waited=0.1, fills_in=None) == 10
    assert solve_budget(floor=0.1, most=10, window=30, size=99, waiting=9, waited=29.5, fills_in=3.0) == 0.5


def test_the_batcher_tells_when_the_next_batch_fills_at_the_recent_rate() -> None:
    b = Batcher(window=30, size=10)
    assert b.fills_in(0.0) is None  # nothing arrived: no rate
    for i in range(10):  # ten pods over 0.9 s, one every 0.1 s
        b.sync([f"p{k}" for k in range(i + 1)], now=i * 0.1)
    assert b.fills_in(0.9) == 0.0  # full already
    b.take()
    assert b.fills_in(1.0) == pytest.approx(10 * 1.0 / 10)  # ten pods a second: ten more in 1 s
    b.sync(["p10", "p11"], now=1.0)
    assert b.fills_in(1.0) == pytest.approx(8 * 0.8 / 10)  # the last ten joined over 0.8 s
    assert b.fills_in(40.0) is None  # nobody joined within the window: the rate is stale


def test_the_batcher_tells_when_the_next_batch_falls_due() -> None:
    b = Batcher(window=2.0, size=10)
    assert b.due_in(0.0) is None  # no pod waits
    b.sync(["p0"], now=0.0)
    assert b.due_in(0.5) == pytest.approx(1.5)  # one pod, no rate: when its window closes
    for i in range(1, 5):  # then one pod every 0.1 s: the rest (5 pods) in 0.5 s, before the window
        b.sync([f"p{k}" for k in range(i + 1)], now=i * 0.1)
    assert b.due_in(0.4) == pytest.approx(5 * 0.4 / 5)
    assert b.due_in(1.99) == pytest.approx(0.01)  # the window closes first
    assert b.due_in(2.0) == 0.0  # due now
    b.sync([f"p{k}" for k in range(10)], now=0.5)
    assert b.due_in(0.5) == 0.0  # full


def test_the_loop_sleeps_until_a_batch_falls_due_not_a_whole_tick(monkeypatch: pytest.MonkeyPatch) -> None:
    r = make_runner(Recorder(), metricsPort=0, batchSize=10, batchWindowSeconds=30)
    feed(r, "Node", _node("a"))
    feed(r, "Pod", _pod("first", "ns"))
    r.cycle.queue()
    for inf in r.informers.values():
        inf._synced.set()
    assert r._sleep() == TICK  # not leading: a follower ticks at its pace, whatever waits
    r.leadership.leading.set()
    r.fence.renewed(time.monotonic(), 3600.0)  # as the elector does on each renewal
    assert r._sleep() == TICK  # the window closes in 30 s: a whole tick
    t0 = time.monotonic()
    monkeypatch.setattr(time, "monotonic", lambda: t0 + 29.95)
    assert r._sleep() == pytest.approx(0.05, abs=0.01)  # the window closes in 0.05 s: wake then
    r.fence.close()
    assert r._sleep() == TICK  # a fenced leader takes no batch: it ticks at its pace
    r.fence.renewed(time.monotonic(), 3600.0)
    monkeypatch.setattr(time, "monotonic", lambda: t0 + 29.999)
    assert r._sleep() == MIN_SLEEP  # never a busy loop
    monkeypatch.setattr(time, "monotonic", lambda: t0 + 31.0)
    assert r._sleep() == TICK  # due, but this tick did not take it (a stage failed): no spinning


def _node(name: str) -> dict[str, Any]:
    # Room for one of the test pods (2 cpu each).
    return {"kind": "Node", "metadata": {"name": name}, "status": {"allocatable": {"cpu": "2", "memory": "8Gi"}}}


def _runner(budgets: list[float], monkeypatch: pytest.MonkeyPatch, **cfg: Any) -> tuple[Runner, Recorder]:
    def recording(cluster: Cluster, state: Any, batch: Any, config: Config, **kwargs: Any) -> Decision:
        budgets.append(config.solver.time_limit)
        return decide(cluster, state, batch, config, **kwargs)

    monkeypatch.setattr(anytime, "decide", recording)
    actions = Recorder()
    r = make_runner(actions, metricsPort=0, batchSize=1, batchWindowSeconds=20, maxSolveSeconds=8, **cfg)
    r.cfg.engine.solver.time_limit = 0.5
    feed(r, "Node", _node("a"))
    feed(r, "Pod", _pod("first", "ns"), _pod("second", "ns"))
    return r, actions


def test_the_next_batch_is_solved_on_a_model_holding_the_previous_ones_placement(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    budgets: list[float] = []
    r, actions = _runner(budgets, monkeypatch)
    r.ctx.batcher.sync(r.cycle.pending_keys(), now=time.monotonic())  # the pods arrive now (the runner's clock)
    r.cycle.submit(r.cluster())  # the first batch (one pod; the other one waits: a full batch)
    assert r.cycle.solving is not None
    (solving,) = r.cycle.solving[0].keys
    assert solving not in r.cycle.pending_keys()  # a pod being solved is not queued again
    r.cycle.solving[1].result(timeout=60)
    r.cycle.finish()
    r.ctx.batcher.sync(r.cycle.pending_keys(), now=time.monotonic())
    r.cycle.submit(r.cluster())  # the second batch: nothing waits behind it
    assert r.cycle.solving is not None
    r.cycle.solving[1].result(timeout=60)
    r.cycle.finish()
    r.ctx.pool.shutdown(wait=True)
    r.reports.shutdown(wait=True)
    binds = [c[1:] for c in actions.calls if c[0] == "bind"]
    assert binds == [(solving, "a")]  # one pod fits on a; the second batch saw it there
    (other,) = {"ns/first", "ns/second"} - {solving}
    assert [c[1] for c in actions.calls if c[0] == "unschedulable"] == [other]
    # A full batch waited behind the first: the floor; nothing behind the second: the window
    # left (20 s) capped by maxSolveSeconds (8 s).
    assert budgets == [0.5, 8]
    samples = {s.name: s.value for s in r.metrics.solve_budget.collect()[0].samples}
    assert samples["placer_solve_budget_seconds_sum"] == pytest.approx(8.5)


def test_a_solve_that_raises_puts_its_batch_back(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any, **kwargs: Any) -> Decision:
        raise RuntimeError("solver failed")

    r, actions = _runner([], monkeypatch)
    monkeypatch.setattr(anytime, "decide", broken)
    r.ctx.batcher.sync(r.cycle.pending_keys(), now=0.0)
    r.cycle.submit(r.cluster())
    assert r.cycle.solving is not None
    key = next(iter(r.cycle.solving[0].keys))
    r.cycle.solving[1].exception(timeout=60)
    with pytest.raises(RuntimeError):
        r.cycle.finish()
    assert r.cycle.solving is None and key in r.cycle.pending_keys()  # queued again (after its back-off)
    assert not [c for c in actions.calls if c[0] == "bind"]


def _unsettled_runner(monkeypatch: pytest.MonkeyPatch) -> tuple[Runner, Recorder, list[tuple[str, float]]]:
    """Three one-pod batches (a backlog: the floor, 0.25 s) on a node with room for one, every
    decision unsettled (its plan search out of time), maxSolveSeconds 1; the solves' budgets."""
    solves: list[tuple[str, float]] = []

    def unsettled(cluster: Cluster, state: Any, batch: Any, config: Config, **kwargs: Any) -> Decision:
        (pod,) = batch
        solves.append((pod.key, config.solver.time_limit))
        d = decide(cluster, state, batch, config, **kwargs)
        return Decision(d.placements, d.unplaced, d.plan, "feasible", d.gap, settled=False)

    monkeypatch.setattr(anytime, "decide", unsettled)
    actions = Recorder()
    r = make_runner(actions, metricsPort=0, batchSize=1, batchWindowSeconds=20, maxSolveSeconds=1)
    r.cfg.engine.solver.time_limit = 0.25
    feed(r, "Node", _node("a"))  # room for one of the three
    feed(r, "Pod", _pod("p1", "ns"), _pod("p2", "ns"), _pod("p3", "ns"))
    return r, actions, solves


def _solve_while_due(r: Runner, most: int = 12) -> None:
    for _ in range(most):
        r.ctx.batcher.sync(r.cycle.pending_keys(), now=time.monotonic())
        r.cycle.submit(r.cluster())
        if r.cycle.solving is None:
            break
        r.cycle.solving[1].result(timeout=60)
        r.cycle.finish()


def test_a_plan_search_that_ran_out_of_time_is_tried_again_at_once_with_twice_the_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A backlog's batches get the floor; a batch whose plan search could not finish in it (the
    gang-preemption benchmark: 2 of 27 high gangs placed at 0.1 s) is neither reported
    unschedulable nor backed off: it is decided again with twice the time, up to maxSolveSeconds,
    and only then reported."""
    r, actions, solves = _unsettled_runner(monkeypatch)
    _solve_while_due(r)
    r.ctx.pool.shutdown(wait=True)
    r.reports.shutdown(wait=True)
    reported = [c[1] for c in actions.calls if c[0] == "unschedulable"]
    assert sorted(reported) == sorted(set(reported)) and len(reported) == 2  # each left-out pod told once
    for key in reported:
        mine = [budget for k, budget in solves if k == key]
        assert mine[-1] == 1.0  # reported only after a search with maxSolveSeconds
        for before, after in itertools.pairwise(mine):
            assert after == min(2 * before, 1.0) or after == 1.0  # twice the time (the window may give more)
        assert len(mine) >= 2  # decided again, not backed off


def test_a_batch_left_out_at_max_solve_seconds_keeps_that_budget_after_its_back_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Left out unsettled at maxSolveSeconds, a pod is reported and backed off; it used to come
    back at the floor and climb 0.25, 0.5, 1 s again (a 5,000-pod gang under load: two ladders,
    17 solves, docs/bench/e2e-biggang.md run 3). Now its next solve has maxSolveSeconds at once."""
    r, actions, solves = _unsettled_runner(monkeypatch)
    _solve_while_due(r)
    r.reports.idle(60)
    left = {c[1] for c in actions.calls if c[0] == "unschedulable"}
    assert len(left) == 2
    first = len(solves)
    r.ctx.batcher.wake(time.monotonic())  # their back-off is over
    _solve_while_due(r, most=2)
    r.ctx.pool.shutdown(wait=True)
    r.reports.shutdown(wait=True)
    again = solves[first:]
    assert again and all(k in left for k, _ in again)
    assert [budget for _, budget in again] == [1.0] * len(again)  # no ladder from the floor
