"""Client-side rate limiting of API writes."""

from __future__ import annotations

import threading
import time

__all__ = ["TokenBucket"]


class TokenBucket:
    """Client-side rate limit of API writes, as client-go's QPS/burst (kube-scheduler: 50/100)."""

    def __init__(self, qps: float, burst: int) -> None:
        self.qps, self.burst = qps, burst
        self._tokens = float(burst)
        self._stamp = time.monotonic()
        self._lock = threading.Lock()

    def acquire(self, reserve: float = 0.0) -> None:
        """Take a token, waiting for one. With ``reserve``, only a token beyond that many: a
        background writer leaves the last tokens of a burst to the writes that come first."""
        while (wait := self.take(reserve)) > 0:
            time.sleep(wait)

    def take(self, reserve: float = 0.0) -> float:
        """Take a token if one beyond ``reserve`` is there (0.0), else how long until one is."""
        with self._lock:
            now = time.monotonic()
            self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.qps)
            self._stamp = now
            if self._tokens >= 1 + reserve:
                self._tokens -= 1
                return 0.0
            return (1 + reserve - self._tokens) / self.qps
