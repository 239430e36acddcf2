"""Why pods stay unplaced: one diagnosis, for a batch's answer and for the state after a plan.

Codes: ``Unsupported`` (a constraint placer does not honour), ``Invalid`` (a field of the pod placer
cannot read), ``NotSolved`` (a node could take the
pod in the final state: the solver stopped before deciding it), ``Outranked`` (a node had room for
it before the batch, and the answer filled that room with pods of a higher key, or of its own key,
which were placed first: of equal keys placer maximises how many run, not which), ``Unschedulable`` (no
node could take it even before the batch). The reason is data
(``placer.models.Reason``), rendered at the edge.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from placer.engine.batch import Batch, incomplete_gangs
from placer.engine.prefilter import Prefilter, diagnosis_signature, fits
from placer.engine.snapshot import Snapshot
from placer.engine.topology import TopologyState
from placer.models import GangWait, Pod, QuorumWait, Reason, SolveStatus, UnplacedCode

__all__ = ["Counts", "Unplaced", "after_plan", "extract", "refused"]

Counts = dict[tuple[int, int], int]  # (group, node) -> pods of the group placed there
Unplaced = tuple[Pod, UnplacedCode, Reason]


def extract(batch: Batch, counts: Counts, status: SolveStatus) -> tuple[list[tuple[Pod, int]], list[Unplaced]]:
    """The placements of an answer, and every pod it leaves unplaced with its code and reason."""
    per_group: dict[int, list[int]] = {}
    for (gi, n), c in sorted(counts.items()):
        per_group.setdefault(gi, []).extend([n] * c)
    final = batch.snapshot.copy()  # the room and host ports the answer leaves (what diagnoses read)
    placements: list[tuple[Pod, int]] = []
    placed_nodes_by_rank: dict[int, set[int]] = {}
    for gi, group in enumerate(batch.groups):
        nodes = per_group.get(gi, [])[: group.size]
        if not nodes:
            continue
        placements += zip(group.pods, nodes, strict=False)
        np.add.at(final.used, nodes, group.vec)  # a group's pods share its request vector
        if group.has_ports:
            for pod, n in zip(group.pods, nodes, strict=False):
                final.ports.setdefault(n, []).extend(pod.host_ports)
        placed_nodes_by_rank.setdefault(batch.rank(group), set()).update(nodes)
    unplaced: list[Unplaced] = []
    after: Prefilter | None = None
    waiting = incomplete_gangs([p for g in batch.groups for p in g.pods], batch.snapshot)
    topo: TopologyState | None = None
    if not batch.topology.empty:
        topo = TopologyState(batch.topology, [g.size for g in batch.groups])
        for (gi, n), c in counts.items():
            if c:
                topo.add(gi, n, c)
    everywhere = np.arange(len(batch.snapshot.nodes), dtype=np.int64)
    n_nodes = len(batch.snapshot.nodes)
    unmet = _unmet_quorums(batch, per_group)
    gang_size: dict[str, int] = {}
    for group in batch.groups:
        if group.gang is not None:
            gang_size[group.gang] = gang_size.get(group.gang, 0) + group.size
    # Groups of pods alike but for their gang (hundreds of small gangs) share one diagnosis, and
    # groups of one request vector where it fits in the final state.
    diagnosed: dict[tuple[object, ...], Reason] = {}
    fitting: dict[bytes, npt.NDArray[np.bool_]] = {}
    for gi, group in enumerate(batch.groups):
        rest = group.pods[len(per_group.get(gi, [])) :]
        if not rest:
            continue
        after = after or Prefilter(final)
        rank = batch.rank(group)
        # Nodes pods of a higher key, or of the same key (placed first), went to.
        taken = set().union(*(nodes for r, nodes in placed_nodes_by_rank.items() if r >= rank))
        # A group's pods are interchangeable to the model, so they share one diagnosis (a
        # 5,000-pod gang left out is diagnosed once, not 5,000 times).
        shared: tuple[UnplacedCode, Reason] | None = None
        for pod in rest:
            if pod.unsupported:
                unplaced.append(refused(pod, n_nodes))
                continue
            if group.gang in waiting:
                unplaced.append((pod, "Unschedulable", Reason(nodes=n_nodes, gang=waiting[group.gang])))
                continue
            if shared is not None:
                unplaced.append((pod, *shared))
                continue
            checks = topo.checks(gi, everywhere) if topo is not None else []
            if checks:
                reason = after.diagnose(pod, later=checks)
            else:
                like = diagnosis_signature(pod)
                if like not in diagnosed:
                    diagnosed[like] = after.diagnose(pod)
                reason = diagnosed[like]
            if group.gang is not None:
                size = gang_size[group.gang]
                domain = pod.group_domains[0].key if pod.group_domains else None
                gang = GangWait(gang=group.gang, size=size, pending=size, domain=domain)
                reason = reason.model_copy(update={"gang": gang})
            if gi in unmet:
                reason = reason.model_copy(update={"quorum": unmet[gi]})
            vec = group.vec.tobytes()
            if vec not in fitting:
                fitting[vec] = fits(final, group.vec)
            fit = fitting[vec]
            fits_now = group.masks.allowed & after.ports_ok(pod) & fit
            for ok, _ in checks:
                fits_now &= ok
            code: UnplacedCode
            if fits_now.any() and group.gang is None and not pod.group_domains and gi not in unmet:
                code = "NotSolved"
                reason = reason.model_copy(update={"solver": status})
            elif taken & set(group.feasible[~fit[group.feasible]].tolist()):
                code = "Outranked"
            else:
                code = "Unschedulable"
            shared = (code, reason)
            unplaced.append((pod, code, reason))
    return placements, unplaced


def _unmet_quorums(batch: Batch, per_group: dict[int, list[int]]) -> dict[int, QuorumWait]:
    """Batch group -> a composite gang above it that the answer places nothing of."""
    out: dict[int, QuorumWait] = {}
    for q in batch.quorums:
        if any(per_group.get(gi) for gi in q.groups):
            continue
        wait = QuorumWait(group=q.name, min_groups=q.min_groups, children=q.present)
        for gi in q.groups:
            out.setdefault(gi, wait)
    return out


def after_plan(
    state: Snapshot, batch: Sequence[Pod], done: Sequence[tuple[Pod, int]], first: Sequence[Unplaced]
) -> list[Unplaced]:
    """Pods a plan leaves unplaced, diagnosed against the state after the plan (``state``, with
    ``done`` placed); codes carry over from the batch's first answer."""
    after = state.copy()
    for pod, node in done:
        after.add(pod, node)
    pre = Prefilter(after)
    placed = {pod.key for pod, _ in done}
    codes = {pod.key: code for pod, code, _ in first}
    out: list[Unplaced] = []
    for pod in batch:
        if pod.key in placed:
            continue
        code = codes.get(pod.key, "Unschedulable")
        if code in ("Unsupported", "Invalid"):
            out.append(refused(pod, len(state.nodes)))
            continue
        # The plan decided every pod it could (NotSolved does not carry over); Outranked does.
        out.append((pod, "Outranked" if code == "Outranked" else "Unschedulable", pre.diagnose(pod)))
    return out


def refused(pod: Pod, nodes: int) -> Unplaced:
    """A pod the engine refuses to place (``Pod.unsupported``): Invalid when placer cannot read
    one of its fields, Unsupported when it asks for a constraint placer does not honour."""
    if pod.invalid:
        return pod, "Invalid", Reason(nodes=nodes, invalid=pod.unsupported or "")
    return pod, "Unsupported", Reason(nodes=nodes, unsupported=pod.unsupported or "")
