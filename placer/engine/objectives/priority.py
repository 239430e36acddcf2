"""Objective (1): placed-and-still-running pods per priority key, compared from the highest key down.

One weighted sum is exact when weights fit: w(k) = 1 + sum over lower keys of w(i) * span(i),
so no number of lower-key placements can outweigh one more pod of a higher key. When the weights
would overflow, the level is one sub-level per key instead, highest first.

With ``restartTiers: namespace`` (the default) the restart tier ranks pods of one namespace only,
so the level is two: first the pods per spec.priority, cluster-wide; then, with each namespace's
count per priority held, the restart tiers inside each namespace, from the highest down, where no
namespace may end below where the first part left it (a Pareto step: one namespace's better tiers
are never bought with another's). No answer trades one namespace's pod for another namespace's pod
of equal spec.priority on the tier alone.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from placer.engine.objectives.decisions import Decisions, Kept
from placer.engine.objectives.strategy import Term

__all__ = ["LEVEL", "TIER_LEVEL", "build", "lex_weights"]

LEVEL = "placed-by-key"
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
    """Counts per rank, highest first: one weighted sum, or one sub-level per rank on overflow."""
    weights = lex_weights({rank: span for rank, (_, span) in kept.items()})
    if weights is not None:
        return [Term(name, cp_model.LinearExpr.sum([weights[r] * e for r, (es, _) in kept.items() for e in es]), True)]
    return [Term(f"{name}-{rank}", cp_model.LinearExpr.sum(kept[rank][0]), True) for rank in sorted(kept, reverse=True)]


def _tiers_per_namespace(model: Decisions, kept: Kept) -> list[Term]:
    """The namespace mode's second part: restart tiers inside each (namespace, priority), with its
    count held and its tier value never below the answer so far."""
    priority_of = {rank: key[0] for key, rank in model.batch.key_rank.items()}
    buckets: dict[tuple[str, int], Spans] = {}
    for (rank, namespace), (exprs, span) in kept.items():
        _merge(buckets.setdefault((namespace, priority_of[rank]), {}), rank, exprs, span)
    fixed: list[cp_model.LinearExprT] = []
    floors: list[cp_model.LinearExprT] = []
    for bucket in buckets.values():
        if len(bucket) < 2:
            continue  # one tier in this namespace at this priority: nothing to rank
        weights = lex_weights({rank: span for rank, (_, span) in bucket.items()})
        if weights is None:
            continue  # cannot happen with counts of a batch (spans are pod counts); kept safe
        fixed.append(cp_model.LinearExpr.sum([e for es, _ in bucket.values() for e in es]))
        floors.append(cp_model.LinearExpr.sum([weights[r] * e for r, (es, _) in bucket.items() for e in es]))
    if not floors:
        return []
    return [Term(TIER_LEVEL, cp_model.LinearExpr.sum(floors), True, fixed=tuple(fixed), floors=tuple(floors))]


def build(model: Decisions) -> list[Term]:
    kept = {at: (exprs, span) for at, (exprs, span) in model.kept().items() if exprs}
    if not kept:
        return []
    if model.batch.tiers != "namespace":
        by_rank: Spans = {}
        for (rank, _), (exprs, span) in kept.items():
            _merge(by_rank, rank, exprs, span)
        return _lexicographic(LEVEL, by_rank)
    # Ranks of the first part are spec.priorities (ranked among themselves), tiers ignored.
    priorities = sorted({key[0] for key in model.batch.key_rank})
    priority_rank = {key_rank: priorities.index(key[0]) for key, key_rank in model.batch.key_rank.items()}
    by_priority: Spans = {}
    for (rank, _), (exprs, span) in kept.items():
        _merge(by_priority, priority_rank[rank], exprs, span)
    return [*_lexicographic(LEVEL, by_priority), *_tiers_per_namespace(model, kept)]
