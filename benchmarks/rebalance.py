"""Issue 15's benchmark: a drifting load, run three ways: no rebalancing, descheduler
LowNodeUtilization, placer rebalance.

Cluster (``workload``, seeded): ``--nodes`` nodes in three pools (label ``pool``): general
(16 cores, 64Gi), compute (32 cores, 64Gi) and highmem (8 cores, 64Gi), three zones; one
DaemonSet pod per node and a few bare pods (neither moves in any arm).

Workload (the same event stream for every arm):

- Deployments (ReplicaSets, pods tier Always) whose replica counts drift on their own slow waves;
  a scale-down removes the newest replica;
- Jobs arriving at a rate that rises and falls over the run (Poisson per period), 1-6 pods each,
  each pod's work lasting a log-normal time (median 10 min); 60 % of the Jobs restart ``Never``,
  40 % ``OnFailure``; 75 % opt in to moves (half by podFailurePolicy ignoring DisruptionTarget,
  half by the ``placer.io/rebalance: restarts-work`` annotation); a quarter of the Jobs pin their
  pods to a pool (nodeSelector), memory-heavy ones to highmem, cpu-heavy ones to compute, so
  pools heat up in turns.

Every ``--period`` seconds, in every arm: finished Job pods leave and Deployments scale; new and
still pending pods are placed by ``--policy default`` (``solve_cluster``, the kube-scheduler
simulation, one call per period); then the arm's rebalancer runs, and the state is sampled.

- ``none``: nothing moves.
- ``lnu``: descheduler LowNodeUtilization as its README defines it (thresholds ``--low`` and
  targetThresholds ``--high`` on cpu and memory requests; ``pods`` unset, so 100 %): a node is
  underutilized below every threshold and overutilized above any target; nothing happens unless
  both kinds exist; overutilized nodes are taken in decreasing usage, their pods evicted lowest
  priority first until the node is back under every target or the room left under the targets
  of the underutilized nodes runs out in some resource; no landing is planned. The default
  evictor's filters as far as the simulation has them: never DaemonSet, mirror or bare pods, nor
  system-critical priorities; Job pods are evicted whether their Job opted in or not (the
  descheduler does not know), and so are Deployment pods. Evicted pods are recreated at once and
  placed by ``--policy default`` in the same period; they may land back on a hot node.
- ``placer``: ``placer.rebalance.rebalance_cluster`` on the same state, with the same thresholds
  and its configured limits; each move is applied as the controller would (the pod runs on the
  target, stamped ``placer.io/moved-at``), after checking that it fits there by requests.

Load is by requests for the metrics, LowNodeUtilization (its README: requests, not usage) and,
unless ``--load-by usage``, placer. Usage is modelled too (``Profile``: per Deployment a cpu share
of its requests on a slow wave, memory steady; per Job a cpu share of 50-130 %, bursting past its
requests), reported as std_score and hot nodes by usage; with ``--load-by usage`` placer balances
by it (one ``metrics.k8s.io`` sample per pod and period).

A moved Job pod starts its work again (its end is pushed back by its whole duration), in both
arms that move. Reported per period (plot) and as time averages over all periods (table):
imbalance and std_score (``placer.metrics.balance_metrics``), nodes above ``--high`` in cpu or
memory, pods still pending, pods moved (cumulative), moves that landed on a node above ``--high``
(at the end of their period), LNU pods that landed back on the node they were evicted from, and
the work restarted by moves.

  python -m benchmarks.rebalance [--quick] [--nodes 200] [--periods 60] [--period 60] [--seed 1]

``--quick`` (40 nodes, 16 periods of 180 s, 1 s) is a smoke run; it writes to ``build/bench-quick/`` unless
``--out`` says otherwise.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.machine import machine_info, report_header, source_revision  # noqa: E402
from placer.metrics import balance_metrics  # noqa: E402
from placer.models import Cluster, Config, Job, Node, Owner, Pod, PodUsage, ReplicaSet, Usage  # noqa: E402
from placer.rebalance import RebalanceOptions, rebalance_cluster  # noqa: E402
from placer.service import SolveOptions, solve_cluster  # noqa: E402

OUT_DIR = REPO / "docs" / "bench"
QUICK_OUT_DIR = REPO / "build" / "bench-quick"
GI = 2**30
MI = 2**20
EPOCH = datetime(2026, 1, 1, tzinfo=UTC).timestamp()  # simulated time 0
POOLS = (("general", 16_000, 64 * GI, 0.50), ("compute", 32_000, 64 * GI, 0.25), ("highmem", 8_000, 64 * GI, 0.25))
ZONES = ("zone-a", "zone-b", "zone-c")
NAMESPACES = ("team-a", "team-b", "team-c", "team-d", "team-e", "team-f")
# Pod shapes: (cpu millicores low, high), (memory GiB low, high)
SHAPES = {
    "cpu": ((1000, 4000), (1.0, 4.0)),
    "memory": ((250, 1000), (4.0, 12.0)),
    "balanced": ((500, 2000), (2.0, 8.0)),
}
Arm = Literal["none", "lnu", "placer"]
CRITICAL = 2_000_000_000  # system-cluster-critical: the descheduler's default priority threshold
ARMS: tuple[Arm, ...] = ("none", "lnu", "placer")
JOINING = 0.25  # share of the nodes that join after the peak of the Jobs' wave
JOIN_LAG = 0.12  # share of the run after the peak when they join
WAVE_PEAK = 0.35  # the Jobs' arrival rate peaks at this share of the run...
WAVE_WIDTH = 0.30  # ...and falls to WAVE_BASE of it this share of the run either side of it
WAVE_BASE = 0.05  # share of the peak rate outside the wave
DEPLOYMENTS = 0.25  # Deployments' mean share of the cluster's cpu
JOB_MEDIAN, JOB_SIGMA = 1200.0, 0.6  # a Job pod's work: log-normal, seconds
LABELS = {"none": "no rebalancing", "lnu": "LowNodeUtilization", "placer": "placer rebalance"}


def stamp(t: float) -> str:
    """RFC 3339 time of simulated second ``t`` (sortable as text: fixed width)."""
    return datetime.fromtimestamp(EPOCH + t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---------------------------------------------------------------- the event stream


@dataclass(frozen=True)
class Spec:
    """One pod of the stream, as created (pending); ``duration`` is a Job pod's work in seconds."""

    pod: Pod
    arrives: float
    duration: float | None = None


@dataclass(frozen=True)
class Deployment:
    namespace: str
    name: str
    replicas: tuple[int, ...]  # desired replicas per period
    cpu: int
    memory: int


@dataclass(frozen=True)
class Profile:
    """A workload's usage as a share of its pods' requests over time (cpu on a wave, memory steady)."""

    cpu: float
    swing: float  # the cpu wave's amplitude, a share of ``cpu``
    wave: float  # seconds per cycle
    phase: float
    memory: float

    def at(self, t: float) -> tuple[float, float]:
        return max(0.02, self.cpu * (1 + self.swing * math.sin(2 * math.pi * t / self.wave + self.phase))), self.memory


@dataclass
class Stream:
    nodes: tuple[Node, ...]
    fixed: list[Pod]  # DaemonSet pods, running from the start
    arrivals: list[list[Spec]]  # per period: Job pods created in it
    deployments: list[Deployment]
    jobs: tuple[Job, ...]
    replicasets: tuple[ReplicaSet, ...]
    period: float
    joins: list[list[str]]  # per period: nodes that join the cluster at its start
    profiles: dict[str, Profile]  # usage per owner (Deployment, Job, DaemonSet) name

    @property
    def periods(self) -> int:
        return len(self.arrivals)


def _shape(rng: np.random.Generator, kind: str) -> tuple[int, int]:
    (c0, c1), (m0, m1) = SHAPES[kind]
    cpu = int(rng.integers(c0 // 50, c1 // 50 + 1)) * 50
    memory = int(rng.uniform(m0, m1) * 4) * GI // 4
    return cpu, memory


def _profiles(deployments: Sequence[Deployment], jobs: Sequence[Job], span: float, seed: int) -> dict[str, Profile]:
    """Usage: Deployments' cpu 20-90 % of requests on waves of 30-100 % of the run (swinging 30-80 %),
    memory 50-95 %; Jobs' cpu 50-130 % (batch work bursts past its requests) on a 10-minute wave
    swinging 10 %, memory 60-100 %; the DaemonSet at half its cpu and 70 % of its memory."""
    rng = np.random.default_rng([seed, 15])  # its own generator: the stream is the same with or without it
    out = {"agent": Profile(0.5, 0.0, 600.0, 0.0, 0.7)}
    for d in deployments:
        low, high = [0.2, 0.3, 0.3, 0.0, 0.5], [0.9, 0.8, 1.0, 2 * math.pi, 0.95]
        cpu, swing, share, phase, memory = (float(x) for x in rng.uniform(low, high))
        out[d.name] = Profile(cpu, swing, share * span, phase, memory)
    for j in jobs:
        cpu, phase, memory = (float(x) for x in rng.uniform([0.5, 0, 0.6], [1.3, 2 * math.pi, 1.0]))
        out[j.name] = Profile(cpu, 0.1, 600.0, phase, memory)
    return out


def _nodes(rng: np.random.Generator, count: int) -> tuple[Node, ...]:
    shares = np.array([p[3] for p in POOLS])
    pools = rng.choice(len(POOLS), size=count, p=shares / shares.sum())
    nodes = []
    for i in range(count):
        pool, cpu, memory, _ = POOLS[int(pools[i])]
        name = f"node-{i:03d}"
        labels = {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": ZONES[i % len(ZONES)], "pool": pool}
        nodes.append(Node(name=name, labels=labels, allocatable={"cpu": cpu, "memory": memory, "pods": 110}))
    return tuple(nodes)


def _pod(name: str, namespace: str, cpu: int, memory: int, t: float, **extra: Any) -> Pod:
    return Pod(
        namespace=namespace,
        name=name,
        uid=f"{namespace}/{name}",
        scheduler_name="placer",
        creation=stamp(t),
        requests={"cpu": cpu, "memory": memory},
        score_cpu=cpu,
        score_memory=memory,
        **extra,
    )


def workload(nodes: int, periods: int, period: float, seed: int, load: float = 0.6) -> Stream:
    """The seeded event stream; ``load`` is the Jobs' mean share of the cluster's cpu at the peak of
    their wave (Deployments add about 30 %)."""
    rng = np.random.default_rng([seed, nodes, periods])
    node_list = _nodes(rng, nodes)
    cpu_total = sum(n.allocatable["cpu"] for n in node_list)
    fixed: list[Pod] = []
    for n in node_list:
        ds = _pod(f"agent-{n.name}", "kube-system", 100, 200 * MI, 0.0, owner=Owner(kind="DaemonSet", name="agent"))
        fixed.append(ds.model_copy(update={"node_name": n.name, "phase": "Running"}))
    # Scale-out: the last JOINING share of the nodes join (empty) at the peak of the Jobs' wave,
    # as a cluster autoscaler adds them under pressure; the wave then recedes.
    joins: list[list[str]] = [[] for _ in range(periods)]
    first = nodes - round(JOINING * nodes)
    joins[0] = [n.name for n in node_list[:first]]
    joins[min(periods - 1, round((WAVE_PEAK + JOIN_LAG) * periods))] += [n.name for n in node_list[first:]]
    # Deployments: DEPLOYMENTS of the cpu on average, each on its own slow wave.
    deployments: list[Deployment] = []
    replicasets: list[ReplicaSet] = []
    budget = DEPLOYMENTS * cpu_total
    d = 0
    while budget > 0:
        kind = str(rng.choice(list(SHAPES)))
        cpu, memory = _shape(rng, kind)
        base = int(rng.integers(2, 12))
        phase = rng.uniform(0, 2 * math.pi)
        wave = rng.uniform(0.5, 1.5) * periods
        replicas = tuple(
            max(1, round(base * (1 + 0.5 * math.sin(2 * math.pi * k / wave + phase)))) for k in range(periods)
        )
        ns = NAMESPACES[d % len(NAMESPACES)]
        deployments.append(Deployment(ns, f"web-{d:03d}", replicas, cpu, memory))
        replicasets.append(ReplicaSet(namespace=ns, name=f"web-{d:03d}", uid=f"rs-{d}", scheduler_name="placer"))
        budget -= base * cpu
        d += 1
    # Jobs: the arrival rate follows one wave over the run, peaking at ``load`` of the cpu.
    mean_duration = JOB_MEDIAN * math.exp(JOB_SIGMA**2 / 2)
    mean_cpu = float(np.mean([sum(SHAPES[k][0]) / 2 for k in SHAPES]))
    pods_per_job = 3.5
    peak_rate = load * cpu_total / (mean_duration * mean_cpu * pods_per_job)  # Jobs per second at the peak
    arrivals: list[list[Spec]] = []
    jobs: list[Job] = []
    for k in range(periods):
        x = min(1.0, abs(k / periods - WAVE_PEAK) / WAVE_WIDTH)
        rate = peak_rate * (WAVE_BASE + (1 - WAVE_BASE) * (1 + math.cos(math.pi * x)) / 2)
        specs: list[Spec] = []
        for _ in range(int(rng.poisson(rate * period))):
            j = len(jobs)
            ns = NAMESPACES[int(rng.integers(len(NAMESPACES)))]
            kind = str(rng.choice(list(SHAPES)))
            opt = rng.random()
            jobs.append(
                Job(
                    namespace=ns,
                    name=f"job-{j:04d}",
                    uid=f"job-{j}",
                    scheduler_name="placer",
                    ignores_disruption=opt < 0.375,
                    accepts_restarts=0.375 <= opt < 0.75,
                )
            )
            policy = "Never" if rng.random() < 0.6 else "OnFailure"
            selector = {}
            if rng.random() < 0.25 and kind != "balanced":
                selector = {"pool": "highmem" if kind == "memory" else "compute"}
            cpu, memory = _shape(rng, kind)
            t = k * period + float(rng.uniform(0, period))
            for i in range(int(rng.integers(1, 7))):
                pod = _pod(
                    f"job-{j:04d}-{i}",
                    ns,
                    cpu,
                    memory,
                    t,
                    owner=Owner(kind="Job", name=f"job-{j:04d}", uid=f"job-{j}"),
                    restart_policy=policy,
                    node_selector=selector,
                    labels={"job-name": f"job-{j:04d}"},
                )
                duration = float(np.clip(rng.lognormal(math.log(JOB_MEDIAN), JOB_SIGMA), 120.0, 5400.0))
                specs.append(Spec(pod, t, duration))
        arrivals.append(specs)
    return Stream(
        node_list,
        fixed,
        arrivals,
        deployments,
        tuple(jobs),
        tuple(replicasets),
        period,
        joins,
        _profiles(deployments, jobs, periods * period, seed),
    )


# ---------------------------------------------------------------- one arm's cluster


@dataclass
class Live:
    pod: Pod  # as it runs now (node_name set) or waits (pending)
    ends: float | None  # a Job pod's end of work
    duration: float | None


@dataclass
class Move:
    """One pod moved in a period: where from, where it landed."""

    pod: str
    source: str
    target: str
    job: bool
    opted_in: bool
    restarted: float  # seconds of work thrown away


@dataclass
class Sample:
    t: float
    imbalance: float
    std_score: float
    hot: int  # nodes above the high threshold in cpu or memory
    pending: int
    moved: int  # cumulative
    landed_hot: int  # cumulative
    landed_back: int  # cumulative, LNU: re-placed on the node it was evicted from
    seconds: float  # the rebalancer's wall time this period
    usage_std: float  # std_score with usage for load
    usage_hot: int  # nodes above the high threshold in cpu or memory usage


class Sim:
    """One arm: the pods, where they run, and the per-node requests."""

    def __init__(self, stream: Stream, arm: Arm) -> None:
        self.stream, self.arm = stream, arm
        self.index = {n.name: i for i, n in enumerate(stream.nodes)}
        self.alloc = np.array([[n.allocatable["cpu"], n.allocatable["memory"]] for n in stream.nodes], dtype=np.float64)
        self.used = np.zeros_like(self.alloc)
        self.count = np.zeros(len(stream.nodes), dtype=np.int64)
        self.pods: dict[str, Live] = {}
        self.moves: list[Move] = []
        self.landed_hot = 0
        self.landed_back = 0
        self.samples: list[Sample] = []
        self.jobs = {j.key: j for j in stream.jobs}
        self.present = np.zeros(len(stream.nodes), dtype=np.bool_)  # joined the cluster
        self.agents = {p.node_name: p for p in stream.fixed}

    # -- bookkeeping
    def _vec(self, pod: Pod) -> np.ndarray[Any, np.dtype[np.float64]]:
        return np.array([pod.requests.get("cpu", 0), pod.requests.get("memory", 0)], dtype=np.float64)

    def _add(self, live: Live) -> None:
        self.pods[live.pod.key] = live
        if live.pod.node_name is not None:
            n = self.index[live.pod.node_name]
            self.used[n] += self._vec(live.pod)
            self.count[n] += 1

    def _remove(self, key: str) -> Live:
        live = self.pods.pop(key)
        if live.pod.node_name is not None:
            n = self.index[live.pod.node_name]
            self.used[n] -= self._vec(live.pod)
            self.count[n] -= 1
        return live

    def _bind(self, key: str, node: str | None, **update: Any) -> None:
        live = self._remove(key)
        phase = "Pending" if node is None else "Running"
        live.pod = live.pod.model_copy(update={"node_name": node, "phase": phase, **update})
        self._add(live)

    def fits(self, pod: Pod, node: str) -> bool:
        n = self.index[node]
        free = self.alloc[n] - self.used[n]
        return (
            bool(self.present[n])
            and bool(np.all(self._vec(pod) <= free))
            and int(self.count[n]) < self.stream.nodes[n].allocatable["pods"]
        )

    def utilisation(self) -> np.ndarray[Any, np.dtype[np.float64]]:
        """Per node, cpu and memory requests as a share of allocatable."""
        return self.used / self.alloc

    # -- the period's events
    def churn(self, k: int) -> None:
        """Period ``k`` begins: finished Job pods leave, Deployments scale, new Job pods arrive."""
        t = k * self.stream.period
        for key in [key for key, live in self.pods.items() if live.ends is not None and live.ends <= t]:
            self._remove(key)
        for name in self.stream.joins[k]:
            self.present[self.index[name]] = True
            if name in self.agents:  # its DaemonSet pod starts with it
                self._add(Live(self.agents[name], None, None))
        replicas: dict[str, list[str]] = {}
        for key, live in self.pods.items():
            o = live.pod.owner
            if o is not None and o.kind == "ReplicaSet":
                replicas.setdefault(o.name, []).append(key)
        for d in self.stream.deployments:
            want = d.replicas[k]
            have = sorted(replicas.get(d.name, []), key=lambda key: int(key.rsplit("-", 1)[1]))
            for key in have[want:]:  # the newest replicas go first
                self._remove(key)
            top = int(have[-1].rsplit("-", 1)[1]) + 1 if have else 0
            for i in range(top, top + max(0, want - len(have))):
                pod = _pod(
                    f"{d.name}-{i}",
                    d.namespace,
                    d.cpu,
                    d.memory,
                    t,
                    owner=Owner(kind="ReplicaSet", name=d.name, uid=f"rs-{d.name}"),
                    labels={"app": d.name},
                )
                self._add(Live(pod, None, None))
        for spec in self.stream.arrivals[k]:
            self._add(Live(spec.pod, None, spec.duration))

    def place_pending(self, t: float) -> list[str]:
        """Every pending pod through ``--policy default`` (one solve_cluster call); the keys placed."""
        if not any(live.pod.node_name is None for live in self.pods.values()):
            return []
        outcome = solve_cluster(self.cluster(t), SolveOptions(policy="default", evict=False))
        placed = []
        for p in outcome.result.placements:
            if p.pod is None or p.node is None:
                continue
            live = self.pods[p.pod]
            ends = t + live.duration if live.duration is not None else None
            self._bind(p.pod, p.node, start_time=stamp(t))
            self.pods[p.pod].ends = ends
            placed.append(p.pod)
        return placed

    def cluster(self, t: float) -> Cluster:
        s = self.stream
        ready: dict[str, int] = {}
        for live in self.pods.values():
            o = live.pod.owner
            if o is not None and o.kind == "ReplicaSet" and live.pod.node_name is not None:
                ready[o.name] = ready.get(o.name, 0) + 1
        rss = tuple(rs.model_copy(update={"ready_replicas": ready.get(rs.name, 0)}) for rs in s.replicasets)
        live_jobs = {
            live.pod.owner.name for live in self.pods.values() if live.pod.owner and live.pod.owner.kind == "Job"
        }
        jobs = tuple(j for j in s.jobs if j.name in live_jobs)
        return Cluster(
            nodes=tuple(n for i, n in enumerate(s.nodes) if self.present[i]),
            pods=tuple(live.pod for live in self.pods.values()),
            replicasets=rss,
            jobs=jobs,
        )

    # -- moving
    def evict_and_replace(self, keys: Sequence[str], t: float) -> None:
        """LNU: the pods are evicted, recreated pending at once and placed by ``--policy default``."""
        before: dict[str, tuple[str, float | None]] = {}
        for key in keys:
            live = self.pods[key]
            before[key] = (live.pod.node_name or "", live.ends)
            live.ends = None  # pending again: no work is done until it runs
            self._bind(key, None, start_time="")
        self.place_pending(t)  # sets a re-placed Job pod's end: its work starts again
        for key in keys:
            source, ends = before[key]
            target = self.pods[key].pod.node_name or ""  # "": still pending, no landing yet
            self._record(key, source, target, t, ends)
            if target == source:
                self.landed_back += 1

    def apply_moves(self, moves: Sequence[tuple[str, str, str]], t: float) -> int:
        """placer: each move as the controller makes it; a move that does not fit is refused (counted)."""
        refused = 0
        for key, source, target in moves:
            live = self.pods.get(key)
            if live is None or live.pod.node_name != source or not self.fits(live.pod, target):
                refused += 1
                continue
            ends = live.ends
            if live.duration is not None:
                live.ends = t + live.duration  # the replacement starts the work again
            self._bind(key, target, moved_at=EPOCH + t, start_time=stamp(t))
            self._record(key, source, target, t, ends)
        return refused

    def _record(self, key: str, source: str, target: str, t: float, ends: float | None) -> None:
        """A move from ``source`` to ``target`` ("" if not re-placed); ``ends``: the work's end before it."""
        live = self.pods[key]
        owner = live.pod.owner
        job = owner is not None and owner.kind == "Job"
        restarted = 0.0
        if live.duration is not None and ends is not None:
            restarted = live.duration - max(0.0, ends - t)  # the work done so far is lost
        opted = owner is not None and job and self.jobs[f"{live.pod.namespace}/{owner.name}"].opted_in
        self.moves.append(Move(key, source, target, job, opted, restarted))

    def sample(self, t: float, high: float, moved_before: int, seconds: float) -> None:
        util = self.utilisation()
        hot = (util.max(axis=1) > high / 100) & self.present
        for m in self.moves[moved_before:]:
            if m.target and hot[self.index[m.target]]:
                self.landed_hot += 1
        rows = np.flatnonzero(self.present)
        alloc = [{"cpu": int(a[0]), "memory": int(a[1])} for a in self.alloc[rows]]
        used = [{"cpu": int(u[0]), "memory": int(u[1])} for u in self.used[rows]]
        imbalance, std = balance_metrics(alloc, used)
        pending = sum(1 for live in self.pods.values() if live.pod.node_name is None)
        usage = self.usage_by_node(t)
        _, usage_std = balance_metrics(alloc, [{"cpu": int(u[0]), "memory": int(u[1])} for u in usage[rows]])
        usage_hot = int(((usage / self.alloc).max(axis=1) > high / 100)[rows].sum())
        self.samples.append(
            Sample(
                t,
                imbalance,
                std,
                int(hot.sum()),
                pending,
                len(self.moves),
                self.landed_hot,
                self.landed_back,
                seconds,
                usage_std,
                usage_hot,
            )
        )

    def pod_usage(self, t: float) -> dict[str, tuple[int, int]]:
        """Every running pod's cpu (millicores) and memory (bytes) in use at ``t``."""
        out = {}
        for key, live in self.pods.items():
            pod = live.pod
            if pod.node_name is None or pod.owner is None:
                continue
            cpu, memory = self.stream.profiles[pod.owner.name].at(t)
            out[key] = (int(cpu * pod.requests.get("cpu", 0)), int(memory * pod.requests.get("memory", 0)))
        return out

    def usage_by_node(self, t: float) -> np.ndarray[Any, np.dtype[np.float64]]:
        used = np.zeros_like(self.alloc)
        for key, (cpu, memory) in self.pod_usage(t).items():
            node = self.pods[key].pod.node_name
            if node is not None:
                used[self.index[node]] += (cpu, memory)
        return used


# ---------------------------------------------------------------- LowNodeUtilization


def _evictable(pod: Pod) -> bool:
    """The descheduler's default evictor, as far as the simulation models pods."""
    owner = pod.owner
    if owner is None or owner.kind == "DaemonSet" or pod.mirror:
        return False
    return bool(pod.priority < CRITICAL)


def lnu_evictions(
    alloc: np.ndarray[Any, np.dtype[np.float64]],
    used: np.ndarray[Any, np.dtype[np.float64]],
    pods_on: Sequence[Sequence[Pod]],
    present: np.ndarray[Any, np.dtype[np.bool_]],
    low: float,
    high: float,
    rng: np.random.Generator | None = None,
) -> list[str]:
    """The pods LowNodeUtilization evicts in one run, in order (keys).

    ``alloc``/``used``: nodes x (cpu, memory) requests; thresholds in percent, the same for both
    resources; ``present``: nodes in the cluster. Underutilized: below ``low`` in every resource;
    overutilized: above ``high`` in any. Nothing unless both kinds exist. Overutilized nodes in
    decreasing usage; on each, pods lowest priority first until the node is under ``high`` in
    every resource or the room under ``high`` left on the underutilized nodes is used up in some
    resource. Among pods of one priority (and QoS class: every pod here is Burstable) the
    descheduler's order is arbitrary (an unstable sort of an informer's listing): ``rng`` shuffles
    them, None keeps the order given."""
    util = used / alloc * 100
    under = np.flatnonzero((util < low).all(axis=1) & present)
    over = np.flatnonzero((util > high).any(axis=1) & present)
    if len(under) == 0 or len(over) == 0:
        return []
    room = (alloc[under] * high / 100 - used[under]).sum(axis=0)
    order = sorted(over.tolist(), key=lambda n: (-float(util[n].sum()), n))
    evicted: list[str] = []
    for n in order:
        usage = used[n].copy()
        candidates = [p for p in pods_on[n] if _evictable(p)]
        if rng is not None:
            candidates = [candidates[i] for i in rng.permutation(len(candidates))]
        for pod in sorted(candidates, key=lambda p: p.priority):
            if not (usage > alloc[n] * high / 100).any() or (room <= 0).any():
                break
            vec = np.array([pod.requests.get("cpu", 0), pod.requests.get("memory", 0)], dtype=np.float64)
            usage -= vec
            room -= vec
            evicted.append(pod.key)
    return evicted


# ---------------------------------------------------------------- placer rebalance


def rebalance_config(
    low: float, high: float, time_limit: float, per_period: int | None = None, load: str = "requests"
) -> Config:
    section: dict[str, Any] = {"thresholds": {"low": low, "high": high}, "load": load}
    if per_period is not None:
        section["limits"] = {"perPeriod": per_period}
    return Config.model_validate(
        {"solver": {"timeLimit": time_limit, "workers": 1, "deterministic": True}, "rebalance": section}
    )


# (cluster, config, now, usage samples or None) -> moves (pod, source, target)
Rebalancer = Callable[[Cluster, Config, float, Usage | None], list[tuple[str, str, str]]]


def placer_moves(
    cluster: Cluster, config: Config, now: float, usage: Usage | None = None
) -> list[tuple[str, str, str]]:
    """``placer.rebalance.rebalance_cluster``: the moves (pod, source, target) of one period."""
    out = rebalance_cluster(cluster, RebalanceOptions(config=config, usage=usage, now=now))
    return [(m.pod, m.source, m.target) for m in out.moves]


def usage_samples(pods: dict[str, tuple[int, int]], now: float, window: float) -> Usage:
    """One ``metrics.k8s.io`` sample per pod (what ``placer rebalance --usage`` reads)."""
    return Usage(
        samples=tuple(
            PodUsage(
                namespace=key.split("/", 1)[0],
                name=key.split("/", 1)[1],
                timestamp=now,
                window=window,
                usage={"cpu": cpu, "memory": memory},
            )
            for key, (cpu, memory) in pods.items()
        )
    )


# ---------------------------------------------------------------- the run


@dataclass
class ArmResult:
    arm: str
    samples: list[Sample]
    moves: int
    job_moves: int
    not_opted_in: int  # Job pods moved whose Job did not opt in (LNU only: placer never should)
    always_moves: int  # Deployment (tier Always) pods moved
    landed_hot: int
    landed_back: int
    never_landed: int  # evicted pods still pending at the end of their period
    refused: int  # placer moves that did not fit (should be 0)
    restarted_hours: float
    seconds: float  # the rebalancer's total wall time
    averages: dict[str, float] = field(default_factory=dict)


def run(
    stream: Stream,
    low: float,
    high: float,
    time_limit: float,
    rebalancer: Rebalancer = placer_moves,
    *,
    seed: int = 0,
    per_period: int | None = None,
    load: str = "requests",
) -> list[ArmResult]:
    """The three arms on ``stream``; ``seed`` orders LNU's ties, ``per_period`` overrides placer's
    moves-per-period limit (None: its default), ``load`` is placer's (usage: it gets samples)."""
    sims: dict[Arm, Sim] = {arm: Sim(stream, arm) for arm in ARMS}
    config = rebalance_config(low, high, time_limit, per_period, load)
    refused = dict.fromkeys(ARMS, 0)
    for k in range(stream.periods):
        t = (k + 1) * stream.period  # the end of period k: its events are in
        for arm, sim in sims.items():
            sim.churn(k)
            sim.place_pending(t)
            before = len(sim.moves)
            started = time.perf_counter()
            seconds = 0.0
            if arm == "lnu":
                pods_on: list[list[Pod]] = [[] for _ in stream.nodes]
                for live in sim.pods.values():
                    if live.pod.node_name is not None:
                        pods_on[sim.index[live.pod.node_name]].append(live.pod)
                rng = np.random.default_rng([seed, k])
                keys = lnu_evictions(sim.alloc, sim.used, pods_on, sim.present, low, high, rng)
                seconds = time.perf_counter() - started
                if keys:
                    sim.evict_and_replace(keys, t)
            elif arm == "placer":
                usage = usage_samples(sim.pod_usage(t), EPOCH + t, stream.period) if load == "usage" else None
                moves = rebalancer(sim.cluster(t), config, EPOCH + t, usage)
                seconds = time.perf_counter() - started
                refused[arm] += sim.apply_moves(moves, t)
            sim.sample(t, high, before, seconds)
        s = {arm: sims[arm].samples[-1] for arm in ARMS}
        print(
            f"[rebalance] t={t / 60:5.0f} min "
            + "; ".join(f"{arm}: std {s[arm].std_score:.4f} hot {s[arm].hot} moved {s[arm].moved}" for arm in ARMS),
            flush=True,
        )
    return [_result(sim, refused[sim.arm]) for sim in sims.values()]


def _result(sim: Sim, refused: int) -> ArmResult:
    m = sim.moves
    r = ArmResult(
        arm=sim.arm,
        samples=sim.samples,
        moves=len(m),
        job_moves=sum(1 for x in m if x.job),
        not_opted_in=sum(1 for x in m if x.job and not x.opted_in),
        always_moves=sum(1 for x in m if not x.job),
        landed_hot=sim.landed_hot,
        landed_back=sim.landed_back,
        never_landed=sum(1 for x in m if not x.target),
        refused=refused,
        restarted_hours=sum(x.restarted for x in m) / 3600,
        seconds=sum(s.seconds for s in sim.samples),
    )
    joined = next((k for k, j in enumerate(sim.stream.joins) if k and j), 0)
    for name in ("imbalance", "std_score", "hot", "pending", "usage_std", "usage_hot"):
        r.averages[name] = float(np.mean([getattr(s, name) for s in sim.samples]))
        r.averages[f"{name}_after_join"] = float(np.mean([getattr(s, name) for s in sim.samples[joined:]]))
    return r


# ---------------------------------------------------------------- report


def targets(results: Sequence[ArmResult]) -> list[str]:
    by = {r.arm: r for r in results}
    p, lnu = by["placer"], by["lnu"]
    lower = p.averages["std_score"] < lnu.averages["std_score"]
    fewer = p.moves < lnu.moves
    return [
        f"- time-averaged std_score lower than LowNodeUtilization's: {p.averages['std_score']:.4f} vs "
        f"{lnu.averages['std_score']:.4f} — {'met' if lower else 'missed'}",
        f"- with fewer moves: {p.moves} vs {lnu.moves} — {'met' if fewer else 'missed'}",
        f"- zero moves landing on a node above the high threshold: {p.landed_hot} — "
        f"{'met' if p.landed_hot == 0 else 'missed'}",
    ]


def render_markdown(
    results: Sequence[ArmResult],
    stream: Stream,
    args: argparse.Namespace,
    command: str,
    info: dict[str, str],
    load_start: str,
) -> str:
    lines = report_header("Rebalancing under a drifting load", command, info, load_start=load_start)
    pods = sum(len(a) for a in stream.arrivals)
    joined = sum(len(j) for j in stream.joins[1:])
    when = next((k for k, j in enumerate(stream.joins) if k and j), 0)
    lim = rebalance_config(args.low, args.high, args.time_limit, args.per_period).rebalance.limits
    lines += [
        f"Cluster: {len(stream.nodes)} nodes in three pools ({joined} of them join empty at minute "
        f"{when * stream.period / 60:g}, after the peak), {len(stream.deployments)} Deployments (tier Always, "
        f"replicas drifting), {len(stream.jobs)} Jobs arriving in one wave ({pods} pods, 60 % Never / 40 % "
        f"OnFailure, 75 % opted in to moves, a quarter pinned to a pool), {stream.periods} periods of "
        f"{stream.period:g} s, seed {args.seed}. Load, for the metrics and both rebalancers, is by requests "
        f"(placer's `rebalance.load`: {args.load_by}); usage is modelled per workload (Deployments' cpu on "
        "waves, Jobs bursting past their requests) and reported in the last columns. Thresholds low "
        f"{args.low:g} % / high {args.high:g} % for both rebalancers, the same period. LowNodeUtilization with "
        "no eviction limits (maxNoOfPodsToEvictPerNode/PerNamespace unset, its default); placer's limits "
        f"perPeriod {lim.per_period} or {lim.per_period_percent:g} % of the nodes ({lim.moves(len(stream.nodes))} "
        f"moves a plan at {len(stream.nodes)} nodes), perNode {lim.per_node}, perNamespace {lim.per_namespace} or "
        f"{lim.per_namespace_percent:g} % of the plan's limit ({lim.in_namespace(len(stream.nodes))} then), "
        f"cooldown {lim.cooldown:g} s, its solver time limit {args.time_limit:g} s per period, one worker. "
        "Workload and semantics: the docstring of `benchmarks/rebalance.py`.",
        "",
        "Columns: *nodes above high*: above the high threshold in cpu or memory requests (LNU's "
        "overutilized); *landed above high*: moves whose landing node is above it at the end of the period; "
        "*landed back on source*: LNU evictions the default scheduler put back where they came from; "
        "*of Jobs not opted in*: Job pods moved although their Job neither ignores DisruptionTarget nor "
        "accepts restarts (each counts toward its backoffLimit); *work restarted*: the work moved Job pods had "
        "done; *rebalancer s*: wall time of the rebalancer over the run (placer: building its input and "
        "`rebalance_cluster`; LNU: choosing the evictions, their re-placement not counted), on a shared, "
        "loaded machine.",
        "",
        "Time averages over all periods (state at the end of each period):",
        "",
        "| arm | imbalance | std_score | nodes above high | pending pods | pods moved | Job pods moved "
        "| of Jobs not opted in | Always-tier moved | landed above high | landed back on source "
        "| evicted, not re-placed | work restarted (pod-h) | rebalancer s | std_score by usage "
        "| nodes above high by usage |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        a = r.averages
        back = str(r.landed_back) if r.arm == "lnu" else "—"
        lines.append(
            f"| {LABELS[r.arm]} | {a['imbalance']:.4f} | {a['std_score']:.4f} | {a['hot']:.2f} | {a['pending']:.1f} "
            f"| {r.moves} | {r.job_moves} | {r.not_opted_in} | {r.always_moves} | {r.landed_hot} | {back} "
            f"| {r.never_landed} | {r.restarted_hours:.1f} | {r.seconds:.1f} | {a['usage_std']:.4f} "
            f"| {a['usage_hot']:.2f} |"
        )
    refused = next(r.refused for r in results if r.arm == "placer")
    lines += [
        "",
        f"The same, averaged only from minute {when * stream.period / 60:g} (the nodes joining) to the end:",
        "",
        "| arm | imbalance | std_score | nodes above high | std_score by usage | nodes above high by usage |",
        "|---|---:|---:|---:|---:|---:|",
        *(
            f"| {LABELS[r.arm]} | {r.averages['imbalance_after_join']:.4f} | {r.averages['std_score_after_join']:.4f} "
            f"| {r.averages['hot_after_join']:.2f} | {r.averages['usage_std_after_join']:.4f} "
            f"| {r.averages['usage_hot_after_join']:.2f} |"
            for r in results
        ),
        "",
        f"placer moves refused by the simulation because they did not fit by requests: {refused}.",
        "",
        "Targets (issue 15):",
        "",
        *targets(results),
        "",
        f"![rebalance]({args.name}.png)",
        "",
    ]
    return "\n".join(lines)


def plot(results: Sequence[ArmResult], path: Path, high: float, joined: float | None = None) -> None:
    """Six panels over simulated time; ``joined``: the minute the late nodes join (a dotted line)."""
    fig = Figure(figsize=(16, 8))
    FigureCanvasAgg(fig)
    panels = (
        ("std_score", "std_score"),
        ("imbalance", "imbalance"),
        ("hot", f"nodes above {high:g} %"),
        ("moved", "pods moved (cumulative)"),
        ("landed_hot", f"moves landed above {high:g} % (cumulative)"),
        ("pending", "pending pods"),
        ("usage_std", "std_score by usage"),
        ("usage_hot", f"nodes above {high:g} % by usage"),
    )
    for i, (key, title) in enumerate(panels):
        ax = fig.add_subplot(2, 4, i + 1)
        for r in results:
            ax.plot([s.t / 60 for s in r.samples], [getattr(s, key) for s in r.samples], label=LABELS[r.arm])
        if joined is not None:
            ax.axvline(joined, color="grey", linestyle=":", linewidth=1)
        ax.set_title(title)
        ax.set_xlabel("simulated minutes")
        if i == 0:
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.rebalance", description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--periods", type=int, default=60)
    parser.add_argument("--period", type=float, default=60.0, help="seconds of simulated time per period")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--load", type=float, default=0.6, help="the Jobs' cpu share at the peak of their wave")
    parser.add_argument("--low", type=float, default=20.0, help="percent")
    parser.add_argument("--high", type=float, default=80.0, help="percent")
    parser.add_argument("--time-limit", type=float, default=2.0, help="placer's solver limit per period")
    parser.add_argument("--load-by", choices=("requests", "usage"), default="requests", help="placer's rebalance.load")
    parser.add_argument("--per-period", type=int, help="placer's rebalance.limits.perPeriod (default: its default)")
    parser.add_argument("--name", default="rebalance", help="report file names (NAME.md, .png, .json)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 40 nodes, 16 periods of 180 s")
    parser.add_argument("--out", type=Path, help="report directory (default docs/bench, build/bench-quick if --quick)")
    args = parser.parse_args(argv)
    if args.quick:
        args.nodes, args.periods, args.period, args.time_limit = 40, 16, 180.0, 1.0
    if not (args.nodes > 0 and args.periods > 0 and 0 <= args.low < args.high <= 100):
        parser.error("need --nodes > 0, --periods > 0 and 0 <= --low < --high <= 100")
    out: Path = args.out or (QUICK_OUT_DIR if args.quick else OUT_DIR)
    command = "python -m benchmarks.rebalance" + (" " + " ".join(argv if argv is not None else sys.argv[1:])).rstrip()
    load_start = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    revision = source_revision()
    stream = workload(args.nodes, args.periods, args.period, args.seed, args.load)
    results = run(
        stream, args.low, args.high, args.time_limit, seed=args.seed, per_period=args.per_period, load=args.load_by
    )
    info = {**machine_info(), "revision": revision}
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{args.name}.md").write_text(
        render_markdown(results, stream, args, command, info, load_start), encoding="utf-8"
    )
    rows = [
        {k: v for k, v in asdict(r).items() if k != "samples"} | {"samples": [asdict(s) for s in r.samples]}
        for r in results
    ]
    (out / f"{args.name}.json").write_text(
        json.dumps({"machine": info, "command": command, "arms": rows}, indent=1) + "\n", encoding="utf-8"
    )
    joined = next((k for k, j in enumerate(stream.joins) if k and j), None)
    plot(results, out / f"{args.name}.png", args.high, None if joined is None else joined * stream.period / 60)
    print("\n".join(targets(results)))
    print(f"[rebalance] wrote {out / args.name}.md, .png, .json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
