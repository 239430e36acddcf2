"""The packing techniques' clock: wall time that a race can stop.

Every deadline check of the searches (``completion``, ``exactcover``, ``fillsampler``,
``largefills``, ``ejection``, ``repack``) reads ``now()``. Inside ``stoppable()`` another thread may
set the event it yields (the race in ``placer.engine.packing.dispatch`` does when CP-SAT wins):
from then on ``now()`` is infinitely late, so the search in this thread gives up at its next check
as if its deadline had passed, and a CP-SAT solve run inside ``watched`` is stopped. Races nest: a
search inside two ``stoppable()`` gives up once either event is set. A context variable keeps the
events to the thread (and context) that opened them, so decisions running in other threads are
never stopped by them; a race's own threads run in a copy of its context.
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

__all__ = ["now", "real", "slice_steps", "stoppable", "watched"]

_STOP: ContextVar[tuple[threading.Event, ...]] = ContextVar("placer_packing_stop", default=())


def _stopped() -> bool:
    return any(event.is_set() for event in _STOP.get())


def now() -> float:
    """``time.monotonic()``, or infinity once an enclosing ``stoppable()`` was stopped."""
    if _stopped():
        return math.inf
    return time.monotonic()


def real() -> float:
    """``time.monotonic()`` even in a stopped race: deadlines are computed from it (a deadline
    computed from ``now()`` in a stopped race would be infinite and never pass)."""
    return time.monotonic()


def slice_steps(steps: int, began: float, deadline: float) -> int:
    """How many steps a compiled search (which looks at no clock) takes in its next call: about
    ``tuning.EJECT_SLICE`` seconds, or what is left before ``deadline``, at the pace of its last
    call of ``steps`` steps begun at ``began``; at most four times as many as that call."""
    per_step = max(real() - began, 1e-6) / steps
    slice_ = min(tuning.EJECT_SLICE, max(deadline - real(), 0.0))
    return max(1, min(4 * steps, int(slice_ / per_step)))


@contextmanager
def stoppable() -> Iterator[threading.Event]:
    """Searches in this context give up once the yielded event (or an enclosing one) is set, from
    any thread."""
    event = threading.Event()
    token = _STOP.set((*_STOP.get(), event))
    try:
        yield event
    finally:
        _STOP.reset(token)


class _Stoppable(Protocol):
    def stop_search(self) -> None: ...


@contextmanager
def watched(solver: _Stoppable) -> Iterator[None]:
    """While inside, a stop of an enclosing ``stoppable()`` (from another thread) stops ``solver``'s
    search too: a thread looks at the events every ``tuning.WATCH_EVERY`` seconds. Nothing outside one."""
    events = _STOP.get()
    if not events:
        yield
        return
    done = threading.Event()

    def watch() -> None:
        while not done.wait(tuning.WATCH_EVERY):
            if any(event.is_set() for event in events):
                solver.stop_search()
                return

    watcher = threading.Thread(target=watch, name="packing-watch", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()
