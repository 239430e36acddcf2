"""A file is validated as the API server would validate it.

Aspects: what the API server refuses (non-string label values, list values in a nodeSelector, a
non-integer Gt/Lt value, fractional extended resources, priority beyond int32, malformed
timestamps, absurd nesting) makes ``placer solve`` exit 2 with one line on stderr naming the file,
the object and the field, and nothing on stdout; what it accepts (fractional cpu, memory,
hugepages, ephemeral-storage; RFC 3339 times with fractions and offsets) still loads. Warnings
(ignored kinds, grouped in one line) go to stderr in every output format.
"""

from __future__ import annotations

import copy
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from placer.cli.app import app
from placer.errors import InputError
from placer.inputs.load import MAX_DEPTH, decode_document

runner = CliRunner()
Json = dict[str, Any]


def _dump() -> Json:
    """A valid kubectl List: one node, one pending pod (items[1])."""
    return {
        "kind": "List",
        "items": [
            {
                "kind": "Node",
                "metadata": {"name": "a", "labels": {"zone": "x"}},
                "status": {
                    "allocatable": {
                        "cpu": "4",
                        "memory": "8Gi",
                        "pods": "110",
                        "example.com/gpu": "2",
                        "hugepages-2Mi": "1Gi",
                        "ephemeral-storage": "100Gi",
                    }
                },
            },
            {
                "kind": "Pod",
                "metadata": {"name": "web", "namespace": "shop", "creationTimestamp": "2025-01-02T03:04:05Z"},
                "spec": {
                    "schedulerName": "placer",
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}],
                },
            },
        ],
    }


def _set(doc: Json, path: str, value: Any) -> Json:
    out = copy.deepcopy(doc)
    *parents, last = path.split("/")
    here: Any = out
    for part in parents:
        here = here[int(part)] if isinstance(here, list) else here.setdefault(part, {})
    if isinstance(here, list):
        here[int(last)] = value
    else:
        here[last] = value
    return out


def _solve(tmp_path: Path, doc: Any, *args: str, raw: str | None = None) -> Any:
    path = tmp_path / "cluster.json"
    path.write_text(raw if raw is not None else json.dumps(doc), encoding="utf-8")
    return runner.invoke(app, ["solve", str(path), *args])


REFUSED = [
    pytest.param(
        "items/1/metadata/labels", {"tier": 1}, "metadata.labels.tier", "expected a string", id="label value a number"
    ),
    pytest.param(
        "items/0/metadata/labels",
        {"zone": True},
        "metadata.labels.zone",
        "expected a string",
        id="node label value a bool",
    ),
    pytest.param(
        "items/1/spec/nodeSelector",
        {"zone": ["x", "y"]},
        "spec.nodeSelector.zone",
        "expected a string",
        id="list in nodeSelector",
    ),
    pytest.param(
        "items/1/metadata/annotations",
        {"note": None},
        "metadata.annotations.note",
        "expected a string",
        id="null annotation",
    ),
    pytest.param(
        "items/1/spec/affinity",
        {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["4.5"]}]}]
                }
            }
        },
        "matchExpressions[0].values",
        "needs an integer value, got '4.5'",
        id="non-integer Gt value",
    ),
    pytest.param(
        "items/1/spec/containers/0/resources/requests",
        {"example.com/gpu": "500m"},
        "requests.example.com/gpu",
        "must be a whole number",
        id="fractional extended resource",
    ),
    pytest.param(
        "items/0/status/allocatable",
        {"cpu": "4", "pods": "1.5"},
        "allocatable.pods",
        "must be a whole number",
        id="fractional pods",
    ),
    pytest.param(
        "items/1/spec/priority", 2**31, "spec.priority", "out of range for a 32-bit integer", id="priority beyond int32"
    ),
    pytest.param(
        "items/1/metadata/creationTimestamp",
        "yesterday",
        "metadata.creationTimestamp",
        "RFC 3339",
        id="malformed creationTimestamp",
    ),
    pytest.param(
        "items/1/status",
        {"startTime": "2025-13-01T00:00:00Z"},
        "status.startTime",
        "RFC 3339",
        id="impossible startTime",
    ),
    pytest.param(
        "items/1/metadata/deletionTimestamp",
        "2025-01-02 03:04:05",
        "metadata.deletionTimestamp",
        "RFC 3339",
        id="timestamp without T",
    ),
]


@pytest.mark.parametrize(("path", "value", "field", "message"), REFUSED)
def test_what_the_api_server_refuses_fails_the_file_in_one_line(
    tmp_path: Path, path: str, value: Any, field: str, message: str
) -> None:
    res = _solve(tmp_path, _set(_dump(), path, value), "-o", "json")
    assert res.exit_code == 2
    assert res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert str(tmp_path / "cluster.json") in lines[0]
    assert field in lines[0] and message in lines[0]
    assert "Traceback" not in res.stderr


REFUSED += [
    pytest.param(
        "items/1/spec/containers/0/ports",
        [{"containerPort": 80, "hostPort": -1}],
        "ports[0].hostPort",
        "out of range",
        id="negative hostPort",
    ),
]

ACCEPTED = [
    pytest.param(
        "items/1/spec/containers/0/resources/requests",
        {"cpu": "0.25", "memory": "1.5Gi"},
        id="fractional cpu and memory",
    ),
    pytest.param("items/1/spec/containers/0/resources/requests", {"hugepages-2Mi": "1.5Mi"}, id="fractional hugepages"),
    pytest.param(
        "items/1/spec/containers/0/resources/requests",
        {"ephemeral-storage": "0.5Gi"},
        id="fractional ephemeral-storage",
    ),
    pytest.param(
        "items/1/spec/containers/0/resources/requests", {"example.com/gpu": "1"}, id="whole extended resource"
    ),
    pytest.param("items/1/spec/priority", 2**31 - 1, id="the largest int32 priority"),
    pytest.param("items/1/spec/priority", -(2**31), id="the smallest int32 priority"),
    pytest.param(
        "items/1/metadata/creationTimestamp",
        "2025-01-02T03:04:05.123456789+02:00",
        id="RFC 3339 with fraction and offset",
    ),
    pytest.param("items/1/metadata/labels", {"tier": "1"}, id="a quoted number as a label value"),
]


@pytest.mark.parametrize(("path", "value"), ACCEPTED)
def test_what_the_api_server_accepts_still_loads(tmp_path: Path, path: str, value: Any) -> None:
    res = _solve(tmp_path, _set(_dump(), path, value), "-o", "json")
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["placements"][0]["pod"] == "shop/web"


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param('{"kind": "List", "items": ' + "[" * 100_000 + "]" * 100_000 + "}", id="deep JSON"),
        pytest.param("kind: List\nitems: " + "[" * 100_000, id="deep flow YAML"),
        pytest.param(
            '{"nodes": [], "x": ' + "[" * 70 + "]" * 70 + "}", id="deeper than the bound, within the parser's"
        ),
    ],
)
def test_deep_nesting_is_one_line_not_a_traceback(tmp_path: Path, raw: str) -> None:
    res = _solve(tmp_path, None, raw=raw)
    assert res.exit_code == 2
    assert len(res.stderr.strip().splitlines()) == 1
    assert "nested more than 64 levels deep" in res.stderr and "Traceback" not in res.stderr


def test_ignored_kinds_are_one_warning_line_on_stderr(tmp_path: Path) -> None:
    doc = _dump()
    doc["items"] += [{"kind": "Service", "metadata": {"name": f"s{i}"}} for i in range(200)]
    doc["items"] += [{"kind": "ConfigMap", "metadata": {"name": f"c{i}"}} for i in range(40)]
    doc["items"] += [{"kind": "Secret", "metadata": {"name": f"x{i}"}} for i in range(10)]
    for output in ("text", "json", "yaml"):
        res = _solve(tmp_path, doc, "-o", output)
        assert res.exit_code == 0
        assert res.stderr.strip().splitlines() == [
            "placer: warning: 250 objects of 3 ignored kinds: Service 200, ConfigMap 40, Secret 10"
        ]
        assert "ignored" not in res.stdout


def _with_pdb(allowed: int) -> Json:
    doc = _dump()
    doc["items"].append(
        {
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "guard", "namespace": "shop"},
            "spec": {"selector": {}},
            "status": {"disruptionsAllowed": allowed},
        }
    )
    return doc


def test_a_negative_disruption_budget_is_refused(tmp_path: Path) -> None:
    assert _solve(tmp_path, _with_pdb(0)).exit_code == 0
    res = _solve(tmp_path, _with_pdb(-1))
    assert res.exit_code == 2 and "status.disruptionsAllowed: must be 0 or more, got -1" in res.stderr


def test_an_invalid_pod_is_an_unplaced_entry_not_a_failed_file(tmp_path: Path) -> None:
    """An unreadable placer annotation is the pod's problem: exit 0 (1 with --fail-on-unplaced)."""
    doc = _set(_dump(), "items/1/metadata/annotations", {"placer.io/when-no-node-fits": "panic"})
    res = _solve(tmp_path, doc, "-o", "json")
    assert res.exit_code == 0
    (entry,) = json.loads(res.stdout)["unplaced"]
    assert entry["code"] == "Invalid" and "placer.io/when-no-node-fits" in entry["detail"]["invalid"]
    assert res.stderr.count("placer: warning:") == 1 and "shop/web" in res.stderr
    assert _solve(tmp_path, doc, "--fail-on-unplaced").exit_code == 1


def _nest(levels: int, shape: str) -> str:
    """``levels`` containers inside one another: arrays, objects, or both alternating."""
    opened = closed = ""
    for i in range(levels):
        as_object = shape == "objects" or (shape == "mixed" and i % 2 == 1)
        opened += '{"k": ' if as_object else "["
        closed = ("}" if as_object else "]") + closed
    return opened + "1" + closed


@pytest.mark.parametrize("shape", ["arrays", "objects", "mixed"])
@pytest.mark.parametrize("in_thread", [False, True], ids=["alone", "beside another thread"])
def test_the_depth_bound_is_exact_however_the_depth_is_checked(shape: str, in_thread: bool) -> None:
    """64 levels load, 65 do not: whether the decoder refuses them itself (the CLI's read, no other
    thread running) or the walk after decoding does (another thread running, as in the controller)."""
    outcomes: dict[int, bool] = {}

    def decode_each() -> None:
        for levels in range(MAX_DEPTH - 3, MAX_DEPTH + 4):
            try:
                decode_document("f.json", _nest(levels, shape))
                outcomes[levels] = True
            except InputError as exc:
                assert "nested more than 64 levels deep" in exc.message
                outcomes[levels] = False

    if in_thread:
        stop = threading.Event()
        other = threading.Thread(target=stop.wait)
        other.start()
        try:
            decode_each()
        finally:
            stop.set()
            other.join()
    else:
        decode_each()
    assert outcomes == {levels: levels <= MAX_DEPTH for levels in range(MAX_DEPTH - 3, MAX_DEPTH + 4)}
