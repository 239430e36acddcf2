"""Priority keys: (spec.priority, restart tier), compared lexicographically."""

from __future__ import annotations

from placer.models import Pod

__all__ = ["TIERS", "pod_key"]

TIERS = {"Always": 3, "OnFailure": 2, "Never": 1}


def pod_key(pod: Pod, *, restart_tiers: bool) -> tuple[int, int]:
    """Always > OnFailure > Never at equal priority, unless restart tiers are turned off."""
    return (pod.priority, TIERS[pod.restart_policy] if restart_tiers else 0)
