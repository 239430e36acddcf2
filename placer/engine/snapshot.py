"""The cluster state the engine works on: capacity and usage matrices, node lookups."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from placer.engine.labels import NodeLabels
from placer.models import POD_COUNT, HostPort, Node, Pod

__all__ = ["DEFAULT_MAX_PODS", "IntMatrix", "Snapshot", "build_snapshot", "looks_at_incoming", "pod_vector"]

IntMatrix = npt.NDArray[np.int64]
DEFAULT_MAX_PODS = 110  # kubelet's default --max-pods, for hand-written nodes that omit "pods"
_LIMIT = 2**62


def _check(value: int, what: str) -> int:
    if value >= _LIMIT:
        raise OverflowError(f"{what} = {value} does not fit in 62 bits")
    return value


def looks_at_incoming(pod: Pod) -> bool:
    """A running pod whose terms look at incoming pods: required anti-affinity (hard) and the
    preferred forms (kube-scheduler scores existing pods' preferred terms that match the incoming pod)."""
    return bool(pod.pod_anti_affinity or pod.pod_affinity_preferred or pod.pod_anti_affinity_preferred)


@dataclass
class Snapshot:
    nodes: tuple[Node, ...]
    resources: tuple[str, ...]
    alloc: IntMatrix
    used: IntMatrix
    labels: NodeLabels
    index: dict[str, int]
    ports: dict[int, list[HostPort]] = field(default_factory=dict)
    running: list[list[Pod]] = field(default_factory=list)
    # Namespace labels (Cluster.namespaces), for namespaceSelector in pod affinity terms.
    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)
    # How many running pods look at incoming pods (kept by add/remove, so that a batch learns
    # whether it needs the topology compiler without scanning every running pod).
    watchers: int = -1

    def __post_init__(self) -> None:
        if self.watchers < 0:
            self.watchers = sum(looks_at_incoming(p) for pods in self.running for p in pods)

    @property
    def free(self) -> IntMatrix:
        return self.alloc - self.used

    def column(self, resource: str) -> int:
        return self.resources.index(resource)

    def add(self, pod: Pod, node: int) -> None:
        """Account a pod's requests (and host ports) on a node."""
        self.used[node] += pod_vector(pod, self.resources)
        if pod.host_ports:
            self.ports.setdefault(node, []).extend(pod.host_ports)
        self.running[node].append(pod)
        self.watchers += looks_at_incoming(pod)

    def remove(self, pod: Pod, node: int) -> None:
        """Release what a pod held on a node (it was evicted or is being re-planned)."""
        self.used[node] -= pod_vector(pod, self.resources)
        if pod.host_ports and node in self.ports:
            for port in pod.host_ports:
                self.ports[node].remove(port)
        kept = [p for p in self.running[node] if p.key != pod.key]
        self.watchers -= sum(looks_at_incoming(p) for p in self.running[node]) - sum(looks_at_incoming(p) for p in kept)
        self.running[node] = kept

    def copy(self) -> Snapshot:
        return Snapshot(
            nodes=self.nodes,
            resources=self.resources,
            alloc=self.alloc,
            used=self.used.copy(),
            labels=self.labels,
            index=self.index,
            ports={k: list(v) for k, v in self.ports.items()},
            running=[list(r) for r in self.running],
            namespaces=self.namespaces,
            watchers=self.watchers,
        )


def pod_vector(pod: Pod, resources: Sequence[str]) -> IntMatrix:
    vec = np.zeros(len(resources), dtype=np.int64)
    for j, name in enumerate(resources):
        vec[j] = 1 if name == POD_COUNT else _check(pod.requests.get(name, 0), f"{pod.key} {name}")
    return vec


def build_snapshot(
    nodes: Sequence[Node],
    running: Iterable[Pod],
    pending: Iterable[Pod],
    namespaces: dict[str, dict[str, str]] | None = None,
) -> Snapshot:
    running = list(running)
    names: set[str] = {POD_COUNT, "cpu", "memory"}
    for node in nodes:
        names.update(node.allocatable)
    for pod in [*running, *pending]:
        names.update(pod.requests)
    resources = tuple(sorted(names, key=lambda r: (r not in ("cpu", "memory", "ephemeral-storage", POD_COUNT), r)))
    alloc = np.zeros((len(nodes), len(resources)), dtype=np.int64)
    for i, node in enumerate(nodes):
        for j, name in enumerate(resources):
            default = DEFAULT_MAX_PODS if name == POD_COUNT else 0
            alloc[i, j] = _check(node.allocatable.get(name, default), f"node {node.name} {name}")
    index = {n.name: i for i, n in enumerate(nodes)}
    snap = Snapshot(
        nodes=tuple(nodes),
        resources=resources,
        alloc=alloc,
        used=np.zeros_like(alloc),
        labels=NodeLabels(nodes),
        index=index,
        running=[[] for _ in nodes],
        namespaces=namespaces or {},
    )
    rows: list[list[int]] = []
    at: list[int] = []
    for pod in running:
        if pod.node_name is not None and pod.node_name in index and pod.running:
            n = index[pod.node_name]
            rows.append([1 if r == POD_COUNT else pod.requests.get(r, 0) for r in resources])
            at.append(n)
            if pod.host_ports:
                snap.ports.setdefault(n, []).extend(pod.host_ports)
            snap.running[n].append(pod)
            snap.watchers += looks_at_incoming(pod)
    if rows:
        np.add.at(snap.used, np.array(at, dtype=np.int64), np.array(rows, dtype=np.int64))
    return snap
