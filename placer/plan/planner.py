"""The global plan for an infeasible batch (improved Boreas).

When the first solve leaves pods unplaced, re-solve with running pods as decisions: evict and
re-place (move) ReplicaSet pods of placer, or preempt pods of strictly lower keys. Levels:
(1) placed-and-still-running pods per key, from the highest key down; a plan is made only if this
strictly improves on the first solve; (2) fewest victims per key from the highest key down, then
fewest moves; (3) the balance cost of where pods land.

On large clusters the re-solve is restricted to a neighbourhood: for every unplaced pod, the nodes
it may use (labels, taints) where it would fit if the evictable pods there left, best first; plus
the nodes with the most free room as destinations for moves. Only running pods on neighbourhood
nodes become decisions.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt
from ortools.sat.python import cp_model

from placer.engine.batch import Batch, build_batch
from placer.engine.candidates import node_order
from placer.engine.keys import pod_key
from placer.engine.prefilter import fits
from placer.engine.scoring import Scorer
from placer.engine.snapshot import Snapshot, pod_vector
from placer.engine.solve import BatchResult, workers
from placer.models import Cluster, Config, Pod
from placer.plan.eligibility import classify
from placer.plan.model import Mover, PlanModel
from placer.plan.steps import BindSpec, EvictSpec, StepSpec, order_steps

__all__ = ["Plan", "PlannedEviction", "plan_batch"]

WHOLE_CLUSTER = 300  # up to this many nodes the neighbourhood is the whole cluster
NEIGHBOURS = 16
DESTINATIONS = 16
_LIMIT = 2**53


@dataclass
class PlannedEviction:
    pod: Pod
    node: int
    kind: Literal["move", "preempt"]
    to: int | None = None
    for_: list[str] = field(default_factory=list)


@dataclass
class Plan:
    placements: list[tuple[Pod, int]]
    evictions: list[PlannedEviction]
    steps: list[StepSpec]
    status: Literal["optimal", "feasible"]
    seconds: float
    nodes_considered: int = 0
    movers_considered: int = 0


def _lex_weights(counts: dict[int, int], base: int = 0) -> dict[int, int] | None:
    """Weights making a weighted sum lexicographic from the highest rank down."""
    out: dict[int, int] = {}
    running = base
    for rank in sorted(counts):
        out[rank] = running + 1
        running += out[rank] * counts[rank]
        if running >= _LIMIT:
            return None
    return out


def _neighbourhood(
    state: Snapshot, unplaced: list[Pod], evictable_use: npt.NDArray[np.int64], batch: Batch
) -> set[int]:
    n_nodes = len(state.nodes)
    if n_nodes <= WHOLE_CLUSTER:
        return set(range(n_nodes))
    free = state.free
    potential = free + evictable_use
    hood: set[int] = set()
    for pod in unplaced:
        masks = batch.prefilter.masks(pod)
        vec = pod_vector(pod, state.resources)
        nodes = np.flatnonzero(masks.allowed & fits(state, vec, potential))
        if len(nodes) == 0:
            continue
        # Prefer nodes needing the least eviction: most free room for this pod first.
        short = np.maximum(vec[None, :] - free[nodes], 0).sum(axis=1)
        hood.update(nodes[np.lexsort((nodes, short))[: NEIGHBOURS + 1]].tolist())
    share = (free / np.maximum(state.alloc, 1)).min(axis=1)
    hood.update(np.argsort(-share, kind="stable")[:DESTINATIONS].tolist())
    return hood


def plan_batch(
    cluster: Cluster,
    state: Snapshot,
    pending: list[Pod],
    first: BatchResult,
    config: Config,
    *,
    max_evictions: int | None = None,
    max_per_node: int | None = None,
    frozen: frozenset[str] = frozenset(),
) -> Plan | None:
    """A plan that places more (higher-key) pods than ``first``, or None.

    ``max_evictions`` caps moves + preemptions, ``max_per_node`` the evictions on any one node;
    pods in ``frozen`` (for example moved too recently) are never evicted.
    """
    started = time.monotonic()
    unplaced = [pod for pod, code, _ in first.unplaced if code != "Unsupported"]
    if not unplaced or max_evictions == 0:
        return None
    tiers = config.priority.restart_tiers
    probe = build_batch(state, unplaced, config)
    candidates: list[tuple[Pod, int]] = []
    for n, pods in enumerate(state.running):
        for pod in pods:
            candidates.append((pod, n))
    elig = {pod.key: classify(cluster, pod, config.scheduler_name) for pod, _ in candidates}
    evictable_use = np.zeros_like(state.used)
    for pod, n in candidates:
        if elig[pod.key].evictable:
            evictable_use[n] += pod_vector(pod, state.resources)
    hood = _neighbourhood(state, unplaced, evictable_use, probe)
    top_key = max((pod_key(p, restart_tiers=tiers) for p in pending if p.preemption_policy != "Never"), default=None)

    base = state.copy()
    chosen: list[tuple[Pod, int]] = []
    for pod, n in candidates:
        e = elig[pod.key]
        if n not in hood or not e.evictable or pod.key in frozen:
            continue
        preemptible = top_key is not None and pod_key(pod, restart_tiers=tiers) < top_key
        if not (preemptible or e.movable):
            continue
        chosen.append((pod, n))
        base.remove(pod, n)
    batch = build_batch(base, pending, config)
    keys = sorted({g.key for g in batch.groups} | {pod_key(p, restart_tiers=tiers) for p, _ in chosen})
    batch.key_rank = {k: i for i, k in enumerate(keys)}
    demand = sum((g.vec * g.size for g in batch.groups), np.zeros(len(base.resources), dtype=np.int64))
    scorer = Scorer(base, config, demand)

    hint_nodes = {pod.key: n for pod, n in first.placements}
    hood_arr = np.array(sorted(hood), dtype=np.int64)
    limit = config.solver.candidates
    for group in batch.groups:
        feasible = group.feasible
        keep = limit + group.size
        if len(feasible) > keep:
            cost = scorer.delta(group.vec, feasible, base.used)
            best = feasible[node_order(group, feasible, cost)[:keep]]
            used = np.array([hint_nodes[p.key] for p in group.pods if p.key in hint_nodes], dtype=np.int64)
            feasible = np.union1d(np.union1d(best, np.intersect1d(feasible, hood_arr)), used).astype(np.int64)
        group.candidates = feasible

    movers: list[Mover] = []
    for pod, n in chosen:
        e = elig[pod.key]
        vec = pod_vector(pod, base.resources)
        targets = np.zeros(0, dtype=np.int64)
        if e.movable:
            masks = batch.prefilter.masks(pod.model_copy(update={"annotations": {}}))
            ok = masks.allowed & fits(base, vec)
            ok[n] = False
            targets = np.intersect1d(np.flatnonzero(ok), hood_arr).astype(np.int64)
        preemptible = top_key is not None and pod_key(pod, restart_tiers=tiers) < top_key
        movers.append(
            Mover(
                pod=pod,
                home=n,
                vec=vec,
                rank=batch.key_rank[pod_key(pod, restart_tiers=tiers)],
                pdbs=e.pdbs,
                targets=targets,
                preemptible=preemptible,
            )
        )
    model = PlanModel(batch=batch, movers=movers, current=state)
    model.build(
        pdb_allowed=[b.disruptions_allowed for b in cluster.pdbs],
        max_evictions=max_evictions,
        max_per_node=max_per_node,
    )

    hint: dict[tuple[int, int], int] = {}
    for gi, group in enumerate(batch.groups):
        for pod in group.pods:
            at = hint_nodes.get(pod.key)
            if at is not None and (gi, at) in model.y:
                hint[gi, at] = hint.get((gi, at), 0) + 1
    return _solve(model, batch, scorer, config, hint, started, len(hood))


def _solve(
    model: PlanModel,
    batch: Batch,
    scorer: Scorer,
    config: Config,
    hint: dict[tuple[int, int], int],
    started: float,
    hood_size: int,
) -> Plan | None:
    cp = model.cp
    deadline = started + config.solver.time_limit
    values: dict[int, int] = {}  # var index -> value of the best solution so far
    for key, var in model.y.items():
        values[var.index] = hint.get(key, 0)
    for var in [*model.z.values(), *model.p.values()]:
        values[var.index] = 0
    all_vars = [*model.y.values(), *model.z.values(), *model.p.values()]
    proven = True

    def run(expr: cp_model.LinearExprT, maximize: bool) -> tuple[int, int] | None:
        nonlocal proven
        solver = cp_model.CpSolver()
        solver.parameters.num_workers = 1 if config.solver.deterministic else workers(config)
        solver.parameters.random_seed = config.solver.seed
        if config.solver.deterministic:
            solver.parameters.max_deterministic_time = config.solver.time_limit
        else:
            solver.parameters.max_time_in_seconds = max(deadline - time.monotonic(), 0.05)
        cp.clear_hints()  # type: ignore[no-untyped-call]
        for var in all_vars:
            cp.add_hint(var, values[var.index])
        cp.maximize(expr) if maximize else cp.minimize(expr)
        status = solver.solve(cp)
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            proven = False
            return None
        proven &= status == cp_model.OPTIMAL
        for var in all_vars:
            values[var.index] = int(solver.value(var))
        value = round(solver.objective_value)
        cp.add(expr >= value if maximize else expr <= value)
        return value, 0

    # (1) placed-and-still-running per key.
    counts: dict[int, int] = {}
    kept: dict[int, list[cp_model.LinearExprT]] = {}
    for (gi, _), var in model.y.items():
        r = batch.rank(batch.groups[gi])
        kept.setdefault(r, []).append(var)
    for g in batch.groups:
        counts[batch.rank(g)] = counts.get(batch.rank(g), 0) + g.size
    for ri, var in model.p.items():
        r = model.movers[ri].rank
        kept.setdefault(r, []).append(-var)
        counts[r] = counts.get(r, 0) + 1
    hint_per_rank = {r: 0 for r in counts}
    for (gi, _), var in model.y.items():
        hint_per_rank[batch.rank(batch.groups[gi])] += values[var.index]
    weights = _lex_weights(counts)
    improved = False
    if weights is not None:
        expr = cp_model.LinearExpr.sum([weights[r] * e for r, es in kept.items() for e in es])
        before = sum(weights[r] * hint_per_rank[r] for r in counts)
        got = run(expr, True)
        improved = got is not None and got[0] > before
    else:
        for r in sorted(kept, reverse=True):
            got = run(cp_model.LinearExpr.sum(kept[r]), True)
            if got is None:
                break
            if got[0] > hint_per_rank[r]:
                improved = True
                break
            if got[0] < hint_per_rank[r]:
                break
    if not improved:
        return None
    # (2) fewest victims per key (highest key first), then fewest moves.
    moves = list(model.z.values())
    victims: dict[int, list[cp_model.IntVar]] = {}
    for ri, var in model.p.items():
        victims.setdefault(model.movers[ri].rank, []).append(var)
    vw = _lex_weights({r: len(v) for r, v in victims.items()}, base=len(model.movers))
    if vw is not None and (victims or moves):
        terms = [vw[r] * v for r, vs in victims.items() for v in vs] + list(moves)
        run(cp_model.LinearExpr.sum(terms), False)
    # (3) balance cost of where pods land.
    cost_terms: list[cp_model.LinearExprT] = []
    used = batch.snapshot.used
    for (gi, n), var in model.y.items():
        c = scorer.delta(batch.groups[gi].vec, np.array([n], dtype=np.int64), used)[0]
        cost_terms.append(round(1000 * c) * var)
    for (ri, n), var in model.z.items():
        c = scorer.delta(model.movers[ri].vec, np.array([n], dtype=np.int64), used)[0]
        cost_terms.append(round(1000 * c) * var)
    if cost_terms:
        run(cp_model.LinearExpr.sum(cost_terms), False)
    return _extract(model, batch, values, proven, started, hood_size)


def _extract(
    model: PlanModel, batch: Batch, values: dict[int, int], proven: bool, started: float, hood_size: int
) -> Plan:
    placements: list[tuple[Pod, int]] = []
    rank_of = {pod.key: batch.rank(g) for g in batch.groups for pod in g.pods}
    for gi, group in enumerate(batch.groups):
        nodes: list[int] = []
        for (g, n), var in sorted(model.y.items()):
            if g == gi:
                nodes.extend([n] * values[var.index])
        placements.extend(zip(group.pods, nodes, strict=False))
    evictions: list[PlannedEviction] = []
    for (ri, n), var in model.z.items():
        if values[var.index]:
            m = model.movers[ri]
            evictions.append(PlannedEviction(pod=m.pod, node=m.home, kind="move", to=n))
    for ri, var in model.p.items():
        if values[var.index]:
            m = model.movers[ri]
            preemptors = sorted(
                pod.key
                for pod, n in placements
                if n == m.home and rank_of[pod.key] > m.rank and pod.preemption_policy != "Never"
            )
            evictions.append(PlannedEviction(pod=m.pod, node=m.home, kind="preempt", for_=preemptors))
    evictions.sort(key=lambda e: e.pod.key)
    snap = model.current
    evict_specs = [EvictSpec(pod=e.pod.key, node=e.node, vec=pod_vector(e.pod, snap.resources)) for e in evictions]
    binds = [BindSpec(pod=pod.key, node=n, vec=pod_vector(pod, snap.resources)) for pod, n in placements]
    binds += [
        BindSpec(pod=f"replaces:{e.pod.key}", node=e.to, vec=pod_vector(e.pod, snap.resources), replaces=e.pod.key)
        for e in evictions
        if e.kind == "move" and e.to is not None
    ]
    steps = order_steps(evict_specs, binds, snap.free)
    by_id = {st.id: st for st in steps}
    waiting: dict[str, set[str]] = {}
    for st in steps:
        if st.op == "bind" and not st.pod.startswith("replaces:"):
            for a in st.after:
                if by_id[a].op == "await-gone":
                    waiting.setdefault(by_id[a].pod, set()).add(st.pod)
    for e in evictions:
        e.for_ = sorted(waiting.get(e.pod.key, set()) | set(e.for_))
    return Plan(
        placements=placements,
        evictions=evictions,
        steps=steps,
        status="optimal" if proven else "feasible",
        seconds=time.monotonic() - started,
        nodes_considered=hood_size,
        movers_considered=len(model.movers),
    )
