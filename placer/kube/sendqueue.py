"""What the queues drained by sender threads share (events, unschedulable reports, PodGroup
conditions): a condition guarding what is queued (``_pending``) and being sent (``_busy``),
closing, and waiting until idle; and ``KeyedQueue``, one sender draining one item per key."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sized
from typing import Any, Generic, TypeVar

__all__ = ["KeyedQueue", "SendQueue"]

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


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


class KeyedQueue(SendQueue, Generic[K, T]):
    """At most one item per key waits: a newer one replaces it (counted ``coalesced``); past
    ``queue_max`` keys the oldest item is dropped (``dropped``). One thread, started with the first
    item, sends them oldest first (``_send``); an exception in a send is logged and counted
    (``failed``), never lost, and the thread goes on."""

    def __init__(
        self, *, name: str, log: logging.Logger, counted: Callable[[str], None] | None, queue_max: int
    ) -> None:
        super().__init__()
        self._name, self._log = name, log
        self._counted = counted or (lambda _result: None)
        self._max = queue_max
        self._pending: OrderedDict[K, T] = OrderedDict()
        self._busy = False
        self._thread: threading.Thread | None = None

    def __len__(self) -> int:
        with self._cv:
            return len(self._pending)

    def _put(self, key: K, item: T) -> None:
        """Queue (or replace) ``key``'s item and return at once."""
        with self._cv:
            if self._closed:
                return
            if key in self._pending:
                self._counted("coalesced")
                self._pending[key] = item
                return
            if len(self._pending) >= self._max:
                self._pending.popitem(last=False)
                self._counted("dropped")
            self._pending[key] = item
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            self._cv.notify()

    def shutdown(self, wait: bool = False, **_: Any) -> None:
        """Stop; with ``wait``, once everything queued has been sent (tests)."""
        if wait:
            self.idle(60.0)
        self.close()

    def _next(self) -> tuple[K, T] | None:
        with self._cv:
            while not self._pending and not self._closed:
                self._cv.wait()
            if self._closed:
                return None
            self._busy = True
            return self._pending.popitem(last=False)

    def _run(self) -> None:
        while (entry := self._next()) is not None:
            key, item = entry
            try:
                self._send(item)
            except Exception:  # a bug must not end the thread nor vanish
                self._counted("failed")
                self._log.exception("%s for %s failed", self._name, key)
            finally:
                with self._cv:
                    self._busy = False
                    self._cv.notify_all()

    def _send(self, item: T) -> None:
        raise NotImplementedError
