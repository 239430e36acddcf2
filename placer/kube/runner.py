"""The controller loop (`placer run`): a thin composition of the controller's parts.

Every tick (0.2 s, sooner when a batch falls due) it collects the binds that finished
(``binds.Binder``), applies a finished solve and feeds the queue (``cycle.SchedulingCycle``), and,
on the leader, builds the cluster model only when there is work (``view.ClusterView``: the
informer caches parsed once per resourceVersion, with the binds assumed), advances the plan in
flight (``plans.PlanDriver``), takes the next batch onto the solver thread, checks node labels
(``labels``) and rebalances when due (``rebalancing.RebalancingDriver``). ``health.Health``
answers /healthz and /readyz. Each stage that raises is logged and counted
(``placer_cycle_errors_total{stage}``) and the next tick runs.

Leader election uses a Lease; only the leader writes (``leader.LeaseFence``). Crash safety: see
``placer.kube.plans``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable

from kubernetes import client

from placer.controller.batcher import Batcher
from placer.engine import prime_packing
from placer.inputs.annotations import MOVED_AT
from placer.kube.actions import Actions
from placer.kube.assume import AssumeCache
from placer.kube.binds import Binder
from placer.kube.client import Http, own_client
from placer.kube.context import Context
from placer.kube.cycle import SchedulingCycle
from placer.kube.events import EventRecorder
from placer.kube.fairpool import FairPool
from placer.kube.health import MIN_STALL, Health
from placer.kube.informers import Informer, informers, optional_informers
from placer.kube.labels import check_labels
from placer.kube.leader import ApiLeases, Elector, Leadership, LeaseFence, unique_identity
from placer.kube.plans import PlanDriver
from placer.kube.policy import Policy
from placer.kube.rebalancing import Rebalancing, RebalancingDriver
from placer.kube.reports import ReportQueue
from placer.kube.serving import Metrics, serve
from placer.kube.view import ClusterView
from placer.models import Cluster, ControllerConfig

__all__ = ["MOVED_AT", "Runner"]

log = logging.getLogger("placer.controller")
TICK = 0.2
MIN_SLEEP = 0.01  # the shortest sleep between two ticks (a fill estimate that keeps shrinking)
WRITERS = 4  # connections kept for writes besides the bind workers' (the loop's own, reports, read-backs)


class Runner:
    def __init__(self, api: client.ApiClient, cfg: ControllerConfig, identity: str) -> None:
        self.cfg = cfg
        identity = unique_identity(identity)  # the Lease holder and the events' reporting instance
        self.metrics = Metrics()
        election = cfg.leader_election
        self.fence = LeaseFence(always=not election.enabled)
        http = Http(api)
        retried = self.metrics.api_retries.labels
        self.policy = Policy(fence=self.fence, retried=lambda cause: retried(cause=cause).inc())
        self.http = http
        self.informers: dict[str, Informer] = informers(http, self.policy, watch_timeout=cfg.watch_timeout)
        counted = self.metrics.events.labels
        self.events = EventRecorder(
            Http(own_client(api)),  # its own connection pool, as kube-scheduler's event client
            self.policy,  # the same fence: a replica that may no longer write sends no event
            scheduler_name=cfg.scheduler_name,
            identity=identity,
            qps=cfg.event_qps or cfg.api_qps,
            burst=cfg.event_burst or cfg.api_burst,
            dry_run=cfg.dry_run,
            counted=lambda result: counted(result=result).inc(),
            is_pod=lambda key: key in self.driver.plan_pods or self.informers["Pod"].get(key) is not None,
        )
        actions = Actions(
            # Writes on a pool of their own, keeping a connection for every bind worker: the shared
            # pool keeps cpu_count x 5 idle connections, and binds beyond that would open and then
            # drop a TLS connection each.
            Http(own_client(api, connections=cfg.bind_workers + WRITERS)),
            self.policy,
            scheduler_name=cfg.scheduler_name,
            identity=identity,
            dry_run=cfg.dry_run,
            qps=cfg.api_qps,
            burst=cfg.api_burst,
            events=self.events,
        )
        batcher = Batcher(
            window=cfg.batch_window,
            size=cfg.batch_size,
            group_size=cfg.group_batch_size,
            backoff=cfg.requeue_backoff,
            max_backoff=cfg.max_requeue_backoff,
        )
        self.ctx = Context(
            cfg=cfg,
            identity=identity,
            metrics=self.metrics,
            actions=actions,
            batcher=batcher,
            assumed=AssumeCache(),
            pool=FairPool(cfg.bind_workers, thread_name_prefix="binder"),
            cached=lambda kind, key: inf.get(key) if (inf := self.informers.get(kind)) is not None else None,
        )
        self.stop = threading.Event()
        self.exit_code = 0
        elector = None
        if election.enabled:
            leases = ApiLeases(http, self.policy, election)  # reads: the fence does not apply
            elector = Elector(leases, election, identity, self.fence)
        self.leadership = Leadership(elector, self._lost, fence=self.fence)
        self.view = ClusterView(cfg, self.informers, self.ctx.assumed)
        self.binder = Binder(self.ctx, self.view)
        self.driver = PlanDriver(self.ctx, self.view, self.binder)
        # Unschedulable reports (a status patch, then an event) wait here, not in front of binds.
        reported = self.metrics.reports.labels
        self.reports = ReportQueue(
            lambda: self.ctx.actions,
            current=self.view.unschedulable_now,
            counted=lambda result: reported(result=result).inc(),
        )
        self.cycle = SchedulingCycle(self.ctx, self.view, self.binder, self.driver, self.reports)
        self.rebalancing = Rebalancing(cfg, http, self.policy)
        self.rebalancer = RebalancingDriver(self.ctx, self.view, self.driver, self.rebalancing)
        self.probes = Health(
            cfg,
            policy=self.policy,
            fence=self.fence,
            leadership=self.leadership,
            view=self.view,
            cycle=self.cycle,
            driver=self.driver,
        )
        self._errors_said: dict[str, float] = {}
        self._label_checked = 0.0
        self.metrics.refresh = lambda: self.probes.refresh_metrics(self.metrics)

    # -- what tests and callers reach -----------------------------------------------------------
    @property
    def actions(self) -> Actions:
        return self.ctx.actions

    @actions.setter
    def actions(self, actions: Actions) -> None:  # a test's fake reaches every part
        self.ctx.actions = actions

    @property
    def identity(self) -> str:
        return self.ctx.identity

    def cluster(self) -> Cluster:
        return self.view.cluster()

    # -- lifecycle ------------------------------------------------------------------------------
    def _lost(self) -> None:
        self.exit_code = 1
        self.stop.set()
        self.cycle.wake.set()

    def _leading(self) -> bool:
        """This replica holds the lease and its writes are not fenced: it may schedule."""
        return self.leadership.leading.is_set() and self.fence.allows()

    def _sleep(self) -> float:
        """How long the loop sleeps after a tick: a tick, or less when the next batch falls due
        sooner (its window closes, or it fills up at the rate pods arrive), so that a due batch
        does not wait for the next tick. A solve in flight wakes the loop itself; a follower (or a
        fenced leader), or a batch due that this tick did not take (a stage failed), waits a whole
        tick."""
        if self.cycle.solving is not None or not self._leading() or not self.probes.ready():
            return TICK
        due_in = self.ctx.batcher.due_in(time.monotonic())
        if due_in is None or due_in <= 0:
            return TICK
        return min(TICK, max(MIN_SLEEP, due_in))

    def run(self) -> int:
        prime_packing()  # the packing search's compiled steps: compiled (or loaded) while the informers sync
        self.informers.update(optional_informers(self.http, self.policy, watch_timeout=self.cfg.watch_timeout))
        for inf in self.informers.values():
            inf.start()
        probes = self.probes
        server = (
            serve(
                self.cfg.metrics_port, self.metrics, probes.health, probes.readiness, address=self.cfg.metrics_address
            )
            if self.cfg.metrics_port
            else None
        )
        for inf in self.informers.values():
            if not inf.wait_synced(60):
                log.error("%s informer did not sync within 60s", inf.kind)
        self.leadership.start()
        wake = self.cycle.wake
        try:
            while not self.stop.is_set():
                if self._stage("tick", self.tick):
                    probes.last_cycle = time.monotonic()
                wake.wait(self._sleep())  # a tick, or sooner when a solve is done
                wake.clear()
        finally:
            self.leadership.stop()
            for inf in self.informers.values():
                inf.stop()
            self.ctx.pool.shutdown(wait=False, cancel_futures=True)  # queued binds are dropped
            self.cycle.solver.shutdown(wait=False, cancel_futures=True)  # a solve in flight writes nothing
            self.reports.shutdown()
            self.ctx.group_status.shutdown()
            self.events.close()
            if server is not None:
                server.shutdown()
        if self.exit_code:
            # Lost the lease: exit now, as kube-scheduler does, without waiting for calls still in
            # flight (read-backs may take a call's whole deadline; writes are fenced anyway).
            logging.shutdown()
            os._exit(self.exit_code)
        return self.exit_code

    # -- one cycle ------------------------------------------------------------------------------
    def _stage(self, stage: str, fn: Callable[[], object]) -> bool:
        """Run one stage of a cycle; an exception is logged (with its traceback at most once a
        minute per stage) and counted in ``placer_cycle_errors_total{stage}``, and never escapes."""
        try:
            return fn() is not False
        except Exception as exc:
            self.metrics.cycle_errors.labels(stage=stage).inc()
            now = time.monotonic()
            if now - self._errors_said.get(stage, -MIN_STALL * 2) >= 60.0:
                self._errors_said[stage] = now
                log.exception("scheduling cycle failed in %s; the next cycle runs", stage)
            else:
                log.debug("scheduling cycle failed in %s: %s", stage, exc)
            return False

    def tick(self) -> bool:
        """Feed the batcher every tick; build the full cluster model only when there is work.
        A batch's solve runs on the solver thread: its answer is applied on the tick it is done,
        before the next batch is taken (whose model so holds this batch's placements). Each stage
        that fails is logged and counted; the others, and the next tick, still run. True when
        every stage completed."""
        cycle, driver = self.cycle, self.driver
        ok = self._stage("collect", self.binder.collect)
        if cycle.done():
            ok = self._stage("solve", cycle.finish) and ok
        ok = self._stage("queue", cycle.queue) and ok
        leading = self._leading()
        self.metrics.leader.set(1 if leading else 0)
        if not leading or not self.probes.ready():
            return ok
        now = time.monotonic()
        labels_due = now - self._label_checked >= self.cfg.label_check_period
        # At most one plan in flight, scheduling or rebalancing: no rebalancing while a batch that
        # may plan is being solved.
        rebalance_due = driver.plan is None and cycle.solving is None and self.rebalancing.due(now)
        solve_due = cycle.solving is None and self.ctx.batcher.due(now)
        if driver.plan is None and not solve_due and not labels_due and not rebalance_due:
            return ok
        model: list[Cluster] = []
        if not self._stage("model", lambda: model.append(self.view.cluster())):
            return False
        cluster = model[0]
        planned = driver.plan is not None
        if planned:
            ok = self._stage("plan", lambda: driver.advance(cluster)) and ok
        if solve_due:
            # Batches keep flowing while a plan runs: solved on a state holding the plan's room.
            # After a plan step the model again: the plan may just have bound pods (no longer
            # held as its open binds, now assumed), and a model from before those binds would
            # offer their room. Without a plan this tick's model is the one: building it again
            # would only take in the watch events of the last few milliseconds, at the cost of a
            # whole assembly (about a tenth of the controller's CPU in a backlog).
            ok = self._stage("solve", lambda: cycle.submit(self.view.cluster() if planned else cluster)) and ok
        if labels_due:
            self._label_checked = time.monotonic()
            ok = self._stage("labels", lambda: check_labels(self.ctx, self.view, cluster)) and ok
        if rebalance_due and driver.plan is None:
            ok = self._stage("rebalance", lambda: self.rebalancer.run(cluster)) and ok
        return ok
