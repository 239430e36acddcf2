"""What may move off a giving node, in the thesis's order, within the budgets.

From each giving node (heaviest first): Never-tier pods, largest memory request first, then cpu;
then OnFailure-tier pods the same way; Always-tier pods only with ``moveAlwaysTier`` and then only
pods of ReplicaSets with at least two ready replicas. Only pods whose replacement comes back to
this scheduler are offered: ReplicaSet pods, and Job pods whose Job opts in
(``placer.plan.eligibility``); never bare, DaemonSet, static, opted-out pods, nor pods moved within
the cooldown.

The thesis moves pods in that order until the node is no longer above ``high``. Here that order is
the candidate order, and the solver (``placer.plan.plan_rebalance``) chooses which of the
candidates move and where, among the taking nodes only: each giving node offers its first
``CHOICE`` x ``perNode`` eligible pods and gives at most as many as it *needs*: how many of them,
the largest first (share of the node's weighted load), leave until it is at most ``high``; never
more than ``perNode``. Whatever leaves a node must bring it to ``high`` (its ``Relief``) when its
candidates can. So the balance objective picks the pods that cut the spread most, and a node
gives no more pods than cooling it takes. ``perNamespace`` binds in the solver too.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from placer.engine import Snapshot, tier
from placer.models import Cluster, Pod, RebalanceConfig
from placer.plan import Relief, classify, owning_job
from placer.rebalance.load import Loads

__all__ = ["Offer", "offer"]


CHOICE = 2  # a giving node offers this many times the pods it may give (perNode)
_BP = 10_000  # a relief's unit: basis points of the node's allocatable


@dataclass
class Offer:
    candidates: list[tuple[Pod, int]] = field(default_factory=list)
    needs: dict[int, int] = field(default_factory=dict)  # giving node -> the most moves off it
    relief: dict[int, Relief] = field(default_factory=dict)  # what leaves a node must take off it
    skipped: dict[str, str] = field(default_factory=dict)  # pod key -> why it may not move
    capped: set[int] = field(default_factory=set)  # giving nodes perNode keeps above high with pods to give


def _why_not(cluster: Cluster, pod: Pod, config: RebalanceConfig, scheduler_name: str, now: float) -> str:
    """Why ``pod`` may not move (empty: it may)."""
    if pod.terminating:
        return "already being deleted"
    if pod.owner is None:
        return "a bare pod: nothing would recreate it"
    e = classify(cluster, pod, scheduler_name, jobs=True)
    if not e.evictable:
        return e.why_not
    if e.opted_out:
        return 'opted out of eviction (placer.io/evictable or safe-to-evict "false")'
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


def _needs(loads: Loads, n: int, pods: list[Pod], high: float, limit: int) -> tuple[int, bool]:
    """How many of ``pods`` leave node ``n`` until it is at most ``high`` in every weighted
    resource, the largest first (by share of the node's weighted load), and True; or ``limit``
    and False when that takes more (or never happens)."""
    alloc = np.where(loads.alloc[n] > 0, loads.alloc[n], 1.0)
    used = loads.used[n].copy()
    left = list(pods)
    for count in range(limit + 1):
        over = np.maximum(used / alloc - high, 0.0) * (loads.alloc[n] > 0)
        if not over.any():
            return count, True
        if not left:
            break
        share = [float((loads.pod_load[p.key] / alloc * loads.weights).sum()) for p in left]
        used = used - loads.pod_load[left.pop(int(np.argmax(share))).key]
    return limit, False


def _relief(loads: Loads, n: int, pods: list[Pod], high: float) -> Relief:
    """Node ``n``'s load above ``high`` and the pods' loads, in basis points of its allocatable
    (the excess rounded up, the pods' shares down)."""
    has = loads.alloc[n] > 0
    alloc = np.where(has, loads.alloc[n], 1.0)
    excess = np.ceil(np.maximum(loads.used[n] / alloc - high, 0.0) * has * _BP).astype(np.int64)
    shares = {p.key: tuple(np.floor(loads.pod_load[p.key] / alloc * _BP).astype(np.int64).tolist()) for p in pods}
    return Relief(excess=tuple(excess.tolist()), shares=shares)


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
    per_node = config.limits.per_node
    for n in givers:
        eligible: list[Pod] = []
        for pod in sorted(state.running[n], key=_order):
            if len(eligible) >= CHOICE * per_node:
                break
            why = _why_not(cluster, pod, config, scheduler_name, now)
            if why:
                out.skipped[pod.key] = why
            else:
                eligible.append(pod)
        needs, cools = _needs(loads, n, eligible, high, per_node)
        if needs and eligible:
            out.candidates += [(pod, n) for pod in eligible]
            out.needs[n] = needs
            if cools:
                out.relief[n] = _relief(loads, n, eligible, high)
            elif len(eligible) > needs:
                out.capped.add(n)
    return out
