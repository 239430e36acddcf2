"""One timed ``solve_cluster`` call, as the packing and GPU benchmarks run it (``placer solve``)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from placer.models import Cluster, Config, Policy
from placer.service import Outcome, SolveOptions, solve_cluster

__all__ = ["Timed", "timed_solve"]


@dataclass(frozen=True)
class Timed:
    outcome: Outcome
    seconds: float  # wall time of the whole call (time.perf_counter)

    @property
    def placed(self) -> set[str]:
        """Keys of the pending pods the answer places."""
        return {p.pod for p in self.outcome.result.placements if p.pod is not None and p.kind == "pending"}


def timed_solve(cluster: Cluster, policy: Policy, *, time_limit: float, batch_size: int | None = None) -> Timed:
    """``placer solve --policy POLICY --time-limit T [--batch-size B]`` on ``cluster``: the default
    configuration (workers, scheduler name ``placer``) with only the time limit set."""
    config = Config.model_validate({"solver": {"timeLimit": time_limit}})
    started = time.perf_counter()
    outcome = solve_cluster(cluster, SolveOptions(policy=policy, batch_size=batch_size, config=config))
    return Timed(outcome, time.perf_counter() - started)
