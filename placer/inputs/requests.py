"""A pod's effective resource request, as kube-scheduler computes it.

request = max(sum(containers) + sum(sidecars), max over init containers of (that container +
the sidecars started before it)) + overhead; pod-level ``spec.resources.requests`` replace the
container aggregate for the resources they name. Sidecars are init containers with
``restartPolicy: Always``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["NONZERO_CPU", "NONZERO_MEMORY", "ContainerRequests", "effective_requests", "scoring_requests"]

NONZERO_CPU = 100  # millicores, kube-scheduler's scoring default
NONZERO_MEMORY = 200 * 1024 * 1024
POD_LEVEL = ("cpu", "memory")


@dataclass(frozen=True)
class ContainerRequests:
    requests: Mapping[str, int]
    sidecar: bool = False


def _add(into: dict[str, int], other: Mapping[str, int]) -> None:
    for name, value in other.items():
        into[name] = into.get(name, 0) + value


def _max(into: dict[str, int], other: Mapping[str, int]) -> None:
    for name, value in other.items():
        into[name] = max(into.get(name, 0), value)


def _aggregate(containers: Sequence[Mapping[str, int]], inits: Sequence[ContainerRequests]) -> dict[str, int]:
    total: dict[str, int] = {}
    for c in containers:
        _add(total, c)
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for init in inits:
        if init.sidecar:
            _add(sidecars, init.requests)
            _max(init_peak, sidecars)
        else:
            step = dict(sidecars)
            _add(step, init.requests)
            _max(init_peak, step)
    _add(total, sidecars)
    _max(total, init_peak)
    return total


def effective_requests(
    *,
    containers: Sequence[Mapping[str, int]],
    inits: Sequence[ContainerRequests] = (),
    pod_level: Mapping[str, int] | None = None,
    overhead: Mapping[str, int] | None = None,
) -> dict[str, int]:
    result = _aggregate(containers, inits)
    for name, value in (pod_level or {}).items():
        if name in POD_LEVEL or name.startswith("hugepages-"):
            result[name] = value
    _add(result, overhead or {})
    return {k: v for k, v in result.items() if v > 0}


def _nonzero(requests: Mapping[str, int]) -> dict[str, int]:
    # kube-scheduler substitutes the defaults only when the request is absent, not when it is 0.
    return {
        "cpu": requests.get("cpu", NONZERO_CPU),
        "memory": requests.get("memory", NONZERO_MEMORY),
    }


def scoring_requests(
    *,
    containers: Sequence[Mapping[str, int]],
    inits: Sequence[ContainerRequests] = (),
    pod_level: Mapping[str, int] | None = None,
    overhead: Mapping[str, int] | None = None,
) -> tuple[int, int]:
    """(cpu, memory) for scoring: containers without a request count 100m / 200Mi."""
    result = _aggregate(
        [_nonzero(c) for c in containers],
        [ContainerRequests(_nonzero(i.requests), i.sidecar) for i in inits],
    )
    for name in POD_LEVEL:
        if pod_level and pod_level.get(name):
            result[name] = pod_level[name]
    _add(result, {k: v for k, v in (overhead or {}).items() if k in POD_LEVEL})
    return result.get("cpu", 0), result.get("memory", 0)
