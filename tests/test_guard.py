"""The independent validator guards the controller's writes.

Aspects: ``check_decision`` accepts what the engine decides (placements and global plans) and
objects to an answer that overbooks a node or whose plan is unsafe; the controller writes
nothing for an answer the validator rejects, says so on every pod of the batch, counts it, and
retries the pods later.
"""

from __future__ import annotations

from typing import Any

import pytest
from runner_support import FakeActions, feed, make_runner
from support import cluster, node, pod

from placer.engine import build_snapshot
from placer.kube import anytime as runner_module  # where the controller calls decide
from placer.models import Cluster, Config
from placer.plan import Plan, PlannedEviction, StepSpec
from placer.service import Decision, check_decision, decide, pending_batch
from placer.validate import validate_placements

CONFIG = Config.model_validate({"solver": {"workers": 1, "deterministic": True, "timeLimit": 5}})


def _decide(c: Cluster) -> tuple[Any, list[Any], Decision]:
    batch, _ = pending_batch(c, "placer")
    state = build_snapshot(c.nodes, [p for p in c.pods if p.running], batch, c.namespaces)
    return state, batch, decide(c, state, batch, CONFIG)


def _placer(name: str, cpu: str, **extra: Any) -> dict[str, Any]:
    return pod(name, cpu=cpu, schedulerName="placer", **extra)


def test_the_engines_own_answers_pass_the_guard() -> None:
    plain = cluster([node("a", cpu="4"), node("b", cpu="4")], [_placer(f"p{i}", "1") for i in range(6)])
    state, batch, decision = _decide(plain)
    assert len(decision.placements) == 6 and check_decision(plain, state, batch, decision, CONFIG) == []
    rs = {"kind": "ReplicaSet", "name": "backend"}
    fragmented = cluster(
        [node("a", cpu="15"), node("b", cpu="15")],
        [
            pod("proxy-0", cpu="7.5", node="a", owner={"kind": "ReplicaSet", "name": "proxy"}),
            pod("backend-0", cpu="5", node="a", owner=rs),
            _placer("proxy-1", "7.5"),
            _placer("backend-1", "5"),
            _placer("backend-2", "5"),
        ],
        replicaSets=[{"name": "proxy", "schedulerName": "placer"}, {"name": "backend", "schedulerName": "placer"}],
    )
    state, batch, decision = _decide(fragmented)
    assert decision.plan is not None and decision.plan.evictions
    assert check_decision(fragmented, state, batch, decision, CONFIG) == []


def test_an_overbooked_answer_is_rejected() -> None:
    c = cluster([node("a", cpu="2"), node("b", cpu="2")], [_placer("x", "2"), _placer("y", "2")])
    state, batch, _ = _decide(c)
    a = state.index["a"]
    overbooked = Decision([(p, a) for p in batch], [], None, "optimal", 0.0)
    problems = check_decision(c, state, batch, overbooked, CONFIG)
    assert problems and any("cpu" in p for p in problems)


def _nodes_and_pods(r: Any) -> None:
    feed(
        r,
        "Node",
        *(
            {
                "kind": "Node",
                "metadata": {"name": n},
                "status": {"allocatable": {"cpu": "2", "memory": "8Gi", "pods": "110"}},
            }
            for n in ("a", "b")
        ),
    )
    feed(
        r,
        "Pod",
        *(
            {
                "kind": "Pod",
                "metadata": {"name": n, "namespace": "default", "uid": f"uid-{n}"},
                "spec": {
                    "schedulerName": "placer",
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}],
                },
            }
            for n in ("x", "y")
        ),
    )


def test_the_controller_writes_nothing_for_a_rejected_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    actions = FakeActions()
    r = make_runner(actions, metricsPort=0)
    _nodes_and_pods(r)
    c = r.cluster()

    def overbooking(cluster: Cluster, state: Any, batch: list[Any], *args: Any, **kwargs: Any) -> Decision:
        return Decision([(p, 0) for p in batch], [], None, "optimal", 0.0)

    monkeypatch.setattr(runner_module, "decide", overbooking)
    r.ctx.batcher.sync(["default/x", "default/y"], now=0.0)
    r.ctx.batcher.size = 2
    r.cycle.solve(c)
    r.ctx.pool.shutdown(wait=True)
    assert not [call for call in actions.calls if call[0] == "bind"]
    refusals = [call for call in actions.calls if call[0] == "event" and call[2] == "FailedScheduling"]
    assert {call[1] for call in refusals} == {"default/x", "default/y"}
    assert all("refused its own answer" in call[3] for call in refusals)
    assert r.metrics.refused.labels(kind="placements")._value.get() == 1
    assert len(r.ctx.assumed) == 0


def test_the_controller_binds_an_answer_the_validator_accepts() -> None:
    actions = FakeActions()
    r = make_runner(actions, metricsPort=0)
    _nodes_and_pods(r)
    r.ctx.batcher.sync(["default/x", "default/y"], now=0.0)
    r.ctx.batcher.size = 2
    r.cycle.solve(r.cluster())
    r.ctx.pool.shutdown(wait=True)
    assert sorted(call[1] for call in actions.calls if call[0] == "bind") == ["default/x", "default/y"]
    assert r.metrics.refused.labels(kind="placements")._value.get() == 0


# --- the guard sees the whole cluster ------------------------------------------------------------
#
# The answers below are built by hand: each is unsafe only because of a node it does not touch,
# which a guard looking at the touched nodes alone cannot see.


def _state(c: Cluster) -> tuple[Any, list[Any]]:
    batch, _ = pending_batch(c, "placer")
    return build_snapshot(c.nodes, [p for p in c.pods if p.running], batch, c.namespaces), batch


def _pod(c: Cluster, name: str) -> Any:
    return next(p for p in c.pods if p.name == name)


def _preemption(state: Any, victim: Any, preemptor: Any, node: str) -> Plan:
    """A plan that preempts ``victim`` on ``node`` and binds ``preemptor`` into its room."""
    n = state.index[node]
    return Plan(
        placements=[(preemptor, n)],
        evictions=[PlannedEviction(pod=victim, node=n, kind="preempt", for_=[preemptor.key])],
        steps=[
            StepSpec(id=1, op="evict", pod=victim.key, node=n, after=()),
            StepSpec(id=2, op="await-gone", pod=victim.key, node=n, after=(1,)),
            StepSpec(id=3, op="bind", pod=preemptor.key, node=n, after=(2,)),
        ],
        status="optimal",
        seconds=0.0,
    )


def test_a_plan_that_evicts_although_an_untouched_node_has_room_is_rejected() -> None:
    c = cluster(
        [node("a", cpu="2"), node("b", cpu="2")],
        [pod("victim", cpu="2", node="a"), _placer("urgent", "2", priority=10)],
    )
    state, batch = _state(c)
    plan = _preemption(state, _pod(c, "victim"), batch[0], "a")
    decision = Decision(plan.placements, [], plan, "optimal", 0.0)
    problems = check_decision(c, state, batch, decision, CONFIG)
    assert any("does not strictly improve" in p for p in problems), problems


def test_a_plan_that_leaves_out_a_pod_an_untouched_node_has_room_for_is_rejected() -> None:
    c = cluster(
        [node("a", cpu="2"), node("b", cpu="2"), node("c", cpu="2")],
        [
            pod("victim", cpu="2", node="a"),
            pod("busy", cpu="2", node="b"),
            _placer("urgent", "2", priority=10),
            _placer("also-urgent", "2", priority=10),
        ],
    )
    state, batch = _state(c)
    urgent = next(p for p in batch if p.name == "urgent")
    plan = _preemption(state, _pod(c, "victim"), urgent, "a")
    left = [(p, "Unschedulable", None) for p in batch if p.name == "also-urgent"]
    decision = Decision(plan.placements, left, plan, "optimal", 0.0)  # type: ignore[arg-type]
    problems = check_decision(c, state, batch, decision, CONFIG)
    assert any("default/also-urgent: left unplaced although it fits on node c" in p for p in problems), problems


def test_placements_off_a_selector_only_an_untouched_node_matches_are_rejected() -> None:
    # "when-no-node-matches: ignore-affinity" drops the selector only while NO node matches it.
    c = cluster(
        [node("a"), node("b", labels={"zone": "x"})],
        [
            _placer(
                "picky",
                "1",
                nodeSelector={"zone": "x"},
                annotations={"placer.io/when-no-node-matches": "ignore-affinity"},
            )
        ],
    )
    state, batch = _state(c)
    decision = Decision([(batch[0], state.index["a"])], [], None, "optimal", 0.0)
    problems = check_decision(c, state, batch, decision, CONFIG)
    assert any("does not match the pod's nodeSelector" in p for p in problems), problems


# --- terminating pods ------------------------------------------------------------------------------


def _terminating(c: Cluster, name: str) -> Cluster:
    pods = tuple(p.model_copy(update={"terminating": True}) if p.name == name else p for p in c.pods)
    return c.model_copy(update={"pods": pods})


def test_a_terminating_pending_pod_is_never_placed() -> None:
    c = _terminating(cluster([node("a")], [_placer("leaving", "1"), _placer("staying", "1")]), "leaving")
    state, _ = _state(c)
    batch = list(c.pods)  # as if the batch had been cut before the deletion was seen
    decision = Decision([(p, state.index["a"]) for p in batch], [], None, "optimal", 0.0)
    problems = check_decision(c, state, batch, decision, CONFIG)
    assert any("default/leaving" in p and "terminating" in p for p in problems), problems
    assert not any("default/staying" in p for p in problems), problems


def test_a_terminating_pending_pod_left_unplaced_is_no_violation() -> None:
    c = _terminating(cluster([node("a")], [_placer("leaving", "1"), _placer("staying", "1")]), "leaving")
    assert validate_placements(c, {"default/staying": "a"}) == []


def test_a_terminating_running_pod_holds_its_room_until_gone() -> None:
    c = _terminating(cluster([node("a", cpu="2")], [pod("old", cpu="2", node="a"), _placer("new", "2")]), "old")
    state, batch = _state(c)
    decision = Decision([(batch[0], state.index["a"])], [], None, "optimal", 0.0)
    problems = check_decision(c, state, batch, decision, CONFIG)
    assert any("over capacity" in p and "cpu" in p for p in problems), problems


def test_the_controller_starts_no_plan_that_evicts_although_an_untouched_node_has_room(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    actions = FakeActions()
    r = make_runner(actions, metricsPort=0)
    feed(
        r,
        "Node",
        *(
            {"kind": "Node", "metadata": {"name": n}, "status": {"allocatable": {"cpu": "2", "memory": "8Gi"}}}
            for n in ("a", "b")
        ),
    )
    requests = {"name": "c", "resources": {"requests": {"cpu": "2"}}}
    feed(
        r,
        "Pod",
        {
            "kind": "Pod",
            "metadata": {"name": "victim", "namespace": "default", "uid": "uid-victim"},
            "spec": {"nodeName": "a", "containers": [requests]},
            "status": {"phase": "Running"},
        },
        {
            "kind": "Pod",
            "metadata": {"name": "urgent", "namespace": "default", "uid": "uid-urgent"},
            "spec": {"schedulerName": "placer", "priority": 10, "containers": [requests]},
        },
    )
    c = r.cluster()

    def needless_preemption(cluster: Cluster, state: Any, batch: list[Any], *args: Any, **kwargs: Any) -> Decision:
        plan = _preemption(state, _pod(cluster, "victim"), batch[0], "a")
        return Decision(plan.placements, [], plan, "optimal", 0.0)

    monkeypatch.setattr(runner_module, "decide", needless_preemption)
    r.ctx.batcher.sync(["default/urgent"], now=0.0)
    r.ctx.batcher.size = 1
    r.cycle.solve(c)
    r.ctx.pool.shutdown(wait=True)
    assert r.driver.plan is None  # no plan runs: nothing is evicted, nothing bound
    assert not [call for call in actions.calls if call[0] in ("bind", "evict")]
    assert r.metrics.refused.labels(kind="plan")._value.get() == 1
