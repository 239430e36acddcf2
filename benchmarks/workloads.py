"""Competing topology gangs (Kubernetes 1.37 PodGroups): placer vs the kube-scheduler 1.37 simulation.

Cluster (``instance``, seeded): racks of 4 to 16 nodes (sizes drawn uniformly), each node 4 cpu
and 16Gi, the rack in the node label ``topology.kubernetes.io/rack``. Pending pods (1 cpu, 1Gi,
``schedulerName: placer``, priority 0, random arrival order) in ``scheduling.k8s.io/v1beta1``
PodGroups of 4 to 32 pods (drawn uniformly), each a gang at ``minCount`` = its size and required
in one rack (``schedulingConstraints.topology[0].key``); groups are drawn while their pods fit in
the target share of the cluster's slots (20 draws in a row that do not fit end it).

Runs: ``solve_cluster`` in one batch (``placer solve --time-limit T``) for placer and for
``--policy default`` (kube-scheduler 1.37's pod group cycle, ``placer/baseline/groups.py``), and
the plain CP-SAT model of the groups (``benchmarks/reference_groups.py``: one domain variable per
group, all-or-nothing, groups then pods, the whole limit T), same instance, same run; wall time
of the whole call. Reported per instance: groups, groups placed whole by each, pods placed,
groups placed in part or split across racks (must be 0; every answer also goes through the
validator), the ratio of groups placed, seconds.

  python -m benchmarks.workloads [--quick] [--racks 10,25,50] [--seeds 2] [--demands 0.85,0.95,1.0] [--limit 10]

``--quick`` (8 racks, 1 seed, 95 %, 2 s) is a smoke run; it writes to ``build/bench-quick/``
unless ``--out`` says otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.machine import machine_info, report_header, source_revision  # noqa: E402
from benchmarks.reference_groups import cpsat_groups  # noqa: E402
from benchmarks.solving import Timed, timed_solve  # noqa: E402
from placer.inputs import parse_cluster  # noqa: E402
from placer.models import Cluster  # noqa: E402
from placer.validate import validate_placements  # noqa: E402

RACK = "topology.kubernetes.io/rack"
SLOTS = 4  # 1-cpu pods per 4-cpu node


def instance(racks: int, demand: float, seed: int) -> dict[str, Any]:
    """A kubectl List: racks of nodes and pending gangs, each required in one rack."""
    rng = np.random.default_rng(seed * 1000 + racks)
    items: list[dict[str, Any]] = []
    slots = 0
    for r in range(racks):
        for i in range(int(rng.integers(4, 17))):
            items.append(
                {
                    "kind": "Node",
                    "metadata": {"name": f"r{r:03d}-{i:02d}", "labels": {RACK: f"r{r:03d}"}},
                    "status": {"allocatable": {"cpu": str(SLOTS), "memory": "16Gi", "pods": "110"}},
                }
            )
            slots += SLOTS
    budget, misses, g = int(demand * slots), 0, 0
    pods: list[dict[str, Any]] = []
    while misses < 20:
        size = int(rng.integers(4, 33))
        if size > budget:
            misses += 1
            continue
        budget -= size
        name = f"g{g:03d}"
        g += 1
        items.append(
            {
                "apiVersion": "scheduling.k8s.io/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": name, "namespace": "ml"},
                "spec": {
                    "schedulingPolicy": {"gang": {"minCount": size}},
                    "schedulingConstraints": {"topology": [{"key": RACK}]},
                },
            }
        )
        for i in range(size):
            pods.append(
                {
                    "kind": "Pod",
                    "metadata": {"name": f"{name}-{i:02d}", "namespace": "ml"},
                    "spec": {
                        "schedulerName": "placer",
                        "schedulingGroup": {"podGroupName": name},
                        "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
                    },
                    "status": {"phase": "Pending"},
                }
            )
    for k, i in enumerate(rng.permutation(len(pods)).tolist()):
        pods[i]["metadata"]["creationTimestamp"] = f"2026-01-01T{k // 3600:02d}:{k // 60 % 60:02d}:{k % 60:02d}Z"
    return {"kind": "List", "apiVersion": "v1", "items": items + pods}


@dataclass
class Row:
    racks: int
    nodes: int
    seed: int
    target: float
    groups: int
    pods: int
    slots: int
    limit: float
    placer_groups: int
    default_groups: int
    placer_pods: int
    default_pods: int
    placer_broken: int  # groups placed in part or across racks (must be 0)
    default_broken: int
    placer_seconds: float
    default_seconds: float
    placer_status: str
    cpsat_groups: int = 0  # the plain CP-SAT model of the groups (reference_groups)
    cpsat_pods: int = 0
    cpsat_seconds: float = 0.0
    cpsat_status: str = ""

    @property
    def ratio(self) -> float:
        return self.placer_groups / self.default_groups if self.default_groups else float("inf")


def _placed(timed: Timed) -> dict[str, str]:
    return {p.pod: p.node for p in timed.outcome.result.placements if p.pod}


def _groups(cluster: Cluster, where: dict[str, str]) -> tuple[int, int]:
    """(groups placed whole in one rack, groups placed in part or split)."""
    rack = {n.name: n.labels.get(RACK) for n in cluster.nodes}
    members: dict[str, list[str | None]] = {}
    for pod in cluster.pods:
        members.setdefault(pod.gang or pod.name, []).append(rack[where[pod.key]] if pod.key in where else None)
    whole = broken = 0
    for racks in members.values():
        if all(r is None for r in racks):
            continue
        if None in racks or len(set(racks)) > 1:
            broken += 1
        else:
            whole += 1
    return whole, broken


def run_one(racks: int, demand: float, seed: int, limit: float) -> Row:
    doc = instance(racks, demand, seed)
    cluster = parse_cluster(f"workloads-{racks}-{seed}", json.dumps(doc))
    placer = timed_solve(cluster, "placer", time_limit=limit)
    default = timed_solve(cluster, "default", time_limit=limit)
    cpsat = cpsat_groups(cluster, limit)
    for placed in (_placed(placer), _placed(default), cpsat.placements):
        assert validate_placements(cluster, placed, scheduler_name="placer") == []
    pg, pb = _groups(cluster, _placed(placer))
    dg, db = _groups(cluster, _placed(default))
    cg, cb = _groups(cluster, cpsat.placements)
    assert cb == 0
    return Row(
        racks=racks,
        nodes=len(cluster.nodes),
        seed=seed,
        target=demand,
        groups=len({p.gang for p in cluster.pods}),
        pods=len(cluster.pods),
        slots=SLOTS * len(cluster.nodes),
        limit=limit,
        placer_groups=pg,
        default_groups=dg,
        placer_pods=len(placer.placed),
        default_pods=len(default.placed),
        placer_broken=pb,
        default_broken=db,
        placer_seconds=placer.seconds,
        default_seconds=default.seconds,
        placer_status=placer.outcome.result.status,
        cpsat_groups=cg,
        cpsat_pods=len(cpsat.placements),
        cpsat_seconds=cpsat.seconds,
        cpsat_status=cpsat.status,
    )


def render_markdown(rows: list[Row], command: str, info: dict[str, str], load_start: str) -> str:
    lines = report_header("Competing topology gangs (1.37 PodGroups)", command, info, load_start=load_start)
    lines += [
        "Racks of 4-16 nodes (4 one-cpu slots each); v1beta1 PodGroups of 4-32 one-cpu pods, each a gang "
        "required in one rack, drawn up to the target share of the slots; one batch. placer = "
        "`solve_cluster`, default = the kube-scheduler 1.37 simulation (one group at a time, a placement "
        "per rack, NodeResourcesFit placement score + PodGroupPodsCount); CP-SAT = the plain model of the "
        "groups (one domain variable per group, all-or-nothing, groups then pods, no hint, the whole limit); "
        "same instance, same run. Details in the docstrings of `benchmarks/workloads.py` and "
        "`benchmarks/reference_groups.py`.",
        "",
        "| racks | nodes | demand | seed | groups | pods | placer groups | default groups | CP-SAT groups "
        "| ratio to default | placer pods | default pods | CP-SAT pods | partial or split (placer / default) "
        "| placer s | default s | CP-SAT s | placer status | CP-SAT status |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in sorted(rows, key=lambda r: (r.racks, r.target, r.seed)):
        lines.append(
            f"| {r.racks} | {r.nodes} | {r.pods / r.slots:.1%} | {r.seed} | {r.groups} | {r.pods} "
            f"| {r.placer_groups} | {r.default_groups} | {r.cpsat_groups} | {r.ratio:.3f} "
            f"| {r.placer_pods} | {r.default_pods} | {r.cpsat_pods} | {r.placer_broken} / {r.default_broken} "
            f"| {r.placer_seconds:.1f} | {r.default_seconds:.2f} | {r.cpsat_seconds:.1f} "
            f"| {r.placer_status} | {r.cpsat_status} |"
        )
    if any(r.cpsat_status == "UNKNOWN" for r in rows):
        lines += ["", "CP-SAT `UNKNOWN`: the plain model found no answer within the limit (0 groups placed)."]
    worse = [r for r in rows if r.placer_groups < r.default_groups]
    fewer_pods = [r for r in rows if r.placer_pods < r.default_pods]
    below_cpsat = [r for r in rows if r.placer_groups < r.cpsat_groups]
    broken = sum(r.placer_broken for r in rows)
    lines += [
        "",
        "Targets (issue 30, offline):",
        "",
        f"- groups placed >= the 1.37 simulation on every instance: {len(rows) - len(worse)} of {len(rows)} "
        f"— {'met' if not worse else 'NOT met'}",
        f"- pods placed >= the 1.37 simulation on every instance: {len(rows) - len(fewer_pods)} of {len(rows)} "
        f"— {'met' if not fewer_pods else 'NOT met'}",
        f"- zero partial groups and zero groups split across racks for placer: {broken} — "
        f"{'met' if broken == 0 else 'NOT met'}",
        f"- groups placed >= the plain CP-SAT model at the same limit: {len(rows) - len(below_cpsat)} of {len(rows)} "
        f"— {'met' if not below_cpsat else 'NOT met'}",
        "",
        "![workloads](workloads.png)",
        "",
    ]
    return "\n".join(lines)


def plot(rows: list[Row], path: Path) -> None:
    fig = Figure(figsize=(8, 4))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ordered = sorted(rows, key=lambda r: (r.racks, r.target, r.seed))
    x = np.arange(len(ordered))
    ax.bar(x - 0.27, [r.placer_groups / r.groups for r in ordered], 0.27, label="placer")
    ax.bar(x, [r.default_groups / r.groups for r in ordered], 0.27, label="kube-scheduler 1.37 (simulated)")
    ax.bar(x + 0.27, [r.cpsat_groups / r.groups for r in ordered], 0.27, label="plain CP-SAT model")
    ax.set_xticks(x, [f"{r.racks}r {r.pods / r.slots:.0%} s{r.seed}" for r in ordered], rotation=60, fontsize=7)
    ax.set_ylabel("share of groups placed whole")
    ax.set_ylim(0, 1.2)
    ax.legend(fontsize=8, loc="upper center", ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--racks", default="10,25,50")
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--demands", default="0.85,0.95,1.0")
    parser.add_argument("--limit", type=float, default=10.0)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    racks = [8] if args.quick else [int(r) for r in args.racks.split(",")]
    seeds = 1 if args.quick else args.seeds
    demands = [0.95] if args.quick else [float(d) for d in args.demands.split(",")]
    limit = 2.0 if args.quick else args.limit
    out = args.out or (REPO / ("build/bench-quick" if args.quick else "docs/bench"))
    out.mkdir(parents=True, exist_ok=True)
    load_start = " ".join(f"{v:.2f}" for v in os.getloadavg())
    rows = [run_one(n, d, s, limit) for n in racks for d in demands for s in range(seeds)]
    command = "python -m benchmarks.workloads " + " ".join(argv if argv is not None else sys.argv[1:])
    info = {**machine_info(), "revision": source_revision()}
    (out / "workloads.md").write_text(render_markdown(rows, command.strip(), info, load_start), encoding="utf-8")
    (out / "workloads.json").write_text(json.dumps([asdict(r) for r in rows], indent=1) + "\n", encoding="utf-8")
    plot(rows, out / "workloads.png")
    print((out / "workloads.md").read_text(encoding="utf-8"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
