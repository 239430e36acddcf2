"""What moves off a giving node, in the thesis's order, within the budgets.

From each giving node (heaviest first): Never-tier pods, largest memory request first, then cpu;
then OnFailure-tier pods the same way; Always-tier pods only with ``moveAlwaysTier`` and then only
pods of ReplicaSets with at least two ready replicas. Pods are offered until the node's load,
without them, is no longer above ``high``, at most ``perNode`` per node and ``perNamespace`` per
namespace. Only pods whose replacement comes back to this scheduler are offered: ReplicaSet pods,
and Job pods whose Job opts in (``placer.plan.eligibility``); never bare, DaemonSet, static,
opted-out pods, nor pods moved within the cooldown. Whether and where each moves is the solver's
choice (``placer.plan.plan_rebalance``), among the taking nodes only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from placer.engine import Snapshot, tier
from placer.models import Cluster, Pod, RebalanceConfig
from placer.plan import classify, owning_job
from placer.rebalance.load import Loads

__all__ = ["Offer", "offer"]


@dataclass
class Offer:
    candidates: list[tuple[Pod, int]] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # pod key -> why it may not move


def _why_not(cluster: Cluster, pod: Pod, config: RebalanceConfig, scheduler_name: str, now: float) -> str:
    """Why ``pod`` may not move (empty: it may)."""
    if pod.terminating:
        return "already being deleted"
    if pod.owner is None:
        return "a bare pod: nothing would recreate it"
    e = classify(cluster, pod, scheduler_name, jobs=True)
    if not e.evictable:
        return e.why_not
    if not e.movable:
        if pod.owner.kind == "Job":
            job = owning_job(cluster, pod)
            if job is None:
                return f"its Job {pod.namespace}/{pod.owner.name} is not in the input"
            if not job.opted_in:
                return "its Job does not opt in (podFailurePolicy ignoring DisruptionTarget, or placer.io/rebalance)"
            return f"its Job's pods are scheduled by {job.scheduler_name!r}"
        return f"its {pod.owner.kind}'s replacement would not come back to {scheduler_name!r}"
    if pod.moved_at is not None and now - pod.moved_at < config.limits.cooldown:
        return f"moved less than {config.limits.cooldown:.0f}s ago"
    if tier(pod) == 3:
        if not config.move_always_tier:
            return "restart policy Always: stays (rebalance.moveAlwaysTier is off)"
        rs = next((r for r in cluster.replicasets if r.namespace == pod.namespace and r.name == pod.owner.name), None)
        if rs is None or rs.ready_replicas < 2:
            return "restart policy Always: its ReplicaSet has fewer than two ready replicas"
    return ""


def _order(pod: Pod) -> tuple[int, int, int, str]:
    """Never tier first, then OnFailure, then Always; largest memory first, then cpu."""
    return (tier(pod), -pod.requests.get("memory", 0), -pod.requests.get("cpu", 0), pod.key)


def offer(
    cluster: Cluster,
    state: Snapshot,
    loads: Loads,
    givers: list[int],
    config: RebalanceConfig,
    *,
    scheduler_name: str,
    now: float,
) -> Offer:
    out = Offer()
    high = config.thresholds.high / 100.0
    per_namespace: dict[str, int] = {}
    for n in givers:
        used = loads.used[n].copy()
        taken = 0
        for pod in sorted(state.running[n], key=_order):
            has = loads.alloc[n] > 0
            if not (used[has] > high * loads.alloc[n][has]).any() or taken >= config.limits.per_node:
                break
            why = _why_not(cluster, pod, config, scheduler_name, now)
            if not why and per_namespace.get(pod.namespace, 0) >= config.limits.per_namespace:
                why = f"namespace {pod.namespace} already has {config.limits.per_namespace} moves in this plan"
            if why:
                out.skipped[pod.key] = why
                continue
            out.candidates.append((pod, n))
            used = used - loads.pod_load.get(pod.key, np.zeros_like(used))
            taken += 1
            per_namespace[pod.namespace] = per_namespace.get(pod.namespace, 0) + 1
    return out
