"""Why a pod stays unplaced, as data, and kube-scheduler's words for it.

Aspects: ``describe`` renders every kind of reason exactly as kube-scheduler (or placer, for gangs
and the solver) words it; the engine's reasons carry the numbers behind the words: nodes per
filter, and per missing resource what the pod asks and the most any otherwise fitting node has
free; ``placer solve --output json`` publishes them as ``detail`` beside the unchanged ``reason``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import cluster, node, pod, solve
from typer.testing import CliRunner

from placer.cli.app import app
from placer.models import FilterCount, GangWait, Reason, Shortfall, describe

TABLE = [
    (
        "resources and affinity, sorted as kube-scheduler sorts them",
        Reason(
            nodes=3,
            filters=(
                FilterCount(filter="node(s) didn't match Pod's node affinity/selector", nodes=1),
                FilterCount(filter="Insufficient cpu", nodes=2),
            ),
        ),
        "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 2 Insufficient cpu.",
    ),
    (
        "an untolerated taint and too many pods",
        Reason(
            nodes=4,
            filters=(
                FilterCount(filter="node(s) had untolerated taint {dedicated: gpu}", nodes=3),
                FilterCount(filter="Too many pods", nodes=1),
            ),
        ),
        "0/4 nodes are available: 1 Too many pods, 3 node(s) had untolerated taint {dedicated: gpu}.",
    ),
    (
        "volumes no node can serve",
        Reason(nodes=2, volumes='persistentvolumeclaim "data" not found'),
        '0/2 nodes are available: persistentvolumeclaim "data" not found.',
    ),
    (
        "a gang still missing members",
        Reason(nodes=5, gang=GangWait(gang="ns/train", size=4, pending=3)),
        "gang ns/train waits for all of its 4 pods (3 pending)",
    ),
    (
        "a complete gang whose members each fit alone",
        Reason(nodes=2, gang=GangWait(gang="ns/train", size=4, pending=4)),
        "gang ns/train of 4 pods cannot be placed whole: each fits alone, not all together",
    ),
    (
        "a complete gang that does not fit",
        Reason(
            nodes=2,
            filters=(FilterCount(filter="Insufficient cpu", nodes=2),),
            gang=GangWait(gang="g", size=2, pending=2),
        ),
        "gang g of 2 pods cannot be placed whole: 0/2 nodes are available: 2 Insufficient cpu.",
    ),
    (
        "the solver stopped first",
        Reason(nodes=1, filters=(FilterCount(filter="Insufficient memory", nodes=1),), solver="feasible"),
        "the solver stopped (feasible) before deciding this pod; 0/1 nodes are available: 1 Insufficient memory.",
    ),
    (
        "an unsupported constraint",
        Reason(nodes=1, unsupported="needs a pre-created volume"),
        "needs a pre-created volume",
    ),
]


@pytest.mark.parametrize(("case", "reason", "text"), TABLE, ids=[c[0] for c in TABLE])
def test_describe_words_each_reason_as_kube_scheduler_does(case: str, reason: Reason, text: str) -> None:
    assert describe(reason) == text


def test_a_reason_carries_what_the_pod_asks_and_the_most_free_on_a_fitting_node() -> None:
    """Node a lacks the label; b and c match but have 1.5 and 0.5 cpu free: the pod asks 2."""
    nodes = [
        node("a", cpu="8"),
        node("b", cpu="4", labels={"tier": "web"}),
        node("c", cpu="4", labels={"tier": "web"}),
    ]
    pods = [
        pod("busy-b", cpu="2500m", node="b"),
        pod("busy-c", cpu="3500m", node="c"),
        pod("web", cpu="2", nodeSelector={"tier": "web"}),
    ]
    (u,) = solve(cluster(nodes, pods)).result.unplaced
    assert u.reason == (
        "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 2 Insufficient cpu."
    )
    assert u.detail is not None
    assert u.detail.shortfalls == (Shortfall(resource="cpu", requested=2000, most_free=1500, nodes=2),)
    assert {f.filter: f.nodes for f in u.detail.filters} == {
        "node(s) didn't match Pod's node affinity/selector": 1,
        "Insufficient cpu": 2,
    }


def test_the_json_answer_publishes_the_detail_beside_the_reason(tmp_path: Path) -> None:
    doc = {
        "nodes": [{"name": "a", "allocatable": {"cpu": "2", "memory": "4Gi"}}],
        "pods": [
            {"name": "big", "requests": {"cpu": "1", "memory": "8Gi"}, "schedulerName": "placer"},
        ],
    }
    path = tmp_path / "c.json"
    path.write_text(json.dumps(doc))
    res = CliRunner().invoke(app, ["solve", str(path), "-o", "json", "--deterministic"])
    (u,) = json.loads(res.stdout)["unplaced"]
    assert u["reason"] == "0/1 nodes are available: 1 Insufficient memory."
    assert u["detail"]["shortfalls"] == [
        {"resource": "memory", "requested": 8 * 2**30, "mostFree": 4 * 2**30, "nodes": 1}
    ]
