"""Load per node for rebalancing: by requests (always available) or by measured usage.

Usage (``metrics.k8s.io``) is averaged per pod over ``usageWindowSeconds`` so one spike moves
nothing. A pod with no sample newer than ``usageMaxAgeSeconds`` is read by its requests (and
named in ``fallbacks``), never as zero load. Whether a pod fits a landing node is decided by
requests elsewhere; this module only says how loaded nodes are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt

from placer.engine import Snapshot, pod_vector
from placer.models import Pod, PodUsage, RebalanceConfig, Usage

__all__ = ["Loads", "node_loads"]

FloatArray = npt.NDArray[np.float64]
Source = Literal["requests", "usage"]


@dataclass
class Loads:
    """Per node and weighted resource: allocatable and load, in scheduler units."""

    resources: tuple[str, ...]
    weights: FloatArray  # normalised to sum 1 over ``resources``
    alloc: FloatArray  # nodes x resources
    used: FloatArray  # nodes x resources
    pod_load: dict[str, FloatArray] = field(default_factory=dict)  # running pod key -> its load
    source: Source = "requests"
    fallbacks: tuple[str, ...] = ()  # pods read by requests although usage was asked for

    @property
    def util(self) -> FloatArray:
        """Utilisation (load / allocatable; 0 where a node has none of a resource)."""
        has = self.alloc > 0
        return np.where(has, self.used / np.where(has, self.alloc, 1.0), 0.0)

    def moved(self, moves: Sequence[tuple[str, int, int]]) -> Loads:
        """The loads after moving pods (key, from node, to node); a moved pod keeps its load."""
        used = self.used.copy()
        for key, source, target in moves:
            load = self.pod_load[key]
            used[source] -= load
            used[target] += load
        return Loads(self.resources, self.weights, self.alloc, used, self.pod_load, self.source, self.fallbacks)

    def spread(self) -> float:
        """std_score over these loads: the population standard deviation of each node's weighted
        mean utilisation (nodes with allocatable only). What rebalancing lowers."""
        rows = (self.alloc > 0).any(axis=1)
        if not rows.any():
            return 0.0
        return float(np.std((self.util[rows] * self.weights).sum(axis=1)))


def _smoothed(samples: Sequence[PodUsage], now: float, window: float, max_age: float) -> dict[str, dict[str, float]]:
    """Per pod, the mean of its samples within ``window`` before ``now``; pods whose newest sample
    is older than ``max_age`` are left out (stale)."""
    by_pod: dict[str, list[PodUsage]] = {}
    for s in samples:
        by_pod.setdefault(s.key, []).append(s)
    out: dict[str, dict[str, float]] = {}
    for key, items in by_pod.items():
        newest = max(s.timestamp for s in items)
        if now - newest > max_age:
            continue
        recent = [s for s in items if s.timestamp >= now - window] or [max(items, key=lambda s: s.timestamp)]
        names = {r for s in recent for r in s.usage}
        out[key] = {r: sum(s.usage.get(r, 0) for s in recent) / len(recent) for r in names}
    return out


def node_loads(state: Snapshot, config: RebalanceConfig, usage: Usage | None = None, *, now: float = 0.0) -> Loads:
    """How loaded each node of ``state`` is, by the configured source (``config.load``)."""
    resources = tuple(r for r in config.weights if r in state.resources and config.weights[r] > 0)
    if not resources:
        resources = ("cpu",)
    weights = np.array([config.weights.get(r, 1.0) for r in resources], dtype=np.float64)
    weights = weights / weights.sum()
    columns = [state.column(r) for r in resources]
    alloc = state.alloc[:, columns].astype(np.float64)
    measured = (
        _smoothed(usage.samples, now, config.usage_window, config.usage_max_age)
        if config.load == "usage" and usage is not None
        else {}
    )
    used = np.zeros_like(alloc)
    pod_load: dict[str, FloatArray] = {}
    fallbacks: list[str] = []
    for n, pods in enumerate(state.running):
        for pod in pods:
            load = _pod_load(pod, state, columns, resources, measured.get(pod.key))
            if config.load == "usage" and pod.key not in measured:
                fallbacks.append(pod.key)
            pod_load[pod.key] = load
            used[n] += load
    return Loads(resources, weights, alloc, used, pod_load, config.load, tuple(sorted(fallbacks)))


def _pod_load(
    pod: Pod, state: Snapshot, columns: list[int], resources: tuple[str, ...], measured: dict[str, float] | None
) -> FloatArray:
    requested = pod_vector(pod, state.resources)[columns].astype(np.float64)
    if measured is None:
        return requested
    return np.array([measured.get(r, requested[i]) for i, r in enumerate(resources)], dtype=np.float64)
