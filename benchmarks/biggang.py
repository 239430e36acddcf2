"""A 5,000-pod gang decided within --time-limit plus the reading time (issue 30's last target).

The dump: ``--nodes`` kwok-like nodes (16 cpu, 64Gi, 110 pods) in racks of 16, each about
``--fill`` full of running pods; one Kubernetes 1.37 Workload PodGroup (``scheduling.k8s.io/v1beta1``)
whose ``minCount`` is its ``--gang`` pods of 1 cpu / 2Gi, created first; then ``--others`` ordinary
pending pods. Each variant is one ``placer solve DUMP --time-limit L -o json`` in its own process:

- ``one batch``: every pending pod in one decision (the gang and the others jointly);
- ``--batch-size 99``: the controller's batches: the gang is a decision of its own (it is larger
  than the batch) and the others follow in batches of 99 (``placer/engine/cuts.py``).

Reported per variant (median of ``--repeat`` runs, interleaved): wall time of the process,
``metrics.read_seconds``, ``metrics.solve_seconds``, the budget (read + limit x decisions), pods
placed, and whether the gang was placed whole. Offline only: the controller's concurrency (other
batches solved beside the gang's on a second solver worker) is not exercised here.

    python -m benchmarks.biggang --out docs/bench/biggang.md
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.machine import machine_info, report_header

RACK = "topology.kubernetes.io/rack"


def _node(i: int) -> dict[str, Any]:
    return {
        "kind": "Node",
        "metadata": {"name": f"node-{i:05d}", "labels": {RACK: f"rack-{i // 16:03d}"}},
        "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"}},
    }


def _pod(name: str, ns: str, cpu: str, mem: str, node: str | None, minute: int, group: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": "placer",
        "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": mem}}}],
    }
    if node:
        spec["nodeName"] = node
    if group:
        spec["schedulingGroup"] = {"podGroupName": group}
    stamp = f"2026-01-01T{minute // 60:02d}:{minute % 60:02d}:00Z"
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "creationTimestamp": stamp},
        "spec": spec,
        "status": {"phase": "Running" if node else "Pending"},
    }


def dump(nodes: int, gang: int, others: int, fill: float, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    items: list[dict[str, Any]] = [_node(i) for i in range(nodes)]
    for i in range(nodes):
        for j in range(round(16 * fill * rng.uniform(0.5, 1.5)) // 2):  # 2-cpu running pods
            items.append(_pod(f"run-{i}-{j}", "svc", "2", "4Gi", f"node-{i:05d}", 0, None))
    items.append(
        {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "train", "namespace": "ml"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": gang}}},
        }
    )
    items += [_pod(f"train-{k}", "ml", "1", "2Gi", None, 1, "train") for k in range(gang)]
    items += [_pod(f"web-{k}", "web", "500m", "1Gi", None, 2 + k // 100, None) for k in range(others)]
    return {"apiVersion": "v1", "kind": "List", "items": items}


def _once(path: Path, limit: float, batch: int | None) -> dict[str, float]:
    args = ["solve", str(path), "--time-limit", str(limit), "-o", "json"]
    if batch:
        args += ["--batch-size", str(batch)]
    placer = str(Path(sys.executable).parent / "placer")
    started = time.monotonic()
    out = subprocess.run([placer, *args], capture_output=True, text=True, check=True).stdout
    wall = time.monotonic() - started
    answer = json.loads(out)
    placed = {p["pod"] for p in answer["placements"]}
    gang = [p for p in placed if p.startswith("ml/train-")]
    return {
        "wall": wall,
        "read": answer["metrics"]["read_seconds"],
        "decision": answer["metrics"]["solve_seconds"],
        "placed": len(placed),
        "gang placed": len(gang),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--gang", type=int, default=5000)
    ap.add_argument("--others", type=int, default=500)
    ap.add_argument("--fill", type=float, default=0.5, help="running share of each node's cpu (on average)")
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=30)
    ap.add_argument("--dump", type=Path, default=Path("build/biggang.json"))
    ap.add_argument("--out", type=Path, help="the Markdown report")
    args = ap.parse_args()
    args.dump.parent.mkdir(parents=True, exist_ok=True)
    args.dump.write_text(json.dumps(dump(args.nodes, args.gang, args.others, args.fill, args.seed)), "utf-8")
    variants: list[tuple[str, int | None, int]] = [
        ("one batch", None, 1),
        ("--batch-size 99", 99, 1 + -(-args.others // 99)),
    ]
    load_start = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    runs: dict[str, list[dict[str, float]]] = {label: [] for label, _, _ in variants}
    for _ in range(args.repeat):
        for label, batch, _ in variants:
            runs[label].append(_once(args.dump, args.time_limit, batch))
            print(label, runs[label][-1], flush=True)
    command = "python -m benchmarks.biggang " + " ".join(sys.argv[1:])
    lines = report_header(f"A {args.gang:,}-pod gang", command, machine_info(), load_start=load_start)
    lines += [
        f"Dump: {args.nodes:,} nodes (16 cpu) in racks of 16, about {args.fill:.0%} full of running pods; "
        f"one v1beta1 PodGroup with minCount {args.gang:,} and its {args.gang:,} pending pods (1 cpu each, "
        f"created first), then {args.others} other pending pods; `--time-limit {args.time_limit:g}`. "
        f"Medians of {args.repeat} runs, interleaved, each `placer solve` in its own process. budget = read + "
        "limit x decisions (with --batch-size the gang is a decision alone, the others follow in batches). "
        "Offline: the controller's second solver worker is not exercised.",
        "",
        "| variant | decisions | wall s | read s | decision s | budget s | within | gang placed | pods placed |",
        "|---|---:|---:|---:|---:|---:|---|---:|---:|",
    ]
    for label, _, decisions in variants:
        med = {k: statistics.median(r[k] for r in runs[label]) for k in runs[label][0]}
        budget = med["read"] + args.time_limit * decisions
        within = "yes" if med["read"] + med["decision"] <= budget * 1.05 else "no"
        lines.append(
            f"| {label} | {decisions} | {med['wall']:.2f} | {med['read']:.2f} | {med['decision']:.2f} | "
            f"{budget:.2f} | {within} | {med['gang placed']:.0f} / {args.gang} | {med['placed']:.0f} / "
            f"{args.gang + args.others} |"
        )
    lines += ["", "`within`: read + decision <= 1.05 x budget (the issue's 5 % margin)."]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
