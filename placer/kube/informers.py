"""List-and-watch caches of Nodes, Pods, PodDisruptionBudgets, ReplicaSets, Namespaces,
PersistentVolumes, PersistentVolumeClaims and StorageClasses, and of the PodGroups that declare
gangs (the Workload API's and scheduler-plugins') where the API server serves them.

Each informer lists once, in pages (``limit``/``continue``; raw JSON, so the same readers as
``placer solve`` parse it), then watches from the list's resourceVersion in a thread, for ever:

- every watch asks the server to end it after ``timeoutSeconds`` and has a client read timeout a
  little longer, so a watch that stops delivering without closing raises and is restarted;
- a watch that ends (timeout, dropped connection, any error) is resumed from the last
  resourceVersion it delivered; bookmarks keep that version fresh on quiet kinds;
- only 410 Gone (the version is too old) makes it list again, paged. There is no periodic relist.

Consumers read the cache whole (``items``) or follow it incrementally: ``drain`` hands over the
keys changed since the last drain (or says everything may have changed, after a list), so a
reader that keeps a parsed index touches only what changed. One consumer drains an informer.

The PodGroup kinds are optional: at start-up discovery (``GET /apis/GROUP/VERSION``) says whether
the server serves them; a kind it does not serve gets no informer and no request (placer runs as
without it), and is looked for again only when the controller restarts.

``ListWatch`` is the I/O edge (``ApiListWatch`` on the API; tests pass a fake).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from placer.kube.policy import Budget, Outcome, Policy, Timeouts

__all__ = [
    "OPTIONAL",
    "PATHS",
    "PLUGINS_POD_GROUP",
    "WORKLOAD_POD_GROUP",
    "ApiListWatch",
    "GoneError",
    "Informer",
    "ListWatch",
    "informers",
    "optional_informers",
    "served",
]

log = logging.getLogger("placer.kube.informers")
Raw = dict[str, Any]
PAGE = 500
PATHS = {
    "Node": "/api/v1/nodes",
    "Pod": "/api/v1/pods",
    "PodDisruptionBudget": "/apis/policy/v1/poddisruptionbudgets",
    "ReplicaSet": "/apis/apps/v1/replicasets",
    # Jobs: whether a Job's pods may move when rebalancing, and how their replacements come.
    "Job": "/apis/batch/v1/jobs",
    # Namespace labels, for namespaceSelector in pod affinity terms.
    "Namespace": "/api/v1/namespaces",
    # Volumes: a bound volume's node affinity, and which unbound claims wait for their first consumer.
    "PersistentVolume": "/api/v1/persistentvolumes",
    "PersistentVolumeClaim": "/api/v1/persistentvolumeclaims",
    "StorageClass": "/apis/storage.k8s.io/v1/storageclasses",
}

# Gangs declared by objects (``placer.inputs.podgroups``): informer name -> (group/version path, resource).
WORKLOAD_POD_GROUP = "PodGroup.scheduling.k8s.io"
PLUGINS_POD_GROUP = "PodGroup.scheduling.x-k8s.io"
# Kubernetes 1.37 (placer.inputs.workloads): PodGroups in v1beta1, CompositePodGroups in v1alpha3.
BETA_POD_GROUP = "PodGroup.scheduling.k8s.io/v1beta1"
COMPOSITE_POD_GROUP = "CompositePodGroup.scheduling.k8s.io"
OPTIONAL = {
    WORKLOAD_POD_GROUP: ("/apis/scheduling.k8s.io/v1alpha2", "podgroups"),
    PLUGINS_POD_GROUP: ("/apis/scheduling.x-k8s.io/v1alpha1", "podgroups"),
    BETA_POD_GROUP: ("/apis/scheduling.k8s.io/v1beta1", "podgroups"),
    COMPOSITE_POD_GROUP: ("/apis/scheduling.k8s.io/v1alpha3", "compositepodgroups"),
}


class GoneError(Exception):
    """410: the resourceVersion is older than the server keeps; list again."""


class ListWatch(Protocol):
    def list(self, *, limit: int, cont: str | None) -> Outcome: ...

    def watch(self, *, version: str, timeout: int) -> Iterator[Raw]:
        """Watch events from ``version``; raises ``GoneError`` on 410, anything else on other trouble."""
        ...


def _key(obj: Raw) -> str:
    meta = obj.get("metadata", {})
    ns = meta.get("namespace")
    return f"{ns}/{meta['name']}" if ns else str(meta["name"])


class Informer:
    def __init__(
        self,
        kind: str,
        lw: ListWatch,
        *,
        watch_timeout: int = 60,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kind = kind
        self._lw = lw
        self._watch_timeout = watch_timeout
        self._clock = clock
        self._lock = threading.Lock()
        self._items: dict[str, Raw] = {}
        self._dirty: dict[str, None] = {}  # keys changed since the last drain, in the order first changed
        self._reset = True  # the whole cache changed (a list) since the last drain
        self._synced = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"informer-{kind}", daemon=True)
        self.changes = 0  # bumped on every event (cheap change detection)
        self.version: str | None = None  # the last resourceVersion delivered (None: list next)
        self.last_event: float | None = None  # clock time of the last list or watch event, bookmarks included
        self.lists = 0  # full (paged) lists so far

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

    def keys(self) -> list[str]:
        with self._lock:
            return list(self._items)

    def get(self, key: str) -> Raw | None:
        with self._lock:
            return self._items.get(key)

    def replace(self, items: dict[str, Raw]) -> None:
        """The whole cache at once, as a list gives it (tests stand in for the list with it)."""
        with self._lock:
            self._items = items
            self._dirty.clear()
            self._reset = True
            self.changes += 1

    def drain(self) -> tuple[bool, dict[str, Raw | None]]:
        """What changed since the last drain: (whether everything may have, i.e. a list replaced
        the cache; the changed keys' objects now, None for a deleted one). With True the dict
        holds every object, and a consumer drops whatever it is missing."""
        with self._lock:
            if self._reset:
                self._reset = False
                self._dirty.clear()
                return True, dict(self._items)
            changed: dict[str, Raw | None] = {key: self._items.get(key) for key in self._dirty}
            self._dirty.clear()
            return False, changed

    def relist(self) -> str | None:
        """List every object, page by page, and replace the cache at once. None: it failed (the
        cache is kept as it was). An expired continue token starts the list over, once."""
        for _ in range(2):
            items: dict[str, Raw] = {}
            cont: str | None = None
            while True:
                out = self._lw.list(limit=PAGE, cont=cont)
                if not out.ok:
                    break
                data = out.json() or {}
                for obj in data.get("items") or []:
                    obj.setdefault("kind", self.kind)
                    items[_key(obj)] = obj
                meta = data.get("metadata") or {}
                cont = meta.get("continue") or None
                if cont is None:
                    self.replace(items)
                    self.lists += 1
                    self.last_event = self._clock()
                    self._synced.set()
                    return str(meta.get("resourceVersion", ""))
            if out.status != 410:
                log.warning("%s list failed: %s %s", self.kind, out.result, out.reason)
                return None
        return None

    def watch_once(self) -> None:
        """One watch from ``version`` until the server ends it; events update the cache."""
        assert self.version is not None
        for event in self._lw.watch(version=self.version, timeout=self._watch_timeout):
            if self._stop.is_set():
                return
            kind, obj = event.get("type"), event.get("object") or {}
            self.last_event = self._clock()
            if kind == "ERROR":
                if obj.get("code") == 410:
                    raise GoneError(obj.get("message", "resourceVersion too old"))
                raise RuntimeError(f"watch error {obj.get('code')}: {obj.get('message')}")
            self.version = str((obj.get("metadata") or {}).get("resourceVersion") or self.version)
            if kind == "BOOKMARK":
                continue
            obj.setdefault("kind", self.kind)
            key = _key(obj)
            with self._lock:
                if kind == "DELETED":
                    self._items.pop(key, None)
                else:
                    self._items[key] = obj
                self._dirty[key] = None
                self.changes += 1

    def step(self) -> None:
        """List if needed, else watch once; raises what the watch raised (the loop backs off)."""
        if self.version is None:
            self.version = self.relist()
            if self.version is None:
                raise RuntimeError("list failed")
            return
        try:
            self.watch_once()
        except GoneError:
            log.info("%s watch: resourceVersion %s expired; listing again", self.kind, self.version)
            self.version = None

    def _run(self) -> None:
        backoff = 0.5
        while not self._stop.is_set():
            try:
                self.step()
                backoff = 0.5
            except Exception as exc:
                log.warning("%s watch: %s; resuming from %s in %.1fs", self.kind, exc, self.version, backoff)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 30.0)


class ApiListWatch:
    """List pages through the call policy; watches streamed with a read timeout a little longer
    than the server-side ``timeoutSeconds`` (``http`` is ``placer.kube.client.Http``)."""

    def __init__(self, http: Any, policy: Policy, path: str, *, margin: float = 10.0) -> None:
        self._http, self._policy, self._path, self._margin = http, policy, path, margin
        self._budget = Budget(attempts=3, deadline=120.0, read=60.0)

    def list(self, *, limit: int, cont: str | None) -> Outcome:
        query: dict[str, Any] = {"limit": limit}
        if cont:
            query["continue"] = cont
        call = self._http.call("GET", self._path, query=query)
        return self._policy.call(f"list {self._path}", call, budget=self._budget)

    def watch(self, *, version: str, timeout: int) -> Iterator[Raw]:
        query = {"watch": "true", "resourceVersion": version, "timeoutSeconds": timeout, "allowWatchBookmarks": "true"}
        resp = self._http.stream(self._path, Timeouts(connect=5.0, read=timeout + self._margin), query=query)
        try:
            if resp.status == 410:
                raise GoneError(f"watch {self._path}: 410")
            if resp.status != 200:
                raise RuntimeError(f"watch {self._path}: HTTP {resp.status} {resp.data[:200]!r}")
            self._policy.last_answer = time.monotonic()
            buffer = b""
            for chunk in resp.stream(amt=None, decode_content=False):
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if line.strip():
                        yield json.loads(line)
        finally:
            resp.release_conn()


def served(http: Any, policy: Policy, group_version: str, resource: str) -> bool:
    """Whether the API server serves ``resource`` in ``group_version`` (discovery). A group the
    server does not know answers 404; any other failure is logged once and counts as not served."""
    out = policy.call(f"discover {group_version}", http.call("GET", group_version), budget=Budget(attempts=3))
    if not out.ok:
        if out.status != 404:
            log.warning(
                "discovery of %s failed (%s %s); its objects are not read", group_version, out.result, out.reason
            )
        return False
    data = out.json() or {}
    return any(r.get("name") == resource for r in data.get("resources") or [] if isinstance(r, dict))


def informers(http: Any, policy: Policy, *, watch_timeout: int = 60) -> dict[str, Informer]:
    """An informer per kind of ``PATHS``."""
    return {
        kind: Informer(kind, ApiListWatch(http, policy, path), watch_timeout=watch_timeout)
        for kind, path in PATHS.items()
    }


def optional_informers(http: Any, policy: Policy, *, watch_timeout: int = 60) -> dict[str, Informer]:
    """An informer per kind of ``OPTIONAL`` the server serves (discovered now, once)."""
    out = {}
    for kind, (group_version, resource) in OPTIONAL.items():
        if served(http, policy, group_version, resource):
            log.info("%s is served: gangs are read from its %s", group_version, resource)
            path = f"{group_version}/{resource}"
            out[kind] = Informer(kind, ApiListWatch(http, policy, path), watch_timeout=watch_timeout)
    return out
