"""Symmetry among identical nodes.

Nodes with the same allocatable, usage, taints, cordon state, values of every label the batch
refers to, and the same candidate memberships are interchangeable: any solution stays valid and
equally good when their contents are swapped. Ordering them by the number of batch pods they
receive removes that symmetric blow-up. The greedy hint is permuted to respect the order.
"""

from __future__ import annotations

import itertools
from collections import defaultdict

from ortools.sat.python import cp_model

from placer.engine.model import Model

__all__ = ["build", "node_classes", "order_hint"]


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


def build(model: Model) -> list[list[int]]:
    classes = node_classes(model)
    for members in classes:
        for a, b in itertools.pairwise(members):
            load_a = cp_model.LinearExpr.sum([v for _, v in model.by_node[a]])
            load_b = cp_model.LinearExpr.sum([v for _, v in model.by_node[b]])
            model.cp.add(load_a >= load_b)
    return classes


def order_hint(classes: list[list[int]], counts: dict[tuple[int, int], int]) -> dict[tuple[int, int], int]:
    """Permute a hint's node contents inside each class so that loads are non-increasing."""
    out = dict(counts)
    for members in classes:
        contents = []
        for n in members:
            row = {gi: c for (gi, m), c in counts.items() if m == n and c}
            contents.append(row)
        contents.sort(key=lambda row: -sum(row.values()))
        for n in members:
            for key in [k for k in out if k[1] == n]:
                del out[key]
        for n, row in zip(members, contents, strict=True):
            for gi, c in row.items():
                out[gi, n] = c
    return out
