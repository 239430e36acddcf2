"""Repacking: large neighbourhoods of the best local-search answer, each solved by a small CP-SAT model.

The ejection search (``ejection``) ends with an answer that leaves a few pods out and spreads the
room left over many nodes, a little on each: no left-out pod fits anywhere, and no exchange of one
or two pods makes room. Here a few nodes are freed with every pod on them, and a CP-SAT model
places those pods and the pods left out (at most ``tuning.REPACK_OUT``) on just those nodes: one
pod more than before if it can, else, once that is proven impossible, as many as before with one
of the left-out pods among them (an exchange, which moves the search on). Every pod on the freed
nodes may move to any of them, which no exchange of one or two pods can do; a neighbourhood of a
few nodes and a few dozen pods is usually settled in milliseconds.

Which nodes: half of them the ones closest to taking one left-out pod (least scaled excess once it
is added), the others drawn with a chance that grows with the room they keep, so that the room
scattered over the nodes can be gathered. The size adapts: a question settled (an answer or a
proof) grows the next neighbourhood by one node, one the solver cannot settle in
``tuning.REPACK_SECONDS`` shrinks it by one. The number of pods placed never goes down, so the
answer is never worse than the start; the search ends when every pod is placed, the time runs out
or the race is stopped (``clock``). This is Shaw's large-neighbourhood search (CP 1998) on the
partial solutions of consistent neighbourhood search (Buljubasic & Vasquez, Computers &
Operations Research 76, 2016).
"""

from __future__ import annotations

import numpy as np
from ortools.sat.python import cp_model

from placer.engine.batch import Batch
from placer.engine.greedy import Assignment
from placer.engine.packing import clock, tuning
from placer.engine.packing.ejection import Pods
from placer.engine.scoring import IntArray

__all__ = ["search"]


def _neighbourhood(
    load: IntArray, room: IntArray, scale: np.ndarray, target: IntArray, size: int, rng: np.random.Generator
) -> IntArray:
    """``size`` bins: half of the ones where ``target`` (a left-out pod's request) is closest to
    fitting, the rest drawn with a chance that grows with the scaled room each keeps."""
    bins = len(load)
    size = min(size, bins)
    excess = (np.maximum(load + target - room, 0) * scale).sum(axis=1) + rng.random(bins) * 1e-9
    near = np.argsort(excess, kind="stable")[: max(1, size // 2)]
    rest = np.setdiff1d(np.arange(bins), near)
    if size > len(near) and len(rest):
        spare = ((room - load[rest]) * scale).sum(axis=1) + 1e-6
        chance = spare**2 / (spare**2).sum()
        drawn = rng.choice(rest, size=min(size - len(near), len(rest)), replace=False, p=chance)
        near = np.concatenate([near, drawn])
    return np.sort(near).astype(np.int64)


def _solve(
    vecs: IntArray, room: IntArray, bins: int, hint: IntArray, more: bool, seconds: float, seed: int
) -> tuple[IntArray | None, bool]:
    """The pods ``vecs`` on ``bins`` bins of ``room`` from ``hint`` (each pod's bin or -1): with
    ``more``, one pod more placed than in the hint; else as many, among them one the hint leaves
    out (an exchange). Each pod's bin or -1 (None: no such answer, or none in time), and whether
    the solver settled the question (an answer, or a proof that there is none)."""
    model = cp_model.CpModel()
    pods = len(vecs)
    # Identical bins: pods in decreasing size, pod k only on bins 0..k (a relabelling of the bins
    # by their largest pod makes any answer so), and the hint relabelled the same way.
    order = np.argsort(-(vecs / np.maximum(room, 1)).sum(axis=1), kind="stable")
    label: dict[int, int] = {}
    for i in order.tolist():
        if hint[i] >= 0 and int(hint[i]) not in label:
            label[int(hint[i])] = len(label)
    x: list[list[cp_model.IntVar]] = [[] for _ in range(pods)]
    for rank, i in enumerate(order.tolist()):
        x[i] = [model.new_bool_var(f"x{i}_{b}") for b in range(min(bins, rank + 1))]
        model.add_at_most_one(x[i])
        for b, var in enumerate(x[i]):
            model.add_hint(var, hint[i] >= 0 and label[int(hint[i])] == b)
    for j in np.flatnonzero(vecs.sum(axis=0) > room).tolist():
        for b in range(bins):
            terms = [(int(vecs[i, j]), x[i][b]) for i in range(pods) if vecs[i, j] and b < len(x[i])]
            if terms:
                model.add(sum(c * v for c, v in terms) <= int(room[j]))
    placed = [v for row in x for v in row]
    current = int((hint >= 0).sum())
    if more:
        model.add(sum(placed) >= current + 1)
    else:
        model.add(sum(placed) >= current)
        model.add(sum(v for i in np.flatnonzero(hint < 0).tolist() for v in x[i]) >= 1)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = seed
    solver.parameters.max_time_in_seconds = seconds
    solver.parameters.cp_model_presolve = False  # small models: presolve costs more than it saves
    solver.parameters.symmetry_level = 0
    with clock.watched(solver):
        status = solver.solve(model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None, status == cp_model.INFEASIBLE
    out = np.full(pods, -1, dtype=np.int64)
    for i in range(pods):
        for b, var in enumerate(x[i]):
            if solver.boolean_value(var):
                out[i] = b
    return out, True


def search(batch: Batch, nodes: list[int], start: Assignment, *, seconds: float, seed: int = 0) -> Assignment | None:
    """The pods with a feasible node placed on ``nodes`` (identical, from ``completion.applies``),
    from ``start``: every one of them as soon as a neighbourhood places the last, else, when the
    time runs out or the race is stopped, the best answer found (never fewer placed per pod than
    ``start``: pods only ever join). None when it cannot start (as ``ejection.search``)."""
    deadline = clock.real() + seconds
    pods = Pods.of(batch, nodes, start)
    if pods is None:
        return None
    vecs, room = pods.vecs, pods.room
    bin_of = pods.bin_of.copy()
    load: IntArray = np.zeros((len(nodes), len(room)), dtype=np.int64)
    np.add.at(load, bin_of[bin_of >= 0], vecs[bin_of >= 0])
    scale = np.where(room > 0, 1.0 / np.maximum(room, 1), 0.0)
    rng = np.random.default_rng(seed)
    size = tuning.REPACK_NODES
    rounds = 0
    while True:
        out = np.flatnonzero(bin_of < 0)
        left = deadline - clock.now()
        if not len(out) or left <= 0:
            break
        rounds += 1
        target = vecs[out[rng.integers(len(out))]]
        chosen = _neighbourhood(load, room, scale, target, size, rng)
        joining = out if len(out) <= tuning.REPACK_OUT else rng.choice(out, size=tuning.REPACK_OUT, replace=False)
        members = np.concatenate([np.flatnonzero(np.isin(bin_of, chosen)), joining])
        position = np.full(len(nodes), -1, dtype=np.int64)
        position[chosen] = np.arange(len(chosen))
        hint = np.where(bin_of[members] >= 0, position[np.maximum(bin_of[members], 0)], -1)
        ask = min(tuning.REPACK_SECONDS, left)
        found, settled = _solve(vecs[members], room, len(chosen), hint, True, ask, seed + rounds)
        if found is None and settled:  # no pod more fits here: exchange one left-out pod instead
            size = min(tuning.REPACK_NODES_MAX, size + 1)
            ask = min(tuning.REPACK_SECONDS, deadline - clock.now())
            if ask <= 0:
                break
            found, settled = _solve(vecs[members], room, len(chosen), hint, False, ask, seed + rounds)
        if not settled:
            size = max(tuning.REPACK_NODES_MIN, size - 1)
        if found is None:
            continue
        bin_of[members] = np.where(found >= 0, chosen[np.maximum(found, 0)], -1)
        inside = bin_of >= 0
        load[:] = 0
        np.add.at(load, bin_of[inside], vecs[inside])
    return pods.assignment(batch, nodes, bin_of)
