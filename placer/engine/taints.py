"""Taints and tolerations, evaluated per distinct taint set of the cluster."""

from __future__ import annotations

from collections.abc import Sequence

from placer.models import Taint, Toleration

__all__ = ["UNSCHEDULABLE_TAINT", "first_untolerated", "prefer_no_schedule_count", "tolerates"]

UNSCHEDULABLE_TAINT = Taint(key="node.kubernetes.io/unschedulable", effect="NoSchedule")


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if not toleration.key and toleration.operator != "Exists":
        return False
    return toleration.operator == "Exists" or toleration.value == taint.value


def _tolerated(tolerations: Sequence[Toleration], taint: Taint) -> bool:
    return any(tolerates(t, taint) for t in tolerations)


def first_untolerated(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> Taint | None:
    """The first NoSchedule/NoExecute taint the pod does not tolerate (kube-scheduler's filter)."""
    for taint in taints:
        if taint.effect != "PreferNoSchedule" and not _tolerated(tolerations, taint):
            return taint
    return None


def prefer_no_schedule_count(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> int:
    """How many PreferNoSchedule taints the pod does not tolerate (kube-scheduler's score input)."""
    return sum(1 for t in taints if t.effect == "PreferNoSchedule" and not _tolerated(tolerations, t))
