"""The objective registry: the strategies by name, and the levels in the order they are solved.

Levels, each optimum fixed before the next: placed-and-running pods per key; relaxed-affinity
pods kept on matching nodes; fewest disruptions (plans only); preferences; the fewest whole
topology domains opened by workload groups; the strategy. A level
whose builder returns nothing for a model is skipped. A rebalancing plan (no pending pods) solves
the strategy first and then the fewest moves that keep it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from placer.engine.objectives import affinity, disruption, domains, priority
from placer.engine.objectives.balance import Balance
from placer.engine.objectives.decisions import Decisions
from placer.engine.objectives.fragmentation import Fragmentation, Workload, uses_gpus
from placer.engine.objectives.pack import Pack
from placer.engine.objectives.spread import Spread
from placer.engine.objectives.strategy import StrategyObjective, Term
from placer.engine.snapshot import Snapshot
from placer.models import StrategyName

if TYPE_CHECKING:
    from placer.engine.scoring import IntArray

__all__ = [
    "LEVELS",
    "REBALANCE_LEVELS",
    "STRATEGIES",
    "STRATEGY_LEVEL",
    "Level",
    "decision_strategy",
    "strategy_objective",
]

STRATEGIES: dict[StrategyName, StrategyObjective] = {s.name: s for s in (Balance(), Spread(), Pack())}


def strategy_objective(name: str) -> StrategyObjective:
    return STRATEGIES[StrategyName(name)]


def decision_strategy(name: str, snapshot: Snapshot, batch_demand: IntArray) -> StrategyObjective:
    """The strategy a decision scores with: the configured one, made GPU-aware
    (``fragmentation``) when the batch or the running pods ask for GPUs and the strategy is one
    that single-pod moves improve (``pack`` already fills nodes before opening others)."""
    base = strategy_objective(name)
    if not base.descends or not uses_gpus(snapshot, batch_demand):
        return base
    running = [p for pods in snapshot.running for p in pods]
    return Fragmentation(base, snapshot, Workload.of(running))


@dataclass(frozen=True)
class Level:
    name: str
    build: Callable[[Decisions], list[Term]]


def _strategy(model: Decisions) -> list[Term]:
    return [model.scorer.strategy.term(model)]


STRATEGY_LEVEL = "strategy"
_PLACED = Level(priority.LEVEL, priority.build)
_KEPT = Level(affinity.KEPT, affinity.kept)
_DISRUPTIONS = Level(disruption.LEVEL, disruption.build)
_PREFERENCES = Level(affinity.PREFERENCES, affinity.preferences)
_DOMAINS = Level(domains.LEVEL, domains.build)
_STRATEGY = Level(STRATEGY_LEVEL, _strategy)

# Placing pods (a batch, or a global plan for it).
LEVELS: tuple[Level, ...] = (_PLACED, _KEPT, _DISRUPTIONS, _PREFERENCES, _DOMAINS, _STRATEGY)
# Rebalancing running pods: the best strategy cost, then the fewest moves that reach it.
REBALANCE_LEVELS: tuple[Level, ...] = (_STRATEGY, _DISRUPTIONS)
