"""Values a tenant writes that Python itself refuses to read, and inputs that would hang a reader.

Aspects: one rule (README, "One pod's unreadable annotation is that pod's problem only"):
whatever fails while reading a pod is that pod's problem only. A pending pod is refused (code
Invalid, naming the field), a running one keeps its node's room, by its requests or, if even
those are unreadable, by its node taking nothing new; never does it drop out of the model (which
let another tenant's pod be bound onto its node), stop the cycle or print a traceback. The cases:
integers of 5,000 digits (beyond Python's int() digit limit) in placer's annotations, in a Gt/Lt
value and in quantities; Unicode digits that pass ``isdigit()`` (``"²"``); a YAML alias bomb; a
missing kubeconfig for ``placer run``.
The randomized version is ``test_hostile_properties``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from runner_support import FakeActions, feed, make_runner
from support import cluster, node, pod, solve
from test_inputs_isolation import ENGINE, _cycle, _kube_node, _kube_pod
from typer.testing import CliRunner

from placer.cli.app import app
from placer.engine import NodeLabels
from placer.errors import InputError
from placer.inputs import parse_cluster
from placer.inputs.kubectl import parse_pod
from placer.inputs.load import MAX_ALIASED, decode_document
from placer.models import Node, NodeSelectorRequirement, QuantityError, parse_quantity
from placer.validate import requirement_matches

Json = dict[str, Any]
HUGE = "7" * 5000  # Python's int() refuses more than 4,300 digits


def _gt(value: str) -> Json:
    term = {"matchExpressions": [{"key": "rank", "operator": "Gt", "values": [value]}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


# (where the value goes, the field the refusal names)
HOSTILE = [
    pytest.param({"metadata": {"annotations": {"placer.io/gang-size": HUGE}}}, "placer.io/gang-size", id="gang-size"),
    pytest.param(
        {"metadata": {"labels": {"placer.io/gang": "g", "placer.io/gang-size": HUGE}}},
        "placer.io/gang-size",
        id="gang-size label",
    ),
    pytest.param(
        {"metadata": {"annotations": {"batch.kubernetes.io/job-completion-index": "²"}}},
        "job-completion-index",
        id="completion index of a Unicode digit",
    ),
    pytest.param(
        {"metadata": {"annotations": {"batch.kubernetes.io/job-completion-index": HUGE}}},
        "job-completion-index",
        id="completion index of 5,000 digits",
    ),
    pytest.param({"affinity": _gt(HUGE)}, "matchExpressions[0].values", id="Gt value of 5,000 digits"),
]


@pytest.mark.parametrize(("extra", "field"), HOSTILE)
def test_a_running_pod_with_a_hostile_value_keeps_its_room_in_the_controller(extra: Json, field: str) -> None:
    """Node a (8 cpu) runs the odd pod (3 cpu): only 5 of the 20 pending 1-cpu pods go to a."""
    actions = FakeActions()
    r = make_runner(actions, metricsPort=0, batchSize=100, engine=ENGINE)
    feed(r, "Node", _kube_node("a"), _kube_node("b"))
    feed(r, "Pod", _kube_pod("odd", node="a", cpu="3", **extra), *(_kube_pod(f"p{i:02d}", cpu="1") for i in range(20)))
    odd = next(p for p in r.cluster().pods if p.key == "default/odd")
    assert any(field in problem for problem in odd.problems)
    calls = _cycle(r)
    per_node = {n: sum(1 for call in calls if call[0] == "bind" and call[2] == n) for n in ("a", "b")}
    assert per_node == {"a": 5, "b": 8}


@pytest.mark.parametrize(("extra", "field"), HOSTILE)
def test_a_pending_pod_with_a_hostile_value_is_invalid_in_the_controller(extra: Json, field: str) -> None:
    actions = FakeActions()
    r = make_runner(actions, metricsPort=0, engine=ENGINE)
    feed(r, "Node", _kube_node("a"))
    feed(r, "Pod", _kube_pod("odd", cpu="1", **extra), _kube_pod("fine", cpu="1"))
    calls = _cycle(r)
    assert [c[1:] for c in calls if c[0] == "bind"] == [("default/fine", "a")]
    ((_, key, message),) = [c for c in calls if c[0] == "unschedulable"]
    assert key == "default/odd" and field in message and len(message) < 400


def test_the_index_keeps_a_bound_pod_it_cannot_parse_and_its_node_takes_nothing_new() -> None:
    """Only name, namespace and node readable (a phase that is not a string): the pod still holds
    its node whole; it used to be dropped, its node looking empty."""
    actions = FakeActions()
    r = make_runner(actions, metricsPort=0, batchSize=100, engine=ENGINE)
    feed(r, "Node", _kube_node("a"), _kube_node("b"))
    odd = _kube_pod("odd", node="a", cpu="1")
    odd["status"]["phase"] = 7
    feed(r, "Pod", odd, *(_kube_pod(f"p{i:02d}", cpu="1") for i in range(4)))
    kept = next(p for p in r.cluster().pods if p.key == "default/odd")
    assert kept.node_name == "a" and kept.unaccounted is not None and "status.phase" in kept.problems[0]
    calls = _cycle(r)
    assert sorted(c[2] for c in calls if c[0] == "bind") == ["b"] * 4


def test_parse_pod_turns_any_exception_into_the_pods_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader's own bug (here: any ValueError) is isolated like an unreadable field."""
    from placer.inputs import kubectl  # noqa: PLC0415

    def broken(*_: Any) -> Any:
        raise ValueError("boom")

    monkeypatch.setattr(kubectl, "parse_tolerations", broken)
    running = parse_pod(_kube_pod("r", node="a", cpu="2"))
    assert running.requests["cpu"] == 2000 and "boom" in running.problems[0]
    pending = parse_pod(_kube_pod("p", cpu="2"))
    assert pending.invalid and pending.unsupported is not None and "boom" in pending.unsupported


# --- placer solve: the same values in a file --------------------------------------------------


@pytest.mark.parametrize("value", [HUGE, "²", "-3", "NaN", ""])
def test_placer_solve_refuses_only_the_pending_pod_with_a_hostile_completion_index(value: str) -> None:
    ann = {"batch.kubernetes.io/job-completion-index": value}
    pods = [
        pod("run", cpu="3", node="a", annotations=ann),
        pod("bad", cpu="1", schedulerName="placer", annotations=ann),
        pod("ok", cpu="1", schedulerName="placer"),
    ]
    outcome = solve(cluster([node("a", cpu="4"), node("b", cpu="1")], pods))
    assert {p.pod: p.node for p in outcome.result.placements} in ({"default/ok": "a"}, {"default/ok": "b"})
    assert [(u.pod, u.code) for u in outcome.result.unplaced] == [("default/bad", "Invalid")]


def test_a_gt_value_of_5000_digits_is_refused_in_one_line_naming_it() -> None:
    doc = {"nodes": [{"name": "a", "allocatable": {"cpu": "1"}}], "pods": [{"name": "p", "affinity": _gt(HUGE)}]}
    with pytest.raises(InputError) as err:
        parse_cluster("f.json", json.dumps(doc))
    assert "pods[0].affinity" in str(err.value) and "5000 characters" in str(err.value) and len(str(err.value)) < 300


def test_the_engine_and_the_validator_read_a_gt_value_of_5000_digits_as_no_integer() -> None:
    nodes = [Node(name="a", labels={"rank": "5"}), Node(name="b", labels={"rank": HUGE})]
    for value in (HUGE, "²", "٣"):
        req = NodeSelectorRequirement(key="rank", operator="Gt", values=(value,))
        assert not NodeLabels(nodes).requirement(req).any()
        assert not any(requirement_matches(req, n.labels) for n in nodes)
    low = NodeSelectorRequirement(key="rank", operator="Gt", values=("1",))
    assert NodeLabels(nodes).requirement(low).tolist() == [True, False]
    assert [requirement_matches(low, n.labels) for n in nodes] == [True, False]


@pytest.mark.parametrize("text", ["1" * 5000, "1e" + "9" * 5000, "٣", "1" * 5000 + "Gi"])
def test_a_quantity_python_cannot_read_is_a_quantity_error(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)


def test_a_json_integer_of_5000_digits_is_refused_in_one_line() -> None:
    with pytest.raises(InputError, match="more than 4,300 digits"):
        decode_document("f.json", '{"nodes": [{"name": "a", "allocatable": {"cpu": ' + HUGE + "}}]}")


def _bomb(levels: int) -> str:
    lines = ['a0: &a0 ["x","x","x","x","x","x","x","x","x"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def test_a_yaml_alias_bomb_is_refused_in_one_line() -> None:
    """414 bytes expanding to 9^9 values: refused before anything walks them."""
    text = _bomb(9)
    assert len(text) < 500
    with pytest.raises(InputError, match="aliases expand"):
        decode_document("bomb.yaml", text)


def test_yaml_aliases_within_the_bound_are_read() -> None:
    levels = 5  # 9^5 = 59,049 values
    assert 9**levels < MAX_ALIASED
    data = decode_document("ok.yaml", _bomb(levels))
    assert len(data[f"a{levels - 1}"]) == 9


def test_placer_solve_with_an_alias_bomb_exits_2_in_one_line(tmp_path: Any) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(_bomb(9))
    result = CliRunner().invoke(app, ["solve", str(path)])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1


def test_placer_run_with_a_missing_kubeconfig_exits_2_in_one_line(tmp_path: Any) -> None:
    result = CliRunner().invoke(app, ["run", "--kubeconfig", str(tmp_path / "missing"), "--metrics-port", "0"])
    assert result.exit_code == 2, result.output
    (line,) = result.output.strip().splitlines()
    assert line.startswith(f"placer: {tmp_path / 'missing'}: cannot load")
