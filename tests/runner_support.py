"""Test support for the controller's runner: a recording stand-in for its API writes and
informer caches filled by hand (a unit test stands in for the watch)."""

from __future__ import annotations

import threading
from typing import Any

from kubernetes import client

from placer.kube.actions import Outcome
from placer.kube.runner import Runner
from placer.models import ControllerConfig

__all__ = ["FakeActions", "feed", "make_runner"]


class FakeActions:
    """Records the controller's writes; ``refuse`` makes the claim patch answer that status."""

    def __init__(self, refuse: int = 0) -> None:
        self.refuse = refuse
        self.calls: list[tuple[str, ...]] = []
        self.lock = threading.Lock()

    def select_node(self, claim: str, node: str) -> Outcome:
        with self.lock:
            self.calls.append(("select_node", claim, node))
        return Outcome(ok=False, status=self.refuse, reason="Forbidden") if self.refuse else Outcome(ok=True)

    def bind(self, key: str, node: str, uid: str | None = None) -> Outcome:
        with self.lock:
            self.calls.append(("bind", key, node))
        return Outcome(ok=True)

    def unschedulable(self, key: str, message: str) -> Outcome:
        with self.lock:
            self.calls.append(("unschedulable", key, message))
        return Outcome(ok=True)

    def event(self, key: str, uid: str, *, reason: str, note: str, kind: str = "Normal", **_: Any) -> None:
        with self.lock:
            self.calls.append(("event", key, reason, note))


def make_runner(actions: FakeActions | None = None, **cfg: Any) -> Runner:
    r = Runner(client.ApiClient(client.Configuration()), ControllerConfig.model_validate(cfg), "test")
    if actions is not None:
        r.actions = actions  # type: ignore[assignment]
    return r


VERSIONS = iter(range(1, 1_000_000))


def feed(r: Runner, kind: str, *items: dict[str, Any]) -> None:
    """Replace an informer's cache, as a relist would (every object with a new resourceVersion)."""
    inf = r.informers[kind]
    for item in items:
        item.setdefault("metadata", {})["resourceVersion"] = str(next(VERSIONS))
    inf.replace(  # a unit test stands in for the list
        {
            (f"{i['metadata']['namespace']}/" if i["metadata"].get("namespace") else "") + i["metadata"]["name"]: i
            for i in items
        }
    )
