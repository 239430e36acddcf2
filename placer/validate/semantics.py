"""Kubernetes semantics, re-stated from the Kubernetes documentation in the validator's own words.

One small function per rule, shared by every check of the validator (and by nothing in
``placer.engine``):

- labels: ``nodeSelector`` needs every key=value pair on the node; required node affinity terms
  are ORed, the requirements inside a term ANDed; a term with no requirement matches nothing and
  an empty list of terms matches nothing; ``NotIn``/``DoesNotExist`` hold when the key is absent;
  ``Gt``/``Lt`` parse both sides as Go's ``strconv.ParseInt(s, 10, 64)`` does (optional sign,
  ASCII digits, int64 range) and never match otherwise; ``matchFields`` reads ``metadata.name``;
  a ``metav1.LabelSelector`` (pods, namespaces, PodDisruptionBudgets) by
  ``label_selector_matches``;
- taints: ``NoSchedule`` and ``NoExecute`` taints need a toleration (``PreferNoSchedule`` is soft);
  a cordoned node behaves as if it had the taint ``node.kubernetes.io/unschedulable:NoSchedule``;
- host ports: two pods on one node never use the same port and protocol with equal host IPs or
  either host IP ``0.0.0.0``;
- quantities: a pod takes every positive request and one pod slot (``demand``); a node offers its
  allocatable, 0 of a resource it omits and 110 pods (``pods`` allocatable) when it omits that;
- volumes: the node matches at least one term of every entry of ``volume_terms`` (one per bound
  PersistentVolume with node affinity; weak binding never drops these); a pod with a
  ``volume_problem`` goes nowhere.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from placer.models import (
    POD_COUNT,
    HostPort,
    LabelSelector,
    LabelSelectorRequirement,
    Node,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Pod,
    Taint,
    Toleration,
)

DEFAULT_MAX_PODS = 110  # kubelet's default --max-pods
UNSCHEDULABLE_TAINT = Taint(key="node.kubernetes.io/unschedulable", effect="NoSchedule")
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


def requirement_matches(req: NodeSelectorRequirement | LabelSelectorRequirement, labels: Mapping[str, str]) -> bool:
    """One ``matchExpressions`` requirement against labels: a node selector's (a node's labels) or
    a label selector's (which has no ``Gt``/``Lt``)."""
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


def label_selector_matches(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """``metav1.LabelSelector`` over labels (pods, namespaces; PodDisruptionBudgets use it too).

    A null selector matches nothing and an empty one everything; every ``matchLabels`` pair and
    every expression must hold; ``NotIn`` and ``DoesNotExist`` hold when the key is absent.
    """
    if selector is None:
        return False
    if any(labels.get(k) != v for k, v in selector.match_labels.items()):
        return False
    return all(requirement_matches(req, labels) for req in selector.match_expressions)


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


def first_untolerated(taints: Iterable[Taint], tolerations: Sequence[Toleration]) -> Taint | None:
    """The first NoSchedule or NoExecute taint that no toleration tolerates."""
    for taint in taints:
        if taint.effect in ("NoSchedule", "NoExecute") and not any(tolerates(tol, taint) for tol in tolerations):
            return taint
    return None


def untolerated_taint(node: Node, tolerations: Sequence[Toleration]) -> Taint | None:
    """The first hard taint of the node (cordon included) that no toleration tolerates."""
    cordon = (UNSCHEDULABLE_TAINT,) if node.unschedulable else ()
    return first_untolerated((*cordon, *node.taints), tolerations)


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


def shortages(node: Node, used: Mapping[str, int], pod: Pod) -> list[str]:
    """The resources (the pod count included) the node lacks for the pod, given what is ``used``
    of it, as reasons: ``too many pods`` or ``insufficient r (needs v, free f)``."""
    out = []
    for r, v in sorted(demand(pod).items()):
        have = allocatable(node, r) - used.get(r, 0)
        if v > have:
            out.append("too many pods" if r == POD_COUNT else f"insufficient {r} (needs {v}, free {have})")
    return out
