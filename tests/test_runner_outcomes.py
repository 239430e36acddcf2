"""The assume cache and what the controller's loop does with the outcome of each bind.

Aspects: assumptions are keyed by UID (a pod recreated under the same name is not assumed); they
are released by the watch (the pod seen bound, or gone), by a definite failure, or by a read-back
showing the pod still unbound, never by time alone; a bind whose call raised is an unknown outcome
that is read back, not an exception in the loop; a failed stage is counted and the next cycle runs;
a plan eviction refused by a PodDisruptionBudget is tried again a bounded number of times; a
plan's evictions are sent together and their outcomes applied in the plan's order;
in dry-run nothing stays assumed; a fenced replica's queued binds are dropped unsent. Health: only a
stuck leader with pending pods and a reachable API is unhealthy; readiness says why not.
"""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import wait
from typing import Any

from runner_support import FakeActions, feed, make_runner
from urllib3.exceptions import ProtocolError

from placer.controller.executor import PlanRun, PodView
from placer.kube.actions import Actions
from placer.kube.assume import AssumeCache
from placer.kube.policy import Outcome, Policy, Response, Result, Timeouts
from placer.kube.runner import Runner
from placer.kube.serving import serve
from placer.models import Pod, Step

P = Pod(name="p", uid="u1")


def test_assumptions_are_keyed_by_uid_and_released_by_the_watch() -> None:
    cache = AssumeCache()
    cache.assume(P, "n1", now=0.0)
    (seen,) = cache.apply([P])
    assert seen.node_name == "n1" and P in cache and "default/p" in cache
    recreated = Pod(name="p", uid="u2")
    (fresh,) = cache.apply([recreated])
    assert fresh.node_name is None and recreated not in cache  # the old UID is gone: released
    assert len(cache) == 0
    cache.assume(P, "n1", now=0.0)
    cache.apply([P.model_copy(update={"node_name": "n1"})])  # the watch shows it bound
    assert len(cache) == 0


def test_an_assumption_never_expires_by_time_alone() -> None:
    cache = AssumeCache()
    cache.assume(P, "n1", now=0.0)
    for _ in range(3):
        (seen,) = cache.apply([P])  # the watch lags, however long
        assert seen.node_name == "n1"
    assert P in cache


class Binder:
    """Stands in for ``Actions``: bind answers (or raises) from a script; read-backs too."""

    def __init__(self, binds: list[Outcome | Exception], reads: list[Outcome] | None = None) -> None:
        self.binds, self.reads = binds, reads or []
        self.calls: list[tuple[str, ...]] = []
        self.lock = threading.Lock()

    def bind(self, key: str, node: str, uid: str | None = None) -> Outcome:
        with self.lock:
            self.calls.append(("bind", key, node))
            step = self.binds.pop(0)
        if isinstance(step, Exception):
            raise step
        return step

    def confirm_bind(self, key: str, uid: str | None, node: str) -> Outcome:
        with self.lock:
            self.calls.append(("confirm", key, node))
            return self.reads.pop(0)

    def event(self, key: str, uid: str, *, reason: str, **kwargs: Any) -> None:
        with self.lock:
            self.calls.append(("event", key, reason))

    def annotate(self, key: str, annotations: dict[str, str]) -> Outcome:
        with self.lock:
            self.calls.append(("annotate", key))
        return Outcome(ok=True)


def _settle(r: Runner) -> None:
    """Let the pool finish what is in flight and account it; send the read-backs that follow at once."""
    wait([f for _, _, f in r.binder.inflight])
    r.binder.collect()
    r.binder.recheck = {k: (p, n, 0.0) for k, (p, n, _) in r.binder.recheck.items()}
    r.binder.collect()


def test_a_bind_whose_call_raised_is_read_back_instead_of_breaking_the_loop() -> None:
    reset = ProtocolError("Connection aborted.", ConnectionResetError(104, "reset"))
    binder = Binder([reset], reads=[Outcome(ok=False, result=Result.UNKNOWN), Outcome(ok=True)])
    r = make_runner(binder, metricsPort=0)  # type: ignore[arg-type]
    r.binder.bind_all([(P, "n1")])
    _settle(r)  # the exception is consumed once: the pod stays assumed, a read-back is sent
    assert P in r.ctx.assumed and len(r.binder.inflight) == 1
    _settle(r)  # read back: still unknown, still assumed, read again
    assert P in r.ctx.assumed
    _settle(r)  # read back: bound there
    assert [c[0] for c in binder.calls] == ["bind", "confirm", "confirm"]
    assert P in r.ctx.assumed  # until the watch shows it
    assert not r.binder.inflight and not r.binder.recheck
    assert r.metrics.binds.labels(result="unknown")._value.get() == 2


def test_a_read_back_showing_the_pod_unbound_releases_it_for_the_next_batch() -> None:
    unbound = Outcome(ok=False, reason="bind did not land: pod still unbound", result=Result.REJECTED)
    binder = Binder([Outcome(ok=False, reason="outcome unknown", result=Result.UNKNOWN)], reads=[unbound])
    r = make_runner(binder, metricsPort=0)  # type: ignore[arg-type]
    r.binder.bind_all([(P, "n1")])
    _settle(r)
    assert P in r.ctx.assumed
    _settle(r)
    assert P not in r.ctx.assumed and not r.binder.inflight


def test_a_definite_failure_releases_the_assumption_and_api_trouble_backs_the_pod_off() -> None:
    binder = Binder([Outcome(ok=False, status=409, result=Result.CONFLICT), Outcome(ok=False, result=Result.THROTTLED)])
    r = make_runner(binder, metricsPort=0)  # type: ignore[arg-type]
    q = Pod(name="q", uid="u2")
    r.binder.bind_all([(P, "n1"), (q, "n2")])
    _settle(r)
    assert len(r.ctx.assumed) == 0
    r.ctx.batcher.sync(["default/p", "default/q"], now=time.monotonic())
    assert "default/q" in r.ctx.batcher._deferred and "default/p" not in r.ctx.batcher._deferred


def test_in_dry_run_nothing_stays_assumed_beyond_its_cycle() -> None:
    r = make_runner(Binder([Outcome(ok=True)]), metricsPort=0, dryRun=True)  # type: ignore[arg-type]
    r.binder.bind_all([(P, "n1")])
    assert P in r.ctx.assumed  # during the cycle the room is booked
    _settle(r)
    assert len(r.ctx.assumed) == 0


class _Never:
    def allows(self) -> bool:
        return False


def test_a_fenced_replica_drops_its_queued_binds_unsent() -> None:
    sent: list[str] = []

    class Http:
        def call(self, method: str, path: str, **kw: Any) -> Any:
            def send(t: Timeouts) -> Response:
                sent.append(path)
                return Response(201)

            return send

    r = make_runner(metricsPort=0)
    r.actions = Actions(Http(), Policy(fence=_Never()), scheduler_name="placer", identity="r1")
    r.binder.bind_all([(P, "n1")])
    _settle(r)
    assert sent == [] and len(r.ctx.assumed) == 0
    assert r.metrics.binds.labels(result="fenced")._value.get() == 1


def test_a_failing_stage_is_counted_and_the_next_cycle_runs() -> None:
    r = make_runner(metricsPort=0)
    calls: list[int] = []

    def broken() -> None:
        calls.append(1)
        raise RuntimeError("a bug")

    r.binder.collect = broken  # type: ignore[method-assign]
    assert r.tick() is False
    assert r.tick() is False
    assert len(calls) == 2
    assert r.metrics.cycle_errors.labels(stage="collect")._value.get() == 2


def test_only_a_stuck_leader_with_pending_pods_and_a_reachable_api_is_unhealthy() -> None:
    r = make_runner(metricsPort=0)
    now = time.monotonic()
    r.probes.last_cycle = now - 10_000
    r.cycle.pending = 3
    r.policy.last_answer = now
    assert r.probes.health() == (True, "ok (standby)")
    r.fence.renewed(now, 10)  # leading
    ok, why = r.probes.health()
    assert not ok and "3 pods pending" in why
    r.policy.last_answer = now - 10_000  # an API outage: restarting would not help
    assert r.probes.health()[0]
    r.policy.last_answer, r.cycle.pending = now, 0
    assert r.probes.health()[0]
    r.cycle.pending, r.probes.last_cycle = 3, now
    assert r.probes.health() == (True, "ok")


def test_readiness_waits_for_every_cache_and_says_why_not() -> None:
    r = make_runner(metricsPort=0)
    ok, why = r.probes.readiness()
    assert not ok and "caches not synced" in why and "Pod" in why
    for inf in r.informers.values():
        inf._synced.set()
    assert r.probes.readiness() == (True, "ok")
    assert r.leadership._elector is not None
    r.leadership._elector.problem = "the Lease namespace 'placer-system' does not exist: create it"
    assert r.probes.readiness() == (False, "the Lease namespace 'placer-system' does not exist: create it")


# -- plan evictions refused by a PodDisruptionBudget ----------------------------------------------------


class Evictor:
    def __init__(self, *answers: Outcome) -> None:
        self.answers = list(answers)
        self.evicted: list[tuple[str, str | None]] = []

    def evict(self, key: str, uid: str | None = None) -> Outcome:
        self.evicted.append((key, uid))
        return self.answers.pop(0)

    def event(self, *args: Any, **kwargs: Any) -> None:
        pass


def _victim_plan(r: Runner) -> None:
    feed(r, "Node", {"kind": "Node", "metadata": {"name": "a"}, "status": {"allocatable": {"cpu": "2", "pods": "9"}}})
    victim = {
        "kind": "Pod",
        "metadata": {"name": "backend-0", "namespace": "ns", "uid": "uid-v"},
        "spec": {"nodeName": "a", "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": "Running"},
    }
    feed(r, "Pod", victim)
    view = PodView("ns/backend-0", "uid-v", "a", None, created=0.0)
    steps = [Step(id=1, op="evict", pod="ns/backend-0", node="a")]
    r.driver.plan = PlanRun(
        steps, {view.key: view}, started=time.time(), await_gone=60, await_replacement=60, await_room=60
    )


def _again(r: Runner) -> None:
    r.driver.refused = {k: (n, 0.0) for k, (n, _) in r.driver.refused.items()}
    r.driver.advance(r.cluster())


PDB = Outcome(ok=False, status=429, reason="would violate the pod's disruption budget", result=Result.REFUSED)


def test_a_budget_refusal_is_tried_again_a_few_times_before_the_step_fails() -> None:
    evictor = Evictor(PDB, PDB, Outcome(ok=True))
    r = make_runner(evictor, metricsPort=0)  # type: ignore[arg-type]
    _victim_plan(r)
    r.driver.advance(r.cluster())
    assert r.driver.plan is not None and r.driver.plan.steps[1].state == "running"  # not failed: retried later
    _again(r)
    _again(r)
    assert evictor.evicted == [("ns/backend-0", "uid-v")] * 3  # each with the victim's UID
    assert r.driver.plan is None  # the eviction went through at the third try; the plan is done


def test_a_budget_that_keeps_refusing_fails_the_step_after_the_bounded_tries() -> None:
    evictor = Evictor(PDB, PDB, PDB)
    r = make_runner(evictor, metricsPort=0)  # type: ignore[arg-type]
    _victim_plan(r)
    plan = r.driver.plan
    r.driver.advance(r.cluster())
    _again(r)
    _again(r)
    assert len(evictor.evicted) == 3
    assert r.driver.plan is None and plan is not None and plan.steps[1].state == "failed"
    assert r.driver.refused == {}


class Barrier:
    """An evictor that answers only once ``parties`` evictions are in flight together (each call
    waits for the others): a plan that sent its evictions one after the other gets failures."""

    def __init__(self, parties: int) -> None:
        self.barrier = threading.Barrier(parties, timeout=5)
        self.evicted: list[str] = []
        self.events: list[str] = []
        self.lock = threading.Lock()

    def evict(self, key: str, uid: str | None = None) -> Outcome:
        try:
            self.barrier.wait()
        except threading.BrokenBarrierError:
            return Outcome(ok=False, status=500, reason="not concurrent", result=Result.UNAVAILABLE)
        with self.lock:
            self.evicted.append(key)
        return Outcome(ok=True)

    def event(self, key: str, uid: str, **_: Any) -> None:
        self.events.append(key)


def test_a_plans_evictions_are_sent_together_and_applied_in_order() -> None:
    parties = 4
    evictor = Barrier(parties)
    r = make_runner(evictor, metricsPort=0, bindWorkers=parties)  # type: ignore[arg-type]
    names = [f"n{i}" for i in range(parties)]
    feed(
        r,
        "Node",
        *(
            {"kind": "Node", "metadata": {"name": n}, "status": {"allocatable": {"cpu": "2", "pods": "9"}}}
            for n in names
        ),
    )
    victims = [
        {
            "kind": "Pod",
            "metadata": {"name": f"v{i}", "namespace": "ns", "uid": f"uid-{i}"},
            "spec": {"nodeName": n, "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
            "status": {"phase": "Running"},
        }
        for i, n in enumerate(names)
    ]
    feed(r, "Pod", *victims)
    views = {f"ns/v{i}": PodView(f"ns/v{i}", f"uid-{i}", n, None, created=0.0) for i, n in enumerate(names)}
    steps = [Step(id=i + 1, op="evict", pod=f"ns/v{i}", node=n) for i, n in enumerate(names)]
    r.driver.plan = PlanRun(steps, views, started=time.time(), await_gone=60, await_replacement=60, await_room=60)
    plan = r.driver.plan
    r.driver.advance(r.cluster())
    assert sorted(evictor.evicted) == sorted(views)  # every call answered: all were in flight at once
    assert evictor.events == list(views)  # outcomes applied in the plan's order
    assert all(plan.steps[i + 1].state == "done" for i in range(parties))


def _pending_plan(r: Runner) -> None:
    feed(r, "Node", {"kind": "Node", "metadata": {"name": "a"}, "status": {"allocatable": {"cpu": "2", "pods": "9"}}})
    pending = {
        "kind": "Pod",
        "metadata": {"name": "new", "namespace": "ns", "uid": "uid-n"},
        "spec": {"schedulerName": "placer", "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": "Pending"},
    }
    feed(r, "Pod", pending)
    steps = [Step(id=1, op="bind", pod="ns/new", node="a")]
    r.driver.plan = PlanRun(steps, {}, started=time.time(), await_gone=60, await_replacement=60, await_room=60)


def test_a_plan_bind_of_unknown_outcome_keeps_the_room_booked_until_read_back() -> None:
    binder = Binder([Outcome(ok=False, reason="outcome unknown", result=Result.UNKNOWN)], reads=[Outcome(ok=True)])
    r = make_runner(binder, metricsPort=0)  # type: ignore[arg-type]
    _pending_plan(r)
    r.driver.advance(r.cluster())
    (pod,) = [p for p in r.cluster().pods if p.name == "new"]
    assert pod.node_name == "a"  # the model books its room while the outcome is unknown
    assert "ns/new" not in r.cycle.pending_keys()
    _settle(r)  # the read-back is sent ...
    _settle(r)  # ... and answers: bound there
    assert [c[0] for c in binder.calls if c[0] != "event"] == ["bind", "confirm"]
    assert pod in r.ctx.assumed and not r.binder.inflight and not r.binder.recheck  # until the watch shows it bound


def test_a_refused_plan_bind_says_nothing_was_scheduled_and_books_nothing() -> None:
    binder = Binder([Outcome(ok=False, status=409, reason="already assigned", result=Result.CONFLICT)])
    r = make_runner(binder, metricsPort=0)  # type: ignore[arg-type]
    _pending_plan(r)
    r.driver.advance(r.cluster())
    assert [c for c in binder.calls if c[0] != "bind"] == []  # no Scheduled event, no moved-at
    assert len(r.ctx.assumed) == 0 and r.driver.plan is None


def test_the_probes_answer_with_their_reason_and_metrics_show_ages() -> None:
    r = make_runner(metricsPort=0)
    r.informers["Pod"].last_event = time.monotonic() - 42
    server = serve(0, r.metrics, r.probes.health, r.probes.readiness)
    port = server.server_address[1]
    try:

        def get(path: str) -> tuple[int, str]:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as resp:
                    return resp.status, resp.read().decode()
            except urllib.error.HTTPError as err:
                return err.code, err.read().decode()

        code, body = get("/readyz")
        assert code == 503 and body.startswith("caches not synced")
        assert get("/healthz") == (200, "ok")
        code, text = get("/metrics")
        assert code == 200
        (age,) = [ln for ln in text.splitlines() if ln.startswith('placer_watch_event_age_seconds{kind="Pod"}')]
        assert float(age.split()[-1]) >= 42
        assert "placer_plan_in_progress 0.0" in text and "placer_cycle_errors_total" in text
    finally:
        server.shutdown()


def test_a_bind_no_read_back_can_settle_is_released_once_the_watch_shows_it_unbound() -> None:
    """Read-backs refused for ever (an RBAC without get pods): after a bounded number the pod
    watch decides; the room is not booked for ever and the pod is batched again."""
    refused = Outcome(
        ok=False, status=403, reason="outcome unknown, read back failed: forbidden", result=Result.UNKNOWN
    )
    binder = Binder([Outcome(ok=False, result=Result.UNKNOWN)], reads=[refused] * 20)
    r = make_runner(binder, metricsPort=0)  # type: ignore[arg-type]
    r.binder.bind_all([(P, "n1")])
    for _ in range(12):
        _settle(r)
    assert P in r.ctx.assumed  # the watch has said nothing since the bind: the room stays booked
    r.ctx.assumed.get(P).since -= 60  # type: ignore[union-attr]  # the bind was sent a minute ago ...
    r.informers["Pod"].last_event = time.monotonic()  # ... and the watch delivered just now
    _settle(r)
    assert P not in r.ctx.assumed and not r.binder.recheck


def test_healthz_fails_while_an_informer_has_failed_for_minutes_and_the_api_answers() -> None:
    """A watch resumed for ever from a version the server refuses (504) left /healthz at 200."""
    r = make_runner(metricsPort=0)
    now = time.monotonic()
    r.policy.last_answer = now
    pods = r.informers["Pod"]
    pods.failing_since, pods.last_error = now - 5, "TooLargeError: too large resource version"
    assert r.probes.health()[0]  # a few seconds of errors: the loop backs off and retries
    pods.failing_since = now - 600
    ok, why = r.probes.health()
    assert not ok and "Pod watch" in why and "too large" in why
    r.policy.last_answer = now - 600  # an API outage: restarting would not help
    assert r.probes.health()[0]


def test_healthz_fails_while_a_solve_overruns_its_budget_by_the_stated_factor() -> None:
    """A hung or runaway solve (the greedy pass once took 120 s on a 1 s limit) was invisible."""
    from concurrent.futures import Future  # noqa: PLC0415

    from placer.kube.anytime import SolveJob  # noqa: PLC0415

    r = make_runner(metricsPort=0, healthzSolveOverrun=4)
    job = SolveJob.__new__(SolveJob)
    object.__setattr__(job, "budget", 10.0)
    hung: Future[Any] = Future()
    r.cycle.solving = (job, hung)
    now = time.monotonic()
    r.cycle.solve_started = now - 35  # 3.5 times the budget: still within the factor
    assert r.probes.health()[0]
    r.cycle.solve_started = now - 45
    ok, why = r.probes.health()
    assert not ok and "10.0s budget" in why
    hung.set_result(None)  # done: the loop applies it on its next tick
    assert r.probes.health()[0]


def test_a_refused_bind_backs_the_pod_off_growing_not_every_batch() -> None:
    """A bind answered 403 or 422 was re-queued at once: tried again every batch, for ever."""
    refused = [Outcome(ok=False, status=s, reason="Forbidden", result=Result.REJECTED) for s in (403, 422, 403)]
    binder = Binder(list(refused))
    r = make_runner(binder, metricsPort=0)  # type: ignore[arg-type]
    delays = []
    for _ in range(3):
        r.binder.bind_all([(P, "n1")])
        _settle(r)
        assert P not in r.ctx.assumed
        delays.append(r.ctx.batcher._deferred["default/p"][1])
    assert delays[0] > 0 and delays[1] > delays[0] and delays[2] > delays[1]


def _gang_member(name: str) -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "annotations": {"placer.io/gang": "train", "placer.io/gang-size": "3"},
        },
        "spec": {"schedulerName": "placer", "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": "Pending"},
    }


def test_an_incomplete_gang_is_neither_batched_nor_reported_until_its_size_is_pending() -> None:
    """Kube-scheduler's GangScheduling PreEnqueue keeps a gang's pods out of its queue until
    minCount exist. Each batch of an incomplete gang used to be solved, found short and its pods
    reported unschedulable (37 such batches while a 5,000-pod gang was being created,
    docs/bench/e2e-biggang.md); two of three members now wait unbatched and unreported, and with
    the third all three are batched together and bound."""
    r = make_runner(FakeActions(), metricsPort=0, batchWindowSeconds=1, engine={"solver": {"workers": 1}})
    feed(r, "Node", {"kind": "Node", "metadata": {"name": "n1"},
                     "status": {"allocatable": {"cpu": "8", "memory": "8Gi", "pods": "110"}}})  # fmt: skip
    feed(r, "Pod", _gang_member("g0"), _gang_member("g1"))
    r.cycle.queue()
    assert len(r.ctx.batcher) == 0 and sorted(r.cycle.gated) == ["ns/g0", "ns/g1"]
    assert r.cycle.pending == 2  # still pending (the gauge), only not batched
    r.cycle.solve(r.cluster())  # nothing to take
    r.reports.shutdown(wait=True)
    assert r.ctx.actions.calls == []  # type: ignore[attr-defined]  # no report, event nor bind
    feed(r, "Pod", _gang_member("g0"), _gang_member("g1"), _gang_member("g2"))
    r.cycle.queue()
    assert len(r.ctx.batcher) == 3 and r.cycle.gated == []  # complete: batched together
    r.cycle.solve(r.cluster())
    _settle(r)
    binds = sorted(c[1] for c in r.ctx.actions.calls if c[0] == "bind")  # type: ignore[attr-defined]
    assert binds == ["ns/g0", "ns/g1", "ns/g2"]


def test_members_already_running_count_toward_a_gangs_size() -> None:
    """A gang a crashed controller left partly bound: its running members and the pending rest
    make it complete, so the rest is batched (not gated for ever)."""
    r = make_runner(FakeActions(), metricsPort=0, batchWindowSeconds=1, engine={"solver": {"workers": 1}})
    feed(r, "Node", {"kind": "Node", "metadata": {"name": "n1"},
                     "status": {"allocatable": {"cpu": "8", "memory": "8Gi", "pods": "110"}}})  # fmt: skip
    running = _gang_member("g0")
    running["spec"]["nodeName"], running["status"]["phase"] = "n1", "Running"
    feed(r, "Pod", running, _gang_member("g1"))
    r.cycle.queue()
    assert len(r.ctx.batcher) == 0 and r.cycle.gated == ["ns/g1"]  # 2 of 3
    feed(r, "Pod", running, _gang_member("g1"), _gang_member("g2"))
    r.cycle.queue()
    assert len(r.ctx.batcher) == 2 and r.cycle.gated == []
