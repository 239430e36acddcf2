"""Independent checker of placements: Kubernetes semantics re-implemented from the docs.

This module shares no code with ``placer.engine`` (an import-linter contract enforces it): every
rule below is written again from the Kubernetes documentation and docs/architecture.md, in plain Python, one
small function per rule, so that a bug in the engine is not silently repeated here.

Rules:

- labels: ``nodeSelector`` needs every key=value pair on the node; required node affinity terms
  are ORed, the requirements inside a term ANDed; a term with no requirement matches nothing and
  an empty list of terms matches nothing; ``NotIn``/``DoesNotExist`` hold when the key is absent;
  ``Gt``/``Lt`` parse both sides as Go's ``strconv.ParseInt(s, 10, 64)`` does (optional sign,
  ASCII digits, int64 range) and never match otherwise; ``matchFields`` reads ``metadata.name``;
- taints: ``NoSchedule`` and ``NoExecute`` taints need a toleration (``PreferNoSchedule`` is soft);
  a cordoned node behaves as if it had the taint ``node.kubernetes.io/unschedulable:NoSchedule``;
- host ports: two pods on one node never use the same port and protocol with equal host IPs or
  either host IP ``0.0.0.0``; running pods count;
- capacity: on every resource a pod requests, plus the pod count (``pods`` allocatable, 110 when
  the node omits it), running pods and placed pods together fit the node's allocatable; a
  terminating running pod holds its room until it is gone;
- terminating pods: a pending pod being deleted is never placed and is not part of the batch;
- weak binding (pod annotations): ``placer.io/when-no-node-matches: ignore-affinity`` drops the
  selector/required affinity when no node's labels match; ``placer.io/when-no-node-fits:
  ignore-affinity`` allows non-matching nodes, but only while no matching node has room;
- volumes: the node matches at least one term of every entry of ``volume_terms`` (one per bound
  PersistentVolume with node affinity; weak binding never drops these); a pod with a
  ``volume_problem`` goes nowhere;
- inter-pod affinity, anti-affinity and DoNotSchedule topology spread: the final-state rules of
  docs/topology.md, checked by ``placer.validate_topology`` (which imports only ``placer.models``);
  here only which nodes a spread constraint counts (``spread_node_eligible``): nodes with every key
  of the pod's DoNotSchedule constraints, matching its nodeSelector and required node affinity when
  ``node_affinity_policy`` is Honor, and whose NoSchedule/NoExecute taints it tolerates when
  ``node_taints_policy`` is Honor;
- priority key: ``(priority, restart tier)`` with Always=3 > OnFailure=2 > Never=1, or
  ``(priority, 0)`` when restart tiers are off.

``validate_placements`` also checks maximality: an unplaced pod of the batch that fits some
eligible node in the final state was left out for nothing, and one that would fit after removing
the batch pods of strictly lower key placed on a node was outranked by a lower key. "Fits" includes
the topology rules: the state with the pod added (and the lower-key pods removed) breaks none that
the final state keeps.

``validate_plan`` checks a whole answer with a global plan (README, "Global plan"):

- evictions: never DaemonSet pods, mirror pods, pods placer cannot fully read
  (``Pod.unevictable``), pods covered by more than one PodDisruptionBudget or using host ports; a
  move only for a pod owned by a ReplicaSet whose template names the scheduler and not opted out
  by annotation (``placer.io/evictable`` or ``cluster-autoscaler.kubernetes.io/safe-to-evict``
  ``"false"``), with exactly one replacement bound where the move says; a preemption only for a
  pending pod placed on the victim's node, of strictly higher key and not ``preemptionPolicy:
  Never`` (named in the eviction's ``for``), and of strictly higher ``spec.priority`` when the
  victim opted out (an opt-out holds against moves, never against a higher priority, as in
  kube-scheduler); every budget's
  evictions at most its ``disruptionsAllowed``, all evictions at most ``max_evictions``;
- steps: ``after`` names earlier steps; every eviction has one evict and one await-gone (after the
  evict), every placement one bind on its node and every bind a placement; a replacement's bind
  waits (transitively) for its victim's await-gone; simulated from the running pods, an evicted pod
  holds its room until its await-gone, and every bind respects cordon, taints, labels, host ports
  and capacity at the moment it runs, both in the listed order and in the order that binds as
  early and frees room as late as ``after`` allows;
- the final state: the topology rules over the running pods not evicted, the replacements and the
  placed pending pods; no unplaced pod of the batch fits an eligible node as it is, or in place of the
  placed pods of strictly lower key on a node (where every preemption there keeps a preemptor);
  a relaxed-affinity pod is off its matching nodes only while they have no room (or while it is
  needed there as a preemptor); and a plan must beat, per key from the highest down (placed
  pending pods plus running pods not preempted), what a first-fit answer without evictions
  already reaches (the engine's answer without evictions is at least as good, so a plan that
  merely equals it, or evicts nothing, should not exist).

``validate_plan`` judges the answer to one batch (``placer solve`` without ``--batch-size``, or one
batch of the controller): with ``--batch-size`` a later batch plans on the state the earlier ones
left, which the priority and improvement rules above do not account for.
"""

from __future__ import annotations

import heapq
import math
import re
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt

from placer.models import (
    POD_COUNT,
    Cluster,
    Effect,
    Eviction,
    HostPort,
    Node,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Placement,
    Pod,
    PodDisruptionBudget,
    RebalanceConfig,
    Result,
    SpreadConstraint,
    Step,
    Taint,
    TierScope,
    Toleration,
)
from placer.validate_groups import Domains, disruption_violations, domain_violations
from placer.validate_topology import TopologyRules, TopologyState, Violation, label_selector_matches, texts

__all__ = [
    "DEFAULT_MAX_PODS",
    "UNSCHEDULABLE_TAINT",
    "Binding",
    "ClusterIndex",
    "NodeLabels",
    "NodeState",
    "affinity_binding",
    "allocatable",
    "batch_pods",
    "binding_of",
    "demand",
    "eligibility_problems",
    "eviction_refusal",
    "final_states",
    "gang_rule_violations",
    "gang_violations",
    "go_parse_int",
    "hard_rule_violations",
    "hard_violations",
    "kept_vector",
    "label_selector_matches",
    "may_preempt",
    "move_refusal",
    "node_selector_matches",
    "pdbs_covering",
    "per_key",
    "placement_violations",
    "pod_key",
    "ports_clash",
    "requirement_matches",
    "running_pods",
    "selector_matches",
    "spread_node_eligible",
    "term_matches",
    "terms_match",
    "tolerates",
    "untolerated_taint",
    "validate_placements",
    "validate_plan",
    "validate_rebalance",
    "volume_problems",
]

DEFAULT_MAX_PODS = 110  # kubelet's default --max-pods
UNSCHEDULABLE_TAINT = Taint(key="node.kubernetes.io/unschedulable", effect="NoSchedule")
WHEN_NO_NODE_MATCHES = "placer.io/when-no-node-matches"
WHEN_NO_NODE_FITS = "placer.io/when-no-node-fits"
IGNORE_AFFINITY = "ignore-affinity"
RESTART_TIERS = {"Always": 3, "OnFailure": 2, "Never": 1}
WILDCARD_IP = "0.0.0.0"
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_GO_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)


# --- labels -----------------------------------------------------------------------------------


def go_parse_int(text: str) -> int | None:
    """The integer ``strconv.ParseInt(text, 10, 64)`` reads, or None where Go returns an error.

    Go accepts an optional sign and ASCII digits only (no spaces, underscores or other digits)
    and rejects values outside int64.
    """
    if not _GO_INT.fullmatch(text) or len(text.lstrip("+-").lstrip("0")) > len(str(_INT64_MAX)):
        return None  # int() refuses more than 4,300 digits: no int64 has that many anyway
    value = int(text, 10)
    return value if _INT64_MIN <= value <= _INT64_MAX else None


def requirement_matches(req: NodeSelectorRequirement, labels: Mapping[str, str]) -> bool:
    """One ``matchExpressions`` requirement against a node's labels."""
    present = req.key in labels
    value = labels.get(req.key, "")
    if req.operator == "In":
        return present and value in req.values
    if req.operator == "NotIn":
        return not present or value not in req.values
    if req.operator == "Exists":
        return present
    if req.operator == "DoesNotExist":
        return not present
    # Gt / Lt: exactly one integer value; the label must be an integer too.
    if not present or len(req.values) != 1:
        return False
    bound, actual = go_parse_int(req.values[0]), go_parse_int(value)
    if bound is None or actual is None:
        return False
    return actual > bound if req.operator == "Gt" else actual < bound


def field_matches(req: NodeSelectorRequirement, node: Node) -> bool:
    """One ``matchFields`` requirement: only ``metadata.name`` exists, with In or NotIn."""
    fields = {"metadata.name": node.name}
    if req.key not in fields or req.operator not in ("In", "NotIn"):
        return False
    inside = fields[req.key] in req.values
    return inside if req.operator == "In" else not inside


def term_matches(term: NodeSelectorTerm, node: Node) -> bool:
    """A node selector term: all its requirements hold; a term with none matches no node."""
    if not term.match_expressions and not term.match_fields:
        return False
    return all(requirement_matches(r, node.labels) for r in term.match_expressions) and all(
        field_matches(r, node) for r in term.match_fields
    )


def terms_match(terms: Sequence[NodeSelectorTerm], node: Node) -> bool:
    """Required node affinity: any term matches (so an empty list matches nothing)."""
    return any(term_matches(t, node) for t in terms)


def node_selector_matches(node_selector: Mapping[str, str], node: Node) -> bool:
    """``spec.nodeSelector``: the node's labels are a superset of the selector's pairs."""
    return all(node.labels.get(k) == v for k, v in node_selector.items())


def selector_matches(
    node_selector: Mapping[str, str], required_terms: Sequence[NodeSelectorTerm] | None, node: Node
) -> bool:
    """nodeSelector AND required node affinity (None: no required affinity at all)."""
    if not node_selector_matches(node_selector, node):
        return False
    return required_terms is None or terms_match(required_terms, node)


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


# --- taints -----------------------------------------------------------------------------------


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """Kubernetes' ``Toleration.ToleratesTaint``.

    An empty effect matches every effect, an empty key every key (the API server only allows an
    empty key with operator Exists); Exists ignores the value, Equal compares it.
    """
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator == "Exists":
        return True
    return toleration.value == taint.value


def _first_untolerated(taints: Iterable[Taint], tolerations: Sequence[Toleration]) -> Taint | None:
    """The first NoSchedule or NoExecute taint that no toleration tolerates."""
    for taint in taints:
        if taint.effect in ("NoSchedule", "NoExecute") and not any(tolerates(tol, taint) for tol in tolerations):
            return taint
    return None


def untolerated_taint(node: Node, tolerations: Sequence[Toleration]) -> Taint | None:
    """The first hard taint of the node (cordon included) that no toleration tolerates."""
    cordon = (UNSCHEDULABLE_TAINT,) if node.unschedulable else ()
    return _first_untolerated((*cordon, *node.taints), tolerations)


# --- volumes and spreading: node-level rules ----------------------------------------------------


def volume_problems(pod: Pod, node: Node) -> list[str]:
    """Why the pod's volumes keep it off the node: a volume problem (no node at all), or a bound
    PersistentVolume whose node affinity terms (ORed) the node does not match."""
    if pod.volume_problem is not None:
        return [f"its volumes fit no node: {pod.volume_problem}"]
    return [
        f"node does not match the node affinity of bound volume {i} of {len(pod.volume_terms)}"
        for i, terms in enumerate(pod.volume_terms, start=1)
        if not terms_match(terms, node)
    ]


def spread_node_eligible(pod: Pod, constraint: SpreadConstraint, node: Node) -> bool:
    """Whether a DoNotSchedule spread constraint of the pod counts the node (docs/topology.md).

    The node carries every key of the pod's DoNotSchedule constraints; with
    ``node_affinity_policy`` Honor it matches the pod's nodeSelector and required node affinity;
    with ``node_taints_policy`` Honor the pod tolerates its NoSchedule/NoExecute taints (the node's
    own taints: cordon is not one).
    """
    keys = {c.topology_key for c in pod.spread if c.when_unsatisfiable == "DoNotSchedule"}
    if not keys <= node.labels.keys():
        return False
    if constraint.node_affinity_policy == "Honor" and not selector_matches(pod.node_selector, pod.required_terms, node):
        return False
    return constraint.node_taints_policy != "Honor" or _first_untolerated(node.taints, pod.tolerations) is None


# --- ports, capacity, keys --------------------------------------------------------------------


def _ip(host_ip: str) -> str:
    return host_ip or WILDCARD_IP


def ports_clash(a: HostPort, b: HostPort) -> bool:
    """Same port and protocol, and host IPs equal or either one the wildcard."""
    if a.port != b.port or a.protocol != b.protocol:
        return False
    ip_a, ip_b = _ip(a.host_ip), _ip(b.host_ip)
    return ip_a == ip_b or WILDCARD_IP in (ip_a, ip_b)


def allocatable(node: Node, resource: str) -> int:
    """What the node offers of a resource: 0 when absent, except the pod count (110)."""
    default = DEFAULT_MAX_PODS if resource == POD_COUNT else 0
    return node.allocatable.get(resource, default)


def demand(pod: Pod) -> dict[str, int]:
    """What a pod takes from its node: every positive request, and one pod slot."""
    out = {r: v for r, v in pod.requests.items() if v > 0 and r != POD_COUNT}
    out[POD_COUNT] = 1
    return out


Tiers = TierScope | bool  # True reads as "cluster", False as "off" (as in the configuration)


def tier_scope(restart_tiers: Tiers) -> TierScope:
    if restart_tiers is True:
        return "cluster"
    if restart_tiers is False:
        return "off"
    return restart_tiers


def pod_key(pod: Pod, *, restart_tiers: Tiers = True) -> tuple[int, int]:
    """The priority key the objective compares: (priority, restart tier Always=3 > OnFailure=2 >
    Never=1, or 0 with tiers off). Who may preempt whom is ``outranks``."""
    return (pod.priority, RESTART_TIERS[pod.restart_policy] if tier_scope(restart_tiers) != "off" else 0)


def outranks(pod: Pod, other: Pod, *, restart_tiers: Tiers = True) -> bool:
    """``pod`` ranks strictly above ``other``: higher spec.priority; or equal, and a higher restart
    tier where tiers count (``cluster``: always; ``namespace``: within one namespace; ``off``: never)."""
    if pod.priority != other.priority:
        return pod.priority > other.priority
    scope = tier_scope(restart_tiers)
    if scope == "off" or (scope == "namespace" and pod.namespace != other.namespace):
        return False
    return RESTART_TIERS[pod.restart_policy] > RESTART_TIERS[other.restart_policy]


# --- weak binding -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Binding:
    """How a pod's selector/required affinity binds it, given the cluster's nodes.

    ``strict``: only matching nodes. ``dropped``: no node matches and the pod said
    ``when-no-node-matches: ignore-affinity``, so every node is allowed. ``relaxed``: matching nodes
    exist and the pod said ``when-no-node-fits: ignore-affinity``: any node is allowed, but a
    non-matching one only while no matching node has room.
    """

    mode: Literal["strict", "dropped", "relaxed"]
    matching: frozenset[str]

    def allows(self, node: Node) -> bool:
        return self.mode != "strict" or node.name in self.matching


def affinity_binding(pod: Pod, nodes: Iterable[Node]) -> Binding:
    """The pod's binding mode and the names of the nodes whose labels match it."""
    return binding_of(pod, NodeLabels(nodes).matching(pod.node_selector, pod.required_terms))


def binding_of(pod: Pod, matching: frozenset[str]) -> Binding:
    """The pod's binding mode, given the names of the nodes whose labels match it."""
    if not matching and pod.annotations.get(WHEN_NO_NODE_MATCHES) == IGNORE_AFFINITY:
        return Binding("dropped", matching)
    if matching and pod.annotations.get(WHEN_NO_NODE_FITS) == IGNORE_AFFINITY:
        return Binding("relaxed", matching)
    return Binding("strict", matching)


def eligibility_problems(pod: Pod, node: Node, binding: Binding) -> list[str]:
    """Why the pod may not go to the node whatever its load: cordon, taints, labels, volumes."""
    problems = []
    taint = untolerated_taint(node, pod.tolerations)
    if taint is UNSCHEDULABLE_TAINT:
        problems.append("node is cordoned (unschedulable) and the pod does not tolerate it")
    elif taint is not None:
        problems.append(f"untolerated taint {taint.key}={taint.value}:{taint.effect}")
    if not binding.allows(node):
        problems.append("node does not match the pod's nodeSelector/required node affinity")
    problems += volume_problems(pod, node)
    return problems


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
        freed: dict[str, int] = {}
        for other in without:
            for r, v in demand(other).items():
                freed[r] = freed.get(r, 0) + v
        out = []
        for r, v in sorted(demand(pod).items()):
            have = allocatable(self.node, r) - self.used.get(r, 0) + freed.get(r, 0)
            if v > have:
                out.append("too many pods" if r == POD_COUNT else f"insufficient {r} (needs {v}, free {have})")
        return out

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
                key = (priority, RESTART_TIERS[policy] if tier_scope(restart_tiers) != "off" else 0)
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


class _Free:
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
        have, used = state.node.allocatable, state.used
        return [have.get(r, DEFAULT_MAX_PODS if r == POD_COUNT else 0) - used.get(r, 0) for r in self.resources]

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
        and scheduler_name in ("*", p.scheduler_name)
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
    keys = {p.key for p in cluster.pods if scheduler_name in ("*", p.scheduler_name) and not p.scheduling_gates}
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


# --- topology ---------------------------------------------------------------------------------


def _topology(cluster: Cluster, running: Iterable[Pod], placed: Iterable[tuple[Pod, str]]) -> TopologyState:
    """The final state of the batch placements under the topology rules (placer.validate_topology)."""
    return TopologyState(TopologyRules(cluster, running, spread_node_eligible), placed)


# --- checks -----------------------------------------------------------------------------------


@dataclass
class _Context:
    index: ClusterIndex
    restart_tiers: Tiers
    bindings: dict[str, Binding] = field(default_factory=dict)

    @classmethod
    def of(cls, cluster: Cluster, restart_tiers: Tiers) -> _Context:
        return cls(ClusterIndex(cluster), restart_tiers)

    @property
    def cluster(self) -> Cluster:
        return self.index.cluster

    @property
    def nodes(self) -> dict[str, Node]:
        return self.index.nodes

    def binding(self, pod: Pod) -> Binding:
        if pod.key not in self.bindings:
            matching = self.index.labels.matching(pod.node_selector, pod.required_terms)
            self.bindings[pod.key] = binding_of(pod, matching)
        return self.bindings[pod.key]


def _resolve(
    index: ClusterIndex, placements: Mapping[str, str], scheduler_name: str, violations: list[Violation]
) -> list[tuple[Pod, str]]:
    """(pod, node name) of the placements whose pod and node exist; the others are violations."""
    pods = index.pods
    nodes = index.nodes
    out: list[tuple[Pod, str]] = []
    for key, node_name in sorted(placements.items()):
        pod = pods.get(key)
        if pod is None:
            violations.append(
                Violation("placement", key, f"{key}: placed on {node_name} but no such pod is in the cluster")
            )
            continue
        if not pod.pending:
            violations.append(
                Violation(
                    "placement", key, f"{key}: placed on {node_name} but the pod is not pending (phase {pod.phase})"
                )
            )
            continue
        if node_name not in nodes:
            violations.append(
                Violation("placement", key, f"{key}: placed on {node_name}, which is not a node of the cluster")
            )
            continue
        if pod.unsupported is not None:
            violations.append(
                Violation(
                    "placement", key, f"{key}: placed on {node_name} but placer does not support it ({pod.unsupported})"
                )
            )
        if pod.scheduling_gates:
            violations.append(
                Violation("placement", key, f"{key}: placed on {node_name} but it waits on scheduling gates")
            )
        if pod.terminating:
            violations.append(
                Violation("placement", key, f"{key}: placed on {node_name} but the pod is terminating (being deleted)")
            )
        if scheduler_name not in ("*", pod.scheduler_name):
            text = f"{key}: placed on {node_name} but it is addressed to scheduler {pod.scheduler_name!r}"
            violations.append(Violation("placement", key, text))
        out.append((pod, node_name))
    return out


def _eligibility_violations(ctx: _Context, placed: Sequence[tuple[Pod, str]]) -> list[Violation]:
    """Placed pods on nodes they may not use: cordon, taints, labels."""
    return [
        Violation("eligibility", pod.key, f"{pod.key} on {node_name}: {problem}", (node_name,))
        for pod, node_name in placed
        for problem in eligibility_problems(pod, ctx.nodes[node_name], ctx.binding(pod))
    ]


def _node_violations(states: Mapping[str, NodeState]) -> list[Violation]:
    """Over-capacity nodes (that received batch pods) and host-port clashes of placed pods."""
    out: list[Violation] = []
    for name, state in sorted(states.items()):
        if not state.placed:
            continue
        # Kubernetes checks only what a pod requests: a node already over on a resource the placed
        # pods do not ask for is not their fault.
        requested = {r for pod in state.placed for r in demand(pod)}
        over = [f"{r} {used} > allocatable {alloc}" for r, (used, alloc) in state.overload().items() if r in requested]
        if over:
            pods = ", ".join(p.key for p in state.placed)
            out.append(
                Violation("capacity", name, f"node {name} over capacity after placing {pods}: {'; '.join(over)}")
            )
        for pod in state.placed:
            for clash in state.port_clashes(pod):
                out.append(Violation("host-ports", pod.key, f"{pod.key} on {name}: {clash}", (name,)))
    return out


def _matching_node_with_room(
    pod: Pod, binding: Binding, states: Mapping[str, NodeState], topology: TopologyState, free: _Free
) -> str | None:
    """A node matching the pod's affinity that could still take it, if any (first by name)."""
    for other in sorted(binding.matching.intersection(free.with_room(pod))):
        target = states[other]
        if (
            not eligibility_problems(pod, target.node, binding)
            and not target.room_problems(pod)
            and topology.allows(pod, other)
        ):
            return other
    return None


def _relaxed_violations(
    ctx: _Context, states: Mapping[str, NodeState], topology: TopologyState, free: _Free
) -> list[Violation]:
    """A relaxed-affinity pod may use a non-matching node only while no matching node has room."""
    out: list[Violation] = []
    for name, state in sorted(states.items()):
        for pod in state.placed:
            binding = ctx.binding(pod)
            if binding.mode != "relaxed" or name in binding.matching:
                continue
            other = _matching_node_with_room(pod, binding, states, topology, free)
            if other is not None:
                text = (
                    f"{pod.key} on {name}: placed outside its node affinity (when-no-node-fits: "
                    f"ignore-affinity) although matching node {other} has room for it"
                )
                out.append(Violation("relaxed-affinity", pod.key, text, (name, other)))
    return out


def _worse_off(ctx: _Context, pod: Pod, state: NodeState, name: str, topology: TopologyState) -> list[Pod]:
    """Placed batch pods on ``name`` whose place ``pod`` should have had, or []: all the pods it
    outranks (any number of them is worth less than one more pod of a higher key). With
    ``restartTiers: namespace`` those are the pods of a lower spec.priority, and of its own
    namespace and priority of a lower tier (the thesis's order holds inside a namespace)."""
    lower = [p for p in state.placed if outranks(pod, p, restart_tiers=ctx.restart_tiers)]
    if lower and not state.room_problems(pod, without=lower) and topology.allows(pod, name, without=lower):
        return lower
    return []


def _left_out_violations(
    ctx: _Context, states: Mapping[str, NodeState], left: Sequence[Pod], topology: TopologyState, free: _Free
) -> list[Violation]:
    """Maximality and priority for the unplaced pods of the batch."""
    out: list[Violation] = []
    holding = {name for name, state in states.items() if state.placed}
    for pod in left:
        key = pod_key(pod, restart_tiers=ctx.restart_tiers)
        binding = ctx.binding(pod)
        # A node without room for the pod and without batch pods to take off cannot take it.
        for name in sorted(holding.union(free.with_room(pod))):
            state = states[name]
            if eligibility_problems(pod, state.node, binding):
                continue
            if not state.room_problems(pod) and topology.allows(pod, name):
                out.append(
                    Violation(
                        "maximality", pod.key, f"{pod.key}: left unplaced although it fits on node {name}", (name,)
                    )
                )
                break
            lower = _worse_off(ctx, pod, state, name, topology)
            if lower:
                names = ", ".join(p.key for p in lower)
                text = (
                    f"{pod.key}: left unplaced although it would fit on node {name} "
                    f"in place of lower-key pods {names} (key {key})"
                )
                out.append(Violation("priority", pod.key, text, (name,)))
                break
    return out


def gang_violations(cluster: Cluster, placements: Mapping[str, str], scheduler_name: str = "placer") -> list[str]:
    """``gang_rule_violations`` in words."""
    return texts(gang_rule_violations(cluster, placements, scheduler_name))


def gang_rule_violations(
    cluster: Cluster, placements: Mapping[str, str], scheduler_name: str = "placer", index: ClusterIndex | None = None
) -> list[Violation]:
    """A gang (pods sharing ``gang`` in a namespace) is placed whole or not at all, and never
    while fewer than its ``gang_size`` pods are pending or already running (a gang left partly
    bound is completed by placing the rest together)."""
    members: dict[str, list[Pod]] = {}
    for pod in batch_pods(cluster, scheduler_name) if index is None else index.batch(scheduler_name):
        if pod.gang:
            members.setdefault(f"{pod.namespace}/{pod.gang}", []).append(pod)
    running: dict[str, int] = {}
    if members:
        for pod in cluster.pods:
            gang = f"{pod.namespace}/{pod.gang}" if pod.gang else None
            if pod.running and gang in members:
                running[gang] = running.get(gang, 0) + 1
    out: list[Violation] = []
    for gang, pods in sorted(members.items()):
        placed = [p for p in pods if p.key in placements]
        want = max(p.gang_size or 0 for p in pods) - running.get(gang, 0)
        if placed and len(placed) < len(pods):
            out.append(
                Violation(
                    "gang", gang, f"gang {gang}: {len(placed)} of its {len(pods)} pending pods placed (all or nothing)"
                )
            )
        elif placed and want > len(pods):
            out.append(Violation("gang", gang, f"gang {gang}: placed with {len(pods)} of its {want} pods pending"))
    return out


def hard_violations(cluster: Cluster, placements: Mapping[str, str], *, scheduler_name: str = "placer") -> list[str]:
    """``hard_rule_violations`` in words."""
    return texts(hard_rule_violations(cluster, placements, scheduler_name=scheduler_name))


def hard_rule_violations(
    cluster: Cluster, placements: Mapping[str, str], *, scheduler_name: str = "placer"
) -> list[Violation]:
    """Violations of the hard constraints only (no maximality, priority or relaxed-affinity rule).

    A set of placements with no hard violation is a feasible answer; ``placement_violations`` adds
    the optimality-style rules on top.
    """
    violations: list[Violation] = []
    cluster = holding_nominations(cluster, scheduler_name)
    ctx = _Context.of(cluster, True)
    resolved = _resolve(ctx.index, placements, scheduler_name, violations)
    violations += _eligibility_violations(ctx, resolved)
    violations += _node_violations(ctx.index.states(resolved, nodes=()))
    violations += _topology(cluster, ctx.index.running_list, resolved).lines()
    violations += gang_rule_violations(cluster, placements, scheduler_name, ctx.index)
    violations += domain_violations(cluster, placements)
    return violations


def validate_placements(
    cluster: Cluster,
    placements: Mapping[str, str],
    *,
    restart_tiers: Tiers = True,
    scheduler_name: str = "placer",
) -> list[str]:
    """``placement_violations`` in words: every reason the placements are wrong; empty when valid."""
    return texts(placement_violations(cluster, placements, restart_tiers=restart_tiers, scheduler_name=scheduler_name))


def placement_violations(
    cluster: Cluster,
    placements: Mapping[str, str],
    *,
    restart_tiers: Tiers = True,
    scheduler_name: str = "placer",
) -> list[Violation]:
    """Every reason the placements (pending pod key -> node name) are wrong; empty when valid.

    Checks: each placed pod is pending, supported, ungated and addressed to ``scheduler_name``
    (``"*"`` for any), and its node exists; taints and cordon; labels and affinity (with the
    weak-binding annotations); volumes; capacity and host ports in the final state; inter-pod
    affinity, anti-affinity and DoNotSchedule topology spread in the final state; relaxed-affinity
    pods off their matching nodes only while those have no room; and for every unplaced pod of the
    batch, that no eligible node has room for it (topology rules included), even after removing the
    batch pods of strictly lower key placed there.
    """
    violations: list[Violation] = []
    cluster = holding_nominations(cluster, scheduler_name)
    ctx = _Context.of(cluster, restart_tiers)
    resolved = _resolve(ctx.index, placements, scheduler_name, violations)
    states = ctx.index.states(resolved)
    topology = _topology(cluster, ctx.index.running_list, resolved)
    # Gang members are all-or-nothing: one fitting alone proves nothing about the whole gang.
    # So are pods held in one topology domain with their group (placer.validate_groups).
    left = [
        p for p in ctx.index.batch(scheduler_name) if p.key not in placements and not p.gang and not p.group_domains
    ]
    free = _Free(states, [*left, *(pod for pod, _ in resolved)])
    violations += _eligibility_violations(ctx, resolved)
    violations += _node_violations(states)
    violations += topology.lines()
    violations += _relaxed_violations(ctx, states, topology, free)
    violations += gang_rule_violations(cluster, placements, scheduler_name, ctx.index)
    violations += domain_violations(cluster, placements)
    violations += _left_out_violations(ctx, states, left, topology, free)
    return violations


# --- plans: who may be evicted, and for whom -------------------------------------------------

EVICTION_OPT_OUT = ("placer.io/evictable", "cluster-autoscaler.kubernetes.io/safe-to-evict")
Key = tuple[int, int]


def pdbs_covering(cluster: Cluster, pod: Pod) -> list[PodDisruptionBudget]:
    """The PodDisruptionBudgets of the pod's namespace whose selector matches its labels."""
    return [b for b in cluster.pdbs if b.namespace == pod.namespace and label_selector_matches(b.selector, pod.labels)]


def eviction_refusal(cluster: Cluster, pod: Pod) -> str | None:
    """Why a global plan may never evict this running pod (None: it may, by move or preemption)."""
    if pod.owner is not None and pod.owner.kind == "DaemonSet":
        return "it is a DaemonSet pod"
    if pod.mirror:
        return "it is a mirror (static) pod"
    if pod.unevictable is not None:
        return f"placer cannot read what evicting it means ({pod.unevictable})"
    covering = pdbs_covering(cluster, pod)
    if len(covering) > 1:
        return f"it is covered by {len(covering)} PodDisruptionBudgets ({', '.join(b.name for b in covering)})"
    if pod.host_ports:
        return "it uses host ports"
    return None


def move_refusal(cluster: Cluster, pod: Pod, scheduler_name: str = "placer", *, jobs: bool = False) -> str | None:
    """Why a plan may not move this pod, on top of ``eviction_refusal`` (None: it may).

    A move evicts the pod and binds its ReplicaSet's replacement: only a ReplicaSet whose
    template names this scheduler (``"*"``: any) sends the replacement back to it. With ``jobs``
    (rebalancing) a Job's pod may move too when its Job names this scheduler and opts in: its
    podFailurePolicy ignores DisruptionTarget, or it accepts restarts (``placer.io/rebalance``).
    """
    opted = _opt_out(pod)
    if opted:
        return opted
    if pod.owner is None:
        return "it is a bare pod (no owner creates a replacement)"
    if jobs and pod.owner.kind == "Job":
        job = next((j for j in cluster.jobs if j.namespace == pod.namespace and j.name == pod.owner.name), None)
        if job is None:
            return f"its Job {pod.namespace}/{pod.owner.name} is not in the cluster"
        if scheduler_name not in ("*", job.scheduler_name):
            return f"its Job is scheduled by {job.scheduler_name!r}, not {scheduler_name!r}"
        if not (job.ignores_disruption or job.accepts_restarts):
            return "its Job does not opt in to moves"
        return None
    if pod.owner.kind != "ReplicaSet":
        return f"it is owned by a {pod.owner.kind}, not a ReplicaSet"
    owners = [r for r in cluster.replicasets if r.namespace == pod.namespace and r.name == pod.owner.name]
    if not owners:
        return f"its ReplicaSet {pod.namespace}/{pod.owner.name} is not in the cluster"
    if not any(scheduler_name in ("*", r.scheduler_name) for r in owners):
        return (
            f"its ReplicaSet {pod.namespace}/{pod.owner.name} is scheduled by {owners[0].scheduler_name!r}, "
            f"not {scheduler_name!r}"
        )
    return None


def _opt_out(pod: Pod) -> str | None:
    """The annotation by which the pod asks not to be evicted (None: it does not)."""
    for annotation in EVICTION_OPT_OUT:
        if pod.annotations.get(annotation) == "false":
            return f'it is annotated {annotation}: "false"'
    return None


def may_preempt(preemptor: Pod, victim: Pod, *, restart_tiers: Tiers = True) -> bool:
    """A pending pod may preempt a running one: it outranks it and is not ``preemptionPolicy:
    Never``; a victim opted out by annotation only by a strictly higher ``spec.priority``."""
    if preemptor.preemption_policy == "Never":
        return False
    if _opt_out(victim) and preemptor.priority <= victim.priority:
        return False
    return outranks(preemptor, victim, restart_tiers=restart_tiers)


def kept_vector(
    cluster: Cluster, placed: Iterable[Pod], preempted: Iterable[str] = (), *, restart_tiers: Tiers = True
) -> dict[Key, int]:
    """Objective (1): placed pending pods plus running pods not preempted, counted per key.

    Running pods count when bound to a node of the cluster; moved pods keep running (their
    replacement takes over), preempted ones (keys in ``preempted``) do not.
    """
    return _kept(ClusterIndex(cluster), placed, preempted, restart_tiers=restart_tiers)


def _kept(
    index: ClusterIndex, placed: Iterable[Pod], preempted: Iterable[str], *, restart_tiers: Tiers
) -> dict[Key, int]:
    """``kept_vector`` from the index's running pods per key."""
    out = dict(index.running_keys(restart_tiers))
    gone = [index.pods.get(k) for k in set(preempted)]
    for pod in gone:
        if pod is not None and pod.running and pod.node_name in index.nodes:
            out[pod_key(pod, restart_tiers=restart_tiers)] -= 1
    for pod in placed:
        key = pod_key(pod, restart_tiers=restart_tiers)
        out[key] = out.get(key, 0) + 1
    return {k: v for k, v in out.items() if v}


def per_key(vectors: Sequence[Mapping[Key, int]]) -> list[list[int]]:
    """The vectors as lists over the union of their keys, highest key first (compare with ``<``)."""
    keys = sorted({k for v in vectors for k in v}, reverse=True)
    return [[v.get(k, 0) for k in keys] for v in vectors]


# --- plans: the answer resolved against the cluster -----------------------------------------


def _stand_in(victim: Pod) -> Pod:
    """The replacement of a moved pod: the victim's spec, a pod of its own."""
    return victim.model_copy(update={"name": f"{victim.name}~replacement", "node_name": None, "phase": "Pending"})


@dataclass
class _Plan:
    ctx: _Context
    scheduler_name: str
    jobs: bool = False  # a rebalancing plan: opted-in Jobs' pods may move
    victims: dict[str, tuple[Pod, Eviction]] = field(default_factory=dict)  # valid evictions
    pending: dict[str, tuple[Pod, str]] = field(default_factory=dict)  # pod key -> (pod, node)
    replacements: dict[str, tuple[Pod, Pod, str]] = field(default_factory=dict)  # victim -> (victim, stand-in, node)

    def key(self, pod: Pod) -> Key:
        return pod_key(pod, restart_tiers=self.ctx.restart_tiers)

    def preempted(self) -> dict[str, Pod]:
        return {k: pod for k, (pod, e) in self.victims.items() if e.kind == "preempt"}

    def bind_spec(self, step: Step) -> tuple[Pod, Pod] | None:
        """(the pod whose spec the bind places, the pod carrying that spec) or None if unknown."""
        if step.replaces is not None:
            entry = self.replacements.get(step.replaces)
            return (entry[1], entry[0]) if entry else None
        placed = self.pending.get(step.pod or "")
        return (placed[0], placed[0]) if placed else None


def _resolve_placements(
    plan: _Plan, cluster: Cluster, placements: Sequence[Placement], out: list[str]
) -> list[Placement]:
    """Pending placements into ``plan.pending``; replacement placements returned for later."""
    pending: dict[str, str] = {}
    replacements: list[Placement] = []
    for p in placements:
        if p.kind == "replacement":
            if p.pod is not None:
                out.append(f"replacement placement on {p.node} names a pod ({p.pod}); replacements have none yet")
            replacements.append(p)
        elif p.pod is None:
            out.append(f"pending placement on {p.node} names no pod")
        elif p.pod in pending:
            out.append(f"{p.pod}: placed twice ({pending[p.pod]} and {p.node})")
        else:
            pending[p.pod] = p.node
    unresolved: list[Violation] = []
    for pod, node_name in _resolve(plan.ctx.index, pending, plan.scheduler_name, unresolved):
        plan.pending[pod.key] = (pod, node_name)
    out += texts(unresolved)
    return replacements


def _eviction_violations(plan: _Plan, cluster: Cluster, evictions: Sequence[Eviction]) -> list[str]:
    """Who may be evicted, how (move or preempt) and for whom."""
    out: list[str] = []
    pods = plan.ctx.index.pods
    # A group with disruptionMode all is preempted as one unit: a preemptor on any of the nodes
    # its evicted pods leave frees room for it.
    unit_nodes: dict[str, set[str]] = {}
    for e in evictions:
        victim = pods.get(e.pod)
        if victim is not None and victim.disruption_unit is not None:
            unit_nodes.setdefault(victim.disruption_unit, set()).add(e.node)
    for e in evictions:
        what = f"eviction of {e.pod} ({e.kind})"
        pod = pods.get(e.pod)
        if e.pod in plan.victims:
            out.append(f"{what}: the pod is evicted twice")
            continue
        if pod is None or not pod.running:
            out.append(f"{what}: no such running pod in the cluster")
            continue
        if e.node not in plan.ctx.nodes:
            out.append(f"{what}: {e.node} is not a node of the cluster")
            continue
        if pod.node_name != e.node:
            out.append(f"{what}: the pod runs on {pod.node_name}, not on {e.node}")
            continue
        plan.victims[e.pod] = (pod, e)
        refusal = eviction_refusal(cluster, pod)
        if refusal:
            out.append(f"{what}: never evicted: {refusal}")
        nodes = unit_nodes[pod.disruption_unit] if pod.disruption_unit is not None else {e.node}
        for name in e.for_:
            placed = plan.pending.get(name)
            if placed is None or placed[1] not in nodes:
                out.append(f"{what}: it is for {name}, which the plan does not place on {e.node}")
        if e.kind == "move":
            refusal = move_refusal(cluster, pod, plan.scheduler_name, jobs=plan.jobs)
            if refusal:
                out.append(f"{what}: may not move: {refusal}")
            if e.to is None or e.to not in plan.ctx.nodes:
                out.append(f"{what}: moves to {e.to}, which is not a node of the cluster")
            continue
        if e.to is not None:
            out.append(f"{what}: a preemption does not move the pod, yet it names a destination ({e.to})")
        preemptors = [
            placed
            for placed, node_name in plan.pending.values()
            if node_name in nodes and may_preempt(placed, pod, restart_tiers=plan.ctx.restart_tiers)
        ]
        if not preemptors:
            out.append(
                f"{what}: no pending pod placed on {e.node} may preempt it (strictly higher key than "
                f"{plan.key(pod)} and preemptionPolicy not Never"
                + (f"; opted out: a priority above {pod.priority})" if _opt_out(pod) else ")")
            )
        elif not {p.key for p in preemptors} & set(e.for_):
            names = ", ".join(sorted(p.key for p in preemptors))
            out.append(f"{what}: its 'for' list does not name its preemptor ({names})")
    return out


def _replacement_violations(plan: _Plan, replacements: Sequence[Placement]) -> list[str]:
    """Every move has exactly one replacement placement, on the node the move names."""
    out: list[str] = []
    for p in replacements:
        victim_key = p.replaces or ""
        entry = plan.victims.get(victim_key)
        if entry is None or entry[1].kind != "move":
            out.append(f"replacement of {p.replaces} on {p.node}: the plan does not move {p.replaces}")
            continue
        victim, eviction = entry
        if victim_key in plan.replacements:
            out.append(f"replacement of {victim_key}: placed twice")
            continue
        if p.node != eviction.to:
            out.append(f"replacement of {victim_key} placed on {p.node}, but the move sends it to {eviction.to}")
        if p.node not in plan.ctx.nodes:
            continue
        owner = victim.owner
        if p.owner is not None and owner is not None and p.owner != f"{owner.kind}/{victim.namespace}/{owner.name}":
            out.append(
                f"replacement of {victim_key}: owner {p.owner}, but the victim belongs to {owner.kind}/{owner.name}"
            )
        plan.replacements[victim_key] = (victim, _stand_in(victim), p.node)
    for victim_key, (_, eviction) in sorted(plan.victims.items()):
        if eviction.kind == "move" and victim_key not in plan.replacements and eviction.to in plan.ctx.nodes:
            out.append(f"move of {victim_key} to {eviction.to}: no replacement placement")
    return out


def _cap_violations(index: ClusterIndex, evictions: Sequence[Eviction], max_evictions: int | None) -> list[str]:
    """Every budget's evictions at most its disruptionsAllowed; all of them at most max_evictions."""
    out: list[str] = []
    cluster, pods = index.cluster, index.pods
    evicted = [pods[e.pod] for e in evictions if e.pod in pods]
    for budget in cluster.pdbs:
        hit = sorted(
            p.key
            for p in evicted
            if p.namespace == budget.namespace and label_selector_matches(budget.selector, p.labels)
        )
        if len(hit) > budget.disruptions_allowed:
            out.append(
                f"PodDisruptionBudget {budget.namespace}/{budget.name} allows {budget.disruptions_allowed} "
                f"disruption(s), the plan evicts {len(hit)}: {', '.join(hit)}"
            )
    if max_evictions is not None and len(evictions) > max_evictions:
        out.append(f"{len(evictions)} evictions exceed max_evictions {max_evictions}")
    return out


# --- plans: the steps ---------------------------------------------------------------------------


@dataclass
class _Room:
    """A node while the plan runs: the pods on it (evicted ones hold their room until gone)."""

    node: Node
    pods: dict[str, Pod] = field(default_factory=dict)
    used: dict[str, int] = field(default_factory=dict)

    def add(self, pod: Pod) -> None:
        self.pods[pod.key] = pod
        for r, v in demand(pod).items():
            self.used[r] = self.used.get(r, 0) + v

    def drop(self, key: str) -> None:
        pod = self.pods.pop(key, None)
        if pod is not None:
            for r, v in demand(pod).items():
                self.used[r] -= v

    def problems(self, pod: Pod) -> list[str]:
        """Why the pod does not fit here at this moment: capacity on what it requests, host ports."""
        out = []
        for r, v in sorted(demand(pod).items()):
            have = allocatable(self.node, r) - self.used.get(r, 0)
            if v > have:
                out.append("too many pods" if r == POD_COUNT else f"insufficient {r} (needs {v}, free {have})")
        out += [
            f"host port {mine.protocol}/{mine.port} held by {other.key}"
            for mine in pod.host_ports
            for other in self.pods.values()
            if other.key != pod.key
            for theirs in other.host_ports
            if ports_clash(mine, theirs)
        ]
        return out


# Worst order the dependencies allow: binds as early as possible, room freed as late as possible.
_EAGER = {Effect.BIND: 0, Effect.MARK: 1, Effect.EVICT: 2, Effect.AWAIT_GONE: 3}


def _order(steps: Sequence[Step], edges: Mapping[int, Sequence[int]], rank: Mapping[int, tuple[int, int]]) -> list[int]:
    """A topological order of the step ids (Kahn), taking the lowest ``rank`` among ready steps;
    shorter than ``steps`` when the dependencies have a cycle."""
    waiting = {s.id: len(edges[s.id]) for s in steps}
    then: dict[int, list[int]] = {s.id: [] for s in steps}
    for sid, before in edges.items():
        for b in before:
            then[b].append(sid)
    ready = [(rank[sid], sid) for sid, n in waiting.items() if n == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        _, sid = heapq.heappop(ready)
        order.append(sid)
        for nxt in then[sid]:
            waiting[nxt] -= 1
            if waiting[nxt] == 0:
                heapq.heappush(ready, (rank[nxt], nxt))
    return order


def _simulate(plan: _Plan, cluster: Cluster, steps: Mapping[int, Step], order: Sequence[int]) -> dict[int, list[str]]:
    """Run the steps in ``order`` from the running pods; what each bind lacks when it runs (only
    the nodes the steps name change, so only theirs are simulated)."""
    index = plan.ctx.index
    rooms = {name: _Room(index.nodes[name]) for name in {st.node for st in steps.values()} if name in index.nodes}
    for name, room in rooms.items():
        for pod in index.running[name]:
            room.add(pod)
    evicted: set[str] = set()
    out: dict[int, list[str]] = {}
    for sid in order:
        st = steps[sid]
        if st.node not in rooms:
            continue
        effect = st.kind.effect
        if effect == Effect.EVICT and st.pod is not None:
            evicted.add(st.pod)
        elif effect == Effect.AWAIT_GONE and st.pod is not None:
            entry = plan.victims.get(st.pod)
            if st.pod in evicted and entry is not None and entry[0].node_name == st.node:
                rooms[st.node].drop(st.pod)
        elif effect == Effect.BIND:
            spec = plan.bind_spec(st)
            if spec is None:
                continue
            problems = rooms[st.node].problems(spec[0])
            if problems:
                out[sid] = problems
            rooms[st.node].add(spec[0])
    return out


def _ancestors(edges: Mapping[int, Sequence[int]], order: Sequence[int]) -> dict[int, set[int]]:
    """Every step's transitive predecessors (``order`` topological)."""
    out: dict[int, set[int]] = {}
    for sid in order:
        acc: set[int] = set()
        for b in edges[sid]:
            acc.add(b)
            acc |= out[b]
        out[sid] = acc
    return out


def _step_violations(plan: _Plan, cluster: Cluster, steps: Sequence[Step]) -> list[str]:
    out: list[str] = []
    by_id: dict[int, Step] = {}
    for st in steps:
        if st.id in by_id:
            out.append(f"step id {st.id} is used twice")
        else:
            by_id[st.id] = st
    unique = list(by_id.values())
    position = {st.id: i for i, st in enumerate(unique)}
    edges: dict[int, list[int]] = {}
    for st in unique:
        edges[st.id] = []
        for a in st.after:
            if a not in by_id:
                out.append(f"step {st.id} ({st.op} {st.subject}) waits on step {a}, which does not exist")
            elif position[a] >= position[st.id]:
                out.append(f"step {st.id} ({st.op} {st.subject}) waits on step {a}, which comes later in the list")
                edges[st.id].append(a)
            else:
                edges[st.id].append(a)
    listed = _order(unique, edges, {sid: (position[sid], 0) for sid in position})
    if len(listed) < len(unique):
        stuck = sorted(set(position) - set(listed))
        out.append(f"the steps' dependencies have a cycle (steps {', '.join(map(str, stuck))} can never run)")
        return out
    out += _reference_violations(plan, unique, edges, listed)
    # Capacity and host ports at each bind: in the listed order, then in the order that binds as
    # early and frees room as late as ``after`` allows (any order ``after`` allows must work).
    eager = _order(unique, edges, {st.id: (_EAGER[st.kind.effect], position[st.id]) for st in unique})
    found = _simulate(plan, cluster, by_id, listed)
    for sid, problems in sorted(found.items()):
        st = by_id[sid]
        out.append(
            f"step {sid} (bind {st.subject} on {st.node}): the node lacks room at that step: {'; '.join(problems)}"
        )
    for sid, problems in sorted(_simulate(plan, cluster, by_id, eager).items()):
        if sid in found:
            continue
        st = by_id[sid]
        earlier = ", ".join(map(str, eager[: eager.index(sid)])) or "none"
        out.append(
            f"step {sid} (bind {st.subject} on {st.node}) does not wait for the room it needs: run as early as its "
            f"'after' allows (after steps: {earlier}), the node lacks room: {'; '.join(problems)}"
        )
    return out


def _reference_violations(
    plan: _Plan, steps: Sequence[Step], edges: Mapping[int, Sequence[int]], order: Sequence[int]
) -> list[str]:
    """Steps and the plan's evictions and placements name each other one to one, on the same
    nodes; await-gone after its evict; a replacement's bind after its victim's await-gone."""
    out: list[str] = []
    ancestors = _ancestors(edges, order)
    seen: dict[tuple[Effect, str | None, str | None], list[Step]] = {}
    for st in steps:
        effect = st.kind.effect
        seen.setdefault((effect, st.pod, st.replaces), []).append(st)
        if effect in (Effect.EVICT, Effect.AWAIT_GONE):
            entry = plan.victims.get(st.pod or "")
            if entry is None or st.pod is None:
                out.append(f"step {st.id} ({st.op} {st.subject}): the plan has no valid eviction of {st.subject}")
            elif st.node != entry[1].node:
                out.append(f"step {st.id} ({st.op} {st.pod}) on {st.node}, but {st.pod} runs on {entry[1].node}")
            continue
        if effect != Effect.BIND:
            continue
        if st.replaces is not None:
            target = plan.replacements.get(st.replaces)
            where = target[2] if target else None
        else:
            placed = plan.pending.get(st.pod or "")
            where = placed[1] if placed else None
        if where is None:
            out.append(f"step {st.id} binds {st.subject}, which the plan does not place")
        elif where != st.node:
            out.append(f"step {st.id} binds {st.subject} on {st.node}, but the plan places it on {where}")
    for victim_key in sorted(plan.victims):
        evicts = seen.get((Effect.EVICT, victim_key, None), [])
        awaits = seen.get((Effect.AWAIT_GONE, victim_key, None), [])
        if len(evicts) != 1 or len(awaits) != 1:
            out.append(f"eviction of {victim_key}: {len(evicts)} evict and {len(awaits)} await-gone steps, not 1 and 1")
        for aw in awaits:
            if not any(ev.id in ancestors[aw.id] for ev in evicts):
                out.append(f"step {aw.id} (await-gone {victim_key}) does not wait for the eviction of {victim_key}")
    binds: list[tuple[str, str | None, str | None, str]] = [("pending", k, None, k) for k in plan.pending]
    binds += [("replacement", None, k, f"replacement of {k}") for k in plan.replacements]
    for kind, pod, replaces, name in sorted(binds, key=lambda b: (b[0], b[3])):
        found = seen.get((Effect.BIND, pod, replaces), [])
        if len(found) != 1:
            out.append(f"{kind} placement {name}: {len(found)} bind steps, not 1")
        if replaces is not None:
            gone = {aw.id for aw in seen.get((Effect.AWAIT_GONE, replaces, None), [])}
            for b in found:
                if not gone & ancestors[b.id]:
                    out.append(f"step {b.id} binds {name} before {replaces} is gone (no await-gone among its 'after')")
    return out


def _bind_eligibility(plan: _Plan, steps: Sequence[Step]) -> list[str]:
    """Cordon, taints and labels of every bind (a replacement carries its victim's spec)."""
    out: list[str] = []
    for st in steps:
        if st.kind.effect != Effect.BIND or st.node not in plan.ctx.nodes:
            continue
        spec = plan.bind_spec(st)
        if spec is None:
            continue
        for problem in eligibility_problems(spec[1], plan.ctx.nodes[st.node], plan.ctx.binding(spec[1])):
            out.append(f"step {st.id} (bind {st.subject} on {st.node}): {problem}")
    return out


# --- plans: the final state ---------------------------------------------------------------------


def _plan_states(plan: _Plan, cluster: Cluster, *, replacements_placed: bool) -> dict[str, NodeState]:
    """Nodes after the plan: running pods not evicted, replacements, and the placed pending pods
    (``placed``; replacements too when ``replacements_placed``)."""
    states = plan.ctx.index.states([], gone=plan.victims)
    for _, stand_in, node_name in plan.replacements.values():
        states[node_name].add(stand_in, batch=replacements_placed)
    for pod, node_name in plan.pending.values():
        states[node_name].add(pod, batch=True)
    return states


def _plan_topology(plan: _Plan, cluster: Cluster) -> TopologyState:
    """The topology rules after the plan: running pods not evicted; replacements and placed
    pending pods are the batch."""
    gone = {id(pod) for pod, _ in plan.victims.values()}
    running = [p for p in plan.ctx.index.running_list if id(p) not in gone]
    placed = [(stand_in, node_name) for _, stand_in, node_name in plan.replacements.values()]
    placed += list(plan.pending.values())
    return _topology(cluster, running, placed)


def _keeps_preemptors(plan: _Plan, victims: Sequence[Pod], staying: Sequence[Pod]) -> bool:
    """Every preempted victim of a node still has a pod on it that may preempt it."""
    tiers = plan.ctx.restart_tiers
    return all(any(may_preempt(p, v, restart_tiers=tiers) for p in staying) for v in victims)


def _final_violations(plan: _Plan, cluster: Cluster) -> list[str]:
    """What must hold after the plan whatever the evictions: the topology rules, no unplaced pod of
    the batch fits as things are or in place of lower keys, relaxed-affinity pods off matching
    nodes with room."""
    ctx = plan.ctx
    topology = _plan_topology(plan, cluster)
    out = texts(_node_violations(_plan_states(plan, cluster, replacements_placed=True)))
    out += topology.violations()
    states = _plan_states(plan, cluster, replacements_placed=False)
    # Gang members are all-or-nothing: one fitting alone proves nothing about the whole gang.
    left = [p for p in plan.ctx.index.batch(plan.scheduler_name) if p.key not in plan.pending and not p.gang]
    free = _Free(states, [*left, *(pod for state in states.values() for pod in state.placed)])
    preempted: dict[str, list[Pod]] = {}
    for pod in plan.preempted().values():
        preempted.setdefault(pod.node_name or "", []).append(pod)
    for name, state in sorted(states.items()):
        for pod in state.placed:
            binding = ctx.binding(pod)
            if binding.mode != "relaxed" or name in binding.matching:
                continue
            others = [p for p in state.placed if p.key != pod.key]
            if not _keeps_preemptors(plan, preempted.get(name, []), others):
                continue  # it is the preemptor there: moving it would undo the preemption
            other = _matching_node_with_room(pod, binding, states, topology, free)
            if other is not None:
                out.append(
                    f"{pod.key} on {name}: placed outside its node affinity (when-no-node-fits: "
                    f"ignore-affinity) although matching node {other} has room for it after the plan"
                )
    holding = {name for name, state in states.items() if state.placed}
    placed = {key: node for key, (_, node) in plan.pending.items()}
    domains = Domains(cluster, placed, gone=set(plan.victims))  # workload groups' domains after the plan
    for pod in left:
        key = plan.key(pod)
        binding = ctx.binding(pod)
        # A node without room for the pod and without batch pods to take off cannot take it.
        for name in sorted(holding.union(free.with_room(pod))):
            state = states[name]
            if eligibility_problems(pod, state.node, binding) or not domains.allows(pod, name):
                continue
            if not state.room_problems(pod) and topology.allows(pod, name):
                out.append(f"{pod.key}: left unplaced although it fits on node {name} after the plan")
                break
            lower = [p for p in state.placed if outranks(pod, p, restart_tiers=ctx.restart_tiers)]
            staying = [p for p in state.placed if p not in lower] + [pod]
            if (
                lower
                and not state.room_problems(pod, without=lower)
                and _keeps_preemptors(plan, preempted.get(name, []), staying)
                and topology.allows(pod, name, without=lower)
            ):
                names = ", ".join(p.key for p in lower)
                text = (
                    f"{pod.key}: left unplaced although it would fit on node {name} "
                    f"in place of lower-key pods {names} (key {key})"
                )
                out.append(text)
                break
    return out


def _first_fit(plan: _Plan, cluster: Cluster) -> list[Pod]:
    """A valid answer without evictions: the batch by key (highest first), each pod on the first
    node with room where the topology rules still hold (matching nodes first for relaxed-affinity
    pods)."""
    states = plan.ctx.index.states([])
    topology = _topology(cluster, plan.ctx.index.running_list, [])
    batch = sorted(
        plan.ctx.index.batch(plan.scheduler_name),
        key=lambda p: (tuple(-k for k in plan.key(p)), p.creation, p.namespace, p.name),
    )
    free = _Free(states, batch)
    domains = Domains(cluster)  # workload groups stay in one topology domain
    placed: list[Pod] = []
    for pod in batch:
        binding = plan.ctx.binding(pod)
        # Only nodes with room for its requests can take it.
        names = sorted(free.with_room(pod), key=lambda n: (binding.mode == "relaxed" and n not in binding.matching, n))
        for name in names:
            state = states[name]
            if (
                not eligibility_problems(pod, state.node, binding)
                and not state.room_problems(pod)
                and topology.allows(pod, name)
                and domains.allows(pod, name)
            ):
                state.add(pod, batch=True)
                free.refresh(name)
                topology.add(pod, name)
                domains.add(pod, name)
                placed.append(pod)
                break
    return placed


def _by_priority(kept: Mapping[Key, int]) -> dict[Key, int]:
    out: dict[Key, int] = {}
    for (priority, _), count in kept.items():
        out[priority, 0] = out.get((priority, 0), 0) + count
    return out


def _tiers_per_namespace(
    index: ClusterIndex, placed: Iterable[Pod], preempted: Iterable[str]
) -> dict[int, dict[str, list[int]]]:
    """Per spec.priority and namespace: pods placed-and-running per restart tier, Always first
    (a list that compares in the namespace's own lexicographic order)."""
    gone = set(preempted)
    out: dict[int, dict[str, list[int]]] = {}
    kept = [p for pods in index.running.values() for p in pods if p.key not in gone]
    for pod in [*kept, *placed]:
        row = out.setdefault(pod.priority, {}).setdefault(pod.namespace, [0, 0, 0])
        row[3 - RESTART_TIERS[pod.restart_policy]] += 1
    return out


def _namespaces_improve(index: ClusterIndex, plan: _Plan, first_fit: list[Pod]) -> bool:
    """``restartTiers: namespace``: at the highest spec.priority where the plan changes anything,
    it keeps more pods of that priority cluster-wide, or some namespace ends better there in its
    own (tier) order: the thesis's order inside a namespace. (That no namespace pays for it is the
    preemption rule: at equal priority only a higher tier of the victim's own namespace preempts,
    which leaves that namespace better in its own order; the first-fit answer compared with here
    is one answer without evictions, not the engine's, so it may favour another namespace.)"""
    ours = _tiers_per_namespace(index, [pod for pod, _ in plan.pending.values()], plan.preempted())
    theirs = _tiers_per_namespace(index, first_fit, ())
    for priority in sorted(set(ours) | set(theirs), reverse=True):
        names = set(ours.get(priority, {})) | set(theirs.get(priority, {}))
        mine = {n: ours.get(priority, {}).get(n, [0, 0, 0]) for n in names}
        other = {n: theirs.get(priority, {}).get(n, [0, 0, 0]) for n in names}
        if mine == other:
            continue
        if sum(map(sum, mine.values())) > sum(map(sum, other.values())):
            return True
        return any(mine[n] > other[n] for n in names)
    return False


def _improvement_violations(plan: _Plan, cluster: Cluster) -> list[str]:
    """A plan (evictions or steps) must place-and-keep strictly more per key (highest first) than
    an answer without evictions: here a first-fit one, which the engine's own answer matches or
    beats. A plan that evicts nothing can never do that."""
    tiers = plan.ctx.restart_tiers
    index = plan.ctx.index
    with_plan = _kept(index, [pod for pod, _ in plan.pending.values()], plan.preempted(), restart_tiers=tiers)
    without = _kept(index, _first_fit(plan, cluster), (), restart_tiers=tiers)
    ours, theirs = per_key([with_plan, without])
    if tier_scope(tiers) == "namespace":
        if _namespaces_improve(index, plan, _first_fit(plan, cluster)):
            return []
        ours, theirs = per_key([_by_priority(with_plan), _by_priority(without)])
    elif ours > theirs:
        return []

    return [
        f"the plan does not strictly improve placed-and-running pods per key: {ours} with it, "
        f"{theirs} already without evictions (keys {sorted(with_plan.keys() | without.keys(), reverse=True)})"
    ]


def _utilisation(cluster: Cluster, moved: Mapping[str, str], resources: Sequence[str]) -> dict[str, list[float]]:
    """Per node, requests over allocatable per resource, with ``moved`` pods (key -> node) moved."""
    used: dict[str, dict[str, int]] = {n.name: {} for n in cluster.nodes}
    for pod in cluster.pods:
        if not pod.running or pod.node_name not in used:
            continue
        where = moved.get(pod.key, pod.node_name)
        for r in resources:
            used[where][r] = used[where].get(r, 0) + pod.requests.get(r, 0)
    out: dict[str, list[float]] = {}
    for node in cluster.nodes:
        out[node.name] = [
            used[node.name].get(r, 0) / allocatable(node, r) if allocatable(node, r) > 0 else 0.0 for r in resources
        ]
    return out


def _cluster_use(cluster: Cluster, resources: Sequence[str]) -> list[float]:
    """Per resource: every running pod's requests over every node's allocatable."""
    total = [sum(allocatable(n, r) for n in cluster.nodes) for r in resources]
    used = [sum(p.requests.get(r, 0) for p in cluster.pods if p.running) for r in resources]
    return [u / t if t > 0 else 0.0 for u, t in zip(used, total, strict=True)]


def _may_take(
    util: Mapping[str, list[float]], node: str, low: float, high: float, cluster: list[float], config: RebalanceConfig
) -> bool:
    """A landing node takes: below ``low`` on every weighted resource or, when no node is, lighter
    than the cluster by the thesis's score (10 x sum w ln(cluster use / node use) > 0); never hot."""
    if any(u > high for u in util[node]):
        return False
    if any(all(u < low for u in us) for us in util.values()):
        return all(u < low for u in util[node])
    weights = [w for w in config.weights.values() if w > 0]
    total = sum(weights)
    score = sum(
        w / total * math.log(max(c, 0.001) / max(u, 0.001))
        for w, c, u in zip(weights, cluster, util[node], strict=True)
    )
    return score > 0


def validate_rebalance(
    cluster: Cluster, result: Result, config: RebalanceConfig, *, scheduler_name: str = "placer", now: float = 0.0
) -> list[str]:
    """Every reason a rebalancing plan (``placer rebalance``) is wrong; empty when valid.

    The plan's own rules: only moves; each from a node above the high threshold to a node below
    the low one that stays at most at the high threshold once every move lands; never a bare pod,
    an Always-tier pod unless allowed (and then only of a ReplicaSet with two ready replicas), a
    Job's pod unless its Job opts in, or a pod moved within the cooldown; at most the plan's limit
    (``perPeriod``, or ``perPeriodPercent`` of the nodes when more), ``perNode`` off one node and
    the namespace limit (``perNamespace``, or ``perNamespacePercent`` of the plan's when more) in one
    namespace. Then the global plan's
    rules for moves (eviction and move eligibility, PDBs, replacements, step order, final capacity).
    The threshold rules read load by requests; with ``load: usage`` only the others are checked.
    """
    out: list[str] = []
    resources = [r for r, w in config.weights.items() if w > 0]
    high, low = config.thresholds.high / 100.0, config.thresholds.low / 100.0
    pods = {p.key: p for p in cluster.pods}
    moves = {e.pod: e.to or "" for e in result.evictions if e.kind == "move"}
    before = _utilisation(cluster, {}, resources)
    after = _utilisation(cluster, moves, resources)
    per_period = config.limits.moves(len(cluster.nodes))
    per_namespace_limit = config.limits.in_namespace(len(cluster.nodes))
    if len(moves) > per_period:
        out.append(f"{len(moves)} moves, more than the plan's limit {per_period} (perPeriod, perPeriodPercent)")
    off: dict[str, int] = {}
    per_namespace: dict[str, int] = {}
    for e in result.evictions:
        if e.kind != "move":
            out.append(f"eviction of {e.pod}: a rebalancing plan only moves pods")
            continue
        pod = pods.get(e.pod)
        if pod is None:
            continue  # named by the plan rules below
        off[e.node] = off.get(e.node, 0) + 1
        per_namespace[pod.namespace] = per_namespace.get(pod.namespace, 0) + 1
        target = e.to or ""
        if config.load == "requests":  # the thresholds are on measured usage otherwise, unseen here
            if not any(u > high for u in before.get(e.node, [])):
                out.append(f"move of {e.pod}: its node {e.node} is not above {config.thresholds.high:g} %")
            if target in before and not _may_take(before, target, low, high, _cluster_use(cluster, resources), config):
                out.append(
                    f"move of {e.pod}: its landing node {target} is neither below {config.thresholds.low:g} % "
                    "nor, with no node that cold, lighter than the cluster"
                )
            if target in after and any(u > high for u in after[target]):
                out.append(f"move of {e.pod}: its landing node {target} ends above {config.thresholds.high:g} %")
        if pod.restart_policy == "Always":
            rs = next(
                (
                    r
                    for r in cluster.replicasets
                    if pod.owner and r.namespace == pod.namespace and r.name == pod.owner.name
                ),
                None,
            )
            if not config.move_always_tier or rs is None or rs.ready_replicas < 2:
                out.append(f"move of {e.pod}: restart policy Always stays")
        if pod.moved_at is not None and now - pod.moved_at < config.limits.cooldown:
            out.append(f"move of {e.pod}: moved within the cooldown")
    out += [
        f"{n}: {k} moves off it, more than perNode {config.limits.per_node}"
        for n, k in off.items()
        if k > config.limits.per_node
    ]
    out += [
        f"namespace {ns}: {k} moves, more than its limit {per_namespace_limit} (perNamespace, perNamespacePercent)"
        for ns, k in per_namespace.items()
        if k > per_namespace_limit
    ]
    ctx = _Context.of(cluster, True)
    plan = _Plan(ctx=ctx, scheduler_name=scheduler_name, jobs=True)
    replacements = _resolve_placements(plan, cluster, result.placements, out)
    out += _eviction_violations(plan, cluster, result.evictions)
    out += _replacement_violations(plan, replacements)
    out += _step_violations(plan, cluster, result.steps)
    out += _final_violations(plan, cluster)
    return out


def validate_plan(
    cluster: Cluster,
    result: Result,
    *,
    restart_tiers: Tiers = True,
    scheduler_name: str = "placer",
    max_evictions: int | None = None,
) -> list[str]:
    """Every reason a solve's answer with a global plan is wrong; empty when valid.

    ``result`` is ``placer.service.solve_cluster``'s for one batch: pending placements,
    replacements of moved pods, evictions and steps. Without evictions, replacements or steps it
    is a plain set of placements, checked by ``validate_placements``. ``max_evictions`` is the cap
    the solve was given (None: none). The rules are in the module docstring.
    """
    if not result.evictions and not result.steps and all(p.kind == "pending" for p in result.placements):
        placements = {p.pod: p.node for p in result.placements if p.pod is not None}
        return validate_placements(cluster, placements, restart_tiers=restart_tiers, scheduler_name=scheduler_name)
    cluster = holding_nominations(cluster, scheduler_name)
    ctx = _Context.of(cluster, restart_tiers)
    plan = _Plan(ctx=ctx, scheduler_name=scheduler_name)
    violations: list[str] = []
    replacements = _resolve_placements(plan, cluster, result.placements, violations)
    violations += _eviction_violations(plan, cluster, result.evictions)
    violations += _replacement_violations(plan, replacements)
    violations += _cap_violations(ctx.index, result.evictions, max_evictions)
    violations += texts(_eligibility_violations(ctx, [(pod, node) for pod, node in plan.pending.values()]))
    violations += _bind_eligibility(plan, result.steps)
    violations += _step_violations(plan, cluster, result.steps)
    violations += _final_violations(plan, cluster)
    violations += _improvement_violations(plan, cluster)
    violations += texts(_group_violations(plan, cluster, result.evictions))
    return violations


def _group_violations(plan: _Plan, cluster: Cluster, evictions: Sequence[Eviction]) -> list[Violation]:
    """Workload groups after the plan: one domain each (evicted pods gone, pending pods where
    placed), and groups with ``disruptionMode: all`` evicted whole or not at all."""
    evicted = {e.pod for e in evictions}
    placed = {key: node for key, (_, node) in plan.pending.items()}
    return domain_violations(cluster, placed, gone=evicted) + disruption_violations(cluster, evicted)
