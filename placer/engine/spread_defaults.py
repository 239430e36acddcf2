"""Cluster-default topology spreading (kube-scheduler's PodTopologySpread defaulting).

A pod without topology spread constraints of its own gets the configured defaults, with the
selector of the ReplicaSets in its namespace that select it (kube-scheduler also merges Services,
ReplicationControllers and StatefulSets, which placer does not read). A pod no ReplicaSet selects
gets none, as in kube-scheduler.
"""

from __future__ import annotations

from collections.abc import Sequence

from placer.engine.selectors import selector_matches
from placer.models import LabelSelector, Pod, ReplicaSet, SpreadConstraint, SpreadDefaults

__all__ = ["SYSTEM_DEFAULTS", "with_default_spread"]

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
SYSTEM_DEFAULTS = (
    (3, HOSTNAME),
    (5, ZONE),
)


def _constraints(defaults: SpreadDefaults) -> list[tuple[int, str, str]]:
    if defaults.defaulting_type == "System":
        return [(skew, key, "ScheduleAnyway") for skew, key in SYSTEM_DEFAULTS]
    if defaults.defaulting_type == "List":
        return [(c.max_skew, c.topology_key, c.when_unsatisfiable) for c in defaults.constraints]
    return []


def _merged_selector(pod: Pod, replicasets: Sequence[ReplicaSet]) -> LabelSelector | None:
    labels: dict[str, str] = {}
    expressions: list[object] = []
    found = False
    for rs in replicasets:
        if rs.namespace == pod.namespace and rs.selector is not None and selector_matches(rs.selector, pod.labels):
            if not rs.selector.match_labels and not rs.selector.match_expressions:
                continue
            found = True
            labels.update(rs.selector.match_labels)
            expressions.extend(rs.selector.match_expressions)
    if not found:
        return None
    return LabelSelector.model_validate({"match_labels": labels, "match_expressions": tuple(expressions)})


def with_default_spread(pods: Sequence[Pod], replicasets: Sequence[ReplicaSet], defaults: SpreadDefaults) -> list[Pod]:
    constraints = _constraints(defaults)
    if not constraints:
        return list(pods)
    out = []
    for pod in pods:
        selector = None if pod.spread else _merged_selector(pod, replicasets)
        if selector is None:
            out.append(pod)
            continue
        spread = tuple(
            SpreadConstraint(max_skew=skew, topology_key=key, when_unsatisfiable=when, selector=selector)
            for skew, key, when in constraints
        )
        out.append(pod.model_copy(update={"spread": spread}))
    return out
