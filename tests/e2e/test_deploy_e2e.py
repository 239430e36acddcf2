"""The two deploy paths against the real API server: the Helm chart (charts/placer) and the
kustomize base (k8s/, and examples/namespaced with the namespaced-writes component).

Aspects: ``helm lint`` passes; ``helm template`` (default and namespaced values) and ``kubectl
kustomize`` (the base and the namespaced example) render objects the API server accepts in a
server-side dry run; the chart grants exactly the RBAC of the kustomize manifests in both modes and
runs the same configuration; the image is overridable in both (values, ``images:``). The
controller's own tests apply k8s/'s RBAC for real (controller_support.service_account_kubeconfig).

helm is conftest's ``helm`` fixture: ``PLACER_HELM`` (``make e2e`` builds it: mk/deploy.mk) or
PATH; without it the module is skipped on a developer machine and fails in CI, as the control plane
does.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from controller_support import kubectl

from testenv import cluster as testenv

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "placer"
NAMESPACE = "placer-system"
TENANTS = ("team-a",)  # examples/namespaced's namespace


def _run(*args: str) -> str:
    done = subprocess.run(list(args), capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"{' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _template(helm: str, *values: str) -> str:
    return _run(helm, "template", "placer", str(CHART), "--namespace", NAMESPACE, *values)


def _kustomize(directory: Path, kubeconfig: Path) -> str:
    done = kubectl("kustomize", str(directory), kubeconfig=kubeconfig)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _objects(rendered: str) -> dict[tuple[str, str, str], dict[str, Any]]:
    """(kind, namespace, name) -> object."""
    out = {}
    for doc in yaml.safe_load_all(rendered):
        if doc:
            meta = doc["metadata"]
            out[(doc["kind"], meta.get("namespace", ""), meta["name"])] = doc
    return out


def _rules(obj: dict[str, Any]) -> list[tuple[tuple[str, ...], ...]]:
    """An RBAC object's rules, order and comments aside."""
    return sorted(
        tuple(tuple(sorted(rule.get(k, []))) for k in ("apiGroups", "resources", "verbs", "resourceNames"))
        for rule in obj["rules"]
    )


def _dry_run(rendered: str, kubeconfig: Path, tmp_path: Path) -> str:
    path = tmp_path / "rendered.yaml"
    path.write_text(rendered)
    done = kubectl("apply", "--dry-run=server", "-f", str(path), kubeconfig=kubeconfig)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def namespaces(cluster: testenv.Cluster) -> Path:
    """placer's namespace and the tenants' exist (a dry run of a namespaced object needs its
    namespace); the kubeconfig to use."""
    done = kubectl("apply", "-f", str(REPO / "k8s" / "namespace.yaml"), kubeconfig=cluster.kubeconfig)
    assert done.returncode == 0, done.stderr  # as the controller's tests apply it
    for ns in TENANTS:
        done = kubectl("create", "namespace", ns, kubeconfig=cluster.kubeconfig)
        assert done.returncode == 0 or "AlreadyExists" in done.stderr, done.stderr
    return Path(cluster.kubeconfig)


def test_the_chart_lints_clean(helm: str) -> None:
    for values in ((), ("--set", "namespaces={team-a}")):
        out = _run(helm, "lint", str(CHART), "--strict", *values)
        assert "1 chart(s) linted, 0 chart(s) failed" in out


@pytest.mark.parametrize(
    ("values", "kustomization"),
    [
        pytest.param((), REPO / "k8s", id="cluster-wide"),
        pytest.param(("--set", "namespaces={team-a}"), REPO / "examples" / "namespaced", id="namespaced"),
    ],
)
def test_the_chart_and_kustomize_render_what_the_api_server_accepts_with_the_same_rbac(
    helm: str, namespaces: Path, tmp_path: Path, values: tuple[str, ...], kustomization: Path
) -> None:
    chart = _template(helm, *values)
    base = _kustomize(kustomization, namespaces)
    for rendered in (chart, base):
        accepted = _dry_run(rendered, namespaces, tmp_path)
        assert "deployment.apps/placer created (server dry run)" in accepted
    ours, theirs = _objects(chart), _objects(base)
    rbac = ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ServiceAccount")
    assert {k for k in ours if k[0] in rbac} == {k for k in theirs if k[0] in rbac}
    for key, obj in theirs.items():
        if key[0] in ("ClusterRole", "Role"):
            assert _rules(ours[key]) == _rules(obj), key
        if key[0] in ("ClusterRoleBinding", "RoleBinding"):
            assert (ours[key]["roleRef"], ours[key]["subjects"]) == (obj["roleRef"], obj["subjects"]), key
    # The same configuration (the namespaced example leaves k8s/config.yaml's namespaces to you).
    key = ("ConfigMap", NAMESPACE, "placer-config")
    config = [yaml.safe_load(o[key]["data"]["config.yaml"]) for o in (ours, theirs)]
    if values:
        assert config[0].pop("namespaces") == list(TENANTS)
    assert config[0] == config[1]
    # The same pod, but for the chart's labels and the config checksum.
    spec = [o[("Deployment", NAMESPACE, "placer")]["spec"]["template"]["spec"] for o in (ours, theirs)]
    assert spec[0] == spec[1]


def test_the_image_is_overridden_in_the_chart_values_and_in_kustomize_images(
    helm: str, namespaces: Path, tmp_path: Path
) -> None:
    image = "registry.example.com/team/placer:9.9.9"
    chart = _template(helm, "--set", "image.repository=registry.example.com/team/placer", "--set", "image.tag=9.9.9")
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": [os.path.relpath(REPO / "k8s", overlay)],
                "images": [{"name": "placer", "newName": "registry.example.com/team/placer", "newTag": "9.9.9"}],
            }
        )
    )
    base = _kustomize(overlay, namespaces)
    for rendered in (chart, base):
        (container,) = _objects(rendered)[("Deployment", NAMESPACE, "placer")]["spec"]["template"]["spec"]["containers"]
        assert container["image"] == image
        _dry_run(rendered, namespaces, tmp_path)
