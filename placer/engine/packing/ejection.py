"""Ejection search: a local search for "every pod placed" on identical nodes, from the best start.

The start (the best heuristic's answer) leaves a few pods out. Each step takes one pod left out
and puts it on a node, ejecting from that node the one or two pods of least total size that make
room for it (on a node where it fits as it stands, nothing is ejected); the ejected pods join the
pods left out. A pod ejected from a node may not go back to it for a few steps (a tabu tenure,
drawn at random), and a pod just put on a node is not ejected at once, so the search does not
cycle; the pods left out drift towards small ones that fit somewhere. A search that stops leaving
fewer pods out starts again from the start (``tuning.EJECT_RESTART``). Every node stays within its
room throughout, and the search ends as soon as no pod is left out. Sizes are compared after
scaling each resource by the node's room.

This is the partial-solution neighbourhood of consistent neighbourhood search for bin packing
(Buljubasic & Vasquez, Computers & Operations Research 76, 2016), reduced to its insert-and-eject
move. It finds packings of instances without exact fills (the published Panigrahy and Mommessin
classes) where bin completion and the CP-SAT search do not; it proves nothing, and it races the
CP-SAT search (``placer.engine.packing.dispatch``).

Once ``kernel`` is compiled, its steps run instead of the Python ones below: the same move and
more (chains of moves between two nodes, exchanges of two pods left out, weights that grow while a
pod is left out), at 2-100 microseconds a step instead of about a millisecond.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from placer.engine.batch import Batch
from placer.engine.greedy import Assignment
from placer.engine.packing import clock, completion, kernel, tuning
from placer.engine.scoring import IntArray

__all__ = ["Pods", "search"]

FloatArray = npt.NDArray[np.float64]


class _State:
    """Pods (rows of ``vecs``) on ``nodes`` identical bins of room ``room``: ``bin_of`` is each
    pod's bin or -1, ``load`` each bin's used room."""

    def __init__(self, vecs: IntArray, room: IntArray, bins: int, bin_of: IntArray) -> None:
        self.vecs = vecs
        self.room = room
        self.bin_of = bin_of
        self.load: IntArray = np.zeros((bins, len(room)), dtype=np.int64)
        np.add.at(self.load, bin_of[bin_of >= 0], vecs[bin_of >= 0])
        scale = np.where(room > 0, 1.0 / np.maximum(room, 1), 0.0)
        self.weight: FloatArray = (vecs * scale).sum(axis=1)
        self.scale: FloatArray = scale

    def move(self, pod: int, b: int) -> None:
        old = int(self.bin_of[pod])
        if old >= 0:
            self.load[old] -= self.vecs[pod]
        self.bin_of[pod] = b
        if b >= 0:
            self.load[b] += self.vecs[pod]


def _pairs(bin_of: IntArray, movable: IntArray) -> tuple[IntArray, IntArray]:
    """Every pair of movable pods on the same bin (two index arrays): with the pods sorted by
    bin, the pairs ``k`` places apart on the same bin, for each ``k`` up to the most on one bin."""
    order = movable[np.argsort(bin_of[movable], kind="stable")]
    bins = bin_of[order]
    firsts: list[IntArray] = []
    seconds: list[IntArray] = []
    for apart in range(1, len(order)):
        same = bins[:-apart] == bins[apart:]
        if not same.any():
            break
        firsts.append(order[:-apart][same])
        seconds.append(order[apart:][same])
    if not firsts:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.concatenate(firsts), np.concatenate(seconds)


def _insert_fitting(state: _State, out: IntArray, tabu: IntArray, step: int) -> bool:
    """Put every pod left out that fits some bin as it stands on the bin it leaves with the least
    scaled room (largest pods first); whether any was."""
    fits_any = np.all(state.load[None, :, :] + state.vecs[out][:, None, :] <= state.room, axis=2)
    fits_any &= tabu[out] < step
    if not fits_any.any():
        return False
    placed = False
    for pod in out[np.argsort(-state.weight[out], kind="stable")].tolist():
        ok = np.all(state.load + state.vecs[pod] <= state.room, axis=1) & (tabu[pod] < step)
        fits = np.flatnonzero(ok)
        if len(fits):
            left = ((state.room - state.load[fits] - state.vecs[pod]) * state.scale).sum(axis=1)
            state.move(pod, int(fits[int(np.argmin(left))]))
            placed = True
    return placed


def _eject(
    state: _State,
    pod: int,
    keep: IntArray,
    tabu: IntArray,
    step: int,
    rng: np.random.Generator,
) -> tuple[int, list[int]] | None:
    """The bin and the one or two pods to eject from it, of least total size, that make room for
    ``pod`` (None when no bin allowed to ``pod`` has such pods)."""
    need = state.load + state.vecs[pod] - state.room
    movable = np.flatnonzero((state.bin_of >= 0) & (keep <= step))
    if not len(movable):
        return None
    allowed = tabu[pod] < step
    noise = rng.random(len(state.weight)) * 1e-9  # ties broken at random
    best: tuple[float, int, list[int]] | None = None
    bins = state.bin_of[movable]
    ok = allowed[bins] & np.all(state.vecs[movable] >= need[bins], axis=1)
    if ok.any():
        cost = state.weight[movable] + noise[movable]
        k = int(np.argmin(np.where(ok, cost, np.inf)))
        best = (float(cost[k]), int(bins[k]), [int(movable[k])])
    first, second = _pairs(state.bin_of, movable)
    if len(first):
        bins = state.bin_of[first]
        ok = allowed[bins] & np.all(state.vecs[first] + state.vecs[second] >= need[bins], axis=1)
        if ok.any():
            cost = state.weight[first] + state.weight[second] + noise[first]
            k = int(np.argmin(np.where(ok, cost, np.inf)))
            if best is None or cost[k] < best[0]:
                best = (float(cost[k]), int(bins[k]), [int(first[k]), int(second[k])])
    return None if best is None else (best[1], best[2])


def search(batch: Batch, nodes: list[int], start: Assignment, *, seconds: float, seed: int = 0) -> Assignment | None:
    """The pods with a feasible node placed on ``nodes`` (identical, from ``completion.applies``),
    starting from ``start``: every one of them as soon as the search finds such a packing, else,
    when the time runs out (or the race is stopped: ``clock``), the answer of the search that left
    the fewest pods out (never fewer placed than ``start``). None when it cannot start (no time, a
    pod or the total demand exceeds the room, or ``start`` overfills a node)."""
    deadline = clock.real() + seconds
    pods = Pods.of(batch, nodes, start)
    if pods is None or clock.now() > deadline:
        return None
    compiled = kernel.ready()
    if compiled is not None:
        return pods.assignment(batch, nodes, _compiled(compiled, pods, len(nodes), deadline, seed))
    owners, vecs, room, bin_of = pods.owners, pods.vecs, pods.room, pods.bin_of
    state = _State(vecs, room, len(nodes), bin_of.copy())
    rng = np.random.default_rng(seed)
    keep: IntArray = np.zeros(len(owners), dtype=np.int64)  # a pod may not be ejected before this step
    tabu: IntArray = np.zeros((len(owners), len(nodes)), dtype=np.int64)  # step until which a pod may not enter a bin
    step = 0
    best = state.bin_of.copy()
    left_out = int((best < 0).sum())
    run_best, run_since, patience = left_out, 0, tuning.EJECT_RESTART
    while True:
        out = np.flatnonzero(state.bin_of < 0)
        if len(out) < left_out:
            best, left_out = state.bin_of.copy(), len(out)
        if not len(out):
            break
        step += 1
        if len(out) < run_best:
            run_best, run_since = len(out), step
        elif step - run_since > patience:  # stuck: start again from the start, with twice the patience
            state = _State(vecs, room, len(nodes), np.array(bin_of))
            keep[:] = 0
            tabu[:] = 0
            run_best, run_since, patience = int((bin_of < 0).sum()), step, 2 * patience
        if step % tuning.EJECT_CHECK_EVERY == 0 and clock.now() > deadline:
            break
        if _insert_fitting(state, out, tabu, step):
            continue
        # One pod left out, the largest or one at random, each half of the time.
        pod = int(out[np.argmax(state.weight[out])] if rng.random() < 0.5 else out[rng.integers(len(out))])
        found = _eject(state, pod, keep, tabu, step, rng)
        if found is None:
            continue
        b, ejected = found
        for other in ejected:
            state.move(other, -1)
            tabu[other, b] = step + tuning.EJECT_TABU + int(rng.integers(tuning.EJECT_TABU_SPREAD))
        state.move(pod, b)
        keep[pod] = step + tuning.EJECT_KEEP
    return pods.assignment(batch, nodes, best)


def _compiled(run: kernel.Kernel, pods: Pods, bins: int, deadline: float, seed: int) -> IntArray:
    """The search's steps in the compiled kernel, a slice at a time between two looks at the clock
    (slices sized to last about ``tuning.EJECT_SLICE`` seconds): each pod's bin in the answer that
    left the fewest pods out."""
    vecs, room = pods.asked()
    n = len(vecs)
    tight = vecs.sum(axis=0) / (room * bins)
    base = np.ascontiguousarray(((vecs / room) * (tight / max(float(tight.mean()), 1e-12))).sum(axis=1))
    weight = base.copy()
    bin_of = np.full(n, -1, dtype=np.int64)
    load = np.zeros((bins, len(room)), dtype=np.int64)
    members = np.zeros((bins, n), dtype=np.int64)
    count = np.zeros(bins, dtype=np.int64)
    slot = np.zeros(n, dtype=np.int64)
    for i, b in enumerate(pods.bin_of.tolist()):
        if b >= 0:
            bin_of[i] = b
            load[b] += vecs[i]
            members[b, count[b]] = i
            slot[i] = count[b]
            count[b] += 1
    tabu = np.zeros((n, bins), dtype=np.int64)
    keep = np.zeros(n, dtype=np.int64)
    best = bin_of.copy()
    stats = np.array([0, int((bin_of < 0).sum())], dtype=np.int64)
    steps, rounds = tuning.EJECT_FIRST_STEPS, 0
    while stats[1] > 0:
        began = clock.real()
        if clock.now() > deadline:
            break
        rounds += 1
        run(
            vecs,
            room,
            base,
            weight,
            float(tuning.EJECT_WEIGHT_GAIN),
            bin_of,
            load,
            members,
            count,
            slot,
            tabu,
            keep,
            best,
            stats,
            steps,
            seed * 7919 + rounds,
        )
        steps = clock.slice_steps(steps, began, deadline)
    return best


@dataclass(frozen=True)
class Pods:
    """The pods with a feasible node of a batch on identical ``nodes``, as the local searches
    (``ejection``, ``repack``) see them: ``owners`` (group, index in group) per pod, ``vecs`` their
    requests, ``room`` a node's free room, ``bin_of`` each pod's position in ``nodes`` in an answer
    (-1: left out)."""

    owners: list[tuple[int, int]]
    vecs: IntArray
    room: IntArray
    bin_of: IntArray

    @staticmethod
    def of(batch: Batch, nodes: list[int], start: Assignment) -> Pods | None:
        """``start`` seen so; None when there is no such pod, a pod or the total demand exceeds
        the room, or ``start`` overfills a node."""
        owners = [(gi, k) for gi, g in enumerate(batch.groups) if len(g.feasible) for k in range(g.size)]
        if not owners:
            return None
        room = batch.snapshot.free[nodes[0]].astype(np.int64)
        vecs: IntArray = np.array([batch.groups[gi].vec for gi, _ in owners], dtype=np.int64).reshape(len(owners), -1)
        if np.any(vecs > room) or np.any(vecs.sum(axis=0) > room * len(nodes)):
            return None
        position = {n: b for b, n in enumerate(nodes)}
        bin_of: IntArray = np.array([position.get(int(start[gi][k]), -1) for gi, k in owners], dtype=np.int64)
        load = np.zeros((len(nodes), len(room)), dtype=np.int64)
        np.add.at(load, bin_of[bin_of >= 0], vecs[bin_of >= 0])
        if np.any(load > room):  # not a valid start (the model's solutions always are)
            return None
        return Pods(owners, vecs, room, bin_of)

    def asked(self) -> tuple[IntArray, IntArray]:
        """``vecs`` and ``room`` over the resources with room only (nobody asks for one without:
        ``of``), contiguous, as the compiled searches take them."""
        asked = np.flatnonzero(self.room > 0)
        vecs: IntArray = np.ascontiguousarray(self.vecs[:, asked], dtype=np.int64)
        room: IntArray = np.ascontiguousarray(self.room[asked], dtype=np.int64)
        return vecs, room

    def assignment(self, batch: Batch, nodes: list[int], bin_of: IntArray) -> Assignment:
        """``bin_of`` (positions in ``nodes``) as the batch's assignment."""
        chosen: list[list[int]] = [[] for _ in batch.groups]
        for (gi, _), b in zip(self.owners, bin_of.tolist(), strict=True):
            if b >= 0:
                chosen[gi].append(nodes[b])
        return completion.padded(batch, chosen)
