"""Parsed indexes of the informer caches, kept up to date from the informers' changes.

The controller used to walk every cached object at every tick to find what changed; an index
instead takes only the keys an informer reports changed since the last look (``Informer.drain``)
and parses each object once per resourceVersion, with the same ``placer.inputs`` readers as
``placer solve``. A list (start-up, or after 410 Gone) hands over the whole cache: objects whose
resourceVersion is unchanged keep their parse, the rest are parsed, the missing ones dropped.

``PodIndex`` also keeps the pods waiting for this scheduler (the queue), updated with each pod
that changes, so the tick reads the queue without touching the thousands of bound pods; a pod's
versions that only bind or start it reuse the parse of the version before (``reparse_pod``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from placer.inputs.kubectl import parse_pod, reparse_pod
from placer.kube.informers import Informer
from placer.models import Pod

__all__ = ["ParsedIndex", "PodIndex"]

log = logging.getLogger("placer.controller")
T = TypeVar("T")
Raw = dict[str, Any]


def _version(raw: Raw) -> str:
    meta = raw.get("metadata")
    return str(meta.get("resourceVersion", "")) if isinstance(meta, dict) else ""


class ParsedIndex(Generic[T]):
    """One informer's objects parsed once per resourceVersion, problems logged once per version.
    In the order a list gave them, new ones after them in the order they arrived (an object
    deleted and created again within one look keeps its place). Only an object placer cannot
    identify is left out (a pod's other unreadable fields are isolated to it by ``parse_pod``:
    see ``Pod.problems``)."""

    def __init__(self, kind: str, parse: Callable[[Raw], T]) -> None:
        self.kind = kind
        self._parse = parse
        self._parsed: dict[str, tuple[str, Raw, T | None]] = {}  # key -> (resourceVersion, object, parse)
        self._source: Informer | None = None
        self._values: list[T] | None = None
        self.generation = 0  # bumped whenever a parsed object changes, is added or dropped
        self.parses = 0  # objects parsed so far (each resourceVersion once)

    def update(self, informer: Informer | None) -> bool:
        """Take in what changed in ``informer`` (None: the kind is not served: empty); True if
        anything did."""
        changed: dict[str, Raw | None]
        if informer is None:
            full, changed = True, {}
        else:
            full, changed = informer.drain()
            if informer is not self._source:  # another informer (a test swaps them): take it whole
                if not full:
                    full, changed = True, {key: informer.get(key) for key in informer.keys()}  # noqa: SIM118 (Informer.keys, not a dict)
                self._source = informer
        touched = False
        if full:
            for key in [k for k in self._parsed if k not in changed]:
                self._drop(key)
                touched = True
            order = list(changed)
        for key, raw in changed.items():
            touched = self._take(key, raw) or touched
        if full and list(self._parsed) != order:  # the informer's order, as a list gives it
            self._parsed = {key: self._parsed[key] for key in order if key in self._parsed}
            touched = True
        if touched:
            self.generation += 1
            self._values = None
        return touched

    def _take(self, key: str, raw: Raw | None) -> bool:
        if raw is None:
            if key not in self._parsed:
                return False
            self._drop(key)
            return True
        version = _version(raw)
        cached = self._parsed.get(key)
        if cached is not None and cached[0] == version:
            return False
        old = cached[2] if cached is not None else None
        before = (cached[1], old) if cached is not None and old is not None else None
        try:
            new: T | None = self._parse_version(raw, before)
        except Exception as exc:
            log.warning("skipping %s %s: %s", self.kind, key, exc)
            new = None
        self.parses += 1
        for problem in getattr(new, "problems", ()):
            log.warning("%s %s: %s", self.kind, key, problem)
        self._parsed[key] = (version, raw, new)
        self._changed(key, old, new)
        return True

    def _drop(self, key: str) -> None:
        old = self._parsed.pop(key)[2]
        self._changed(key, old, None)

    def _parse_version(self, raw: Raw, before: tuple[Raw, T] | None) -> T:
        """Parse a new version (``before``: the previous one's object and parse, if readable)."""
        return self._parse(raw)

    def _changed(self, key: str, old: T | None, new: T | None) -> None:
        """A subclass's hook: the object at ``key`` is now ``new`` (None: gone or unreadable)."""

    def values(self) -> list[T]:
        """Every readable object (a list built once per generation; do not modify it)."""
        if self._values is None:
            self._values = [obj for _, _, obj in self._parsed.values() if obj is not None]
        return self._values

    def get(self, key: str) -> T | None:
        found = self._parsed.get(key)
        return found[2] if found is not None else None

    def __len__(self) -> int:
        return len(self._parsed)


class PodIndex(ParsedIndex[Pod]):
    """Pods parsed once per resourceVersion, and the queue: those ``waiting`` for this scheduler
    (``Pod.awaits``) and in its scope, kept as pods change; and how many members of each gang are
    bound and running (``running_members``), so that a gang's size is known without walking the
    bound pods."""

    def __init__(self, scheduler_name: str, in_scope: Callable[[Pod], bool]) -> None:
        super().__init__("Pod", parse_pod)
        self._scheduler = scheduler_name
        self._in_scope = in_scope
        self.waiting: dict[str, Pod] = {}
        self.running_members: dict[str, int] = {}  # gang (``Pod.gang_key``) -> its members running

    def _parse_version(self, raw: Raw, before: tuple[Raw, Pod] | None) -> Pod:
        """A pod bound or started since its last version keeps the rest of its parse."""
        return reparse_pod(raw, before)

    def _changed(self, key: str, old: Pod | None, new: Pod | None) -> None:
        for pod, step in ((old, -1), (new, 1)):
            if pod is not None and pod.gang_key is not None and pod.running:
                count = self.running_members.get(pod.gang_key, 0) + step
                if count:
                    self.running_members[pod.gang_key] = count
                else:
                    del self.running_members[pod.gang_key]
        if new is not None and new.awaits(self._scheduler) and self._in_scope(new):
            self.waiting[key] = new
        else:
            self.waiting.pop(key, None)
