"""Objective (2) of a global plan: fewest victims per key, highest key first, then fewest moves."""

from __future__ import annotations

from ortools.sat.python import cp_model

from placer.engine.objectives.decisions import Decisions
from placer.engine.objectives.priority import lex_weights
from placer.engine.objectives.strategy import Term

__all__ = ["LEVEL", "build"]

LEVEL = "disruptions"


def build(model: Decisions) -> list[Term]:
    d = model.disruptions()
    if d is None or not (d.victims or d.moves):
        return []
    weights = lex_weights({r: len(v) for r, v in d.victims.items()}, base=d.movers)
    if weights is None:  # one sub-level per key, highest first, then the moves
        per_key = [
            Term(f"victims-key-{r}", cp_model.LinearExpr.sum(d.victims[r]), False)
            for r in sorted(d.victims, reverse=True)
        ]
        return [*per_key, Term("moves", cp_model.LinearExpr.sum(d.moves), False)]
    terms = [weights[r] * v for r, vs in d.victims.items() for v in vs] + list(d.moves)
    return [Term(LEVEL, cp_model.LinearExpr.sum(terms), False)]
