"""One policy for every API call: timeouts, bounded retries, and a typed outcome instead of an exception.

A call is a function that makes one HTTP exchange with the timeouts it is given and either returns
a ``Response`` or raises what the HTTP library raises. ``Policy.call`` runs it:

- every attempt gets a connect and a read timeout, never longer than what is left of the call's
  overall deadline;
- connection errors, 429 (throttling; ``Retry-After`` is honoured) and 5xx are retried with
  exponential backoff and jitter, within a bounded number of attempts and the deadline;
- a write that is not idempotent (a bind, an eviction, an event) whose request may have reached
  the server (connection dropped after sending, read timeout, 500/504) is *not* sent again: its
  outcome is ``UNKNOWN`` and the caller re-reads the object to learn what happened. A connection
  that was never established (refused, connect timeout) is safe to retry for any call;
- an eviction answered 429 because of a PodDisruptionBudget is a refusal (``REFUSED``), not
  throttling: it is returned at once and the caller decides whether to try again later;
- before every attempt of a write the fence is asked; a replica that may no longer write (its
  lease renewal is overdue) sends nothing and gets ``FENCED``.

Nothing raised by the transport escapes ``call``. The clock, sleep and random source are injected
so that tests drive the policy without waiting.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from urllib3.exceptions import ConnectTimeoutError, NewConnectionError

__all__ = [
    "Budget",
    "Call",
    "Fence",
    "Outcome",
    "Policy",
    "Response",
    "Result",
    "Timeouts",
    "is_budget_refusal",
]

log = logging.getLogger("placer.kube.policy")


class Result(StrEnum):
    OK = "ok"
    GONE = "gone"  # 404: the object (or the one with that UID) does not exist
    CONFLICT = "conflict"  # 409: a precondition or resourceVersion no longer holds
    REFUSED = "refused"  # 429 from a PodDisruptionBudget: the eviction is not allowed now
    REJECTED = "rejected"  # any other definite refusal (400, 401, 403, 422 ...)
    THROTTLED = "throttled"  # 429/5xx until attempts or deadline ran out: not done
    UNAVAILABLE = "unavailable"  # no answer from the server until attempts ran out: not done
    UNKNOWN = "unknown"  # a write that may or may not have landed: re-read to find out
    FENCED = "fenced"  # not sent: this replica may no longer write


@dataclass(frozen=True)
class Outcome:
    """What became of one API call (``ok`` for the callers that only need yes/no)."""

    ok: bool
    status: int = 0
    reason: str = ""
    # The failure came before the bind (setting a claim's selected node): back the pod off.
    prebind: bool = False
    result: Result = Result.OK
    data: bytes = field(default=b"", repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.ok and self.result is Result.OK:
            object.__setattr__(self, "result", Result.REJECTED)

    def json(self) -> Any:
        return json.loads(self.data) if self.data else None


@dataclass(frozen=True)
class Response:
    status: int
    data: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)

    def header(self, name: str) -> str | None:
        for key, value in self.headers.items():
            if key.lower() == name.lower():
                return value
        return None


@dataclass(frozen=True)
class Timeouts:
    connect: float
    read: float


Call = Callable[[Timeouts], Response]


class Fence(Protocol):
    def allows(self) -> bool: ...


@dataclass(frozen=True)
class Budget:
    """How long and how often one call may try."""

    attempts: int = 5
    deadline: float = 30.0  # seconds for the whole call, backoff included
    connect: float = 5.0
    read: float = 15.0
    backoff: float = 0.2  # first backoff; doubles per attempt
    max_backoff: float = 5.0


def is_budget_refusal(data: bytes) -> bool:
    """The Eviction API's 429 names the disruption budget (cause ``DisruptionBudget``, message
    "... would violate the pod's disruption budget"); throttling by API Priority and Fairness does not."""
    try:
        body = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return b"disruption budget" in data.lower()
    if not isinstance(body, dict):
        return False
    causes = (body.get("details") or {}).get("causes") or []
    if any(isinstance(c, dict) and c.get("reason") == "DisruptionBudget" for c in causes):
        return True
    return "disruption budget" in str(body.get("message", "")).lower()


def _message(resp: Response) -> str:
    try:
        body = json.loads(resp.data)
    except (ValueError, UnicodeDecodeError):
        return resp.data[:200].decode(errors="replace") or f"HTTP {resp.status}"
    if isinstance(body, dict) and body.get("message"):
        return str(body["message"])
    return f"HTTP {resp.status}"


def _retry_after(resp: Response) -> float | None:
    value = resp.header("Retry-After")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # an HTTP date: the apiserver sends seconds; fall back to our backoff


def _never_sent(exc: BaseException) -> bool:
    """The connection was never established, so the request cannot have reached the server."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, NewConnectionError | ConnectTimeoutError | ConnectionRefusedError):
            return True
        reason = getattr(cur, "reason", None)  # urllib3's MaxRetryError wraps the real error
        cur = reason if isinstance(reason, BaseException) else (cur.__cause__ or cur.__context__)
    return False


class Policy:
    def __init__(
        self,
        *,
        budget: Budget | None = None,
        fence: Fence | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        rng: Callable[[], float] = random.random,
        retried: Callable[[str], None] | None = None,
    ) -> None:
        self.budget = budget or Budget()
        self.fence = fence
        self._clock, self._sleep, self._rng = clock, sleep, rng
        self._retried = retried
        self.last_answer: float | None = None  # clock time of the last HTTP answer of any status

    def _backoff(self, attempt: int, budget: Budget) -> float:
        full = min(budget.max_backoff, budget.backoff * 2.0**attempt)
        return full * (0.5 + 0.5 * self._rng())  # jitter: a crowd of clients does not retry in step

    def call(
        self,
        what: str,
        call: Call,
        *,
        write: bool = False,
        idempotent: bool = True,
        budget: Budget | None = None,
    ) -> Outcome:
        """Run ``call`` under the policy. ``write``: the fence must allow it; ``idempotent``: it
        may be sent again when its first sending's outcome is unknown."""
        b = budget or self.budget
        start = self._clock()
        last = Outcome(ok=False, reason="no attempt", result=Result.UNAVAILABLE)
        for attempt in range(b.attempts):
            if write and self.fence is not None and not self.fence.allows():
                return Outcome(ok=False, reason="fenced: the lease renewal is overdue", result=Result.FENCED)
            left = b.deadline - (self._clock() - start)
            if left <= 0:
                break
            wait: float | None = None
            try:
                resp = call(Timeouts(connect=min(b.connect, left), read=min(b.read, left)))
            except Exception as exc:
                reason = f"{type(exc).__name__}: {exc}"
                if not _never_sent(exc) and not idempotent:
                    return Outcome(ok=False, reason=f"outcome unknown ({reason})", result=Result.UNKNOWN)
                last = Outcome(ok=False, reason=reason, result=Result.UNAVAILABLE)
                cause = "connection"
            else:
                self.last_answer = self._clock()
                out = self._answer(resp, idempotent=idempotent)
                if out is not None:
                    return out
                last = Outcome(ok=False, status=resp.status, reason=_message(resp), result=Result.THROTTLED)
                wait = _retry_after(resp)
                cause = str(resp.status)
            if attempt + 1 >= b.attempts:
                break
            delay = max(wait or 0.0, self._backoff(attempt, b))
            if self._clock() - start + delay >= b.deadline:
                break
            if self._retried is not None:
                self._retried(cause)
            log.debug("%s: %s; retry %d in %.2fs", what, last.reason, attempt + 1, delay)
            self._sleep(delay)
        return last

    def _answer(self, resp: Response, *, idempotent: bool) -> Outcome | None:
        """The outcome an HTTP answer settles, or None when it is worth another attempt."""
        status = resp.status
        if 200 <= status < 300:
            return Outcome(ok=True, status=status, data=resp.data)
        message = _message(resp)
        if status == 429:
            if is_budget_refusal(resp.data):
                return Outcome(ok=False, status=429, reason=message, result=Result.REFUSED)
            return None
        if status >= 500:
            # 502/503 (and anything carrying Retry-After) were not processed; a 500 or 504 of a
            # write may have landed (etcd timed out after the write was proposed).
            if idempotent or status in (502, 503) or resp.header("Retry-After") is not None:
                return None
            return Outcome(ok=False, status=status, reason=f"outcome unknown ({message})", result=Result.UNKNOWN)
        if status == 404:
            return Outcome(ok=False, status=404, reason=message, result=Result.GONE)
        if status == 409:
            return Outcome(ok=False, status=409, reason=message, result=Result.CONFLICT)
        return Outcome(ok=False, status=status, reason=message, result=Result.REJECTED)
