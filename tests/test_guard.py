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
from placer.kube import runner as runner_module
from placer.models import Cluster, Config
from placer.service import Decision, check_decision, decide, pending_batch

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
    r.batcher.sync(["default/x", "default/y"], now=0.0)
    r.batcher.size = 2
    r._solve(c)
    r.pool.shutdown(wait=True)
    assert not [call for call in actions.calls if call[0] == "bind"]
    refusals = [call for call in actions.calls if call[0] == "event" and call[2] == "FailedScheduling"]
    assert {call[1] for call in refusals} == {"default/x", "default/y"}
    assert all("refused its own answer" in call[3] for call in refusals)
    assert r.metrics.refused.labels(kind="placements")._value.get() == 1
    assert len(r.assumed) == 0


def test_the_controller_binds_an_answer_the_validator_accepts() -> None:
    actions = FakeActions()
    r = make_runner(actions, metricsPort=0)
    _nodes_and_pods(r)
    r.batcher.sync(["default/x", "default/y"], now=0.0)
    r.batcher.size = 2
    r._solve(r.cluster())
    r.pool.shutdown(wait=True)
    assert sorted(call[1] for call in actions.calls if call[0] == "bind") == ["default/x", "default/y"]
    assert r.metrics.refused.labels(kind="placements")._value.get() == 0
