"""Starts for a tight batch: the classic vector-packing heuristics and other answers, checked.

When the greedy pass leaves placeable pods out, the batch is a packing problem, and the classic
heuristics are cheap (milliseconds) and sometimes place more: first-fit decreasing, best-fit
decreasing and the dot-product heuristic of Panigrahy et al. (2011, "Heuristics for Vector Bin
Packing"). Each answer is checked (``adopt``: feasible nodes, capacity, host ports, whole gangs,
inter-pod rules) before it may become the start; the best start per key (``best``) is the hint of
every CP-SAT level, so the answer never places fewer pods per key than any of them.

Sizes are compared after scaling each resource by the largest free room of any node, so that no
unit dominates; pods of a higher key go first in every heuristic.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from placer.engine.batch import Batch
from placer.engine.greedy import Assignment
from placer.engine.scoring import IntArray
from placer.engine.topology import TopologyState
from placer.models import Pod

__all__ = ["HEURISTICS", "Alternative", "adopt", "best", "better_start", "heuristic_starts"]

# Another answer for a tight batch, computed on demand (the service passes kube-scheduler's).
Alternative = Callable[[], Sequence[tuple[Pod, int]]]
Placements = list[tuple[Pod, int]]


def _per_key(batch: Batch, assignment: Assignment) -> list[int]:
    counts: dict[int, int] = {}
    for group, nodes in zip(batch.groups, assignment, strict=True):
        counts[batch.rank(group)] = counts.get(batch.rank(group), 0) + int((nodes >= 0).sum())
    return [counts.get(r, 0) for r in sorted(counts, reverse=True)]


def better_start(batch: Batch, first: Assignment, second: Assignment) -> Assignment:
    """The answer that places more pods per key, compared from the highest key down (``first``
    on a tie)."""
    return second if _per_key(batch, second) > _per_key(batch, first) else first


def best(batch: Batch, first: Assignment, others: Sequence[Assignment | None]) -> Assignment:
    """The best of ``first`` and ``others`` per key (earlier ones win ties; None is no answer)."""
    out = first
    for other in others:
        if other is not None:
            out = better_start(batch, out, other)
    return out


class _Packer:
    """What the heuristics share: the pods in decreasing order, the room left, scaled sizes."""

    def __init__(self, batch: Batch) -> None:
        self.batch = batch
        self.free: IntArray = batch.snapshot.free.astype(np.int64).copy()
        top = self.free.max(axis=0) if len(self.free) else np.zeros(0, dtype=np.int64)
        self.scale = np.where(top > 0, 1.0 / np.maximum(top, 1), 0.0)
        # Gangs are left to the CP-SAT levels: a heuristic that placed part of one would be refused.
        pods = [
            (gi, k) for gi, g in enumerate(batch.groups) if len(g.feasible) and g.gang is None for k in range(g.size)
        ]
        size = {gi: float((g.vec * self.scale).sum()) for gi, g in enumerate(batch.groups)}
        pods.sort(key=lambda p: (-batch.rank(batch.groups[p[0]]), -size[p[0]], p[0], p[1]))
        self.order = pods
        self.ported: dict[int, set[int]] = {}  # host-port groups: nodes they already use

    def fits(self, gi: int, nodes: IntArray) -> IntArray:
        """The nodes of ``nodes`` where one more pod of group ``gi`` fits now."""
        group = self.batch.groups[gi]
        ok = np.all(self.free[nodes] >= group.vec, axis=1)
        if group.has_ports and gi in self.ported:
            ok &= ~np.isin(nodes, np.fromiter(self.ported[gi], dtype=np.int64))
        return nodes[ok]


def first_fit_decreasing(batch: Batch) -> Placements:
    """Each pod, largest first, on the first node (in index order) where it fits."""
    packer, out = _Packer(batch), Placements()
    for gi, k in packer.order:
        nodes = packer.fits(gi, np.sort(batch.groups[gi].feasible))
        if len(nodes):
            _place(packer, gi, int(nodes[0]), batch.groups[gi].pods[k], out)
    return out


def best_fit_decreasing(batch: Batch) -> Placements:
    """Each pod, largest first, on the node it leaves with the least scaled room (lowest index on
    a tie)."""
    packer, out = _Packer(batch), Placements()
    for gi, k in packer.order:
        nodes = packer.fits(gi, np.sort(batch.groups[gi].feasible))
        if len(nodes):
            left = ((packer.free[nodes] - batch.groups[gi].vec) * packer.scale).sum(axis=1)
            _place(packer, gi, int(nodes[int(np.argmin(left))]), batch.groups[gi].pods[k], out)
    return out


def dot_product(batch: Batch) -> Placements:
    """Panigrahy et al.'s bin-centric DotProduct: nodes are filled one at a time (those with most
    scaled room first); each takes, while any fits, a pod of the highest key whose scaled request
    has the largest dot product with the node's scaled room left."""
    packer, out = _Packer(batch), Placements()
    groups = sorted({gi for gi, _ in packer.order})
    if not groups:
        return out
    waiting = {gi: [k for g, k in packer.order if g == gi] for gi in groups}
    index = np.array(groups, dtype=np.int64)
    vecs = np.stack([batch.groups[gi].vec for gi in groups]).astype(np.int64)
    scaled = vecs * packer.scale
    ranks = np.array([batch.rank(batch.groups[gi]) for gi in groups], dtype=np.int64)
    allowed = np.zeros((len(groups), len(packer.free)), dtype=bool)
    for row, gi in enumerate(groups):
        allowed[row, batch.groups[gi].feasible] = True
    remaining = np.array([len(waiting[gi]) for gi in groups], dtype=np.int64)
    ports = np.array([batch.groups[gi].has_ports for gi in groups], dtype=bool)
    for n in np.argsort(-(packer.free * packer.scale).sum(axis=1), kind="stable").tolist():
        open_ = allowed[:, n] & (remaining > 0)
        while True:
            ok = open_ & np.all(vecs <= packer.free[n], axis=1)
            if not ok.any():
                break
            rows = np.flatnonzero(ok)
            top = rows[ranks[rows] == ranks[rows].max()]
            row = int(top[int(np.argmax(scaled[top] @ (packer.free[n] * packer.scale)))])
            gi = int(index[row])
            k = waiting[gi].pop(0)
            remaining[row] -= 1
            if ports[row] or not remaining[row]:
                open_[row] = False
            _place(packer, gi, n, batch.groups[gi].pods[k], out)
        if not remaining.any():
            break
    return out


def _place(packer: _Packer, gi: int, n: int, pod: Pod, out: Placements) -> None:
    group = packer.batch.groups[gi]
    packer.free[n] -= group.vec
    if group.has_ports:
        packer.ported.setdefault(gi, set()).add(n)
    out.append((pod, n))


HEURISTICS: dict[str, Callable[[Batch], Placements]] = {
    "first-fit-decreasing": first_fit_decreasing,
    "best-fit-decreasing": best_fit_decreasing,
    "dot-product": dot_product,
}


def heuristic_starts(batch: Batch) -> list[Assignment | None]:
    """Every heuristic's answer as a start of this batch (None where ``adopt`` refuses one).
    Batches with inter-pod rules keep to the greedy pass, which knows them."""
    if not batch.topology.empty:
        return []
    return [adopt(batch, run(batch)) for run in HEURISTICS.values()]


def adopt(batch: Batch, placements: Sequence[tuple[Pod, int]]) -> Assignment | None:
    """Another answer as a start for this batch, if it is one: every pod on a node of its group's
    feasible set, no node over capacity, host-port groups at most one pod per node, no gang in
    part, and, in a batch with inter-pod rules, every pod allowed by the hard rules where it goes,
    the pods taken in the answer's order (as the greedy pass places them, and as kube-scheduler
    does). The nodes it uses join the groups' candidates, so it stays a solution of the pruned
    model."""
    group_of = {pod.key: gi for gi, g in enumerate(batch.groups) for pod in g.pods}
    chosen: list[list[int]] = [[] for _ in batch.groups]
    used = batch.snapshot.used.copy()
    topo = None if batch.topology.empty else TopologyState(batch.topology, [g.size for g in batch.groups])
    for pod, n in placements:
        gi = group_of.get(pod.key)
        if gi is None:
            return None
        if topo is not None:
            if not topo.allowed(gi, np.array([n], dtype=np.int64), soft=False)[0]:
                return None
            topo.add(gi, n)
        chosen[gi].append(n)
        used[n] += batch.groups[gi].vec
    if np.any(used > batch.snapshot.alloc):
        return None
    gangs: dict[str, tuple[int, int]] = {}
    for gi, group in enumerate(batch.groups):
        nodes = np.array(chosen[gi], dtype=np.int64)
        if len(nodes) and not np.all(np.isin(nodes, group.feasible)):
            return None
        if group.has_ports and len(set(chosen[gi])) < len(chosen[gi]):
            return None
        if group.gang is not None:
            placed, size = gangs.get(group.gang, (0, 0))
            gangs[group.gang] = (placed + len(nodes), size + group.size)
    if any(0 < placed < size for placed, size in gangs.values()):
        return None
    out: Assignment = []
    for gi, group in enumerate(batch.groups):
        nodes = np.array(chosen[gi], dtype=np.int64)
        group.candidates = np.union1d(group.candidates, nodes).astype(np.int64)
        out.append(np.concatenate([nodes, np.full(group.size - len(nodes), -1, dtype=np.int64)]))
    return out
