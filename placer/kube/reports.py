"""Unschedulable reports (PodScheduled=False/Unschedulable, then a FailedScheduling event) off the
scheduling path, bounded and deduplicated.

One pod has at most one report queued: a newer report replaces the queued one (the newest reason
is the one to show). A report whose condition the pod already carries (same message, as the
informer's cache or this replica's last patch shows) patches nothing; its event still goes (the
recorder turns repeats into a series). Past ``QUEUE_MAX`` pods the oldest report is dropped
(counted). Binds come first: the patches draw only on the write bucket's tokens above a reserve
(``Actions.unschedulable``). One thread sends; an exception in a send is logged and counted
(``placer_reports_total{result="failed"}``), never lost, and the thread goes on.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from placer.kube.sendqueue import SendQueue
from placer.models import Pod

__all__ = ["QUEUE_MAX", "ReportQueue"]

log = logging.getLogger("placer.kube.reports")
QUEUE_MAX = 5000  # pods with a report waiting
SENT_MAX = 20000  # last message patched per pod, remembered (least recent forgotten first)


class ReportQueue(SendQueue):
    def __init__(
        self,
        actions: Callable[[], Any],
        *,
        current: Callable[[str], str | None],
        counted: Callable[[str], None] | None = None,
        queue_max: int = QUEUE_MAX,
    ) -> None:
        super().__init__()
        self._actions = actions  # the writer: placer.kube.actions.Actions now (tests swap in a fake)
        self._current = current  # the pod's Unschedulable message as the cache has it, if any
        self._counted = counted or (lambda _result: None)
        self._max = queue_max
        self._pending: OrderedDict[str, tuple[Pod, str]] = OrderedDict()
        self._sent: OrderedDict[str, str] = OrderedDict()
        self._busy = False
        self._thread: threading.Thread | None = None

    def __len__(self) -> int:
        with self._cv:
            return len(self._pending)

    def submit(self, pod: Pod, message: str) -> None:
        """Queue (or replace) ``pod``'s report and return at once."""
        with self._cv:
            if self._closed:
                return
            if pod.key in self._pending:
                self._counted("coalesced")
                self._pending[pod.key] = (pod, message)
                return
            if len(self._pending) >= self._max:
                self._pending.popitem(last=False)
                self._counted("dropped")
            self._pending[pod.key] = (pod, message)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="reports", daemon=True)
                self._thread.start()
            self._cv.notify()

    def shutdown(self, wait: bool = False, **_: Any) -> None:
        """Stop; with ``wait``, once everything queued has been sent (tests)."""
        if wait:
            self.idle(60.0)
        self.close()

    def _next(self) -> tuple[Pod, str] | None:
        with self._cv:
            while not self._pending and not self._closed:
                self._cv.wait()
            if self._closed:
                return None
            self._busy = True
            return self._pending.popitem(last=False)[1]

    def _run(self) -> None:
        while (item := self._next()) is not None:
            pod, message = item
            try:
                self._send(pod, message)
            except Exception:  # a bug must not end the thread nor vanish
                self._counted("failed")
                log.exception("unschedulable report on %s failed", pod.key)
            finally:
                with self._cv:
                    self._busy = False
                    self._cv.notify_all()

    def _send(self, pod: Pod, message: str) -> None:
        if self._current(pod.key) == message or self._sent.get(pod.key) == message:
            self._counted("unchanged")
        else:
            out = self._actions().unschedulable(pod.key, message)
            self._counted("patched" if out.ok else "failed")
            if out.ok:
                self._sent[pod.key] = message
                self._sent.move_to_end(pod.key)
                while len(self._sent) > SENT_MAX:
                    self._sent.popitem(last=False)
        self._actions().event(pod.key, pod.uid, reason="FailedScheduling", note=message, kind="Warning")
