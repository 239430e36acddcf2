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
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from placer.kube.sendqueue import KeyedQueue
from placer.models import Pod

__all__ = ["QUEUE_MAX", "ReportQueue"]

log = logging.getLogger("placer.kube.reports")
QUEUE_MAX = 5000  # pods with a report waiting
SENT_MAX = 20000  # last message patched per pod, remembered (least recent forgotten first)


class ReportQueue(KeyedQueue[str, tuple[Pod, str]]):
    def __init__(
        self,
        actions: Callable[[], Any],
        *,
        current: Callable[[str], str | None],
        counted: Callable[[str], None] | None = None,
        queue_max: int = QUEUE_MAX,
    ) -> None:
        super().__init__(name="unschedulable report", log=log, counted=counted, queue_max=queue_max)
        self._actions = actions  # the writer: placer.kube.actions.Actions now (tests swap in a fake)
        self._current = current  # the pod's Unschedulable message as the cache has it, if any
        self._sent: OrderedDict[str, str] = OrderedDict()

    def submit(self, pod: Pod, message: str) -> None:
        """Queue (or replace) ``pod``'s report and return at once."""
        self._put(pod.key, (pod, message))

    def _send(self, item: tuple[Pod, str]) -> None:
        pod, message = item
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
