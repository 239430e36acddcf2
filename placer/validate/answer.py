"""A global plan's answer resolved against the cluster: its pending placements, valid evictions and
replacements (``Plan``), and the rules that tie them together.

- every pending placement names one pod, placed once; every move has exactly one replacement
  placement, on the node the move names, and a replacement names no pod;
- an eviction names a running pod on its node, once; its preemptor (named in the eviction's
  ``for``) is a pending pod placed on the victim's node (any node the group leaves, for a group
  with ``disruptionMode: all``) that may preempt it (``placer.validate.evictions``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from placer.models import (
    Cluster,
    Eviction,
    Placement,
    Pod,
    Step,
)
from placer.validate.evictions import eviction_refusal, may_preempt, move_refusal, opt_out
from placer.validate.placements import Context, resolve_placements
from placer.validate.priorities import Key, pod_key
from placer.validate.violations import Violation, texts

# --- plans: the answer resolved against the cluster -----------------------------------------


def _stand_in(victim: Pod) -> Pod:
    """The replacement of a moved pod: the victim's spec, a pod of its own."""
    return victim.model_copy(update={"name": f"{victim.name}~replacement", "node_name": None, "phase": "Pending"})


@dataclass
class Plan:
    ctx: Context
    scheduler_name: str
    jobs: bool = False  # a rebalancing plan: opted-in Jobs' pods may move
    victims: dict[str, tuple[Pod, Eviction]] = field(default_factory=dict)  # valid evictions
    pending: dict[str, tuple[Pod, str]] = field(default_factory=dict)  # pod key -> (pod, node)
    replacements: dict[str, tuple[Pod, Pod, str]] = field(default_factory=dict)  # victim -> (victim, stand-in, node)

    def key(self, pod: Pod) -> Key:
        return pod_key(pod, restart_tiers=self.ctx.restart_tiers)

    def preempted(self) -> dict[str, Pod]:
        return {k: pod for k, (pod, e) in self.victims.items() if e.kind == "preempt"}

    def bind_spec(self, step: Step) -> tuple[Pod, Pod] | None:
        """(the pod whose spec the bind places, the pod carrying that spec) or None if unknown."""
        if step.replaces is not None:
            entry = self.replacements.get(step.replaces)
            return (entry[1], entry[0]) if entry else None
        placed = self.pending.get(step.pod or "")
        return (placed[0], placed[0]) if placed else None


def resolve_plan_placements(
    plan: Plan, cluster: Cluster, placements: Sequence[Placement], out: list[str]
) -> list[Placement]:
    """Pending placements into ``plan.pending``; replacement placements returned for later."""
    pending: dict[str, str] = {}
    replacements: list[Placement] = []
    for p in placements:
        if p.kind == "replacement":
            if p.pod is not None:
                out.append(f"replacement placement on {p.node} names a pod ({p.pod}); replacements have none yet")
            replacements.append(p)
        elif p.pod is None:
            out.append(f"pending placement on {p.node} names no pod")
        elif p.pod in pending:
            out.append(f"{p.pod}: placed twice ({pending[p.pod]} and {p.node})")
        else:
            pending[p.pod] = p.node
    unresolved: list[Violation] = []
    for pod, node_name in resolve_placements(plan.ctx.index, pending, plan.scheduler_name, unresolved):
        plan.pending[pod.key] = (pod, node_name)
    out += texts(unresolved)
    return replacements


def eviction_violations(plan: Plan, cluster: Cluster, evictions: Sequence[Eviction]) -> list[str]:
    """Who may be evicted, how (move or preempt) and for whom."""
    out: list[str] = []
    pods = plan.ctx.index.pods
    # A group with disruptionMode all is preempted as one unit: a preemptor on any of the nodes
    # its evicted pods leave frees room for it.
    unit_nodes: dict[str, set[str]] = {}
    for e in evictions:
        victim = pods.get(e.pod)
        if victim is not None and victim.disruption_unit is not None:
            unit_nodes.setdefault(victim.disruption_unit, set()).add(e.node)
    for e in evictions:
        what = f"eviction of {e.pod} ({e.kind})"
        pod = pods.get(e.pod)
        if e.pod in plan.victims:
            out.append(f"{what}: the pod is evicted twice")
            continue
        if pod is None or not pod.running:
            out.append(f"{what}: no such running pod in the cluster")
            continue
        if e.node not in plan.ctx.nodes:
            out.append(f"{what}: {e.node} is not a node of the cluster")
            continue
        if pod.node_name != e.node:
            out.append(f"{what}: the pod runs on {pod.node_name}, not on {e.node}")
            continue
        plan.victims[e.pod] = (pod, e)
        refusal = eviction_refusal(cluster, pod)
        if refusal:
            out.append(f"{what}: never evicted: {refusal}")
        nodes = unit_nodes[pod.disruption_unit] if pod.disruption_unit is not None else {e.node}
        for name in e.for_:
            placed = plan.pending.get(name)
            if placed is None or placed[1] not in nodes:
                out.append(f"{what}: it is for {name}, which the plan does not place on {e.node}")
        if e.kind == "move":
            refusal = move_refusal(cluster, pod, plan.scheduler_name, jobs=plan.jobs)
            if refusal:
                out.append(f"{what}: may not move: {refusal}")
            if e.to is None or e.to not in plan.ctx.nodes:
                out.append(f"{what}: moves to {e.to}, which is not a node of the cluster")
            continue
        if e.to is not None:
            out.append(f"{what}: a preemption does not move the pod, yet it names a destination ({e.to})")
        preemptors = [
            placed
            for placed, node_name in plan.pending.values()
            if node_name in nodes and may_preempt(placed, pod, restart_tiers=plan.ctx.restart_tiers)
        ]
        if not preemptors:
            out.append(
                f"{what}: no pending pod placed on {e.node} may preempt it (strictly higher key than "
                f"{plan.key(pod)} and preemptionPolicy not Never"
                + (f"; opted out: a priority above {pod.priority})" if opt_out(pod) else ")")
            )
        elif not {p.key for p in preemptors} & set(e.for_):
            names = ", ".join(sorted(p.key for p in preemptors))
            out.append(f"{what}: its 'for' list does not name its preemptor ({names})")
    return out


def replacement_violations(plan: Plan, replacements: Sequence[Placement]) -> list[str]:
    """Every move has exactly one replacement placement, on the node the move names."""
    out: list[str] = []
    for p in replacements:
        victim_key = p.replaces or ""
        entry = plan.victims.get(victim_key)
        if entry is None or entry[1].kind != "move":
            out.append(f"replacement of {p.replaces} on {p.node}: the plan does not move {p.replaces}")
            continue
        victim, eviction = entry
        if victim_key in plan.replacements:
            out.append(f"replacement of {victim_key}: placed twice")
            continue
        if p.node != eviction.to:
            out.append(f"replacement of {victim_key} placed on {p.node}, but the move sends it to {eviction.to}")
        if p.node not in plan.ctx.nodes:
            continue
        owner = victim.owner
        if p.owner is not None and owner is not None and p.owner != f"{owner.kind}/{victim.namespace}/{owner.name}":
            out.append(
                f"replacement of {victim_key}: owner {p.owner}, but the victim belongs to {owner.kind}/{owner.name}"
            )
        plan.replacements[victim_key] = (victim, _stand_in(victim), p.node)
    for victim_key, (_, eviction) in sorted(plan.victims.items()):
        if eviction.kind == "move" and victim_key not in plan.replacements and eviction.to in plan.ctx.nodes:
            out.append(f"move of {victim_key} to {eviction.to}: no replacement placement")
    return out
