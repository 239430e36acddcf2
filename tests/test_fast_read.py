"""The fast read paths (issue 32 item 2) read exactly what the slow ones did: libyaml against
PyYAML's Python loader, JSON against YAML, field paths spelled out only on error, and the cycle
collector paused only while reading."""

from __future__ import annotations

import contextlib
import gc
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from placer.cli.app import app
from placer.errors import InputError
from placer.inputs import load_cluster
from placer.inputs.load import load_yaml, parse_cluster

STAMP = "2026-01-02T03:04:05Z"


def _node(name: str, zone: str, *, gpu: bool = False) -> dict[str, Any]:
    alloc = {"cpu": "15900m", "memory": "62Gi", "pods": "110", **({"nvidia.com/gpu": "1"} if gpu else {})}
    spec: dict[str, Any] = {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"topology.kubernetes.io/zone": zone, "kubernetes.io/hostname": name}},
        "spec": spec if gpu else {},
        "status": {"allocatable": alloc, "capacity": alloc},
    }


def _pod(name: str, node: str | None, **spec: Any) -> dict[str, Any]:
    container = {"name": "app", "image": "app:1", "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "shop",
            "uid": f"uid-{name}",
            "creationTimestamp": STAMP,
            "labels": {"app": "web", "zone": "1"},
            "annotations": {"placer.io/evictable": "true"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "controller": True}],
        },
        "spec": {"containers": [container], **({"nodeName": node} if node else {}), **spec},
        "status": {"phase": "Running", "startTime": STAMP} if node else {"phase": "Pending"},
    }


def sample_dump() -> dict[str, Any]:
    """A kubectl List with the fields placer reads: taints and tolerations, affinity, spreading,
    a sidecar, pod-level requests, an in-place resize, a PDB, a ReplicaSet, a Job, a Namespace."""
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}},
        }
    ]
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a", "b"]}
                        ]
                    }
                ]
            }
        },
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 50,
                    "podAffinityTerm": {
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": {"app": "web"}},
                    },
                }
            ]
        },
    }
    sidecar = {
        "name": "proxy",
        "image": "proxy:1",
        "restartPolicy": "Always",
        "resources": {"requests": {"cpu": "0.1", "memory": "64Mi"}, "limits": {"ephemeral-storage": "1G"}},
    }
    resized = _pod("resized", "n1")
    resized["status"]["containerStatuses"] = [{"name": "app", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]
    items = [
        _node("n1", "a"),
        _node("n2", "b"),
        _node("gpu1", "c", gpu=True),
        _pod("running", "n1", tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}], priority=100),
        resized,
        _pod("spread", None, topologySpreadConstraints=spread, affinity=affinity),
        _pod("sidecar", None, initContainers=[sidecar], resources={"requests": {"cpu": "2"}}),
        _pod("selector", None, nodeSelector={"topology.kubernetes.io/zone": "b"}, schedulingGates=[]),
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}},
            "status": {"disruptionsAllowed": 1},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": "web-1", "namespace": "shop", "uid": "rs"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {"spec": {}}},
            "status": {"readyReplicas": 2},
        },
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "train", "namespace": "shop", "annotations": {"placer.io/rebalance": "restarts-work"}},
            "spec": {"completionMode": "Indexed", "backoffLimit": 2, "template": {"spec": {}}},
            "status": {"failed": 1},
        },
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop", "labels": {"team": "web"}}},
    ]
    return {"apiVersion": "v1", "kind": "List", "items": items}


def test_json_and_yaml_of_one_dump_read_the_same_cluster(tmp_path: Path) -> None:
    doc = sample_dump()
    as_json, as_yaml = tmp_path / "dump.json", tmp_path / "dump.yaml"
    as_json.write_text(json.dumps(doc, indent=4), encoding="utf-8")
    as_yaml.write_text(yaml.safe_dump(doc), encoding="utf-8")
    from_json, from_yaml = load_cluster(as_json), load_cluster(as_yaml)
    assert from_json == from_yaml
    pods = {p.name: p for p in from_json.pods}
    # What each part of the dump says reached the model (the comparison above is not vacuous).
    assert [n.name for n in from_json.nodes] == ["n1", "n2", "gpu1"] and from_json.nodes[2].taints
    assert pods["resized"].requests["cpu"] == 1000 and pods["sidecar"].requests["cpu"] == 2000
    assert pods["spread"].spread and pods["spread"].required_terms and pods["running"].priority == 100
    assert from_json.pdbs[0].disruptions_allowed == 1 and from_json.jobs[0].accepts_restarts
    assert from_json.namespaces["shop"]["team"] == "web"


@pytest.mark.skipif(not hasattr(yaml, "CSafeLoader"), reason="PyYAML built without libyaml")
def test_libyaml_reads_what_the_python_loader_reads() -> None:
    text = yaml.safe_dump(sample_dump()) + "extra: &a [1, 2.5, null, true, '010', 0x1F, 2026-01-02, ~]\nagain: *a\n"
    assert load_yaml("f.yaml", text) == yaml.load(text, Loader=yaml.SafeLoader)


def test_an_error_deep_in_a_dump_names_its_whole_path() -> None:
    doc = sample_dump()
    doc["items"][6]["spec"]["initContainers"][0]["resources"]["requests"]["cpu"] = "lots"
    with pytest.raises(InputError) as err:
        parse_cluster("dump.json", json.dumps(doc))
    assert err.value.source == "dump.json"
    assert err.value.where == "items[6].spec.initContainers[0].resources.requests.cpu"


@pytest.mark.parametrize("enabled", [True, False])
@pytest.mark.parametrize("text", [json.dumps(sample_dump()), '{"kind": "List", "items": [{"kind": "Pod"}]}'])
def test_reading_leaves_the_cycle_collector_as_it_was(enabled: bool, text: str) -> None:
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        with contextlib.suppress(InputError):  # the second is refused: the collector is restored all the same
            parse_cluster("dump.json", text)
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


def test_solve_reports_the_read_time_apart_from_the_decision(tmp_path: Path) -> None:
    path = tmp_path / "dump.json"
    path.write_text(json.dumps(sample_dump()), encoding="utf-8")
    runner = CliRunner()
    answer = json.loads(runner.invoke(app, ["solve", str(path), "-o", "json", "--deterministic"]).stdout)
    assert answer["schemaVersion"] == 7
    assert answer["metrics"]["read_seconds"] > 0 and answer["metrics"]["solve_seconds"] > 0
    text = runner.invoke(app, ["solve", str(path), "--deterministic"], env={"COLUMNS": "200"}).stdout
    assert re.search(r"read \d+\.\d{3}s, solve \d+\.\d{3}s", text)
