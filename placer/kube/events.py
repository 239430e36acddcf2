"""Events sent the way kube-scheduler's event broadcaster sends them: off the scheduling path,
through a client and a rate limiter of their own, and aggregated.

``EventRecorder.record`` never blocks: it queues the event and returns. A few sender threads post
them (events.k8s.io/v1) through the recorder's own ``Http`` (its own connection pool) and its own
token bucket, so a burst of Scheduled events never delays a bind, and binds never starve events.

Aggregation, as client-go's event recorder does it: an event identical to one already sent (same
pod and UID, reason, note, type and action) within ``SERIES_WINDOW`` updates that event's
``series`` (count, lastObservedTime) with a merge patch instead of creating a new Event; repeats
that arrive while one is still queued are merged into it, so a pod re-reported every batch costs
one write per send, not one object per report. A full queue drops the newest event (counted), as
the broadcaster's bounded channel does: events are best effort and never hold scheduling up.

An event never names a pod of another namespace (kube-scheduler treated a victim's event naming its
preemptor in another namespace as a leak): every ``namespace/name`` in a note that is a pod of a
namespace other than the event's is replaced by "a pod in another namespace" before it is queued.

Every write still goes through the call policy: the leader's fence applies (a replica that may no
longer write sends no event), and a create whose answer was lost is not sent again.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from placer.kube.policy import Budget, Outcome, Policy, Result
from placer.kube.ratelimit import TokenBucket
from placer.kube.sendqueue import SendQueue

__all__ = ["EVENT_BUDGET", "EventRecorder"]

log = logging.getLogger("placer.kube.events")
EVENT_BUDGET = Budget(attempts=2, deadline=5.0, connect=2.0, read=5.0)
MERGE = "application/merge-patch+json"
SERIES_WINDOW = 360.0  # client-go's events: an isomorphic event within 6 minutes joins the series
KNOWN_MAX = 4096  # sent events remembered for aggregation (least recently seen forgotten first)
QUEUE_MAX = 1000  # client-go's broadcaster queues at most 1000 events
OTHER = "a pod in another namespace"
# A ``namespace/name`` key: a DNS label, a slash, a DNS subdomain (not inside a longer token).
_KEY = re.compile(r"(?<![\w./-])([a-z0-9](?:[-a-z0-9]*[a-z0-9])?)/([a-z0-9](?:[-a-z0-9.]*[a-z0-9])?)(?![\w/-])")


def redact(note: str, namespace: str, is_pod: Callable[[str], bool]) -> str:
    """``note`` with every pod of a namespace other than ``namespace`` it names replaced by ``OTHER``."""

    def one(match: re.Match[str]) -> str:
        key = match.group(0)
        return OTHER if match.group(1) != namespace and is_pod(key) else key

    return _KEY.sub(one, note)


@dataclass(frozen=True)
class _Identity:
    """What makes two events the same event (client-go's isomorphism: object, reason, message...)."""

    key: str  # namespace/name of the Event's object (a Node's events live in "default")
    uid: str
    reason: str
    note: str
    kind: str
    action: str
    regarding: str = "Pod"  # the object's kind: Pod, or Node (cluster-scoped)


@dataclass
class _Sent:
    name: str
    count: int
    first: float  # monotonic time of the first occurrence


def _stamp() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class EventRecorder(SendQueue):
    def __init__(
        self,
        http: Any,
        policy: Policy,
        *,
        scheduler_name: str,
        identity: str,
        qps: float,
        burst: int,
        dry_run: bool = False,
        senders: int = 4,
        queue_max: int = QUEUE_MAX,
        clock: Callable[[], float] = time.monotonic,
        counted: Callable[[str], None] | None = None,
        is_pod: Callable[[str], bool] = lambda key: False,
    ) -> None:
        super().__init__()
        self.http = http  # placer.kube.client.Http on a client of its own (tests pass a fake)
        self.policy = policy
        self.limit = TokenBucket(qps, burst)
        self.scheduler_name, self.identity, self.dry_run = scheduler_name, identity, dry_run
        self._senders, self._queue_max, self._clock = senders, queue_max, clock
        self._counted = counted or (lambda _result: None)
        self._is_pod = is_pod  # whether a ``namespace/name`` in a note is a pod (of the cache)
        self._pending: OrderedDict[_Identity, int] = OrderedDict()  # queued -> occurrences merged
        self._busy: set[_Identity] = set()  # being sent: a repeat waits for its name
        self._known: OrderedDict[_Identity, _Sent] = OrderedDict()
        self._threads: list[threading.Thread] = []

    def record(
        self,
        key: str,
        uid: str,
        *,
        reason: str,
        note: str,
        kind: str = "Normal",
        action: str = "Scheduling",
        regarding: str = "Pod",
    ) -> None:
        """Queue one occurrence of an event on the pod ``key`` (or, with ``regarding="Node"``, on
        the node ``default/NAME``) and return at once."""
        note = redact(note, key.split("/", 1)[0], self._is_pod)
        if self.dry_run:
            log.info("dry-run: event %s on %s %s: %s", reason, regarding, key, note)
            return
        ident = _Identity(key, uid or "", reason, note[:1024], kind, action, regarding)
        with self._cv:
            if self._closed:
                return
            if ident in self._pending:
                self._pending[ident] += 1
                self._counted("merged")
                return
            if len(self._pending) >= self._queue_max:
                self._counted("dropped")
                return
            self._pending[ident] = 1
            if not self._threads:
                self._start()
            self._cv.notify()

    def _start(self) -> None:
        for i in range(self._senders):
            t = threading.Thread(target=self._run, name=f"events-{i}", daemon=True)
            t.start()
            self._threads.append(t)

    def _next(self) -> tuple[_Identity, int] | None:
        with self._cv:
            while True:
                if self._closed:
                    return None
                ident = next((i for i in self._pending if i not in self._busy), None)
                if ident is not None:
                    self._busy.add(ident)
                    return ident, self._pending.pop(ident)
                self._cv.wait()

    def _run(self) -> None:
        while (item := self._next()) is not None:
            ident, times = item
            try:
                self._send(ident, times)
            except Exception:  # a bug here must not kill the sender: events are best effort
                log.exception("event %s on %s not sent", ident.reason, ident.key)
            finally:
                with self._cv:
                    self._busy.discard(ident)
                    self._cv.notify_all()

    def _send(self, ident: _Identity, times: int) -> None:
        now = self._clock()
        with self._cv:
            sent = self._known.get(ident)
            if sent is not None and now - sent.first > SERIES_WINDOW:
                del self._known[ident]
                sent = None
        if sent is None:
            name = self._create(ident, times)
            if name:
                with self._cv:
                    self._known[ident] = _Sent(name, times, now)
                    while len(self._known) > KNOWN_MAX:
                        self._known.popitem(last=False)
            return
        count = sent.count + times
        out = self._patch_series(ident, sent.name, count)
        with self._cv:
            if out.ok:
                sent.count = count
                self._known.move_to_end(ident)
            elif out.result is Result.GONE:  # the Event expired or was deleted: the next one starts anew
                self._known.pop(ident, None)

    def _body(self, ident: _Identity, times: int) -> dict[str, object]:
        ns, name = ident.key.split("/", 1)
        body: dict[str, object] = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            # The API server validates generateName itself as a DNS subdomain: "pod." is refused
            # with a 422 (every event was lost that way); "pod-" is valid.
            "metadata": {"generateName": f"{name}-", "namespace": ns},
            "eventTime": _stamp(),
            "action": ident.action,
            "reason": ident.reason,
            "note": ident.note,
            "type": ident.kind,
            "reportingController": f"placer.io/{self.scheduler_name}",
            "reportingInstance": self.identity,
            "regarding": (
                {"apiVersion": "v1", "kind": "Pod", "name": name, "namespace": ns, "uid": ident.uid}
                if ident.regarding == "Pod"
                else {"apiVersion": "v1", "kind": ident.regarding, "name": name}
            ),
        }
        if times > 1:  # repeats merged before the first send: the Event starts as a series
            body["series"] = {"count": times, "lastObservedTime": _stamp()}
        return body

    def _create(self, ident: _Identity, times: int) -> str | None:
        ns = ident.key.split("/", 1)[0]
        self.limit.acquire()
        call = self.http.call("POST", f"/apis/events.k8s.io/v1/namespaces/{ns}/events", body=self._body(ident, times))
        out = self.policy.call(f"event on {ident.key}", call, write=True, idempotent=False, budget=EVENT_BUDGET)
        self._result(ident, out, "created")
        if not out.ok:
            return None
        meta = (out.json() or {}).get("metadata") or {}
        return str(meta.get("name") or "") or None

    def _patch_series(self, ident: _Identity, name: str, count: int) -> Outcome:
        """The series' absolute count: sending it twice does no harm, so it may be retried."""
        ns = ident.key.split("/", 1)[0]
        body = {"series": {"count": count, "lastObservedTime": _stamp()}}
        self.limit.acquire()
        path = f"/apis/events.k8s.io/v1/namespaces/{ns}/events/{name}"
        call = self.http.call("PATCH", path, body=body, content_type=MERGE)
        out = self.policy.call(f"event series on {ident.key}", call, write=True, budget=EVENT_BUDGET)
        self._result(ident, out, "series")
        return out

    def _result(self, ident: _Identity, out: Outcome, what: str) -> None:
        self._counted(what if out.ok else str(out.status or out.result))
        if not out.ok:
            log.warning("event %s on %s failed: %s %s", ident.reason, ident.key, out.result, out.reason)
