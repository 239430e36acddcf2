"""Perfect packings as exact covers.

When the pods of a tight batch on identical nodes fill those nodes exactly (no slack in any
resource), every node of a packing holds a set of pods whose requests add up to its room in every
resource. With few pods per node those *exact sets* can all be listed (meet in the middle over
hashed amounts), and a packing is a choice of disjoint exact sets covering every pod: an exact
cover, which Knuth's Algorithm X with the fewest-choices-first rule settles far faster than a
node-by-node search, because a pod that only one exact set can hold is decided at once instead of
at the depth where the search meets it. Pure; used by ``placer.engine.completion``.
"""

from __future__ import annotations

import math
import time

import numpy as np
import numpy.typing as npt

from placer.engine.scoring import IntArray

__all__ = ["MOST_PER_NODE", "checked", "cover", "exact_sets", "extended", "hashed", "spans", "table"]

MOST_PER_NODE = 6  # largest exact set listed (two halves of at most three pods)
_ROWS = 2_000_000  # most subsets of one size kept in a table
_SETS = 200_000  # most exact sets listed
# Listing fills of 5 and 6 pods costs about this much per row of the 3-pod table (1.3 M rows at
# 200 pods: 0.9 s for 5, 2.1 s for 6, on the 2-core benchmark machine); a listing that cannot
# finish before the deadline is not started, since building a table cannot be interrupted.
_SECONDS_PER_ROW = 1e-6


class _StopError(Exception):
    pass


def spans(starts: IntArray, counts: IntArray) -> tuple[npt.NDArray[np.intp], IntArray]:
    """The ranges starts[i] .. starts[i] + counts[i] - 1, one after another: for each element,
    the range it belongs to and its value."""
    rows = np.repeat(np.arange(len(counts)), counts)
    offset = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    return rows, np.repeat(starts, counts) + offset


def extended(members: npt.NDArray[np.int16], m: int) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.int16]]:
    """The subsets of positions 0..m-1 one pod larger than ``members`` (rows, members increasing):
    each extended by every position after its last; with each new row's parent row."""
    last = members[:, -1].astype(np.int64)
    rows, added = spans(last + 1, m - 1 - last)
    grown = np.empty((len(rows), members.shape[1] + 1), dtype=np.int16)
    grown[:, :-1] = members[rows]
    grown[:, -1] = added
    return rows, grown


def table(keys: IntArray, size: int) -> tuple[IntArray, npt.NDArray[np.int16]]:
    """Every subset of ``size`` positions (members increasing) and its hash; empty when there
    are more than ``_ROWS``."""
    m = len(keys)
    if size > m or math.comb(m, size) > _ROWS:
        return np.zeros(0, dtype=np.int64), np.zeros((0, size), dtype=np.int16)
    members = np.arange(m, dtype=np.int16).reshape(m, 1)
    for _ in range(size - 1):
        members = extended(members, m)[1]
    with np.errstate(over="ignore"):
        sums = keys[members.astype(np.int64)].sum(axis=1)
    return np.asarray(sums, dtype=np.int64), members


def hashed(
    vecs: IntArray, room: IntArray, exact: npt.NDArray[np.bool_], rng: np.random.Generator
) -> tuple[IntArray, int]:
    """A random linear hash of the exact resources' amounts (the others read as 0): per pod (row
    of ``vecs``) and of ``room``. A set's hash is the sum of its pods', so an exact fill's equals
    the room's (another set's may too: ``checked``)."""
    drawn = rng.integers(1, 2**62, vecs.shape[1], dtype=np.int64) | 1
    mix = np.where(exact, drawn, 0).astype(np.int64)
    with np.errstate(over="ignore"):
        return np.asarray(vecs @ mix, dtype=np.int64), int(np.int64(room @ mix))


def checked(
    vecs: IntArray, room: IntArray, exact: npt.NDArray[np.bool_], found: set[tuple[int, ...]]
) -> list[tuple[int, ...]]:
    """The sets of ``found`` (whose hash matched) that really fill ``room`` exactly in the
    ``exact`` resources and fit it in the others, in order."""
    out: list[tuple[int, ...]] = []
    for subset in sorted(found):
        total = vecs[list(subset)].sum(axis=0)
        if np.array_equal(total[exact], room[exact]) and np.all(total <= room):
            out.append(subset)
    return out


def exact_sets(
    vecs: IntArray, room: IntArray, exact: npt.NDArray[np.bool_], deadline: float, most: int = MOST_PER_NODE
) -> list[tuple[int, ...]] | None:
    """Every set of at most ``most`` pods (rows of ``vecs``) whose requests add up to ``room``
    exactly in the ``exact`` resources and fit it in the others, members increasing; None when the
    tables or the sets outgrow their caps or the deadline passes (the caller then searches
    otherwise). ``MOST_PER_NODE`` is what 200 pods allow; fewer pods allow more."""
    keys, target = hashed(vecs, room, exact, np.random.default_rng(7))
    half = (most + 1) // 2
    if most >= 5 and math.comb(len(keys), half) * _SECONDS_PER_ROW * (most - 4) > deadline - time.monotonic():
        return None
    tables = {1: (keys.copy(), np.arange(len(keys), dtype=np.int16).reshape(-1, 1))}
    for size in range(2, half + 1):
        tables[size] = table(keys, size)
        if len(tables[size][0]) == 0 and len(keys) >= size:
            return None
        if time.monotonic() > deadline:
            return None
    found: set[tuple[int, ...]] = set()
    for size in (1, 2):  # one table: the hash of the whole set
        if size > most or size not in tables:
            continue
        sums, members = tables[size]
        for row in members[sums == target].tolist():
            found.add(tuple(row))
    # Two halves: a subset of ``a`` pods, then one of ``b`` pods all after its last member.
    for a, b in ((k // 2, k - k // 2) for k in range(3, most + 1)):
        if b > len(keys):
            break
        first_sums, first = tables[a]
        second_sums, second = tables[b]
        order = np.argsort(second_sums, kind="stable")
        ordered = second_sums[order]
        with np.errstate(over="ignore"):
            wanted = target - first_sums
        lo = np.searchsorted(ordered, wanted, "left")
        counts = np.searchsorted(ordered, wanted, "right") - lo
        if int(counts.sum()) > _ROWS:
            return None
        rows, at = spans(lo, counts)  # every (first half, second half) match
        tails = second[order[at]]
        keep = tails[:, 0] > first[rows, -1]  # the second half after the first: each set once
        for row in np.concatenate([first[rows[keep]], tails[keep]], axis=1).tolist():
            found.add(tuple(row))
        if len(found) > _SETS or time.monotonic() > deadline:
            return None
    return checked(vecs, room, exact, found)


def cover(items: int, sets: list[tuple[int, ...]], deadline: float, steps: int) -> tuple[list[int] | None, int]:
    """Indices into ``sets`` of disjoint sets covering items 0..items-1 (Algorithm X, the item
    with the fewest sets left first), or None when there is none or the ``deadline`` (wall) or
    ``steps`` run out; with the steps taken."""
    holding: list[set[int]] = [set() for _ in range(items)]
    for si, members in enumerate(sets):
        for item in members:
            holding[item].add(si)
    if any(not h for h in holding):
        return None, 0
    left = {item: holding[item] for item in range(items)}
    chosen: list[int] = []
    taken = [0]

    def drop(si: int) -> list[tuple[int, set[int]]]:
        """Take set ``si``: its items are covered, every set meeting them goes."""
        removed = []
        for item in sets[si]:
            for other in left[item]:
                for member in sets[other]:
                    if member != item:
                        left[member].discard(other)
            removed.append((item, left.pop(item)))
        return removed

    def undo(si: int, removed: list[tuple[int, set[int]]]) -> None:
        for item, held in reversed(removed):
            left[item] = held
            for other in held:
                for member in sets[other]:
                    if member != item:
                        left[member].add(other)

    def search() -> bool:
        if not left:
            return True
        taken[0] += 1
        if taken[0] > steps or (taken[0] % 64 == 0 and time.monotonic() > deadline):
            raise _StopError
        item = min(left, key=lambda k: len(left[k]))
        for si in sorted(left[item]):
            removed = drop(si)
            chosen.append(si)
            if search():
                return True
            chosen.pop()
            undo(si, removed)
        return False

    try:
        return (list(chosen) if search() else None), taken[0]
    except _StopError:
        return None, taken[0]
