"""A large gang of plain members placed whole in one vectorised pass: the start of its batch.

The greedy pass places one pod at a time, each looking at its nodes: a 5,000-pod gang on 1,000
nodes needs thousands of such looks, more than its share of a short budget under load, and a gang
it cannot finish is dropped whole, so the batch then starts from nothing and CP-SAT, given
the same short budget, does not place it either (docs/bench/e2e-biggang.md). Members of one group
are identical, so how many of them a node takes is a matter of counts: its room divided by their
request. One pass over the nodes per group, linear in nodes and pods:

- the pack strategy: best fit, the nodes with the least room for the group first;
- the others: water-filling, every node brought up to one common level of its most used balance
  resource (found by bisection), the last pods to the least used nodes.

A gang is filled whole (each of its groups in turn on the room the previous ones left) or not at
all. Only gangs of ``WHOLE_PODS`` pods or more whose groups have no topology rule, host port,
preferred node term or workload domain: the greedy pass weighs those pod by pod. CP-SAT improves
on the start as on any other (it is its hint); the nodes it uses join each group's candidates.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from placer.engine.batch import Batch, gang_groups
from placer.engine.greedy import Assignment, greedy
from placer.engine.levels import Budget
from placer.engine.scoring import Scorer
from placer.models import StrategyName

__all__ = ["WHOLE_PODS", "fill_counts", "greedy_start", "place_whole", "plain_gangs"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

# Gangs smaller than this are left to the greedy pass, whose per-pod look weighs every objective.
WHOLE_PODS = 256
_BISECTIONS = 50  # of the common level, in [0, 1]: far below one pod's share of any real node


def plain_gangs(batch: Batch) -> dict[str, list[int]]:
    """Gangs (-> their groups) this pass places: ``WHOLE_PODS`` pods or more, and no group of
    them with a topology rule, a host port or a preferred node term; none in a batch of workload
    domains or composite gangs (``Batch.grouped``: ``greedy_domains`` places those)."""
    if batch.grouped:
        return {}
    topo = batch.topology
    ruled = topo.involved | set(topo.static) | set(topo.preference)
    out = {}
    for gang, members in gang_groups(batch.groups).items():
        groups = [batch.groups[gi] for gi in members]
        if sum(g.size for g in groups) < WHOLE_PODS:
            continue
        if any(gi in ruled or g.has_ports or g.pods[0].preferred_terms for gi, g in zip(members, groups, strict=True)):
            continue
        out[gang] = members
    return out


def fill_counts(
    free: IntArray, vec: IntArray, count: int, *, pack: bool, share: FloatArray | None = None,
    step: FloatArray | None = None,
) -> IntArray | None:  # fmt: skip
    """How many pods of request ``vec`` each node takes so that ``count`` are placed, given each
    node's ``free`` room (rows); None when they do not all fit. ``pack``: best fit, the nodes with
    the least room first. Otherwise water-filling on the balance resources: ``share`` is each
    node's utilisation of them before (rows), ``step`` what one pod adds to it; without them (or
    when the pods ask for none of them) the nodes with the most room first."""
    nz = np.flatnonzero(vec)
    cap = np.maximum((free[:, nz] // vec[nz]).min(axis=1), 0) if len(nz) else np.full(len(free), count)
    if int(cap.sum()) < count:
        return None
    if pack or share is None or step is None or not (step > 0).any():
        order = np.argsort(cap, kind="stable") if pack else np.argsort(-cap, kind="stable")
        return _take(cap, order, count)
    rises = step > 0
    safe = np.where(rises, step, 1.0)

    def at(level: float) -> IntArray:
        """Pods each node takes up to ``level`` of its most used balance resource."""
        room = np.where(rises, (level - share) / safe, np.inf).min(axis=1)
        counts = np.where(np.isfinite(room), np.floor(room + 1e-9), cap)
        return np.clip(counts, 0, cap).astype(np.int64)

    lo, hi = 0.0, float(np.where(rises, share + cap[:, None] * step, 0.0).max()) + 1e-6
    for _ in range(_BISECTIONS):
        mid = (lo + hi) / 2
        if int(at(mid).sum()) >= count:
            hi = mid
        else:
            lo = mid
    out = at(lo)
    # The last pods to the nodes least used once ``out`` is placed, one more each at most.
    after = np.where(rises, share + (out[:, None] + 1) * step, 0.0).max(axis=1)
    more = _take(at(hi) - out, np.argsort(after, kind="stable"), count - int(out.sum()))
    return out + more


def _take(cap: IntArray, order: IntArray, count: int) -> IntArray:
    """``count`` pods on the nodes in ``order``, each filled up to its ``cap`` before the next."""
    order = order[cap[order] > 0]
    before = np.cumsum(cap[order]) - cap[order]
    out = np.zeros(len(cap), dtype=np.int64)
    out[order] = np.clip(count - before, 0, cap[order])
    return out


def place_whole(batch: Batch, scorer: Scorer, used: IntArray) -> dict[int, IntArray]:
    """Each plain gang (``plain_gangs``) placed whole on ``used`` (updated in place) or not at all:
    group -> the node of each of its pods. The nodes used join the groups' candidates."""
    snap = batch.snapshot
    pack = scorer.strategy.name == StrategyName.PACK
    out: dict[int, IntArray] = {}
    for members in plain_gangs(batch).values():
        trial = used.copy()
        placed: dict[int, IntArray] = {}
        for gi in sorted(members, key=lambda g: -batch.groups[g].size):
            group = batch.groups[gi]
            nodes = group.feasible
            free = snap.alloc[nodes] - trial[nodes]
            inv: FloatArray = scorer.inv_alloc[nodes]
            share: FloatArray = trial[np.ix_(nodes, scorer.cols)].astype(np.float64) * inv
            step: FloatArray = group.vec[scorer.cols].astype(np.float64) * inv
            counts = fill_counts(free, group.vec, group.size, pack=pack, share=share, step=step)
            if counts is None:
                break
            trial[nodes] += counts[:, None] * group.vec
            placed[gi] = np.repeat(nodes, counts).astype(np.int64)
        else:
            used[:] = trial
            for gi, where in placed.items():
                group = batch.groups[gi]
                group.candidates = np.union1d(group.candidates, where).astype(np.int64)
            out.update(placed)
    return out


def greedy_start(batch: Batch, scorer: Scorer, budget: Budget | None) -> Assignment:
    """The greedy pass's start with the plain gangs placed whole first (``place_whole``) and the
    other pods placed by it, one by one, on the room they leave."""
    used = batch.snapshot.used.copy()
    whole = place_whole(batch, scorer, used)
    if not whole:
        return greedy(batch, scorer, budget=budget)
    hint = greedy(batch, scorer, used, frozenset(whole), budget=budget)
    for gi, nodes in whole.items():
        hint[gi] = nodes
    return hint
