"""Topology gangs on racks with different free room: where can deciding the groups jointly place
10 % more groups than kube-scheduler 1.37's one group at a time? Offline, no cluster.

Cluster: ``--nodes`` nodes of 16 cpu / 64Gi in racks of 16 (e2e_gangs.py's: node label
``bench.placer.io/rack``), gang pods of 8 cpu / 8Gi (two per node). Racks are partly used by
running pods (already bound, no group), drawn with ``--seed``; a gang fits a rack when its size
fits the rack's free slots (per node the 8-cpu / 8Gi pods its free cpu and memory hold). Shapes:

- ``empty``: no running pod (the e2e case of e2e_gangs.py): 32 free slots per rack;
- ``used``: per rack a used share drawn uniformly in [0, 1]; that share of its 32 slots taken by
  running pods of 8 cpu / 8Gi on slots drawn at random: free slots differ from rack to rack;
- ``mixed``: the same share of each rack's cpu taken by running pods of 2, 4, 6 or 8 cpu (as
  much memory in Gi) on nodes drawn at random (200 tries per rack): free slots and the cpu left
  in fragments differ, so NodeResourcesFit's placement score no longer counts free slots;
- ``issue``: issue 30's own example scaled to the cluster: every rack has 6 or 10 free slots
  (running 8-cpu pods hold the rest) and gangs are of 4, 6 or 6 pods (drawn uniformly from the
  three), not 4-32.

Gangs (v1beta1 PodGroups, gang minCount = size, the rack as topology key) of 4-32 pods drawn
uniformly (``issue``: above) up to each ``--demands`` share of the FREE slots, in creation order.
Per shape, demand and seed: the most groups any scheduler could place (``e2e_gangs.most_groups``,
CP-SAT over the free slots: best found and proven bound), the kube-scheduler 1.37 simulation
(``placer solve --policy default``: one group at a time, a candidate placement per rack, the
placement score of NodeResourcesFit plus PodGroupPodsCount), placer at the shipped batch size
(``--batch-size 99 --time-limit 0.1``: a batch holds a few groups; pods left unplaced join the
next batch) and placer with one batch for all (``--time-limit 5``). Every answer goes through the
validator; groups placed in part or split across racks are counted (must be 0).

  python -m benchmarks.gang_shapes [--nodes 1000] [--seeds 3] [--shapes empty,used,mixed,issue]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks import e2e_gangs as eg  # noqa: E402
from benchmarks.e2e_shapes import RACK_NODES, Json, node_labels, rack_of  # noqa: E402
from benchmarks.machine import machine_info, report_header, source_revision, write_report  # noqa: E402
from benchmarks.solving import Timed, timed_solve  # noqa: E402
from placer.inputs import parse_cluster  # noqa: E402
from placer.validate import validate_placements  # noqa: E402

SHAPES = ("empty", "used", "mixed", "issue")
NODE_CPU, NODE_MEMORY = 16, 64  # cpu, Gi
SLOT = 8  # a gang pod: 8 cpu / 8Gi
MIX = (2, 4, 6, 8)  # running pods of the mixed shape: cpu, and as many Gi
ISSUE_FREE, ISSUE_SIZES = (6, 10), (4, 6, 6)
DEMANDS = (0.85, 0.9, 0.95, 1.0)
Running = tuple[int, int, int]  # node index, cpu, memory (Gi)


def racks(nodes: int) -> list[range]:
    """Node indices of each rack: RACK_NODES consecutive nodes (the last one may be short)."""
    return [range(start, min(start + RACK_NODES, nodes)) for start in range(0, nodes, RACK_NODES)]


def running_pods(shape: str, nodes: int, rng: np.random.Generator) -> list[Running]:
    """The running pods of ``shape`` (module docstring)."""
    out: list[Running] = []
    for members in racks(nodes):
        slots = [n for n in members for _ in range(NODE_CPU // SLOT)]
        if shape == "used":
            taken = rng.choice(len(slots), size=round(rng.uniform() * len(slots)), replace=False)
            out += [(slots[int(s)], SLOT, SLOT) for s in taken]
        elif shape == "issue":
            free = int(rng.choice(ISSUE_FREE))
            taken = rng.choice(len(slots), size=max(len(slots) - free, 0), replace=False)
            out += [(slots[int(s)], SLOT, SLOT) for s in taken]
        elif shape == "mixed":
            target, used = rng.uniform() * NODE_CPU * len(members), 0
            cpu = dict.fromkeys(members, 0)
            for _ in range(200):
                if used >= target:
                    break
                size, node = int(rng.choice(MIX)), int(rng.choice(list(members)))
                if cpu[node] + size <= NODE_CPU:
                    cpu[node] += size
                    used += size
                    out.append((node, size, size))
        elif shape != "empty":
            raise ValueError(f"unknown shape {shape!r}")
    return out


def free_slots(nodes: int, running: Sequence[Running]) -> list[int]:
    """Per rack, the gang pods (8 cpu / 8Gi) its nodes still hold beside ``running``."""
    cpu, memory = np.zeros(nodes, dtype=np.int64), np.zeros(nodes, dtype=np.int64)
    for node, c, m in running:
        cpu[node] += c
        memory[node] += m
    per_node = np.minimum((NODE_CPU - cpu) // SLOT, (NODE_MEMORY - memory) // SLOT)
    return [int(per_node[list(members)].sum()) for members in racks(nodes)]


def gang_sizes(shape: str, budget: int, rng: np.random.Generator) -> list[int]:
    if shape != "issue":
        return eg.draw_sizes(rng, budget)
    sizes: list[int] = []
    while True:
        size = int(rng.choice(ISSUE_SIZES))
        if size > budget:
            return sizes
        sizes.append(size)
        budget -= size


def cluster_list(nodes: int, running: Sequence[Running], sizes: Sequence[int]) -> Json:
    """A kubectl List for ``placer solve``: the nodes, the running pods bound to them and the gangs
    pending for placer, members created one second apart in gang order."""
    items: list[Json] = [
        {"kind": "Node", "metadata": {"name": f"bench-{i}", "labels": node_labels(i)},
         "status": {"allocatable": {"cpu": str(NODE_CPU), "memory": f"{NODE_MEMORY}Gi", "pods": "110"}}}
        for i in range(nodes)
    ]  # fmt: skip
    for k, (node, cpu, memory) in enumerate(running):
        items.append(
            {"kind": "Pod", "metadata": {"name": f"run-{k:05d}", "namespace": "bench"},
             "spec": {"nodeName": f"bench-{node}", "containers": [
                 {"name": "main", "resources": {"requests": {"cpu": str(cpu), "memory": f"{memory}Gi"}}}]},
             "status": {"phase": "Running"}}
        )  # fmt: skip
    second = 0
    for g, size in enumerate(sizes):
        gang = eg.Gang(f"tg-{g:03d}", size)
        group = eg.pod_group(gang)
        group["metadata"]["namespace"] = "bench"
        items.append(group)
        for pod in eg.members(gang):
            pod["metadata"]["namespace"] = "bench"
            pod["metadata"]["creationTimestamp"] = (
                f"2026-01-01T{second // 3600:02d}:{second // 60 % 60:02d}:{second % 60:02d}Z"
            )
            pod["spec"]["schedulerName"] = "placer"
            pod["status"] = {"phase": "Pending"}
            items.append(pod)
            second += 1
    return {"kind": "List", "apiVersion": "v1", "items": items}


@dataclass
class Row:
    shape: str
    demand: float
    seed: int
    free: int  # free slots of the cluster
    groups: int
    pods: int
    best: int  # most groups placeable (best found)
    bound: int  # ... proven upper bound
    simulation: int
    batched: int  # placer, batch size 99
    one_batch: int  # placer, one batch
    broken: int  # groups placed in part or split across racks, any run (must be 0)
    batched_pods: int
    one_batch_pods: int
    simulation_pods: int


def _count(gangs: list[eg.Gang], timed: Timed, nodes: int) -> tuple[dict[str, int], int]:
    node_of = {p.pod.split("/", 1)[1]: p.node for p in timed.outcome.result.placements if p.pod}
    rack = {f"bench-{i}": rack_of(i) for i in range(nodes)}
    return eg.count_groups(gangs, node_of, rack), len(node_of)


def run_one(shape: str, nodes: int, demand: float, seed: int, *, limit: float = 5.0) -> Row:
    running = running_pods(shape, nodes, np.random.default_rng([seed, 99]))
    free = free_slots(nodes, running)
    sizes = gang_sizes(shape, int(demand * sum(free)), np.random.default_rng([seed, round(demand * 1000)]))
    cluster = parse_cluster(f"gang-shapes-{shape}-{seed}", json.dumps(cluster_list(nodes, running, sizes)))
    gangs = [eg.Gang(f"tg-{g:03d}", s) for g, s in enumerate(sizes)]
    best, bound = eg.most_groups(sizes, free, limit=4 * limit)
    counts: dict[str, tuple[dict[str, int], int]] = {}
    for name, timed in (
        ("simulation", timed_solve(cluster, "default", time_limit=limit)),
        ("batched", timed_solve(cluster, "placer", time_limit=0.1, batch_size=99)),
        ("one_batch", timed_solve(cluster, "placer", time_limit=limit)),
    ):
        placed = {p.pod: p.node for p in timed.outcome.result.placements if p.pod}
        assert validate_placements(cluster, placed, scheduler_name="placer") == [], name
        counts[name] = _count(gangs, timed, nodes)
    return Row(
        shape=shape, demand=demand, seed=seed, free=sum(free), groups=len(sizes), pods=sum(sizes),
        best=best, bound=bound, simulation=counts["simulation"][0]["whole"], batched=counts["batched"][0]["whole"],
        one_batch=counts["one_batch"][0]["whole"],
        broken=sum(c["partial"] + c["split"] for c, _ in counts.values()),
        batched_pods=counts["batched"][1], one_batch_pods=counts["one_batch"][1],
        simulation_pods=counts["simulation"][1],
    )  # fmt: skip


def _gain(x: int, base: int) -> str:
    return f"{100 * (x / base - 1):+.1f} %" if base else ""


def render(rows: list[Row], command: str, info: dict[str, str], load_start: str) -> str:
    lines = report_header("Topology gangs on racks with different free room (offline)", command, info,
                          load_start=load_start)  # fmt: skip
    lines += [
        "Racks of 16 nodes (16 cpu / 64Gi), gang pods of 8 cpu / 8Gi (32 per empty rack); racks partly "
        "used by running pods as each shape says; gangs of 4-32 pods (`issue`: 4, 6, 6) required in one rack, "
        "drawn up to the demand's share of the FREE slots. most = the most groups any scheduler could place "
        "(CP-SAT; `a-b`: best found - proven bound); simulation = kube-scheduler 1.37 "
        "(`--policy default`); placer b99 = `--batch-size 99 --time-limit 0.1`; placer one = one batch, "
        "`--time-limit 5`. Details in the docstring of `benchmarks/gang_shapes.py`.",
        "",
        "| shape | demand | seed | free slots | groups | most | simulation | placer b99 | placer one "
        "| most vs simulation | b99 vs simulation | one vs simulation | pods: sim / b99 / one | partial + split |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    for r in rows:
        most = f"{r.best}" if r.best == r.bound else f"{r.best}-{r.bound}"
        lines.append(
            f"| {r.shape} | {r.demand:.0%} | {r.seed} | {r.free} | {r.groups} | {most} | {r.simulation} "
            f"| {r.batched} | {r.one_batch} | {_gain(r.bound, r.simulation)} | {_gain(r.batched, r.simulation)} "
            f"| {_gain(r.one_batch, r.simulation)} | {r.simulation_pods} / {r.batched_pods} / {r.one_batch_pods} "
            f"| {r.broken} |"
        )
    lines += ["", "Per shape and demand, over the seeds (sums of groups):", "",
              "| shape | demand | most (bound) vs simulation | placer b99 vs simulation | placer one vs simulation |",
              "|---|---:|---:|---:|---:|"]  # fmt: skip
    for shape in dict.fromkeys(r.shape for r in rows):
        for demand in dict.fromkeys(r.demand for r in rows if r.shape == shape):
            got = [r for r in rows if r.shape == shape and r.demand == demand]
            sim = sum(r.simulation for r in got)
            lines.append(
                f"| {shape} | {demand:.0%} | {_gain(sum(r.bound for r in got), sim)} "
                f"| {_gain(sum(r.batched for r in got), sim)} | {_gain(sum(r.one_batch for r in got), sim)} |"
            )
    lines += ["", "![gang-shapes](gang-shapes.png)", ""]
    return "\n".join(lines)


def plot(rows: list[Row], path: Path) -> None:
    """Groups placed against the simulation's, per shape and demand (sums over the seeds)."""
    keys = list(dict.fromkeys((r.shape, r.demand) for r in rows))
    fig = Figure(figsize=(max(6, len(keys) * 0.6), 4))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    x = np.arange(len(keys))
    for k, (label, field) in enumerate((("most (bound)", "bound"), ("placer b99", "batched"),
                                        ("placer one batch", "one_batch"))):  # fmt: skip
        gains = []
        for shape, demand in keys:
            got = [r for r in rows if r.shape == shape and r.demand == demand]
            sim = sum(r.simulation for r in got)
            gains.append(100 * (sum(getattr(r, field) for r in got) / sim - 1) if sim else 0.0)
        ax.bar(x + (k - 1) * 0.27, gains, 0.27, label=label)
    ax.axhline(10, color="grey", linestyle="--", linewidth=1, label="issue 30's target at >= 95 %")
    ax.set_ylim(top=max(12.0, ax.get_ylim()[1]))
    ax.set_xticks(x, [f"{s} {d:.0%}" for s, d in keys], rotation=60, fontsize=7)
    ax.set_ylabel("groups placed vs the 1.37 simulation, %")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--demands", default=",".join(f"{d:g}" for d in DEMANDS))
    ap.add_argument("--limit", type=float, default=5.0, help="time limit of the one-batch solve and the simulation")
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "bench")
    args = ap.parse_args(argv)
    shapes = args.shapes.split(",")
    if bad := [s for s in shapes if s not in SHAPES]:
        ap.error(f"--shapes: unknown {', '.join(bad)} (known: {', '.join(SHAPES)})")
    demands = [float(d) for d in args.demands.split(",")]
    load_start = " ".join(f"{v:.2f}" for v in os.getloadavg())
    rows: list[Row] = []
    for shape in shapes:
        for demand in demands:
            for seed in range(args.seeds):
                rows.append(run_one(shape, args.nodes, demand, seed, limit=args.limit))
                print(json.dumps(asdict(rows[-1])), flush=True)
    command = "python -m benchmarks.gang_shapes " + " ".join(argv if argv is not None else sys.argv[1:])
    info = {**machine_info(), "revision": source_revision()}
    payload: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}, "rows": [asdict(r) for r in rows]}
    print(write_report(args.out, "gang-shapes", render(rows, command.strip(), info, load_start), payload,
                       lambda p: plot(rows, p)))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
