"""kube-scheduler's PodTopologySpread plugin (v1.36), simulated.

Filter, for the pod's DoNotSchedule constraints. Eligible nodes have every topology key of those
constraints and, per constraint, pass its inclusion policies (nodeAffinityPolicy Honor: the pod's
nodeSelector and required node affinity; nodeTaintsPolicy Honor: its NoSchedule/NoExecute taints
tolerated). A domain is a value of the key among eligible nodes; its count is the placed pods in
the pod's namespace, not terminating, matching the selector, on eligible nodes of the domain. A node
without some key fails as "missing required label" (not resolvable by preemption); otherwise it
fails when ``count + selfMatch - min > maxSkew``, where ``min`` is the smallest domain count, or 0
when there are fewer domains than ``minDomains`` (default 1). The minimum is tracked as upstream
does, with two "critical paths" per constraint; preemption's dry run updates them pod by pod.

Score, for the ScheduleAnyway constraints, or for a pod without any constraint the system
defaults (hostname maxSkew 3, zone maxSkew 5, selector of the owning ReplicaSet) when asked.
Nodes missing a key are ignored (score 0) unless the constraints are the system defaults. Per
constraint, the node's domain count (for ``kubernetes.io/hostname``: the node's own pods) times
log(domains + 2), plus maxSkew - 1, summed, rounded; normalised as 100 x (max + min - s) / max.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from placer.baseline.topology import ABSENT, IntArray, Topology
from placer.engine import BoolArray, selector_matches
from placer.models import Filter, LabelSelector, PlainFilter, Pod, SpreadConstraint

__all__ = [
    "HOSTNAME",
    "ZONE",
    "SpreadFilter",
    "SpreadTrial",
    "default_constraints",
    "spread_scores",
]

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
MAX = 100
_MAX_INT32 = 2**31 - 1
_SYSTEM_DEFAULTS = (
    SpreadConstraint(max_skew=3, topology_key=HOSTNAME, when_unsatisfiable="ScheduleAnyway"),
    SpreadConstraint(max_skew=5, topology_key=ZONE, when_unsatisfiable="ScheduleAnyway"),
)


def default_constraints(topo: Topology, pod: Pod) -> tuple[SpreadConstraint, ...]:
    """The system default constraints with the selector of the pod's owning ReplicaSet (none
    without one, or when its selector has no requirement)."""
    if pod.owner is None or pod.owner.kind != "ReplicaSet":
        return ()
    rs = topo.replicasets.get((pod.namespace, pod.owner.name))
    selector = rs.selector if rs is not None else None
    if selector is None or not (selector.match_labels or selector.match_expressions):
        return ()
    return tuple(c.model_copy(update={"selector": selector}) for c in _SYSTEM_DEFAULTS)


def _constraints(topo: Topology, pod: Pod, when: str) -> tuple[tuple[SpreadConstraint, ...], bool]:
    """The pod's constraints of one kind, or the system defaults; and whether they are the defaults."""
    if pod.spread:
        return tuple(c for c in pod.spread if c.when_unsatisfiable == when), False
    if not topo.default_spreading:
        return (), False
    return tuple(c for c in default_constraints(topo, pod) if c.when_unsatisfiable == when), True


def _included(c: SpreadConstraint, taint_ok: BoolArray, matching: BoolArray) -> BoolArray:
    mask = np.ones(len(taint_ok), dtype=np.bool_)
    if c.node_affinity_policy == "Honor":
        mask &= matching
    if c.node_taints_policy == "Honor":
        mask &= taint_ok
    return mask


def _pods_per_node(topo: Topology, pod: Pod, selector: LabelSelector | None) -> IntArray:
    """Placed pods per node in the pod's namespace, not terminating, that the selector matches."""
    found = topo.placed.select(selector, lambda ns: ns == pod.namespace)
    nodes = [node for other, node in found if not other.terminating]
    return np.bincount(np.asarray(nodes, dtype=np.int64), minlength=len(topo.domains.nodes)).astype(np.int64)


class Paths:
    """Two critical paths of a constraint: ``nums[0]`` is the smallest domain count. Like upstream,
    the second is not guaranteed to be the second smallest once counts go up again."""

    def __init__(self) -> None:
        self.values = ["", ""]
        self.nums = [_MAX_INT32, _MAX_INT32]

    def copy(self) -> Paths:
        out = Paths()
        out.values, out.nums = list(self.values), list(self.nums)
        return out

    def update(self, value: str, num: int) -> None:
        if value in self.values:
            self.nums[self.values.index(value)] = num
            if self.nums[0] > self.nums[1]:
                self.values.reverse()
                self.nums.reverse()
        elif num < self.nums[0]:
            self.values, self.nums = [value, self.values[0]], [num, self.nums[0]]
        elif num < self.nums[1]:
            self.values[1], self.nums[1] = value, num


@dataclass
class Hard:
    """One DoNotSchedule constraint, with its PreFilter state for the incoming pod."""

    constraint: SpreadConstraint
    codes: IntArray
    values: list[str]
    eligible: BoolArray
    counts: dict[str, int]
    paths: Paths
    self_match: int

    def minimum(self, paths: Paths) -> int:
        return 0 if len(self.counts) < (self.constraint.min_domains or 1) else paths.nums[0]


class SpreadFilter:
    """The PodTopologySpread filter for one pod over every node."""

    def __init__(self, topo: Topology, pod: Pod, hard: list[Hard], has_all: BoolArray) -> None:
        self.topo, self.pod, self.hard, self.has_all = topo, pod, hard, has_all

    @classmethod
    def build(cls, topo: Topology, pod: Pod, taint_ok: BoolArray, matching: BoolArray) -> SpreadFilter | None:
        constraints, _ = _constraints(topo, pod, "DoNotSchedule")
        if not constraints:
            return None
        has_all = topo.domains.has_all(c.topology_key for c in constraints)
        hard = [_hard(topo, pod, c, has_all & _included(c, taint_ok, matching)) for c in constraints]
        return cls(topo, pod, hard, has_all)

    def steps(self) -> list[tuple[BoolArray, PlainFilter, bool]]:
        """(failing nodes, reason, resolvable) per check, in upstream order: each constraint's key, then its skew."""
        out: list[tuple[BoolArray, PlainFilter, bool]] = []
        for h in self.hard:
            present = h.codes != ABSENT
            skew = self.topo.domains.per_node(h.constraint.topology_key, h.counts) + h.self_match - h.minimum(h.paths)
            out.append((~present, Filter.SPREAD_LABEL, False))
            out.append((present & (skew > h.constraint.max_skew), Filter.SPREAD, True))
        return out

    def trial(self) -> SpreadTrial:
        return SpreadTrial(self)


def _hard(topo: Topology, pod: Pod, c: SpreadConstraint, eligible: BoolArray) -> Hard:
    codes, values = topo.domains.codes(c.topology_key), topo.domains.values(c.topology_key)
    per_node = _pods_per_node(topo, pod, c.selector)
    totals = np.zeros(len(values), dtype=np.int64)
    np.add.at(totals, codes[eligible], per_node[eligible])
    counts = {values[d]: int(totals[d]) for d in np.unique(codes[eligible]).tolist()}
    paths = Paths()
    for value, num in counts.items():
        paths.update(value, num)
    return Hard(c, codes, values, eligible, counts, paths, int(selector_matches(c.selector, pod.labels)))


class SpreadTrial:
    """The filter on a copy of the PreFilter state, as preemption's dry run removes and re-adds pods."""

    def __init__(self, spread: SpreadFilter) -> None:
        self._f = spread
        self._diff: list[dict[str, int]] = [{} for _ in spread.hard]
        self._paths = [h.paths.copy() for h in spread.hard]

    def _count(self, i: int, value: str) -> int:
        return self._diff[i].get(value, self._f.hard[i].counts.get(value, 0))

    def update(self, pod: Pod, node: int, delta: int) -> None:
        if pod.namespace != self._f.pod.namespace or not self._f.has_all[node]:
            return
        for i, h in enumerate(self._f.hard):
            if h.eligible[node] and selector_matches(h.constraint.selector, pod.labels):
                value = h.values[int(h.codes[node])]
                self._diff[i][value] = self._count(i, value) + delta
                self._paths[i].update(value, self._diff[i][value])

    def passes(self, node: int) -> bool:
        for i, h in enumerate(self._f.hard):
            code = int(h.codes[node])
            if code == ABSENT:
                return False
            skew = self._count(i, h.values[code]) + h.self_match - h.minimum(self._paths[i])
            if skew > h.constraint.max_skew:
                return False
        return True


def spread_scores(topo: Topology, pod: Pod, feasible: IntArray, taint_ok: BoolArray, matching: BoolArray) -> IntArray:
    """PodTopologySpread's normalised score (0-100) of each feasible node."""
    constraints, defaulted = _constraints(topo, pod, "ScheduleAnyway")
    if not constraints:
        return np.zeros(len(feasible), dtype=np.int64)
    dom = topo.domains
    # Only the system defaults let nodes without every key be scored (hostname spreading without zones).
    has_all = dom.has_all(c.topology_key for c in constraints) if not defaulted else np.ones(len(dom.nodes), np.bool_)
    scored = has_all[feasible]
    total = np.zeros(len(feasible), dtype=np.float64)
    for c in constraints:
        present = dom.codes(c.topology_key)[feasible] != ABSENT
        count, weight = _soft_counts(topo, pod, c, feasible[scored], has_all & _included(c, taint_ok, matching))
        total += np.where(present, count[feasible] * weight + float(c.max_skew - 1), 0.0)
    return _normalise(_round_half_away(total), scored)


def _soft_counts(
    topo: Topology, pod: Pod, c: SpreadConstraint, scored: IntArray, eligible: BoolArray
) -> tuple[IntArray, float]:
    """Per node, the count the score uses (its domain's, or its own for hostname), and the
    constraint's weight log(domains among the scored nodes + 2)."""
    per_node = _pods_per_node(topo, pod, c.selector)
    if c.topology_key == HOSTNAME:
        return per_node, math.log(len(scored) + 2)
    codes = _value_codes(topo, c.topology_key)
    totals = np.zeros(int(codes.max(initial=0)) + 1, dtype=np.int64)
    np.add.at(totals, codes[eligible], per_node[eligible])
    return totals[codes], math.log(len(np.unique(codes[scored])) + 2)


def _value_codes(topo: Topology, key: str) -> IntArray:
    """Value codes of ``key`` where a node without the label has the value "" (as Go's map lookup)."""
    codes, values = topo.domains.codes(key), topo.domains.values(key)
    empty = topo.domains.code(key, "")
    return np.where(codes == ABSENT, empty if empty != ABSENT else len(values), codes)


def _round_half_away(x: npt.NDArray[np.float64]) -> IntArray:
    """Go's math.Round (halves away from zero) for non-negative values."""
    low = np.floor(x)
    return (low + (x - low >= 0.5)).astype(np.int64)


def _normalise(raw: IntArray, scored: BoolArray) -> IntArray:
    out = np.zeros(len(raw), dtype=np.int64)
    if not scored.any():
        return out
    low, high = int(raw[scored].min()), int(raw[scored].max())
    out[scored] = MAX if high == 0 else MAX * (high + low - raw[scored]) // high
    return out
