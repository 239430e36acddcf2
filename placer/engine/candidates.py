"""Candidate nodes per pod group: where the cluster is large, variables exist only for a few.

A group keeps every feasible node when there are at most ``candidates + size`` of them.
Otherwise it keeps the best ones by the order the objectives use (matching nodes first for
relaxed-affinity pods, higher preference, lower strategy cost, lower index). The greedy pass adds
any node it had to take outside them, so its answer stays a solution of the pruned model.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from placer.engine.batch import Batch, Group
from placer.engine.scoring import Scorer

__all__ = ["node_order", "select_candidates"]

PRESELECT = 4  # on very large clusters, exact ordering only for the 4 x keep most promising nodes


def node_order(group: Group, nodes: npt.NDArray[np.int64], cost: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    """Positions of ``nodes`` sorted best first for this group."""
    outside = (group.masks.binding == "relaxed") & ~group.masks.matching[nodes]
    return np.lexsort((nodes, cost, -group.masks.preference[nodes], outside))


def select_candidates(batch: Batch, scorer: Scorer, limit: int) -> None:
    """Set ``group.candidates`` for every group of the batch."""
    used = batch.snapshot.used
    for group in batch.groups:
        feasible = group.feasible
        keep = limit + group.size
        if len(feasible) <= keep:
            group.candidates = feasible
            continue
        wide = PRESELECT * keep
        if len(feasible) > wide:
            # Pre-select by a cheap key shared by all groups (the node's current load, preference,
            # matching), then order the survivors exactly.
            load = scorer.strategy.preselect(scorer, feasible)
            outside = (group.masks.binding == "relaxed") & ~group.masks.matching[feasible]
            key = load - 10.0 * group.masks.preference[feasible] + 1e6 * outside
            feasible = feasible[np.argpartition(key, wide)[:wide]]
        cost = scorer.delta(group.vec, feasible, used)
        group.candidates = np.sort(feasible[node_order(group, feasible, cost)[:keep]]).astype(np.int64)
