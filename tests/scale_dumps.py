"""Hand-written 30-node clusters whose answers are large enough to show how the outputs scale
(issue 32 item 4), as native-schema documents (``placer.inputs.native``):

- ``tight()``: every node of a 30-node EKS-style cluster (names like
  ``ip-10-0-32-20.eu-west-1.compute.internal``) nearly full with two batch pods and one web
  replica; 60 pending pods of a higher priority in two namespaces need the batch pods' room, so
  ``placer solve`` answers with a global plan of about 60 evictions sharing one cause.
- ``hot()``: the same nodes, 10 of them above the high threshold with movable pods of opted-in
  Jobs, all in one namespace, so ``placer rebalance`` stops at its budgets (perPeriod,
  perNamespace, perNode) with pods still ready to move.

``python tests/scale_dumps.py tight|hot`` prints one of them (how the README's figures were made).
"""

from __future__ import annotations

import json
import sys
from typing import Any

Json = dict[str, Any]

__all__ = ["NODES", "hot", "node_name", "tight"]

NODES = 30
_ZONES = ("eu-west-1a", "eu-west-1b", "eu-west-1c")


def node_name(i: int) -> str:
    """An EKS node name: the private IP's host name in the region's compute domain."""
    return f"ip-10-0-{32 + i // 10}-{(37 * i) % 200 + 20}.eu-west-1.compute.internal"


def _nodes() -> list[Json]:
    return [
        {
            "name": node_name(i),
            "labels": {
                "kubernetes.io/hostname": node_name(i),
                "topology.kubernetes.io/zone": _ZONES[i % 3],
                "node.kubernetes.io/instance-type": "m5.2xlarge",
            },
            "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
        }
        for i in range(NODES)
    ]


def _pod(name: str, namespace: str, cpu: str, memory: str, **extra: Any) -> Json:
    return {"name": name, "namespace": namespace, "requests": {"cpu": cpu, "memory": memory}, **extra}


def tight() -> Json:
    pods: list[Json] = []
    for i in range(NODES):
        where = node_name(i)
        for j in range(2):
            owner = {"kind": "Job", "name": f"nightly-etl-{i:02d}{j}"}
            pods.append(
                _pod(
                    f"nightly-etl-{i:02d}{j}-x7k2p", "batch", "3", "4Gi", node=where, restartPolicy="Never", owner=owner
                )
            )
        web = {"kind": "ReplicaSet", "name": "frontend-6c9f7d8b5"}
        pods.append(_pod(f"frontend-6c9f7d8b5-{i:02d}q4z", "web", "1500m", "2Gi", node=where, priority=100, owner=web))
    for k in range(60):
        namespace, app, cpu = ("payments", "api-5d7f9c6b8", "2500m") if k < 45 else ("search", "indexer-7b9d5", "3")
        created = f"2026-01-01T00:{k // 60:02d}:{k % 60:02d}Z"
        owner = {"kind": "ReplicaSet", "name": app}
        pods.append(
            _pod(f"{app}-{k:02d}w8r", namespace, cpu, "4Gi", priority=1000, creationTimestamp=created, owner=owner)
        )
    replicasets = [
        {"namespace": "web", "name": "frontend-6c9f7d8b5"},
        {"namespace": "payments", "name": "api-5d7f9c6b8"},
        {"namespace": "search", "name": "indexer-7b9d5"},
    ]
    return {"nodes": _nodes(), "pods": pods, "replicaSets": replicasets}


def hot() -> Json:
    """Nodes 0-9 at 7.5 of 8 cpu: five 1.5-cpu pods of opted-in analytics Jobs each; the other 20
    nodes carry one 1-cpu web replica."""
    pods: list[Json] = []
    opt_in = {"podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}}
    jobs: list[Json] = []
    for i in range(NODES):
        where = node_name(i)
        if i < 10:
            for j in range(5):
                job = f"train-{i:02d}{j}"
                jobs.append({"namespace": "analytics", "name": job, **opt_in})
                owner = {"kind": "Job", "name": job}
                pods.append(
                    _pod(f"{job}-m4n8v", "analytics", "1500m", "6Gi", node=where, restartPolicy="Never", owner=owner)
                )
        else:
            web = {"kind": "ReplicaSet", "name": "frontend-6c9f7d8b5"}
            pods.append(_pod(f"frontend-6c9f7d8b5-{i:02d}q4z", "web", "1", "2Gi", node=where, owner=web))
    return {
        "nodes": _nodes(),
        "pods": pods,
        "replicaSets": [{"namespace": "web", "name": "frontend-6c9f7d8b5"}],
        "jobs": jobs,
    }


if __name__ == "__main__":
    which = {"tight": tight, "hot": hot}
    if len(sys.argv) != 2 or sys.argv[1] not in which:
        sys.exit("usage: python tests/scale_dumps.py tight|hot")
    json.dump(which[sys.argv[1]](), sys.stdout, indent=1)
