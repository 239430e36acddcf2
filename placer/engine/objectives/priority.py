"""Objective (1): placed-and-still-running pods per priority key, compared from the highest key down.

One weighted sum is exact when weights fit: w(k) = 1 + sum over lower keys of w(i) * span(i),
so no number of lower-key placements can outweigh one more pod of a higher key. When the weights
would overflow, the level is one sub-level per key instead, highest first.

With ``restartTiers: namespace`` (the default) the restart tier ranks pods of one namespace only.
Priorities are taken from the highest down. Where no namespace has pods of two tiers at a
priority, only the count of its pods matters (consecutive such priorities share one
lexicographic term). Elsewhere the priority is two terms: the most pods of that priority
cluster-wide, a reference that is not held; then the restart tiers inside each namespace, in
the thesis's lexicographic order (one Always pod outweighs any number of Never pods of its
namespace and priority), where no namespace may end below the reference in its own order (a
Pareto step: one namespace's better tiers are never bought with another's pods). So an Always
pod takes the room of two Never pods of its own namespace, and no answer trades one namespace's
pod for another namespace's pod of equal spec.priority on the tier alone.

A tight batch with gangs adds, per key just above its pods, the gangs of that key placed up to a
reference answer's number of them (``placer.engine.groupfloor``): a key's pods are given up for
its groups, never a higher key's.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from placer.engine.objectives.decisions import Decisions
from placer.engine.objectives.strategy import Term

__all__ = ["GROUPS", "LEVEL", "TIER_LEVEL", "build", "lex_weights"]

LEVEL = "placed-by-key"
GROUPS = "groups-by-key"  # a key's gangs up to the reference's (``placer.engine.groupfloor``)
TIER_LEVEL = "placed-by-tier"  # restartTiers: namespace, the second part
_LIMIT = 2**53

Spans = dict[int, tuple[list[cp_model.LinearExprT], int]]  # rank -> (expressions, span)


def lex_weights(counts: dict[int, int], base: int = 0) -> dict[int, int] | None:
    """Weights making a weighted sum of counts lexicographic from the highest rank down: each
    weight exceeds ``base`` plus everything all lower ranks can add. None if it would overflow."""
    out: dict[int, int] = {}
    running = base
    for rank in sorted(counts):
        out[rank] = running + 1
        running += out[rank] * counts[rank]
        if running >= _LIMIT:
            return None
    return out


def _merge(into: Spans, rank: int, exprs: list[cp_model.LinearExprT], span: int) -> None:
    have, total = into.get(rank, ([], 0))
    into[rank] = (have + exprs, total + span)


def _lexicographic(name: str, kept: Spans) -> list[Term]:
    """Counts per rank, highest first: one weighted sum, or one sub-level per rank on overflow.
    Ranks are ``_pods``/``_groups`` of a key: a key's capped gang count comes just above its pods."""
    weights = lex_weights({rank: span for rank, (_, span) in kept.items()})
    if weights is not None:
        return [Term(name, cp_model.LinearExpr.sum([weights[r] * e for r, (es, _) in kept.items() for e in es]), True)]
    return [
        Term(f"{GROUPS if rank % 2 else name}-{rank // 2}", cp_model.LinearExpr.sum(kept[rank][0]), True)
        for rank in sorted(kept, reverse=True)
    ]


def _pods(key: int) -> int:
    return 2 * key


def _groups(key: int) -> int:
    return 2 * key + 1


def _add_floor(into: Spans, floor: dict[int, tuple[cp_model.IntVar, int]], key: int) -> None:
    """A key's gangs placed, capped at the reference's (``placer.engine.groupfloor``), if any."""
    if key in floor:
        capped, need = floor[key]
        _merge(into, _groups(key), [capped], need)


def _priority_level(priority: int, namespaces: dict[str, Spans]) -> list[Term]:
    """The namespace mode at one spec.priority where some namespace has pods of two tiers: the
    most pods of that priority cluster-wide, as the reference (not held); then the restart tiers
    inside each namespace, lexicographically (one pod of a higher tier outweighs any number of
    lower-tier pods of its namespace), where no namespace may end below the reference in its own
    order (``floors``): a namespace gives up pods of this priority only for a higher tier of its
    own, never for another namespace's."""
    everything = [e for bucket in namespaces.values() for es, _ in bucket.values() for e in es]
    reference = Term(f"{LEVEL}-{priority}", cp_model.LinearExpr.sum(everything), True, held=False)
    floors: list[cp_model.LinearExprT] = []
    for bucket in namespaces.values():
        weights = lex_weights({rank: span for rank, (_, span) in bucket.items()})
        if weights is None:  # cannot happen with counts of a batch (spans are pod counts); kept safe
            weights = {rank: 1 for rank in bucket}
        floors.append(cp_model.LinearExpr.sum([weights[r] * e for r, (es, _) in bucket.items() for e in es]))
    return [reference, Term(f"{TIER_LEVEL}-{priority}", cp_model.LinearExpr.sum(floors), True, floors=tuple(floors))]


def build(model: Decisions) -> list[Term]:
    kept = {at: (exprs, span) for at, (exprs, span) in model.kept().items() if exprs}
    if not kept:
        return []
    floor = model.group_floor
    if model.batch.tiers != "namespace":
        by_rank: Spans = {}
        for (rank, _), (exprs, span) in kept.items():
            _merge(by_rank, _pods(rank), exprs, span)
        for rank in {rank for rank, _ in kept}:
            _add_floor(by_rank, floor, rank)
        return _lexicographic(LEVEL, by_rank)
    # Per spec.priority, highest first: where no namespace has two tiers, only counts matter and
    # consecutive such priorities form one lexicographic term; elsewhere ``_priority_level``.
    priority_of = {rank: key[0] for key, rank in model.batch.key_rank.items()}
    per_priority: dict[int, dict[str, Spans]] = {}
    for (rank, namespace), (exprs, span) in kept.items():
        _merge(per_priority.setdefault(priority_of[rank], {}).setdefault(namespace, {}), rank, exprs, span)
    terms: list[Term] = []
    plain: Spans = {}
    for priority in sorted(per_priority, reverse=True):
        namespaces = per_priority[priority]
        if all(len(bucket) < 2 for bucket in namespaces.values()):
            for bucket in namespaces.values():
                for exprs, span in bucket.values():
                    _merge(plain, _pods(priority), exprs, span)
            _add_floor(plain, floor, priority)
            continue
        _add_floor(plain, floor, priority)  # the priority's groups before its pods and tiers
        if plain:
            terms += _lexicographic(LEVEL, plain)
            plain = {}
        terms += _priority_level(priority, namespaces)
    if plain:
        terms += _lexicographic(LEVEL, plain)
    return terms
