"""Vector-packing instances with a known optimum, placer vs kube-scheduler's default policy.

Perfect packing: ``k`` identical nodes of capacity 1000 in each of ``d`` resources, every node's
capacity cut into items whose sizes add up to exactly 1000 in every resource, one pending pod per
item. The optimum uses all ``k`` nodes and places every pod; a pod placed anywhere else than in
its perfect packing leaves room that no other pod fills, so placing every pod means finding a
perfect packing. Classes (after the d-dimensional vector-packing literature):

- ``uniform``: each resource of each node cut at independent uniform points;
- ``correlated``: one cut for the node, each other resource the same sizes with small transfers
  between items (items are large or small in every resource together);
- ``anti-correlated``: the second half of the resources take the sizes in reverse order (an item
  large in one resource is small in another);
- ``small``: 8 items per node; ``large``: 2-3 items per node.

Per instance: ``placer solve`` (``solve_cluster``) with ``--time-limit`` and the default policy,
wall time of the whole call. Reported per class: share packed into the optimum (every pod placed),
median time to it, the worst wall time over the limit, pods placed by placer and by default.

  python -m benchmarks.packing [--quick] [--time-limit 10] [--seeds 4]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.machine import machine_info  # noqa: E402
from placer.inputs import parse_cluster  # noqa: E402
from placer.models import Cluster, Config  # noqa: E402
from placer.service import SolveOptions, solve_cluster  # noqa: E402

OUT_DIR = REPO / "docs" / "bench"
CAPACITY = 1000
RESOURCES = ("cpu", "memory", "ephemeral-storage", "placer.io/bandwidth", *(f"example.com/r{i}" for i in range(5, 11)))
UNITS = {"cpu": "m", "memory": "Mi", "ephemeral-storage": "Mi"}
CLASSES = ("uniform", "correlated", "anti-correlated", "small", "large")


def _cut(rng: np.random.Generator, parts: int) -> np.ndarray:  # type: ignore[type-arg]
    """``parts`` positive integers adding up to CAPACITY."""
    cuts = np.sort(rng.choice(np.arange(1, CAPACITY), parts - 1, replace=False))
    return np.diff(np.concatenate([[0], cuts, [CAPACITY]]))


def _node_items(rng: np.random.Generator, kind: str, d: int) -> list[tuple[int, ...]]:
    parts = {"small": 8, "large": int(rng.integers(2, 4))}.get(kind, int(rng.integers(3, 6)))
    base = _cut(rng, parts)
    columns = []
    for j in range(d):
        if kind == "correlated":
            col = base.copy()
            for _ in range(parts):  # move a little between two items, keeping the sum
                a, b = rng.choice(parts, 2, replace=False)
                delta = int(rng.integers(0, max(1, min(col[a], 60))))
                if col[a] - delta >= 1:
                    col[a] -= delta
                    col[b] += delta
        elif kind == "anti-correlated":
            col = base.copy() if j < (d + 1) // 2 else base[::-1].copy()
        else:
            col = _cut(rng, parts) if j else base
            col = rng.permutation(col)
        columns.append(col)
    return [tuple(int(c[i]) for c in columns) for i in range(parts)]


def instance(kind: str, pods: int, d: int, seed: int) -> tuple[dict[str, Any], int]:
    """(native-schema cluster, optimal node count): nodes cut until about ``pods`` items exist."""
    rng = np.random.default_rng([seed, d, pods, CLASSES.index(kind)])
    items: list[tuple[int, ...]] = []
    nodes = 0
    while len(items) < pods:
        items += _node_items(rng, kind, d)
        nodes += 1
    order = rng.permutation(len(items))
    resources = RESOURCES[:d]

    def q(r: str, v: int) -> str:
        return f"{v}{UNITS.get(r, '')}"

    doc = {
        "nodes": [
            {"name": f"n{i:03d}", "allocatable": {**{r: q(r, CAPACITY) for r in resources}, "pods": 110}}
            for i in range(nodes)
        ],
        "pods": [
            {"name": f"item-{k:03d}", "requests": {r: q(r, v) for r, v in zip(resources, items[i], strict=True)}}
            for k, i in enumerate(order.tolist())
        ],
    }
    return doc, nodes


def check_perfect(doc: dict[str, Any], nodes: int) -> bool:
    """The generator's invariant: per resource, the pods' requests add up to the nodes' capacity."""
    resources = list(doc["nodes"][0]["allocatable"])
    for r in resources:
        if r == "pods":
            continue
        total = sum(int(str(p["requests"][r]).rstrip("mMi")) for p in doc["pods"])
        if total != nodes * CAPACITY:
            return False
    return True


@dataclass
class Row:
    kind: str
    size: int  # the pods asked for (an instance cuts whole nodes, so ``pods`` may be a few more)
    pods: int
    d: int
    seed: int
    nodes: int
    placer_placed: int
    default_placed: int
    packed: bool
    seconds: float
    limit: float


def _run(cluster: Cluster, policy: str, limit: float) -> tuple[int, float]:
    config = Config.model_validate({"schedulerName": "*", "solver": {"timeLimit": limit}})
    started = time.perf_counter()
    out = solve_cluster(cluster, SolveOptions(policy=policy, config=config))  # type: ignore[arg-type]
    return out.result.metrics.placed, time.perf_counter() - started


def run(sizes: list[int], seeds: int, limit: float, dims: list[int]) -> list[Row]:
    rows = []
    for pods in sizes:
        for kind in CLASSES:
            for seed in range(seeds):
                d = dims[seed % len(dims)]
                doc, nodes = instance(kind, pods, d, seed)
                cluster = parse_cluster("packing.json", json.dumps(doc))
                placed, seconds = _run(cluster, "placer", limit)
                default, _ = _run(cluster, "default", limit)
                n_pods = len(doc["pods"])
                row = Row(kind, pods, n_pods, d, seed, nodes, placed, default, placed == n_pods, seconds, limit)
                rows.append(row)
                print(
                    f"[packing] {kind} {row.pods} pods d={d} seed={seed}: placer {placed} default {default} "
                    f"{'packed' if row.packed else '-'} {seconds:.2f}s",
                    flush=True,
                )
    return rows


def report(rows: list[Row], args: argparse.Namespace, out: Path) -> None:
    info = machine_info()
    lines = [
        "# Perfect-packing benchmark",
        "",
        f"Command: `python -m benchmarks.packing {' '.join(sys.argv[1:])}` "
        f"({info['date']}, placer at {info['revision']}).",
        "",
        f"Machine: {info['nproc']} cores, {info['cpu']}, {info['memory']}; Python {info['python']}, "
        f"OR-Tools {info['ortools']}. Load average at the end: {info['load']}.",
        "",
        "Instances: identical nodes of 1000 units per resource cut into items that add up exactly "
        "(the optimum uses every node and places every pod); one pending pod per item; resources "
        f"d in {sorted(set(r.d for r in rows))}; classes as in the module docstring. `placer solve` "
        f"with `--time-limit {args.time_limit}` (wall time of the whole call measured), default "
        "= the kube-scheduler simulation (`--policy default`).",
        "",
        "| class | pods (max) | instances | packed into the optimum | median s | worst s / limit "
        "| placer placed | default placed |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    by: dict[tuple[str, int], list[Row]] = {}
    for r in rows:
        by.setdefault((r.kind, r.size), []).append(r)
    for (kind, _), group in sorted(by.items(), key=lambda kv: (kv[0][1], CLASSES.index(kv[0][0]))):
        size = max(r.pods for r in group)
        packed = sum(r.packed for r in group)
        lines.append(
            f"| {kind} | {size} | {len(group)} | {packed}/{len(group)} ({100 * packed / len(group):.0f}%) "
            f"| {statistics.median(r.seconds for r in group):.2f} | {max(r.seconds / r.limit for r in group):.3f} "
            f"| {sum(r.placer_placed for r in group)} | {sum(r.default_placed for r in group)} |"
        )
    small = [r for r in rows if r.size <= 60]
    large = [r for r in rows if r.size > 60]
    worst = max(r.seconds / r.limit for r in rows)
    lines += ["", "Targets (issue 17):", ""]
    if small:
        share = sum(r.packed for r in small) / len(small)
        lines.append(
            f"- up to 60 pods, 100 % packed within 10 s: {100 * share:.0f} % — {'met' if share == 1 else 'missed'}"
        )
    if large:
        share = sum(r.packed for r in large) / len(large)
        lines.append(f"- up to 200 pods, >= 95 % packed: {100 * share:.0f} % — {'met' if share >= 0.95 else 'missed'}")
    lines.append(f"- wall time within 5 % of the limit: worst {worst:.3f} x — {'met' if worst <= 1.05 else 'missed'}")
    never_fewer = all(r.placer_placed >= r.default_placed for r in rows)
    lines.append(f"- never fewer pods than the default policy: {'met' if never_fewer else 'missed'}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "packing.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (out / "packing.json").write_text(json.dumps([asdict(r) for r in rows], indent=1) + "\n", encoding="utf-8")
    _plot(rows, out / "packing.png")


def _plot(rows: list[Row], path: Path) -> None:
    fig = Figure(figsize=(8, 4))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    kinds = list(CLASSES)
    for k, (label, key) in enumerate((("placer", "placer_placed"), ("default", "default_placed"))):
        shares = []
        for kind in kinds:
            group = [r for r in rows if r.kind == kind]
            shares.append(sum(getattr(r, key) for r in group) / max(sum(r.pods for r in group), 1))
        ax.bar(np.arange(len(kinds)) + 0.4 * k, shares, width=0.4, label=label)
    ax.set_xticks(np.arange(len(kinds)) + 0.2, kinds)
    ax.set_ylabel("share of pods placed")
    ax.set_ylim(0.8, 1.0)
    ax.set_title("Perfect packing: every pod placed only by packing the nodes perfectly")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=10.0)
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--sizes", default="60,200", help="approximate pods per instance")
    parser.add_argument("--dims", default="2,3,5,10", help="resources per instance, cycled over seeds")
    parser.add_argument("--quick", action="store_true", help="smoke run: 30 pods, 1 seed, 2 s limit")
    parser.add_argument("--out", type=Path, default=OUT_DIR)
    args = parser.parse_args(argv)
    if args.quick:
        args.time_limit, args.seeds, args.sizes = 2.0, 1, "30"
    rows = run(
        [int(s) for s in args.sizes.split(",")], args.seeds, args.time_limit, [int(d) for d in args.dims.split(",")]
    )
    report(rows, args, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
