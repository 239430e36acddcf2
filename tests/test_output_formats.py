"""Every output format works on every answer: each command (solve, solve --compare, explain,
rebalance, check) in each format (text, json, yaml) over a corpus of answers: placements, unplaced
pods of every code, global plans with moves and with preemptions, gangs, rebalancing plans.

Each command's library call is recorded once per answer (the real call, its placements through
the independent validator), so the three formats print the same answer: text must not raise, and
json and yaml must both parse back to exactly the answer's data (and match ``placer schema``).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from support import DETERMINISTIC, validated
from typer.testing import CliRunner, Result

import placer.cli.app as cli
from placer.check import FixtureResult
from placer.cli.formats import dump, plain
from placer.explain import explain_document, explain_schema
from placer.inputs import load_cluster
from placer.models import Cluster, Filter, compare_schema, result_schema
from placer.rebalance import RebalanceOutcome
from placer.service import Outcome, SolveOptions

runner = CliRunner()
ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "infeasible"
EXAMPLES = ROOT / "examples"
FORMATS = ("text", "json", "yaml")
Json = dict[str, Any]


def _container(cpu: str, **extra: Any) -> Json:
    return {"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}, **extra}


def _pod(name: str, cpu: str, *, node: str | None = None, priority: int = 0, created: int = 0, **meta: Any) -> Json:
    spec: Json = {"schedulerName": "placer", "priority": priority, "containers": [_container(cpu)]}
    spec.update(meta.pop("spec", {}))
    if node is not None:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "creationTimestamp": f"2026-01-01T00:00:{created:02d}Z"}
        | meta,
        "spec": spec,
        "status": {"phase": "Running" if node else "Pending"},
    }


def _node(name: str, cpu: str, **spec: Any) -> Json:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": spec,
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "ephemeral-storage": "20Gi", "pods": "110"}},
    }


def _every_code() -> Json:
    """A kubectl dump whose answer has placements and unplaced pods of every code but NotSolved
    (which ``_not_solved`` adds): Outranked (``lo``: the room it had went to ``hi``), Unschedulable
    (``huge``, and a gang waiting for its third member), Unsupported (DRA), Invalid (an annotation)."""
    gang = {"labels": {"placer.io/gang": "train", "placer.io/gang-size": "3"}}
    items = [
        _node("n1", "5"),
        _node("n2", "4", taints=[{"key": "gpu", "value": "true", "effect": "NoSchedule"}]),
        _pod("run-1", "1", node="n1"),
        _pod("hi", "3", priority=100, created=1),
        _pod("small", "500m", created=2),
        _pod("lo", "3", created=3),
        _pod("huge", "64", created=4),
        _pod("dra", "1", created=5, spec={"resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu-claim"}]}),
        _pod("bad", "1", created=6, annotations={"placer.io/when-no-node-fits": "sometimes"}),
        _pod("train-0", "1", created=7, **gang),
        _pod("train-1", "1", created=8, **gang),
    ]
    return {"apiVersion": "v1", "kind": "List", "items": items}


def _not_solved(outcome: Outcome) -> Outcome:
    """The same answer with ``lo`` left undecided by a solver that ran out of time: the NotSolved
    code cannot be provoked deterministically on an instance this small."""
    stopped = {"solver": "feasible"}
    unplaced = [
        u.model_copy(update={"code": "NotSolved", "detail": u.detail and u.detail.model_copy(update=stopped)})
        if u.pod == "default/lo"
        else u
        for u in outcome.result.unplaced
    ]
    return replace(outcome, result=outcome.result.model_copy(update={"unplaced": unplaced, "status": "feasible"}))


CASES = {
    "placements": (EXAMPLES / "boreas.json", None),
    "every code": (_every_code(), None),
    "not solved": (_every_code(), _not_solved),
    "moves": (FIXTURES / "08-chain-of-moves" / "cluster.json", None),
    "preemptions": (FIXTURES / "16-thesis-always-big" / "cluster.json", None),
    "gang preempts": (FIXTURES / "17-gang-preempts-only-as-a-whole" / "cluster.json", None),
    "gang cannot fit": (FIXTURES / "18-gang-that-cannot-fit-evicts-nothing" / "cluster.json", None),
}


def _file(tmp_path: Path, source: Path | Json) -> Path:
    path = tmp_path / "cluster.json"
    if isinstance(source, Path):
        shutil.copy(source, path)
    else:
        path.write_text(json.dumps(source))
    return path


class Recorder:
    """Replaces one library call of the CLI by the real call made once per argument key."""

    def __init__(self, real: Callable[..., Any], key: Callable[..., Any], after: Callable[..., Any]) -> None:
        self.real, self.key, self.after = real, key, after
        self.answers: dict[Any, Any] = {}

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        k = self.key(*args, **kwargs)
        if k not in self.answers:
            self.answers[k] = self.after(args, self.real(*args, **kwargs))
        return self.answers[k]


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Recorder]]:
    def solved(args: tuple[Any, ...], outcome: Outcome) -> Outcome:
        cluster: Cluster = args[0]
        options: SolveOptions = args[1]
        return validated(cluster, outcome, options.config, options.policy)

    recorders = {
        "solve_cluster": Recorder(cli.solve_cluster, lambda c, o: o.policy, solved),
        "explain_pods": Recorder(cli.explain_pods, lambda c, o, keys: tuple(keys), lambda a, stories: stories),
        "rebalance_cluster": Recorder(cli.rebalance_cluster, lambda c, o: "one", lambda a, out: out),
        "run_fixture": Recorder(cli.run_fixture, lambda f, **kw: f.name, lambda a, r: r),
    }
    for name, recorder in recorders.items():
        monkeypatch.setattr(cli, name, recorder)
    yield recorders


def _invoke(args: list[str], exit_code: int = 0) -> Result:
    res = runner.invoke(cli.app, args, env={"COLUMNS": "250"})
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    assert "Traceback" not in res.output, res.output
    assert res.exit_code == exit_code, res.output
    return res


def _formats(args: list[str], expected: Callable[[], Any], schema: Json | None = None, exit_code: int = 0) -> str:
    """Run ``args`` in each format; json and yaml must parse back to ``expected()``'s data (taken
    after the first run, when the recorded answer exists). Returns the text output."""
    text = _invoke([*args, "-o", "text"], exit_code).stdout
    as_json = json.loads(_invoke([*args, "-o", "json"], exit_code).stdout)
    as_yaml = yaml.safe_load(_invoke([*args, "-o", "yaml"], exit_code).stdout)
    if schema is not None:
        jsonschema.validate(as_json, schema)
    want = plain(expected())
    for doc in (as_json, as_yaml, want):
        _drop_read_time(doc)
    assert as_json == want
    assert as_yaml == want
    return text


def _drop_read_time(doc: Any) -> None:
    """The command adds the time it took to read its input, which the recorded answer lacks."""
    if isinstance(doc, dict):
        if isinstance(doc.get("metrics"), dict):
            doc["metrics"].pop("read_seconds", None)
        for key in ("result", "compare"):
            _drop_read_time(doc.get(key))


def _contract(answers: dict[Any, Any], key: str) -> dict[str, object]:
    result: dict[str, object] = answers[key].result.contract()
    return result


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"solver": {**DETERMINISTIC["solver"], "timeLimit": 2}}))
    return path


@pytest.mark.parametrize("case", list(CASES))
def test_solve_and_compare_print_every_answer_in_every_format(
    case: str, tmp_path: Path, recorded: dict[str, Recorder]
) -> None:
    source, change = CASES[case]
    if change is not None:
        solving = recorded["solve_cluster"]
        solving.after = lambda a, o, after=solving.after: change(after(a, o))  # type: ignore[misc]
    path, config = str(_file(tmp_path, source)), str(_config(tmp_path))
    answers = recorded["solve_cluster"].answers

    text = _formats(["solve", path, "--config", config], lambda: _contract(answers, "placer"), result_schema())
    result = answers["placer"].result
    for u in result.unplaced:  # every unplaced pod and its code, in the text too
        assert u.pod in text and u.code in text
    if result.evictions:
        assert "Global plan: evictions" in text

    def both() -> Json:
        return {"result": _contract(answers, "placer"), "compare": _contract(answers, "default")}

    text = _formats(["solve", path, "--config", config, "--compare", "default"], both, compare_schema())
    assert "Side by side" in text


def test_the_corpus_holds_every_unplaced_code_moves_preemptions_and_gangs(
    tmp_path: Path, recorded: dict[str, Recorder]
) -> None:
    """The corpus above is what it claims to be (so the format test covers each kind of answer)."""
    codes: set[str] = set()
    kinds: set[str] = set()
    gangs = 0
    for i, (source, change) in enumerate(CASES.values()):
        (tmp_path / str(i)).mkdir()
        path = _file(tmp_path / str(i), source)
        recorded["solve_cluster"].answers.clear()
        _invoke(["solve", str(path), "--config", str(_config(tmp_path)), "-o", "json"])
        outcome = recorded["solve_cluster"].answers["placer"]
        outcome = change(outcome) if change is not None else outcome
        codes |= {u.code for u in outcome.result.unplaced}
        kinds |= {e.kind for e in outcome.result.evictions}
        gangs += sum(1 for u in outcome.result.unplaced if u.detail is not None and u.detail.gang is not None)
    assert codes == {"Unschedulable", "Outranked", "NotSolved", "Unsupported", "Invalid"}
    assert kinds == {"move", "preempt"}
    assert gangs >= 2


def _racks() -> Json:
    """A Kubernetes 1.37 PodGroup of three pods required in one rack, no rack with room for all:
    the story of a member lists every rack tried and what it lacked."""
    gang = {"spec": {"schedulingGroup": {"podGroupName": "train"}}}
    group = {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "train", "namespace": "default"},
        "spec": {
            "schedulingPolicy": {"gang": {"minCount": 3}},
            "schedulingConstraints": {"topology": [{"key": "rack"}]},
        },
    }
    nodes = [_node(f"{rack}-{i}", "1") for rack in ("r1", "r2") for i in range(2)]
    for n in nodes:
        n["metadata"]["labels"]["rack"] = n["metadata"]["name"][:2]
    pods = [_pod(f"train-{i}", "1", created=i, **gang) for i in range(3)]
    return {"apiVersion": "v1", "kind": "List", "items": [*nodes, group, *pods]}


EXPLAINED = {**CASES, "topology gang": (_racks(), None)}


@pytest.mark.parametrize(
    ("case", "leaves_pods_out"),
    [("every code", True), ("preemptions", False), ("gang cannot fit", True), ("topology gang", True)],
)
def test_explain_prints_every_pod_in_every_format(
    case: str, leaves_pods_out: bool, tmp_path: Path, recorded: dict[str, Recorder]
) -> None:
    source, _ = EXPLAINED[case]
    path, config = _file(tmp_path, source), str(_config(tmp_path))
    stories = recorded["explain_pods"].answers
    keys = sorted(p.key for p in load_cluster(path).pods)
    for key in keys:  # one pod at a time
        text = _formats(
            ["explain", key, str(path), "--config", config],
            lambda key=key: explain_document(stories[(key,)]),
            explain_schema(),
        )
        assert key in text
    # Every pod from one solve, in one document.
    text = _formats(
        ["explain", *keys, str(path), "--config", config],
        lambda: explain_document(stories[tuple(keys)]),
        explain_schema(),
    )
    assert all(key in text for key in keys)
    told = stories[tuple(keys)]
    # Some story is of an unplaced pod where the answer leaves pods out (the thesis case places all).
    assert bool({s.unplaced_code for s in told} - {None}) == leaves_pods_out
    assert any(not s.in_batch for s in told) or case == "topology gang"  # and some of a running pod
    if case == "topology gang":
        assert {d.domain for s in told for d in s.domains} == {"r1", "r2"} and "Topology domains tried" in text


@pytest.mark.parametrize("case", ["every code", "preemptions", "gang cannot fit"])
def test_solve_explains_pods_of_its_answer_in_every_format(
    case: str, tmp_path: Path, recorded: dict[str, Recorder], monkeypatch: pytest.MonkeyPatch
) -> None:
    source, _ = CASES[case]
    path, config = _file(tmp_path, source), str(_config(tmp_path))
    keys = sorted(p.key for p in load_cluster(path).pods)
    answers = recorded["solve_cluster"].answers
    explained: list[Any] = []

    def document() -> Json:
        return {"result": _contract(answers, "placer"), "explain": explain_document(explained[-1])}

    real = cli.explain_answer

    def kept(*args: Any) -> Any:
        explained.append(real(*args))
        return explained[-1]

    monkeypatch.setattr(cli, "explain_answer", kept)
    text = _formats(["solve", str(path), "--config", config, *(f"--explain={k}" for k in keys)], document)
    assert all(key in text for key in keys)
    stories = explained[-1]
    placed = {p.pod: p.node for p in answers["placer"].result.placements if p.pod}
    assert all(s.node == placed.get(s.pod) for s in stories)  # read off the answer it printed


def test_rebalance_prints_a_plan_and_no_plan_in_every_format(tmp_path: Path, recorded: dict[str, Recorder]) -> None:
    answers = recorded["rebalance_cluster"].answers
    for example in ("rebalance.json", "boreas.json"):
        answers.clear()
        path = str(_file(tmp_path, EXAMPLES / example))
        text = _formats(["rebalance", path], lambda: _contract(answers, "one"), result_schema())
        outcome: RebalanceOutcome = answers["one"]
        assert ("Rebalancing plan: moves" in text) == bool(outcome.result.evictions)
    assert outcome.report.kept is False


def test_check_prints_passing_and_failing_fixtures_in_every_format(
    tmp_path: Path, recorded: dict[str, Recorder]
) -> None:
    shutil.copytree(FIXTURES / "01-boreas-two-batch", tmp_path / "fixtures" / "01-passes")
    failing = tmp_path / "fixtures" / "02-fails"
    shutil.copytree(FIXTURES / "08-chain-of-moves", failing)
    (failing / "expect.yaml").write_text("placed: 5\nmoved: 0\n")
    results = recorded["run_fixture"].answers
    directory = str(tmp_path / "fixtures")

    def document() -> Json:
        ordered: list[FixtureResult] = [results["01-passes"], results["02-fails"]]
        return {"directory": directory, "passed": 1, "fixtures": ordered}

    text = _formats(["check", directory, "--time-limit", "2"], document, exit_code=1)
    assert "1 of 2 fixtures pass" in text
    assert results["02-fails"].diffs and not results["01-passes"].diffs


@pytest.mark.parametrize(
    "value",
    [
        pytest.param({"filter": Filter.RESOURCES}, id="a StrEnum"),
        pytest.param({"k": (1, 2.5, None, True)}, id="a tuple"),
        pytest.param({"nan": float("nan")}, id="a float JSON cannot hold"),
    ],
)
def test_plain_data_reads_back_the_same_from_both_formats(value: Json) -> None:
    data = plain(value)
    assert json.loads(dump(value, "json")) == data == yaml.safe_load(dump(value, "yaml"))
