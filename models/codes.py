"""The names placer publishes, each declared once: unplaced codes, solve statuses, policies.

Each is a ``Literal`` (so mypy checks every use) with the tuple of its values beside it; nothing
else in the source tree spells a ``Literal`` of these names (tests/test_source_tree.py).
"""

from __future__ import annotations

from typing import Literal, get_args

__all__ = [
    "BASELINES",
    "POLICIES",
    "SOLVE_STATUSES",
    "STATUS_ORDER",
    "UNPLACED_CODES",
    "Baseline",
    "Policy",
    "SolveStatus",
    "UnplacedCode",
    "worst_status",
]

# Unsupported: a constraint placer does not honour; NotSolved: the solver stopped before deciding
# the pod; Outranked: pods of a higher key, or of an equal key placed first, took the room it could
# use before the batch (README "Outranked, precisely"); Unschedulable: no node could take it;
# Invalid: a field of the pod placer cannot read (the reason names it).
UnplacedCode = Literal["Unschedulable", "Outranked", "NotSolved", "Unsupported", "Invalid"]
UNPLACED_CODES: tuple[UnplacedCode, ...] = get_args(UnplacedCode)

SolveStatus = Literal["optimal", "feasible", "fallback"]  # proven; time limit hit; greedy answer
SOLVE_STATUSES: tuple[SolveStatus, ...] = get_args(SolveStatus)
STATUS_ORDER: dict[str, int] = {s: i for i, s in enumerate(SOLVE_STATUSES)}  # best first

Baseline = Literal["default", "most-requested"]  # kube-scheduler simulations (default scoring, MostAllocated)
Policy = Literal["placer", Baseline]
POLICIES: tuple[Policy, ...] = get_args(Policy)
BASELINES: tuple[Baseline, ...] = get_args(Baseline)


def worst_status(a: SolveStatus, b: SolveStatus) -> SolveStatus:
    return a if STATUS_ORDER[a] >= STATUS_ORDER[b] else b
