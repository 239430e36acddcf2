"""A generic generator of perfect packings for the packing tests (not the benchmark's).

Each node's room (1000 of every resource) is cut into a few pods whose requests add up to it
exactly, so the instance packs into exactly its node count and no fewer; the pods are shuffled.
``spread`` says how far a pod's requests in different resources may differ: ``independent`` cuts
every resource on its own, ``alike`` cuts once and shifts a little between pods (correlated
requests). Seeds belong to the tests that use them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from support import cluster

from placer.engine import build_batch, build_snapshot, packing
from placer.models import Cluster, Config

ROOM = 1000
RESOURCES = ("cpu", "memory", "ephemeral-storage", "placer.io/bandwidth", "example.com/r5")
UNITS = {"cpu": "m", "memory": "Mi", "ephemeral-storage": "Mi"}


@dataclass(frozen=True)
class Packing:
    vecs: npt.NDArray[np.int64]  # pods x resources, in the pods' order
    home: list[int]  # the node each pod fills exactly
    nodes: int
    d: int

    @property
    def pods(self) -> int:
        return len(self.vecs)

    def cluster(self, slack: int = 0) -> Cluster:
        """The pods on nodes of ``ROOM + slack`` in every resource (with slack, no fill is exact)."""
        resources = RESOURCES[: self.d]

        def amounts(row: npt.NDArray[np.int64]) -> dict[str, str]:
            return {r: f"{int(v)}{UNITS.get(r, '')}" for r, v in zip(resources, row, strict=True)}

        room = amounts(np.full(self.d, ROOM + slack, dtype=np.int64))
        nodes = [{"name": f"n{i:03d}", "allocatable": {**room, "pods": 110}} for i in range(self.nodes)]
        pods = [{"name": f"p{k:03d}", "requests": amounts(row)} for k, row in enumerate(self.vecs)]
        return cluster(nodes, pods)


def _cut(rng: np.random.Generator, parts: int) -> npt.NDArray[np.int64]:
    cuts = np.sort(rng.choice(np.arange(1, ROOM), parts - 1, replace=False))
    return np.diff(np.concatenate([[0], cuts, [ROOM]])).astype(np.int64)


def perfect(
    seed: int,
    pods: int,
    d: int,
    per_node: tuple[int, int] = (3, 5),
    spread: Literal["independent", "alike"] = "independent",
) -> Packing:
    rng = np.random.default_rng(seed)
    rows: list[npt.NDArray[np.int64]] = []
    home: list[int] = []
    while len(home) < pods:
        parts = min(int(rng.integers(per_node[0], per_node[1] + 1)), pods - len(home))
        if pods - len(home) - parts == 1:
            parts += 1
        base = _cut(rng, parts)
        cols = []
        for j in range(d):
            col = base.copy() if (spread == "alike" or j == 0) else _cut(rng, parts)
            if spread == "alike" and j > 0:
                for _ in range(parts):
                    a, b = rng.choice(parts, 2, replace=False)
                    delta = int(rng.integers(0, max(1, min(int(col[a]), 60))))
                    if col[a] - delta >= 1:
                        col[a] -= delta
                        col[b] += delta
            cols.append(col)
        rows += list(np.stack(cols, axis=1))
        home += [home[-1] + 1 if home else 0] * parts
    order = rng.permutation(len(rows))
    return Packing(np.stack([rows[i] for i in order]).astype(np.int64), [home[i] for i in order], home[-1] + 1, d)


def placed(assignment: Sequence[npt.NDArray[np.int64]]) -> int:
    """Pods an assignment (each group's nodes, -1 for a pod left out) places."""
    return sum(int((picked >= 0).sum()) for picked in assignment)


def node_names(state: Any, batch: Any, assignment: Sequence[npt.NDArray[np.int64]]) -> dict[str, str]:
    """An assignment as the validator reads it: pod key -> node name."""
    return {
        pod.key: state.nodes[int(n)].name
        for group, picked in zip(batch.groups, assignment, strict=True)
        for pod, n in zip(group.pods, picked.tolist(), strict=True)
        if n >= 0
    }


def first_fit_case(c: Cluster, config: Config) -> tuple[Any, Any, list[int], Any]:
    """A plain packing's snapshot, batch, identical nodes and first-fit decreasing's answer (the
    start the local searches repair)."""
    pending = [p for p in c.pods if p.pending]
    state = build_snapshot(c.nodes, [], pending, c.namespaces)
    batch = build_batch(state, pending, config)
    nodes = packing.completion.applies(batch)
    assert nodes is not None
    start = packing.adopt(batch, packing.starts.first_fit_decreasing(batch))
    assert start is not None
    return state, batch, nodes, start
