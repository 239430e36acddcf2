"""Tenant safety (issue 14): restart tiers rank pods within a namespace only (``restartTiers:
namespace``, the default), ``preemptionPolicy: Never`` pods cause no eviction of any kind.

Every answer goes through ``placer.validate`` (``support.solve``), whose own implementation of
the tier scopes (``validate.outranks``) shares no code with the engine's.
"""

from __future__ import annotations

from typing import Any

import pytest
from support import cluster, node, pod, solve, unplaced, where

from placer import validate
from placer.models import Cluster, Config, Pod


def _job(name: str, namespace: str, **extra: Any) -> dict[str, Any]:
    owner = {"kind": "Job", "name": name}
    return pod(name, cpu="2", namespace=namespace, restartPolicy="Never", node="a", owner=owner, **extra)


def _deployment_pod(name: str, namespace: str, **extra: Any) -> dict[str, Any]:
    return pod(name, cpu="2", namespace=namespace, owner={"kind": "ReplicaSet", "name": name}, **extra)


def _contest(job_namespace: str, **pending: Any) -> Cluster:
    """One full node running a priority-0 Job pod; a priority-0 Deployment pod of team-a arrives."""
    return cluster([node("a", cpu="2")], [_job("batch", job_namespace), _deployment_pod("web", "team-a", **pending)])


def _evicted(outcome: Any) -> list[tuple[str, str]]:
    return [(e.pod, e.kind) for e in outcome.result.evictions]


def test_a_deployment_pod_never_preempts_another_namespaces_job_of_equal_priority() -> None:
    out = solve(_contest("team-b"))
    assert _evicted(out) == []
    assert unplaced(out) == {"web": "Unschedulable"}


def test_within_a_namespace_the_restart_tier_still_preempts() -> None:
    out = solve(_contest("team-a"))
    assert _evicted(out) == [("team-a/batch", "preempt")]
    assert where(out) == {"web": "a"}


def test_a_strictly_higher_priority_preempts_across_namespaces() -> None:
    out = solve(_contest("team-b", priority=10))
    assert _evicted(out) == [("team-b/batch", "preempt")]


@pytest.mark.parametrize(("setting", "evicts"), [("cluster", True), (True, True), ("off", False), (False, False)])
def test_cluster_scope_keeps_single_tenant_behaviour_and_off_is_pure_kubernetes(setting: Any, evicts: bool) -> None:
    out = solve(_contest("team-b"), priority={"restartTiers": setting})
    assert bool(out.result.evictions) is evicts


def test_the_default_scope_is_namespace() -> None:
    assert Config().priority.restart_tiers == "namespace"
    assert Config.model_validate({"priority": {"restartTiers": True}}).priority.restart_tiers == "cluster"
    assert Config.model_validate({"priority": {"restartTiers": False}}).priority.restart_tiers == "off"


def test_the_validator_refuses_a_cross_namespace_tier_preemption() -> None:
    """The plan that ``cluster`` scope makes is invalid under ``namespace`` scope."""
    c = _contest("team-b")
    plan = solve(c, priority={"restartTiers": "cluster"}).result
    assert plan.evictions
    problems = validate.validate_plan(c, plan, restart_tiers="namespace")
    assert any("team-b/batch" in p for p in problems), problems
    assert validate.validate_plan(c, plan, restart_tiers="cluster") == []


def _p(namespace: str, priority: int, restart: str) -> Pod:
    return Pod(name="x", namespace=namespace, priority=priority, restart_policy=restart)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("a", "b", "namespace", "cluster_", "off"),
    [
        (_p("t1", 0, "Always"), _p("t1", 0, "Never"), True, True, False),
        (_p("t1", 0, "Always"), _p("t2", 0, "Never"), False, True, False),
        (_p("t1", 1, "Never"), _p("t2", 0, "Always"), True, True, True),
        (_p("t1", 0, "Never"), _p("t1", 0, "Always"), False, False, False),
        (_p("t1", 0, "Always"), _p("t1", 0, "Always"), False, False, False),
    ],
)
def test_who_outranks_whom(a: Pod, b: Pod, namespace: bool, cluster_: bool, off: bool) -> None:
    assert validate.outranks(a, b, restart_tiers="namespace") is namespace
    assert validate.outranks(a, b, restart_tiers="cluster") is cluster_
    assert validate.outranks(a, b, restart_tiers="off") is off


def test_a_preemption_policy_never_pod_causes_no_move_either() -> None:
    """A movable priority-100 worker on node a leaves 2 cpu free there, node b has 2 cpu: a
    3-cpu priority-1000 pod fits only if the worker moves to b (or is preempted). With
    preemptionPolicy Never kube-scheduler evicts nothing for it, and neither does placer."""

    def contest(**vip: Any) -> Cluster:
        worker = pod("worker", cpu="2", node="a", priority=100, owner={"kind": "ReplicaSet", "name": "workers"})
        pods = [worker, pod("vip", cpu="3", priority=1000, **vip)]
        return cluster([node("a", cpu="4"), node("b", cpu="2")], pods, replicaSets=[{"name": "workers"}])

    allowed = solve(contest())  # the default policy: the worker moves to b
    assert _evicted(allowed) == [("default/worker", "move")] and where(allowed)["vip"] == "a"
    out = solve(contest(preemptionPolicy="Never"))
    assert out.result.evictions == []
    assert unplaced(out) == {"vip": "Unschedulable"}


def test_a_never_pod_in_a_batch_with_a_plan_is_not_what_evictions_are_for() -> None:
    """A plan made for another pod of the batch never lists a Never pod among those it is for,
    and keeps the Never pod where the batch solve put it."""
    running = [pod("job", cpu="2", node="a", restartPolicy="Never")]
    batch = [
        pod("web", cpu="2", creationTimestamp="2024-01-01T00:00:01Z"),
        pod("quiet", cpu="1", preemptionPolicy="Never", creationTimestamp="2024-01-01T00:00:02Z"),
    ]
    out = solve(cluster([node("a", cpu="2"), node("b", cpu="1")], running + batch))
    assert _evicted(out) == [("default/job", "preempt")]
    assert where(out) == {"web": "a", "quiet": "b"}
    assert all("default/quiet" not in e.for_ for e in out.result.evictions)


def test_a_terminating_pending_pod_is_never_placed_and_a_terminating_running_pod_keeps_its_room() -> None:
    pods = [
        pod("leaving", cpu="2", node="a", terminating=True),
        pod("deleted", cpu="1", terminating=True),
        pod("web", cpu="2"),
    ]
    out = solve(cluster([node("a", cpu="2"), node("b", cpu="2")], pods))
    assert where(out) == {"web": "b"}
    assert "deleted" not in unplaced(out)
    assert any("being deleted are not placed: default/deleted" in w for w in out.warnings)
    # The validator refuses an answer that places it, or that uses the terminating pod's room.
    c = cluster([node("a", cpu="2"), node("b", cpu="2")], pods)
    assert any("being deleted" in v for v in validate.validate_placements(c, {"default/deleted": "b"}))
    assert validate.validate_placements(c, {"default/web": "a"}) != []


def _nominated(priority: int) -> Cluster:
    """kube-scheduler preempted for its pod ``vip`` (priority 10) and nominated node a; placer's
    pod ``web`` arrives with ``priority``. Node a has room for one of them, node b for none."""
    pods = [
        pod("vip", cpu="2", priority=10, schedulerName="default-scheduler", nominatedNodeName="a"),
        pod("web", cpu="2", priority=priority),
    ]
    return cluster([node("a", cpu="2"), node("b", cpu="1")], pods)


def test_room_nominated_for_a_pod_of_equal_or_higher_priority_is_held() -> None:
    for priority in (0, 10):
        out = solve(_nominated(priority))
        assert where(out) == {}, priority
        assert unplaced(out) == {"web": "Unschedulable"}
    # A higher-priority pod may take it (kube-scheduler's rule), and the validator agrees.
    assert where(solve(_nominated(20))) == {"web": "a"}
    assert validate.validate_placements(_nominated(0), {"default/web": "a"}) != []


def test_no_new_preemption_while_the_victims_evicted_for_a_pod_are_still_terminating() -> None:
    """kube-scheduler's PodEligibleToPreemptOthers: ``web`` (priority 10) is nominated to node a,
    where its victim ``old`` (priority 0) is still terminating; another low-priority pod runs
    on node b. No further eviction is made for ``web``."""
    pods = [
        pod("old", cpu="2", node="a", terminating=True),
        pod("other", cpu="2", node="b"),
        pod("web", cpu="2", priority=10, nominatedNodeName="a"),
    ]
    out = solve(cluster([node("a", cpu="2"), node("b", cpu="2")], pods))
    assert out.result.evictions == []
    # Without the nomination, the same pod preempts ``other`` at once.
    pods[2] = pod("web", cpu="2", priority=10)
    again = solve(cluster([node("a", cpu="2"), node("b", cpu="2")], pods))
    assert [(e.pod, e.kind) for e in again.result.evictions] == [("default/other", "preempt")]


# --- the objective follows the same rule (issue 14, item 2) -----------------------------------


def _move_trade() -> Cluster:
    """Node a (2 cpu) runs team-b's Deployment pod ``x``; node b (2 cpu) is free. team-a's
    Deployment pod ``y`` may run on node a only; team-b's Job pod ``z`` (tier Never) anywhere.
    Without a plan ``z`` takes node b and ``y`` waits. Moving ``x`` to b would place ``y`` instead
    of ``z``: a team-b pod given up for a team-a pod of equal priority on the tier alone."""
    pods = [
        pod("x", cpu="2", namespace="team-b", node="a", owner={"kind": "ReplicaSet", "name": "x"}),
        pod("y", cpu="2", namespace="team-a", nodeSelector={"zone": "one"}, owner={"kind": "ReplicaSet", "name": "y"}),
        pod("z", cpu="2", namespace="team-b", restartPolicy="Never", owner={"kind": "Job", "name": "z"}),
    ]
    replica_sets = [{"name": "x", "namespace": "team-b"}, {"name": "y", "namespace": "team-a"}]
    nodes = [node("a", cpu="2", labels={"zone": "one"}), node("b", cpu="2")]
    return cluster(nodes, pods, replicaSets=replica_sets)


def test_no_move_trades_one_namespaces_pod_for_anothers_on_the_tier_alone() -> None:
    out = solve(_move_trade())
    assert _evicted(out) == []
    assert where(out) == {"z": "b"}
    assert unplaced(out) == {"y": "Unschedulable"}


def test_cluster_scope_makes_that_trade() -> None:
    out = solve(_move_trade(), priority={"restartTiers": "cluster"})
    assert _evicted(out) == [("team-b/x", "move")]
    assert where(out)["y"] == "a"
    assert "z" not in where(out)


def _pending_contest(namespaces: tuple[str, str], *, priorities: tuple[int, int] = (0, 0)) -> Cluster:
    """One free 2-cpu node; a 2-cpu Always pod ``web`` and two 1-cpu Never pods ``job-*``."""
    web_ns, job_ns = namespaces
    pods = [
        pod("web", cpu="2", namespace=web_ns, priority=priorities[0]),
        *(pod(f"job-{i}", cpu="1", namespace=job_ns, restartPolicy="Never", priority=priorities[1]) for i in (0, 1)),
    ]
    return cluster([node("a", cpu="2")], pods)


def test_pods_per_priority_come_first_across_namespaces_and_the_tier_inside_one() -> None:
    """Across namespaces two pods of equal spec.priority beat one, whatever their tiers
    (``namespace`` scope); inside one namespace the Always pod outweighs any number of its Never
    pods, as ``cluster`` scope ranks them everywhere (issue 31: the thesis's order, per namespace)."""
    assert sorted(where(solve(_pending_contest(("team-a", "team-b"))))) == ["job-0", "job-1"]
    assert where(solve(_pending_contest(("team-a", "team-a")))) == {"web": "a"}
    assert where(solve(_pending_contest(("team-a", "team-b")), priority={"restartTiers": "cluster"})) == {"web": "a"}


def test_inside_a_namespace_the_tier_decides_one_pod_for_one() -> None:
    """team-a's Always pod and its Never pod of equal size compete for one place: the tier
    decides; the same pair in two namespaces is not ranked by the tier (either may win), and a
    higher spec.priority wins in any namespace."""

    def contest(web_ns: str, job_ns: str, job_priority: int = 0) -> Cluster:
        pods = [
            pod("web", cpu="2", namespace=web_ns),
            pod("job", cpu="2", namespace=job_ns, restartPolicy="Never", priority=job_priority),
        ]
        return cluster([node("a", cpu="2")], pods)

    assert where(solve(contest("team-a", "team-a"))) == {"web": "a"}
    assert len(where(solve(contest("team-a", "team-b")))) == 1
    assert where(solve(contest("team-a", "team-b", job_priority=1))) == {"job": "a"}


def test_the_validator_accepts_either_namespace_at_equal_priority_but_not_a_lost_pod() -> None:
    """Placing team-b's Never pod where team-a's Always pod would also fit is no priority
    violation under ``namespace`` scope; it is under ``cluster`` scope."""
    c = cluster(
        [node("a", cpu="2")],
        [pod("web", cpu="2", namespace="team-a"), pod("job", cpu="2", namespace="team-b", restartPolicy="Never")],
    )
    placements = {"team-b/job": "a"}
    assert validate.validate_placements(c, placements, restart_tiers="namespace") == []
    assert any("lower-key" in v for v in validate.validate_placements(c, placements, restart_tiers="cluster"))
