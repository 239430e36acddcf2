"""Overload search: every pod on a node, the nodes' overload driven to zero.

The ejection search (``ejection``) keeps every node within its room and leaves pods out; this one
puts every pod left out by the start on the node it overfills least and then moves and exchanges
pods between nodes until no node is over its room (``overloadsteps``: weighted min-conflicts tabu
search, compiled in ``kernel``). It answers only with a packing of every pod: a state with a node
over its room is no answer, so when the time runs out or the race is stopped it returns None and
the ejection search's answer stands.

It runs only compiled (there are no Python steps: at a millisecond a step it would not pay), on a
thread of its own beside the ejection search and CP-SAT (``dispatch``): its steps release the
interpreter's lock. On the public corpus it packs instances the ejection search does not, and
the other way round (docs/bench/techniques.md).
"""

from __future__ import annotations

import numpy as np

from placer.engine.batch import Batch
from placer.engine.greedy import Assignment
from placer.engine.packing import clock, kernel, tuning
from placer.engine.packing.ejection import Pods
from placer.engine.scoring import IntArray

__all__ = ["available", "search"]


def available() -> bool:
    """Whether the overload search can run (its steps are compiled)."""
    return kernel.overload() is not None


def _start(vecs: IntArray, room: IntArray, bin_of: IntArray, bins: int) -> tuple[IntArray, IntArray]:
    """``bin_of`` with every pod left out put on the node it overfills least (largest first), and
    the nodes' loads."""
    placed = bin_of.copy()
    load: IntArray = np.zeros((bins, len(room)), dtype=np.int64)
    np.add.at(load, placed[placed >= 0], vecs[placed >= 0])
    out = np.flatnonzero(placed < 0)
    for i in out[np.argsort(-(vecs[out] / room).sum(axis=1), kind="stable")].tolist():
        excess = (np.maximum(load + vecs[i] - room, 0) / room).sum(axis=1)
        b = int(np.argmin(excess))
        placed[i] = b
        load[b] += vecs[i]
    return placed, load


def search(batch: Batch, nodes: list[int], start: Assignment, *, seconds: float, seed: int = 0) -> Assignment | None:
    """Every pod with a feasible node placed on ``nodes`` (identical, from ``completion.applies``),
    from ``start``; None when no such packing was found before ``seconds`` passed or the race was
    stopped (``clock``), or when the search cannot run (not compiled, no time, a pod or the total
    demand exceeds the room, or ``start`` overfills a node)."""
    run = kernel.overload()
    deadline = clock.real() + seconds
    pods = Pods.of(batch, nodes, start)
    if run is None or pods is None or clock.now() > deadline:
        return None
    vecs, room = pods.asked()
    bins = len(nodes)
    first, first_load = _start(vecs, room, pods.bin_of, bins)
    bin_of, load = first.copy(), first_load.copy()
    weights = np.ones(len(room))
    tabu = np.zeros((len(vecs), bins), dtype=np.int64)
    stats = np.zeros(1, dtype=np.int64)
    steps, rounds = tuning.EJECT_FIRST_STEPS, 0
    fewest, since, patience = bins + 1, 0, tuning.OVERLOAD_RESTART
    while True:
        began = clock.real()
        if clock.now() > deadline:
            return None
        rounds += 1
        over = run(
            vecs, room, weights, float(tuning.OVERLOAD_BUMP), bin_of, load, tabu, stats, steps, seed * 7919 + rounds
        )
        if over == 0:
            return pods.assignment(batch, nodes, bin_of)
        if over < fewest:
            fewest, since = over, int(stats[0])
        elif stats[0] - since > patience:  # stuck (the weights only grow): again from the start, twice as patient
            bin_of[:], load[:], weights[:], tabu[:] = first, first_load, 1.0, 0
            stats[0], fewest, since, patience = 0, bins + 1, 0, 2 * patience
        steps = clock.slice_steps(steps, began, deadline)
