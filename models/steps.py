"""Plan step kinds: the one registry of what a step of a plan can be.

A step kind has a name (``op``, as it appears in the JSON output), an ``effect`` on the cluster
and a ``rank`` that orders steps ready at the same time. Every consumer (the plan's ordering, the
service's accounting, the controller's executor, the independent validator, rendering) looks the
kind up here and dispatches on its effect through a table of its own, so a new kind with an
existing effect is used everywhere once registered.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "AWAIT_GONE",
    "BIND",
    "EVICT",
    "Effect",
    "StepKind",
    "register_step_kind",
    "step_kind",
    "step_kinds",
    "unregister_step_kind",
]


class Effect(StrEnum):
    EVICT = "evict"  # ask the API to evict the pod (PodDisruptionBudgets apply)
    AWAIT_GONE = "await-gone"  # done once the pod is gone: its room is free only from then on
    BIND = "bind"  # bind a pending pod or a replacement into room that must be free by then
    MARK = "mark"  # no change to the cluster: a point other steps can wait on


@dataclass(frozen=True)
class StepKind:
    op: str
    effect: Effect
    rank: int  # among steps ready at once, lower ranks come first in a plan's listing
    verb: str  # what it does, in words (rendering)


_KINDS: dict[str, StepKind] = {}


def register_step_kind(kind: StepKind) -> StepKind:
    if kind.op in _KINDS and _KINDS[kind.op] != kind:
        raise ValueError(f"step kind {kind.op!r} is already registered")
    _KINDS[kind.op] = kind
    return kind


def unregister_step_kind(op: str) -> None:
    if op in (EVICT.op, AWAIT_GONE.op, BIND.op):
        raise ValueError(f"step kind {op!r} is built in")
    _KINDS.pop(op, None)


def step_kind(op: str) -> StepKind:
    try:
        return _KINDS[op]
    except KeyError:
        raise ValueError(f"unknown step op {op!r} (known: {', '.join(sorted(_KINDS))})") from None


def step_kinds() -> tuple[StepKind, ...]:
    return tuple(_KINDS.values())


EVICT = register_step_kind(StepKind("evict", Effect.EVICT, 0, "evict"))
AWAIT_GONE = register_step_kind(StepKind("await-gone", Effect.AWAIT_GONE, 1, "wait until gone"))
BIND = register_step_kind(StepKind("bind", Effect.BIND, 2, "bind"))
