"""A synthetic fragmented GPU cluster, batches of 99: placer vs kube-scheduler's default policy.

Cluster (``cluster_document``, seeded; the nodes depend on the seed only, so every demand level
of a seed runs on the same nodes): nodes of four GPU models, the model in the node label
``nvidia.com/gpu.product`` (H100 and A100 nodes with 8 GPUs, V100 nodes with 4 or 8, T4 nodes
with 4), 12 cores and 128Gi of memory per GPU. Every node has two GPU resources: the device
plugin's ``nvidia.com/gpu`` (whole GPUs) and ``placer.io/gpu-milli`` = 1000 x its GPUs.

Fractional GPUs are the extended resource ``placer.io/gpu-milli``, in thousandths of a GPU:
Kubernetes extended resources are integer counts, so a pod cannot request 0.3 ``nvidia.com/gpu``
and asks for 300 ``placer.io/gpu-milli`` instead. A pod asking for whole GPUs (1, 2, 4 or 8)
requests both ``nvidia.com/gpu: g`` and ``placer.io/gpu-milli: 1000 g``, so whole and fractional
pods share one budget per node. The budget is per node, not per device: an extended resource has
no device identity, so the model lets two 600-milli pods and six whole GPUs share an 8-GPU node
although no device could hold both fractions; a device-level scheduler (as in Weng et al.,
ATC'23) would place fewer. Both policies see the same model, so the comparison is fair; the
absolute figures are optimistic.

Pods (bare, pending, ``schedulerName: placer``, priority 0, in random arrival order): 40 %
fractional (100..900 milli-GPU in steps of 50), 35 % one GPU, 12 % two, 8 % four, 5 % eight;
cpu and memory 30-100 % of the GPU share's (12 cores and 128Gi per GPU, at least 100m / 256Mi).
A third of the pods (rounded) are tied to GPU models: half by ``nodeSelector`` on one model, half by a
required node affinity ``In`` two models. Pods are drawn while they fit in the target share of
the cluster's GPUs (a pod that would exceed it is skipped; 20 in a row end the draw), then
fractional pods fill the rest: demand lands within 0.1 GPU below the target.

Runs: ``solve_cluster`` (as ``placer solve --batch-size 99 --time-limit T``) for placer and for
``--policy default`` (the kube-scheduler simulation), same cluster, same run; wall time of the
whole call. Reported per seed and demand level: pods placed and GPUs placed (the GPU requests of
the placed pods, fractions included) by both, the ratio, and wall time against batches x limit.

  python -m benchmarks.gpu [--quick] [--nodes 100] [--seeds 3] [--demands 0.90,0.94,0.98]

``--quick`` (24 nodes, 1 seed, 90 % and 98 %, 1 s) is a smoke run; it writes to
``build/bench-quick/`` unless ``--out`` says otherwise.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
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
from benchmarks.solving import Timed, timed_solve  # noqa: E402
from placer.inputs import parse_cluster  # noqa: E402
from placer.models import Cluster  # noqa: E402

OUT_DIR = REPO / "docs" / "bench"
QUICK_OUT_DIR = REPO / "build" / "bench-quick"
PRODUCT = "nvidia.com/gpu.product"
GPU = "nvidia.com/gpu"
GPU_MILLI = "placer.io/gpu-milli"
MILLI = 1000
CPU_PER_GPU_M = 12_000
MEMORY_PER_GPU_MI = 128 * 1024
# (model, GPUs per node, share of nodes)
NODE_SHAPES = (
    ("NVIDIA-H100-80GB-HBM3", 8, 0.20),
    ("NVIDIA-A100-SXM4-80GB", 8, 0.30),
    ("Tesla-V100-SXM2-32GB", 8, 0.10),
    ("Tesla-V100-SXM2-32GB", 4, 0.15),
    ("Tesla-T4", 4, 0.25),
)
MODELS = tuple(dict.fromkeys(m for m, _, _ in NODE_SHAPES))
# GPU request (milli-GPU; 0 = a fraction drawn from FRACTIONS) and share of pods
GPU_REQUESTS = ((0, 0.40), (1000, 0.35), (2000, 0.12), (4000, 0.08), (8000, 0.05))
FRACTIONS = tuple(range(100, 901, 50))
CONSTRAINED = 1 / 3  # share of pods tied to GPU models
BATCH_SIZE = 99
DEMANDS = (0.90, 0.94, 0.98)
TARGET_DEMAND, TARGET_GAIN = 0.98, 1.05  # the issue: GPUs placed >= 5 % above default's at 98 % demand
LIMIT_SLACK = 1.05


@dataclass(frozen=True)
class GpuCluster:
    seed: int
    target: float  # the demand asked for, share of the cluster's GPUs
    doc: dict[str, Any]  # placer's native schema

    @property
    def gpus_milli(self) -> int:
        return sum(int(n["allocatable"][GPU_MILLI]) for n in self.doc["nodes"])

    @property
    def demand_milli(self) -> int:
        return sum(gpu_milli(p["requests"]) for p in self.doc["pods"])

    def cluster(self) -> Cluster:
        return parse_cluster("gpu.json", json.dumps(self.doc))


def gpu_milli(requests: dict[str, Any]) -> int:
    """A pod's GPU request in milli-GPU (whole GPUs count 1000 each)."""
    return int(requests.get(GPU_MILLI, 0))


def _node(rng: np.random.Generator, index: int) -> dict[str, Any]:
    shape = int(rng.choice(len(NODE_SHAPES), p=[s for _, _, s in NODE_SHAPES]))
    model, gpus, _ = NODE_SHAPES[shape]
    return {
        "name": f"gpu-node-{index:03d}",
        "labels": {
            PRODUCT: model,
            "nvidia.com/gpu.count": str(gpus),
            "kubernetes.io/hostname": f"gpu-node-{index:03d}",
        },
        "allocatable": {
            "cpu": f"{gpus * CPU_PER_GPU_M}m",
            "memory": f"{gpus * MEMORY_PER_GPU_MI}Mi",
            GPU: gpus,
            GPU_MILLI: gpus * MILLI,
            "pods": 110,
        },
    }


def _requests(rng: np.random.Generator, milli: int) -> dict[str, Any]:
    share = milli / MILLI
    cpu = max(100, int(share * CPU_PER_GPU_M * rng.uniform(0.3, 1.0)))
    memory = max(256, int(share * MEMORY_PER_GPU_MI * rng.uniform(0.3, 1.0)))
    requests: dict[str, Any] = {"cpu": f"{cpu}m", "memory": f"{memory}Mi", GPU_MILLI: milli}
    if milli >= MILLI:
        requests[GPU] = milli // MILLI
    return requests


def _draw_milli(rng: np.random.Generator) -> int:
    kind = int(rng.choice(len(GPU_REQUESTS), p=[s for _, s in GPU_REQUESTS]))
    milli = GPU_REQUESTS[kind][0]
    return milli or int(rng.choice(FRACTIONS))


def _model_constraint(rng: np.random.Generator, milli: int, capacity: dict[str, dict[int, int]]) -> dict[str, Any]:
    """A nodeSelector (one model) or a required node affinity (two models), drawn among the
    models with nodes big enough for the pod, weighted by their GPUs."""
    need = max(1, milli // MILLI)
    fit = {m: sum(g * c for g, c in sizes.items() if g >= need) for m, sizes in capacity.items()}
    models = [m for m in MODELS if fit.get(m, 0)]
    weights = np.array([fit[m] for m in models], dtype=float)
    first = str(rng.choice(models, p=weights / weights.sum()))
    if rng.random() < 0.5 or len(models) == 1:
        return {"nodeSelector": {PRODUCT: first}}
    second = str(rng.choice([m for m in models if m != first]))
    term = {"matchExpressions": [{"key": PRODUCT, "operator": "In", "values": sorted([first, second])}]}
    return {
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}
    }


def cluster_document(nodes: int, demand: float, seed: int) -> GpuCluster:
    """``nodes`` GPU nodes and pending GPU pods asking for ``demand`` (a share) of their GPUs."""
    node_rng = np.random.default_rng([seed, nodes])  # the same nodes at every demand level
    node_docs = [_node(node_rng, i) for i in range(nodes)]
    rng = np.random.default_rng([seed, nodes, round(demand * 1000)])
    capacity: dict[str, dict[int, int]] = {}
    for n in node_docs:
        sizes = capacity.setdefault(n["labels"][PRODUCT], {})
        sizes[n["allocatable"][GPU]] = sizes.get(n["allocatable"][GPU], 0) + 1
    budget = math.floor(demand * sum(n["allocatable"][GPU_MILLI] for n in node_docs))
    asks: list[int] = []
    misses = 0
    while misses < 20:  # draw until the budget turns away 20 pods in a row
        milli = _draw_milli(rng)
        if milli <= budget - sum(asks):
            asks.append(milli)
            misses = 0
        else:
            misses += 1
    while (left := budget - sum(asks)) >= FRACTIONS[0]:  # fill up with fractions
        asks.append(min(FRACTIONS[-1], left - left % 50))
    order = rng.permutation(len(asks)).tolist()
    tied = set(rng.choice(len(asks), round(CONSTRAINED * len(asks)), replace=False).tolist())
    pods = []
    for k, i in enumerate(order):
        pod: dict[str, Any] = {
            "name": f"gpu-pod-{k:04d}",
            "schedulerName": "placer",
            "requests": _requests(rng, asks[i]),
        }
        if k in tied:
            pod |= _model_constraint(rng, asks[i], capacity)
        pods.append(pod)
    return GpuCluster(seed, demand, {"nodes": node_docs, "pods": pods})


@dataclass
class Row:
    seed: int
    target: float
    demand: float  # GPU demand / cluster GPUs, as generated
    nodes: int
    gpus: float
    pods: int
    constrained: int
    requested_gpus: float
    placer_pods: int
    default_pods: int
    placer_gpus: float
    default_gpus: float
    placer_seconds: float
    default_seconds: float
    batches: int
    limit: float
    status: str

    @property
    def ratio(self) -> float:
        return self.placer_gpus / self.default_gpus if self.default_gpus else math.inf

    @property
    def budget(self) -> float:
        """The wall time a run may take: every batch is one decision with the time limit."""
        return self.batches * self.limit


def _gpus_placed(timed: Timed, milli: dict[str, int]) -> float:
    return sum(milli[key] for key in timed.placed) / MILLI


def run_cluster(gc: GpuCluster, limit: float, batch_size: int = BATCH_SIZE) -> Row:
    cluster = gc.cluster()
    milli = {p.key: int(p.requests.get(GPU_MILLI, 0)) for p in cluster.pods}
    placer = timed_solve(cluster, "placer", time_limit=limit, batch_size=batch_size)
    default = timed_solve(cluster, "default", time_limit=limit, batch_size=batch_size)
    pods = gc.doc["pods"]
    return Row(
        seed=gc.seed,
        target=gc.target,
        demand=round(gc.demand_milli / gc.gpus_milli, 4),
        nodes=len(gc.doc["nodes"]),
        gpus=gc.gpus_milli / MILLI,
        pods=len(pods),
        constrained=sum(1 for p in pods if "nodeSelector" in p or "affinity" in p),
        requested_gpus=gc.demand_milli / MILLI,
        placer_pods=len(placer.placed),
        default_pods=len(default.placed),
        placer_gpus=_gpus_placed(placer, milli),
        default_gpus=_gpus_placed(default, milli),
        placer_seconds=round(placer.seconds, 3),
        default_seconds=round(default.seconds, 3),
        batches=math.ceil(len(pods) / batch_size),
        limit=limit,
        status=placer.outcome.result.status,
    )


def run(nodes: int, seeds: int, demands: list[float], limit: float) -> list[Row]:
    rows = []
    for demand in demands:
        for seed in range(seeds):
            row = run_cluster(cluster_document(nodes, demand, seed), limit)
            rows.append(row)
            print(
                f"[gpu] demand {row.demand:.3f} seed {seed}: {row.pods} pods; placer {row.placer_pods} pods "
                f"{row.placer_gpus:.1f} GPUs {row.placer_seconds:.1f}s; default {row.default_pods} pods "
                f"{row.default_gpus:.1f} GPUs",
                flush=True,
            )
    return rows


def _verdict(ok: bool) -> str:
    return "met" if ok else "missed"


def targets(rows: list[Row]) -> list[str]:
    behind = [r for r in rows if r.placer_pods < r.default_pods or r.placer_gpus < r.default_gpus]
    lines = [
        f"- pods and GPUs placed >= default's on every seed and demand: {len(behind)} of {len(rows)} runs behind"
        + (f" ({', '.join(f'seed {r.seed} at {r.target:.0%}' for r in behind)})" if behind else "")
        + f" — {_verdict(not behind)}"
    ]
    top = [r for r in rows if abs(r.target - TARGET_DEMAND) < 1e-9]
    if top:
        worst = min(top, key=lambda r: r.ratio)
        lines.append(
            f"- GPUs placed >= 5 % above default's at 98 % demand, every seed: worst {worst.ratio:.3f} x "
            f"(seed {worst.seed}: {worst.placer_gpus:.1f} vs {worst.default_gpus:.1f}) — "
            f"{_verdict(worst.ratio >= TARGET_GAIN)}"
        )
    else:
        lines.append("- GPUs placed >= 5 % above default's at 98 % demand: not measured (no 98 % run)")
    slow = max(rows, key=lambda r: r.placer_seconds / r.budget)
    lines.append(
        f"- wall time within 5 % of batches x --time-limit: worst {slow.placer_seconds / slow.budget:.3f} x "
        f"(seed {slow.seed} at {slow.target:.0%}: {slow.placer_seconds:.1f} s for {slow.batches} batches of "
        f"{slow.limit:g} s) — {_verdict(slow.placer_seconds <= LIMIT_SLACK * slow.budget)}"
    )
    return lines


def render_markdown(rows: list[Row], command: str, info: dict[str, str], load_start: str) -> str:
    lines = report_header("Synthetic GPU cluster benchmark", command, info, load_start=load_start)
    lines += [
        f"Cluster: {rows[0].nodes} nodes of {len(MODELS)} GPU models (`{PRODUCT}`), 4 or 8 GPUs each; "
        "pending pods asking for whole GPUs (1, 2, 4, 8) or fractions (`placer.io/gpu-milli`, an integer "
        "extended resource in thousandths of a GPU, counted per node, not per device), cpu and memory; a "
        "third tied to GPU models (nodeSelector or required node affinity); details and caveats in the "
        "docstring of `benchmarks/gpu.py`. Both policies run with "
        f"`--batch-size {BATCH_SIZE} --time-limit {rows[0].limit:g}` on the same cluster in the same run "
        "(placer = `solve_cluster`, default = the kube-scheduler simulation); wall time of the whole call.",
        "",
        "| demand | seed | pods | tied to models | GPUs requested | placer pods | default pods "
        "| placer GPUs | default GPUs | GPUs ratio | placer s | default s | batches |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in sorted(rows, key=lambda r: (r.target, r.seed)):
        lines.append(
            f"| {r.demand:.1%} | {r.seed} | {r.pods} | {r.constrained} | {r.requested_gpus:.1f} "
            f"| {r.placer_pods} | {r.default_pods} | {r.placer_gpus:.1f} | {r.default_gpus:.1f} | {r.ratio:.3f} "
            f"| {r.placer_seconds:.1f} | {r.default_seconds:.2f} | {r.batches} |"
        )
    lines += [
        "",
        "Per demand level (sums over seeds):",
        "",
        "| demand | runs | placer pods | default pods | placer GPUs | default GPUs | GPUs ratio | median placer s |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for target in sorted({r.target for r in rows}):
        group = [r for r in rows if r.target == target]
        pg, dg = sum(r.placer_gpus for r in group), sum(r.default_gpus for r in group)
        lines.append(
            f"| {target:.0%} | {len(group)} | {sum(r.placer_pods for r in group)} "
            f"| {sum(r.default_pods for r in group)} | {pg:.1f} | {dg:.1f} | {pg / dg if dg else math.inf:.3f} "
            f"| {statistics.median(r.placer_seconds for r in group):.1f} |"
        )
    lines += ["", "Targets (issue 17):", "", *targets(rows), "", "![gpu](gpu.png)", ""]
    return "\n".join(lines)


def plot(rows: list[Row], path: Path) -> None:
    fig = Figure(figsize=(11, 4))
    FigureCanvasAgg(fig)
    left, right = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    for seed in sorted({r.seed for r in rows}):
        mine = sorted((r for r in rows if r.seed == seed), key=lambda r: r.target)
        left.plot([100 * r.demand for r in mine], [r.ratio for r in mine], marker="o", label=f"seed {seed}")
    left.axhline(1.0, color="grey", linewidth=1)
    left.axhline(TARGET_GAIN, color="red", linestyle="--", linewidth=1, label="target at 98 %")
    left.set_xlabel("GPU demand, % of the cluster's GPUs")
    left.set_ylabel("GPUs placed, placer / default")
    left.set_title("GPUs placed against --policy default")
    left.legend(fontsize=7)
    levels = sorted({r.target for r in rows})
    x = np.arange(len(levels))
    for k, (label, key) in enumerate((("placer", "placer_gpus"), ("default", "default_gpus"))):
        stranded = [statistics.mean(r.requested_gpus - getattr(r, key) for r in rows if r.target == t) for t in levels]
        right.bar(x + 0.4 * k, stranded, width=0.4, label=label)
    right.set_xticks(x + 0.2, [f"{t:.0%}" for t in levels])
    right.set_xlabel("GPU demand")
    right.set_ylabel("GPUs requested but not placed (mean over seeds)")
    right.set_title(f"Left pending after batches of {BATCH_SIZE}")
    right.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu", description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--demands", default=",".join(f"{d:.2f}" for d in DEMANDS), help="shares of the GPUs")
    parser.add_argument("--time-limit", type=float, default=5.0, help="per batch (one decision each)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 24 nodes, 1 seed, 90 %% and 98 %%, 1 s")
    parser.add_argument("--out", type=Path, help="report directory (default docs/bench, build/bench-quick if --quick)")
    args = parser.parse_args(argv)
    if args.quick:
        args.nodes, args.seeds, args.demands, args.time_limit = 24, 1, "0.90,0.98", 1.0
    demands = [float(d) for d in args.demands.split(",")]
    if not all(0 < d <= 1 for d in demands):
        parser.error("--demands are shares of the cluster's GPUs, in (0, 1]")
    out: Path = args.out or (QUICK_OUT_DIR if args.quick else OUT_DIR)
    command = "python -m benchmarks.gpu" + (" " + " ".join(argv if argv is not None else sys.argv[1:])).rstrip()
    load_start = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    revision = source_revision()  # at the start: others may commit while it runs
    rows = run(args.nodes, args.seeds, demands, args.time_limit)
    info = {**machine_info(), "revision": revision}
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu.md").write_text(render_markdown(rows, command, info, load_start), encoding="utf-8")
    (out / "gpu.json").write_text(
        json.dumps({"machine": info, "command": command, "rows": [asdict(r) for r in rows]}, indent=1) + "\n",
        encoding="utf-8",
    )
    plot(rows, out / "gpu.png")
    print("\n".join(targets(rows)))
    print(f"[gpu] wrote {out / 'gpu.md'}, {out / 'gpu.png'}, {out / 'gpu.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
