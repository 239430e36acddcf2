"""The command line: output contract, formats, exit codes, and bad input without tracebacks.

Bad input: each case is one line on stderr naming the file and the object/field, exit code 2.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from support import node, pod
from typer.testing import CliRunner

from placer.cli.app import app

runner = CliRunner()
C1 = [{"name": "c"}]  # the API server refuses a pod without a container


def _write(tmp_path: Path, data: Any, name: str = "cluster.json") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def _boreas(tmp_path: Path) -> Path:
    pods = [pod(f"proxy-{i}", cpu="7.5", creationTimestamp=f"2024-01-01T00:00:0{i}Z") for i in range(2)]
    pods += [pod(f"backend-{i}", cpu="5", creationTimestamp=f"2024-01-01T00:01:0{i}Z") for i in range(3)]
    return _write(tmp_path, {"nodes": [node("a", cpu="15"), node("b", cpu="15")], "pods": pods})


def test_json_output_follows_the_contract(tmp_path: Path) -> None:
    res = runner.invoke(app, ["solve", str(_boreas(tmp_path)), "--output", "json", "--deterministic"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert set(data) == {
        "schemaVersion",
        "status",
        "policy",
        "summary",
        "placements",
        "unplaced",
        "evictions",
        "steps",
        "metrics",
    }
    assert data["schemaVersion"] == 7 and data["policy"] == "placer" and data["status"] == "optimal"
    assert [p["pod"] for p in data["placements"]] == sorted(p["pod"] for p in data["placements"])
    assert {p["kind"] for p in data["placements"]} == {"pending"}
    assert set(data["metrics"]) >= {
        "placed",
        "replacements",
        "moved",
        "preempted",
        "unplaced",
        "imbalance",
        "std_score",
        "solve_seconds",
        "read_seconds",
        "gap",
    }
    assert data["metrics"]["placed"] == 5


def test_yaml_output_is_the_same_document(tmp_path: Path) -> None:
    path = _boreas(tmp_path)
    as_json = json.loads(runner.invoke(app, ["solve", str(path), "-o", "json", "--deterministic"]).stdout)
    as_yaml = yaml.safe_load(runner.invoke(app, ["solve", str(path), "-o", "yaml", "--deterministic"]).stdout)
    for doc in (as_json, as_yaml):
        doc["metrics"].pop("solve_seconds")
        doc["metrics"].pop("read_seconds")
    assert as_json == as_yaml


def test_default_policy_and_reason_format(tmp_path: Path) -> None:
    res = runner.invoke(app, ["solve", str(_boreas(tmp_path)), "-o", "json", "--policy", "default"])
    data = json.loads(res.stdout)
    assert data["policy"] == "default"
    detail = data["unplaced"][0].pop("detail")
    assert data["unplaced"] == [
        {"pod": "default/backend-2", "code": "Outranked", "reason": "0/2 nodes are available: 2 Insufficient cpu."}
    ]  # the room it had before the batch went to equal-key pods queued first
    # The simulation's reason is data too: backend-2 asks 5 cpu, the most either node has free is 2.5.
    assert detail["filters"] == [
        {"filter": "NodeResourcesFit", "resource": "cpu", "nodes": 2, "requested": 5000, "mostFree": 2500}
    ]


def test_text_output_shows_placements_nodes_and_metrics(tmp_path: Path) -> None:
    res = runner.invoke(app, ["solve", str(_boreas(tmp_path)), "--compare", "default"])
    assert res.exit_code == 0, res.output
    for text in ("Placements", "default/proxy-0", "Nodes", "-> 100%", "imbalance", "Side by side", "placed"):
        assert text in res.stdout


def test_a_group_batch_size_without_batches_is_refused_before_reading(tmp_path: Path) -> None:
    res = runner.invoke(app, ["solve", str(tmp_path / "absent.json"), "--group-batch-size", "10"])
    assert res.exit_code == 2
    assert "--group-batch-size needs --batch-size" in res.stderr


def test_fail_on_unplaced_exits_one(tmp_path: Path) -> None:
    path = _write(tmp_path, {"nodes": [node("a", cpu="1")], "pods": [pod("p", cpu="2")]})
    assert runner.invoke(app, ["solve", str(path), "-o", "json"]).exit_code == 0
    assert runner.invoke(app, ["solve", str(path), "-o", "json", "--fail-on-unplaced"]).exit_code == 1


def test_strategy_and_config_file_are_honoured(tmp_path: Path) -> None:
    nodes = [node(f"n{i}") for i in range(3)]
    path = _write(tmp_path, {"nodes": nodes, "pods": [pod(f"p{i}") for i in range(3)]})
    packed = json.loads(runner.invoke(app, ["solve", str(path), "-o", "json", "--strategy", "pack"]).stdout)
    assert len({p["node"] for p in packed["placements"]}) == 1
    cfg = tmp_path / "config.yaml"
    cfg.write_text("strategy: spread\n")
    spread = json.loads(runner.invoke(app, ["solve", str(path), "-o", "json", "--config", str(cfg)]).stdout)
    assert len({p["node"] for p in spread["placements"]}) == 3


def test_scheduler_name_selects_the_batch(tmp_path: Path) -> None:
    pods = [pod("mine"), pod("other", schedulerName="default-scheduler")]
    path = _write(tmp_path, {"nodes": [node("a")], "pods": pods})
    only = json.loads(runner.invoke(app, ["solve", str(path), "-o", "json"]).stdout)
    every = json.loads(runner.invoke(app, ["solve", str(path), "-o", "json", "--scheduler-name", "*"]).stdout)
    assert only["metrics"]["placed"] == 1 and every["metrics"]["placed"] == 2


def test_a_dump_of_default_scheduler_pods_says_why_nothing_is_placed(tmp_path: Path) -> None:
    """A real dump's pending pods carry schedulerName default-scheduler: the answer is never an
    unexplained empty one (issue 16), and the hint given works."""
    pending = {"phase": "Pending"}
    items: list[dict[str, Any]] = [
        {"kind": "Node", "metadata": {"name": "a"}, "status": {"allocatable": {"cpu": "4", "pods": "10"}}}
    ]
    for i, scheduler in enumerate(["default-scheduler", "default-scheduler", "batch"]):
        spec = {"schedulerName": scheduler, "containers": C1}
        items.append({"kind": "Pod", "metadata": {"name": f"p{i}"}, "spec": spec, "status": pending})
    path = _write(tmp_path, {"kind": "List", "items": items})
    text = runner.invoke(app, ["solve", str(path)], env={"COLUMNS": "300"})
    assert text.exit_code == 0
    # The warning goes to stderr (stdout stays the answer), the "nothing to place" line to stdout.
    assert "3 pending pods addressed to other schedulers (default-scheduler 2, batch 1)" in text.stderr
    assert "--scheduler-name default-scheduler" in text.stderr and "Nothing to place" in text.stdout
    hinted = runner.invoke(app, ["solve", str(path), "-o", "json", "--scheduler-name", "default-scheduler"])
    assert json.loads(hinted.stdout)["metrics"]["placed"] == 2


def test_schema_is_a_json_schema_of_the_native_format() -> None:
    res = runner.invoke(app, ["schema"])
    schema = json.loads(res.stdout)
    assert schema["type"] == "object" and "nodes" in schema["properties"] and "nodes" in schema["required"]


def test_a_kubectl_dump_with_unknown_kinds_and_dangling_pods_warns(tmp_path: Path) -> None:
    doc = {
        "kind": "List",
        "items": [
            {"kind": "Node", "metadata": {"name": "a"}, "status": {"allocatable": {"cpu": "2", "pods": "10"}}},
            {"kind": "Service", "metadata": {"name": "svc"}},
            {"kind": "Pod", "metadata": {"name": "ghost"}, "spec": {"nodeName": "gone", "containers": C1}},
            {"kind": "Pod", "metadata": {"name": "p"}, "spec": {"schedulerName": "placer", "containers": C1}},
        ],
    }
    res = runner.invoke(app, ["solve", str(_write(tmp_path, doc)), "-o", "json"])
    assert res.exit_code == 0
    assert "1 object of 1 ignored kind: Service 1" in res.stderr
    assert "which is not in the cluster" in res.stderr
    assert json.loads(res.stdout)["metrics"]["placed"] == 1


def _node_list(**node_extra: Any) -> dict[str, Any]:
    item = {"kind": "Node", "metadata": {"name": "a"}, "status": {"allocatable": {"cpu": "2"}}}
    item.update(node_extra)
    return {"kind": "List", "items": [item]}


def _with_pod(spec: dict[str, Any], meta: dict[str, Any] | None = None) -> dict[str, Any]:
    doc = _node_list()
    doc["items"].append({"kind": "Pod", "metadata": meta or {"name": "p"}, "spec": spec})
    return doc


BAD: list[tuple[str, Any, str]] = [
    ("malformed JSON", '{"kind": "List", "items": [', "invalid JSON"),
    ("malformed YAML", "kind: List\nitems: [\n  - {a: 1\n", "invalid YAML"),
    ("empty file", "", "file is empty"),
    ("not a cluster", "[1, 2, 3]", "expected a Kubernetes List"),
    ("a list with no nodes", {"kind": "List", "items": []}, "no nodes"),
    ("unknown quantity suffix", _node_list(status={"allocatable": {"cpu": "2x"}}), "status.allocatable.cpu"),
    (
        "negative quantity",
        _with_pod({"containers": [{"name": "c", "resources": {"requests": {"cpu": "-1"}}}]}),
        "spec.containers[0].resources.requests.cpu",
    ),
    ("NaN quantity", '{"nodes": [{"name": "a", "allocatable": {"cpu": NaN}}]}', "nodes[0].allocatable.cpu"),
    (
        "duplicate node names",
        {"kind": "List", "items": [_node_list()["items"][0], _node_list()["items"][0]]},
        "duplicate name 'a'",
    ),
    (
        "invalid operator",
        _with_pod(
            {
                "containers": C1,
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {"matchExpressions": [{"key": "k", "operator": "Near", "values": ["x"]}]}
                            ]
                        }
                    }
                },
            }
        ),
        "invalid operator 'Near'",
    ),
    (
        "Gt with two values",
        _with_pod(
            {
                "containers": C1,
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {"matchExpressions": [{"key": "k", "operator": "Gt", "values": ["1", "2"]}]}
                            ]
                        }
                    }
                },
            }
        ),
        "exactly one value",
    ),
    ("bad taint effect", _node_list(spec={"taints": [{"key": "k", "effect": "Sometimes"}]}), "spec.taints[0].effect"),
    ("node without a name", {"kind": "List", "items": [{"kind": "Node", "metadata": {}}]}, "metadata.name"),
    ("labels that are not a map", _node_list(metadata={"name": "a", "labels": ["x"]}), "metadata.labels"),
    ("bad restart policy", _with_pod({"containers": C1, "restartPolicy": "Sometimes"}), "spec.restartPolicy"),
    ("native pod missing a name", {"nodes": [node("a")], "pods": [{"requests": {"cpu": "1"}}]}, "pods[0].name"),
    ("native unknown field", {"nodes": [node("a")], "pods": [pod("p", colour="red")]}, "pods[0].colour"),
    ("host port out of range", _with_pod({"containers": [{"name": "c", "ports": [{"hostPort": 70000}]}]}), "hostPort"),
    ("absurdly large quantity", _node_list(status={"allocatable": {"memory": "9Ei"}}), "status.allocatable.memory"),
    ("priority that is not an integer", _with_pod({"containers": C1, "priority": "high"}), "spec.priority"),
    ("pod with no containers", _with_pod({"containers": []}), "spec.containers: is required"),
    ("pod without a containers field", _with_pod({"schedulerName": "placer"}), "spec.containers: is required"),
]


@pytest.mark.parametrize(("case", "content", "field"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_one_line_naming_file_and_field_exit_2(
    tmp_path: Path, case: str, content: Any, field: str
) -> None:
    path = _write(tmp_path, content, "bad-input.json")
    res = runner.invoke(app, ["solve", str(path), "-o", "json"])
    assert res.exit_code == 2, (case, res.output)
    assert res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert "bad-input.json" in lines[0] and field in lines[0], lines[0]
    assert "Traceback" not in res.output


def test_an_unreadable_file_is_exit_2(tmp_path: Path) -> None:
    res = runner.invoke(app, ["solve", str(tmp_path / "missing.json")])
    assert res.exit_code == 2
    assert "missing.json: cannot read file" in res.stderr


def test_a_bad_config_file_is_exit_2_naming_the_field(tmp_path: Path) -> None:
    cfg = tmp_path / "config.yaml"
    cfg.write_text("strategy: zigzag\n")
    res = runner.invoke(app, ["solve", str(_boreas(tmp_path)), "--config", str(cfg)])
    assert res.exit_code == 2
    assert "config.yaml: strategy" in res.stderr


def test_usage_errors_are_exit_2(tmp_path: Path) -> None:
    assert runner.invoke(app, ["solve", str(_boreas(tmp_path)), "--batch-size", "0"]).exit_code == 2
    assert runner.invoke(app, ["solve", str(_boreas(tmp_path)), "--policy", "random"]).exit_code == 2


def test_text_output_follows_the_terminal_width_and_shows_gpus(tmp_path: Path) -> None:
    nodes = [node("a", allocatable={"nvidia.com/gpu": 4}), node("b")]
    pods = [pod("train", requests={"nvidia.com/gpu": 2})]
    path = _write(tmp_path, {"nodes": nodes, "pods": pods})
    wide = runner.invoke(app, ["solve", str(path)], env={"COLUMNS": "200"})
    assert "nvidia.com/gpu" in wide.stdout and "50% of 4" in wide.stdout
    narrow = runner.invoke(app, ["solve", str(path)], env={"COLUMNS": "60"})
    assert max(len(line) for line in narrow.stdout.splitlines()) <= 60


def test_every_json_answer_follows_the_published_schema(tmp_path: Path) -> None:
    import jsonschema  # noqa: PLC0415  (dev dependency)

    pods = [
        pod("job", cpu="2", node="a", restartPolicy="Never"),
        pod("web", cpu="2"),
        pod("huge", cpu="64"),
    ]
    path = _write(tmp_path, {"nodes": [node("a", cpu="2")], "pods": pods})
    schemas = {k: json.loads(runner.invoke(app, ["schema", k]).stdout) for k in ("result", "compare")}
    single = json.loads(runner.invoke(app, ["solve", str(path), "-o", "json"]).stdout)
    assert single["evictions"] and single["unplaced"] and single["unplaced"][0]["detail"]
    jsonschema.validate(single, schemas["result"])
    both = json.loads(runner.invoke(app, ["solve", str(path), "-o", "json", "--compare", "default"]).stdout)
    jsonschema.validate(both, schemas["compare"])
    for broken in ({**single, "status": "perfect"}, {**single, "surprise": 1}, {"result": single}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(broken, schemas["compare" if "result" in broken else "result"])
    moves = json.loads(runner.invoke(app, ["rebalance", str(path), "-o", "json"]).stdout)
    jsonschema.validate(moves, schemas["result"])
    explain_schema = json.loads(runner.invoke(app, ["schema", "explain"]).stdout)
    keys = ["default/web", "default/huge", "default/job"]
    stories = json.loads(runner.invoke(app, ["explain", *keys, str(path), "-o", "json"]).stdout)
    jsonschema.validate(stories, explain_schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**stories, "surprise": 1}, explain_schema)
    (story, *_) = stories["explanations"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**stories, "explanations": [{**story, "surprise": 1}]}, explain_schema)


def test_plot_draws_a_png_and_says_what_to_install_without_matplotlib(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "nodes.png"
    res = runner.invoke(app, ["solve", str(_boreas(tmp_path)), "--compare", "default", "--plot", str(out)])
    assert res.exit_code == 0, res.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if it were not installed
    missing = tmp_path / "missing.png"
    res = runner.invoke(app, ["solve", str(_boreas(tmp_path)), "--plot", str(missing)])
    assert res.exit_code == 2 and "pip install 'kube-placer[plot]'" in res.stderr and not missing.exists()


def test_explain_tells_one_pods_whole_story(tmp_path: Path) -> None:
    pods = [
        pod("job", cpu="2", node="a", restartPolicy="Never"),
        pod("web", cpu="2"),
        pod("small", cpu="1", creationTimestamp="2024-01-01T00:00:00Z"),
        pod("other", schedulerName="default-scheduler"),
    ]
    path = _write(tmp_path, {"nodes": [node("a", cpu="2"), node("b", cpu="1")], "pods": pods})
    (story,) = json.loads(runner.invoke(app, ["explain", "default/web", str(path), "-o", "json"]).stdout)[
        "explanations"
    ]
    assert story["in_batch"] and story["node"] == "a" and story["feasible"] == 0
    (filt,) = story["filters"]["filters"]
    assert (filt["filter"], filt["resource"], filt["nodes"]) == ("NodeResourcesFit", "cpu", 2)
    assert [e["pod"] for e in story["evictions"]] == ["default/job"]
    (small,) = json.loads(runner.invoke(app, ["explain", "default/small", str(path), "-o", "json"]).stdout)[
        "explanations"
    ]
    assert [c["node"] for c in small["candidates"]] == ["b"] and small["candidates"][0]["chosen"]
    other = runner.invoke(app, ["explain", "default/other", str(path)], env={"COLUMNS": "200"})
    assert "addressed to scheduler 'default-scheduler'" in other.stdout
    text = runner.invoke(app, ["explain", "default/web", str(path)], env={"COLUMNS": "200"})
    assert "Decision: placed on a" in text.stdout and "default/job on a is preempted" in text.stdout
    missing = runner.invoke(app, ["explain", "default/nope", str(path)])
    assert missing.exit_code == 2 and "no pod 'default/nope'" in missing.stderr


DUMP = Path(__file__).resolve().parents[1] / "examples" / "boreas-dump.json"


def test_the_readme_walkthrough_on_a_real_dump_of_default_scheduler_pods() -> None:
    """README "A first run, step by step": a kubectl dump whose pods all carry
    default-scheduler, from the empty answer's hint to a compare with explanations."""
    first = runner.invoke(app, ["solve", str(DUMP)], env={"COLUMNS": "100"})
    assert first.exit_code == 0 and "Nothing to place" in first.stdout
    assert "5 pending pods addressed to other schedulers (default-scheduler 5)" in first.stderr
    hint = "--scheduler-name default-scheduler"
    assert hint in first.stderr
    both = runner.invoke(app, ["solve", str(DUMP), *hint.split(), "--compare", "default"], env={"COLUMNS": "100"})
    assert both.exit_code == 0
    rows = {line.split("│")[1].strip(): line for line in both.stdout.splitlines() if line.count("│") == 5}
    assert "<-" in rows["placed (higher is better)"] and "<-" in rows["unplaced (fewer is better)"]
    assert "seconds to decide" in rows
    default = json.loads(
        runner.invoke(app, ["solve", str(DUMP), *hint.split(), "--policy", "default", "-o", "json"]).stdout
    )
    (stranded,) = default["unplaced"]
    assert stranded["code"] == "Outranked" and stranded["reason"] == "0/2 nodes are available: 2 Insufficient cpu."
    (fit,) = stranded["detail"]["filters"]
    assert (fit["requested"], fit["mostFree"]) == (5000, 2500)
    story = runner.invoke(app, ["explain", stranded["pod"], str(DUMP), *hint.split()], env={"COLUMNS": "100"})
    assert "Decision: placed on" in story.stdout


def test_deterministic_answers_are_identical_and_the_limit_stays_in_seconds(tmp_path: Path) -> None:
    args = ["solve", str(DUMP), "--scheduler-name", "default-scheduler", "-o", "json", "--deterministic"]
    answers = [json.loads(runner.invoke(app, [*args, "--time-limit", "2"]).stdout) for _ in range(2)]
    for answer in answers:
        answer["metrics"].pop("solve_seconds")
        answer["metrics"].pop("read_seconds")
    assert answers[0] == answers[1] and answers[0]["metrics"]["placed"] == 5
    help_text = runner.invoke(app, ["solve", "--help"], env={"COLUMNS": "200"}).stdout
    assert "the time limit as deterministic work" in help_text and "time limit in seconds" in help_text
