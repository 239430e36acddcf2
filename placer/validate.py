"""Independent checker of placements: Kubernetes semantics re-implemented from the docs.

This module shares no code with ``placer.engine`` (an import-linter contract enforces it): every
rule below is written again from the Kubernetes documentation and DESIGN.md, in plain Python, one
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
  the node omits it), running pods and placed pods together fit the node's allocatable;
- weak binding (pod annotations): ``placer.io/when-no-node-matches: ignore-affinity`` drops the
  selector/required affinity when no node's labels match; ``placer.io/when-no-node-fits:
  ignore-affinity`` allows non-matching nodes, but only while no matching node has room;
- priority key: ``(priority, restart tier)`` with Always=3 > OnFailure=2 > Never=1, or
  ``(priority, 0)`` when restart tiers are off.

``validate_placements`` also checks maximality: an unplaced pod of the batch that fits some
eligible node in the final state was left out for nothing, and one that would fit after removing
the batch pods of strictly lower key placed on a node was outranked by a lower key.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from placer.models import (
    POD_COUNT,
    Cluster,
    HostPort,
    Node,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Pod,
    Taint,
    Toleration,
)

__all__ = [
    "DEFAULT_MAX_PODS",
    "UNSCHEDULABLE_TAINT",
    "Binding",
    "NodeState",
    "affinity_binding",
    "allocatable",
    "batch_pods",
    "demand",
    "eligibility_problems",
    "final_states",
    "go_parse_int",
    "hard_violations",
    "node_selector_matches",
    "pod_key",
    "ports_clash",
    "requirement_matches",
    "selector_matches",
    "term_matches",
    "terms_match",
    "tolerates",
    "untolerated_taint",
    "validate_placements",
]

DEFAULT_MAX_PODS = 110  # kubelet's default --max-pods
UNSCHEDULABLE_TAINT = Taint(key="node.kubernetes.io/unschedulable", effect="NoSchedule")
WHEN_NO_NODE_MATCHES = "placer.io/when-no-node-matches"
WHEN_NO_NODE_FITS = "placer.io/when-no-node-fits"
IGNORE_AFFINITY = "ignore-affinity"
RESTART_TIERS = {"Always": 3, "OnFailure": 2, "Never": 1}
WILDCARD_IP = "0.0.0.0"
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_GO_INT = re.compile(r"[+-]?[0-9]+")


# --- labels -----------------------------------------------------------------------------------


def go_parse_int(text: str) -> int | None:
    """The integer ``strconv.ParseInt(text, 10, 64)`` reads, or None where Go returns an error.

    Go accepts an optional sign and ASCII digits only (no spaces, underscores or other digits)
    and rejects values outside int64.
    """
    if not _GO_INT.fullmatch(text):
        return None
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


def untolerated_taint(node: Node, tolerations: Sequence[Toleration]) -> Taint | None:
    """The first hard taint of the node (cordon included) that no toleration tolerates."""
    hard = [t for t in node.taints if t.effect in ("NoSchedule", "NoExecute")]
    if node.unschedulable:
        hard.insert(0, UNSCHEDULABLE_TAINT)
    for taint in hard:
        if not any(tolerates(tol, taint) for tol in tolerations):
            return taint
    return None


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


def pod_key(pod: Pod, *, restart_tiers: bool = True) -> tuple[int, int]:
    """The priority key: (priority, restart tier Always=3 > OnFailure=2 > Never=1, or 0)."""
    return (pod.priority, RESTART_TIERS[pod.restart_policy] if restart_tiers else 0)


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
    matching = frozenset(n.name for n in nodes if selector_matches(pod.node_selector, pod.required_terms, n))
    if not matching and pod.annotations.get(WHEN_NO_NODE_MATCHES) == IGNORE_AFFINITY:
        return Binding("dropped", matching)
    if matching and pod.annotations.get(WHEN_NO_NODE_FITS) == IGNORE_AFFINITY:
        return Binding("relaxed", matching)
    return Binding("strict", matching)


def eligibility_problems(pod: Pod, node: Node, binding: Binding) -> list[str]:
    """Why the pod may not go to the node whatever its load: cordon, taints, labels."""
    problems = []
    taint = untolerated_taint(node, pod.tolerations)
    if taint is UNSCHEDULABLE_TAINT:
        problems.append("node is cordoned (unschedulable) and the pod does not tolerate it")
    elif taint is not None:
        problems.append(f"untolerated taint {taint.key}={taint.value}:{taint.effect}")
    if not binding.allows(node):
        problems.append("node does not match the pod's nodeSelector/required node affinity")
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
        for r, v in demand(pod).items():
            self.used[r] -= v
        self.ports = [(k, p) for k, p in self.ports if k != pod.key]
        self.placed.remove(pod)

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
    states = {n.name: NodeState(n) for n in cluster.nodes}
    for pod in cluster.pods:
        if pod.running and pod.node_name in states:
            states[pod.node_name].add(pod, batch=False)
    for pod, node_name in placed:
        states[node_name].add(pod, batch=True)
    return states


# --- the batch ---------------------------------------------------------------------------------


def batch_pods(cluster: Cluster, scheduler_name: str = "placer") -> list[Pod]:
    """Pending pods the scheduler must consider: addressed to it, ungated and supported."""
    return [
        p
        for p in cluster.pods
        if p.pending and scheduler_name in ("*", p.scheduler_name) and not p.scheduling_gates and p.unsupported is None
    ]


# --- checks -----------------------------------------------------------------------------------


@dataclass
class _Context:
    cluster: Cluster
    nodes: dict[str, Node]
    bindings: dict[str, Binding]
    restart_tiers: bool

    def binding(self, pod: Pod) -> Binding:
        if pod.key not in self.bindings:
            self.bindings[pod.key] = affinity_binding(pod, self.cluster.nodes)
        return self.bindings[pod.key]


def _resolve(
    cluster: Cluster, placements: Mapping[str, str], scheduler_name: str, violations: list[str]
) -> list[tuple[Pod, str]]:
    """(pod, node name) of the placements whose pod and node exist; the others are violations."""
    pods = {p.key: p for p in cluster.pods}
    nodes = {n.name for n in cluster.nodes}
    out: list[tuple[Pod, str]] = []
    for key, node_name in sorted(placements.items()):
        pod = pods.get(key)
        if pod is None:
            violations.append(f"{key}: placed on {node_name} but no such pod is in the cluster")
            continue
        if not pod.pending:
            violations.append(f"{key}: placed on {node_name} but the pod is not pending (phase {pod.phase})")
            continue
        if node_name not in nodes:
            violations.append(f"{key}: placed on {node_name}, which is not a node of the cluster")
            continue
        if pod.unsupported is not None:
            violations.append(f"{key}: placed on {node_name} but placer does not support it ({pod.unsupported})")
        if pod.scheduling_gates:
            violations.append(f"{key}: placed on {node_name} but it waits on scheduling gates")
        if scheduler_name not in ("*", pod.scheduler_name):
            violations.append(f"{key}: placed on {node_name} but it is addressed to scheduler {pod.scheduler_name!r}")
        out.append((pod, node_name))
    return out


def _eligibility_violations(ctx: _Context, placed: Sequence[tuple[Pod, str]]) -> list[str]:
    """Placed pods on nodes they may not use: cordon, taints, labels."""
    return [
        f"{pod.key} on {node_name}: {problem}"
        for pod, node_name in placed
        for problem in eligibility_problems(pod, ctx.nodes[node_name], ctx.binding(pod))
    ]


def _node_violations(states: Mapping[str, NodeState]) -> list[str]:
    """Over-capacity nodes (that received batch pods) and host-port clashes of placed pods."""
    out = []
    for name, state in sorted(states.items()):
        if not state.placed:
            continue
        # Kubernetes checks only what a pod requests: a node already over on a resource the placed
        # pods do not ask for is not their fault.
        requested = {r for pod in state.placed for r in demand(pod)}
        over = [f"{r} {used} > allocatable {alloc}" for r, (used, alloc) in state.overload().items() if r in requested]
        if over:
            pods = ", ".join(p.key for p in state.placed)
            out.append(f"node {name} over capacity after placing {pods}: {'; '.join(over)}")
        for pod in state.placed:
            for clash in state.port_clashes(pod):
                out.append(f"{pod.key} on {name}: {clash}")
    return out


def _relaxed_violations(ctx: _Context, states: Mapping[str, NodeState]) -> list[str]:
    """A relaxed-affinity pod may use a non-matching node only while no matching node has room."""
    out = []
    for name, state in sorted(states.items()):
        for pod in state.placed:
            binding = ctx.binding(pod)
            if binding.mode != "relaxed" or name in binding.matching:
                continue
            for other in sorted(binding.matching):
                target = states[other]
                if not eligibility_problems(pod, target.node, binding) and not target.room_problems(pod):
                    out.append(
                        f"{pod.key} on {name}: placed outside its node affinity (when-no-node-fits: "
                        f"ignore-affinity) although matching node {other} has room for it"
                    )
                    break
    return out


def _left_out_violations(ctx: _Context, states: Mapping[str, NodeState], left: Sequence[Pod]) -> list[str]:
    """Maximality and priority for the unplaced pods of the batch."""
    out = []
    for pod in left:
        key = pod_key(pod, restart_tiers=ctx.restart_tiers)
        binding = ctx.binding(pod)
        for name, state in sorted(states.items()):
            if eligibility_problems(pod, state.node, binding):
                continue
            if not state.room_problems(pod):
                out.append(f"{pod.key}: left unplaced although it fits on node {name}")
                break
            lower = [p for p in state.placed if pod_key(p, restart_tiers=ctx.restart_tiers) < key]
            if lower and not state.room_problems(pod, without=lower):
                names = ", ".join(p.key for p in lower)
                out.append(
                    f"{pod.key}: left unplaced although it would fit on node {name} "
                    f"in place of lower-key pods {names} (key {key})"
                )
                break
    return out


def hard_violations(cluster: Cluster, placements: Mapping[str, str], *, scheduler_name: str = "placer") -> list[str]:
    """Violations of the hard constraints only (no maximality, priority or relaxed-affinity rule).

    A set of placements with no hard violation is a feasible answer; ``validate_placements`` adds
    the optimality-style rules on top.
    """
    violations: list[str] = []
    resolved = _resolve(cluster, placements, scheduler_name, violations)
    ctx = _Context(cluster, {n.name: n for n in cluster.nodes}, {}, True)
    violations += _eligibility_violations(ctx, resolved)
    violations += _node_violations(final_states(cluster, resolved))
    return violations


def validate_placements(
    cluster: Cluster,
    placements: Mapping[str, str],
    *,
    restart_tiers: bool = True,
    scheduler_name: str = "placer",
) -> list[str]:
    """Every reason the placements (pending pod key -> node name) are wrong; empty when valid.

    Checks: each placed pod is pending, supported, ungated and addressed to ``scheduler_name``
    (``"*"`` for any), and its node exists; taints and cordon; labels and affinity (with the
    weak-binding annotations); capacity and host ports in the final state; relaxed-affinity pods
    off their matching nodes only while those have no room; and for every unplaced pod of the
    batch, that no eligible node has room for it, even after removing the batch pods of strictly
    lower key placed there.
    """
    violations: list[str] = []
    resolved = _resolve(cluster, placements, scheduler_name, violations)
    ctx = _Context(cluster, {n.name: n for n in cluster.nodes}, {}, restart_tiers)
    states = final_states(cluster, resolved)
    violations += _eligibility_violations(ctx, resolved)
    violations += _node_violations(states)
    violations += _relaxed_violations(ctx, states)
    left = [p for p in batch_pods(cluster, scheduler_name) if p.key not in placements]
    violations += _left_out_violations(ctx, states, left)
    return violations
