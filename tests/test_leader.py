"""Leader election on a Lease, and the fence on writes, against an in-memory Lease and a fake clock.

Aspects: a replica acquires a free or expired Lease and renews it; it never takes a Lease another
replica renewed within a lease duration of its own observation; of two racing writers only one
wins (resourceVersion); a replica that misses its renew deadline writes nothing more, and its fence
is closed before any other replica may acquire; Lease errors never end the election loop; a
missing Lease namespace is said once, with what to do, and /readyz can say it.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

import pytest

from placer.kube.leader import Elector, LeaseFence, lease_budget
from placer.kube.policy import Outcome, Policy, Response, Result
from placer.models import LeaderElection

SETTINGS = LeaderElection()  # client-go's timing: lease 15 s, renew deadline 10 s, retry 2 s


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Leases:
    """One Lease in memory, shared by the replicas; ``down`` makes every call fail like a dead API."""

    def __init__(self) -> None:
        self.obj: dict[str, Any] | None = None
        self.version = 0
        self.down: Outcome | None = None
        self.namespace_missing = False
        self.writes: list[str] = []

    def store(self) -> Leases:
        return self

    def get(self) -> Outcome:
        if self.down is not None:
            return self.down
        if self.obj is None:
            return Outcome(ok=False, status=404, result=Result.GONE)
        return Outcome(ok=True, data=json.dumps(self.obj).encode())

    def _put(self, body: dict[str, Any]) -> Outcome:
        self.version += 1
        self.obj = {**body, "metadata": {**body["metadata"], "resourceVersion": str(self.version)}}
        self.writes.append(body["spec"]["holderIdentity"])
        return Outcome(ok=True, data=json.dumps(self.obj).encode())

    def create(self, body: dict[str, Any]) -> Outcome:
        if self.down is not None:
            return self.down
        if self.namespace_missing:
            return Outcome(ok=False, status=404, reason='namespaces "placer-system" not found', result=Result.GONE)
        if self.obj is not None:
            return Outcome(ok=False, status=409, result=Result.CONFLICT)
        return self._put(body)

    def update(self, body: dict[str, Any]) -> Outcome:
        if self.down is not None:
            return self.down
        assert self.obj is not None
        if body["metadata"]["resourceVersion"] != self.obj["metadata"]["resourceVersion"]:
            return Outcome(ok=False, status=409, result=Result.CONFLICT)
        return self._put(body)

    @property
    def holder(self) -> str | None:
        return None if self.obj is None else str(self.obj["spec"]["holderIdentity"])


def _replica(leases: Leases, name: str, clock: Clock) -> Elector:
    return Elector(leases, SETTINGS, name, LeaseFence(clock=clock), clock=clock, wall=clock)


def test_a_replica_takes_a_free_lease_and_another_waits_a_full_lease_duration() -> None:
    clock, leases = Clock(), Leases()
    a, b = _replica(leases, "a", clock), _replica(leases, "b", clock)
    assert a.attempt() and leases.holder == "a"
    assert a.fence.held() and not a.fence.allows()  # created: a full lease duration before a write
    assert not b.attempt()  # held, and b has just observed it
    while clock.now < 1000.0 + SETTINGS.lease_duration:
        clock.now += SETTINGS.retry_period
        assert a.attempt() and not b.attempt()
    assert a.fence.allows()
    clock.now += SETTINGS.renew_deadline  # a stops renewing (its path is blackholed)
    assert not a.fence.allows()  # ... so its fence is closed from here on
    assert not b.attempt()
    clock.now += SETTINGS.lease_duration - SETTINGS.renew_deadline  # a full lease since b's observation
    assert b.attempt() and leases.holder == "b"
    assert leases.obj is not None and leases.obj["spec"]["leaseTransitions"] == 1


def test_renewals_keep_the_fence_open_and_keep_others_out() -> None:
    clock, leases = Clock(), Leases()
    a, b = _replica(leases, "a", clock), _replica(leases, "b", clock)
    for _ in range(30):
        assert a.attempt()
        assert not b.attempt()
        clock.now += SETTINGS.retry_period
        assert a.fence.allows() == (clock.now >= 1000.0 + SETTINGS.lease_duration)
    assert set(leases.writes) == {"a"}


def test_the_fence_closes_before_any_other_replica_can_acquire() -> None:
    """The fencing rule, over many interleavings: at no instant does the old leader's fence
    allow a write while another replica holds the lease."""
    for renew_at in (0.0, 0.5, 1.9, 2.0):
        clock, leases = Clock(), Leases()
        a, b = _replica(leases, "a", clock), _replica(leases, "b", clock)
        assert a.attempt()
        clock.now += renew_at
        assert a.attempt()  # the last renewal that gets through
        leases_seen_by_b = False
        for _ in range(200):
            clock.now += 0.1
            if b.attempt():
                leases_seen_by_b = True
            if leases.holder == "b":
                assert not a.fence.allows(), renew_at
        assert leases_seen_by_b


def test_the_fence_counts_from_when_the_renewal_started_not_when_it_returned() -> None:
    clock = Clock()
    fence = LeaseFence(clock=clock)
    fence.renewed(started=clock.now - 9.5, renew_deadline=10)
    assert fence.allows()
    clock.now += 0.5
    assert not fence.allows()
    assert LeaseFence(clock=clock, always=True).allows()  # election off: one replica writes


def test_two_replicas_racing_for_a_free_lease_elect_one() -> None:
    clock, leases = Clock(), Leases()
    a, b = _replica(leases, "a", clock), _replica(leases, "b", clock)
    leases.obj = {
        "metadata": {"name": "placer", "namespace": "placer-system", "resourceVersion": "0"},
        "spec": {"holderIdentity": "", "leaseDurationSeconds": 15},
    }
    stale = json.dumps(leases.obj).encode()
    a.attempt()
    # b read the lease before a wrote it: its update carries the old resourceVersion
    b._store = _Stale(leases, stale)
    assert not b.attempt()
    assert leases.holder == "a" and a.fence.held() and not b.fence.held()


class _Stale:
    def __init__(self, leases: Leases, data: bytes) -> None:
        self.leases, self.data = leases, data

    def get(self) -> Outcome:
        return Outcome(ok=True, data=self.data)

    def create(self, body: dict[str, Any]) -> Outcome:
        return self.leases.create(body)

    def update(self, body: dict[str, Any]) -> Outcome:
        return self.leases.update(body)


class Raising:
    def get(self) -> Outcome:
        raise RuntimeError("a bug in reading the lease")

    def create(self, body: dict[str, Any]) -> Outcome:
        raise AssertionError

    def update(self, body: dict[str, Any]) -> Outcome:
        raise AssertionError


def test_the_election_loop_survives_lease_errors_and_ends_only_when_leadership_is_lost() -> None:
    clock, leases = Clock(), Leases()
    a = _replica(leases, "a", clock)
    events: list[str] = []
    stop = threading.Event()
    rounds = iter(range(1000))

    def wait(seconds: float) -> bool:
        clock.now += seconds
        n = next(rounds)
        if n == 10:  # after the lease duration the creator waits out, and a few renewals
            leases.down = Outcome(ok=False, reason="connection reset", result=Result.UNAVAILABLE)
        if n == 11:
            a._store = Raising()  # an exception, not an outcome: logged, the loop goes on
        return stop.is_set()

    stop.wait = wait  # type: ignore[method-assign]
    a.run(stop, lambda: events.append("started"), lambda: events.append("lost"), rng=lambda: 0.0)
    assert events == ["started", "lost"]
    assert not a.fence.allows()
    # lost only after the renew deadline passed since the last good renewal (round 9 at t+20)
    assert clock.now - 1000.0 >= 20 + SETTINGS.renew_deadline


def test_a_follower_keeps_trying_while_the_api_is_down() -> None:
    clock, leases = Clock(), Leases()
    leases.down = Outcome(ok=False, reason="connection refused", result=Result.UNAVAILABLE)
    b = _replica(leases, "b", clock)
    stop = threading.Event()
    calls = iter(range(40))

    def wait(seconds: float) -> bool:
        clock.now += seconds
        n = next(calls)
        if n == 10:
            leases.down = None
        if n == 22:  # the lease duration a creator waits out before it leads
            stop.set()
        return stop.is_set()

    stop.wait = wait  # type: ignore[method-assign]
    started: list[str] = []
    b.run(stop, lambda: started.append("b"), lambda: started.append("lost"))
    assert started == ["b"] and leases.holder == "b"


def test_a_missing_lease_namespace_is_said_once_with_what_to_do(caplog: pytest.LogCaptureFixture) -> None:
    clock, leases = Clock(), Leases()
    leases.namespace_missing = True
    a = _replica(leases, "a", clock)
    with caplog.at_level(logging.WARNING, logger="placer.kube.leader"):
        for _ in range(10):
            assert not a.attempt()
            clock.now += 2
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1, lines
    assert "placer-system" in lines[0] and "kubectl create namespace" in lines[0] and "enabled: false" in lines[0]
    assert a.problem == lines[0]
    leases.namespace_missing = False
    assert a.attempt() and a.problem is None


def test_every_lease_call_times_out_well_below_the_renew_deadline() -> None:
    for s in (SETTINGS, LeaderElection(leaseDurationSeconds=4, renewDeadlineSeconds=3, retryPeriodSeconds=1)):
        b = lease_budget(s)
        assert b.attempts == 1
        assert b.connect <= b.deadline and b.read <= b.deadline
        assert 2 * b.deadline < s.renew_deadline  # the read and the write of one renewal


def test_a_lease_call_through_the_policy_is_cut_at_its_timeout() -> None:
    clock = Clock()
    seen = []

    def hung(timeouts: Any) -> Response:
        seen.append(timeouts)
        raise TimeoutError("read timed out")

    budget = lease_budget(SETTINGS)
    out = Policy(clock=clock, sleep=lambda s: None).call("get lease", hung, budget=budget)
    assert out.result is Result.UNAVAILABLE
    assert len(seen) == 1 and seen[0].read < SETTINGS.renew_deadline


def _lead(a: Elector, clock: Clock) -> None:
    """``a`` takes the Lease and renews it until it may write."""
    start = clock.now
    assert a.attempt()
    while clock.now < start + SETTINGS.lease_duration:
        clock.now += SETTINGS.retry_period
        assert a.attempt()
    assert a.fence.allows()


def test_a_deleted_lease_never_gives_two_writers() -> None:
    """The Lease is deleted under the leader: the other replica creates it at once, but writes
    only a lease duration later; the old leader stops writing as soon as it sees it gone."""
    clock, leases = Clock(), Leases()
    a, b = _replica(leases, "a", clock), _replica(leases, "b", clock)
    _lead(a, clock)
    leases.obj = None  # kubectl delete lease
    assert b.attempt() and leases.holder == "b"  # b created it
    for _ in range(int(SETTINGS.lease_duration / 0.5) + 2):
        assert not (a.fence.allows() and b.fence.allows())
        a.attempt()
        b.attempt()
        clock.now += 0.5
    assert b.fence.allows() and not a.fence.allows()
    assert not a.fence.held()  # a saw it taken: it reports the loss (and exits)


def test_a_leader_that_finds_its_lease_gone_stops_writing_at_once() -> None:
    clock, leases = Clock(), Leases()
    a = _replica(leases, "a", clock)
    _lead(a, clock)
    leases.obj = None
    assert not a.attempt()
    assert not a.fence.allows() and not a.fence.held()
    assert leases.obj is None  # it did not recreate it as if nothing happened


def test_two_processes_with_one_identity_never_both_write() -> None:
    """The same name (a hostname fallback, --identity twice): the second writer is seen, by the
    resourceVersion of the Lease no longer being the one the first wrote, and the first stops."""
    clock, leases = Clock(), Leases()
    a, twin = _replica(leases, "same", clock), _replica(leases, "same", clock)
    _lead(a, clock)
    for _ in range(20):
        twin.attempt()
        a.attempt()
        clock.now += SETTINGS.retry_period
        assert not (a.fence.allows() and twin.fence.allows())


def test_identities_are_unique_per_process() -> None:
    from runner_support import make_runner  # noqa: PLC0415

    first, second = make_runner(metricsPort=0), make_runner(metricsPort=0)
    assert first.identity != second.identity
    assert first.identity.startswith("test_") and second.identity.startswith("test_")


def test_a_renewal_whose_answer_was_lost_is_not_taken_for_another_writer() -> None:
    clock, leases = Clock(), Leases()
    a = _replica(leases, "a", clock)
    _lead(a, clock)

    class LostAnswer(Leases):
        def update(self, body: dict[str, Any]) -> Outcome:
            leases.update(body)  # it landed ...
            return Outcome(ok=False, reason="read timed out", result=Result.UNKNOWN)  # ... unheard

    a._store = LostAnswer()
    a._store.get = leases.get  # type: ignore[method-assign]
    clock.now += SETTINGS.retry_period
    assert not a.attempt()
    a._store = leases
    clock.now += SETTINGS.retry_period
    assert a.attempt() and a.fence.allows()  # its own write, not a second process
