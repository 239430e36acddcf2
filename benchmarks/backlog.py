"""The e2e benchmark's backlog replayed offline: the batch sequence of ``make bench-e2e``'s shapes
through the engine, no cluster.

The same nodes (16 cpu / 64Gi / 100Gi ephemeral storage / 110 pods, in the shapes' zones) and pods
as benchmarks/e2e.py; the measured pods are taken in creation order, ``--batch`` at a time, each
batch decided by ``placer.service.decide`` as the controller's solve job calls it (the shipped
engine config, ``--time-limit`` per batch) on the state the earlier batches left, with the pods
still waiting after it passed as the backlog (``--no-backlog``: as before, each batch alone).
Beside it, kube-scheduler's simulated answer for the same pods one at a time
(``placer.baseline.simulate``, scoring every node). Per shape: the end state's imbalance and
std_score (placer.metrics), how many batches fell back to the greedy answer, the pods the last
batch left unplaced and the decision time.

    python -m benchmarks.backlog --shapes basic --runs 3
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

import yaml

from benchmarks.e2e_shapes import Json, Shape, node_labels, shapes
from placer.baseline.simulate import simulate
from placer.engine import Snapshot, build_snapshot
from placer.inputs.load import read_cluster
from placer.models import Cluster, Config, ControllerConfig, Pod
from placer.service import decide, state_metrics

REPO = Path(__file__).resolve().parents[1]
SHIPPED_CONFIG = REPO / "k8s" / "config.yaml"
NAMESPACE = "bench"


def _node(i: int) -> Json:
    res = {"cpu": "16", "memory": "64Gi", "ephemeral-storage": "100Gi", "pods": "110"}
    labels = {"kubernetes.io/hostname": f"node-{i}", **node_labels(i)}
    return {
        "kind": "Node",
        "metadata": {"name": f"node-{i}", "labels": labels},
        "status": {"allocatable": res, "capacity": dict(res)},
    }


def _pending(pod: Json, i: int) -> Json:
    meta = {**pod["metadata"], "namespace": NAMESPACE, "uid": f"uid-{i}"}
    meta["creationTimestamp"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(1_800_000_000 + i))
    return {**pod, "metadata": meta, "spec": {**pod["spec"], "schedulerName": "placer"}}


def cluster_of(shape: Shape, nodes: int, pods: int) -> tuple[Cluster, list[list[str]]]:
    """The shape's cluster with every pod pending, and the keys of each phase's pods in order."""
    phases = shape.phases(pods)
    items: list[Any] = [_node(i) for i in range(nodes)]
    order: list[list[str]] = []
    count = 0
    for phase in phases:
        keys = []
        for pod in phase.pods:
            items.append(_pending(pod, count))
            keys.append(f"{NAMESPACE}/{pod['metadata']['name']}")
            count += 1
        order.append(keys)
    items += shape.pod_groups(pods)
    for group in items[nodes + count :]:
        group.setdefault("metadata", {})["namespace"] = NAMESPACE
    return read_cluster(shape.name, {"apiVersion": "v1", "kind": "List", "items": items}), order


def engine_config(time_limit: float, deterministic: bool = False) -> Config:
    doc = yaml.safe_load(SHIPPED_CONFIG.read_text())
    cfg = ControllerConfig.model_validate(doc).engine
    solver = cfg.solver.model_copy(update={"time_limit": time_limit, "deterministic": deterministic})
    return cfg.model_copy(update={"solver": solver})


def replay_placer(
    cluster: Cluster, order: list[list[str]], config: Config, batch: int, backlog: bool
) -> dict[str, Any]:
    pods = {p.key: p for p in cluster.pods}
    state = build_snapshot(cluster.nodes, [], list(pods.values()), cluster.namespaces)
    fallbacks = batches = 0
    seconds: list[float] = []
    unplaced = 0
    for keys in order:
        queue = [pods[k] for k in keys]
        carried: list[Pod] = []
        while queue or carried:
            todo = carried + queue[: batch - len(carried)]
            queue = queue[batch - len(carried) :]
            started = time.monotonic()
            decision = decide(cluster, state, todo, config, waiting=queue if backlog else ())
            seconds.append(time.monotonic() - started)
            batches += 1
            fallbacks += decision.status == "fallback"
            for victim in decision.plan.evictions if decision.plan is not None else ():
                state.remove(victim.pod, victim.node)
            for pod, node in decision.placements:
                state.add(pod, node)
            left = [pod for pod, _, _ in decision.unplaced]
            carried = left if queue else []
            unplaced += 0 if queue else len(left)
    imbalance, std = state_metrics(state)
    return {
        "imbalance": imbalance,
        "std_score": std,
        "batches": batches,
        "fallbacks": fallbacks,
        "median_s": statistics.median(seconds),
        "max_s": max(seconds),
        "unplaced": unplaced,
    }


def replay_default(cluster: Cluster, order: list[list[str]]) -> dict[str, Any]:
    pods = {p.key: p for p in cluster.pods}
    state: Snapshot = build_snapshot(cluster.nodes, [], list(pods.values()), cluster.namespaces)
    for keys in order:
        simulate(state, [pods[k] for k in keys], "default", namespaces=cluster.namespaces)
    imbalance, std = state_metrics(state)
    return {"imbalance": imbalance, "std_score": std}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=99)
    ap.add_argument("--time-limit", type=float, default=0.1)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--shapes", nargs="*", default=None)
    ap.add_argument(
        "--deterministic", action="store_true", help="solver.deterministic: the same answers whatever the load"
    )
    ap.add_argument("--no-backlog", action="store_true", help="each batch alone, without the pods still waiting")
    args = ap.parse_args()
    config = engine_config(args.time_limit, args.deterministic)
    chosen = [s for s in shapes(args.nodes) if args.shapes is None or s.name in args.shapes]
    print("| shape | who | run | imbalance | std_score | batches | fallbacks | unplaced | decide median / max (s) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---|")
    for shape in chosen:
        cluster, order = cluster_of(shape, args.nodes, args.pods)
        ks = replay_default(cluster, order)
        print(f"| {shape.name} | kube-scheduler (sim) | 1 | {ks['imbalance']:.4f} | {ks['std_score']:.4f} | | | | |")
        who = "placer" if not args.no_backlog else "placer, no backlog"
        for run in range(args.runs):
            r = replay_placer(cluster, order, config, args.batch, not args.no_backlog)
            print(
                f"| {shape.name} | {who} | {run + 1} | {r['imbalance']:.4f} | {r['std_score']:.4f} | {r['batches']} "
                f"| {r['fallbacks']} | {r['unplaced']} | {r['median_s']:.3f} / {r['max_s']:.3f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
