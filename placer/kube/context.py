"""What the controller's parts share (``placer.kube.runner`` builds it once): the configuration,
the metrics, the writer, the batcher, the binds assumed and the bind workers. Each part reads the
writer through the context, so one swapped in (a test's fake) reaches every part."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from placer.controller.batcher import Batcher
from placer.kube.actions import Actions
from placer.kube.assume import AssumeCache
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
    pool: ThreadPoolExecutor  # the bind workers: binds, read-backs and a plan's API calls
