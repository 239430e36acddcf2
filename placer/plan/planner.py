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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np
import numpy.typing as npt
from ortools.sat.python import cp_model

from placer.engine import (
    LEVELS,
    PLACED_LEVEL,
    REBALANCE_LEVELS,
    Batch,
    BatchResult,
    Budget,
    BuildStoppedError,
    LevelSolver,
    Prefilter,
    Scorer,
    Snapshot,
    Term,
    batch_demand,
    build_batch,
    evaluate,
    fits,
    pod_key,
    pod_vector,
    rebased,
    running_anti_terms,
    select_candidates,
    term_matches,
    tier,
    uses_topology,
)
from placer.models import (
    Cluster,
    Config,
    Effect,
    EvictionChoice,
    Pod,
    PodAffinityTerm,
    SolveStatus,
    TierScope,
    step_kind,
)
from placer.plan.eligibility import calm, classify, opted_out
from placer.plan.groups import units, whole_units
from placer.plan.model import Mover, PlanModel
from placer.plan.steps import BindSpec, EvictSpec, StepSpec, order_steps

__all__ = ["Plan", "PlannedEviction", "Relief", "plan_batch", "plan_rebalance"]

WHOLE_CLUSTER = 300  # up to this many nodes the neighbourhood is the whole cluster
NEIGHBOURS = 16
DESTINATIONS = 16
MOVE_TARGETS = 64  # per movable pod on small clusters (all of them in practice)
MOVE_TARGETS_LARGE = 4  # per movable pod on large clusters: the freest destinations


@dataclass
class PlannedEviction:
    pod: Pod
    node: int
    kind: Literal["move", "preempt"]
    to: int | None = None
    for_: list[str] = field(default_factory=list)
    # Why (models.EvictionDetail): resources the node lacked for what the plan puts there, the
    # preemptors that outrank the victim, and why this victim.
    short_of: list[str] = field(default_factory=list)
    outranked_by: list[str] = field(default_factory=list)
    choice: EvictionChoice = "move"


@dataclass
class Plan:
    placements: list[tuple[Pod, int]]
    evictions: list[PlannedEviction]
    steps: list[StepSpec]
    status: SolveStatus  # optimal or feasible: the plan never falls back
    seconds: float
    nodes_considered: int = 0
    movers_considered: int = 0


class Preemptible:
    """Whether some pending pod that may preempt outranks a running pod (``placer.engine.outranks``
    against every preemptor, in O(1) per pod)."""

    def __init__(self, pending: list[Pod], tiers: TierScope, calm: frozenset[str]) -> None:
        preemptors = [p for p in pending if p.key not in calm]
        self.tiers = tiers
        self.top = max((p.priority for p in preemptors), default=None)
        self.best_tier: dict[str, int] = {}  # namespace ("" in cluster scope) -> top tier at the top priority
        for p in preemptors:
            if p.priority == self.top:
                scope = p.namespace if tiers == "namespace" else ""
                self.best_tier[scope] = max(self.best_tier.get(scope, 0), tier(p))

    def __call__(self, pod: Pod, *, held: bool = False) -> bool:
        """``held``: the pod opted out of moves (``Eligibility.opted_out``): only a strictly higher
        priority preempts it."""
        if self.top is None or pod.priority > self.top:
            return False
        if pod.priority < self.top:
            return True
        if self.tiers == "off" or held:
            return False
        return self.best_tier.get(pod.namespace if self.tiers == "namespace" else "", 0) > tier(pod)


def _preemptible_use(state: Snapshot, preemptible: Preemptible) -> npt.NDArray[np.int64]:
    """Per node, what preempting outranked pods could free (cheap checks: sizes the neighbourhood)."""
    use = np.zeros_like(state.used)
    if preemptible.top is None:
        return use
    names = state.resources
    for n, pods in enumerate(state.running):
        rows = [
            [1 if r == "pods" else p.requests.get(r, 0) for r in names]
            for p in pods
            if preemptible(p, held=opted_out(p))
            and not p.mirror
            and not p.unevictable
            and not (p.owner is not None and p.owner.kind == "DaemonSet")
        ]
        if rows:
            use[n] = np.sum(np.array(rows, dtype=np.int64), axis=0)
    return use


def _neighbourhood(
    state: Snapshot, unplaced: list[Pod], evictable_use: npt.NDArray[np.int64], prefilter: Prefilter
) -> tuple[set[int], npt.NDArray[np.int64]]:
    """(nodes whose running pods may be decided, destinations for moves)."""
    n_nodes = len(state.nodes)
    free = state.free
    share = (free / np.maximum(state.alloc, 1)).min(axis=1)
    destinations = np.argsort(-share, kind="stable")[:DESTINATIONS].astype(np.int64)
    if n_nodes <= WHOLE_CLUSTER:
        return set(range(n_nodes)), np.arange(n_nodes, dtype=np.int64)
    potential = free + evictable_use
    hood: set[int] = set(destinations.tolist())
    by_signature: dict[tuple[object, ...], list[Pod]] = {}
    for pod in unplaced:
        signature = (tuple(sorted(pod.requests.items())), prefilter.masks(pod).allowed.tobytes())
        by_signature.setdefault(signature, []).append(pod)
    for pods in by_signature.values():
        pod = pods[0]
        vec = pod_vector(pod, state.resources)
        nodes = np.flatnonzero(prefilter.masks(pod).allowed & fits(state, vec, potential))
        if len(nodes) == 0:
            continue
        # Nodes needing the least eviction first, until they could hold 2x the unplaced pods.
        short = np.maximum(vec[None, :] - free[nodes], 0).sum(axis=1)
        ordered = nodes[np.lexsort((nodes, short))]
        nz = np.flatnonzero(vec)
        room = np.min(potential[np.ix_(ordered, nz)] // vec[nz], axis=1) if len(nz) else np.full(len(ordered), 1)
        enough = np.searchsorted(np.cumsum(np.maximum(room, 0)), 2 * len(pods)) + 1
        hood.update(ordered[: max(NEIGHBOURS + 1, int(enough))].tolist())
    return hood, destinations


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
    held: frozenset[str] = frozenset(),
    budget: Budget | None = None,
) -> tuple[Plan | None, bool]:
    """A plan that places more (higher-key) pods than ``first`` (None: none found), and whether
    the search settled it: False when the plan's solve ran out of ``budget`` (what is left of the
    decision's time limit; a fresh one from the config by default) before it could tell whether
    such a plan exists, so that a caller may try again with more time.

    ``max_evictions`` caps moves + preemptions, ``max_per_node`` the evictions on any one node;
    pods in ``frozen`` (outside placer's namespaces, standing in for a plan's binds) are never
    evicted; pods in ``held`` (moved too recently) are never moved, and preempted only by a
    strictly higher priority, like the pods opted out by annotation.
    """
    started = time.monotonic()
    # Pods that may cause no eviction (``calm``: preemptionPolicy Never, or victims evicted for
    # them still terminating): the plan is never made for them and keeps them where the batch
    # solve put them.
    still_calm = calm(pending, state)
    unplaced = [pod for pod, code, _ in first.unplaced if code != "Unsupported" and pod.key not in still_calm]
    if not unplaced or max_evictions == 0 or first.batch is None:
        return None, True
    budget = budget or Budget.of(config, started=started)
    if budget.over():  # the deadline passed before the plan could start: it is not built
        return None, False
    first_batch = first.batch  # the solve's groups, masks and inter-pod rules, reused
    tiers = config.priority.restart_tiers
    # Running pods that inter-pod rules or spreading of this batch look at stay where they are:
    # the masks and counts of the batch are computed with them in place.
    sensitive = first_batch.topology.sensitive
    repelling = running_anti_terms(state)
    preemptible_pod = Preemptible(pending, tiers, still_calm)
    evictable_use = _preemptible_use(state, preemptible_pod)
    hood, destinations = _neighbourhood(state, unplaced, evictable_use, first_batch.prefilter)
    candidates = [(pod, n) for n in sorted(hood) for pod in state.running[n]]
    elig = {pod.key: classify(cluster, pod, config.scheduler_name) for pod, _ in candidates}

    base = state.copy()
    chosen: list[tuple[Pod, int]] = []
    for pod, n in candidates:
        e = elig[pod.key]
        if not e.evictable or pod.key in frozen or pod.key in sensitive:
            continue
        if pod.key in held:
            e = elig[pod.key] = replace(e, movable=False, opted_out=True)
        if not (preemptible_pod(pod, held=e.opted_out) or e.movable):
            continue
        chosen.append((pod, n))

    def may_evict(pod: Pod) -> bool:
        e = elig[pod.key] = elig.get(pod.key) or classify(cluster, pod, config.scheduler_name)
        return e.evictable and pod.key not in frozen and pod.key not in sensitive and preemptible_pod(pod)

    chosen = whole_units(chosen, state, may_evict)  # disruptionMode all: whole groups (plan.groups)
    for pod, n in chosen:
        base.remove(pod, n)
    batch = rebased(first_batch, base, [pod_key(p, restart_tiers=tiers) for p, _ in chosen])
    scorer = Scorer(state, config, batch_demand(batch))
    select_candidates(batch, scorer, config.solver.candidates)
    hint_nodes = {pod.key: n for pod, n in first.placements}
    hood_arr = np.array(sorted(hood), dtype=np.int64)
    for group in batch.groups:
        if len(group.candidates) < len(group.feasible):
            # Pruned: also the neighbourhood (where evictions make room) and the hint's nodes.
            used = np.array([hint_nodes[p.key] for p in group.pods if p.key in hint_nodes], dtype=np.int64)
            wider = np.union1d(group.candidates, np.intersect1d(group.feasible, hood_arr))
            group.candidates = np.union1d(wider, used).astype(np.int64)

    movers: list[Mover] = []
    for pod, n in chosen:
        e = elig[pod.key]
        targets = np.zeros(0, dtype=np.int64)
        if e.movable and _may_move(pod, repelling, state.namespaces):
            targets = _move_targets(pod, n, batch, state, destinations)
        movers.append(
            _mover(
                pod,
                n,
                batch,
                e.pdbs,
                targets,
                preemptible=preemptible_pod(pod, held=e.opted_out),
                held=e.opted_out,
                tiers=tiers,
            )
        )
    model = PlanModel(batch=batch, movers=movers, current=state, scorer=scorer, calm=still_calm, check=budget.check)
    building = budget.clock()
    try:  # stopped at the deadline: a plan over thousands of pods and nodes takes seconds to build
        model.build(
            pdb_allowed=[b.disruptions_allowed for b in cluster.pdbs],
            max_evictions=max_evictions,
            max_per_node=max_per_node,
        )
    except BuildStoppedError:
        return None, False
    build = budget.clock() - building

    hint: dict[tuple[int, int], int] = {}
    for gi, group in enumerate(batch.groups):
        for pod in group.pods:
            at = hint_nodes.get(pod.key)
            if at is not None and (gi, at) in model.y:
                hint[gi, at] = hint.get((gi, at), 0) + 1
    for (gi, n), var in model.y.items():
        if model.calm_group(batch.groups[gi]):
            model.cp.add(var == hint.get((gi, n), 0))
    return _solve(model, batch, config, hint, started, len(hood), budget, build)


def _move_targets(
    pod: Pod,
    home: int,
    batch: Batch,
    state: Snapshot,
    destinations: npt.NDArray[np.int64],
    only: npt.NDArray[np.bool_] | None = None,
) -> npt.NDArray[np.int64]:
    """Nodes a moved pod's replacement may be bound to (``batch.snapshot``: the room once every
    evictable pod is gone; ``state``: the room now), among ``only`` when given."""
    vec = pod_vector(pod, state.resources)
    masks = batch.prefilter.masks(pod.model_copy(update={"annotations": {}}))
    if only is not None:
        masks = replace(masks, allowed=masks.allowed & only)
    if len(state.nodes) <= WHOLE_CLUSTER:
        # Small clusters: any node, including ones that other moves free (chains).
        ok = masks.allowed & fits(batch.snapshot, vec)
    else:
        # Large clusters: only destinations with room for it now, the best few.
        ok = np.zeros(len(state.nodes), dtype=np.bool_)
        ok[destinations] = True
        ok &= masks.allowed & fits(state, vec)
    ok[home] = False
    limit = MOVE_TARGETS if len(state.nodes) <= WHOLE_CLUSTER else MOVE_TARGETS_LARGE
    return np.flatnonzero(ok).astype(np.int64)[:limit]


def _mover(
    pod: Pod,
    home: int,
    batch: Batch,
    pdbs: tuple[int, ...],
    targets: npt.NDArray[np.int64],
    *,
    preemptible: bool,
    held: bool = False,
    tiers: TierScope,
) -> Mover:
    return Mover(
        pod=pod,
        home=home,
        vec=pod_vector(pod, batch.snapshot.resources),
        rank=batch.key_rank[pod_key(pod, restart_tiers=tiers)],
        pdbs=pdbs,
        targets=targets,
        preemptible=preemptible,
        held=held,
    )


def plan_rebalance(
    cluster: Cluster,
    state: Snapshot,
    config: Config,
    *,
    max_moves: int,
    frozen: frozenset[str] = frozenset(),
    margin: float = 0.0,
    budget: Budget | None = None,
    candidates: Sequence[tuple[Pod, int]] | None = None,
    landing: npt.NDArray[np.int64] | None = None,
    max_per_node: int | Mapping[int, int] | None = None,
    max_per_namespace: int | None = None,
    relief: Mapping[int, Relief] | None = None,
) -> Plan | None:
    """A plan of moves only, with no pending pod: lower the strategy cost with at most
    ``max_moves`` moves (fewest moves for the best cost found), or None unless the cost drops by
    more than ``margin``. Same movers, model, levels loop and steps as ``plan_batch``.

    ``candidates`` (pod, node) are the pods that may move (default: every movable pod), with
    opted-in Jobs' pods movable too; ``landing`` the nodes their replacements may go to
    (default: any node with room); ``max_per_node`` caps the moves off one node (a mapping: off
    each node it names, none off the others), ``max_per_namespace`` those of one namespace;
    ``relief`` per node what the pods leaving it must take off it, if any leaves."""
    started = time.monotonic()
    if max_moves <= 0:
        return None
    tiers = config.priority.restart_tiers
    empty = build_batch(state, [], config)
    repelling = running_anti_terms(state)
    chosen: list[tuple[Pod, int, tuple[int, ...]]] = []
    base = state.copy()
    offered = candidates if candidates is not None else [(p, n) for n, pods in enumerate(state.running) for p in pods]
    for pod, n in offered:
        e = classify(cluster, pod, config.scheduler_name, jobs=candidates is not None)
        if not (e.movable and pod.key not in frozen and _may_move(pod, repelling, state.namespaces)):
            continue
        chosen.append((pod, n, e.pdbs))
        base.remove(pod, n)
    if not chosen:
        return None
    batch = rebased(empty, base, [pod_key(p, restart_tiers=tiers) for p, _, _ in chosen])
    scorer = Scorer(state, config, batch_demand(batch))
    everywhere = np.arange(len(state.nodes), dtype=np.int64)
    only = None
    if landing is not None:
        only = np.zeros(len(state.nodes), dtype=np.bool_)
        only[landing] = True

    def _targets(pod: Pod, n: int) -> npt.NDArray[np.int64]:
        return _move_targets(pod, n, batch, state, everywhere, only)

    movers = [
        _mover(
            pod, n, batch, pdbs, _move_targets(pod, n, batch, state, everywhere, only), preemptible=False, tiers=tiers
        )
        for pod, n, pdbs in chosen
    ]
    model = PlanModel(batch=batch, movers=movers, current=state, scorer=scorer)
    model.build(
        pdb_allowed=[b.disruptions_allowed for b in cluster.pdbs],
        max_evictions=max_moves,
        max_per_node=max_per_node if isinstance(max_per_node, int) else None,
    )
    caps = _move_caps(model, max_per_node, max_per_namespace)
    reliefs = _reliefs(model, relief or {})
    variables = [*model.z.values(), *model.p.values()]
    values = {v.index: 0 for v in variables}
    levels = LevelSolver(model.cp, variables, values, config, budget=budget or Budget.of(config))
    start = _greedy_moves(model, state, max_moves, caps, [b.disruptions_allowed for b in cluster.pdbs], reliefs)
    if start:
        # A start with moves, proven a solution of the model before it becomes the answer so far
        # (the solver's levels then only improve on it).
        levels.feasible("greedy-moves", lambda cp: _fix(cp, variables, start), share=0.2)
    for level in REBALANCE_LEVELS:
        if levels.exhausted():
            break
        for term in level.build(model):
            levels.run(term)
    placed = [(m.vec, m.home, 1) for m in movers]
    before = scorer.strategy.cost(scorer, state.used, everywhere, placed)
    after_used = state.used.copy()
    after_placed = []
    moved_to = {ri: n for (ri, n), var in model.z.items() if levels.values.get(var.index)}
    for ri, m in enumerate(movers):
        to = moved_to.get(ri, m.home)
        after_used[m.home] -= m.vec
        after_used[to] += m.vec
        after_placed.append((m.vec, to, 1))
    after = scorer.strategy.cost(scorer, after_used, everywhere, after_placed)
    if not after < before - margin:
        return None
    return _extract(model, batch, levels.values, levels.proven, started, len(state.nodes))


@dataclass(frozen=True)
class Relief:
    """What the pods leaving one node must take off it if any leaves, per resource: ``excess``
    (integers, any unit) covered by the leaving pods' ``shares`` (pod key -> the same unit)."""

    excess: tuple[int, ...]
    shares: Mapping[str, tuple[int, ...]]

    def covered(self, keys: Sequence[str]) -> bool:
        return all(sum(self.shares[k][j] for k in keys) >= e for j, e in enumerate(self.excess) if e > 0)


def _reliefs(model: PlanModel, relief: Mapping[int, Relief]) -> dict[int, Relief]:
    """Per node in ``relief`` with movers on it: if any leaves, the leaving pods cover its excess
    (added to ``model``). The reliefs that apply."""
    homes: dict[int, list[int]] = {}
    for ri, m in enumerate(model.movers):
        if m.home in relief and m.pod.key in relief[m.home].shares:
            homes.setdefault(m.home, []).append(ri)
    for n, movers in homes.items():
        r = relief[n]
        gives = model.cp.new_bool_var(f"gives{n}")
        leaving = [model.leaves(ri) for ri in movers]
        for expr in leaving:
            model.cp.add(gives >= expr)
        for j, excess in enumerate(r.excess):
            if excess > 0:
                shares = [r.shares[model.movers[ri].pod.key][j] for ri in movers]
                model.cp.add(
                    cp_model.LinearExpr.sum([c * e for c, e in zip(shares, leaving, strict=True)]) >= excess * gives
                )
    return {n: relief[n] for n in homes}


@dataclass(frozen=True)
class _Cap:
    """At most ``limit`` of the movers ``members`` leave."""

    members: frozenset[int]
    limit: int


def _move_caps(model: PlanModel, per_node: int | Mapping[int, int] | None, per_namespace: int | None) -> list[_Cap]:
    """The caps on moves off one node and in one namespace, added to ``model`` (an int per node
    is already the model's own ``max_per_node``) and returned for the greedy start."""
    groups: dict[tuple[str, str], set[int]] = {}
    for ri, m in enumerate(model.movers):
        groups.setdefault(("node", str(m.home)), set()).add(ri)
        groups.setdefault(("namespace", m.pod.namespace), set()).add(ri)
    caps = []
    for (kind, key), members in groups.items():
        if kind == "node":
            limit = per_node if isinstance(per_node, int) or per_node is None else per_node.get(int(key), 0)
        else:
            limit = per_namespace
        if limit is None or limit >= len(members):
            continue
        caps.append(_Cap(frozenset(members), limit))
        if kind == "namespace" or not isinstance(per_node, int):
            model.cp.add(cp_model.LinearExpr.sum([model.leaves(ri) for ri in sorted(members)]) <= limit)
    return caps


def _greedy_moves(
    model: PlanModel,
    state: Snapshot,
    max_moves: int,
    caps: list[_Cap],
    pdb_allowed: list[int],
    reliefs: Mapping[int, Relief],
) -> dict[int, int]:
    """Each mover in turn to the target with the lowest mean utilisation once it lands, where it
    fits in the room there now (room a move frees is not reused), within the move, per-node,
    per-namespace and PDB budgets; then the moves off a node whose relief they do not cover are
    dropped. Variable index -> value (only the moves); empty when nothing moves."""
    free = state.free.astype(np.float64)
    alloc = np.where(state.alloc > 0, state.alloc, 1).astype(np.float64)
    offered = state.alloc > 0
    used_cap = [0] * len(caps)
    used_pdb = [0] * len(pdb_allowed)
    out: dict[int, int] = {}
    moved: dict[int, list[tuple[int, str]]] = {}  # home -> (variable index, pod key)
    first: dict[int, int] = {}
    for ri, m in enumerate(model.movers):
        first.setdefault(m.home, ri)

    def share(ri: int) -> float:
        m = model.movers[ri]
        r = reliefs.get(m.home)
        return float(sum(c for c, e in zip(r.shares[m.pod.key], r.excess, strict=True) if e > 0)) if r else 0.0

    # Node by node in the movers' order; on a node, the pods that take most of its excess first.
    for ri in sorted(range(len(model.movers)), key=lambda ri: (first[model.movers[ri].home], -share(ri), ri)):
        m = model.movers[ri]
        mine = [c for c, cap in enumerate(caps) if ri in cap.members]
        if len(out) >= max_moves or any(used_cap[c] >= caps[c].limit for c in mine):
            continue
        if any(used_pdb[b] >= pdb_allowed[b] for b in m.pdbs):
            continue
        best: tuple[float, int] | None = None
        for n in m.targets.tolist():
            if (ri, n) not in model.z or np.any(free[n] < m.vec):
                continue
            after = (state.alloc[n] - free[n] + m.vec) / alloc[n]
            mean = float(after[offered[n]].mean()) if offered[n].any() else 1.0
            if best is None or mean < best[0]:
                best = (mean, n)
        if best is None:
            continue
        n = best[1]
        free[n] -= m.vec
        for c in mine:
            used_cap[c] += 1
        for b in m.pdbs:
            used_pdb[b] += 1
        out[model.z[ri, n].index] = 1
        moved.setdefault(m.home, []).append((model.z[ri, n].index, m.pod.key))
    for home, pods in moved.items():
        if home in reliefs and not reliefs[home].covered([key for _, key in pods]):
            for index, _ in pods:
                del out[index]
    return out


def _fix(cp: cp_model.CpModel, variables: list[cp_model.IntVar], values: dict[int, int]) -> None:
    """Each of ``variables`` (of ``cp``'s original) at its value in ``values`` (0 when absent)."""
    for var in variables:
        cp.add(cp.get_int_var_from_proto_index(var.index) == values.get(var.index, 0))


def _may_move(pod: Pod, repelling: list[PodAffinityTerm], namespaces: dict[str, dict[str, str]]) -> bool:
    """A pod moves only if no inter-pod rule could object to its new node: it has none of its own
    and no running pod's required anti-affinity matches it."""
    if uses_topology(pod):
        return False
    return not any(term_matches(t, pod.namespace, pod.labels, namespaces) for t in repelling)


def _greedy_plan(model: PlanModel, batch: Batch, values: dict[int, int]) -> None:
    """A feasible improving plan built greedily, as the hint (and fallback) of the CP-SAT levels.

    Pods left unplaced, highest key first, go where the fewest victims (lowest key first, then
    the largest) make room; only pods that may preempt evict, only pods of strictly lower keys
    are evicted, PDB budgets and eviction caps hold. Moves are left to the solver.
    """
    free = model.current.free.copy()
    for (gi, n), var in model.y.items():
        free[n] -= batch.groups[gi].vec * values[var.index]
    budget = dict(enumerate(model.pdb_allowed))
    evicted: set[int] = set()
    state = {"total": 0}
    per_node: dict[int, int] = {}
    on_node: dict[int, list[int]] = {}
    for ri in model.p:
        on_node.setdefault(model.movers[ri].home, []).append(ri)
    for ris in on_node.values():
        ris.sort(key=lambda r: (model.movers[r].rank, -int(model.movers[r].vec.max())))

    def option(gi: int, n: int) -> tuple[tuple[int, ...], list[int]] | None:
        group = batch.groups[gi]
        var = model.y[gi, n]
        if values[var.index] >= model.upper[var.index]:
            return None
        room = free[n].copy()
        victims: list[int] = []
        if not model.calm_group(group):
            for ri in on_node.get(n, []):
                if bool(np.all(room >= group.vec)):
                    break
                m = model.movers[ri]
                if ri in evicted or m.pod.disruption_unit is not None:
                    continue  # whole groups are left to the solver (plan.groups)
                if not model.may_preempt(group, m) or any(budget[b] <= 0 for b in m.pdbs):
                    continue
                room += m.vec
                victims.append(ri)
        if not bool(np.all(room >= group.vec)):
            return None
        if model.max_evictions is not None and state["total"] + len(victims) > model.max_evictions:
            return None
        if model.max_per_node is not None and per_node.get(n, 0) + len(victims) > model.max_per_node:
            return None
        if any(sum(1 for v in victims if b in model.movers[v].pdbs) > budget[b] for b in budget):
            return None
        ranks = sorted((-model.movers[v].rank for v in victims), reverse=True)
        return (len(victims), *ranks, n), victims

    for gi in sorted(range(len(batch.groups)), key=lambda g: -batch.rank(batch.groups[g])):
        group = batch.groups[gi]
        if group.has_ports or group.gang is not None or gi in batch.topology.involved or group.pods[0].group_domains:
            continue  # host-port clashes, whole gangs, inter-pod rules and group domains are left to the solver
        if model.calm_group(group):
            continue  # kept where the batch solve put them
        nodes = sorted(n for (g, n) in model.y if g == gi)
        options = {n: option(gi, n) for n in nodes}
        placed = sum(values[model.y[gi, n].index] for n in nodes)
        for _ in range(group.size - placed):
            live = [(o[0], n) for n, o in options.items() if o is not None]
            if not live:
                break
            _, n = min(live)
            opt = options[n]
            assert opt is not None
            for ri in opt[1]:
                values[model.p[ri].index] = 1
                evicted.add(ri)
                free[n] += model.movers[ri].vec
                for b in model.movers[ri].pdbs:
                    budget[b] -= 1
            state["total"] += len(opt[1])
            per_node[n] = per_node.get(n, 0) + len(opt[1])
            values[model.y[gi, n].index] += 1
            free[n] -= group.vec
            options[n] = option(gi, n)
            if opt[1] and (model.pdb_allowed or model.max_evictions is not None):
                # Budgets and caps changed: other nodes' options may no longer hold.
                options = {m: option(gi, m) for m in nodes}


def _solve(
    model: PlanModel,
    batch: Batch,
    config: Config,
    hint: dict[tuple[int, int], int],
    started: float,
    hood_size: int,
    budget: Budget,
    build: float = 0.0,
) -> tuple[Plan | None, bool]:
    """The objective levels through the engine's solver loop; no plan unless level (1) improves,
    and then settled only if that level was solved to optimality (no better plan exists).
    ``build``: the wall seconds the model took to build, about what loading it into the solver
    takes: the placed level is not solved with less than that left, nor later levels (``LevelSolver``
    margins)."""
    values: dict[int, int] = {var.index: hint.get(key, 0) for key, var in model.y.items()}
    for var in [*model.z.values(), *model.p.values()]:
        values[var.index] = 0
    first = dict(values)  # the first solve's answer: no eviction
    _greedy_plan(model, batch, values)
    variables = [*model.y.values(), *model.z.values(), *model.p.values()]
    levels = LevelSolver(model.cp, variables, values, config, budget=budget, build=build)
    for level in LEVELS:
        placed = level.name == PLACED_LEVEL
        if not placed and levels.exhausted():
            break  # the answer so far holds every level solved; the rest builds the steps
        terms = level.build(model)
        # With no time left to load the model (the build took it), the placed level is not
        # solved: the greedy plan stays the answer, as when its solve finds nothing in time.
        if placed and not budget.fits(build):
            levels.proven = False
        else:
            for term in terms:
                levels.run(term)
        if level.name == PLACED_LEVEL and not _improves(terms, levels.values, first):
            return None, levels.proven
    return _extract(model, batch, levels.values, levels.proven, started, hood_size), True


def _improves(terms: list[Term], values: dict[int, int], before: dict[int, int]) -> bool:
    """Placed-and-running pods per key strictly better than ``before``, highest first, term by
    term. A term with ``floors`` (``restartTiers: namespace``: the tiers inside each namespace at
    one priority) improves when no namespace is worse there in its own order and one is better, or
    when the unheld reference before it (the pods of that priority, cluster-wide) grows: the plan
    gives up no namespace's pod of that priority for another's on the tier alone."""

    def value(expr: cp_model.LinearExprT, at: dict[int, int]) -> int:
        return evaluate(expr, at) or 0

    reference: Term | None = None
    for term in terms:
        if not term.held:
            reference = term
            continue
        if term.floors:
            ours = [value(e, values) for e in term.floors]
            theirs = [value(e, before) for e in term.floors]
            if all(o >= t for o, t in zip(ours, theirs, strict=True)):
                if ours != theirs:
                    return True
            else:
                return reference is not None and value(reference.expr, values) > value(reference.expr, before)
            reference = None
            continue
        mine, other = value(term.expr, values), value(term.expr, before)
        if mine != other:
            return mine > other
    return False


def _extract(
    model: PlanModel, batch: Batch, values: dict[int, int], proven: bool, started: float, hood_size: int
) -> Plan:
    placements: list[tuple[Pod, int]] = []
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
    # A disruptionMode-all group is preempted as one unit: for the pods placed on any member's node.
    unit_homes: dict[str, set[int]] = {}
    for unit, ris in units(model).items():
        unit_homes[unit] = {model.movers[rj].home for rj in ris if values[model.p[rj].index]}
    for ri, var in model.p.items():
        if values[var.index]:
            m = model.movers[ri]
            homes = unit_homes[m.pod.disruption_unit] if m.pod.disruption_unit is not None else {m.home}
            preemptors = sorted(pod.key for pod, n in placements if n in homes and model.may_preempt_pod(pod, m))
            lower_stays = any(
                values[model.p[rj].index] == 0
                and model.movers[rj].home == m.home
                and model.movers[rj].rank < m.rank
                and model.movers[rj].preemptible
                for rj in model.p
            )
            evictions.append(
                PlannedEviction(
                    pod=m.pod,
                    node=m.home,
                    kind="preempt",
                    for_=preemptors,
                    outranked_by=preemptors,
                    choice="fewest-evictions" if lower_stays else "lowest-key",
                )
            )
    evictions.sort(key=lambda e: e.pod.key)
    snap = model.current
    evict_specs = [EvictSpec(pod=e.pod.key, node=e.node, vec=pod_vector(e.pod, snap.resources)) for e in evictions]
    binds = [BindSpec(pod=pod.key, node=n, vec=pod_vector(pod, snap.resources)) for pod, n in placements]
    binds += [
        BindSpec(pod=None, node=e.to, vec=pod_vector(e.pod, snap.resources), replaces=e.pod.key)
        for e in evictions
        if e.kind == "move" and e.to is not None
    ]
    steps = order_steps(evict_specs, binds, snap.free)
    by_id = {st.id: st for st in steps}
    waiting: dict[str, set[str]] = {}
    for st in steps:
        if st.pod is not None and step_kind(st.op).effect == Effect.BIND:
            for a in st.after:
                before = by_id[a]
                if before.pod is not None and step_kind(before.op).effect == Effect.AWAIT_GONE:
                    waiting.setdefault(before.pod, set()).add(st.pod)
    arriving = np.zeros_like(snap.free)
    for b in binds:
        arriving[b.node] += b.vec
    for e in evictions:
        e.for_ = sorted((waiting.get(e.pod.key, set()) - model.calm) | set(e.for_))
        short = np.flatnonzero(arriving[e.node] > snap.free[e.node])
        e.short_of = [snap.resources[j] for j in short.tolist()]
    return Plan(
        placements=placements,
        evictions=evictions,
        steps=steps,
        status="optimal" if proven else "feasible",
        seconds=time.monotonic() - started,
        nodes_considered=hood_size,
        movers_considered=len(model.movers),
    )
