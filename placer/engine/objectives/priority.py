"""Objective (1): placed-and-still-running pods per priority key, compared from the highest key down.

One weighted sum is exact when weights fit: w(k) = 1 + sum over lower keys of w(i) * span(i),
so no number of lower-key placements can outweigh one more pod of a higher key. When the weights
would overflow, the level is one sub-level per key instead, highest first.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from placer.engine.objectives.decisions import Decisions
from placer.engine.objectives.strategy import Term

__all__ = ["LEVEL", "build", "lex_weights"]

LEVEL = "placed-by-key"
_LIMIT = 2**53


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


def build(model: Decisions) -> list[Term]:
    kept = {rank: (exprs, span) for rank, (exprs, span) in model.kept_by_rank().items() if exprs}
    if not kept:
        return []
    weights = lex_weights({rank: span for rank, (_, span) in kept.items()})
    if weights is not None:
        expr = cp_model.LinearExpr.sum([weights[r] * e for r, (es, _) in kept.items() for e in es])
        return [Term(LEVEL, expr, True)]
    return [
        Term(f"placed-key-{rank}", cp_model.LinearExpr.sum(kept[rank][0]), True) for rank in sorted(kept, reverse=True)
    ]
