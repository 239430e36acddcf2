"""``validate_rebalance``: a rebalancing plan (``placer rebalance``), its own rules (thresholds,
who may move, limits) and then the global plan's rules for moves.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from placer.models import (
    Cluster,
    RebalanceConfig,
    Result,
)
from placer.validate.answer import Plan, eviction_violations, replacement_violations, resolve_plan_placements
from placer.validate.evictions import replicasets_named
from placer.validate.placements import Context
from placer.validate.plans import final_violations
from placer.validate.semantics import allocatable
from placer.validate.steps import step_violations


def _utilisation(cluster: Cluster, moved: Mapping[str, str], resources: Sequence[str]) -> dict[str, list[float]]:
    """Per node, requests over allocatable per resource, with ``moved`` pods (key -> node) moved."""
    used: dict[str, dict[str, int]] = {n.name: {} for n in cluster.nodes}
    for pod in cluster.pods:
        if not pod.running or pod.node_name not in used:
            continue
        where = moved.get(pod.key, pod.node_name)
        for r in resources:
            used[where][r] = used[where].get(r, 0) + pod.requests.get(r, 0)
    out: dict[str, list[float]] = {}
    for node in cluster.nodes:
        out[node.name] = [
            used[node.name].get(r, 0) / allocatable(node, r) if allocatable(node, r) > 0 else 0.0 for r in resources
        ]
    return out


def _cluster_use(cluster: Cluster, resources: Sequence[str]) -> list[float]:
    """Per resource: every running pod's requests over every node's allocatable."""
    total = [sum(allocatable(n, r) for n in cluster.nodes) for r in resources]
    used = [sum(p.requests.get(r, 0) for p in cluster.pods if p.running) for r in resources]
    return [u / t if t > 0 else 0.0 for u, t in zip(used, total, strict=True)]


def _may_take(
    util: Mapping[str, list[float]], node: str, low: float, high: float, cluster: list[float], config: RebalanceConfig
) -> bool:
    """A landing node takes: below ``low`` on every weighted resource or, when no node is, lighter
    than the cluster by the thesis's score (10 x sum w ln(cluster use / node use) > 0); never hot."""
    if any(u > high for u in util[node]):
        return False
    if any(all(u < low for u in us) for us in util.values()):
        return all(u < low for u in util[node])
    weights = [w for w in config.weights.values() if w > 0]
    total = sum(weights)
    score = sum(
        w / total * math.log(max(c, 0.001) / max(u, 0.001))
        for w, c, u in zip(weights, cluster, util[node], strict=True)
    )
    return score > 0


def validate_rebalance(
    cluster: Cluster, result: Result, config: RebalanceConfig, *, scheduler_name: str = "placer", now: float = 0.0
) -> list[str]:
    """Every reason a rebalancing plan (``placer rebalance``) is wrong; empty when valid.

    The plan's own rules: only moves; each from a node above the high threshold to a node below
    the low one that stays at most at the high threshold once every move lands; never a bare pod,
    an Always-tier pod unless allowed (and then only of a ReplicaSet with two ready replicas), a
    Job's pod unless its Job opts in, or a pod moved within the cooldown; at most the plan's limit
    (``perPeriod``, or ``perPeriodPercent`` of the nodes when more), ``perNode`` off one node and
    the namespace limit (``perNamespace``, or ``perNamespacePercent`` of the plan's when more) in one
    namespace. Then the global plan's
    rules for moves (eviction and move eligibility, PDBs, replacements, step order, final capacity).
    The threshold rules read load by requests; with ``load: usage`` only the others are checked.
    """
    out: list[str] = []
    resources = [r for r, w in config.weights.items() if w > 0]
    high, low = config.thresholds.high / 100.0, config.thresholds.low / 100.0
    pods = {p.key: p for p in cluster.pods}
    moves = {e.pod: e.to or "" for e in result.evictions if e.kind == "move"}
    before = _utilisation(cluster, {}, resources)
    after = _utilisation(cluster, moves, resources)
    per_period = config.limits.moves(len(cluster.nodes))
    per_namespace_limit = config.limits.in_namespace(len(cluster.nodes))
    if len(moves) > per_period:
        out.append(f"{len(moves)} moves, more than the plan's limit {per_period} (perPeriod, perPeriodPercent)")
    off: dict[str, int] = {}
    per_namespace: dict[str, int] = {}
    for e in result.evictions:
        if e.kind != "move":
            out.append(f"eviction of {e.pod}: a rebalancing plan only moves pods")
            continue
        pod = pods.get(e.pod)
        if pod is None:
            continue  # named by the plan rules below
        off[e.node] = off.get(e.node, 0) + 1
        per_namespace[pod.namespace] = per_namespace.get(pod.namespace, 0) + 1
        target = e.to or ""
        if config.load == "requests":  # the thresholds are on measured usage otherwise, unseen here
            if not any(u > high for u in before.get(e.node, [])):
                out.append(f"move of {e.pod}: its node {e.node} is not above {config.thresholds.high:g} %")
            if target in before and not _may_take(before, target, low, high, _cluster_use(cluster, resources), config):
                out.append(
                    f"move of {e.pod}: its landing node {target} is neither below {config.thresholds.low:g} % "
                    "nor, with no node that cold, lighter than the cluster"
                )
            if target in after and any(u > high for u in after[target]):
                out.append(f"move of {e.pod}: its landing node {target} ends above {config.thresholds.high:g} %")
        if pod.restart_policy == "Always":
            rs = next(iter(replicasets_named(cluster, pod)), None)
            if not config.move_always_tier or rs is None or rs.ready_replicas < 2:
                out.append(f"move of {e.pod}: restart policy Always stays")
        if pod.moved_at is not None and now - pod.moved_at < config.limits.cooldown:
            out.append(f"move of {e.pod}: moved within the cooldown")
    out += [
        f"{n}: {k} moves off it, more than perNode {config.limits.per_node}"
        for n, k in off.items()
        if k > config.limits.per_node
    ]
    out += [
        f"namespace {ns}: {k} moves, more than its limit {per_namespace_limit} (perNamespace, perNamespacePercent)"
        for ns, k in per_namespace.items()
        if k > per_namespace_limit
    ]
    ctx = Context.of(cluster, True)
    plan = Plan(ctx=ctx, scheduler_name=scheduler_name, jobs=True)
    replacements = resolve_plan_placements(plan, cluster, result.placements, out)
    out += eviction_violations(plan, cluster, result.evictions)
    out += replacement_violations(plan, replacements)
    out += step_violations(plan, cluster, result.steps)
    out += final_violations(plan, cluster)
    return out
