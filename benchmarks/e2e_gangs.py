"""End-to-end topology gangs (issue 30 item 5): placer vs kube-scheduler 1.37.2 with its gang and
topology-aware workload scheduling on, one real control plane (testenv ``Cluster(workloads=True)``:
gates GenericWorkload, TopologyAwareWorkloadScheduling, CompositePodGroup, PodGroupPreemptionPolicy
on every component; kube-scheduler's default profile then holds GangScheduling,
TopologyPlacementGenerator and PodGroupPodsCount, which the report reads back from its /configz).

Cluster: ``--nodes`` kwok nodes of 16 cpu / 64Gi (benchmarks/e2e.py's), in racks of 16 consecutive
nodes (node label ``bench.placer.io/rack``, e2e_shapes.RACK). Every pod asks 8 cpu / 8Gi, so a node
holds two and a rack 32: the cluster's room is 2 x nodes pods.

Each gang is a ``scheduling.k8s.io/v1beta1`` Workload (one podGroupTemplate) and the PodGroup made
from it (``workloadRef``), ``schedulingPolicy.gang.minCount`` = its size and
``schedulingConstraints.topology[0].key`` = the rack label; its pods name it in
``spec.schedulingGroup.podGroupName``. Sizes are drawn uniformly from 4-32 with ``--seed`` at run
time while they fit in the demand's share of the room (20 draws in a row that do not fit end it).

Cases, each run for kube-scheduler then placer on the same empty nodes with the same objects:
- **topology gangs** at each ``--demands`` level (85, 90, 95, 100 % of the room): the gangs as a
  backlog (the scheduler under test stopped while they are created, as benchmarks/e2e.py does);
- **gang preemption**: low-priority gangs of 16 with ``disruptionMode: all`` fill every rack (two
  per rack; created and bound first by the scheduler under test), then high-priority gangs (group
  ``priorityClassName``, ``--preempt-demand`` of the room) arrive as a backlog: every one needs
  whole low groups evicted in one rack.

Figures per run (measured gangs): groups fully placed (every member bound), partial groups (some
but not all bound), groups split across racks, pods bound, pods/s = bound / (last bind -
resumption), p50 / p99 of bind - resumption; for preemption also the low pods evicted and low
groups evicted in part (must be 0 with ``disruptionMode: all``). A run ends when every measured pod
is bound or none was bound for ``--stall`` seconds. Writes docs/bench/e2e-gangs.md, .json and .png.

  python -m benchmarks.e2e_gangs --nodes 1000 --seed 1
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from ortools.sat.python import cp_model

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "e2e"))

import kube_helpers as kh  # noqa: E402

from benchmarks import e2e  # noqa: E402
from benchmarks.e2e_shapes import (  # noqa: E402
    HIGH,
    LOW,
    POD_GROUP_API,
    PRIORITIES,
    RACK,
    RACK_NODES,
    Json,
    node_labels,
    rack_of,
)
from benchmarks.machine import machine_info  # noqa: E402
from testenv import cluster as testenv  # noqa: E402

SLOT_CPU, SLOT_MEMORY, SLOTS_PER_NODE = "8", "8Gi", 2  # two pods per 16-cpu node, 32 per rack
SIZES = (4, 32)  # gang sizes, inclusive
FILL_SIZE = 16  # the low-priority gangs of the preemption case: two per rack
DEMANDS = (0.85, 0.90, 0.95, 1.00)
TOPOLOGY, PREEMPTION = "topology gangs", "gang preemption"
# --joint-batch: a third run per demand level, placer with one batch for the whole backlog
# (batchSize and solver timeLimit raised), to show what deciding all groups together gives.
JOINT = "placer-one-batch"
RUNNERS = (*e2e.WHO, JOINT)


@dataclass(frozen=True)
class Gang:
    name: str
    size: int
    priority_class: str | None = None
    disruption_all: bool = False
    topology: str | None = RACK  # the node label all members share a domain of (None: no constraint)
    cpu: str = SLOT_CPU  # each member's requests
    memory: str = SLOT_MEMORY


@dataclass(frozen=True)
class Case:
    shape: str
    demand: float  # measured pods / room
    measured: list[Gang]
    filler: list[Gang]


def draw_sizes(rng: np.random.Generator, budget: int, low: int = SIZES[0], high: int = SIZES[1]) -> list[int]:
    """Gang sizes drawn uniformly from [low, high] while they fit in ``budget`` pods (20 draws in a
    row that do not fit end it)."""
    sizes: list[int] = []
    misses = 0
    while misses < 20:
        size = int(rng.integers(low, high + 1))
        if size > budget:
            misses += 1
            continue
        sizes.append(size)
        budget -= size
    return sizes


def room(nodes: int) -> int:
    return SLOTS_PER_NODE * nodes


def topology_case(nodes: int, demand: float, seed: int) -> Case:
    rng = np.random.default_rng([seed, round(demand * 1000)])
    sizes = draw_sizes(rng, int(demand * room(nodes)))
    return Case(TOPOLOGY, demand, [Gang(f"tg-{g:03d}", s) for g, s in enumerate(sizes)], [])


def preemption_case(nodes: int, demand: float, seed: int) -> Case:
    """Low gangs of FILL_SIZE (disruptionMode all) filling every rack, then high gangs of ``demand``."""
    fill = [Gang(f"low-{g:03d}", FILL_SIZE, LOW, True) for g in range(room(nodes) // FILL_SIZE)]
    sizes = draw_sizes(np.random.default_rng([seed, 7]), int(demand * room(nodes)))
    return Case(PREEMPTION, demand, [Gang(f"high-{g:03d}", s, HIGH) for g, s in enumerate(sizes)], fill)


def rack_slots(nodes: int) -> list[int]:
    """Pods each rack holds: racks of RACK_NODES consecutive nodes (the last one may be short)."""
    return [SLOTS_PER_NODE * min(RACK_NODES, nodes - start) for start in range(0, nodes, RACK_NODES)]


def most_groups(sizes: list[int], slots: list[int], limit: float = 60.0) -> tuple[int, int]:
    """The most groups any scheduler could place whole, each in one rack, on empty racks of
    ``slots`` pods (all pods alike, so a group fits a rack when its size fits the rack's free
    slots): a bin packing solved with CP-SAT; (best found, proven upper bound)."""
    m = cp_model.CpModel()
    x = {
        (g, r): m.new_bool_var(f"x{g}_{r}")
        for g in range(len(sizes))
        for r in range(len(slots))
        if sizes[g] <= slots[r]
    }
    for g in range(len(sizes)):
        m.add_at_most_one(x[g, r] for r in range(len(slots)) if (g, r) in x)
    for r, cap in enumerate(slots):
        m.add(sum(sizes[g] * x[g, r] for g in range(len(sizes)) if (g, r) in x) <= cap)
    m.maximize(sum(x.values()))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = limit
    solver.parameters.num_workers = 2
    solver.solve(m)
    return round(solver.objective_value), round(solver.best_objective_bound)


def workload(g: Gang) -> Json:
    template: Json = {"name": "workers", **_policy(g)}
    return {"apiVersion": POD_GROUP_API, "kind": "Workload", "metadata": {"name": g.name},
            "spec": {"podGroupTemplates": [template]}}  # fmt: skip


def pod_group(g: Gang) -> Json:
    spec: Json = {"workloadRef": {"workloadName": g.name, "templateName": "workers"}, **_policy(g)}
    if g.priority_class is not None:
        spec["priorityClassName"] = g.priority_class
    return {"apiVersion": POD_GROUP_API, "kind": "PodGroup", "metadata": {"name": g.name}, "spec": spec}


def _policy(g: Gang) -> Json:
    out: Json = {"schedulingPolicy": {"gang": {"minCount": g.size}}}
    if g.topology is not None:
        out["schedulingConstraints"] = {"topology": [{"key": g.topology}]}
    if g.disruption_all:
        out["disruptionMode"] = {"all": {}}
    return out


def members(g: Gang) -> list[Json]:
    spec: Json = {
        "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": {"cpu": g.cpu, "memory": g.memory}}}],
        "schedulingGroup": {"podGroupName": g.name},
        "terminationGracePeriodSeconds": 0,
        "automountServiceAccountToken": False,
    }  # fmt: skip
    if g.priority_class is not None:
        spec["priorityClassName"] = g.priority_class
    meta = {"labels": {"bench": "e2e-gangs", "bench-gang": g.name}}
    return [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"{g.name}-{k:02d}", **copy.deepcopy(meta)},
             "spec": copy.deepcopy(spec)} for k in range(g.size)]  # fmt: skip


def group_of(pod: str) -> str:
    return pod.rsplit("-", 1)[0]


def count_groups(gangs: list[Gang], node_of: dict[str, str], rack: dict[str, str]) -> dict[str, int]:
    """Of ``gangs``, given the node of each bound member (``node_of``) and each node's rack:
    groups fully placed (every member bound), partial (some but not all), split across racks."""
    bound: dict[str, int] = {}
    racks: dict[str, set[str]] = {}
    for pod, node in node_of.items():
        g = group_of(pod)
        bound[g] = bound.get(g, 0) + 1
        racks.setdefault(g, set()).add(rack[node])
    return {
        "groups": len(gangs),
        "whole": sum(1 for g in gangs if bound.get(g.name, 0) == g.size),
        "partial": sum(1 for g in gangs if 0 < bound.get(g.name, 0) < g.size),
        "split": sum(1 for g in gangs if len(racks.get(g.name, ())) > 1),
    }


def count_evicted(filler: list[Gang], alive: set[str]) -> dict[str, int]:
    """Of the filler gangs, all bound before the measured phase: pods no longer alive, groups that
    lost some but not all of their members, groups evicted whole."""
    gone = {g.name: sum(1 for p in members(g) if p["metadata"]["name"] not in alive) for g in filler}
    return {
        "evicted_pods": sum(gone.values()),
        "evicted_groups": sum(1 for g in filler if gone[g.name] == g.size),
        "evicted_in_part": sum(1 for g in filler if 0 < gone[g.name] < g.size),
    }


class GangBench(e2e.Bench):
    """benchmarks/e2e.py's control plane and nodes, running gang cases."""

    joint = False  # the next placer run is the one-batch one (JOINT)

    def _adjust(self, config: dict[str, Any]) -> dict[str, Any]:
        if self.joint:
            config["batchSize"] = self.args.joint_batch
            config["engine"]["solver"]["timeLimit"] = self.args.joint_limit
        return config

    def racks(self) -> dict[str, str]:
        return {name: rack_of(i) for i, name in enumerate(self.names)}

    def case(self, case: Case, who: str) -> dict[str, Any]:
        tag = {"kube-scheduler": "ks", "placer": "pl", JOINT: "pj"}[who]
        ns = kh.create_namespace(self.core, kh.unique(f"gangs-{tag}"))
        for g in case.filler + case.measured:
            self._post(f"/apis/{POD_GROUP_API}/namespaces/{ns}/workloads", workload(g))
            self._post(f"/apis/{POD_GROUP_API}/namespaces/{ns}/podgroups", pod_group(g))
        tmp = Path(self.args.logs or self.c.workdir or "/tmp")
        tmp.mkdir(parents=True, exist_ok=True)
        self.joint = who == JOINT
        proc = self._placer(tmp, ns, None) if who != "kube-scheduler" else None
        scheduler = "placer" if who != "kube-scheduler" else None
        watch = e2e.BindWatch(self.http, ns)
        filler = [p for g in case.filler for p in members(g)]
        measured = [p for g in case.measured for p in members(g)]
        t0 = time.monotonic()
        filler_bound = 0
        try:
            if filler:
                made = self._create(ns, filler, scheduler)
                self._wait(watch, made)
                filler_bound = sum(1 for n in made if n in watch.bound)
                e2e.log(f"  filler: {filler_bound}/{len(made)} bound")
            self._hold(proc, signal.SIGSTOP)
            created = self._create(ns, measured, scheduler)
            cpu0 = self._cpu(proc)
            released = time.time()
            self._hold(proc, signal.SIGCONT)
            self._wait(watch, created)
            cpu = self._cpu(proc) - cpu0
            elapsed = time.monotonic() - t0
            alive = self._alive(ns)
        finally:
            watch.stop()
            self._stop(proc)
        try:
            row = self._gang_row(case, who, ns, created, watch, released, elapsed, cpu, alive)
            if filler:
                row["filler_bound"] = filler_bound
            return row
        finally:
            self._clean(ns, [p["metadata"]["name"] for p in filler + measured])

    @staticmethod
    def _stop(proc: subprocess.Popen[bytes] | None) -> None:
        """End the placer started for a run (its process group), if any."""
        if proc is None:
            return
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)

    def _alive(self, ns: str) -> set[str]:
        """The namespace's pods that exist and are not being deleted."""
        resp = self.http.request("GET", f"/api/v1/namespaces/{ns}/pods", e2e.TIMEOUTS)
        items = json.loads(resp.data)["items"]
        return {p["metadata"]["name"] for p in items if not p["metadata"].get("deletionTimestamp")}

    def _gang_row(
        self,
        case: Case,
        who: str,
        ns: str,
        created: dict[str, float],
        watch: e2e.BindWatch,
        released: float,
        elapsed: float,
        cpu: float,
        alive: set[str],
    ) -> dict[str, Any]:
        # A measured pod counts as placed when it was bound and is still there (none is preempted:
        # the measured gangs have the highest priority).
        node_of = {n: watch.node[n] for n in created if n in watch.bound and n in alive}
        lat = np.array([watch.bound[n] - released for n in node_of])
        last = max((watch.bound[n] for n in node_of), default=released)
        row: dict[str, Any] = {
            "shape": case.shape,
            "demand": case.demand,
            "who": who,
            "namespace": ns,
            "pods": len(created),
            "bound": len(node_of),
            **count_groups(case.measured, node_of, self.racks()),
            "pods_per_s": len(node_of) / max(last - released, 1e-9),
            "p50": float(np.percentile(lat, 50)) if len(lat) else float("nan"),
            "p99": float(np.percentile(lat, 99)) if len(lat) else float("nan"),
            "cpu_ms_per_pod": 1000 * cpu / max(len(node_of), 1),
            "seconds": round(elapsed, 1),
        }
        if case.filler:
            row.update(count_evicted(case.filler, alive))
        return row


def _scheduler_get(c: testenv.Cluster, path: str) -> bytes:
    """GET ``path`` from kube-scheduler's secure port (admin client certificate)."""
    assert c.workdir is not None
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # kube-scheduler's self-signed serving certificate
    pki = c.workdir / "pki"
    ctx.load_cert_chain(pki / "admin.crt", pki / "admin.key")
    with urllib.request.urlopen(f"https://127.0.0.1:{c.ports['scheduler']}{path}", context=ctx, timeout=10) as r:
        body: bytes = r.read()
    return body


def configz_plugins(c: testenv.Cluster) -> list[str]:
    """kube-scheduler's enabled multiPoint plugins, read from its /configz."""
    (profile,) = json.loads(_scheduler_get(c, "/configz"))["componentconfig"]["profiles"]
    return [str(p["name"]) for p in profile["plugins"]["multiPoint"]["enabled"]]


# kube-scheduler 1.37's pod-group counters (pkg/scheduler/metrics/metrics.go): candidate placements
# generated (TopologyPlacementGenerator: one per domain of the group's topology key), placements
# evaluated feasible / infeasible, pod-group cycles by result, workload preemption: units (a whole
# group under disruptionMode all) and victim pods. Name -> (metric, label text the series must hold).
GROUP_METRICS = {
    "placements_generated": ("scheduler_generated_placements_total", ""),
    "placements_feasible": ("scheduler_placement_evaluations_total", 'result="feasible"'),
    "placements_infeasible": ("scheduler_placement_evaluations_total", 'result="infeasible"'),
    "group_cycles_scheduled": ("scheduler_podgroup_schedule_attempts_total", 'result="scheduled"'),
    "group_cycles_unschedulable": ("scheduler_podgroup_schedule_attempts_total", 'result="unschedulable"'),
    "preempted_units": ("scheduler_preemption_workload_disruptions_sum", ""),
    "preempted_pods": ("scheduler_workload_preemption_victims_sum", ""),
}


def group_counters(text: str) -> dict[str, float]:
    """The GROUP_METRICS counters in a Prometheus text exposition (the matching series summed)."""
    out = dict.fromkeys(GROUP_METRICS, 0.0)
    for line in text.splitlines():
        if line.startswith("#") or " " not in line:
            continue
        series, value = line.rsplit(" ", 1)
        metric = series.split("{", 1)[0]
        for name, (want, labels) in GROUP_METRICS.items():
            if metric == want and labels in series:
                out[name] += float(value)
    return out


def cases(args: argparse.Namespace) -> list[Case]:
    out = [topology_case(args.nodes, d, args.seed) for d in args.demands]
    if args.preempt_demand > 0:
        out.append(preemption_case(args.nodes, args.preempt_demand, args.seed))
    return out


def new_result(args: argparse.Namespace) -> dict[str, Any]:
    """A run's results before its rows: the arguments, the machine, the load at the start."""
    return {"args": vars(args), "machine": machine_info(), "load_start": os.getloadavg(), "rows": []}


def gang_cluster(args: argparse.Namespace) -> testenv.Cluster:
    """The control plane with 1.37's workload APIs and kube-scheduler's gang plugins, both
    schedulers' client at ``--qps`` / ``--burst``."""
    sched = {"clientConnection": {"qps": args.qps, "burst": args.burst}}
    return testenv.Cluster(
        with_scheduler=True, scheduler_config=sched, workloads=True, controller_manager_args=e2e.GRACE
    )


def measure(args: argparse.Namespace, out_json: Path) -> dict[str, Any]:
    result = new_result(args)
    with gang_cluster(args) as c:
        e2e.log("control plane up")
        result["plugins"] = configz_plugins(c)
        bench = GangBench(c, args.nodes, args)
        for case in cases(args):
            for who in RUNNERS if args.joint_batch and case.shape == TOPOLOGY else e2e.WHO:
                e2e.log(f"{case.shape} {case.demand:.0%} {who}: {len(case.measured)} gangs")
                try:
                    before = group_counters(_scheduler_get(c, "/metrics").decode()) if who == "kube-scheduler" else {}
                    row = bench.case(case, who)
                    if before:
                        after = group_counters(_scheduler_get(c, "/metrics").decode())
                        row["kube_scheduler"] = {k: after[k] - before[k] for k in after}
                except Exception as exc:  # one failed run is reported, the others still run
                    e2e.log(f"{case.shape} {case.demand:.0%} {who} failed: {type(exc).__name__}: {exc}")
                    continue
                result["rows"].append(row)
                e2e.log(json.dumps(row))
                out_json.write_text(json.dumps(result, indent=1) + "\n")
    result["load_end"] = os.getloadavg()
    out_json.write_text(json.dumps(result, indent=1) + "\n")
    return result


def preemption_dump(nodes: int, seed: int, batch: int) -> Json:
    """A kubectl List for ``placer solve``: the preemption case right after its filler (every low
    gang bound, two pods per node in order, PodGroup ``spec.priority`` as admission sets it) with
    the first high gangs, at least ``batch`` pods, pending for placer (the controller's first batch)."""
    case = preemption_case(nodes, 0.25, seed)
    items: list[Json] = [
        {"kind": "Node", "metadata": {"name": f"bench-{i}", "labels": node_labels(i)},
         "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"}}}
        for i in range(nodes)
    ]  # fmt: skip
    high, pods = [], 0
    for g in case.measured:
        if pods >= batch:
            break
        high.append(g)
        pods += g.size
    slot = 0
    for g in case.filler + high:
        group = pod_group(g)
        group["metadata"]["namespace"] = "bench"
        group["spec"]["priority"] = PRIORITIES[g.priority_class or LOW]
        items.append(group)
        for pod in members(g):
            pod["metadata"]["namespace"] = "bench"
            pod["spec"]["priority"] = group["spec"]["priority"]
            if g in case.filler:
                pod["spec"]["nodeName"] = f"bench-{slot // SLOTS_PER_NODE}"
                pod["status"] = {"phase": "Running"}
                slot += 1
            else:
                pod["spec"]["schedulerName"] = "placer"
                pod["status"] = {"phase": "Pending"}
            items.append(pod)
    return {"kind": "List", "apiVersion": "v1", "items": items}


def _pair(rows: list[dict[str, Any]], shape: str, demand: float) -> dict[str, dict[str, Any]]:
    return {r["who"]: r for r in rows if r["shape"] == shape and r["demand"] == demand}


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    """Groups fully placed (share of the groups) and pods/s per demand level, both schedulers."""
    levels = [r["demand"] for r in rows if r["shape"] == TOPOLOGY and r["who"] == "placer"]
    fig = Figure(figsize=(11, 4))
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, 2)
    x = np.arange(len(levels))
    who_all = [w for w in RUNNERS if any(r["who"] == w for r in rows)]
    width = 0.8 / len(who_all)
    for k, who in enumerate(who_all):
        got = [_pair(rows, TOPOLOGY, d).get(who, {}) for d in levels]
        whole = [100 * r.get("whole", 0) / max(r.get("groups", 1), 1) for r in got]
        shift = x + (k - (len(who_all) - 1) / 2) * width
        axes[0].bar(shift, whole, width, label=who)
        axes[1].bar(shift, [r.get("pods_per_s", 0) for r in got], width, label=who)
    for ax, label in zip(axes, ("groups fully placed, % of the groups", "pods/s (higher is better)"), strict=True):
        ax.set_xticks(x, [f"{d:.0%}" for d in levels])
        ax.set_xlabel("demand, share of the cluster's room")
        ax.set_ylabel(label)
        ax.legend()
    axes[0].set_ylim(80, 101)
    axes[0].legend(loc="lower left")
    fig.suptitle("topology gangs (racks of 16 nodes), placer vs kube-scheduler 1.37.2")
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def fmt(x: float) -> str:
    return "" if math.isnan(x) else f"{x:.2f}"  # NaN: nothing bound


def machine_line(result: dict[str, Any]) -> str:
    """The report's sentence on the machine and its load during the run."""
    m, ls, le = result["machine"], result["load_start"], result.get("load_end", os.getloadavg())
    return (
        f"Machine: {m['nproc']} cores ({m['cpu']}), {m['memory']}, shared with other agents; Python {m['python']}, "
        f"OR-Tools {m['ortools']}. Load average at the start {ls[0]:.1f}/{ls[1]:.1f}/{ls[2]:.1f}, at the end "
        f"{le[0]:.1f}/{le[1]:.1f}/{le[2]:.1f}: the API server, etcd, kwok, the pod creators and the scheduler under "
        "test share these cores,"
    )


def report(result: dict[str, Any], png: str) -> str:
    args, rows, m = result["args"], result["rows"], result["machine"]
    lines = [
        "# End-to-end topology gangs and gang preemption: placer vs kube-scheduler 1.37.2",
        "",
        f"Command: `python -m benchmarks.e2e_gangs --nodes {args['nodes']} --seed {args['seed']} "
        f"--demands {','.join(f'{d:g}' for d in args['demands'])} --preempt-demand {args['preempt_demand']:g} "
        f"--stall {args['stall']:g}"
        + (f" --time-limit {args['time_limit']:g}" if args.get("time_limit") is not None else "")
        + (
            f" --joint-batch {args['joint_batch']} --joint-limit {args['joint_limit']:g}"
            if args.get("joint_batch")
            else ""
        )
        + f"` ({m['date']}, placer at {m['revision']}).",
        "",
        machine_line(result) + " so pods/s are same-run ratios, not absolute figures.",
        "",
        f"Control plane: testenv (Kubernetes {testenv.read_versions()['K8S_VERSION']}) with "
        f"`--feature-gates={testenv.WORKLOAD_GATES_VALUE}` on every component and "
        f"`--runtime-config={testenv.WORKLOAD_RUNTIME_VALUE}`. kube-scheduler runs its default profile, whose "
        f"multiPoint plugins (read from its /configz in this run) are: {', '.join(result.get('plugins', []))}. "
        f"{args['nodes']} kwok nodes of 16 cpu / 64Gi in racks of {RACK_NODES} (node label `{RACK}`); every pod "
        f"asks {SLOT_CPU} cpu / {SLOT_MEMORY}: {SLOTS_PER_NODE} per node, {SLOTS_PER_NODE * RACK_NODES} per rack, "
        f"room for {room(args['nodes'])} pods. Both schedulers: client QPS {args['qps']:g} / burst {args['burst']}; "
        f"placer: the shipped k8s/config.yaml with batchWindowSeconds {args['window']:g}"
        + (f" and solver timeLimit {args['time_limit']:g} s" if args.get("time_limit") is not None else "")
        + ".",
        "",
        "Each gang: a `scheduling.k8s.io/v1beta1` Workload and the PodGroup made from it, gang `minCount` = its "
        f"size, `schedulingConstraints.topology[0].key` = `{RACK}`; sizes uniform in {SIZES[0]}-{SIZES[1]} drawn "
        f"with seed {args['seed']} at run time up to the demand's share of the room. Per case kube-scheduler then "
        "placer, on the same empty nodes with the same objects; the measured gangs are a backlog (the scheduler "
        "stopped while they are created, resumed once all exist). pods/s = pods bound / (last bind - resumption); "
        "p50/p99 of bind - resumption. A run ends when all measured pods are bound or none was bound for "
        f"{args['stall']:g} s. Details in the docstring of benchmarks/e2e_gangs.py.",
        *(
            [
                "",
                f"`{JOINT}` (--joint-batch): a third run per demand level, placer with batchSize "
                f"{args['joint_batch']} and solver timeLimit {args['joint_limit']:g} s, so that one decision "
                "holds the whole backlog: what deciding the groups together gives, against the shipped batchSize "
                "(a few groups per decision). The targets are judged on the shipped configuration.",
            ]
            if args.get("joint_batch")
            else []
        ),
        "",
        "## Topology gangs",
        "",
        "| demand | groups | pods | scheduler | groups fully placed | partial | split across racks | pods bound "
        "| pods/s | p50 (s) | p99 (s) | CPU ms / pod | run s |",
        "|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    levels = list(dict.fromkeys(r["demand"] for r in rows if r["shape"] == TOPOLOGY))
    for d in levels:
        for who, r in sorted(_pair(rows, TOPOLOGY, d).items()):
            lines.append(
                f"| {d:.0%} | {r['groups']} | {r['pods']} | {who} | {r['whole']} | {r['partial']} | {r['split']} "
                f"| {r['bound']} | {r['pods_per_s']:.1f} | {fmt(r['p50'])} | {fmt(r['p99'])} "
                f"| {r['cpu_ms_per_pod']:.1f} | {r['seconds']} |"
            )
    lines += [
        "",
        "Against issue 30's targets (placer / kube-scheduler, same run):",
        "",
        "| demand | groups fully placed: placer vs kube-scheduler | target | met | most placeable (offline "
        "optimum) | target reachable | placer partial + split | pods/s ratio (target >= 1.0) "
        f"| {JOINT}: groups, partial + split |",
        "|---:|---:|---|---|---:|---|---:|---:|---:|",
    ]
    for d in levels:
        pair = _pair(rows, TOPOLOGY, d)
        if len(pair) < 2:
            continue
        pl, ks = pair["placer"], pair["kube-scheduler"]
        need = 1.10 if d >= 0.95 else 1.0
        met = pl["whole"] >= need * ks["whole"]
        ratio = pl["pods_per_s"] / max(ks["pods_per_s"], 1e-9)
        ratio_s = f"{ratio:.2f} ({'met' if ratio >= 1 else 'not met'})"
        gain = f"{100 * (pl['whole'] / ks['whole'] - 1):+.1f} %" if ks["whole"] else ""
        case = topology_case(args["nodes"], d, args["seed"])
        best, bound = most_groups([g.size for g in case.measured], rack_slots(args["nodes"]))
        most = f"{best}" if best == bound else f"{best}-{bound}"
        reachable = "yes" if need * ks["whole"] <= bound else "no"
        joint = f"{pair[JOINT]['whole']}, {pair[JOINT]['partial'] + pair[JOINT]['split']}" if JOINT in pair else ""
        lines.append(
            f"| {d:.0%} | {pl['whole']} vs {ks['whole']} ({gain}) | {'>= +10 %' if need > 1 else '>='} "
            f"| {'yes' if met else 'no'} | {most} | {reachable} | {pl['partial'] + pl['split']} | {ratio_s} | {joint} |"
        )
    counted = [r for r in rows if "kube_scheduler" in r]
    if counted:
        lines += [
            "",
            "kube-scheduler's own pod-group counters over each of its runs (its /metrics before and after; "
            "`scheduler_generated_placements_total`, `scheduler_placement_evaluations_total`, "
            "`scheduler_podgroup_schedule_attempts_total`, `scheduler_preemption_workload_disruptions`, "
            "`scheduler_workload_preemption_victims`): TopologyPlacementGenerator proposes one placement per rack "
            "of a group's topology key, and each is evaluated; together with zero split groups this shows its "
            "topology-aware placement at work.",
            "",
            "| case | placements generated | per group cycle | feasible | infeasible | group cycles scheduled "
            "| unschedulable | preempted units | preempted pods |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in counted:
            k = r["kube_scheduler"]
            cycles = k["group_cycles_scheduled"] + k["group_cycles_unschedulable"]
            lines.append(
                f"| {r['shape']} {r['demand']:.0%} | {k['placements_generated']:.0f} "
                f"| {k['placements_generated'] / max(cycles, 1):.1f} | {k['placements_feasible']:.0f} "
                f"| {k['placements_infeasible']:.0f} | {k['group_cycles_scheduled']:.0f} "
                f"| {k['group_cycles_unschedulable']:.0f} | {k['preempted_units']:.0f} | {k['preempted_pods']:.0f} |"
            )
    pre = [r for r in rows if r["shape"] == PREEMPTION]
    if pre:
        lines += [
            "",
            "## Gang preemption",
            "",
            f"Low-priority gangs of {FILL_SIZE} (`priorityClassName: {LOW}`, "
            f"value {PRIORITIES[LOW]}, `disruptionMode: all`) fill every rack ({room(args['nodes']) // FILL_SIZE} "
            f"groups, created and bound first by the scheduler under test); then high-priority gangs "
            f"(`{HIGH}`, value {PRIORITIES[HIGH]}, on the PodGroup and its pods) of "
            f"{args['preempt_demand']:.0%} of the room arrive as a backlog, each in one rack: every one must evict "
            "whole low groups.",
            "",
            "| scheduler | high groups | groups fully placed | partial | split across racks | pods bound | pods/s "
            "| p50 (s) | p99 (s) | low pods bound first | low pods evicted | low groups evicted "
            "| low groups evicted in part | run s |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in pre:
            lines.append(
                f"| {r['who']} | {r['groups']} | {r['whole']} | {r['partial']} | {r['split']} | {r['bound']} "
                f"| {r['pods_per_s']:.1f} | {fmt(r['p50'])} | {fmt(r['p99'])} | {r.get('filler_bound', '')} "
                f"| {r.get('evicted_pods', '')} "
                f"| {r.get('evicted_groups', '')} | {r.get('evicted_in_part', '')} | {r['seconds']} |"
            )
    lines += ["", f"![{png}]({png})", ""]
    return "\n".join(lines)


def placer_args(ap: argparse.ArgumentParser) -> None:
    """The flags both schedulers' clients and placer's configuration take (e2e.Bench reads them)."""
    ap.add_argument("--qps", type=float, default=1000.0)
    ap.add_argument("--burst", type=int, default=2000)
    ap.add_argument("--window", type=float, default=1.0, help="placer's batchWindowSeconds")
    ap.add_argument("--time-limit", type=float, help="placer's solver.timeLimit (default: k8s/config.yaml's)")
    ap.add_argument("--max-solve", type=float, help="placer's maxSolveSeconds (default: k8s/config.yaml's)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1, help="draws the gang sizes")
    ap.add_argument("--demands", type=lambda s: [float(x) for x in s.split(",")], default=list(DEMANDS))
    ap.add_argument("--preempt-demand", type=float, default=0.25, help="high gangs' share of the room (0: no case)")
    placer_args(ap)
    ap.add_argument("--joint-batch", type=int, default=0, help="also run placer with this batchSize (0: not)")
    ap.add_argument("--joint-limit", type=float, default=5.0, help="the one-batch run's solver timeLimit")
    ap.add_argument("--stall", type=float, default=30.0)
    ap.add_argument("--cap", type=float, default=600.0)
    ap.add_argument("--logs", help="keep placer's configuration and log per run here (default: the cluster's workdir)")
    ap.add_argument("--from-json", help="rewrite the report from a results file, measuring nothing")
    ap.add_argument("--preemption-dump", help="write the preemption case after its filler, with the first high "
                    "gangs (99 pods) pending, as a kubectl List for `placer solve`, and measure nothing")  # fmt: skip
    ap.add_argument("--out", default=str(REPO / "docs" / "bench" / "e2e-gangs.md"))
    args = ap.parse_args(argv)
    if args.preemption_dump:
        Path(args.preemption_dump).write_text(json.dumps(preemption_dump(args.nodes, args.seed, 99)) + "\n")
        return 0
    return write_report(args, measure, plot, report)


def write_report(
    args: argparse.Namespace,
    measure_to: Callable[[argparse.Namespace, Path], dict[str, Any]],
    plot_to: Callable[[list[dict[str, Any]], Path], None],
    report_of: Callable[[dict[str, Any], str], str],
) -> int:
    """Measure (results kept in ``--out``'s .json as they come) or read ``--from-json``, then write
    the plot (.png) and the Markdown report (``--out``, printed too)."""
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out_json = out.with_suffix(".json")
    result = json.loads(Path(args.from_json).read_text()) if args.from_json else measure_to(args, out_json)
    png = out.with_suffix(".png")
    plot_to(result["rows"], png)
    text = report_of(result, png.name)
    out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
