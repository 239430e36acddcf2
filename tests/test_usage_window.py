"""The controller's window of metrics.k8s.io samples (issue 31): a sample stamped in the future
(a node's clock far ahead) once stopped all pruning behind it, so the window grew for ever."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from placer.kube.policy import Policy, Response, Timeouts
from placer.kube.usage import UsageWindow

NOW = 1_800_000_000.0


def _item(name: str, at: float) -> dict[str, Any]:
    stamp = dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"metadata": {"name": name, "namespace": "ns"}, "timestamp": stamp, "window": "30s",
            "containers": [{"name": "c", "usage": {"cpu": "100m", "memory": "1Mi"}}]}  # fmt: skip


class Metrics:
    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    def call(self, method: str, path: str, **kw: Any) -> Any:
        def send(_t: Timeouts) -> Response:
            return Response(200, json.dumps({"kind": "PodMetricsList", "items": self.items}).encode())

        return send


def test_a_sample_from_the_future_does_not_stop_the_window_from_pruning() -> None:
    api = Metrics()
    window = UsageWindow(api, Policy(), window=300)
    api.items = [_item("skewed", NOW + 10 * 365 * 86400), _item("a", NOW)]
    window.read(NOW)
    for minute in range(1, 60):
        api.items = [_item("a", NOW + 60 * minute)]
        usage = window.read(NOW + 60 * minute)
    assert len(window.samples) <= 6  # five minutes of one sample a minute, not an hour's worth
    assert all(s.name != "skewed" for s in usage.samples)  # nor fresh for ever
