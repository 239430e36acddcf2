"""Bin completion: an exact search for "every pod placed" on identical nodes.

A tight batch of bare pods on interchangeable empty-or-equal nodes is a vector-packing problem,
and bin completion (Korf 2002, Schreiber & Korf 2013 for the vector case) solves the perfect and
near-perfect instances fast: nodes are filled one after the other; the largest pod left opens the
current node (on identical nodes any packing can be permuted so that it does); the rest of the
node is completed by a depth-first choice of how many pods of each smaller group join it. The
total slack per resource (free room of the nodes minus the pods' demand) bounds how much room a
completed node may keep (with no slack every node is filled exactly), which prunes most
completions early. The answer is a start for the CP-SAT levels and is validated like any other.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import numpy.typing as npt

from placer.engine.batch import Batch
from placer.engine.greedy import Assignment
from placer.engine.packing import clock, exactcover, fillsampler, largefills, tuning
from placer.engine.scoring import IntArray

__all__ = ["applies", "complete", "padded"]


class _TimeoutError(Exception):
    pass


class _GiveUpError(Exception):
    """An attempt used its steps."""


def applies(batch: Batch) -> list[int] | None:
    """The nodes the search runs on, when the batch is a plain packing problem: no inter-pod rules,
    host ports or gangs; every group with a feasible node may use exactly the same nodes, and
    those nodes have the same free room. None otherwise."""
    if not batch.topology.empty or batch.levels:  # inter-pod rules, workload groups' domains
        return None
    groups = [g for g in batch.groups if len(g.feasible)]
    if not groups or sum(g.size for g in groups) > tuning.COMPLETION_MAX_PODS:
        return None
    if any(g.has_ports or g.gang is not None for g in groups):
        return None
    nodes = np.unique(groups[0].feasible)
    if any(not np.array_equal(np.unique(g.feasible), nodes) for g in groups[1:]):
        return None
    free = batch.snapshot.free[nodes]
    if np.any(free != free[0]):
        return None
    return [int(n) for n in nodes]


class _Subsets:
    """Lookup tables for the last pods of a completion where some resources must be filled
    exactly: the subsets of the candidate pods (positions 0..m-1) of each size, by the hash of
    their exact amounts, built on first use up to the largest size whose table stays within
    ``tuning.COMPLETION_TABLE_ROWS``. The hash is linear, so a subset's is the sum of its pods'. A completion of
    ``need`` pods is looked up at once when its size has a table, else it meets in the middle: each
    subset of the first ``need - top`` pods looks up the rest among the subsets of the largest
    size (``top``) that start after it. Tables grow only as far as a lookup needs: to half its
    size."""

    def __init__(self, keys: IntArray) -> None:
        self.keys = keys
        m = len(keys)
        # Per size: the subsets' hashes and members (positions, increasing) in building order, and
        # the order that sorts the hashes.
        self.tables: list[tuple[IntArray, npt.NDArray[np.int16], npt.NDArray[np.intp], IntArray]] = []
        self._add(keys.copy(), np.arange(m, dtype=np.int16).reshape(m, 1))
        self.full = False  # no larger table fits ``tuning.COMPLETION_TABLE_ROWS``
        self.built = m  # rows built so far
        self._by_hash: dict[int, tuple[IntArray, npt.NDArray[np.int16]]] = {}

    def _add(self, sums: IntArray, members: npt.NDArray[np.int16]) -> None:
        order = np.argsort(sums)  # ties in any order: a lookup sorts what it finds
        self.tables.append((sums, members, order, sums[order]))

    def _sorted(self, size: int) -> tuple[IntArray, npt.NDArray[np.int16]]:
        """The table of ``size`` pods in hash order (hashes, members), made once."""
        if size not in self._by_hash:
            _, members, order, keys = self.tables[size - 1]
            self._by_hash[size] = (keys, members[order])
        return self._by_hash[size]

    @property
    def top(self) -> int:
        return len(self.tables)

    def reach(self, need: int) -> bool:
        """Whether a completion of ``need`` pods can be looked up (tables grown as far as it takes)."""
        while 2 * self.top < need and not self.full:
            self._grow()
        return need <= 2 * self.top

    def _grow(self) -> None:
        """The subsets one pod larger: each subset of the largest size extended by every pod after
        its last one."""
        sums, members, _, _ = self.tables[-1]
        total = int((len(self.keys) - 1 - members[:, -1].astype(np.int64)).sum())
        if total == 0 or total > tuning.COMPLETION_TABLE_ROWS:
            self.full = True
            return
        rows, grown = exactcover.extended(members, len(self.keys))
        with np.errstate(over="ignore"):
            self._add(sums[rows] + self.keys[grown[:, -1].astype(np.int64)], grown)
        self.built += total

    def find(self, key: int, need: int, pos: int) -> tuple[list[list[int]], int]:
        """Subsets of ``need`` pods (``reach(need)`` first), all at positions ``pos`` or later, whose
        hash is ``key`` (members in position order, larger pods first); with how many table rows
        the lookup read."""
        if need <= self.top:
            _, members, order, keys = self.tables[need - 1]
            lo, hi = int(np.searchsorted(keys, key, "left")), int(np.searchsorted(keys, key, "right"))
            return sorted(row for row in members[order[lo:hi]].tolist() if row[0] >= pos), hi - lo
        first_keys, first = self._sorted(need - self.top)
        _, members, order, keys = self.tables[self.top - 1]
        ok = first[:, 0] >= pos
        first_keys, first = first_keys[ok], first[ok]
        with np.errstate(over="ignore"):
            wanted = key - first_keys[::-1]  # ascending but where the hash wraps: fast to look up
        first = first[::-1]
        starts, ends = np.searchsorted(keys, wanted, "left"), np.searchsorted(keys, wanted, "right")
        out = []
        for i in np.flatnonzero(ends > starts).tolist():
            for k in order[int(starts[i]) : int(ends[i])].tolist():
                if members[k, 0] > first[i, -1]:
                    out.append([*first[i].tolist(), *members[k].tolist()])
        out.sort()  # larger pods first (positions are by size), as the enumeration meets them
        return out, len(first)


class _Search:
    """Depth-first over nodes; each node opened by the largest pod left and completed by the
    pods' choices. Where the slack of a resource is zero the node must be filled exactly, so the
    last pods of a completion (up to ``_Subsets.reach``) are looked up by the room still missing in
    those resources (exact sums) instead of enumerated: that removes as many levels of the search
    tree."""

    def __init__(
        self, vecs: IntArray, room: IntArray, slack: IntArray, nodes: int, deadline: float, steps: int, seed: int
    ) -> None:
        self.vecs = vecs  # (pods, resources), largest first
        self.room = room
        self.nodes = nodes
        self.slack = slack.copy()
        self.exact = np.flatnonzero(slack == 0)
        self.mix = np.random.default_rng(12345).integers(1, 2**62, len(self.exact), dtype=np.int64) | 1
        self.deadline = deadline
        self.steps = steps  # ticks left before this attempt gives up (a restart follows)
        self.unchecked = 0  # ticks since the last look at the clock
        self.rng = np.random.default_rng(seed) if seed else None
        self.attempt = seed  # 0: the unperturbed order
        self.left = np.ones(len(vecs), dtype=bool)  # pods not yet on a node
        self.bins: list[list[int]] = []  # pods per completed node

    def _tick(self, steps: int = 1) -> None:
        """Charge ``steps`` ticks (a vectorised lookup or table counts its rows in hundreds), look at
        the clock every ``tuning.COMPLETION_CHECK_EVERY`` of them."""
        if self.steps <= 0:
            raise _GiveUpError
        self.steps -= steps
        self.unchecked += steps
        if self.unchecked >= tuning.COMPLETION_CHECK_EVERY:
            self.unchecked = 0
            if clock.now() > self.deadline:
                raise _TimeoutError

    def _reach(self, subsets: _Subsets, need: int) -> bool:
        """``subsets.reach(need)``, the rows it builds charged as steps."""
        built = subsets.built
        ok = subsets.reach(need)
        self._tick((subsets.built - built) // tuning.COMPLETION_ROWS_PER_TICK)
        return ok

    def _keys(self, v: IntArray) -> IntArray:
        """Hashes of the exact resources' amounts (rows of ``v``); equal amounts, equal hashes
        (a collision only costs a check)."""
        with np.errstate(over="ignore"):
            return np.asarray(v[..., self.exact] @ self.mix, dtype=np.int64)

    def _completions(self, first: int) -> Iterator[list[int]]:
        """Sets of pods (``first`` among them) that fit one node and keep no more room than the
        slack allows, by size in the attempt's order (``_needs``), larger pods first among equals."""
        vecs, left = self.vecs, self.slack
        rest = np.flatnonzero(self.left)
        rest = rest[rest != first]
        start = self.room - vecs[first]
        rest = rest[np.all(vecs[rest] <= start, axis=1)]
        if self.rng is not None:
            rest = self._shuffled(rest)
        sizes = vecs[rest]
        # Per position, over the pods from there on: their sum, largest and smallest amounts.
        suffix = np.cumsum(sizes[::-1], axis=0)[::-1]
        top = np.maximum.accumulate(sizes[::-1], axis=0)[::-1]
        low = np.minimum.accumulate(sizes[::-1], axis=0)[::-1]
        exact = len(self.exact) > 0
        if exact:
            subsets = _Subsets(self._keys(sizes))

        def done(chosen: list[int], free: IntArray) -> Iterator[list[int]]:
            if np.all(free >= 0) and np.all(free <= left):
                yield [first, *(int(rest[p]) for p in chosen)]

        def extend(pos: int, free: IntArray, chosen: list[int], need: int) -> Iterator[list[int]]:
            """Completions adding exactly ``need`` pods from positions ``pos`` on (so each set
            is met once)."""
            self._tick()
            if need == 0:
                yield from done(chosen, free)
                return
            if pos == len(rest):
                return
            # ``need`` more pods can add at most ``need`` times the largest amount left, and at
            # least ``need`` times the smallest.
            if np.any(top[pos] * need < free - left) or np.any(low[pos] * need > free):
                return
            if exact and self._reach(subsets, need):
                found, rows = subsets.find(int(self._keys(free)), need, pos)
                self._tick(rows // tuning.COMPLETION_ROWS_PER_TICK)
                for extra in found:
                    yield from done([*chosen, *extra], free - sizes[extra].sum(axis=0))
                return
            # Past the first position from which the pods left cannot fill the node, nothing can.
            short = np.flatnonzero(np.any(suffix[pos:] < free - left, axis=1))
            end = pos + (int(short[0]) if len(short) else len(rest) - pos)
            fitting = np.flatnonzero(np.all(sizes[pos:end] <= free, axis=1)) + pos
            for p in fitting.tolist():
                yield from extend(p + 1, free - sizes[p], [*chosen, p], need - 1)

        yield from done([], start)
        # At most as many pods as the smallest ones that fit together, in every resource; at
        # least as many as the largest ones that leave no more room than the slack allows.
        amounts = np.sort(vecs[rest], axis=0)
        most = min(int(np.searchsorted(np.cumsum(amounts[:, r]), start[r], "right")) for r in range(len(start)))
        largest = np.cumsum(amounts[::-1], axis=0)
        least = max(int(np.searchsorted(largest[:, r], start[r] - left[r], "left")) + 1 for r in range(len(start)))
        for need in self._needs(max(1, least), most):
            yield from extend(0, start, [], need)

    def _needs(self, least: int, most: int) -> list[int]:
        """The completions' sizes (pods besides the first), in the order this attempt tries them.
        Fewest first: a node of few pods rarely fills exactly by chance, so it is the likeliest
        part of a packing where packings are rare. Where they abound, that order leaves the last
        nodes many small pods each, and an attempt stalls there enumerating the sizes far below
        their average (no exact fill has so few pods, and they are the most to enumerate before
        the sizes that have one). So every other attempt (the unperturbed first among them) starts
        two pods below the average left per node (the node the largest pod opens holds a little
        fewer) and tries the smaller sizes last: the two orders stall on different instances."""
        sizes = list(range(least, most + 1))
        if self.attempt % 2:
            return sizes
        average = int(self.left.sum()) / max(1, self.nodes - len(self.bins))
        low = int(average) - 3  # pods besides the first: two below the average node
        return [n for n in sizes if n >= low] + [n for n in sizes if n < low]

    def _shuffled(self, rest: npt.NDArray[np.intp]) -> npt.NDArray[np.intp]:
        """A restart's order: the pods left, sorted by size with random noise (large pods stay
        early, ties and near-ties are broken differently each time)."""
        assert self.rng is not None
        size = self.vecs[rest].sum(axis=1).astype(np.float64)
        noisy = size * self.rng.uniform(0.7, 1.3, len(rest))
        return rest[np.argsort(-noisy, kind="stable")]

    def run(self) -> bool:
        if not self.left.any():
            return True
        if len(self.bins) == self.nodes:
            return False
        first = int(np.flatnonzero(self.left)[0])
        for pods in self._completions(first):
            kept = self.room - self.vecs[pods].sum(axis=0)
            self.left[pods] = False
            self.slack -= kept
            self.bins.append(pods)
            if self.run():
                return True
            self.bins.pop()
            self.left[pods] = True
            self.slack += kept
        return False


def complete(
    batch: Batch, nodes: list[int], *, seconds: float = float("inf"), steps: int | None = None
) -> tuple[Assignment | None, int]:
    """Every pod with a feasible node placed on ``nodes`` (from ``applies``), or None when the
    volume bound rules it out, the search proves it impossible, or it runs out of ``seconds`` (wall)
    or ``steps`` (deterministic); with the steps it took. An exact cover first (``_covered``), then
    random exact fills (``_drawn``), then the node-by-node search (``_searched``)."""
    deadline = clock.real() + seconds
    if clock.now() > deadline:  # a race already lost (or no time at all): nothing is started
        return None, 0
    owners = [(gi, pod) for gi, g in enumerate(batch.groups) if len(g.feasible) for pod in range(g.size)]
    room = batch.snapshot.free[nodes[0]].astype(np.int64)
    vecs = np.array([batch.groups[gi].vec for gi, _ in owners], dtype=np.int64).reshape(len(owners), len(room))
    slack: IntArray = room * len(nodes) - vecs.sum(axis=0)
    if not owners or np.any(slack < 0) or np.any(vecs > room):
        return None, 0
    scale = np.where(room > 0, 1.0 / np.maximum(room, 1), 0.0)
    order = np.argsort(-(vecs * scale).sum(axis=1), kind="stable")
    vecs = vecs[order]
    used = 0
    covered = _covered(vecs, room, slack, len(nodes), deadline, steps)
    if covered is not None:
        fills, used = covered
        if fills is not None:
            return _assignment(batch, nodes, owners, order, fills), used
    drawn, taken = _drawn(vecs, room, slack, len(nodes), deadline, None if steps is None else steps - used)
    used += taken
    if drawn is not None:
        return _assignment(batch, nodes, owners, order, drawn), used
    searched, taken = _searched(vecs, room, slack, len(nodes), deadline, None if steps is None else steps - used)
    used += taken
    if searched is None:
        return None, used
    return _assignment(batch, nodes, owners, order, searched), used


def _searched(
    vecs: IntArray, room: IntArray, slack: IntArray, nodes: int, deadline: float, steps: int | None
) -> tuple[list[list[int]] | None, int]:
    """The node-by-node search (``_Search``) in attempts with a growing limit of ticks, each
    restarted with a perturbed order (search times of such instances are heavy-tailed: a bad early
    node can cost more than a fresh start); the pods per node or None, with the steps taken
    (``tuning.TICKS_PER_STEP`` ticks a step)."""
    ticks = None if steps is None else steps * tuning.TICKS_PER_STEP
    limit, used = tuning.COMPLETION_FIRST_TICKS, 0

    def taken() -> int:
        return -(-used // tuning.TICKS_PER_STEP)

    for attempt in range(tuning.COMPLETION_MAX_ATTEMPTS):
        allowed = limit if ticks is None else min(limit, ticks - used)
        if allowed <= 0:
            return None, taken()
        search = _Search(vecs, room, slack, nodes, deadline, allowed, seed=attempt)
        try:
            packed = search.run()
        except _GiveUpError:
            packed = None
            limit *= 2
        except _TimeoutError:
            used += allowed - search.steps
            return None, taken()
        used += allowed - search.steps
        if packed:
            break
        if packed is False and attempt == 0:
            return None, taken()  # the unperturbed search is complete: proven impossible
    else:
        return None, taken()
    return search.bins, taken()


def _covered(
    vecs: IntArray, room: IntArray, slack: IntArray, nodes: int, deadline: float, steps: int | None
) -> tuple[list[list[int]] | None, int] | None:
    """A perfect packing (a resource without slack: every node filled exactly in it) as an exact
    cover of the pods by exact sets (``placer.engine.exactcover``); None when it does not apply
    (slack everywhere, or too many exact sets to list), else (the pods per node or None, steps).
    Every node filled exactly in a resource holds a set, so a packing takes one set a node: a cover
    by exactly ``nodes`` sets. Without a cover the node-by-node search still runs: it is not
    bounded to the sizes listed."""
    exact = (slack == 0) & (room > 0)  # resources every node must fill exactly
    if not exact.any():
        return None
    # Nodes of few pods first: every set of at most 4 pods; then sets of 5 to LARGEST pods sampled
    # among the pods no such set holds (``placer.engine.largefills``; fills of many pods are rare
    # when a node must be filled exactly in several resources); then every set of at most 5 and 6
    # pods. Each stage has a share of what is left (the sampled one half of it), and sets found
    # earlier stay candidates.
    taken = 0
    allowed = steps if steps is not None else 10**9
    sampled: list[tuple[int, ...]] = []
    listed: list[tuple[int, ...]] = []
    stages = (4, 0, 5, tuning.COVER_MOST_PER_NODE)  # 0: the sampled stage
    for i, most in enumerate(stages):
        share = (deadline - clock.now()) / (len(stages) - i)
        until = clock.real() + (2 * share if most == 0 else share) if np.isfinite(share) else deadline
        coverable = len(vecs) <= nodes * (most or tuning.LARGE_LARGEST)  # else some node needs more pods
        if not coverable and i > 0:
            continue
        if most == 0:
            sampled = _sampled(vecs, room, exact, listed, until)
            sets = sorted(set(listed) | set(sampled))
        else:
            listing = exactcover.exact_sets(vecs, room, exact, until, most)
            if listing is None:
                if i == 0:
                    return None
                continue
            listed = listing
            sets = sorted(set(listed) | set(sampled))
        if not coverable:
            continue
        left = (allowed - taken) // (len(stages) - i)
        chosen, used = exactcover.cover(len(vecs), sets, nodes, until, left)
        taken += used
        if chosen is not None:
            return [list(sets[c]) for c in chosen], taken
    return None, taken


def _sampled(
    vecs: IntArray, room: IntArray, exact: npt.NDArray[np.bool_], listed: list[tuple[int, ...]], deadline: float
) -> list[tuple[int, ...]]:
    """Exact sets of 5 to ``tuning.LARGE_LARGEST`` pods among the pods no set of ``listed`` holds,
    sampled in rounds until every pod is in some set, two rounds in a row add nothing, or the
    deadline; empty when such sets are not rare (a sampled size yields too many candidates)."""
    found: set[tuple[int, ...]] = set()
    held = {pod for subset in listed for pod in subset}
    fruitless = 0
    for attempt in range(tuning.SAMPLING_ROUNDS):
        before = len(found)
        for size in range(5, tuning.LARGE_LARGEST + 1):
            pool = np.array([p for p in range(len(vecs)) if p not in held], dtype=np.intp)
            try:
                sets = largefills.sampled_sets(vecs, room, exact, pool, size, seed=attempt, deadline=deadline)
            except largefills.NotRareError:
                return []
            for subset in sets or ():
                found.add(subset)
                held.update(subset)
        fruitless = fruitless + 1 if len(found) == before else 0
        if fruitless == 2 or len(held) == len(vecs) or clock.now() > deadline:
            break
    return sorted(found)


def _drawn(
    vecs: IntArray, room: IntArray, slack: IntArray, nodes: int, deadline: float, steps: int | None
) -> tuple[list[list[int]] | None, int]:
    """A perfect packing from random exact fills (``placer.engine.fillsampler``), with half of
    the time or steps left, its last pods covered exactly; (None, 0) when it does not apply (no
    exact resource a table can track)."""
    exact = (slack == 0) & (room > 0)
    if not exact.any() or not fillsampler.applies(vecs, room, exact):
        return None, 0
    until = clock.real() + (deadline - clock.real()) / 2 if np.isfinite(deadline) else deadline
    allowed = (steps if steps is not None else 2 * 10**9) // 2

    def tail(rows: npt.NDArray[np.intp], left: int) -> list[list[int]] | None:
        """Every exact set of the last pods (as many pods a set as small tables allow), covered
        by one set a node left."""
        most = max(
            k for k in range(2, 2 * tuning.TAIL_HALF + 1) if math.comb(len(rows), (k + 1) // 2) <= tuning.TAIL_ROWS
        )
        sets = exactcover.exact_sets(vecs[rows], room, exact, until, most)
        if sets is None:
            return None
        chosen, _ = exactcover.cover(len(rows), sets, left, until, tuning.TAIL_STEPS)
        if chosen is None:
            return None
        return [[int(rows[k]) for k in sets[c]] for c in chosen]

    return fillsampler.fill_nodes(vecs, room, slack, nodes, tail, deadline=until, steps=allowed)


def _assignment(
    batch: Batch, nodes: list[int], owners: list[tuple[int, int]], order: npt.NDArray[np.intp], bins: list[list[int]]
) -> Assignment:
    """The pods per node (positions in ``order``) as the batch's assignment."""
    chosen: list[list[int]] = [[] for _ in batch.groups]
    for node, pods in zip(nodes, bins, strict=False):
        for k in pods:
            chosen[owners[int(order[k])][0]].append(node)
    return padded(batch, chosen)


def padded(batch: Batch, chosen: list[list[int]]) -> Assignment:
    """The nodes chosen per group as the batch's assignment (the group's other pods left out)."""
    out: Assignment = []
    for gi, group in enumerate(batch.groups):
        picked: npt.NDArray[np.int64] = np.array(chosen[gi], dtype=np.int64)
        out.append(np.concatenate([picked, np.full(group.size - len(picked), -1, dtype=np.int64)]))
    return out
