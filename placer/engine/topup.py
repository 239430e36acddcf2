"""The last step of every answer: no pod left out where it fits as the answer stands.

A level that runs out of time keeps a solution no worse than the one before, but "no worse" counts
pods: a later level (the strategy's, the neighbourhood re-solves, the guard) may move placed pods
so that a pod left out by an unproven placed level now fits somewhere. Kubernetes users read a
Pending pod beside a node with room as a scheduler bug, and the validator's maximality rule says
so too. ``top_up`` places such pods first-fit, highest key first (largest first within a key), on
the nodes of their feasible sets with room and no host-port clash. Batches with inter-pod rules,
workload groups' domains or composite gangs, and gangs, are left as they are: whether a pod may join depends on the
others there, which the levels decided.
"""

from __future__ import annotations

import numpy as np

from placer.engine.batch import Batch
from placer.engine.prefilter import ports_clash
from placer.models import HostPort

__all__ = ["top_up"]

Counts = dict[tuple[int, int], int]


def top_up(batch: Batch, counts: Counts) -> tuple[Counts, bool]:
    """``counts`` with every pod that fits as it stands placed (first fit); whether any was."""
    if not batch.topology.empty or batch.grouped:
        return counts, False
    groups = batch.groups
    used = batch.snapshot.used.copy()
    placed = [0] * len(groups)
    ports: dict[int, list[HostPort]] = {n: list(p) for n, p in batch.snapshot.ports.items()}
    for (gi, n), c in counts.items():
        if c:
            used[n] += groups[gi].vec * c
            placed[gi] += c
            if groups[gi].has_ports:
                ports.setdefault(n, []).extend(groups[gi].pods[0].host_ports * c)
    alloc = batch.snapshot.alloc
    scale = np.where(alloc.max(axis=0) > 0, 1.0 / np.maximum(alloc.max(axis=0), 1), 0.0)
    order = sorted(
        (gi for gi, g in enumerate(groups) if g.gang is None and len(g.feasible) and placed[gi] < g.size),
        key=lambda gi: (-batch.rank(groups[gi]), -float((groups[gi].vec * scale).sum()), gi),
    )
    out, changed = dict(counts), False
    for gi in order:
        group = groups[gi]
        nodes = np.sort(group.feasible)
        for _ in range(group.size - placed[gi]):
            room = np.all(used[nodes] + group.vec <= alloc[nodes], axis=1)
            fits = nodes[room].tolist()
            if group.has_ports:
                mine = group.pods[0].host_ports
                fits = [n for n in fits if not ports_clash(mine, ports.get(n, ()))]
            if not fits:
                break
            n = int(fits[0])
            out[gi, n] = out.get((gi, n), 0) + 1
            used[n] += group.vec
            if group.has_ports:
                ports.setdefault(n, []).extend(group.pods[0].host_ports)
            changed = True
    return out, changed
