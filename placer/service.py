"""Solve a cluster: pick the batch, run a policy (placer or a kube-scheduler simulation), and
simulate the controller's batching when asked. Pure: no I/O beyond the models it is given."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Literal

from placer.baseline import simulate
from placer.engine.snapshot import Snapshot, build_snapshot
from placer.engine.solve import solve_batch
from placer.metrics import balance_metrics
from placer.models import Cluster, Config, Metrics, Placement, Pod, Result, Unplaced

__all__ = ["Outcome", "SolveOptions", "pending_batch", "solve_cluster"]

Policy = Literal["placer", "default", "most-requested"]
_STATUS_ORDER = {"optimal": 0, "feasible": 1, "fallback": 2}


@dataclass(frozen=True)
class SolveOptions:
    policy: Policy = "placer"
    batch_size: int | None = None
    config: Config = field(default_factory=Config)


@dataclass
class Outcome:
    result: Result
    before: Snapshot
    after: Snapshot
    warnings: list[str]


def pending_batch(cluster: Cluster, scheduler_name: str) -> tuple[list[Pod], list[str]]:
    """Pending pods addressed to the scheduler, in creation order; gated pods wait."""
    batch, warnings = [], []
    for pod in cluster.pods:
        if not pod.pending or (scheduler_name not in ("*", pod.scheduler_name)):
            continue
        if pod.scheduling_gates:
            warnings.append(f"pod {pod.key} waits on scheduling gates {', '.join(pod.scheduling_gates)}")
            continue
        batch.append(pod)
    batch.sort(key=lambda p: (p.creation, p.namespace, p.name))
    return batch, warnings


def _node_dicts(snap: Snapshot) -> tuple[list[dict[str, int]], list[dict[str, int]]]:
    names = snap.resources
    alloc = [dict(zip(names, row.tolist(), strict=True)) for row in snap.alloc]
    used = [dict(zip(names, row.tolist(), strict=True)) for row in snap.used]
    return alloc, used


def solve_cluster(cluster: Cluster, options: SolveOptions) -> Outcome:
    started = time.monotonic()
    config = options.config
    pending, warnings = pending_batch(cluster, config.scheduler_name)
    running = [p for p in cluster.pods if p.running]
    before = build_snapshot(cluster.nodes, running, pending)
    state = before.copy()
    size = options.batch_size or max(len(pending), 1)
    queue = list(pending)
    carried: list[Pod] = []
    placements: list[Placement] = []
    unplaced: list[Unplaced] = []
    status, gap = "optimal", 0.0
    while queue or carried:
        batch, queue = carried + queue[:size], queue[size:]
        if options.policy == "placer":
            res = solve_batch(state, batch, config)
            status = max(status, res.status, key=_STATUS_ORDER.__getitem__)
            gap = max(gap, res.gap)
            done = res.placements
            left = [(pod, str(code), reason) for pod, code, reason in res.unplaced]
        else:
            sim = simulate(state, batch, options.policy)
            done, left = sim.placements, [(p, c, r) for p, c, r in sim.unplaced]
        for pod, node in done:
            state.add(pod, node)
            placements.append(Placement(pod=pod.key, node=state.nodes[node].name))
        carried = [pod for pod, _, _ in left]
        if not queue:
            unplaced = [Unplaced(pod=pod.key, code=code, reason=reason) for pod, code, reason in left]
            break
    imbalance, std = balance_metrics(*_node_dicts(state))
    result = Result(
        status=status,
        policy=options.policy,
        placements=sorted(placements, key=lambda p: p.pod or ""),
        unplaced=sorted(unplaced, key=lambda u: u.pod),
        metrics=Metrics(
            placed=len(placements),
            unplaced=len(unplaced),
            imbalance=round(imbalance, 6),
            std_score=round(std, 6),
            solve_seconds=round(time.monotonic() - started, 4),
            gap=round(gap, 6),
        ),
    )
    return Outcome(result=result, before=before, after=state, warnings=[*cluster.warnings, *warnings])
