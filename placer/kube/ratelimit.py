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

    def acquire(self) -> None:
        while True:
            with self._lock:
                now = time.monotonic()
                self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.qps)
                self._stamp = now
                if self._tokens >= 1:
                    self._tokens -= 1
                    return
                wait = (1 - self._tokens) / self.qps
            time.sleep(wait)
