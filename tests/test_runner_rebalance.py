"""The controller's rebalancing loop (issue 15, item 7): enabled by config, due every period,
never while another plan is in flight; its plan runs through the one executor (evictions with
the move's reason, node events with the load before and after); dry-run moves nothing."""

from __future__ import annotations

from typing import Any

from runner_support import feed, make_runner

from placer.kube.actions import Outcome
from placer.kube.runner import Runner
from placer.models import Usage

IGNORE = {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []

    def evict(self, key: str, uid: str | None = None) -> Outcome:
        self.calls.append(("evict", key))
        return Outcome(ok=True)

    def event(self, key: str, uid: str, *, reason: str, note: str, **_: Any) -> None:
        self.calls.append(("event", key, reason, note))

    def node_event(self, node: str, *, reason: str, note: str, **_: Any) -> None:
        self.calls.append(("node_event", node, reason, note))


def _node(name: str) -> dict[str, Any]:
    return {
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}},
    }


def _job_pod(name: str, node: str) -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "ownerReferences": [{"kind": "Job", "name": "etl", "uid": "job-uid", "controller": True}],
        },
        "spec": {
            "nodeName": node,
            "schedulerName": "placer",
            "restartPolicy": "Never",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}],
        },
        "status": {"phase": "Running"},
    }


def _runner(**rebalance: Any) -> tuple[Runner, Recorder]:
    controller = rebalance.pop("controller", {})
    r = make_runner(
        metricsPort=0,
        leaderElection={"enabled": False},
        engine={"solver": {"workers": 1, "timeLimit": 2}, "rebalance": {"enabled": True, **rebalance}},
        **controller,
    )
    rec = Recorder()
    r.actions = rec  # type: ignore[assignment]
    feed(r, "Node", _node("hot"), _node("cold"))
    feed(r, "Pod", *(_job_pod(f"etl-{i}", "hot") for i in range(4)))
    feed(
        r,
        "Job",
        {
            "kind": "Job",
            "metadata": {"name": "etl", "namespace": "ns", "uid": "job-uid"},
            "spec": {"podFailurePolicy": IGNORE, "template": {"spec": {"schedulerName": "placer"}}},
        },
    )
    return r, rec


def test_a_due_rebalance_starts_a_plan_with_events_on_the_pod_and_both_nodes() -> None:
    r, rec = _runner()
    assert r.rebalancing.due(0.0)
    r.rebalancer.run(r.cluster())
    assert r.driver.plan is not None and r.driver.reason == "Rebalanced"
    evicted = [c[1] for c in rec.calls if c[0] == "evict"]
    assert len(evicted) == 1 and evicted[0].startswith("ns/etl-")
    (pod_event,) = [c for c in rec.calls if c[0] == "event"]
    assert (
        pod_event[2] == "Rebalanced"
        and "from hot (cpu 100% -> 75%" in pod_event[3]
        and "to cold (cpu 0% -> 25%" in pod_event[3]
    )
    assert {c[1] for c in rec.calls if c[0] == "node_event"} == {"hot", "cold"}
    assert not r.rebalancing.due(r.rebalancing.last or 0.0)  # the period starts again


def test_a_dry_run_prints_the_plan_and_moves_nothing() -> None:
    r, rec = _runner(controller={"dryRun": True})
    r.rebalancer.run(r.cluster())
    assert r.driver.plan is None and rec.calls == []


def test_disabled_is_never_due_and_no_plan_when_nothing_is_hot() -> None:
    r, _ = _runner(enabled=False)
    assert not r.rebalancing.due(0.0)
    r, rec = _runner(thresholds={"low": 10, "high": 100})
    r.rebalancer.run(r.cluster())
    assert r.driver.plan is None and rec.calls == []


class NoMetrics:
    last_error = "503: the server is currently unable to handle the request"

    def read(self, now: float) -> Usage:
        return Usage()


def test_missing_usage_falls_back_to_requests_with_an_event_on_each_node_concerned() -> None:
    r, rec = _runner(load="usage")
    r.rebalancing.usage = NoMetrics()  # type: ignore[assignment]
    r.rebalancer.run(r.cluster())
    (event,) = [c for c in rec.calls if c[0] == "node_event" and c[2] == "UsageUnavailable"]
    assert event[1] == "hot" and "4 pod(s)" in event[3] and "503" in event[3]
    assert r.driver.plan is not None  # by requests node hot is at 100 %: the plan still moves a pod
