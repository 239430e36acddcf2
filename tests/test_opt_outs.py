"""Opt-outs protect against moves and rebalancing, never against a strictly higher priority.

Aspects: a running pod annotated ``placer.io/evictable: "false"`` or
``cluster-autoscaler.kubernetes.io/safe-to-evict: "false"``, or moved too recently (the
controller's cooldown, ``held``), is preempted by a pending pod of strictly higher
``spec.priority`` as kube-scheduler would preempt it; it is never preempted for a higher restart
tier at equal priority, never moved, never rebalanced; a pod placer cannot read what evicting it
means (``Pod.unevictable``) is never evicted at all, nor is a pod in ``frozen``. Every plan here
goes through the independent validator (``support.solve`` / ``validate_plan``).
"""

from __future__ import annotations

from typing import Any

import pytest
from support import DETERMINISTIC, cluster, node, pod, solve

from placer.inputs.kubectl import parse_pod
from placer.models import Cluster, Config
from placer.plan import classify
from placer.service import build_snapshot, decide, pending_batch
from placer.validate import eviction_refusal, move_refusal

OPT_OUTS = [
    pytest.param({"placer.io/evictable": "false"}, id="placer.io/evictable"),
    pytest.param({"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}, id="safe-to-evict"),
    pytest.param({"placer.io/evictable": "maybe"}, id="an unreadable evictable (safe reading: false)"),
]
RS = {"kind": "ReplicaSet", "name": "web"}


def _victim(annotations: dict[str, str], **extra: Any) -> dict[str, Any]:
    return pod("low", cpu="2", node="a", owner=RS, annotations=annotations, **extra)


@pytest.mark.parametrize("annotations", OPT_OUTS)
def test_a_strictly_higher_priority_preempts_a_pod_that_opted_out(annotations: dict[str, str]) -> None:
    c = cluster(
        [node("a", cpu="2")],
        [_victim(annotations), pod("vip", cpu="2", priority=1_000_000, schedulerName="placer")],
        replicaSets=[{"name": "web", "schedulerName": "placer"}],
    )
    outcome = solve(c)
    assert [(e.pod, e.kind) for e in outcome.result.evictions] == [("default/low", "preempt")]
    assert [(p.pod, p.node) for p in outcome.result.placements] == [("default/vip", "a")]


@pytest.mark.parametrize("annotations", OPT_OUTS)
def test_an_opted_out_pod_is_not_preempted_for_a_higher_tier_of_equal_priority(annotations: dict[str, str]) -> None:
    """Same namespace, same priority: the Always pod outranks the Never one by tier only."""
    c = cluster(
        [node("a", cpu="2")],
        [_victim(annotations, restartPolicy="Never"), pod("web", cpu="2", schedulerName="placer")],
    )
    outcome = solve(c)
    assert outcome.result.evictions == [] and outcome.result.placements == []
    plain = cluster(
        [node("a", cpu="2")],
        [_victim({}, restartPolicy="Never"), pod("web", cpu="2", schedulerName="placer")],
    )
    assert [e.pod for e in solve(plain).result.evictions] == ["default/low"]  # without the opt-out


@pytest.mark.parametrize("annotations", OPT_OUTS)
def test_an_opted_out_pod_is_never_moved(annotations: dict[str, str]) -> None:
    """Node a runs x (ReplicaSet web, movable); big must run on a. Opted out: no move."""
    zone = {"zone": "a"}

    def build(ann: dict[str, str]) -> Cluster:
        return cluster(
            [node("a", cpu="2", labels=zone), node("b", cpu="2")],
            [
                pod("x", cpu="2", node="a", owner=RS, annotations=ann),
                pod("big", cpu="2", nodeSelector=zone, schedulerName="placer"),
            ],
            replicaSets=[{"name": "web", "schedulerName": "placer"}],
        )

    assert [(e.pod, e.kind) for e in solve(build({})).result.evictions] == [("default/x", "move")]
    assert solve(build(annotations)).result.evictions == []
    opted = next(p for p in build(annotations).pods if p.name == "x")
    assert move_refusal(build(annotations), opted) is not None and eviction_refusal(build(annotations), opted) is None


def _decide(c: Cluster, **options: Any) -> list[tuple[str, str]]:
    config = Config.model_validate(DETERMINISTIC)
    batch, _ = pending_batch(c, config.scheduler_name)
    state = build_snapshot(c.nodes, [p for p in c.pods if p.running], batch, c.namespaces)
    decision = decide(c, state, batch, config, **options)
    return [(e.pod.key, e.kind) for e in decision.plan.evictions] if decision.plan else []


def test_a_pod_moved_too_recently_is_preempted_by_a_higher_priority_but_not_moved() -> None:
    """``held`` (the controller's move cooldown) bars moves only; ``frozen`` bars every eviction."""
    preempting = cluster(
        [node("a", cpu="2")],
        [_victim({}), pod("vip", cpu="2", priority=10, schedulerName="placer")],
        replicaSets=[{"name": "web", "schedulerName": "placer"}],
    )
    held = frozenset({"default/low"})
    assert _decide(preempting, held=held) == [("default/low", "preempt")]
    assert _decide(preempting, frozen=held) == []
    tier_only = cluster(
        [node("a", cpu="2")],
        [_victim({}, restartPolicy="Never"), pod("web", cpu="2", schedulerName="placer")],
    )
    assert _decide(tier_only) == [("default/low", "preempt")]
    assert _decide(tier_only, held=held) == []
    zone = {"zone": "a"}
    moving = cluster(
        [node("a", cpu="2", labels=zone), node("b", cpu="2")],
        [pod("x", cpu="2", node="a", owner=RS), pod("big", cpu="2", nodeSelector=zone, schedulerName="placer")],
        replicaSets=[{"name": "web", "schedulerName": "placer"}],
    )
    assert _decide(moving) == [("default/x", "move")]
    assert _decide(moving, held=frozenset({"default/x"})) == []


def test_a_pod_placer_cannot_read_is_never_evicted_even_by_a_higher_priority() -> None:
    raw = {
        "kind": "Pod",
        "metadata": {"name": "odd", "namespace": "default", "ownerReferences": [RS | {"uid": "u"}]},
        "spec": {"nodeName": "a", "containers": [{"name": "c", "resources": {"requests": {"cpu": "lots"}}}]},
        "status": {"phase": "Running"},
    }
    odd = parse_pod(raw)
    assert odd.unevictable is not None
    c = Cluster(nodes=cluster([node("a", cpu="2")], []).nodes, pods=(odd,))
    assert not classify(c, odd, "placer").evictable
    assert eviction_refusal(c, odd) is not None
