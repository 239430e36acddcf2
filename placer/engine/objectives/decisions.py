"""What the level objectives need of a model: the batch engine's and the global plan's both have it."""

from __future__ import annotations

from typing import Protocol

from ortools.sat.python import cp_model

from placer.engine.batch import Batch
from placer.engine.objectives.loads import LoadModel

__all__ = ["Decisions", "Disruptions", "KeptByRank", "placed_by_rank"]

KeptByRank = dict[int, tuple[list[cp_model.LinearExprT], int]]


class Disruptions(Protocol):
    victims: dict[int, list[cp_model.IntVar]]  # key rank -> preemption variables of pods of that rank
    moves: list[cp_model.IntVar]
    movers: int  # running pods the plan may evict


class Decisions(LoadModel, Protocol):
    batch: Batch
    by_group: list[list[tuple[int, cp_model.IntVar]]]
    soft_penalty: list[tuple[int, cp_model.IntVar]]

    def kept_by_rank(self) -> KeptByRank:
        """Per key rank: expressions whose sum counts that rank's placed-and-running pods, and
        how far that count can move (its span, for exact lexicographic weights)."""
        ...

    def disruptions(self) -> Disruptions | None:
        """Evictions the model decides (None: it decides none)."""
        ...


def placed_by_rank(batch: Batch, by_group: list[list[tuple[int, cp_model.IntVar]]]) -> KeptByRank:
    """Per key rank, the variables placing the batch's pods of that rank and how many pods it has."""
    out: KeptByRank = {}
    for gi, row in enumerate(by_group):
        group = batch.groups[gi]
        exprs, span = out.get(batch.rank(group), ([], 0))
        exprs.extend(v for _, v in row)
        out[batch.rank(group)] = (exprs, span + group.size)
    return out
