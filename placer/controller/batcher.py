"""The batcher: pending pods gather until the window closes or the batch is full.

Pure: the caller passes the current time and the pods it sees pending. A batch is due once
``window`` seconds passed since its first pod arrived, or once ``size`` pods gathered. Pods that
disappear or get bound by someone else drop out. Pods that stayed unplaced come back only after
their back-off (doubling, capped); those a plan in flight kept from planning wait for its end.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from placer.engine import cut_batch

__all__ = ["Batcher"]


@dataclass
class Batcher:
    window: float
    size: int
    backoff: float = 5.0
    max_backoff: float = 60.0
    group_size: int = 0  # a batch holding a gang held to a topology domain takes such gangs up to this
    _arrived: dict[str, float] = field(default_factory=dict)
    _deferred: dict[str, tuple[float, float]] = field(default_factory=dict)  # key -> (until, current backoff)
    _recent: deque[float] = field(default_factory=deque)  # when the last ``size`` pods joined

    def sync(self, pending: Iterable[str], now: float, held: Iterable[str] = ()) -> None:
        """Make the batch match the pods seen pending now (new ones join, gone ones drop). Pods
        ``held`` (taken and being solved) do not join but keep their back-off."""
        seen = set(pending)
        kept = seen | set(held)
        for key in list(self._arrived):
            if key not in seen:
                del self._arrived[key]
        for key in list(self._deferred):
            if key not in kept:
                del self._deferred[key]
        for key in sorted(seen):
            if key in self._arrived:
                continue
            until = self._deferred.get(key, (0.0, 0.0))[0]
            if now >= until:
                self._arrived[key] = now
                self._recent.append(now)
                if len(self._recent) > self.size:
                    self._recent.popleft()

    def due(self, now: float) -> bool:
        if not self._arrived:
            return False
        return len(self._arrived) >= self.size or now - min(self._arrived.values()) >= self.window

    def waited(self, now: float) -> float | None:
        """How long the oldest pod of the next batch has waited (None: no pod waits)."""
        return now - min(self._arrived.values()) if self._arrived else None

    def fills_in(self, now: float) -> float | None:
        """When the next batch would be full at the rate the last ``size`` pods joined (seconds
        from ``now``; 0 when it is full already), or None when no rate is known: fewer than two
        arrivals, or none within the last window."""
        if len(self._arrived) >= self.size:
            return 0.0
        if len(self._recent) < 2 or now - self._recent[-1] > self.window:
            return None
        span = now - self._recent[0]
        if span <= 0:
            return None
        return (self.size - len(self._arrived)) * span / len(self._recent)

    def due_in(self, now: float) -> float | None:
        """Seconds until the next batch falls due (0: due now; None: no pod waits): when its
        window closes, or sooner when it fills up at the recent arrival rate (``fills_in``, an
        estimate: the caller looks again then)."""
        waited = self.waited(now)
        if waited is None:
            return None
        if self.due(now):
            return 0.0
        left = self.window - waited
        fills = self.fills_in(now)
        return max(0.0, left if fills is None else min(left, fills))

    def take(self, together: Mapping[str, str] | None = None, rivals: Collection[str] = ()) -> list[str]:
        """The batch: up to ``size`` pods, oldest first; the rest keep waiting. Pods that share a
        value in ``together`` (a gang) are never split: a gang joins the batch whole, and a gang
        larger than ``size`` is a batch of its own; gangs held to a topology domain (``rivals``,
        values of ``together``) join a batch that holds one up to ``group_size`` pods
        (``placer.engine.cut_batch``)."""
        ordered = sorted(self._arrived, key=lambda k: (self._arrived[k], k))
        chosen = cut_batch(ordered, self.size, together, rivals=rivals, rival_size=self.group_size)
        for key in chosen:
            del self._arrived[key]
        return chosen

    def queued(self) -> frozenset[str]:
        """The pods waiting for a later batch (not taken)."""
        return frozenset(self._arrived)

    def defer(self, key: str, now: float) -> float:
        """Back a pod off after it stayed unplaced; returns the delay."""
        current = self._deferred.get(key, (0.0, 0.0))[1]
        delay = min(self.max_backoff, current * 2 if current else self.backoff)
        self._deferred[key] = (now + delay, delay)
        return delay

    def hold(self, key: str) -> None:
        """The pod stayed unplaced by a batch that could not plan (another plan was in flight): it
        waits for that plan to end (``wake``), its back-off unchanged."""
        self._deferred[key] = (math.inf, self._deferred.get(key, (0.0, 0.0))[1])

    def wake(self, now: float, keys: Iterable[str] | None = None) -> None:
        """Room changed (a plan finished: its victims are gone, its pods bound or abandoned): pods
        backed off join at the next sync, as kube-scheduler moves unschedulable pods back on such
        an event. Their back-off stays, so one that still fits nowhere waits longer next time.
        ``keys``: only these pods (a gang that gained members), the others keep waiting."""
        chosen = list(self._deferred) if keys is None else [k for k in keys if k in self._deferred]
        for key in chosen:
            until, delay = self._deferred[key]
            self._deferred[key] = (min(until, now), delay)

    def forget(self, key: str) -> None:
        """The pod was placed: reset its back-off."""
        self._deferred.pop(key, None)

    def __len__(self) -> int:
        return len(self._arrived)
