"""A batch of pending pods grouped into interchangeable classes, with candidate nodes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt

from placer.engine.domains import DomainLevel, compile_levels, fresh_domains, restrict
from placer.engine.keys import pod_key
from placer.engine.prefilter import PodMasks, Prefilter, fits
from placer.engine.quorums import Quorum, compile_quorums
from placer.engine.snapshot import Snapshot, pod_vector
from placer.engine.topology import (
    Topology,
    compile_topology,
    running_inter_pod_terms,
    topology_signature,
    uses_topology,
)
from placer.models import Config, Pod, TierScope
from placer.models.reasons import GangWait

__all__ = ["Batch", "Group", "build_batch", "gang_groups", "incomplete_gangs", "rebased"]


@dataclass
class Group:
    """Pending pods that are interchangeable for placement (same requests and constraints)."""

    pods: list[Pod]
    vec: npt.NDArray[np.int64]
    key: tuple[int, int]
    masks: PodMasks
    feasible: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    candidates: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    @property
    def size(self) -> int:
        return len(self.pods)

    @property
    def gang(self) -> str | None:
        return self.pods[0].gang_key

    @property
    def has_ports(self) -> bool:
        return bool(self.pods[0].host_ports)


@dataclass
class Batch:
    snapshot: Snapshot
    prefilter: Prefilter
    groups: list[Group]
    key_rank: dict[tuple[int, int], int]
    topology: Topology = field(default_factory=Topology)
    tiers: TierScope = "cluster"  # where restart tiers rank pods (``placer.engine.keys``)
    levels: tuple[DomainLevel, ...] = ()  # workload groups held in one topology domain (``domains``)
    quorums: tuple[Quorum, ...] = ()  # composite gangs: minGroupCount child groups or none (``quorums``)
    # Groups required affinity holds in one domain -> (domain of each node, the domain they take), as
    # ``candidates.select_candidates`` chose it (``held``).
    held: dict[int, tuple[npt.NDArray[np.int64], int]] = field(default_factory=dict)
    _fresh: dict[str, npt.NDArray[np.bool_]] = field(default_factory=dict, init=False, repr=False)  # ``fresh``
    _levels_of: dict[int, list[int]] | None = field(default=None, init=False, repr=False)  # ``levels_of``

    def fresh(self, key: str) -> npt.NDArray[np.bool_]:
        """``domains.fresh_domains`` of the batch's snapshot, computed once per key: the snapshot
        does not change while the batch is decided, and the greedy start asks once per group."""
        if key not in self._fresh:
            self._fresh[key] = fresh_domains(self.snapshot, key)
        return self._fresh[key]

    def levels_of(self, gis: Sequence[int]) -> list[DomainLevel]:
        """The levels holding some of the groups ``gis``, in the order of ``levels`` (the greedy
        start asks for every workload group it places: an index, not a scan of every level)."""
        if self._levels_of is None:
            self._levels_of = {}
            for li, level in enumerate(self.levels):
                for gi in level.groups:
                    self._levels_of.setdefault(gi, []).append(li)
        found = sorted({li for gi in gis for li in self._levels_of.get(gi, ())})
        return [self.levels[li] for li in found]

    @property
    def grouped(self) -> bool:
        """Workload groups' domains or composite gangs: what the heuristics that move pods one at
        a time (descent, neighbourhood search, top-up, the guard) know nothing of."""
        return bool(self.levels or self.quorums)

    def rank(self, group: Group) -> int:
        return self.key_rank[group.key]


def _signature(pod: Pod, topology: bool, tiers: TierScope) -> tuple[object, ...]:
    return (
        topology_signature(pod) if topology else None,
        pod.namespace if tiers == "namespace" else None,  # tiers rank pods of one namespace only
        pod.volume_terms,
        pod.volume_problem,
        tuple(sorted(pod.requests.items())),
        tuple(sorted(pod.node_selector.items())),
        pod.required_terms,
        pod.preferred_terms,
        pod.tolerations,
        pod.host_ports,
        pod.priority,
        pod.restart_policy,
        pod.preemption_policy,
        tuple(sorted(pod.annotations.items())),
        pod.unsupported,
        pod.gang_key,
        pod.group_domains,
        pod.group_quorums,
    )


def gang_groups(groups: Sequence[Group]) -> dict[str, list[int]]:
    """Gang -> indices of its member groups."""
    members: dict[str, list[int]] = {}
    for gi, group in enumerate(groups):
        if group.gang is not None:
            members.setdefault(group.gang, []).append(gi)
    return members


def incomplete_gangs(pending: Sequence[Pod], snapshot: Snapshot | None = None) -> dict[str, GangWait]:
    """Gangs of the batch that lack members (gang -> how many it waits for). Members already
    running (``snapshot``) count as present: a gang a crashed controller left partly bound is
    completed by placing the rest, all together, instead of waiting for ever."""
    members: dict[str, list[Pod]] = {}
    for pod in pending:
        key = pod.gang_key
        if key is not None:
            members.setdefault(key, []).append(pod)
    bound: dict[str, int] = {}
    if snapshot is not None and members:
        for pods_on_node in snapshot.running:
            for pod in pods_on_node:
                if pod.gang_key in members:
                    bound[pod.gang_key] = bound.get(pod.gang_key, 0) + 1
    out = {}
    for key, pods in members.items():
        want = max((p.gang_size or 0) for p in pods)
        if want > len(pods) + bound.get(key, 0):
            out[key] = GangWait(gang=key, size=want, pending=len(pods))
    return out


def pod_order(pod: Pod) -> tuple[str, str, str]:
    return (pod.creation, pod.namespace, pod.name)


def build_batch(snapshot: Snapshot, pending: Sequence[Pod], config: Config) -> Batch:
    prefilter = Prefilter(snapshot)
    by_sig: dict[tuple[object, ...], list[Pod]] = {}
    # Labels and namespace separate groups only when some selector of the batch could look at them.
    topology = any(uses_topology(p) for p in pending) or running_inter_pod_terms(snapshot)
    for pod in sorted(pending, key=pod_order):
        by_sig.setdefault(_signature(pod, topology, config.priority.restart_tiers), []).append(pod)
    groups: list[Group] = []
    free = snapshot.free
    waiting = incomplete_gangs(pending, snapshot)
    for pods in by_sig.values():
        first = pods[0]
        vec = pod_vector(first, snapshot.resources)
        masks = prefilter.masks(first)
        feasible = np.flatnonzero(masks.allowed & fits(snapshot, vec, free)).astype(np.int64)
        if first.gang_key in waiting:
            feasible = feasible[:0]  # an incomplete gang is never placed in part
        groups.append(
            Group(
                pods=pods,
                vec=vec,
                key=pod_key(first, restart_tiers=config.priority.restart_tiers),
                masks=masks,
                feasible=feasible,
            )
        )
    topo = compile_topology(
        snapshot,
        [g.pods[0] for g in groups],
        [g.masks.matching for g in groups],
        [prefilter.taint_ok(g.pods[0]) for g in groups] if topology else [],
        snapshot.namespaces,
    )
    for gi, group in enumerate(groups):
        static = topo.static.get(gi)
        pref = topo.preference.get(gi)
        if static is None and pref is None:
            continue
        allowed = group.masks.allowed & static.allowed if static is not None else group.masks.allowed
        preference = group.masks.preference + pref if pref is not None else group.masks.preference
        group.masks = replace(group.masks, allowed=allowed, preference=preference)
        group.feasible = group.feasible[allowed[group.feasible]]
    levels = compile_levels(snapshot, groups)
    restrict(levels, groups)
    keys = sorted({g.key for g in groups})
    return Batch(
        snapshot=snapshot,
        prefilter=prefilter,
        groups=groups,
        key_rank={k: i for i, k in enumerate(keys)},
        topology=topo,
        tiers=config.priority.restart_tiers,
        levels=levels,
        quorums=compile_quorums(snapshot, groups),
    )


def rebased(batch: Batch, snapshot: Snapshot, keys: Sequence[tuple[int, int]] = ()) -> Batch:
    """The same batch on a state with more room (running pods the global plan may evict taken
    out): groups, masks and inter-pod rules are kept, feasible nodes are recomputed for the new
    room, and the key ranks also cover ``keys`` (the evictable pods' keys)."""
    waiting = incomplete_gangs([p for g in batch.groups for p in g.pods], batch.snapshot)
    free = snapshot.free
    groups = []
    for g in batch.groups:
        feasible = np.flatnonzero(g.masks.allowed & fits(snapshot, g.vec, free)).astype(np.int64)
        if g.gang in waiting:
            feasible = feasible[:0]
        groups.append(Group(pods=g.pods, vec=g.vec, key=g.key, masks=g.masks, feasible=feasible))
    restrict(batch.levels, groups)
    ranked = sorted({g.key for g in groups} | set(keys))
    return Batch(
        snapshot=snapshot,
        prefilter=batch.prefilter,
        groups=groups,
        key_rank={k: i for i, k in enumerate(ranked)},
        topology=batch.topology,
        tiers=batch.tiers,
        levels=batch.levels,
        quorums=batch.quorums,
    )
