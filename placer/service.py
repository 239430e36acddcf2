"""Solve a cluster: pick the batch, run a policy (placer or a kube-scheduler simulation), and
simulate the controller's batching when asked. Pure: no I/O beyond the models it is given."""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from placer.baseline import SimResult, simulate, weighed
from placer.engine import (
    Budget,
    Snapshot,
    after_plan,
    asks_extended,
    build_snapshot,
    cut_batch,
    keeps_held,
    no_cycle_collection,
    solve_batch,
    with_default_spread,
)
from placer.engine import Unplaced as UnplacedPod
from placer.metrics import BALANCE_RESOURCES, balance_metrics
from placer.models import (
    BIND,
    GROUP_BATCH_SIZE,
    POD_COUNT,
    Baseline,
    Cluster,
    Config,
    Effect,
    Eviction,
    EvictionDetail,
    Metrics,
    Placement,
    Pod,
    Policy,
    Reason,
    Result,
    SolveStatus,
    Step,
    StrategyName,
    Unplaced,
    UnplacedCode,
    describe,
    describe_eviction,
    step_kind,
    worst_status,
)
from placer.plan import Plan, StepSpec, could_evict, name_blocking_pdbs, plan_batch
from placer.validate import hard_violations, validate_plan

__all__ = [
    "Decision",
    "DefaultRun",
    "Outcome",
    "SolveOptions",
    "apply_plan",
    "check_decision",
    "decide",
    "holding",
    "node_dicts",
    "nominated_holds",
    "pending_batch",
    "plan_steps",
    "solve_cluster",
    "state_metrics",
]

PLAN_SHARE = 0.5  # of a decision's time limit kept for the global plan when a batch is tight
ALTERNATIVE_WORK = 5_000 * 99  # nodes x pods up to which a tight batch also gets kube-scheduler's answer
# kube-scheduler's simulation costs about this per pod, per node x pod and per running pod (its
# topology books and scoring rows), with a quarter to spare (99 pods measured on the 2-core
# benchmark machine with nothing else running: 0.010 s at 100 nodes and 200 running pods, 0.023 s
# at 1,000 and 2,000, 0.041 s at 1,000 and 10,000, 0.075 s at 5,000 and 10,000). Every batch gets
# its answer, and placer's is made no worse than it on imbalance and std_score (the balance
# strategy only), when that costs at most NO_WORSE_SHARE of the limit: at the controller's floor
# (0.1 s) a 1,000-node cluster with up to ~4,000 running pods gets the guard.
SIM_SECONDS_PER_POD = 1.05e-4
SIM_SECONDS_PER_PAIR = 1.3e-7
SIM_SECONDS_PER_RUNNING = 2.8e-6
NO_WORSE_SHARE = 0.35
# Writing a decision's answer after it (the output models of its placements and unplaced pods,
# the end state's measures over the nodes) takes about this per pod of the batch and per node
# (on the 2-core benchmark machine, 1,000 nodes: 3-7 ms with 99 pods, 11 ms with 1,000;
# docs/bench/walltime.md): each batch's decision ends that much before its time limit, so that
# `placer solve` ends within it.
ANSWER_SECONDS_PER_POD = 1.0e-5
ANSWER_SECONDS_PER_NODE = 4.0e-6
ANSWER_SHARE = 0.5  # of the time limit, at most kept for writing the answer (a huge cluster's batch still decides)


@dataclass(frozen=True)
class SolveOptions:
    policy: Policy = "placer"
    batch_size: int | None = None
    group_batch_size: int = GROUP_BATCH_SIZE  # with batch_size: gangs held to a domain join up to this
    config: Config = field(default_factory=Config)
    evict: bool = True  # compute a global plan when a batch leaves pods unplaced
    max_evictions: int | None = None  # cap on moves + preemptions over the whole run


@dataclass
class Outcome:
    result: Result
    before: Snapshot
    after: Snapshot
    warnings: list[str]


NOMINATED = "~nominated"  # name suffix of the stand-in holding a nominated pod's room


def pending_batch(cluster: Cluster, scheduler_name: str) -> tuple[list[Pod], list[str]]:
    """Pending pods addressed to the scheduler, in creation order (``Pod.awaits``: the rule the
    controller uses too); gated pods wait, terminating ones are never placed. The warnings say
    what was left out and why, so that an answer is never silently empty."""
    batch: list[Pod] = []
    gated: list[str] = []
    deleted: list[str] = []
    others: dict[str, int] = {}
    for pod in cluster.pods:
        if pod.awaits(scheduler_name):
            batch.append(pod)
        elif not pod.pending:
            continue
        elif scheduler_name not in ("*", pod.scheduler_name):
            others[pod.scheduler_name] = others.get(pod.scheduler_name, 0) + 1
        elif pod.terminating:
            deleted.append(pod.key)
        elif pod.scheduling_gates:
            gated.append(f"{pod.key} ({', '.join(pod.scheduling_gates)})")
    batch.sort(key=lambda p: (p.creation, p.namespace, p.name))
    warnings = []
    if others:
        total = sum(others.values())
        names = ", ".join(f"{name} {count}" for name, count in sorted(others.items(), key=lambda kv: (-kv[1], kv[0])))
        top = max(others, key=lambda name: (others[name], name))
        warnings.append(
            f"{total} pending pod{'s' if total > 1 else ''} addressed to other schedulers ({names}) "
            f"{'are' if total > 1 else 'is'} not placed: pass --scheduler-name {top} to place them as if "
            f"placer were that scheduler, or --scheduler-name '*' for every pending pod"
        )
    if deleted:
        warnings.append(f"{len(deleted)} pending pod(s) being deleted are not placed: {_listing(deleted)}")
    if gated:
        warnings.append(f"{len(gated)} pending pod(s) wait on scheduling gates: {_listing(gated)}")
    return batch, warnings


def _listing(items: Sequence[str], shown: int = 5) -> str:
    more = f" and {len(items) - shown} more" if len(items) > shown else ""
    return ", ".join(items[:shown]) + more


def nominated_holds(cluster: Cluster, scheduler_name: str, batch: Sequence[Pod]) -> list[Pod]:
    """Stand-ins holding the room of nominations, as kube-scheduler holds it for pods of equal or
    higher priority: each pending pod that is not the scheduler's to place, whose
    ``status.nominatedNodeName`` is a node of the cluster, not being deleted, with a priority at
    least the lowest in the batch, as if running on that node (``decide`` never evicts them).
    kube-scheduler ignores nominations of pods it does not schedule: this works one way only."""
    supported = [p.priority for p in batch if p.unsupported is None]
    if not supported:
        return []
    lowest = min(supported)
    keys = {p.key for p in cluster.pods if p.awaits(scheduler_name)}
    nodes = {n.name for n in cluster.nodes}
    return [
        holding(p, p.nominated_node, NOMINATED)
        for p in cluster.pods
        if p.pending and p.key not in keys and p.nominated_node in nodes and not p.terminating and p.priority >= lowest
    ]


def node_dicts(snap: Snapshot) -> tuple[list[dict[str, int]], list[dict[str, int]]]:
    names = snap.resources
    alloc = [dict(zip(names, row.tolist(), strict=True)) for row in snap.alloc]
    used = [dict(zip(names, row.tolist(), strict=True)) for row in snap.used]
    return alloc, used


def state_metrics(snap: Snapshot) -> tuple[float, float]:
    """(imbalance, std_score) of a cluster state (``placer.metrics``)."""
    return balance_metrics(*node_dicts(snap))


@dataclass
class Decision:
    """What placer decides for one batch: placements, a plan (or None), and what stays unplaced."""

    placements: list[tuple[Pod, int]]
    unplaced: list[UnplacedPod]
    plan: Plan | None
    status: SolveStatus
    gap: float
    # False when the plan's search ran out of time before it could tell whether evictions would
    # place the pods left out: a caller may decide them again with more time.
    settled: bool = True


def measured(config: Config, batch: Sequence[Pod]) -> bool:
    """Whether imbalance and std_score measure what this batch decides, so that its answer is held
    no worse than kube-scheduler's on them: the balance strategy over the resources they read
    (another strategy, or other balance resources, ask for another shape of cluster), and pods
    asking for nothing else. GPUs and other extended resources are placed for themselves: the
    measures do not see them, and holding each batch to kube-scheduler's balance (often its very
    answer) strands the devices later batches need (docs/bench/gpu.md)."""
    if config.strategy != StrategyName.BALANCE or set(config.balance.resources) != set(BALANCE_RESOURCES):
        return False
    read = set(BALANCE_RESOURCES) | {POD_COUNT}
    return all(name in read for pod in batch for name in pod.requests)


@no_cycle_collection()  # the plan's and the simulation's objects too, not only the batch's solve (engine.heap)
def decide(
    cluster: Cluster,
    state: Snapshot,
    batch: list[Pod],
    config: Config,
    *,
    evict: bool = True,
    max_evictions: int | None = None,
    max_per_node: int | None = None,
    frozen: frozenset[str] = frozenset(),
    held: frozenset[str] = frozenset(),
    target: tuple[float, float] | None = None,
    waiting: Sequence[Pod] = (),
    budget: Budget | None = None,
) -> Decision:
    """Solve a batch on ``state`` (not modified); plan evictions when it leaves pods unplaced.
    ``target``: balance measures (imbalance, std_score) the guard aims for besides kube-scheduler's
    answer for this batch (``solve_batch``); ``waiting``: pods queued behind the batch, which
    its balance accounts for (``solve_batch``); ``budget``: the decision's time limit when it
    started before this call (its first batch's snapshot, kube-scheduler's run beside it: every
    phase reads the one deadline), a fresh one from ``config`` by default."""
    budget = budget or Budget.of(config)  # one time limit for the whole decision: simulation, solve, guard, plan
    batch = with_default_spread(batch, cluster.replicasets, config.default_spread)
    frozen = frozen | {p.key for pods in state.running for p in pods if p.name.endswith(NOMINATED)}
    may_plan = evict and max_evictions != 0 and could_evict(state)

    @functools.cache
    def default_answer() -> list[tuple[Pod, int]] | None:
        """kube-scheduler's answer for the batch (no preemption), a start the engine may adopt;
        None when it would take more than NO_WORSE_SHARE of the limit (or the time left): the
        estimate below cannot foresee every batch (a 5,000-pod gang), the deadline holds.
        Simulated once per decision: the solve's guard and the whole-answer fallback share it;
        not at all once the deadline has passed (the simulation would stop at once, after copying
        the state)."""
        if budget.over():
            return None
        deadline = budget.deadline(NO_WORSE_SHARE * budget.limit)
        sim = simulate(
            state.copy(), batch, "default", preemption=False, namespaces=cluster.namespaces, deadline=deadline
        )
        return None if sim.stopped else sim.placements

    reserve = PLAN_SHARE if may_plan else 0.0
    # The simulation grows with the batch, the nodes and the running pods (SIM_SECONDS_*): beyond
    # NO_WORSE_SHARE of the limit it would eat the budget of the very batch it is meant to help.
    tries = weighed(batch, state.nodes)  # pods, each pod of a topology group once per domain
    pairs = len(state.nodes) * tries
    running = sum(len(pods) for pods in state.running)
    simulation = tries * SIM_SECONDS_PER_POD + pairs * SIM_SECONDS_PER_PAIR + running * SIM_SECONDS_PER_RUNNING
    guarded = measured(config, batch) or any(asks_extended(pod) for pod in batch)
    no_worse = guarded and simulation <= NO_WORSE_SHARE * config.solver.time_limit
    alternative = default_answer if pairs <= ALTERNATIVE_WORK or no_worse else None
    res = solve_batch(
        state,
        batch,
        config,
        budget=budget,
        reserve=reserve,
        alternative=alternative,
        no_worse=no_worse,
        target=target,
        waiting=waiting,
    )
    left = res.unplaced
    if (
        left
        and (everyone := default_answer()) is not None
        and len(everyone) == len(batch)
        and (res.batch is None or keeps_held(res.batch, everyone))  # not where workloads would stack
    ):
        # kube-scheduler's answer places the whole batch without evictions where the solve (short
        # of time, or held to its candidates) left some out: no plan could improve on it (a plan
        # must place-and-keep strictly more per key), and a plan made here would be refused.
        whole = Decision(everyone, [], None, worst_status(res.status, "feasible"), 1.0)
        # A batch with gangs or pod groups takes it only when the independent validator does: the
        # simulation's group cycle is kube-scheduler 1.37's, which does not hold a composite gang's
        # pods to the composite's topology key as placer does (``placer.baseline.groups``).
        grouped = any(pod.gang_key or pod.group_domains for pod in batch)
        if not grouped or not check_decision(cluster, state, batch, whole, config):
            return whole
    # Pods the solve left out although they fit without evictions ("NotSolved": it ran out of
    # time) need more time, not a plan: a plan made for them would be refused (it cannot place
    # more than an answer without evictions), and the whole batch with it. The decision is then
    # unsettled, so that a controller decides them again at once with more time.
    short = any(code == "NotSolved" for _, code, _ in left)
    plan, settled = None, not short
    if may_plan and left and not short:
        plan, settled = plan_batch(
            cluster,
            state,
            batch,
            res,
            config,
            max_evictions=max_evictions,
            max_per_node=max_per_node,
            frozen=frozen,
            held=held,
            budget=budget,
        )
    if plan is None:
        if may_plan:
            left = name_blocking_pdbs(cluster, state, left, config.scheduler_name)
        status = res.status if settled else worst_status(res.status, "feasible")
        return Decision(res.placements, left, None, status, res.gap, settled)
    after = state.copy()
    for e in plan.evictions:
        after.remove(e.pod, e.node)
        if e.kind == "move" and e.to is not None:
            after.add(_stand_in(e.pod, after.nodes[e.to].name), e.to)
    left = name_blocking_pdbs(cluster, after, after_plan(after, batch, plan.placements, left), config.scheduler_name)
    status = worst_status(res.status, plan.status)
    return Decision(plan.placements, left, plan, status, res.gap)


def check_decision(
    cluster: Cluster, state: Snapshot, batch: Sequence[Pod], decision: Decision, config: Config
) -> list[str]:
    """What the independent validator (``placer.validate``, no code shared with the engine)
    objects to in a decision, before anything is written: the hard rules of the placements, or the
    whole plan (evictions, steps, final state, improvement).

    Checked against the whole cluster: every node and every running pod, with this batch's pods
    as the only pending ones (other pending pods were not part of the decision). Nothing here asks
    the engine which nodes matter: whether an untouched node had room (so an eviction was not
    needed), matched a selector or counts for a spreading or inter-pod rule is the validator's
    own judgement."""
    with no_cycle_collection():
        return _check(cluster, state, batch, decision, config)


def _check(cluster: Cluster, state: Snapshot, batch: Sequence[Pod], decision: Decision, config: Config) -> list[str]:
    keys = {p.key for p in batch}
    names = [n.name for n in state.nodes]
    # Bound pods (the validator counts the running ones), the batch's pending pods, and pending
    # pods of other schedulers nominated to a node (the validator holds their room).
    pods = tuple(
        p
        for p in cluster.pods
        if p.node_name is not None
        or p.key in keys
        or (p.pending and p.nominated_node is not None and not p.awaits(config.scheduler_name))
    )
    view = cluster.model_copy(update={"pods": pods})
    placements = [Placement(pod=pod.key, node=names[n]) for pod, n in decision.placements]
    if decision.plan is None:
        placed = {p.pod: p.node for p in placements if p.pod is not None}
        return hard_violations(view, placed, scheduler_name=config.scheduler_name)
    evictions: list[Eviction] = []
    steps: list[Step] = []
    apply_plan(state.copy(), decision.plan, evictions, steps, placements)
    result = Result(placements=placements, evictions=evictions, steps=steps)
    tiers = config.priority.restart_tiers
    return validate_plan(view, result, restart_tiers=tiers, scheduler_name=config.scheduler_name)


def holding(pod: Pod, node: str | None, suffix: str) -> Pod:
    """A stand-in of ``pod`` running on ``node`` (named with ``suffix``): room held for it."""
    return pod.model_copy(update={"name": pod.name + suffix, "node_name": node, "phase": "Running"})


def _stand_in(pod: Pod, node: str) -> Pod:
    """The replacement of a moved pod, for accounting until the real one is observed."""
    return pod.model_copy(update={"name": f"{pod.name}~replacement", "node_name": node})


def solve_cluster(cluster: Cluster, options: SolveOptions) -> Outcome:
    started = time.monotonic()
    config = options.config
    pending, warnings = pending_batch(cluster, config.scheduler_name)
    pending = with_default_spread(pending, cluster.replicasets, config.default_spread)
    running = [p for p in cluster.pods if p.running] + nominated_holds(cluster, config.scheduler_name, pending)
    before = build_snapshot(cluster.nodes, running, pending, cluster.namespaces)
    state = before.copy()
    size = options.batch_size or max(len(pending), 1)
    queue = list(pending)
    carried: list[Pod] = []
    placements: list[Placement] = []
    unplaced: list[Unplaced] = []
    status: SolveStatus = "optimal"
    gap = 0.0
    evictions: list[Eviction] = []
    steps: list[Step] = []
    replacements = 0
    budget = options.max_evictions
    placed_here: set[str] = set()
    # Batched runs of placer keep kube-scheduler's run beside them (the same batches from the
    # same start): each batch's guard aims for its balance as well, so that the run does not drift
    # above kube-scheduler's although every batch is no worse than its answer from placer's state.
    beside = (
        DefaultRun(before, cluster, evict=options.evict) if options.policy == "placer" and size < len(pending) else None
    )
    since: float | None = started  # the first batch's time limit counts from here: its pending pods, its snapshot
    while queue or carried:
        time_budget = Budget.of(config, started=since)  # a batched run: each batch has the limit
        since = None
        units = {p.key: p.batch_unit for p in queue if p.batch_unit}
        rivals = {p.batch_unit for p in queue if p.batch_unit and p.group_domains}
        taken = set(cut_batch([p.key for p in queue], size, units, rivals=rivals, rival_size=options.group_batch_size))
        fresh = [p for p in queue if p.key in taken]  # whole gangs and composite gangs; a larger one alone
        batch, queue = carried + fresh, [p for p in queue if p.key not in taken]
        if options.policy == "placer":
            target = None
            if beside is not None:  # within the batch's deadline, as kube-scheduler's answer in ``decide``
                target = beside.advance(fresh, deadline=time_budget.deadline(NO_WORSE_SHARE * time_budget.limit))
                beside = beside if target is not None else None  # it could not keep up: dropped
            answer_seconds = min(
                ANSWER_SECONDS_PER_POD * len(batch) + ANSWER_SECONDS_PER_NODE * len(state.nodes),
                ANSWER_SHARE * time_budget.limit,
            )
            # Pods this run already placed (and the stand-ins of moved pods' replacements) are not
            # evicted by a later batch's plan: in the controller they are still being bound.
            decision = decide(
                cluster,
                state,
                batch,
                config,
                evict=options.evict,
                max_evictions=budget,
                frozen=frozenset(placed_here),
                target=target,
                budget=time_budget.ending_early(answer_seconds),
            )
            status = worst_status(status, decision.status)
            gap = max(gap, decision.gap)
            done = decision.placements
            left = _unplaced(decision.unplaced)
            names = [n.name for n in state.nodes]
            if decision.plan is not None:
                if budget is not None:
                    budget -= len(decision.plan.evictions)
                if not steps:
                    _bind_earlier(steps, placements)  # the first plan: earlier batches' binds become steps
                replacements += apply_plan(state, decision.plan, evictions, steps, placements)
                placed_here.update(f"{e.pod.namespace}/{e.pod.name}~replacement" for e in decision.plan.evictions)
            elif steps:
                _bind_after_earlier_plans(steps, done, names)
            for pod, node in done:
                state.add(pod, node)
                placed_here.add(pod.key)
        else:
            # The batch already carries the configured default spreading (with_default_spread):
            # both policies see the same constraints.
            sim = _simulated(state, batch, options.policy, cluster, evict=options.evict)
            done = sim.placements
            left = _unplaced(sim.unplaced)
            for victim, node, by in sim.preemptions:
                evictions.append(Eviction(pod=victim.key, node=state.nodes[node].name, kind="preempt", for_=[by.key]))
        for pod, node in done:
            placements.append(Placement(pod=pod.key, node=state.nodes[node].name))
        carried = [pod for pod, _ in left]
        if not queue:
            unplaced = [u for _, u in left]
            break
    imbalance, std = state_metrics(state)
    result = Result(
        status=status,
        policy=options.policy,
        placements=sorted(placements, key=lambda p: p.pod or p.replaces or ""),
        unplaced=sorted(unplaced, key=lambda u: u.pod),
        evictions=evictions,
        steps=steps,
        metrics=Metrics(
            placed=sum(1 for p in placements if p.kind == "pending"),
            replacements=replacements,
            moved=sum(1 for e in evictions if e.kind == "move"),
            preempted=sum(1 for e in evictions if e.kind == "preempt"),
            unplaced=len(unplaced),
            imbalance=round(imbalance, 6),
            std_score=round(std, 6),
            solve_seconds=round(time.monotonic() - started, 4),
            gap=round(gap, 6),
        ),
    )
    return Outcome(result=result, before=before, after=state, warnings=[*cluster.warnings, *warnings])


def _simulated(
    state: Snapshot, batch: list[Pod], policy: Baseline, cluster: Cluster, *, evict: bool, deadline: float | None = None
) -> SimResult:
    """A baseline policy's decision for ``batch``, applied to ``state`` (up to ``deadline``)."""
    return simulate(
        state,
        batch,
        policy,
        pdbs=cluster.pdbs,
        preemption=evict,
        namespaces=cluster.namespaces,
        replicasets=cluster.replicasets,
        deadline=deadline,
    )


class DefaultRun:
    """kube-scheduler's batched run beside placer's (``--policy default`` with the same batches
    from the same start), for the balance placer's batches aim for: each batch is no worse than
    kube-scheduler's answer from placer's own state, and a run of such batches can still end
    above kube-scheduler's own run, since the two states drift apart batch by batch."""

    def __init__(self, start: Snapshot, cluster: Cluster, *, evict: bool) -> None:
        self.state = start.copy()
        self.cluster = cluster
        self.evict = evict
        self.carried: list[Pod] = []

    def advance(self, fresh: list[Pod], *, deadline: float | None = None) -> tuple[float, float] | None:
        """The next batch (what it left out, then ``fresh``) decided; its state's (imbalance,
        std_score). None when ``deadline`` (a ``time.monotonic()`` instant) came first: the run
        stopped inside a batch and cannot go on."""
        batch = [*self.carried, *fresh]
        sim = _simulated(self.state, batch, "default", self.cluster, evict=self.evict, deadline=deadline)
        if sim.stopped:
            return None
        self.carried = [pod for pod, _, _ in sim.unplaced]
        return state_metrics(self.state)


def _unplaced(left: Sequence[tuple[Pod, UnplacedCode, Reason]]) -> list[tuple[Pod, Unplaced]]:
    """The output contract's entries: kube-scheduler's words for each reason, and the reason as
    data. Worded once per reason (the pods of a group share theirs: a gang of 5,000 left out)."""
    words: dict[int, str] = {}
    out = []
    for pod, code, reason in left:
        said = words.get(id(reason))
        if said is None:
            said = words[id(reason)] = describe(reason)
        out.append((pod, Unplaced(pod=pod.key, code=code, reason=said, detail=reason)))
    return out


def apply_plan(
    state: Snapshot, plan: Plan, evictions: list[Eviction], steps: list[Step], placements: list[Placement]
) -> int:
    """Account a plan on the state; record its evictions, steps and replacement placements."""
    names = [n.name for n in state.nodes]
    replaced = 0
    for e in plan.evictions:
        state.remove(e.pod, e.node)
        detail = EvictionDetail(short_of=e.short_of, outranked_by=e.outranked_by, choice=e.choice)
        to = names[e.to] if e.to is not None else None
        evictions.append(
            Eviction(
                pod=e.pod.key,
                node=names[e.node],
                kind=e.kind,
                to=to,
                for_=e.for_,
                reason=describe_eviction(e.kind, names[e.node], to, e.for_, detail),
                detail=detail,
            )
        )
        if e.kind == "move" and e.to is not None:
            state.add(_stand_in(e.pod, names[e.to]), e.to)
            owner = e.pod.owner
            placements.append(
                Placement(
                    pod=None,
                    replaces=e.pod.key,
                    owner=f"{owner.kind}/{e.pod.namespace}/{owner.name}" if owner else None,
                    node=names[e.to],
                    kind="replacement",
                )
            )
            replaced += 1
    steps += plan_steps(plan.steps, names, earlier=steps)
    return replaced


def plan_steps(specs: Sequence[StepSpec], names: Sequence[str], *, earlier: Sequence[Step] = ()) -> list[Step]:
    """A plan's steps as output models, numbered after ``earlier`` steps of the same run; a bind
    into a node where an earlier plan frees room also waits until that room is free."""
    offset = len(earlier)
    gone = _gone_by_node(earlier)
    out = []
    for st in specs:
        after = [a + offset for a in st.after]
        if step_kind(st.op).effect == Effect.BIND:
            after = sorted(set(after) | set(gone.get(names[st.node], [])))
        out.append(
            Step(id=st.id + offset, op=st.op, pod=st.pod, replaces=st.replaces, node=names[st.node], after=after)
        )
    return out


def _gone_by_node(steps: Sequence[Step]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for st in steps:
        if step_kind(st.op).effect == Effect.AWAIT_GONE:
            out.setdefault(st.node, []).append(st.id)
    return out


def _bind_after_earlier_plans(steps: list[Step], done: list[tuple[Pod, int]], names: list[str]) -> None:
    """Once a plan ran earlier in the run, every later bind is a step too; one into a node that
    plan freed room on waits for its victims, so the steps stay a complete, safe order."""
    earlier = _gone_by_node(steps)
    for pod, node in done:
        steps.append(
            Step(id=len(steps) + 1, op=BIND.op, pod=pod.key, node=names[node], after=earlier.get(names[node], []))
        )


def _bind_earlier(steps: list[Step], placements: list[Placement]) -> None:
    """Binds of batches before the first plan, as steps that wait for nothing."""
    for p in placements:
        if p.pod is not None and p.kind == "pending":
            steps.append(Step(id=len(steps) + 1, op=BIND.op, pod=p.pod, node=p.node))
