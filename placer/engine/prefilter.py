"""Per-pod feasibility masks over all nodes, computed with numpy once per batch.

Filters, in kube-scheduler's order: NodeUnschedulable (cordon), TaintToleration, NodeAffinity
(nodeSelector + required affinity, with placer's weak-binding annotations), NodePorts, and
NodeResourcesFit. Capacity is checked separately (``fits``) because it changes as pods are placed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from placer.engine.labels import BoolArray
from placer.engine.snapshot import Snapshot, pod_vector
from placer.engine.taints import UNSCHEDULABLE_TAINT, first_untolerated, prefer_no_schedule_count
from placer.engine.tally import Tally
from placer.models import Filter, HostPort, PlainFilter, Pod, Reason

__all__ = [
    "NO_FIT",
    "NO_MATCH",
    "PodMasks",
    "Prefilter",
    "diagnosis_signature",
    "fits",
    "ports_conflict",
]

NO_MATCH = "placer.io/when-no-node-matches"
NO_FIT = "placer.io/when-no-node-fits"
Binding = Literal["strict", "dropped", "relaxed"]


@dataclass(frozen=True)
class PodMasks:
    """What a pod may do before capacity is considered.

    ``matching``: nodes whose labels satisfy the pod's selector/affinity. ``allowed``: nodes it
    may be placed on (cordon, taints, ports, and affinity unless weak binding dropped it).
    ``binding``: strict; dropped (no node matched and the pod said ignore-affinity); relaxed
    (the pod said ignore-affinity when matching nodes are full: non-matching nodes are allowed
    but the engine prefers matching ones).
    """

    allowed: BoolArray
    matching: BoolArray
    binding: Binding
    preference: npt.NDArray[np.int64]


def ports_conflict(a: HostPort, b: HostPort) -> bool:
    if a.port != b.port or a.protocol != b.protocol:
        return False
    return a.host_ip == b.host_ip or "0.0.0.0" in (a.host_ip, b.host_ip)


def ports_clash(mine: Iterable[HostPort], held: Iterable[HostPort]) -> bool:
    """Some port of ``mine`` conflicts with some port of ``held`` (``ports_conflict``)."""
    held = tuple(held)
    return any(ports_conflict(a, b) for a in mine for b in held)


def fits(snapshot: Snapshot, vec: npt.NDArray[np.int64], free: npt.NDArray[np.int64] | None = None) -> BoolArray:
    free = snapshot.free if free is None else free
    nz = np.flatnonzero(vec)
    return np.all(free[:, nz] >= vec[nz], axis=1)  # type: ignore[no-any-return]


def mask_signature(pod: Pod) -> tuple[object, ...]:
    """What a pod's masks (``Prefilter.masks``) read of it: pods alike here get the same masks."""
    return (
        tuple(sorted(pod.node_selector.items())),
        pod.required_terms,
        pod.preferred_terms,
        pod.tolerations,
        pod.host_ports,
        pod.annotations.get(NO_MATCH),
        pod.annotations.get(NO_FIT),
        pod.volume_terms,
        pod.volume_problem,
        pod.unsupported,
    )


def diagnosis_signature(pod: Pod) -> tuple[object, ...]:
    """What ``Prefilter.diagnose`` reads of a pod (its masks' fields and its requests): pods alike
    here get the same diagnosis on the same state and topology filters."""
    return mask_signature(pod), tuple(sorted(pod.requests.items()))


class Prefilter:
    """Masks for the pods of one batch; identical constraint signatures are computed once."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        taint_sets: dict[tuple[object, ...], int] = {}
        self._taint_of_node = np.zeros(len(snapshot.nodes), dtype=np.int32)
        self._taint_sets: list[tuple[object, ...]] = []
        for i, node in enumerate(snapshot.nodes):
            taints = tuple(node.taints) + ((UNSCHEDULABLE_TAINT,) if node.unschedulable else ())
            idx = taint_sets.setdefault(taints, len(taint_sets))
            if idx == len(self._taint_sets):
                self._taint_sets.append(taints)
            self._taint_of_node[i] = idx
        self._unschedulable = np.array([n.unschedulable for n in snapshot.nodes], dtype=np.bool_)
        self._cache: dict[tuple[object, ...], PodMasks] = {}

    def taint_ok(self, pod: Pod) -> BoolArray:
        ok = np.array(
            [first_untolerated(ts, pod.tolerations) is None for ts in self._taint_sets],  # type: ignore[arg-type]
            dtype=np.bool_,
        )
        return ok[self._taint_of_node]

    def prefer_penalty(self, pod: Pod) -> npt.NDArray[np.int64]:
        counts = np.array(
            [prefer_no_schedule_count(ts, pod.tolerations) for ts in self._taint_sets],  # type: ignore[arg-type]
            dtype=np.int64,
        )
        return counts[self._taint_of_node]

    def ports_ok(self, pod: Pod) -> BoolArray:
        ok = np.ones(len(self.snapshot.nodes), dtype=np.bool_)
        if pod.host_ports:
            for node, used in self.snapshot.ports.items():
                if ports_clash(pod.host_ports, used):
                    ok[node] = False
        return ok

    def matching(self, pod: Pod) -> BoolArray:
        return self.snapshot.labels.selector(pod.node_selector, pod.required_terms)

    def volumes_ok(self, pod: Pod) -> BoolArray:
        """Nodes every bound PersistentVolume of the pod may be used from (its node affinity)."""
        ok = np.ones(len(self.snapshot.nodes), dtype=np.bool_)
        for terms in pod.volume_terms:
            ok &= self.snapshot.labels.selector({}, terms)
        return ok

    def masks(self, pod: Pod) -> PodMasks:
        signature = mask_signature(pod)
        cached = self._cache.get(signature)
        if cached is None:
            cached = self._compute(pod)
            self._cache[signature] = cached
        return cached

    def _compute(self, pod: Pod) -> PodMasks:
        n = len(self.snapshot.nodes)
        matching = self.matching(pod)
        # A PersistentVolume's node affinity is hard: weak binding never drops it.
        base = self.taint_ok(pod) & self.ports_ok(pod) & self.volumes_ok(pod)
        binding: Binding = "strict"
        if not matching.any() and pod.annotations.get(NO_MATCH) == "ignore-affinity":
            binding = "dropped"
        elif pod.annotations.get(NO_FIT) == "ignore-affinity" and matching.any():
            binding = "relaxed"
        allowed = base if binding != "strict" else base & matching
        if pod.unsupported or pod.volume_problem:
            allowed = np.zeros(n, dtype=np.bool_)
        preference = np.zeros(n, dtype=np.int64)
        for term in pod.preferred_terms:
            preference += term.weight * self.snapshot.labels.term(term.preference)
        preference -= 100 * self.prefer_penalty(pod)
        return PodMasks(allowed=allowed, matching=matching, binding=binding, preference=preference)

    def diagnose(
        self,
        pod: Pod,
        free: npt.NDArray[np.int64] | None = None,
        later: Sequence[tuple[BoolArray, PlainFilter]] = (),
    ) -> Reason:
        """Why this pod fits no node of the snapshot, as kube-scheduler's filters see it.

        Per node, the first filter that fails (in kube-scheduler's order) counts; the resource
        filter counts every insufficient resource, and for each it records what the pod requests
        and the most any node passing the filters before it has free (``Tally``). Vectorised over
        nodes; ``later`` are the topology filters' allowed nodes, in their order.
        """
        snap = self.snapshot
        if pod.volume_problem:
            return Reason(nodes=len(snap.nodes), volumes=pod.volume_problem)
        free = snap.free if free is None else free
        masks = self.masks(pod)
        tally = Tally(len(snap.nodes))
        if first_untolerated((UNSCHEDULABLE_TAINT,), pod.tolerations) is not None:
            tally.take(self._unschedulable, Filter.UNSCHEDULABLE)
        for idx, taints in enumerate(self._taint_sets):
            own = tuple(t for t in taints if t != UNSCHEDULABLE_TAINT)
            taint = first_untolerated(own, pod.tolerations)  # type: ignore[arg-type]
            if taint is not None:
                tally.take(self._taint_of_node == idx, taint)
        if masks.binding == "strict":
            tally.take(~masks.matching, Filter.NODE_AFFINITY)
        if pod.host_ports:
            tally.take(~self.ports_ok(pod), Filter.PORTS)
        tally.resources(free, pod_vector(pod, snap.resources), snap.resources)
        if pod.volume_terms:
            tally.take(~self.volumes_ok(pod), Filter.VOLUME_AFFINITY)
        for ok, what in later:  # the filters after these (topology spread, inter-pod affinity)
            tally.take(~ok, what)
        return tally.reason()
