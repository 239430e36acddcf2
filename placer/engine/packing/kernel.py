"""The compiled inner loop of the ejection search (``ejection``), with numba.

The search works on a partial packing of pods (rows of ``vecs``) into identical bins of room
``room``: every bin within its room, some pods left out. One step:

1. every pod left out that fits a bin as it stands goes to the bin it leaves with the least scaled
   room (largest first);
2. else one pod left out is taken (the heaviest by its current weight, or one at random) and put on
   a bin after a *chain*: a pod of that bin moves to another bin where it fits, or is exchanged
   with a pod of another bin, so that both bins stay within their room and nothing is left out;
3. else, when two pods or more are left out, two of them (of ``POOL`` drawn) may go on one bin
   for the one or two pods of it that weigh less than they do (the best such exchange), those
   left out instead;
4. else it is put on the bin where the one, two or three pods that make room for it weigh least,
   and those are left out instead.

A pod ejected from a bin may not go back to it for a few steps (a tabu tenure drawn at random),
and a pod just put on a bin is not moved at once. A call runs a given number of steps and looks at
no clock: ``ejection`` sizes its calls from the time of the previous ones, starting with a few.

Weights adapt: each step, every pod left out gains ``inc`` times its base weight (its requests
scaled by the room and by how tight each resource is). Pods that keep being left out so become
expensive to eject, and the pods left out drift towards those that are easy to place, which is the
breakout idea of weighting local search (Morris, AAAI 1993) on the partial solutions of consistent
neighbourhood search (Buljubasic & Vasquez, Computers & Operations Research 76, 2016).

Numba compiles it once per machine, with the overload search's steps (``overloadsteps``) and the
LP dive's listing of contents (``contents``), cached on disk (``NUMBA_CACHE_DIR`` names the
folder where the package's own folder is read-only).
Compiling takes seconds, so ``prime`` starts it on a thread and ``ready`` (``overload``) says when
the search may use it; until then ``ejection`` runs its Python steps and the overload search does
not run.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["Kernel", "contents", "overload", "prime", "ready", "wait"]

log = logging.getLogger(__name__)

TENURE = 5  # the tabu tenure of an ejected pod is TENURE + [0, SPREAD) steps
SPREAD = 10
KEEP = 2  # steps a pod just placed is not moved again
POOL = 12  # pods left out of which two are exchanged for lighter ones of a node (drawn at random)


def _fits(load: Any, vecs: Any, room: Any, b: int, i: int) -> bool:
    for j in range(room.shape[0]):  # noqa: SIM110 - a plain loop is what numba compiles best
        if load[b, j] + vecs[i, j] > room[j]:
            return False
    return True


def _covers(vecs: Any, need: Any, x: int, y: int, z: int) -> bool:
    """Whether pods ``x``, ``y`` and ``z`` (-1: none) together ask for at least ``need``."""
    for j in range(need.shape[0]):
        total = vecs[x, j]
        if y >= 0:
            total += vecs[y, j]
        if z >= 0:
            total += vecs[z, j]
        if total < need[j]:
            return False
    return True


def _add(bin_of: Any, load: Any, members: Any, count: Any, slot: Any, vecs: Any, i: int, b: int) -> None:
    bin_of[i] = b
    for j in range(vecs.shape[1]):
        load[b, j] += vecs[i, j]
    members[b, count[b]] = i
    slot[i] = count[b]
    count[b] += 1


def _drop(bin_of: Any, load: Any, members: Any, count: Any, slot: Any, vecs: Any, i: int) -> None:
    b = bin_of[i]
    for j in range(vecs.shape[1]):
        load[b, j] -= vecs[i, j]
    last = members[b, count[b] - 1]
    members[b, slot[i]] = last
    slot[last] = slot[i]
    count[b] -= 1
    bin_of[i] = -1


def _pair_in(
    vecs: Any,
    room: Any,
    weight: Any,
    bin_of: Any,
    load: Any,
    members: Any,
    count: Any,
    slot: Any,
    tabu: Any,
    keep: Any,
    out: Any,
    left: int,
    need: Any,
    step: int,
) -> bool:
    """The best exchange of two pods left out for none, one or two pods of one bin that weigh
    less, if any (applied); whether there was one."""
    d = vecs.shape[1]
    gain = 0.0
    target = -1
    a1 = -1
    a2 = -1
    px = -1
    py = -1
    # At most POOL of them, drawn at random (a partial shuffle of ``out``): the pairs' cost grows
    # with the square of the pods left out, and a step must stay short.
    pool = min(left, POOL)
    for k in range(pool):
        r = k + np.random.randint(left - k)
        out[k], out[r] = out[r], out[k]
    for k1 in range(pool):
        s1 = out[k1]
        for k2 in range(k1 + 1, pool):
            s2 = out[k2]
            worth = weight[s1] + weight[s2]
            for b in range(load.shape[0]):
                if tabu[s1, b] >= step or tabu[s2, b] >= step:
                    continue
                for j in range(d):
                    need[j] = load[b, j] + vecs[s1, j] + vecs[s2, j] - room[j]
                c = count[b]
                for k3 in range(c):
                    x = members[b, k3]
                    if keep[x] >= step or worth - weight[x] <= gain:
                        continue
                    if _covers(vecs, need, x, -1, -1):
                        gain = worth - weight[x]
                        target, a1, a2, px, py = b, s1, s2, x, -1
                        continue
                    for k4 in range(k3 + 1, c):
                        y = members[b, k4]
                        if keep[y] >= step or worth - weight[x] - weight[y] <= gain:
                            continue
                        if _covers(vecs, need, x, y, -1):
                            gain = worth - weight[x] - weight[y]
                            target, a1, a2, px, py = b, s1, s2, x, y
    if target < 0:
        return False
    for gone in (px, py):
        if gone >= 0:
            _drop(bin_of, load, members, count, slot, vecs, gone)
            tabu[gone, target] = step + TENURE + np.random.randint(SPREAD)
    _add(bin_of, load, members, count, slot, vecs, a1, target)
    _add(bin_of, load, members, count, slot, vecs, a2, target)
    keep[a1] = step + KEEP
    keep[a2] = step + KEEP
    return True


def _steps(
    vecs: Any,
    room: Any,
    base: Any,
    weight: Any,
    inc: float,
    bin_of: Any,
    load: Any,
    members: Any,
    count: Any,
    slot: Any,
    tabu: Any,
    keep: Any,
    best: Any,
    stats: Any,
    steps: int,
    seed: int,
) -> int:
    """Up to ``steps`` steps from the state given (changed in place); ``stats`` holds the step
    count and the fewest pods left out so far (``best`` that answer). The fewest left out."""
    n, d = vecs.shape
    bins = load.shape[0]
    np.random.seed(seed)
    step = stats[0]
    fewest = stats[1]
    need = np.zeros(d, dtype=np.int64)
    out = np.empty(n, dtype=np.int64)
    for _ in range(steps):
        step += 1
        left = 0
        for i in range(n):
            if bin_of[i] < 0:
                out[left] = i
                left += 1
        if left < fewest:
            fewest = left
            best[:] = bin_of
        if left == 0:
            break
        for k in range(left):
            weight[out[k]] += inc * base[out[k]]
        # 1. pods that fit as the bins stand, largest first, each on its tightest bin
        order = np.argsort(-base[out[:left]])
        placed = False
        for k in range(left):
            i = out[order[k]]
            target = -1
            slack = np.inf
            for b in range(bins):
                if tabu[i, b] >= step or not _fits(load, vecs, room, b, i):
                    continue
                s = 0.0
                for j in range(d):
                    s += (room[j] - load[b, j] - vecs[i, j]) / room[j]
                if s < slack:
                    slack = s
                    target = b
            if target >= 0:
                _add(bin_of, load, members, count, slot, vecs, i, target)
                placed = True
        if placed:
            continue
        # 2. one pod left out: the heaviest or one at random
        pod = out[np.random.randint(left)]
        if np.random.random() < 0.5:
            for k in range(left):
                if weight[out[k]] > weight[pod]:
                    pod = out[k]
        # 3. a chain that makes room for it without leaving anything out
        done = False
        first = np.random.randint(bins)
        for bb in range(bins):
            b1 = (bb + first) % bins
            if tabu[pod, b1] >= step:
                continue
            for j in range(d):
                need[j] = load[b1, j] + vecs[pod, j] - room[j]
            for kx in range(count[b1]):
                x = members[b1, kx]
                if keep[x] >= step:
                    continue
                if not _covers(vecs, need, x, -1, -1):
                    continue
                second = np.random.randint(bins)
                for cc in range(bins):
                    b2 = (cc + second) % bins
                    if b2 == b1 or tabu[x, b2] >= step:
                        continue
                    if _fits(load, vecs, room, b2, x):
                        _drop(bin_of, load, members, count, slot, vecs, x)
                        _add(bin_of, load, members, count, slot, vecs, x, b2)
                        _add(bin_of, load, members, count, slot, vecs, pod, b1)
                        keep[x] = step + KEEP
                        done = True
                        break
                    for ky in range(count[b2]):
                        y = members[b2, ky]
                        if keep[y] >= step or tabu[y, b1] >= step:
                            continue
                        swap = True
                        for j in range(d):
                            if load[b2, j] - vecs[y, j] + vecs[x, j] > room[j]:
                                swap = False
                                break
                            if load[b1, j] - vecs[x, j] + vecs[y, j] + vecs[pod, j] > room[j]:
                                swap = False
                                break
                        if swap:
                            _drop(bin_of, load, members, count, slot, vecs, x)
                            _drop(bin_of, load, members, count, slot, vecs, y)
                            _add(bin_of, load, members, count, slot, vecs, x, b2)
                            _add(bin_of, load, members, count, slot, vecs, y, b1)
                            _add(bin_of, load, members, count, slot, vecs, pod, b1)
                            keep[x] = step + KEEP
                            keep[y] = step + KEEP
                            done = True
                            break
                    if done:
                        break
                if done:
                    break
            if done:
                break
        if done:
            continue
        # 4. two pods left out for one or two pods of a bin that weigh less (the pods left out get lighter)
        if left > 1 and _pair_in(
            vecs, room, weight, bin_of, load, members, count, slot, tabu, keep, out, left, need, step
        ):
            continue
        # 5. eject the one, two or three pods of least weight that make room for it
        cheapest = np.inf
        target = -1
        px = -1
        py = -1
        pz = -1
        for b in range(bins):
            if tabu[pod, b] >= step:
                continue
            for j in range(d):
                need[j] = load[b, j] + vecs[pod, j] - room[j]
            c = count[b]
            for k1 in range(c):
                x = members[b, k1]
                if keep[x] >= step:
                    continue
                if _covers(vecs, need, x, -1, -1):
                    cost = weight[x] + np.random.random() * 1e-9
                    if cost < cheapest:
                        cheapest = cost
                        target = b
                        px = x
                        py = -1
                        pz = -1
                    continue
                for k2 in range(k1 + 1, c):
                    y = members[b, k2]
                    if keep[y] >= step:
                        continue
                    if _covers(vecs, need, x, y, -1):
                        cost = weight[x] + weight[y] + np.random.random() * 1e-9
                        if cost < cheapest:
                            cheapest = cost
                            target = b
                            px = x
                            py = y
                            pz = -1
                        continue
                    for k3 in range(k2 + 1, c):
                        z = members[b, k3]
                        if keep[z] >= step:
                            continue
                        if _covers(vecs, need, x, y, z):
                            cost = weight[x] + weight[y] + weight[z] + np.random.random() * 1e-9
                            if cost < cheapest:
                                cheapest = cost
                                target = b
                                px = x
                                py = y
                                pz = z
        if target < 0:
            continue
        for gone in (px, py, pz):
            if gone >= 0:
                _drop(bin_of, load, members, count, slot, vecs, gone)
                tabu[gone, target] = step + TENURE + np.random.randint(SPREAD)
        _add(bin_of, load, members, count, slot, vecs, pod, target)
        keep[pod] = step + KEEP
    left = 0  # the state after the last step counts too (the next call may never come)
    for i in range(n):
        if bin_of[i] < 0:
            left += 1
    if left < fewest:
        fewest = left
        best[:] = bin_of
    stats[0] = step
    stats[1] = fewest
    return int(fewest)


Kernel = Callable[..., int]
_compiled: list[Kernel] = []
_lock = threading.Lock()
_started = threading.Event()
_done = threading.Event()


def _compile() -> None:
    try:
        _build()
    except Exception as exc:  # any failure (numba missing or refusing the loop): the Python steps, said once
        log.warning("the packing search's compiled steps are not available (%s); its Python steps run", exc)
    finally:
        _done.set()


def _build() -> None:
    import numba  # noqa: PLC0415 - numba takes a while to import: only placer processes that pack need it

    def jit(f: Callable[..., Any]) -> Any:
        try:
            return numba.njit(cache=True, nogil=True)(f)
        except RuntimeError:  # no writable cache folder: compile for this process only
            return numba.njit(nogil=True)(f)

    # The loop calls its helpers by their global names: compiled first, they are inlined into it.
    module = globals()
    for name in ("_fits", "_covers", "_add", "_drop", "_pair_in"):
        module[name] = jit(module[name])
    steps = jit(_steps)
    _warm(steps)
    from placer.engine.packing import overloadsteps  # noqa: PLC0415 - compiled here, with the ejection steps

    vars(overloadsteps)["_over"] = jit(overloadsteps._over)
    over = jit(overloadsteps.steps)
    _warm_overload(over)
    from placer.engine.packing import contents  # noqa: PLC0415 - compiled here too

    vars(contents)["_fits"] = jit(contents._fits)
    vars(contents)["_closed"] = jit(contents._closed)
    listing = jit(contents.maximal)
    _warm_contents(listing)
    _compiled.extend((steps, over, listing))


def _warm(steps: Kernel) -> None:
    """One call on a tiny packing, with the argument types of every real call: compiles (or loads
    from the cache) the one signature used."""
    i64 = np.int64
    vecs = np.ones((2, 1), dtype=i64)
    steps(
        vecs,
        np.full(1, 2, dtype=i64),
        np.ones(2),
        np.ones(2),
        0.0,
        np.full(2, -1, dtype=i64),
        np.zeros((1, 1), dtype=i64),
        np.zeros((1, 2), dtype=i64),
        np.zeros(1, dtype=i64),
        np.zeros(2, dtype=i64),
        np.zeros((2, 1), dtype=i64),
        np.zeros(2, dtype=i64),
        np.full(2, -1, dtype=i64),
        np.array([0, 2], dtype=i64),
        2,
        0,
    )


def _warm_overload(steps: Kernel) -> None:
    """As ``_warm``, for the overload search's steps (``overloadsteps``)."""
    i64 = np.int64
    steps(
        np.ones((2, 1), dtype=i64),
        np.full(1, 1, dtype=i64),
        np.ones(1),
        1.0,
        np.zeros(2, dtype=i64),
        np.full((1, 1), 2, dtype=i64),
        np.zeros((2, 1), dtype=i64),
        np.zeros(1, dtype=i64),
        2,
        0,
    )


def _warm_contents(listing: Kernel) -> None:
    """As ``_warm``, for the listing of a node's maximal contents (``contents``)."""
    i64 = np.int64
    listing(
        np.ones((2, 1), dtype=i64),
        np.full(1, 1, dtype=i64),
        2,
        10,
        np.zeros(2, dtype=i64),
        np.zeros(3, dtype=i64),
        np.full(3, -1, dtype=i64),
        np.zeros(1, dtype=i64),
        np.zeros(3, dtype=i64),
    )


def prime() -> None:
    """Start compiling (or loading) the kernel on a daemon thread, once per process."""
    with _lock:
        if _started.is_set():
            return
        _started.set()
    threading.Thread(target=_compile, name="placer-kernel-compile", daemon=True).start()


def wait(timeout: float | None = None) -> bool:
    """Start compiling if nobody has, and wait up to ``timeout`` seconds; whether it is ready."""
    prime()
    _done.wait(timeout)
    return ready() is not None


def ready() -> Kernel | None:
    """The compiled kernel once it is, else None (never blocks)."""
    return _compiled[0] if _compiled else None


def overload() -> Kernel | None:
    """The overload search's compiled steps (``overloadsteps``), compiled with the ejection
    search's: None whenever ``ready`` is."""
    return _compiled[1] if ready() is not None else None


def contents() -> Kernel | None:
    """The compiled listing of a node's maximal contents (``contents``), compiled with the
    ejection search's steps: None whenever ``ready`` is."""
    return _compiled[2] if ready() is not None else None
