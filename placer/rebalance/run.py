"""One rebalancing decision: loads, queues, what may move, the solver's landing plan, the margin.

Pure: the controller and ``placer rebalance`` call it with a cluster (and usage samples) and
carry out or print the answer. The plan is the global plan's kind (moves only, steps evict ->
gone -> bind the replacement on the landing node); it is kept only if the spread of node load
(std_score over the configured load) drops by at least ``rebalance.margin`` of itself and no
landing node ends above ``high`` (by the configured load and, with usage, by requests too).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from placer.engine import Budget, Snapshot, build_snapshot
from placer.metrics import balance_metrics
from placer.models import (
    Balance,
    BudgetStop,
    Cluster,
    Config,
    Eviction,
    Metrics,
    NodeLoad,
    Placement,
    RebalanceReport,
    Result,
    Step,
    Usage,
)
from placer.plan import Plan, owning_job, plan_rebalance
from placer.rebalance.load import Loads, node_loads
from placer.rebalance.score import Queues, queues
from placer.rebalance.select import Offer, offer
from placer.rebalance.stops import Lift, hot_nodes, stops
from placer.rebalance.stops import what_if as stop_what_if
from placer.service import apply_plan, node_dicts

__all__ = ["Move", "RebalanceOptions", "RebalanceOutcome", "job_backoff", "rebalance_cluster"]

# The Job controller's backoff before it recreates failed pods: 10 s doubling per failure after the
# first, at most 10 minutes (Kubernetes 1.36 pkg/controller/job: DefaultJobPodFailureBackOff,
# MaxJobPodFailureBackOff, getRemainingTimeForFailuresCount).
_BACKOFF_BASE = 10.0
_BACKOFF_MAX = 600.0


@dataclass(frozen=True)
class RebalanceOptions:
    config: Config = field(default_factory=Config)
    usage: Usage | None = None
    now: float | None = None  # seconds since the epoch (cooldowns, usage age); default: the clock
    frozen: frozenset[str] = frozenset()  # pods that must not move (the controller's in-flight binds)
    # Also make one plan per budget that stopped this one, with only that budget lifted, to say what
    # raising it would do (``placer rebalance``; within one more time limit for all of them).
    what_if: bool = False


@dataclass(frozen=True)
class Move:
    pod: str
    source: str
    target: str


@dataclass
class RebalanceOutcome:
    result: Result
    moves: list[Move]
    plan: Plan | None
    warnings: list[str]

    @property
    def report(self) -> RebalanceReport:
        assert self.result.rebalance is not None
        return self.result.rebalance


def job_backoff(cluster: Cluster, pod_key: str, evicted: int = 1) -> float:
    """Seconds the Job controller may wait before recreating this pod once it and ``evicted - 1``
    other pods of its Job are evicted: none when its Job ignores DisruptionTarget (an eviction is
    not a failure), else the backoff after ``status.failed + evicted`` failures (status.failed
    counts every failure, the controller only those since the last success: never shorter)."""
    pod = next((p for p in cluster.pods if p.key == pod_key), None)
    job = owning_job(cluster, pod) if pod is not None else None
    if job is None or job.ignores_disruption:
        return 0.0
    return min(_BACKOFF_MAX, _BACKOFF_BASE * 2.0 ** (job.failed + evicted - 1))


def _balance(cluster_loads: Loads, imbalance: float, std: float, high: float) -> Balance:
    hot = hot_nodes(cluster_loads, high)
    return Balance(
        imbalance=round(imbalance, 6), std_score=round(std, 6), spread=round(cluster_loads.spread(), 6), hot=hot
    )


def _node_rows(names: list[str], q: Queues, before: Loads, after: Loads) -> list[NodeLoad]:
    rows = []
    roles: list[tuple[int, Literal["gives", "takes"]]] = [(n, "gives") for n in q.givers]
    roles += [(n, "takes") for n in q.takers]
    for n, role in roles:
        rows.append(
            NodeLoad(
                node=names[n],
                role=role,
                score=round(float(q.scores[n]), 3),
                before={r: round(float(before.util[n, i]), 4) for i, r in enumerate(before.resources)},
                after={r: round(float(after.util[n, i]), 4) for i, r in enumerate(after.resources)},
            )
        )
    return rows


def rebalance_cluster(cluster: Cluster, options: RebalanceOptions) -> RebalanceOutcome:
    started = time.monotonic()
    config = options.config
    rc = config.rebalance
    now = time.time() if options.now is None else options.now
    running = [p for p in cluster.pods if p.running]
    state = build_snapshot(cluster.nodes, running, [], cluster.namespaces)
    names = [n.name for n in state.nodes]
    loads = node_loads(state, rc, options.usage, now=now)
    high = rc.thresholds.high / 100.0
    q = queues(loads, rc)
    imbalance, std = balance_metrics(*node_dicts(state))
    before = _balance(loads, imbalance, std, high)
    warnings = list(cluster.warnings)
    if loads.fallbacks:
        shown = ", ".join(loads.fallbacks[:5]) + (" ..." if len(loads.fallbacks) > 5 else "")
        warnings.append(
            f"usage: {len(loads.fallbacks)} running pod(s) without a sample newer than "
            f"{rc.usage_max_age:.0f}s are counted by their requests ({shown})"
        )
    report = RebalanceReport(
        load=rc.load,
        low=rc.thresholds.low,
        high=rc.thresholds.high,
        before=before,
        after=before,
        fallbacks=list(loads.fallbacks),
    )

    def answer(why: str, plan: Plan | None = None, after_loads: Loads | None = None) -> RebalanceOutcome:
        report.why = why
        report.nodes = _node_rows(names, q, loads, after_loads or loads)
        evictions: list[Eviction] = []
        steps: list[Step] = []
        placements: list[Placement] = []
        after_state = state.copy()
        if plan is not None:
            report.kept = True
            apply_plan(after_state, plan, evictions, steps, placements)
            owner = {e.pod.key: (e.pod.namespace, e.pod.owner.name if e.pod.owner else "") for e in plan.evictions}
            per_job = Counter(owner[e.pod] for e in evictions)
            waits = {e.pod: job_backoff(cluster, e.pod, per_job[owner[e.pod]]) for e in evictions}
            steps = [s.model_copy(update={"wait": waits.get(s.replaces or "", 0.0)}) for s in steps]
            imb, sd = balance_metrics(*node_dicts(after_state))
            report.after = _balance(after_loads or loads, imb, sd, high)
        result = Result(
            status="optimal" if plan is None else plan.status,
            policy="placer",
            placements=placements,
            evictions=evictions,
            steps=steps,
            metrics=Metrics(
                replacements=len(placements),
                moved=len(evictions),
                imbalance=report.after.imbalance,
                std_score=report.after.std_score,
                solve_seconds=round(time.monotonic() - started, 4),
            ),
            rebalance=report,
        )
        moves = [Move(pod=e.pod, source=e.node, target=e.to or "") for e in evictions]
        return RebalanceOutcome(result=result, moves=moves, plan=plan, warnings=warnings)

    if not q.givers:
        return answer(f"no node is above {rc.thresholds.high:g} % on {', '.join(loads.resources)}")
    if not q.takers:
        return answer("no node is lighter than the cluster and below the high threshold to take pods")
    offered = offer(cluster, state, loads, q.givers, rc, scheduler_name=config.scheduler_name, now=now)
    report.skipped = dict(sorted(offered.skipped.items()))
    if not offered.candidates:
        return answer("no pod on a node above the high threshold may move")
    budget = Budget.of(config)
    requested = node_loads(state, rc.model_copy(update={"load": "requests"})) if rc.load == "usage" else None
    nodes = len(state.nodes)
    lift = Lift(
        max_moves=rc.limits.moves(nodes), per_namespace=rc.limits.in_namespace(nodes), per_node=rc.limits.per_node
    )

    def make(limits: Lift, spend: Budget) -> tuple[str, Plan | None, Loads | None]:
        """The planning loop under ``limits``: why, and the plan kept with the loads after it."""
        source, offered_now = cluster, offered
        if limits.pdbs:
            pdbs = list(cluster.pdbs)
            for i, allowed in limits.pdbs:
                pdbs[i] = pdbs[i].model_copy(update={"disruptions_allowed": allowed})
            source = cluster.model_copy(update={"pdbs": tuple(pdbs)})
        if limits.per_node != rc.limits.per_node:
            wider = rc.model_copy(update={"limits": rc.limits.model_copy(update={"per_node": limits.per_node})})
            offered_now = offer(cluster, state, loads, q.givers, wider, scheduler_name=config.scheduler_name, now=now)
        return _plan(source, state, config, options, offered_now, limits, q.takers, loads, requested, spend)

    why, plan, after = make(lift, budget)
    outcome = answer(why, plan, after)  # timed without the what-ifs below: they are not the decision
    report.stops = _stops(cluster, names, offered, plan, config, lift, make, high, what_if=options.what_if)
    return outcome


def _plan(
    cluster: Cluster,
    state: Snapshot,
    config: Config,
    options: RebalanceOptions,
    offered: Offer,
    limits: Lift,
    takers: list[int],
    loads: Loads,
    requested: Loads | None,
    budget: Budget,
) -> tuple[str, Plan | None, Loads | None]:
    """Plan moves of ``offered`` pods to ``takers`` within ``limits``, dropping a landing node that
    would end above high; keep the plan if it lowers the spread by the margin."""
    rc = config.rebalance
    high = rc.thresholds.high / 100.0
    landing = list(takers)
    while landing:
        plan = plan_rebalance(
            cluster,
            state,
            config,
            max_moves=limits.max_moves,
            frozen=options.frozen,
            budget=budget,
            candidates=offered.candidates,
            landing=np.array(landing, dtype=np.int64),
            max_per_node=offered.needs,
            max_per_namespace=limits.per_namespace,
            relief=offered.relief,
        )
        if plan is None:
            return "no move to a taking node lowers the balance cost", None, None
        moved = [(e.pod.key, e.node, e.to) for e in plan.evictions if e.to is not None]
        after = loads.moved(moved)
        # A landing node must stay at most at high by the load read and, with usage, by requests too.
        ends = [after] if requested is None else [after, requested.moved(moved)]
        over = sorted({t for _, _, t in moved for a in ends if (a.util[t][a.alloc[t] > 0] > high).any()})
        if over:
            landing = [n for n in landing if n not in over]
            continue
        gain = (loads.spread() - after.spread()) / loads.spread() if loads.spread() > 0 else 0.0
        if gain < rc.margin:
            why = f"the best plan lowers the load spread by {gain:.1%}"
            return f"{why}, less than the margin {rc.margin:.0%} (rebalance.margin)", None, None
        return f"{len(moved)} move(s) lower the load spread by {gain:.1%}", plan, after
    return "every plan would push a taking node above the high threshold (rebalance.thresholds.high)", None, None


def _stops(
    cluster: Cluster,
    names: list[str],
    offered: Offer,
    plan: Plan | None,
    config: Config,
    lift: Lift,
    make: Callable[[Lift, Budget], tuple[str, Plan | None, Loads | None]],
    high: float,
    *,
    what_if: bool,
) -> list[BudgetStop]:
    """The budgets ``plan`` used up with offered pods staying; with ``what_if``, each with the plan
    made again without it (all of them within one more time limit), and only those without which
    the plan makes more moves: the ones that stopped it."""
    found = stops(
        cluster, names, offered, plan, scheduler_name=config.scheduler_name, lift=lift, limits=config.rebalance.limits
    )
    if not what_if:
        return [s.report for s in found]
    spare = Budget.of(config)
    moves = sum(1 for e in plan.evictions if e.to is not None) if plan is not None else 0
    out = []
    for i, stop in enumerate(found):

        def replan(relaxed: Lift, share: float) -> tuple[Plan, Loads] | None:
            _, again, after = make(relaxed, spare.capped(share))
            return (again, after) if again is not None and after is not None else None

        out.append(stop_what_if(stop, replan, 1.0 / (len(found) - i), moves, high))
    return [s for s in out if s.more is not None and s.more > 0]  # the others were reached, not binding
