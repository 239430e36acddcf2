"""Local descent for the strategy level of large batches: move one pod at a time.

For each batch pod (in a seeded random order), evaluate moving it to every other candidate node
with room, with the same float strategy cost as ``Scorer`` (which mirrors the CP-SAT objective);
take the best strictly improving move. Moves never lower an earlier level: a pod only moves to a
node of at least the same preference, and a relaxed-affinity pod never leaves a matching node for
a non-matching one. Pods with host ports, and pods whose placement interacts with other batch
pods through inter-pod affinity, anti-affinity or spreading, stay where they are. Sweeps repeat until one improves
nothing or the budget is spent. Used for strategies that declare ``descends``.
"""

from __future__ import annotations

import time

import numpy as np

from placer.engine.batch import Batch
from placer.engine.scoring import IntArray, Scorer

__all__ = ["DESCENT_PODS_PER_SECOND", "descend", "fixed_groups", "move_targets"]

# Pods weighed per second of one core on the reference machine (2 cores; examples/tbesk.json:
# measured by benchmarks/deterministic.py): a deterministic descent's seconds-equivalent.
DESCENT_PODS_PER_SECOND = 2000

Counts = dict[tuple[int, int], int]
_EPS = 1e-12


def fixed_groups(batch: Batch) -> set[int]:
    """Groups whose pods stay where they are: host ports, or rules involving other batch pods."""
    return batch.topology.involved | {gi for gi, g in enumerate(batch.groups) if g.has_ports}


def move_targets(batch: Batch, gi: int, a: int, used: IntArray, nodes: IntArray) -> IntArray:
    """The ``nodes`` a pod of group ``gi`` on node ``a`` may move to without lowering an earlier
    level: room for it in ``used``, a preference at least ``a``'s, and a matching node for a
    relaxed-affinity pod on a matching node."""
    group = batch.groups[gi]
    masks = group.masks
    ok = (nodes != a) & (masks.preference[nodes] >= masks.preference[a])
    if masks.binding == "relaxed" and masks.matching[a]:
        ok &= masks.matching[nodes]
    nz = np.flatnonzero(group.vec)
    alloc = batch.snapshot.alloc
    ok &= np.all(alloc[np.ix_(nodes, nz)] - used[np.ix_(nodes, nz)] >= group.vec[nz], axis=1)
    out: IntArray = nodes[ok]
    return out


def descend(
    batch: Batch,
    scorer: Scorer,
    counts: Counts,
    *,
    seconds: float,
    seed: int,
    evaluations: float = float("inf"),
    wide: bool = False,
) -> tuple[Counts, int, int]:
    """Improved counts, the number of moves made and of pods weighed, within ``seconds`` of wall time and
    ``evaluations`` pods weighed (the deterministic budget: the answer does not depend on speed).
    Moves go to each group's candidates, or with ``wide`` to every feasible node."""
    if not scorer.strategy.descends:
        return counts, 0, 0
    started = time.monotonic()
    snap = batch.snapshot
    used = snap.used.copy()
    pods: list[tuple[int, int]] = []  # (group, node) per placed pod
    fixed = fixed_groups(batch)
    for (gi, n), c in sorted(counts.items()):
        used[n] += batch.groups[gi].vec * c
        if gi not in fixed:
            pods.extend([(gi, n)] * c)
    rng = np.random.default_rng(seed)
    moves = weighed = 0
    improved = True
    while improved and time.monotonic() - started < seconds and weighed < evaluations:
        improved = False
        for i in rng.permutation(len(pods)).tolist():
            if time.monotonic() - started >= seconds or weighed >= evaluations:
                break
            weighed += 1
            gi, a = pods[i]
            group = batch.groups[gi]
            targets = move_targets(batch, gi, a, used, group.feasible if wide else group.candidates)
            if len(targets) == 0:
                continue
            gain = scorer.removal(group.vec, a, used) + scorer.delta(group.vec, targets, used)
            best = int(np.argmin(gain))
            if gain[best] < -_EPS:
                b = int(targets[best])
                used[a] -= group.vec
                used[b] += group.vec
                pods[i] = (gi, b)
                moves += 1
                improved = True
    out: Counts = {k: c for k, c in counts.items() if k[0] in fixed}
    for gi, n in pods:
        out[gi, n] = out.get((gi, n), 0) + 1
    return out, moves, weighed
