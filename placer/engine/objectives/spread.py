"""``spread`` (kube-scheduler's LeastAllocated in spirit): every node's mean utilisation as close
to the cluster's target as possible; the inter-node term of ``balance`` alone, unweighted."""

from __future__ import annotations

from typing import TYPE_CHECKING

from placer.engine.objectives.balance import Balance
from placer.models import StrategyName

if TYPE_CHECKING:
    from placer.engine.scoring import Scorer

__all__ = ["Spread"]


class Spread(Balance):
    name = StrategyName.SPREAD

    def weights(self, s: Scorer) -> tuple[float, float, float]:
        return 0.0, 1.0, 0.0
