"""placer run against the real control plane: the controller under its own ServiceAccount.

Aspects: the k8s/ manifests are accepted (server dry-run) and their RBAC is what the controller
runs with; Boreas side by side with kube-scheduler; the two-batch global plan (evict exactly the
planned pod, bind its replacement elsewhere); a PDB blocking the needed eviction; restart-tier
preemption; the label-change policy; SIGKILL mid-plan; leader failover.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kube_helpers as kh
import pytest
from controller_support import Controller
from kubernetes import client

from placer.models import parse_quantity

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
NodeFactory = Callable[..., list[str]]


def _group(core: client.CoreV1Api, node: str) -> dict[str, str]:
    return {"e2e-group": core.read_node(node).metadata.labels["e2e-group"]}


def _pods(core: client.CoreV1Api, ns: str, **labels: str) -> list[client.V1Pod]:
    return [p for p in kh.list_pods(core, ns, labels) if p.metadata.deletion_timestamp is None]


def _no_overcommit(core: client.CoreV1Api, nodes: list[str]) -> None:
    for name in nodes:
        alloc = parse_quantity(core.read_node(name).status.allocatable["cpu"])
        pods = core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={name}").items
        used = sum(
            parse_quantity((c.resources.requests or {}).get("cpu", "0"))
            for p in pods
            if p.status.phase not in ("Succeeded", "Failed")
            for c in p.spec.containers
        )
        assert used <= alloc, f"{name}: {used} cpu requested of {alloc}"


def _pod(
    core: client.CoreV1Api,
    ns: str,
    name: str,
    *,
    restart: str = "Always",
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    **spec: Any,
) -> client.V1Pod:
    body = client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels=labels or {"app": name}, annotations=annotations),
        spec=kh.pod_spec(**spec),
    )
    body.spec.restart_policy = restart
    return core.create_namespaced_pod(ns, body)


def _boreas(
    apps: client.AppsV1Api, ns: str, group: dict[str, str], scheduler: str | None, core: client.CoreV1Api
) -> None:
    kh.create_deployment(apps, ns, "proxy", 2, cpu="7500m", scheduler_name=scheduler, node_selector=group)
    kh.wait_for("proxies bound", lambda: len([p for p in _pods(core, ns, app="proxy") if p.spec.node_name]) == 2, 60)
    kh.create_deployment(apps, ns, "backend", 3, cpu="5", scheduler_name=scheduler, node_selector=group)


def test_boreas_kube_scheduler_runs_four_placer_runs_five(
    core: client.CoreV1Api,
    apps: client.AppsV1Api,
    make_nodes: NodeFactory,
    controllers: Callable[..., Controller],
) -> None:
    controllers()
    default_nodes, placer_nodes = make_nodes(2, cpu="15"), make_nodes(2, cpu="15")
    ns_default, ns_placer = kh.create_namespace(core), kh.create_namespace(core)
    try:
        _boreas(apps, ns_default, _group(core, default_nodes[0]), None, core)
        _boreas(apps, ns_placer, _group(core, placer_nodes[0]), "placer", core)
        kh.wait_running(core, ns_placer, {"app": "backend"}, 3, timeout=90)
        kh.wait_running(core, ns_placer, {"app": "proxy"}, 2, timeout=30)
        time.sleep(3)
        running_default = [p for p in _pods(core, ns_default) if kh.is_running(p)]
        assert len(running_default) == 4, [p.metadata.name for p in running_default]
        _no_overcommit(core, placer_nodes + default_nodes)
    finally:
        kh.delete_namespace(core, ns_default)
        kh.delete_namespace(core, ns_placer)


def _batch_one_bound(core: client.CoreV1Api, apps: client.AppsV1Api, ns: str, nodes: list[str]) -> dict[str, str]:
    """proxy-0 and backend-0 bound to node 0 directly (the state batch 1 left)."""
    group = _group(core, nodes[0])
    kh.create_deployment(apps, ns, "proxy", 1, cpu="7500m", scheduler_name="placer", node_selector=group)
    kh.create_deployment(apps, ns, "backend", 1, cpu="5", scheduler_name="placer", node_selector=group)
    first = {}
    for app in ("proxy", "backend"):
        (pod,) = kh.wait_for(f"{app} pod", lambda app=app: _pods(core, ns, app=app) or None, 30)
        assert kh.bind(core, ns, pod.metadata.name, nodes[0]) == 201
        first[app] = pod.metadata.name
    kh.wait_running(core, ns, {"app": "proxy"}, 1)
    kh.wait_running(core, ns, {"app": "backend"}, 1)
    return first


def _batch_two_arrives(apps: client.AppsV1Api, ns: str) -> None:
    """The rest of Boreas: a second proxy and two more backends."""
    for name, replicas in (("proxy", 2), ("backend", 3)):
        apps.patch_namespaced_deployment_scale(name, ns, {"spec": {"replicas": replicas}})


def test_two_batch_global_plan_moves_exactly_the_planned_backend(
    core: client.CoreV1Api,
    apps: client.AppsV1Api,
    namespace: str,
    make_nodes: NodeFactory,
    controllers: Callable[..., Controller],
) -> None:
    nodes = make_nodes(2, cpu="15")
    first = _batch_one_bound(core, apps, namespace, nodes)
    _batch_two_arrives(apps, namespace)
    c = controllers()
    backends = kh.wait_running(core, namespace, {"app": "backend"}, 3, timeout=90)
    proxies = kh.wait_running(core, namespace, {"app": "proxy"}, 2, timeout=30)
    names = {p.metadata.name for p in backends + proxies}
    assert first["proxy"] in names, "the proxy of batch 1 must not be touched"
    assert first["backend"] not in names, "the planned backend must have been evicted"
    assert {p.spec.node_name for p in proxies} == {nodes[0]}
    assert {p.spec.node_name for p in backends} == {nodes[1]}
    _no_overcommit(core, nodes)
    assert "global plan" in c.output()


def test_a_pdb_blocking_the_needed_eviction_leaves_the_pod_pending_with_a_reason(
    core: client.CoreV1Api,
    apps: client.AppsV1Api,
    policy: client.PolicyV1Api,
    namespace: str,
    make_nodes: NodeFactory,
    controllers: Callable[..., Controller],
) -> None:
    nodes = make_nodes(2, cpu="15")
    _batch_one_bound(core, apps, namespace, nodes)
    for app in ("proxy", "backend"):
        kh.create_pdb(policy, namespace, app, {"app": app}, max_unavailable=0)
        kh.wait_pdb(policy, namespace, app, disruptions_allowed=0)
    _batch_two_arrives(apps, namespace)
    controllers()

    def settled() -> list[client.V1Pod] | None:
        pods = _pods(core, namespace)
        pending = [p for p in pods if not p.spec.node_name]
        conds = [c for p in pending for c in (p.status.conditions or []) if c.type == "PodScheduled"]
        return pending if len(pods) == 5 and len(pending) == 1 and conds else None

    (stuck,) = kh.wait_for("one pod pending with a PodScheduled condition", settled, 90)
    cond = next(c for c in stuck.status.conditions if c.type == "PodScheduled")
    assert (cond.status, cond.reason) == ("False", "Unschedulable")
    assert "Insufficient cpu" in cond.message

    def running() -> list[client.V1Pod] | None:
        # kwok marks a bound pod Running shortly after the bind: the four bound pods get there
        pods = _pods(core, namespace)
        up = [p for p in pods if kh.is_running(p)]
        return up if len(up) == 4 and len(pods) == 5 else None

    kh.wait_for("the four bound pods running", running, 30)
    assert [p.metadata.name for p in _pods(core, namespace) if not p.spec.node_name] == [stuck.metadata.name]
    _no_overcommit(core, nodes)


def test_restart_tier_preemption_higher_evicts_lower_equal_never(
    core: client.CoreV1Api,
    namespace: str,
    make_nodes: NodeFactory,
    controllers: Callable[..., Controller],
) -> None:
    (node,) = make_nodes(1, cpu="2")
    group = _group(core, node)
    _pod(core, namespace, "batch-job", cpu="2", node_name=node, restart="Never")
    kh.wait_for("batch-job running", lambda: kh.is_running(core.read_namespaced_pod("batch-job", namespace)), 30)
    controllers()
    _pod(core, namespace, "same-tier", cpu="2", scheduler_name="placer", node_selector=group, restart="Never")
    time.sleep(4)
    assert kh.is_running(core.read_namespaced_pod("batch-job", namespace)), "equal keys never preempt"
    assert not core.read_namespaced_pod("same-tier", namespace).spec.node_name
    _pod(core, namespace, "service", cpu="2", scheduler_name="placer", node_selector=group)
    kh.wait_pod_gone(core, namespace, "batch-job", timeout=60)
    kh.wait_for("service running", lambda: kh.is_running(core.read_namespaced_pod("service", namespace)), 60)
    assert not core.read_namespaced_pod("same-tier", namespace).spec.node_name


def test_label_change_policy_reschedules_keeps_and_kills(
    core: client.CoreV1Api,
    apps: client.AppsV1Api,
    namespace: str,
    make_nodes: NodeFactory,
    controllers: Callable[..., Controller],
) -> None:
    old, new = make_nodes(2, cpu="8", labels={"tier": "gold"})
    group = _group(core, old)
    core.patch_node(new, {"metadata": {"labels": {"tier": "silver"}}})
    sel = {**group, "tier": "gold"}
    policy = "placer.io/when-node-labels-change"
    tmpl = client.V1PodTemplateSpec(
        metadata=client.V1ObjectMeta(labels={"app": "mover"}, annotations={policy: "reschedule"}),
        spec=kh.pod_spec(cpu="1", scheduler_name="placer", node_selector=sel),
    )
    apps.create_namespaced_deployment(
        namespace,
        client.V1Deployment(
            metadata=client.V1ObjectMeta(name="mover"),
            spec=client.V1DeploymentSpec(
                replicas=1, selector=client.V1LabelSelector(match_labels={"app": "mover"}), template=tmpl
            ),
        ),
    )
    _pod(core, namespace, "stayer", cpu="1", scheduler_name="placer", node_selector=sel, annotations={policy: "ignore"})
    _pod(core, namespace, "killed", cpu="1", scheduler_name="placer", node_selector=sel, annotations={policy: "kill"})
    controllers()
    (mover,) = kh.wait_running(core, namespace, {"app": "mover"}, 1, timeout=60)
    kh.wait_running(core, namespace, {"app": "stayer"}, 1)
    kh.wait_running(core, namespace, {"app": "killed"}, 1)
    assert mover.spec.node_name == old
    # Relabel: the old node leaves tier gold, the other one joins it.
    core.patch_node(old, {"metadata": {"labels": {"tier": "silver"}}})
    core.patch_node(new, {"metadata": {"labels": {"tier": "gold"}}})
    kh.wait_pod_gone(core, namespace, "killed", timeout=60)
    kh.wait_pod_gone(core, namespace, mover.metadata.name, timeout=60)
    (moved,) = kh.wait_running(core, namespace, {"app": "mover"}, 1, timeout=60)
    assert moved.spec.node_name == new
    stayer = core.read_namespaced_pod("stayer", namespace)
    assert kh.is_running(stayer) and stayer.spec.node_name == old


def test_sigkill_right_after_an_eviction_loses_nothing(
    core: client.CoreV1Api,
    apps: client.AppsV1Api,
    namespace: str,
    make_nodes: NodeFactory,
    controllers: Callable[..., Controller],
) -> None:
    nodes = make_nodes(2, cpu="15")
    first = _batch_one_bound(core, apps, namespace, nodes)
    _batch_two_arrives(apps, namespace)
    c = controllers(identity="crashy")
    kh.wait_for(
        "the planned eviction",
        lambda: first["backend"] not in {p.metadata.name for p in _pods(core, namespace)} or None,
        60,
    )
    c.kill(signal.SIGKILL)
    _no_overcommit(core, nodes)
    controllers(identity="restarted")
    kh.wait_running(core, namespace, {"app": "backend"}, 3, timeout=90)
    kh.wait_running(core, namespace, {"app": "proxy"}, 2, timeout=30)
    _no_overcommit(core, nodes)


def test_the_other_replica_takes_over_when_the_leader_dies(
    core: client.CoreV1Api,
    namespace: str,
    make_nodes: NodeFactory,
    controllers: Callable[..., Controller],
    api_client: client.ApiClient,
) -> None:
    (node,) = make_nodes(1, cpu="8")
    group = _group(core, node)
    a, b = controllers(identity="replica-a"), controllers(identity="replica-b")
    coord = client.CoordinationV1Api(api_client)
    holder = kh.wait_for(
        "a lease holder",
        lambda: coord.read_namespaced_lease("placer-e2e", "placer-system").spec.holder_identity or None,
        30,
    )
    _pod(core, namespace, "before", cpu="1", scheduler_name="placer", node_selector=group)
    kh.wait_running(core, namespace, {"app": "before"}, 1, timeout=30)
    leader, follower = (a, b) if holder.startswith("replica-a_") else (b, a)  # the name, _, a random suffix
    leader.kill(signal.SIGKILL)
    kh.wait_for(
        "the follower to take the lease",
        lambda: (
            coord.read_namespaced_lease("placer-e2e", "placer-system").spec.holder_identity.startswith(
                f"{follower.identity}_"
            )
            or None
        ),
        30,
    )
    _pod(core, namespace, "after", cpu="1", scheduler_name="placer", node_selector=group)
    kh.wait_running(core, namespace, {"app": "after"}, 1, timeout=30)


def test_dry_run_watches_and_solves_but_touches_nothing(
    core: client.CoreV1Api, namespace: str, make_nodes: NodeFactory, controllers: Callable[..., Controller]
) -> None:
    (node,) = make_nodes(1, cpu="4")
    c = controllers(identity="shadow", dryRun=True)
    _pod(core, namespace, "shadowed", cpu="1", scheduler_name="placer", node_selector=_group(core, node))
    kh.wait_for("the shadow controller to decide", lambda: "would bind to" in c.output() or None, 30)
    pod = core.read_namespaced_pod("shadowed", namespace)
    assert not pod.spec.node_name
    assert not [x for x in (pod.status.conditions or []) if x.type == "PodScheduled" and x.status == "False"]


def test_a_gang_of_four_runs_whole_or_not_at_all(
    core: client.CoreV1Api, namespace: str, make_nodes: NodeFactory, controllers: Callable[..., Controller]
) -> None:
    mark = {"gang-test": kh.unique("g")}
    make_nodes(2, cpu="3", labels=mark)
    gang = {"placer.io/gang": "train", "placer.io/gang-size": "4"}
    for i in range(4):
        _pod(
            core,
            namespace,
            f"train-{i}",
            cpu="2",
            scheduler_name="placer",
            node_selector=mark,
            labels={"app": "train", **gang},
        )
    controllers()

    def explained() -> bool:
        pods = _pods(core, namespace, app="train")
        conds = [c for p in pods for c in (p.status.conditions or []) if c.type == "PodScheduled"]
        return len(conds) == 4 and all("cannot be placed whole" in (c.message or "") for c in conds)

    kh.wait_for("all four members reported unschedulable as a gang", explained, 60)
    assert not [p for p in _pods(core, namespace, app="train") if p.spec.node_name], "no member may run alone"
    # Room for the whole gang appears: it runs whole.
    make_nodes(2, cpu="4", labels=mark)
    kh.wait_running(core, namespace, {"app": "train"}, 4, timeout=90)
