"""List-and-watch caches of every kind the registry (``placer.inputs.kinds``) marks as watched:
Nodes, Pods, PodDisruptionBudgets, ReplicaSets, Jobs, Namespaces, PersistentVolumes,
PersistentVolumeClaims and StorageClasses, and the PodGroups that declare gangs (the Workload
API's and scheduler-plugins') where the API server serves them.

Each informer lists once, in pages (``limit``/``continue``; raw JSON, so the same readers as
``placer solve`` parse it), then watches from the list's resourceVersion in a thread, for ever:

- every watch asks the server to end it after ``timeoutSeconds`` and has a client read timeout a
  little longer, so a watch that stops delivering without closing raises and is restarted;
- a watch that ends (timeout, dropped connection, any error) is resumed from the last
  resourceVersion it delivered; bookmarks keep that version fresh on quiet kinds;
- only 410 Gone (the version is too old) and 504 "too large resource version" (the server is
  behind the version, e.g. after an etcd restore) make it list again, paged. There is no periodic
  relist;
- every failure (a list or watch error, a 410 or 504, a watch that ends at once having delivered
  nothing) backs the loop off, exponentially with jitter up to ``BACKOFF_MAX``, until a watch
  delivers again: a server that answers every watch with 410, or ends it at once, gets a request
  every few seconds, not a hot loop. ``failing_since`` tells /healthz how long the loop has failed.

Cached objects lose ``metadata.managedFields`` (server-side apply bookkeeping, most of a pod's
bytes; nothing in placer reads it). The keys changed since the last drain are bounded: past
``DIRTY_SLACK`` more than the cache holds (a standby nobody drains, churning names), the next
drain says everything may have changed instead.

Consumers read the cache whole (``items``) or follow it incrementally: ``drain`` hands over the
keys changed since the last drain (or says everything may have changed, after a list), so a
reader that keeps a parsed index touches only what changed. One consumer drains an informer.

The PodGroup kinds are optional: at start-up discovery (``GET /apis/GROUP/VERSION``) says whether
the server serves them; a kind it does not serve gets no informer and no request (placer runs as
without it), and is looked for again only when the controller restarts. Of the Workload API's
PodGroup versions only the first served is watched (the same objects).

``ListWatch`` is the I/O edge (``ApiListWatch`` on the API; tests pass a fake).
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from placer.inputs.kinds import KINDS, WATCH, Kind
from placer.kube.policy import Budget, Outcome, Policy, Timeouts

__all__ = [
    "BETA_POD_GROUP",
    "COMPOSITE_POD_GROUP",
    "PLUGINS_POD_GROUP",
    "WATCHED",
    "WORKLOAD_POD_GROUP",
    "ApiListWatch",
    "GoneError",
    "Informer",
    "ListWatch",
    "TooLargeError",
    "informers",
    "optional_informers",
    "served",
]

log = logging.getLogger("placer.kube.informers")
Raw = dict[str, Any]
PAGE = 500
BACKOFF_FIRST, BACKOFF_MAX = 0.5, 30.0  # seconds between attempts of a failing loop (jittered)
MIN_WATCH = 1.0  # a watch that ends sooner having delivered nothing is a failure
DIRTY_SLACK = 1000  # changed keys kept beyond the cache's size before a drain says "everything"
# Informer names of the gang kinds (``placer.inputs.kinds``; a test stands in for their watch).
WORKLOAD_POD_GROUP = "PodGroup.scheduling.k8s.io"
PLUGINS_POD_GROUP = "PodGroup.scheduling.x-k8s.io"
BETA_POD_GROUP = "PodGroup.scheduling.k8s.io/v1beta1"
COMPOSITE_POD_GROUP = "CompositePodGroup.scheduling.k8s.io"
WATCHED = [k for k in KINDS if WATCH in k.sources]  # every kind the controller keeps a cache of
assert {WORKLOAD_POD_GROUP, PLUGINS_POD_GROUP, BETA_POD_GROUP, COMPOSITE_POD_GROUP} <= {k.name for k in WATCHED}


class GoneError(Exception):
    """410: the resourceVersion is older than the server keeps; list again."""


class TooLargeError(GoneError):
    """504 "Too large resource version": the server is behind the version (its etcd was restored
    from a backup); resuming from it fails for ever, so list again (a consistent read)."""


def too_large(code: object, message: str) -> bool:
    return code == 504 and "too large resource version" in message.lower()


# What the cache drops of a Pod: nothing ``placer.inputs`` reads (tests check a pod parses the same).
UNREAD_CONTAINER = frozenset(
    {
        "args", "command", "env", "envFrom", "image", "imagePullPolicy", "lifecycle", "livenessProbe",
        "readinessProbe", "startupProbe", "terminationMessagePath", "terminationMessagePolicy",
        "volumeDevices", "volumeMounts", "workingDir",
    }
)  # fmt: skip
READ_CONTAINER_STATUS = ("name", "resources", "allocatedResources")
READ_VOLUME = frozenset({"persistentVolumeClaim", "ephemeral"})
READ_CONDITIONS = frozenset({"PodScheduled", "PodResizePending", "DisruptionTarget"})


def _strip(obj: Raw) -> Raw:
    """The object as cached: without managedFields (about 28 KB of a typical pod, never read) and,
    for a Pod, without the container fields and status details no reader looks at."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    spec, status = obj.get("spec"), obj.get("status")
    if obj.get("kind") != "Pod" or not isinstance(spec, dict):
        return obj
    for key in ("containers", "initContainers"):
        for c in spec.get(key) or () if isinstance(spec.get(key), list) else ():
            if isinstance(c, dict):
                for field in UNREAD_CONTAINER.intersection(c):
                    del c[field]
    volumes = spec.get("volumes")
    if isinstance(volumes, list):  # only claims are read (``pod_volume_claims``)
        spec["volumes"] = [v for v in volumes if not isinstance(v, dict) or READ_VOLUME.intersection(v)]
    if isinstance(status, dict):
        conditions = status.get("conditions")
        if isinstance(conditions, list):
            kept = [c for c in conditions if not isinstance(c, dict) or c.get("type") in READ_CONDITIONS]
            status["conditions"] = kept
        for key in ("containerStatuses", "initContainerStatuses"):
            group = status.get(key)
            if isinstance(group, list):
                status[key] = [
                    {k: v for k, v in cs.items() if k in READ_CONTAINER_STATUS} if isinstance(cs, dict) else cs
                    for cs in group
                ]
    return obj


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
        rng: Callable[[], float] = random.random,
    ) -> None:
        self.kind = kind
        self._lw = lw
        self._watch_timeout = watch_timeout
        self._clock = clock
        self._rng = rng
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
        self.failures = 0  # failures in a row (list or watch), reset when a watch delivers
        self.failing_since: float | None = None  # clock time of the first of them
        self.last_error = ""

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
                    items[_key(obj)] = _strip(obj)
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

    def watch_once(self) -> int:
        """One watch from ``version`` until the server ends it; events update the cache. How many
        events (bookmarks included) it delivered."""
        assert self.version is not None
        delivered = 0
        for event in self._lw.watch(version=self.version, timeout=self._watch_timeout):
            if self._stop.is_set():
                return delivered
            kind, obj = event.get("type"), event.get("object") or {}
            self.last_event = self._clock()
            if kind == "ERROR":
                code, message = obj.get("code"), str(obj.get("message") or "")
                if code == 410:
                    raise GoneError(message or "resourceVersion too old")
                if too_large(code, message):
                    raise TooLargeError(message)
                raise RuntimeError(f"watch error {code}: {message}")
            delivered += 1
            self.version = str((obj.get("metadata") or {}).get("resourceVersion") or self.version)
            if kind == "BOOKMARK":
                continue
            obj.setdefault("kind", self.kind)
            key = _key(obj)
            with self._lock:
                if kind == "DELETED":
                    self._items.pop(key, None)
                else:
                    self._items[key] = _strip(obj)
                self._dirty[key] = None
                if len(self._dirty) > len(self._items) + DIRTY_SLACK:  # nobody drains: say "everything"
                    self._dirty.clear()
                    self._reset = True
                self.changes += 1
        return delivered

    def step(self) -> bool | None:
        """List if needed, else watch once. True: a watch delivered (or ran its course); False: a
        410/504 (list again) or a watch that ended at once with nothing; None: a list. Raises what
        the watch or list raised. The loop backs off on False and on a raise."""
        if self.version is None:
            self.version = self.relist()
            if self.version is None:
                raise RuntimeError("list failed")
            return None
        started = self._clock()
        try:
            delivered = self.watch_once()
        except GoneError as exc:
            why = "is ahead of the server" if isinstance(exc, TooLargeError) else "expired"
            log.info("%s watch: resourceVersion %s %s; listing again", self.kind, self.version, why)
            self.version = None
            self.last_error = f"{type(exc).__name__}: {exc}"
            return False
        if delivered or self._clock() - started >= MIN_WATCH:
            return True
        self.last_error = "the watch ended at once without an event"
        return False

    def backoff(self) -> float:
        """The pause after the ``failures``-th failure in a row: doubling, capped, jittered."""
        full = min(BACKOFF_MAX, BACKOFF_FIRST * 2.0 ** max(0, self.failures - 1))
        return full * (0.5 + 0.5 * self._rng())

    def once(self) -> float:
        """One step of the loop; how long to pause before the next (0: go on at once)."""
        try:
            ok = self.step()
        except Exception as exc:
            ok = False
            self.last_error = f"{type(exc).__name__}: {exc}"
        if ok is None:
            return 0.0
        if ok:
            self.failures, self.failing_since, self.last_error = 0, None, ""
            return 0.0
        self.failures += 1
        if self.failing_since is None:
            self.failing_since = self._clock()
        delay = self.backoff()
        log.warning("%s watch: %s; again from %s in %.1fs", self.kind, self.last_error, self.version, delay)
        return delay

    def _run(self) -> None:
        while not self._stop.is_set():
            delay = self.once()
            if delay > 0:
                self._stop.wait(delay)


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
        self._policy.last_answer = time.monotonic()  # an answer of any status: the API is there
        try:
            if resp.status == 410:
                raise GoneError(f"watch {self._path}: 410")
            if resp.status == 504 and too_large(504, resp.data[:2000].decode("utf-8", "replace")):
                raise TooLargeError(f"watch {self._path}: 504 too large resource version")
            if resp.status != 200:
                raise RuntimeError(f"watch {self._path}: HTTP {resp.status} {resp.data[:200]!r}")
            buffer = b""
            for chunk in resp.stream(amt=None, decode_content=False):
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if line.strip():
                        yield json.loads(line)
        finally:
            resp.release_conn()


def served(http: Any, policy: Policy, kind: Kind, discovered: dict[str, Any] | None = None) -> bool:
    """Whether the API server serves ``kind`` (discovery of its group/version, asked once per
    ``discovered`` cache). A group the server does not know answers 404; any other failure is
    logged once and counts as not served."""
    cache: dict[str, Any] = {} if discovered is None else discovered
    group_version = kind.group_path
    if group_version not in cache:
        out = policy.call(f"discover {group_version}", http.call("GET", group_version), budget=Budget(attempts=3))
        if not out.ok and out.status != 404:
            log.warning(
                "discovery of %s failed (%s %s); its objects are not read", group_version, out.result, out.reason
            )
        cache[group_version] = (out.json() or {}) if out.ok else None
    data = cache[group_version]
    if data is None:
        return False
    return any(r.get("name") == kind.plural for r in data.get("resources") or [] if isinstance(r, dict))


def _informer(http: Any, policy: Policy, kind: Kind, watch_timeout: int) -> Informer:
    return Informer(kind.name, ApiListWatch(http, policy, kind.path), watch_timeout=watch_timeout)


def informers(http: Any, policy: Policy, *, watch_timeout: int = 60) -> dict[str, Informer]:
    """An informer per watched kind that every server serves (``placer.inputs.kinds``)."""
    return {k.name: _informer(http, policy, k, watch_timeout) for k in WATCHED if not k.optional}


def optional_informers(http: Any, policy: Policy, *, watch_timeout: int = 60) -> dict[str, Informer]:
    """An informer per optional watched kind the server serves (discovered now, once); of a
    family, only the first version served."""
    out = {}
    discovered: dict[str, Any] = {}
    families: set[str] = set()
    for kind in WATCHED:
        if not kind.optional or (kind.family and kind.family in families):
            continue
        if served(http, policy, kind, discovered):
            log.info("%s is served: gangs are read from its %s", kind.group_path, kind.plural)
            out[kind.name] = _informer(http, policy, kind, watch_timeout)
            if kind.family:
                families.add(kind.family)
    return out
