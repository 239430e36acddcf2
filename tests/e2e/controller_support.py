"""The controller under test: ``placer run`` as a subprocess with the placer ServiceAccount's
token (fixtures ``placer_kubeconfig`` and ``controllers``, registered by conftest.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from testenv import cluster as testenv

REPO = Path(__file__).resolve().parents[2]


def kubectl(*args: str, kubeconfig: Path) -> subprocess.CompletedProcess[str]:
    binary = testenv.find_kubectl() or "kubectl"
    return subprocess.run(
        [binary, "--kubeconfig", str(kubeconfig), *args], capture_output=True, text=True, timeout=60, check=False
    )


@pytest.fixture(scope="session")
def placer_kubeconfig(cluster: testenv.Cluster, core: client.CoreV1Api, tmp_path_factory: Any) -> Path:
    """k8s/ applied (server dry-run of everything, then namespace + RBAC for real) and a
    kubeconfig carrying a token of the placer ServiceAccount: the controller runs with exactly
    the permissions the manifests grant."""
    return service_account_kubeconfig(cluster, core, tmp_path_factory.mktemp("placer"))


def service_account_kubeconfig(cluster: testenv.Cluster, core: client.CoreV1Api, directory: Path) -> Path:
    """``placer_kubeconfig`` for any control plane (a test module's own cluster too)."""
    ns = kubectl("apply", "-f", str(REPO / "k8s" / "namespace.yaml"), kubeconfig=cluster.kubeconfig)
    assert ns.returncode == 0, ns.stderr
    # With its namespace present, the whole kustomization is accepted by the API server.
    dry = kubectl("apply", "--dry-run=server", "-k", str(REPO / "k8s"), kubeconfig=cluster.kubeconfig)
    assert dry.returncode == 0, dry.stderr
    assert "deployment.apps/placer created (server dry run)" in dry.stdout
    rbac = kubectl("apply", "-f", str(REPO / "k8s" / "rbac.yaml"), kubeconfig=cluster.kubeconfig)
    assert rbac.returncode == 0, rbac.stderr
    token = core.create_namespaced_service_account_token(
        "placer",
        "placer-system",
        client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=7200)),
    ).status.token
    admin = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    server = admin["clusters"][0]["cluster"]
    path = directory / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "placer",
                "clusters": [{"name": "e2e", "cluster": server}],
                "users": [{"name": "placer", "user": {"token": token}}],
                "contexts": [{"name": "placer", "context": {"cluster": "e2e", "user": "placer"}}],
            }
        )
    )
    return path


class Controller:
    def __init__(self, kubeconfig: Path, config: Path, log: Path, identity: str) -> None:
        self.kubeconfig, self.config, self.log, self.identity = kubeconfig, config, log, identity
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Controller:
        placer = Path(sys.executable).parent / "placer"
        self.proc = subprocess.Popen(
            [
                str(placer),
                "run",
                "--kubeconfig",
                str(self.kubeconfig),
                "--config",
                str(self.config),
                "--identity",
                self.identity,
            ],
            stdout=self.log.open("ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        return self

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
            self.proc.wait(timeout=20)

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]


@pytest.fixture
def controllers(placer_kubeconfig: Path, tmp_path: Path) -> Iterator[Callable[..., Controller]]:
    yield from controller_factory(placer_kubeconfig, tmp_path)


def controller_factory(kubeconfig: Path, tmp_path: Path) -> Iterator[Callable[..., Controller]]:
    """``controllers`` for any kubeconfig: start controllers with the e2e defaults (overridable)."""
    started: list[Controller] = []

    def start(identity: str = "placer-0", **overrides: Any) -> Controller:
        cfg = {
            "batchWindowSeconds": 1,
            "batchSize": 99,
            "labelCheckPeriodSeconds": 2,
            "metricsPort": 0,
            "requeueBackoffSeconds": 1,
            "maxRequeueBackoffSeconds": 2,
            "resyncPeriodSeconds": 60,
            "leaderElection": {
                "enabled": True,
                "leaseName": "placer-e2e",
                "namespace": "placer-system",
                "leaseDurationSeconds": 4,
                "renewDeadlineSeconds": 3,
                "retryPeriodSeconds": 1,
            },
            "planTimeouts": {"awaitGoneSeconds": 30, "awaitReplacementSeconds": 30, "awaitRoomSeconds": 30},
            "evictions": {"perCycle": 10, "perNode": 5, "moveCooldownSeconds": 0},
            "engine": {"solver": {"timeLimit": 3, "workers": 1}},
            **overrides,
        }
        path = tmp_path / f"{identity}.yaml"
        path.write_text(yaml.safe_dump(cfg))
        c = Controller(kubeconfig, path, tmp_path / f"{identity}.log", identity).start()
        started.append(c)
        return c

    yield start
    for c in started:
        c.kill()
