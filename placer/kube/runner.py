"""The controller loop (`placer run`): watch, batch, solve, bind, execute plans.

Every tick (0.2 s, sooner when a batch falls due) it takes in what the informers changed
(``placer.kube.index``: each object parsed once per resourceVersion, the queue of pending pods
kept as pods change) and feeds the batcher. When a batch is due it builds the cluster model, with
the binds it issued but has not seen yet (``assumed``, as kube-scheduler assumes pods, so nothing
is double-booked), and solves the batch with the same ``decide`` as ``placer solve`` on a solver
thread while the loop goes on gathering the next batch (``placer.kube.anytime``: one solve in
flight; its time limit is the floor with a backlog and grows up to what is left of the batch
window when arrivals are slow). When the answer is in, placed pods are bound concurrently,
unplaced ones get PodScheduled=False/Unschedulable and a FailedScheduling event and are backed
off, and a global plan (only when none is running) is handed to the executor, which evicts, waits
until victims are gone, captures replacements and binds only into real room.

Crash safety: no plan state is kept outside the process. A restarted controller abandons the
in-flight plan and re-plans from what the API shows: victims still terminating keep their room
in the model, replacements and pods waiting for a delayed bind are ordinary pending pods and join
the next batch, so a crash loses no pod and books no node twice. Replacements bound by a plan
are annotated ``placer.io/moved-at`` so the move cooldown survives restarts.

Volumes: pods are resolved against the PersistentVolume, PersistentVolumeClaim and StorageClass
caches with the same ``resolve_pod`` as ``placer solve``. Before binding a pod with unbound
WaitForFirstConsumer claims, each claim gets ``volume.kubernetes.io/selected-node`` (kube-scheduler's
VolumeBinding PreBind); if that fails the pod is not bound, a FailedScheduling event says why, and
the pod is backed off and retried.
"""

from __future__ import annotations

import copy
import datetime as dt
import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from kubernetes import client

from placer.controller.batcher import Batcher
from placer.controller.executor import Action, Bind, Evict, PlanRun, PodView, World
from placer.engine import NodeLabels, build_snapshot
from placer.inputs.annotations import LABEL_POLICY, MOVED_AT
from placer.inputs.assemble import assemble_cluster
from placer.inputs.kubectl import (
    KubeObjects,
    parse_job,
    parse_namespace,
    parse_node,
    parse_pdb,
    parse_replicaset,
)
from placer.inputs.podgroups import (
    PodGroup,
    parse_composite_pod_group,
    parse_plugins_pod_group,
    parse_workload_pod_group,
)
from placer.inputs.stamps import parse_timestamp
from placer.inputs.volumes import (
    SELECTED_NODE,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    parse_claim,
    parse_persistent_volume,
    parse_storage_class,
)
from placer.kube.actions import Actions, Outcome
from placer.kube.anytime import Answer, SolveJob, solve_budget
from placer.kube.assume import AssumeCache
from placer.kube.client import Http
from placer.kube.events import EventRecorder
from placer.kube.index import ParsedIndex, PodIndex
from placer.kube.informers import (  # Kubernetes 1.37 workloads
    BETA_POD_GROUP,
    COMPOSITE_POD_GROUP,
    PLUGINS_POD_GROUP,
    WORKLOAD_POD_GROUP,
    Informer,
    informers,
    optional_informers,
)
from placer.kube.leader import ApiLeases, Elector, Leadership, LeaseFence, unique_identity
from placer.kube.policy import Policy, Result
from placer.kube.rebalancing import Rebalancing
from placer.kube.reports import ReportQueue
from placer.kube.serving import Metrics, serve
from placer.models import (
    UNPLACED_CODES,
    Cluster,
    ControllerConfig,
    EvictionDetail,
    Job,
    Node,
    Pod,
    PodDisruptionBudget,
    ReplicaSet,
    Step,
    describe,
    describe_eviction,
)
from placer.plan import Plan
from placer.service import holding, nominated_holds, plan_steps

__all__ = ["MOVED_AT", "Runner"]

log = logging.getLogger("placer.controller")
PLANNED = "~planned"  # name suffix of the stand-in holding a running plan's room for a bind
TICK = 0.2
MIN_SLEEP = 0.01  # the shortest sleep between two ticks (a fill estimate that keeps shrinking)
PDB_ATTEMPTS = 3  # evictions refused by a PodDisruptionBudget are tried this many times ...
PDB_RETRY_DELAY = 5.0  # ... this many seconds apart, before the plan step fails
WRITERS = 4  # connections kept for writes besides the bind workers' (the loop's own, reports, read-backs)
MIN_STALL = 30.0  # /healthz never calls a loop stuck sooner, however short the batch window
READBACKS = 6  # read-backs of a bind of unknown outcome (1+2+4+8+16+30 s) before the watch decides
INFORMER_STUCK = 120.0  # /healthz fails when an informer has failed this long (or the stall limit)
WATCH_SETTLE = 10.0  # ... if it delivered something this long after the bind was sent


def _epoch(stamp: str) -> float:
    """A validated creationTimestamp in seconds (0 when absent)."""
    return (parse_timestamp(stamp) or 0.0) if stamp else 0.0


def _label(out: Outcome) -> str:
    """The ``result`` label of a write's metric: ok, the HTTP status, or what happened without one."""
    if out.ok:
        return "ok"
    return str(out.status) if out.status else str(out.result)


def _own_client(api: client.ApiClient, *, connections: int | None = None) -> client.ApiClient:
    """A client on the same configuration (server, credentials, user agent) with a connection
    pool of its own, keeping up to ``connections`` connections (default: the client's)."""
    configuration = api.configuration
    if connections is not None:
        configuration = copy.copy(configuration)  # shares the credentials (and their refreshes)
        configuration.connection_pool_maxsize = connections
    own = client.ApiClient(configuration)
    own.user_agent = api.user_agent
    return own


def _view(pod: Pod, ours: bool = True) -> PodView:
    """What the plan executor needs to see of a pod (``ours``: addressed to this scheduler and in
    its namespaces, so a replacement it may bind)."""
    return PodView(
        key=pod.key,
        uid=pod.uid,
        node=pod.node_name,
        owner_uid=pod.owner.uid if pod.owner is not None and pod.owner.uid else None,
        created=_epoch(pod.creation),
        requests={**pod.requests, "pods": 1},
        deleting=pod.terminating,
        completion_index=pod.completion_index,
        ours=ours,
    )


class Runner:
    def __init__(self, api: client.ApiClient, cfg: ControllerConfig, identity: str) -> None:
        self.cfg = cfg
        self.identity = unique_identity(identity)  # the Lease holder and the events' reporting instance
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
            Http(_own_client(api)),  # its own connection pool, as kube-scheduler's event client
            self.policy,  # the same fence: a replica that may no longer write sends no event
            scheduler_name=cfg.scheduler_name,
            identity=self.identity,
            qps=cfg.event_qps or cfg.api_qps,
            burst=cfg.event_burst or cfg.api_burst,
            dry_run=cfg.dry_run,
            counted=lambda result: counted(result=result).inc(),
            is_pod=lambda key: key in self.plan_pods or self.informers["Pod"].get(key) is not None,
        )
        self.actions = Actions(
            # Writes on a pool of their own, keeping a connection for every bind worker: the shared
            # pool keeps cpu_count x 5 idle connections, and binds beyond that would open and then
            # drop a TLS connection each.
            Http(_own_client(api, connections=cfg.bind_workers + WRITERS)),
            self.policy,
            scheduler_name=cfg.scheduler_name,
            identity=self.identity,
            dry_run=cfg.dry_run,
            qps=cfg.api_qps,
            burst=cfg.api_burst,
            events=self.events,
        )
        self.batcher = Batcher(
            window=cfg.batch_window,
            size=cfg.batch_size,
            backoff=cfg.requeue_backoff,
            max_backoff=cfg.max_requeue_backoff,
        )
        self.stop = threading.Event()
        self.exit_code = 0
        elector = None
        if election.enabled:
            leases = ApiLeases(http, self.policy, election)  # reads: the fence does not apply
            elector = Elector(leases, election, self.identity, self.fence)
        self.leadership = Leadership(elector, self._lost, fence=self.fence)
        self.assumed = AssumeCache()
        self._recheck: dict[str, tuple[Pod, str, float]] = {}  # binds of unknown outcome -> next read-back
        self.plan: PlanRun | None = None
        self.reserved: set[str] = set()  # pending pods a running plan will bind
        self.why: dict[str, str] = {}  # victim -> why the running plan evicts it (its event says so)
        self.plan_pods: dict[str, Pod] = {}  # the running plan's pods to bind and victims, by key
        self._left_as: dict[str, str] = {}  # pending pod -> the unplaced code its last solve gave
        self.pool = ThreadPoolExecutor(cfg.bind_workers, thread_name_prefix="binder")
        # Unschedulable reports (a status patch, then an event) wait here, not in front of binds.
        reported = self.metrics.reports.labels
        self.reports = ReportQueue(
            lambda: self.actions, current=self._unschedulable_now, counted=lambda result: reported(result=result).inc()
        )
        # The informer caches parsed (each object once per resourceVersion), pods with the queue.
        self.pods = PodIndex(cfg.scheduler_name, self._in_scope)
        self._nodes = ParsedIndex[Node]("Node", parse_node)
        self._volumes = ParsedIndex[PersistentVolume]("PersistentVolume", parse_persistent_volume)
        self._claims = ParsedIndex[PersistentVolumeClaim]("PersistentVolumeClaim", parse_claim)
        self._classes = ParsedIndex[StorageClass]("StorageClass", parse_storage_class)
        self._pdbs = ParsedIndex[PodDisruptionBudget]("PodDisruptionBudget", parse_pdb)
        self._replicasets = ParsedIndex[ReplicaSet]("ReplicaSet", parse_replicaset)
        self._jobs = ParsedIndex[Job]("Job", parse_job)
        self._namespaces = ParsedIndex[tuple[str, dict[str, str]]]("Namespace", parse_namespace)
        self._groups = ParsedIndex[PodGroup](WORKLOAD_POD_GROUP, parse_workload_pod_group)
        self._plugin_groups = ParsedIndex[PodGroup](PLUGINS_POD_GROUP, parse_plugins_pod_group)
        self._beta_groups = ParsedIndex[PodGroup](BETA_POD_GROUP, parse_workload_pod_group)
        self._composites = ParsedIndex[PodGroup](COMPOSITE_POD_GROUP, parse_composite_pod_group)
        self._model: tuple[tuple[int, ...], Cluster] | None = None  # the last model, by what it was built of
        # Anytime solving: the batch being solved on the solver thread (at most one).
        self.solver = ThreadPoolExecutor(1, thread_name_prefix="solver")
        self.solving: tuple[SolveJob, Future[Answer]] | None = None
        self._wake = threading.Event()  # set when a solve is done: the loop applies it at once
        self.rebalancing = Rebalancing(cfg, http, self.policy)
        self.plan_reason = "Preempted"  # the reason of the running plan's eviction events
        self.inflight: list[tuple[Pod, str, Future[Outcome]]] = []
        self._gangs: dict[str, str] = {}  # pending pod -> its gang, to keep gangs in one batch
        self._last_tick = time.monotonic()
        self._last_cycle = time.monotonic()  # the last tick all of whose stages completed
        self._pending = 0
        self._plan_started: float | None = None
        self._solve_started: float | None = None  # when the solve in flight was submitted
        self._refused: dict[tuple[int, str], tuple[int, float]] = {}  # plan evictions a PDB refused
        self._errors_said: dict[str, float] = {}
        self._label_checked = 0.0
        self.metrics.refresh = self._refresh_metrics

    # -- lifecycle ------------------------------------------------------------------------------
    def _lost(self) -> None:
        self.exit_code = 1
        self.stop.set()
        self._wake.set()

    def _api_answered(self) -> float | None:
        """When the API last answered anything (a call, a list, a watch event)."""
        times = [self.policy.last_answer] + [i.last_event for i in self.informers.values()]
        known = [t for t in times if t is not None]
        return max(known) if known else None

    def health(self) -> tuple[bool, str]:
        """Unhealthy only when restarting would help: an informer failing for minutes while the
        API answers; a solve running ``healthzSolveOverrun`` times its budget; a leader with pods
        pending and the API answering, whose loop has completed no cycle for
        ``healthzStallWindows`` batch windows. A standby's loop, or any replica during an API
        outage, stays healthy (no crash loop)."""
        now = time.monotonic()
        limit = max(MIN_STALL, self.cfg.healthz_stall_windows * self.cfg.batch_window)
        blind = self._blind(now, max(INFORMER_STUCK, limit))
        if blind is not None:
            return False, blind
        overrun = self._overrun(now)
        if overrun is not None:
            return False, overrun
        stalled = now - self._last_cycle
        if stalled < limit:
            return True, "ok"
        if not self.fence.allows():
            return True, "ok (standby)"
        if self._pending == 0:
            return True, "ok (nothing pending)"
        answered = self._api_answered()
        if answered is None or now - answered > limit:
            return True, "ok (the API is not answering)"
        return False, f"stuck: no scheduling cycle completed for {stalled:.0f}s with {self._pending} pods pending"

    def _overrun(self, now: float) -> str | None:
        """The solve in flight has run ``healthzSolveOverrun`` times its budget (and at least
        ``MIN_STALL``): hung or runaway, it holds every batch behind it."""
        solving, started = self.solving, self._solve_started
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
        for inf in self.informers.values():
            since = inf.failing_since
            if since is not None and now - since > limit:
                return f"stuck: the {inf.kind} watch has failed for {now - since:.0f}s ({inf.last_error})"
        return None

    def healthy(self) -> bool:
        return self.health()[0]

    def readiness(self) -> tuple[bool, str]:
        """Ready once every cache is synced; otherwise, or when the election cannot work, why not."""
        unsynced = [i.kind for i in self.informers.values() if not i.synced]
        if unsynced:
            return False, f"caches not synced: {', '.join(unsynced)}"
        problem = self.leadership.problem
        if problem:
            return False, problem
        return True, "ok"

    def ready(self) -> bool:
        return all(i.synced for i in self.informers.values())

    def _leading(self) -> bool:
        """This replica holds the lease and its writes are not fenced: it may schedule."""
        return self.leadership.leading.is_set() and self.fence.allows()

    def _sleep(self) -> float:
        """How long the loop sleeps after a tick: a tick, or less when the next batch falls due
        sooner (its window closes, or it fills up at the rate pods arrive), so that a due batch
        does not wait for the next tick. A solve in flight wakes the loop itself; a follower (or a
        fenced leader), or a batch due that this tick did not take (a stage failed), waits a whole
        tick."""
        if self.solving is not None or not self._leading() or not self.ready():
            return TICK
        due_in = self.batcher.due_in(time.monotonic())
        if due_in is None or due_in <= 0:
            return TICK
        return min(TICK, max(MIN_SLEEP, due_in))

    def _refresh_metrics(self) -> None:
        """Gauges that age: set when /metrics is scraped, so they keep moving if the loop is stuck."""
        now = time.monotonic()
        for inf in self.informers.values():
            if inf.last_event is not None:
                self.metrics.watch_event_age.labels(kind=inf.kind).set(now - inf.last_event)
        plan = self.plan
        self.metrics.plan_in_progress.set(0 if plan is None else 1)
        started = self._plan_started
        self.metrics.plan_age.set(0.0 if plan is None or started is None else max(0.0, time.time() - started))

    def run(self) -> int:
        self.informers.update(optional_informers(self.http, self.policy, watch_timeout=self.cfg.watch_timeout))
        for inf in self.informers.values():
            inf.start()
        server = (
            serve(self.cfg.metrics_port, self.metrics, self.health, self.readiness, address=self.cfg.metrics_address)
            if self.cfg.metrics_port
            else None
        )
        for inf in self.informers.values():
            if not inf.wait_synced(60):
                log.error("%s informer did not sync within 60s", inf.kind)
        self.leadership.start()
        try:
            while not self.stop.is_set():
                self._last_tick = time.monotonic()
                if self._stage("tick", self.tick):
                    self._last_cycle = time.monotonic()
                self._wake.wait(self._sleep())  # a tick, or sooner when a solve is done
                self._wake.clear()
        finally:
            self.leadership.stop()
            for inf in self.informers.values():
                inf.stop()
            self.pool.shutdown(wait=False, cancel_futures=True)  # queued binds are dropped
            self.solver.shutdown(wait=False, cancel_futures=True)  # a solve in flight writes nothing
            self.reports.shutdown()
            self.events.close()
            if server is not None:
                server.shutdown()
        if self.exit_code:
            # Lost the lease: exit now, as kube-scheduler does, without waiting for calls still in
            # flight (read-backs may take a call's whole deadline; writes are fenced anyway).
            logging.shutdown()
            os._exit(self.exit_code)
        return self.exit_code

    # -- the model of the cluster ---------------------------------------------------------------
    def _indexes(self) -> list[ParsedIndex[Any]]:
        return [
            self.pods,
            self._nodes,
            self._volumes,
            self._claims,
            self._classes,
            self._pdbs,
            self._replicasets,
            self._jobs,
            self._namespaces,
            self._groups,
            self._plugin_groups,
            self._beta_groups,
            self._composites,
        ]

    def _refresh(self) -> None:
        """Take in what every informer changed since the last look (an optional kind the server
        does not serve has no informer: its index stays empty)."""
        for index in self._indexes():
            index.update(self.informers.get(index.kind))

    def objects(self) -> KubeObjects:
        """The informer caches parsed, with the binds issued but not yet observed applied."""
        self._refresh()
        objs = KubeObjects()
        objs.nodes = self._nodes.values()
        objs.pdbs = self._pdbs.values()
        objs.replicasets = self._replicasets.values()
        objs.jobs = self._jobs.values()
        objs.namespaces = dict(self._namespaces.values())
        objs.volumes = self._volumes.values()
        objs.claims = self._claims.values()
        objs.classes = self._classes.values()
        objs.pods = self.assumed.apply(self.pods.values())
        objs.pod_groups = [*self._groups.values(), *self._plugin_groups.values()]
        objs.pod_groups += [*self._beta_groups.values(), *self._composites.values()]
        return objs

    def cluster(self) -> Cluster:
        """The cluster the engine sees, assembled as ``placer solve`` assembles a file; the last
        one again while no informer and no assumption changed since it was built."""
        self._refresh()
        built_of = (*(index.generation for index in self._indexes()), self.assumed.version)
        if self._model is not None and self._model[0] == built_of:
            return self._model[1]
        cluster = assemble_cluster(self.objects())
        self._model = ((*built_of[:-1], self.assumed.version), cluster)  # apply may release assumptions
        return cluster

    def _pending_keys(self) -> list[str]:
        """Pods waiting for this scheduler (``Pod.awaits``) in the configured namespaces, less
        those a plan will bind, assumed or being solved; also records each one's gang, so that
        gangs are batched whole. Reads the queue the pod index keeps (only changed pods are
        looked at)."""
        self.pods.update(self.informers.get("Pod"))
        solving = self.solving[0].keys if self.solving is not None else frozenset()
        out = []
        self._gangs = {}
        for key, pod in self.pods.waiting.items():
            if key in self.reserved or key in solving or pod in self.assumed:
                continue
            out.append(key)
            if pod.gang_key is not None:
                self._gangs[key] = pod.gang_key
        return out

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

    def _queue(self) -> None:
        queued = self._pending_keys()
        solving = sorted(self.solving[0].keys) if self.solving is not None else []
        pending = queued + solving  # a pod being solved is still pending
        self._pending = len(pending)
        self.metrics.pending.set(len(pending))
        self._left_as = {k: v for k, v in self._left_as.items() if k in set(pending)}
        counts: dict[str, int] = dict.fromkeys((*UNPLACED_CODES, "new"), 0)
        for key in pending:
            counts[self._left_as.get(key, "new")] += 1
        for reason, count in counts.items():
            self.metrics.pending_by_reason.labels(reason=reason).set(count)
        self.batcher.sync(queued, time.monotonic(), held=solving)

    def tick(self) -> bool:
        """Feed the batcher every tick; build the full cluster model only when there is work.
        A batch's solve runs on the solver thread: its answer is applied on the tick it is done,
        before the next batch is taken (whose model so holds this batch's placements). Each stage
        that fails is logged and counted; the others, and the next tick, still run. True when
        every stage completed."""
        ok = self._stage("collect", self._collect)
        if self.solving is not None and self.solving[1].done():
            ok = self._stage("solve", self._finish) and ok
        ok = self._stage("queue", self._queue) and ok
        leading = self._leading()
        self.metrics.leader.set(1 if leading else 0)
        if not leading or not self.ready():
            return ok
        labels_due = time.monotonic() - self._label_checked >= self.cfg.label_check_period
        # At most one plan in flight, scheduling or rebalancing: no rebalancing while a batch that
        # may plan is being solved.
        rebalance_due = self.plan is None and self.solving is None and self.rebalancing.due(time.monotonic())
        solve_due = self.solving is None and self.batcher.due(time.monotonic())
        if self.plan is None and not solve_due and not labels_due and not rebalance_due:
            return ok
        model: list[Cluster] = []
        if not self._stage("model", lambda: model.append(self.cluster())):
            return False
        cluster = model[0]
        planned = self.plan is not None
        if planned:
            ok = self._stage("plan", lambda: self._advance(cluster)) and ok
        if solve_due:
            # Batches keep flowing while a plan runs: solved on a state holding the plan's room.
            # After a plan step the model again: the plan may just have bound pods (no longer
            # held as its open binds, now assumed), and a model from before those binds would
            # offer their room. Without a plan this tick's model is the one: building it again
            # would only take in the watch events of the last few milliseconds, at the cost of a
            # whole assembly (about a tenth of the controller's CPU in a backlog).
            ok = self._stage("solve", lambda: self._submit(self.cluster() if planned else cluster)) and ok
        if labels_due:
            self._label_checked = time.monotonic()
            ok = self._stage("labels", lambda: self._check_labels(cluster)) and ok
        if rebalance_due and self.plan is None:
            ok = self._stage("rebalance", lambda: self._rebalance(cluster)) and ok
        return ok

    def _in_scope(self, pod: Pod) -> bool:
        """``namespaces:`` (empty: all) bounds every write: placer binds, moves and evicts only there."""
        return not self.cfg.namespaces or pod.namespace in self.cfg.namespaces

    def _frozen(self, cluster: Cluster) -> frozenset[str]:
        """Running pods rebalancing may not move: moved too recently, or outside placer's namespaces."""
        return self._out_of_scope(cluster) | self._recently_moved(cluster)

    def _out_of_scope(self, cluster: Cluster) -> frozenset[str]:
        """Pods no plan may evict, not even to preempt them: outside placer's namespaces."""
        return frozenset(p.key for p in cluster.pods if not self._in_scope(p))

    def _recently_moved(self, cluster: Cluster) -> frozenset[str]:
        """Pods moved less than the cooldown ago: never moved again meanwhile, but a strictly
        higher priority still preempts them (``plan_batch``'s ``held``)."""
        cooldown = self.cfg.evictions.move_cooldown
        now = time.time()
        # moved_at is parsed once with the pod; an unreadable stamp is infinitely recent.
        return frozenset(p.key for p in cluster.pods if p.moved_at is not None and now - p.moved_at < cooldown)

    def _holding_plan(self, cluster: Cluster) -> Cluster:
        """The cluster with the running plan's room held: every bind still to come counts as a
        pod already running on its planned node (victims count as well until they are gone)."""
        if self.plan is None:
            return cluster
        held = []
        for step in self.plan.open_binds():
            key = step.pod or step.replaces
            pod = self.plan_pods.get(key or "")
            if pod is not None:
                held.append(holding(pod, step.node, PLANNED))
        return cluster.model_copy(update={"pods": (*cluster.pods, *held)}) if held else cluster

    def _job(self, cluster: Cluster) -> SolveJob | None:
        """Take the next batch and fix what its solve reads; None when no pod of it can be solved."""
        now = time.monotonic()
        overdue = self.batcher.waited(now) or 0.0  # the batch's own oldest pod (taken first)
        keys = set(self.batcher.take(self._gangs))
        # awaits: the assembled pod, whose gang's PodGroup may not exist yet (it then waits).
        batch = [p for p in cluster.pods if p.key in keys and p.awaits(self.cfg.scheduler_name)]
        if not batch:
            return None
        planning = self.plan is None  # at most one plan in flight: meanwhile batches only place
        cluster = self._holding_plan(cluster)
        running = [p for p in cluster.pods if p.running] + nominated_holds(cluster, self.cfg.scheduler_name, batch)
        state = build_snapshot(cluster.nodes, running, batch, cluster.namespaces)
        engine = self.cfg.engine
        budget = solve_budget(
            floor=engine.solver.time_limit,
            most=self.cfg.max_solve,
            window=self.cfg.batch_window,
            size=self.cfg.batch_size,
            waiting=len(self.batcher),
            waited=self.batcher.waited(now),
            overdue=overdue,
            fills_in=self.batcher.fills_in(now),
        )
        if budget != engine.solver.time_limit:
            solver = engine.solver.model_copy(update={"time_limit": budget})
            engine = engine.model_copy(update={"solver": solver})
        limits = self.cfg.evictions
        # Issue 29 (balance of a backlog): the pods the batcher has not taken yet go with the batch.
        queued = self.batcher.queued()
        waiting = tuple(p for p in cluster.pods if p.key in queued)
        return SolveJob(
            cluster=cluster,
            state=state,
            batch=batch,
            config=engine,
            budget=budget,
            planning=planning,
            max_evictions=limits.per_cycle,
            max_per_node=limits.per_node,
            frozen=self._out_of_scope(cluster),
            held=self._recently_moved(cluster),
            waiting=waiting,
        )

    def _submit(self, cluster: Cluster) -> None:
        """Take the next batch and solve it on the solver thread; ``_finish`` applies the answer."""
        job = self._job(cluster)
        if job is None:
            return
        future = self.solver.submit(job.run)
        future.add_done_callback(lambda _: self._wake.set())
        self.solving = (job, future)
        self._solve_started = time.monotonic()

    def _solve(self, cluster: Cluster) -> None:
        """Take the next batch, solve it and apply the answer, here and now."""
        job = self._job(cluster)
        if job is not None:
            self._apply(job, job.run())

    def _finish(self) -> None:
        """Apply the answer of the solve in flight (done). A solve that raised puts its batch back
        (backed off), as a refused answer does."""
        assert self.solving is not None
        job, future = self.solving
        self.solving = None
        try:
            answer = future.result()
        except Exception:
            for pod in job.batch:
                self.batcher.defer(pod.key, time.monotonic())
            raise
        self._apply(job, answer)

    def _apply(self, job: SolveJob, answer: Answer) -> None:
        """What a batch's answer means: binds, reports, or a plan (the validator's objections
        refuse it whole)."""
        batch, state, decision = job.batch, job.state, answer.decision
        self.metrics.solve_seconds.observe(answer.seconds)
        self.metrics.solve_budget.observe(job.budget)
        self.metrics.solve_gap.set(decision.gap)
        self.metrics.batch_size.observe(len(batch))
        if answer.problems:
            self._refuse(batch, "plan" if decision.plan is not None else "placements", answer.problems)
            return
        if decision.plan is not None and self.plan is not None:  # never two plans (a guard: not reached)
            self._refuse(batch, "plan", ["another plan started while this batch was solved"])
            return
        names = [n.name for n in state.nodes]
        for pod, code, reason in decision.unplaced:
            self.metrics.unplaced.labels(code=code).inc()
            self._left_as[pod.key] = code
            if not job.planning:
                # Solved while a plan ran, so no plan could be made for it: it waits for that plan
                # to end (at once if it has ended) and is solved again, with planning, before it is
                # reported; a preemptor is not told it is unschedulable while its victims go.
                if self.plan is not None:
                    self.batcher.hold(pod.key)
                continue
            self.reports.submit(pod, describe(reason))  # kube-scheduler's words, formatted at the edge
            self.batcher.defer(pod.key, time.monotonic())
        if decision.plan is None:
            self._bind_all([(pod, names[n]) for pod, n in decision.placements])
            log.info(
                "batch of %d: %d placed (binding), %d unplaced; decided in %.2fs of a %.2fs budget",
                len(batch),
                len(decision.placements),
                len(decision.unplaced),
                answer.seconds,
                job.budget,
            )
            return
        plan = decision.plan
        log.info(
            "global plan: %d evictions, %d steps; decided in %.2fs of a %.2fs budget",
            len(plan.evictions),
            len(plan.steps),
            answer.seconds,
            job.budget,
        )
        why = {
            e.pod.key: describe_eviction(
                e.kind,
                names[e.node],
                names[e.to] if e.to is not None else None,
                e.for_,
                EvictionDetail(short_of=e.short_of, outranked_by=e.outranked_by, choice=e.choice),
            )
            for e in plan.evictions
        }
        self._start(plan, plan_steps(plan.steps, names), why, reason="Preempted")
        self._advance(self.cluster())  # the cluster as it is now, not as the solve began

    def _start(self, plan: Plan, steps: list[Step], why: dict[str, str], *, reason: str) -> None:
        """Make ``plan`` the one plan in flight; its evictions' events say ``why`` with ``reason``."""
        self.why = why
        self.plan_reason = reason
        self.plan = PlanRun(
            steps,
            {e.pod.key: _view(e.pod) for e in plan.evictions},
            started=time.time(),
            await_gone=self.cfg.plan_timeouts.await_gone,
            await_replacement=self.cfg.plan_timeouts.await_replacement,
            await_room=self.cfg.plan_timeouts.await_room,
            gangs={pod.key: pod.gang_key for pod, _ in plan.placements if pod.gang_key is not None},
        )
        self.reserved = {pod.key for pod, _ in plan.placements}
        self.plan_pods = {pod.key: pod for pod, _ in plan.placements} | {e.pod.key: e.pod for e in plan.evictions}

    def _rebalance(self, cluster: Cluster) -> None:
        """One rebalancing decision; its plan (if any, valid, and not a dry run) becomes the plan in
        flight. Every move gets an event on the pod and on both nodes, with the load before and after."""
        out, problems = self.rebalancing.decide(cluster, self._frozen(cluster))
        report = out.report
        if report.fallbacks:  # usage asked for but missing or stale: said on the nodes concerned
            where = {p.key: p.node_name for p in cluster.pods if p.node_name}
            per_node: dict[str, int] = {}
            for key in report.fallbacks:
                node = where.get(key)
                if node is not None:
                    per_node[node] = per_node.get(node, 0) + 1
            age = self.cfg.engine.rebalance.usage_max_age
            cause = self.rebalancing.usage_error() or "metrics.k8s.io gave none"
            for node, count in sorted(per_node.items()):
                note = f"{count} pod(s) have no usage sample newer than {age:.0f}s ({cause}): their requests count"
                self.actions.node_event(node, reason="UsageUnavailable", note=note)
        if problems:
            self.metrics.rebalances.labels(outcome="refused").inc()
            log.error("rebalancing plan refused by the validator, nothing moves: %s", "; ".join(problems[:5]))
            return
        if out.plan is None or not out.moves:
            self.metrics.rebalances.labels(outcome="none").inc()
            log.info("rebalance: no plan: %s", report.why)
            return
        loads = {row.node: row for row in report.nodes}

        def load(node: str) -> str:
            row = loads.get(node)
            if row is None:
                return node
            parts = [f"{r} {row.before[r]:.0%} -> {row.after.get(r, 0.0):.0%}" for r in row.before]
            return f"{node} ({', '.join(parts)})"

        why = {m.pod: f"rebalancing: moved from {load(m.source)} to {load(m.target)}; {report.why}" for m in out.moves}
        for move in out.moves:
            log.info("rebalance%s: %s", " (dry run, nothing moves)" if self.cfg.dry_run else "", why[move.pod])
        if self.cfg.dry_run:
            self.metrics.rebalances.labels(outcome="dry-run").inc()
            return
        self.metrics.rebalances.labels(outcome="planned").inc()
        self.metrics.rebalance_moves.inc(len(out.moves))
        for node in sorted({m.source for m in out.moves} | {m.target for m in out.moves}):
            moves = [m.pod for m in out.moves if node in (m.source, m.target)]
            self.actions.node_event(node, reason="Rebalancing", note=f"{load(node)}: moves {', '.join(moves)}")
        self._start(out.plan, list(out.result.steps), why, reason="Rebalanced")
        self._advance(cluster)

    def _world(self, cluster: Cluster) -> World:
        running = [p for p in cluster.pods if p.running]
        snap = build_snapshot(cluster.nodes, running, [])
        free = {
            node.name: dict(zip(snap.resources, snap.free[i].tolist(), strict=True))
            for i, node in enumerate(snap.nodes)
        }
        name = self.cfg.scheduler_name
        views = {p.key: _view(p, p.scheduler_name == name and self._in_scope(p)) for p in cluster.pods}
        return World(now=time.time(), pods=views, free=free)

    def _advance(self, cluster: Cluster) -> None:
        assert self.plan is not None
        if self._plan_started is None:
            self._plan_started = time.time()
        pods = {p.key: p for p in cluster.pods}
        now = time.monotonic()
        again = [Evict(step, pod) for (step, pod), (_, due) in self._refused.items() if due <= now]
        queue: list[Action] = [*again, *self.plan.advance(self._world(cluster))]
        while queue:
            # One wave: the actions the plan released together are independent; their API calls run
            # at once on the write pool (a pod's own actions in order), and their outcomes are
            # applied here, in order, as if they had run one by one (a plan's 100 evictions and
            # binds were 200 round trips one after the other).
            queue = [follow for action, out in self._perform(queue, pods) for follow in self._after(action, out, pods)]
        if self.plan.finished:
            log.info("global plan finished in %.1fs", time.time() - (self._plan_started or time.time()))
            self.plan = None
            self._plan_started = None
            self._refused = {}
            self.reserved = set()
            self.plan_pods = {}
            self.batcher.wake(time.monotonic())  # pods left out while it ran need not wait out their back-off

    def _perform(self, wave: list[Action], pods: dict[str, Pod]) -> list[tuple[Action, Outcome]]:
        """The API calls of a wave of plan actions, concurrently; outcomes in the wave's order."""
        by_pod: dict[str, list[int]] = {}
        for i, action in enumerate(wave):
            by_pod.setdefault(action.pod or f"#{i}", []).append(i)

        def run(indices: list[int]) -> list[Outcome]:
            return [self._call(wave[i], pods) for i in indices]

        futures = [(indices, self.pool.submit(run, indices)) for indices in by_pod.values()]
        outcomes: list[Outcome] = [Outcome(ok=True)] * len(wave)
        for indices, future in futures:
            try:
                results = future.result()
            except Exception as exc:  # the client returns outcomes; a bug must not lose the wave
                results = [Outcome(ok=False, reason=f"{type(exc).__name__}: {exc}", result=Result.UNKNOWN)] * len(
                    indices
                )
            for i, out in zip(indices, results, strict=True):
                outcomes[i] = out
        return list(zip(wave, outcomes, strict=True))

    def _call(self, action: Action, pods: dict[str, Pod]) -> Outcome:
        """The one API call (or two, with a WaitForFirstConsumer claim) an action makes."""
        if isinstance(action, Evict):
            victim = self.plan.victims.get(action.pod) if self.plan is not None else None
            return self.actions.evict(action.pod, victim.uid if victim else None)
        if isinstance(action, Bind) and action.nominated:
            return self.actions.nominate(action.pod, action.node)
        if isinstance(action, Bind):
            pod = pods.get(action.pod)
            out = self._select_nodes(pod, action.node) if pod is not None else Outcome(ok=True)
            if out.ok:
                out = self.actions.bind(action.pod, action.node, pod.uid if pod is not None else None)
            if out.ok and action.pod not in self.reserved:  # a captured replacement: when it moved
                stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
                self.actions.annotate(action.pod, {MOVED_AT: stamp})
            return out
        if action.pod is not None and action.pod in self.reserved:  # a pending pod: drop its nomination
            return self.actions.nominate(action.pod, None)
        return Outcome(ok=True)

    def _after(self, action: Action, out: Outcome, pods: dict[str, Pod]) -> list[Action]:
        """What an action's outcome means for the plan and the caches; the actions it releases."""
        assert self.plan is not None
        if isinstance(action, Evict):
            self.metrics.evictions.labels(kind="plan", result=_label(out)).inc()
            if self._refused_again(action, out):
                return []
            if out.ok:
                view = self.plan.victims.get(action.pod)
                self.actions.event(
                    action.pod,
                    view.uid if view else "",
                    reason=self.plan_reason,
                    note=f"evicted by placer's plan ({self.identity}): {self.why.get(action.pod, '')}",
                    kind="Normal",
                )
            return self.plan.evicted(action.step, time.time(), ok=out.ok, reason=out.reason)
        if isinstance(action, Bind) and action.nominated:
            return []
        if isinstance(action, Bind):
            pod = pods.get(action.pod)
            if pod is not None and (out.ok or out.result is Result.UNKNOWN) and not self.cfg.dry_run:
                self.assumed.assume(pod, action.node, time.time())  # maybe bound: keep its room booked
            if pod is not None and out.result is Result.UNKNOWN:
                self._account(pod, action.node, out)  # counted; read back until known
            else:
                self.metrics.binds.labels(result=_label(out)).inc()
            if out.ok:
                self.actions.event(
                    action.pod, "", reason="Scheduled", note=f"Successfully assigned {action.pod} to {action.node}"
                )
            return self.plan.bound(action.step, ok=out.ok, reason=out.reason)
        self.metrics.plan_aborts.inc()
        log.warning("plan step %d abandoned (%s): %s", action.step, action.subject, action.reason)
        return []

    def _refused_again(self, action: Evict, out: Outcome) -> bool:
        """A PodDisruptionBudget's refusal (or a 409: the budget was updated concurrently, the pod
        is still there) is tried again a few times, spaced out, before the plan
        hears of it (budgets often allow the eviction a moment later, once a pod is ready again).
        True: retried later, the step keeps running."""
        key = (action.step, action.pod)
        if out.result not in (Result.REFUSED, Result.CONFLICT):  # a conflict: the budget changed meanwhile
            self._refused.pop(key, None)
            return False
        tries = self._refused.get(key, (0, 0.0))[0] + 1
        if tries >= PDB_ATTEMPTS:
            self._refused.pop(key, None)
            return False
        self._refused[key] = (tries, time.monotonic() + PDB_RETRY_DELAY)
        log.info("eviction of %s refused (%s); trying again in %.0fs", action.pod, out.reason, PDB_RETRY_DELAY)
        return True

    def _refuse(self, batch: list[Pod], kind: str, problems: list[str]) -> None:
        """The validator rejected the answer: write nothing, say so, try these pods again later."""
        self.metrics.refused.labels(kind=kind).inc()
        log.error("refusing a batch answer (%s): %d validator problems: %s", kind, len(problems), problems[:3])
        note = f"placer refused its own answer for this batch (validator: {problems[0]}); retried later"
        for pod in batch:
            self.actions.event(pod.key, pod.uid, reason="FailedScheduling", note=note, kind="Warning")
            self.batcher.defer(pod.key, time.monotonic())

    def _unschedulable_now(self, key: str) -> str | None:
        """The message of the pod's PodScheduled=False/Unschedulable condition, as the cache has it."""
        inf = self.informers.get("Pod")
        raw = inf.get(key) if inf is not None else None
        conditions = ((raw or {}).get("status") or {}).get("conditions")
        for c in conditions if isinstance(conditions, list) else ():
            if isinstance(c, dict) and (c.get("type"), c.get("status"), c.get("reason")) == (
                "PodScheduled",
                "False",
                "Unschedulable",
            ):
                return str(c.get("message") or "")
        return None

    def _select_nodes(self, pod: Pod, node: str) -> Outcome:
        """kube-scheduler's VolumeBinding PreBind for dynamic provisioning: every unbound
        WaitForFirstConsumer claim of the pod records the chosen node before the pod is bound.
        A failure leaves the pod unbound; it is reported (log and event) and retried."""
        for claim in pod.wffc_claims:
            out = self.actions.select_node(f"{claim.namespace}/{claim.name}", node)
            if not out.ok:
                note = (
                    f'running PreBind plugin "VolumeBinding": setting {SELECTED_NODE} on '
                    f'persistentvolumeclaim "{claim.name}" failed: {out.status} {out.reason}'
                )
                log.warning("not binding %s to %s: %s", pod.key, node, note)
                self.actions.event(pod.key, pod.uid, reason="FailedScheduling", note=note, kind="Warning")
                return Outcome(ok=False, status=out.status, reason=note, prebind=True)
        return Outcome(ok=True)

    def _bind_one(self, pod: Pod, node: str) -> Outcome:
        out = self._select_nodes(pod, node)
        if not out.ok:
            return out
        out = self.actions.bind(pod.key, node, pod.uid)
        if out.ok:
            self.actions.event(pod.key, pod.uid, reason="Scheduled", note=f"Successfully assigned {pod.key} to {node}")
        return out

    def _bind_all(self, binds: list[tuple[Pod, str]]) -> None:
        """Dispatch binds to the pool and return at once, like kube-scheduler's assume + async bind:
        the pods count as placed (``assumed``) right away, so the next batch can be solved while
        these binds are in flight without double-booking; a refused bind drops the assumption."""
        now = time.time()
        for pod, node in binds:
            self.assumed.assume(pod, node, now)
            self.inflight.append((pod, node, self.pool.submit(self._bind_one, pod, node)))

    def _collect(self) -> None:
        """Account the binds (and read-backs of binds of unknown outcome) that finished since the
        last tick. A bind's exception is taken for an unknown outcome; nothing here raises, and
        every finished future is consumed exactly once."""
        pending: list[tuple[Pod, str, Future[Outcome]]] = []
        done: list[tuple[Pod, str, Outcome]] = []
        for pod, node, future in self.inflight:
            if not future.done():
                pending.append((pod, node, future))
                continue
            try:
                out = future.result()
            except Exception as exc:
                out = Outcome(ok=False, reason=f"{type(exc).__name__}: {exc}", result=Result.UNKNOWN)
            done.append((pod, node, out))
        self.inflight = pending
        for pod, node, out in done:
            self._account(pod, node, out)
        now = time.monotonic()
        for uid, (pod, node, due) in list(self._recheck.items()):
            if due <= now:
                del self._recheck[uid]
                self.inflight.append((pod, node, self.pool.submit(self.actions.confirm_bind, pod.key, pod.uid, node)))

    def _account(self, pod: Pod, node: str, out: Outcome) -> None:
        """What one bind's outcome means for the assume cache and the queue."""
        self.metrics.binds.labels(result=_label(out)).inc()
        if out.ok:
            self.batcher.forget(pod.key)
            if self.cfg.dry_run:  # nothing was bound: the shadow's picture stays the cluster's
                self.assumed.release(pod)
            return
        if out.result is Result.UNKNOWN:
            # Maybe bound: the room stays booked until a read of the pod (or the watch) tells.
            checks = self.assumed.mark_unknown(pod)
            if checks == 0:  # the watch has settled it meanwhile (bound or gone)
                return
            if checks > READBACKS and self._watch_settled(pod):
                # No read could tell (refused, or the API keeps failing them) for about a minute,
                # while the watch kept delivering and still shows the pod unbound: a bind that
                # landed would have shown by now. The room is freed and the pod queued again.
                self.assumed.release(pod)
                log.error("bind of %s to %s: no read-back could tell (%s); the watch shows it unbound: "
                          "re-queued", pod.key, node, out.reason)  # fmt: skip
                return
            delay = min(30.0, 2.0 ** max(0, checks - 1))
            self._recheck[pod.uid or pod.key] = (pod, node, time.monotonic() + delay)
            log.info("bind of %s to %s: %s; reading the pod back in %.0fs", pod.key, node, out.reason, delay)
            return
        self.assumed.release(pod)
        if out.prebind or out.result in (Result.THROTTLED, Result.UNAVAILABLE):
            delay = self.batcher.defer(pod.key, time.monotonic())
            log.info("%s not bound to %s (%s: %s): retried in %.1fs", pod.key, node, out.result, out.reason, delay)
        elif out.result is Result.FENCED:
            log.info("bind of %s to %s dropped: %s", pod.key, node, out.reason)
        elif out.result in (Result.CONFLICT, Result.GONE):  # bound elsewhere, or gone: the watch shows it
            log.info("bind of %s to %s: %s (%s): re-queued", pod.key, node, out.result, out.reason)
        else:  # refused (403, 422 ...): backed off like an unplaced pod, not retried every batch
            delay = self.batcher.defer(pod.key, time.monotonic())
            log.info("bind of %s to %s refused (%s %s): retried in %.1fs", pod.key, node, out.status, out.reason, delay)

    def _watch_settled(self, pod: Pod) -> bool:
        """The pod watch has delivered an event (a bookmark will do) at least ``WATCH_SETTLE``
        seconds after the pod's bind was sent, so a bind that landed would be in its cache."""
        found = self.assumed.get(pod)
        inf = self.informers.get("Pod")
        if found is None or inf is None or inf.last_event is None:
            return False
        sent_ago = time.time() - found.since
        return time.monotonic() - inf.last_event < sent_ago - WATCH_SETTLE

    def _check_labels(self, cluster: Cluster) -> None:
        nodes = {n.name: n for n in cluster.nodes}
        for pod in cluster.pods:
            policy = pod.annotations.get(LABEL_POLICY)
            if policy not in ("reschedule", "kill") or not pod.running or pod.node_name not in nodes:
                continue
            if not self._in_scope(pod):
                continue
            node = nodes[pod.node_name]
            if NodeLabels([node]).selector(pod.node_selector, pod.required_terms)[0]:
                continue
            note = f"node {node.name} no longer matches the pod's selector/affinity ({LABEL_POLICY}: {policy})"
            act = self.actions.evict if policy == "reschedule" else self.actions.delete
            out = act(pod.key, pod.uid or None)
            self.metrics.evictions.labels(kind=f"labels-{policy}", result=_label(out)).inc()
            if out.ok:
                self.actions.event(pod.key, pod.uid, reason="NodeLabelsChanged", note=note, kind="Warning")
