"""The pods still waiting behind a batch, and where the balance strategy aims the batch with them.

A batch of a backlog balanced for itself spreads its pods over the least loaded nodes; the next
batch finds those nodes no longer least loaded, and so on: each batch is even, the end state of
the backlog is not (large and small pods land on nodes alike instead of in complementary pairs).
Given the pods still waiting (``Backlog``: their request vectors, counted per class of nodes they
may use; a fixed-seed sample of ``MAX_READ`` stands for a longer queue), ``aim`` places the batch
and the backlog together, largest pods first, each on the node whose mean utilisation it leaves
lowest (the longest-processing-time rule, one pod class at a time), and keeps the batch's share:
each node's mean utilisation with it is the per-node target of the balance strategy's inter-node
term (``Scorer.aim``), so that the batch takes the places the plan keeps for pods of its size and
leaves the others to the pods still waiting; where that share is a valid answer it is also the
batch's start (``as_hint``, instead of the greedy pass). ``complete`` places the backlog alone on
a state by the same rule: the balance guard compares two answers for a batch by where the backlog
would end from each (``dominance.no_worse_at_end``).

Capacity and inter-pod rules are not part of the plan (it is a target; the model keeps both);
node selection and taints are (a waiting pod's class carries the nodes it may use), and so is the
domain a waiting pod's workload is held in by required affinity to its running pods
(``held.where_held``): without it the plan spread those pods over every domain, and a batch's new
workload was aimed at, and the guard judged it best in, the domain they will fill.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from placer.engine.batch import Batch
from placer.engine.greedy import Assignment
from placer.engine.held import where_held
from placer.engine.prefilter import fits
from placer.engine.queued import MAX_READ, read_waiting
from placer.engine.scoring import FloatArray, IntArray, Scorer
from placer.engine.snapshot import pod_vector
from placer.engine.topology import TopologyState
from placer.models import Pod

__all__ = ["MAX_READ", "Aim", "Backlog", "aim", "as_hint", "complete", "summarize"]


@dataclass(frozen=True)
class Backlog:
    """Pods still waiting, per class: request vector, how many, the nodes they may use."""

    vecs: list[IntArray]
    counts: list[int]
    allowed: list[IntArray]

    def __len__(self) -> int:
        return sum(self.counts)


def _kind(pod: Pod) -> tuple[object, ...]:
    """What the plan reads of a pod: its requests and what restricts its nodes (``Prefilter``)."""
    return tuple(pod.requests.items()), tuple(pod.node_selector.items()), pod.required_terms, pod.tolerations


def summarize(batch: Batch, waiting: Sequence[Pod]) -> Backlog | None:
    """The waiting pods as classes (same requests, same nodes allowed); None when none may run here."""
    snap = batch.snapshot
    read, scale = read_waiting(waiting)
    held = where_held(batch, read)  # the domains running pods of its workload hold a pod in
    kinds: dict[tuple[object, ...], list[int]] = {}  # kind -> [count, index of its first pod]
    for i, pod in enumerate(read):
        seen = kinds.setdefault((*_kind(pod), held[i]), [0, i])
        seen[0] += 1
    classes: dict[tuple[bytes, bytes], int] = {}
    vecs: list[IntArray] = []
    counts: list[int] = []
    allowed: list[IntArray] = []
    for count, i in kinds.values():
        pod = read[i]
        vec = pod_vector(pod, snap.resources)
        mask = batch.prefilter.masks(pod).allowed & fits(snap, vec)
        for key, dom in held[i]:
            mask &= batch.topology.domains[key].of_node == dom
        nodes = np.flatnonzero(mask).astype(np.int64)
        if len(nodes) == 0:
            continue
        at = classes.setdefault((vec.tobytes(), nodes.tobytes()), len(vecs))
        if at == len(vecs):
            vecs.append(vec)
            counts.append(0)
            allowed.append(nodes)
        counts[at] += count
    counts = [round(c * scale) for c in counts]
    return Backlog(vecs, counts, allowed) if vecs else None


def _sizes(scorer: Scorer, vec: IntArray, nodes: IntArray) -> FloatArray:
    """What one pod of ``vec`` adds to the mean utilisation of each of ``nodes`` (scorer's measure)."""
    share: FloatArray = (vec[scorer.cols] * scorer.inv_alloc[nodes]).sum(axis=1) / scorer.k[nodes]
    return share


def _place(scorer: Scorer, load: FloatArray, items: Sequence[tuple[IntArray, int, IntArray]]) -> list[IntArray]:
    """Largest pods first, each on the allowed node it leaves least loaded (``load``, updated in
    place): how many pods of each item go to each node. Identical pods go in rounds of at most
    one per node."""
    sizes = [_sizes(scorer, vec, nodes) for vec, _, nodes in items]
    mean_size = [float(size.mean()) if len(size) else 0.0 for size in sizes]
    out = [np.zeros(len(load), dtype=np.int64) for _ in items]
    for i in sorted(range(len(items)), key=lambda i: -mean_size[i]):
        _, left, nodes = items[i]
        size = sizes[i]
        while left > 0 and len(nodes):
            take = min(left, len(nodes))
            after = load[nodes] + size
            chosen = np.argpartition(after, take - 1)[:take] if take < len(nodes) else np.arange(len(nodes))
            load[nodes[chosen]] = after[chosen]
            out[i][nodes[chosen]] += 1
            left -= take
    return out


def _load(scorer: Scorer, used: IntArray) -> FloatArray:
    load: FloatArray = (used[:, scorer.cols] * scorer.inv_alloc).sum(axis=1) / scorer.k
    return load


@dataclass(frozen=True)
class Aim:
    """The plan's share for the batch: each node's mean utilisation with it (the balance
    strategy's per-node target), and how many pods of each group it puts on each node."""

    fill: FloatArray
    counts: list[IntArray]


def aim(batch: Batch, scorer: Scorer, backlog: Backlog) -> Aim:
    """The batch's share of the plan of the batch and the backlog together (module docstring)."""
    load = _load(scorer, batch.snapshot.used)
    target = load.copy()
    mine = [(g.vec, g.size, g.feasible) for g in batch.groups]
    theirs = list(zip(backlog.vecs, backlog.counts, backlog.allowed, strict=True))
    counts = _place(scorer, load, mine + theirs)[: len(mine)]
    everyone = np.arange(len(load), dtype=np.int64)
    for (vec, _, _), count in zip(mine, counts, strict=True):
        target += count * _sizes(scorer, vec, everyone)
    return Aim(target, counts)


def as_hint(batch: Batch, planned: Aim) -> Assignment | None:
    """The plan's share as the batch's start, where it is an answer the greedy pass could give:
    groups without host ports, gangs, node preferences, group domains or required affinity to
    other batch pods, every pod on a node with room for all the plan puts there and that its
    inter-pod rules allow (anti-affinity, spreading: checked pod by pod as the greedy pass does).
    None otherwise (the greedy pass decides)."""
    groups = batch.groups
    if batch.grouped or batch.topology.affinity:
        return None
    if any(g.has_ports or g.gang is not None or g.masks.binding != "strict" for g in groups):
        return None
    if any(g.masks.preference.any() for g in groups):
        return None
    snap = batch.snapshot
    used = snap.used.copy()
    for g, count in zip(groups, planned.counts, strict=True):
        used += count[:, None] * g.vec[None, :]
    if (used > snap.alloc).any():
        return None
    hint: Assignment = [np.repeat(np.arange(len(count), dtype=np.int64), count) for count in planned.counts]
    if any(len(nodes) != g.size for g, nodes in zip(groups, hint, strict=True)):
        return None
    if not batch.topology.empty:
        topo = TopologyState(batch.topology, [g.size for g in groups])
        for gi, nodes in enumerate(hint):
            for n in nodes.tolist():
                if not topo.allowed(gi, np.array([n], dtype=np.int64), soft=False)[0]:
                    return None
                topo.add(gi, n)
    for g, nodes in zip(groups, hint, strict=True):
        g.candidates = np.union1d(g.candidates, nodes).astype(np.int64)  # the start is a solution of the model
    return hint


def complete(scorer: Scorer, used: IntArray, backlog: Backlog) -> IntArray:
    """``used`` (nodes x resources) with the backlog placed by the same rule."""
    items = list(zip(backlog.vecs, backlog.counts, backlog.allowed, strict=True))
    out = used.copy()
    for vec, count in zip(backlog.vecs, _place(scorer, _load(scorer, used), items), strict=True):
        out += count[:, None] * vec[None, :]
    return out
