"""Large-neighbourhood search for the strategy level of large batches.

One CP-SAT model over every (pod, node) pair of a large batch (the TBESK setting: 1,800 pods on
31 nodes) is too big to improve within seconds. Instead: start from the current answer and
repeatedly free the batch pods of a few nodes (the worst node by strategy cost plus random
others), re-solve just those pods over just those nodes with the same constraints and objective,
keeping every freed pod placed and no earlier level worse, and accept the result only when the
strategy cost of those nodes decreases. The rest of the cluster is fixed meanwhile, so every
accepted step keeps the whole answer feasible.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from ortools.sat.python import cp_model

from placer.engine.batch import Batch, Group
from placer.engine.descent import DESCENT_PODS_PER_SECOND, descend
from placer.engine.encoder import encode
from placer.engine.levels import DETERMINISTIC_UNITS_PER_SECOND, Budget
from placer.engine.model import Model
from placer.engine.objectives import affinity
from placer.engine.objectives.strategy import Term
from placer.engine.scoring import FloatArray, Scorer
from placer.engine.snapshot import Snapshot
from placer.models import Config

__all__ = ["LnsReport", "improve"]

Counts = dict[tuple[int, int], int]
TARGET_VARIABLES = 500
STEP_SECONDS = 1.0  # a re-solve's time limit at most
MIN_STEP = 0.05  # a re-solve is not started with less than this left of the budget


@dataclass
class LnsReport:
    iterations: int
    accepted: int
    cost_before: float
    cost_after: float
    seconds: float


def _used(batch: Batch, counts: Counts) -> npt.NDArray[np.int64]:
    used = batch.snapshot.used.copy()
    for (gi, n), c in counts.items():
        used[n] += batch.groups[gi].vec * c
    return used


def strategy_cost(batch: Batch, scorer: Scorer, counts: Counts, nodes: npt.NDArray[np.int64]) -> float:
    """The float strategy cost restricted to ``nodes`` (the rest of the cluster is constant)."""
    placed = ((batch.groups[gi].vec, n, c) for (gi, n), c in counts.items())
    return scorer.strategy.cost(scorer, _used(batch, counts), nodes, placed)


def _sub_batch(batch: Batch, counts: Counts, chosen: npt.NDArray[np.int64]) -> tuple[Batch, list[int], Counts]:
    """The batch pods on ``chosen`` as a batch of their own; everything else fixed."""
    inside = set(chosen.tolist())
    involved = batch.topology.involved  # kept where they are: they interact with other batch pods
    fixed = {k: c for k, c in counts.items() if k[1] not in inside or k[0] in involved}
    snap = batch.snapshot
    sub_snap = Snapshot(
        nodes=snap.nodes,
        resources=snap.resources,
        alloc=snap.alloc,
        used=_used(batch, fixed),
        labels=snap.labels,
        index=snap.index,
        ports=snap.ports,
        running=snap.running,
        namespaces=snap.namespaces,
        watchers=snap.watchers,
    )
    groups: list[Group] = []
    origin: list[int] = []
    hint: Counts = {}
    on_chosen: dict[int, dict[int, int]] = {}  # group -> its pods on the chosen nodes (one pass)
    for (gi, n), c in counts.items():
        if c and n in inside and gi not in involved:
            on_chosen.setdefault(gi, {})[n] = c
    for gi in sorted(on_chosen):
        group, here = batch.groups[gi], on_chosen[gi]
        total = sum(here.values())
        feasible = np.intersect1d(group.feasible, chosen).astype(np.int64)
        sub = Group(pods=group.pods[:total], vec=group.vec, key=group.key, masks=group.masks, feasible=feasible)
        sub.candidates = feasible
        for n, c in here.items():
            hint[len(groups), n] = c
        groups.append(sub)
        origin.append(gi)
    sub_batch = Batch(
        snapshot=sub_snap, prefilter=batch.prefilter, groups=groups, key_rank=batch.key_rank, tiers=batch.tiers
    )
    return sub_batch, origin, hint


def improve(batch: Batch, scorer: Scorer, counts: Counts, config: Config, budget: Budget) -> tuple[Counts, LnsReport]:
    """Local descent first (cheap), then CP-SAT neighbourhood re-solves for what is left of
    ``budget`` beyond its spare. On the wall clock every re-solve must end by the budget's
    deadline: one is started only when the longest build of a sub-model so far (``_Pace``) and the
    longest a solve ran past its limit fit in what is left, and its solver gets what remains after
    its own build."""
    started = time.monotonic()
    deterministic = config.solver.deterministic
    quota = max(budget.left() - budget.spare, 0.0)  # deterministic units: counted here, not charged
    if deterministic:  # the budget is deterministic units: count pods weighed instead
        pods = quota / 2 / DETERMINISTIC_UNITS_PER_SECOND * DESCENT_PODS_PER_SECOND
        counts, _, _ = descend(batch, scorer, counts, seconds=float("inf"), seed=config.solver.seed, evaluations=pods)
        quota /= 2
    else:
        counts, _, _ = descend(batch, scorer, counts, seconds=quota / 2, seed=config.solver.seed)
    rng = np.random.default_rng(config.solver.seed)
    nodes_used = np.array(sorted({n for (_, n), c in counts.items() if c}), dtype=np.int64)
    pool = np.union1d(nodes_used, np.concatenate([g.candidates for g in batch.groups] or [nodes_used]))
    pool = pool.astype(np.int64)
    all_cost = strategy_cost(batch, scorer, counts, pool)
    report = LnsReport(iterations=0, accepted=0, cost_before=all_cost, cost_after=all_cost, seconds=0.0)
    if len(pool) < 2:
        return counts, report
    per_node = max(sum(counts.values()) / max(len(nodes_used), 1), 1.0)
    k = int(min(len(pool), max(2, TARGET_VARIABLES // (per_node * 4))))
    spent = 0.0  # deterministic units
    pace = _Pace(budget)
    involved = batch.topology.involved
    while spent < quota if deterministic else pace.may_start():
        building = budget.clock()
        used = _used(batch, counts)
        worst = int(pool[int(np.argmax(scorer.strategy.node_cost(scorer, used[pool], pool)))])
        others = rng.choice(pool[pool != worst], size=min(k - 1, len(pool) - 1), replace=False)
        chosen = np.sort(np.append(others, worst)).astype(np.int64)
        sub, origin, hint = _sub_batch(batch, counts, chosen)
        model = _build(sub, config, hint, scorer.fill)
        pace.built(budget.clock() - building)
        step = min(max(quota - spent, 0.05), STEP_SECONDS) if deterministic else pace.step()
        if step <= 0.0:
            break  # the build took what was left: the answer so far stays
        found, seconds = pace.solve(model, config, step)
        spent += seconds
        report.iterations += 1
        if found is None:
            continue
        freed = set(chosen.tolist())
        candidate = {k2: c for k2, c in counts.items() if k2[1] not in freed or k2[0] in involved}
        for (si, n), c in found.items():
            if c:
                candidate[origin[si], n] = candidate.get((origin[si], n), 0) + c
        before = strategy_cost(batch, scorer, counts, chosen)
        after = strategy_cost(batch, scorer, candidate, chosen)
        if after < before - 1e-9:
            counts = candidate
            report.accepted += 1
    report.cost_after = strategy_cost(batch, scorer, counts, pool)
    report.seconds = time.monotonic() - started
    return counts, report


class _Pace:
    """The wall-clock rule of the re-solves (``LevelSolver`` keeps the same for levels): how long
    building a sub-model and a solver's overrun of its limit have taken at most, so that an
    iteration is started only when both fit before ``budget``'s deadline."""

    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self.overhead = 0.0  # longest build of a sub-model (wall seconds)
        self.lag = 0.0  # longest a solve ran past its time limit

    def room(self) -> float:
        return self.budget.left() - self.budget.spare - self.lag

    def may_start(self) -> bool:
        return self.room() - self.overhead > MIN_STEP

    def built(self, seconds: float) -> None:
        self.overhead = max(self.overhead, seconds)

    def step(self) -> float:
        """The next solve's limit: what the deadline leaves now, at most ``STEP_SECONDS``; 0 when
        less than ``MIN_STEP`` is left."""
        room = self.room()
        return min(room, STEP_SECONDS) if room > MIN_STEP else 0.0

    def solve(self, model: Model, config: Config, limit: float) -> tuple[Counts | None, float]:
        """A sub-model solved within ``limit``; its deterministic time (``_solve``)."""
        began = self.budget.clock()
        out = _solve(model, config, limit)
        if not config.solver.deterministic:
            self.lag = max(self.lag, self.budget.clock() - began - limit)
        return out


def _build(sub: Batch, config: Config, hint: Counts, fill: FloatArray | None = None) -> Model:
    """The sub-batch's model: every freed pod placed, earlier levels no worse than the hint, the
    strategy minimised, hinted with the current answer."""
    demand = sum((g.vec * g.size for g in sub.groups), np.zeros(len(sub.snapshot.resources), dtype=np.int64))
    scorer = Scorer(sub.snapshot, config, demand)
    if fill is not None:  # the whole batch's aim per node (the same nodes)
        scorer.aim(fill)
    model, sym = encode(sub, scorer)
    hint = sym.order(hint)
    for gi in range(len(model.by_group)):
        model.cp.add(model.placed(gi) == sub.groups[gi].size)
    kept, preference = _earlier_levels(sub, hint)
    _keep_at_least(model, affinity.kept(model), kept)
    _keep_at_least(model, affinity.preferences(model), preference)
    model.cp.minimize(scorer.strategy.term(model).expr)
    for key, var in model.y.items():
        model.cp.add_hint(var, hint.get(key, 0))
    return model


def _solve(model: Model, config: Config, limit: float) -> tuple[Counts | None, float]:
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = config.solver.seed
    if config.solver.deterministic:
        solver.parameters.max_deterministic_time = limit
    else:
        solver.parameters.max_time_in_seconds = limit
    status = solver.solve(model.cp)
    seconds = solver.response_proto.deterministic_time
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None, seconds
    return {key: int(solver.value(var)) for key, var in model.y.items()}, seconds


def _keep_at_least(model: Model, terms: list[Term], value: int) -> None:
    """Keep an earlier level (relaxed pods on matching nodes, preferences) no worse than the hint."""
    for term in terms:
        model.cp.add(term.expr >= value)


def _earlier_levels(sub: Batch, hint: Counts) -> tuple[int, int]:
    """(relaxed pods on matching nodes, preference total) of the hint, as the objectives count them."""
    kept = preference = 0
    for (gi, n), c in hint.items():
        masks = sub.groups[gi].masks
        if masks.binding == "relaxed" and masks.matching[n]:
            kept += c
        preference += c * int(masks.preference[n])
    return kept, preference
