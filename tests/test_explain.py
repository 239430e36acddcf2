"""``placer explain``: the rule that kept a pod off each cheaper-looking node, read off the answer
(room the batch took, inter-pod rules, the strategy on the final state, a workload group's
domain), a preemptor's landing node, Kubernetes objects in kubectl's words, many pods from one
solve, and what each topology domain lacked for a pending group.

Every answer explained here is the validated answer of ``support.solve``; the explanation is
read off that very answer (``explain_answer``), as ``placer solve --explain`` does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import workload_builders as wl
from support import DETERMINISTIC, cluster, node, pod, solve
from typer.testing import CliRunner

from placer.cli import kubectl
from placer.cli.app import app
from placer.explain import Explanation, Rule, explain_answer, explaining
from placer.models import (
    Cluster,
    Config,
    LabelSelector,
    LabelSelectorRequirement,
    SpreadConstraint,
    Taint,
    Toleration,
)
from placer.service import SolveOptions

runner = CliRunner()
HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
THESIS = Path(__file__).resolve().parent / "fixtures" / "infeasible" / "16-thesis-always-big" / "cluster.json"


def _explain(c: Cluster, *keys: str, **config: Any) -> dict[str, Explanation]:
    """The stories of ``keys`` read off the validated answer of one solve."""
    outcome = solve(c, **config)
    options = SolveOptions(config=Config.model_validate({**DETERMINISTIC, **config}))
    return {s.pod: s for s in explain_answer(c, options, outcome, list(keys))}


def _rules(story: Explanation) -> dict[str, list[Rule]]:
    """Per candidate node the pod was kept off, the rules that kept it off."""
    return {c.node: [w.rule for w in c.why_not] for c in story.candidates if not c.chosen}


def test_a_cheaper_node_the_batch_filled_is_named_with_the_pods_that_took_its_room() -> None:
    # Alone, "small" is cheapest on the empty node a; "big" fits only there, so the answer puts
    # big on a and small on b: the story says a lacked room, and that big took it.
    c = cluster(
        [node("a", cpu="4"), node("b", cpu="4")],
        [pod("load", cpu="2", node="b"), pod("big", cpu="4", memory="1Gi"), pod("small", cpu="1")],
    )
    story = _explain(c, "default/small", strategy="spread")["default/small"]
    assert story.node == "b"
    (a,) = [cand for cand in story.candidates if cand.node == "a"]
    assert a.cost <= next(cand.cost for cand in story.candidates if cand.chosen)  # it looked as cheap
    (why,) = a.why_not
    assert why.rule is Rule.ROOM and why.taken_by == ["default/big"] and why.short == {"cpu": 1000}


def test_anti_affinity_keeps_a_replica_off_the_cheaper_nodes_its_siblings_took() -> None:
    nodes = [node(n, cpu="8", labels={HOST: n}) for n in "abc"]
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": HOST}
    ]}}  # fmt: skip
    running = [pod("load-b", cpu="2", node="b"), pod("load-c", cpu="4", node="c")]
    webs = [pod(f"web-{i}", cpu="1", labels={"app": "web"}, affinity=anti) for i in range(3)]
    c = cluster(nodes, [*running, *webs])
    stories = _explain(c, *(f"default/web-{i}" for i in range(3)), strategy="spread")
    on_c = next(s for s in stories.values() if s.node == "c")
    rules = _rules(on_c)
    assert set(rules) == {"a", "b"}  # both cheaper (emptier) nodes, each held by a sibling
    for node_name in ("a", "b"):
        (why,) = next(cand.why_not for cand in on_c.candidates if cand.node == node_name)
        assert (why.rule, why.filter) == (Rule.TOPOLOGY, "PodAntiAffinity")


def test_spreading_keeps_a_pod_out_of_the_cheaper_zone_once_the_others_landed() -> None:
    nodes = [node(f"{z}{i}", cpu="8", labels={ZONE: z, HOST: f"{z}{i}"}) for z in "ab" for i in range(2)]
    spread = [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app": "s"}}}]  # fmt: skip
    load = [pod(f"load-b{i}", cpu="6", node=f"b{i}") for i in range(2)]
    pods = [pod(f"s-{i}", cpu="1", labels={"app": "s"}, topologySpreadConstraints=spread) for i in range(4)]
    c = cluster(nodes, [*load, *pods])
    stories = _explain(c, *(f"default/s-{i}" for i in range(4)), strategy="spread")
    in_b = [s for s in stories.values() if s.node is not None and s.node.startswith("b")]
    assert len(in_b) == 2  # maxSkew 1 over two zones: two and two, although zone a is emptier
    for story in in_b:
        filters = {w.filter for cand in story.candidates if cand.node.startswith("a") for w in cand.why_not}
        assert filters == {"PodTopologySpread"}


def test_a_node_that_only_looked_cheaper_costs_more_once_the_batch_is_placed() -> None:
    # Alone, both pods are cheapest on the empty node a; placed together, one goes to b, and
    # moving it to a would cost the strategy more on the answer's final state.
    c = cluster(
        [node("a", cpu="4"), node("b", cpu="4")],
        [pod("load", cpu="500m", memory="512Mi", node="b"), pod("x", cpu="1"), pod("y", cpu="1")],
    )
    stories = _explain(c, "default/x", "default/y", strategy="spread")
    on_b = [s for s in stories.values() if s.node == "b"]
    assert len(on_b) == 1
    (why,) = next(cand.why_not for cand in on_b[0].candidates if cand.node == "a")
    assert why.rule is Rule.STRATEGY and why.term == "spread" and why.cost is not None and why.chosen_cost is not None
    assert why.cost > why.chosen_cost


def test_a_preemptors_landing_node_is_in_its_table_with_the_step_that_waits_for_its_victims() -> None:
    res = runner.invoke(app, ["explain", "default/arrival", str(THESIS), "-o", "json", "--time-limit", "2"])
    assert res.exit_code == 0, res.output
    (story,) = json.loads(res.stdout)["explanations"]
    (landing,) = [cand for cand in story["candidates"] if cand["chosen"]]
    assert landing["node"] == story["node"] == "n" and not landing["fits_before"]
    victims = {e["pod"] for e in story["evictions"]}
    assert victims == {"default/pod-1", "default/pod-2"}
    assert [s["op"] for s in story["plan"]] == ["bind"] and {s["pod"] for s in story["waits_for"]} == victims
    text = runner.invoke(app, ["explain", "default/arrival", str(THESIS), "--time-limit", "2"], env={"COLUMNS": "200"})
    assert "yes (room made by the plan)" in text.stdout and "once these are done" in text.stdout


def test_a_pending_gang_member_says_what_each_rack_lacked() -> None:
    # Six pods of one cpu in one rack: r1 has room for four, r2's only node is tainted, r3 is too small.
    items = [
        wl.node("r1-0", 2, rack="r1"),
        wl.node("r1-1", 2, rack="r1"),
        {
            **wl.node("r2-0", 8, rack="r2"),
            "spec": {"taints": [{"key": "gpu", "value": "a100", "effect": "NoSchedule"}]},
        },
        wl.node("r3-0", 1, rack="r3"),
        wl.pod_group("train", 6),
        *[wl.pod(f"train-{i}", "train") for i in range(6)],
    ]
    c = wl.dump(*items)
    story = _explain(c, "ml/train-0")["ml/train-0"]
    assert story.node is None and story.unplaced_code == "Unschedulable"
    tries = {d.domain: d for d in story.domains}
    assert set(tries) == {"r1", "r2", "r3"}
    assert (tries["r1"].room_for, tries["r1"].members, tries["r1"].needs) == (4, 6, {"cpu": 6000})
    assert tries["r2"].allowed == 0 and tries["r2"].filters is not None
    (taint,) = tries["r2"].filters.filters
    assert taint.filter == "TaintToleration"
    assert (tries["r3"].room_for, tries["r3"].free) == (1, {"cpu": 1000})
    # Every candidate node has room for the pod alone: its gang is what cannot be placed.
    assert all(w.rule is Rule.GANG for cand in story.candidates for w in cand.why_not)


def test_a_placed_group_member_is_kept_off_cheaper_nodes_of_other_racks() -> None:
    items = [
        wl.node("r1-0", 10, rack="r1"),
        wl.node("r2-0", 6, rack="r2"),  # looks cheaper for one pod, holds only three of the four
        wl.pod("load", node="r1-0", cpu="1"),
        wl.pod_group("train", 4),
        *[wl.pod(f"train-{i}", "train", cpu="2") for i in range(4)],
    ]
    c = wl.dump(*items)
    story = _explain(c, "ml/train-0", strategy="spread")["ml/train-0"]
    assert story.node == "r1-0"
    (r2,) = [cand for cand in story.candidates if cand.node == "r2-0"]
    assert r2.cost < next(cand.cost for cand in story.candidates if cand.chosen)
    assert [w.rule for w in r2.why_not] == [Rule.GANG_DOMAIN]
    assert (r2.why_not[0].domain, r2.why_not[0].here) == ("r1", "r2")


def test_many_pods_are_explained_from_one_solve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"nodes": [node("a"), node("b")], "pods": [pod(f"p-{i}") for i in range(4)]}))
    calls = []
    real = explaining.solve_cluster

    def counted(*args: Any) -> Any:
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(explaining, "solve_cluster", counted)
    keys = [f"default/p-{i}" for i in range(4)]
    res = runner.invoke(app, ["explain", *keys, str(path), "-o", "json"])
    assert res.exit_code == 0, res.output
    assert [s["pod"] for s in json.loads(res.stdout)["explanations"]] == keys and len(calls) == 1
    both = runner.invoke(app, ["solve", str(path), "--explain", keys[0], "--explain", keys[2], "-o", "json"])
    doc = json.loads(both.stdout)
    placed = {p["pod"]: p["node"] for p in doc["result"]["placements"]}
    assert [(s["pod"], s["node"]) for s in doc["explain"]["explanations"]] == [(k, placed[k]) for k in keys[::2]]


@pytest.mark.parametrize(
    "args",
    [
        ["explain", "default/p-0", "default/nope", "{path}"],
        ["solve", "{path}", "--explain", "default/p-0", "--explain", "default/nope"],
    ],
)
def test_a_pod_name_that_is_not_in_the_cluster_is_one_line_naming_it(tmp_path: Path, args: list[str]) -> None:
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"nodes": [node("a")], "pods": [pod("p-0")]}))
    res = runner.invoke(app, [a.format(path=path) for a in args])
    assert res.exit_code == 2
    assert res.stderr.strip().splitlines() == [f"placer: {path}: no pod 'default/nope' (give namespace/name)"]


def test_the_story_words_kubernetes_objects_as_kubectl_does(tmp_path: Path) -> None:
    tainted = node("t", cpu="8", taints=[{"key": "gpu", "value": "a100", "effect": "NoSchedule"}])
    tolerant = {"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}
    web = pod("web", cpu="500m", memory="2Gi", tolerations=[tolerant], nodeSelector={"disk": "ssd"})
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"nodes": [tainted, node("a", labels={"disk": "ssd"})], "pods": [web]}))
    res = runner.invoke(app, ["explain", "default/web", str(path)], env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert "untolerated taint gpu=a100:NoSchedule" in out
    assert "Tolerations: dedicated:NoExecute op=Exists" in out
    assert "Node-Selectors: disk=ssd" in out and "Requests: cpu=500m, memory=2Gi" in out
    assert "{'" not in out and "key=" not in out


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (Taint(key="gpu", value="a100", effect="NoSchedule"), "gpu=a100:NoSchedule"),
        (Taint(key="node.kubernetes.io/unschedulable", effect="NoSchedule"),
         "node.kubernetes.io/unschedulable:NoSchedule"),
        (Toleration(key="k", value="v", effect="NoSchedule"), "k=v:NoSchedule"),
        (Toleration(key="node.kubernetes.io/not-ready", operator="Exists", effect="NoExecute"),
         "node.kubernetes.io/not-ready:NoExecute op=Exists"),
        (Toleration(operator="Exists"), "op=Exists"),
        (LabelSelector(match_labels={"app": "web"}, match_expressions=(
            LabelSelectorRequirement(key="tier", operator="In", values=("a", "b")),
            LabelSelectorRequirement(key="legacy", operator="DoesNotExist"))), "app=web,tier in (a,b),!legacy"),
        (SpreadConstraint(max_skew=1, topology_key=ZONE, selector=LabelSelector(match_labels={"app": "s"})),
         f"{ZONE}:DoNotSchedule when max skew 1 is exceeded for selector app=s"),
    ],
)  # fmt: skip
def test_kubectl_words(value: Any, words: str) -> None:
    shown = {
        Taint: kubectl.taint,
        Toleration: kubectl.toleration,
        LabelSelector: kubectl.label_selector,
        SpreadConstraint: kubectl.spread_constraint,
    }[type(value)]
    assert shown(value) == words


@pytest.mark.parametrize(
    ("resource", "units", "words"), [("cpu", 500, "500m"), ("cpu", 2000, "2"), ("memory", 2**31, "2Gi")]
)
def test_quantities_read_as_kubectl_prints_them(resource: str, units: int, words: str) -> None:
    assert kubectl.quantity(resource, units) == words


def test_solve_refuses_to_explain_a_simulated_policy_as_if_placer_had_decided(tmp_path: Path) -> None:
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"nodes": [node("a")], "pods": [pod("p-0")]}))
    res = runner.invoke(app, ["solve", str(path), "--policy", "default", "--explain", "default/p-0"])
    assert res.exit_code == 2 and "--explain tells placer's decisions" in res.stderr


CHAIN = THESIS.parent.parent / "08-chain-of-moves" / "cluster.json"


def test_a_running_pod_the_plan_moves_says_where_to_for_whom_and_its_steps(tmp_path: Path) -> None:
    # big fits only on a once x leaves; x fits elsewhere only once y or z moves: two moves.
    res = runner.invoke(app, ["solve", str(CHAIN), "-o", "json", "--time-limit", "2"])
    moves = {e["pod"]: e for e in json.loads(res.stdout)["evictions"]}
    assert moves.keys() >= {"default/x"} and len(moves) == 2
    keys = sorted(moves)
    told = runner.invoke(app, ["explain", *keys, str(CHAIN), "-o", "json", "--time-limit", "2"])
    for story in json.loads(told.stdout)["explanations"]:
        move = moves[story["pod"]]
        assert not story["in_batch"] and story["evicted"]["kind"] == "move"
        assert story["evicted"]["to"] == move["to"] and story["evicted"]["for"] == move["for"]
        ops = {s["op"] for s in story["plan"]}
        assert {"evict", "bind"} <= ops  # its eviction, and its replacement's bind
    text = runner.invoke(app, ["explain", "default/x", str(CHAIN), "--time-limit", "2"], env={"COLUMNS": "200"})
    assert f"The answer moves it to {moves['default/x']['to']}" in text.stdout
