"""The controller's pure state machines: batching windows and plan execution.

Aspects: window/size flushing, drop-out, back-off; plan steps run in order, wait for victims to
be gone and for real room, capture interchangeable replacements, and abandon safely when
evictions are refused or reality diverges.
"""

from __future__ import annotations

import pytest

from placer.controller.batcher import Batcher
from placer.controller.executor import Abandon, Bind, Evict, PlanRun, PodView, World
from placer.models import Step


def test_a_batch_is_due_after_the_window_or_when_full() -> None:
    b = Batcher(window=30, size=3)
    b.sync(["ns/a"], now=0)
    assert not b.due(10)
    assert b.due(30)
    b.sync(["ns/a", "ns/b", "ns/c"], now=11)
    assert b.due(11)
    assert b.take() == ["ns/a", "ns/b", "ns/c"]
    assert len(b) == 0


def test_pods_bound_or_deleted_meanwhile_drop_out() -> None:
    b = Batcher(window=30, size=99)
    b.sync(["ns/a", "ns/b"], now=0)
    b.sync(["ns/b"], now=1)
    assert b.take() == ["ns/b"]


def test_a_full_batch_takes_the_oldest_and_keeps_the_rest() -> None:
    b = Batcher(window=30, size=2)
    b.sync(["ns/a"], now=0)
    b.sync(["ns/a", "ns/b", "ns/c"], now=1)
    assert b.take() == ["ns/a", "ns/b"]
    assert len(b) == 1


def test_gangs_held_to_a_domain_are_taken_together_up_to_the_group_size() -> None:
    b = Batcher(window=30, size=2, group_size=5)
    units = {"ns/a1": "A", "ns/a2": "A", "ns/b1": "B", "ns/b2": "B", "ns/c1": "C", "ns/c2": "C"}
    b.sync(["ns/a1", "ns/a2"], now=0)
    b.sync(["ns/a1", "ns/a2", "ns/x", "ns/b1", "ns/b2", "ns/c1", "ns/c2"], now=1)
    assert b.take(units, rivals={"A", "B", "C"}) == ["ns/a1", "ns/a2", "ns/b1", "ns/b2"]
    assert b.queued() == {"ns/x", "ns/c1", "ns/c2"}


def test_unplaced_pods_back_off_doubling_up_to_a_cap() -> None:
    b = Batcher(window=1, size=99, backoff=5, max_backoff=12)
    assert [b.defer("ns/a", 0), b.defer("ns/a", 0), b.defer("ns/a", 0)] == [5, 10, 12]
    b.sync(["ns/a"], now=11)
    assert len(b) == 0
    b.sync(["ns/a"], now=12)
    assert len(b) == 1


def test_a_pod_being_solved_keeps_its_back_off_without_joining_a_batch() -> None:
    b = Batcher(window=1, size=99, backoff=5, max_backoff=60)
    b.defer("ns/a", 0)
    b.sync(["ns/a"], now=5)
    assert b.take() == ["ns/a"]  # taken: solved on the solver thread while the loop syncs on
    b.sync([], now=6, held=["ns/a"])
    assert len(b) == 0
    assert b.defer("ns/a", 7) == 10  # left unplaced again: its back-off doubles
    b.sync([], now=8)  # neither pending nor held: gone
    assert b.defer("ns/a", 9) == 5


def test_a_finished_plan_wakes_backed_off_pods_which_keep_their_back_off() -> None:
    b = Batcher(window=1, size=99, backoff=5, max_backoff=60)
    b.defer("ns/a", 0)
    b.defer("ns/a", 0)  # waits until 10
    b.sync(["ns/a"], now=3)
    assert len(b) == 0
    b.wake(now=3)  # a plan finished: room changed
    b.sync(["ns/a"], now=3)
    assert b.take() == ["ns/a"]
    assert b.defer("ns/a", 4) == 20  # still nowhere to go: the back-off went on doubling


CPU = {"cpu": 5000, "pods": 1}


def _views(*views: PodView) -> dict[str, PodView]:
    return {v.key: v for v in views}


def _move_plan(started: float = 100.0) -> tuple[PlanRun, PodView]:
    victim = PodView("ns/backend-0", "uid-v", "a", "rs-uid", created=1.0, requests=CPU)
    steps = [
        Step(id=1, op="evict", pod="ns/backend-0", node="a"),
        Step(id=2, op="await-gone", pod="ns/backend-0", node="a", after=[1]),
        Step(id=3, op="bind", pod="ns/proxy-1", node="a", after=[2]),
        Step(id=4, op="bind", pod=None, replaces="ns/backend-0", node="b", after=[2]),
    ]
    run = PlanRun(steps, {victim.key: victim}, started=started, await_gone=60, await_replacement=60, await_room=60)
    return run, victim


def test_a_move_evicts_waits_for_the_victim_then_binds_the_captured_replacement() -> None:
    run, victim = _move_plan()
    proxy = PodView("ns/proxy-1", "uid-p", None, "rs-proxy", created=90.0, requests={"cpu": 7500, "pods": 1})
    full = {"a": {"cpu": 2500, "pods": 100}, "b": {"cpu": 15000, "pods": 100}}
    actions = run.advance(World(100, _views(victim, proxy), full))
    assert actions == [Evict(1, "ns/backend-0")]
    assert run.evicted(1, 101, ok=True) == []
    # Victim still terminating: nothing binds into a, and the replacement is not there yet.
    terminating = PodView("ns/backend-0", "uid-v", "a", "rs-uid", created=1.0, requests=CPU, deleting=True)
    assert run.advance(World(102, _views(terminating, proxy), full)) == []
    # Victim gone (room freed), replacement created by the ReplicaSet.
    replacement = PodView("ns/backend-x", "uid-r", None, "rs-uid", created=101.5, requests=CPU)
    free = {"a": {"cpu": 7500, "pods": 100}, "b": {"cpu": 15000, "pods": 100}}
    actions = run.advance(World(103, _views(proxy, replacement), free))
    assert Bind(3, "ns/proxy-1", "a") in actions
    assert Bind(4, "ns/backend-x", "b") in actions
    run.bound(3, ok=True)
    run.bound(4, ok=True)
    assert run.finished


def test_a_refused_eviction_abandons_what_depends_on_it() -> None:
    run, victim = _move_plan()
    assert run.advance(World(100, _views(victim), {"a": {}, "b": {}})) == [Evict(1, "ns/backend-0")]
    abandoned = run.evicted(1, 101, ok=False, reason="429 Too Many Requests")
    assert {a.step for a in abandoned if isinstance(a, Abandon)} == {2, 3, 4}
    assert run.finished


def test_a_bind_waits_for_real_room_and_gives_up_after_the_timeout() -> None:
    pod = PodView("ns/new", "uid-n", None, None, created=0.0, requests={"cpu": 2000, "pods": 1})
    run = PlanRun(
        [Step(id=1, op="bind", pod="ns/new", node="a")],
        {},
        started=0,
        await_gone=60,
        await_replacement=60,
        await_room=10,
    )
    tight = {"a": {"cpu": 1000, "pods": 10}}
    assert run.advance(World(1, _views(pod), tight)) == [Bind(1, "ns/new", "a", nominated=True)]
    assert run.advance(World(5, _views(pod), tight)) == []
    actions = run.advance(World(11, _views(pod), tight))
    assert [type(a) for a in actions] == [Abandon]
    assert run.finished


def test_two_binds_into_one_node_never_overbook_it() -> None:
    pods = [PodView(f"ns/p{i}", f"u{i}", None, None, created=0.0, requests={"cpu": 2000}) for i in range(2)]
    steps = [Step(id=i + 1, op="bind", pod=f"ns/p{i}", node="a") for i in range(2)]
    run = PlanRun(steps, {}, started=0, await_gone=60, await_replacement=60, await_room=60)
    actions = run.advance(World(1, _views(*pods), {"a": {"cpu": 3000}}))
    assert [a for a in actions if isinstance(a, Bind) and not a.nominated] == [Bind(1, "ns/p0", "a")]


def test_a_pod_bound_by_someone_else_or_a_vanished_node_abandons_the_step() -> None:
    pod = PodView("ns/new", "uid-n", "elsewhere", None, created=0.0, requests={"cpu": 1})
    run = PlanRun(
        [Step(id=1, op="bind", pod="ns/new", node="a"), Step(id=2, op="bind", pod="ns/x", node="gone")],
        {},
        started=0,
        await_gone=60,
        await_replacement=60,
        await_room=60,
    )
    actions = run.advance(World(1, _views(pod), {"a": {"cpu": 10}}))
    assert {a.step for a in actions if isinstance(a, Abandon)} == {1, 2}


def test_no_replacement_in_time_abandons_only_that_bind() -> None:
    run, victim = _move_plan()
    run.advance(World(100, _views(victim), {"a": {"cpu": 2500}, "b": {"cpu": 15000}}))
    run.evicted(1, 100, ok=True)
    proxy = PodView("ns/proxy-1", "uid-p", None, "rs-proxy", created=90.0, requests={"cpu": 7500})
    free = {"a": {"cpu": 7500}, "b": {"cpu": 15000}}
    first = run.advance(World(101, _views(proxy), free))
    assert Bind(3, "ns/proxy-1", "a") in first
    late = run.advance(World(200, _views(proxy), free))
    assert [(type(a), a.step) for a in late] == [(Abandon, 4)]


def test_an_old_pod_of_the_same_owner_is_not_taken_for_the_replacement() -> None:
    run, victim = _move_plan()
    old_sibling = PodView("ns/backend-1", "uid-s", None, "rs-uid", created=10.0, requests=CPU)
    run.advance(World(100, _views(victim, old_sibling), {"a": {"cpu": 2500}, "b": {"cpu": 15000}}))
    run.evicted(1, 100, ok=True)
    actions = run.advance(World(101, _views(old_sibling), {"a": {"cpu": 7500}, "b": {"cpu": 15000}}))
    assert not any(isinstance(a, Bind) and a.step == 4 for a in actions)


@pytest.mark.parametrize(
    ("impostor", "why"),
    [
        (PodView("other/backend-x", "uid-o", None, "rs-uid", created=101.0, requests=CPU), "another namespace"),
        (PodView("ns/backend-y", "uid-y", None, "rs-uid", created=101.0, requests=CPU, ours=False), "not ours"),
    ],
)
def test_a_replacement_is_not_captured_by_owner_uid_alone(impostor: PodView, why: str) -> None:
    """An owner reference is written by whoever creates the pod: a pod of another namespace (or
    another scheduler's, or outside placer's namespaces) naming the victim's owner is not bound."""
    run, victim = _move_plan()
    run.advance(World(100, _views(victim), {"a": {"cpu": 2500}, "b": {"cpu": 15000}}))
    run.evicted(1, 100, ok=True)
    actions = run.advance(World(101, _views(impostor), {"a": {"cpu": 7500}, "b": {"cpu": 15000}}))
    assert not any(isinstance(a, Bind) and a.step == 4 for a in actions), why


def test_a_replacement_is_captured_whatever_the_clock_skew_to_the_api_server() -> None:
    """Creation times are the API server's; the eviction's time is this replica's. A server clock
    a minute behind made every replacement look older than its eviction: none was captured."""
    run, victim = _move_plan()
    run.advance(World(100, _views(victim), {"a": {"cpu": 2500}, "b": {"cpu": 15000}}))
    run.evicted(1, 100, ok=True)
    replacement = PodView("ns/backend-x", "uid-r", None, "rs-uid", created=40.0, requests=CPU)  # server time
    actions = run.advance(World(101, _views(replacement), {"a": {"cpu": 7500}, "b": {"cpu": 15000}}))
    assert any(isinstance(a, Bind) and (a.step, a.pod) == (4, "ns/backend-x") for a in actions)


def test_a_gang_is_never_split_across_batches() -> None:
    b = Batcher(window=30, size=3)
    b.sync(["ns/a", "ns/g1", "ns/g2", "ns/g3"], now=0)
    gang = {"ns/g1": "ns/train", "ns/g2": "ns/train", "ns/g3": "ns/train"}
    assert b.take(gang) == ["ns/a", "ns/g1", "ns/g2", "ns/g3"]


def test_a_gang_larger_than_the_batch_size_is_a_batch_of_its_own_and_holds_no_one_back() -> None:
    b = Batcher(window=30, size=2)
    b.sync(["ns/a", "ns/g1", "ns/g2", "ns/g3", "ns/b"], now=0)
    gang = {"ns/g1": "ns/train", "ns/g2": "ns/train", "ns/g3": "ns/train"}
    assert b.take(gang) == ["ns/a", "ns/b"]  # the pod behind the gang goes ahead
    assert b.take(gang) == ["ns/g1", "ns/g2", "ns/g3"]


def test_deadlines_count_from_when_a_step_becomes_ready() -> None:
    """The bind after await-gone may wait ``await_room`` from when the victim is gone, not from the
    eviction or the plan's start (issue 13)."""
    run, victim = _move_plan()  # await_room 60
    proxy = PodView("ns/proxy-1", "uid-p", None, "rs-proxy", created=90.0, requests={"cpu": 7500, "pods": 1})
    full = {"a": {"cpu": 2500, "pods": 100}, "b": {"cpu": 15000, "pods": 100}}
    run.advance(World(100, _views(victim, proxy), full))
    run.evicted(1, 100, ok=True)
    terminating = PodView("ns/backend-0", "uid-v", "a", "rs-uid", created=1.0, requests=CPU, deleting=True)
    assert run.advance(World(120, _views(terminating, proxy), full)) == []
    # Gone at 150, but node a is still full (someone else's pod took it): step 3 is ready from 150,
    # so at 200 (100 s after the eviction) it still waits.
    run.advance(World(150, _views(proxy), full))
    actions = run.advance(World(200, _views(proxy), full))
    assert not any(isinstance(a, Abandon) and a.step == 3 for a in actions)
    late = run.advance(World(211, _views(proxy), full))
    assert any(isinstance(a, Abandon) and a.step == 3 for a in late)


def test_any_failure_abandons_the_plan_by_one_rule() -> None:
    """Two independent moves; the first eviction is refused by a PodDisruptionBudget: the second
    eviction is not made any more, while a replacement whose victim is already evicted is still
    bound to its planned node."""
    victims = [PodView(f"ns/v{i}", f"uid-v{i}", "a", f"rs-{i}", created=1.0, requests=CPU) for i in range(3)]
    steps = [
        Step(id=1, op="evict", pod="ns/v0", node="a"),
        Step(id=2, op="await-gone", pod="ns/v0", node="a", after=[1]),
        Step(id=3, op="bind", pod=None, replaces="ns/v0", node="b", after=[2]),
        Step(id=4, op="evict", pod="ns/v1", node="a"),
        Step(id=5, op="evict", pod="ns/v2", node="a", after=[1]),
        Step(id=6, op="bind", pod="ns/new", node="a", after=[2]),
    ]
    run = PlanRun(steps, {v.key: v for v in victims}, started=0, await_gone=60, await_replacement=60, await_room=60)
    new = PodView("ns/new", "uid-n", None, None, created=0.0, requests={"cpu": 1})
    room = {"a": {"cpu": 100_000, "pods": 100}, "b": {"cpu": 100_000, "pods": 100}}
    assert run.advance(World(1, _views(*victims, new), room)) == [Evict(1, "ns/v0"), Evict(4, "ns/v1")]
    assert run.evicted(1, 2, ok=True) == []
    failed = run.evicted(4, 2, ok=False, reason="429 disruption budget")
    assert {a.step for a in failed if isinstance(a, Abandon)} == {5, 6}  # no more evictions, ns/new re-queued
    assert run.failure is not None and "disruption budget" in run.failure
    replacement = PodView("ns/v0-x", "uid-x", None, "rs-0", created=2.5, requests=CPU)
    actions = run.advance(World(3, _views(victims[1], victims[2], new, replacement), room))
    assert Bind(3, "ns/v0-x", "b") in actions
    run.bound(3, ok=True)
    assert run.finished


def test_a_gangs_binds_go_out_together_once_every_member_has_room() -> None:
    members = [PodView(f"ns/g{i}", f"u{i}", None, None, created=0.0, requests={"cpu": 2000}) for i in range(2)]
    steps = [Step(id=1, op="bind", pod="ns/g0", node="a"), Step(id=2, op="bind", pod="ns/g1", node="b")]
    run = PlanRun(
        steps,
        {},
        started=0,
        await_gone=60,
        await_replacement=60,
        await_room=30,
        gangs={"ns/g0": "ns/train", "ns/g1": "ns/train"},
    )
    half = {"a": {"cpu": 4000}, "b": {"cpu": 1000}}
    first = run.advance(World(1, _views(*members), half))
    assert first and all(isinstance(a, Bind) and a.nominated for a in first)  # a has room, b not: nothing binds
    assert run.advance(World(2, _views(*members), half)) == []
    both = run.advance(World(3, _views(*members), {"a": {"cpu": 4000}, "b": {"cpu": 4000}}))
    assert both == [Bind(1, "ns/g0", "a"), Bind(2, "ns/g1", "b")]
    # Never room for the whole gang: abandoned together, nothing bound.
    run = PlanRun(steps, {}, started=0, await_gone=60, await_replacement=60, await_room=30, gangs=run.gangs)
    run.advance(World(1, _views(*members), half))
    late = run.advance(World(40, _views(*members), half))
    assert {a.step for a in late if isinstance(a, Abandon)} == {1, 2} and run.finished


def test_waking_chosen_pods_leaves_the_others_backed_off() -> None:
    b = Batcher(window=1, size=99, backoff=5, max_backoff=60)
    b.defer("ns/a", 0)
    b.hold("ns/b")
    b.hold("ns/c")
    b.wake(now=1, keys=["ns/b", "ns/gone"])
    b.sync(["ns/a", "ns/b", "ns/c"], now=1)
    assert b.take() == ["ns/b"]
