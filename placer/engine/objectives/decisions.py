"""What the level objectives need of a model: the batch engine's and the global plan's both have it."""

from __future__ import annotations

from typing import Protocol

from ortools.sat.python import cp_model

from placer.engine.batch import Batch
from placer.engine.domains import DomainVars
from placer.engine.objectives.loads import LoadModel
from placer.models import Pod

__all__ = ["Decisions", "Disruptions", "Kept", "kept_namespace", "placed_by_rank"]

# (key rank, namespace) -> expressions whose sum counts those pods placed-and-running, and how far
# that count can move (its span, for exact lexicographic weights). The namespace is "" unless
# restart tiers rank pods per namespace (``restartTiers: namespace``), the one mode that needs it.
Kept = dict[tuple[int, str], tuple[list[cp_model.LinearExprT], int]]


class Disruptions(Protocol):
    victims: dict[int, list[cp_model.IntVar]]  # key rank -> preemption variables of pods of that rank
    moves: list[cp_model.IntVar]
    movers: int  # running pods the plan may evict


class Decisions(LoadModel, Protocol):
    batch: Batch
    by_group: list[list[tuple[int, cp_model.IntVar]]]
    soft_penalty: list[tuple[int, cp_model.IntVar]]
    domains: DomainVars | None  # what constraints.domains added (workload groups' domains)
    # key -> (gangs of that key placed, capped at the floor; the floor), weighed just above the
    # key's pods by the placed level (``placer.engine.groupfloor``)
    group_floor: dict[int, tuple[cp_model.IntVar, int]]

    def kept(self) -> Kept:
        """Per (key rank, namespace): expressions whose sum counts those placed-and-running pods,
        and how far that count can move."""
        ...

    def disruptions(self) -> Disruptions | None:
        """Evictions the model decides (None: it decides none)."""
        ...


def kept_namespace(batch: Batch, pod: Pod) -> str:
    """The namespace ``Kept`` files ``pod`` under: its own where tiers rank per namespace, else ""."""
    return pod.namespace if batch.tiers == "namespace" else ""


def placed_by_rank(batch: Batch, by_group: list[list[tuple[int, cp_model.IntVar]]]) -> Kept:
    """Per (key rank, namespace), the variables placing the batch's pods and how many pods it has
    (a batch group never mixes namespaces where the namespace counts)."""
    out: Kept = {}
    for gi, row in enumerate(by_group):
        group = batch.groups[gi]
        at = (batch.rank(group), kept_namespace(batch, group.pods[0]))
        exprs, span = out.get(at, ([], 0))
        exprs.extend(v for _, v in row)
        out[at] = (exprs, span + group.size)
    return out
