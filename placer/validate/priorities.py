"""The priority key the validator compares pods by, and who outranks whom.

- priority key: ``(priority, restart tier)`` with Always=3 > OnFailure=2 > Never=1, or
  ``(priority, 0)`` when restart tiers are off;
- ``outranks``: a higher spec.priority; at equal priority a higher restart tier where tiers count
  (``cluster``: always; ``namespace``: within one namespace; ``off``: never).
"""

from __future__ import annotations

from placer.models import Pod, TierScope

RESTART_TIERS = {"Always": 3, "OnFailure": 2, "Never": 1}
Key = tuple[int, int]


Tiers = TierScope | bool  # True reads as "cluster", False as "off" (as in the configuration)


def tier_scope(restart_tiers: Tiers) -> TierScope:
    if restart_tiers is True:
        return "cluster"
    if restart_tiers is False:
        return "off"
    return restart_tiers


def pod_key(pod: Pod, *, restart_tiers: Tiers = True) -> Key:
    """The priority key the objective compares: (priority, restart tier Always=3 > OnFailure=2 >
    Never=1, or 0 with tiers off). Who may preempt whom is ``outranks``."""
    return key_of(pod.priority, pod.restart_policy, restart_tiers)


def key_of(priority: int, restart_policy: str, restart_tiers: Tiers) -> Key:
    """The priority key of every pod of this spec.priority and restart policy (``pod_key``)."""
    return (priority, RESTART_TIERS[restart_policy] if tier_scope(restart_tiers) != "off" else 0)


def outranks(pod: Pod, other: Pod, *, restart_tiers: Tiers = True) -> bool:
    """``pod`` ranks strictly above ``other``: higher spec.priority; or equal, and a higher restart
    tier where tiers count (``cluster``: always; ``namespace``: within one namespace; ``off``: never)."""
    if pod.priority != other.priority:
        return pod.priority > other.priority
    scope = tier_scope(restart_tiers)
    if scope == "off" or (scope == "namespace" and pod.namespace != other.namespace):
        return False
    return RESTART_TIERS[pod.restart_policy] > RESTART_TIERS[other.restart_policy]
