"""What every fault scenario shares: replicas behind proxies, a workload that exactly fills its
nodes, a sampler of node usage, and the closing checks with the figures they produce.

The closing checks (issue 13): every pending pod the cluster has room for is bound; at no
sampled moment is any node's bound-pod request sum above its allocatable; no pod is lost (every
Deployment is back to its replicas, every bare pod still exists unless a plan evicted it); no pod
was evicted twice (apiserver audit log).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kube_helpers as kh
import yaml
from kubernetes import client

from placer.models import parse_quantity
from testenv import audit
from testenv.faultproxy import FaultProxy
from testenv.tlsproxy import TlsProxy

REPO = Path(__file__).resolve().parents[3]
FIGURES_DIR = Path(os.environ.get("PLACER_FAULTS_FIGURES", REPO / "build" / "faults"))
SA_NAMESPACE = "placer-system"

# Timing of every replica: short so that the suite stays within minutes (client-go's defaults
# are 15/10/2 s; the ratios are kept).
LEASE, RENEW, RETRY = 6, 4, 1


PROBE_DELAY, PROBE_PERIOD, PROBE_FAILURES = 10.0, 10.0, 3


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as resp:
            return bool(resp.status == 200)
    except (OSError, ValueError):
        return False


def base_config(identity: str, lease_name: str, **overrides: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "batchWindowSeconds": 1,
        "batchSize": 99,
        "labelCheckPeriodSeconds": 2,
        "metricsPort": 0,
        "requeueBackoffSeconds": 1,
        "maxRequeueBackoffSeconds": 2,
        "resyncPeriodSeconds": 300,  # a periodic relist must not hide a hung watch
        # Watches end server-side after 20 s; a silent one is noticed after 30 s (read timeout).
        "watchTimeoutSeconds": 20,
        "leaderElection": {
            "enabled": True,
            "leaseName": lease_name,
            "namespace": SA_NAMESPACE,
            "leaseDurationSeconds": LEASE,
            "renewDeadlineSeconds": RENEW,
            "retryPeriodSeconds": RETRY,
        },
        "planTimeouts": {"awaitGoneSeconds": 30, "awaitReplacementSeconds": 30, "awaitRoomSeconds": 30},
        "evictions": {"perCycle": 10, "perNode": 5, "moveCooldownSeconds": 0},
        "engine": {"solver": {"timeLimit": 3, "workers": 1}},
    }
    cfg.update(overrides)
    return cfg


def kubeconfig(path: Path, server: str, ca_data: str, token: str, user: str) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": user,
                "clusters": [{"name": "e2e", "cluster": {"server": server, "certificate-authority-data": ca_data}}],
                "users": [{"name": user, "user": {"token": token}}],
                "contexts": [{"name": user, "context": {"cluster": "e2e", "user": user}}],
            }
        )
    )
    path.chmod(0o600)
    return path


@dataclass(eq=False)
class Replica:
    """One `placer run` under its own ServiceAccount, reaching the API server through ``proxy``
    (and through ``tls`` when the scenario forges answers)."""

    identity: str  # also the ServiceAccount name: the audit log's user is system:serviceaccount:<ns>:<identity>
    config: Path
    kubeconfig: Path
    log: Path
    proxy: FaultProxy | None = None
    tls: TlsProxy | None = None
    proc: subprocess.Popen[bytes] | None = None
    health_port: int = 0  # placer's metricsPort (/healthz), probed like the kubelet would
    name: str = ""  # --identity when it is not the ServiceAccount's name (two replicas, one name)
    restarts: int = 0
    liveness_kills: int = 0
    exits: list[int] = field(default_factory=list)
    _stopped: threading.Event = field(default_factory=threading.Event)
    _watcher: threading.Thread | None = None

    @property
    def user(self) -> str:
        return f"system:serviceaccount:{SA_NAMESPACE}:{self.identity}"

    def start(self) -> Replica:
        """Start, and restart on exit as the kubelet would (placer ends itself on a lost lease)."""
        self._spawn()
        self._watcher = threading.Thread(target=self._supervise, name=f"kubelet-{self.identity}", daemon=True)
        self._watcher.start()
        return self

    def _spawn(self) -> None:
        placer = Path(sys.executable).parent / "placer"
        cmd = [str(placer), "run", "--kubeconfig", str(self.kubeconfig), "--config", str(self.config)]
        cmd += ["--identity", self.name or self.identity]
        with self.log.open("ab") as out:
            out.write(f"--- harness: start #{self.restarts + 1} at {time.strftime('%H:%M:%S')}\n".encode())
            out.flush()
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def _supervise(self) -> None:
        """The kubelet's part: restart on exit, and on k8s/deployment.yaml's liveness probe
        (GET /healthz every 10 s after 10 s, three failures in a row)."""
        next_probe = time.monotonic() + PROBE_DELAY
        failures = 0
        while not self._stopped.is_set():
            proc = self.proc
            if proc is not None and proc.poll() is None and self.health_port and time.monotonic() >= next_probe:
                next_probe = time.monotonic() + PROBE_PERIOD
                failures = 0 if _healthy(self.health_port) else failures + 1
                if failures >= PROBE_FAILURES:
                    self.liveness_kills += 1
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=20)
            if proc is not None and proc.poll() is not None and not self._stopped.is_set():
                self.exits.append(proc.returncode)
                self._stopped.wait(1.0)  # the kubelet's first restart back-off is longer; keep it short
                if self._stopped.is_set():
                    return
                self.restarts += 1
                self._spawn()
                next_probe = time.monotonic() + PROBE_DELAY
                failures = 0
            self._stopped.wait(0.2)

    def notes(self) -> dict[str, Any]:
        return {"restarts": self.restarts, "liveness_kills": self.liveness_kills, "exit_codes": list(self.exits)}

    def threads(self) -> int:
        """The process's thread count (Linux /proc)."""
        if self.proc is None:
            return 0
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("Threads:"):
                return int(line.split()[1])
        return 0

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self, sig: int = signal.SIGKILL, restart: bool = False) -> None:
        """Signal the process group; without ``restart`` the supervisor stops too."""
        if not restart:
            self._stopped.set()
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
            self.proc.wait(timeout=20)

    def output(self, chars: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


# ---------------------------------------------------------------------------------------------
# Usage sampling: overcommit at any observed moment
# ---------------------------------------------------------------------------------------------


def _requests(pod: client.V1Pod) -> dict[str, float]:
    out: dict[str, float] = {}
    for c in pod.spec.containers:
        for k, v in ((c.resources and c.resources.requests) or {}).items():
            out[k] = out.get(k, 0.0) + float(parse_quantity(v))
    return out


@dataclass
class Overcommit:
    at: float
    node: str
    resource: str
    used: float
    allocatable: float


@dataclass(eq=False)
class Sampler:
    """Samples, every ``period`` seconds, the bound-pod request sums of ``nodes`` against their
    allocatable (cpu, memory, pods) from the admin client, in a thread."""

    core: client.CoreV1Api
    nodes: list[str]
    period: float = 0.5
    samples: int = 0
    errors: int = 0
    overcommits: list[Overcommit] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _alloc: dict[str, dict[str, float]] = field(default_factory=dict)

    def start(self) -> Sampler:
        for n in self.nodes:
            alloc = self.core.read_node(n).status.allocatable
            self._alloc[n] = {k: float(parse_quantity(alloc[k])) for k in ("cpu", "memory", "pods")}
        self._thread = threading.Thread(target=self._run, name="sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def sample(self) -> None:
        pods = self.core.list_pod_for_all_namespaces(_request_timeout=10).items
        used: dict[str, dict[str, float]] = {n: {"pods": 0.0} for n in self.nodes}
        for p in pods:
            node = p.spec.node_name
            if node not in used or p.status.phase in ("Succeeded", "Failed"):
                continue
            used[node]["pods"] += 1
            for k, v in _requests(p).items():
                used[node][k] = used[node].get(k, 0.0) + v
        now = time.monotonic()
        for n, u in used.items():
            for res, alloc in self._alloc[n].items():
                if u.get(res, 0.0) > alloc + 1e-9:
                    self.overcommits.append(Overcommit(now, n, res, u[res], alloc))
        self.samples += 1

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            try:
                self.sample()
            except Exception:  # the admin client is never faulted, but the API server may be down
                self.errors += 1


# ---------------------------------------------------------------------------------------------
# Workload and closing checks
# ---------------------------------------------------------------------------------------------


def pods_of(core: client.CoreV1Api, namespace: str) -> list[client.V1Pod]:
    return [p for p in core.list_namespaced_pod(namespace).items if p.metadata.deletion_timestamp is None]


@dataclass
class Workload:
    """Deployments of 1-cpu pods whose total exactly fills ``nodes`` x ``cpu_per_node``: room for
    every pod, none to spare, so a double-booked node shows as overcommit or a pod left pending."""

    apps: client.AppsV1Api
    core: client.CoreV1Api
    namespace: str
    group: dict[str, str]
    deployments: dict[str, int] = field(default_factory=dict)

    def add(self, name: str, replicas: int, cpu: str = "1") -> None:
        kh.create_deployment(
            self.apps, self.namespace, name, replicas, cpu=cpu, memory="256Mi",
            scheduler_name="placer", node_selector=self.group,
        )  # fmt: skip
        self.deployments[name] = replicas

    @property
    def expected(self) -> int:
        return sum(self.deployments.values())

    def bound(self) -> list[client.V1Pod]:
        return [p for p in pods_of(self.core, self.namespace) if p.spec.node_name]

    def wait_all_bound(self, timeout: float) -> float | None:
        """Seconds until every expected pod is bound and running, or None at the timeout."""
        t0 = time.monotonic()
        try:
            kh.wait_for(
                f"{self.expected} pods bound and running in {self.namespace}",
                lambda: len([p for p in self.bound() if kh.is_running(p)]) >= self.expected or None,
                timeout,
                interval=0.5,
            )
        except TimeoutError:
            return None
        return time.monotonic() - t0


@dataclass
class Figures:
    scenario: str
    expected: int
    bound: int
    pending: int
    lost: int
    overcommitted_nodes: int
    evicted_twice: int
    recover_seconds: float | None
    samples: int
    notes: dict[str, Any] = field(default_factory=dict)

    def failures(self) -> list[str]:
        out = []
        if self.pending:
            out.append(f"{self.pending} pods the cluster has room for are still pending")
        if self.lost:
            out.append(f"{self.lost} pods lost")
        if self.overcommitted_nodes:
            out.append(f"{self.overcommitted_nodes} nodes overcommitted at a sampled moment")
        if self.evicted_twice:
            out.append(f"{self.evicted_twice} pods evicted twice")
        return out

    def write(self) -> None:
        FIGURES_DIR.mkdir(parents=True, exist_ok=True)
        (FIGURES_DIR / f"{self.scenario}.json").write_text(json.dumps(self.__dict__, indent=2, default=str) + "\n")


def closing_checks(
    scenario: str,
    workload: Workload,
    sampler: Sampler,
    audit_log: Path,
    *,
    healed_at: float,
    timeout: float = 90.0,
    bare_pods: Iterable[str] = (),
    notes: dict[str, Any] | None = None,
    recovered: float | None = None,
) -> Figures:
    """Wait for recovery, then compute the figures (written to build/faults/<scenario>.json).
    ``recover_seconds`` is the time from ``healed_at`` until every pod was bound, or
    ``recovered`` when the scenario measured it itself (None: not recovered)."""
    waited = workload.wait_all_bound(timeout)
    recover = None if waited is None else round(time.monotonic() - healed_at, 1)
    if recovered is not None or waited is None:
        recover = recovered if waited is not None else None
    sampler.sample()
    sampler.stop()
    pods = pods_of(workload.core, workload.namespace)
    bound = [p for p in pods if p.spec.node_name]
    lost = 0
    for dep, replicas in workload.deployments.items():
        have = len([p for p in pods if p.metadata.labels.get("app") == dep])
        lost += max(0, replicas - have)
    names = {p.metadata.name for p in pods}
    lost += len([b for b in bare_pods if b not in names])
    evictions = audit.successful_evictions(audit.read_writes(audit_log))
    twice = len([k for k, v in evictions.items() if k[0] == workload.namespace and len(v) > 1])
    figs = Figures(
        scenario=scenario,
        expected=workload.expected,
        bound=len(bound),
        pending=max(0, workload.expected - len(bound)),
        lost=lost,
        overcommitted_nodes=len({o.node for o in sampler.overcommits}),
        evicted_twice=twice,
        recover_seconds=recover,
        samples=sampler.samples,
        notes=dict(notes or {}),
    )
    figs.write()
    return figs


def _name(holder: object) -> str | None:
    """The replica's name of a Lease holder: placer suffixes the name it is given (``--identity``)
    with ``_<random>``, unique per process."""
    return str(holder).rsplit("_", 1)[0] if holder else None


def wait_lease_holder(coord: client.CoordinationV1Api, lease: str, timeout: float = 60.0) -> str:
    def holder() -> str | None:
        spec = coord.read_namespaced_lease(lease, SA_NAMESPACE).spec
        return _name(spec.holder_identity) if spec else None

    return kh.wait_for(f"a holder of lease {lease}", holder, timeout)


def lease_holder(coord: client.CoordinationV1Api, lease: str) -> str | None:
    try:
        spec = coord.read_namespaced_lease(lease, SA_NAMESPACE).spec
    except client.ApiException:
        return None
    return _name(spec.holder_identity) if spec else None


def timeline(events: list[tuple[float, str]], t0: float) -> list[str]:
    return [f"+{t - t0:.1f}s {what}" for t, what in events]


def every(period: float, until: float, fn: Callable[[], None]) -> None:
    while time.monotonic() < until:
        fn()
        time.sleep(period)


# ---------------------------------------------------------------------------------------------
# A workload that needs a plan (one eviction): the Boreas two-batch case of test_controller_e2e
# ---------------------------------------------------------------------------------------------


def plan_workload(
    core: client.CoreV1Api, apps: client.AppsV1Api, namespace: str, make_nodes: Callable[..., list[str]]
) -> tuple[Workload, list[str], str]:
    """Two 15-cpu nodes; proxy-0 (7.5 cpu) and backend-0 (5 cpu) bound to node 0 by the test
    (batch 1); then batch 2 arrives: one more proxy, two more backends. The only placement of all
    five moves backend-0 to node 1 (evict it, bind its replacement): a global plan. Returns the
    workload, the nodes and the name of the pod the plan must evict. Start placer afterwards."""
    nodes = make_nodes(2, prefix="plan", cpu="15", memory="32Gi")
    group = {"e2e-group": core.read_node(nodes[0]).metadata.labels["e2e-group"]}
    w = Workload(apps, core, namespace, group)
    first: dict[str, str] = {}
    for app, cpu in (("proxy", "7500m"), ("backend", "5")):
        w.add(app, 1, cpu=cpu)
        (pod,) = kh.wait_for(f"{app} pod", lambda app=app: kh.list_pods(core, namespace, {"app": app}) or None, 30)
        assert kh.bind(core, namespace, pod.metadata.name, nodes[0]) == 201
        first[app] = pod.metadata.name
    kh.wait_running(core, namespace, {"app": "proxy"}, 1)
    kh.wait_running(core, namespace, {"app": "backend"}, 1)
    for app, replicas in (("proxy", 2), ("backend", 3)):
        apps.patch_namespaced_deployment_scale(app, namespace, {"spec": {"replicas": replicas}})
        w.deployments[app] = replicas
    return w, nodes, first["backend"]


def wait_controllers_back(core: client.CoreV1Api, timeout: float = 120.0) -> float:
    """After a kube-apiserver restart kube-controller-manager's watches come back with back-off:
    wait until a new namespace gets its default ServiceAccount again, so that the next test (whose
    namespace fixture waits 30 s for it) starts on a working cluster. Returns the seconds waited."""
    t0 = time.monotonic()
    ns = kh.create_namespace(core, timeout=timeout)
    kh.delete_namespace(core, ns)
    return time.monotonic() - t0


def non_leader_writes(writes: list[audit.Write], users: Iterable[str], lease: str) -> list[str]:
    """Writes (other than to the Lease) by one of ``users`` while it was not the leader, from the
    audit log. A replica's term is its run of successful Lease writes with nobody else's in
    between; it may write from a lease duration after the term's first write (a replica that
    creates or takes the Lease waits that long) until its renew deadline after the term's last.
    A write outside its own window, or inside another replica's, breaks the rule: two replicas
    leading at once (a deleted Lease, one identity twice) show that way."""
    mine = set(users)
    renewals = sorted(
        (w for w in writes if w.user in mine and w.resource == "leases" and w.name == lease and w.ok),
        key=lambda w: w.received,
    )
    terms: list[tuple[str, Any, Any]] = []  # (user, first, last) of each run of one user's Lease writes
    for w in renewals:
        if terms and terms[-1][0] == w.user:
            terms[-1] = (w.user, terms[-1][1], w.received)
        else:
            terms.append((w.user, w.received, w.received))

    def window(term: tuple[str, Any, Any], at: Any) -> bool:
        return (at - term[1]).total_seconds() - LEASE + 0.5 >= 0 and (at - term[2]).total_seconds() <= RENEW

    bad = []
    for w in writes:
        if w.user not in mine or w.resource == "leases":
            continue
        own = [t for t in terms if t[0] == w.user and t[1] <= w.received]
        why = ""
        if not own or not window(own[-1], w.received):
            why = "outside its own term (before a lease duration, or past its renew deadline)"
        else:
            other = next((t for t in terms if t[0] != w.user and window(t, w.received)), None)
            if other is not None:
                why = f"while {other[0]} led"
        if why:
            bad.append(f"{w.received.time()} {w.user} {w.verb} {w.resource} {w.name} {w.code}: {why}")
    return bad
