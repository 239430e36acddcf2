"""Tenant safety on the real control plane (issue 14): what one tenant's objects cannot do to
another's, with the controller under its own ServiceAccount.

Aspects: restart tiers rank pods within a namespace only (the default), a preemptionPolicy Never
pod evicts nothing; ``namespaces:`` bounds every write; terminating pods are never bound and keep
their room; room nominated for another scheduler's pod is held.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import kube_helpers as kh
import pytest
from controller_support import Controller
from kubernetes import client
from test_controller_e2e import NodeFactory, _group, _no_overcommit

pytestmark = pytest.mark.e2e

QUIET = 5.0  # seconds the controller gets (batch window 1 s) to do something it must not do


@pytest.fixture
def two_namespaces(core: client.CoreV1Api) -> Iterator[tuple[str, str]]:
    names = (kh.create_namespace(core), kh.create_namespace(core))
    try:
        yield names
    finally:
        for ns in names:
            kh.delete_namespace(core, ns)


@pytest.fixture
def priority_class(api_client: client.ApiClient) -> Iterator[Callable[..., str]]:
    api = client.SchedulingV1Api(api_client)
    made: list[str] = []

    def make(value: int, preemption: str = "PreemptLowerPriority") -> str:
        name = kh.unique("e2e-prio")
        api.create_priority_class(
            client.V1PriorityClass(metadata=client.V1ObjectMeta(name=name), value=value, preemption_policy=preemption)
        )
        made.append(name)
        # Priority admission reads PriorityClasses from an informer: a pod naming one created a
        # moment ago may be refused (403 "no PriorityClass ... was found") until the cache has it.
        probe = client.V1Pod(
            metadata=client.V1ObjectMeta(name="priority-probe"),
            spec=client.V1PodSpec(priority_class_name=name, containers=[client.V1Container(name="c", image="x")]),
        )
        core = client.CoreV1Api(api_client)
        kh.wait_for(
            f"admission to see PriorityClass {name}",
            lambda: core.create_namespaced_pod("default", probe, dry_run="All"),
        )
        return name

    yield make
    for name in made:
        kh.delete_if_present(api.delete_priority_class, name)


def _pod(
    core: client.CoreV1Api,
    ns: str,
    name: str,
    *,
    restart: str = "Always",
    priority_class: str | None = None,
    finalizers: list[str] | None = None,
    **spec: Any,
) -> client.V1Pod:
    body = client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels={"app": name}, finalizers=finalizers),
        spec=kh.pod_spec(**spec),
    )
    body.spec.restart_policy = restart
    body.spec.priority_class_name = priority_class
    return core.create_namespaced_pod(ns, body)


def _running(core: client.CoreV1Api, ns: str, name: str) -> bool:
    pod = core.read_namespaced_pod(name, ns)
    return bool(pod.spec.node_name) and pod.metadata.deletion_timestamp is None


def _bound(core: client.CoreV1Api, ns: str, name: str) -> str | None:
    node: str | None = core.read_namespaced_pod(name, ns).spec.node_name
    return node


def _placer_events(core: client.CoreV1Api, ns: str, name: str) -> list[str]:
    events = core.list_namespaced_event(ns, field_selector=f"involvedObject.name={name}").items
    return [e.reason for e in events if (e.reporting_component or "").startswith("placer")]


def test_restart_tiers_preempt_only_within_a_namespace_and_never_pods_evict_nothing(
    core: client.CoreV1Api,
    two_namespaces: tuple[str, str],
    make_nodes: NodeFactory,
    controllers: Callable[..., Controller],
    priority_class: Callable[..., str],
) -> None:
    team_a, team_b = two_namespaces
    (node,) = make_nodes(1, cpu="2")
    group = _group(core, node)
    _pod(core, team_b, "job", cpu="2", node_name=node, restart="Never")
    kh.wait_for("job running", lambda: _running(core, team_b, "job"), 30)
    controllers()  # restartTiers: namespace, the default
    _pod(core, team_a, "web", cpu="2", scheduler_name="placer", node_selector=group)
    vip = priority_class(1000, preemption="Never")
    _pod(core, team_a, "vip", cpu="2", scheduler_name="placer", node_selector=group, priority_class=vip)
    time.sleep(QUIET)
    assert _running(core, team_b, "job"), "another namespace's Deployment pod or a Never pod evicted the Job pod"
    assert _bound(core, team_a, "web") is None and _bound(core, team_a, "vip") is None
    # The same Deployment pod in the Job's own namespace outranks it by restart tier.
    _pod(core, team_b, "web", cpu="2", scheduler_name="placer", node_selector=group)
    kh.wait_pod_gone(core, team_b, "job", timeout=60)
    kh.wait_for("team-b web bound", lambda: _bound(core, team_b, "web") == node, 60)
    assert _bound(core, team_a, "web") is None and _bound(core, team_a, "vip") is None
    _no_overcommit(core, [node])


def test_a_pod_outside_placers_namespaces_is_never_touched(
    core: client.CoreV1Api,
    two_namespaces: tuple[str, str],
    make_nodes: NodeFactory,
    controllers: Callable[..., Controller],
    priority_class: Callable[..., str],
) -> None:
    mine, theirs = two_namespaces
    nodes = make_nodes(2, cpu="2")
    group = _group(core, nodes[0])
    _pod(core, theirs, "job", cpu="2", node_name=nodes[0], restart="Never")
    _pod(core, mine, "job", cpu="2", node_name=nodes[1], restart="Never")
    kh.wait_for("jobs running", lambda: _running(core, theirs, "job") and _running(core, mine, "job"), 30)
    _pod(core, theirs, "waiting", cpu="100m", scheduler_name="placer", node_selector=group)
    controllers(namespaces=[mine])
    urgent = priority_class(1000)
    _pod(core, mine, "urgent", cpu="2", scheduler_name="placer", node_selector=group, priority_class=urgent)
    # The only victim placer may take is its own namespace's Job pod, on the second node.
    kh.wait_pod_gone(core, mine, "job", timeout=60)
    kh.wait_for("urgent bound", lambda: _bound(core, mine, "urgent") == nodes[1], 60)
    time.sleep(QUIET)
    assert _running(core, theirs, "job")
    assert _bound(core, theirs, "waiting") is None
    assert _placer_events(core, theirs, "waiting") == [] and _placer_events(core, theirs, "job") == []
    # Not vacuous: placer's events do show, on the pods it did touch.
    assert "Scheduled" in kh.wait_for("urgent's events", lambda: _placer_events(core, mine, "urgent"), 30)
    assert "Preempted" in _placer_events(core, mine, "job") or kh.wait_for(
        "job's Preempted event", lambda: "Preempted" in _placer_events(core, mine, "job"), 30
    )
    _no_overcommit(core, nodes)


def test_terminating_pods_are_never_bound_and_keep_their_room(
    core: client.CoreV1Api,
    namespace: str,
    make_nodes: NodeFactory,
    controllers: Callable[..., Controller],
) -> None:
    (node,) = make_nodes(1, cpu="2")
    group = _group(core, node)
    hold = ["e2e.placer.io/hold"]
    _pod(core, namespace, "leaving", cpu="2", node_name=node, finalizers=hold)
    kh.wait_for("leaving running", lambda: _running(core, namespace, "leaving") or None, 30)
    _pod(core, namespace, "doomed", cpu="100m", scheduler_name="placer", node_selector=group, finalizers=hold)
    core.delete_namespaced_pod("leaving", namespace)
    core.delete_namespaced_pod("doomed", namespace)
    try:
        controllers()
        _pod(core, namespace, "web", cpu="2", scheduler_name="placer", node_selector=group)
        time.sleep(QUIET)
        assert _bound(core, namespace, "doomed") is None, "a terminating pending pod was bound"
        assert _bound(core, namespace, "web") is None, "the terminating pod's room was given away"
    finally:
        for name in ("leaving", "doomed"):
            core.patch_namespaced_pod(name, namespace, {"metadata": {"finalizers": None}})
    kh.wait_for("web bound once the room is free", lambda: _bound(core, namespace, "web") == node, 60)
    _no_overcommit(core, [node])


def test_room_nominated_for_another_schedulers_pod_is_held(
    core: client.CoreV1Api,
    namespace: str,
    make_nodes: NodeFactory,
    controllers: Callable[..., Controller],
) -> None:
    (node,) = make_nodes(1, cpu="2")
    group = _group(core, node)
    _pod(core, namespace, "theirs", cpu="2", scheduler_name="other-scheduler")
    core.patch_namespaced_pod_status("theirs", namespace, {"status": {"nominatedNodeName": node}})
    controllers()
    _pod(core, namespace, "web", cpu="2", scheduler_name="placer", node_selector=group)
    time.sleep(QUIET)
    assert _bound(core, namespace, "web") is None, "placer took room nominated for another pod"
    core.patch_namespaced_pod_status("theirs", namespace, {"status": {"nominatedNodeName": None}})
    kh.wait_for("web bound once the nomination is cleared", lambda: _bound(core, namespace, "web") == node, 60)


def test_no_new_preemption_while_a_pods_victims_are_still_terminating(
    core: client.CoreV1Api,
    namespace: str,
    make_nodes: NodeFactory,
    controllers: Callable[..., Controller],
    priority_class: Callable[..., str],
) -> None:
    """kube-scheduler's PodEligibleToPreemptOthers, as a new leader meets it: ``web`` is nominated
    to node 0, where its earlier victim is still terminating; a low-priority pod runs on node 1.
    placer evicts nothing more for ``web``, and binds it once the victim is gone."""
    nodes = make_nodes(2, cpu="2")
    group = _group(core, nodes[0])
    hold = ["e2e.placer.io/hold"]
    _pod(core, namespace, "victim", cpu="2", node_name=nodes[0], finalizers=hold)
    _pod(core, namespace, "other", cpu="2", node_name=nodes[1])
    kh.wait_for("both running", lambda: _running(core, namespace, "victim") and _running(core, namespace, "other"))
    core.delete_namespaced_pod("victim", namespace)
    high = priority_class(100)
    _pod(core, namespace, "web", cpu="2", scheduler_name="placer", node_selector=group, priority_class=high)
    core.patch_namespaced_pod_status("web", namespace, {"status": {"nominatedNodeName": nodes[0]}})
    try:
        controllers()
        time.sleep(QUIET)
        assert _running(core, namespace, "other"), "placer preempted again while the victim was terminating"
        assert _bound(core, namespace, "web") is None
    finally:
        core.patch_namespaced_pod("victim", namespace, {"metadata": {"finalizers": None}})
    kh.wait_for("web bound once its victim is gone", lambda: _bound(core, namespace, "web") == nodes[0], 60)
    assert _running(core, namespace, "other")
