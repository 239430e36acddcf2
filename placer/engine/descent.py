"""Local descent for the strategy level of large batches: move one pod at a time.

For each batch pod (in a seeded random order), evaluate moving it to every other candidate node
with room, with the same float strategy cost as ``Scorer`` (which mirrors the CP-SAT objective);
take the best strictly improving move. Moves never lower an earlier level: a pod only moves to a
node of at least the same preference, and a relaxed-affinity pod never leaves a matching node for
a non-matching one. Pods with host ports, and pods whose placement interacts with other batch
pods through inter-pod affinity, anti-affinity or spreading, stay where they are. Sweeps repeat until one improves
nothing or the budget is spent: wall seconds, or with a deterministic budget a number of pods
weighed (``DESCENT_PODS_PER_SECOND`` per second of the time limit). Used for strategies that declare ``descends``.
"""

from __future__ import annotations

import time

import numpy as np

from placer.engine.batch import Batch
from placer.engine.scoring import Scorer

__all__ = ["DESCENT_PODS_PER_SECOND", "descend"]

# Pods weighed per second of one core on the reference machine (2 cores; examples/tbesk.json:
# measured by benchmarks/deterministic.py): a deterministic descent's seconds-equivalent.
DESCENT_PODS_PER_SECOND = 2000

Counts = dict[tuple[int, int], int]
_EPS = 1e-12


def _fixed_groups(batch: Batch) -> set[int]:
    return batch.topology.involved | {gi for gi, g in enumerate(batch.groups) if g.has_ports}


def descend(
    batch: Batch, scorer: Scorer, counts: Counts, *, seconds: float, seed: int, evaluations: float = float("inf")
) -> tuple[Counts, int, int]:
    """Improved counts, the number of moves made and of pods weighed, within ``seconds`` of wall time and
    ``evaluations`` pods weighed (the deterministic budget: the answer does not depend on speed)."""
    if not scorer.strategy.descends:
        return counts, 0, 0
    started = time.monotonic()
    snap = batch.snapshot
    used = snap.used.copy()
    pods: list[tuple[int, int]] = []  # (group, node) per placed pod
    fixed = _fixed_groups(batch)
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
            cand = group.candidates
            masks = group.masks
            ok = (cand != a) & (masks.preference[cand] >= masks.preference[a])
            if masks.binding == "relaxed" and masks.matching[a]:
                ok &= masks.matching[cand]
            nz = np.flatnonzero(group.vec)
            ok &= np.all(snap.alloc[np.ix_(cand, nz)] - used[np.ix_(cand, nz)] >= group.vec[nz], axis=1)
            targets = cand[ok]
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
