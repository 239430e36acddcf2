"""The compiled inner loop of the overload search (``overload``); numba compiles it in ``kernel``.

Every pod is on a bin, and bins may be over their room. The search lowers the total weighted
overload, ``sum over bins and resources of w[j] * max(0, load - room) / room``, to zero, when the
bins hold a packing of every pod. One step:

1. a bin over its room is drawn;
2. every move of one of its pods to another bin, and every exchange of one of its pods with a pod of
   another bin, is scored by how much it changes the overload; the best one (ties drawn) is made,
   even when it does not lower the overload;
3. when no move lowers it (a local minimum), the weight of each resource that some bin is over in
   grows by ``bump``, so that the overload left is scored higher and the search is pushed on.

A pod that leaves a bin may not go back to it for a few steps (a tabu tenure, drawn at random).

This is the weighted min-conflicts tabu search of constraint satisfaction (the breakout method:
Morris, AAAI 1993; tabu search on infeasible assignments as in TabuCol, Hertz & de Werra,
Computing 39, 1987) applied to the bins of a packing. Where the ejection search (``kernel``) keeps
every bin within its room and leaves pods out, this search keeps every pod in and lets bins
overflow: on the public corpus the two pack different instances (docs/bench/techniques.md).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["steps"]

TENURE = 3  # the tabu tenure of a pod that leaves a bin is TENURE + [0, SPREAD) steps
SPREAD = 5
_TIE = 1e-12


def _over(load: Any, room: Any, w: Any, b: int, add: Any, sub: Any) -> float:
    """Bin ``b``'s weighted overload once ``add`` joins it and ``sub`` leaves it."""
    total = 0.0
    for j in range(room.shape[0]):
        o = load[b, j] + add[j] - sub[j] - room[j]
        if o > 0:
            total += w[j] * o / room[j]
    return total


def steps(
    vecs: Any,
    room: Any,
    w: Any,
    bump: float,
    bin_of: Any,
    load: Any,
    tabu: Any,
    stats: Any,
    count: int,
    seed: int,
) -> int:
    """Up to ``count`` steps from the state given (changed in place); ``stats[0]`` is the step
    counter (tabu tenures count in it). The number of bins over their room after the last step
    (0: ``bin_of`` is a packing)."""
    n, d = vecs.shape
    bins = load.shape[0]
    np.random.seed(seed)
    zero = np.zeros(d, dtype=np.int64)
    over = np.zeros(bins)
    for b in range(bins):
        over[b] = _over(load, room, w, b, zero, zero)
    bad = np.empty(bins, dtype=np.int64)
    mine = np.empty(n, dtype=np.int64)
    step = stats[0]
    left = 0
    for _ in range(count):
        left = 0
        for b in range(bins):
            if over[b] > 0:
                bad[left] = b
                left += 1
        if left == 0:
            break
        step += 1
        b = bad[np.random.randint(left)]
        m = 0
        for i in range(n):
            if bin_of[i] == b:
                mine[m] = i
                m += 1
        best = np.inf
        bx = -1
        by = -1
        bc = -1
        ties = 0
        for k in range(m):
            x = mine[k]
            out = _over(load, room, w, b, zero, vecs[x]) - over[b]
            for c in range(bins):  # x moves to c
                if c == b or tabu[x, c] >= step:
                    continue
                delta = out + _over(load, room, w, c, vecs[x], zero) - over[c]
                if delta < best - _TIE:
                    best, bx, by, bc, ties = delta, x, -1, c, 1
                elif delta < best + _TIE:
                    ties += 1
                    if np.random.randint(ties) == 0:
                        bx, by, bc = x, -1, c
            for y in range(n):  # x and y (on c) change places
                c = bin_of[y]
                if c == b or tabu[x, c] >= step or tabu[y, b] >= step:
                    continue
                delta = (
                    _over(load, room, w, b, vecs[y], vecs[x])
                    - over[b]
                    + _over(load, room, w, c, vecs[x], vecs[y])
                    - over[c]
                )
                if delta < best - _TIE:
                    best, bx, by, bc, ties = delta, x, y, c, 1
                elif delta < best + _TIE:
                    ties += 1
                    if np.random.randint(ties) == 0:
                        bx, by, bc = x, y, c
        if bx < 0:  # every move of this bin's pods is tabu
            continue
        if best >= -_TIE:  # a local minimum: the resources still over weigh more from now on
            for q in range(left):
                for j in range(d):
                    if load[bad[q], j] > room[j]:
                        w[j] += bump
            for c in range(bins):
                over[c] = _over(load, room, w, c, zero, zero)
        for j in range(d):
            load[b, j] -= vecs[bx, j]
            load[bc, j] += vecs[bx, j]
        bin_of[bx] = bc
        tabu[bx, b] = step + TENURE + np.random.randint(SPREAD)
        if by >= 0:
            for j in range(d):
                load[bc, j] -= vecs[by, j]
                load[b, j] += vecs[by, j]
            bin_of[by] = b
            tabu[by, bc] = step + TENURE + np.random.randint(SPREAD)
        over[b] = _over(load, room, w, b, zero, zero)
        over[bc] = _over(load, room, w, bc, zero, zero)
    left = 0
    for b in range(bins):
        if over[b] > 0:
            left += 1
    stats[0] = step
    return left
