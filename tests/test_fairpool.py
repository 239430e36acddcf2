"""The bind workers serve one lane per batch in turn (``placer.kube.fairpool``).

Aspects: calls of several lanes run alternately, each lane in its own order; a batch bound after a
big gang's batch is bound among the gang's first binds, not after its last (the stream's 19 s wait
in docs/bench/e2e-biggang.md), and every bind of both still lands; a call's exception reaches its
future; shutdown with cancel_futures drops what is queued.
"""

from __future__ import annotations

import threading
from concurrent.futures import wait
from typing import Any

import pytest
from runner_support import FakeActions, make_runner

from placer.kube.fairpool import FairPool
from placer.models import Pod


def _held(pool: FairPool) -> threading.Event:
    """Occupy the pool's one worker until the returned event is set, so that what is submitted
    meanwhile queues up and the order it then runs in is the pool's alone."""
    gate, started = threading.Event(), threading.Event()

    def block() -> None:
        started.set()
        gate.wait()

    pool.submit_to("gate", block)
    started.wait()
    return gate


def test_lanes_take_turns_each_in_its_own_order() -> None:
    pool = FairPool(1)
    ran: list[str] = []
    gate = _held(pool)
    futures = [pool.submit_to("gang", ran.append, f"g{i}") for i in range(5)]
    futures += [pool.submit_to("small", ran.append, f"s{i}") for i in range(2)]
    assert pool.queued() == {"gang": 5, "small": 2}
    gate.set()
    wait(futures)
    pool.shutdown()
    assert ran == ["g0", "s0", "g1", "s1", "g2", "g3", "g4"]


class _Gated(FakeActions):
    """Binds wait for ``gate`` (the API is slow) and record their order."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()

    def bind(self, key: str, node: str, uid: str | None = None) -> Any:
        self.gate.wait()
        return super().bind(key, node, uid)


def test_a_batch_decided_after_a_big_gang_is_bound_among_the_gangs_first_binds() -> None:
    actions = _Gated()
    r = make_runner(actions, metricsPort=0)
    r.ctx.pool.shutdown()
    r.ctx.pool = FairPool(1)  # one worker: the order is the pool's
    gang = [Pod(namespace="ns", name=f"g{i}", uid=f"ug{i}", gang="big", gang_size=200) for i in range(200)]
    small = [Pod(namespace="ns", name=f"s{i}", uid=f"us{i}") for i in range(3)]
    r.binder.bind_all([(p, "n1") for p in gang])
    r.binder.bind_all([(p, "n2") for p in small])
    actions.gate.set()
    wait([f for _, _, f in r.binder.inflight])
    r.binder.collect()
    r.ctx.pool.shutdown()
    order = [c[1] for c in actions.calls if c[0] == "bind"]
    assert sorted(order) == sorted(p.key for p in gang + small)  # every bind of both, once
    assert max(order.index(p.key) for p in small) < 10  # not behind the gang's 200
    gang_order = [k for k in order if k.startswith("ns/g")]
    assert gang_order == [p.key for p in gang]  # the gang's own binds in their order


def test_a_calls_exception_reaches_its_future_and_shutdown_cancels_the_queue() -> None:
    pool = FairPool(1)

    def boom() -> None:
        raise ValueError("refused")

    gate = _held(pool)
    failing = pool.submit(boom)
    dropped = pool.submit_to(1, print, "never")
    pool.shutdown(wait=False, cancel_futures=True)
    gate.set()
    assert failing.cancelled() and dropped.cancelled()
    with pytest.raises(RuntimeError):
        pool.submit(print)
    other = FairPool(1)
    with pytest.raises(ValueError, match="refused"):
        other.submit(boom).result(timeout=60)
    other.shutdown()
