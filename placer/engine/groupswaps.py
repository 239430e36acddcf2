"""Group swaps: the reference answer of ``groupfloor`` improved one group at a time.

The reference (kube-scheduler's answer, or the greedy start in queue order) places groups one at
a time, so it often leaves a large group out for smaller ones placed earlier. From it, for each
group left out (largest first) and each placed group of the same key smaller than it (smallest
first): take the placed one off, place the one left out wherever a domain takes it whole
(``greedy_domains.fit_unit``), then try to place the one taken off again anywhere. The swap is
kept when the group left out found room: the same groups of every key or one more, and more pods
of that key, so the answer only climbs in ``groupfloor``'s order and stays a start of the model.

Only plain gangs held in one domain take part (one batch group each, no composite gangs, no host
ports, no inter-pod rules in the batch); the others stay as the reference placed them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import numpy as np

from placer.engine.batch import Batch
from placer.engine.greedy import Assignment
from placer.engine.greedy_domains import fit_unit
from placer.engine.scoring import Scorer

__all__ = ["improve"]


def _movable(batch: Batch, gi: int, members: Counter[str | None]) -> bool:
    """``members``: batch groups per gang."""
    group = batch.groups[gi]
    pod = group.pods[0]
    return bool(
        group.gang is not None
        and pod.group_domains
        and not pod.group_quorums
        and not group.has_ports
        and len(group.feasible)
        and members[group.gang] == 1
    )


def improve(batch: Batch, scorer: Scorer, reference: Assignment, *, spent: Callable[[], bool]) -> Assignment:
    """``reference`` with the swaps of the module docstring made while ``spent()`` is False."""
    if not batch.levels or not batch.topology.empty:
        return reference
    out = [nodes.copy() for nodes in reference]
    used = batch.snapshot.used.copy()
    for gi, nodes in enumerate(out):
        for n in nodes[nodes >= 0].tolist():
            used[n] += batch.groups[gi].vec
    members = Counter(g.gang for g in batch.groups)  # counted once: a thousand gangs are a million checks
    movable = [gi for gi in range(len(out)) if _movable(batch, gi, members)]

    def placed(gi: int) -> bool:
        return bool((out[gi] >= 0).any())

    def put(gi: int, nodes: list[int]) -> None:
        out[gi][:] = -1
        out[gi][: len(nodes)] = nodes
        group = batch.groups[gi]  # the nodes taken join the candidates: the start stays a solution
        group.candidates = np.union1d(group.candidates, nodes).astype(np.int64)

    changed = True
    while changed and not spent():
        changed = False
        left = sorted((gi for gi in movable if not placed(gi)), key=lambda gi: -batch.groups[gi].size)
        for h in left:
            big = batch.groups[h]
            smaller = [
                g for g in movable if placed(g) and batch.groups[g].key == big.key and batch.groups[g].size < big.size
            ]
            for g in sorted(smaller, key=lambda g: batch.groups[g].size):
                if spent():
                    return out
                small = batch.groups[g]
                freed = used.copy()
                for n in out[g][out[g] >= 0].tolist():
                    freed[n] -= small.vec
                found = fit_unit(batch, scorer, [h], freed)
                if found is None:
                    continue
                fit, after = found
                put(h, fit[h])
                again = fit_unit(batch, scorer, [g], after)
                if again is None:
                    out[g][:] = -1
                    used = after
                else:
                    put(g, again[0][g])
                    used = again[1]
                changed = True
                break
    return out
