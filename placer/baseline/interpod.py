"""kube-scheduler's InterPodAffinity plugin (v1.36), simulated.

PreFilter counts, per topology pair (key, value): placed pods that match **all** the incoming
pod's required affinity terms (a pair for each term whose key their node has); placed pods
matching each required anti-affinity term; and placed pods whose own required anti-affinity terms
match the incoming pod. Filter, per node, in this order:
- affinity (not resolvable by preemption): the node has every term's key and a matching pod in
  each term's domain; or no placed pod matches the terms anywhere and the pod matches its own
  terms (the first pod of a self-affine group);
- anti-affinity: no term whose domain holds a matching pod;
- existing pods' anti-affinity: none of the node's label pairs carries a placed pod whose required
  anti-affinity term matches the incoming pod (the symmetric rule).

Score: per topology pair, + weight for each placed pod matching a preferred affinity term of the
pod, - weight for a preferred anti-affinity term; + 1 (hardPodAffinityWeight) for each placed pod
whose required affinity term matches the pod, + / - weight for its preferred (anti-)affinity
terms. A node scores the sum over its label pairs, normalised to 0-100 between the minimum and
maximum over the feasible nodes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from placer.baseline.topology import Book, IntArray, Pair, Topology
from placer.engine import BoolArray
from placer.models import Filter, PlainFilter, Pod, PodAffinityTerm, WeightedPodAffinityTerm

__all__ = ["InterPodFilter", "InterPodTrial", "interpod_scores"]

MAX = 100


class Tally:
    """Counts per topology pair; entries that reach zero are dropped (their number matters).
    A fork shares the counts and records its own changes (preemption's per-node copy)."""

    def __init__(self, base: dict[Pair, int]) -> None:
        self._base = base
        self._diff: dict[Pair, int] = {}
        self._size = len(base)

    def get(self, pair: Pair) -> int:
        return self._diff[pair] if pair in self._diff else self._base.get(pair, 0)

    def add(self, pair: Pair, delta: int) -> None:
        old = self.get(pair)
        self._diff[pair] = old + delta
        if (old == 0) != (old + delta == 0):
            self._size += 1 if old == 0 else -1

    def __len__(self) -> int:
        return self._size

    def fork(self) -> Tally:
        out = Tally(self._base)
        out._diff, out._size = dict(self._diff), self._size
        return out

    def by_key(self) -> dict[str, dict[str, int]]:
        """The counts (before any change) grouped by topology key."""
        return _by_key(self._base)


def _by_key(counts: Mapping[Pair, int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (key, value), count in counts.items():
        out.setdefault(key, {})[value] = count
    return out


def _bump(out: dict[Pair, int], labels: Mapping[str, str], key: str, delta: int) -> None:
    value = labels.get(key)
    if value is not None:
        out[(key, value)] = out.get((key, value), 0) + delta


def _covering(topo: Topology, term: PodAffinityTerm) -> Callable[[str], bool]:
    return lambda namespace: topo.namespaces.covers(term, namespace)


def _affinity_counts(topo: Topology, pod: Pod) -> dict[Pair, int]:
    """Per pair, placed pods matching all the pod's required affinity terms (one pair per term)."""
    terms, out = pod.pod_affinity, dict[Pair, int]()
    if terms:
        for other, node in topo.placed.select(terms[0].selector, _covering(topo, terms[0])):
            if all(topo.namespaces.matches(t, other) for t in terms[1:]):
                for t in terms:
                    _bump(out, topo.domains.nodes[node].labels, t.topology_key, 1)
    return out


def _term_counts(
    topo: Topology, terms: Sequence[tuple[PodAffinityTerm, int]], out: dict[Pair, int] | None = None
) -> dict[Pair, int]:
    """Per pair, the weights of placed pods matching each (term, weight)."""
    out = {} if out is None else out
    for term, weight in terms:
        for _, node in topo.placed.select(term.selector, _covering(topo, term)):
            _bump(out, topo.domains.nodes[node].labels, term.topology_key, weight)
    return out


def _held_counts(
    topo: Topology, pod: Pod, book: Book, sign: int, out: dict[Pair, int] | None = None
) -> dict[Pair, int]:
    """Per pair, sign x weight x holders of each distinct term in ``book`` that matches ``pod``."""
    out = {} if out is None else out
    for held in book.entries.values():
        if topo.namespaces.matches(held.term, pod):
            for node, count in held.nodes.items():
                _bump(out, topo.domains.nodes[node].labels, held.term.topology_key, sign * held.weight * count)
    return out


def _matches_all(topo: Topology, terms: Sequence[PodAffinityTerm], pod: Pod) -> bool:
    return bool(terms) and all(topo.namespaces.matches(t, pod) for t in terms)


class InterPodFilter:
    """The InterPodAffinity filter for one pod over every node (None when PreFilter skips it)."""

    def __init__(self, topo: Topology, pod: Pod, affinity: Tally, anti: Tally, existing: Tally) -> None:
        self.topo, self.pod = topo, pod
        self.affinity, self.anti, self.existing = affinity, anti, existing
        self.self_match = _matches_all(topo, pod.pod_affinity, pod)

    @classmethod
    def build(cls, topo: Topology, pod: Pod) -> InterPodFilter | None:
        existing = {p: c for p, c in _held_counts(topo, pod, topo.books.anti, 1).items() if c}
        if not existing and not pod.pod_affinity and not pod.pod_anti_affinity:
            return None
        anti = _term_counts(topo, [(t, 1) for t in pod.pod_anti_affinity])
        return cls(topo, pod, Tally(_affinity_counts(topo, pod)), Tally(anti), Tally(existing))

    def steps(self) -> list[tuple[BoolArray, PlainFilter, bool]]:
        """(failing nodes, reason, resolvable) in upstream order: affinity, anti-affinity, existing pods'."""
        dom, n = self.topo.domains, len(self.topo.domains.nodes)
        affinity, anti, existing = (np.zeros(n, dtype=np.bool_) for _ in range(3))
        if self.pod.pod_affinity:
            counts = self.affinity.by_key()
            missing, found = np.zeros(n, dtype=np.bool_), np.ones(n, dtype=np.bool_)
            for t in self.pod.pod_affinity:
                missing |= ~dom.has_all([t.topology_key])
                found &= dom.per_node(t.topology_key, counts.get(t.topology_key, {})) > 0
            seed = len(self.affinity) == 0 and self.self_match
            affinity = missing if seed else missing | ~found
        counts = self.anti.by_key()
        for t in self.pod.pod_anti_affinity:
            anti |= dom.per_node(t.topology_key, counts.get(t.topology_key, {})) > 0
        for key, values in self.existing.by_key().items():
            existing |= dom.per_node(key, values) > 0
        return [
            (affinity, Filter.POD_AFFINITY, False),
            (anti, Filter.POD_ANTI_AFFINITY, True),
            (existing, Filter.EXISTING_ANTI_AFFINITY, True),
        ]

    def trial(self) -> InterPodTrial:
        return InterPodTrial(self)


class InterPodTrial:
    """The filter on a copy of the PreFilter state, as preemption's dry run removes and re-adds pods."""

    def __init__(self, f: InterPodFilter) -> None:
        self._f = f
        self._affinity, self._anti, self._existing = f.affinity.fork(), f.anti.fork(), f.existing.fork()

    def update(self, other: Pod, node: int, delta: int) -> None:
        f, labels = self._f, self._f.topo.domains.nodes[node].labels
        for t in other.pod_anti_affinity:
            if t.topology_key in labels and f.topo.namespaces.matches(t, f.pod):
                self._existing.add((t.topology_key, labels[t.topology_key]), delta)
        if _matches_all(f.topo, f.pod.pod_affinity, other):
            for t in f.pod.pod_affinity:
                if t.topology_key in labels:
                    self._affinity.add((t.topology_key, labels[t.topology_key]), delta)
        for t in f.pod.pod_anti_affinity:
            if t.topology_key in labels and f.topo.namespaces.matches(t, other):
                self._anti.add((t.topology_key, labels[t.topology_key]), delta)

    def passes(self, node: int) -> bool:
        f, labels = self._f, self._f.topo.domains.nodes[node].labels
        if f.pod.pod_affinity:
            if any(t.topology_key not in labels for t in f.pod.pod_affinity):
                return False
            found = all(self._affinity.get((t.topology_key, labels[t.topology_key])) > 0 for t in f.pod.pod_affinity)
            if not found and not (len(self._affinity) == 0 and f.self_match):
                return False
        for t in f.pod.pod_anti_affinity:
            if t.topology_key in labels and self._anti.get((t.topology_key, labels[t.topology_key])) > 0:
                return False
        return not (len(self._existing) and any(self._existing.get(pair) > 0 for pair in labels.items()))


def interpod_scores(topo: Topology, pod: Pod, feasible: IntArray) -> IntArray:
    """InterPodAffinity's normalised score (0-100) of each feasible node."""
    books = topo.books
    if not (pod.pod_affinity_preferred or pod.pod_anti_affinity_preferred or books.scored()):
        return np.zeros(len(feasible), dtype=np.int64)
    pairs = _term_counts(
        topo, _weighted(pod.pod_affinity_preferred, 1) + _weighted(pod.pod_anti_affinity_preferred, -1)
    )
    for book, sign in ((books.affinity, 1), (books.preferred, 1), (books.avoided, -1)):
        _held_counts(topo, pod, book, sign, pairs)
    raw = np.zeros(len(feasible), dtype=np.int64)
    for key, values in _by_key(pairs).items():
        raw += topo.domains.per_node(key, values)[feasible]
    return _normalise(raw)


def _weighted(terms: Sequence[WeightedPodAffinityTerm], sign: int) -> list[tuple[PodAffinityTerm, int]]:
    return [(w.term, sign * w.weight) for w in terms]


def _normalise(raw: IntArray) -> IntArray:
    if len(raw) == 0:
        return raw
    low, high = int(raw.min()), int(raw.max())
    if high - low <= 0:
        return np.zeros(len(raw), dtype=np.int64)
    return (float(MAX) * ((raw - low) / float(high - low))).astype(np.int64)
