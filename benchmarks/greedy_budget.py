"""Does one decision keep its time limit when the greedy pass is expensive? (issue 31, item 2)

Builds ``pods`` pending pods on ``nodes`` nodes in five zones, in ``groups`` label groups across 13
namespaces; every pod has a required pod affinity to its own group by zone and a required
anti-affinity to the next group by hostname, both over all namespaces (``namespaceSelector: {}``),
which makes every pair of groups a topology rule. Solves it in-process at each time limit and
prints, per run, the decision's wall seconds (``solve_seconds``), its ratio to the limit, the
status and the pods placed. Medians over ``--runs``.

CLI: ``python -m benchmarks.greedy_budget --pods 500 --groups 10 --time-limit 1 3 --runs 3``.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Sequence
from typing import Any

from placer.inputs import parse_cluster
from placer.models import Config, SolverConfig
from placer.service import SolveOptions, solve_cluster

__all__ = ["instance", "main"]


def instance(pods: int, nodes: int, groups: int) -> dict[str, Any]:
    """The native-schema cluster described in the module docstring."""
    node_docs = [
        {
            "name": f"n{i:03d}",
            "labels": {"zone": f"z{i % 5}", "kubernetes.io/hostname": f"n{i:03d}"},
            "allocatable": {"cpu": "64", "memory": "256Gi", "pods": 250},
        }
        for i in range(nodes)
    ]
    pod_docs = []
    for i in range(pods):
        g = i % groups
        near = {"labelSelector": {"matchLabels": {"grp": f"g{g}"}}, "topologyKey": "zone", "namespaceSelector": {}}
        apart = {
            "labelSelector": {"matchLabels": {"grp": f"g{(g + 1) % groups}"}},
            "topologyKey": "kubernetes.io/hostname",
            "namespaceSelector": {},
        }
        pod_docs.append(
            {
                "name": f"p{i:04d}",
                "namespace": f"ns{i % 13}",
                "schedulerName": "placer",
                "labels": {"grp": f"g{g}", "i": str(i)},
                "requests": {"cpu": "100m", "memory": "128Mi"},
                "creationTimestamp": f"2024-01-01T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z",
                "affinity": {
                    "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [near]},
                    "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [apart]},
                },
            }
        )
    return {"nodes": node_docs, "pods": pod_docs}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=500)
    parser.add_argument("--nodes", type=int, default=50)
    parser.add_argument("--groups", type=int, default=10)
    parser.add_argument("--time-limit", type=float, nargs="+", default=[1.0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    cluster = parse_cluster("greedy-budget", json.dumps(instance(args.pods, args.nodes, args.groups)))
    print("| time limit (s) | decision (s), median | ratio to the limit | status | placed |")
    print("|---:|---:|---:|---|---:|")
    for limit in args.time_limit:
        config = Config(solver=SolverConfig(time_limit=limit))
        runs = [solve_cluster(cluster, SolveOptions(config=config)).result for _ in range(args.runs)]
        seconds = statistics.median(r.metrics.solve_seconds for r in runs)
        statuses = ",".join(sorted({r.status for r in runs}))
        placed = statistics.median(r.metrics.placed for r in runs)
        print(f"| {limit:g} | {seconds:.2f} | {seconds / limit:.2f} | {statuses} | {placed:g} |")


if __name__ == "__main__":
    main()
