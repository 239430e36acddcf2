"""The compiled listing of a node's possible contents for the LP dive (``dive``); numba compiles
it in ``kernel``.

A content is a set of pods that fits one node (every resource within the room) and is *maximal*:
no other pod fits beside it. Any packing of every pod can be read as a cover of the pods by at most
as many maximal contents as nodes (each node's pods lie in a maximal content, and a pod covered
twice stays on one of its nodes), so the dive's cover needs no other sets. On nodes that hold two
or three pods each, the maximal contents number thousands to a few hundred thousand; the listing
stops at a given count, when there are too many for the LP.

The listing goes depth first through every set of pods that fits (each once, its pods in
increasing order) and runs in slices: a call goes through at most a given number of sets and
returns, its state kept in the arrays it was given, so that the caller can look at the clock
between two calls (it looks at none itself).
"""

from __future__ import annotations

from typing import Any

__all__ = ["MORE", "TOO_MANY", "begin", "maximal"]

TOO_MANY = -1  # more contents than asked for, or more than ``flat`` holds
MORE = -2  # the slice ended: call again with the same arrays to go on


def begin(path: Any, state: Any) -> None:
    """Set the arrays of a listing to its start (``maximal``'s ``path`` and ``state``)."""
    path[:] = -1
    state[:] = 0


def maximal(
    vecs: Any, room: Any, most: int, visits: int, flat: Any, starts: Any, path: Any, load: Any, state: Any
) -> int:
    """Every maximal content of pods ``vecs`` on a node of ``room``, in the order of the listing:
    content ``c`` is ``flat[starts[c]:starts[c + 1]]`` (its pods ascending). Goes through at most
    ``visits`` more sets that fit, from the state in ``path`` (the pods of the current set, -1
    past them), ``load`` (its load) and ``state`` (depth, contents found, entries of ``flat``
    used), which ``begin`` sets to the start. The number of contents once the listing is over,
    ``TOO_MANY`` once more than ``most`` are found or ``flat`` is full (``starts`` has ``most + 1``
    rows), ``MORE`` when the slice ended first."""
    n, d = vecs.shape
    depth, found, used = state[0], state[1], state[2]
    starts[0] = 0
    while depth >= 0:
        last = path[depth]
        if last >= 0:
            for j in range(d):
                load[j] -= vecs[last, j]
        first = last + 1 if last >= 0 else (path[depth - 1] + 1 if depth > 0 else 0)
        nxt = -1
        for k in range(first, n):
            if _fits(vecs, room, load, k):
                nxt = k
                break
        if nxt >= 0:
            if visits == 0:  # pause where this pass began: the next call repeats it
                if last >= 0:
                    for j in range(d):
                        load[j] += vecs[last, j]
                state[0], state[1], state[2] = depth, found, used
                return MORE
            visits -= 1
            path[depth] = nxt
            for j in range(d):
                load[j] += vecs[nxt, j]
            depth += 1
            path[depth] = -1
            continue
        if last < 0 and depth > 0 and _closed(vecs, room, load, path, depth):
            if found == most or used + depth > flat.shape[0]:
                return TOO_MANY
            for q in range(depth):
                flat[used] = path[q]
                used += 1
            found += 1
            starts[found] = used
        path[depth] = -1
        depth -= 1
    state[0], state[1], state[2] = depth, found, used
    return int(found)


def _closed(vecs: Any, room: Any, load: Any, path: Any, depth: int) -> bool:
    """No pod outside ``path[:depth]`` fits beside it (``load`` is its load)."""
    n = vecs.shape[0]
    q = 0
    for k in range(n):
        if q < depth and path[q] == k:  # the path ascends: its pods are skipped in one pass
            q += 1
            continue
        if _fits(vecs, room, load, k):
            return False
    return True


def _fits(vecs: Any, room: Any, load: Any, k: int) -> bool:
    """Pod ``k`` fits beside ``load``."""
    for j in range(room.shape[0]):  # noqa: SIM110 - a plain loop is what numba compiles best
        if load[j] + vecs[k, j] > room[j]:
            return False
    return True
