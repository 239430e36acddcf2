"""List-and-watch caches of Nodes, Pods, PodDisruptionBudgets, ReplicaSets, Namespaces,
PersistentVolumes, PersistentVolumeClaims and StorageClasses.

Each informer lists (raw JSON, so the same readers as ``placer solve`` parse it), then watches
from the list's resourceVersion in a thread; on 410 Gone it lists again, on any other watch
error it backs off and resumes; every ``resync`` seconds it lists again regardless.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

__all__ = ["Informer", "informers"]

log = logging.getLogger("placer.kube.informers")
Raw = dict[str, Any]


def _key(obj: Raw) -> str:
    meta = obj.get("metadata", {})
    ns = meta.get("namespace")
    return f"{ns}/{meta['name']}" if ns else str(meta["name"])


class Informer:
    def __init__(self, kind: str, list_fn: Callable[..., Any], *, resync: float, namespace: str | None = None) -> None:
        self.kind = kind
        self._list_fn = list_fn
        self._namespace = namespace
        self._resync = resync
        self._lock = threading.Lock()
        self._items: dict[str, Raw] = {}
        self._synced = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"informer-{kind}", daemon=True)
        self.changes = 0  # bumped on every event (cheap change detection)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def wait_synced(self, timeout: float) -> bool:
        return self._synced.wait(timeout)

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    def items(self) -> list[Raw]:
        with self._lock:
            return list(self._items.values())

    def get(self, key: str) -> Raw | None:
        with self._lock:
            return self._items.get(key)

    def _kwargs(self) -> dict[str, Any]:
        return {"namespace": self._namespace} if self._namespace else {}

    def _list(self) -> str:
        resp = self._list_fn(**self._kwargs(), _preload_content=False)
        data = json.loads(resp.data)
        items = {}
        for obj in data.get("items", []):
            obj.setdefault("kind", self.kind)
            items[_key(obj)] = obj
        with self._lock:
            self._items = items
            self.changes += 1
        self._synced.set()
        return str(data["metadata"]["resourceVersion"])

    def _run(self) -> None:
        backoff = 0.5
        while not self._stop.is_set():
            try:
                version = self._list()
                listed = time.monotonic()
                backoff = 0.5
                while not self._stop.is_set() and time.monotonic() - listed < self._resync:
                    version = self._watch(version, timeout=min(60.0, self._resync))
            except ApiException as exc:
                if exc.status != 410:
                    log.warning("%s watch failed: %s; retrying in %.1fs", self.kind, exc.reason, backoff)
                    self._stop.wait(backoff)
                    backoff = min(backoff * 2, 30.0)
            except Exception as exc:
                log.warning("%s watch error: %s; retrying in %.1fs", self.kind, exc, backoff)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 30.0)

    def _watch(self, version: str, timeout: float) -> str:
        w = watch.Watch()
        for event in w.stream(
            self._list_fn,
            **self._kwargs(),
            resource_version=version,
            timeout_seconds=int(timeout),
            allow_watch_bookmarks=True,
        ):
            if self._stop.is_set():
                w.stop()
                break
            kind, obj = event["type"], event["raw_object"]
            if kind == "ERROR":
                code = obj.get("code")
                raise ApiException(status=code or 500, reason=obj.get("message", "watch error"))
            version = obj.get("metadata", {}).get("resourceVersion", version)
            if kind == "BOOKMARK":
                continue
            obj.setdefault("kind", self.kind)
            with self._lock:
                if kind == "DELETED":
                    self._items.pop(_key(obj), None)
                else:
                    self._items[_key(obj)] = obj
                self.changes += 1
        return version


def informers(api: client.ApiClient, *, resync: float) -> dict[str, Informer]:
    core = client.CoreV1Api(api)
    policy = client.PolicyV1Api(api)
    apps = client.AppsV1Api(api)
    storage = client.StorageV1Api(api)
    return {
        "Node": Informer("Node", core.list_node, resync=resync),
        "Pod": Informer("Pod", core.list_pod_for_all_namespaces, resync=resync),
        "PodDisruptionBudget": Informer(
            "PodDisruptionBudget", policy.list_pod_disruption_budget_for_all_namespaces, resync=resync
        ),
        "ReplicaSet": Informer("ReplicaSet", apps.list_replica_set_for_all_namespaces, resync=resync),
        # Namespace labels, for namespaceSelector in pod affinity terms.
        "Namespace": Informer("Namespace", core.list_namespace, resync=resync),
        # Volumes: a bound volume's node affinity, and which unbound claims wait for their first consumer.
        "PersistentVolume": Informer("PersistentVolume", core.list_persistent_volume, resync=resync),
        "PersistentVolumeClaim": Informer(
            "PersistentVolumeClaim", core.list_persistent_volume_claim_for_all_namespaces, resync=resync
        ),
        "StorageClass": Informer("StorageClass", storage.list_storage_class, resync=resync),
    }
