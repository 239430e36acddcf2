"""The thesis's scoring and queues (chapter 5), on the loads of ``placer.rebalance.load``.

- Node score (ImprovedLoadBalancePriority): 10 x sum over weighted resources r of
  w_r x ln(cluster utilisation of r / node utilisation of r), with the cluster utilisation the
  total load over the total allocatable. Above 0 a node is lighter than the cluster, below 0
  heavier; 0 is exactly average. (An idle resource counts as 0.1 % used, so the log stays finite.)
- Queues from the thresholds ``[low, high]`` (percent of allocatable): a node **gives** when any
  weighted resource is above ``high``; it **takes** when every weighted resource is below ``low``
  and its balance score ``10 - |cpu use - memory use| x 10`` (the thesis's balance filter, with
  uses as fractions) is at least ``balanceFloor``. The score orders the givers (heaviest first);
  the thresholds decide who acts at all, so a cluster that is uneven but nowhere above ``high``
  is left alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from placer.models import RebalanceConfig
from placer.rebalance.load import FloatArray, Loads

__all__ = ["Queues", "balance_scores", "node_scores", "queues"]

_IDLE = 0.001


def node_scores(loads: Loads) -> FloatArray:
    totals = loads.alloc.sum(axis=0)
    cluster = np.where(totals > 0, loads.used.sum(axis=0) / np.where(totals > 0, totals, 1.0), 0.0)
    ratio = np.maximum(cluster, _IDLE) / np.maximum(loads.util, _IDLE)
    return np.asarray(10.0 * (np.log(ratio) * loads.weights).sum(axis=1), dtype=np.float64)


def balance_scores(loads: Loads) -> FloatArray:
    """10 - |cpu use - memory use| x 10 per node (10 when cpu or memory is not weighted)."""
    if "cpu" not in loads.resources or "memory" not in loads.resources:
        return np.full(len(loads.alloc), 10.0)
    util = loads.util
    gap = np.abs(util[:, loads.resources.index("cpu")] - util[:, loads.resources.index("memory")])
    return np.asarray(10.0 - gap * 10.0, dtype=np.float64)


@dataclass(frozen=True)
class Queues:
    givers: list[int]  # nodes above ``high``, heaviest (lowest score) first
    takers: list[int]  # nodes below ``low`` passing the balance filter, lightest first
    scores: FloatArray
    balance: FloatArray


def queues(loads: Loads, config: RebalanceConfig) -> Queues:
    util = loads.util
    has = (loads.alloc > 0).any(axis=1)
    scores = node_scores(loads)
    balance = balance_scores(loads)
    high = config.thresholds.high / 100.0
    low = config.thresholds.low / 100.0
    hot = has & (util > high).any(axis=1)
    cold = has & (util < low).all(axis=1) & (balance >= config.balance_floor)
    givers = sorted(np.flatnonzero(hot).tolist(), key=lambda n: (scores[n], n))
    takers = sorted(np.flatnonzero(cold).tolist(), key=lambda n: (-scores[n], n))
    return Queues(givers=givers, takers=takers, scores=scores, balance=balance)
