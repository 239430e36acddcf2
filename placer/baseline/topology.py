"""What kube-scheduler's topology plugins look at, kept current as the simulation places pods.

``Domains``: node label columns per topology key (a code per node, -1 without the label).
``Placed``: the placed pods (running plus placed earlier in the simulation) indexed by label, so a
selector costs its matching pods rather than every pod. ``Books``: the (anti-)affinity terms of
placed pods grouped by identical term, with how many holders sit on each node, so the symmetric
rules cost one match per distinct term. ``NamespaceLabels``: which namespaces a term looks at.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from placer.engine import BoolArray, Snapshot, selector_matches
from placer.models import LabelSelector, Node, Pod, PodAffinityTerm, ReplicaSet

__all__ = [
    "ABSENT",
    "Book",
    "Books",
    "Domains",
    "IntArray",
    "NamespaceLabels",
    "Pair",
    "Placed",
    "Topology",
    "term_key",
]

IntArray = npt.NDArray[np.int64]
ABSENT = -1
METADATA_NAME = "kubernetes.io/metadata.name"
Pair = tuple[str, str]


class Domains:
    """Label columns of the nodes by key, encoded once per key."""

    def __init__(self, nodes: Sequence[Node]) -> None:
        self.nodes = nodes
        self._columns: dict[str, tuple[IntArray, list[str], dict[str, int]]] = {}

    def _column(self, key: str) -> tuple[IntArray, list[str], dict[str, int]]:
        col = self._columns.get(key)
        if col is None:
            vocab: dict[str, int] = {}
            codes = np.full(len(self.nodes), ABSENT, dtype=np.int64)
            for i, node in enumerate(self.nodes):
                value = node.labels.get(key)
                if value is not None:
                    codes[i] = vocab.setdefault(value, len(vocab))
            col = (codes, list(vocab), vocab)
            self._columns[key] = col
        return col

    def codes(self, key: str) -> IntArray:
        """Per node, the code of its value of ``key`` (``ABSENT`` without the label)."""
        return self._column(key)[0]

    def values(self, key: str) -> list[str]:
        """Code -> value of ``key``."""
        return self._column(key)[1]

    def code(self, key: str, value: str) -> int:
        return self._column(key)[2].get(value, ABSENT)

    def has_all(self, keys: Iterable[str]) -> BoolArray:
        mask = np.ones(len(self.nodes), dtype=np.bool_)
        for key in keys:
            mask &= self.codes(key) != ABSENT
        return mask

    def per_node(self, key: str, by_value: Mapping[str, int]) -> IntArray:
        """``by_value[value of key]`` for every node; 0 without the label or without an entry."""
        codes, values, vocab = self._column(key)
        table = np.zeros(len(values) + 1, dtype=np.int64)  # the last entry: nodes without the label
        for value, count in by_value.items():
            table[vocab.get(value, len(values))] = count
        table[len(values)] = 0
        return table[codes]


class NamespaceLabels:
    """Namespace labels for namespaceSelector; a namespace not listed has only its name label."""

    def __init__(self, labels: Mapping[str, Mapping[str, str]] | None) -> None:
        self._labels = dict(labels or {})

    def of(self, namespace: str) -> dict[str, str]:
        return dict(self._labels.get(namespace) or {METADATA_NAME: namespace})

    def covers(self, term: PodAffinityTerm, namespace: str) -> bool:
        """The term looks at pods of ``namespace``."""
        if namespace in term.namespaces:
            return True
        return term.namespace_selector is not None and selector_matches(term.namespace_selector, self.of(namespace))

    def matches(self, term: PodAffinityTerm, pod: Pod) -> bool:
        return self.covers(term, pod.namespace) and selector_matches(term.selector, pod.labels)


def _selector_key(selector: LabelSelector | None) -> Hashable:
    if selector is None:
        return None
    return (tuple(sorted(selector.match_labels.items())), selector.match_expressions)


def term_key(term: PodAffinityTerm) -> Hashable:
    """Identical terms share a key (the model is not hashable: its selector holds a dict)."""
    return (_selector_key(term.selector), term.namespaces, _selector_key(term.namespace_selector), term.topology_key)


@dataclass
class Held:
    """One distinct term of placed pods: its weight and how many holders are on each node."""

    term: PodAffinityTerm
    weight: int
    nodes: dict[int, int] = field(default_factory=dict)


class Book:
    """Placed pods' terms of one kind, grouped by identical (term, weight)."""

    def __init__(self, terms: Callable[[Pod], Iterable[tuple[PodAffinityTerm, int]]]) -> None:
        self._terms = terms
        self.entries: dict[Hashable, Held] = {}

    def update(self, pod: Pod, node: int, delta: int) -> None:
        for term, weight in self._terms(pod):
            key = (term_key(term), weight)
            held = self.entries.get(key)
            if held is None:
                held = self.entries[key] = Held(term, weight)
            count = held.nodes.get(node, 0) + delta
            if count:
                held.nodes[node] = count
            else:
                held.nodes.pop(node, None)
                if not held.nodes:
                    del self.entries[key]

    def __bool__(self) -> bool:
        return bool(self.entries)


class Books:
    """Required anti-affinity (filter), and the terms scored for an incoming pod: required affinity
    (hardPodAffinityWeight 1), preferred affinity and preferred anti-affinity (their weights)."""

    def __init__(self) -> None:
        self.anti = Book(lambda p: ((t, 1) for t in p.pod_anti_affinity))
        self.affinity = Book(lambda p: ((t, 1) for t in p.pod_affinity))
        self.preferred = Book(lambda p: ((w.term, w.weight) for w in p.pod_affinity_preferred))
        self.avoided = Book(lambda p: ((w.term, w.weight) for w in p.pod_anti_affinity_preferred))

    def update(self, pod: Pod, node: int, delta: int) -> None:
        if pod.pod_anti_affinity:
            self.anti.update(pod, node, delta)
        if pod.pod_affinity:
            self.affinity.update(pod, node, delta)
        if pod.pod_affinity_preferred:
            self.preferred.update(pod, node, delta)
        if pod.pod_anti_affinity_preferred:
            self.avoided.update(pod, node, delta)

    def scored(self) -> bool:
        return bool(self.affinity or self.preferred or self.avoided)


class _LabelIndex:
    def __init__(self) -> None:
        self.pairs: dict[Pair, dict[str, None]] = {}
        self.keys: dict[str, dict[str, None]] = {}

    def add(self, pod: Pod) -> None:
        name, pairs, keys = pod.key, self.pairs, self.keys
        for key, value in pod.labels.items():
            members = pairs.get((key, value))
            if members is None:
                members = pairs[(key, value)] = {}
            members[name] = None
            members = keys.get(key)
            if members is None:
                members = keys[key] = {}
            members[name] = None

    def remove(self, pod: Pod) -> None:
        for key, value in pod.labels.items():
            self.pairs.get((key, value), {}).pop(pod.key, None)
            self.keys.get(key, {}).pop(pod.key, None)


class Placed:
    """The placed pods and their nodes; the label index is built on first use (from the snapshot)."""

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot
        self._pods: dict[str, tuple[Pod, int]] | None = None
        self._index = _LabelIndex()

    def _all(self) -> dict[str, tuple[Pod, int]]:
        if self._pods is None:
            self._pods = {}
            for node, pods in enumerate(self._snapshot.running):
                for pod in pods:
                    self._pods[pod.key] = (pod, node)
                    self._index.add(pod)
        return self._pods

    def add(self, pod: Pod, node: int) -> None:
        if self._pods is not None:
            self._pods[pod.key] = (pod, node)
            self._index.add(pod)

    def remove(self, pod: Pod) -> None:
        if self._pods is not None and self._pods.pop(pod.key, None) is not None:
            self._index.remove(pod)

    def select(self, selector: LabelSelector | None, covers: Callable[[str], bool]) -> list[tuple[Pod, int]]:
        """Placed pods whose namespace ``covers`` accepts and whose labels ``selector`` matches."""
        if selector is None:
            return []
        pods = self._all()
        out = []
        for key in self._candidates(selector, pods):
            pod, node = pods[key]
            if covers(pod.namespace) and selector_matches(selector, pod.labels):
                out.append((pod, node))
        return out

    def _candidates(self, selector: LabelSelector, pods: Mapping[str, object]) -> Iterable[str]:
        """The smallest set of pod keys that contains every match: a required pair, an In list, an Exists key."""
        empty: dict[str, None] = {}
        options: list[list[dict[str, None]]] = [
            [self._index.pairs.get(p, empty)] for p in selector.match_labels.items()
        ]
        for req in selector.match_expressions:
            if req.operator == "In":
                options.append([self._index.pairs.get((req.key, v), empty) for v in dict.fromkeys(req.values)])
            elif req.operator == "Exists":
                options.append([self._index.keys.get(req.key, empty)])
        if not options:
            return list(pods)
        best = min(options, key=lambda sets: sum(len(s) for s in sets))
        return [k for members in best for k in members]


@dataclass
class Topology:
    """Everything the topology filters and scores read, for one simulation run."""

    domains: Domains
    placed: Placed
    books: Books
    namespaces: NamespaceLabels
    replicasets: dict[tuple[str, str], ReplicaSet]
    default_spreading: bool

    @classmethod
    def build(
        cls,
        snapshot: Snapshot,
        namespaces: Mapping[str, Mapping[str, str]] | None,
        replicasets: Sequence[ReplicaSet],
        default_spreading: bool,
    ) -> Topology:
        books = Books()
        for node, pods in enumerate(snapshot.running):
            for pod in pods:
                books.update(pod, node, 1)
        return cls(
            domains=Domains(snapshot.nodes),
            placed=Placed(snapshot),
            books=books,
            namespaces=NamespaceLabels(namespaces),
            replicasets={(r.namespace, r.name): r for r in replicasets},
            default_spreading=default_spreading,
        )

    def add(self, pod: Pod, node: int) -> None:
        self.placed.add(pod, node)
        self.books.update(pod, node, 1)

    def remove(self, pod: Pod, node: int) -> None:
        self.placed.remove(pod)
        self.books.update(pod, node, -1)
