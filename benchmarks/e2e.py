"""make bench-e2e: placer vs kube-scheduler on the same real control plane.

Per run: a fresh control plane (testenv), N kwok nodes, then for each scheduler P pods created in
bursts (Deployments of identical replicas, 8 creator threads); a watch records when each pod is
first seen bound. Throughput = pods / (last bind - first creation); latency = bind - creation per
pod. Quality = the TBESK imbalance and std_score of the final state (placer.metrics). Both
schedulers write through the same client limits (kube-scheduler's default 50 QPS / 100 burst;
placer's apiQPS/apiBurst are set to the same). Median over runs. Writes docs/bench/e2e.md.

  python -m benchmarks.e2e --nodes 1000 --pods 5000 --bursts 10 --runs 3
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from kubernetes import client, config, watch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "e2e"))

import kube_helpers as kh  # noqa: E402

from placer.inputs.kubectl import parse_node, parse_pod  # noqa: E402
from placer.metrics import balance_metrics  # noqa: E402
from testenv import cluster as testenv  # noqa: E402

SHAPES = [("250m", "256Mi"), ("500m", "512Mi"), ("1", "1Gi"), ("100m", "1Gi"), ("1", "256Mi")]


class BindWatch:
    """Records the first time each pod of a namespace is seen with spec.nodeName."""

    def __init__(self, core: client.CoreV1Api, namespace: str) -> None:
        self.core, self.namespace = core, namespace
        self.bound: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            w = watch.Watch()
            try:
                for ev in w.stream(self.core.list_namespaced_pod, self.namespace, timeout_seconds=30):
                    pod = ev["object"]
                    if pod.spec.node_name and pod.metadata.name not in self.bound:
                        self.bound[pod.metadata.name] = time.time()
                    if self._stop.is_set():
                        break
            except Exception:
                time.sleep(0.2)

    def stop(self) -> None:
        self._stop.set()


def _create(
    apps: client.AppsV1Api, core: client.CoreV1Api, ns: str, pods: int, bursts: int, scheduler: str | None
) -> dict[str, float]:
    """Deployments whose ReplicaSets create the pods; returns pod name -> creation time."""
    per_burst = pods // bursts
    created: dict[str, float] = {}
    for b in range(bursts):
        with ThreadPoolExecutor(8) as pool:
            jobs = []
            for d in range(5):
                cpu, mem = SHAPES[d]
                replicas = per_burst // 5 + (1 if d < per_burst % 5 else 0)
                jobs.append(
                    pool.submit(
                        kh.create_deployment,
                        apps,
                        ns,
                        f"b{b}-d{d}",
                        replicas,
                        cpu=cpu,
                        memory=mem,
                        scheduler_name=scheduler,
                    )
                )
            for j in jobs:
                j.result()
        time.sleep(1.0)
    deadline = time.monotonic() + 120
    while len(created) < pods and time.monotonic() < deadline:
        for p in core.list_namespaced_pod(ns).items:
            created.setdefault(p.metadata.name, p.metadata.creation_timestamp.timestamp())
        time.sleep(0.5)
    return created


def _quality(core: client.CoreV1Api, api: client.ApiClient, nodes: set[str]) -> tuple[float, float]:
    raw_nodes = [api.sanitize_for_serialization(n) for n in core.list_node().items]
    parsed = [parse_node(r) for r in raw_nodes if r["metadata"]["name"] in nodes]
    used: dict[str, dict[str, int]] = {n.name: {} for n in parsed}
    for raw in core.list_pod_for_all_namespaces().items:
        pod = parse_pod(api.sanitize_for_serialization(raw))
        if pod.node_name in used and pod.running:
            for r, q in pod.requests.items():
                used[pod.node_name][r] = used[pod.node_name].get(r, 0) + q
    return balance_metrics([n.allocatable for n in parsed], [used[n.name] for n in parsed])


def _run_one(c: testenv.Cluster, nodes: int, pods: int, bursts: int, who: str, tmp: Path) -> dict[str, Any]:
    api = config.new_client_from_config(config_file=str(c.kubeconfig))
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    group = kh.unique(who)
    names = [f"{group}-{i}" for i in range(nodes)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda n: kh.create_node(core, n, cpu="16", memory="64Gi", labels={"e2e-group": group}), names))
    kh.wait_nodes_ready(core, names, timeout=300)
    ns = kh.create_namespace(core)
    proc = None
    if who == "placer":
        cfg = tmp / "placer.yaml"
        cfg.write_text(
            yaml.safe_dump(
                {
                    "batchWindowSeconds": 1,
                    "batchSize": 99,
                    "metricsPort": 0,
                    "apiQPS": 50,
                    "apiBurst": 100,
                    "leaderElection": {"enabled": False},
                    "engine": {"solver": {"timeLimit": 1}},
                }
            )
        )
        proc = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "placer"),
                "run",
                "--kubeconfig",
                str(c.kubeconfig),
                "--config",
                str(cfg),
            ],
            stdout=(tmp / "placer.log").open("ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        time.sleep(3)
    watcher = BindWatch(core, ns)
    created = _create(apps, core, ns, pods, bursts, "placer" if who == "placer" else None)
    deadline = time.monotonic() + 900
    while len(watcher.bound) < len(created) and time.monotonic() < deadline:
        time.sleep(0.5)
    watcher.stop()
    if proc is not None:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    lat = np.array([watcher.bound[n] - created[n] for n in created if n in watcher.bound])
    first, last = min(created.values()), max(watcher.bound.values(), default=time.time())
    imbalance, std = _quality(core, api, set(names))
    kh.delete_namespace(core, ns)
    for n in names:
        kh.delete_node(core, n)
    return {
        "who": who,
        "bound": len(watcher.bound),
        "created": len(created),
        "pods_per_s": len(watcher.bound) / max(last - first, 1e-9),
        "p50": float(np.percentile(lat, 50)) if len(lat) else float("nan"),
        "p95": float(np.percentile(lat, 95)) if len(lat) else float("nan"),
        "p99": float(np.percentile(lat, 99)) if len(lat) else float("nan"),
        "imbalance": imbalance,
        "std_score": std,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=5000)
    ap.add_argument("--bursts", type=int, default=10)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default=str(REPO / "docs" / "bench" / "e2e.md"))
    args = ap.parse_args(argv)
    rows: list[dict[str, Any]] = []
    for run in range(args.runs):
        for who in ("kube-scheduler", "placer"):
            with testenv.Cluster(with_scheduler=True) as c:
                tmp = Path(c.workdir or "/tmp")
                row = _run_one(c, args.nodes, args.pods, args.bursts, who, tmp)
                row["run"] = run + 1
                rows.append(row)
                print(row, flush=True)
    lines = [
        "# End-to-end benchmark: placer vs kube-scheduler",
        "",
        f"Command: `python -m benchmarks.e2e --nodes {args.nodes} --pods {args.pods} --bursts {args.bursts} "
        f"--runs {args.runs}` ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}), {os.cpu_count()} cores, "
        "shared machine. Fresh control plane per scheduler and run; kwok nodes of 16 cpu / 64Gi; pods in "
        f"{args.bursts} bursts (Deployments of 5 shapes, 8 creator threads); same client limits (50 QPS / 100 burst).",
        "",
        "| run | scheduler | bound / created | pods/s | latency p50 (s) | p95 (s) | p99 (s) | imbalance | std_score |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['run']} | {r['who']} | {r['bound']}/{r['created']} | {r['pods_per_s']:.1f} | "
            f"{r['p50']:.2f} | {r['p95']:.2f} | {r['p99']:.2f} | {r['imbalance']:.4f} | {r['std_score']:.4f} |"
        )
    lines += [
        "",
        "Medians over runs:",
        "",
        "| scheduler | pods/s | p50 (s) | p95 (s) | imbalance |",
        "|---|---:|---:|---:|---:|",
    ]
    for who in ("kube-scheduler", "placer"):
        mine = [r for r in rows if r["who"] == who]
        lines.append(
            f"| {who} | {statistics.median(r['pods_per_s'] for r in mine):.1f} | "
            f"{statistics.median(r['p50'] for r in mine):.2f} | {statistics.median(r['p95'] for r in mine):.2f} | "
            f"{statistics.median(r['imbalance'] for r in mine):.4f} |"
        )
    ks = statistics.median(r["pods_per_s"] for r in rows if r["who"] == "kube-scheduler")
    pl = statistics.median(r["pods_per_s"] for r in rows if r["who"] == "placer")
    lines += ["", f"Throughput ratio placer / kube-scheduler (medians): {pl / ks:.2f}."]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
