"""The steps of a global plan: references, order, and room at every bind.

- ``after`` names earlier steps; every eviction has one evict and one await-gone (after the
  evict), every placement one bind on its node and every bind a placement; a replacement's bind
  waits (transitively) for its victim's await-gone;
- simulated from the running pods, an evicted pod holds its room until its await-gone, and every
  bind respects cordon, taints, labels, host ports and capacity at the moment it runs, both in the
  listed order and in the order that binds as early and frees room as late as ``after`` allows.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from placer.models import (
    Cluster,
    Effect,
    Node,
    Pod,
    Step,
)
from placer.validate.answer import Plan
from placer.validate.eligibility import eligibility_problems
from placer.validate.semantics import demand, ports_clash, shortages

# --- plans: the steps ---------------------------------------------------------------------------


@dataclass
class _Room:
    """A node while the plan runs: the pods on it (evicted ones hold their room until gone)."""

    node: Node
    pods: dict[str, Pod] = field(default_factory=dict)
    used: dict[str, int] = field(default_factory=dict)

    def add(self, pod: Pod) -> None:
        self.pods[pod.key] = pod
        for r, v in demand(pod).items():
            self.used[r] = self.used.get(r, 0) + v

    def drop(self, key: str) -> None:
        pod = self.pods.pop(key, None)
        if pod is not None:
            for r, v in demand(pod).items():
                self.used[r] -= v

    def problems(self, pod: Pod) -> list[str]:
        """Why the pod does not fit here at this moment: capacity on what it requests, host ports."""
        return shortages(self.node, self.used, pod) + [
            f"host port {mine.protocol}/{mine.port} held by {other.key}"
            for mine in pod.host_ports
            for other in self.pods.values()
            if other.key != pod.key
            for theirs in other.host_ports
            if ports_clash(mine, theirs)
        ]


# Worst order the dependencies allow: binds as early as possible, room freed as late as possible.
_EAGER = {Effect.BIND: 0, Effect.MARK: 1, Effect.EVICT: 2, Effect.AWAIT_GONE: 3}


def _order(steps: Sequence[Step], edges: Mapping[int, Sequence[int]], rank: Mapping[int, tuple[int, int]]) -> list[int]:
    """A topological order of the step ids (Kahn), taking the lowest ``rank`` among ready steps;
    shorter than ``steps`` when the dependencies have a cycle."""
    waiting = {s.id: len(edges[s.id]) for s in steps}
    then: dict[int, list[int]] = {s.id: [] for s in steps}
    for sid, before in edges.items():
        for b in before:
            then[b].append(sid)
    ready = [(rank[sid], sid) for sid, n in waiting.items() if n == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        _, sid = heapq.heappop(ready)
        order.append(sid)
        for nxt in then[sid]:
            waiting[nxt] -= 1
            if waiting[nxt] == 0:
                heapq.heappush(ready, (rank[nxt], nxt))
    return order


def _simulate(plan: Plan, cluster: Cluster, steps: Mapping[int, Step], order: Sequence[int]) -> dict[int, list[str]]:
    """Run the steps in ``order`` from the running pods; what each bind lacks when it runs (only
    the nodes the steps name change, so only theirs are simulated)."""
    index = plan.ctx.index
    rooms = {name: _Room(index.nodes[name]) for name in {st.node for st in steps.values()} if name in index.nodes}
    for name, room in rooms.items():
        for pod in index.running[name]:
            room.add(pod)
    evicted: set[str] = set()
    out: dict[int, list[str]] = {}
    for sid in order:
        st = steps[sid]
        if st.node not in rooms:
            continue
        effect = st.kind.effect
        if effect == Effect.EVICT and st.pod is not None:
            evicted.add(st.pod)
        elif effect == Effect.AWAIT_GONE and st.pod is not None:
            entry = plan.victims.get(st.pod)
            if st.pod in evicted and entry is not None and entry[0].node_name == st.node:
                rooms[st.node].drop(st.pod)
        elif effect == Effect.BIND:
            spec = plan.bind_spec(st)
            if spec is None:
                continue
            problems = rooms[st.node].problems(spec[0])
            if problems:
                out[sid] = problems
            rooms[st.node].add(spec[0])
    return out


def _ancestors(edges: Mapping[int, Sequence[int]], order: Sequence[int]) -> dict[int, set[int]]:
    """Every step's transitive predecessors (``order`` topological)."""
    out: dict[int, set[int]] = {}
    for sid in order:
        acc: set[int] = set()
        for b in edges[sid]:
            acc.add(b)
            acc |= out[b]
        out[sid] = acc
    return out


def step_violations(plan: Plan, cluster: Cluster, steps: Sequence[Step]) -> list[str]:
    out: list[str] = []
    by_id: dict[int, Step] = {}
    for st in steps:
        if st.id in by_id:
            out.append(f"step id {st.id} is used twice")
        else:
            by_id[st.id] = st
    unique = list(by_id.values())
    position = {st.id: i for i, st in enumerate(unique)}
    edges: dict[int, list[int]] = {}
    for st in unique:
        edges[st.id] = []
        for a in st.after:
            if a not in by_id:
                out.append(f"step {st.id} ({st.op} {st.subject}) waits on step {a}, which does not exist")
            elif position[a] >= position[st.id]:
                out.append(f"step {st.id} ({st.op} {st.subject}) waits on step {a}, which comes later in the list")
                edges[st.id].append(a)
            else:
                edges[st.id].append(a)
    listed = _order(unique, edges, {sid: (position[sid], 0) for sid in position})
    if len(listed) < len(unique):
        stuck = sorted(set(position) - set(listed))
        out.append(f"the steps' dependencies have a cycle (steps {', '.join(map(str, stuck))} can never run)")
        return out
    out += _reference_violations(plan, unique, edges, listed)
    # Capacity and host ports at each bind: in the listed order, then in the order that binds as
    # early and frees room as late as ``after`` allows (any order ``after`` allows must work).
    eager = _order(unique, edges, {st.id: (_EAGER[st.kind.effect], position[st.id]) for st in unique})
    found = _simulate(plan, cluster, by_id, listed)
    for sid, problems in sorted(found.items()):
        st = by_id[sid]
        out.append(
            f"step {sid} (bind {st.subject} on {st.node}): the node lacks room at that step: {'; '.join(problems)}"
        )
    for sid, problems in sorted(_simulate(plan, cluster, by_id, eager).items()):
        if sid in found:
            continue
        st = by_id[sid]
        earlier = ", ".join(map(str, eager[: eager.index(sid)])) or "none"
        out.append(
            f"step {sid} (bind {st.subject} on {st.node}) does not wait for the room it needs: run as early as its "
            f"'after' allows (after steps: {earlier}), the node lacks room: {'; '.join(problems)}"
        )
    return out


def _reference_violations(
    plan: Plan, steps: Sequence[Step], edges: Mapping[int, Sequence[int]], order: Sequence[int]
) -> list[str]:
    """Steps and the plan's evictions and placements name each other one to one, on the same
    nodes; await-gone after its evict; a replacement's bind after its victim's await-gone."""
    out: list[str] = []
    ancestors = _ancestors(edges, order)
    seen: dict[tuple[Effect, str | None, str | None], list[Step]] = {}
    for st in steps:
        effect = st.kind.effect
        seen.setdefault((effect, st.pod, st.replaces), []).append(st)
        if effect in (Effect.EVICT, Effect.AWAIT_GONE):
            entry = plan.victims.get(st.pod or "")
            if entry is None or st.pod is None:
                out.append(f"step {st.id} ({st.op} {st.subject}): the plan has no valid eviction of {st.subject}")
            elif st.node != entry[1].node:
                out.append(f"step {st.id} ({st.op} {st.pod}) on {st.node}, but {st.pod} runs on {entry[1].node}")
            continue
        if effect != Effect.BIND:
            continue
        if st.replaces is not None:
            target = plan.replacements.get(st.replaces)
            where = target[2] if target else None
        else:
            placed = plan.pending.get(st.pod or "")
            where = placed[1] if placed else None
        if where is None:
            out.append(f"step {st.id} binds {st.subject}, which the plan does not place")
        elif where != st.node:
            out.append(f"step {st.id} binds {st.subject} on {st.node}, but the plan places it on {where}")
    for victim_key in sorted(plan.victims):
        evicts = seen.get((Effect.EVICT, victim_key, None), [])
        awaits = seen.get((Effect.AWAIT_GONE, victim_key, None), [])
        if len(evicts) != 1 or len(awaits) != 1:
            out.append(f"eviction of {victim_key}: {len(evicts)} evict and {len(awaits)} await-gone steps, not 1 and 1")
        for aw in awaits:
            if not any(ev.id in ancestors[aw.id] for ev in evicts):
                out.append(f"step {aw.id} (await-gone {victim_key}) does not wait for the eviction of {victim_key}")
    binds: list[tuple[str, str | None, str | None, str]] = [("pending", k, None, k) for k in plan.pending]
    binds += [("replacement", None, k, f"replacement of {k}") for k in plan.replacements]
    for kind, pod, replaces, name in sorted(binds, key=lambda b: (b[0], b[3])):
        found = seen.get((Effect.BIND, pod, replaces), [])
        if len(found) != 1:
            out.append(f"{kind} placement {name}: {len(found)} bind steps, not 1")
        if replaces is not None:
            gone = {aw.id for aw in seen.get((Effect.AWAIT_GONE, replaces, None), [])}
            for b in found:
                if not gone & ancestors[b.id]:
                    out.append(f"step {b.id} binds {name} before {replaces} is gone (no await-gone among its 'after')")
    return out


def bind_eligibility(plan: Plan, steps: Sequence[Step]) -> list[str]:
    """Cordon, taints and labels of every bind (a replacement carries its victim's spec)."""
    out: list[str] = []
    for st in steps:
        if st.kind.effect != Effect.BIND or st.node not in plan.ctx.nodes:
            continue
        spec = plan.bind_spec(st)
        if spec is None:
            continue
        for problem in eligibility_problems(spec[1], plan.ctx.nodes[st.node], plan.ctx.binding(spec[1])):
            out.append(f"step {st.id} (bind {st.subject} on {st.node}): {problem}")
    return out
