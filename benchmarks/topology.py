"""Topology benchmark: batches of 99 pods with required anti-affinity or zone spreading, 5,000 nodes.

``python -m benchmarks.topology [--nodes 5000] [--batches 10] [--time-limit T] [--quick]``
(``make bench``, after ``benchmarks.run``) writes ``docs/bench/topology.md`` and
``docs/bench/topology.png``.

Cluster: ``benchmarks.generate.cluster(nodes, running_per_node=10, pending=0, seed=1)``: the
engine benchmark's heterogeneous nodes (3 zones, every node labelled
``topology.kubernetes.io/zone`` and ``kubernetes.io/hostname``, ~5% tainted NoSchedule, ~0.5%
cordoned) with 10 running pods per node. Each batch holds 99 pending pods (100m cpu / 500Mi, as
kube-scheduler's scheduler_perf templates): 3 Deployments x 33 pods. Workloads:

- ``anti-affinity``: every pod has a required podAntiAffinity term on ``kubernetes.io/hostname``
  whose selector is its own Deployment's ``app`` label (scheduler_perf's
  SchedulingPodAntiAffinity shape, per Deployment): at most one pod of a Deployment per node;
- ``spreading``: every pod has a topologySpreadConstraint on ``topology.kubernetes.io/zone``,
  maxSkew 1, DoNotSchedule, selecting its own Deployment (scheduler_perf's TopologySpreading).

Each comes in two variants: ``new`` (a batch brings 3 new Deployments of 33 pods) and
``growing`` (the same 3 Deployments receive 33 more pods in every batch, so later batches must
respect more and more running pods of their own Deployment).

Batches are consecutive: each batch's placements become running pods (on the snapshot and in
the cluster) before the next batch is decided. Per batch:

1. decision = ``placer.service.decide(cluster, snapshot, batch, config)`` (what the controller
   calls: ``solve_batch``, plus a global plan when pods stay unplaced), wall clock
   (``time.perf_counter``) and process CPU time (all threads); one untimed warm-up decision of
   the first batch per workload; pods/s = 99 / decision seconds;
2. the same batch on the same state through ``placer.baseline.simulate(..., "default")``
   (placer's kube-scheduler simulation), timed the same way: the same-run baseline;
3. the floor: the same decision again with a ``FLOOR_LIMIT`` (0.01 s) solver limit, i.e. the
   engine's work around CP-SAT (the time limit is the whole decision's budget, so a decision at
   the real limit lasts about max(limit, floor));
4. both answers checked by the independent validator
   (``placer.validate.validate_placements``) on the cluster of that batch: violations counted;
5. with profiling on, one more (untimed) decision of the batch under ``cProfile``: cumulative
   seconds of the engine's phases and the functions with the most self time.

kube-scheduler's scheduler_perf thresholds on 5,000 nodes (about 60 pods/s for
SchedulingPodAntiAffinity, 460 pods/s for TopologySpreading) are printed for reference; they
measure the whole scheduler (binding through the API server included), placer's number here
is the decision only.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import math
import os
import pstats
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from benchmarks.generate import cluster
from benchmarks.machine import machine_info, source_revision
from benchmarks.run import time_limit_for
from placer.baseline.simulate import simulate
from placer.engine import Snapshot, build_snapshot
from placer.models import (
    Cluster,
    Config,
    LabelSelector,
    Node,
    Owner,
    Pod,
    PodAffinityTerm,
    ReplicaSet,
    SpreadConstraint,
)
from placer.service import decide
from placer.validate import validate_placements

__all__ = [
    "DEFAULT_WORKLOADS",
    "THRESHOLDS",
    "BatchRecord",
    "Phase",
    "WorkloadResult",
    "WorkloadSpec",
    "main",
    "plot",
    "render_markdown",
    "run_workloads",
    "workload_batch",
]

Kind = Literal["anti-affinity", "spreading"]
HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
NAMESPACE = "bench-topology"
# kube-scheduler's scheduler_perf throughput thresholds on 5,000 nodes (pods/s).
THRESHOLDS: dict[Kind, float] = {"anti-affinity": 60.0, "spreading": 460.0}
SCHEDULER_PERF: dict[Kind, str] = {"anti-affinity": "SchedulingPodAntiAffinity", "spreading": "TopologySpreading"}
DEPLOYMENTS_PER_BATCH = 3
REPLICAS = 33
CPU_M = 100
MEMORY = 500 * 2**20
OUT_DIR = Path("docs/bench")
SEED = 1
RUNNING_PER_NODE = 10
# A solver time limit short enough that a decision is the engine's work around CP-SAT.
FLOOR_LIMIT = 0.01
_EPOCH = datetime(2024, 6, 2, 0, 0, 0, tzinfo=UTC)


@dataclass(frozen=True)
class WorkloadSpec:
    """``span``: consecutive batches one Deployment receives pods in (1: new Deployments per batch)."""

    name: str
    kind: Kind
    variant: Literal["new", "growing"]

    def span(self, batches: int) -> int:
        return 1 if self.variant == "new" else max(batches, 1)


DEFAULT_WORKLOADS = (
    WorkloadSpec("anti-affinity/new", "anti-affinity", "new"),
    WorkloadSpec("anti-affinity/growing", "anti-affinity", "growing"),
    WorkloadSpec("spreading/new", "spreading", "new"),
    WorkloadSpec("spreading/growing", "spreading", "growing"),
)


@dataclass
class BatchRecord:
    batch: int
    pods: int
    seconds: float
    cpu_seconds: float
    placed: int
    status: str
    violations: int
    sim_seconds: float
    sim_placed: int
    sim_violations: int
    floor_seconds: float = float("nan")  # the same decision at FLOOR_LIMIT
    first_violation: str = ""
    first_sim_violation: str = ""


@dataclass
class Phase:
    """Cumulative seconds per profiled decision of one function (a phase of the engine)."""

    name: str
    where: str
    seconds: float
    calls: float


@dataclass
class WorkloadResult:
    name: str
    kind: str
    variant: str
    nodes: int
    running: int
    deployments: int  # Deployments over all batches
    deployments_per_batch: int
    replicas: int  # pods per Deployment per batch
    batch_size: int
    time_limit: float
    floor_limit: float
    threshold: float
    records: list[BatchRecord]
    seed: int = SEED
    running_per_node: int = RUNNING_PER_NODE
    phases: list[Phase] = field(default_factory=list)
    hot: list[Phase] = field(default_factory=list)  # self time (tottime)
    profiled: int = 0

    def _q(self, attr: str, percentile: float = 50.0) -> float:
        """A percentile (the median by default) of one field over the batches."""
        return float(np.percentile([getattr(r, attr) for r in self.records], percentile))

    @property
    def median(self) -> float:
        return self._q("seconds")

    @property
    def p95(self) -> float:
        return self._q("seconds", 95)

    @property
    def cpu_median(self) -> float:
        return self._q("cpu_seconds")

    @property
    def sim_median(self) -> float:
        return self._q("sim_seconds")

    @property
    def sim_p95(self) -> float:
        return self._q("sim_seconds", 95)

    @property
    def floor_median(self) -> float:
        return self._q("floor_seconds")

    @property
    def pods_per_s(self) -> float:
        return self.batch_size / self.median

    @property
    def pods_per_s_p95(self) -> float:
        return self.batch_size / self.p95

    @property
    def sim_pods_per_s(self) -> float:
        return self.batch_size / self.sim_median

    @property
    def violations(self) -> int:
        return sum(r.violations for r in self.records)

    @property
    def sim_violations(self) -> int:
        return sum(r.sim_violations for r in self.records)

    @property
    def placed(self) -> int:
        return sum(r.placed for r in self.records)

    @property
    def sim_placed(self) -> int:
        return sum(r.sim_placed for r in self.records)

    @property
    def pods(self) -> int:
        return sum(r.pods for r in self.records)


# --------------------------------------------------------------------------------------------
# Workload pods
# --------------------------------------------------------------------------------------------
def _stamp(seconds: int) -> str:
    return (_EPOCH + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _deployment(kind: Kind, index: int) -> tuple[str, ReplicaSet]:
    app = f"{'anti' if kind == 'anti-affinity' else 'spread'}-{index:03d}"
    rs = ReplicaSet(
        namespace=NAMESPACE,
        name=f"{app}-{index * 7919 % 99991:05x}",
        uid=f"rs-{app}",
        scheduler_name="placer",
        owner=Owner(kind="Deployment", name=app, uid=f"deploy-{app}"),
        selector=LabelSelector(match_labels={"app": app}),
    )
    return app, rs


def workload_batch(
    kind: Kind,
    batch: int,
    *,
    span: int = 1,
    deployments: int = DEPLOYMENTS_PER_BATCH,
    replicas: int = REPLICAS,
) -> tuple[list[Pod], list[ReplicaSet]]:
    """The pending pods of batch ``batch`` (0-based) and their ReplicaSets: ``deployments`` x
    ``replicas`` pods; Deployment ``(batch // span) * deployments + s`` for slot ``s``."""
    pods: list[Pod] = []
    replicasets: list[ReplicaSet] = []
    for slot in range(deployments):
        index = (batch // span) * deployments + slot
        app, rs = _deployment(kind, index)
        replicasets.append(rs)
        selector = LabelSelector(match_labels={"app": app})
        anti: tuple[PodAffinityTerm, ...] = ()
        spread: tuple[SpreadConstraint, ...] = ()
        if kind == "anti-affinity":
            anti = (PodAffinityTerm(selector=selector, namespaces=(NAMESPACE,), topology_key=HOST),)
        else:
            spread = (
                SpreadConstraint(max_skew=1, topology_key=ZONE, when_unsatisfiable="DoNotSchedule", selector=selector),
            )
        for r in range(replicas):
            ordinal = (batch % span) * replicas + r
            pods.append(
                Pod(
                    namespace=NAMESPACE,
                    name=f"{rs.name}-{ordinal:04d}",
                    uid=f"{app}-{ordinal}",
                    scheduler_name="placer",
                    creation=_stamp(batch * 1000 + slot * replicas + r),
                    labels={"app": app},
                    requests={"cpu": CPU_M, "memory": MEMORY},
                    score_cpu=CPU_M,
                    score_memory=MEMORY,
                    owner=Owner(kind="ReplicaSet", name=rs.name, uid=rs.uid),
                    pod_anti_affinity=anti,
                    spread=spread,
                )
            )
    return pods, replicasets


# --------------------------------------------------------------------------------------------
# Profiling
# --------------------------------------------------------------------------------------------
# (label, path suffix of the file, function name): the engine's phases, outermost first.
PHASES: tuple[tuple[str, str, str], ...] = (
    ("decide (whole decision)", "placer/service.py", "decide"),
    ("solve_batch", "placer/engine/solve.py", "solve_batch"),
    ("build_batch (prefilter masks, groups, topology)", "placer/engine/batch.py", "build_batch"),
    ("compile_topology", "placer/engine/topology.py", "compile_topology"),
    ("Scorer", "placer/engine/scoring.py", "__init__"),
    ("select_candidates", "placer/engine/candidates.py", "select_candidates"),
    ("greedy", "placer/engine/greedy.py", "greedy"),
    ("TopologyState.allowed (in greedy)", "placer/engine/topology.py", "allowed"),
    ("encode (CP-SAT model)", "placer/engine/encoder.py", "encode"),
    ("constraints.topology.build", "placer/engine/constraints/topology.py", "build"),
    ("order_hint", "placer/engine/constraints/symmetry.py", "order_hint"),
    ("descend", "placer/engine/descent.py", "descend"),
    ("lns.improve", "placer/engine/lns.py", "improve"),
    ("CpSolver.solve (all levels)", "ortools/sat/python/cp_model.py", "solve"),
    ("_extract", "placer/engine/solve.py", "_extract"),
    ("plan_batch", "placer/plan/planner.py", "plan_batch"),
)

StatKey = tuple[str, int, str]


def _stats_table(stats: pstats.Stats) -> dict[StatKey, tuple[int, int, float, float]]:
    table: dict[StatKey, tuple[int, int, float, float]] = {
        key: (int(v[0]), int(v[1]), float(v[2]), float(v[3]))
        for key, v in stats.stats.items()  # type: ignore[attr-defined]
    }
    return table


def _short(path: str) -> str:
    for marker in ("placer/", "models/", "ortools/", "numpy/"):
        i = path.rfind("/" + marker)
        if i >= 0:
            return path[i + 1 :]
    return os.path.basename(path) if path.startswith("/") else path


def profile_phases(stats: pstats.Stats, decisions: int, top: int = 12) -> tuple[list[Phase], list[Phase]]:
    """(phases by cumulative time, functions by self time), in seconds per decision."""
    table = _stats_table(stats)
    per = max(decisions, 1)
    phases: list[Phase] = []
    for label, suffix, func in PHASES:
        hits = [(k, v) for k, v in table.items() if k[2] == func and k[0].replace(os.sep, "/").endswith(suffix)]
        if not hits:
            continue
        seconds = sum(v[3] for _, v in hits)
        calls = sum(v[1] for _, v in hits)
        phases.append(Phase(label, f"{suffix}:{func}", seconds / per, calls / per))
    ranked = sorted(table.items(), key=lambda kv: kv[1][2], reverse=True)[:top]
    hot = [
        Phase(func, f"{_short(path)}:{line}" if line else _short(path), v[2] / per, v[1] / per)
        for (path, line, func), v in ranked
    ]
    return phases, hot


# --------------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------------
def _bound(pod: Pod, node: Node, batch: int) -> Pod:
    """The pod as the next batch sees it: running on its node."""
    stamp = _stamp(batch * 1000 + 999)
    return pod.model_copy(update={"node_name": node.name, "phase": "Running", "start_time": stamp})


def run_workload(
    spec: WorkloadSpec,
    generated: Cluster,
    *,
    batches: int,
    seed: int = SEED,
    running_per_node: int = RUNNING_PER_NODE,
    time_limit: float,
    workers: int | None = None,
    deployments: int = DEPLOYMENTS_PER_BATCH,
    replicas: int = REPLICAS,
    warmup: bool = True,
    profile: bool = True,
    floor_limit: float | None = FLOOR_LIMIT,
    log: bool = False,
) -> WorkloadResult:
    """Consecutive batches of one workload on ``generated`` (see the module docstring)."""
    solver: dict[str, float | int] = {"timeLimit": time_limit}
    if workers is not None:
        solver["workers"] = workers
    config = Config(solver=solver)
    floor = Config(solver={**solver, "timeLimit": floor_limit}) if floor_limit else None
    nodes = generated.nodes
    running: list[Pod] = [p for p in generated.pods if p.running]
    replicasets: list[ReplicaSet] = list(generated.replicasets)
    span = spec.span(batches)
    first, _ = workload_batch(spec.kind, 0, span=span, deployments=deployments, replicas=replicas)
    state: Snapshot = build_snapshot(nodes, running, first, generated.namespaces)
    records: list[BatchRecord] = []
    stats: pstats.Stats | None = None
    seen_rs: set[str] = {rs.uid for rs in replicasets}
    for b in range(batches):
        batch, rss = workload_batch(spec.kind, b, span=span, deployments=deployments, replicas=replicas)
        for rs in rss:
            if rs.uid not in seen_rs:
                seen_rs.add(rs.uid)
                replicasets.append(rs)
        view = Cluster(nodes=nodes, pods=(*running, *batch), replicasets=tuple(replicasets))
        if warmup and b == 0:
            decide(view, state, batch, config)
        cpu0 = time.process_time()
        started = time.perf_counter()
        decision = decide(view, state, batch, config)
        seconds = time.perf_counter() - started
        cpu = time.process_time() - cpu0

        sim_state = state.copy()
        started = time.perf_counter()
        sim = simulate(sim_state, batch, "default")
        sim_seconds = time.perf_counter() - started

        floor_seconds = float("nan")
        if floor is not None:
            started = time.perf_counter()
            decide(view, state, batch, floor)
            floor_seconds = time.perf_counter() - started

        if profile:
            prof = cProfile.Profile()
            prof.enable()
            decide(view, state, batch, config)
            prof.disable()
            if stats is None:
                stats = pstats.Stats(prof)
            else:
                stats.add(prof)

        bad = validate_placements(view, {pod.key: nodes[n].name for pod, n in decision.placements})
        sim_bad = validate_placements(view, {pod.key: nodes[n].name for pod, n in sim.placements})
        records.append(
            BatchRecord(
                batch=b,
                pods=len(batch),
                seconds=round(seconds, 4),
                cpu_seconds=round(cpu, 4),
                placed=len(decision.placements),
                status=decision.status,
                violations=len(bad),
                sim_seconds=round(sim_seconds, 4),
                sim_placed=len(sim.placements),
                sim_violations=len(sim_bad),
                floor_seconds=round(floor_seconds, 4),
                first_violation=bad[0] if bad else "",
                first_sim_violation=sim_bad[0] if sim_bad else "",
            )
        )
        if log:
            print(
                f"[topology] {spec.name} batch {b + 1}/{batches}: decision {seconds:.3f} s "
                f"({len(batch) / seconds:.0f} pods/s, cpu {cpu:.3f} s), placed {len(decision.placements)}/"
                f"{len(batch)} {decision.status}, violations {len(bad)}; floor {floor_seconds:.3f} s; "
                f"simulation {sim_seconds:.3f} s, violations {len(sim_bad)}",
                flush=True,
            )
        # Placer's answer becomes the next batch's running pods.
        for pod, n in decision.placements:
            bound = _bound(pod, nodes[n], b)
            state.add(bound, n)
            running.append(bound)
    phases, hot = profile_phases(stats, batches) if stats is not None else ([], [])
    return WorkloadResult(
        name=spec.name,
        kind=spec.kind,
        variant=spec.variant,
        nodes=len(nodes),
        running=sum(1 for p in generated.pods if p.running),
        deployments=len({p.labels["app"] for p in running if p.namespace == NAMESPACE}),
        deployments_per_batch=deployments,
        replicas=replicas,
        batch_size=deployments * replicas,
        time_limit=time_limit,
        floor_limit=floor_limit or float("nan"),
        threshold=THRESHOLDS[spec.kind],
        records=records,
        seed=seed,
        running_per_node=running_per_node,
        phases=phases,
        hot=hot,
        profiled=batches if stats is not None else 0,
    )


def run_workloads(
    nodes: int,
    batches: int,
    *,
    specs: Sequence[WorkloadSpec] = DEFAULT_WORKLOADS,
    time_limit: float | None = None,
    workers: int | None = None,
    seed: int = SEED,
    running_per_node: int = RUNNING_PER_NODE,
    deployments: int = DEPLOYMENTS_PER_BATCH,
    replicas: int = REPLICAS,
    warmup: bool = True,
    profile: bool = True,
    floor_limit: float | None = FLOOR_LIMIT,
    log: bool = False,
) -> list[WorkloadResult]:
    limit = time_limit if time_limit is not None else time_limit_for(nodes)
    generated = cluster(nodes, running_per_node=running_per_node, pending=0, seed=seed)
    return [
        run_workload(
            spec,
            generated,
            batches=batches,
            seed=seed,
            running_per_node=running_per_node,
            time_limit=limit,
            workers=workers,
            deployments=deployments,
            replicas=replicas,
            warmup=warmup,
            profile=profile,
            floor_limit=floor_limit,
            log=log,
        )
        for spec in specs
    ]


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------
def _yes(ok: bool) -> str:
    return "yes" if ok else "**no**"


def _num(x: float, digits: int) -> str:
    return "n/a" if math.isnan(x) else f"{x:.{digits}f}"


def _limit(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{x:g}"


def render_markdown(results: Sequence[WorkloadResult], meta: dict[str, str], command: str, load_start: str = "") -> str:
    r0 = results[0]
    workers = "the engine's default (one per core, at most 8)"
    lines = [
        "# Topology benchmark: required anti-affinity and zone spreading",
        "",
        f"Command: `{command}` ({meta['date']}, placer at {meta['revision']}).",
        "",
        f"Machine: {meta['nproc']} cores, {meta['cpu']}, {meta['memory']} RAM; Python {meta['python']}, "
        f"OR-Tools {meta['ortools']}, numpy {meta['numpy']}. Shared machine: other work ran at the same time "
        f"(load average 1/5/15 min{' at the start: ' + load_start + ';' if load_start else ''} at the end: "
        f"{meta['load']}); compare placer with the simulation of the same run, not with absolute numbers.",
        "",
        f"Cluster: `benchmarks.generate.cluster({r0.nodes}, running_per_node={r0.running_per_node}, pending=0, "
        f"seed={r0.seed})`: {r0.nodes:,} heterogeneous nodes in 3 zones (labels `{ZONE}` and `{HOST}`; ~5% "
        f"tainted NoSchedule, ~0.5% cordoned), {r0.running:,} running pods. Batches of {r0.batch_size} pending "
        f"pods ({r0.deployments_per_batch} Deployments x {r0.replicas}, 100m cpu / 500Mi each), "
        f"{len(r0.records)} consecutive batches per workload; each batch's placements run in the next.",
        "",
        "- `anti-affinity`: required podAntiAffinity on `kubernetes.io/hostname` against the pod's own "
        "Deployment (`app` label): one pod of a Deployment per node (scheduler_perf SchedulingPodAntiAffinity, "
        "per Deployment);",
        "- `spreading`: topologySpreadConstraint on `topology.kubernetes.io/zone`, maxSkew 1, DoNotSchedule, "
        "on the pod's own Deployment (scheduler_perf TopologySpreading);",
        f"- `/new`: every batch brings {r0.deployments_per_batch} new Deployments of {r0.replicas} pods; "
        f"`/growing`: the same {r0.deployments_per_batch} Deployments get {r0.replicas} more pods in every batch "
        f"(later batches see up to {(len(r0.records) - 1) * r0.replicas} running pods of their own Deployment).",
        "",
        f"Config: the defaults except the solver time limit, {r0.time_limit:g} s (the engine benchmark's "
        f"budget for {r0.nodes:,} nodes, `benchmarks.run.time_limit_for`; the shipped controller config uses "
        f"0.5 s); CP-SAT workers: {workers}.",
        "",
        "Decision = `placer.service.decide(cluster, snapshot, batch, config)` (solve_batch, plus a global plan "
        "if pods stay unplaced) on an in-memory snapshot, wall clock, after one untimed warm-up; "
        f"pods/s = {r0.batch_size} / decision seconds (at the median decision, and at the p95 decision: the slow "
        "tail); p95 uses numpy's linear interpolation. `cpu` = process CPU time of a decision (all threads). "
        "The time limit is the whole decision's budget and CP-SAT gets what the work before it left, so a "
        "decision lasts about max(time limit, engine floor) and pods/s stays below "
        f"{r0.batch_size} / time limit = {r0.batch_size / r0.time_limit:.0f}. "
        f"Floor = the same decision again with a {_limit(r0.floor_limit)} s limit: the engine's work around "
        "the solver (prefilter, topology compile, greedy, model build, extraction), i.e. the best pods/s a "
        "shorter budget could give. Violations = `placer.validate.validate_placements` (the independent "
        "validator) on each batch's answer, summed over the batches. Threshold = kube-scheduler's "
        "scheduler_perf throughput threshold on 5,000 nodes (whole scheduler, binding included; placer's "
        "figure is the decision only).",
        "",
        "| workload | pods | placed | violations | decision median (s) | p95 (s) | cpu median (s) "
        "| **pods/s** | pods/s at p95 | threshold (pods/s) | pods/s / threshold | above threshold "
        "| floor median (s) | pods/s at floor |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|:-:|---:|---:|",
    ]
    for r in results:
        floor = r.floor_median
        lines.append(
            f"| {r.name} | {r.pods:,} | {r.placed:,} | {r.violations} | {r.median:.3f} | {r.p95:.3f} | "
            f"{r.cpu_median:.3f} | **{r.pods_per_s:.0f}** | {r.pods_per_s_p95:.0f} | {r.threshold:.0f} | "
            f"{r.pods_per_s / r.threshold:.2f} | {_yes(r.pods_per_s > r.threshold)} | {_num(floor, 3)} | "
            f"{_num(r.batch_size / floor, 0)} |"
        )
    lines += [
        "",
        "Same-run baseline: the same batches on the same states through `placer.baseline.simulate(state, batch, "
        '"default")`, placer\'s kube-scheduler simulation (one pod at a time, filter and score), timed the same '
        "way and checked by the same validator.",
        "",
        "| workload | simulation median (s) | p95 (s) | pods/s simulation | placer / simulation (pods/s) "
        "| placed simulation | violations simulation |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r.name} | {r.sim_median:.3f} | {r.sim_p95:.3f} | {r.sim_pods_per_s:.0f} | "
            f"{r.pods_per_s / r.sim_pods_per_s:.2f} | {r.sim_placed:,} | {r.sim_violations} |"
        )
    above = sum(1 for r in results if r.pods_per_s > r.threshold)
    clean = sum(1 for r in results if r.violations == 0)
    lines += [
        "",
        f"Above the threshold at the median decision: {above} of {len(results)} workloads; at the p95 decision: "
        f"{sum(1 for r in results if r.pods_per_s_p95 > r.threshold)} of {len(results)}. "
        f"Placer answers without violations: {clean} of {len(results)} workloads.",
    ]
    sim_bad = [r for r in results if r.sim_violations]
    if sim_bad:
        lines += [
            "",
            "The simulation's answers break the rules in "
            + ", ".join(f"`{r.name}` ({r.sim_violations})" for r in sim_bad)
            + ": when a simulation does not honour inter-pod rules, its speed is not a like-for-like baseline. "
            "First violation: "
            + "; ".join(
                f"`{r.name}`: {next(x.first_sim_violation for x in r.records if x.first_sim_violation)}"
                for r in sim_bad
            )
            + ".",
        ]
    bad = [r for r in results if r.violations]
    if bad:
        lines += [
            "",
            "**Placer violations**: "
            + "; ".join(f"`{r.name}`: {next(x.first_violation for x in r.records if x.first_violation)}" for r in bad),
        ]
    lines += ["", "Per batch: decision seconds (placer) / floor / simulation seconds:", ""]
    for r in results:
        pairs = ", ".join(f"{x.seconds:.3f}/{_num(x.floor_seconds, 3)}/{x.sim_seconds:.3f}" for x in r.records)
        statuses = sorted({x.status for x in r.records})
        lines.append(f"- {r.name}: {pairs} (status {', '.join(statuses)})")
    profiled = [r for r in results if r.phases]
    if profiled:
        lines += [
            "",
            "## Where the time goes",
            "",
            "One more decision of every batch under `cProfile` (untimed; the profiler slows Python code, so "
            "compare shares, not absolute seconds). Cumulative seconds per decision of the engine's phases "
            "(nested phases are included in their parents), then the functions with the most self time.",
            "",
        ]
        for r in profiled:
            total = r.phases[0].seconds if r.phases else 0.0
            lines += [
                f"### {r.name} ({r.profiled} decisions)",
                "",
                "| phase | function | s / decision | share of decide | calls / decision |",
                "|---|---|---:|---:|---:|",
            ]
            for p in r.phases:
                share = f"{100 * p.seconds / total:.0f}%" if total > 0 else "n/a"
                lines.append(f"| {p.name} | `{p.where}` | {p.seconds:.4f} | {share} | {p.calls:g} |")
            lines += [
                "",
                "| self time: function | where | s / decision | share of decide | calls / decision |",
                "|---|---|---:|---:|---:|",
            ]
            for p in r.hot:
                share = f"{100 * p.seconds / total:.0f}%" if total > 0 else "n/a"
                lines.append(f"| `{p.name}` | `{p.where}` | {p.seconds:.4f} | {share} | {p.calls:g} |")
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def plot(results: Sequence[WorkloadResult], path: Path) -> None:
    fig = Figure(figsize=(10, 4.2), dpi=120)
    FigureCanvasAgg(fig)  # the Agg backend, without pyplot's global state
    kinds: list[Kind] = ["anti-affinity", "spreading"]
    axes = fig.subplots(1, len(kinds), sharey=True)
    colours = {"new": "tab:blue", "growing": "tab:green"}
    for ax, kind in zip(axes, kinds, strict=True):
        mine = [r for r in results if r.kind == kind]
        for r in mine:
            xs = [x.batch + 1 for x in r.records]
            colour = colours.get(r.variant, "tab:grey")
            ax.plot(xs, [x.pods / x.seconds for x in r.records], "o-", color=colour, label=f"placer {r.variant}")
            ax.plot(
                xs,
                [x.pods / x.sim_seconds for x in r.records],
                "s--",
                color=colour,
                alpha=0.5,
                label=f"simulation {r.variant}",
            )
            floors = [x.pods / x.floor_seconds for x in r.records if not math.isnan(x.floor_seconds)]
            if floors:
                ax.plot(xs[: len(floors)], floors, ":", color=colour, alpha=0.7, label=f"placer floor {r.variant}")
        ax.axhline(
            THRESHOLDS[kind], color="red", linestyle=":", label=f"kube-scheduler threshold {THRESHOLDS[kind]:.0f}"
        )
        ax.set_yscale("log")
        ax.set_xlabel("batch")
        ax.set_title(f"{kind} ({SCHEDULER_PERF[kind]})")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    axes[0].set_ylabel("pods/s = batch / decision seconds (log)")
    nodes = results[0].nodes if results else 0
    fig.suptitle(f"placer decisions, batches of {results[0].batch_size if results else 0} pods, {nodes:,} nodes")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)


def _summary(r: WorkloadResult) -> dict[str, object]:
    return {
        **asdict(r),
        "median": r.median,
        "p95": r.p95,
        "pods_per_s": r.pods_per_s,
        "pods_per_s_p95": r.pods_per_s_p95,
        "floor_median": r.floor_median,
        "sim_pods_per_s": r.sim_pods_per_s,
        "violations": r.violations,
        "sim_violations": r.sim_violations,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.topology", description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--batches", type=int, default=10, help="consecutive batches per workload")
    parser.add_argument("--time-limit", type=float, help="solver time limit (default: benchmarks.run.time_limit_for)")
    parser.add_argument("--workers", type=int, help="CP-SAT workers (default: the Config default)")
    parser.add_argument("--workloads", help="comma-separated subset of " + ",".join(w.name for w in DEFAULT_WORKLOADS))
    parser.add_argument("--deployments", type=int, default=DEPLOYMENTS_PER_BATCH, help="Deployments per batch")
    parser.add_argument("--replicas", type=int, default=REPLICAS, help="pods per Deployment per batch")
    parser.add_argument("--running-per-node", type=int, default=RUNNING_PER_NODE)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument(
        "--floor-limit", type=float, default=FLOOR_LIMIT, help="time limit of the floor decision (0: skip it)"
    )
    parser.add_argument("--no-profile", action="store_true", help="skip the cProfile pass")
    parser.add_argument("--quick", action="store_true", help="smoke run: 1,000 nodes, 3 batches")
    parser.add_argument("--out", type=Path, default=OUT_DIR)
    args = parser.parse_args(argv)
    if args.quick:
        args.nodes = min(args.nodes, 1000)
        args.batches = min(args.batches, 3)
    specs = list(DEFAULT_WORKLOADS)
    if args.workloads:
        wanted = {w.strip() for w in args.workloads.split(",") if w.strip()}
        unknown = wanted - {w.name for w in specs}
        if unknown:
            parser.error(f"unknown workloads: {', '.join(sorted(unknown))}")
        specs = [w for w in specs if w.name in wanted]
    command = "python -m benchmarks.topology" + (" " + " ".join(argv if argv is not None else sys.argv[1:])).rstrip()
    load_start = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    revision = source_revision()  # at the start: others may commit while it runs
    started = time.perf_counter()
    results = run_workloads(
        args.nodes,
        args.batches,
        specs=specs,
        time_limit=args.time_limit,
        workers=args.workers,
        seed=args.seed,
        running_per_node=args.running_per_node,
        deployments=args.deployments,
        replicas=args.replicas,
        profile=not args.no_profile,
        floor_limit=args.floor_limit or None,
        log=True,
    )
    for r in results:
        print(
            f"[topology] {r.name}: placer {r.pods_per_s:.0f} pods/s (median {r.median:.3f} s, p95 {r.p95:.3f} s), "
            f"simulation {r.sim_pods_per_s:.0f} pods/s, threshold {r.threshold:.0f}; violations {r.violations} "
            f"(simulation {r.sim_violations})",
            flush=True,
        )
    meta = {**machine_info(), "revision": revision}
    args.out.mkdir(parents=True, exist_ok=True)
    md, png, js = args.out / "topology.md", args.out / "topology.png", args.out / "topology.json"
    md.write_text(render_markdown(results, meta, command, load_start), encoding="utf-8")
    plot(results, png)
    js.write_text(
        json.dumps({"machine": meta, "command": command, "results": [_summary(r) for r in results]}, indent=2) + "\n",
        encoding="utf-8",
    )
    print(f"[topology] wrote {md}, {png}, {js} in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
