"""Never fewer workload groups than one group at a time, in the placed level's key order (issue 30).

The placed level maximises pods per priority key (``objectives.priority``), so on its own it may trade two
small groups for one larger group of more pods, where kube-scheduler 1.37, placing one group at a
time in queue order, places the two. A tight batch with gangs is held to a *reference* answer
placed one group at a time: kube-scheduler's (the caller's alternative, ``packing.Alternative``)
when there is one, else, where the batch holds groups in topology domains, the greedy start that
takes the workload groups in queue order (highest key, then the earliest pod) one at a time
(``greedy.greedy(..., queue=True)``); other batches without kube-scheduler's answer have no
reference and no rule.

The rule sits inside the placed level's order, per key from the highest down: first the gangs of
that key placed, counted up to the reference's number of them (the key's *floor*), then the pods
of that key (``objectives.priority``; a gang counts once any pod of it is placed, gangs are placed
whole, and a gang's key is its lowest member's, so placing it never outweighs a pod of a higher
key). A group is thus never bought with a pod of a higher key, and one priority's pods are given
up only for that priority's groups the reference places. The reference meets every floor, so the
answer is at least the reference in this order: with one key (every benchmark instance), at least
its groups and at least its pods. Keys are the placed level's: spec.priority where restart tiers
rank pods inside a namespace only (``restartTiers: namespace``), the key rank otherwise.

Applied to the starts (``best_start``; ``groupswaps`` adds the reference improved by swapping
groups left out for smaller placed ones of their key), to the model (``hold``: one boolean per gang and one
capped count per key, which ``objectives.priority`` weighs) and, as a last guard, to the answer
(``held_to``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ortools.sat.python import cp_model

from placer.engine.batch import Batch, Group, gang_groups
from placer.engine.greedy import Assignment, counts_of
from placer.engine.model import Model

__all__ = ["Floors", "best_start", "floors", "held_to", "hold", "order"]

Counts = Mapping[tuple[int, int], int]
Floors = dict[int, int]  # key -> gangs of that key the reference places


def _key(batch: Batch, group: Group) -> int:
    """The key the placed level ranks ``group``'s pods by (``objectives.priority``)."""
    return group.key[0] if batch.tiers == "namespace" else batch.rank(group)


def _gangs(batch: Batch) -> dict[str, tuple[list[int], int]]:
    """Gang -> (its batch groups, its key: its lowest member's)."""
    return {
        gang: (gis, min(_key(batch, batch.groups[gi]) for gi in gis)) for gang, gis in gang_groups(batch.groups).items()
    }


def _placed(batch: Batch, counts: Counts) -> tuple[dict[int, int], dict[int, int]]:
    """(gangs placed, pods placed) per key."""
    groups = {gi for (gi, _), c in counts.items() if c}
    gangs: dict[int, int] = {}
    for gis, key in _gangs(batch).values():
        if groups.intersection(gis):
            gangs[key] = gangs.get(key, 0) + 1
    pods: dict[int, int] = {}
    for (gi, _), c in counts.items():
        key = _key(batch, batch.groups[gi])
        pods[key] = pods.get(key, 0) + c
    return gangs, pods


def floors(batch: Batch, reference: Counts) -> Floors:
    """Per key: the gangs of that key the reference places."""
    return _placed(batch, reference)[0]


def order(batch: Batch, counts: Counts, floor: Floors) -> list[int]:
    """An answer's place in the rule's order (larger is better, compared as lists): per key from
    the highest, the gangs placed up to the floor, then the pods placed."""
    gangs, pods = _placed(batch, counts)
    out: list[int] = []
    for key in sorted({_key(batch, g) for g in batch.groups}, reverse=True):
        out += [min(gangs.get(key, 0), floor.get(key, 0)), pods.get(key, 0)]
    return out


def best_start(batch: Batch, floor: Floors, starts: Sequence[Assignment | None]) -> Assignment:
    """The best of ``starts`` in the rule's order (the first on a tie; None is no answer)."""
    best: tuple[list[int], Assignment] | None = None
    for start in starts:
        if start is not None:
            rank = order(batch, counts_of(start), floor)
            if best is None or rank > best[0]:
                best = (rank, start)
    if best is None:
        raise ValueError("no start: the reference must be one of them")
    return best[1]


def hold(model: Model, floor: Floors) -> None:
    """The rule's counts on the model (``model.group_floor``, which ``objectives.priority`` weighs):
    per key with a floor, the gangs placed (a boolean per gang, true exactly when its first
    member group is placed; ``constraints.gangs`` places the others with it), capped at the
    floor."""
    if not floor:
        return
    by_key: dict[int, list[cp_model.IntVar]] = {}
    for gang, (gis, key) in sorted(_gangs(model.batch).items()):
        gi = gis[0]
        if key not in floor or not model.by_group[gi]:
            continue
        placed = model.cp.new_bool_var(f"floor_{gang}")
        model.cp.add(model.placed(gi) == model.batch.groups[gi].size * placed)
        by_key.setdefault(key, []).append(placed)
    for key, need in sorted(floor.items()):
        capped = model.cp.new_int_var(0, need, f"floor_key_{key}")
        model.cp.add(capped <= cp_model.LinearExpr.sum(by_key.get(key, [])))
        model.group_floor[key] = (capped, need)


def held_to(batch: Batch, counts: Counts, reference: Counts) -> tuple[dict[tuple[int, int], int], bool]:
    """``counts`` when it is at least the reference in the rule's order, else the reference (the
    levels start from an answer that is: kept as a guard). Also whether the answer changed."""
    floor = floors(batch, reference)
    if order(batch, counts, floor) >= order(batch, reference, floor):
        return dict(counts), False
    return dict(reference), True
