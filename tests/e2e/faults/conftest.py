"""Fixtures of the fault-injection suite (issue 13): its own control plane with audit logging,
one ServiceAccount and one proxy per placer replica.

``make e2e-faults`` runs this directory; ``make e2e`` leaves it out.
"""

from __future__ import annotations

import base64
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import faults_harness as fh
import kube_helpers as kh
import pytest
import yaml
from kubernetes import client, config

from testenv import cluster as testenv
from testenv.faultproxy import FaultProxy
from testenv.tlsproxy import TlsProxy

REPO = Path(__file__).resolve().parents[3]

# A small seat pool (the default is 400 + 200): the test's API Priority and Fairness level with
# one nominal share then gets a concurrency of 1, so a storm really answers 429.
APISERVER_ARGS = ["--max-requests-inflight=60", "--max-mutating-requests-inflight=30"]


@pytest.fixture(scope="session")
def cluster() -> Iterator[testenv.Cluster]:
    """Overrides tests/e2e's cluster: audit log on, no kube-scheduler (placer binds everything)."""
    if not testenv.is_built():
        pytest.fail(testenv.not_built_message(), pytrace=False)
    c = testenv.Cluster(with_scheduler=False, audit=True, apiserver_args=APISERVER_ARGS)
    c.start()
    try:
        yield c
    finally:
        c.stop()


def _kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> None:
    kubectl = testenv.find_kubectl() or "kubectl"
    res = subprocess.run(
        [kubectl, "--kubeconfig", str(kubeconfig), *args],
        input=stdin, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr


@pytest.fixture(scope="session")
def placer_rbac(cluster: testenv.Cluster) -> Callable[[str], str]:
    """k8s/namespace.yaml and k8s/rbac.yaml applied; returns ``token(name)``: a token of the
    ServiceAccount placer-system/<name>, created with the same ClusterRole and Role as ``placer``."""
    _kubectl(cluster.kubeconfig, "apply", "-f", str(REPO / "k8s" / "namespace.yaml"))
    _kubectl(cluster.kubeconfig, "apply", "-f", str(REPO / "k8s" / "rbac.yaml"))
    made: dict[str, str] = {}

    def token(name: str) -> str:
        if name in made:
            return made[name]
        sa = {"kind": "ServiceAccount", "name": name, "namespace": fh.SA_NAMESPACE}
        docs = [
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": fh.SA_NAMESPACE}},
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": f"placer-faults-{name}"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "placer"},
                "subjects": [sa],
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": f"placer-faults-{name}", "namespace": fh.SA_NAMESPACE},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "placer-leader-election"},
                "subjects": [sa],
            },
        ]
        _kubectl(cluster.kubeconfig, "apply", "-f", "-", stdin=yaml.safe_dump_all(docs))
        core = client.CoreV1Api(client.ApiClient(_admin_config(cluster)))
        req = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=7200))
        made[name] = core.create_namespaced_service_account_token(name, fh.SA_NAMESPACE, req).status.token
        return made[name]

    return token


@pytest.fixture(scope="session")
def namespaced_rbac(cluster: testenv.Cluster, placer_rbac: Callable[[str], str]) -> Callable[[str, str], str]:
    """``token(name, namespace)``: a token of the ServiceAccount placer-system/<name> with the RBAC
    of k8s/components/namespaced-writes: its read-only ClusterRole (cluster-wide reads) and its
    writes Role in ``namespace`` only, plus the Lease Role."""
    placer_rbac("placer-faults-bootstrap")  # namespace.yaml and rbac.yaml applied
    component = REPO / "k8s" / "components" / "namespaced-writes"
    (patch,) = yaml.safe_load(component.joinpath("read-only.yaml").read_text())
    writes = [d for d in yaml.safe_load_all(component.joinpath("writes.yaml").read_text()) if d]
    (role,) = [d for d in writes if d["kind"] == "Role"]
    core = client.CoreV1Api(client.ApiClient(_admin_config(cluster)))

    def token(name: str, namespace: str) -> str:
        sa = {"kind": "ServiceAccount", "name": name, "namespace": fh.SA_NAMESPACE}
        docs = [
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": fh.SA_NAMESPACE}},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
             "metadata": {"name": f"placer-faults-read-{name}"}, "rules": patch["value"]},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
             "metadata": {"name": f"placer-faults-read-{name}"},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                         "name": f"placer-faults-read-{name}"}, "subjects": [sa]},
            {**role, "metadata": {"name": f"placer-faults-writes-{name}", "namespace": namespace}},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
             "metadata": {"name": f"placer-faults-writes-{name}", "namespace": namespace},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                         "name": f"placer-faults-writes-{name}"}, "subjects": [sa]},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
             "metadata": {"name": f"placer-faults-{name}", "namespace": fh.SA_NAMESPACE},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "placer-leader-election"},
             "subjects": [sa]},
        ]  # fmt: skip
        _kubectl(cluster.kubeconfig, "apply", "-f", "-", stdin=yaml.safe_dump_all(docs))
        req = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=7200))
        return str(core.create_namespaced_service_account_token(name, fh.SA_NAMESPACE, req).status.token)

    return token


def _admin_config(cluster: testenv.Cluster) -> client.Configuration:
    cfg = client.Configuration()
    config.load_kube_config(config_file=str(cluster.kubeconfig), client_configuration=cfg)
    return cfg


@pytest.fixture
def replicas(
    cluster: testenv.Cluster, placer_rbac: Callable[[str], str], tmp_path: Path
) -> Iterator[Callable[..., fh.Replica]]:
    """``replicas(identity, lease, via="tcp"|"tls", **config)`` starts `placer run` as the
    ServiceAccount <identity> through its own TCP fault proxy ("tcp") or TLS-forging proxy ("tls")."""
    started: list[fh.Replica] = []
    port = int(cluster.server.rsplit(":", 1)[1])
    ca_data = base64.b64encode(cluster.ca_path.read_bytes()).decode()

    def start(
        identity: str, lease: str, via: str = "tcp", *, name: str = "", token: str = "", **overrides: Any
    ) -> fh.Replica:
        """``name``: the --identity when not the ServiceAccount's; ``token``: another ServiceAccount
        token than the full RBAC's (e.g. ``namespaced_rbac``'s)."""
        token = token or placer_rbac(identity)
        health_port = testenv.free_ports(1)[0]
        cfg = tmp_path / f"{identity}.yaml"
        cfg.write_text(yaml.safe_dump(fh.base_config(identity, lease, metricsPort=health_port, **overrides)))
        r = fh.Replica(identity, cfg, tmp_path / f"{identity}.kubeconfig", tmp_path / f"{identity}.log")
        r.health_port = health_port
        r.name = name
        if via == "tcp":
            r.proxy = FaultProxy("127.0.0.1", port, name=f"proxy-{identity}").start()
            fh.kubeconfig(r.kubeconfig, f"https://{r.proxy.address}", ca_data, token, identity)
        elif via == "tls":
            r.tls = TlsProxy("127.0.0.1", port, cluster.ca_path, tmp_path / f"tls-{identity}").start()
            fh.kubeconfig(r.kubeconfig, r.tls.server, r.tls.ca_data, token, identity)
        else:
            raise ValueError(via)
        started.append(r.start())
        return r

    try:
        yield start
    finally:
        for r in started:
            r.kill()
            if r.proxy is not None:
                r.proxy.stop()
            if r.tls is not None:
                r.tls.stop()


@pytest.fixture
def fault_nodes(make_nodes: Callable[..., list[str]], core: client.CoreV1Api) -> tuple[list[str], dict[str, str]]:
    """Four kwok nodes of 4 cpu and 8Gi each, and the node selector of their group."""
    nodes = make_nodes(4, prefix="fault", cpu="4", memory="8Gi", pods=20)
    group = {"e2e-group": core.read_node(nodes[0]).metadata.labels["e2e-group"]}
    return nodes, group


@pytest.fixture
def workload(
    apps: client.AppsV1Api, core: client.CoreV1Api, namespace: str, fault_nodes: tuple[list[str], dict[str, str]]
) -> fh.Workload:
    return fh.Workload(apps, core, namespace, fault_nodes[1])


@pytest.fixture
def sampler(core: client.CoreV1Api, fault_nodes: tuple[list[str], dict[str, str]]) -> Iterator[fh.Sampler]:
    s = fh.Sampler(core, fault_nodes[0]).start()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def lease() -> str:
    return kh.unique("faults")
