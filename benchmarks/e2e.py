"""make bench-e2e: placer vs kube-scheduler on scheduler_perf-style workload shapes, one real
control plane (testenv), identical kwok nodes and identical pod streams.

Per cluster: ``--nodes`` kwok nodes (16 cpu / 64Gi, 10 zones), created once. Per shape
(benchmarks/e2e_shapes.py) and scheduler, one after the other: a fresh namespace, the shape's
pods created as fast as 16 client threads can POST them (a filler phase first where the shape has
one, created and bound before the measured pods), a raw watch recording when each pod is first
seen bound; then the namespace's pods are deleted and the next run starts on empty nodes.

By default the measured pods are a backlog, as scheduler_perf measures throughput: the scheduler
under test is stopped (SIGSTOP) while they are created and resumed (SIGCONT) once all exist, so
that the 16 Python creators on this 2-core machine do not set the pace (``--stream``: schedulers
run while pods are created).

Figures per run (measured pods only):
- pods/s = bound / (last bind - resumption; with --stream: first creation); the creation rate is
  shown beside it;
- first bind, p50 and p99 of bind time - resumption (with --stream: creation; client-side clocks of
  this process);
- pods left pending when no bind happened for ``--stall`` seconds (or at ``--cap``);
- imbalance and std_score of the final state (placer.metrics.balance_metrics);
- for gangs, partial gangs (some but not all members bound).

Both schedulers get the same client QPS/burst (``--qps/--burst``): kube-scheduler through its
KubeSchedulerConfiguration (clientConnection), placer through apiQPS/apiBurst (events: the same
numbers on their own client). Gangs run in a cluster of their own with the Workload API and
kube-scheduler's gang plugin on. Writes docs/bench/e2e.md, docs/bench/e2e.json and PNG plots.

  python -m benchmarks.e2e --nodes 1000 --pods 2000 --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

import matplotlib
import numpy as np
import yaml
from kubernetes import client, config

matplotlib.use("Agg")
import matplotlib.pyplot as plt

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "e2e"))

import kube_helpers as kh  # noqa: E402

from benchmarks import e2e_shapes as shapes_mod  # noqa: E402
from benchmarks.e2e_shapes import (  # noqa: E402
    GANG_SIZE,
    POD_GROUP_API,
    PRIORITIES,
    Json,
    Shape,
    gang_name,
    node_labels,
)
from placer.inputs.kubectl import parse_node, parse_pod  # noqa: E402
from placer.kube.client import Http, api_client  # noqa: E402
from placer.kube.policy import Timeouts  # noqa: E402
from placer.metrics import balance_metrics  # noqa: E402
from testenv import cluster as testenv  # noqa: E402

WHO = ("kube-scheduler", "placer")
BIND_ONLY = "bind-only"  # --ceiling: benchmarks/bindonly.py, binds without decisions
RUNNERS = (*WHO, BIND_ONLY)
SHIPPED_CONFIG = REPO / "k8s" / "config.yaml"  # placer runs with it, changing only window, QPS, port, election
TIMEOUTS = Timeouts(connect=10, read=60)
# The gang cluster: testenv's Cluster(workloads=True) (1.37's workload APIs, kube-scheduler's gang
# and topology plugins); the report names the gates and APIs from there.
GANG_GATES, GANG_RUNTIME = testenv.WORKLOAD_GATES_VALUE, testenv.WORKLOAD_RUNTIME_VALUE


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


class BindWatch:
    """A raw watch on one namespace's pods: the first time each is seen with spec.nodeName."""

    def __init__(self, http: Http, namespace: str) -> None:
        self.http, self.namespace = http, namespace
        self.bound: dict[str, float] = {}
        self.node: dict[str, str] = {}
        self._stop = threading.Event()
        self._version = ""
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        path = f"/api/v1/namespaces/{self.namespace}/pods"
        while not self._stop.is_set():
            try:
                query: dict[str, Any] = {"watch": "true", "timeoutSeconds": 60, "allowWatchBookmarks": "true"}
                if self._version:
                    query["resourceVersion"] = self._version
                resp = self.http.stream(path, Timeouts(connect=10, read=90), query=query)
                buf = b""
                for chunk in resp.stream(65536):
                    buf += chunk
                    *lines, buf = buf.split(b"\n")
                    for line in lines:
                        self._event(json.loads(line))
                    if self._stop.is_set():
                        break
                resp.release_conn()
            except Exception:
                self._version = ""
                time.sleep(0.2)

    def _event(self, ev: Json) -> None:
        obj = ev.get("object") or {}
        meta = obj.get("metadata") or {}
        self._version = str(meta.get("resourceVersion") or self._version)
        if ev.get("type") == "ERROR":
            self._version = ""
            return
        node = (obj.get("spec") or {}).get("nodeName")
        name = meta.get("name")
        if node and name and name not in self.bound:
            self.bound[name] = time.time()
            self.node[name] = node

    def stop(self) -> None:
        self._stop.set()


class Bench:
    """One control plane with its kwok nodes; runs shapes on it one after the other."""

    def __init__(self, c: testenv.Cluster, nodes: int, args: argparse.Namespace) -> None:
        self.c, self.args = c, args
        self.api = config.new_client_from_config(config_file=str(c.kubeconfig))
        self.core = client.CoreV1Api(self.api)
        raw = api_client(str(c.kubeconfig), "bench")
        raw.configuration.connection_pool_maxsize = 32
        self.http = Http(client.ApiClient(raw.configuration))
        self.names = [f"bench-{i}" for i in range(nodes)]
        t = time.monotonic()
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(self._node, range(nodes)))
        kh.wait_for(f"{nodes} nodes Ready", self._all_ready, timeout=600, interval=2.0)
        log(f"{nodes} nodes ready in {time.monotonic() - t:.0f}s")
        for name, value in PRIORITIES.items():
            self._post(
                "/apis/scheduling.k8s.io/v1/priorityclasses",
                {
                    "apiVersion": "scheduling.k8s.io/v1",
                    "kind": "PriorityClass",
                    "metadata": {"name": name},
                    "value": value,
                },
            )

    def _all_ready(self) -> bool:
        mine = set(self.names)
        ready = [n for n in self.core.list_node().items if n.metadata.name in mine and kh.node_is_ready(n)]
        return len(ready) == len(mine)

    def _node(self, i: int) -> None:
        node = kh.node_manifest(self.names[i], cpu="16", memory="64Gi", labels=node_labels(i))
        self._post("/api/v1/nodes", self.api.sanitize_for_serialization(node))

    def _post(self, path: str, body: Json) -> float:
        for attempt in range(5):
            resp = self.http.request("POST", path, TIMEOUTS, body=body)
            if resp.status < 300 or resp.status == 409:
                return time.time()
            time.sleep(0.2 * (attempt + 1))
        raise RuntimeError(f"POST {path}: {resp.status} {resp.data[:200]!r}")

    def _create(self, ns: str, pods: list[Json], scheduler: str | None) -> dict[str, float]:
        def one(pod: Json) -> tuple[str, float]:
            if scheduler:
                pod = {**pod, "spec": {**pod["spec"], "schedulerName": scheduler}}
            return pod["metadata"]["name"], self._post(f"/api/v1/namespaces/{ns}/pods", pod)

        with ThreadPoolExecutor(16) as pool:
            return dict(pool.map(one, pods))

    def _wait(self, watch: BindWatch, names: Iterable[str]) -> None:
        want = set(names)
        last, count = time.monotonic(), -1
        cap = time.monotonic() + self.args.cap
        while time.monotonic() < cap:
            done = sum(1 for n in want if n in watch.bound)
            if done == len(want):
                return
            if done != count:
                last, count = time.monotonic(), done
            elif time.monotonic() - last > self.args.stall:
                return
            time.sleep(0.5)

    def _adjust(self, config: dict[str, Any]) -> dict[str, Any]:
        """A subclass's hook: placer's configuration for the next run (here: as given)."""
        return config

    def _placer(self, tmp: Path, tag: str, profile: Path | None) -> subprocess.Popen[bytes]:
        port = testenv.free_ports(1)[0]
        cfg = tmp / f"placer-{tag}.yaml"
        # The shipped configuration (k8s/config.yaml), with only what the benchmark controls changed.
        shipped = yaml.safe_load(SHIPPED_CONFIG.read_text())
        shipped.update(
            {
                "batchWindowSeconds": self.args.window,
                "metricsPort": port,
                "apiQPS": self.args.qps,
                "apiBurst": self.args.burst,
                "leaderElection": {"enabled": False},
            }
        )
        if self.args.time_limit is not None:
            shipped["engine"]["solver"]["timeLimit"] = self.args.time_limit
        if self.args.max_solve is not None:
            shipped["maxSolveSeconds"] = self.args.max_solve
        cfg.write_text(yaml.safe_dump(self._adjust(shipped)))
        cmd = [
            str(Path(sys.executable).parent / "placer"),
            "run",
            "--kubeconfig",
            str(self.c.kubeconfig),
            "--config",
            str(cfg),
        ]
        if profile is not None:
            spy = Path(sys.executable).parent / "py-spy"
            # --gil: only samples holding the GIL, so the profile shows where placer's Python CPU goes
            # (threads waiting for the API server are left out; CP-SAT's native workers too).
            cmd = [str(spy), "record", "--gil", "--format", "raw", "--rate", "100", "-o", str(profile), "--", *cmd]
        proc = subprocess.Popen(
            cmd, stdout=(tmp / f"placer-{tag}.log").open("ab"), stderr=subprocess.STDOUT, start_new_session=True
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
                    if r.status == 200:
                        break
            except Exception:
                time.sleep(0.5)
        return proc

    def _binder(self, tmp: Path, ns: str) -> subprocess.Popen[bytes]:
        """The ceiling: benchmarks/bindonly.py on ``ns``, with placer's QPS and bind workers."""
        shipped = yaml.safe_load(SHIPPED_CONFIG.read_text())
        cmd = [sys.executable, "-m", "benchmarks.bindonly", "--kubeconfig", str(self.c.kubeconfig), "--namespace",
               ns, "--scheduler-name", BIND_ONLY, "--workers", str(shipped["bindWorkers"]), "--qps",
               str(self.args.qps), "--burst", str(self.args.burst)]  # fmt: skip
        log_file = (tmp / f"bind-only-{ns}.log").open("ab")
        return subprocess.Popen(cmd, cwd=REPO, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True)

    def run(self, shape: Shape, who: str, run: int, profile: Path | None = None) -> dict[str, Any]:
        tag = {"kube-scheduler": "ks", "placer": "pl"}.get(who, "bo")
        ns = kh.create_namespace(self.core, kh.unique(f"{shape.name}-{tag}"))
        for group in shape.pod_groups(self.args.pods):
            self._post(f"/apis/{POD_GROUP_API}/namespaces/{ns}/podgroups", group)
        tmp = Path(self.args.logs or self.c.workdir or "/tmp")
        tmp.mkdir(parents=True, exist_ok=True)
        proc = None  # kube-scheduler: the control plane's own
        if who == "placer":
            proc = self._placer(tmp, ns, profile)
        elif who == BIND_ONLY:
            proc = self._binder(tmp, ns)
        scheduler = who if who in ("placer", BIND_ONLY) else None
        watch = BindWatch(self.http, ns)
        phases = shape.phases(self.args.pods)
        created: dict[str, float] = {}
        t0 = time.monotonic()
        released = 0.0
        threads0: dict[int, float] = {}
        for phase in phases:
            if phase.measured and not self.args.stream:
                self._hold(proc, signal.SIGSTOP)
            made = self._create(ns, phase.pods, scheduler)
            if not phase.measured:
                self._wait(watch, made)
                log(f"  filler: {sum(1 for n in made if n in watch.bound)}/{len(made)} bound")
                continue
            created.update(made)
            create_end = max(made.values())
            cpu0 = self._cpu(proc)
            if profile is not None and proc is not None:
                threads0 = thread_cpu(placer_pid(proc.pid))
            if not self.args.stream:
                released = time.time()
                self._hold(proc, signal.SIGCONT)
        self._wait(watch, created)
        cpu = self._cpu(proc) - cpu0
        by_thread = cpu_by_thread(placer_pid(proc.pid), threads0) if profile is not None and proc is not None else None
        elapsed = time.monotonic() - t0
        watch.stop()
        if proc is not None:
            os.killpg(proc.pid, signal.SIGINT if profile is not None else signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        try:
            row = self._row(shape, who, run, ns, created, watch, released, create_end, elapsed)
            row["cpu_ms_per_pod"] = 1000 * cpu / max(row["bound"], 1)
            if by_thread is not None:
                row["cpu_by_thread"] = by_thread
            return row
        finally:  # the next run starts on empty nodes, whatever became of this one
            self._clean(ns, [p["metadata"]["name"] for phase in phases for p in phase.pods])

    def _row(
        self,
        shape: Shape,
        who: str,
        run: int,
        ns: str,
        created: dict[str, float],
        watch: BindWatch,
        released: float,
        create_end: float,
        elapsed: float,
    ) -> dict[str, Any]:
        bound = {n: watch.bound[n] for n in created if n in watch.bound}
        # Backlog mode: every pod waits from its release (the scheduler's resumption), not its creation.
        lat = np.array([bound[n] - max(created[n], released) for n in bound])
        first = released or min(created.values())
        last = max(bound.values(), default=first)
        imbalance, std = self._quality()
        row: dict[str, Any] = {
            "shape": shape.name,
            "who": who,
            "run": run,
            "created": len(created),
            "bound": len(bound),
            "pending": len(created) - len(bound),
            "pods_per_s": len(bound) / max(last - first, 1e-9),
            "create_per_s": len(created) / max(create_end - min(created.values()), 1e-9),
            "first": float(lat.min()) if len(lat) else float("nan"),
            "p50": float(np.percentile(lat, 50)) if len(lat) else float("nan"),
            "p99": float(np.percentile(lat, 99)) if len(lat) else float("nan"),
            "imbalance": imbalance,
            "std_score": std,
            "seconds": round(elapsed, 1),
        }
        if shape.gangs:
            members: dict[str, int] = {}
            for n in bound:
                members[gang_name(int(n.rsplit("-", 1)[1]))] = members.get(gang_name(int(n.rsplit("-", 1)[1])), 0) + 1
            row["partial_gangs"] = sum(1 for c in members.values() if 0 < c < GANG_SIZE)
            row["whole_gangs"] = sum(1 for c in members.values() if c == GANG_SIZE)
        return row

    def _group(self, proc: subprocess.Popen[bytes] | None) -> int:
        """The process group of the scheduler under test."""
        if proc is not None:
            return proc.pid
        return next(c for c in self.c.components if c.name == "kube-scheduler").pgid

    def _cpu(self, proc: subprocess.Popen[bytes] | None) -> float:
        """CPU seconds (user + system) used so far by the scheduler's process group, from /proc."""
        group, total = self._group(proc), 0.0
        for path in Path("/proc").glob("[0-9]*/stat"):
            stat = proc_stat(path)
            if stat is not None and stat.pgrp == group:
                total += stat.cpu
        return total

    def _hold(self, proc: subprocess.Popen[bytes] | None, sig: signal.Signals) -> None:
        """Stop (SIGSTOP) or resume (SIGCONT) the scheduler under test: the backlog is created
        while it is stopped, so that its throughput, not the creators', is measured."""
        os.killpg(self._group(proc), sig)

    def _quality(self) -> tuple[float, float]:
        raw_nodes = [self.api.sanitize_for_serialization(n) for n in self.core.list_node().items]
        mine = set(self.names)
        parsed = [parse_node(r) for r in raw_nodes if r["metadata"]["name"] in mine]
        used: dict[str, dict[str, int]] = {n.name: {} for n in parsed}
        resp = self.http.request("GET", "/api/v1/pods", TIMEOUTS)
        for raw in json.loads(resp.data)["items"]:
            pod = parse_pod({"kind": "Pod", **raw})
            if pod.node_name in used and pod.running:
                for r, q in pod.requests.items():
                    used[pod.node_name][r] = used[pod.node_name].get(r, 0) + q
        return balance_metrics([n.allocatable for n in parsed], [used[n.name] for n in parsed])

    def _clean(self, ns: str, names: Iterable[str]) -> None:
        """Delete the run's pods (grace 0, 16 at a time: a delete of the collection goes one pod at
        a time in kube-apiserver) and wait until the nodes are empty."""
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}

        def one(name: str) -> None:
            try:
                self.http.request("DELETE", f"/api/v1/namespaces/{ns}/pods/{name}", TIMEOUTS, body=body)
            except Exception as exc:
                log(f"  deleting {ns}/{name}: {type(exc).__name__}")

        with ThreadPoolExecutor(16) as pool:
            list(pool.map(one, names))
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            try:
                resp = self.http.request("GET", f"/api/v1/namespaces/{ns}/pods", TIMEOUTS, query={"limit": 1})
                if not json.loads(resp.data)["items"]:
                    break
            except Exception as exc:
                log(f"  listing {ns}: {type(exc).__name__}")
            time.sleep(2)
        kh.delete_namespace(self.core, ns)


# kwok posts node heartbeats every 20-45 s; on a loaded 2-core machine they lag, and with the
# default 50 s grace kube-controller-manager marks nodes NotReady (tainted) in the middle of a run.
GRACE = ["--node-monitor-grace-period=600s"]


def _cluster(args: argparse.Namespace, gangs: bool) -> testenv.Cluster:
    sched = {"clientConnection": {"qps": args.qps, "burst": args.burst}}
    if gangs:
        return testenv.Cluster(
            with_scheduler=True,
            scheduler_config=sched,
            workloads=True,
            controller_manager_args=GRACE,
        )
    return testenv.Cluster(with_scheduler=True, scheduler_config=sched, controller_manager_args=GRACE)


def measure(args: argparse.Namespace, out_json: Path) -> list[dict[str, Any]]:
    chosen = [s for s in shapes_mod.shapes(args.nodes) if not args.shapes or s.name in args.shapes]
    rows: list[dict[str, Any]] = []
    # --one-cluster: every shape on the gang cluster (feature gates on), saving a second set of nodes.
    for gangs in [True] if args.one_cluster else [False, True]:
        group = [s for s in chosen if s.gangs == gangs or args.one_cluster]
        if not group:
            continue
        with _cluster(args, gangs) as c:
            log(f"control plane up ({'gang cluster' if gangs else 'main cluster'})")
            bench = Bench(c, args.nodes, args)
            for shape in group:
                for run in range(args.runs if shape.name == "basic" else 1):
                    for who in RUNNERS if args.ceiling else WHO:
                        try:
                            row = bench.run(shape, who, run + 1)
                        except Exception as exc:  # one failed run is reported, the others still run
                            log(f"{shape.name} {who} run {run + 1} failed: {type(exc).__name__}: {exc}")
                            continue
                        rows.append(row)
                        log(json.dumps(row))
                        out_json.write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1) + "\n")
                if shape.name == "basic" and args.profile:
                    _profile(bench, shape, rows)
                    out_json.write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1) + "\n")
    return rows


def _profile(bench: Bench, shape: Shape, rows: list[dict[str, Any]]) -> None:
    """One more run of placer on ``shape`` under py-spy (not counted in the figures)."""
    if not (Path(sys.executable).parent / "py-spy").exists():
        log("--profile: py-spy is not installed in this venv (pip install py-spy); no profile")
        return
    raw = Path("/tmp") / f"placer-profile-{os.getpid()}.txt"  # kept: the cluster's workdir is not
    row = bench.run(shape, "placer", 0, profile=raw)
    row["profiled"] = True
    rows.append(row)
    log(json.dumps(row))
    (REPO / "docs" / "bench" / "e2e-profile.txt").write_text(thread_table(row) + "\n" + top_frames(raw))


class ProcStat(NamedTuple):
    comm: str
    pgrp: int
    cpu: float  # user + system seconds so far


def proc_stat(path: Path) -> ProcStat | None:
    """A /proc/<pid>/stat or /proc/<pid>/task/<tid>/stat file; None when the process or thread
    ended meanwhile."""
    try:
        text = path.read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()  # pgrp at 2; utime and stime at 11 and 12
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return ProcStat(text[text.index("(") + 1 : text.rindex(")")], int(fields[2]), cpu)


def placer_pid(group: int) -> int:
    """placer's process in ``group`` (under --profile the group's leader is py-spy)."""
    for path in Path("/proc").glob("[0-9]*/stat"):
        stat = proc_stat(path)
        if stat is not None and stat.pgrp == group and stat.comm != "py-spy":
            return int(path.parent.name)
    return group


def thread_cpu(pid: int) -> dict[int, float]:
    """CPU seconds (user + system) per live thread of ``pid`` so far, from /proc; key 0: the
    whole process (threads that ended included)."""
    whole = proc_stat(Path(f"/proc/{pid}/stat"))
    if whole is None:
        return {}
    out = {0: whole.cpu}
    for path in Path(f"/proc/{pid}/task").glob("*/stat"):
        stat = proc_stat(path)
        if stat is not None:
            out[int(path.parent.name)] = stat.cpu
    return out


def _thread_names(pid: int) -> dict[int, str]:
    """Python thread names by OS thread id (py-spy dump, without pausing the process)."""
    spy = Path(sys.executable).parent / "py-spy"
    try:
        cmd = [str(spy), "dump", "--json", "--nonblocking", "-p", str(pid)]
        out = subprocess.run(cmd, check=False, capture_output=True, timeout=30)
        threads = json.loads(out.stdout)
    except (OSError, subprocess.SubprocessError, ValueError):
        return {}
    return {int(t["os_thread_id"]): str(t["thread_name"]) for t in threads if t.get("os_thread_id")}


def cpu_by_thread(pid: int, before: dict[int, float]) -> dict[str, float]:
    """CPU seconds each kind of thread used since ``before`` (a pool's workers together; threads
    that are not Python's, CP-SAT's workers among them, as one)."""
    names = _thread_names(pid)
    now = thread_cpu(pid)
    out: dict[str, float] = {}
    for tid, seconds in now.items():
        if tid == 0:
            continue
        name = names.get(tid)
        kind = "live threads of native code" if name is None else re.sub(r"[_-]\d+$", "", name)
        out[kind] = out.get(kind, 0.0) + seconds - before.get(tid, 0.0)
    # CP-SAT starts its workers for each solve: they have ended by now, and only the process's
    # total still holds their time.
    ended = now.get(0, 0.0) - before.get(0, 0.0) - sum(out.values())
    out["threads that ended (CP-SAT's workers)"] = max(ended, 0.0)
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def thread_table(row: dict[str, Any]) -> str:
    """Where placer's CPU went in the profiled run, per kind of thread (from /proc)."""
    by_thread: dict[str, float] = row.get("cpu_by_thread") or {}
    total = sum(by_thread.values()) or 1.0
    lines = [
        f"CPU by thread while the {row['bound']} measured pods were scheduled (/proc/<pid>/task user+system time, "
        f"{total:.2f} s in all; thread names from py-spy dump):",
    ]
    lines += [f"{100 * s / total:5.1f}%  {s:6.2f} s  {kind}" for kind, s in by_thread.items()]
    lines += [
        "",
        "The samples below are py-spy's --gil samples: which Python code holds the GIL, in wall time. On a",
        "saturated machine a thread keeps the GIL while the kernel runs other processes, so a share there is",
        "not a share of CPU; the table above is.",
    ]
    return "\n".join(lines) + "\n"


def top_frames(raw: Path, n: int = 25) -> str:
    """py-spy's collapsed stacks -> the functions with the most samples, self and inclusive."""
    own: dict[str, int] = {}
    incl: dict[str, int] = {}
    threads: dict[str, int] = {}
    total = 0
    startup = 0
    for line in raw.read_text().splitlines():
        stack, _, count_s = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_s)
        frames = stack.split(";")
        if any("importlib._bootstrap" in f for f in frames):
            startup += count  # the interpreter importing placer: once per process, not per pod
            continue
        total += count
        threads[frames[0]] = threads.get(frames[0], 0) + count
        own[frames[-1]] = own.get(frames[-1], 0) + count
        for f in set(frames[1:]):
            incl[f] = incl.get(f, 0) + count
    out = [
        f"samples: {total} after start-up (py-spy record --gil --rate 100: samples holding the GIL; {startup} more "
        "samples importing modules at start-up left out)",
        "",
        "by thread:",
    ]
    out += [f"{100 * c / total:5.1f}%  {t}" for t, c in sorted(threads.items(), key=lambda kv: -kv[1])[:10]]
    out += ["", "self:"] + [f"{100 * c / total:5.1f}%  {f}" for f, c in sorted(own.items(), key=lambda kv: -kv[1])[:n]]
    out += ["", "inclusive:"] + [
        f"{100 * c / total:5.1f}%  {f}" for f, c in sorted(incl.items(), key=lambda kv: -kv[1])[:n]
    ]
    return "\n".join(out) + "\n"


def _median(rows: list[dict[str, Any]], key: str) -> float:
    return float(statistics.median(r[key] for r in rows))


def summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per shape and scheduler: medians over runs (one run except basic)."""
    out = []
    for shape in dict.fromkeys(r["shape"] for r in rows):
        per = {}
        for who in RUNNERS:
            mine = [r for r in rows if r["shape"] == shape and r["who"] == who and not r.get("profiled")]
            if mine:
                per[who] = {
                    k: _median(mine, k)
                    for k in (
                        "pods_per_s",
                        "create_per_s",
                        "p50",
                        "p99",
                        "pending",
                        "bound",
                        "created",
                        "imbalance",
                        "std_score",
                    )
                }
                per[who]["runs"] = len(mine)
                if "partial_gangs" in mine[0]:
                    per[who]["partial_gangs"] = _median(mine, "partial_gangs")
        if "kube-scheduler" in per and "placer" in per:
            ks, pl = per["kube-scheduler"], per["placer"]
            item = {"shape": shape, **per, "ratio": pl["pods_per_s"] / max(ks["pods_per_s"], 1e-9)}
            if BIND_ONLY in per:  # the most any scheduler on placer's client path could reach here
                item["ceiling"] = per[BIND_ONLY]["pods_per_s"] / max(ks["pods_per_s"], 1e-9)
            out.append(item)
    return out


def plots(summ: list[dict[str, Any]], out_dir: Path) -> list[str]:
    names = [s["shape"] for s in summ]
    x = np.arange(len(names))
    who_all = [w for w in RUNNERS if all(w in s for s in summ)]
    width = 0.8 / len(who_all)
    files = []
    for key, label, fname in (
        ("pods_per_s", "pods/s (higher is better)", "e2e-throughput.png"),
        ("p99", "p99 creation-to-bound, s (lower is better)", "e2e-p99.png"),
    ):
        fig, ax = plt.subplots(figsize=(10, 4))
        for k, who in enumerate(who_all):
            ax.bar(x + (k - (len(who_all) - 1) / 2) * width, [s[who][key] for s in summ], width, label=who)
        ax.set_xticks(x, names, rotation=20)
        ax.set_ylabel(label)
        ax.legend()
        if key == "pods_per_s":
            for i, s in enumerate(summ):
                ax.annotate(f"x{s['ratio']:.2f}", (i, max(s[w][key] for w in who_all)), ha="center", va="bottom")
        fig.tight_layout()
        fig.savefig(out_dir / fname, dpi=90)
        plt.close(fig)
        files.append(fname)
    return files


def _flags(args: argparse.Namespace) -> str:
    """The run's other flags that change what is measured, as given."""
    out = " --one-cluster" if args.one_cluster else ""
    out += " --stream" if args.stream else ""
    out += " --ceiling" if args.ceiling else ""
    out += f" --time-limit {args.time_limit:g}" if args.time_limit is not None else ""
    out += f" --max-solve {args.max_solve:g}" if args.max_solve is not None else ""
    out += f" --shapes {' '.join(args.shapes)}" if args.shapes else ""
    return out + (" --profile" if args.profile else "")


def report(args: argparse.Namespace, rows: list[dict[str, Any]], out: Path, history: str) -> str:
    summ = summary(rows)
    pngs = plots(summ, out.parent) if summ else []
    load = os.getloadavg()
    shipped = yaml.safe_load(SHIPPED_CONFIG.read_text())
    lines = [
        "# End-to-end benchmark: placer vs kube-scheduler on scheduler_perf-style shapes",
        "",
        f"Command: `python -m benchmarks.e2e --nodes {args.nodes} --pods {args.pods} --runs {args.runs} "
        f"--qps {args.qps:g} --burst {args.burst}{_flags(args)}` "
        f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}), "
        f"{os.cpu_count()} cores shared "
        f"with other work (load average at the end {load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f}).",
        "",
        "One control plane (testenv: etcd, kube-apiserver, kube-controller-manager, kube-scheduler "
        f"{testenv.read_versions()['K8S_VERSION']}, kwok) with "
        f"{args.nodes} kwok nodes of 16 cpu / 64Gi / 110 pods in 10 zones; "
        + ("all shapes on it, with" if args.one_cluster else "gangs in a second one with")
        + f" feature gates `{GANG_GATES}` and `--runtime-config={GANG_RUNTIME}`; kube-controller-manager with "
        "`--node-monitor-grace-period=600s` (kwok's heartbeats lag under load). "
        "Per shape, kube-scheduler then placer on the same "
        f"empty nodes and the same pods (16 creator threads POSTing bare pods as fast as they can). Both schedulers: "
        f"client QPS {args.qps:g} / burst {args.burst} (kube-scheduler: KubeSchedulerConfiguration clientConnection; "
        f"placer: apiQPS/apiBurst, events on their own client with the same numbers). placer: the shipped "
        f"k8s/config.yaml (batchSize {shipped['batchSize']}, {shipped['bindWorkers']} bind workers, "
        f"{shipped['engine']['solver']['workers']} solver workers, evictions.perCycle "
        f"{shipped['evictions']['perCycle']}) with batchWindowSeconds {args.window:g} and solver timeLimit "
        f"{args.time_limit or shipped['engine']['solver']['timeLimit']:g} s (the floor; maxSolveSeconds "
        f"{args.max_solve if args.max_solve is not None else shipped['maxSolveSeconds']:g} when arrivals are slow). "
        f"basic: median of {args.runs} runs; the other shapes: "
        f"1 run each (2-core machine). A run ends when every measured pod is bound or none was bound for "
        f"{args.stall:g} s. "
        + (
            "Streaming: the scheduler runs while the pods are created; pods/s = bound / (last bind - first "
            "creation), latency = bind - creation."
            if args.stream
            else "Backlog, as scheduler_perf measures throughput: the scheduler under test is stopped (SIGSTOP) while "
            "the measured pods are created (a filler phase first, scheduled normally) and resumed (SIGCONT) once "
            "all exist; pods/s = bound / (last bind - resumption), latency (first bind, p50, p99) = bind - "
            "resumption (time in the "
            "scheduler's queue; on a 2-core machine the creators, not the schedulers, would otherwise set the pace)."
        ),
        "",
        "Scheduler CPU ms / pod: user + system CPU of the scheduler's process group (/proc) over the measured "
        "phase, per bound pod (the API server, etcd and kwok share the same 2 cores).",
        "",
        *(
            [
                f"--ceiling: a third run per shape, `{BIND_ONLY}` (benchmarks/bindonly.py): binds the same pods "
                "round-robin over the nodes through placer's own write path (Actions.bind, the same bind workers, "
                "QPS and call policy), deciding nothing, checking no constraint and sending no events: the "
                "throughput a scheduler on placer's client path could reach on this control plane and machine.",
                "",
            ]
            if args.ceiling
            else []
        ),
        "Shapes (benchmarks/e2e_shapes.py): "
        + "; ".join(f"**{s.name}**: {s.title}" for s in shapes_mod.shapes(args.nodes))
        + ".",
        "",
        "| shape | scheduler | runs | bound / created | pending | pods/s | created/s | p50 (s) | p99 (s) "
        "| imbalance | std_score | partial gangs |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in summ:
        for who in (w for w in RUNNERS if w in s):
            r = s[who]
            gangs = f"{r['partial_gangs']:.0f}" if "partial_gangs" in r else ""
            lines.append(
                f"| {s['shape']} | {who} | {r['runs']} | {r['bound']:.0f}/{r['created']:.0f} | {r['pending']:.0f} | "
                f"{r['pods_per_s']:.1f} | {r['create_per_s']:.0f} | {r['p50']:.2f} | {r['p99']:.2f} | "
                f"{r['imbalance']:.4f} | {r['std_score']:.4f} | {gangs} |"
            )
    targets = {"basic": 1.0, "anti-affinity": 2.0, "affinity": 2.0, "preferred": 2.0}
    lines += [
        "",
        "Throughput ratio placer / kube-scheduler against issue 12's targets:",
        "",
        "| shape | ratio | target | met | placed >= kube-scheduler | ceiling: bind-only / kube-scheduler |",
        "|---|---:|---:|---|---|---:|",
    ]
    for s in summ:
        t = targets.get(s["shape"], 1.0)
        placed = s["placer"]["bound"] >= s["kube-scheduler"]["bound"]
        met = "yes" if s["ratio"] >= t else "no"
        ceiling = f"{s['ceiling']:.2f}" if "ceiling" in s else ""
        lines.append(f"| {s['shape']} | {s['ratio']:.2f} | {t:.1f} | {met} | {'yes' if placed else 'no'} | {ceiling} |")
    lines += [
        "",
        "All runs:",
        "",
        "| shape | scheduler | run | bound / created | pods/s | created/s | first bind (s) | p50 (s) | p99 (s) "
        "| imbalance | std_score | scheduler CPU ms / pod | s |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        run = "profiled" if r.get("profiled") else r["run"]
        first = f"{r['first']:.2f}" if "first" in r else ""  # results from before it was recorded
        cpu = f"{r['cpu_ms_per_pod']:.1f}" if "cpu_ms_per_pod" in r else ""
        lines.append(
            f"| {r['shape']} | {r['who']} | {run} | {r['bound']}/{r['created']} | {r['pods_per_s']:.1f} | "
            f"{r['create_per_s']:.0f} | {first} | {r['p50']:.2f} | {r['p99']:.2f} | {r['imbalance']:.4f} | "
            f"{r['std_score']:.4f} | {cpu} | {r['seconds']} |"
        )
    lines += [""] + [f"![{p}]({p})" for p in pngs]
    if history:
        lines += ["", "## History", "", history]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=3, help="runs of the basic shape (the others: one)")
    ap.add_argument("--shapes", nargs="*", default=[], help="only these shapes (default: all)")
    ap.add_argument("--qps", type=float, default=1000.0)
    ap.add_argument("--burst", type=int, default=2000)
    ap.add_argument("--window", type=float, default=1.0, help="placer's batchWindowSeconds")
    ap.add_argument("--time-limit", type=float, help="placer's solver.timeLimit (default: k8s/config.yaml's)")
    ap.add_argument("--max-solve", type=float, help="placer's maxSolveSeconds (default: k8s/config.yaml's)")
    ap.add_argument("--stream", action="store_true", help="schedulers run while pods are created (default: a backlog)")
    ap.add_argument("--one-cluster", action="store_true", help="all shapes on the gang cluster (one set of nodes)")
    ap.add_argument("--stall", type=float, default=30.0)
    ap.add_argument("--logs", help="keep placer's configuration and log per run here (default: the cluster's workdir)")
    ap.add_argument("--cap", type=float, default=600.0)
    ap.add_argument("--profile", action="store_true", help="one more basic run of placer under py-spy")
    ap.add_argument("--ceiling", action="store_true", help="also run benchmarks/bindonly.py (binds, no decisions)")
    ap.add_argument("--from-json", help="rewrite the report from a results file, measuring nothing")
    ap.add_argument("--history", default="", help="a line kept under History")
    ap.add_argument("--out", default=str(REPO / "docs" / "bench" / "e2e.md"))
    args = ap.parse_args(argv)
    out = Path(args.out)
    out_json = out.with_suffix(".json")
    rows = json.loads(Path(args.from_json).read_text())["rows"] if args.from_json else measure(args, out_json)
    text = report(args, rows, out, args.history)
    out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
