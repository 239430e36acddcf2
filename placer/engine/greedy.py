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
from placer.engine.greedy_domains import place_levels, port_clash
from placer.engine.levels import DETERMINISTIC_UNITS_PER_SECOND, Budget
from placer.engine.quorums import short
from placer.engine.scoring import Scorer
from placer.engine.topology import TopologyState

__all__ = ["GREEDY_CHECKS_PER_SECOND", "GREEDY_SHARE", "Assignment", "counts_of", "greedy"]

# The greedy pass may use at most this share of what is left of the decision's budget; the levels
# get the rest to place what it did not reach.
GREEDY_SHARE = 0.5
# Node checks the pass does per second of one core on the reference machine: its deterministic
# clock. One pod's look at its nodes counts (its nodes + CALL_CHECKS) x (1 + the topology rules of
# its group). Measured with the greedy pass's own CPU time on five shapes (2026-11-28, load 5-7 on
# the 2 cores): 2.2-2.9 M/s without topology rules, 1.1 M/s with pairwise anti-affinity among 500
# groups (families of pods sharing affinity terms cost more than the count says), up to 9 M/s with
# few rules; the figure is the plain rate, so a pass heavy in rules may overrun its share in wall
# time by a few times, never without bound (wall-time budgets are exact).
GREEDY_CHECKS_PER_SECOND = 2_000_000
CALL_CHECKS = 100  # one question's fixed cost (numpy calls), in node checks

# Assignment: for each group, the node index chosen for each of its pods (-1: unplaced).
Assignment = list[npt.NDArray[np.int64]]


def counts_of(assignment: Assignment) -> dict[tuple[int, int], int]:
    """An assignment as pods per (group, node)."""
    out: dict[tuple[int, int], int] = {}
    for gi, nodes in enumerate(assignment):
        for n in nodes.tolist():
            if n >= 0:
                out[gi, n] = out.get((gi, n), 0) + 1
    return out


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


class _Costs:
    """Each group's strategy cost per node, recomputed only where ``used`` changed since.

    A node's cost for a pod depends on that node's row of ``used`` alone (``Scorer.delta``: every
    strategy's node and pod costs are per node, against targets fixed for the batch), and a pass
    places one pod at a time: a group of many identical pods then costs one evaluation of its
    nodes plus one node per pod placed, instead of every node for every pod (a 5,000-pod gang on
    1,000 nodes: 5 million node evaluations otherwise). The values are the ones a fresh
    evaluation gives, node by node."""

    def __init__(self, nodes: int) -> None:
        self.version = np.zeros(nodes, dtype=np.int64)  # placements on each node so far
        self.known: dict[
            tuple[int, int], tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64]]
        ] = {}

    def placed(self, node: int) -> None:
        self.version[node] += 1

    def delta(
        self,
        scorer: Scorer,
        gi: int,
        vec: npt.NDArray[np.int64],
        nodes: npt.NDArray[np.int64],
        used: npt.NDArray[np.int64],
    ) -> npt.NDArray[np.float64]:
        """``scorer.delta(vec, nodes, used)`` for group ``gi`` (``nodes`` its candidates or its
        feasible nodes, each list kept apart)."""
        key = (gi, len(nodes))
        known = self.known.get(key)
        if known is None or not np.array_equal(known[0], nodes):
            cost = scorer.delta(vec, nodes, used)
            self.known[key] = (nodes.copy(), self.version[nodes], cost)
            return cost
        _, stamp, cost = known
        now = self.version[nodes]
        stale = np.flatnonzero(stamp != now)
        if len(stale):
            cost[stale] = scorer.delta(vec, nodes[stale], used)
            stamp[stale] = now[stale]
        return cost


class _Clock:
    """The greedy pass's share of the decision's budget (``GREEDY_SHARE`` of what is left when it
    starts): wall time, or with ``solver.deterministic`` node checks (``GREEDY_CHECKS_PER_SECOND``
    per second of the share), so that the same input stops at the same pod on every machine."""

    def __init__(self, budget: Budget | None) -> None:
        self.share = budget.capped(GREEDY_SHARE) if budget is not None else None
        self.checks = 0
        self.limit = float("inf")
        if self.share is not None and self.share.deterministic:
            self.limit = self.share.limit / DETERMINISTIC_UNITS_PER_SECOND * GREEDY_CHECKS_PER_SECOND

    def spent(self) -> bool:
        if self.share is None:
            return False
        return self.checks >= self.limit if self.share.deterministic else self.share.left() <= 0


def greedy(
    batch: Batch,
    scorer: Scorer,
    used: npt.NDArray[np.int64] | None = None,
    skip: frozenset[int] = frozenset(),
    *,
    budget: Budget | None = None,
    queue: bool = False,
) -> Assignment:
    """Place pods one by one among each group's candidates; a pod that fits none of them looks at
    every feasible node, and the node it takes joins the group's candidates (so the answer stays a
    solution of the pruned model). With ``budget`` the pass stops when its share is spent and
    returns what it has placed (the pods not reached stay unplaced: the levels then place them or
    keep this answer). ``queue``: workload groups in queue order, not larger first
    (``greedy_domains``)."""
    return _greedy(batch, scorer, used, skip, _Clock(budget), None, queue)


def _greedy(
    batch: Batch,
    scorer: Scorer,
    used: npt.NDArray[np.int64] | None,
    skip: frozenset[int],
    clock: _Clock,
    reach: int | None,
    queue: bool = False,
) -> Assignment:
    """``greedy``; ``reach``: take at most that many pods of the order (a second pass after
    dropping partial gangs goes no further than the first, whatever the clock says)."""
    snap = batch.snapshot
    start = used
    used = snap.used.copy() if used is None else used.copy()
    alloc = snap.alloc
    port_nodes: dict[int, list[int]] = {}  # node -> port-using groups placed there by this pass
    result: Assignment = [np.full(g.size, -1, dtype=np.int64) for g in batch.groups]
    topo = None if batch.topology.empty else TopologyState(batch.topology, [g.size for g in batch.groups])
    # Groups held in topology domains go first, one workload group at a time (``greedy_domains``).
    alone = skip | place_levels(batch, scorer, used, result, skip, queue=queue, ports=port_nodes)
    # Pods whose required affinity other batch pods provide go after their providers.
    dependent = {a.g: a.order for a in batch.topology.affinity if not a.seed}
    by_tier = batch.tiers != "namespace"
    # One sort key per group (its pods share it), then its pods in order.
    group_key = {
        gi: (
            -batch.rank(g) if by_tier else -g.key[0],
            dependent.get(gi, (-1, -1)),
            -_dominant_share(batch, g.vec),
            gi,
        )
        for gi, g in enumerate(batch.groups)
        if gi not in alone
    }
    order = [(gi, pi) for gi in sorted(group_key, key=group_key.__getitem__) for pi in range(batch.groups[gi].size)]
    if not by_tier:
        order = _tiers_within_namespaces(batch, order, frozenset(dependent))
    taken = 0
    costs = _Costs(len(snap.nodes))
    for gi, pi in order:
        if clock.spent() if reach is None else taken >= reach:
            break
        taken += 1
        group = batch.groups[gi]
        best = None
        weight = 1 + (topo.rules(gi) if topo is not None else 0)
        # Soft spreading is honoured when some node allows it, and dropped otherwise.
        for soft in (True, False) if topo is not None else (True,):
            clock.checks += weight * (len(group.candidates) + CALL_CHECKS)
            best = _choose(batch, gi, group.candidates, used, alloc, port_nodes, scorer, topo, soft, costs)
            if best is None and len(group.feasible) > len(group.candidates):
                clock.checks += weight * (len(group.feasible) + CALL_CHECKS)
                best = _choose(batch, gi, group.feasible, used, alloc, port_nodes, scorer, topo, soft, costs)
                if best is not None:
                    group.candidates = np.union1d(group.candidates, [best]).astype(np.int64)
            if best is not None:
                break
        if best is None:
            continue
        result[gi][pi] = best
        used[best] += group.vec
        costs.placed(best)
        if topo is not None:
            topo.add(gi, best)
        if group.has_ports:
            port_nodes.setdefault(best, []).append(gi)
    dropped = _drop_partial_gangs(batch, result) | _drop_short_quorums(batch, result)
    if dropped and topo is not None:
        # Dropped pods may have counted for other pods' spreading or affinity: place again without
        # them, as far as this pass went.
        return _greedy(batch, scorer, start, skip | dropped, clock, taken if reach is None else reach, queue)
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


def _drop_short_quorums(batch: Batch, result: Assignment) -> frozenset[int]:
    """A composite gang the pass placed fewer than ``minGroupCount`` child groups of is not placed
    at all (``placer.engine.quorums``); returns its groups that had pods placed."""
    if not batch.quorums:
        return frozenset()
    dropped = short(batch.quorums, [int((nodes >= 0).sum()) for nodes in result])
    for gi in dropped:
        result[gi][:] = -1
    return dropped


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
    costs: _Costs | None = None,
) -> int | None:
    group = batch.groups[gi]
    if len(nodes) == 0:
        return None
    every = nodes
    nz = np.flatnonzero(group.vec)
    ok = np.all(alloc[np.ix_(nodes, nz)] - used[np.ix_(nodes, nz)] >= group.vec[nz], axis=1)
    if topo is not None:
        ok &= topo.allowed(gi, nodes, soft=soft)
    if group.has_ports and port_nodes:
        clash = [n for n, groups in port_nodes.items() if port_clash(batch, gi, groups)]
        ok &= ~np.isin(nodes, clash)
    nodes = nodes[ok]
    if len(nodes) == 0:
        return None
    if costs is None:
        cost = scorer.delta(group.vec, nodes, used)
    else:
        cost = costs.delta(scorer, gi, group.vec, every, used)[ok]
    load = None
    if scorer.strategy.spreads_ties:
        load = (used[np.ix_(nodes, scorer.cols)] * scorer.inv_alloc[nodes]).sum(axis=1) / scorer.k[nodes]
    return int(nodes[node_order(group, nodes, cost, load)[0]])
