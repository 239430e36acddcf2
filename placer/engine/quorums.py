"""Composite gangs of workload groups (Kubernetes 1.37 CompositePodGroup ``minGroupCount``).

A *quorum* is one CompositePodGroup with a gang policy above pods of the batch
(``Pod.group_quorums``): at least ``min_groups`` of its child groups are placed together, or none
of its pods is. A child counts once any of its pods is placed (a PodGroup child with a gang is
placed whole, a composite child only with its own quorum, so "any pod" is kube-scheduler's "the
child is scheduled"); a child with pods already running counts as placed.

Compiled once per batch (``compile_quorums``) and read by the CP-SAT constraint
(``constraints.quorums``), the greedy start and every other answer (``short``: the groups of
quorums an answer leaves short, which are then not placed at all), and the unplaced reasons.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from placer.engine.snapshot import Snapshot

if TYPE_CHECKING:
    from placer.engine.batch import Group

__all__ = ["Quorum", "compile_quorums", "repair", "short"]


@dataclass(frozen=True)
class Quorum:
    name: str  # "CompositePodGroup ns/name"
    min_groups: int  # minGroupCount
    running: int  # child groups with pods already running
    children: tuple[tuple[int, ...], ...]  # per child group not running yet: its batch groups

    @property
    def need(self) -> int:
        """Child groups of the batch that must be placed with any one of them."""
        return self.min_groups - self.running

    @property
    def groups(self) -> tuple[int, ...]:
        return tuple(gi for child in self.children for gi in child)

    @property
    def present(self) -> int:
        """Child groups there are (running, or pending in the batch)."""
        return self.running + len(self.children)


def compile_quorums(snapshot: Snapshot, groups: Sequence[Group]) -> tuple[Quorum, ...]:
    """The quorums above the batch's pods that the running pods do not meet already, by name."""
    members: dict[str, tuple[int, dict[str, list[int]]]] = {}
    for gi, group in enumerate(groups):
        for q in group.pods[0].group_quorums:
            members.setdefault(q.group, (q.min_groups, {}))[1].setdefault(q.child, []).append(gi)
    if not members:
        return ()
    running: dict[str, set[str]] = {}
    for pods in snapshot.running:
        for pod in pods:
            for q in pod.group_quorums:
                if q.group in members and pod.running:
                    running.setdefault(q.group, set()).add(q.child)
    out = []
    for name in sorted(members):
        min_groups, children = members[name]
        ran = running.get(name, set())
        quorum = Quorum(
            name=name,
            min_groups=min_groups,
            running=len(ran),
            children=tuple(tuple(gis) for child, gis in sorted(children.items()) if child not in ran),
        )
        if quorum.need > 0:
            out.append(quorum)
    return tuple(out)


def short(quorums: Sequence[Quorum], placed: Sequence[int]) -> frozenset[int]:
    """Batch groups an answer (``placed``: pods placed per batch group) must not place: those of
    every quorum with some but fewer than ``need`` of its child groups placed. Dropping a quorum's
    groups may leave an enclosing quorum short too, so this runs until nothing changes."""
    counts = list(placed)
    dropped: set[int] = set()
    changed = True
    while changed:
        changed = False
        for q in quorums:
            done = sum(1 for child in q.children if any(counts[gi] > 0 for gi in child))
            if 0 < done < q.need:
                for gi in q.groups:
                    if counts[gi]:
                        counts[gi] = 0
                        changed = True
                    dropped.add(gi)
    return frozenset(gi for gi in dropped if placed[gi])


Counts = dict[tuple[int, int], int]


def repair(quorums: Sequence[Quorum], counts: Mapping[tuple[int, int], int], n_groups: int) -> Counts:
    """``counts`` (batch group, node) -> pods without the groups of quorums it leaves short."""
    placed = [0] * n_groups
    for (gi, _), c in counts.items():
        placed[gi] += c
    drop = short(quorums, placed)
    return {key: c for key, c in counts.items() if key[0] not in drop}
