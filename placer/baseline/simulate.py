"""kube-scheduler, simulated: one pod at a time, filter then score, in queue order.

Queue: priority (highest first), then creation time, then namespace/name. Filters, in
kube-scheduler's order (see ``filters``): the same feasibility as placer (cordon, taints,
nodeSelector/affinity, host ports, resources) without placer's weak-binding annotations, then
bound volumes' node affinity, PodTopologySpread and InterPodAffinity (``spread``, ``interpod``);
pods placed earlier in the simulation count as running. Scores, as current kube-scheduler computes
them (0-100, integer arithmetic, default plugin weights): NodeResourcesFit with LeastAllocated
(``default``) or MostAllocated (``most-requested``) over cpu and memory, BalancedAllocation
(1 - std of the capped fractions) x 100, TaintToleration (weight 3) and NodeAffinity (weight 2),
each normalised over the feasible nodes, PodTopologySpread (weight 2) and InterPodAffinity
(weight 2), normalised as those plugins do. Scoring counts 100m cpu / 200Mi memory for containers
without requests. Ties go to the node that sorts first by name. The system default spreading
constraints (hostname and zone, ScheduleAnyway, the owning ReplicaSet's selector) apply to pods
without constraints only when ``default_spreading`` asks for them. Pods of a Workload API gang,
or of a PodGroup with a topology key, are scheduled group by group as kube-scheduler 1.37 does
(``groups``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from placer.baseline.filters import NodeFacts, PodFilters
from placer.baseline.groups import group_of, schedule_group
from placer.baseline.interpod import interpod_scores
from placer.baseline.preemption import preempt
from placer.baseline.spread import spread_scores
from placer.baseline.topology import Topology
from placer.engine import Prefilter, Snapshot, fits, pod_vector, refused
from placer.models import Baseline, Pod, PodDisruptionBudget, Reason, ReplicaSet, UnplacedCode

__all__ = ["OutOfTimeError", "SimResult", "simulate"]

MAX = 100
W_FIT, W_BALANCED, W_TAINT, W_AFFINITY, W_SPREAD, W_INTERPOD = 1, 1, 3, 2, 2, 2


@dataclass
class SimResult:
    placements: list[tuple[Pod, int]]
    unplaced: list[tuple[Pod, UnplacedCode, Reason]]
    seconds: float
    preemptions: list[tuple[Pod, int, Pod]] = field(default_factory=list)  # (victim, node, preemptor)
    stopped: bool = False  # the deadline came first: the pods after the last one tried were not weighed


class OutOfTimeError(Exception):
    """A simulation given a deadline reached it (``_Run.check_time``)."""


def queue_order(pod: Pod) -> tuple[int, str, str, str]:
    return (-pod.priority, pod.creation, pod.namespace, pod.name)


def _normalise(raw: npt.NDArray[np.int64], *, reverse: bool) -> npt.NDArray[np.int64]:
    top = int(raw.max()) if len(raw) else 0
    if top == 0:
        return np.full(len(raw), MAX if reverse else 0, dtype=np.int64)
    scaled = raw * MAX // top
    return MAX - scaled if reverse else scaled


def simulate(
    snapshot: Snapshot,
    pending: Sequence[Pod],
    scoring: Baseline = "default",
    *,
    pdbs: Sequence[PodDisruptionBudget] = (),
    preemption: bool = True,
    namespaces: Mapping[str, Mapping[str, str]] | None = None,
    replicasets: Sequence[ReplicaSet] = (),
    default_spreading: bool = False,
    deadline: float | None = None,
) -> SimResult:
    """Place ``pending`` one at a time; ``snapshot`` is updated in place (victims removed, pods added).

    ``namespaces`` (name -> labels) serve namespaceSelector; ``replicasets`` and
    ``default_spreading`` the system default spreading constraints. With ``deadline`` (a
    ``time.monotonic()`` instant) the simulation stops there, between two pods, and says so
    (``stopped``): a caller inside a decision's budget cannot wait for a large one."""
    started = time.monotonic()
    run = _Run(snapshot, scoring, Topology.build(snapshot, namespaces, replicasets, default_spreading), deadline)
    queue = sorted(pending, key=queue_order)
    groups: dict[str, list[Pod]] = {}
    for pod in queue:
        gid = group_of(pod) if not pod.unsupported else None
        if gid is not None:
            groups.setdefault(gid, []).append(pod)
    stopped = False
    try:
        for pod in queue:
            run.check_time()
            gid = group_of(pod) if not pod.unsupported else None
            if gid is None:
                run.schedule(pod, pdbs, preemption=preemption)
            elif gid in groups:  # Kubernetes 1.37: the group is scheduled as one unit (``groups``)
                schedule_group(run, groups.pop(gid))
    except OutOfTimeError:
        stopped = True
    return SimResult(
        placements=run.placements,
        unplaced=run.unplaced,
        seconds=time.monotonic() - started,
        preemptions=run.preemptions,
        stopped=stopped,
    )


class _Run:
    """One simulation: the state it updates and what it records."""

    def __init__(self, snap: Snapshot, scoring: Baseline, topo: Topology, deadline: float | None = None) -> None:
        self.snap, self.scoring, self.topo = snap, scoring, topo
        self.deadline = deadline
        self.pre = Prefilter(snap)
        self.facts = NodeFacts(snap)
        cpu, mem = snap.column("cpu"), snap.column("memory")
        self.alloc_cm = snap.alloc[:, [cpu, mem]]
        self.nonzero = np.zeros((len(snap.nodes), 2), dtype=np.int64)
        rows = [(i, p.score_cpu, p.score_memory) for i, pods in enumerate(snap.running) for p in pods]
        if rows:
            table = np.array(rows, dtype=np.int64)
            np.add.at(self.nonzero, table[:, 0], table[:, 1:])
        self.name_rank = np.argsort(np.argsort(np.array([n.name for n in snap.nodes])))
        self.placements: list[tuple[Pod, int]] = []
        self.unplaced: list[tuple[Pod, UnplacedCode, Reason]] = []
        self.preemptions: list[tuple[Pod, int, Pod]] = []
        self.start_free = snap.free.copy()  # room before the first pod, for ``_code``

    def check_time(self) -> None:
        """Raise ``OutOfTimeError`` once the deadline has passed (between two pods, or two members
        of a group's trial placement, which is undone)."""
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise OutOfTimeError

    def _filters(self, pod: Pod) -> PodFilters:
        return PodFilters(self.snap, self.pre, self.facts, self.topo, pod)

    def schedule(self, pod: Pod, pdbs: Sequence[PodDisruptionBudget], *, preemption: bool) -> None:
        if pod.unsupported:
            self.unplaced.append(refused(pod, len(self.snap.nodes)))
            return
        filters = self._filters(pod)
        nodes = np.flatnonzero(filters.ok())
        if len(nodes) == 0:
            reason, candidates = filters.diagnose()
            found = preempt(self.snap, filters, candidates, pdbs, self.name_rank.tolist()) if preemption else None
            if found is None:
                self.unplaced.append((pod, self._code(pod), reason))
                return
            for victim in found.victims:
                self._evict(victim, found.node, pod)
            # The preemptor is nominated to the node: the next cycle takes it if the pod passes there.
            filters = self._filters(pod)
            ok = filters.ok()
            if not ok.any():
                self.unplaced.append((pod, self._code(pod), filters.diagnose()[0]))
                return
            nodes = np.array([found.node]) if ok[found.node] else np.flatnonzero(ok)
        self._place(pod, self._best(pod, filters, nodes))

    def _code(self, pod: Pod) -> UnplacedCode:
        """``Outranked`` when a node that had room for the pod before the first pod was placed has
        none left and received pods placed before it (the queue puts higher priorities, then older
        pods, first); ``Unschedulable`` otherwise."""
        taken = sorted({n for _, n in self.placements})
        if not taken:
            return "Unschedulable"
        vec = pod_vector(pod, self.snap.resources)
        filled = self.pre.masks(pod).allowed & fits(self.snap, vec, self.start_free) & ~fits(self.snap, vec)
        return "Outranked" if bool(filled[taken].any()) else "Unschedulable"

    def _place(self, pod: Pod, node: int) -> None:
        self.placements.append((pod, node))
        self.snap.add(pod, node)
        self.topo.add(pod, node)
        self.nonzero[node] += (pod.score_cpu, pod.score_memory)

    def _unplace(self, pod: Pod, node: int) -> None:
        """Undo the last ``_place`` (a pod group's trial placement)."""
        assert self.placements[-1] == (pod, node)
        self.placements.pop()
        self.snap.remove(pod, node)
        self.topo.remove(pod, node)
        self.nonzero[node] -= (pod.score_cpu, pod.score_memory)

    def _evict(self, victim: Pod, node: int, by: Pod) -> None:
        self.snap.remove(victim, node)
        self.topo.remove(victim, node)
        self.nonzero[node] -= (victim.score_cpu, victim.score_memory)
        self.preemptions.append((victim, node, by))

    def _best(self, pod: Pod, filters: PodFilters, nodes: npt.NDArray[np.int64]) -> int:
        if len(nodes) == 1:
            return int(nodes[0])
        taint = _normalise(self.pre.prefer_penalty(pod)[nodes], reverse=True)
        affinity = np.zeros(len(nodes), dtype=np.int64)
        for term in pod.preferred_terms:
            affinity += term.weight * self.snap.labels.term(term.preference)[nodes]
        total = self._resource_scores(pod, nodes) + W_TAINT * taint + W_AFFINITY * _normalise(affinity, reverse=False)
        total += W_SPREAD * spread_scores(self.topo, pod, nodes, filters.taint_ok, filters.matching)
        total += W_INTERPOD * interpod_scores(self.topo, pod, nodes)
        return int(nodes[np.lexsort((self.name_rank[nodes], -total))[0]])

    def _resource_scores(self, pod: Pod, nodes: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """NodeResourcesFit (weight 1) plus BalancedAllocation (weight 1)."""
        req = self.nonzero[nodes] + (pod.score_cpu, pod.score_memory)
        cap = self.alloc_cm[nodes]
        safe = np.where(cap > 0, cap, 1)
        if self.scoring == "most-requested":
            per = np.where((cap > 0) & (req <= cap), req * MAX // safe, 0)
        else:
            per = np.where((cap > 0) & (req <= cap), (cap - req) * MAX // safe, 0)
        fit = per.sum(axis=1) // 2
        frac = np.minimum(np.where(cap > 0, req / safe, 1.0), 1.0)
        std = np.abs(frac[:, 0] - frac[:, 1]) / 2
        balanced = ((1 - std) * MAX).astype(np.int64)
        return W_FIT * fit + W_BALANCED * balanced  # type: ignore[no-any-return]
