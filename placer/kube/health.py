"""What /healthz, /readyz and the ageing gauges of /metrics say about the controller.

``/healthz`` fails only when restarting would help: an informer failing for minutes while the API
answers; a solve running ``healthzSolveOverrun`` times its budget; a leader with pods pending and
the API answering whose loop has completed no tick for ``healthzStallWindows`` batch windows (at
least ``MIN_STALL``). A standby's loop, or any replica during an API outage, stays healthy (no
crash loop). ``/readyz`` waits for every cache and says why not (e.g. the Lease namespace is
missing)."""

from __future__ import annotations

import time

from placer.kube.cycle import SchedulingCycle
from placer.kube.leader import Leadership, LeaseFence
from placer.kube.plans import PlanDriver
from placer.kube.policy import Policy
from placer.kube.serving import Metrics
from placer.kube.view import ClusterView
from placer.models import ControllerConfig

__all__ = ["INFORMER_STUCK", "MIN_STALL", "Health"]

MIN_STALL = 30.0  # /healthz never calls a loop stuck sooner, however short the batch window
INFORMER_STUCK = 120.0  # /healthz fails when an informer has failed this long (or the stall limit)


class Health:
    def __init__(
        self,
        cfg: ControllerConfig,
        *,
        policy: Policy,
        fence: LeaseFence,
        leadership: Leadership,
        view: ClusterView,
        cycle: SchedulingCycle,
        driver: PlanDriver,
    ) -> None:
        self.cfg = cfg
        self.policy, self.fence, self.leadership = policy, fence, leadership
        self.view, self.cycle, self.driver = view, cycle, driver
        self.last_cycle = time.monotonic()  # the last tick all of whose stages completed

    def _api_answered(self) -> float | None:
        """When the API last answered anything (a call, a list, a watch event)."""
        times = [self.policy.last_answer] + [i.last_event for i in self.view.informers.values()]
        known = [t for t in times if t is not None]
        return max(known) if known else None

    def health(self) -> tuple[bool, str]:
        """(healthy, why): see the module's docstring."""
        now = time.monotonic()
        limit = max(MIN_STALL, self.cfg.healthz_stall_windows * self.cfg.batch_window)
        blind = self._blind(now, max(INFORMER_STUCK, limit))
        if blind is not None:
            return False, blind
        overrun = self._overrun(now)
        if overrun is not None:
            return False, overrun
        stalled = now - self.last_cycle
        if stalled < limit:
            return True, "ok"
        if not self.fence.allows():
            return True, "ok (standby)"
        pending = self.cycle.pending
        if pending == 0:
            return True, "ok (nothing pending)"
        answered = self._api_answered()
        if answered is None or now - answered > limit:
            return True, "ok (the API is not answering)"
        return False, f"stuck: no scheduling cycle completed for {stalled:.0f}s with {pending} pods pending"

    def _overrun(self, now: float) -> str | None:
        """The solve in flight has run ``healthzSolveOverrun`` times its budget (and at least
        ``MIN_STALL``): hung or runaway, it holds every batch behind it."""
        solving, started = self.cycle.solving, self.cycle.solve_started
        if solving is None or started is None or solving[1].done():
            return None
        budget = solving[0].budget
        ran = now - started
        if ran < max(MIN_STALL, self.cfg.healthz_solve_overrun * budget):
            return None
        return (
            f"stuck: a batch's solve has run {ran:.0f}s on a {budget:.1f}s budget "
            f"(more than {self.cfg.healthz_solve_overrun:g} times it)"
        )

    def _blind(self, now: float, limit: float) -> str | None:
        """An informer whose list/watch loop has failed for ``limit`` seconds while the API answers
        (a 504 resumed for ever, a 410 storm): its cache is stale, restarting rebuilds it. During
        an API outage every loop fails and nothing is said (no crash loop)."""
        answered = self.policy.last_answer
        if answered is None or now - answered > limit:
            return None
        for inf in self.view.informers.values():
            since = inf.failing_since
            if since is not None and now - since > limit:
                return f"stuck: the {inf.kind} watch has failed for {now - since:.0f}s ({inf.last_error})"
        return None

    def healthy(self) -> bool:
        return self.health()[0]

    def readiness(self) -> tuple[bool, str]:
        """Ready once every cache is synced; otherwise, or when the election cannot work, why not."""
        unsynced = [i.kind for i in self.view.informers.values() if not i.synced]
        if unsynced:
            return False, f"caches not synced: {', '.join(unsynced)}"
        problem = self.leadership.problem
        if problem:
            return False, problem
        return True, "ok"

    def ready(self) -> bool:
        return all(i.synced for i in self.view.informers.values())

    def refresh_metrics(self, metrics: Metrics) -> None:
        """Gauges that age: set when /metrics is scraped, so they keep moving if the loop is stuck."""
        now = time.monotonic()
        for inf in self.view.informers.values():
            if inf.last_event is not None:
                metrics.watch_event_age.labels(kind=inf.kind).set(now - inf.last_event)
        plan = self.driver.plan
        metrics.plan_in_progress.set(0 if plan is None else 1)
        started = self.driver.started
        metrics.plan_age.set(0.0 if plan is None or started is None else max(0.0, time.time() - started))
