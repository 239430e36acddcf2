"""Priority keys and who outranks whom.

A pod's key is (spec.priority, restart tier) compared lexicographically (the tier is 0 with
``restartTiers: off``): the objective places the most pods per key, highest first. Who may
preempt whom is ``outranks``: a higher key, except that with ``restartTiers: namespace`` (the
default) the restart tier ranks pods of one namespace only, so across namespaces only a strictly
higher spec.priority preempts.
"""

from __future__ import annotations

from placer.models import Pod, TierScope

__all__ = ["TIERS", "outranks", "pod_key", "tier"]

TIERS = {"Always": 3, "OnFailure": 2, "Never": 1}


def tier(pod: Pod) -> int:
    return TIERS[pod.restart_policy]


def pod_key(pod: Pod, *, restart_tiers: TierScope) -> tuple[int, int]:
    """The key the objective compares: the tier is part of it unless tiers are off."""
    return (pod.priority, tier(pod) if restart_tiers != "off" else 0)


def outranks(pod: Pod, other: Pod, *, restart_tiers: TierScope) -> bool:
    """``pod`` ranks strictly above ``other`` (may preempt it, as far as priorities go): a higher
    spec.priority, or an equal one and a higher restart tier where tiers count between the two."""
    if pod.priority != other.priority:
        return pod.priority > other.priority
    if restart_tiers == "off" or (restart_tiers == "namespace" and pod.namespace != other.namespace):
        return False
    return tier(pod) > tier(other)
