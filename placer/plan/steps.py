"""The ordered steps of a plan, as a dependency graph.

evict (Eviction API) -> await-gone (the victim's room is free only then) -> bind. A moved pod's
replacement can be bound only after its victim is gone (the ReplicaSet creates it when the victim
starts terminating; replacements are interchangeable). Any bind into a node waits for the
evictions on that node unless the room it needs is already free before them; binds never wait on
binds, evictions wait on nothing, so the graph has no cycle: a swap (A's pod to B, B's to A) is
evict both, await both, bind both.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
import numpy as np
import numpy.typing as npt

__all__ = ["BindSpec", "EvictSpec", "StepSpec", "order_steps"]


@dataclass(frozen=True)
class EvictSpec:
    pod: str
    node: int
    vec: npt.NDArray[np.int64]


@dataclass(frozen=True)
class BindSpec:
    pod: str  # "ns/name" of a pending pod, or "replaces:ns/old" for a replacement
    node: int
    vec: npt.NDArray[np.int64]
    replaces: str | None = None


@dataclass(frozen=True)
class StepSpec:
    id: int
    op: str
    pod: str
    node: int
    after: tuple[int, ...]


def order_steps(evictions: list[EvictSpec], binds: list[BindSpec], free: npt.NDArray[np.int64]) -> list[StepSpec]:
    """Steps in a topological order; ``free`` is each node's room before the plan."""
    graph: nx.DiGraph = nx.DiGraph()
    gone: dict[str, tuple[str, str]] = {}
    by_node: dict[int, list[tuple[str, str]]] = {}
    for e in evictions:
        ev, aw = ("evict", e.pod), ("await-gone", e.pod)
        graph.add_node(ev, op="evict", pod=e.pod, node=e.node)
        graph.add_node(aw, op="await-gone", pod=e.pod, node=e.node)
        graph.add_edge(ev, aw)
        gone[e.pod] = aw
        by_node.setdefault(e.node, []).append(aw)
    room = free.copy()
    for b in sorted(binds, key=lambda b: (b.replaces is not None, b.pod)):
        key = ("bind", b.pod)
        graph.add_node(key, op="bind", pod=b.pod, node=b.node)
        if b.replaces is not None:
            graph.add_edge(gone[b.replaces], key)
        if np.all(room[b.node] >= b.vec):
            room[b.node] -= b.vec  # fits in the room already free: no wait on evictions
        else:
            for aw in by_node.get(b.node, []):
                graph.add_edge(aw, key)
    order = list(nx.lexicographical_topological_sort(graph, key=lambda n: (_RANK[n[0]], n[1])))
    ids = {n: i + 1 for i, n in enumerate(order)}
    return [
        StepSpec(
            id=ids[n],
            op=graph.nodes[n]["op"],
            pod=graph.nodes[n]["pod"],
            node=graph.nodes[n]["node"],
            after=tuple(sorted(ids[p] for p in graph.predecessors(n))),
        )
        for n in order
    ]


_RANK = {"evict": 0, "await-gone": 1, "bind": 2}
