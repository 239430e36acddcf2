"""The call policy every API call of the controller goes through, driven by a fake transport.

Aspects: timeouts on every attempt within the call's deadline; connection errors, 429 (with
Retry-After) and 5xx retried with growing, jittered backoff and a bounded number of attempts; a
non-idempotent write whose request may have landed is never sent twice (UNKNOWN); a PDB's 429 is a
refusal, not throttling; the fence stops writes before they are sent; nothing raised by the
transport escapes. And the writes built on it: a bind whose answer was lost is read back.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from urllib3.exceptions import ConnectTimeoutError, NewConnectionError, ProtocolError, ReadTimeoutError

from placer.kube.actions import Actions
from placer.kube.policy import Budget, Policy, Response, Result, Timeouts, is_budget_refusal

PDB_429 = json.dumps(
    {
        "kind": "Status",
        "status": "Failure",
        "message": "Cannot evict pod as it would violate the pod's disruption budget.",
        "reason": "TooManyRequests",
        "details": {"causes": [{"reason": "DisruptionBudget", "message": "The disruption budget web needs 2"}]},
        "code": 429,
    }
).encode()
APF_429 = json.dumps({"kind": "Status", "message": "Too many requests, please try again later.", "code": 429}).encode()


class Clock:
    """Fake time: sleeping advances it; a call can take time too."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


class Script:
    """A transport answering (or raising) from a script, recording each attempt's timeouts."""

    def __init__(self, *steps: Response | Exception, clock: Clock | None = None, takes: float = 0.0) -> None:
        self.steps = list(steps)
        self.seen: list[Timeouts] = []
        self.clock, self.takes = clock, takes

    def __call__(self, timeouts: Timeouts) -> Response:
        self.seen.append(timeouts)
        if self.clock is not None:
            self.clock.now += self.takes
        step = self.steps.pop(0) if len(self.steps) > 1 else self.steps[0]
        if isinstance(step, Exception):
            raise step
        return step


def _policy(clock: Clock, **kw: Any) -> Policy:
    return Policy(clock=clock, sleep=clock.sleep, rng=lambda: 0.5, **kw)


def _reset() -> Exception:
    return ProtocolError("Connection aborted.", ConnectionResetError(104, "Connection reset by peer"))


def _refused() -> Exception:
    return NewConnectionError(None, "Failed to establish a new connection: [Errno 111] Connection refused")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("steps", "expected", "attempts"),
    [
        ((Response(200, b"{}"),), Result.OK, 1),
        ((Response(503), Response(503), Response(200)), Result.OK, 3),
        ((_reset(), Response(200)), Result.OK, 2),
        ((_refused(), Response(200)), Result.OK, 2),
        ((Response(404),), Result.GONE, 1),
        ((Response(409),), Result.CONFLICT, 1),
        ((Response(403),), Result.REJECTED, 1),
        ((Response(422),), Result.REJECTED, 1),
        ((Response(429, PDB_429),), Result.REFUSED, 1),
        ((Response(429, APF_429),), Result.THROTTLED, 5),
        ((Response(500),), Result.THROTTLED, 5),
        ((ReadTimeoutError(None, "/", "Read timed out."),), Result.UNAVAILABLE, 5),  # type: ignore[arg-type]
    ],
)
def test_a_read_is_retried_on_trouble_and_settled_by_a_definite_answer(
    steps: tuple[Response | Exception, ...], expected: Result, attempts: int
) -> None:
    clock = Clock()
    send = Script(*steps)
    out = _policy(clock).call("get", send)
    assert out.result is expected
    assert out.ok == (expected is Result.OK)
    assert len(send.seen) == attempts


def test_backoff_grows_with_jitter_and_stops_at_the_attempt_limit() -> None:
    clock = Clock()
    retried: list[str] = []
    policy = Policy(clock=clock, sleep=clock.sleep, rng=iter([0.0, 1.0, 0.0, 1.0]).__next__, retried=retried.append)
    out = policy.call("get", Script(Response(503)), budget=Budget(attempts=5, deadline=60, backoff=0.2, max_backoff=1))
    assert out.result is Result.THROTTLED and out.status == 503
    # base 0.2 doubling, capped at 1, each drawn in [half, full]: 0.1, 0.4, 0.4, 1.0
    assert clock.sleeps == pytest.approx([0.1, 0.4, 0.4, 1.0])
    assert retried == ["503"] * 4


def test_retry_after_is_honoured_and_the_deadline_bounds_the_whole_call() -> None:
    clock = Clock()
    throttled = Response(429, APF_429, {"Retry-After": "3"})
    send = Script(throttled, clock=clock, takes=1.0)
    out = _policy(clock).call("get", send, budget=Budget(attempts=10, deadline=10, read=4))
    assert out.result is Result.THROTTLED
    assert all(s >= 3 for s in clock.sleeps)  # never sooner than the server asked
    assert clock.now - 100.0 <= 10  # the deadline holds, backoff included
    # every attempt's timeouts fit in what is left of the deadline
    assert [t.read for t in send.seen] == [4, 4, 2]


def test_a_write_whose_request_may_have_landed_is_not_sent_again() -> None:
    for trouble in (_reset(), ReadTimeoutError(None, "/", "Read timed out."), Response(504), Response(500)):  # type: ignore[arg-type]
        clock = Clock()
        send = Script(trouble, Response(201))
        out = _policy(clock).call("bind", send, write=True, idempotent=False)
        assert out.result is Result.UNKNOWN, trouble
        assert len(send.seen) == 1, trouble


def test_a_write_that_never_reached_the_server_is_retried() -> None:
    for trouble in (_refused(), ConnectTimeoutError("connect timed out"), Response(503), Response(429, APF_429)):
        clock = Clock()
        send = Script(trouble, Response(201))
        out = _policy(clock).call("bind", send, write=True, idempotent=False)
        assert out.ok, trouble
        assert len(send.seen) == 2, trouble


def test_an_eviction_refused_by_a_disruption_budget_is_not_throttling() -> None:
    assert is_budget_refusal(PDB_429)
    assert not is_budget_refusal(APF_429)
    assert is_budget_refusal(b"Cannot evict pod as it would violate the pod's disruption budget.")


class Fence:
    def __init__(self, open_for: int) -> None:
        self.left = open_for

    def allows(self) -> bool:
        self.left -= 1
        return self.left >= 0


def test_the_fence_is_asked_before_every_attempt_of_a_write_but_not_of_a_read() -> None:
    clock = Clock()
    send = Script(Response(503))
    out = _policy(clock, fence=Fence(open_for=2)).call("evict", send, write=True)
    assert out.result is Result.FENCED
    assert len(send.seen) == 2  # the third attempt was never sent
    closed = Script(Response(200))
    assert _policy(clock, fence=Fence(open_for=0)).call("get", closed).ok


def test_nothing_the_transport_raises_escapes() -> None:
    clock = Clock()
    out = _policy(clock).call("get", Script(RuntimeError("boom")))
    assert out.result is Result.UNAVAILABLE and "boom" in out.reason


# -- the writes built on the policy ------------------------------------------------------------------


class FakeHttp:
    """Answers by (method, path suffix); records what was sent."""

    def __init__(self, answers: dict[tuple[str, str], list[Response | Exception]]) -> None:
        self.answers = answers
        self.sent: list[tuple[str, str, Any]] = []

    def call(self, method: str, path: str, **kwargs: Any) -> Callable[[Timeouts], Response]:
        def send(timeouts: Timeouts) -> Response:
            self.sent.append((method, path, kwargs.get("body")))
            for (m, suffix), steps in self.answers.items():
                if m == method and path.endswith(suffix):
                    step = steps.pop(0) if len(steps) > 1 else steps[0]
                    if isinstance(step, Exception):
                        raise step
                    return step
            raise AssertionError(f"unexpected {method} {path}")

        return send


def _pod(node: str | None, uid: str = "u1", deleting: bool = False) -> Response:
    meta: dict[str, Any] = {"name": "p", "namespace": "ns", "uid": uid}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return Response(200, json.dumps({"metadata": meta, "spec": {"nodeName": node} if node else {}}).encode())


def _actions(http: FakeHttp) -> Actions:
    clock = Clock()
    return Actions(http, _policy(clock), scheduler_name="placer", identity="r1")


@pytest.mark.parametrize(
    ("read_back", "expected", "ok"),
    [
        (_pod("n1"), Result.OK, True),  # it landed
        (_pod(None), Result.REJECTED, False),  # it did not: re-queue
        (_pod("n2"), Result.CONFLICT, False),  # someone else bound it
        (_pod("n1", uid="other"), Result.GONE, False),  # a new pod of that name
        (Response(404), Result.GONE, False),
        (_reset(), Result.UNKNOWN, False),  # still unknown: the room stays booked
    ],
)
def test_a_bind_whose_answer_was_lost_is_read_back_not_resent(
    read_back: Response | Exception, expected: Result, ok: bool
) -> None:
    http = FakeHttp({("POST", "/binding"): [_reset()], ("GET", "/pods/p"): [read_back]})
    out = _actions(http).bind("ns/p", "n1", "u1")
    assert out.result is expected and out.ok is ok
    assert [s[0] for s in http.sent].count("POST") == 1
    (_, _, body) = http.sent[0]
    assert body["metadata"]["uid"] == "u1"


def test_an_eviction_whose_answer_was_lost_is_sent_again_only_if_it_did_not_land() -> None:
    landed = FakeHttp({("POST", "/eviction"): [_reset()], ("GET", "/pods/p"): [_pod("n1", deleting=True)]})
    assert _actions(landed).evict("ns/p", "u1").ok
    assert [s[0] for s in landed.sent] == ["POST", "GET"]
    lost = FakeHttp({("POST", "/eviction"): [_reset(), Response(201)], ("GET", "/pods/p"): [_pod("n1")]})
    assert _actions(lost).evict("ns/p", "u1").ok
    assert [s[0] for s in lost.sent] == ["POST", "GET", "POST"]
    assert all(s[2]["deleteOptions"] == {"preconditions": {"uid": "u1"}} for s in lost.sent if s[0] == "POST")


def test_evictions_and_deletes_carry_the_uid_and_a_failed_precondition_means_gone() -> None:
    replaced = _pod("n1", uid="u2")  # a new pod of that name: the one meant is gone
    http = FakeHttp(
        {("POST", "/eviction"): [Response(409)], ("GET", "/pods/p"): [replaced], ("DELETE", "/pods/p"): [Response(409)]}
    )
    a = _actions(http)
    evicted, deleted = a.evict("ns/p", "u1"), a.delete("ns/p", "u1")
    assert evicted.ok
    assert deleted.ok and deleted.result is Result.GONE
    assert http.sent[0][2]["deleteOptions"] == {"preconditions": {"uid": "u1"}}
    assert http.sent[-1][2]["preconditions"] == {"uid": "u1"}


def test_an_eviction_answered_409_with_the_pod_still_there_is_a_conflict_not_done() -> None:
    """409 also answers an eviction whose disruption budget was updated concurrently: nothing was
    evicted. It counted as done, and the plan went on to bind into room still taken."""
    http = FakeHttp({("POST", "/eviction"): [Response(409)], ("GET", "/pods/p"): [_pod("n1")]})
    out = _actions(http).evict("ns/p", "u1")
    assert not out.ok and out.result is Result.CONFLICT
    assert [s[0] for s in http.sent] == ["POST", "GET"]  # not sent again blindly


@pytest.mark.parametrize(
    ("read_back", "ok", "result"),
    [
        (_pod("n1"), True, Result.OK),  # an earlier try whose answer was lost landed here: the room is taken
        (_pod("n2"), False, Result.CONFLICT),  # bound elsewhere by someone else
        (_reset(), False, Result.UNKNOWN),  # cannot tell: the room stays booked, read again later
    ],
)
def test_a_bind_answered_409_reads_the_pod_before_dropping_its_room(
    read_back: Response | Exception, ok: bool, result: Result
) -> None:
    http = FakeHttp({("POST", "/binding"): [Response(409)], ("GET", "/pods/p"): [read_back]})
    out = _actions(http).bind("ns/p", "n1", "u1")
    assert out.ok is ok and out.result is result


def test_a_budget_refusal_reaches_the_caller_untouched() -> None:
    http = FakeHttp({("POST", "/eviction"): [Response(429, PDB_429)]})
    out = _actions(http).evict("ns/p", "u1")
    assert out.result is Result.REFUSED and out.status == 429 and "disruption budget" in out.reason
    assert len(http.sent) == 1


def test_a_read_back_refused_by_rbac_falls_back_to_a_list_of_that_one_pod() -> None:
    listed = Response(200, json.dumps({"items": [json.loads(_pod("n1").data)]}).encode())
    http = FakeHttp({("POST", "/binding"): [_reset()], ("GET", "/pods/p"): [Response(403)], ("GET", "/pods"): [listed]})
    out = _actions(http).bind("ns/p", "n1", "u1")
    assert out.ok and "confirmed" in out.reason
    assert [s[1] for s in http.sent] == ["/api/v1/namespaces/ns/pods/p/binding", "/api/v1/namespaces/ns/pods/p",
                                         "/api/v1/namespaces/ns/pods"]  # fmt: skip
    gone = FakeHttp({("POST", "/binding"): [_reset()], ("GET", "/pods/p"): [Response(403)],
                     ("GET", "/pods"): [Response(200, b'{"items": []}')]})  # fmt: skip
    assert _actions(gone).bind("ns/p", "n1", "u1").result is Result.GONE
