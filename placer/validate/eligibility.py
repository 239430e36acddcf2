"""Whether a pod may use a node whatever its load: cordon, taints, labels (with weak binding), volumes.

Weak binding (pod annotations): ``placer.io/when-no-node-matches: ignore-affinity`` drops the
selector/required affinity when no node's labels match; ``placer.io/when-no-node-fits:
ignore-affinity`` allows non-matching nodes, but only while no matching node has room (that
second half is a rule on placements: ``placer.validate.placements``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from placer.models import (
    Node,
    Pod,
)
from placer.validate.index import NodeLabels
from placer.validate.semantics import UNSCHEDULABLE_TAINT, untolerated_taint, volume_problems

WHEN_NO_NODE_MATCHES = "placer.io/when-no-node-matches"
WHEN_NO_NODE_FITS = "placer.io/when-no-node-fits"
IGNORE_AFFINITY = "ignore-affinity"


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
