"""Global-plan benchmark: 99 pending pods that do not fit without evictions.

Cluster: N nodes of 8 cpu / 32Gi, each running 10 pods of 700m / 2Gi (7 cpu used, 1 free), from
ReplicaSets of placer (movable), half of them restart-tier Never (preemptible by the pending
pods, which are Always); 99 pending pods of 2 cpu / 2Gi: none fits anywhere until pods leave.
Decision = ``placer.service.decide`` (first solve + global plan, neighbourhood-restricted on large
clusters) on an in-memory snapshot, wall clock, median and p95 of ``--repeats`` after a warm-up.

  python -m benchmarks.plan --sizes 1000,5000 --repeats 5
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np

from placer.engine import build_snapshot
from placer.models import Cluster, Config, Node, Owner, Pod, ReplicaSet
from placer.service import decide

REPO = Path(__file__).resolve().parents[1]
GI = 2**30


# The scenario is the thesis's single-tenant one: an Always pod is worth evicting two Never pods of
# its priority for (restartTiers: cluster; with the default namespace scope, two pods of equal
# priority count more than one, so no plan would be made).
SINGLE_TENANT = {"restartTiers": "cluster"}


def infeasible(nodes: int, *, running_per_node: int = 10, pending: int = 99) -> Cluster:
    node_list = [
        Node(name=f"n{i:05d}", labels={"zone": f"z{i % 3}"}, allocatable={"cpu": 8000, "memory": 32 * GI, "pods": 110})
        for i in range(nodes)
    ]
    rss = [ReplicaSet(name=f"svc-{t}", uid=f"rs-{t}", scheduler_name="placer") for t in ("never", "always")]
    pods: list[Pod] = []
    for i, node in enumerate(node_list):
        for j in range(running_per_node):
            tier = "never" if j % 2 == 0 else "always"
            pods.append(
                Pod(
                    name=f"run-{i}-{j}",
                    uid=f"u-{i}-{j}",
                    node_name=node.name,
                    phase="Running",
                    scheduler_name="placer",
                    requests={"cpu": 700, "memory": 2 * GI},
                    restart_policy="Never" if tier == "never" else "Always",
                    owner=Owner(kind="ReplicaSet", name=f"svc-{tier}", uid=f"rs-{tier}"),
                )
            )
    for k in range(pending):
        pods.append(
            Pod(
                name=f"new-{k:03d}",
                uid=f"p-{k}",
                scheduler_name="placer",
                creation=f"2024-01-01T00:00:{k % 60:02d}Z",
                requests={"cpu": 2000, "memory": 2 * GI},
            )
        )
    return Cluster(nodes=tuple(node_list), pods=tuple(pods), replicasets=tuple(rss))


def run_size(nodes: int, repeats: int, time_limit: float) -> dict[str, float | int | str]:
    cluster = infeasible(nodes)
    pending = [p for p in cluster.pods if p.pending]
    running = [p for p in cluster.pods if p.running]
    snap = build_snapshot(cluster.nodes, running, pending)
    config = Config.model_validate({"solver": {"timeLimit": time_limit}, "priority": SINGLE_TENANT})
    decide(cluster, snap, pending, config)  # warm-up
    times = []
    decision = None
    for _ in range(repeats):
        t = time.perf_counter()
        decision = decide(cluster, snap, pending, config)
        times.append(time.perf_counter() - t)
    assert decision is not None
    plan = decision.plan
    return {
        "nodes": nodes,
        "median": statistics.median(times),
        "p95": float(np.percentile(times, 95)),
        "placed": len(decision.placements),
        "evictions": len(plan.evictions) if plan else 0,
        "preempted": sum(1 for e in plan.evictions if e.kind == "preempt") if plan else 0,
        "moved": sum(1 for e in plan.evictions if e.kind == "move") if plan else 0,
        "hood": plan.nodes_considered if plan else 0,
        "movers": plan.movers_considered if plan else 0,
        "status": decision.status,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,5000")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--time-limit", type=float, default=1.0)
    ap.add_argument("--out", default=str(REPO / "docs" / "bench" / "plan.md"))
    args = ap.parse_args(argv)
    rows = [run_size(int(s), args.repeats, args.time_limit) for s in args.sizes.split(",")]
    lines = [
        "# Global-plan benchmark",
        "",
        f"Command: `python -m benchmarks.plan --sizes {args.sizes} --repeats {args.repeats} --time-limit "
        f"{args.time_limit}` ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}); {os.cpu_count()} cores, "
        f"{platform.processor() or platform.machine()}, shared machine (load {os.getloadavg()[0]:.1f}).",
        "",
        "Each node 8 cpu / 32Gi runs 10 pods of 700m/2Gi (1 cpu free); 99 pending pods of 2 cpu fit nowhere "
        "without evictions. Decision = first solve + global plan (`placer.service.decide`), target p95 <= 2 s "
        "at 5,000 nodes. `hood` = nodes in the re-solve's neighbourhood, `movers` = running pods that were "
        "decisions.",
        "",
        "| nodes | running | median (s) | p95 (s) | meets 2 s | placed | evictions | preempted | moved | hood | movers "
        "| status |",
        "|---:|---:|---:|---:|:-:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['nodes']:,} | {int(r['nodes']) * 10:,} | {r['median']:.3f} | {r['p95']:.3f} | "
            f"{'yes' if float(r['p95']) <= 2.0 else 'no'} | {r['placed']} | {r['evictions']} | {r['preempted']} | "
            f"{r['moved']} | {r['hood']} | {r['movers']} | {r['status']} |"
        )
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
