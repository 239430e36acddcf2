"""kube-scheduler, simulated: one pod at a time, filter then score, in queue order.

Queue: priority (highest first), then creation time, then namespace/name. Filters: the same
feasibility as placer (cordon, taints, nodeSelector/affinity, host ports, resources), without
placer's weak-binding annotations. Scores, as current kube-scheduler computes them (0-100, integer
arithmetic, default plugin weights): NodeResourcesFit with LeastAllocated (``default``) or
MostAllocated (``most-requested``) over cpu and memory, BalancedAllocation (1 - std of the
capped fractions) x 100, TaintToleration (weight 3) and NodeAffinity (weight 2), each normalised
over the feasible nodes. Scoring counts 100m cpu / 200Mi memory for containers without requests.
Ties go to the node that sorts first by name.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt

from placer.baseline.preemption import preempt
from placer.engine.prefilter import Prefilter, fits
from placer.engine.snapshot import Snapshot, pod_vector
from placer.models import Pod, PodDisruptionBudget

__all__ = ["SimResult", "simulate"]

Scoring = Literal["default", "most-requested"]
MAX = 100
W_FIT, W_BALANCED, W_TAINT, W_AFFINITY = 1, 1, 3, 2


@dataclass
class SimResult:
    placements: list[tuple[Pod, int]]
    unplaced: list[tuple[Pod, str, str]]
    seconds: float
    preemptions: list[tuple[Pod, int, Pod]] = field(default_factory=list)  # (victim, node, preemptor)


def queue_order(pod: Pod) -> tuple[int, str, str, str]:
    return (-pod.priority, pod.creation, pod.namespace, pod.name)


def _normalise(raw: npt.NDArray[np.int64], *, reverse: bool) -> npt.NDArray[np.int64]:
    top = int(raw.max()) if len(raw) else 0
    if top == 0:
        return np.full(len(raw), MAX if reverse else 0, dtype=np.int64)
    scaled = raw * MAX // top
    return MAX - scaled if reverse else scaled


def simulate(
    snapshot: Snapshot,
    pending: Sequence[Pod],
    scoring: Scoring = "default",
    *,
    pdbs: Sequence[PodDisruptionBudget] = (),
    preemption: bool = True,
) -> SimResult:
    """Place ``pending`` one at a time; ``snapshot`` is updated in place (victims removed, pods added)."""
    started = time.monotonic()
    snap = snapshot
    pre = Prefilter(snap)
    preemptions: list[tuple[Pod, int, Pod]] = []
    cpu, mem = snap.column("cpu"), snap.column("memory")
    alloc_cm = snap.alloc[:, [cpu, mem]]
    nonzero = np.zeros((len(snap.nodes), 2), dtype=np.int64)
    for i, pods in enumerate(snap.running):
        for p in pods:
            nonzero[i] += (p.score_cpu, p.score_memory)
    name_rank = np.argsort(np.argsort(np.array([n.name for n in snap.nodes])))
    placements: list[tuple[Pod, int]] = []
    unplaced: list[tuple[Pod, str, str]] = []
    for pod in sorted(pending, key=queue_order):
        if pod.unsupported:
            unplaced.append((pod, "Unsupported", pod.unsupported))
            continue
        vec = pod_vector(pod, snap.resources)
        allowed = pre.taint_ok(pod) & pre.matching(pod) & pre.ports_ok(pod) & fits(snap, vec)
        nodes = np.flatnonzero(allowed)
        if len(nodes) == 0:
            found = preempt(snap, pre, pod, pdbs, name_rank.tolist()) if preemption else None
            if found is None:
                unplaced.append((pod, "Unschedulable", _diagnose(pre, pod)))
                continue
            for victim in found.victims:
                snap.remove(victim, found.node)
                nonzero[found.node] -= (victim.score_cpu, victim.score_memory)
                preemptions.append((victim, found.node, pod))
            # The preemptor is nominated to the node and bound there in the next cycle.
            placements.append((pod, found.node))
            snap.add(pod, found.node)
            nonzero[found.node] += (pod.score_cpu, pod.score_memory)
            continue
        req = nonzero[nodes] + (pod.score_cpu, pod.score_memory)
        cap = alloc_cm[nodes]
        safe = np.where(cap > 0, cap, 1)
        if scoring == "most-requested":
            per = np.where((cap > 0) & (req <= cap), req * MAX // safe, 0)
        else:
            per = np.where((cap > 0) & (req <= cap), (cap - req) * MAX // safe, 0)
        fit = per.sum(axis=1) // 2
        frac = np.minimum(np.where(cap > 0, req / safe, 1.0), 1.0)
        std = np.abs(frac[:, 0] - frac[:, 1]) / 2
        balanced = ((1 - std) * MAX).astype(np.int64)
        taint = _normalise(pre.prefer_penalty(pod)[nodes], reverse=True)
        affinity = np.zeros(len(nodes), dtype=np.int64)
        for term in pod.preferred_terms:
            affinity += term.weight * snap.labels.term(term.preference)[nodes]
        affinity = _normalise(affinity, reverse=False)
        total = W_FIT * fit + W_BALANCED * balanced + W_TAINT * taint + W_AFFINITY * affinity
        best = nodes[np.lexsort((name_rank[nodes], -total))[0]]
        placements.append((pod, int(best)))
        snap.add(pod, int(best))
        nonzero[best] += (pod.score_cpu, pod.score_memory)
    return SimResult(
        placements=placements, unplaced=unplaced, seconds=time.monotonic() - started, preemptions=preemptions
    )


def _diagnose(pre: Prefilter, pod: Pod) -> str:
    strict = pod.model_copy(update={"annotations": {}})
    return pre.diagnose(strict)
