"""Perfect packings as exact covers.

When the pods of a tight batch on identical nodes fill those nodes exactly (no slack in any
resource), every node of a packing holds a set of pods whose requests add up to its room in every
resource. With few pods per node those *exact sets* can all be listed (meet in the middle over
hashed amounts), and a packing is a choice of disjoint exact sets covering every pod: an exact
cover, which settles far faster than a node-by-node search, because a pod that only one exact set
can hold is decided at once instead of at the depth where the search meets it. The cover is asked
of CP-SAT first (one worker, a Boolean per set, exactly one set per pod: its presolve and clause
learning settle a cover of hundreds of sets in a fraction of a second where a plain search can
take minutes, e.g. the 249-pod triplets with their spurious exact triples), then of Knuth's
Algorithm X with the fewest-choices-first rule on what is left. Pure; used by
``placer.engine.completion``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import numpy.typing as npt
from ortools.sat.python import cp_model

from placer.engine.packing import clock, tuning
from placer.engine.scoring import IntArray

__all__ = ["checked", "cover", "exact_sets", "extended", "hashed", "spans", "table"]


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
    are more than ``tuning.COVER_ROWS``."""
    m = len(keys)
    if size > m or math.comb(m, size) > tuning.COVER_ROWS:
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
    vecs: IntArray,
    room: IntArray,
    exact: npt.NDArray[np.bool_],
    deadline: float,
    most: int = tuning.COVER_MOST_PER_NODE,
) -> list[tuple[int, ...]] | None:
    """Every set of at most ``most`` pods (rows of ``vecs``) whose requests add up to ``room``
    exactly in the ``exact`` resources and fit it in the others, members increasing; None when the
    tables or the sets outgrow their caps or the deadline passes (the caller then searches
    otherwise). ``tuning.COVER_MOST_PER_NODE`` is what 200 pods allow; fewer pods allow more."""
    keys, target = hashed(vecs, room, exact, np.random.default_rng(7))
    half = (most + 1) // 2
    if most >= 5 and math.comb(len(keys), half) * tuning.COVER_SECONDS_PER_ROW * (most - 4) > deadline - clock.now():
        return None
    tables = {1: (keys.copy(), np.arange(len(keys), dtype=np.int16).reshape(-1, 1))}
    for size in range(2, half + 1):
        tables[size] = table(keys, size)
        if len(tables[size][0]) == 0 and len(keys) >= size:
            return None
        if clock.now() > deadline:
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
        if int(counts.sum()) > tuning.COVER_ROWS:
            return None
        rows, at = spans(lo, counts)  # every (first half, second half) match
        tails = second[order[at]]
        keep = tails[:, 0] > first[rows, -1]  # the second half after the first: each set once
        for row in np.concatenate([first[rows[keep]], tails[keep]], axis=1).tolist():
            found.add(tuple(row))
        if len(found) > tuning.COVER_SETS or clock.now() > deadline:
            return None
    return checked(vecs, room, exact, found)


def cover(
    items: int, sets: list[tuple[int, ...]], count: int, deadline: float, steps: int
) -> tuple[list[int] | None, int]:
    """Indices into ``sets`` of exactly ``count`` disjoint sets covering items 0..items-1, or None
    when there is none or the ``deadline`` (wall) or ``steps`` run out; with the steps taken.
    CP-SAT first, on up to ``tuning.COVER_SOLVER_SHARE`` of the time and steps; Algorithm X on the
    rest unless CP-SAT settled it."""
    now = clock.now()
    share = tuning.COVER_SOLVER_SHARE
    until = now + (deadline - now) * share if math.isfinite(deadline) else deadline
    chosen, taken, settled = _solved(items, sets, count, until, int(steps * share))
    if chosen is not None or settled:
        return chosen, taken
    search = _Cover(items, sets, count, deadline, steps - taken)
    try:
        return search.run(), taken + search.taken
    except _StopError:
        return None, taken + search.taken


def _solved(
    items: int, sets: list[tuple[int, ...]], count: int, deadline: float, steps: int
) -> tuple[list[int] | None, int, bool]:
    """The cover as a CP-SAT model: (indices or None, steps taken, whether the answer is settled:
    a cover found or none exists). One worker and a deterministic-time limit of ``steps``
    (``tuning.STEPS_PER_SECOND`` a second), so the same input gives the same answer; the wall
    ``deadline`` and a stopped race (``clock``) end it early."""
    left = deadline - clock.now()
    if left <= 0 or steps <= 0:
        return None, 0, False
    model = cp_model.CpModel()
    chosen = [model.new_bool_var(f"s{k}") for k in range(len(sets))]
    holders: list[list[cp_model.IntVar]] = [[] for _ in range(items)]
    for var, members in zip(chosen, sets, strict=True):
        for item in members:
            holders[item].append(var)
    if any(not held for held in holders):
        return None, 0, True  # an item no set holds: no cover
    for held in holders:
        model.add_exactly_one(held)
    model.add(sum(chosen) == count)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = 0
    solver.parameters.max_deterministic_time = steps / tuning.STEPS_PER_SECOND
    if math.isfinite(left):
        solver.parameters.max_time_in_seconds = left
    with clock.watched(solver):  # a race stopped from another thread stops the solve too
        status = solver.solve(model)
    taken = min(steps, math.ceil(solver.deterministic_time * tuning.STEPS_PER_SECOND))
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return [k for k, var in enumerate(chosen) if solver.boolean_value(var)], taken, True
    return None, taken, status == cp_model.INFEASIBLE


class _Cover:
    """Algorithm X (the item with the fewest sets left first) that knows how many sets it must
    choose. ``count`` sets covering every item fix how many sets of each size a cover takes once
    only two sizes are left (``n_p + n_q = sets left``, ``p n_p + q n_q = items left``): sets of
    a size the cover has no more room for are no choice, and an item that no set of one size can
    hold must go into the others, which bounds how many such items there may be.

    In a perfect packing the sizes are lopsided: fills of few pods are rare, fills of many are
    not, and a packing needs a share of the rare ones that the item-by-item rule never sees (an
    item is in a handful of small sets and hundreds of large ones). So the sets of the sizes
    other than the two commonest (when they are few: ``tuning.COVER_RARE_MOST``) are decided first, each taken
    or left out, taking as many as possible first: limited discrepancy search, one more set left
    out per round. Once they are decided, two sizes remain and the counts are fixed."""

    def __init__(self, items: int, sets: list[tuple[int, ...]], count: int, deadline: float, steps: int) -> None:
        self.sets, self.count, self.deadline, self.steps = sets, count, deadline, steps
        self.taken = 0
        self.chosen: list[int] = []
        # Per item not yet covered, per set size: the sets that may still cover it.
        self.left: dict[int, dict[int, set[int]]] = {item: {} for item in range(items)}
        sizes: dict[int, int] = {}
        for si, members in enumerate(sets):
            sizes[len(members)] = sizes.get(len(members), 0) + 1
            for item in members:
                self.left[item].setdefault(len(members), set()).add(si)
        common = sorted(sizes, key=lambda size: (sizes[size], size))[-2:]
        rare = sorted(
            (si for si, members in enumerate(sets) if len(members) not in common), key=lambda si: (len(sets[si]), si)
        )
        self.rare = rare if len(rare) <= tuning.COVER_RARE_MOST else []

    def run(self) -> list[int] | None:
        if not self._covered(self.left):
            return None
        for budget in range(len(self.rare) + 1):
            if self._decide(0, budget):
                return list(self.chosen)
        return None

    def _tick(self) -> None:
        self.taken += 1
        if self.taken > self.steps or (self.taken % 64 == 0 and clock.now() > self.deadline):
            raise _StopError

    def _open(self, si: int) -> bool:
        """Whether set ``si`` may still be chosen (none of its items covered, not left out)."""
        first = self.sets[si][0]
        return first in self.left and si in self.left[first].get(len(self.sets[si]), ())

    def _covered(self, items: Iterable[int]) -> bool:
        """Whether every one of ``items`` still uncovered has a set left."""
        return all(any(self.left[item].values()) for item in items if item in self.left)

    def _decide(self, at: int, budget: int) -> bool:
        """The rare sets from position ``at`` on, each taken if it can be, or left out while
        ``budget`` allows; then the rest, once exactly ``budget`` of them were left out."""
        self._tick()
        while at < len(self.rare) and not self._open(self.rare[at]):
            at += 1
        if at == len(self.rare):
            return budget == 0 and self._search()
        si = self.rare[at]
        removed = self._take(si)
        if self._covered(self.left) and self._decide(at + 1, budget):
            return True
        self._untake(removed)
        if budget == 0:
            return False
        size = len(self.sets[si])
        for item in self.sets[si]:
            self.left[item][size].discard(si)
        if self._covered(self.sets[si]) and self._decide(at + 1, budget - 1):
            return True
        for item in self.sets[si]:
            self.left[item][size].add(si)
        return False

    def _need(self) -> dict[int, int] | None:
        """Per size still held by some set, how many sets of it a cover takes from here (fixed
        when at most two sizes are left; None otherwise), or None when no mix of the sizes left
        makes up the items left with the sets left."""
        sets_left, items_left = self.count - len(self.chosen), len(self.left)
        sizes = sorted({size for held in self.left.values() for size, ids in held.items() if ids})
        if not sizes or sets_left <= 0 or not sizes[0] * sets_left <= items_left <= sizes[-1] * sets_left:
            return None
        if len(sizes) == 1:
            return {sizes[0]: sets_left}
        if len(sizes) > 2:
            return {size: sets_left for size in sizes}  # no size bounded but by the sets left
        p, q = sizes
        large, rest = divmod(items_left - p * sets_left, q - p)
        return None if rest else {p: sets_left - large, q: large}

    def _search(self) -> bool:
        self._tick()
        if not self.left:
            return len(self.chosen) == self.count
        need = self._need()
        if need is None:
            return False
        best, options = -1, -1
        without = dict.fromkeys(need, 0)  # items no set of the size can hold
        for item, held in self.left.items():
            n = 0
            for size, wanted in need.items():
                k = len(held.get(size, ()))
                n += k if wanted else 0
                without[size] += k == 0
            if n == 0:
                return False
            if options < 0 or n < options:
                best, options = item, n
        if len(need) == 2:
            (p, n_p), (q, n_q) = sorted(need.items())
            if without[p] > q * n_q or without[q] > p * n_p:
                return False
        for si in sorted(si for size, wanted in need.items() if wanted for si in self.left[best].get(size, ())):
            removed = self._take(si)
            if self._search():
                return True
            self._untake(removed)
        return False

    def _take(self, si: int) -> list[tuple[int, dict[int, set[int]]]]:
        """Choose set ``si``: its items are covered, every set meeting them goes."""
        removed = []
        for item in self.sets[si]:
            for size, ids in self.left[item].items():
                for other in ids:
                    for member in self.sets[other]:
                        if member != item:
                            self.left[member][size].discard(other)
            removed.append((item, self.left.pop(item)))
        self.chosen.append(si)
        return removed

    def _untake(self, removed: list[tuple[int, dict[int, set[int]]]]) -> None:
        self.chosen.pop()
        for item, held in reversed(removed):
            self.left[item] = held
            for size, ids in held.items():
                for other in ids:
                    for member in self.sets[other]:
                        if member != item:
                            self.left[member][size].add(other)
