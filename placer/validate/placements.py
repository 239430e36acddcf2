"""The rules of a set of placements (pending pod key -> node name), and their maximality.

- each placed pod is pending, supported, ungated, not terminating and addressed to the scheduler,
  and its node exists;
- eligibility (``placer.validate.eligibility``): cordon, taints, labels and affinity with weak
  binding, volumes;
- capacity: on every resource a pod requests, plus the pod count, running pods and placed pods
  together fit the node's allocatable; host ports never clash (running pods count);
- the topology rules (``placer.validate.topology``) and the group rules
  (``placer.validate.groups``) in the final state;
- a relaxed-affinity pod (``when-no-node-fits: ignore-affinity``) is off its matching nodes only
  while they have no room.

``validate_placements`` also checks maximality: an unplaced pod of the batch that fits some
eligible node in the final state was left out for nothing, and one that would fit after removing
the batch pods of strictly lower key placed on a node was outranked by a lower key. "Fits" includes
the topology rules: the state with the pod added (and the lower-key pods removed) breaks none that
the final state keeps. ``hard_rule_violations`` checks the hard rules only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from placer.models import (
    Cluster,
    Node,
    Pod,
)
from placer.validate.eligibility import Binding, binding_of, eligibility_problems
from placer.validate.groups import domain_violations, gang_rule_violations
from placer.validate.index import ClusterIndex, FreeRoom, NodeState, addressed, holding_nominations
from placer.validate.priorities import Tiers, outranks, pod_key
from placer.validate.semantics import demand
from placer.validate.topology import TopologyState, topology_state
from placer.validate.violations import Violation, texts

# --- checks -----------------------------------------------------------------------------------


@dataclass
class Context:
    index: ClusterIndex
    restart_tiers: Tiers
    bindings: dict[str, Binding] = field(default_factory=dict)

    @classmethod
    def of(cls, cluster: Cluster, restart_tiers: Tiers) -> Context:
        return cls(ClusterIndex(cluster), restart_tiers)

    @property
    def cluster(self) -> Cluster:
        return self.index.cluster

    @property
    def nodes(self) -> dict[str, Node]:
        return self.index.nodes

    def binding(self, pod: Pod) -> Binding:
        if pod.key not in self.bindings:
            matching = self.index.labels.matching(pod.node_selector, pod.required_terms)
            self.bindings[pod.key] = binding_of(pod, matching)
        return self.bindings[pod.key]


def resolve_placements(
    index: ClusterIndex, placements: Mapping[str, str], scheduler_name: str, violations: list[Violation]
) -> list[tuple[Pod, str]]:
    """(pod, node name) of the placements whose pod and node exist; the others are violations."""
    pods = index.pods
    nodes = index.nodes
    out: list[tuple[Pod, str]] = []
    for key, node_name in sorted(placements.items()):
        pod = pods.get(key)
        if pod is None:
            violations.append(
                Violation("placement", key, f"{key}: placed on {node_name} but no such pod is in the cluster")
            )
            continue
        if not pod.pending:
            violations.append(
                Violation(
                    "placement", key, f"{key}: placed on {node_name} but the pod is not pending (phase {pod.phase})"
                )
            )
            continue
        if node_name not in nodes:
            violations.append(
                Violation("placement", key, f"{key}: placed on {node_name}, which is not a node of the cluster")
            )
            continue
        if pod.unsupported is not None:
            violations.append(
                Violation(
                    "placement", key, f"{key}: placed on {node_name} but placer does not support it ({pod.unsupported})"
                )
            )
        if pod.scheduling_gates:
            violations.append(
                Violation("placement", key, f"{key}: placed on {node_name} but it waits on scheduling gates")
            )
        if pod.terminating:
            violations.append(
                Violation("placement", key, f"{key}: placed on {node_name} but the pod is terminating (being deleted)")
            )
        if not addressed(pod.scheduler_name, scheduler_name):
            text = f"{key}: placed on {node_name} but it is addressed to scheduler {pod.scheduler_name!r}"
            violations.append(Violation("placement", key, text))
        out.append((pod, node_name))
    return out


def eligibility_violations(ctx: Context, placed: Sequence[tuple[Pod, str]]) -> list[Violation]:
    """Placed pods on nodes they may not use: cordon, taints, labels."""
    return [
        Violation("eligibility", pod.key, f"{pod.key} on {node_name}: {problem}", (node_name,))
        for pod, node_name in placed
        for problem in eligibility_problems(pod, ctx.nodes[node_name], ctx.binding(pod))
    ]


def node_violations(states: Mapping[str, NodeState]) -> list[Violation]:
    """Over-capacity nodes (that received batch pods) and host-port clashes of placed pods."""
    out: list[Violation] = []
    for name, state in sorted(states.items()):
        if not state.placed:
            continue
        # Kubernetes checks only what a pod requests: a node already over on a resource the placed
        # pods do not ask for is not their fault.
        requested = {r for pod in state.placed for r in demand(pod)}
        over = [f"{r} {used} > allocatable {alloc}" for r, (used, alloc) in state.overload().items() if r in requested]
        if over:
            pods = ", ".join(p.key for p in state.placed)
            out.append(
                Violation("capacity", name, f"node {name} over capacity after placing {pods}: {'; '.join(over)}")
            )
        for pod in state.placed:
            for clash in state.port_clashes(pod):
                out.append(Violation("host-ports", pod.key, f"{pod.key} on {name}: {clash}", (name,)))
    return out


def fits(pod: Pod, binding: Binding, state: NodeState, name: str, topology: TopologyState) -> bool:
    """The pod may go to the node ``name`` as things are: eligible, with room, topology rules kept."""
    return (
        not eligibility_problems(pod, state.node, binding)
        and not state.room_problems(pod)
        and topology.allows(pod, name)
    )


def matching_node_with_room(
    pod: Pod, binding: Binding, states: Mapping[str, NodeState], topology: TopologyState, free: FreeRoom
) -> str | None:
    """A node matching the pod's affinity that could still take it, if any (first by name)."""
    for other in sorted(binding.matching.intersection(free.with_room(pod))):
        if fits(pod, binding, states[other], other, topology):
            return other
    return None


# Whether the placed pods that would stay on a node (by name) may: a global plan's final state asks
# that every preemption there keeps a preemptor; a plain set of placements has nothing to keep.
Keeps = Callable[[str, Sequence[Pod]], bool]


def relaxed_violations(
    ctx: Context,
    states: Mapping[str, NodeState],
    topology: TopologyState,
    free: FreeRoom,
    *,
    keeps: Keeps | None = None,
    after: str = "",
) -> list[Violation]:
    """A relaxed-affinity pod may use a non-matching node only while no matching node has room
    (and, where ``keeps`` refuses the node without it, it is needed there). ``after`` ends the
    text (" after the plan")."""
    out: list[Violation] = []
    for name, state in sorted(states.items()):
        for pod in state.placed:
            binding = ctx.binding(pod)
            if binding.mode != "relaxed" or name in binding.matching:
                continue
            if keeps is not None and not keeps(name, [p for p in state.placed if p.key != pod.key]):
                continue  # it is the preemptor there: moving it would undo the preemption
            other = matching_node_with_room(pod, binding, states, topology, free)
            if other is not None:
                text = (
                    f"{pod.key} on {name}: placed outside its node affinity (when-no-node-fits: "
                    f"ignore-affinity) although matching node {other} has room for it{after}"
                )
                out.append(Violation("relaxed-affinity", pod.key, text, (name, other)))
    return out


Gangs = Mapping[tuple[str, str], Sequence[Pod]]  # (namespace, gang) -> its placed batch pods


def _placed_gangs(states: Mapping[str, NodeState]) -> dict[tuple[str, str], list[Pod]]:
    out: dict[tuple[str, str], list[Pod]] = {}
    for state in states.values():
        for p in state.placed:
            if p.gang:
                out.setdefault((p.namespace, p.gang), []).append(p)
    return out


def _worse_off(
    ctx: Context, pod: Pod, state: NodeState, name: str, topology: TopologyState, keeps: Keeps | None, gangs: Gangs
) -> list[Pod]:
    """Placed batch pods on ``name`` whose place ``pod`` should have had, or []: all the pods it
    outranks (any number of them is worth less than one more pod of a higher key), where the rest
    and ``pod`` may stay (``keeps``). With ``restartTiers: namespace`` those are the pods of a
    lower spec.priority, and of its own namespace and priority of a lower tier (the thesis's order
    holds inside a namespace). A member of a gang (all or nothing) holding a pod that ``pod``
    does not outrank is not among them: taking it off takes that pod off too."""

    def lower_alone(p: Pod) -> bool:
        members = gangs.get((p.namespace, p.gang), ()) if p.gang else ()
        return all(outranks(pod, q, restart_tiers=ctx.restart_tiers) for q in (p, *members))

    lower = [p for p in state.placed if lower_alone(p)]
    if (
        lower
        and not state.room_problems(pod, without=lower)
        and (keeps is None or keeps(name, [p for p in state.placed if p not in lower] + [pod]))
        and topology.allows(pod, name, without=lower)
    ):
        return lower
    return []


def left_out_violations(
    ctx: Context,
    states: Mapping[str, NodeState],
    left: Sequence[Pod],
    topology: TopologyState,
    free: FreeRoom,
    *,
    allows: Callable[[Pod, str], bool] | None = None,
    keeps: Keeps | None = None,
    after: str = "",
) -> list[Violation]:
    """Maximality and priority for the unplaced pods of the batch: none fits an eligible node
    (that ``allows`` too) as it is, or in place of the placed pods it outranks there. ``after``
    ends the maximality text (" after the plan")."""
    out: list[Violation] = []
    holding = {name for name, state in states.items() if state.placed}
    gangs = _placed_gangs(states)
    for pod in left:
        key = pod_key(pod, restart_tiers=ctx.restart_tiers)
        binding = ctx.binding(pod)
        # A node without room for the pod and without batch pods to take off cannot take it.
        for name in sorted(holding.union(free.with_room(pod))):
            state = states[name]
            if eligibility_problems(pod, state.node, binding) or (allows is not None and not allows(pod, name)):
                continue
            if not state.room_problems(pod) and topology.allows(pod, name):
                text = f"{pod.key}: left unplaced although it fits on node {name}{after}"
                out.append(Violation("maximality", pod.key, text, (name,)))
                break
            lower = _worse_off(ctx, pod, state, name, topology, keeps, gangs)
            if lower:
                names = ", ".join(p.key for p in lower)
                text = (
                    f"{pod.key}: left unplaced although it would fit on node {name} "
                    f"in place of lower-key pods {names} (key {key})"
                )
                out.append(Violation("priority", pod.key, text, (name,)))
                break
    return out


def hard_violations(cluster: Cluster, placements: Mapping[str, str], *, scheduler_name: str = "placer") -> list[str]:
    """``hard_rule_violations`` in words."""
    return texts(hard_rule_violations(cluster, placements, scheduler_name=scheduler_name))


def hard_rule_violations(
    cluster: Cluster, placements: Mapping[str, str], *, scheduler_name: str = "placer"
) -> list[Violation]:
    """Violations of the hard constraints only (no maximality, priority or relaxed-affinity rule).

    A set of placements with no hard violation is a feasible answer; ``placement_violations`` adds
    the optimality-style rules on top.
    """
    violations: list[Violation] = []
    cluster = holding_nominations(cluster, scheduler_name)
    ctx = Context.of(cluster, True)
    resolved = resolve_placements(ctx.index, placements, scheduler_name, violations)
    violations += eligibility_violations(ctx, resolved)
    violations += node_violations(ctx.index.states(resolved, nodes=()))
    violations += topology_state(cluster, ctx.index.running_list, resolved).lines()
    violations += gang_rule_violations(cluster, placements, scheduler_name, ctx.index)
    violations += domain_violations(cluster, placements)
    return violations


def validate_placements(
    cluster: Cluster,
    placements: Mapping[str, str],
    *,
    restart_tiers: Tiers = True,
    scheduler_name: str = "placer",
) -> list[str]:
    """``placement_violations`` in words: every reason the placements are wrong; empty when valid."""
    return texts(placement_violations(cluster, placements, restart_tiers=restart_tiers, scheduler_name=scheduler_name))


def placement_violations(
    cluster: Cluster,
    placements: Mapping[str, str],
    *,
    restart_tiers: Tiers = True,
    scheduler_name: str = "placer",
) -> list[Violation]:
    """Every reason the placements (pending pod key -> node name) are wrong; empty when valid.

    Checks: each placed pod is pending, supported, ungated and addressed to ``scheduler_name``
    (``"*"`` for any), and its node exists; taints and cordon; labels and affinity (with the
    weak-binding annotations); volumes; capacity and host ports in the final state; inter-pod
    affinity, anti-affinity and DoNotSchedule topology spread in the final state; relaxed-affinity
    pods off their matching nodes only while those have no room; and for every unplaced pod of the
    batch, that no eligible node has room for it (topology rules included), even after removing the
    batch pods of strictly lower key placed there.
    """
    violations: list[Violation] = []
    cluster = holding_nominations(cluster, scheduler_name)
    ctx = Context.of(cluster, restart_tiers)
    resolved = resolve_placements(ctx.index, placements, scheduler_name, violations)
    states = ctx.index.states(resolved)
    topology = topology_state(cluster, ctx.index.running_list, resolved)
    # Gang members are all-or-nothing: one fitting alone proves nothing about the whole gang.
    # So are pods held in one topology domain with their group (placer.validate.groups).
    left = [
        p for p in ctx.index.batch(scheduler_name) if p.key not in placements and not p.gang and not p.group_domains
    ]
    free = FreeRoom(states, [*left, *(pod for pod, _ in resolved)])
    violations += eligibility_violations(ctx, resolved)
    violations += node_violations(states)
    violations += topology.lines()
    violations += relaxed_violations(ctx, states, topology, free)
    violations += gang_rule_violations(cluster, placements, scheduler_name, ctx.index)
    violations += domain_violations(cluster, placements)
    violations += left_out_violations(ctx, states, left, topology, free)
    return violations
