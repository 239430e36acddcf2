"""What the queues drained by sender threads share (events, unschedulable reports): a condition
guarding what is queued (``_pending``) and being sent (``_busy``), closing, and waiting until idle."""

from __future__ import annotations

import threading
from collections.abc import Sized

__all__ = ["SendQueue"]


class SendQueue:
    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._closed = False
        self._pending: Sized = ()
        self._busy: object = False  # truthy while a send is in flight

    def close(self) -> None:
        """Stop the senders; what is still queued is dropped."""
        with self._cv:
            self._closed = True
            self._pending = type(self._pending)()
            self._cv.notify_all()

    def idle(self, timeout: float) -> bool:
        """Wait until nothing is queued or being sent (tests); False if still busy at ``timeout``."""
        with self._cv:
            return self._cv.wait_for(lambda: not (self._pending or self._busy), timeout)
