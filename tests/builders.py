"""Builders of native-schema clusters for tests (``placer.inputs.native``).

Every builder returns the plain JSON shape (dicts) so tests read like the hand-written what-if
files; ``cluster(...)`` parses them with ``placer.inputs.parse_cluster``, exactly as a file would.
Tests import this module as ``from builders import ...`` (pytest puts ``tests/`` on sys.path for
test modules in a directory without ``__init__.py``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from placer.inputs import parse_cluster
from placer.models import Cluster

__all__ = [
    "HOSTNAME",
    "NO_FIT",
    "NO_MATCH",
    "ZONE",
    "cluster",
    "cluster_json",
    "expr",
    "field_expr",
    "inter_pod",
    "node",
    "one_in",
    "pod",
    "pod_term",
    "property_settings",
    "required",
    "spread",
    "taint",
    "term",
    "toleration",
]

Json = dict[str, Any]

NO_MATCH = "placer.io/when-no-node-matches"
NO_FIT = "placer.io/when-no-node-fits"
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"


def node(
    name: str,
    *,
    cpu: str | int = 4,
    memory: str | int = "8Gi",
    pods: int | None = None,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Json] = (),
    unschedulable: bool = False,
    **extended: str | int,
) -> Json:
    """A node; extra keyword arguments are extended resources (``gpu=2`` -> ``example.com/gpu``)."""
    allocatable: Json = {"cpu": cpu, "memory": memory}
    if pods is not None:
        allocatable["pods"] = pods
    for res, qty in extended.items():
        allocatable[_resource(res)] = qty
    out: Json = {"name": name, "labels": dict(labels or {}), "allocatable": allocatable}
    if taints:
        out["taints"] = list(taints)
    if unschedulable:
        out["unschedulable"] = True
    return out


def pod(
    name: str,
    *,
    node: str | None = None,
    cpu: str | int | None = None,
    memory: str | int | None = None,
    priority: int = 0,
    restart: str = "Always",
    selector: Mapping[str, str] | None = None,
    affinity: Json | None = None,
    tolerations: Sequence[Json] = (),
    ports: Iterable[int | Json] = (),
    annotations: Mapping[str, str] | None = None,
    created: str = "",
    namespace: str = "default",
    scheduler: str | None = None,
    labels: Mapping[str, str] | None = None,
    topology_spread: Sequence[Json] = (),
    **extended: str | int,
) -> Json:
    """A pod (pending unless ``node`` is given); ``ports`` are host ports (ints or full objects);
    ``affinity`` may hold node and inter-pod affinity together (``required(...) | inter_pod(...)``)."""
    requests: Json = {}
    if cpu is not None:
        requests["cpu"] = cpu
    if memory is not None:
        requests["memory"] = memory
    for res, qty in extended.items():
        requests[_resource(res)] = qty
    out: Json = {"name": name, "namespace": namespace, "requests": requests, "priority": priority}
    if restart != "Always":
        out["restartPolicy"] = restart
    if node is not None:
        out["node"] = node
    if selector:
        out["nodeSelector"] = dict(selector)
    if affinity:
        out["affinity"] = affinity
    if tolerations:
        out["tolerations"] = list(tolerations)
    host_ports = [{"port": p} if isinstance(p, int) else p for p in ports]
    if host_ports:
        out["hostPorts"] = host_ports
    if annotations:
        out["annotations"] = dict(annotations)
    if created:
        out["creationTimestamp"] = created
    if scheduler is not None:
        out["schedulerName"] = scheduler
    if labels:
        out["labels"] = dict(labels)
    if topology_spread:
        out["topologySpreadConstraints"] = list(topology_spread)
    return out


def taint(key: str, effect: str = "NoSchedule", value: str = "") -> Json:
    out: Json = {"key": key, "effect": effect}
    if value:
        out["value"] = value
    return out


def toleration(key: str = "", operator: str = "Equal", value: str = "", effect: str = "") -> Json:
    out: Json = {"operator": operator}
    if key:
        out["key"] = key
    if value:
        out["value"] = value
    if effect:
        out["effect"] = effect
    return out


def expr(key: str, operator: str, *values: str) -> Json:
    """A ``matchExpressions`` requirement."""
    out: Json = {"key": key, "operator": operator}
    if values:
        out["values"] = list(values)
    return out


def field_expr(operator: str, *names: str) -> Json:
    """A ``matchFields`` requirement on ``metadata.name``."""
    return {"key": "metadata.name", "operator": operator, "values": list(names)}


def term(*expressions: Json, fields: Sequence[Json] = ()) -> Json:
    """A node selector term (requirements ANDed)."""
    out: Json = {}
    if expressions:
        out["matchExpressions"] = list(expressions)
    if fields:
        out["matchFields"] = list(fields)
    return out


def required(*terms: Json, preferred: Sequence[Json] = ()) -> Json:
    """A pod ``affinity`` with required node affinity terms (ORed) and optional preferred ones."""
    node_affinity: Json = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}
    if preferred:
        node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] = list(preferred)
    return {"nodeAffinity": node_affinity}


def pod_term(match: Mapping[str, str], key: str = ZONE, **extra: Any) -> Json:
    """An inter-pod (anti-)affinity term: pods whose labels include ``match``, per domain of ``key``
    (``namespaces``/``namespaceSelector`` in ``extra``; without them, the pod's own namespace)."""
    return {"labelSelector": {"matchLabels": dict(match)}, "topologyKey": key, **extra}


def inter_pod(
    *,
    affinity: Sequence[Json] = (),
    anti: Sequence[Json] = (),
    preferred_affinity: Sequence[tuple[int, Json]] = (),
    preferred_anti: Sequence[tuple[int, Json]] = (),
) -> Json:
    """A pod ``affinity`` with ``podAffinity``/``podAntiAffinity``: required terms, preferred ones
    as (weight, term)."""
    out: Json = {}
    for kind, hard, soft in (("podAffinity", affinity, preferred_affinity), ("podAntiAffinity", anti, preferred_anti)):
        body: Json = {}
        if hard:
            body["requiredDuringSchedulingIgnoredDuringExecution"] = list(hard)
        if soft:
            body["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": w, "podAffinityTerm": t} for w, t in soft
            ]
        if body:
            out[kind] = body
    return out


def spread(
    match: Mapping[str, str],
    key: str = ZONE,
    *,
    max_skew: int = 1,
    when: str = "DoNotSchedule",
    min_domains: int | None = None,
    **extra: Any,
) -> Json:
    """A topology spread constraint over the pods whose labels include ``match``."""
    out: Json = {
        "maxSkew": max_skew,
        "topologyKey": key,
        "whenUnsatisfiable": when,
        "labelSelector": {"matchLabels": dict(match)},
        **extra,
    }
    if min_domains is not None:
        out["minDomains"] = min_domains
    return out


def cluster_json(nodes: Sequence[Json], pods: Sequence[Json] = ()) -> str:
    return json.dumps({"nodes": list(nodes), "pods": list(pods)})


def cluster(nodes: Sequence[Json], pods: Sequence[Json] = ()) -> Cluster:
    """Parse the native document exactly as ``placer solve`` would."""
    return parse_cluster("test", cluster_json(nodes, pods))


def _resource(name: str) -> str:
    return name if "/" in name else f"example.com/{name}"


def one_in(n: int, draw: st.DrawFn) -> bool:
    """True about once in ``n`` draws; False (the simple case) is what hypothesis shrinks to."""
    return bool(draw(st.sampled_from([False] * (n // 2) + [True] + [False] * (n - n // 2 - 1))))


def property_settings(examples_env: str, default: int) -> settings:
    """Hypothesis settings shared by the property suites: the same examples on every run unless
    PLACER_PROPERTY_RANDOM is set; ``examples_env`` overrides the number of examples."""
    return settings(
        max_examples=int(os.environ.get(examples_env, str(default))),
        deadline=None,
        derandomize="PLACER_PROPERTY_RANDOM" not in os.environ,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
