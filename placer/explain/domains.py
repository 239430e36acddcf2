"""What each topology domain lacked for a pending workload group (Kubernetes 1.37
``schedulingConstraints.topology``): per level of the pod's group (its PodGroup, then composite
parents) and per domain of the level's node label, the filters that turned its nodes away
(``Prefilter.diagnose`` on the domain's nodes, kube-scheduler's order), how many of the group's
pending members fit there in the answer's final state, and the resources whose total fell short.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from placer.engine import NodeLabels, Prefilter, Snapshot, pod_vector
from placer.explain.answer import Answer
from placer.explain.stories import DomainTry
from placer.models import GroupDomain, Pod

__all__ = ["domain_tries"]


def domain_tries(answer: Answer, pod: Pod) -> list[DomainTry]:
    """Every domain of every level of ``pod``'s group, for its pending members (none placed)."""
    out: list[DomainTry] = []
    for level in pod.group_domains:
        members = [
            p
            for p in answer.pending
            if p.key not in answer.placed and any(d.group == level.group for d in p.group_domains)
        ]
        if members:
            out += _level(answer.after, level, members)
    return out


def _level(after: Snapshot, level: GroupDomain, members: Sequence[Pod]) -> list[DomainTry]:
    values = [node.labels.get(level.key) for node in after.nodes]
    running = {
        values[n]
        for n, pods in enumerate(after.running)
        for p in pods
        if any(d.group == level.group for d in p.group_domains)
    } - {None}
    out = []
    for value in sorted({v for v in values if v is not None}):
        where = [n for n, v in enumerate(values) if v == value]
        out.append(_domain(_view(after, where), level, value, members, bool(running) and value not in running))
    return out


def _view(state: Snapshot, where: Sequence[int]) -> Snapshot:
    """The state restricted to the nodes ``where`` (one domain)."""
    at = np.array(where, dtype=np.int64)
    nodes = tuple(state.nodes[n] for n in where)
    return Snapshot(
        nodes=nodes,
        resources=state.resources,
        alloc=state.alloc[at],
        used=state.used[at].copy(),
        labels=NodeLabels(nodes),
        index={node.name: i for i, node in enumerate(nodes)},
        ports={i: list(state.ports[n]) for i, n in enumerate(where) if n in state.ports},
        running=[list(state.running[n]) for n in where],
        namespaces=state.namespaces,
    )


def _domain(view: Snapshot, level: GroupDomain, value: str, members: Sequence[Pod], pinned: bool) -> DomainTry:
    prefilter = Prefilter(view)
    free = view.free.copy()
    vectors = [pod_vector(p, view.resources) for p in members]
    allowed = [prefilter.masks(p).allowed for p in members]
    passing = np.zeros(len(view.nodes), dtype=np.bool_)
    for mask in allowed:
        passing |= mask
    room_for = 0
    for i in sorted(range(len(members)), key=lambda i: -int(vectors[i].sum())):  # first fit, largest first
        vec = vectors[i]
        fit = np.flatnonzero(allowed[i] & np.all(free >= vec, axis=1))
        if len(fit):
            free[fit[0]] -= vec
            room_for += 1
    needs = np.sum(vectors, axis=0)
    has = view.free[passing].sum(axis=0)
    short = [j for j, r in enumerate(view.resources) if needs[j] > has[j]]
    return DomainTry(
        group=level.group,
        key=level.key,
        domain=value,
        nodes=len(view.nodes),
        allowed=int(passing.sum()),
        members=len(members),
        room_for=room_for,
        pinned_elsewhere=pinned,
        needs={view.resources[j]: int(needs[j]) for j in short},
        free={view.resources[j]: int(has[j]) for j in short},
        filters=prefilter.diagnose(members[0]),
    )
