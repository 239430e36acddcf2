"""Candidate nodes per pod group: where the cluster is large, variables exist only for a few.

A group keeps every feasible node when there are at most ``candidates + size`` of them, where
``size`` counts the pods of every group of the batch with the same requests (identical pods, such
as the gangs of one workload, rank the nodes alike: each group alone would keep the same few
nodes, and the batch would stack on them). Otherwise it keeps the best ones by the order the
objectives use (matching nodes first for relaxed-affinity pods, higher preference, lower strategy
cost, lower index), and, for a group its required pod affinity or hard topology spreading confines
to domains of a key (a zone), the best ones of every domain as well: the domain its first pods
take holds the rest, and the best nodes overall may lie in a few domains. A group held to one
domain keeps the best nodes of the least loaded domain it may take, counting what the batch's
groups given a domain before it and the workloads waiting behind it bring there
(``held.held_domains``). The greedy pass adds
any node it had to take outside them, so its answer stays a solution of the pruned model.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from placer.engine.batch import Batch, Group
from placer.engine.held import Confined, held_domains
from placer.engine.scoring import Scorer
from placer.models import Pod

__all__ = ["node_order", "select_candidates"]

PRESELECT = 4  # on very large clusters, exact ordering only for the 4 x keep most promising nodes


# Costs closer than this are equal (float noise of differences of sums): the load decides.
COST_TIE = 1e-9


def node_order(
    group: Group,
    nodes: npt.NDArray[np.int64],
    cost: npt.NDArray[np.float64],
    load: npt.NDArray[np.float64] | None = None,
) -> npt.NDArray[np.int64]:
    """Positions of ``nodes`` sorted best first for this group; among equal costs the node with
    the lower ``load`` (its mean utilisation; given where the strategy ``spreads_ties``), then the
    lower index. The balance cost is flat wherever a node is past its target (each pod adds its
    own share whatever the node holds): without the load, identical pods stacked on the lowest
    index instead of spreading."""
    outside = (group.masks.binding == "relaxed") & ~group.masks.matching[nodes]
    tied = np.round(cost / COST_TIE)
    keys = (nodes, tied, -group.masks.preference[nodes], outside)
    return np.lexsort(keys if load is None else (nodes, load, *keys[1:]))


def select_candidates(batch: Batch, scorer: Scorer, limit: int, waiting: Sequence[Pod] = ()) -> None:
    """Set ``group.candidates`` for every group of the batch (``waiting``: the pods queued behind
    it, whose workloads' domains ``held_domains`` counts)."""
    used = batch.snapshot.used
    alike: dict[bytes, int] = {}  # request vector -> pods of the batch asking for it
    for group in batch.groups:
        alike[group.vec.tobytes()] = alike.get(group.vec.tobytes(), 0) + group.size
    confined = _confined(batch)
    batch.held = {}
    zone_of = held_domains(batch, scorer, confined, waiting)
    pods = sum(group.size for group in batch.groups)
    for gi, group in enumerate(batch.groups):
        keep = limit + alike[group.vec.tobytes()]
        chosen = [_best(group, group.feasible, keep, scorer, used)]
        for ci, (of_node, size, spread, _held) in enumerate(confined.get(gi, ())):
            doms = of_node[group.feasible]
            if not spread:
                # All its pods share one domain (``held_domains``): that domain holds its
                # candidates, as many as the batch has pods (other groups may be held there too).
                taken = zone_of.get((gi, ci))
                if taken is not None:
                    best, binding = taken
                    if binding:
                        batch.held[gi] = (of_node, best)
                    chosen = [_best(group, group.feasible[doms == best], limit + pods, scorer, used)]
                continue
            # Its pods share out over the domains: the best nodes of every domain join.
            per = -(-keep // max(size, 1)) + 1
            if size <= keep:  # not for keys of a node or a few (hostname): the best overall are spread
                chosen += [_best(group, group.feasible[doms == d], per, scorer, used) for d in range(size)]
        # One set of distinct nodes needs only sorting (a thousand groups on a thousand nodes).
        distinct = np.sort(chosen[0]) if len(chosen) == 1 else np.unique(np.concatenate(chosen))
        group.candidates = distinct.astype(np.int64)


def _confined(batch: Batch) -> dict[int, list[Confined]]:
    """Per group, the topology keys its required inter-pod rules confine it by: (domain of each
    node, number of domains, whether its pods share out over them: hard spreading; otherwise
    required affinity holds them in one, among the domains allowed: those of a running pod it
    must join, every one when there is none; not when a pod of the batch without such a rule
    provides for it, whose domain is not known before it is placed)."""
    topo = batch.topology
    out: dict[int, list[Confined]] = {}
    ruled = {a.g for a in topo.affinity}
    for a in topo.affinity:
        for t in a.terms:
            if not set(t.providers) <= ruled:
                continue  # it may join a pod of the batch free to go anywhere: no one domain
            d = topo.domains[t.key]
            held = t.constant if t.constant.any() else np.ones(d.size, dtype=np.bool_)
            out.setdefault(a.g, []).append((d.of_node, d.size, False, held))
    for r in topo.spread:
        if r.hard:
            d = topo.domains[r.key]
            out.setdefault(r.owner, []).append((d.of_node, d.size, True, np.ones(d.size, dtype=np.bool_)))
    return out


def _best(
    group: Group, feasible: npt.NDArray[np.int64], keep: int, scorer: Scorer, used: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """The ``keep`` best of ``feasible`` for the group (all of them when there are no more)."""
    if len(feasible) <= keep:
        return feasible
    wide = PRESELECT * keep
    if len(feasible) > wide:
        # Pre-select by a cheap key shared by all groups (the node's current load, preference,
        # matching), then order the survivors exactly.
        load = scorer.strategy.preselect(scorer, feasible)
        outside = (group.masks.binding == "relaxed") & ~group.masks.matching[feasible]
        key = load - 10.0 * group.masks.preference[feasible] + 1e6 * outside
        feasible = feasible[np.argpartition(key, wide)[:wide]]
    cost = scorer.delta(group.vec, feasible, used)
    ties = scorer.load[feasible] if scorer.strategy.spreads_ties else None
    return feasible[node_order(group, feasible, cost, ties)[:keep]]
