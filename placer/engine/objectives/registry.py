"""The objective registry: the strategies by name, and the levels in the order they are solved.

Levels (DESIGN.md objective order), each optimum fixed before the next: placed-and-running pods
per key; relaxed-affinity pods kept on matching nodes; fewest disruptions (plans only);
preferences; the strategy. A level whose builder returns nothing for a model is skipped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from placer.engine.objectives import affinity, disruption, priority
from placer.engine.objectives.balance import Balance
from placer.engine.objectives.decisions import Decisions
from placer.engine.objectives.pack import Pack
from placer.engine.objectives.spread import Spread
from placer.engine.objectives.strategy import StrategyObjective, Term
from placer.models import StrategyName

__all__ = ["LEVELS", "STRATEGIES", "STRATEGY_LEVEL", "Level", "strategy_objective"]

STRATEGIES: dict[StrategyName, StrategyObjective] = {s.name: s for s in (Balance(), Spread(), Pack())}


def strategy_objective(name: str) -> StrategyObjective:
    return STRATEGIES[StrategyName(name)]


@dataclass(frozen=True)
class Level:
    name: str
    build: Callable[[Decisions], list[Term]]


def _strategy(model: Decisions) -> list[Term]:
    return [model.scorer.strategy.term(model)]


STRATEGY_LEVEL = "strategy"
LEVELS: tuple[Level, ...] = (
    Level(priority.LEVEL, priority.build),
    Level(affinity.KEPT, affinity.kept),
    Level(disruption.LEVEL, disruption.build),
    Level(affinity.PREFERENCES, affinity.preferences),
    Level(STRATEGY_LEVEL, _strategy),
)
