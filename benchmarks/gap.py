"""How far the engine's answer is from what no answer can beat, at the budgets a batch gets.

For one batch and several time limits: the strategy cost (``benchmarks.run.strategy_cost``, the
engine's one float definition, over every node a batch pod may use) of the greedy start, of the
engine's answer, and the linear-relaxation bound of the full, unpruned model
(``benchmarks.bound.lp_bound``: every feasible node, not the candidates, and not a
neighbourhood), and the dual bound SCIP reaches on the same program with integer pods
(``mip_bound``) within ``mip_seconds``, which is never lower. ``gap = (answer - the higher
bound) / answer``; ``contribution = (greedy - answer) / greedy``
is what everything after the greedy pass (descent, the CP-SAT levels, neighbourhood re-solves)
buys.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from benchmarks.bound import lp_bound, mip_bound
from placer.engine import (
    Scorer,
    Snapshot,
    batch_demand,
    build_batch,
    greedy,
    select_candidates,
    solve_batch,
    strategy_cost,
)
from placer.models import Config, Pod

__all__ = ["GapRow", "gaps"]


@dataclass
class GapRow:
    time_limit: float
    seconds: float  # wall time of the decision
    placed: int
    greedy_cost: float
    cost: float
    bound: float  # the linear relaxation's optimum
    bound_seconds: float
    mip_bound: float = float("nan")  # SCIP's dual bound with integer pods (nan: not run)
    mip_optimal: bool = False
    mip_seconds: float = 0.0

    @property
    def best_bound(self) -> float:
        return self.bound if self.mip_bound != self.mip_bound else max(self.bound, self.mip_bound)

    @property
    def gap(self) -> float:
        if self.cost <= 0:
            return float("nan")
        return max(self.cost - self.best_bound, 0.0) / self.cost  # a proven optimum: 0 up to float noise

    @property
    def contribution(self) -> float:
        return (self.greedy_cost - self.cost) / self.greedy_cost if self.greedy_cost > 0 else float("nan")


def gaps(
    snapshot: Snapshot, pending: list[Pod], config: Config, limits: Sequence[float], *, mip_seconds: float = 0.0
) -> list[GapRow]:
    """One row per time limit (the same batch, solved afresh each time); SCIP's bound too when
    ``mip_seconds`` > 0."""
    batch = build_batch(snapshot, pending, config)
    scorer = Scorer(snapshot, config, batch_demand(batch))
    nodes = np.unique(np.concatenate([g.feasible for g in batch.groups] + [np.zeros(0, dtype=np.int64)]))
    select_candidates(batch, scorer, config.solver.candidates)
    start = greedy(batch, scorer)
    greedy_cost = strategy_cost(
        batch, scorer, Counter((gi, int(n)) for gi, ns in enumerate(start) for n in ns if n >= 0), nodes
    )
    group_of = {p.key: gi for gi, g in enumerate(batch.groups) for p in g.pods}
    rows: list[GapRow] = []
    bounds: dict[tuple[tuple[int, int], ...], tuple[float, float, float, bool, float]] = {}
    for limit in limits:
        cfg = config.model_copy(update={"solver": config.solver.model_copy(update={"time_limit": limit})})
        started = time.perf_counter()
        res = solve_batch(snapshot, pending, cfg)
        seconds = time.perf_counter() - started
        placed = Counter((group_of[p.key], n) for p, n in res.placements)
        counts: dict[int, int] = {}
        for (gi, _), c in placed.items():
            counts[gi] = counts.get(gi, 0) + c
        preferences = next((lv.value for lv in res.levels if lv.name == "preferences" and lv.solved), None)
        key = (*sorted(counts.items()), (-1, -1 if preferences is None else round(preferences)))
        if key not in bounds:
            t = time.perf_counter()
            bound = lp_bound(batch, scorer, counts, nodes, preferences=preferences)
            lp_seconds = time.perf_counter() - t
            mip, proven = float("nan"), False
            if mip_seconds > 0:
                mip, proven = mip_bound(batch, scorer, counts, nodes, preferences=preferences, seconds=mip_seconds)
            bounds[key] = (bound, lp_seconds, mip, proven, time.perf_counter() - t - lp_seconds)
        bound, bound_seconds, mip, proven, spent = bounds[key]
        rows.append(
            GapRow(
                time_limit=limit,
                seconds=round(seconds, 3),
                placed=len(res.placements),
                greedy_cost=greedy_cost,
                cost=strategy_cost(batch, scorer, placed, nodes),
                bound=bound,
                bound_seconds=round(bound_seconds, 1),
                mip_bound=mip,
                mip_optimal=proven,
                mip_seconds=round(spent, 1),
            )
        )
    return rows
