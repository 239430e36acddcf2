"""Objective (1): placed pods per priority key, compared from the highest key down.

One weighted sum is exact when weights fit: w(k) = 1 + sum over lower keys of w(i) * count(i),
so no number of lower-key placements can outweigh one more pod of a higher key. When the weights
would overflow, the caller solves one level per key instead.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from placer.engine.model import Model

__all__ = ["lex_weights", "per_key", "weighted"]

_LIMIT = 2**53


def per_key(model: Model) -> dict[int, cp_model.LinearExprT]:
    """Placed-pod count expression for each key rank that has variables."""
    out: dict[int, list[cp_model.IntVar]] = {}
    for gi, row in enumerate(model.by_group):
        rank = model.batch.rank(model.batch.groups[gi])
        out.setdefault(rank, []).extend(v for _, v in row)
    return {rank: cp_model.LinearExpr.sum(vs) for rank, vs in out.items() if vs}


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


def weights(model: Model) -> dict[int, int] | None:
    counts: dict[int, int] = {}
    for g in model.batch.groups:
        counts[model.batch.rank(g)] = counts.get(model.batch.rank(g), 0) + g.size
    return lex_weights(counts)


def weighted(model: Model) -> cp_model.LinearExprT | None:
    """The exact lexicographic objective as one sum (to maximise), or None if it would overflow."""
    w = weights(model)
    if w is None:
        return None
    terms = per_key(model)
    return cp_model.LinearExpr.sum([w[rank] * expr for rank, expr in terms.items()])
