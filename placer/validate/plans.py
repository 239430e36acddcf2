"""``validate_plan``: a whole answer with a global plan (README, "Global plan").

The plan's evictions, replacements (``placer.validate.answer``, ``placer.validate.evictions``) and
steps (``placer.validate.steps``), then the final state: the topology rules over the running pods
not evicted, the replacements and the placed pending pods; no unplaced pod of the batch fits an
eligible node as it is, or in place of the placed pods of strictly lower key on a node (where
every preemption there keeps a preemptor); a relaxed-affinity pod is off its matching nodes only
while they have no room (or while it is needed there as a preemptor); the workload groups' rules
after the plan; and a plan must beat, per key from the highest down (placed pending pods plus
running pods not preempted), what a first-fit answer without evictions already reaches (the
engine's answer without evictions is at least as good, so a plan that merely equals it, or evicts
nothing, should not exist).

``validate_plan`` judges the answer to one batch (``placer solve`` without ``--batch-size``, or one
batch of the controller): with ``--batch-size`` a later batch plans on the state the earlier ones
left, which the priority and improvement rules above do not account for.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from placer.models import (
    Cluster,
    Eviction,
    Pod,
    Result,
)
from placer.validate.answer import Plan, eviction_violations, replacement_violations, resolve_plan_placements
from placer.validate.evictions import cap_violations, may_preempt
from placer.validate.groups import Domains, disruption_violations, domain_violations
from placer.validate.index import ClusterIndex, FreeRoom, NodeState, holding_nominations
from placer.validate.placements import (
    Context,
    eligibility_violations,
    fits,
    left_out_violations,
    node_violations,
    relaxed_violations,
    validate_placements,
)
from placer.validate.priorities import RESTART_TIERS, Key, Tiers, pod_key, tier_scope
from placer.validate.steps import bind_eligibility, step_violations
from placer.validate.topology import TopologyState, topology_state
from placer.validate.violations import Violation, texts


def kept_vector(
    cluster: Cluster, placed: Iterable[Pod], preempted: Iterable[str] = (), *, restart_tiers: Tiers = True
) -> dict[Key, int]:
    """Objective (1): placed pending pods plus running pods not preempted, counted per key.

    Running pods count when bound to a node of the cluster; moved pods keep running (their
    replacement takes over), preempted ones (keys in ``preempted``) do not.
    """
    return _kept(ClusterIndex(cluster), placed, preempted, restart_tiers=restart_tiers)


def _kept(
    index: ClusterIndex, placed: Iterable[Pod], preempted: Iterable[str], *, restart_tiers: Tiers
) -> dict[Key, int]:
    """``kept_vector`` from the index's running pods per key."""
    out = dict(index.running_keys(restart_tiers))
    gone = [index.pods.get(k) for k in set(preempted)]
    for pod in gone:
        if pod is not None and pod.running and pod.node_name in index.nodes:
            out[pod_key(pod, restart_tiers=restart_tiers)] -= 1
    for pod in placed:
        key = pod_key(pod, restart_tiers=restart_tiers)
        out[key] = out.get(key, 0) + 1
    return {k: v for k, v in out.items() if v}


def per_key(vectors: Sequence[Mapping[Key, int]]) -> list[list[int]]:
    """The vectors as lists over the union of their keys, highest key first (compare with ``<``)."""
    keys = sorted({k for v in vectors for k in v}, reverse=True)
    return [[v.get(k, 0) for k in keys] for v in vectors]


# --- plans: the final state ---------------------------------------------------------------------


def _plan_states(plan: Plan, cluster: Cluster, *, replacements_placed: bool) -> dict[str, NodeState]:
    """Nodes after the plan: running pods not evicted, replacements, and the placed pending pods
    (``placed``; replacements too when ``replacements_placed``)."""
    states = plan.ctx.index.states([], gone=plan.victims)
    for _, stand_in, node_name in plan.replacements.values():
        states[node_name].add(stand_in, batch=replacements_placed)
    for pod, node_name in plan.pending.values():
        states[node_name].add(pod, batch=True)
    return states


def _plan_topology(plan: Plan, cluster: Cluster) -> TopologyState:
    """The topology rules after the plan: running pods not evicted; replacements and placed
    pending pods are the batch."""
    gone = {id(pod) for pod, _ in plan.victims.values()}
    running = [p for p in plan.ctx.index.running_list if id(p) not in gone]
    placed = [(stand_in, node_name) for _, stand_in, node_name in plan.replacements.values()]
    placed += list(plan.pending.values())
    return topology_state(cluster, running, placed)


def _keeps_preemptors(plan: Plan, victims: Sequence[Pod], staying: Sequence[Pod]) -> bool:
    """Every preempted victim of a node still has a pod on it that may preempt it."""
    tiers = plan.ctx.restart_tiers
    return all(any(may_preempt(p, v, restart_tiers=tiers) for p in staying) for v in victims)


def final_violations(plan: Plan, cluster: Cluster) -> list[str]:
    """What must hold after the plan whatever the evictions: the topology rules, no unplaced pod of
    the batch fits as things are or in place of lower keys, relaxed-affinity pods off matching
    nodes with room."""
    ctx = plan.ctx
    topology = _plan_topology(plan, cluster)
    out = texts(node_violations(_plan_states(plan, cluster, replacements_placed=True)))
    out += topology.violations()
    states = _plan_states(plan, cluster, replacements_placed=False)
    # Gang members are all-or-nothing: one fitting alone proves nothing about the whole gang.
    left = [p for p in plan.ctx.index.batch(plan.scheduler_name) if p.key not in plan.pending and not p.gang]
    free = FreeRoom(states, [*left, *(pod for state in states.values() for pod in state.placed)])
    preempted: dict[str, list[Pod]] = {}
    for pod in plan.preempted().values():
        preempted.setdefault(pod.node_name or "", []).append(pod)

    def keeps(name: str, staying: Sequence[Pod]) -> bool:
        return _keeps_preemptors(plan, preempted.get(name, []), staying)

    after = " after the plan"
    out += texts(relaxed_violations(ctx, states, topology, free, keeps=keeps, after=after))
    placed = {key: node for key, (_, node) in plan.pending.items()}
    domains = Domains(cluster, placed, gone=set(plan.victims))  # workload groups' domains after the plan
    out += texts(
        left_out_violations(ctx, states, left, topology, free, allows=domains.allows, keeps=keeps, after=after)
    )
    return out


def _first_fit(plan: Plan, cluster: Cluster) -> list[Pod]:
    """A valid answer without evictions: the batch by key (highest first), each pod on the first
    node with room where the topology rules still hold (matching nodes first for relaxed-affinity
    pods)."""
    states = plan.ctx.index.states([])
    topology = topology_state(cluster, plan.ctx.index.running_list, [])
    batch = sorted(
        plan.ctx.index.batch(plan.scheduler_name),
        key=lambda p: (tuple(-k for k in plan.key(p)), p.creation, p.namespace, p.name),
    )
    free = FreeRoom(states, batch)
    domains = Domains(cluster)  # workload groups stay in one topology domain
    placed: list[Pod] = []
    for pod in batch:
        binding = plan.ctx.binding(pod)
        # Only nodes with room for its requests can take it.
        names = sorted(free.with_room(pod), key=lambda n: (binding.mode == "relaxed" and n not in binding.matching, n))
        for name in names:
            state = states[name]
            if fits(pod, binding, state, name, topology) and domains.allows(pod, name):
                state.add(pod, batch=True)
                free.refresh(name)
                topology.add(pod, name)
                domains.add(pod, name)
                placed.append(pod)
                break
    return placed


def _by_priority(kept: Mapping[Key, int]) -> dict[Key, int]:
    out: dict[Key, int] = {}
    for (priority, _), count in kept.items():
        out[priority, 0] = out.get((priority, 0), 0) + count
    return out


def _tiers_per_namespace(
    index: ClusterIndex, placed: Iterable[Pod], preempted: Iterable[str]
) -> dict[int, dict[str, list[int]]]:
    """Per spec.priority and namespace: pods placed-and-running per restart tier, Always first
    (a list that compares in the namespace's own lexicographic order)."""
    gone = set(preempted)
    out: dict[int, dict[str, list[int]]] = {}
    kept = [p for pods in index.running.values() for p in pods if p.key not in gone]
    for pod in [*kept, *placed]:
        row = out.setdefault(pod.priority, {}).setdefault(pod.namespace, [0, 0, 0])
        row[3 - RESTART_TIERS[pod.restart_policy]] += 1
    return out


def _namespaces_improve(index: ClusterIndex, plan: Plan, first_fit: list[Pod]) -> bool:
    """``restartTiers: namespace``: at the highest spec.priority where the plan changes anything,
    it keeps more pods of that priority cluster-wide, or some namespace ends better there in its
    own (tier) order: the thesis's order inside a namespace. (That no namespace pays for it is the
    preemption rule: at equal priority only a higher tier of the victim's own namespace preempts,
    which leaves that namespace better in its own order; the first-fit answer compared with here
    is one answer without evictions, not the engine's, so it may favour another namespace.)"""
    ours = _tiers_per_namespace(index, [pod for pod, _ in plan.pending.values()], plan.preempted())
    theirs = _tiers_per_namespace(index, first_fit, ())
    for priority in sorted(set(ours) | set(theirs), reverse=True):
        names = set(ours.get(priority, {})) | set(theirs.get(priority, {}))
        mine = {n: ours.get(priority, {}).get(n, [0, 0, 0]) for n in names}
        other = {n: theirs.get(priority, {}).get(n, [0, 0, 0]) for n in names}
        if mine == other:
            continue
        if sum(map(sum, mine.values())) > sum(map(sum, other.values())):
            return True
        return any(mine[n] > other[n] for n in names)
    return False


def _improvement_violations(plan: Plan, cluster: Cluster) -> list[str]:
    """A plan (evictions or steps) must place-and-keep strictly more per key (highest first) than
    an answer without evictions: here a first-fit one, which the engine's own answer matches or
    beats. A plan that evicts nothing can never do that."""
    tiers = plan.ctx.restart_tiers
    index = plan.ctx.index
    with_plan = _kept(index, [pod for pod, _ in plan.pending.values()], plan.preempted(), restart_tiers=tiers)
    without = _kept(index, _first_fit(plan, cluster), (), restart_tiers=tiers)
    ours, theirs = per_key([with_plan, without])
    if tier_scope(tiers) == "namespace":
        if _namespaces_improve(index, plan, _first_fit(plan, cluster)):
            return []
        ours, theirs = per_key([_by_priority(with_plan), _by_priority(without)])
    elif ours > theirs:
        return []

    return [
        f"the plan does not strictly improve placed-and-running pods per key: {ours} with it, "
        f"{theirs} already without evictions (keys {sorted(with_plan.keys() | without.keys(), reverse=True)})"
    ]


def validate_plan(
    cluster: Cluster,
    result: Result,
    *,
    restart_tiers: Tiers = True,
    scheduler_name: str = "placer",
    max_evictions: int | None = None,
) -> list[str]:
    """Every reason a solve's answer with a global plan is wrong; empty when valid.

    ``result`` is ``placer.service.solve_cluster``'s for one batch: pending placements,
    replacements of moved pods, evictions and steps. Without evictions, replacements or steps it
    is a plain set of placements, checked by ``validate_placements``. ``max_evictions`` is the cap
    the solve was given (None: none). The rules are in the module docstring.
    """
    if not result.evictions and not result.steps and all(p.kind == "pending" for p in result.placements):
        placements = {p.pod: p.node for p in result.placements if p.pod is not None}
        return validate_placements(cluster, placements, restart_tiers=restart_tiers, scheduler_name=scheduler_name)
    cluster = holding_nominations(cluster, scheduler_name)
    ctx = Context.of(cluster, restart_tiers)
    plan = Plan(ctx=ctx, scheduler_name=scheduler_name)
    violations: list[str] = []
    replacements = resolve_plan_placements(plan, cluster, result.placements, violations)
    violations += eviction_violations(plan, cluster, result.evictions)
    violations += replacement_violations(plan, replacements)
    violations += cap_violations(ctx.index, result.evictions, max_evictions)
    violations += texts(eligibility_violations(ctx, [(pod, node) for pod, node in plan.pending.values()]))
    violations += bind_eligibility(plan, result.steps)
    violations += step_violations(plan, cluster, result.steps)
    violations += final_violations(plan, cluster)
    violations += _improvement_violations(plan, cluster)
    violations += texts(_group_violations(plan, cluster, result.evictions))
    return violations


def _group_violations(plan: Plan, cluster: Cluster, evictions: Sequence[Eviction]) -> list[Violation]:
    """Workload groups after the plan: one domain each (evicted pods gone, pending pods where
    placed), and groups with ``disruptionMode: all`` evicted whole or not at all."""
    evicted = {e.pod for e in evictions}
    placed = {key: node for key, (_, node) in plan.pending.items()}
    return domain_violations(cluster, placed, gone=evicted) + disruption_violations(cluster, evicted)
