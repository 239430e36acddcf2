"""The controller's parts work on their own, with the project's fakes and no Runner: the cluster
view over informer caches filled by hand, the binder with a recording writer, the plan driver's
room held for a plan's binds, and the health probes over a stand-in scheduling cycle."""

from __future__ import annotations

import time
from concurrent.futures import wait
from types import SimpleNamespace
from typing import Any

from runner_support import FakeActions
from workload_builders import node, pod

from placer.controller.batcher import Batcher
from placer.kube.assume import AssumeCache
from placer.kube.binds import Binder
from placer.kube.context import Context
from placer.kube.fairpool import FairPool
from placer.kube.health import Health
from placer.kube.informers import Informer
from placer.kube.leader import Leadership, LeaseFence
from placer.kube.plans import PLANNED, PlanDriver
from placer.kube.policy import Policy
from placer.kube.serving import Metrics
from placer.kube.view import ClusterView
from placer.models import ControllerConfig, Step


def _key(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]


def _parts(*items: dict[str, Any], **cfg: Any) -> tuple[Context, ClusterView, FakeActions]:
    config = ControllerConfig.model_validate({"schedulerName": "placer", **cfg})
    actions = FakeActions()
    ctx = Context(
        cfg=config,
        identity="test",
        metrics=Metrics(),
        actions=actions,  # type: ignore[arg-type]
        batcher=Batcher(window=1.0, size=10),
        assumed=AssumeCache(),
        pool=FairPool(2),
    )
    informers = {kind: Informer(kind, lw=None) for kind in ("Node", "Pod")}  # type: ignore[arg-type]
    for kind, informer in informers.items():
        objects = [i for i in items if i["kind"] == kind]
        for n, obj in enumerate(objects):
            obj["metadata"]["resourceVersion"] = str(n + 1)
        informer.replace({_key(o): o for o in objects})
    return ctx, ClusterView(config, informers, ctx.assumed), actions


def test_the_view_and_the_binder_bind_a_pending_pod_and_hold_its_room_until_the_watch_shows_it() -> None:
    ctx, view, actions = _parts(node("n1", 4), pod("p"))
    (pending,) = view.cluster().pods
    assert pending.node_name is None and list(view.pods.waiting) == ["ml/p"]
    binder = Binder(ctx, view)
    binder.bind_all([(pending, "n1")])
    wait([f for _, _, f in binder.inflight])
    binder.collect()
    assert actions.calls[0] == ("bind", "ml/p", "n1")
    assert actions.calls[1][:3] == ("event", "ml/p", "Scheduled")
    (assumed,) = view.cluster().pods  # the watch has not shown the bind: the model holds it there
    assert assumed.node_name == "n1" and pending in ctx.assumed


def test_the_plan_driver_holds_a_running_plans_room_for_the_binds_still_to_come() -> None:
    ctx, view, _ = _parts(node("n1", 4), pod("p", cpu="3"))
    driver = PlanDriver(ctx, view, Binder(ctx, view))
    cluster = view.cluster()
    assert driver.holding(cluster) is cluster  # no plan: nothing held
    (p,) = cluster.pods
    plan = SimpleNamespace(evictions=[], placements=[(p, 0)])
    driver.start(plan, [Step(id=1, op="bind", pod="ml/p", node="n1")], {}, reason="Preempted")  # type: ignore[arg-type]
    held = [q for q in driver.holding(cluster).pods if q.name.endswith(PLANNED)]
    assert [(q.node_name, q.requests["cpu"]) for q in held] == [("n1", 3000)]
    assert driver.reserved == {"ml/p"}


def test_health_reads_the_cycle_it_is_given_a_leader_stuck_with_pods_pending_is_unhealthy() -> None:
    ctx, view, _ = _parts(node("n1", 4))
    fence = LeaseFence(always=True)
    policy = Policy(fence=fence)
    cycle = SimpleNamespace(pending=0, solving=None, solve_started=None)
    health = Health(
        ctx.cfg,
        policy=policy,
        fence=fence,
        leadership=Leadership(None, lambda: None, fence=fence),
        view=view,
        cycle=cycle,  # type: ignore[arg-type]
        driver=SimpleNamespace(plan=None, started=None),  # type: ignore[arg-type]
    )
    now = time.monotonic()
    health.last_cycle = now - 10_000
    policy.last_answer = now
    assert health.health() == (True, "ok (nothing pending)")
    cycle.pending = 3
    ok, why = health.health()
    assert not ok and why.startswith("stuck: no scheduling cycle completed") and "3 pods pending" in why
