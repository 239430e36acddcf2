"""Why no node takes a pod, counted as kube-scheduler counts it: per node, the first filter that
fails. One tally for placer's diagnosis (``Prefilter.diagnose``) and the kube-scheduler simulation.

Callers run the filters in kube-scheduler's order (cordon, taints, node affinity, ports, resources,
volumes, topology spread, inter-pod affinity); the result is data (``placer.models.Reason``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from placer.engine.labels import BoolArray
from placer.models import Filter, Insufficient, NodeFilter, PlainFilter, Reason, Rejected, Taint, Untolerated

__all__ = ["Tally"]


class Tally:
    """Nodes not yet explained (``left``) and, per filter in the order first charged, the nodes it
    explained."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.left = np.ones(n, dtype=np.bool_)
        self._entries: dict[object, NodeFilter] = {}

    def _charge(self, key: object, entry: NodeFilter) -> None:
        known = self._entries.get(key)
        if known is not None:
            entry = known.model_copy(update={"nodes": known.nodes + entry.nodes})
        self._entries[key] = entry

    def take(self, failing: BoolArray, what: PlainFilter | Taint) -> BoolArray:
        """Charge ``what`` (a filter, or the untolerated taint) with the nodes it fails that no
        earlier filter failed; returns those nodes."""
        hit = self.left & failing
        if hit.any():
            count = int(hit.sum())
            entry: NodeFilter = (
                Untolerated(taint=what, nodes=count) if isinstance(what, Taint) else Rejected(filter=what, nodes=count)
            )
            self._charge(what, entry)
            self.left[hit] = False
        return hit

    def resources(self, free: npt.NDArray[np.int64], vec: npt.NDArray[np.int64], names: Sequence[str]) -> BoolArray:
        """NodeResourcesFit: one entry per insufficient resource (a node may count for several),
        with what the pod requests and the most any node still in the running has free; returns
        the nodes short of anything."""
        short_any = np.zeros(self.n, dtype=np.bool_)
        for j, name in enumerate(names):
            if vec[j] > 0:
                short = self.left & (free[:, j] < vec[j])
                if short.any():
                    most = int(free[self.left, j].max())
                    entry = Insufficient(resource=name, nodes=int(short.sum()), requested=int(vec[j]), most_free=most)
                    self._charge((Filter.RESOURCES, name), entry)
                    short_any |= short
        self.left &= ~short_any
        return short_any

    def reason(self) -> Reason:
        return Reason(nodes=self.n, filters=tuple(self._entries.values()))
