"""The packing techniques' clock: wall time that a race can stop.

Every deadline check of the searches (``completion``, ``exactcover``, ``fillsampler``,
``largefills``, ``ejection``, ``repack``) reads ``now()``. Inside ``stoppable()`` another thread may
set the event it yields (the race in ``placer.engine.packing.dispatch`` does when CP-SAT wins):
from then on ``now()`` is infinitely late, so the search in this thread gives up at its next check
as if its deadline had passed, and a CP-SAT solve run inside ``watched`` is stopped. A context
variable keeps the event to the thread (and context) that opened it, so decisions running in
other threads are never stopped by it.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol

from placer.engine.packing import tuning

__all__ = ["now", "real", "stoppable", "watched"]

_STOP: ContextVar[threading.Event | None] = ContextVar("placer_packing_stop", default=None)


def now() -> float:
    """``time.monotonic()``, or infinity once the enclosing ``stoppable()`` was stopped."""
    event = _STOP.get()
    if event is not None and event.is_set():
        return math.inf
    return time.monotonic()


def real() -> float:
    """``time.monotonic()`` even in a stopped race: deadlines are computed from it (a deadline
    computed from ``now()`` in a stopped race would be infinite and never pass)."""
    return time.monotonic()


@contextmanager
def stoppable() -> Iterator[threading.Event]:
    """Searches in this context give up once the yielded event is set (from any thread)."""
    event = threading.Event()
    token = _STOP.set(event)
    try:
        yield event
    finally:
        _STOP.reset(token)


class _Stoppable(Protocol):
    def stop_search(self) -> None: ...


@contextmanager
def watched(solver: _Stoppable) -> Iterator[None]:
    """While inside, a stop of the enclosing ``stoppable()`` (from another thread) stops ``solver``'s
    search too: a thread looks at the event every ``tuning.WATCH_EVERY`` seconds. Nothing outside one."""
    event = _STOP.get()
    if event is None:
        yield
        return
    done = threading.Event()

    def watch() -> None:
        while not done.wait(tuning.WATCH_EVERY):
            if event.is_set():
                solver.stop_search()
                return

    watcher = threading.Thread(target=watch, name="packing-watch", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()
