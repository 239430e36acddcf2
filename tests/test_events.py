"""The event recorder: queued off the caller's path, aggregated into series, bounded, fenced."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

from placer.kube.actions import Actions
from placer.kube.events import EventRecorder
from placer.kube.policy import Budget, Policy, Response, Timeouts


class RecordingHttp:
    """Creates answer 201 with a generated name; patches 200 (or ``patch_status``). ``gate`` holds
    every call until set, so a test can queue repeats while the first send is in flight."""

    def __init__(self, patch_status: int = 200) -> None:
        self.sent: list[tuple[str, str, Any]] = []
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()  # a call has started
        self.patch_status = patch_status
        self._lock = threading.Lock()

    def call(self, method: str, path: str, **kwargs: Any) -> Callable[[Timeouts], Response]:
        def send(_t: Timeouts) -> Response:
            self.entered.set()
            self.gate.wait(5)
            with self._lock:
                self.sent.append((method, path, kwargs.get("body")))
                n = len(self.sent)
            if method == "POST":
                return Response(201, json.dumps({"metadata": {"name": f"ev-{n}"}}).encode())
            return Response(self.patch_status)

        return send


class _Never:
    def allows(self) -> bool:
        return False


def _recorder(http: RecordingHttp, counts: dict[str, int] | None = None, **kw: Any) -> EventRecorder:
    tally = counts if counts is not None else {}

    def count(result: str) -> None:
        tally[result] = tally.get(result, 0) + 1

    kw.setdefault("policy", Policy(budget=Budget(attempts=1)))
    return EventRecorder(http, scheduler_name="placer", identity="r1", qps=1000, burst=1000, counted=count, **kw)


def test_a_repeated_event_becomes_a_series_on_the_first_event() -> None:
    http = RecordingHttp()
    rec = _recorder(http)
    for _ in range(3):
        rec.record("ns/p", "u1", reason="FailedScheduling", note="0/3 nodes are available", kind="Warning")
        assert rec.idle(5)
    methods = [(m, p.rsplit("/", 1)[-1]) for m, p, _ in http.sent]
    assert methods == [("POST", "events"), ("PATCH", "ev-1"), ("PATCH", "ev-1")]
    assert [b["series"]["count"] for _, _, b in http.sent[1:]] == [2, 3]
    first = http.sent[0][2]
    assert first["regarding"]["uid"] == "u1" and first["note"] == "0/3 nodes are available" and "series" not in first


def test_different_notes_or_pods_are_different_events() -> None:
    http = RecordingHttp()
    rec = _recorder(http)
    rec.record("ns/p", "u1", reason="FailedScheduling", note="a")
    rec.record("ns/p", "u1", reason="FailedScheduling", note="b")
    rec.record("ns/q", "u2", reason="FailedScheduling", note="a")
    assert rec.idle(5)
    assert [m for m, _, _ in http.sent] == ["POST", "POST", "POST"]


def test_repeats_queued_behind_a_send_in_flight_merge_into_one_write() -> None:
    http = RecordingHttp()
    counts: dict[str, int] = {}
    rec = _recorder(http, counts, senders=2)
    http.gate.clear()
    rec.record("ns/p", "u1", reason="FailedScheduling", note="x")
    assert http.entered.wait(5)
    for _ in range(5):  # while the create is held: they wait for its name, merged into one
        rec.record("ns/p", "u1", reason="FailedScheduling", note="x")
    http.gate.set()
    assert rec.idle(5)
    assert [m for m, _, _ in http.sent] == ["POST", "PATCH"]
    assert http.sent[1][2]["series"]["count"] == 6
    assert counts["merged"] == 4 and counts["created"] == 1 and counts["series"] == 1


def test_a_full_queue_drops_and_counts_instead_of_blocking() -> None:
    http = RecordingHttp()
    http.gate.clear()
    counts: dict[str, int] = {}
    rec = _recorder(http, counts, senders=1, queue_max=2)
    for i in range(6):
        rec.record(f"ns/p{i}", "u", reason="Scheduled", note=f"n{i}")
    http.gate.set()
    assert rec.idle(5)
    assert counts["dropped"] >= 3 and len(http.sent) == 6 - counts["dropped"]


def test_a_series_whose_event_is_gone_starts_a_new_event() -> None:
    http = RecordingHttp(patch_status=404)
    rec = _recorder(http)
    for _ in range(3):
        rec.record("ns/p", "u1", reason="FailedScheduling", note="x")
        assert rec.idle(5)
    assert [m for m, _, _ in http.sent] == ["POST", "PATCH", "POST"]


def test_a_fenced_replica_sends_no_event_and_dry_run_sends_nothing() -> None:
    fenced = RecordingHttp()
    counts: dict[str, int] = {}
    rec = _recorder(fenced, counts, policy=Policy(fence=_Never()))
    rec.record("ns/p", "u1", reason="Scheduled", note="x")
    assert rec.idle(5)
    assert fenced.sent == [] and counts == {"fenced": 1}
    dry = RecordingHttp()
    rec = _recorder(dry, dry_run=True)
    rec.record("ns/p", "u1", reason="Scheduled", note="x")
    assert rec.idle(5) and dry.sent == []


def test_an_event_never_holds_up_the_bind_that_caused_it() -> None:
    events_http = RecordingHttp()
    events_http.gate.clear()  # the events' server hangs
    binds_http = RecordingHttp()
    policy = Policy(budget=Budget(attempts=1))
    rec = _recorder(events_http, policy=policy)
    actions = Actions(binds_http, policy, scheduler_name="placer", identity="r1", events=rec)
    started = time.monotonic()
    assert actions.bind("ns/p", "n1", "u1").ok
    actions.event("ns/p", "u1", reason="Scheduled", note="Successfully assigned ns/p to n1")
    assert time.monotonic() - started < 2.0  # the event's call is held for 5 s by the gate
    assert [m for m, _, _ in binds_http.sent] == ["POST"] and binds_http.sent[0][1].endswith("/binding")
    events_http.gate.set()
    assert rec.idle(5)
    assert [p.rsplit("/", 1)[-1] for _, p, _ in events_http.sent] == ["events"]


def test_an_event_never_names_a_pod_of_another_namespace() -> None:
    """A victim's Preempted event named its preemptor from another namespace (a leak upstream fixed)."""
    pods = {"team-b/urgent", "team-a/low", "team-a/web"}
    http = RecordingHttp()
    rec = _recorder(http, is_pod=pods.__contains__)
    note = (
        "evicted by placer's plan (placer-0_ab12): preempted to make room for team-b/urgent, team-a/web; "
        "outranked by team-b/urgent; 0/3 nodes are available; node a/b lacked cpu"
    )
    rec.record("team-a/low", "u1", reason="Preempted", note=note)
    assert rec.idle(5)
    (body,) = [b for m, _, b in http.sent if m == "POST"]
    assert "team-b" not in body["note"]
    assert "make room for a pod in another namespace, team-a/web" in body["note"]
    assert "0/3 nodes are available" in body["note"] and "node a/b lacked" in body["note"]  # not pods
    rec.close()


def test_the_runner_tells_its_recorder_which_names_are_pods() -> None:
    from runner_support import feed, make_runner  # noqa: PLC0415

    r = make_runner(metricsPort=0)
    feed(r, "Pod", {"metadata": {"name": "urgent", "namespace": "team-b"}, "spec": {}})
    assert r.events._is_pod("team-b/urgent") and not r.events._is_pod("0/3")
