"""A field placer cannot read affects only its own pod, in ``placer solve`` and in the controller.

Aspects: a malformed ``placer.io/*`` annotation refuses its pending pod with code ``Invalid`` and a
reason naming the field, while every other pod is placed as if that pod were absent; on a running
pod it gets its safe reading (never evicted, counted as just moved) and the pod's requests still
count. In the controller (parsed from the informer caches, what the API server accepted) any
unreadable field is isolated the same way: a pending pod gets PodScheduled=False and a Warning
event naming the field, a running pod is never dropped, and a running pod whose requests cannot
be read makes its node take no new pod. One bad pod among 1,000: the other 999 are bound in the
same cycle. A randomized test injects one malformed annotation into random clusters.
"""

from __future__ import annotations

import json
import math
import time
from typing import Any

import pytest
from builders import property_settings
from hypothesis import given, note
from hypothesis import strategies as st
from runner_support import FakeActions, feed, make_runner
from support import cluster, node, pod, solve
from test_properties import clusters

from placer.inputs import parse_cluster
from placer.kube.runner import Runner
from placer.models import Config, SolverConfig
from placer.service import SolveOptions, solve_cluster
from placer.validate import validate_placements

Json = dict[str, Any]

BAD_ANNOTATIONS = [
    pytest.param("placer.io/gang-size", "two", id="gang-size not a number"),
    pytest.param("placer.io/gang-size", "0", id="gang-size zero"),
    pytest.param("placer.io/moved-at", "yesterday", id="moved-at not a time"),
    pytest.param("placer.io/evictable", "nope", id="evictable not true or false"),
    pytest.param("placer.io/when-no-node-matches", "sometimes", id="when-no-node-matches unknown"),
    pytest.param("placer.io/when-no-node-fits", "maybe", id="when-no-node-fits unknown"),
    pytest.param("placer.io/when-node-labels-change", "explode", id="when-node-labels-change unknown"),
]


@pytest.mark.parametrize(("key", "value"), BAD_ANNOTATIONS)
def test_a_malformed_annotation_refuses_only_its_pending_pod(key: str, value: str) -> None:
    pods = [
        pod("bad", cpu="1", schedulerName="placer", annotations={key: value}),
        *(pod(f"ok{i}", cpu="1", schedulerName="placer") for i in range(3)),
    ]
    c = cluster([node("a", cpu="2"), node("b", cpu="2")], pods)
    outcome = solve(c)
    assert sorted(p.pod for p in outcome.result.placements) == ["default/ok0", "default/ok1", "default/ok2"]
    (refused,) = outcome.result.unplaced
    assert (refused.pod, refused.code) == ("default/bad", "Invalid")
    assert key in refused.reason and repr(value) in refused.reason
    assert refused.detail.invalid is not None and key in refused.detail.invalid
    assert any(key in w and "default/bad" in w for w in outcome.warnings)


def _preemption(evictable: str) -> Any:
    """A running low-priority ReplicaSet pod fills node a; a high-priority pod waits."""
    victim = pod(
        "low",
        cpu="2",
        node="a",
        owner={"kind": "ReplicaSet", "name": "rs"},
        annotations={"placer.io/evictable": evictable, "placer.io/moved-at": "not a time"},
    )
    return solve(cluster([node("a", cpu="2")], [victim, pod("high", cpu="2", priority=100, schedulerName="placer")]))


def test_a_running_pod_with_a_malformed_annotation_keeps_its_room_and_its_safe_reading() -> None:
    """The safe reading of ``evictable: nope`` is ``"false"``, an opt-out: it holds against moves,
    not against a strictly higher priority's preemption (issue 31)."""
    assert [e.pod for e in _preemption("true").result.evictions] == ["default/low"]  # readable: preempted
    outcome = _preemption("nope")
    assert [(e.pod, e.kind) for e in outcome.result.evictions] == [("default/low", "preempt")]
    assert [p.pod for p in outcome.result.placements] == ["default/high"]
    assert len([w for w in outcome.warnings if "default/low" in w]) == 2


def test_moved_at_is_parsed_once_and_an_unreadable_stamp_counts_as_just_moved() -> None:
    now = time.time()
    stamps = {
        "recent": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now - 60)),
        "old": "2020-01-01T00:00:00Z",
        "garbled": "last tuesday",
    }
    c = cluster(
        [node("a", cpu="8")],
        [pod(name, cpu="1", node="a", annotations={"placer.io/moved-at": s}) for name, s in stamps.items()],
    )
    moved = {p.name: p.moved_at for p in c.pods}
    assert moved["old"] == 1577836800.0 and moved["garbled"] == math.inf
    r = make_runner(metricsPort=0)
    assert r.view.frozen(c) == frozenset({"default/recent", "default/garbled"})


# --- the controller ----------------------------------------------------------------------------


def _kube_node(name: str, cpu: str = "8") -> Json:
    return {
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": cpu, "memory": "64Gi", "pods": "500"}},
    }


def _kube_pod(name: str, cpu: Any = "100m", node: str | None = None, **spec: Any) -> Json:
    meta = spec.pop("metadata", {})
    out: Json = {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", **meta},
        "spec": {
            "schedulerName": "placer",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
            **spec,
        },
        "status": {"phase": "Running" if node else "Pending"},
    }
    if node:
        out["spec"]["nodeName"] = node
    return out


def _cycle(r: Runner) -> list[tuple[str, ...]]:
    """One scheduling cycle as ``tick`` runs it, the API writes awaited."""
    r.ctx.batcher.sync(r.cycle.pending_keys(), now=0.0)
    r.cycle.solve(r.cluster())
    r.ctx.pool.shutdown(wait=True)
    r.reports.shutdown(wait=True)  # unschedulable reports are written off the bind pool
    assert isinstance(r.actions, FakeActions)
    return r.actions.calls


ENGINE = {"solver": {"workers": 1, "deterministic": True, "timeLimit": 10, "seed": 0}}


def test_one_bad_pod_among_a_thousand_the_other_999_are_bound_in_the_same_cycle() -> None:
    actions = FakeActions()
    r = make_runner(actions, metricsPort=0, batchSize=1000, engine=ENGINE)
    feed(r, "Node", *(_kube_node(f"n{i}") for i in range(20)))
    pods = [_kube_pod(f"p{i:04d}") for i in range(1000)]
    pods[500]["metadata"]["annotations"] = {"placer.io/gang-size": "many"}
    feed(r, "Pod", *pods)
    calls = _cycle(r)
    bound = {c[1] for c in calls if c[0] == "bind"}
    assert len(bound) == 999 and "default/p0500" not in bound
    assert [c[1:] for c in calls if c[0] == "unschedulable"] == [
        (
            "default/p0500",
            "placer cannot read this pod: metadata.annotations[placer.io/gang-size]: "
            "must be a positive integer, got 'many'",
        )
    ]
    warnings = [c for c in calls if c[0] == "event" and c[2] == "FailedScheduling"]
    assert [c[1] for c in warnings] == ["default/p0500"] and "placer.io/gang-size" in warnings[0][3]


CONTROLLER_CASES = [
    pytest.param(
        _kube_pod("odd", node="a", cpu="3", nodeSelector={"zone": ["x"]}),
        {"a": 5000, "b": 8000},
        id="a running pod with an unreadable selector still holds its requests",
    ),
    pytest.param(
        _kube_pod("odd", node="a", cpu="3", metadata={"labels": {"tier": 7}}),
        {"a": 5000, "b": 8000},
        id="a running pod with a non-string label still holds its requests",
    ),
    pytest.param(
        _kube_pod("odd", node="a", cpu="lots"),
        {"a": 0, "b": 8000},
        id="a running pod whose requests cannot be read: its node takes nothing new",
    ),
]


@pytest.mark.parametrize(("odd", "room"), CONTROLLER_CASES)
def test_the_controller_keeps_a_running_pod_it_cannot_fully_read(odd: Json, room: dict[str, int]) -> None:
    """Pending pods of 1 cpu fill only the room the model has; the odd running pod is never evicted."""
    actions = FakeActions()
    r = make_runner(actions, metricsPort=0, batchSize=100, engine=ENGINE)
    feed(r, "Node", _kube_node("a"), _kube_node("b"))
    feed(r, "Pod", odd, *(_kube_pod(f"p{i:02d}", cpu="1") for i in range(20)))
    c = r.cluster()
    assert "default/odd" in {p.key for p in c.pods}
    calls = _cycle(r)
    per_node = {n: sum(1 for call in calls if call[0] == "bind" and call[2] == n) for n in ("a", "b")}
    assert per_node == {n: cpu // 1000 for n, cpu in room.items()}
    assert not any(call[1] == "default/odd" for call in calls)


def test_the_controller_refuses_a_pending_pod_whose_requests_it_cannot_read() -> None:
    actions = FakeActions()
    r = make_runner(actions, metricsPort=0, engine=ENGINE)
    feed(r, "Node", _kube_node("a"))
    feed(r, "Pod", _kube_pod("odd", cpu=["1"]), _kube_pod("fine", cpu="1"))
    calls = _cycle(r)
    assert [c[1:] for c in calls if c[0] == "bind"] == [("default/fine", "a")]
    ((_, key, message),) = [c for c in calls if c[0] == "unschedulable"]
    assert key == "default/odd" and "spec.containers[0].resources.requests.cpu" in message


def test_the_controller_refuses_a_pending_pod_with_no_containers_as_the_api_server_would() -> None:
    actions = FakeActions()
    r = make_runner(actions, metricsPort=0, engine=ENGINE)
    feed(r, "Node", _kube_node("a"))
    feed(r, "Pod", _kube_pod("empty", containers=[]), _kube_pod("fine", cpu="1"))
    calls = _cycle(r)
    assert [c[1:] for c in calls if c[0] == "bind"] == [("default/fine", "a")]
    ((_, key, message),) = [c for c in calls if c[0] == "unschedulable"]
    assert key == "default/empty"
    assert message == "placer cannot read this pod: spec.containers: is required: a pod has at least one container"


def test_the_controller_skips_only_a_pod_it_cannot_identify() -> None:
    r = make_runner(metricsPort=0)
    feed(r, "Node", _kube_node("a"))
    nameless = _kube_pod("x")
    nameless["metadata"]["name"] = ""
    feed(r, "Pod", nameless, _kube_pod("fine"))
    assert [p.key for p in r.cluster().pods] == ["default/fine"]


# --- randomized: one malformed annotation changes nothing for the others -------------------------

BAD_VALUES = st.sampled_from([(b.values[0], b.values[1]) for b in BAD_ANNOTATIONS])
DETERMINISTIC = Config(solver=SolverConfig(workers=1, deterministic=True, time_limit=5, seed=0))


def _placements(doc: Json) -> dict[str, str]:
    c = parse_cluster("property", json.dumps(doc))
    result = solve_cluster(c, SolveOptions(config=DETERMINISTIC, evict=False)).result
    placements = {p.pod: p.node for p in result.placements if p.pod is not None}
    assert validate_placements(c, placements) == []
    return placements


@property_settings("PLACER_PROPERTY_EXAMPLES", 40)
@given(doc=clusters(), bad=BAD_VALUES, which=st.integers(0, 99))
def test_one_malformed_annotation_leaves_every_other_placement_unchanged(
    doc: str, bad: tuple[str, str], which: int
) -> None:
    """Injected on a running pod, the answer is the same as without it; on a pending pod, that pod
    is Invalid and the others are placed exactly as if it were not in the file."""
    note(doc)
    clean = json.loads(doc)
    pods = clean["pods"]
    target = pods[which % len(pods)]
    note(f"{bad} on {target['name']}")
    dirty = json.loads(doc)
    victim = dirty["pods"][which % len(pods)]
    victim["annotations"] = {**victim.get("annotations", {}), bad[0]: bad[1]}
    got = _placements(dirty)
    if "node" in target:
        assert got == _placements(clean)
    else:
        without = dict(clean, pods=[p for p in pods if p is not target])
        assert got == _placements(without)


def test_an_invalid_pending_pod_causes_no_eviction() -> None:
    victim = pod("low", cpu="2", node="a", owner={"kind": "ReplicaSet", "name": "rs"})
    high = pod("high", cpu="2", priority=100, schedulerName="placer", annotations={"placer.io/gang-size": "-1"})
    outcome = solve(cluster([node("a", cpu="2")], [victim, high]))
    assert outcome.result.evictions == [] and outcome.result.steps == []
    assert [(u.pod, u.code) for u in outcome.result.unplaced] == [("default/high", "Invalid")]
