"""kube-scheduler 1.37's pod group cycle, simulated (gates GenericWorkload and
TopologyAwareWorkloadScheduling on).

A Workload API gang, or a PodGroup with a topology key, is scheduled as one unit when the queue
reaches its first pod (kube-scheduler queues the group, not its pods):

1. Candidate placements (TopologyPlacementGenerator): one per value of the group's topology key
   among the nodes carrying it, only the domain of its members already running if any; without
   a key, one placement of every node.
2. Each placement is tried on its own: the group's pending pods, in queue order, each filtered and
   scored as a lone pod would be, restricted to the placement's nodes, each placed one counting
   for the next (then the trial is undone). A placement is feasible when running plus placed
   members reach the gang's ``minCount`` (GangScheduling's PlacementFeasible), or for a group
   without a gang when any pod is placed. PodGroups without a key of their own below a composite
   with one are tried together in the composite's domains, each gang held to its own minCount: a
   gang short of it places nothing and the others are tried again without it (members are tried
   highest priority first, so a gang's pods never count for another's minCount).
3. Feasible placements are scored (each plugin weight 1): NodeResourcesFit's placement score,
   MostAllocated over the placement's nodes taken together (cpu and memory, the group's requests
   added to what the nodes hold), plus PodGroupPodsCount (running and proposed members,
   normalised to 100 by the best placement). The best total wins; kube-scheduler breaks ties at
   random, the simulation by domain name.
4. The winner's pods are placed; without a feasible placement none is (Unschedulable).

A CompositePodGroup with a gang policy (``minGroupCount``, gate ``CompositePodGroup``) is scheduled
as one unit with every group below it (kube-scheduler queues the root of the tree): each child
group as above, in queue order, one counting for the next; then GangScheduling's
PlacementFeasible for the composite: unless ``minGroupCount`` child groups are placed (or run
already), none of its pods is. A composite's own topology key is not followed (each PodGroup
keeps to its own key), and a group does not preempt in the simulation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from placer.models import GangWait, Node, Pod, QuorumWait, Reason

if TYPE_CHECKING:
    from placer.baseline.simulate import _Run

__all__ = ["group_of", "schedule_group", "weighed"]

MAX = 100


def group_of(pod: Pod) -> str | None:
    """The pod group kube-scheduler 1.37 schedules ``pod`` with (None: the pod alone): the
    outermost composite gang above it, else its own group."""
    if pod.group_quorums:
        return pod.group_quorums[-1].group
    return _own_group(pod)


def _own_group(pod: Pod) -> str | None:
    """The PodGroup of ``pod`` as a unit of its own (None: the pod alone)."""
    if pod.group_domains:
        return pod.group_domains[0].group
    if pod.gang_object == "workload" and pod.gang_key is not None:
        return pod.gang_key
    return None


def _placements(run: _Run, members: Sequence[Pod]) -> list[tuple[str, npt.NDArray[np.bool_]]]:
    snap = run.snap
    if not members[0].group_domains:
        return [("", np.ones(len(snap.nodes), dtype=np.bool_))]
    level = members[0].group_domains[0]
    values = [n.labels.get(level.key) for n in snap.nodes]
    held: set[str] = set()
    for n, pods in enumerate(snap.running):
        value = values[n]
        if value is not None and any(level in p.group_domains for p in pods):
            held.add(value)
    domains = sorted(held) if held else sorted({v for v in values if v is not None})
    return [(d, np.array([v == d for v in values], dtype=np.bool_)) for d in domains]


def _running(run: _Run, members: Sequence[Pod]) -> int:
    gid = _own_group(members[0])
    return sum(1 for pods in run.snap.running for p in pods if p.running and _own_group(p) == gid)


def _try(run: _Run, members: Sequence[Pod], mask: npt.NDArray[np.bool_]) -> list[tuple[Pod, int]]:
    """Each member where a lone pod would go inside ``mask``, one after the other; undone after."""
    placed: list[tuple[Pod, int]] = []
    try:
        for pod in members:
            run.check_time()  # a deadline reached here unwinds the trial too (``finally``)
            filters = run._filters(pod)
            nodes = np.flatnonzero(filters.ok() & mask)
            if len(nodes):
                node = run._best(pod, filters, nodes)
                run._place(pod, node)
                placed.append((pod, node))
    finally:
        for pod, node in reversed(placed):
            run._unplace(pod, node)
    return placed


def _fit_score(run: _Run, mask: npt.NDArray[np.bool_], placed: list[tuple[Pod, int]]) -> int:
    """NodeResourcesFit's placement score: MostAllocated over the placement's nodes together."""
    requested = run.nonzero[mask].sum(axis=0) + sum(
        (np.array([p.score_cpu, p.score_memory], dtype=np.int64) for p, _ in placed), np.zeros(2, dtype=np.int64)
    )
    capacity = run.alloc_cm[mask].sum(axis=0)
    per = [int(r) * MAX // int(c) if c > 0 and r <= c else 0 for r, c in zip(requested, capacity, strict=True)]
    return sum(per) // len(per)


def schedule_group(run: _Run, members: Sequence[Pod]) -> None:
    """Schedule the pending ``members`` of one pod group (queue order) as kube-scheduler 1.37 does."""
    if members[0].group_quorums:
        _schedule_composite(run, members)
    else:
        _schedule_one(run, members)


def _schedule_composite(run: _Run, members: Sequence[Pod]) -> None:
    """The groups below one composite gang, each in turn; then every composite of the tree that
    got fewer than ``minGroupCount`` child groups (placed now or running) places nothing."""
    start, reported = len(run.placements), len(run.unplaced)
    children: dict[str, list[Pod]] = {}
    for pod in members:
        children.setdefault(_own_group(pod) or pod.key, []).append(pod)
    for child in children.values():
        _schedule_one(run, child)
    placed = run.placements[start:]
    where = {pod.key for pod, _ in placed}
    running: dict[str, set[str]] = {}
    for pods in run.snap.running:
        for p in pods:
            if p.running and p.key not in where:
                for q in p.group_quorums:
                    running.setdefault(q.group, set()).add(q.child)
    short: dict[str, QuorumWait] = {}
    changed = True
    while changed:  # a composite left short takes its children's pods away: its parent may be short too
        changed = False
        got: dict[str, set[str]] = {}
        present: dict[str, set[str]] = {}
        for pod in members:
            for q in pod.group_quorums:
                present.setdefault(q.group, set()).add(q.child)
                if pod.key in where:
                    got.setdefault(q.group, set()).add(q.child)
        for pod in members:
            for q in pod.group_quorums:
                done = got.get(q.group, set()) | running.get(q.group, set())
                if q.group in got and q.group not in short and len(done) < q.min_groups:
                    every = present[q.group] | running.get(q.group, set())
                    short[q.group] = QuorumWait(group=q.group, min_groups=q.min_groups, children=len(every))
                    changed = True
        where -= {p.key for p in members if any(q.group in short for q in p.group_quorums)}
    if not short:
        return
    for pod, node in reversed(placed):
        run._unplace(pod, node)
    for pod, node in placed:
        if pod.key in where:
            run._place(pod, node)
    wait = {p.key: next(short[q.group] for q in p.group_quorums if q.group in short) for p in members
            if any(q.group in short for q in p.group_quorums)}  # fmt: skip
    run.unplaced[reported:] = [u for u in run.unplaced[reported:] if u[0].key not in wait]
    n = len(run.snap.nodes)
    run.unplaced += [(p, "Unschedulable", Reason(nodes=n, quorum=wait[p.key])) for p in members if p.key in wait]


def _gangs(run: _Run, members: Sequence[Pod]) -> dict[str, tuple[int, int]]:
    """Each gang among ``members`` (a unit may hold several PodGroups: those without a key of
    their own below a composite with one): its minCount and its members already running."""
    sizes = {p.gang_key: p.gang_size for p in members if p.gang_key is not None and p.gang_size}
    running = dict.fromkeys(sizes, 0)
    for pods in run.snap.running:
        for p in pods:
            if p.running and p.gang_key in running:
                running[p.gang_key] += 1
    return {g: (size, running[g]) for g, size in sizes.items()}


def _trial(
    run: _Run, members: Sequence[Pod], mask: npt.NDArray[np.bool_], gangs: dict[str, tuple[int, int]]
) -> tuple[list[tuple[Pod, int]], bool]:
    """The members placed inside ``mask`` with every gang among them at its own minCount
    (GangScheduling's PlacementFeasible is each PodGroup's): a gang short of it places none of its
    pods, and the others are tried again without it. Feasible when a pod is placed, or a gang
    among them is at its minCount with the members already running."""
    short: set[str] = set()
    while True:
        tried = [p for p in members if p.gang_key not in short]
        placed = _try(run, tried, mask) if tried else []
        got: dict[str, int] = {}
        for pod, _ in placed:
            if pod.gang_key is not None:
                got[pod.gang_key] = got.get(pod.gang_key, 0) + 1
        now = {g for g, (size, running) in gangs.items() if g not in short and running + got.get(g, 0) < size}
        if not now:
            return placed, bool(placed) or len(short) < len(gangs)
        short |= now


def _schedule_one(run: _Run, members: Sequence[Pod]) -> None:
    """One PodGroup (or a lone gang) as its own unit."""
    running = _running(run, members)
    gangs = _gangs(run, members)
    trials = []
    for name, mask in _placements(run, members):
        placed, feasible = _trial(run, members, mask, gangs)
        if feasible:
            trials.append((name, mask, placed))
    if not trials:
        gid = _own_group(members[0]) or ""
        size = members[0].gang_size or len(members)
        key = members[0].group_domains[0].key if members[0].group_domains else None
        reason = Reason(nodes=len(run.snap.nodes), gang=GangWait(gang=gid, size=size, pending=size, domain=key))
        run.unplaced += [(pod, "Unschedulable", reason) for pod in members]
        return
    counts = [running + len(placed) for _, _, placed in trials]
    top = max(counts)
    scored = [
        (_fit_score(run, mask, placed) + count * MAX // top, name, placed)
        for (name, mask, placed), count in zip(trials, counts, strict=True)
    ]
    _, _, best = min(scored, key=lambda s: (-s[0], s[1]))
    for pod, node in best:
        run._place(pod, node)
    left = {p.key for p, _ in best}
    for pod in members:
        if pod.key not in left:
            run.unplaced.append((pod, "Unschedulable", run._filters(pod).diagnose()[0]))


def weighed(pods: Sequence[Pod], nodes: Sequence[Node]) -> int:
    """How many times the simulation weighs a pod against the nodes: once per pod, and for a pod
    of a group with a topology key once per candidate placement (each domain of the key), which
    is what its time grows with."""
    domains: dict[str, int] = {}
    total = 0
    for pod in pods:
        if not pod.group_domains:
            total += 1
            continue
        key = pod.group_domains[0].key
        if key not in domains:
            domains[key] = len({n.labels[key] for n in nodes if key in n.labels})
        total += max(domains[key], 1)
    return total
