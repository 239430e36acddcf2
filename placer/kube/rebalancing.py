"""The controller's rebalancing loop (issue 15, item 7): every ``rebalance.periodSeconds``, when
enabled and no plan is in flight, one rebalancing decision on the informers' cluster
(``Rebalancing``); ``RebalancingDriver`` says it on the nodes and hands its plan to the plan
driver, which carries it out with the same executor, fencing and recovery as every other plan."""

from __future__ import annotations

import logging
import time
from typing import Any

from placer.kube.context import Context
from placer.kube.plans import PlanDriver
from placer.kube.policy import Policy
from placer.kube.usage import UsageWindow
from placer.kube.view import ClusterView
from placer.models import Cluster, ControllerConfig
from placer.rebalance import RebalanceOptions, RebalanceOutcome, rebalance_cluster
from placer.validate import validate_rebalance

__all__ = ["Rebalancing", "RebalancingDriver"]

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


class RebalancingDriver:
    """One rebalancing decision on the cluster; its plan (if any, valid, and not a dry run)
    becomes the plan in flight. Every move gets an event on the pod and on both nodes, with the
    load before and after."""

    def __init__(self, ctx: Context, view: ClusterView, driver: PlanDriver, decider: Rebalancing) -> None:
        self.ctx = ctx
        self.view = view
        self.driver = driver
        self.decider = decider

    def run(self, cluster: Cluster) -> None:
        ctx = self.ctx
        metrics, actions = ctx.metrics, ctx.actions
        out, problems = self.decider.decide(cluster, self.view.frozen(cluster))
        report = out.report
        if report.fallbacks:  # usage asked for but missing or stale: said on the nodes concerned
            where = {p.key: p.node_name for p in cluster.pods if p.node_name}
            per_node: dict[str, int] = {}
            for key in report.fallbacks:
                node = where.get(key)
                if node is not None:
                    per_node[node] = per_node.get(node, 0) + 1
            age = ctx.cfg.engine.rebalance.usage_max_age
            cause = self.decider.usage_error() or "metrics.k8s.io gave none"
            for node, count in sorted(per_node.items()):
                note = f"{count} pod(s) have no usage sample newer than {age:.0f}s ({cause}): their requests count"
                actions.node_event(node, reason="UsageUnavailable", note=note)
        if problems:
            metrics.rebalances.labels(outcome="refused").inc()
            log.error("rebalancing plan refused by the validator, nothing moves: %s", "; ".join(problems[:5]))
            return
        if out.plan is None or not out.moves:
            metrics.rebalances.labels(outcome="none").inc()
            log.info("rebalance: no plan: %s", report.why)
            return
        loads = {row.node: row for row in report.nodes}

        def load(node: str) -> str:
            row = loads.get(node)
            if row is None:
                return node
            parts = [f"{r} {row.before[r]:.0%} -> {row.after.get(r, 0.0):.0%}" for r in row.before]
            return f"{node} ({', '.join(parts)})"

        why = {m.pod: f"rebalancing: moved from {load(m.source)} to {load(m.target)}; {report.why}" for m in out.moves}
        for move in out.moves:
            log.info("rebalance%s: %s", " (dry run, nothing moves)" if ctx.cfg.dry_run else "", why[move.pod])
        if ctx.cfg.dry_run:
            metrics.rebalances.labels(outcome="dry-run").inc()
            return
        metrics.rebalances.labels(outcome="planned").inc()
        metrics.rebalance_moves.inc(len(out.moves))
        for node in sorted({m.source for m in out.moves} | {m.target for m in out.moves}):
            moves = [m.pod for m in out.moves if node in (m.source, m.target)]
            actions.node_event(node, reason="Rebalancing", note=f"{load(node)}: moves {', '.join(moves)}")
        self.driver.start(out.plan, list(out.result.steps), why, reason="Rebalanced")
        self.driver.advance(cluster)
