"""Unschedulable reports (issue 31): bounded, one per pod, no patch for a condition the pod
already has, behind binds on the write bucket, and a failing send is counted, not lost."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

from placer.kube.policy import Outcome
from placer.kube.ratelimit import TokenBucket
from placer.kube.reports import ReportQueue
from placer.models import Pod


class Writer:
    """Stands in for ``Actions``; ``gate`` holds every patch until set; ``fail`` raises in it."""

    def __init__(self) -> None:
        self.patches: list[tuple[str, str]] = []
        self.events: list[str] = []
        self.gate = threading.Event()
        self.gate.set()
        self.fail: set[str] = set()

    def unschedulable(self, key: str, message: str) -> Outcome:
        self.gate.wait(10)
        if key in self.fail:
            raise RuntimeError("a bug in the patch")
        self.patches.append((key, message))
        return Outcome(ok=True)

    def event(self, key: str, uid: str, **kw: Any) -> None:
        self.events.append(key)


def _queue(writer: Writer, counts: dict[str, int], **kw: Any) -> ReportQueue:
    def counted(result: str) -> None:
        counts[result] = counts.get(result, 0) + 1

    return ReportQueue(lambda: writer, current=kw.pop("current", lambda key: None), counted=counted, **kw)


def test_reports_are_one_per_pod_and_bounded_while_the_sender_is_stuck() -> None:
    """Was: one queued write per pod per batch, without bound (1,623 queued after 5 s)."""
    writer, counts = Writer(), {}
    writer.gate.clear()
    q = _queue(writer, counts, queue_max=50)
    pods = [Pod(name=f"p{i}", uid=f"u{i}") for i in range(100)]
    for batch in range(20):
        for pod in pods[:10]:
            q.submit(pod, f"0/3 nodes are available (batch {batch})")
    assert len(q) <= 10  # one per pod, the newest reason
    for pod in pods:
        q.submit(pod, "0/3 nodes are available")
    assert len(q) <= 50 and counts["dropped"] >= 50
    writer.gate.set()
    assert q.idle(10)
    assert len(writer.patches) <= 51
    q.shutdown()


def test_a_condition_the_pod_already_carries_is_not_patched_again() -> None:
    writer, counts = Writer(), {}
    shown = {"default/a": "0/3 nodes are available"}
    q = _queue(writer, counts, current=shown.get)
    a, b = Pod(name="a", uid="ua"), Pod(name="b", uid="ub")
    q.submit(a, "0/3 nodes are available")  # the cache shows it already
    q.submit(b, "0/3 nodes are available")
    assert q.idle(10)
    q.submit(b, "0/3 nodes are available")  # patched a moment ago, the watch has not shown it yet
    assert q.idle(10)
    assert writer.patches == [("default/b", "0/3 nodes are available")]
    assert writer.events == ["default/a", "default/b", "default/b"]  # events still go (they aggregate)
    assert counts["unchanged"] == 2
    q.shutdown()


def test_a_send_that_raises_is_counted_and_logged_and_the_sender_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    writer, counts = Writer(), {}
    writer.fail = {"default/a"}
    q = _queue(writer, counts)
    with caplog.at_level(logging.ERROR, logger="placer.kube.reports"):
        q.submit(Pod(name="a", uid="ua"), "m")
        q.submit(Pod(name="b", uid="ub"), "m")
        assert q.idle(10)
    assert counts["failed"] == 1 and writer.patches == [("default/b", "m")]
    assert any("default/a" in r.getMessage() for r in caplog.records)
    q.shutdown()


def test_reports_take_only_write_tokens_beyond_the_reserve_binds_keep() -> None:
    bucket = TokenBucket(qps=1e-6, burst=10)  # no refill within the test
    for _ in range(5):
        assert bucket.take() == 0.0  # binds
    assert bucket.take(reserve=5) > 0  # a report waits: the last half of the burst is the binds'
    assert bucket.take() == 0.0  # a bind does not


def test_the_runner_reads_the_pods_current_condition_from_its_cache() -> None:
    from runner_support import feed, make_runner  # noqa: PLC0415

    r = make_runner(metricsPort=0)
    condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes"}
    feed(r, "Pod", {"metadata": {"name": "p", "namespace": "ns"}, "spec": {}, "status": {"conditions": [condition]}},
         {"metadata": {"name": "q", "namespace": "ns"}, "spec": {}, "status": {}})  # fmt: skip
    assert r.view.unschedulable_now("ns/p") == "0/3 nodes"
    assert r.view.unschedulable_now("ns/q") is None and r.view.unschedulable_now("ns/gone") is None
