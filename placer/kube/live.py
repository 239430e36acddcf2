"""``placer solve`` without a file: read the cluster straight from the API server, read-only.

The same objects a ``kubectl get nodes,pods,pdb,rs,ns,pv,pvc,storageclass -A -o json`` dump holds,
and the PodGroups (and 1.37 CompositePodGroups) of the gang APIs the server serves, listed in
pages, returned as one Kubernetes List for the same reader as a file.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from placer.errors import InputError
from placer.inputs.podgroups import PLUGINS_API
from placer.inputs.workloads import COMPOSITE_API, COMPOSITE_KIND, WORKLOAD_APIS
from placer.kube.client import connect

__all__ = ["PAGE", "read_live"]

PAGE = 500  # objects per list call, as kubectl pages


def _all(kind: str, list_fn: Callable[..., Any], api_version: str = "") -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    token: str | None = None
    while True:
        kwargs: dict[str, Any] = {"limit": PAGE, "_preload_content": False, "_request_timeout": (5, 60)}
        if token:
            kwargs["_continue"] = token
        page = json.loads(list_fn(**kwargs).data)
        for item in page.get("items", []):
            item.setdefault("kind", kind)
            if api_version:
                item.setdefault("apiVersion", api_version)
            items.append(item)
        token = page.get("metadata", {}).get("continue")
        if not token:
            return items


def _pod_groups(custom: client.CustomObjectsApi) -> list[dict[str, Any]]:
    """The PodGroups of the APIs the server serves (the Workload API's in its preferred version,
    scheduler-plugins'), and CompositePodGroups; an API it does not serve (404) holds none."""
    items: list[dict[str, Any]] = []
    lists = [*((v, "PodGroup", "podgroups") for v in WORKLOAD_APIS), (PLUGINS_API, "PodGroup", "podgroups")]
    lists.append((COMPOSITE_API, COMPOSITE_KIND, "compositepodgroups"))
    workload = False
    for api_version, kind, resource in lists:
        if workload and kind == "PodGroup" and api_version in WORKLOAD_APIS:
            continue  # the same objects in another version
        group, version = api_version.split("/")

        def list_fn(group: str = group, version: str = version, resource: str = resource, **kwargs: Any) -> Any:
            return custom.list_cluster_custom_object(group, version, resource, **kwargs)

        try:
            items += _all(kind, list_fn, api_version)
        except ApiException as exc:
            if exc.status != 404:
                raise
            continue
        workload = workload or (kind == "PodGroup" and api_version in WORKLOAD_APIS)
    return items


def read_live(kubeconfig: str | None, context: str | None) -> tuple[str, dict[str, Any]]:
    """(a name for messages, a Kubernetes List) of the cluster the kubeconfig's context points at."""
    source = f"cluster {context}" if context else "cluster (current context)"
    api = connect(kubeconfig, context=context)
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    policy, storage = client.PolicyV1Api(api), client.StorageV1Api(api)
    kinds: list[tuple[str, Callable[..., Any]]] = [
        ("Node", core.list_node),
        ("Pod", core.list_pod_for_all_namespaces),
        ("PodDisruptionBudget", policy.list_pod_disruption_budget_for_all_namespaces),
        ("ReplicaSet", apps.list_replica_set_for_all_namespaces),
        ("Namespace", core.list_namespace),
        ("PersistentVolume", core.list_persistent_volume),
        ("PersistentVolumeClaim", core.list_persistent_volume_claim_for_all_namespaces),
        ("StorageClass", storage.list_storage_class),
    ]
    items: list[dict[str, Any]] = []
    kind = ""
    try:
        for kind, list_fn in kinds:
            items += _all(kind, list_fn)
        kind = "PodGroup"
        items += _pod_groups(client.CustomObjectsApi(api))
    except ApiException as exc:
        raise InputError(source, kind, f"cannot list: {exc.status} {exc.reason}") from None
    except (HTTPError, OSError) as exc:
        raise InputError(source, kind, f"cannot reach the API server: {exc}") from None
    finally:
        api.close()
    return source, {"kind": "List", "apiVersion": "v1", "items": items}
