"""The controller loop (`placer run`): watch, batch, solve, bind, execute plans.

Every tick (0.2 s) it rebuilds the cluster model from the informer caches (parsed pods are cached
by resourceVersion), adds the binds it issued but has not seen yet (``assumed``, as
kube-scheduler assumes pods, so nothing is double-booked), and feeds the batcher. When a batch is
due and no plan is running, it solves it with the same ``decide`` as ``placer solve``: placed
pods are bound concurrently, unplaced ones get PodScheduled=False/Unschedulable and a
FailedScheduling event and are backed off, and a global plan is handed to the executor, which
evicts, waits until victims are gone, captures replacements and binds only into real room.

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

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from kubernetes import client

from placer.controller.batcher import Batcher
from placer.controller.executor import Abandon, Bind, Evict, PlanRun, PodView, World
from placer.engine.labels import NodeLabels
from placer.engine.snapshot import build_snapshot
from placer.inputs.kubectl import GANG, POD_GROUP, parse_namespace, parse_node, parse_pdb, parse_pod, parse_replicaset
from placer.inputs.volumes import (
    SELECTED_NODE,
    PersistentVolume,
    PersistentVolumeClaim,
    Storage,
    StorageClass,
    parse_claim,
    parse_persistent_volume,
    parse_pod_claims,
    parse_storage_class,
    resolve_pod,
)
from placer.kube.actions import Actions, Outcome
from placer.kube.informers import Informer, informers
from placer.kube.leader import Leadership
from placer.kube.serving import Metrics, serve
from placer.models import Cluster, ControllerConfig, Node, Pod
from placer.service import decide, plan_steps

__all__ = ["MOVED_AT", "Runner"]

log = logging.getLogger("placer.controller")
T = TypeVar("T")
MOVED_AT = "placer.io/moved-at"
LABEL_POLICY = "placer.io/when-node-labels-change"
TICK = 0.2
VOLUME_KINDS = ("PersistentVolume", "PersistentVolumeClaim", "StorageClass")


def _epoch(stamp: str) -> float:
    if not stamp:
        return 0.0
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


class Runner:
    def __init__(self, api: client.ApiClient, cfg: ControllerConfig, identity: str) -> None:
        self.cfg = cfg
        self.identity = identity
        self.informers: dict[str, Informer] = informers(api, resync=cfg.resync_period)
        self.actions = Actions(
            api,
            scheduler_name=cfg.scheduler_name,
            identity=identity,
            dry_run=cfg.dry_run,
            qps=cfg.api_qps,
            burst=cfg.api_burst,
        )
        self.batcher = Batcher(
            window=cfg.batch_window,
            size=cfg.batch_size,
            backoff=cfg.requeue_backoff,
            max_backoff=cfg.max_requeue_backoff,
        )
        self.metrics = Metrics()
        self.stop = threading.Event()
        self.exit_code = 0
        self.leadership = Leadership(api, cfg.leader_election, identity, self._lost)
        self.assumed: dict[str, tuple[str, float]] = {}
        self.plan: PlanRun | None = None
        self.reserved: set[str] = set()  # pending pods a running plan will bind
        self.pool = ThreadPoolExecutor(cfg.bind_workers, thread_name_prefix="binder")
        self._parsed: dict[str, tuple[str, Pod]] = {}
        self._parsed_nodes: dict[str, tuple[str, Node]] = {}
        self._parsed_volumes: dict[str, tuple[str, PersistentVolume]] = {}
        self._parsed_claims: dict[str, tuple[str, PersistentVolumeClaim]] = {}
        self._parsed_classes: dict[str, tuple[str, StorageClass]] = {}
        self._storage: tuple[tuple[int, ...], Storage] | None = None
        self._resolved: dict[str, tuple[tuple[object, ...], Pod]] = {}  # pods with claims, resolved
        self.inflight: list[tuple[Pod, str, Future[Outcome]]] = []
        self._gangs: dict[str, str] = {}  # pending pod -> its gang, to keep gangs in one batch
        self._last_tick = time.monotonic()
        self._label_checked = 0.0

    # -- lifecycle ------------------------------------------------------------------------------
    def _lost(self) -> None:
        self.exit_code = 1
        self.stop.set()

    def healthy(self) -> bool:
        return time.monotonic() - self._last_tick < max(30.0, 10 * TICK)

    def ready(self) -> bool:
        return all(i.synced for i in self.informers.values())

    def run(self) -> int:
        for inf in self.informers.values():
            inf.start()
        server = serve(self.cfg.metrics_port, self.metrics, self.healthy, self.ready) if self.cfg.metrics_port else None
        for inf in self.informers.values():
            if not inf.wait_synced(60):
                log.error("%s informer did not sync within 60s", inf.kind)
        self.leadership.start()
        try:
            while not self.stop.is_set():
                self._last_tick = time.monotonic()
                try:
                    self.tick()
                except Exception:
                    log.exception("scheduling cycle failed")
                self.stop.wait(TICK)
        finally:
            for inf in self.informers.values():
                inf.stop()
            self.pool.shutdown(wait=False)
            if server is not None:
                server.shutdown()
        return self.exit_code

    # -- the model of the cluster ---------------------------------------------------------------
    def _pods(self) -> list[tuple[Pod, dict[str, Any]]]:
        return self._parse_cached("Pod", parse_pod, self._parsed)

    def _nodes(self) -> list[Node]:
        return [node for node, _ in self._parse_cached("Node", parse_node, self._parsed_nodes)]

    def _parse_cached(
        self, kind: str, parse: Callable[[dict[str, Any]], T], cache: dict[str, tuple[str, T]]
    ) -> list[tuple[T, dict[str, Any]]]:
        """Objects of an informer parsed once per resourceVersion; malformed ones are skipped."""
        out = []
        seen = set()
        for raw in self.informers[kind].items():
            meta = raw.get("metadata", {})
            key = f"{meta.get('namespace')}/{meta.get('name')}" if meta.get("namespace") else str(meta.get("name"))
            seen.add(key)
            version = str(meta.get("resourceVersion", ""))
            cached = cache.get(key)
            if cached is None or cached[0] != version:
                try:
                    cached = (version, parse(raw))
                except Exception as exc:
                    log.warning("skipping %s %s: %s", kind, key, exc)
                    continue
                cache[key] = cached
            out.append((cached[1], raw))
        for key in set(cache) - seen:
            del cache[key]
        return out

    def _volumes(self) -> tuple[tuple[int, ...], Storage]:
        """The volume caches parsed, rebuilt only when one of them changed (with its stamp)."""
        stamp = tuple(self.informers[kind].changes for kind in VOLUME_KINDS)
        if self._storage is None or self._storage[0] != stamp:
            volumes = self._parse_cached("PersistentVolume", parse_persistent_volume, self._parsed_volumes)
            claims = self._parse_cached("PersistentVolumeClaim", parse_claim, self._parsed_claims)
            classes = self._parse_cached("StorageClass", parse_storage_class, self._parsed_classes)
            storage = Storage.of((v for v, _ in volumes), (c for c, _ in claims), (c for c, _ in classes))
            self._storage = (stamp, storage)
        return self._storage

    def _resolve(self, pod: Pod, raw: dict[str, Any], volumes: tuple[tuple[int, ...], Storage], nodes: int) -> Pod:
        """A pod with claims resolved against the volume caches, once per pod/volume version."""
        version = (raw.get("metadata", {}).get("resourceVersion"), volumes[0], nodes)
        cached = self._resolved.get(pod.key)
        if cached is None or cached[0] != version:
            try:
                ephemeral = parse_pod_claims(raw)[1]
            except Exception:  # parse_pod read the same volumes; keep going without the distinction
                ephemeral = frozenset()
            cached = (version, resolve_pod(pod, volumes[1], nodes, ephemeral))
            self._resolved[pod.key] = cached
        return cached[1]

    def _namespaces(self) -> dict[str, dict[str, str]]:
        out = {}
        for raw in self.informers["Namespace"].items():
            try:
                name, labels = parse_namespace(raw)
            except Exception as exc:
                log.warning("skipping Namespace %s: %s", raw.get("metadata", {}).get("name"), exc)
                continue
            out[name] = labels
        return out

    def cluster(self) -> tuple[Cluster, dict[str, dict[str, Any]]]:
        nodes = self._nodes()
        known = {n.name for n in nodes}
        volumes = self._volumes()
        pods: list[Pod] = []
        raws: dict[str, dict[str, Any]] = {}
        for parsed, raw in self._pods():
            raws[parsed.key] = raw
            seen = self._resolve(parsed, raw, volumes, len(nodes)) if parsed.claims else parsed
            pod = seen
            assumed = self.assumed.get(seen.key)
            if seen.node_name is None and assumed is not None:
                pod = seen.model_copy(update={"node_name": assumed[0], "phase": "Running"})
            elif assumed is not None:
                del self.assumed[seen.key]  # the bind is observed
            if pod.node_name is not None and pod.node_name not in known:
                continue
            pods.append(pod)
        for key in [k for k in self.assumed if k not in raws]:
            del self.assumed[key]
        for key in [k for k in self._resolved if k not in raws]:
            del self._resolved[key]
        cluster = Cluster(
            nodes=tuple(nodes),
            pods=tuple(pods),
            pdbs=tuple(parse_pdb(r) for r in self.informers["PodDisruptionBudget"].items()),
            replicasets=tuple(parse_replicaset(r) for r in self.informers["ReplicaSet"].items()),
            namespaces=self._namespaces(),
        )
        return cluster, raws

    def _pending_keys(self) -> list[str]:
        """Pods waiting for this scheduler, read straight from the raw cache (cheap, every tick)."""
        out = []
        self._gangs = {}
        for raw in self.informers["Pod"].items():
            meta, spec = raw.get("metadata", {}), raw.get("spec", {})
            if spec.get("nodeName") or spec.get("schedulerName") != self.cfg.scheduler_name:
                continue
            if meta.get("deletionTimestamp") or spec.get("schedulingGates"):
                continue
            if raw.get("status", {}).get("phase", "Pending") != "Pending":
                continue
            ns = meta.get("namespace", "default")
            if self.cfg.namespaces and ns not in self.cfg.namespaces:
                continue
            key = f"{ns}/{meta.get('name')}"
            if key not in self.reserved and key not in self.assumed:
                out.append(key)
                labels, notes = meta.get("labels") or {}, meta.get("annotations") or {}
                gang = labels.get(GANG) or notes.get(GANG) or labels.get(POD_GROUP)
                if gang:
                    self._gangs[key] = f"{ns}/{gang}"
        return out

    # -- one cycle ------------------------------------------------------------------------------
    def tick(self) -> None:
        """Feed the batcher every tick; build the full cluster model only when there is work."""
        self._collect()
        pending = self._pending_keys()
        self.metrics.pending.set(len(pending))
        self.batcher.sync(pending, time.monotonic())
        leading = self.leadership.leading.is_set()
        self.metrics.leader.set(1 if leading else 0)
        if not leading or not self.ready():
            return
        labels_due = time.monotonic() - self._label_checked >= self.cfg.label_check_period
        if self.plan is None and not self.batcher.due(time.monotonic()) and not labels_due:
            return
        cluster, raws = self.cluster()
        if self.plan is not None:
            self._advance(cluster, raws)
        if self.plan is None and self.batcher.due(time.monotonic()):
            self._solve(cluster, raws)
        if labels_due:
            self._label_checked = time.monotonic()
            self._check_labels(cluster)

    def _frozen(self, cluster: Cluster) -> frozenset[str]:
        cooldown = self.cfg.evictions.move_cooldown
        now = time.time()
        return frozenset(
            p.key
            for p in cluster.pods
            if MOVED_AT in p.annotations and now - _epoch(p.annotations[MOVED_AT]) < cooldown
        )

    def _solve(self, cluster: Cluster, raws: dict[str, dict[str, Any]]) -> None:
        keys = set(self.batcher.take(self._gangs))
        batch = [p for p in cluster.pods if p.key in keys and p.pending]
        if not batch:
            return
        running = [p for p in cluster.pods if p.running]
        state = build_snapshot(cluster.nodes, running, batch, cluster.namespaces)
        started = time.monotonic()
        limits = self.cfg.evictions
        decision = decide(
            cluster,
            state,
            batch,
            self.cfg.engine,
            evict=True,
            max_evictions=limits.per_cycle,
            max_per_node=limits.per_node,
            frozen=self._frozen(cluster),
        )
        self.metrics.solve_seconds.observe(time.monotonic() - started)
        self.metrics.batch_size.observe(len(batch))
        names = [n.name for n in state.nodes]
        for pod, code, reason in decision.unplaced:
            self.metrics.unplaced.labels(code=code).inc()
            self.pool.submit(self._report_unschedulable, pod, reason)
            self.batcher.defer(pod.key, time.monotonic())
        solved = time.monotonic()
        if decision.plan is None:
            self._bind_all([(pod, names[n]) for pod, n in decision.placements])
            log.info(
                "batch of %d: %d placed (binding), %d unplaced; decided in %.2fs",
                len(batch),
                len(decision.placements),
                len(decision.unplaced),
                solved - started,
            )
            return
        plan = decision.plan
        log.info("global plan: %d evictions, %d steps", len(plan.evictions), len(plan.steps))
        steps = plan_steps(plan.steps, names)
        victims = {e.pod.key: self._view(e.pod, raws.get(e.pod.key, {})) for e in plan.evictions}
        self.plan = PlanRun(
            steps,
            victims,
            started=time.time(),
            await_gone=self.cfg.plan_timeouts.await_gone,
            await_replacement=self.cfg.plan_timeouts.await_replacement,
            await_room=self.cfg.plan_timeouts.await_room,
        )
        self.reserved = {pod.key for pod, _ in plan.placements}
        self._advance(cluster, raws)

    def _view(self, pod: Pod, raw: dict[str, Any]) -> PodView:
        meta = raw.get("metadata", {})
        owner_uid = next((r.get("uid") for r in meta.get("ownerReferences", []) if r.get("controller")), None)
        return PodView(
            key=pod.key,
            uid=pod.uid,
            node=pod.node_name,
            owner_uid=owner_uid,
            created=_epoch(pod.creation),
            requests={**pod.requests, "pods": 1},
            deleting=bool(meta.get("deletionTimestamp")),
        )

    def _world(self, cluster: Cluster, raws: dict[str, dict[str, Any]]) -> World:
        running = [p for p in cluster.pods if p.running]
        snap = build_snapshot(cluster.nodes, running, [])
        free = {
            node.name: dict(zip(snap.resources, snap.free[i].tolist(), strict=True))
            for i, node in enumerate(snap.nodes)
        }
        views = {p.key: self._view(p, raws.get(p.key, {})) for p in cluster.pods}
        return World(now=time.time(), pods=views, free=free)

    def _advance(self, cluster: Cluster, raws: dict[str, dict[str, Any]]) -> None:
        assert self.plan is not None
        pods = {p.key: p for p in cluster.pods}
        queue = self.plan.advance(self._world(cluster, raws))
        while queue:
            action = queue.pop(0)
            if isinstance(action, Evict):
                out = self.actions.evict(action.pod)
                kind = "plan"
                self.metrics.evictions.labels(kind=kind, result="ok" if out.ok else str(out.status)).inc()
                if out.ok:
                    view = self.plan.victims.get(action.pod)
                    self.actions.event(
                        action.pod,
                        view.uid if view else "",
                        reason="Preempted",
                        note=f"evicted by placer's global plan ({self.identity})",
                        kind="Normal",
                    )
                queue += self.plan.evicted(action.step, time.time(), ok=out.ok, reason=out.reason)
            elif isinstance(action, Bind) and action.nominated:
                self.actions.nominate(action.pod, action.node)
            elif isinstance(action, Bind):
                pod = pods.get(action.pod)
                out = self._select_nodes(pod, action.node) if pod is not None else Outcome(ok=True)
                if out.ok:
                    out = self.actions.bind(action.pod, action.node)
                self.metrics.binds.labels(result="ok" if out.ok else str(out.status)).inc()
                if out.ok:
                    self.assumed[action.pod] = (action.node, time.time())
                    self.actions.event(
                        action.pod, "", reason="Scheduled", note=f"Successfully assigned {action.pod} to {action.node}"
                    )
                    if action.pod not in self.reserved:  # a captured replacement
                        stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
                        self.actions.annotate(action.pod, {MOVED_AT: stamp})
                queue += self.plan.bound(action.step, ok=out.ok, reason=out.reason)
            elif isinstance(action, Abandon):
                self.metrics.plan_aborts.inc()
                log.warning("plan step %d abandoned (%s): %s", action.step, action.subject, action.reason)
                if action.pod is not None and action.pod in self.reserved:  # a pending pod: drop its nomination
                    self.actions.nominate(action.pod, None)
        if self.plan.finished:
            log.info("global plan finished")
            self.plan = None
            self.reserved = set()

    def _report_unschedulable(self, pod: Pod, reason: str) -> None:
        self.actions.unschedulable(pod.key, reason)
        self.actions.event(pod.key, pod.uid, reason="FailedScheduling", note=reason, kind="Warning")

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
            self.assumed[pod.key] = (node, now)
            self.inflight.append((pod, node, self.pool.submit(self._bind_one, pod, node)))

    def _collect(self) -> None:
        """Account the binds that finished since the last tick."""
        pending: list[tuple[Pod, str, Future[Outcome]]] = []
        for pod, node, future in self.inflight:
            if not future.done():
                pending.append((pod, node, future))
                continue
            out = future.result()
            self.metrics.binds.labels(result="ok" if out.ok else str(out.status)).inc()
            if out.ok:
                self.batcher.forget(pod.key)
            elif out.prebind:
                self.assumed.pop(pod.key, None)
                delay = self.batcher.defer(pod.key, time.monotonic())
                log.info("%s not bound to %s (its volumes): retried in %.1fs", pod.key, node, delay)
            else:
                self.assumed.pop(pod.key, None)
                log.info("bind of %s to %s refused (%s %s): re-queued", pod.key, node, out.status, out.reason)
        self.inflight = pending

    def _check_labels(self, cluster: Cluster) -> None:
        nodes = {n.name: n for n in cluster.nodes}
        for pod in cluster.pods:
            policy = pod.annotations.get(LABEL_POLICY)
            if policy not in ("reschedule", "kill") or not pod.running or pod.node_name not in nodes:
                continue
            node = nodes[pod.node_name]
            if NodeLabels([node]).selector(pod.node_selector, pod.required_terms)[0]:
                continue
            note = f"node {node.name} no longer matches the pod's selector/affinity ({LABEL_POLICY}: {policy})"
            out = self.actions.evict(pod.key) if policy == "reschedule" else self.actions.delete(pod.key)
            self.metrics.evictions.labels(kind=f"labels-{policy}", result="ok" if out.ok else str(out.status)).inc()
            if out.ok:
                self.actions.event(pod.key, pod.uid, reason="NodeLabelsChanged", note=note, kind="Warning")
