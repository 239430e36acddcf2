"""Simulated resource usage for e2e tests on a control plane started with ``Cluster(metrics=True)``.

How usage reaches ``metrics.k8s.io`` (testenv/build.sh writes kwok's config, testenv/cluster.py
starts the rest):

* kwok's ClusterResourceUsage ``usage-from-annotation`` (testenv/kwok-usage.yaml) gives each
  container of a Running pod the usage in the pod's annotations ``kwok.x-k8s.io/usage-cpu`` /
  ``kwok.x-k8s.io/usage-memory`` (1m and 1Mi without them; a pod not Running uses nothing); a
  node's usage is the sum over the pods bound to it.
* kwok's Metric ``metrics-resource`` serves them in the kubelet's format at
  ``/metrics/nodes/{node}/metrics/resource``; a node carrying the annotation
  ``metrics.k8s.io/resource-metrics-path`` with that path is scraped there by metrics-server
  (:func:`enable_node_metrics`).
* metrics-server keeps the last two scrapes (every 10 s): cpu is a rate over them, so a new cpu
  usage shows after one to two scrapes, memory after one.

Usage set on a Job's pod template (:func:`usage_annotations`) follows the Job's pods wherever
they are recreated; :func:`set_pod_usage` changes running pods. A Job pod that must keep running
(kwok completes Job pods as soon as they run) carries :data:`KEEP_RUNNING`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kube_helpers import wait_for
from kubernetes import client

from placer.models import parse_quantity
from testenv.cluster import KWOK_METRICS_PATH, METRICS_PATH_ANNOTATION

USAGE_CPU_ANNOTATION = "kwok.x-k8s.io/usage-cpu"
USAGE_MEMORY_ANNOTATION = "kwok.x-k8s.io/usage-memory"
# kwok's pod-complete stage spares pods with this label (KEEP_RUNNING_LABEL in testenv/build.sh).
KEEP_RUNNING = {"placer.io/test-keep-running": "true"}
# What kwok reports for a container without usage annotations (upstream usage-from-annotation).
DEFAULT_CONTAINER_USAGE_CPU_MILLIS = 1
DEFAULT_CONTAINER_USAGE_MEMORY_BYTES = 2**20

METRICS_GROUP = "metrics.k8s.io"
METRICS_VERSION = "v1beta1"
# Timeout for a usage to show: two scrapes of metrics-server (10 s each) plus kwok's pod cache
# and the aggregator, with room for a loaded 2-core machine.
USAGE_TIMEOUT = 90.0


@dataclass(frozen=True)
class Usage:
    """cpu in millicores, memory in bytes (a pod's: the sum over its containers)."""

    cpu_millis: float
    memory_bytes: float

    def close_to(self, other: Usage, rel: float = 0.05, cpu_abs: float = 3.0) -> bool:
        """Within ``rel`` (cpu also within ``cpu_abs`` millicores): cpu is a measured rate."""
        return math.isclose(self.cpu_millis, other.cpu_millis, rel_tol=rel, abs_tol=cpu_abs) and math.isclose(
            self.memory_bytes, other.memory_bytes, rel_tol=rel
        )


def usage_annotations(cpu_millis: int, memory_bytes: int) -> dict[str, str]:
    """The annotations giving every container of a pod this usage (put them on a pod template)."""
    return {USAGE_CPU_ANNOTATION: f"{cpu_millis}m", USAGE_MEMORY_ANNOTATION: str(memory_bytes)}


def enable_node_metrics(core: client.CoreV1Api, names: Iterable[str]) -> None:
    """Point metrics-server at kwok's metrics endpoint of each node."""
    for name in names:
        path = KWOK_METRICS_PATH.format(node=name)
        core.patch_node(name, {"metadata": {"annotations": {METRICS_PATH_ANNOTATION: path}}})


def set_pod_usage(
    core: client.CoreV1Api,
    namespace: str,
    *,
    cpu_millis: int,
    memory_bytes: int,
    names: Iterable[str] = (),
    label_selector: str | None = None,
) -> list[str]:
    """Give the pods named, and those matching ``label_selector``, this usage per container.
    Returns the pods changed; a selector matching nothing (and no names) is an error."""
    targets = list(names)
    if label_selector is not None:
        pods = core.list_namespaced_pod(namespace, label_selector=label_selector).items
        targets += [p.metadata.name for p in pods if p.metadata.name not in targets]
    if not targets:
        raise ValueError(f"no pods in {namespace} named {list(names)} or matching {label_selector!r}")
    body = {"metadata": {"annotations": usage_annotations(cpu_millis, memory_bytes)}}
    for name in targets:
        core.patch_namespaced_pod(name, namespace, body)
    return targets


def _usage(item: Mapping[str, Any]) -> Usage:
    return Usage(
        cpu_millis=float(parse_quantity(item["cpu"]) * 1000),
        memory_bytes=float(parse_quantity(item["memory"])),
    )


def pod_usage(custom: client.CustomObjectsApi, namespace: str) -> dict[str, Usage]:
    """metrics.k8s.io's usage of the pods of a namespace (pods it has no two scrapes of are absent)."""
    body = custom.list_namespaced_custom_object(METRICS_GROUP, METRICS_VERSION, namespace, "pods")
    out: dict[str, Usage] = {}
    for item in body["items"]:
        parts = [_usage(c["usage"]) for c in item["containers"]]
        out[item["metadata"]["name"]] = Usage(sum(u.cpu_millis for u in parts), sum(u.memory_bytes for u in parts))
    return out


def node_usage(custom: client.CustomObjectsApi) -> dict[str, Usage]:
    """metrics.k8s.io's usage of every node it has metrics of."""
    body = custom.list_cluster_custom_object(METRICS_GROUP, METRICS_VERSION, "nodes")
    return {item["metadata"]["name"]: _usage(item["usage"]) for item in body["items"]}


def _wait_close(what: str, read: Any, expected: Mapping[str, Usage], timeout: float) -> dict[str, Usage]:
    last: dict[str, Usage] = {}

    def settled() -> dict[str, Usage] | None:
        seen: dict[str, Usage] = read()
        last.clear()
        last.update({k: seen[k] for k in expected if k in seen})
        ok = all(k in seen and seen[k].close_to(v) for k, v in expected.items())
        return dict(last) if ok else None

    try:
        return wait_for(f"{what} to report {dict(expected)}", settled, timeout, interval=1.0)
    except TimeoutError as exc:
        raise TimeoutError(f"{exc}; last reported: {last}") from None


def wait_pod_usage(
    custom: client.CustomObjectsApi,
    namespace: str,
    expected: Mapping[str, Usage],
    timeout: float = USAGE_TIMEOUT,
) -> dict[str, Usage]:
    """Wait until metrics.k8s.io reports (close to) ``expected`` for these pods; return what it did."""
    return _wait_close(f"metrics.k8s.io pods in {namespace}", lambda: pod_usage(custom, namespace), expected, timeout)


def wait_node_usage(
    custom: client.CustomObjectsApi,
    expected: Mapping[str, Usage],
    timeout: float = USAGE_TIMEOUT,
) -> dict[str, Usage]:
    """Wait until metrics.k8s.io reports (close to) ``expected`` for these nodes; return what it did."""
    return _wait_close("metrics.k8s.io nodes", lambda: node_usage(custom), expected, timeout)
