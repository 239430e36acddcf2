"""Issue 32 item 2: how fast ``placer solve`` reads a 100 MB kubectl dump.

The dump is what ``kubectl get nodes,pods -A -o json`` writes for a large cluster: ``--nodes``
nodes of four machine types across three zones (a tainted GPU pool among them), and about nine
pods per node from Deployments (a ReplicaSet owner each), each pod about 2.3 KB as kubectl
writes it without indentation (labels, annotations, an owner, one or two containers with image,
port and requests, tolerations, a projected token volume, status with conditions and container
statuses): 100 MB at 5,000 nodes, the size of the dump issue 32 was measured on.
300 pods are pending, addressed to placer (``schedulerName: placer``), so that the decision is
made. Everything follows from ``--seed``.

For each placer checkout (``--baseline`` a git worktree of main, and this one) the benchmark runs
``placer solve DUMP --time-limit 10 -o json`` in a subprocess and reports the read time (the
output's ``metrics.read_seconds``, or, for a checkout without it, the time of ``load_cluster`` alone
in a subprocess), the total wall time and the subprocess's peak memory (``getrusage`` maxrss).

    python -m benchmarks.bigdump --nodes 5000 --baseline /path/to/main --out docs/bench/read.md
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.machine import machine_info, report_header

STAMP = "2026-11-28T03:00:00Z"
ZONES = ("eu-west-1a", "eu-west-1b", "eu-west-1c")
# (instance type, cpu, memory, pods, share of the nodes, GPUs)
MACHINES = (
    ("m6i.4xlarge", "16", "64Gi", "110", 0.45, 0),
    ("c6i.8xlarge", "32", "64Gi", "110", 0.25, 0),
    ("r6i.4xlarge", "16", "128Gi", "110", 0.22, 0),
    ("g5.4xlarge", "16", "64Gi", "110", 0.08, 1),
)
CPU = ("100m", "250m", "500m", "1", "2")
MEMORY = ("128Mi", "256Mi", "512Mi", "1Gi", "2Gi")


def _node(i: int, rng: random.Random) -> dict[str, Any]:
    roll, acc = rng.random(), 0.0
    machine = MACHINES[-1]
    for m in MACHINES:
        acc += m[4]
        if roll < acc:
            machine = m
            break
    kind, cpu, mem, pods, _, gpus = machine
    zone = ZONES[i % len(ZONES)]
    name = f"ip-10-{i // 250}-{i % 250}-{rng.randrange(1, 255)}.eu-west-1.compute.internal"
    alloc = {"cpu": f"{int(cpu) * 1000 - 90}m", "memory": mem, "pods": pods, "ephemeral-storage": "95551679124"}
    if gpus:
        alloc["nvidia.com/gpu"] = str(gpus)
    node: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"{rng.getrandbits(128):032x}",
            "resourceVersion": str(rng.randrange(10**8)),
            "creationTimestamp": STAMP,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "node.kubernetes.io/instance-type": kind,
                "topology.kubernetes.io/region": "eu-west-1",
                "topology.kubernetes.io/zone": zone,
                "eks.amazonaws.com/nodegroup": f"ng-{kind.split('.')[0]}",
            },
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": {"providerID": f"aws:///{zone}/i-{rng.getrandbits(64):016x}"},
        "status": {
            "capacity": {**alloc, "cpu": cpu},
            "allocatable": alloc,
            "conditions": [
                {
                    "type": t,
                    "status": "False" if t != "Ready" else "True",
                    "lastHeartbeatTime": STAMP,
                    "lastTransitionTime": STAMP,
                    "reason": f"Kubelet{t}",
                    "message": f"kubelet reports {t}",
                }
                for t in ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")
            ],
            "nodeInfo": {"kubeletVersion": "v1.34.2", "osImage": "Amazon Linux 2023", "architecture": "amd64"},
        },
    }
    if gpus:
        node["spec"]["taints"] = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    return node


def _container(name: str, rng: random.Random) -> dict[str, Any]:
    cpu, mem = rng.choice(CPU), rng.choice(MEMORY)
    return {
        "name": name,
        "image": f"123456789012.dkr.ecr.eu-west-1.amazonaws.com/{name}:v1.{rng.randrange(40)}.{rng.randrange(9)}",
        "imagePullPolicy": "IfNotPresent",
        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
        "resources": {"requests": {"cpu": cpu, "memory": mem}, "limits": {"memory": mem}},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }


def _pod(app: str, ns: str, node: str | None, rng: random.Random, gpu: bool) -> dict[str, Any]:
    rs = f"{app}-{rng.getrandbits(32):08x}"[: len(app) + 9]
    name = f"{rs}-{rng.getrandbits(24):06x}"
    containers = [_container(app, rng)] + ([_container("envoy", rng)] if rng.random() < 0.1 else [])
    if gpu:
        containers[0]["resources"]["limits"]["nvidia.com/gpu"] = "1"
    spec: dict[str, Any] = {
        "containers": containers,
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default",
        "schedulerName": "default-scheduler" if node else "placer",  # the pending ones are placer's
        "priority": 0,
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
        "tolerations": [  # the two every pod gets from the DefaultTolerationSeconds admission plugin
            {"key": f"node.kubernetes.io/{k}", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            for k in ("not-ready", "unreachable")
        ]
        + ([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}] if gpu else []),
        "volumes": [
            {
                "name": "kube-api-access",
                "projected": {
                    "defaultMode": 420,
                    "sources": [
                        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    ],
                },
            }
        ],
    }
    status: dict[str, Any] = {"phase": "Pending", "qosClass": "Burstable"}
    if node is not None:
        spec["nodeName"] = node
        status = {
            "phase": "Running",
            "qosClass": "Burstable",
            "hostIP": f"10.0.{rng.randrange(256)}.{rng.randrange(256)}",
            "podIP": f"10.1.{rng.randrange(256)}.{rng.randrange(256)}",
            "startTime": STAMP,
            "conditions": [
                {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": STAMP}
                for t in ("Ready", "PodScheduled")
            ],
            "containerStatuses": [
                {
                    "name": c["name"],
                    "ready": True,
                    "restartCount": 0,
                    "image": c["image"],
                    "containerID": f"containerd://{rng.getrandbits(256):064x}",
                    "state": {"running": {"startedAt": STAMP}},
                }
                for c in containers
            ],
        }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "generateName": f"{rs}-",
            "namespace": ns,
            "uid": f"{rng.getrandbits(128):032x}",
            "resourceVersion": str(rng.randrange(10**8)),
            "creationTimestamp": STAMP,
            "labels": {"app": app, "pod-template-hash": rs[len(app) + 1 :], "team": ns},
            "annotations": {"kubectl.kubernetes.io/restartedAt": STAMP},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": rs,
                    "controller": True,
                    "blockOwnerDeletion": True,
                    "uid": f"{rng.getrandbits(128):032x}",
                }
            ],
        },
        "spec": spec,
        "status": status,
    }


def dump(nodes: int, seed: int, pending: int = 300) -> dict[str, Any]:
    """The kubectl List of a cluster of ``nodes`` nodes (about 9 pods each, ``pending`` pending)."""
    rng = random.Random(seed)
    node_objs = [_node(i, rng) for i in range(nodes)]
    items: list[dict[str, Any]] = list(node_objs)
    namespaces = [f"team-{k}" for k in range(40)]
    for node in node_objs:
        gpu = "taints" in node["spec"]
        for _ in range(9):
            app = f"svc-{rng.randrange(400)}"
            items.append(_pod(app, rng.choice(namespaces), node["metadata"]["name"], rng, gpu and rng.random() < 0.2))
    for _ in range(pending):
        items.append(_pod(f"svc-{rng.randrange(400)}", rng.choice(namespaces), None, rng, rng.random() < 0.05))
    return {"apiVersion": "v1", "kind": "List", "items": items, "metadata": {"resourceVersion": ""}}


def write_dump(path: Path, nodes: int, seed: int) -> None:
    """Write the dump on one line (``kubectl get -o json | jq -c``) unless it is already there."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(dump(nodes, seed)) + "\n", encoding="utf-8")


_READ_ONLY = (
    "import sys, time; from placer.inputs import load_cluster; t = time.monotonic(); "
    "c = load_cluster(sys.argv[1]); print(time.monotonic() - t, len(c.pods))"
)


def _run(program: str, args: list[str], cwd: Path) -> tuple[float, float, str]:
    """(wall seconds, peak MB, stdout) of one subprocess. The peak is the largest of any child of
    this process so far: ``_once`` runs the solve first, in a fresh wrapper."""
    started = time.monotonic()
    done = subprocess.run([program, *args], cwd=cwd, capture_output=True, text=True, check=True)
    wall = time.monotonic() - started
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return wall, peak / 1024, done.stdout


def measure(checkout: Path, dump_path: Path, limit: float) -> dict[str, float]:
    python = str(checkout / ".venv" / "bin" / "python")
    wall, peak, out = _run(
        str(checkout / ".venv" / "bin" / "placer"),
        ["solve", str(dump_path), "--time-limit", str(limit), "-o", "json"],
        checkout,
    )
    metrics = json.loads(out)["metrics"]
    read = metrics.get("read_seconds")
    if read is None:
        read = float(_run(python, ["-c", _READ_ONLY, str(dump_path)], checkout)[2].split()[0])
    return {
        "read": read,
        "total": wall,
        "peak": peak,
        "decision": metrics["solve_seconds"],
    }


def _once(checkout: Path, path: Path, limit: float) -> dict[str, float]:
    """One measurement in a fresh interpreter: the children's maxrss is a running maximum, so
    each run's peak is read by its own wrapper."""
    code = (
        "import json; from pathlib import Path; from benchmarks.bigdump import measure; "
        f"print(json.dumps(measure(Path({str(checkout)!r}), Path({str(path)!r}), {limit})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    result: dict[str, float] = json.loads(out)
    return result


def _plot(rows: list[tuple[str, dict[str, float]]], png: Path) -> None:
    import matplotlib  # noqa: PLC0415  (the bench extra)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.5))
    labels = [label for label, _ in rows]
    for offset, key in enumerate(("read", "decision", "total")):
        left.bar([i + 0.27 * (offset - 1) for i in range(len(rows))], [r[key] for _, r in rows], 0.27, label=key)
    left.axhline(5, color="grey", ls=":", lw=1)
    left.axhline(16, color="grey", ls="--", lw=1)
    left.set_xticks(range(len(rows)), labels)
    left.set_ylabel("seconds (median)")
    left.legend()
    right.bar(labels, [r["peak"] for _, r in rows], color="tab:purple")
    right.axhline(1024, color="grey", ls="--", lw=1)
    right.set_ylabel("peak MB (median)")
    fig.suptitle("placer solve on the 5,000-node dump: read <= 5 s, total <= 16 s, peak <= 1 GB")
    fig.tight_layout()
    fig.savefig(png, dpi=100)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=32)
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--repeat", type=int, default=3, help="runs per checkout, interleaved; medians reported")
    ap.add_argument("--dump", type=Path, default=Path.home() / ".cache" / "placer" / "bigdump-{nodes}-{seed}.json")
    ap.add_argument("--baseline", type=Path, help="a checkout of main with its own .venv")
    ap.add_argument("--out", type=Path, help="the Markdown report (a PNG beside it)")
    args = ap.parse_args()
    path = Path(str(args.dump).format(nodes=args.nodes, seed=args.seed))
    write_dump(path, args.nodes, args.seed)
    size = path.stat().st_size / 1e6
    checkouts = [(label, c) for label, c in (("main", args.baseline), ("this branch", Path.cwd())) if c is not None]
    runs: dict[str, list[dict[str, float]]] = {label: [] for label, _ in checkouts}
    load_start = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    for _ in range(args.repeat):
        for label, checkout in checkouts:
            runs[label].append(_once(checkout, path, args.time_limit))
            print(label, runs[label][-1], flush=True)
    keys = ("read", "decision", "total", "peak")
    rows = [(label, {k: statistics.median(r[k] for r in runs[label]) for k in keys}) for label, _ in checkouts]
    command = "python -m benchmarks.bigdump " + " ".join(sys.argv[1:])
    lines = report_header(
        "Reading a 100 MB kubectl dump (issue 32 item 2)", command, machine_info(), load_start=load_start
    )
    lines += [
        f"Dump: {args.nodes} nodes, {args.nodes * 9 + 300} pods (300 pending), {size:.0f} MB of kubectl JSON "
        f"(`benchmarks/bigdump.py`, seed {args.seed}). {args.repeat} runs per checkout, interleaved, each in its "
        f"own process; medians. `read` is `metrics.read_seconds` (main: `load_cluster` timed alone), `decision` "
        f"`metrics.solve_seconds`, `total` the wall time of `placer solve DUMP --time-limit {args.time_limit:g} "
        "-o json` (interpreter start and output included), `peak` its maxrss. The machine is shared with other "
        "jobs: compare within the table.",
        "",
        "| checkout | read s | decision s | total s | peak MB |",
        "|---|---|---|---|---|",
    ]
    for label, r in rows:
        lines.append(f"| {label} | {r['read']:.2f} | {r['decision']:.2f} | {r['total']:.2f} | {r['peak']:.0f} |")
    if len(rows) == 2:
        a, b = rows[0][1], rows[1][1]
        lines.append("| ratio | " + " | ".join(f"{b[k] / a[k]:.2f}" for k in keys) + " |")
    lines += ["", "Targets (issue 32): read <= 5 s, total <= 16 s, peak <= 1024 MB.", ""]
    if args.out is not None:
        png = args.out.with_suffix(".png")
        _plot(rows, png)
        lines += [f"![read, decision, total and peak per checkout]({png.name})", ""]
        args.out.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
