"""Why a pod stays unplaced, as data, and kube-scheduler's words for it.

Aspects: ``describe`` renders every kind of reason exactly as kube-scheduler (or placer, for gangs
and the solver) words it; a reason is keyed by what failed (a resource, a taint, a filter), not by
its words, and survives a JSON round trip; the engine's reasons carry the numbers behind the words:
nodes per filter, and per missing resource what the pod asks and the most any node passing the
filters before it has free; placer and the kube-scheduler simulation give the same reason for the
same state; ``placer solve --output json`` publishes it as ``detail`` beside the unchanged ``reason``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import cluster, node, pod, solve
from typer.testing import CliRunner

from placer.cli.app import app
from placer.models import Filter, GangWait, Insufficient, Reason, Rejected, Taint, Untolerated, describe, label


def _short(resource: str, nodes: int, requested: int = 1, most_free: int = 0) -> Insufficient:
    return Insufficient(resource=resource, nodes=nodes, requested=requested, most_free=most_free)


GPU = Taint(key="dedicated", value="gpu", effect="NoSchedule")

TABLE = [
    (
        "resources and affinity, sorted as kube-scheduler sorts them",
        Reason(nodes=3, filters=(Rejected(filter=Filter.NODE_AFFINITY, nodes=1), _short("cpu", 2))),
        "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 2 Insufficient cpu.",
    ),
    (
        "an untolerated taint and too many pods",
        Reason(nodes=4, filters=(Untolerated(taint=GPU, nodes=3), _short("pods", 1))),
        "0/4 nodes are available: 1 Too many pods, 3 node(s) had untolerated taint {dedicated: gpu}.",
    ),
    (
        "one taint with two effects is one reason",
        Reason(
            nodes=3,
            filters=(
                Untolerated(taint=GPU, nodes=1),
                Untolerated(taint=GPU.model_copy(update={"effect": "NoExecute"}), nodes=2),
            ),
        ),
        "0/3 nodes are available: 3 node(s) had untolerated taint {dedicated: gpu}.",
    ),
    (
        "several resources short on the same nodes, each counted",
        Reason(nodes=2, filters=(_short("memory", 2), _short("cpu", 2), _short("nvidia.com/gpu", 1))),
        "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 2 Insufficient cpu, 2 Insufficient memory.",
    ),
    (
        "cordon, ports and a volume's node affinity",
        Reason(
            nodes=6,
            filters=(
                Rejected(filter=Filter.UNSCHEDULABLE, nodes=1),
                Rejected(filter=Filter.PORTS, nodes=2),
                Rejected(filter=Filter.VOLUME_AFFINITY, nodes=3),
            ),
        ),
        "0/6 nodes are available: 1 node(s) were unschedulable, "
        "2 node(s) didn't have free ports for the requested pod ports, "
        "3 node(s) had volume node affinity conflict.",
    ),
    (
        "topology spread and inter-pod rules",
        Reason(
            nodes=10,
            filters=(
                Rejected(filter=Filter.SPREAD_LABEL, nodes=1),
                Rejected(filter=Filter.SPREAD, nodes=2),
                Rejected(filter=Filter.POD_AFFINITY, nodes=3),
                Rejected(filter=Filter.POD_ANTI_AFFINITY, nodes=2),
                Rejected(filter=Filter.EXISTING_ANTI_AFFINITY, nodes=2),
            ),
        ),
        "0/10 nodes are available: 1 node(s) didn't match pod topology spread constraints (missing required label), "
        "2 node(s) didn't match pod anti-affinity rules, "
        "2 node(s) didn't match pod topology spread constraints, "
        "2 node(s) didn't satisfy existing pods anti-affinity rules, "
        "3 node(s) didn't match pod affinity rules.",
    ),
    (
        "nothing turned a node away (the answer as placer has always worded it)",
        Reason(nodes=3),
        "0/3 nodes are available: .",
    ),
    (
        "an empty cluster",
        Reason(nodes=0),
        "0/0 nodes are available: .",
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
        "a 1.37 gang that fits no single domain of its topology key",
        Reason(nodes=4, gang=GangWait(gang="ml/g", size=3, pending=3, domain="topology.kubernetes.io/rack")),
        "gang ml/g of 3 pods cannot be placed whole in one domain of topology.kubernetes.io/rack: "
        "each fits alone, not all together",
    ),
    (
        "a complete gang that does not fit",
        Reason(nodes=2, filters=(_short("cpu", 2),), gang=GangWait(gang="g", size=2, pending=2)),
        "gang g of 2 pods cannot be placed whole: 0/2 nodes are available: 2 Insufficient cpu.",
    ),
    (
        "the solver stopped first",
        Reason(nodes=1, filters=(_short("memory", 1),), solver="feasible"),
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


@pytest.mark.parametrize(("case", "reason", "text"), TABLE, ids=[c[0] for c in TABLE])
def test_a_reason_survives_its_json_form(case: str, reason: Reason, text: str) -> None:
    again = Reason.model_validate_json(reason.model_dump_json(by_alias=True))
    assert again == reason
    assert describe(again) == text


def _tight_web_cluster() -> list[dict[str, object]]:
    """Node a has the most room but lacks the label; d matches but is tainted; b and c match:
    b has 1.5 cpu and 6Gi free, c 0.5 cpu and 7Gi. The pod asks 2 cpu and 6500Mi: too much cpu
    on b and c, too much memory on b only."""
    return [
        node("a", cpu="8", memory="16Gi"),
        node("b", cpu="4", labels={"tier": "web"}),
        node("c", cpu="4", labels={"tier": "web"}),
        node("d", cpu="16", labels={"tier": "web"}, taints=[{"key": "team", "value": "ml", "effect": "NoSchedule"}]),
    ]


def _web_pods() -> list[dict[str, object]]:
    return [
        pod("busy-b", cpu="2500m", memory="2Gi", node="b"),
        pod("busy-c", cpu="3500m", memory="1Gi", node="c"),
        pod("web", cpu="2", memory="6500Mi", nodeSelector={"tier": "web"}),
    ]


@pytest.mark.parametrize("policy", ["placer", "default"])
def test_a_reason_carries_what_the_pod_asks_and_the_most_free_on_a_matching_node(policy: str) -> None:
    """Neither a (more free than any) nor the tainted d count for the resources: the most free
    cpu is b's 1.5, the most free memory c's 7Gi. Both policies diagnose the state the same way."""
    (u,) = solve(cluster(_tight_web_cluster(), _web_pods()), policy=policy).result.unplaced
    assert u.detail == Reason(
        nodes=4,
        filters=(
            Untolerated(taint=Taint(key="team", value="ml", effect="NoSchedule"), nodes=1),
            Rejected(filter=Filter.NODE_AFFINITY, nodes=1),
            Insufficient(resource="cpu", nodes=2, requested=2000, most_free=1500),
            Insufficient(resource="memory", nodes=1, requested=6500 * 2**20, most_free=7 * 2**30),
        ),
    )
    assert u.reason == (
        "0/4 nodes are available: 1 Insufficient memory, 1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) had untolerated taint {team: ml}, 2 Insufficient cpu."
    )


def test_the_json_answer_publishes_the_detail_beside_the_reason(tmp_path: Path) -> None:
    doc = {
        "nodes": [
            {"name": "a", "allocatable": {"cpu": "2", "memory": "4Gi"}},
            {"name": "b", "allocatable": {"cpu": "2", "memory": "3Gi"}},
        ],
        "pods": [
            {"name": "big", "requests": {"cpu": "1", "memory": "8Gi"}, "schedulerName": "placer"},
        ],
    }
    path = tmp_path / "c.json"
    path.write_text(json.dumps(doc))
    res = CliRunner().invoke(app, ["solve", str(path), "-o", "json", "--deterministic"])
    (u,) = json.loads(res.stdout)["unplaced"]
    assert u["reason"] == "0/2 nodes are available: 2 Insufficient memory."
    assert u["detail"]["nodes"] == 2
    assert u["detail"]["filters"] == [
        {"filter": "NodeResourcesFit", "resource": "memory", "nodes": 2, "requested": 8 * 2**30, "mostFree": 4 * 2**30}
    ]
    assert describe(Reason.model_validate(u["detail"])) == u["reason"]


def test_the_readme_documents_every_filter_with_its_words() -> None:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    missing = [f.value for f in Filter if f"| `{f.value}` |" not in readme]
    assert missing == []
    plain = [f for f in Filter if f not in (Filter.TAINT, Filter.RESOURCES)]
    worded = [f.value for f in plain if f"| `{f.value}` | {label(Rejected(filter=f, nodes=1))} |" in readme]
    assert worded == [f.value for f in plain]
