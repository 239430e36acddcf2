"""The controller's rebalancing loop (issue 15, item 7): every ``rebalance.periodSeconds``, when
enabled and no plan is in flight, one rebalancing decision on the informers' cluster; the runner
carries out its plan with the same executor, fencing and recovery as every other plan."""

from __future__ import annotations

import logging
import time
from typing import Any

from placer.kube.policy import Policy
from placer.kube.usage import UsageWindow
from placer.models import Cluster, ControllerConfig
from placer.rebalance import RebalanceOptions, RebalanceOutcome, rebalance_cluster
from placer.validate import validate_rebalance

__all__ = ["Rebalancing"]

log = logging.getLogger("placer.rebalance")


class Rebalancing:
    def __init__(self, cfg: ControllerConfig, http: Any, policy: Policy) -> None:
        self.cfg = cfg
        rc = cfg.engine.rebalance
        self.usage = UsageWindow(http, policy, rc.usage_window) if rc.load == "usage" else None
        self.last: float | None = None

    def due(self, now: float) -> bool:
        rc = self.cfg.engine.rebalance
        return rc.enabled and (self.last is None or now - self.last >= rc.period)

    def usage_error(self) -> str:
        """Why the last usage read failed ('' when it did not, or usage is not read)."""
        return self.usage.last_error if self.usage is not None else ""

    def decide(self, cluster: Cluster, frozen: frozenset[str]) -> tuple[RebalanceOutcome, list[str]]:
        """The decision and what the independent validator finds wrong with it (empty: valid)."""
        self.last = time.monotonic()
        now = time.time()
        usage = self.usage.read(now) if self.usage is not None else None
        options = RebalanceOptions(config=self.cfg.engine, usage=usage, now=now, frozen=frozen)
        out = rebalance_cluster(cluster, options)
        problems = validate_rebalance(
            cluster, out.result, self.cfg.engine.rebalance, scheduler_name=self.cfg.scheduler_name, now=now
        )
        return out, problems
