"""Never worse than another answer on the balance measures, not traded between them (issue 12).

The strategy level optimises a linear proxy of the balance (``objectives.balance``); the measures
users read are ``placer.metrics``' imbalance and std_score. Given another answer for the same
batch (kube-scheduler's, ``packing.Alternative``), ``no_worse`` returns an answer that places at
least as many pods per priority key as the other, with imbalance and std_score each no higher
than the other's, and lower on at least one whenever single-pod moves find such a state:

the better (``_score``: the larger of the two measures relative to the other's) of single-pod
descents from the engine's answer and, when the other answer places as many pods of every group
(so the placed levels are equal) and the engine's answer is not already strictly better, from
the other answer. The descent takes a move only
when it strictly lowers (excess over the other's measures, score), lexicographically: from the
other answer every state it reaches is within both measures; from the engine's answer it first
walks into them, then widens the margin.

In a batched run each batch may also be given a lower ``target`` (kube-scheduler's own batched
run, ``service.DefaultRun``): the descents then aim for it too, which weighs the measure the run
drifts on; an answer no worse than the other's still comes first. Pods the answer leaves out are
placed where the moves opened room for them (``_filled``).

Moves keep every pod on a feasible node with room, never lower a preference or take a
relaxed-affinity pod off a matching node (``descent.move_targets``), and leave pods with host ports
or inter-pod rules where they are. Both measures are kept per node (``metrics.node_balance``)
and updated over the two nodes a move changes; the answer is checked from scratch at the end.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from placer.engine.batch import Batch
from placer.engine.descent import fixed_groups, move_targets
from placer.engine.scoring import FloatArray, IntArray
from placer.engine.unplaced import Counts
from placer.metrics import BALANCE_RESOURCES, in_use, node_balance

__all__ = [
    "SHARE",
    "Quality",
    "need",
    "no_worse",
    "no_worse_at_end",
    "placed_per_key",
    "places_at_least",
    "quality",
]

# Of a decision's time limit, at most this share is kept for making the answer no worse than the
# other; less when the guard can need less (``need``): the rest goes to the search before it.
SHARE = 0.2
MAX_SWEEPS = 50  # a descent stops after this many sweeps over the pods (a deterministic run's only bound)
# ``need`` times weighing a pod on this many pods of the other answer, TIMINGS times (the least
# counts), and counts twice what it measured: the guard runs later, on a state whose nodes may offer
# more targets, on a loaded machine.
SAMPLE = 16
TIMINGS = 3
SAFETY = 2.0
_MARGIN = 1e-9  # relative: the descent aims this far inside the other's measures (float noise)


@dataclass(frozen=True)
class Quality:
    """What the rule compares: pods placed per priority key (key -> count; keys compare as the
    objective does, higher first), imbalance, std_score."""

    per_key: dict[tuple[int, ...], int]
    imbalance: float
    std_score: float

    def places_at_least(self, other: Quality) -> bool:
        return places_at_least(self.per_key, other.per_key)

    def places_more(self, other: Quality) -> bool:
        mine, theirs = _placed(self.per_key, other.per_key)
        return mine > theirs

    def no_worse(self, other: Quality) -> bool:
        return self.places_at_least(other) and self.imbalance <= other.imbalance and self.std_score <= other.std_score

    def better(self, other: Quality) -> bool:
        """No worse on every measure and strictly better on one."""
        more = self.places_more(other)
        lower = self.imbalance < other.imbalance or self.std_score < other.std_score
        return self.no_worse(other) and (more or lower)


PerKey = dict[tuple[int, ...], int]


def _placed(mine: PerKey, theirs: PerKey) -> tuple[list[int], list[int]]:
    keys = sorted(set(mine) | set(theirs), reverse=True)
    return [mine.get(k, 0) for k in keys], [theirs.get(k, 0) for k in keys]


def places_at_least(mine: PerKey, theirs: PerKey) -> bool:
    """At least as many pods placed per key, compared from the highest key down (the placed
    level's order: one more pod of a higher key outweighs any number of lower ones)."""
    a, b = _placed(mine, theirs)
    return a >= b


def placed_per_key(batch: Batch, counts: Counts) -> PerKey:
    """Pods an answer places per priority key (the placed level's rank of each group)."""
    per_key: PerKey = {}
    for (gi, _), c in counts.items():
        rank = (batch.rank(batch.groups[gi]),)
        per_key[rank] = per_key.get(rank, 0) + c
    return {r: c for r, c in per_key.items() if c}


class _Balance:
    """The two measures of a cluster state, per node and in total, updated one move at a time."""

    def __init__(self, batch: Batch, used: IntArray) -> None:
        snap = batch.snapshot
        cols = [snap.column(r) for r in BALANCE_RESOURCES if r in snap.resources]
        self.cols = np.array(cols, dtype=np.int64)
        alloc = snap.alloc[:, self.cols].astype(np.float64)
        self.has = in_use(alloc, used[:, self.cols])  # the measures' resources (placer.metrics)
        self.inv = np.where(self.has, 1.0 / np.where(self.has, alloc, 1.0), 0.0)
        self.n = int(self.has.any(axis=1).sum())
        self.used = used.copy()
        self.z, self.m = self.node(self.used, np.arange(len(used), dtype=np.int64))
        self.total_z = float(self.z.sum())
        self.total_m = float(self.m.sum())
        self.total_m2 = float((self.m * self.m).sum())

    def node(self, rows: IntArray, nodes: IntArray) -> tuple[FloatArray, FloatArray]:
        """(Z, mean utilisation) of ``nodes`` with full resource ``rows``."""
        util: FloatArray = rows[:, self.cols].astype(np.float64) * self.inv[nodes]
        return node_balance(util, self.has[nodes])

    def measures(self, z: FloatArray, m: FloatArray, m2: FloatArray) -> tuple[FloatArray, FloatArray]:
        """(imbalance, std_score) from the totals of Z, the means and their squares."""
        n = max(self.n, 1)
        mean = m / n
        return z / n, np.sqrt(np.maximum(m2 / n - mean * mean, 0.0))

    def current(self) -> tuple[float, float]:
        imbalance, std = self.measures(np.array(self.total_z), np.array(self.total_m), np.array(self.total_m2))
        return float(imbalance), float(std)

    def after_moves(self, vec: IntArray, a: int, targets: IntArray) -> tuple[FloatArray, FloatArray]:
        """(imbalance, std_score) after one pod of ``vec`` moves from ``a`` to each of ``targets``."""
        at = np.array([a], dtype=np.int64)
        za, ma = self.node(self.used[at] - vec, at)
        zt, mt = self.node(self.used[targets] + vec, targets)
        z = self.total_z - self.z[a] + za[0] - self.z[targets] + zt
        m = self.total_m - self.m[a] + ma[0] - self.m[targets] + mt
        m2 = self.total_m2 - self.m[a] ** 2 + ma[0] ** 2 - self.m[targets] ** 2 + mt * mt
        return self.measures(z, m, m2)

    def move(self, vec: IntArray, a: int, b: int) -> None:
        self.used[a] -= vec
        self.used[b] += vec
        at = np.array([a, b], dtype=np.int64)
        z, m = self.node(self.used[at], at)
        self.total_z += float(z.sum() - self.z[at].sum())
        self.total_m += float(m.sum() - self.m[at].sum())
        self.total_m2 += float((m * m).sum() - (self.m[at] ** 2).sum())
        self.z[at], self.m[at] = z, m


def _used(batch: Batch, counts: Counts) -> IntArray:
    used = batch.snapshot.used.copy()
    for (gi, n), c in counts.items():
        used[n] += batch.groups[gi].vec * c
    return used


def quality(batch: Batch, counts: Counts) -> Quality:
    """The rule's measures of an answer, from scratch."""
    imbalance, std = _Balance(batch, _used(batch, counts)).current()
    return Quality(placed_per_key(batch, counts), imbalance, std)


def no_worse_at_end(batch: Batch, counts: Counts, other: Counts, complete: Callable[[IntArray], IntArray]) -> bool:
    """Whether ``counts`` is no worse than ``other`` once the pods waiting behind the batch are
    placed too (``complete``: a state with the backlog added, the same rule for both): in a
    backlog the rule judges where it ends, not the batch alone (``placer.engine.backlog``)."""

    def at_end(answer: Counts) -> Quality:
        imbalance, std = _Balance(batch, complete(_used(batch, answer))).current()
        return Quality(placed_per_key(batch, answer), imbalance, std)

    return at_end(counts).no_worse(at_end(other))


class _Key:
    """The descent's lexicographic key: (excess over the other's measures, their relative sum)."""

    def __init__(self, ref: Quality) -> None:
        self.imbalance = max(ref.imbalance * (1 - _MARGIN), 1e-12)
        self.std = max(ref.std_score * (1 - _MARGIN), 1e-12)

    def __call__(self, imbalance: FloatArray, std: FloatArray) -> tuple[FloatArray, FloatArray]:
        ri, rs = imbalance / self.imbalance, std / self.std
        return np.maximum(ri - 1, 0) + np.maximum(rs - 1, 0), _score(ri, rs)


def _score(ri: FloatArray, rs: FloatArray) -> FloatArray:
    """The larger of the two measures relative to the other answer's (their sum breaks ties): the
    margin kept on the tighter measure, which later batches of a run build on."""
    return np.maximum(ri, rs) + 1e-3 * (ri + rs)


def _movable(counts: Counts, fixed: set[int]) -> list[tuple[int, int]]:
    """The pods a descent may move, as (group, node), one entry per pod."""
    pods: list[tuple[int, int]] = []
    for (gi, n), c in sorted(counts.items()):
        if gi not in fixed:
            pods.extend([(gi, n)] * c)
    return pods


def _best_move(batch: Batch, state: _Balance, key: _Key, gi: int, a: int) -> tuple[int, float, float] | None:
    """Where a pod of group ``gi`` on node ``a`` best moves (node, excess, score), or None when it
    cannot move: weighing one pod, the unit of a descent's work."""
    group = batch.groups[gi]
    targets = move_targets(batch, gi, a, state.used, group.feasible)
    if len(targets) == 0:
        return None
    ex, sc = key(*state.after_moves(group.vec, a, targets))
    best = int(np.lexsort((sc, ex))[0])
    return int(targets[best]), float(ex[best]), float(sc[best])


def need(batch: Batch, other: Counts, *, starts: int, targeted: bool, seed: int, most: float = float("inf")) -> float:
    """Wall seconds ``no_worse`` may take at most against ``other``, measured now (before the
    search, so that the search gets the rest of the limit): every descent it runs (``starts``
    answers, each towards the other's measures and, when ``targeted``, towards a target too) makes
    ``MAX_SWEEPS`` sweeps over every movable pod of the batch, weighing each pod at what weighing a
    sample of the other answer's pods costs here, plus the from-scratch measures each descent and
    the choice between them compute; ``SAFETY`` times that, from the least of ``TIMINGS`` timings
    of the same sample (a timing the machine preempted is not the cost). Infinite when the other
    answer has no pod to weigh (nothing to measure), or once two timings show more than ``most``
    (what the caller keeps at most): a timing is cut short as soon as it does, so a large batch
    on a short limit spends about two pods' weighing on this."""
    began = time.monotonic()
    state = _Balance(batch, _used(batch, other))
    imbalance, std = state.current()
    ref = Quality(placed_per_key(batch, other), imbalance, std)  # ``quality(batch, other)``
    scratch = time.monotonic() - began  # a descent's start and its answer's quality cost as much each
    fixed = fixed_groups(batch)
    pods = _movable(other, fixed)
    movable = sum(g.size for gi, g in enumerate(batch.groups) if gi not in fixed)
    runs = starts * (2 if targeted else 1)

    def bound(per_pod: float) -> float:
        return SAFETY * runs * (MAX_SWEEPS * movable * per_pod + 2 * scratch)

    if not pods or bound(0.0) > most:
        return float("inf")
    key = _Key(ref)
    sample = [pods[i] for i in np.random.default_rng(seed).permutation(len(pods))[:SAMPLE].tolist()]
    per_pod, over = float("inf"), 0
    for _ in range(TIMINGS):
        weighing = time.monotonic()
        for gi, a in sample:
            _best_move(batch, state, key, gi, a)
            if bound((time.monotonic() - weighing) / len(sample)) > most:
                over += 1  # this timing already shows more than the caller keeps: cut short
                break
        else:
            per_pod = min(per_pod, (time.monotonic() - weighing) / len(sample))
        if over == 2 and per_pod == float("inf"):
            return per_pod  # twice past ``most``: not one preempted timing
    return bound(per_pod)


def _descend(batch: Batch, counts: Counts, ref: Quality, *, deadline: float, seed: int) -> Counts:
    state = _Balance(batch, _used(batch, counts))
    key = _Key(ref)
    fixed = fixed_groups(batch)
    pods = _movable(counts, fixed)
    imbalance, std = state.current()
    ex0, sc0 = key(np.array([imbalance]), np.array([std]))
    excess, score = float(ex0[0]), float(sc0[0])
    rng = np.random.default_rng(seed)
    for _ in range(MAX_SWEEPS):
        improved = False
        for i in rng.permutation(len(pods)).tolist():
            if time.monotonic() >= deadline:
                break
            gi, a = pods[i]
            move = _best_move(batch, state, key, gi, a)
            if move is None:
                continue
            b, ex, sc = move
            if ex < excess - 1e-12 or (ex <= excess and sc < score - 1e-12):
                state.move(batch.groups[gi].vec, a, b)
                pods[i] = (gi, b)
                excess, score = ex, sc
                improved = True
        if not improved or time.monotonic() >= deadline:
            break
    out: Counts = {k: c for k, c in counts.items() if k[0] in fixed}
    for gi, n in pods:
        out[gi, n] = out.get((gi, n), 0) + 1
    return out


def _per_group(counts: Counts) -> dict[int, int]:
    out: dict[int, int] = {}
    for (gi, _), c in counts.items():
        out[gi] = out.get(gi, 0) + c
    return {gi: c for gi, c in out.items() if c}


def no_worse(
    batch: Batch,
    counts: Counts,
    other: Counts,
    *,
    seconds: float,
    seed: int,
    target: tuple[float, float] | None = None,
) -> tuple[Counts, bool]:
    """An answer no worse than ``other`` on every measure (see the module docstring), and whether
    it differs from ``counts``. When ``counts`` places other pods than ``other`` (more of a higher
    key, as the placed levels rank them), it is only improved, never traded for the other's pods,
    so its measures may stay above the other's: they then compare different loads. ``target``
    (imbalance, std_score): lower measures to aim for as well (a batched run's: kube-scheduler's
    state after the same batches, so that the run does not drift above it); the answer still
    comes first for being no worse than ``other``, then for meeting the target.
    Deterministic when ``seconds`` is infinite."""
    ref = quality(batch, other)
    own = quality(batch, counts)
    aim = ref
    if target is not None and (target[0] < ref.imbalance or target[1] < ref.std_score):
        aim = Quality(ref.per_key, min(ref.imbalance, target[0]), min(ref.std_score, target[1]))
    started = time.monotonic()
    starts = [counts]
    # The other answer is a start only when it places as many pods of every group: then every
    # placed level (per key, and per namespace and tier where restart tiers count) is the same.
    if _per_group(counts) == _per_group(other) and not own.better(ref):
        starts.append(other)
    # Descents towards the target first, then (when there is one) towards the other's measures
    # alone: a walk towards the lower target may end above the other's on one measure.
    runs = [(start, aim) for start in starts] + ([(start, ref) for start in starts] if aim is not ref else [])
    best: tuple[bool, bool, float, Counts] | None = None
    for i, (start, key) in enumerate(runs):
        share = (seconds - (time.monotonic() - started)) / (len(runs) - i)
        found = _descend(batch, start, key, deadline=time.monotonic() + share, seed=seed)
        q = quality(batch, found)
        ri, rs = q.imbalance / max(aim.imbalance, 1e-12), q.std_score / max(aim.std_score, 1e-12)
        rank = (not q.no_worse(ref), not q.no_worse(aim), float(_score(np.array(ri), np.array(rs))), found)
        if best is None or rank[:3] < best[:3]:
            best = rank
    assert best is not None  # at least one start: the other answer or the engine's
    found = _filled(batch, best[3])
    return found, found != counts


def _filled(batch: Batch, counts: Counts) -> Counts:
    """``counts`` with the pods it leaves out placed where they now fit (plain groups only: no
    rules involving other batch pods, no host ports, no gang), best key first, each on its
    feasible node with the most room left: moving pods to balance the nodes can open room that a
    pod left out fits in, and an answer never leaves out a pod that fits."""
    used = _used(batch, counts)
    alloc = batch.snapshot.alloc
    fixed = fixed_groups(batch)
    placed = _per_group(counts)
    out = dict(counts)
    order = sorted(range(len(batch.groups)), key=lambda gi: batch.groups[gi].key, reverse=True)
    for gi in order:
        group = batch.groups[gi]
        if gi in fixed or group.gang is not None or len(group.feasible) == 0:
            continue
        nz = np.flatnonzero(group.vec)
        for _ in range(group.size - placed.get(gi, 0)):
            free = alloc[np.ix_(group.feasible, nz)] - used[np.ix_(group.feasible, nz)]
            ok = np.all(free >= group.vec[nz], axis=1)
            if not ok.any():
                break
            room = (free / np.maximum(alloc[np.ix_(group.feasible, nz)], 1)).min(axis=1)
            n = int(group.feasible[np.flatnonzero(ok)[int(np.argmax(room[ok]))]])
            out[gi, n] = out.get((gi, n), 0) + 1
            used[n] += group.vec
    return out
