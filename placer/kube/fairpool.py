"""The bind workers' pool: one queue per lane (a batch's binds), the lanes served round-robin.

A ``ThreadPoolExecutor`` runs its work first in, first out: a 5,000-pod gang's binds, dispatched at
once, held every bind of the batches decided after it until the gang's last one was sent (13 s at
about 380 binds/s, the larger part of the stream's 19 s wait in docs/bench/e2e-biggang.md). Here
each worker takes the next call of the next lane in turn, so a small batch decided during a big
one's binds is bound after a few of them, not after all. The room of every batch is assumed before
its binds are dispatched (``placer.kube.binds``), so the order of the calls changes nothing a
later decision reads; a gang stays whole because its placement was decided whole, not because its
binds go together.

Calls without a lane (read-backs, a plan's actions) share one lane of their own. ``shutdown`` with
``cancel_futures`` drops what is queued, as ``ThreadPoolExecutor``'s does.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable
from concurrent.futures import Executor, Future
from typing import Any, ParamSpec, TypeVar

__all__ = ["FairPool"]

P = ParamSpec("P")
T = TypeVar("T")
_Call = tuple["Future[Any]", Callable[..., Any], tuple[Any, ...], dict[str, Any]]


class FairPool(Executor):
    def __init__(self, workers: int, thread_name_prefix: str = "worker") -> None:
        self._workers = workers
        self._prefix = thread_name_prefix
        self._cv = threading.Condition()
        self._lanes: OrderedDict[Hashable, deque[_Call]] = OrderedDict()  # served front first
        self._threads: list[threading.Thread] = []
        self._closed = False

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        """A call in the shared lane (read-backs, plan actions)."""
        return self.submit_to(None, fn, *args, **kwargs)

    def submit_to(self, lane: Hashable, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        """A call queued behind the earlier calls of ``lane`` only; lanes take turns."""
        future: Future[T] = Future()
        with self._cv:
            if self._closed:
                raise RuntimeError("cannot schedule new futures after shutdown")
            self._lanes.setdefault(lane, deque()).append((future, fn, args, kwargs))
            if len(self._threads) < self._workers:
                thread = threading.Thread(target=self._run, name=f"{self._prefix}_{len(self._threads)}", daemon=True)
                self._threads.append(thread)
                thread.start()
            self._cv.notify()
        return future

    def queued(self) -> dict[Hashable, int]:
        """Calls waiting per lane, in the order the lanes are served next (tests, metrics)."""
        with self._cv:
            return {lane: len(calls) for lane, calls in self._lanes.items()}

    def _next(self) -> _Call | None:
        """The next call of the lane at the front; that lane then goes to the back."""
        with self._cv:
            while not self._lanes:
                if self._closed:
                    return None
                self._cv.wait()
            lane, calls = self._lanes.popitem(last=False)
            call = calls.popleft()
            if calls:
                self._lanes[lane] = calls
            return call

    def _run(self) -> None:
        while (call := self._next()) is not None:
            future, fn, args, kwargs = call
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:  # handed to the future's reader, as ThreadPoolExecutor does
                future.set_exception(exc)
            else:
                future.set_result(result)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """No new calls; with ``cancel_futures`` the queued ones are cancelled; with ``wait``,
        return once the workers have finished what they run (and, without cancelling, what is
        queued)."""
        with self._cv:
            self._closed = True
            if cancel_futures:
                for calls in self._lanes.values():
                    for future, *_ in calls:
                        future.cancel()
                self._lanes.clear()
            self._cv.notify_all()
        if wait:
            for thread in list(self._threads):
                thread.join()
