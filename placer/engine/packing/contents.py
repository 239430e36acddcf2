"""The compiled listing of a node's possible contents for the LP dive (``dive``); numba compiles
it in ``kernel``.

A content is a set of pods that fits one node (every resource within the room) and is *maximal*:
no other pod fits beside it. Any packing of every pod can be read as a cover of the pods by at most
as many maximal contents as nodes (each node's pods lie in a maximal content, and a pod covered
twice stays on one of its nodes), so the dive's cover needs no other sets. On nodes that hold two
or three pods each, the maximal contents number thousands to a few hundred thousand; the listing
stops at a given count, when there are too many for the LP.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["maximal"]


def maximal(vecs: Any, room: Any, most: int, flat: Any, starts: Any) -> int:
    """Every maximal content of pods ``vecs`` on a node of ``room``, in increasing pod order
    (depth-first, each content's pods ascending): content ``c`` is ``flat[starts[c]:starts[c + 1]]``.
    The number of contents, or -1 once more than ``most`` are found or ``flat`` is full
    (``starts`` has at least ``most + 1`` rows)."""
    n, d = vecs.shape
    load = np.zeros(d, dtype=np.int64)
    path = np.full(n + 1, -1, dtype=np.int64)  # path[k]: the pod at depth k, or -1 before the first is tried
    depth = 0
    found = 0
    used = 0
    starts[0] = 0
    while depth >= 0:
        last = path[depth]
        if last >= 0:
            for j in range(d):
                load[j] -= vecs[last, j]
        first = last + 1 if last >= 0 else (path[depth - 1] + 1 if depth > 0 else 0)
        nxt = -1
        for k in range(first, n):
            fits = True
            for j in range(d):
                if load[j] + vecs[k, j] > room[j]:
                    fits = False
                    break
            if fits:
                nxt = k
                break
        if nxt >= 0:
            path[depth] = nxt
            for j in range(d):
                load[j] += vecs[nxt, j]
            depth += 1
            path[depth] = -1
            continue
        if last < 0 and depth > 0 and _closed(vecs, room, load, path, depth):
            if found == most or used + depth > flat.shape[0]:
                return -1
            for q in range(depth):
                flat[used] = path[q]
                used += 1
            found += 1
            starts[found] = used
        path[depth] = -1
        depth -= 1
    return found


def _closed(vecs: Any, room: Any, load: Any, path: Any, depth: int) -> bool:
    """No pod outside ``path[:depth]`` fits beside it (``load`` is its load)."""
    n, d = vecs.shape
    q = 0
    for k in range(n):
        if q < depth and path[q] == k:  # the path ascends: its pods are skipped in one pass
            q += 1
            continue
        fits = True
        for j in range(d):
            if load[j] + vecs[k, j] > room[j]:
                fits = False
                break
        if fits:
            return False
    return True
