"""End-to-end: a 5,000-pod gang decided and bound while a stream of plain pods keeps arriving
(issue 30's last target, live half): placer vs kube-scheduler 1.37.2 with its gang plugin, one
real control plane (testenv ``Cluster(workloads=True)``, benchmarks/e2e_gangs.py's).

Cluster: ``--nodes`` kwok nodes of 16 cpu / 64Gi / 110 pods (benchmarks/e2e.py's). The gang: one
``scheduling.k8s.io/v1beta1`` Workload and its PodGroup, gang ``minCount`` = ``--gang`` (no
topology constraint), members of ``--cpu`` / ``--memory`` (e2e_gangs.members). The stream: plain
pods of the same size, ``--rate`` per second from one pacing thread (4 posting threads), for at
least ``--seconds`` and until ``--tail`` seconds after the gang is fully bound; the gang's members
are created ``--gang-at`` seconds into the stream, all at once (16 threads).

Per scheduler (kube-scheduler, then placer with the shipped k8s/config.yaml, both running while
the pods are created): a fresh namespace, a raw watch recording each pod's first bind. Reported:
- the gang: when its last member was created (``complete``), its first and last bind, members
  bound at the end (0 partial: all or none); for placer also its solves from its log (every batch
  holding gang members: size, placed, the solve's seconds and budget);
- the stream, per pod: bind - creation, split by when the pod was created: while the gang was
  being decided (complete .. its first bind), while it was being bound (first .. last bind), and
  the others; p50 / p99 / max of each, and the longest gap between two binds of stream pods.

Writes docs/bench/e2e-biggang.md, .json and .png (stream latency over time, both schedulers).

  python -m benchmarks.e2e_biggang --nodes 1000 --gang 5000 --rate 10 --seconds 60
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "e2e"))

import kube_helpers as kh  # noqa: E402

from benchmarks import e2e  # noqa: E402
from benchmarks import e2e_gangs as eg  # noqa: E402
from benchmarks.e2e_shapes import POD_GROUP_API, Json  # noqa: E402
from testenv import cluster as testenv  # noqa: E402

GANG_NAME = "big"
DECIDING, BINDING, OTHER = "while the gang was decided", "while the gang was bound", "the others"

# placer's log line for a batch's answer (placer/kube/cycle.py SchedulingCycle.apply), after
# logging's "%(asctime)s %(levelname)s %(name)s: " prefix (cli/app.py).
_BATCH = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) \w+ placer\.controller: batch of (\d+): (\d+) placed \(binding\), "
    r"(\d+) unplaced; decided in ([\d.]+)s of a ([\d.]+)s budget"
)


def batch_solves(log_text: str, at_least: int) -> list[dict[str, float]]:
    """placer's batch answers of at least ``at_least`` pods in its log: when each was applied
    (epoch seconds, the log's local clock), the batch's size, placed, unplaced, the solve's
    seconds and its budget."""
    out = []
    for line in log_text.splitlines():
        m = _BATCH.match(line)
        if m is None or int(m[2]) < at_least:
            continue
        stamp = datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S,%f").timestamp()
        out.append({"at": stamp, "pods": int(m[2]), "placed": int(m[3]), "unplaced": int(m[4]),
                    "seconds": float(m[5]), "budget": float(m[6])})  # fmt: skip
    return out


def longest_gap(times: list[float]) -> tuple[float, float]:
    """The longest time between two consecutive ``times`` and when it began (0, nan: fewer than
    two)."""
    ts = sorted(times)
    if len(ts) < 2:
        return 0.0, float("nan")
    gaps = np.diff(ts)
    k = int(np.argmax(gaps))
    return float(gaps[k]), ts[k]


def latency_stats(
    created: dict[str, float], bound: dict[str, float], windows: dict[str, tuple[float, float]], rest: str
) -> dict[str, dict[str, float]]:
    """Bind latency (bind - creation) of the pods in ``created``, split by the first of
    ``windows`` (name -> [start, end]) their creation falls in, ``rest`` for the others: per part
    the pods, those bound, p50 / p99 / max of the bound ones (nan: none bound)."""
    parts: dict[str, list[str]] = {name: [] for name in (*windows, rest)}
    for pod, t in created.items():
        part = next((name for name, (a, b) in windows.items() if a <= t <= b), rest)
        parts[part].append(pod)
    out = {}
    for name, pods in parts.items():
        lat = np.array([bound[p] - created[p] for p in pods if p in bound])
        some = len(lat) > 0
        out[name] = {
            "pods": len(pods),
            "bound": len(lat),
            "p50": float(np.percentile(lat, 50)) if some else float("nan"),
            "p99": float(np.percentile(lat, 99)) if some else float("nan"),
            "max": float(lat.max()) if some else float("nan"),
        }
    return out


def stream_pod(k: int, cpu: str, memory: str) -> Json:
    spec: Json = {
        "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
        "terminationGracePeriodSeconds": 0,
        "automountServiceAccountToken": False,
    }  # fmt: skip
    meta = {"name": f"s-{k:05d}", "labels": {"bench": "e2e-biggang"}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


class BigGangBench(eg.GangBench):
    """benchmarks/e2e.py's control plane and nodes (e2e_gangs.py's bench), running the gang-in-a-stream case."""

    def stream_case(self, who: str) -> dict[str, Any]:
        args = self.args
        ns = kh.create_namespace(self.core, kh.unique(f"biggang-{'ks' if who == 'kube-scheduler' else 'pl'}"))
        gang = eg.Gang(GANG_NAME, args.gang, topology=None, cpu=args.cpu, memory=args.memory)
        self._post(f"/apis/{POD_GROUP_API}/namespaces/{ns}/workloads", eg.workload(gang))
        self._post(f"/apis/{POD_GROUP_API}/namespaces/{ns}/podgroups", eg.pod_group(gang))
        tmp = Path(args.logs or self.c.workdir or "/tmp")
        tmp.mkdir(parents=True, exist_ok=True)
        proc = self._placer(tmp, ns, None) if who == "placer" else None
        scheduler = "placer" if who == "placer" else None
        watch = e2e.BindWatch(self.http, ns)
        stream: dict[str, float] = {}
        stop = threading.Event()
        t0 = time.time()
        pacer = threading.Thread(target=self._stream, args=(ns, scheduler, stream, stop, t0), daemon=True)
        names: list[str] = []
        try:
            pacer.start()
            time.sleep(max(0.0, t0 + args.gang_at - time.time()))
            e2e.log(f"  {who}: creating the gang of {args.gang}")
            gang_created = self._create(ns, eg.members(gang), scheduler)
            names = list(gang_created)
            complete = max(gang_created.values())
            e2e.log(f"  {who}: gang created in {complete - min(gang_created.values()):.1f}s")
            cap = time.monotonic() + args.cap
            last_count, last_change = -1, time.monotonic()
            while time.monotonic() < cap:
                bound = sum(1 for n in gang_created if n in watch.bound)
                if bound == len(gang_created) and not stop.is_set():
                    gang_done = max(watch.bound[n] for n in gang_created)
                    if time.time() >= max(gang_done + args.tail, t0 + args.seconds):
                        stop.set()
                        pacer.join()
                if stop.is_set() and all(n in watch.bound for n in stream):
                    break
                count = len(watch.bound)
                if count != last_count:
                    last_count, last_change = count, time.monotonic()
                elif time.monotonic() - last_change > args.stall and time.time() > t0 + args.seconds:
                    e2e.log(f"  {who}: no bind for {args.stall:g}s, ending")
                    break
                time.sleep(0.5)
            stop.set()
            pacer.join()
            alive = self._alive(ns)
        finally:
            stop.set()
            watch.stop()
            self._stop(proc)
        try:
            solves = batch_solves((tmp / f"placer-{ns}.log").read_text(), 2) if who == "placer" else []
            return self._row(who, ns, t0, gang_created, stream, watch, alive, solves)
        finally:
            self._clean(ns, names + list(stream))

    def _stream(self, ns: str, scheduler: str | None, out: dict[str, float], stop: threading.Event, t0: float) -> None:
        """Plain pods at ``--rate`` per second until ``stop``: creation time (the POST's answer) per pod."""
        with ThreadPoolExecutor(4) as pool:
            k = 0
            while not stop.is_set():
                time.sleep(max(0.0, t0 + k / self.args.rate - time.time()))
                pod = stream_pod(k, self.args.cpu, self.args.memory)
                if scheduler:
                    pod["spec"]["schedulerName"] = scheduler
                name = pod["metadata"]["name"]
                pool.submit(lambda p=pod, n=name: out.__setitem__(n, self._post(f"/api/v1/namespaces/{ns}/pods", p)))
                k += 1

    def _row(
        self,
        who: str,
        ns: str,
        t0: float,
        gang_created: dict[str, float],
        stream: dict[str, float],
        watch: e2e.BindWatch,
        alive: set[str],
        solves: list[dict[str, float]],
    ) -> dict[str, Any]:
        gang_bound = [watch.bound[n] for n in gang_created if n in watch.bound and n in alive]
        complete = max(gang_created.values())
        first = min(gang_bound, default=float("nan"))
        last = max(gang_bound, default=float("nan"))
        windows = {DECIDING: (complete, first), BINDING: (first, last)} if gang_bound else {DECIDING: (complete, 1e18)}
        stream_bound = {n: watch.bound[n] for n in stream if n in watch.bound}
        gap, gap_at = longest_gap(list(stream_bound.values()))
        rel = {n: t - t0 for n, t in stream.items()}
        return {
            "who": who,
            "namespace": ns,
            "gang": len(gang_created),
            "gang_created_from": min(gang_created.values()) - t0,
            "gang_complete": complete - t0,
            "gang_first_bind": first - t0,
            "gang_last_bind": last - t0,
            "gang_bound": len(gang_bound),
            "partial": int(0 < len(gang_bound) < len(gang_created)),
            "decided_after": first - complete,  # complete -> first bind (client clocks)
            "bound_after": last - complete,  # complete -> the whole gang bound
            "solves": [{**s, "at": s["at"] - t0} for s in solves],
            "ended": time.time() - t0,  # the row is made when the run ends
            "stream": len(stream),
            "stream_bound": len(stream_bound),
            "stream_stats": latency_stats(stream, stream_bound, windows, OTHER),
            "longest_gap": gap,
            "longest_gap_at": gap_at - t0,
            # per stream pod: created (s from the stream's start), latency (nan: never bound)
            "points": sorted(
                (rel[n], stream_bound[n] - stream[n] if n in stream_bound else float("nan")) for n in stream
            ),
        }


def measure(args: argparse.Namespace, out_json: Path) -> dict[str, Any]:
    result = eg.new_result(args)
    with eg.gang_cluster(args) as c:
        e2e.log("control plane up")
        bench = BigGangBench(c, args.nodes, args)
        for who in args.who:
            e2e.log(f"{who}: gang of {args.gang} in a stream of {args.rate:g}/s")
            try:
                row = bench.stream_case(who)
            except Exception as exc:  # one failed run is reported, the other still runs
                e2e.log(f"{who} failed: {type(exc).__name__}: {exc}")
                continue
            result["rows"].append(row)
            e2e.log(json.dumps({k: v for k, v in row.items() if k != "points"}))
            out_json.write_text(json.dumps(result, indent=1) + "\n")
    result["load_end"] = os.getloadavg()
    out_json.write_text(json.dumps(result, indent=1) + "\n")
    return result


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    """Stream pods' bind latency against their creation time, one panel per scheduler, the gang's
    deciding and binding spans shaded."""
    fig = Figure(figsize=(11, 4.5))
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, max(len(rows), 1), squeeze=False)[0]
    for ax, r in zip(axes, rows, strict=False):
        pts = np.array(r["points"], dtype=float).reshape(-1, 2)
        ok = ~np.isnan(pts[:, 1])
        ax.scatter(pts[ok, 0], pts[ok, 1], s=6, label="stream pod: bind - creation")
        if (~ok).any():  # never bound: how long it had waited when the run ended (a lower bound)
            ended = r.get("ended", float(pts[:, 0].max()))
            ax.scatter(pts[~ok, 0], ended - pts[~ok, 0], s=6, marker="x", color="tab:red",
                       label="stream pod never bound: waited at least")  # fmt: skip
        ax.axvspan(r["gang_created_from"], r["gang_complete"], color="0.85", label="gang being created")
        if r["gang_bound"]:
            ax.axvspan(r["gang_complete"], r["gang_first_bind"], color="tab:red", alpha=0.2, label="gang decided")
            ax.axvspan(r["gang_first_bind"], r["gang_last_bind"], color="tab:orange", alpha=0.2, label="gang bound")
        ax.set_title(f"{r['who']}: gang {r['gang_bound']}/{r['gang']} bound")
        ax.set_xlabel("stream pod created, s from the stream's start")
        ax.legend(fontsize=8, loc="upper left")
    for ax in axes:
        ax.set_ylabel("bind latency, s")
    fig.suptitle("plain pods arriving around a 5,000-pod gang, placer vs kube-scheduler 1.37.2")
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def report(result: dict[str, Any], png: str) -> str:
    args, rows, m = result["args"], result["rows"], result["machine"]
    shown = ("nodes", "gang", "rate", "seconds", "gang_at", "tail", "window", "time_limit", "max_solve")
    flags = " ".join(f"--{k.replace('_', '-')} {args[k]:g}" for k in shown if args.get(k) is not None)
    title = "# End-to-end: a 5,000-pod gang while other pods keep arriving, placer vs kube-scheduler 1.37.2"
    lines = [
        title,
        "",
        f"Command: `python -m benchmarks.e2e_biggang {flags}` ({m['date']}, placer at {m['revision']}).",
        "",
    ]
    lines += [
        eg.machine_line(result) + " so latencies are same-run comparisons, not absolute figures.",
        "",
        f"Control plane: testenv (Kubernetes {testenv.read_versions()['K8S_VERSION']}) with "
        f"`--feature-gates={testenv.WORKLOAD_GATES_VALUE}` and `--runtime-config={testenv.WORKLOAD_RUNTIME_VALUE}`; "
        f"kube-scheduler's default profile (GangScheduling on). {args['nodes']} kwok nodes of 16 cpu / 64Gi / 110 "
        f"pods. Both schedulers: client QPS {args['qps']:g} / burst {args['burst']}; placer: the shipped "
        f"k8s/config.yaml with batchWindowSeconds {args['window']:g}"
        + (f" and solver timeLimit {args['time_limit']:g} s" if args.get("time_limit") is not None else "")
        + ".",
        "",
        f"Load: one `scheduling.k8s.io/v1beta1` Workload + PodGroup, gang minCount {args['gang']}, no topology "
        f"constraint; its {args['gang']} pods ({args['cpu']} cpu / {args['memory']}) created {args['gang_at']:g} s "
        f"into a stream of plain pods of the same size at {args['rate']:g}/s (one pacing thread), which runs for "
        f"at least {args['seconds']:g} s and until {args['tail']:g} s after the gang is fully bound. Both schedulers "
        "run while the pods are created; kube-scheduler first, then placer, on the same empty nodes. Times are "
        "this process's clocks: a pod's creation is its POST's answer, its bind the first watch event with a "
        "nodeName. The gang is *complete* when its last member was created, *decided* at its first bind, *bound* "
        "at its last.",
        "",
        "## The gang",
        "",
        "| scheduler | members bound | partial | created in (s) | complete -> first bind (s) "
        "| complete -> all bound (s) | placer's solves of batches over 99 pods, i.e. of gang members "
        "(pods: placed, solve s / budget s) |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        solves = "; ".join(
            f"{s['pods']}: {s['placed']}, {s['seconds']:.2f} / {s['budget']:.2f}"
            for s in r["solves"]
            if s["pods"] > 99  # larger than the shipped batchSize: only a gang makes such a batch
        )
        lines.append(
            f"| {r['who']} | {r['gang_bound']} / {r['gang']} | {r['partial']} "
            f"| {r['gang_complete'] - r['gang_created_from']:.1f} | {eg.fmt(r['decided_after'])} "
            f"| {eg.fmt(r['bound_after'])} | {solves} |"
        )
    lines += [
        "",
        "## The stream",
        "",
        "Bind latency (bind - creation) of the plain pods, by when they were created.",
        "",
        "| scheduler | stream pods created | bound | created ... | pods | bound | p50 (s) | p99 (s) | max (s) "
        "| longest gap between two stream binds (s, at) |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        for k, (part, st) in enumerate(r["stream_stats"].items()):
            head = f"| {r['who']} | {r['stream']} | {r['stream_bound']} " if k == 0 else "| | | "
            gap = f"{r['longest_gap']:.2f} (t = {r['longest_gap_at']:.0f} s)" if k == 0 else ""
            lines.append(
                head
                + f"| {part} | {st['pods']} | {st['bound']} | "
                + " | ".join(eg.fmt(st[k]) for k in ("p50", "p99", "max"))
                + f" | {gap} |"
            )
    lines += ["", f"![stream latency over time]({png})"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="A big gang while plain pods keep arriving (issue 30).")
    ap.add_argument("--nodes", type=int, default=1000, help="kwok nodes of 16 cpu / 64Gi / 110 pods")
    ap.add_argument("--gang", type=int, default=5000, help="the gang's pods (= its minCount)")
    ap.add_argument("--cpu", default="100m", help="every pod's cpu request")
    ap.add_argument("--memory", default="128Mi", help="every pod's memory request")
    ap.add_argument("--rate", type=float, default=10.0, help="stream pods per second")
    ap.add_argument("--seconds", type=float, default=60.0, help="the stream's least duration")
    ap.add_argument("--gang-at", type=float, default=10.0, help="the gang is created this long into the stream")
    ap.add_argument("--tail", type=float, default=15.0, help="the stream goes on this long after the gang is bound")
    ap.add_argument("--who", nargs="+", default=list(e2e.WHO), choices=e2e.WHO)
    eg.placer_args(ap)
    ap.add_argument("--stall", type=float, default=60.0, help="end a run when nothing was bound this long")
    ap.add_argument("--cap", type=float, default=300.0, help="end a run this long after the gang was created")
    ap.add_argument("--logs", help="keep placer's configuration and log here (default: the cluster's workdir)")
    ap.add_argument("--from-json", help="rewrite the report from a results file, measuring nothing")
    ap.add_argument("--out", default=str(REPO / "docs" / "bench" / "e2e-biggang.md"))
    args = ap.parse_args(argv)
    return eg.write_report(args, measure, plot, report)


if __name__ == "__main__":
    raise SystemExit(main())
