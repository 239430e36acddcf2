"""Every output format works on every answer: each command (solve, solve --compare, explain,
rebalance, check) in each format (text, json, yaml) over a corpus of answers: placements, unplaced
pods of every code, global plans with moves and with preemptions, gangs, rebalancing plans; and
how the outputs scale on the 30-node clusters of ``scale_dumps``: a summary line first, each
eviction cause once, every cut table saying how many rows more, node names never cut on a narrow
terminal, and rebalancing naming the budget that stopped it with what raising it does.

Each command's library call is recorded once per answer (the real call, its placements through
the independent validator), so the three formats print the same answer: text must not raise, and
json and yaml must both parse back to exactly the answer's data (and match ``placer schema``).
"""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import scale_dumps
import yaml
from rich.console import Console
from support import DETERMINISTIC, validated
from typer.testing import CliRunner, Result

import placer.cli.app as cli
from placer.check import FixtureResult
from placer.cli.app import load_config
from placer.cli.formats import dump, plain
from placer.cli.tables import Col, fitted
from placer.explain import explain_document, explain_schema
from placer.inputs import load_cluster
from placer.models import Cluster, Filter, compare_schema, eviction_cause, result_schema
from placer.rebalance import RebalanceOptions, RebalanceOutcome, rebalance_cluster
from placer.service import Outcome, SolveOptions
from placer.validate import validate_rebalance

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


# Outputs that scale (issue 32 item 4), on the 30-node clusters of tests/scale_dumps.py.


def _text(args: list[str], columns: int) -> str:
    res = runner.invoke(cli.app, args, env={"COLUMNS": str(columns)})
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output
    return res.stdout


def _tight(tmp_path: Path, recorded: dict[str, Recorder]) -> tuple[list[str], Outcome]:
    path = _file(tmp_path, scale_dumps.tight())
    args = ["solve", str(path), "--config", str(_config(tmp_path))]
    _invoke([*args, "-o", "json"])
    return args, recorded["solve_cluster"].answers["placer"]


def test_a_plan_opens_with_its_summary_and_shows_each_cause_once(tmp_path: Path, recorded: dict[str, Recorder]) -> None:
    args, outcome = _tight(tmp_path, recorded)
    result = outcome.result
    summary = result.summary
    evictions, placements = result.evictions, result.placements
    assert summary.evictions == len(evictions) >= 50  # the plan is as large as the case claims
    assert summary.moves == sum(1 for e in evictions if e.kind == "move")
    assert summary.preemptions == summary.evictions - summary.moves and summary.binds == len(placements)
    per_namespace = {ns: n.binds + n.moves + n.preemptions + n.unplaced for ns, n in summary.namespaces.items()}
    assert sum(per_namespace.values()) == len(placements) + len(evictions) + len(result.unplaced)
    assert per_namespace["batch"] == sum(1 for e in evictions if e.pod.startswith("batch/"))
    assert sum(c.evictions for c in summary.causes) == len(evictions) and len(summary.causes) < 5

    text = _formats([*args], lambda: _contract(recorded["solve_cluster"].answers, "placer"), result_schema())
    lines = _text(args, 80).splitlines()
    assert lines[0].startswith(f"Plan: {len(evictions)} evictions ({summary.moves} moves")
    shown = [eviction_cause(e) for e in evictions[:40]]  # the rows of the table (cut at 40)
    for i, cause in enumerate(summary.causes, 1):  # each cause printed once, its evictions point at it
        assert text.count(cause.reason) == 1
        assert text.count(f"[{i}]") == shown.count(cause.reason) + 2  # its rows, the legend, the summary
    assert not any(e.reason and e.reason in text for e in evictions)  # no row repeats its reason


def _caption(text: str, title: str) -> str:
    """The caption under the table titled ``title``: the first line after it that is no table row."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if title in line)
    return next(line for line in lines[start + 3 :] if line.strip() and line.lstrip()[0] not in "│┃└┏┡━┗├")


def test_every_cut_table_says_how_many_more_and_max_rows_zero_shows_all(
    tmp_path: Path, recorded: dict[str, Recorder]
) -> None:
    args, outcome = _tight(tmp_path, recorded)
    result = outcome.result
    text = _text([*args, "--max-rows", "5"], 250)
    assert f"{len(result.placements) - 5} more, see -o json" in _caption(text, "Placements")
    assert f"{len(result.evictions) - 5} more, see -o json" in _caption(text, "Global plan: evictions")
    assert f"{len(result.steps) - 5} more, see -o json" in _caption(text, "Global plan: steps")
    changed = sum(
        1 for i in range(len(outcome.before.nodes)) if (outcome.after.used[i] != outcome.before.used[i]).any()
    )
    assert f"the {changed} of 30 nodes that changed" in text and f"{changed - 5} more" in text
    every = _text([*args, "--max-rows", "0"], 250)
    assert " more, " not in every
    assert all(p.pod in every for p in result.placements if p.pod) and all(e.pod in every for e in result.evictions)

    recorded["solve_cluster"].answers.clear()
    recorded["solve_cluster"].after = lambda a, o: o  # two policies' answers; the validator ran on the first
    compare = _text([*args, "--compare", "default", "--max-rows", "3"], 250)
    differ = int(compare.split("Pods placed differently (")[1].split(")")[0])
    assert differ > 3 and f"{differ - 3} more, see -o json" in _caption(compare, "Pods placed differently")


@pytest.mark.parametrize("columns", [80, 120])
def test_node_names_stay_whole_on_a_narrow_terminal(
    columns: int, tmp_path: Path, recorded: dict[str, Recorder]
) -> None:
    args, _ = _tight(tmp_path, recorded)
    names = [scale_dumps.node_name(i) for i in range(scale_dumps.NODES)]
    (tmp_path / "hot").mkdir()
    hot = str(_file(tmp_path / "hot", scale_dumps.hot()))
    for text in (_text(args, columns), _text(["rebalance", hot, "--config", str(_config(tmp_path))], columns)):
        assert max(len(line) for line in text.splitlines()) <= columns
        assert "…" not in text
        shown = {w for line in text.splitlines() for w in line.replace("│", " ").replace("┃", " ").split()}
        cut = [w for w in shown if w.startswith("ip-10-0-") and w not in names]
        assert cut == [] and len(shown & set(names)) >= 10


def test_rebalance_names_the_budget_that_stopped_it_and_what_raising_it_does(
    tmp_path: Path, recorded: dict[str, Recorder]
) -> None:
    path = str(_file(tmp_path, scale_dumps.hot()))
    args = ["rebalance", path, "--config", str(_config(tmp_path))]
    answers = recorded["rebalance_cluster"].answers
    text = _formats(args, lambda: _contract(answers, "one"), result_schema())
    outcome: RebalanceOutcome = answers["one"]
    cfg = load_config(_config(tmp_path))
    cluster = load_cluster(Path(path))
    assert validate_rebalance(cluster, outcome.result, cfg.rebalance, now=0.0) == []
    (stop,) = outcome.report.stops
    moves = len(outcome.result.evictions)
    assert stop.key == "rebalance.limits.perNamespacePercent" and stop.scopes == ["analytics"]
    assert moves == stop.limit and stop.more is not None and stop.more > 0 and stop.raised_to is not None
    assert f"stopped by {stop.key} ({stop.limit} moves per namespace, in analytics)" in text.replace("\n", " ")
    # What raising it would do is what the plan does once it is raised: set the limit it named.
    limits = cfg.rebalance.limits.model_copy(update={"per_namespace": stop.raised_to, "per_namespace_percent": 0})
    raised = cfg.model_copy(update={"rebalance": cfg.rebalance.model_copy(update={"limits": limits})})
    again = cli.rebalance_cluster.real(cluster, RebalanceOptions(config=raised, now=0.0))  # type: ignore[attr-defined]
    assert validate_rebalance(cluster, again.result, raised.rebalance, now=0.0) == []
    assert len(again.result.evictions) == moves + stop.more
    assert (again.report.after.spread, again.report.after.hot) == (stop.spread, stop.hot)


def test_rebalance_names_a_disruption_budget_that_stopped_it(tmp_path: Path) -> None:
    doc = scale_dumps.hot()
    for p in doc["pods"]:
        if p["namespace"] == "analytics":
            p["labels"] = {"app": "train"}
    pdb = {"namespace": "analytics", "name": "train", "selector": {"matchLabels": {"app": "train"}}}
    doc["pdbs"] = [{**pdb, "disruptionsAllowed": 2}]
    cfg = load_config(_config(tmp_path))
    out = rebalance_cluster(load_cluster(_file(tmp_path, doc)), RebalanceOptions(config=cfg, now=0.0, what_if=True))
    assert len(out.result.evictions) == 2
    (stop,) = out.report.stops
    assert (stop.key, stop.scopes, stop.limit) == ("PodDisruptionBudget", ["analytics/train"], 2)
    assert stop.more is not None and stop.more > 0 and stop.hot is not None and stop.hot < out.report.after.hot
    quiet = rebalance_cluster(load_cluster(_file(tmp_path, doc)), RebalanceOptions(config=cfg, now=0.0))
    assert [s.more for s in quiet.report.stops] == [None]  # without what_if the stop is named, not priced


_NODE = "ip-10-0-123-45.eu-west-1.compute.internal"
_ROWS = [
    [f"payments/api-5d7f9c6b8-{i:02d}w8r", _NODE, "search/indexer-7b9d5-45w8r, web/frontend", "[1]"] for i in range(5)
]
_COLS = [Col("pod", key=True), Col("node", key=True), Col("for", drop=1), Col("cause")]


def _render(width: int, limit: int | None = None) -> str:
    console = Console(width=width, file=io.StringIO(), record=True)
    console.print(fitted("Evictions", _COLS, _ROWS, width=width, limit=limit))
    return console.export_text()


@pytest.mark.parametrize(
    ("width", "dropped", "stacked"),
    [
        pytest.param(160, False, False, id="a wide terminal keeps every column on one line"),
        pytest.param(80, True, False, id="at 80 columns the droppable column goes, and the caption says so"),
        pytest.param(50, True, True, id="narrower than both names side by side, they stack"),
    ],
)
def test_a_table_fits_its_terminal_without_cutting_a_name(width: int, dropped: bool, stacked: bool) -> None:
    text = _render(width)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= width
    assert all(row[0] in text for row in _ROWS) and text.count(_NODE) == len(_ROWS)  # every name whole
    assert ("left out at this width: for" in text) == dropped
    assert ("search/indexer" in text) != dropped
    assert any(line.strip(" │┃").startswith(_NODE) for line in lines) == stacked


def test_a_cut_table_says_how_many_rows_more() -> None:
    text = _render(160, limit=2)
    assert "3 more, see -o json" in text and text.count(_NODE) == 2
    assert "more" not in _render(160, limit=5)
