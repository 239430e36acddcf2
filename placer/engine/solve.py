"""Solve one batch: greedy hint, candidate sets, then hierarchical CP-SAT levels.

Levels, each optimum fixed before the next (DESIGN.md objective order):
  1. placed pods per priority key, highest key first (skipped when the hint places every pod
     that has a feasible node: that is already optimal);
  2. relaxed-affinity pods on matching nodes; 3. preferences; 4. the strategy.
A level that finds no solution in time keeps the previous answer, which is never worse than
the greedy hint (the hint is a solution of every level).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from ortools.sat.python import cp_model

from placer.engine import lns
from placer.engine.batch import Batch, build_batch, incomplete_gangs
from placer.engine.candidates import select_candidates
from placer.engine.constraints.symmetry import order_hint
from placer.engine.descent import descend
from placer.engine.encoder import encode
from placer.engine.greedy import Assignment, greedy
from placer.engine.model import Model
from placer.engine.objectives import affinity, priority, strategy
from placer.engine.prefilter import Prefilter, fits
from placer.engine.scoring import Scorer
from placer.engine.snapshot import Snapshot
from placer.engine.topology import TopologyState
from placer.models import Config, Pod

__all__ = ["BatchResult", "LevelReport", "solve_batch"]

# Below this many seconds left, a level solves without presolve and probing.
SHORT_BUDGET = 1.0
# Above this many (pod group, node) pairs, the strategy level runs as neighbourhood re-solves.
LNS_VARIABLES = 6000

Status = Literal["optimal", "feasible", "fallback"]
Code = Literal["Unschedulable", "Outranked", "NotSolved", "Unsupported"]


@dataclass
class LevelReport:
    name: str
    status: str
    value: float
    bound: float
    seconds: float


@dataclass
class BatchResult:
    placements: list[tuple[Pod, int]]
    unplaced: list[tuple[Pod, Code, str]]
    status: Status
    gap: float
    seconds: float
    levels: list[LevelReport] = field(default_factory=list)
    greedy_placed: int = 0


class _Levels:
    def __init__(self, model: Model, config: Config, counts: dict[tuple[int, int], int], *, started: float) -> None:
        self.model = model
        self.config = config
        self.counts = counts  # current best solution, satisfies every fixed level
        self.proven = True
        self.reports: list[LevelReport] = []
        # The time limit is the whole decision's budget: prefilter, greedy and encoding count too.
        self.deadline = started + config.solver.time_limit
        self.det_left = config.solver.time_limit
        self.last_gap = 0.0

    def _hint(self) -> None:
        cp = self.model.cp
        cp.clear_hints()  # type: ignore[no-untyped-call]
        for key, var in self.model.y.items():
            cp.add_hint(var, self.counts.get(key, 0))

    def run(self, name: str, expr: cp_model.LinearExprT, *, maximize: bool) -> None:
        cp = self.model.cp
        solver = cp_model.CpSolver()
        params = solver.parameters
        params.num_workers = workers(self.config)
        params.random_seed = self.config.solver.seed
        if self.config.solver.deterministic:
            params.max_deterministic_time = max(self.det_left, 0.01)
            params.num_workers = 1
        else:
            left = max(self.deadline - time.monotonic(), 0.01)
            params.max_time_in_seconds = left
            if left < SHORT_BUDGET:
                # Presolve and probing alone can take a short budget; the complete hint then gives
                # CP-SAT a first solution at once and search improves it.
                params.cp_model_presolve = False
                params.cp_model_probing_level = 0
        self._hint()
        if maximize:
            cp.maximize(expr)
        else:
            cp.minimize(expr)
        started = time.monotonic()
        status = solver.solve(cp)
        self.det_left -= solver.response_proto.deterministic_time
        seconds = time.monotonic() - started
        if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            value = solver.objective_value
            bound = solver.best_objective_bound
            self.counts = {key: int(solver.value(var)) for key, var in self.model.y.items()}
            value_int = round(value)
            cp.add(expr >= value_int if maximize else expr <= value_int)
            self.last_gap = abs(value - bound) / max(abs(value), 1.0)
            if status != cp_model.OPTIMAL:
                self.proven = False
            self.reports.append(LevelReport(name, solver.status_name(status).lower(), value, bound, seconds))
        else:
            self.proven = False
            self.last_gap = float("nan")
            self.reports.append(
                LevelReport(name, solver.status_name(status).lower(), float("nan"), float("nan"), seconds)
            )


def _lns_report(report: lns.LnsReport) -> LevelReport:
    status = f"{report.accepted}/{report.iterations} accepted"
    return LevelReport("strategy-lns", status, report.cost_after, float("nan"), report.seconds)


def workers(config: Config) -> int:
    """CP-SAT workers: as configured, else one per core (at most 8)."""
    return config.solver.workers or min(8, os.cpu_count() or 1)


def _descend(
    batch: Batch, scorer: Scorer, counts: dict[tuple[int, int], int], config: Config, started: float
) -> dict[tuple[int, int], int]:
    """Improve the hint of the strategy level by single-pod moves, within a quarter of the limit."""
    if config.solver.deterministic:
        budget = float("inf")  # converges; wall time must not decide the answer
    else:
        budget = max(0.0, 0.25 * config.solver.time_limit - (time.monotonic() - started) * 0.25)
    improved, _ = descend(batch, scorer, counts, seconds=budget, seed=config.solver.seed)
    return improved


def _counts(assignment: Assignment) -> dict[tuple[int, int], int]:
    out: dict[tuple[int, int], int] = {}
    for gi, nodes in enumerate(assignment):
        for n in nodes.tolist():
            if n >= 0:
                out[gi, n] = out.get((gi, n), 0) + 1
    return out


def _all_placeable_placed(batch: Batch, assignment: Assignment) -> bool:
    return all(
        int((nodes >= 0).sum()) == (g.size if len(g.feasible) else 0)
        for g, nodes in zip(batch.groups, assignment, strict=True)
    )


def solve_batch(snapshot: Snapshot, pending: list[Pod], config: Config) -> BatchResult:
    started = time.monotonic()
    batch = build_batch(snapshot, pending, config)
    demand = sum((g.vec * g.size for g in batch.groups), np.zeros(len(snapshot.resources), dtype=np.int64))
    scorer = Scorer(snapshot, config, demand)
    select_candidates(batch, scorer, config.solver.candidates)
    hint = greedy(batch, scorer)
    counts = _counts(hint)
    greedy_placed = sum(counts.values())
    large = sum(len(g.candidates) for g in batch.groups) > LNS_VARIABLES
    all_placed = _all_placeable_placed(batch, hint)
    if large and all_placed:
        # Level 1 is optimal already; improve the strategy by neighbourhood re-solves.
        counts, report = lns.improve(
            batch, scorer, counts, config, config.solver.time_limit - (time.monotonic() - started)
        )
        placements, unplaced = _extract(batch, counts, "feasible")
        return BatchResult(
            placements=placements,
            unplaced=unplaced,
            status="feasible",
            gap=0.0,
            seconds=time.monotonic() - started,
            levels=[_lns_report(report)],
            greedy_placed=greedy_placed,
        )
    model, classes = encode(batch, scorer)
    counts = order_hint(classes, counts)
    levels = _Levels(model, config, counts, started=started)

    if model.y:
        if all_placed:
            for gi, row in enumerate(model.by_group):
                if row:
                    model.cp.add(model.placed(gi) == sum(c for (g, _), c in counts.items() if g == gi))
        else:
            combined = priority.weighted(model)
            if combined is not None:
                levels.run("placed-by-key", combined, maximize=True)
            else:
                for rank, expr in sorted(priority.per_key(model).items(), reverse=True):
                    levels.run(f"placed-key-{rank}", expr, maximize=True)
        relaxed = affinity.relaxed_on_matching(model)
        if relaxed is not None:
            levels.run("affinity-kept", relaxed, maximize=True)
        pref = affinity.preference(model)
        if pref is not None:
            levels.run("preferences", pref, maximize=True)
        if not large:
            levels.counts = order_hint(classes, _descend(batch, scorer, levels.counts, config, started))
        if large:
            remaining = config.solver.time_limit - (time.monotonic() - started)
            levels.counts, report = lns.improve(batch, scorer, levels.counts, config, remaining)
            levels.proven = False
            levels.reports.append(_lns_report(report))
        else:
            levels.run(f"strategy-{config.strategy}", strategy.build(model, config.strategy), maximize=False)

    placed_total = sum(levels.counts.values())
    status: Status = "optimal" if levels.proven else "feasible"
    if placed_total < greedy_placed:  # cannot happen with a valid hint; kept as a guard
        levels.counts, status = counts, "fallback"
    elif not any(r.status in ("optimal", "feasible") for r in levels.reports) and levels.reports:
        status = "fallback"
    placements, unplaced = _extract(batch, levels.counts, status)
    # A level that found nothing in time proves no bound: report the gap as 1.0 (unknown), not 0.
    gap = levels.last_gap if levels.last_gap == levels.last_gap else 1.0
    return BatchResult(
        placements=placements,
        unplaced=unplaced,
        status=status,
        gap=gap,
        seconds=time.monotonic() - started,
        levels=levels.reports,
        greedy_placed=greedy_placed,
    )


def _extract(
    batch: Batch, counts: dict[tuple[int, int], int], status: Status
) -> tuple[list[tuple[Pod, int]], list[tuple[Pod, Code, str]]]:
    per_group: dict[int, list[int]] = {}
    for (gi, n), c in sorted(counts.items()):
        per_group.setdefault(gi, []).extend([n] * c)
    final = batch.snapshot.copy()
    placements: list[tuple[Pod, int]] = []
    placed_nodes_by_rank: dict[int, set[int]] = {}
    for gi, group in enumerate(batch.groups):
        for pod, n in zip(group.pods, per_group.get(gi, []), strict=False):
            placements.append((pod, n))
            final.add(pod, n)
            placed_nodes_by_rank.setdefault(batch.rank(group), set()).add(n)
    unplaced: list[tuple[Pod, Code, str]] = []
    after: Prefilter | None = None
    waiting = incomplete_gangs([p for g in batch.groups for p in g.pods])
    topo: TopologyState | None = None
    if not batch.topology.empty:
        topo = TopologyState(batch.topology, [g.size for g in batch.groups])
        for (gi, n), c in counts.items():
            if c:
                topo.add(gi, n, c)
    everywhere = np.arange(len(batch.snapshot.nodes), dtype=np.int64)
    for gi, group in enumerate(batch.groups):
        rest = group.pods[len(per_group.get(gi, [])) :]
        if not rest:
            continue
        after = after or Prefilter(final)
        rank = batch.rank(group)
        higher = set().union(*(nodes for r, nodes in placed_nodes_by_rank.items() if r > rank))
        for pod in rest:
            if pod.unsupported:
                unplaced.append((pod, "Unsupported", pod.unsupported))
                continue
            if group.gang in waiting:
                unplaced.append((pod, "Unschedulable", waiting[group.gang]))
                continue
            checks = topo.checks(gi, everywhere) if topo is not None else []
            reason = after.diagnose(pod, later=checks)
            if group.gang is not None:
                size = sum(g.size for g in batch.groups if g.gang == group.gang)
                detail = reason if not reason.endswith(": .") else "each fits alone, not all together"
                reason = f"gang {group.gang} of {size} pods cannot be placed whole: {detail}"
            fits_now = group.masks.allowed & after.ports_ok(pod) & fits(final, group.vec)
            for ok, _ in checks:
                fits_now &= ok
            code: Code
            if fits_now.any() and group.gang is None:
                code = "NotSolved"
                reason = f"the solver stopped ({status}) before deciding this pod; {reason}"
            elif higher & set(group.feasible.tolist()):
                code = "Outranked"
            else:
                code = "Unschedulable"
            unplaced.append((pod, code, reason))
    return placements, unplaced
