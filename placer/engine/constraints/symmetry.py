"""Symmetry among identical nodes.

Nodes with the same allocatable, usage, taints, cordon state, values of every label the batch
refers to, and the same candidate memberships are interchangeable: any solution stays valid and
equally good when their contents are swapped. Ordering them removes that symmetric blow-up: by
the number of batch pods they receive (loose batches), or, for tight batches that are a packing
problem, by the first (largest) pod they hold. The greedy hint is permuted to respect the order.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from ortools.sat.python import cp_model

from placer.engine.model import Model

__all__ = ["Symmetry", "build", "node_classes", "order_hint"]

Counts = dict[tuple[int, int], int]


def _referenced_keys(model: Model) -> tuple[set[str], bool]:
    keys: set[str] = set()
    by_name = False
    for g in model.batch.groups:
        pod = g.pods[0]
        keys.update(pod.node_selector)
        terms = list(pod.required_terms or ()) + [p.preference for p in pod.preferred_terms]
        for term in terms:
            keys.update(r.key for r in term.match_expressions)
            by_name |= bool(term.match_fields)
        for volume in pod.volume_terms:
            for term in volume:
                keys.update(r.key for r in term.match_expressions)
                by_name |= bool(term.match_fields)
    keys.update(model.batch.topology.keys)  # domains of inter-pod rules and spreading
    keys.update(model.scorer.strategy.labels)  # labels the strategy's cost reads (GPU models)
    keys.update(level.key for level in model.batch.levels)  # domains of workload groups
    return keys, by_name


def node_classes(model: Model) -> list[list[int]]:
    """Classes (of two or more) of interchangeable touched nodes, members in index order."""
    keys, by_name = _referenced_keys(model)
    if by_name:
        return []
    snap = model.batch.snapshot
    membership: dict[int, list[int]] = defaultdict(list)
    for gi, row in enumerate(model.by_group):
        for n, _ in row:
            membership[n].append(gi)
    classes: dict[tuple[object, ...], list[int]] = defaultdict(list)
    for n in model.touched.tolist():
        node = snap.nodes[n]
        sig = (
            snap.alloc[n].tobytes(),
            snap.used[n].tobytes(),
            node.taints,
            node.unschedulable,
            tuple(node.labels.get(k) for k in sorted(keys)),
            tuple(membership[n]),
            tuple(sorted(snap.ports.get(n, []), key=repr)),
        )
        classes[sig].append(n)
    return [members for members in classes.values() if len(members) > 1]


@dataclass
class Symmetry:
    """The identical-node classes a model ordered, and how: ``packing`` orders each class by the
    first pod it holds (strong for tight packing), otherwise by how many batch pods it holds."""

    classes: list[list[int]]
    packing: bool = False
    group_order: list[int] = field(default_factory=list)  # groups, largest first (packing)

    def order(self, counts: Counts) -> Counts:
        """A solution permuted inside each class so that it satisfies the ordering constraints."""
        if not self.packing:
            return order_hint(self.classes, counts)
        rank = {g: i for i, g in enumerate(self.group_order)}
        return _permute(self.classes, counts, lambda row: min((rank[g] for g in row), default=len(rank)))


def build(model: Model, *, packing: bool = False) -> Symmetry:
    classes = node_classes(model)
    if packing:
        return _by_first_pod(model, classes)
    for members in classes:
        for a, b in itertools.pairwise(members):
            load_a = cp_model.LinearExpr.sum([v for _, v in model.by_node[a]])
            load_b = cp_model.LinearExpr.sum([v for _, v in model.by_node[b]])
            model.cp.add(load_a >= load_b)
    return Symmetry(classes)


def _by_first_pod(model: Model, classes: list[list[int]]) -> Symmetry:
    """Bin-packing symmetry breaking: pods are numbered largest group first, and inside a class of
    identical nodes a pod numbered i may only go to the first i + 1 nodes (the textbook rule; a
    group of identical pods numbered from s to e may use the first e + 1). Any solution can be
    permuted into this order (``Symmetry.order`` sorts each class's nodes by the lowest-numbered
    pod they hold, empty nodes last: the k-th node's lowest pod is then numbered k or more), so
    nothing feasible is lost. On public vector-packing instances it packed more within the limit
    than ordering the nodes by their first pod through a chain of booleans (docs/bench/packing.md)."""
    snap = model.batch.snapshot
    groups = model.batch.groups
    inv = np.where(snap.alloc > 0, 1.0 / np.maximum(snap.alloc, 1), 0.0).max(axis=0)
    size = {gi: float((g.vec * inv).sum()) for gi, g in enumerate(groups)}
    group_order = sorted(range(len(groups)), key=lambda gi: (-size[gi], gi))
    last: dict[int, int] = {}  # group -> the number of its last pod
    numbered = 0
    for gi in group_order:
        numbered += groups[gi].size
        last[gi] = numbered - 1
    for members in classes:
        for position, n in enumerate(members):
            for gi, var in model.by_node[n]:
                if position > last[gi]:
                    model.cp.add(var == 0)
    return Symmetry(classes, packing=True, group_order=group_order)


def order_hint(classes: list[list[int]], counts: Counts) -> Counts:
    """Permute a hint's node contents inside each class so that loads are non-increasing."""
    return _permute(classes, counts, lambda row: -sum(row.values()))


def _permute(classes: list[list[int]], counts: Counts, key: Callable[[dict[int, int]], float]) -> Counts:
    rows: dict[int, dict[int, int]] = {}  # node -> its contents, read once (linear in the hint)
    for (gi, n), c in counts.items():
        if c:
            rows.setdefault(n, {})[gi] = c
    classed = {n for members in classes for n in members}
    out = {k: c for k, c in counts.items() if k[1] not in classed}
    for members in classes:
        contents = sorted((rows.get(n, {}) for n in members), key=key)
        for n, row in zip(members, contents, strict=True):
            for gi, c in row.items():
                out[gi, n] = c
    return out
