"""What the controller's parts share (``placer.kube.runner`` builds it once): the configuration,
the metrics, the writer, the batcher, the binds assumed and the bind workers. Each part reads the
writer through the context, so one swapped in (a test's fake) reaches every part."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from placer.controller.batcher import Batcher
from placer.kube.actions import Actions
from placer.kube.assume import AssumeCache
from placer.kube.fairpool import FairPool
from placer.kube.groupstatus import GroupStatus
from placer.kube.serving import Metrics
from placer.models import ControllerConfig

__all__ = ["Context"]


@dataclass
class Context:
    cfg: ControllerConfig
    identity: str  # the Lease holder and the events' reporting instance
    metrics: Metrics
    actions: Actions
    batcher: Batcher  # the queue's batches, back-offs and holds
    assumed: AssumeCache  # binds issued but not yet seen by the watch
    pool: FairPool  # the bind workers: binds (a lane per batch), read-backs and a plan's API calls
    # (informer name, "ns/name") -> the cached object (the PodGroups whose conditions are written)
    cached: Callable[[str, str], dict[str, Any] | None] = lambda kind, key: None
    # PodGroup conditions (PodGroupInitiallyScheduled, DisruptionTarget), queued like the reports.
    group_status: GroupStatus = field(init=False)

    def __post_init__(self) -> None:
        self.group_status = GroupStatus(
            lambda: self.actions,
            cached=lambda kind, key: self.cached(kind, key),  # noqa: PLW0108 (a test may swap self.cached)
            scheduler_name=self.cfg.scheduler_name,
            counted=lambda result: self.metrics.group_conditions.labels(result=result).inc(),
        )
