"""Which running pods a global plan may touch, and how.

- never evicted: DaemonSet pods, mirror/static pods, pods annotated ``placer.io/evictable:
  "false"`` or ``cluster-autoscaler.kubernetes.io/safe-to-evict: "false"``, pods covered by more
  than one PodDisruptionBudget (the Eviction API refuses them), and pods using host ports (kept
  fixed: the plan does not model port clashes of moved pods);
- movable: owned by a ReplicaSet whose template has the placer scheduler name (its replacement
  comes back and is bound where the plan says);
- preemptible: anything else not excluded above, as a victim of a strictly higher key only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from placer.models import Cluster, LabelSelector, Pod, PodDisruptionBudget

__all__ = ["Eligibility", "classify", "selector_matches"]

OPT_OUT = (("placer.io/evictable", "false"), ("cluster-autoscaler.kubernetes.io/safe-to-evict", "false"))


def selector_matches(selector: LabelSelector | None, labels: dict[str, str]) -> bool:
    """metav1.LabelSelector semantics: a null selector matches nothing, an empty one everything."""
    if selector is None:
        return False
    if any(labels.get(k) != v for k, v in selector.match_labels.items()):
        return False
    for req in selector.match_expressions:
        present = req.key in labels
        if req.operator == "In" and not (present and labels[req.key] in req.values):
            return False
        if req.operator == "NotIn" and present and labels[req.key] in req.values:
            return False
        if req.operator == "Exists" and not present:
            return False
        if req.operator == "DoesNotExist" and present:
            return False
    return True


@dataclass(frozen=True)
class Eligibility:
    pod: Pod
    evictable: bool
    movable: bool
    pdbs: tuple[int, ...]  # indices into Cluster.pdbs
    why_not: str = ""


def _pdbs_of(pod: Pod, pdbs: Sequence[PodDisruptionBudget]) -> tuple[int, ...]:
    return tuple(
        i for i, b in enumerate(pdbs) if b.namespace == pod.namespace and selector_matches(b.selector, pod.labels)
    )


def classify(cluster: Cluster, pod: Pod, scheduler_name: str) -> Eligibility:
    pdbs = _pdbs_of(pod, cluster.pdbs)
    reason = ""
    if pod.owner is not None and pod.owner.kind == "DaemonSet":
        reason = "DaemonSet pod"
    elif pod.mirror:
        reason = "mirror/static pod"
    elif any(pod.annotations.get(k) == v for k, v in OPT_OUT):
        reason = "opted out of eviction"
    elif len(pdbs) > 1:
        reason = "covered by more than one PodDisruptionBudget"
    elif pod.host_ports:
        reason = "uses host ports"
    if reason:
        return Eligibility(pod=pod, evictable=False, movable=False, pdbs=pdbs, why_not=reason)
    movable = False
    if pod.owner is not None and pod.owner.kind == "ReplicaSet":
        movable = any(
            rs.namespace == pod.namespace and rs.name == pod.owner.name and rs.scheduler_name == scheduler_name
            for rs in cluster.replicasets
        )
    return Eligibility(pod=pod, evictable=True, movable=movable, pdbs=pdbs)
