"""One broken rule as data (``Violation``), the answer of every check of the validator."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

Rule = Literal[
    # the placements themselves (placer.validate.placements)
    "placement",  # the pod or node does not exist, the pod is not pending, not addressed to placer, ...
    "eligibility",  # cordon, taints, node affinity, volumes
    "capacity",
    "host-ports",
    "relaxed-affinity",
    "maximality",  # left unplaced although it fits
    "priority",  # left unplaced although it would fit in place of lower-key pods
    "gang",
    # workload groups (placer.validate.groups)
    "group-domain",
    "group-disruption",
    # topology (placer.validate.topology)
    "affinity key",
    "affinity",
    "anti-affinity",
    "spread key",
    "topology-spread",
]


@dataclass(frozen=True)
class Violation:
    """One broken rule, the validator's answer as data: the ``rule``, the ``subject`` it is about
    (a pod key, a node name, a gang), one line of ``text`` for people, and ``about``: the rest of
    what identifies it (the node, a term or constraint index, the other pod of a pair). A change to
    a state is judged by ``what``: the same violation with other counts in its text is not a new one."""

    rule: Rule
    subject: str
    text: str
    about: tuple[object, ...] = ()

    @property
    def what(self) -> tuple[object, ...]:
        return (self.rule, self.subject, *self.about)

    def __str__(self) -> str:
        return self.text


def texts(violations: Iterable[Violation]) -> list[str]:
    """The violations' one-line messages, for people and for the callers that want words only."""
    return [v.text for v in violations]
