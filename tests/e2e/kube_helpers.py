"""Helpers for e2e tests against the real control plane (testenv/cluster.py).

Fake nodes are plain Node objects carrying the annotation kwok watches
(``kwok.x-k8s.io/node=fake``): kwok marks them Ready, keeps their heartbeats and plays the
kubelet for pods bound to them (Pending -> Running; terminating pods are deleted at once).
Every wait is bounded and fails with a message saying what it waited for and what it last saw.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

KWOK_ANNOTATION = {"kwok.x-k8s.io/node": "fake"}
KWOK_LABEL = {"type": "kwok"}
NOT_READY_TAINTS = {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"  # never pulled: kwok only fakes the kubelet

T = TypeVar("T")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def wait_for(
    what: str,
    fn: Callable[[], T | None],
    timeout: float = 30.0,
    interval: float = 0.2,
) -> T:
    """Poll ``fn`` until it returns something truthy; return it. TimeoutError names ``what``."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = fn()
        except ApiException as exc:
            last = f"ApiException {exc.status}: {exc.reason}"
        else:
            if last:
                return last
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}; last: {last!r}")
        time.sleep(interval)


# ---------------------------------------------------------------------------------------------
# Namespaces
# ---------------------------------------------------------------------------------------------


def create_namespace(core: client.CoreV1Api, name: str | None = None, timeout: float = 30.0) -> str:
    """Create a namespace and wait for its default ServiceAccount (pods need it to be admitted)."""
    name = name or unique("e2e")
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))

    def has_sa() -> bool:
        try:
            core.read_namespaced_service_account("default", name)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    wait_for(f"serviceaccount {name}/default", has_sa, timeout)
    return name


def delete_if_present(delete: Callable[..., object], name: str, **kwargs: Any) -> None:
    """Delete an object; one that is already gone (404) is fine."""
    try:
        delete(name, **kwargs)
    except ApiException as exc:
        if exc.status != 404:
            raise


def delete_namespace(core: client.CoreV1Api, name: str) -> None:
    delete_if_present(core.delete_namespace, name, propagation_policy="Background")


# ---------------------------------------------------------------------------------------------
# Fake nodes
# ---------------------------------------------------------------------------------------------


def node_manifest(
    name: str,
    *,
    cpu: str = "4",
    memory: str = "16Gi",
    ephemeral_storage: str = "100Gi",
    pods: int = 110,
    extended: Mapping[str, str | int] | None = None,
    labels: Mapping[str, str] | None = None,
    taints: Iterable[client.V1Taint | Mapping[str, str]] = (),
) -> client.V1Node:
    """A Node kwok will manage. Allocatable == capacity (kwok keeps what is given at creation)."""
    resources = {
        "cpu": cpu,
        "memory": memory,
        "ephemeral-storage": ephemeral_storage,
        "pods": str(pods),
    }
    resources.update({k: str(v) for k, v in (extended or {}).items()})
    all_labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        **KWOK_LABEL,
        **(labels or {}),
    }
    taint_objs = [t if isinstance(t, client.V1Taint) else client.V1Taint(**t) for t in taints]
    return client.V1Node(
        metadata=client.V1ObjectMeta(name=name, labels=all_labels, annotations=dict(KWOK_ANNOTATION)),
        spec=client.V1NodeSpec(taints=taint_objs or None),
        status=client.V1NodeStatus(allocatable=dict(resources), capacity=dict(resources)),
    )


def create_node(core: client.CoreV1Api, name: str, **kwargs: Any) -> client.V1Node:
    """Create one kwok node (see node_manifest for the keyword arguments)."""
    return core.create_node(node_manifest(name, **kwargs))


def node_is_ready(node: client.V1Node) -> bool:
    """Ready=True and no not-ready/unreachable taint left (the scheduler honours those)."""
    conds = {c.type: c.status for c in (node.status.conditions or [])}
    taints = {t.key for t in (node.spec.taints or [])}
    return conds.get("Ready") == "True" and not (taints & NOT_READY_TAINTS)


def wait_nodes_ready(core: client.CoreV1Api, names: Iterable[str], timeout: float = 60.0) -> list[client.V1Node]:
    wanted = list(names)

    def ready() -> list[client.V1Node] | None:
        nodes = [core.read_node(n) for n in wanted]
        return nodes if all(node_is_ready(n) for n in nodes) else None

    return wait_for(f"nodes {wanted} Ready without not-ready taints", ready, timeout)


def delete_node(core: client.CoreV1Api, name: str) -> None:
    delete_if_present(core.delete_node, name)


# ---------------------------------------------------------------------------------------------
# Workloads
# ---------------------------------------------------------------------------------------------


def pod_spec(
    *,
    cpu: str = "100m",
    memory: str = "64Mi",
    scheduler_name: str | None = None,
    node_selector: Mapping[str, str] | None = None,
    tolerations: Iterable[client.V1Toleration] = (),
    node_name: str | None = None,
    extended: Mapping[str, str | int] | None = None,
    affinity: client.V1Affinity | None = None,
    topology_spread_constraints: Iterable[client.V1TopologySpreadConstraint] = (),
) -> client.V1PodSpec:
    requests = {"cpu": cpu, "memory": memory, **{k: str(v) for k, v in (extended or {}).items()}}
    return client.V1PodSpec(
        containers=[
            client.V1Container(
                name="main",
                image=PAUSE_IMAGE,
                resources=client.V1ResourceRequirements(requests=requests, limits=None),
            )
        ],
        scheduler_name=scheduler_name,
        node_selector=dict(node_selector) if node_selector else None,
        tolerations=list(tolerations) or None,
        node_name=node_name,
        affinity=affinity,
        topology_spread_constraints=list(topology_spread_constraints) or None,
        termination_grace_period_seconds=0,
        automount_service_account_token=False,
    )


def create_pod(
    core: client.CoreV1Api,
    namespace: str,
    name: str,
    *,
    labels: Mapping[str, str] | None = None,
    **spec: Any,
) -> client.V1Pod:
    """A bare pod (see pod_spec for the keyword arguments)."""
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels=dict(labels or {"app": name})),
        spec=pod_spec(**spec),
    )
    return core.create_namespaced_pod(namespace, pod)


def create_deployment(
    apps: client.AppsV1Api,
    namespace: str,
    name: str,
    replicas: int,
    *,
    labels: Mapping[str, str] | None = None,
    **spec: Any,
) -> client.V1Deployment:
    """A Deployment of pause pods labelled app=<name> (see pod_spec for the keyword arguments)."""
    match = dict(labels or {"app": name})
    dep = client.V1Deployment(
        metadata=client.V1ObjectMeta(name=name, labels=match),
        spec=client.V1DeploymentSpec(
            replicas=replicas,
            selector=client.V1LabelSelector(match_labels=match),
            template=client.V1PodTemplateSpec(metadata=client.V1ObjectMeta(labels=match), spec=pod_spec(**spec)),
        ),
    )
    return apps.create_namespaced_deployment(namespace, dep)


def create_pdb(
    policy: client.PolicyV1Api,
    namespace: str,
    name: str,
    match_labels: Mapping[str, str],
    *,
    min_available: int | str | None = None,
    max_unavailable: int | str | None = None,
) -> client.V1PodDisruptionBudget:
    pdb = client.V1PodDisruptionBudget(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1PodDisruptionBudgetSpec(
            selector=client.V1LabelSelector(match_labels=dict(match_labels)),
            min_available=min_available,
            max_unavailable=max_unavailable,
        ),
    )
    return policy.create_namespaced_pod_disruption_budget(namespace, pdb)


def wait_pdb(
    policy: client.PolicyV1Api,
    namespace: str,
    name: str,
    *,
    disruptions_allowed: int,
    current_healthy: int | None = None,
    timeout: float = 30.0,
) -> client.V1PodDisruptionBudget:
    """Wait until the disruption controller has processed the PDB's current generation and
    reports ``disruptions_allowed`` (an unprocessed PDB also makes evictions answer 429)."""

    def ok() -> client.V1PodDisruptionBudget | None:
        pdb = policy.read_namespaced_pod_disruption_budget(name, namespace)
        st = pdb.status
        if st is None or st.observed_generation != pdb.metadata.generation:
            return None
        if st.disruptions_allowed != disruptions_allowed:
            return None
        if current_healthy is not None and st.current_healthy != current_healthy:
            return None
        return pdb

    return wait_for(
        f"pdb {namespace}/{name} processed with disruptionsAllowed={disruptions_allowed}",
        ok,
        timeout,
    )


# ---------------------------------------------------------------------------------------------
# Pods: queries, waits, eviction, binding
# ---------------------------------------------------------------------------------------------


def selector(labels: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in labels.items())


def list_pods(core: client.CoreV1Api, namespace: str, labels: Mapping[str, str]) -> list[client.V1Pod]:
    return list(core.list_namespaced_pod(namespace, label_selector=selector(labels)).items)


def is_running(pod: client.V1Pod) -> bool:
    return pod.metadata.deletion_timestamp is None and pod.status.phase == "Running" and bool(pod.spec.node_name)


def wait_running(
    core: client.CoreV1Api,
    namespace: str,
    labels: Mapping[str, str],
    count: int,
    timeout: float = 60.0,
) -> list[client.V1Pod]:
    """Exactly ``count`` live pods match ``labels`` and all are Running on a node."""

    def ok() -> list[client.V1Pod] | None:
        pods = [p for p in list_pods(core, namespace, labels) if p.metadata.deletion_timestamp is None]
        return pods if len(pods) == count and all(is_running(p) for p in pods) else None

    return wait_for(f"{count} running pods {selector(labels)} in {namespace}", ok, timeout)


def wait_pod_gone(core: client.CoreV1Api, namespace: str, name: str, timeout: float = 30.0) -> None:
    def gone() -> bool:
        try:
            core.read_namespaced_pod(name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                return True
            raise
        return False

    wait_for(f"pod {namespace}/{name} deleted", gone, timeout)


def evict(core: client.CoreV1Api, namespace: str, name: str) -> int:
    """POST an Eviction (policy/v1) for the pod; return the HTTP status (201 done, 429 blocked)."""
    body = client.V1Eviction(metadata=client.V1ObjectMeta(name=name, namespace=namespace))
    try:
        resp = core.create_namespaced_pod_eviction(name, namespace, body, _preload_content=False)
    except ApiException as exc:
        return int(exc.status)
    return int(resp.status)


def bind(core: client.CoreV1Api, namespace: str, pod: str, node: str) -> int:
    """Bind a pending pod to a node through the Binding subresource (what a scheduler does).

    Returns the HTTP status (201 bound, 409 already bound). ``_preload_content=False`` works around
    the client failing to deserialise the Status the API returns as a V1Binding.
    """
    body = client.V1Binding(
        metadata=client.V1ObjectMeta(name=pod, namespace=namespace),
        target=client.V1ObjectReference(api_version="v1", kind="Node", name=node),
    )
    try:
        resp = core.create_namespaced_pod_binding(pod, namespace, body, _preload_content=False)
    except ApiException as exc:
        return int(exc.status)
    return int(resp.status)


@contextmanager
def admin_api(kubeconfig: Path | str) -> Iterator[client.ApiClient]:
    """An API client for a control plane's admin kubeconfig, closed afterwards."""
    api = config.new_client_from_config(config_file=str(kubeconfig))
    try:
        yield api
    finally:
        api.close()
