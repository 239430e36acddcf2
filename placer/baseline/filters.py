"""kube-scheduler's filters for one pod over every node, in its plugin order, and what it reports.

Order (each node stops at its first failure): NodeUnschedulable, TaintToleration, NodeAffinity,
NodePorts, NodeResourcesFit, VolumeBinding (bound volumes' node affinity), PodTopologySpread,
InterPodAffinity. The FailedScheduling message counts, per reason, the nodes whose first failing
filter gave it (NodeResourcesFit gives one reason per insufficient resource). Preemption only
considers nodes whose first failure is one it may resolve (Unschedulable, not
UnschedulableAndUnresolvable): ports, resources, topology spread skew, (existing) anti-affinity.
A pod whose volumes no node can take fails in PreFilter, with that message, everywhere.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from placer.baseline.interpod import InterPodFilter, InterPodTrial
from placer.baseline.spread import SpreadFilter, SpreadTrial
from placer.baseline.topology import IntArray, Topology
from placer.engine import (
    UNSCHEDULABLE_TAINT,
    BoolArray,
    Prefilter,
    Snapshot,
    Tally,
    first_untolerated,
    fits,
    pod_vector,
)
from placer.models import Filter, PlainFilter, Pod, Reason, Taint

__all__ = ["NodeFacts", "PodFilters", "Trial"]

Step = tuple[BoolArray, PlainFilter | Taint, bool]  # failing nodes, what fails them, resolvable by preemption


class NodeFacts:
    """What the diagnosis reads of the nodes themselves, computed once per simulation."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.cordoned = np.array([n.unschedulable for n in snapshot.nodes], dtype=np.bool_)
        groups: dict[tuple[Taint, ...], list[int]] = {}
        for i, node in enumerate(snapshot.nodes):
            groups.setdefault(node.taints, []).append(i)
        self.taint_groups = [(taints, np.array(nodes, dtype=np.int64)) for taints, nodes in groups.items()]


class Trial:
    """The topology filters on one node during a preemption dry run (on their own copy of the
    PreFilter state, as kube-scheduler clones it per node), as pods leave and come back."""

    def __init__(self, node: int, spread: SpreadTrial | None, interpod: InterPodTrial | None) -> None:
        self.node, self._spread, self._interpod = node, spread, interpod

    def _update(self, pod: Pod, delta: int) -> None:
        for part in (self._spread, self._interpod):
            if part is not None:
                part.update(pod, self.node, delta)

    def remove(self, pod: Pod) -> None:
        self._update(pod, -1)

    def add(self, pod: Pod) -> None:
        self._update(pod, 1)

    def passes(self) -> bool:
        return all(part is None or part.passes(self.node) for part in (self._spread, self._interpod))


class PodFilters:
    """The filters for one pod against the current state (built again after anything changes)."""

    def __init__(self, snapshot: Snapshot, pre: Prefilter, facts: NodeFacts, topo: Topology, pod: Pod) -> None:
        self.snapshot, self.facts, self.topo, self.pod = snapshot, facts, topo, pod
        self.vec = pod_vector(pod, snapshot.resources)
        self.taint_ok = pre.taint_ok(pod)
        self.matching = pre.matching(pod)
        self.ports_ok = pre.ports_ok(pod)
        self.volumes_ok = pre.volumes_ok(pod)

    @cached_property
    def spread(self) -> SpreadFilter | None:
        return SpreadFilter.build(self.topo, self.pod, self.taint_ok, self.matching)

    @cached_property
    def interpod(self) -> InterPodFilter | None:
        return InterPodFilter.build(self.topo, self.pod)

    @cached_property
    def topology_steps(self) -> list[Step]:
        return [*(self.spread.steps() if self.spread else []), *(self.interpod.steps() if self.interpod else [])]

    @property
    def static_ok(self) -> BoolArray:
        """The filters no pod's removal changes: cordon, taints, node affinity, volumes."""
        return self.taint_ok & self.matching & self.volumes_ok

    def ok(self) -> BoolArray:
        """The nodes that pass every filter."""
        if self.pod.volume_problem:
            return np.zeros(len(self.snapshot.nodes), dtype=np.bool_)
        mask = self.static_ok & self.ports_ok & fits(self.snapshot, self.vec)
        if mask.any():
            for failing, _, _ in self.topology_steps:
                mask &= ~failing
        return mask

    def trial(self, node: int) -> Trial:
        return Trial(
            node,
            self.spread.trial() if self.spread else None,
            self.interpod.trial() if self.interpod else None,
        )

    def diagnose(self) -> tuple[Reason, BoolArray]:
        """Why no node passes (kube-scheduler's FailedScheduling message, as data), and the nodes
        preemption may help (their first failing filter is resolvable)."""
        n = len(self.snapshot.nodes)
        resolvable = np.zeros(n, dtype=np.bool_)
        if self.pod.volume_problem:
            return Reason(nodes=n, volumes=self.pod.volume_problem), resolvable
        tally = Tally(n)
        for failing, what, may in self._static_steps():
            resolvable[tally.take(failing, what)] = may
        resolvable[tally.resources(self.snapshot.free, self.vec, self.snapshot.resources)] = True
        if self.pod.volume_terms:
            tally.take(~self.volumes_ok, Filter.VOLUME_AFFINITY)
        for failing, what, may in self.topology_steps:
            resolvable[tally.take(failing, what)] = may
        return tally.reason(), resolvable

    def _static_steps(self) -> list[Step]:
        """Cordon, taints, node affinity and ports, as (failing, what fails them, resolvable)."""
        n = len(self.snapshot.nodes)
        steps: list[Step] = []
        if first_untolerated((UNSCHEDULABLE_TAINT,), self.pod.tolerations) is not None:
            steps.append((self.facts.cordoned, Filter.UNSCHEDULABLE, False))
        for taints, nodes in self.facts.taint_groups:
            taint = first_untolerated(taints, self.pod.tolerations)
            if taint is not None:
                steps.append((_mask(n, nodes), taint, False))
        steps.append((~self.matching, Filter.NODE_AFFINITY, False))
        if self.pod.host_ports:
            steps.append((~self.ports_ok, Filter.PORTS, True))
        return steps


def _mask(n: int, nodes: IntArray) -> BoolArray:
    mask = np.zeros(n, dtype=np.bool_)
    mask[nodes] = True
    return mask
