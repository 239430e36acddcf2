"""Read measured usage: ``kubectl get --raw /apis/metrics.k8s.io/v1beta1/pods`` (a PodMetricsList)
or single PodMetrics objects, as files for ``placer rebalance --usage`` and as API objects for the
controller. Quantities in scheduler units (cpu millicores, memory bytes)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from placer.inputs.fields import Field
from placer.inputs.load import decode_document, read_file
from placer.inputs.stamps import parse_timestamp
from placer.models import PodUsage, Usage

__all__ = ["load_usage", "parse_pod_metrics", "read_usage"]

_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?)(h|ms|us|µs|ns|m|s)", re.ASCII)
_UNIT = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def _duration(f: Field) -> float:
    """A Go duration as metrics-server writes ``window`` (``30s``, ``1m0.5s``); 0 when absent."""
    text = f.text()
    if not text:
        return 0.0
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise f.fail(f"expected a duration such as 30s, got {text!r}")
    return sum(float(n) * _UNIT[u] for n, u in parts)


def _sample(item: Field) -> PodUsage:
    meta = item.get("metadata")
    stamp = item.get("timestamp")
    when = parse_timestamp(stamp.required_str())
    if when is None:
        raise stamp.fail(f"expected an RFC 3339 time such as 2025-01-02T03:04:05Z, got {stamp.value!r}")
    total: dict[str, int] = {}
    for container in item.get("containers").items():
        for resource, amount in container.get("usage").quantities().items():
            total[resource] = total.get(resource, 0) + amount
    return PodUsage(
        namespace=meta.get("namespace").text("default") or "default",
        name=meta.get("name").required_str(),
        timestamp=when,
        window=_duration(item.get("window")),
        usage=total,
    )


def read_usage(doc: Field) -> list[PodUsage]:
    """Samples of a PodMetricsList (``items``) or one PodMetrics object."""
    kind = doc.get("kind").text()
    if kind == "PodMetrics":
        return [_sample(doc)]
    if kind != "PodMetricsList":
        raise doc.get("kind").fail(f"expected PodMetricsList or PodMetrics (metrics.k8s.io), got {kind!r}")
    return [_sample(item) for item in doc.get("items").items()]


def parse_pod_metrics(raw: Any, source: str = "api") -> PodUsage:
    """One PodMetrics object as the API returns it (the controller's reads)."""
    return _sample(Field(source, "", raw))


def load_usage(paths: Iterable[str | Path]) -> Usage:
    """Every sample of every file (several dumps taken over time are averaged by the rebalancer)."""
    samples: list[PodUsage] = []
    for path in paths:
        source = str(path)
        samples += read_usage(Field(source, "", decode_document(source, read_file(path))))
    return Usage(samples=tuple(samples))
