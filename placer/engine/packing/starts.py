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

import math
from collections.abc import Callable, Sequence

import numpy as np

from placer.engine.batch import Batch
from placer.engine.greedy import Assignment
from placer.engine.levels import Budget
from placer.engine.prefilter import ports_clash
from placer.engine.scoring import IntArray
from placer.engine.topology import TopologyState
from placer.models import HostPort, Pod

__all__ = ["HEURISTICS", "Alternative", "adopt", "best", "better_start", "heuristic_starts"]

# Another answer for a tight batch, computed on demand (the service passes kube-scheduler's).
Alternative = Callable[[], Sequence[tuple[Pod, int]] | None]  # None: no answer in time
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
    """What the heuristics share: the pods in decreasing order of scaled size, the room left.

    Scaled amounts are ``amount / top`` per resource, ``top`` the largest free room of any node,
    over the resources some pod of the batch requests (the pod count included). Sums of them use
    ``math.fsum`` of the correctly rounded quotients, so they are exact to one rounding and do not
    depend on the order of the resources or on placer's integer units: any implementation that
    computes them so ranks pods and nodes the same way (ties keep the arrival order)."""

    def __init__(self, batch: Batch) -> None:
        self.batch = batch
        self.free: IntArray = batch.snapshot.free.astype(np.int64).copy()
        asked = np.zeros(self.free.shape[1], dtype=bool)
        for g in batch.groups:
            asked |= g.vec > 0
        self.columns = np.flatnonzero(asked)
        top = self.free[:, self.columns].max(axis=0) if len(self.free) else np.zeros(0, dtype=np.int64)
        self.top = np.where(top > 0, top, 1).astype(np.float64)
        # Gangs are left to the CP-SAT levels: a heuristic that placed part of one would be refused.
        live = [gi for gi, g in enumerate(batch.groups) if len(g.feasible) and g.gang is None]
        self.size = {gi: self.scaled_sum(batch.groups[gi].vec) for gi in live}
        first = {gi: min(self.arrival(gi, k) for k in range(batch.groups[gi].size)) for gi in live}
        # Largest first, higher keys before; equal sizes keep the arrival order of their groups.
        self.groups = sorted(live, key=lambda gi: (-batch.rank(batch.groups[gi]), -self.size[gi], first[gi]))
        self.order = [(gi, k) for gi in self.groups for k in range(batch.groups[gi].size)]
        self.ports: dict[int, list[HostPort]] = {}  # host ports the heuristic's pods hold, per node

    def scaled(self, amounts: IntArray) -> list[float]:
        return [float(v) / top for v, top in zip(amounts[self.columns].tolist(), self.top.tolist(), strict=True)]

    def scaled_sum(self, amounts: IntArray) -> float:
        return math.fsum(self.scaled(amounts))

    def least_room_after(self, nodes: IntArray, vec: IntArray) -> int:
        """The node of ``nodes`` (ascending) that a pod of ``vec`` leaves with the least scaled room,
        the first on a tie: ``scaled_sum`` of each node's room after it, without a Python loop over
        the nodes. The row sums numpy adds may differ from ``math.fsum``'s exactly rounded ones by a
        few units in the last place; only the rows within that bound of the smallest are summed
        exactly, so the choice is the same node ``scaled_sum`` would pick."""
        left = (self.free[nodes][:, self.columns] - vec[self.columns]).astype(np.float64) / self.top
        approx = left.sum(axis=1)
        # |numpy's sum - fsum| <= n * eps * sum(|x|) for n terms; twice that separates candidates.
        slack = 2.0 * (left.shape[1] + 1) * np.finfo(np.float64).eps * float(np.abs(left).sum(axis=1).max())
        close = np.flatnonzero(approx <= approx.min() + slack)
        if len(close) == 1:
            return int(nodes[close[0]])
        exact = [math.fsum(row) for row in left[close].tolist()]
        return int(nodes[close[int(np.argmin(exact))]])

    def arrival(self, gi: int, k: int) -> tuple[str, str, str]:
        pod = self.batch.groups[gi].pods[k]
        return (pod.creation, pod.namespace, pod.name)

    def fits(self, gi: int, nodes: IntArray) -> IntArray:
        """The nodes of ``nodes`` where one more pod of group ``gi`` fits now."""
        group = self.batch.groups[gi]
        ok = np.all(self.free[nodes] >= group.vec, axis=1)
        if group.has_ports:
            mine = group.pods[0].host_ports
            clash = [ports_clash(mine, self.ports.get(n, ())) for n in nodes.tolist()]
            ok &= ~np.array(clash, dtype=bool)
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
            _place(packer, gi, packer.least_room_after(nodes, batch.groups[gi].vec), batch.groups[gi].pods[k], out)
    return out


def dot_product(batch: Batch) -> Placements:
    """Panigrahy et al.'s bin-centric DotProduct: nodes are filled one at a time, in order; each
    takes, while any fits, a pod of the highest key whose scaled request has the largest dot
    product with the node's scaled room left (the first arrived group among equals)."""
    packer, out = _Packer(batch), Placements()
    by_arrival = sorted(packer.groups, key=lambda gi: min(packer.arrival(gi, k) for k in range(batch.groups[gi].size)))
    if not by_arrival:
        return out
    waiting = {gi: list(range(batch.groups[gi].size)) for gi in by_arrival}
    allowed = {gi: set(batch.groups[gi].feasible.tolist()) for gi in by_arrival}
    scaled = {gi: packer.scaled(batch.groups[gi].vec) for gi in by_arrival}
    for n in range(len(packer.free)):
        open_ = [gi for gi in by_arrival if n in allowed[gi] and waiting[gi]]
        while open_:
            room = packer.scaled(packer.free[n])
            here = np.array([n], dtype=np.int64)
            fits = [gi for gi in open_ if len(packer.fits(gi, here))]
            if not fits:
                break
            rank = max(batch.rank(batch.groups[gi]) for gi in fits)
            top = [g for g in fits if batch.rank(batch.groups[g]) == rank]
            scores = [math.fsum(a * b for a, b in zip(scaled[g], room, strict=True)) for g in top]
            gi = top[int(np.argmax(scores))]  # the first on a tie
            k = waiting[gi].pop(0)
            if not waiting[gi]:
                open_.remove(gi)
            _place(packer, gi, n, batch.groups[gi].pods[k], out)
        if not any(waiting.values()):
            break
    return out


def _place(packer: _Packer, gi: int, n: int, pod: Pod, out: Placements) -> None:
    group = packer.batch.groups[gi]
    packer.free[n] -= group.vec
    if pod.host_ports:
        packer.ports.setdefault(n, []).extend(pod.host_ports)
    out.append((pod, n))


HEURISTICS: dict[str, Callable[[Batch], Placements]] = {
    "first-fit-decreasing": first_fit_decreasing,
    "best-fit-decreasing": best_fit_decreasing,
    "dot-product": dot_product,
}


def heuristic_starts(batch: Batch, budget: Budget | None = None) -> list[Assignment | None]:
    """Every heuristic's answer as a start of this batch (None where ``adopt`` refuses one), each
    begun only while ``budget`` has time left (under a deterministic budget all run: they do no
    search, and a wall clock would make the answer depend on the machine). Batches with
    inter-pod rules or workload groups' domains keep to the greedy pass, which knows them."""
    if not batch.topology.empty or batch.levels:
        return []
    out: list[Assignment | None] = []
    for run in HEURISTICS.values():
        if budget is not None and not budget.deterministic and budget.left() <= budget.spare:
            break
        out.append(adopt(batch, run(batch)))
    return out


def _ports_clash(batch: Batch, placements: Sequence[tuple[Pod, int]]) -> bool:
    """Two pods of the answer, or one and a pod running there, use the same host port on a node."""
    held: dict[int, list[HostPort]] = {}
    for pod, n in placements:
        if not pod.host_ports:
            continue
        mine = held.setdefault(n, list(batch.snapshot.ports.get(n, [])))
        if ports_clash(pod.host_ports, mine):
            return True
        mine.extend(pod.host_ports)
    return False


def adopt(batch: Batch, placements: Sequence[tuple[Pod, int]]) -> Assignment | None:
    """Another answer as a start for this batch, if it is one: every pod on a node of its group's
    feasible set, no node over capacity, no host port used twice on a node, no gang in
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
    if _ports_clash(batch, placements):
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
