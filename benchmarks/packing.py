"""Vector-packing instances with a known optimum, placer vs kube-scheduler's default policy.

Perfect packing: ``k`` identical nodes of capacity 1000 in each of ``d`` resources (2-10 of cpu,
memory, ephemeral-storage, ``placer.io/bandwidth`` and the extended resources
``example.com/r5``..``r10``), every node's capacity cut into items whose sizes add up to exactly
1000 in every resource, one bare pending pod (``schedulerName: placer``) per item, exactly ``k``
nodes. The optimum uses all ``k`` nodes and places every pod, and since the items fill the nodes
exactly, placing every pod means finding a perfect packing. An instance has exactly the pods asked
for: the last node is cut into the items still missing. Classes (after the 2-D/d-D
vector-packing literature, Spieksma 1994, Caprara & Toth 2001):

- ``uniform``: each resource of a node cut at independent uniform points (3-5 items per node);
- ``correlated``: one cut per node, every resource the same sizes with small transfers between
  items (an item is large or small in every resource together);
- ``anti-correlated``: the first half of the resources cut into items in increasing size, the
  second half in decreasing size (an item large in one half is small in the other);
- ``small``: uniform cuts into 7-10 items per node; ``large``: into 2-3 items per node.

``d`` is cycled over seeds and classes, so each class sees every ``--dims`` value.

Per instance: ``solve_cluster`` (what ``placer solve`` runs) with ``--time-limit`` and default
workers, with ``--policy default`` (the kube-scheduler simulation), and (unless
``--no-reference``) the plain CP-SAT model with symmetry breaking that issue 17 compares placer
with (``reference_pack``); wall time of the whole call. Reported per class and size: share
packed into the optimum (every pod placed), median wall time and median time to the optimum, the
worst wall time over the limit, pods placed by placer and by default, the reference's packed
count and median time.

  python -m benchmarks.packing [--quick] [--time-limit 10] [--seeds 4] [--sizes 60,100,150,200] [--no-reference]

``--quick`` (30 pods, 1 seed, 2 s) is a smoke run; it writes to ``build/bench-quick/`` unless
``--out`` says otherwise, so it never replaces the full report in ``docs/bench/``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from ortools.sat.python import cp_model

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.machine import machine_info, report_header, source_revision, write_report  # noqa: E402
from benchmarks.solving import timed_solve  # noqa: E402
from placer.inputs import parse_cluster  # noqa: E402
from placer.models import Cluster  # noqa: E402

OUT_DIR = REPO / "docs" / "bench"
QUICK_OUT_DIR = REPO / "build" / "bench-quick"
CAPACITY = 1000
RESOURCES = ("cpu", "memory", "ephemeral-storage", "placer.io/bandwidth", *(f"example.com/r{i}" for i in range(5, 11)))
UNITS = {"cpu": "m", "memory": "Mi", "ephemeral-storage": "Mi"}
CLASSES = ("uniform", "correlated", "anti-correlated", "small", "large")
PARTS = {"small": (7, 10), "large": (2, 3)}  # items per node, inclusive; other classes 3-5
DEFAULT_PARTS = (3, 5)
TARGET_SMALL, TARGET_LARGE = 60, 200  # the sizes: 100 % packed up to 60 pods, >= 95 % up to 200
SIZES = (TARGET_SMALL, 100, 150, TARGET_LARGE)  # the default run: both tiers' largest and two sizes between
TARGET_LIMIT = 10.0  # the issue's --time-limit for both
LIMIT_SLACK = 1.05  # the issue: exceeding the time limit by more than 5 % is a bug

IntArray = npt.NDArray[np.int64]


def _cut(rng: np.random.Generator, parts: int) -> IntArray:
    """``parts`` positive integers adding up to CAPACITY, in random order."""
    cuts = np.sort(rng.choice(np.arange(1, CAPACITY), parts - 1, replace=False))
    return np.diff(np.concatenate([[0], cuts, [CAPACITY]])).astype(np.int64)


def _node_items(rng: np.random.Generator, kind: str, d: int, parts: int) -> IntArray:
    """A (parts, d) matrix of item sizes whose every column adds up to CAPACITY."""
    if parts == 1:
        return np.full((1, d), CAPACITY, dtype=np.int64)
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
            col = np.sort(base if j == 0 else _cut(rng, parts))
            if j >= (d + 1) // 2:
                col = col[::-1].copy()
        else:  # uniform, small, large: independent cuts
            col = base if j == 0 else _cut(rng, parts)
        columns.append(col)
    return np.stack(columns, axis=1)


@dataclass(frozen=True)
class Instance:
    kind: str
    d: int
    seed: int
    doc: dict[str, Any]  # placer's native schema (what ``placer solve`` reads)
    home: dict[str, str]  # the known perfect packing: pod name -> node name

    @property
    def nodes(self) -> int:
        return len(self.doc["nodes"])

    @property
    def pods(self) -> int:
        return len(self.doc["pods"])

    def cluster(self) -> Cluster:
        return parse_cluster("packing.json", json.dumps(self.doc))


def instance(kind: str, pods: int, d: int, seed: int) -> Instance:
    """``pods`` items cut from as many identical nodes as it takes (the optimal node count)."""
    rng = np.random.default_rng([seed, d, pods, CLASSES.index(kind)])
    lo, hi = PARTS.get(kind, DEFAULT_PARTS)
    items: list[tuple[int, ...]] = []
    owner: list[int] = []
    while len(items) < pods:
        missing = pods - len(items)
        parts = min(int(rng.integers(lo, hi + 1)), missing)
        if missing - parts == 1:  # never leave a single whole-node item for the last node
            parts += 1
        items += [tuple(int(v) for v in row) for row in _node_items(rng, kind, d, parts)]
        owner += [owner[-1] + 1 if owner else 0] * parts
    nodes = owner[-1] + 1
    order = rng.permutation(len(items)).tolist()  # pods arrive in random order
    resources = RESOURCES[:d]

    def q(r: str, v: int) -> str:
        return f"{v}{UNITS.get(r, '')}"

    doc = {
        "nodes": [
            {"name": f"n{i:03d}", "allocatable": {**{r: q(r, CAPACITY) for r in resources}, "pods": 110}}
            for i in range(nodes)
        ],
        "pods": [
            {
                "name": f"item-{k:03d}",
                "schedulerName": "placer",
                "requests": {r: q(r, v) for r, v in zip(resources, items[i], strict=True)},
            }
            for k, i in enumerate(order)
        ],
    }
    home = {f"item-{k:03d}": f"n{owner[i]:03d}" for k, i in enumerate(order)}
    return Instance(kind, d, seed, doc, home)


def perfect_packing_errors(cluster: Cluster, home: dict[str, str]) -> list[str]:
    """What breaks the generator's invariant, read back through placer's input reader: every pod
    has a home node, all nodes are identical, and per node and resource the requests of the pods
    at home there add up to the node's allocatable exactly (empty list: a perfect packing)."""
    errors = []
    nodes = {n.name: n for n in cluster.nodes}
    capacity = {r: v for r, v in cluster.nodes[0].allocatable.items() if r != "pods"}
    load: dict[str, dict[str, int]] = {name: dict.fromkeys(capacity, 0) for name in nodes}
    for node in cluster.nodes:
        if {r: v for r, v in node.allocatable.items() if r != "pods"} != capacity:
            errors.append(f"node {node.name} differs from {cluster.nodes[0].name}")
    for pod in cluster.pods:
        if pod.name not in home or home[pod.name] not in nodes:
            errors.append(f"pod {pod.name} has no home node")
            continue
        if set(pod.requests) != set(capacity):
            errors.append(f"pod {pod.name} requests {sorted(pod.requests)}, nodes have {sorted(capacity)}")
        for r, v in pod.requests.items():
            if v <= 0:
                errors.append(f"pod {pod.name} requests {v} {r}")
            load[home[pod.name]][r] = load[home[pod.name]].get(r, 0) + v
    for name, used in load.items():
        for r, total in capacity.items():
            if used.get(r, 0) != total:
                errors.append(f"node {name} {r}: items add up to {used.get(r, 0)}, capacity {total}")
    return errors


def reference_pack(cluster: Cluster, limit: float) -> tuple[bool, float]:
    """The issue's yardstick: a plain CP-SAT feasibility model (x[pod, node], every pod on exactly
    one node, capacity per node and resource) with the textbook symmetry breaking among identical
    nodes (pods by decreasing size, pod i only on nodes 0..i), same limit, one worker per core (at
    most 8, as placer). Returns (packed, wall seconds, model building included)."""
    started = time.perf_counter()
    resources = [r for r in cluster.nodes[0].allocatable if r != "pods"]
    capacity = [cluster.nodes[0].allocatable[r] for r in resources]
    sizes = [[p.requests.get(r, 0) for r in resources] for p in cluster.pods]
    order = sorted(range(len(sizes)), key=lambda i: -sum(v / c for v, c in zip(sizes[i], capacity, strict=True)))
    nodes = len(cluster.nodes)
    model = cp_model.CpModel()
    x = {(i, n): model.new_bool_var(f"x{i}_{n}") for rank, i in enumerate(order) for n in range(min(rank + 1, nodes))}
    for i in order:
        model.add_exactly_one(v for (j, _), v in x.items() if j == i)
    for n in range(nodes):
        on = [(i, v) for (i, m), v in x.items() if m == n]
        for r, cap in enumerate(capacity):
            model.add(sum(sizes[i][r] * v for i, v in on) <= cap)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(limit - (time.perf_counter() - started), 0.01)
    solver.parameters.num_workers = min(len(os.sched_getaffinity(0)), 8)
    status = solver.solve(model)
    return status in (cp_model.OPTIMAL, cp_model.FEASIBLE), time.perf_counter() - started


@dataclass
class Row:
    kind: str
    pods: int
    d: int
    seed: int
    nodes: int
    placer_placed: int
    default_placed: int
    packed: bool  # placer placed every pod: a perfect packing into the optimal node count
    default_packed: bool
    seconds: float  # placer's wall time, whole call
    default_seconds: float
    limit: float
    status: str
    reference_packed: bool | None = None  # the plain CP-SAT model (None: not run)
    reference_seconds: float | None = None


def run_instance(inst: Instance, limit: float, *, reference: bool = False) -> Row:
    cluster = inst.cluster()
    placer = timed_solve(cluster, "placer", time_limit=limit)
    default = timed_solve(cluster, "default", time_limit=limit)
    p, q = len(placer.placed), len(default.placed)
    ref_packed, ref_seconds = reference_pack(cluster, limit) if reference else (None, None)
    return Row(
        inst.kind,
        inst.pods,
        inst.d,
        inst.seed,
        inst.nodes,
        p,
        q,
        p == inst.pods,
        q == inst.pods,
        round(placer.seconds, 4),
        round(default.seconds, 4),
        limit,
        placer.outcome.result.status,
        ref_packed,
        None if ref_seconds is None else round(ref_seconds, 4),
    )


def run(sizes: list[int], seeds: int, limit: float, dims: list[int], *, reference: bool = True) -> list[Row]:
    rows = []
    for pods in sizes:
        for c, kind in enumerate(CLASSES):
            for seed in range(seeds):
                d = dims[(seed + c) % len(dims)]
                row = run_instance(instance(kind, pods, d, seed), limit, reference=reference)
                rows.append(row)
                print(
                    f"[packing] {kind} {row.pods} pods d={d} seed={seed}: placer {row.placer_placed} "
                    f"default {row.default_placed} {'packed' if row.packed else '-'} {row.seconds:.2f}s"
                    + (
                        ""
                        if row.reference_packed is None
                        else f"; reference {'packed' if row.reference_packed else '-'}"
                    ),
                    flush=True,
                )
    return rows


def _verdict(ok: bool) -> str:
    return "met" if ok else "missed"


def targets(rows: list[Row]) -> list[str]:
    """One line per target of the issue, judged on the rows of this run."""
    lines = []
    limit = max(r.limit for r in rows)
    note = "" if limit == TARGET_LIMIT else f" (this run: --time-limit {limit:g}, not the issue's {TARGET_LIMIT:g})"
    small = [r for r in rows if r.pods <= TARGET_SMALL]
    large = [r for r in rows if TARGET_SMALL < r.pods <= TARGET_LARGE]
    if small:
        share = sum(r.packed for r in small) / len(small)
        ok = share == 1 and all(r.seconds <= TARGET_LIMIT for r in small)
        lines.append(
            f"- up to {TARGET_SMALL} pods, 100 % packed into the optimum within {TARGET_LIMIT:g} s wall: "
            f"{sum(r.packed for r in small)}/{len(small)} ({100 * share:.0f} %){note} — {_verdict(ok)}"
        )
    if large:
        share = sum(r.packed for r in large) / len(large)
        by_size = ", ".join(
            f"{pods} pods {sum(r.packed for r in large if r.pods == pods)}/{sum(1 for r in large if r.pods == pods)}"
            for pods in sorted({r.pods for r in large})
        )
        lines.append(
            f"- up to {TARGET_LARGE} pods (more than {TARGET_SMALL}), >= 95 % packed: "
            f"{sum(r.packed for r in large)}/{len(large)} ({100 * share:.0f} %; {by_size}){note} — "
            f"{_verdict(share >= 0.95)}"
        )
        largest = [r for r in large if r.pods == TARGET_LARGE]
        if largest and len(largest) < len(large):
            at = sum(r.packed for r in largest) / len(largest)
            lines.append(
                f"- the same at {TARGET_LARGE} pods alone: {sum(r.packed for r in largest)}/{len(largest)} "
                f"({100 * at:.0f} %){note} — {_verdict(at >= 0.95)}"
            )
    worst = max(rows, key=lambda r: r.seconds / r.limit)
    lines.append(
        f"- wall time within 5 % of --time-limit in every row: worst {worst.seconds / worst.limit:.3f} x "
        f"({worst.kind}, {worst.pods} pods, d={worst.d}, seed {worst.seed}: {worst.seconds:.2f} s at "
        f"{worst.limit:g} s) — {_verdict(worst.seconds <= LIMIT_SLACK * worst.limit)}"
    )
    fewer = [r for r in rows if r.placer_placed < r.default_placed]
    lines.append(
        f"- never fewer pods than --policy default: {len(fewer)} of {len(rows)} instances fewer — {_verdict(not fewer)}"
    )
    return lines


def _reference(group: list[Row]) -> str:
    """Packed count and median wall time of the plain CP-SAT model, or dashes when not run."""
    ran = [r for r in group if r.reference_packed is not None and r.reference_seconds is not None]
    if not ran:
        return "— | —"
    packed = sum(bool(r.reference_packed) for r in ran)
    return f"{packed}/{len(ran)} | {statistics.median(r.reference_seconds or 0.0 for r in ran):.2f}"


def render_markdown(rows: list[Row], command: str, info: dict[str, str], load_start: str) -> str:
    dims = sorted({r.d for r in rows})
    lines = report_header("Perfect-packing benchmark", command, info, load_start=load_start)
    lines += [
        "Instances: identical nodes of 1000 units per resource cut into items that add up exactly in "
        "every resource (the optimum uses every node and places every pod); one bare pending pod per "
        f"item; d in {dims} resources, cycled over seeds and classes; classes in the docstring of "
        "`benchmarks/packing.py`. placer = `solve_cluster` (as `placer solve`) with "
        f"`--time-limit {rows[0].limit:g}` and default workers, wall time of the whole call; default = "
        "the kube-scheduler simulation (`--policy default`), same instance, same run; reference = "
        "the plain CP-SAT model with symmetry breaking among the identical nodes that issue 17 "
        "measures placer against (`reference_pack`), same limit, same run.",
        "",
        "| class | pods | instances | packed into the optimum | median s | median s to the optimum "
        "| worst s / limit | placer placed | default placed | default packed | reference packed "
        "| reference median s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    by: dict[tuple[int, str], list[Row]] = {}
    for r in rows:
        by.setdefault((r.pods, r.kind), []).append(r)
    for (pods, kind), group in sorted(by.items(), key=lambda kv: (kv[0][0], CLASSES.index(kv[0][1]))):
        packed = [r for r in group if r.packed]
        to_optimum = f"{statistics.median(r.seconds for r in packed):.2f}" if packed else "—"
        lines.append(
            f"| {kind} | {pods} | {len(group)} | {len(packed)}/{len(group)} ({100 * len(packed) / len(group):.0f} %) "
            f"| {statistics.median(r.seconds for r in group):.2f} | {to_optimum} "
            f"| {max(r.seconds / r.limit for r in group):.3f} | {sum(r.placer_placed for r in group)} "
            f"| {sum(r.default_placed for r in group)} | {sum(r.default_packed for r in group)}/{len(group)} "
            f"| {_reference(group)} |"
        )
    lines += ["", "By resources (all classes):", "", "| d | instances | packed | median s |", "|---:|---:|---:|---:|"]
    for d in dims:
        group = [r for r in rows if r.d == d]
        lines.append(
            f"| {d} | {len(group)} | {sum(r.packed for r in group)}/{len(group)} "
            f"| {statistics.median(r.seconds for r in group):.2f} |"
        )
    lines += ["", "Targets (issue 17):", "", *targets(rows), "", "![packing](packing.png)", ""]
    return "\n".join(lines)


def plot(rows: list[Row], path: Path) -> None:
    fig = Figure(figsize=(11, 4))
    FigureCanvasAgg(fig)
    left, right = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    groups = sorted({(r.pods, r.kind) for r in rows}, key=lambda g: (g[0], CLASSES.index(g[1])))
    x = np.arange(len(groups))
    series = [("placer", "packed"), ("reference CP-SAT", "reference_packed"), ("default", "default_packed")]
    if all(r.reference_packed is None for r in rows):
        series.pop(1)
    width = 0.8 / len(series)
    for k, (label, packed) in enumerate(series):
        shares = [
            sum(bool(getattr(r, packed)) for r in rows if (r.pods, r.kind) == g)
            / sum(1 for r in rows if (r.pods, r.kind) == g)
            for g in groups
        ]
        left.bar(x + width * k, shares, width=width, label=label)
    left.set_xticks(x + 0.4 - width / 2, [f"{kind}\n{pods}" for pods, kind in groups], fontsize=7)
    left.set_ylabel("share of instances packed into the optimum")
    left.set_ylim(0, 1.25)
    left.legend(fontsize=7, loc="upper center", ncol=len(series))
    left.set_title("Packed into the optimal node count")
    for kind in CLASSES:
        mine = [r for r in rows if r.kind == kind]
        right.scatter(
            [r.pods for r in mine], [r.seconds / r.limit for r in mine], label=kind, marker="o", alpha=0.7, s=18
        )
    right.axhline(LIMIT_SLACK, color="red", linestyle="--", linewidth=1, label="limit + 5 %")
    right.set_xlabel("pods")
    right.set_ylabel("placer wall time / --time-limit")
    right.set_title("Time (whole call)")
    right.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.packing", description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=TARGET_LIMIT)
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="pods per instance")
    parser.add_argument("--dims", default="2,3,5,10", help="resources per instance (2-10), cycled")
    parser.add_argument("--no-reference", action="store_true", help="skip the plain CP-SAT reference model")
    parser.add_argument("--quick", action="store_true", help="smoke run: 30 pods, 1 seed, 2 s limit")
    parser.add_argument("--out", type=Path, help="report directory (default docs/bench, build/bench-quick if --quick)")
    args = parser.parse_args(argv)
    if args.quick:
        args.time_limit, args.seeds, args.sizes = 2.0, 1, "30"
    dims = [int(d) for d in args.dims.split(",")]
    if not all(2 <= d <= len(RESOURCES) for d in dims):
        parser.error(f"--dims must be within 2..{len(RESOURCES)}")
    out: Path = args.out or (QUICK_OUT_DIR if args.quick else OUT_DIR)
    command = "python -m benchmarks.packing" + (" " + " ".join(argv if argv is not None else sys.argv[1:])).rstrip()
    load_start = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    revision = source_revision()  # at the start: others may commit while it runs
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = run(sizes, args.seeds, args.time_limit, dims, reference=not args.no_reference)
    info = {**machine_info(), "revision": revision}
    payload = {"machine": info, "command": command, "rows": [asdict(r) for r in rows]}
    written = write_report(
        out, "packing", render_markdown(rows, command, info, load_start), payload, lambda path: plot(rows, path)
    )
    print("\n".join(targets(rows)))
    print(f"[packing] {written}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
