"""The validator's own index of one cluster (it shares no code with the engine's snapshot).

``ClusterIndex`` is what every check reads, computed once per validation: pods by key, the running
pods (a terminating running pod holds its room until it is gone; Succeeded/Failed pods hold
nothing), the nodes' labels (``NodeLabels``), each node with its pods (``NodeState``: capacity and
host ports) and the running pods per priority key. Also the batch: the pending pods addressed to
the scheduler, ungated, supported and not being deleted (a terminating pending pod is never placed
and is not part of the batch), and the room kube-scheduler holds for nominations.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from placer.models import (
    POD_COUNT,
    Cluster,
    HostPort,
    Node,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Pod,
)
from placer.validate.priorities import Key, Tiers, key_of
from placer.validate.semantics import (
    allocatable,
    demand,
    field_matches,
    ports_clash,
    requirement_matches,
    shortages,
)


class NodeLabels:
    """Which nodes match a selector, answered from the nodes' label values instead of node by node.

    A requirement reads one label, so it is decided once per distinct value of its key (and once
    for the nodes without the key) with ``requirement_matches`` itself; a term intersects its
    requirements' nodes, required affinity unites its terms', nodeSelector intersects its pairs'.
    Answers are cached per (nodeSelector, required terms): pods of one workload ask once.
    """

    def __init__(self, nodes: Iterable[Node]) -> None:
        self.nodes = {n.name: n for n in nodes}
        self.everyone = frozenset(self.nodes)
        self._values: dict[str, dict[str, set[str]]] = {}
        self._selections: dict[tuple[object, ...], frozenset[str]] = {}

    def _by_value(self, key: str) -> dict[str, set[str]]:
        if key not in self._values:
            out: dict[str, set[str]] = {}
            for name, node in self.nodes.items():
                if key in node.labels:
                    out.setdefault(node.labels[key], set()).add(name)
            self._values[key] = out
        return self._values[key]

    def requirement(self, req: NodeSelectorRequirement) -> set[str]:
        """The nodes whose labels satisfy one ``matchExpressions`` requirement."""
        by_value = self._by_value(req.key)
        out: set[str] = set()
        for value, names in by_value.items():
            if requirement_matches(req, {req.key: value}):
                out |= names
        if requirement_matches(req, {}):
            out |= self.everyone.difference(*by_value.values())
        return out

    def term(self, term: NodeSelectorTerm) -> set[str]:
        """The nodes a node selector term matches (``term_matches`` for every node)."""
        if not term.match_expressions and not term.match_fields:
            return set()
        out = set(self.everyone)
        for req in term.match_expressions:
            out &= self.requirement(req)
        for req in term.match_fields:
            out = {name for name in out if field_matches(req, self.nodes[name])}
        return out

    def matching(
        self, node_selector: Mapping[str, str], required_terms: Sequence[NodeSelectorTerm] | None
    ) -> frozenset[str]:
        """The nodes ``selector_matches`` accepts."""
        cache_key = (tuple(sorted(node_selector.items())), None if required_terms is None else tuple(required_terms))
        found = self._selections.get(cache_key)
        if found is None:
            out = set(self.everyone)
            for key, value in node_selector.items():
                out &= self._by_value(key).get(value, set())
            if required_terms is not None:
                out &= set().union(*(self.term(t) for t in required_terms))
            found = self._selections[cache_key] = frozenset(out)
        return found


# --- node state -------------------------------------------------------------------------------


@dataclass
class NodeState:
    """A node with the pods on it: running pods and batch pods placed there."""

    node: Node
    used: dict[str, int] = field(default_factory=dict)
    ports: list[tuple[str, HostPort]] = field(default_factory=list)  # (pod key, port)
    placed: list[Pod] = field(default_factory=list)

    def add(self, pod: Pod, *, batch: bool) -> None:
        for r, v in demand(pod).items():
            self.used[r] = self.used.get(r, 0) + v
        self.ports.extend((pod.key, p) for p in pod.host_ports)
        if batch:
            self.placed.append(pod)

    def remove(self, pod: Pod) -> None:
        """Take a batch pod off the node again (the inverse of ``add(pod, batch=True)``)."""
        self.release(pod)
        self.placed.remove(pod)

    def release(self, pod: Pod) -> None:
        """Free what the pod holds here (its resources and host ports)."""
        for r, v in demand(pod).items():
            self.used[r] -= v
        if pod.host_ports:
            self.ports = [(k, p) for k, p in self.ports if k != pod.key]

    def shortages(self, pod: Pod, *, without: Sequence[Pod] = ()) -> list[str]:
        """Resources the node lacks for one more pod (after taking ``without`` off), as reasons."""
        if not without:
            return shortages(self.node, self.used, pod)
        left = dict(self.used)
        for other in without:
            for r, v in demand(other).items():
                left[r] = left.get(r, 0) - v
        return shortages(self.node, left, pod)

    def port_clashes(self, pod: Pod, *, without: Sequence[Pod] = ()) -> list[str]:
        """Host ports of the pod already used on the node by another pod (not in ``without``)."""
        gone = {p.key for p in without} | {pod.key}
        return [
            f"host port {mine.protocol}/{mine.port} already used by {owner}"
            for mine in pod.host_ports
            for owner, theirs in self.ports
            if owner not in gone and ports_clash(mine, theirs)
        ]

    def room_problems(self, pod: Pod, *, without: Sequence[Pod] = ()) -> list[str]:
        """Why one more pod does not fit here now: resources and host ports."""
        return self.shortages(pod, without=without) + self.port_clashes(pod, without=without)

    def overload(self) -> dict[str, tuple[int, int]]:
        """Resources (including the pod count) whose use exceeds allocatable: (used, allocatable)."""
        return {
            r: (v, allocatable(self.node, r)) for r, v in sorted(self.used.items()) if v > allocatable(self.node, r)
        }


def final_states(cluster: Cluster, placed: Iterable[tuple[Pod, str]]) -> dict[str, NodeState]:
    """Every node with its running pods (Succeeded/Failed hold nothing) and the placed pods.

    ``placed`` holds (pod, node name) pairs whose node exists; running pods bound to a node that
    is not in the cluster are ignored.
    """
    return ClusterIndex(cluster).states(placed)


class ClusterIndex:
    """What every check reads from one cluster, computed once per validation instead of per check:
    the pods by key, the running pods (in the cluster's order, and by node with what they hold
    there), the nodes' labels (``NodeLabels``) and the running pods per priority key."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.nodes = {n.name: n for n in cluster.nodes}
        self.labels = NodeLabels(cluster.nodes)
        self.pods = _PodsByKey(cluster.pods)
        self.running_list: list[Pod] = []  # bound, not Succeeded/Failed, wherever (``running_pods``)
        self.running: dict[str, list[Pod]] = {name: [] for name in self.nodes}
        self._unbound: list[Pod] = []
        by_name = self.pods.by_name
        for pod in cluster.pods:  # one pass over what may be tens of thousands of pods
            if by_name.setdefault(pod.name, pod) is not pod:
                self.pods.namesake(pod)
            node_name = pod.node_name
            if node_name is None:
                self._unbound.append(pod)
            elif pod.running:
                self.running_list.append(pod)
                on = self.running.get(node_name)
                if on is not None:
                    on.append(pod)
        self._base: dict[str, NodeState] = {}
        self._keys: dict[Tiers, dict[Key, int]] = {}
        self._batches: dict[str, list[Pod]] = {}

    def batch(self, scheduler_name: str) -> list[Pod]:
        """``batch_pods`` (computed once per scheduler name)."""
        if scheduler_name not in self._batches:
            self._batches[scheduler_name] = _batch_of(self._unbound, scheduler_name)
        return self._batches[scheduler_name]

    def base(self, name: str) -> NodeState:
        """The node with its running pods only (computed once; never modified)."""
        state = self._base.get(name)
        if state is None:
            state = self._base[name] = NodeState(self.nodes[name])
            used, ports = state.used, state.ports
            for pod in self.running[name]:
                for r, v in pod.requests.items():
                    if v > 0 and r != POD_COUNT:
                        used[r] = used.get(r, 0) + v
                if pod.host_ports:
                    ports.extend((pod.key, p) for p in pod.host_ports)
            if self.running[name]:
                used[POD_COUNT] = len(self.running[name])
        return state

    def states(
        self, placed: Iterable[tuple[Pod, str]], *, gone: Collection[str] = (), nodes: Iterable[str] | None = None
    ) -> dict[str, NodeState]:
        """The nodes (every node, or ``nodes`` and those of ``placed``) with their running pods but
        ``gone`` (pod keys), and the ``placed`` pods."""
        placed = list(placed)
        names = self.nodes.keys() if nodes is None else {*nodes, *(name for _, name in placed)}
        states = {}
        for name in names:
            b = self.base(name)
            states[name] = NodeState(b.node, dict(b.used), list(b.ports))
        for key in gone:
            pod = self.pods.get(key)
            if pod is not None and pod.running and pod.node_name in states:
                states[pod.node_name].release(pod)
        for pod, node_name in placed:
            states[node_name].add(pod, batch=True)
        return states

    def running_keys(self, restart_tiers: Tiers) -> dict[Key, int]:
        """Running pods on nodes of the cluster, counted per priority key."""
        if restart_tiers not in self._keys:
            alike = Counter((p.priority, p.restart_policy) for pods in self.running.values() for p in pods)
            out: dict[Key, int] = {}
            for (priority, policy), count in alike.items():
                key = key_of(priority, policy, restart_tiers)
                out[key] = out.get(key, 0) + count
            self._keys[restart_tiers] = out
        return self._keys[restart_tiers]


class _PodsByKey(Mapping[str, Pod]):
    """The cluster's pods by ``namespace/name``, indexed by name (``ClusterIndex`` fills
    ``by_name`` and reports namesakes): a check looks up a few keys, and formatting every pod's
    key would cost more than the lookups."""

    def __init__(self, pods: Sequence[Pod]) -> None:
        self._pods = pods
        self.by_name: dict[str, Pod] = {}  # the first pod of each name
        self._namesakes: dict[str, list[Pod]] = {}  # names used in several namespaces

    def namesake(self, pod: Pod) -> None:
        """Another pod of a name already in ``by_name``."""
        self._namesakes.setdefault(pod.name, [self.by_name[pod.name]]).append(pod)

    def _named(self, name: str) -> list[Pod]:
        if name in self._namesakes:
            return self._namesakes[name]
        found = self.by_name.get(name)
        return [] if found is None else [found]

    def __getitem__(self, key: str) -> Pod:
        namespace, _, name = key.partition("/")
        for pod in self._named(name):
            if pod.namespace == namespace:
                return pod
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return (p.key for p in self._pods)

    def __len__(self) -> int:
        return len(self._pods)


class FreeRoom:
    """Free room per node on the resources some pods ask for, as one matrix (nodes by name): the
    nodes with room for a pod's requests at once, so the exact per-node checks (``NodeState``,
    eligibility, topology) run only where the pod could fit. Call ``refresh`` after a state changes."""

    def __init__(self, states: Mapping[str, NodeState], pods: Iterable[Pod]) -> None:
        self.states = states
        self.names = sorted(states)
        self.row = {name: i for i, name in enumerate(self.names)}
        self.resources = sorted({r for p in pods for r in demand(p)} | {POD_COUNT})
        self.col = {r: j for j, r in enumerate(self.resources)}
        rows = [self._row(states[name]) for name in self.names]
        self.free = _matrix(rows, len(self.resources))

    def _row(self, state: NodeState) -> list[int]:
        return [allocatable(state.node, r) - state.used.get(r, 0) for r in self.resources]

    def refresh(self, name: str) -> None:
        self.free[self.row[name]] = _matrix([self._row(self.states[name])], len(self.resources))[0]

    def with_room(self, pod: Pod) -> list[str]:
        """The nodes (by name) where the pod's requests fit the free room; every node when the pod
        asks for a resource the matrix does not hold."""
        need = [0] * len(self.resources)
        for r, v in demand(pod).items():
            if r not in self.col:
                return list(self.names)
            need[self.col[r]] = v
        fits = (self.free >= _matrix([need], len(need))).all(axis=1)
        return [self.names[i] for i in np.flatnonzero(fits)]


def _matrix(rows: Sequence[Sequence[int]], width: int) -> npt.NDArray[np.int64] | npt.NDArray[np.object_]:
    """Exact integers as an int64 matrix, or as Python integers where a value leaves int64."""
    try:
        return np.array(rows, dtype=np.int64).reshape(len(rows), width)
    except OverflowError:
        return np.array(rows, dtype=object).reshape(len(rows), width)


# --- the batch ---------------------------------------------------------------------------------


def addressed(name: str, scheduler_name: str) -> bool:
    """A pod (or template) naming scheduler ``name`` is ``scheduler_name``'s (``"*"``: any scheduler's)."""
    return scheduler_name in ("*", name)


def batch_pods(cluster: Cluster, scheduler_name: str = "placer") -> list[Pod]:
    """Pending pods the scheduler must consider: addressed to it, ungated, supported and not being
    deleted (a terminating pod is never placed)."""
    return _batch_of(cluster.pods, scheduler_name)


def _batch_of(pods: Iterable[Pod], scheduler_name: str) -> list[Pod]:
    return [
        p
        for p in pods
        if p.node_name is None
        and p.pending
        and addressed(p.scheduler_name, scheduler_name)
        and not p.scheduling_gates
        and p.unsupported is None
        and not p.terminating
    ]


def holding_nominations(cluster: Cluster, scheduler_name: str = "placer") -> Cluster:
    """The cluster with room held for nominations, as kube-scheduler holds it: a pending pod that
    is not the scheduler's to place, with ``status.nominatedNodeName`` on a node of the cluster and
    a priority at least the lowest of the scheduler's pending pods, counts as running there."""
    batch = batch_pods(cluster, scheduler_name)
    if not batch:
        return cluster
    lowest = min(p.priority for p in batch)
    keys = {p.key for p in cluster.pods if addressed(p.scheduler_name, scheduler_name) and not p.scheduling_gates}
    nodes = {n.name for n in cluster.nodes}
    held = [
        p.model_copy(update={"name": f"{p.name}~nominated", "node_name": p.nominated_node, "phase": "Running"})
        for p in cluster.pods
        if p.pending and p.key not in keys and p.nominated_node in nodes and not p.terminating and p.priority >= lowest
    ]
    return cluster.model_copy(update={"pods": (*cluster.pods, *held)}) if held else cluster


def running_pods(cluster: Cluster) -> list[Pod]:
    """The pods holding a node now (bound, not Succeeded/Failed)."""
    return [p for p in cluster.pods if p.running]
