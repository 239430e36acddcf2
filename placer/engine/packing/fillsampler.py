"""Random exact fills from reachability tables: perfect packings where exact fills abound.

When few resources must be filled exactly (one or two without slack) and a node holds many pods,
the exact fills of a node number in the millions: too many to list (``placer.engine.exactcover``,
``placer.engine.largefills``) and too many for a node-by-node enumeration to step over. Any one of
them is easy to draw, though. For the pods left after a position of a fixed order, a table says
which amounts they can make exactly: one bit per amount, as a big integer shifted by each pod's
request (subset-sum reachability; two exact resources share one table over the pairs of amounts,
the others have one each). Walking the order, a pod joins the node only where the rest can still
make up what is missing, so a draw ends in an exact fill unless the per-resource tables disagree.
Pods are walked large first with noise (small pods stay for later nodes, where they are needed to
close the gaps, as in bin completion) and join with a low probability, so fills differ from draw
to draw.

``fill_nodes`` fills nodes one after the other (the largest pod left opens each), tries a few fills
per node depth first within a budget of nodes, and hands the last few dozen pods to an exact
cover (the caller's), where the search must be complete. Pure; deterministic for a given seed.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from placer.engine.packing import clock, tuning
from placer.engine.scoring import IntArray

__all__ = ["Tail", "applies", "fill_nodes"]


# The exact cover of the last pods: (their rows of vecs, the nodes left) -> the pods per node
# (rows of vecs) or None.
Tail = Callable[[npt.NDArray[np.intp], int], list[list[int]] | None]


class _OutOfTimeError(Exception):
    pass


def _unit(vecs: IntArray, room: IntArray) -> IntArray:
    """Per resource, the greatest common divisor of every request and the room: the tables track
    amounts in these units (1000Mi of memory is 1,000 of them, not 10^9 bytes)."""
    g = np.gcd.reduce(np.concatenate([vecs, room.reshape(1, -1)]), axis=0)
    return np.asarray(np.where(g > 0, g, 1), dtype=np.int64)


def applies(vecs: IntArray, room: IntArray, exact: npt.NDArray[np.bool_]) -> bool:
    """Whether one table tracks every exact resource (one, or a pair that fits ``tuning.DRAW_GRID_BITS``).
    With more, each table only says what the pods can make in its own resources, and a draw ends
    exact in all of them only by chance (three exact resources: 1 draw in 400 on the benchmark's
    small-pod instances), so the draws would only spend the budget."""
    amounts = [int(x) for x in (room // _unit(vecs, room))[exact]]
    return len(amounts) in (1, 2) and _fits(*amounts)


def _fits(*most: int) -> bool:
    """Whether one table of the amounts 0..most of one resource, or of a pair (rows twice as wide
    as the second's range, ``_Reach._table``), stays within ``tuning.DRAW_GRID_BITS``."""
    bits = most[0] + 1
    if len(most) == 2:
        bits *= 2 * (most[1] + 1)
    return bits <= tuning.DRAW_GRID_BITS


class _Reach:
    """Per position of ``sizes`` (rows: pods in walking order), the amounts of the exact resources
    that the pods from there on can make exactly (at most ``target``): the first pair of exact
    resources that fits ``tuning.DRAW_GRID_BITS`` shares one table, the others have one each. Kept as bytes
    per position, so that a lookup reads one byte (shifting a big integer copies it)."""

    def __init__(self, sizes: IntArray, target: IntArray, exact: list[int]) -> None:
        fits = [r for r in exact if _fits(int(target[r]))]
        pairs = [(a, b) for i, a in enumerate(fits) for b in fits[i + 1 :] if _fits(int(target[a]), int(target[b]))][:1]
        paired = {r for pair in pairs for r in pair}
        # (resource a, resource b or -1, row width, per position the table as bytes)
        self.tables = [self._table(sizes, target, a, b) for a, b in pairs]
        self.tables += [self._table(sizes, target, r, -1) for r in fits if r not in paired]
        self.bits = sum(8 * len(rows[0]) for _, _, _, rows in self.tables)  # of one position's tables

    @staticmethod
    def _table(sizes: IntArray, target: IntArray, a: int, b: int) -> tuple[int, int, int, list[bytes]]:
        if b < 0:
            width, full = 1, (1 << (int(target[a]) + 1)) - 1
            shifts = sizes[:, a].tolist()
        else:
            # Amounts (x, y) at bit x * width + y; a row twice as wide as y's range, so that a
            # shift never carries into the next row before the mask clears what went past.
            width = 2 * (int(target[b]) + 1)
            row = (1 << (int(target[b]) + 1)) - 1
            full = sum(row << (x * width) for x in range(int(target[a]) + 1))
            shifts = (sizes[:, a] * width + sizes[:, b]).tolist()
        size = (full.bit_length() + 7) // 8
        bits = 1
        rows = [bits.to_bytes(size, "little")]
        for shift in reversed(shifts):
            bits |= (bits << int(shift)) & full
            rows.append(bits.to_bytes(size, "little"))
        rows.reverse()  # rows[j]: the pods from position j on
        return a, b, width, rows

    def can(self, j: int, missing: list[int]) -> bool:
        """Whether the pods from position ``j`` on can make ``missing`` exactly."""
        for a, b, width, rows in self.tables:
            at = missing[a] * width + (missing[b] if b >= 0 else 0)
            if not (rows[j][at >> 3] >> (at & 7)) & 1:
                return False
        return True


class _Packer:
    """One depth-first attempt: nodes filled one after the other, ``tuning.DRAW_BRANCH`` drawn fills each,
    at most ``tuning.DRAW_NODES_PER_ATTEMPT`` nodes opened; the steps it used."""

    def __init__(
        self,
        vecs: IntArray,
        room: IntArray,
        slack: IntArray,
        exact: list[int],
        deadline: float,
        steps: int,
        seed: int,
    ) -> None:
        self.vecs, self.room, self.exact = vecs, room, exact
        self.slack = slack.copy()
        self.deadline = deadline
        self.steps = steps
        self.used = 0
        self.rng = np.random.default_rng(seed)
        self.opened = 0

    def _charge(self, steps: int) -> None:
        self.used += max(1, steps)
        if self.used > self.steps or clock.now() > self.deadline:
            raise _OutOfTimeError

    def fill(self, first: int, left: npt.NDArray[np.intp]) -> list[list[int]]:
        """Up to ``tuning.DRAW_BRANCH`` distinct exact fills of a node holding ``first`` (from ``left``)."""
        target = self.room - self.vecs[first]
        rest = left[(left != first) & np.all(self.vecs[left] <= target, axis=1)]
        scale = np.where(self.room > 0, 1.0 / np.maximum(self.room, 1), 0.0)
        noisy = (self.vecs[rest] * scale).sum(axis=1) * self.rng.uniform(0.7, 1.3, len(rest))
        rest = rest[np.argsort(-noisy, kind="stable")]
        sizes = self.vecs[rest]
        reach = _Reach(sizes, target, self.exact)
        self._charge(len(rest) * reach.bits // tuning.DRAW_BITS_PER_STEP)
        rows = sizes.tolist()
        out: list[list[int]] = []
        for _ in range(tuning.DRAW_DRAWS):
            missing = target.tolist()
            chosen = [first]
            for j, size in enumerate(rows):
                if all(missing[r] == 0 for r in self.exact):
                    break
                fits = all(s <= m for s, m in zip(size, missing, strict=True))
                joined = [m - s for s, m in zip(size, missing, strict=True)] if fits else missing
                join = fits and reach.can(j + 1, joined)
                skip = reach.can(j + 1, missing)
                if join and (not skip or self.rng.random() < tuning.DRAW_JOIN):
                    missing = joined
                    chosen.append(int(rest[j]))
                elif not skip:
                    break
            self._charge(len(rows) // tuning.DRAW_ITEMS_PER_STEP)
            kept = np.array(missing, dtype=np.int64)
            if all(missing[r] == 0 for r in self.exact) and np.all(kept <= self.slack):
                if sorted(chosen) not in out:
                    out.append(sorted(chosen))
                if len(out) == tuning.DRAW_BRANCH:
                    break
        return out

    def search(self, left: npt.NDArray[np.intp], nodes: int, tail: Tail) -> list[list[int]] | None:
        if len(left) == 0:
            return []
        if nodes == 0 or self.opened >= tuning.DRAW_NODES_PER_ATTEMPT:
            return None
        self.opened += 1
        if len(left) <= tuning.DRAW_TAIL:
            self._charge(math.comb(len(left), 5) // tuning.DRAW_ROWS_PER_STEP)
            return tail(left, nodes)
        first = int(left[0])  # the largest pod left (rows come largest first)
        for pods in self.fill(first, left):
            kept = self.room - self.vecs[pods].sum(axis=0)
            self.slack -= kept
            found = self.search(left[~np.isin(left, pods)], nodes - 1, tail)
            self.slack += kept
            if found is not None:
                return [pods, *found]
        return None


def fill_nodes(
    vecs: IntArray,
    room: IntArray,
    slack: IntArray,
    nodes: int,
    tail: Tail,
    *,
    deadline: float,
    steps: int,
) -> tuple[list[list[int]] | None, int]:
    """Pods per node (rows of ``vecs``, largest first) filling ``nodes`` nodes of ``room``, each
    keeping at most the ``slack`` left in total, exactly in the resources without slack; or None
    when the ``deadline`` or ``steps`` run out first; with the steps taken. Depth-first attempts
    of ``tuning.DRAW_NODES_PER_ATTEMPT`` nodes each, restarted with other draws."""
    unit = _unit(vecs, room)
    vecs, room, slack = vecs // unit, room // unit, slack // unit
    exact = [int(r) for r in np.flatnonzero((slack == 0) & (room > 0))]
    used, attempt = 0, 0
    while used < steps:
        packer = _Packer(vecs, room, slack, exact, deadline, steps - used, seed=attempt)
        try:
            found = packer.search(np.arange(len(vecs), dtype=np.intp), nodes, tail)
        except _OutOfTimeError:
            return None, used + packer.used
        used += packer.used
        attempt += 1
        if found is not None:
            return found, used
    return None, used
