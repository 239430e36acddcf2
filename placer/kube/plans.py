"""The plan driver: carries out the one plan in flight (a batch's global plan or a rebalancing
plan) with the executor state machine (``placer.controller.executor.PlanRun``): evicts, waits
until victims are gone, captures replacements and binds only into real room.

The actions a plan releases together go out at once on the bind workers (``perform``) and their
outcomes are applied on the loop thread in the plan's order (``after``). An eviction a
PodDisruptionBudget refuses is tried ``PDB_ATTEMPTS`` times ``PDB_RETRY_DELAY`` apart before the
step fails. While a plan runs, batches are solved on a cluster holding its room (``holding``).

Crash safety: no plan state is kept outside the process. A restarted controller abandons the
in-flight plan and re-plans from what the API shows: victims still terminating keep their room
in the model, replacements and pods waiting for a delayed bind are ordinary pending pods and join
the next batch, so a crash loses no pod and books no node twice. Replacements bound by a plan
are annotated ``placer.io/moved-at`` so the move cooldown survives restarts.
"""

from __future__ import annotations

import datetime as dt
import logging
import time

from placer.controller.executor import Action, Bind, Evict, PlanRun, PodView, World
from placer.engine import build_snapshot
from placer.inputs.annotations import MOVED_AT
from placer.inputs.stamps import parse_timestamp
from placer.kube.actions import Outcome, result_label
from placer.kube.binds import Binder
from placer.kube.context import Context
from placer.kube.policy import Result
from placer.kube.view import ClusterView
from placer.models import Cluster, Pod, Step
from placer.plan import Plan
from placer.service import holding

__all__ = ["PDB_ATTEMPTS", "PDB_RETRY_DELAY", "PLANNED", "PlanDriver", "pod_view"]

log = logging.getLogger("placer.controller")
PLANNED = "~planned"  # name suffix of the stand-in holding a running plan's room for a bind
PDB_ATTEMPTS = 3  # evictions refused by a PodDisruptionBudget are tried this many times ...
PDB_RETRY_DELAY = 5.0  # ... this many seconds apart, before the plan step fails


def _epoch(stamp: str) -> float:
    """A validated creationTimestamp in seconds (0 when absent)."""
    return (parse_timestamp(stamp) or 0.0) if stamp else 0.0


def pod_view(pod: Pod, ours: bool = True) -> PodView:
    """What the plan executor needs to see of a pod (``ours``: addressed to this scheduler and in
    its namespaces, so a replacement it may bind)."""
    return PodView(
        key=pod.key,
        uid=pod.uid,
        node=pod.node_name,
        owner_uid=pod.owner.uid if pod.owner is not None and pod.owner.uid else None,
        created=_epoch(pod.creation),
        requests={**pod.requests, "pods": 1},
        deleting=pod.terminating,
        completion_index=pod.completion_index,
        ours=ours,
    )


class PlanDriver:
    def __init__(self, ctx: Context, view: ClusterView, binder: Binder) -> None:
        self.ctx = ctx
        self.view = view
        self.binder = binder
        self.plan: PlanRun | None = None
        self.reserved: set[str] = set()  # pending pods the running plan will bind
        self.why: dict[str, str] = {}  # victim -> why the running plan evicts it (its event says so)
        self.plan_pods: dict[str, Pod] = {}  # the running plan's pods to bind and victims, by key
        self.reason = "Preempted"  # the reason of the running plan's eviction events
        self.started: float | None = None
        self.refused: dict[tuple[int, str], tuple[int, float]] = {}  # plan evictions a PDB refused

    def start(self, plan: Plan, steps: list[Step], why: dict[str, str], *, reason: str) -> None:
        """Make ``plan`` the one plan in flight; its evictions' events say ``why`` with ``reason``."""
        timeouts = self.ctx.cfg.plan_timeouts
        self.why = why
        self.reason = reason
        self.plan = PlanRun(
            steps,
            {e.pod.key: pod_view(e.pod) for e in plan.evictions},
            started=time.time(),
            await_gone=timeouts.await_gone,
            await_replacement=timeouts.await_replacement,
            await_room=timeouts.await_room,
            gangs={pod.key: pod.gang_key for pod, _ in plan.placements if pod.gang_key is not None},
        )
        self.reserved = {pod.key for pod, _ in plan.placements}
        self.plan_pods = {pod.key: pod for pod, _ in plan.placements} | {e.pod.key: e.pod for e in plan.evictions}
        self.ctx.group_status.planned(plan)

    def holding(self, cluster: Cluster) -> Cluster:
        """The cluster with the running plan's room held: every bind still to come counts as a
        pod already running on its planned node (victims count as well until they are gone)."""
        if self.plan is None:
            return cluster
        held = []
        for step in self.plan.open_binds():
            key = step.pod or step.replaces
            pod = self.plan_pods.get(key or "")
            if pod is not None:
                held.append(holding(pod, step.node, PLANNED))
        return cluster.model_copy(update={"pods": (*cluster.pods, *held)}) if held else cluster

    def world(self, cluster: Cluster) -> World:
        running = [p for p in cluster.pods if p.running]
        snap = build_snapshot(cluster.nodes, running, [])
        free = {
            node.name: dict(zip(snap.resources, snap.free[i].tolist(), strict=True))
            for i, node in enumerate(snap.nodes)
        }
        name = self.ctx.cfg.scheduler_name
        views = {p.key: pod_view(p, p.scheduler_name == name and self.view.in_scope(p)) for p in cluster.pods}
        return World(now=time.time(), pods=views, free=free)

    def advance(self, cluster: Cluster) -> None:
        assert self.plan is not None
        if self.started is None:
            self.started = time.time()
        pods = {p.key: p for p in cluster.pods}
        now = time.monotonic()
        again = [Evict(step, pod) for (step, pod), (_, due) in self.refused.items() if due <= now]
        queue: list[Action] = [*again, *self.plan.advance(self.world(cluster))]
        while queue:
            # One wave: the actions the plan released together are independent; their API calls run
            # at once on the write pool (a pod's own actions in order), and their outcomes are
            # applied here, in order, as if they had run one by one (a plan's 100 evictions and
            # binds were 200 round trips one after the other).
            queue = [follow for action, out in self.perform(queue, pods) for follow in self.after(action, out, pods)]
        if self.plan.finished:
            log.info("global plan finished in %.1fs", time.time() - (self.started or time.time()))
            self.plan = None
            self.started = None
            self.refused = {}
            self.reserved = set()
            self.plan_pods = {}
            self.ctx.batcher.wake(time.monotonic())  # pods left out while it ran need not wait out their back-off

    def perform(self, wave: list[Action], pods: dict[str, Pod]) -> list[tuple[Action, Outcome]]:
        """The API calls of a wave of plan actions, concurrently; outcomes in the wave's order."""
        by_pod: dict[str, list[int]] = {}
        for i, action in enumerate(wave):
            by_pod.setdefault(action.pod or f"#{i}", []).append(i)

        def run(indices: list[int]) -> list[Outcome]:
            return [self.call(wave[i], pods) for i in indices]

        futures = [(indices, self.ctx.pool.submit(run, indices)) for indices in by_pod.values()]
        outcomes: list[Outcome] = [Outcome(ok=True)] * len(wave)
        for indices, future in futures:
            try:
                results = future.result()
            except Exception as exc:  # the client returns outcomes; a bug must not lose the wave
                results = [Outcome(ok=False, reason=f"{type(exc).__name__}: {exc}", result=Result.UNKNOWN)] * len(
                    indices
                )
            for i, out in zip(indices, results, strict=True):
                outcomes[i] = out
        return list(zip(wave, outcomes, strict=True))

    def call(self, action: Action, pods: dict[str, Pod]) -> Outcome:
        """The one API call (or two, with a WaitForFirstConsumer claim) an action makes."""
        actions = self.ctx.actions
        if isinstance(action, Evict):
            victim = self.plan.victims.get(action.pod) if self.plan is not None else None
            return actions.evict(action.pod, victim.uid if victim else None)
        if isinstance(action, Bind) and action.nominated:
            return actions.nominate(action.pod, action.node)
        if isinstance(action, Bind):
            pod = pods.get(action.pod)
            out = self.binder.select_nodes(pod, action.node) if pod is not None else Outcome(ok=True)
            if out.ok:
                out = actions.bind(action.pod, action.node, pod.uid if pod is not None else None)
            if out.ok and action.pod not in self.reserved:  # a captured replacement: when it moved
                stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
                actions.annotate(action.pod, {MOVED_AT: stamp})
            return out
        if action.pod is not None and action.pod in self.reserved:  # a pending pod: drop its nomination
            return actions.nominate(action.pod, None)
        return Outcome(ok=True)

    def after(self, action: Action, out: Outcome, pods: dict[str, Pod]) -> list[Action]:
        """What an action's outcome means for the plan and the caches; the actions it releases."""
        assert self.plan is not None
        ctx = self.ctx
        if isinstance(action, Evict):
            ctx.metrics.evictions.labels(kind="plan", result=result_label(out)).inc()
            if self.refused_again(action, out):
                return []
            if out.ok:
                view = self.plan.victims.get(action.pod)
                ctx.actions.event(
                    action.pod,
                    view.uid if view else "",
                    reason=self.reason,
                    note=f"evicted by placer's plan ({ctx.identity}): {self.why.get(action.pod, '')}",
                    kind="Normal",
                )
                ctx.group_status.evicted(action.pod)
            return self.plan.evicted(action.step, time.time(), ok=out.ok, reason=out.reason)
        if isinstance(action, Bind) and action.nominated:
            return []
        if isinstance(action, Bind):
            pod = pods.get(action.pod)
            if pod is not None and (out.ok or out.result is Result.UNKNOWN) and not ctx.cfg.dry_run:
                ctx.assumed.assume(pod, action.node, time.time())  # maybe bound: keep its room booked
            if pod is not None and out.result is Result.UNKNOWN:
                self.binder.account(pod, action.node, out)  # counted; read back until known
            else:
                ctx.metrics.binds.labels(result=result_label(out)).inc()
            if out.ok:
                ctx.actions.event(
                    action.pod, "", reason="Scheduled", note=f"Successfully assigned {action.pod} to {action.node}"
                )
                ctx.group_status.bound(action.pod)
            return self.plan.bound(action.step, ok=out.ok, reason=out.reason)
        ctx.metrics.plan_aborts.inc()
        log.warning("plan step %d abandoned (%s): %s", action.step, action.subject, action.reason)
        return []

    def refused_again(self, action: Evict, out: Outcome) -> bool:
        """A PodDisruptionBudget's refusal (or a 409: the budget was updated concurrently, the pod
        is still there) is tried again a few times, spaced out, before the plan
        hears of it (budgets often allow the eviction a moment later, once a pod is ready again).
        True: retried later, the step keeps running."""
        key = (action.step, action.pod)
        if out.result not in (Result.REFUSED, Result.CONFLICT):  # a conflict: the budget changed meanwhile
            self.refused.pop(key, None)
            return False
        tries = self.refused.get(key, (0, 0.0))[0] + 1
        if tries >= PDB_ATTEMPTS:
            self.refused.pop(key, None)
            return False
        self.refused[key] = (tries, time.monotonic() + PDB_RETRY_DELAY)
        log.info("eviction of %s refused (%s); trying again in %.0fs", action.pod, out.reason, PDB_RETRY_DELAY)
        return True
