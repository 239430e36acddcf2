"""The ordered steps of a plan, as a dependency graph.

evict -> await-gone (the victim's room is free only then) -> bind. A moved pod's replacement can
be bound only after its victim is gone (the ReplicaSet creates it when the victim starts
terminating; replacements are interchangeable). Any bind into a node waits for the evictions on
that node unless the room it needs is already free before them; binds never wait on binds,
evictions wait on nothing, so the graph has no cycle: a swap (A's pod to B, B's to A) is evict
both, await both, bind both. Steps ready at the same time are listed by their kind's rank.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
import numpy as np
import numpy.typing as npt

from placer.models import AWAIT_GONE, BIND, EVICT, step_kind

__all__ = ["BindSpec", "EvictSpec", "StepSpec", "order_steps"]


@dataclass(frozen=True)
class EvictSpec:
    pod: str
    node: int
    vec: npt.NDArray[np.int64]


@dataclass(frozen=True)
class BindSpec:
    """A bind: of the pending pod ``pod``, or of the replacement of the evicted pod ``replaces``."""

    pod: str | None
    node: int
    vec: npt.NDArray[np.int64]
    replaces: str | None = None


@dataclass(frozen=True)
class StepSpec:
    id: int
    op: str  # a registered step kind (placer.models.steps)
    pod: str | None
    node: int
    after: tuple[int, ...]
    replaces: str | None = None


Key = tuple[str, str | None, str | None]  # (op, pod, replaces)


def order_steps(evictions: list[EvictSpec], binds: list[BindSpec], free: npt.NDArray[np.int64]) -> list[StepSpec]:
    """Steps in a topological order; ``free`` is each node's room before the plan."""
    graph: nx.DiGraph = nx.DiGraph()
    gone: dict[str, Key] = {}
    by_node: dict[int, list[Key]] = {}
    for e in evictions:
        ev: Key = (EVICT.op, e.pod, None)
        aw: Key = (AWAIT_GONE.op, e.pod, None)
        graph.add_node(ev, node=e.node)
        graph.add_node(aw, node=e.node)
        graph.add_edge(ev, aw)
        gone[e.pod] = aw
        by_node.setdefault(e.node, []).append(aw)
    room = free.copy()
    for b in sorted(binds, key=lambda b: (b.replaces is not None, b.pod or b.replaces or "")):
        key: Key = (BIND.op, b.pod, b.replaces)
        graph.add_node(key, node=b.node)
        if b.replaces is not None:
            graph.add_edge(gone[b.replaces], key)
        if np.all(room[b.node] >= b.vec):
            room[b.node] -= b.vec  # fits in the room already free: no wait on evictions
        else:
            for wait in by_node.get(b.node, []):
                graph.add_edge(wait, key)
    order = list(nx.lexicographical_topological_sort(graph, key=_listing))
    ids = {n: i + 1 for i, n in enumerate(order)}
    return [
        StepSpec(
            id=ids[n],
            op=n[0],
            pod=n[1],
            replaces=n[2],
            node=graph.nodes[n]["node"],
            after=tuple(sorted(ids[p] for p in graph.predecessors(n))),
        )
        for n in order
    ]


def _listing(key: Key) -> tuple[int, bool, str]:
    op, pod, replaces = key
    return (step_kind(op).rank, replaces is not None, pod or replaces or "")
