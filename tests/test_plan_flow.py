"""Issue 13 item 6: batches keep flowing while a plan runs, on a state that holds the plan's room
(room the plan frees for its pods stays theirs; victims count until gone), and no second plan
starts meanwhile."""

from __future__ import annotations

from typing import Any

from runner_support import feed, make_runner
from test_scope import Recorder, _pod

from placer.kube.runner import Runner


def _node(name: str) -> dict[str, Any]:
    return {
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": "2", "memory": "8Gi", "pods": "110"}},
    }


def _batch(r: Runner) -> None:
    r.ctx.batcher.sync(r.cycle.pending_keys(), now=0.0)
    r.ctx.batcher.size = 1
    r.cycle.solve(r.cluster())


def test_a_batch_solved_while_a_plan_runs_never_takes_the_plans_room() -> None:
    actions = Recorder()
    r = make_runner(actions, metricsPort=0)
    feed(r, "Node", _node("a"), _node("b"))
    running = [_pod("old", "ns", node="a"), _pod("busy", "ns", node="b", priority=1000)]
    feed(r, "Pod", *running, _pod("urgent", "ns", priority=100))
    _batch(r)  # the plan: preempt old on a for urgent; the victim does not go away in this test
    assert r.driver.plan is not None and [c[1] for c in actions.calls if c[0] == "evict"] == ["ns/old"]
    # The victim is gone (its room on a is free but the plan's bind has not happened yet), b has
    # been freed meanwhile, and two more pods arrive.
    feed(
        r,
        "Pod",
        _pod("urgent", "ns", priority=100),
        _pod("late", "ns"),
        _pod("later", "ns", priority=500),
    )
    _batch(r)  # runs although the plan is in flight
    _batch(r)
    r.ctx.pool.shutdown(wait=True)
    binds = {c[1]: c[2] for c in actions.calls if c[0] == "bind"}
    assert "ns/urgent" not in binds  # still waiting for its victim
    assert list(binds.values()) == ["b"], binds  # one of the newcomers takes b, none takes a
    assert [c[1] for c in actions.calls if c[0] == "evict"] == ["ns/old"]  # no second plan


def test_pending_pods_are_counted_by_why_they_wait() -> None:
    """Issue 13's health metrics: placer_pending_pods_by_reason, new until a solve says why."""
    actions = Recorder()
    r = make_runner(actions, metricsPort=0)
    feed(r, "Node", _node("a"))
    feed(r, "Pod", _pod("busy", "ns", node="a", priority=1000), _pod("waits", "ns"), _pod("also", "ns"))
    r.cycle.queue()
    gauge = r.metrics.pending_by_reason
    assert gauge.labels(reason="new")._value.get() == 2
    r.ctx.batcher.sync(r.cycle.pending_keys(), now=0.0)
    r.ctx.batcher.size = 10
    r.cycle.solve(r.cluster())
    r.ctx.pool.shutdown(wait=True)
    r.cycle.queue()
    assert gauge.labels(reason="Unschedulable")._value.get() == 2 and gauge.labels(reason="new")._value.get() == 0


def test_a_pod_left_out_while_a_plan_runs_waits_for_its_end_unreported() -> None:
    """A batch solved while a plan is in flight may not plan: what it leaves out is neither
    reported Unschedulable nor backed off; it waits for the plan's end and is solved again then."""
    actions = Recorder()
    r = make_runner(actions, metricsPort=0)
    feed(r, "Node", _node("a"), _node("b"))
    running = [_pod("old", "ns", node="a"), _pod("low", "ns", node="b", priority=10)]
    feed(r, "Pod", *running, _pod("urgent", "ns", priority=100))
    _batch(r)  # the plan: preempt old on a for urgent (the victim stays in this test)
    assert r.driver.plan is not None
    feed(r, "Pod", *running, _pod("urgent", "ns", priority=100), _pod("also", "ns", priority=100))
    _batch(r)  # also needs low's room on b: a plan could give it, but one is in flight
    r.ctx.pool.shutdown(wait=True)
    r.reports.shutdown(wait=True)
    assert [c[1] for c in actions.calls if c[0] == "evict"] == ["ns/old"]  # no second plan
    assert "ns/also" not in [c[1] for c in actions.calls if c[0] == "unschedulable"]
    r.ctx.batcher.sync(r.cycle.pending_keys(), now=1e9)  # however long it takes: not before the plan ends
    assert "ns/also" not in r.ctx.batcher.take()
    r.ctx.batcher.wake(now=1e9)  # what the plan's end does
    r.ctx.batcher.sync(r.cycle.pending_keys(), now=1e9)
    assert "ns/also" in r.ctx.batcher.take()
