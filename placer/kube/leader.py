"""Leader election on a coordination.k8s.io/v1 Lease, with a fence on every write.

client-go's algorithm and timing (lease 15 s, renew deadline 10 s, retry 2 s): a replica reads the
Lease; it may take it when nobody holds it or when the holder's record has not changed for a whole
lease duration *as observed by this replica's own clock*; it writes with the resourceVersion it
read, so of two replicas racing only one wins. The holder renews every retry period.

The fence: writes are allowed only until ``renew deadline`` after the *start* of the last
successful renewal. Another replica can take over only a full lease duration after it observed
that renewal, which it cannot have observed before the renewal started; since renew deadline <
lease duration, this replica's fence is closed before anyone else may acquire, whatever the
network does. The fence is a clock comparison, so it closes at once even while the election
thread is stuck in a hung call (every Lease call has a timeout below the renew deadline anyway).

A replica that creates the Lease or takes it over writes nothing for a full lease duration: a
previous holder (whose Lease was deleted under it, or that is partitioned) has closed its fence
by then. A holder that sees its Lease deleted, held by another identity, or written by another
process under its own identity stops writing at once. Identities are unique per process
(``unique_identity``: the name given, plus a random suffix), as client-go's are.

A Lease read or write error never ends the election thread. A replica that loses the lease stops
writing at once and exits (the Deployment restarts it as a follower, which rebuilds its state
from the API), as kube-scheduler does.
"""

from __future__ import annotations

import datetime as dt
import logging
import random
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, Protocol

from placer.kube.policy import Budget, Outcome, Policy, Result
from placer.models import LeaderElection

__all__ = ["ApiLeases", "Elector", "Leadership", "LeaseFence", "LeaseStore", "lease_budget", "unique_identity"]

log = logging.getLogger("placer.kube.leader")


class LeaseFence:
    """Open from ``not before`` (a full lease duration after the Lease was created or taken) until a
    deadline pushed forward by each successful renewal; always open without election."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic, always: bool = False) -> None:
        self._clock = clock
        self._always = always
        self._until = float("-inf")
        self._not_before = float("-inf")
        self._lock = threading.Lock()

    def acquired(self, started: float, wait: float) -> None:
        """The Lease was just created or taken: no write before ``started + wait``. A previous
        holder (of a Lease since deleted, or taken as expired) has by then closed its own fence."""
        with self._lock:
            self._not_before = started + wait

    def renewed(self, started: float, renew_deadline: float) -> None:
        with self._lock:
            self._until = max(self._until, started + renew_deadline)

    def close(self) -> None:
        with self._lock:
            self._until = float("-inf")

    def held(self) -> bool:
        """The Lease is this replica's (renewed within the renew deadline), writable or not yet."""
        return self._always or self._clock() < self._until

    def allows(self) -> bool:
        return self._always or self._not_before <= self._clock() < self._until


class LeaseStore(Protocol):
    def get(self) -> Outcome: ...
    def create(self, body: dict[str, Any]) -> Outcome: ...
    def update(self, body: dict[str, Any]) -> Outcome: ...


def lease_budget(settings: LeaderElection) -> Budget:
    """One attempt per Lease call, its timeouts well below the renew deadline (the election loop is
    the retry): a renewal (read + write) always ends before the fence would close on its own."""
    limit = max(0.5, min(2.0 * settings.retry_period, settings.renew_deadline / 3))
    return Budget(attempts=1, deadline=limit, connect=limit, read=limit)


class ApiLeases:
    """A Lease through the call policy (``http`` is ``placer.kube.client.Http``)."""

    def __init__(self, http: Any, policy: Policy, settings: LeaderElection) -> None:
        self._http, self._policy = http, policy
        self._budget = lease_budget(settings)
        base = f"/apis/coordination.k8s.io/v1/namespaces/{settings.namespace}/leases"
        self._collection, self._path = base, f"{base}/{settings.lease_name}"

    def get(self) -> Outcome:
        return self._policy.call("get lease", self._http.call("GET", self._path), budget=self._budget)

    def create(self, body: dict[str, Any]) -> Outcome:
        call = self._http.call("POST", self._collection, body=body)
        return self._policy.call("create lease", call, idempotent=False, budget=self._budget)

    def update(self, body: dict[str, Any]) -> Outcome:
        call = self._http.call("PUT", self._path, body=body)
        return self._policy.call("update lease", call, idempotent=False, budget=self._budget)


def unique_identity(name: str) -> str:
    """``name`` (the pod's or host's name) with a random suffix, as client-go's ``hostname_uuid``:
    two processes given one name (two replicas on one host, a pod restarted in place) never
    both renew one Lease as its holder."""
    return f"{name}_{uuid.uuid4().hex[:12]}"


def _micro(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Elector:
    """One replica's side of the election; ``attempt`` is one try to acquire or renew."""

    def __init__(
        self,
        store: LeaseStore,
        settings: LeaderElection,
        identity: str,
        fence: LeaseFence,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._store, self._s, self.identity, self.fence = store, settings, identity, fence
        self._clock, self._wall = clock, wall
        self._seen: tuple[str, str, str] | None = None  # (holder, renewTime, resourceVersion) last read
        self._seen_at = 0.0  # when this replica saw that record change
        self._wrote: str | None = None  # the resourceVersion of this replica's last Lease write
        self.leading = False  # writing: held for a lease duration since created or taken
        self._holding = False  # held (writable or still waiting out the lease duration)
        self.problem: str | None = None  # why this replica cannot take part (for /readyz)
        self._said: str | None = None

    def _spec(self, previous: dict[str, Any] | None) -> dict[str, Any]:
        now = _micro(self._wall())
        mine = previous is not None and previous.get("holderIdentity") == self.identity
        transitions = int((previous or {}).get("leaseTransitions") or 0)
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": self._s.lease_duration,
            "acquireTime": (previous or {}).get("acquireTime") if mine else now,
            "renewTime": now,
            "leaseTransitions": transitions if mine or previous is None else transitions + 1,
        }

    def _say(self, text: str | None, *, error: bool = False) -> None:
        """Log a problem once, not every retry period; log when it clears."""
        if text == self._said:
            return
        if text is None:
            log.info("lease %s/%s: reachable again", self._s.namespace, self._s.lease_name)
        else:
            (log.error if error else log.warning)("%s", text)
        self._said = text

    def _failed(self, what: str, out: Outcome) -> bool:
        ns = self._s.namespace
        if what != "get":  # a write whose answer was lost may have landed: its version is unknown
            self._wrote = None
        if what == "create" and out.result is Result.GONE:
            self.problem = (
                f"the Lease namespace {ns!r} does not exist: create it (kubectl create namespace {ns}), "
                "or set leaderElection.namespace to an existing one, or leaderElection.enabled: false "
                "for a single replica"
            )
            self._say(self.problem, error=True)
        elif out.result in (Result.REJECTED,):
            self.problem = f"lease {ns}/{self._s.lease_name}: {what} refused ({out.status} {out.reason})"
            self._say(self.problem, error=True)
        elif out.result is not Result.CONFLICT:  # a conflict is a lost race, not a problem
            self._say(f"lease {ns}/{self._s.lease_name}: {what} failed ({out.result}: {out.reason}); retrying")
        return False

    def attempt(self) -> bool:
        """Read the Lease, then take or renew it if this replica may. True: the lease is ours.

        A holder that finds its Lease deleted, held by another identity, or written by someone
        else under its own identity (another process with the same name) stops writing at once:
        its fence closes and the election loop reports the loss."""
        started = self._clock()
        got = self._store.get()
        held = self.fence.held()
        if got.result is Result.GONE:
            if held:
                return self._usurped("the Lease was deleted")
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self._s.lease_name, "namespace": self._s.namespace},
                "spec": self._spec(None),
            }
            made = self._store.create(body)
            return self._held(started, made, taken=True) if made.ok else self._failed("create", made)
        if not got.ok:
            return self._failed("get", got)
        lease = got.json() or {}
        spec = lease.get("spec") or {}
        meta = lease.get("metadata") or {}
        seen = (str(spec.get("holderIdentity") or ""), str(spec.get("renewTime")), str(meta.get("resourceVersion")))
        if seen != self._seen:
            self._seen, self._seen_at = seen, started
        holder = seen[0]
        if held and holder != self.identity:
            return self._usurped(f"the Lease is held by {holder or 'nobody'}")
        if held and self._wrote is not None and seen[2] != self._wrote:
            return self._usurped(f"the Lease was written by another process as {self.identity}")
        duration = float(spec.get("leaseDurationSeconds") or self._s.lease_duration)
        if holder and holder != self.identity and started < self._seen_at + duration:
            self.problem = None
            if self._said:
                self._say(None)
            return False  # held by another replica whose record changed within a lease duration
        body = {**lease, "spec": {**spec, **self._spec(spec)}}
        done = self._store.update(body)
        return self._held(started, done, taken=not held) if done.ok else self._failed("update", done)

    def _usurped(self, why: str) -> bool:
        log.error("lease %s/%s: %s; no more writes", self._s.namespace, self._s.lease_name, why)
        self.fence.close()
        self._wrote = None
        return False

    def _held(self, started: float, out: Outcome, *, taken: bool) -> bool:
        if taken:  # created or taken: a full lease duration before the first write
            self.fence.acquired(started, float(self._s.lease_duration))
        self.fence.renewed(started, float(self._s.renew_deadline))
        written = out.json() if out.data else None
        version = ((written or {}).get("metadata") or {}).get("resourceVersion")
        self._wrote = str(version) if version else None
        self.problem = None
        if self._said:
            self._say(None)
        return True

    def run(
        self,
        stop: threading.Event,
        on_started: Callable[[], None],
        on_lost: Callable[[], None],
        *,
        rng: Callable[[], float] = random.random,
    ) -> None:
        """Acquire, then renew every retry period until the renew deadline is missed."""
        while not stop.is_set():
            try:
                self.attempt()
            except Exception:  # a bug, not an API error (those are outcomes): log it, keep electing
                log.exception("leader election attempt failed")
            if self.fence.allows() and not self.leading:
                self.leading = True
                on_started()
            elif (self.leading or self._holding) and not self.fence.held():
                self.leading = self._holding = False
                self.fence.close()
                on_lost()
                return
            self._holding = self.fence.held()
            period = float(self._s.retry_period)
            owner = self.leading or self._holding
            stop.wait(period if owner else period * (1 + 0.2 * rng()))  # followers jitter, as client-go


class Leadership:
    """What the runner sees of the election: ``leading``, the ``fence`` and a ``problem`` for /readyz."""

    def __init__(self, elector: Elector | None, on_lost: Callable[[], None], *, fence: LeaseFence) -> None:
        self.leading = threading.Event()
        self.fence = fence
        self._elector = elector
        self._on_lost = on_lost
        self._stop = threading.Event()
        if elector is None:  # election off: a single replica leads for ever
            self.leading.set()

    @property
    def problem(self) -> str | None:
        return self._elector.problem if self._elector is not None else None

    def start(self) -> None:
        if self._elector is None:
            return
        elector = self._elector
        threading.Thread(
            target=elector.run, args=(self._stop, self._started, self._stopped), name="leader", daemon=True
        ).start()

    def stop(self) -> None:
        self._stop.set()

    def _started(self) -> None:
        log.info("%s leads", self._elector.identity if self._elector else "")
        self.leading.set()

    def _stopped(self) -> None:
        log.warning("lost the lease (renewal overdue): no more writes; exiting")
        self.leading.clear()
        self._on_lost()
