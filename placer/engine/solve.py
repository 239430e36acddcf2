"""Solve one batch: greedy hint, candidate sets, then the objective levels on one CP-SAT model.

The levels come from ``placer.engine.objectives.registry`` and run through the one solver loop
(``placer.engine.levels``). The placed-by-key level is skipped when the hint places every pod
that has a feasible node (that is already optimal). Before the strategy level, single-pod descent
improves the hint; large batches run the strategy level as neighbourhood re-solves (LNS). A level
that finds no solution in time keeps the previous answer, which is never worse than the greedy
hint (the hint is a solution of every level).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from placer.engine import backlog, dominance, extended, groupfloor, groupswaps, lns, packing, quorums
from placer.engine.batch import Batch, build_batch, gang_groups
from placer.engine.candidates import select_candidates
from placer.engine.descent import DESCENT_PODS_PER_SECOND, descend
from placer.engine.domains import keeps_domains
from placer.engine.encoder import build_seconds, encode
from placer.engine.greedy import Assignment, counts_of, greedy
from placer.engine.heap import no_cycle_collection
from placer.engine.held import keeps_held
from placer.engine.levels import DETERMINISTIC_UNITS_PER_SECOND, Budget, BuildStoppedError, LevelReport, LevelSolver
from placer.engine.model import Model
from placer.engine.objectives import priority
from placer.engine.objectives.registry import LEVELS, STRATEGY_LEVEL
from placer.engine.scoring import IntArray, Scorer
from placer.engine.snapshot import Snapshot
from placer.engine.topup import top_up
from placer.engine.unplaced import Counts, Unplaced, extract
from placer.engine.wholegang import greedy_start
from placer.models import Config, Pod, SolveStatus, StrategyName

__all__ = ["BatchResult", "Counts", "LevelReport", "batch_demand", "solve_batch"]

# Above this many (pod group, node) pairs, the strategy level runs as neighbourhood re-solves.
LNS_VARIABLES = 6000
SWAPS_SHARE = 0.1  # of the budget left, for the group swaps that improve the reference (``groupswaps``)


@dataclass
class BatchResult:
    placements: list[tuple[Pod, int]]
    unplaced: list[Unplaced]
    status: SolveStatus
    gap: float
    seconds: float
    levels: list[LevelReport] = field(default_factory=list)
    greedy_placed: int = 0
    batch: Batch | None = None  # what the solve built (groups, masks, candidates): the plan reuses it
    scorer: Scorer | None = None


def _lns_report(report: lns.LnsReport) -> LevelReport:
    status = f"{report.accepted}/{report.iterations} accepted"
    return LevelReport("strategy-lns", status, report.cost_after, float("nan"), report.seconds)


def _descend(
    batch: Batch, scorer: Scorer, counts: Counts, config: Config, budget: Budget, *, wide: bool = False
) -> Counts:
    """Improve the hint of the strategy level by single-pod moves, within a quarter of what is left
    (``wide``: to any feasible node, before the candidates are fixed)."""
    # Deterministic runs count pods weighed: wall time must not decide the answer.
    seed = config.solver.seed
    if config.solver.deterministic:
        pods = 0.25 * budget.left() / DETERMINISTIC_UNITS_PER_SECOND * DESCENT_PODS_PER_SECOND
        improved, _, _ = descend(batch, scorer, counts, seconds=float("inf"), seed=seed, evaluations=pods, wide=wide)
    else:
        seconds = max(0.0, 0.25 * budget.left())
        improved, _, _ = descend(batch, scorer, counts, seconds=seconds, seed=seed, wide=wide)
    return improved


def _widened(batch: Batch, scorer: Scorer, hint: Assignment, config: Config, budget: Budget) -> Counts:
    """The hint improved by moves to any feasible node (the candidates are a pruning of the
    model, not of the answer): the nodes it moves pods to join their groups' candidates, so the
    answer stays a solution of the model."""
    start = counts_of(hint)
    counts = _descend(batch, scorer, start, config, budget, wide=True)
    moved: dict[int, set[int]] = {}
    for gi, n in counts.keys() - start.keys():
        moved.setdefault(gi, set()).add(n)
    for gi, nodes in moved.items():
        group = batch.groups[gi]
        extra = np.setdiff1d(np.array(sorted(nodes), dtype=np.int64), group.candidates)
        if len(extra):
            group.candidates = np.concatenate([group.candidates, extra])
    return counts


def _all_placeable_placed(batch: Batch, assignment: Assignment) -> bool:
    return all(
        int((nodes >= 0).sum()) == (g.size if len(g.feasible) else 0)
        for g, nodes in zip(batch.groups, assignment, strict=True)
    )


def batch_demand(batch: Batch) -> IntArray:
    """What the batch asks for in total, per resource."""
    return sum((g.vec * g.size for g in batch.groups), np.zeros(len(batch.snapshot.resources), dtype=np.int64))


@no_cycle_collection()  # a full collection walks every long-lived pod (placer.engine.heap)
def solve_batch(
    snapshot: Snapshot,
    pending: list[Pod],
    config: Config,
    *,
    budget: Budget | None = None,
    reserve: float = 0.0,
    alternative: packing.Alternative | None = None,
    no_worse: bool = False,
    target: tuple[float, float] | None = None,
    waiting: Sequence[Pod] = (),
) -> BatchResult:
    """Place a batch on ``snapshot``. ``budget`` is the decision's time limit (a fresh one from the
    config by default); when pods stay unplaced after the greedy pass, ``reserve`` of it is kept
    for a global plan, and ``alternative`` (another answer, computed only then) becomes the start
    if it places more pods per key, so the answer never places fewer. With ``no_worse``, the
    alternative is computed for every batch and the answer is also no worse than it on imbalance
    and std_score (``dominance``), in what it may need of the budget (``dominance.need``, at most
    ``dominance.SHARE``: the search before it gets the rest), aiming as well
    for ``target`` (imbalance, std_score) where it is lower; a batch asking for GPUs or other
    extended resources is held instead to placing and allocating no less than it (``extended``).
    ``waiting``: pods queued behind this batch (a controller's backlog): the balance strategy
    aims each node at where the plan of the batch and them puts it (``backlog``), and the guard
    compares answers by where the backlog would end."""
    started = time.monotonic()
    whole = budget = budget or Budget.of(config)
    guard = no_worse and alternative is not None
    batch = build_batch(snapshot, pending, config)
    if batch.grouped:  # descent, LNS, completion and the guard's moves know nothing of group domains
        guard = False  # or composite gangs (the alternative, kube-scheduler 1.37's answer, keeps both)
    scorer = Scorer(snapshot, config, batch_demand(batch))
    # The backlog's aim: balance batches without gangs (a gang batch's e2e end state was worse with
    # it in one run, not yet understood; gangs keep the batch's own target).
    aims = waiting and config.strategy == StrategyName.BALANCE and not any(g.gang for g in batch.groups)
    behind = backlog.summarize(batch, waiting) if aims else None
    aimed = backlog.aim(batch, scorer, behind) if behind is not None else None
    if aimed is not None:
        scorer.aim(aimed.fill)
    select_candidates(batch, scorer, config.solver.candidates, waiting)
    began = budget.clock()
    hint = (backlog.as_hint(batch, aimed) if aimed is not None else None) or greedy_start(batch, scorer, budget)
    greedy_seconds = budget.clock() - began  # what another greedy pass over the batch may take
    adopted: list[Assignment | None] = []
    planned: list[float] = []  # seconds kept for the plan (none until the levels' budget is set)

    def other() -> Assignment | None:
        """The alternative as a start of this batch, computed once."""
        if not adopted:
            answer = alternative() if alternative is not None else None
            if answer is not None and not keeps_held(batch, answer):
                answer = None  # it stacks workloads held in one domain where others' pods still come
            found = packing.adopt(batch, answer) if answer is not None else None
            kept = found is None or (keeps_domains(batch.levels, found) and not _short(batch, found))
            adopted.append(found if kept else None)
        return adopted[0]

    held = extended.held_by_extended(batch, scorer)  # a batch with GPUs is held to its placed pods and GPUs, at once
    if guard:
        other()  # before the levels: what they spend leaves the guard what it needs of the rest
    raced = False  # bin completion races the CP-SAT packing search (``packing.settle``)
    floor: groupfloor.Floors = {}  # gangs per key the placed level counts up to (``groupfloor``)
    reference: Assignment | None = None  # the answer placed one group at a time that sets them
    tight = not _all_placeable_placed(batch, hint)
    # Anytime: no phase that only improves the start begins when it cannot end by the deadline
    # (another greedy pass takes as long as the start's; the start of a 1,000-pod batch can take
    # the whole of 0.1 s): the start is then the answer.
    if tight and budget.fits(greedy_seconds):
        # A tight batch: the pack strategy's greedy, the classic heuristics and the alternative
        # (kube-scheduler's answer, when the caller gives it) may place more (``packing.dispatch``).
        pack = greedy(batch, scorer.with_strategy(StrategyName.PACK), budget=budget)
        starts = [hint, pack, other()]
        if gang_groups(batch.groups):
            reference = other()
            if reference is None and batch.levels and budget.fits(greedy_seconds):  # the groups in queue order
                reference = greedy(batch, scorer, budget=budget, queue=True)
                starts.append(reference)
        hint = packing.start(batch, hint, starts[1:], budget)
        if reference is not None:  # the best start in the placed level's order with the floors
            floor = groupfloor.floors(batch, counts_of(reference))
            swapped = groupswaps.improve(batch, scorer, reference, spent=_swaps_clock(budget))
            hint = groupfloor.best_start(batch, floor, [hint, *starts, swapped])
    elif tight and adopted and (known := adopted[0]) is not None:
        # No time for the other passes, but the guard already has the alternative: it stays the
        # floor per key of the answer.
        hint = packing.better_start(batch, hint, known)
    needed = float("inf")  # wall seconds the guard may need at most (``dominance.need``)
    if guard and not held and (start := other()) is not None:
        share = dominance.SHARE * max(whole.left(), 0.0)
        needed = _guard_needs(
            batch, whole, hint, start, targeted=target is not None, seed=config.solver.seed, most=share
        )
        budget = whole.keeping(min(share, needed))
    if tight and not _all_placeable_placed(batch, hint) and not budget.over():
        found = packing.prepare(batch, budget)
        if found is not None and floor:
            hint = groupfloor.best_start(batch, floor, [hint, found])
        elif found is not None:
            hint = packing.better_start(batch, hint, found)
        else:
            raced = True
    greedy_placed = int(sum(int((nodes >= 0).sum()) for nodes in hint))
    all_placed = _all_placeable_placed(batch, hint)
    widen = all_placed and not batch.grouped and not budget.over()
    counts = _widened(batch, scorer, hint, config, budget) if widen else counts_of(hint)
    large = not batch.grouped and sum(len(g.candidates) for g in batch.groups) > LNS_VARIABLES

    def result(counts: Counts, status: SolveStatus, gap: float, levels: list[LevelReport]) -> BatchResult:
        start = other() if guard else None
        if start is not None and held:
            counts, changed = extended.held_to_other(batch, counts, counts_of(start), extended.extended_requests(batch))
            if changed:
                status, gap = ("feasible" if status == "optimal" else status), 1.0
        elif start is not None and not (
            behind is not None
            and dominance.no_worse_at_end(
                batch, counts, counts_of(start), partial(backlog.complete, scorer, backlog=behind)
            )
        ):
            # What the decision's deadline leaves (the plan's share kept): none when what came
            # before overran it, and then the answer that is no worse is the better start as it is.
            left = max(whole.left() - whole.spare - sum(planned), 0.0)
            seconds = float("inf") if config.solver.deterministic else left
            counts, changed = dominance.no_worse(
                batch, counts, counts_of(start), seconds=seconds, seed=config.solver.seed, target=target
            )
            if changed:  # the levels' bound is not one of this answer: optimality and gap are unknown
                status, gap = ("feasible" if status == "optimal" else status), 1.0
        repaired = quorums.repair(batch.quorums, counts, len(batch.groups))
        if repaired != counts:  # an answer of a heuristic left a composite gang short: none of it goes
            counts, status, gap = repaired, ("feasible" if status == "optimal" else status), 1.0
        if reference is not None:  # never below one group at a time in the placed level's order
            counts, changed = groupfloor.held_to(batch, counts, counts_of(reference))
            if changed:
                status, gap = ("feasible" if status == "optimal" else status), 1.0
        counts, topped = top_up(batch, counts)
        if topped:  # a pod left out fit as the answer stood: the placed level was not optimal
            status, gap = ("feasible" if status == "optimal" else status), 1.0
        placements, unplaced = extract(batch, counts, status)
        return BatchResult(
            placements=placements,
            unplaced=unplaced,
            status=status,
            gap=gap,
            seconds=time.monotonic() - started,
            levels=levels,
            greedy_placed=greedy_placed,
            batch=batch,
            scorer=scorer,
        )

    if large and all_placed:
        # Level 1 is optimal already; improve the strategy by neighbourhood re-solves.
        counts, report = lns.improve(batch, scorer, counts, config, budget)
        return result(counts, "feasible", 1.0, [_lns_report(report)])  # no bound: the gap is unknown
    if not budget.fits(build_seconds(batch)):  # no time to build the model, let alone solve it: the
        return result(counts, "fallback", 1.0, [])  # start is the answer
    encoding = time.monotonic()
    try:  # stopped at the deadline: a model of thousands of variables takes seconds to build
        model, sym = encode(batch, scorer, packing=not all_placed, check=budget.build_check())
    except BuildStoppedError:
        return result(counts, "fallback", 1.0, [])
    groupfloor.hold(model, floor)
    counts = sym.order(counts)
    values = {var.index: counts.get(key, 0) for key, var in model.y.items()}
    # The plan runs for every pod left out, with or without a feasible node: its share is kept.
    left_out = any(int((nodes >= 0).sum()) < g.size for g, nodes in zip(batch.groups, hint, strict=True))
    own = budget.capped(1.0 - reserve) if reserve and left_out else budget
    planned.append(reserve * budget.left() if reserve and left_out else 0.0)
    levels = LevelSolver(
        model.cp, list(model.y.values()), values, config, budget=own, build=time.monotonic() - encoding
    )

    def current() -> Counts:
        return {key: values[var.index] for key, var in model.y.items() if values[var.index]}

    if model.y and not all_placed and packing.volume_allows_all(model):
        # A tight batch: a feasibility search for "all placed" settles the placed level fast.
        all_placed = packing.settle(model, sym, levels, own, raced=raced)
        if all_placed:
            counts = current()
    if model.y:
        for level in LEVELS:
            if levels.exhausted():
                break  # the rest of the budget builds the answer; the current one holds every level
            if level.name == priority.LEVEL and all_placed:
                # The hint is optimal here: hold each group's count instead of solving the level.
                for gi, row in enumerate(model.by_group):
                    if row:
                        model.cp.add(model.placed(gi) == sum(c for (g, _), c in counts.items() if g == gi))
                continue
            terms = level.build(model)
            if level.name == STRATEGY_LEVEL:
                if large:
                    improved, report = lns.improve(batch, scorer, current(), config, own)
                    _set(values, model, improved)
                    levels.proven = False
                    levels.reports.append(_lns_report(report))
                    continue
                if not batch.grouped:
                    _set(values, model, sym.order(_descend(batch, scorer, current(), config, own)))
            for term in terms:
                levels.run(term)
    final = current()
    status: SolveStatus = "optimal" if levels.proven else "feasible"
    if sum(final.values()) < greedy_placed:  # cannot happen with a valid hint; kept as a guard
        final, status = counts, "fallback"
    elif levels.reports and not any(r.solved for r in levels.reports):
        status = "fallback"
    # The gap is the strategy level's: unknown (1) when it did not run (budget spent before it),
    # found nothing, or ran as neighbourhood search (no bound), unless the answer is proven.
    strategy = [r for r in levels.reports if r.name.startswith("strategy")]
    bounded = bool(strategy) and strategy[-1].bound == strategy[-1].bound
    gap = levels.gap if bounded else (0.0 if status == "optimal" else 1.0)
    return result(final, status, gap, levels.reports)


def _guard_needs(
    batch: Batch, whole: Budget, hint: Assignment, start: Assignment, *, targeted: bool, seed: int, most: float
) -> float:
    """What the guard (``dominance.no_worse`` against ``start``, the other answer) may need of the
    decision's time: nothing under a deterministic budget (its descents spend no deterministic
    units; they end by their sweeps), else ``dominance.need``. Its descent from the other answer
    runs only when the answer places as many pods of every group; it cannot when ``hint`` already
    places more per key (the answer places at least what its start does, per key)."""
    if whole.deterministic:
        return 0.0
    mine, theirs = dominance.placed_per_key(batch, counts_of(hint)), dominance.placed_per_key(batch, counts_of(start))
    more = dominance.places_at_least(mine, theirs) and not dominance.places_at_least(theirs, mine)
    return dominance.need(batch, counts_of(start), starts=1 if more else 2, targeted=targeted, seed=seed, most=most)


def _swaps_clock(budget: Budget) -> Callable[[], bool]:
    """When the group swaps stop: after ``SWAPS_SHARE`` of what is left, or (deterministic budget)
    only when no swap is left, which a finite climb reaches (the answer must not depend on the
    machine)."""
    if budget.deterministic:
        return lambda: False
    deadline = time.monotonic() + SWAPS_SHARE * max(budget.left() - budget.spare, 0.0)
    return lambda: time.monotonic() >= deadline


def _short(batch: Batch, answer: Assignment) -> bool:
    """Whether an answer (another scheduler's) leaves some composite gang short (``quorums``)."""
    return bool(quorums.short(batch.quorums, [int((nodes >= 0).sum()) for nodes in answer]))


def _set(values: dict[int, int], model: Model, counts: Counts) -> None:
    for key, var in model.y.items():
        values[var.index] = counts.get(key, 0)
