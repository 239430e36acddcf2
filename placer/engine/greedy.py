"""The greedy pass: the warm-start hint and the fallback answer.

Pods go in order of key (highest first), then larger dominant share first, then creation (with
``restartTiers: namespace``, in order of spec.priority, tiers deciding only inside a namespace); each
takes the best feasible node in the objectives' order (matching nodes first for relaxed-affinity
pods, then preference, then the smallest growth of the strategy cost, then lowest index).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from placer.engine.batch import Batch
from placer.engine.candidates import node_order
from placer.engine.greedy_domains import place_levels
from placer.engine.prefilter import ports_conflict
from placer.engine.scoring import Scorer
from placer.engine.topology import TopologyState

__all__ = ["Assignment", "greedy"]

# Assignment: for each group, the node index chosen for each of its pods (-1: unplaced).
Assignment = list[npt.NDArray[np.int64]]


def _dominant_share(batch: Batch, vec: npt.NDArray[np.int64]) -> float:
    total = batch.snapshot.alloc.sum(axis=0).astype(np.float64)
    share = np.where(total > 0, vec / np.where(total > 0, total, 1), 0.0)
    return float(share.max()) if len(share) else 0.0


Order = list[tuple[int, int]]  # (group, pod of the group)


def _tiers_within_namespaces(batch: Batch, order: Order, fixed: frozenset[int]) -> Order:
    """``restartTiers: namespace``: the order by spec.priority, in which the pods of each
    (namespace, priority) take that bucket's places highest restart tier first. Tiers then decide
    inside a namespace and never between namespaces. Pods that wait for affinity providers
    (``fixed`` groups) keep their places."""
    places: dict[tuple[str, int], list[int]] = {}
    for i, (gi, _) in enumerate(order):
        if gi not in fixed:
            group = batch.groups[gi]
            places.setdefault((group.pods[0].namespace, group.key[0]), []).append(i)
    out = list(order)
    for slots in places.values():
        pods = sorted((order[i] for i in slots), key=lambda t: -batch.groups[t[0]].key[1])
        for i, pod in zip(slots, pods, strict=True):
            out[i] = pod
    return out


def greedy(
    batch: Batch, scorer: Scorer, used: npt.NDArray[np.int64] | None = None, skip: frozenset[int] = frozenset()
) -> Assignment:
    """Place pods one by one among each group's candidates; a pod that fits none of them looks at
    every feasible node, and the node it takes joins the group's candidates (so the answer stays a
    solution of the pruned model)."""
    snap = batch.snapshot
    start = used
    used = snap.used.copy() if used is None else used.copy()
    alloc = snap.alloc
    port_nodes: dict[int, list[int]] = {}  # node -> port-using groups placed there by this pass
    result: Assignment = [np.full(g.size, -1, dtype=np.int64) for g in batch.groups]
    topo = None if batch.topology.empty else TopologyState(batch.topology, [g.size for g in batch.groups])
    # Groups held in topology domains go first, one workload group at a time (``greedy_domains``).
    alone = skip | place_levels(batch, scorer, used, result, skip)
    # Pods whose required affinity other batch pods provide go after their providers.
    dependent = {a.g: a.order for a in batch.topology.affinity if not a.seed}
    by_tier = batch.tiers != "namespace"
    order = sorted(
        ((gi, pi) for gi, g in enumerate(batch.groups) for pi in range(g.size) if gi not in alone),
        key=lambda t: (
            -batch.rank(batch.groups[t[0]]) if by_tier else -batch.groups[t[0]].key[0],
            dependent.get(t[0], (-1, -1)),
            -_dominant_share(batch, batch.groups[t[0]].vec),
            t[0],
            t[1],
        ),
    )
    if not by_tier:
        order = _tiers_within_namespaces(batch, order, frozenset(dependent))
    for gi, pi in order:
        group = batch.groups[gi]
        best = None
        # Soft spreading is honoured when some node allows it, and dropped otherwise.
        for soft in (True, False) if topo is not None else (True,):
            best = _choose(batch, gi, group.candidates, used, alloc, port_nodes, scorer, topo, soft)
            if best is None and len(group.feasible) > len(group.candidates):
                best = _choose(batch, gi, group.feasible, used, alloc, port_nodes, scorer, topo, soft)
                if best is not None:
                    group.candidates = np.union1d(group.candidates, [best]).astype(np.int64)
            if best is not None:
                break
        if best is None:
            continue
        result[gi][pi] = best
        used[best] += group.vec
        if topo is not None:
            topo.add(gi, best)
        if group.has_ports:
            port_nodes.setdefault(best, []).append(gi)
    dropped = _drop_partial_gangs(batch, result)
    if dropped and topo is not None:
        # Dropped pods may have counted for other pods' spreading or affinity: place again without them.
        return greedy(batch, scorer, start, skip | dropped)
    return result


def _drop_partial_gangs(batch: Batch, result: Assignment) -> frozenset[int]:
    """A gang the greedy pass could not place whole is not placed at all; returns its groups."""
    placed: dict[str, list[bool]] = {}
    for gi, group in enumerate(batch.groups):
        if group.gang is not None:
            placed.setdefault(group.gang, []).extend((result[gi] >= 0).tolist())
    dropped = set()
    for gi, group in enumerate(batch.groups):
        if group.gang is not None and not all(placed[group.gang]):
            if (result[gi] >= 0).any():
                dropped.add(gi)
            result[gi][:] = -1
    return frozenset(dropped)


def _choose(
    batch: Batch,
    gi: int,
    nodes: npt.NDArray[np.int64],
    used: npt.NDArray[np.int64],
    alloc: npt.NDArray[np.int64],
    port_nodes: dict[int, list[int]],
    scorer: Scorer,
    topo: TopologyState | None = None,
    soft: bool = True,
) -> int | None:
    group = batch.groups[gi]
    if len(nodes) == 0:
        return None
    nz = np.flatnonzero(group.vec)
    ok = np.all(alloc[np.ix_(nodes, nz)] - used[np.ix_(nodes, nz)] >= group.vec[nz], axis=1)
    if topo is not None:
        ok &= topo.allowed(gi, nodes, soft=soft)
    if group.has_ports and port_nodes:
        clash = [n for n, groups in port_nodes.items() if _port_clash(batch, gi, groups)]
        ok &= ~np.isin(nodes, clash)
    nodes = nodes[ok]
    if len(nodes) == 0:
        return None
    cost = scorer.delta(group.vec, nodes, used)
    return int(nodes[node_order(group, nodes, cost)[0]])


def _port_clash(batch: Batch, gi: int, placed_groups: list[int]) -> bool:
    mine = batch.groups[gi].pods[0].host_ports
    return any(
        ports_conflict(a, b) for other in placed_groups for a in mine for b in batch.groups[other].pods[0].host_ports
    )
