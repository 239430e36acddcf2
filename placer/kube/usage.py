"""Measured usage from ``metrics.k8s.io`` (metrics-server), for rebalancing by real load.

One read per rebalancing period; the samples of the last window are kept and averaged by
``placer.rebalance``. When the API is not served or the read fails, the answer is None and the
rebalancer counts every pod by its requests (and says so); usage is never read as zero.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Any

from placer.errors import InputError
from placer.inputs.kinds import BY_NAME
from placer.inputs.usage import parse_pod_metrics
from placer.kube.policy import Policy
from placer.models import PodUsage, Usage

__all__ = ["UsageWindow"]

log = logging.getLogger("placer.kube.usage")
PATH = BY_NAME["PodMetrics"].path


class UsageWindow:
    """The samples read over the last ``window`` seconds."""

    def __init__(self, http: Any, policy: Policy, window: float) -> None:
        self.http, self.policy, self.window = http, policy, window
        self.samples: deque[PodUsage] = deque()
        self.last_error = ""

    def read(self, now: float) -> Usage:
        """Read the current samples (best effort) and return those within the window."""
        out = self.policy.call(f"list {PATH}", self.http.call("GET", PATH))
        if out.ok:
            self.last_error = ""
            for item in out.json().get("items", []) or []:
                try:
                    self.samples.append(parse_pod_metrics(item, "metrics.k8s.io"))
                except InputError as exc:
                    log.debug("pod metrics skipped: %s", exc)
        else:
            self.last_error = f"{out.status or out.result}: {out.reason}"
            log.warning("metrics.k8s.io not readable (%s): load falls back to requests", self.last_error)
        # Every sample is judged by its own time: one stamped in the future (a node's clock far
        # ahead) no longer shields the samples queued behind it from pruning, and is itself kept
        # only while within a window of now (it would otherwise count as fresh for ever).
        self.samples = deque(s for s in self.samples if now - self.window <= s.timestamp <= now + self.window)
        return Usage(samples=tuple(self.samples))
