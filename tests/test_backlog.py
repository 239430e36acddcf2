"""A batch's balance accounts for the pods still waiting behind it (issue 29 item 4).

Aspects: given the waiting pods, a batch takes the places the plan of the batch and the backlog
keeps for pods of its size and leaves the others to the pods to come, so that the backlog ends
even (and, here, fits) where each batch balanced for itself would not; the balance guard judges
the answer by where the backlog ends; a long queue is read as a sample that keeps its mix; the
controller passes the batcher's queue with the batch.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from runner_support import make_runner
from support import cluster, node, pod
from test_guard import _nodes_and_pods

from placer.controller.batcher import Batcher
from placer.engine import BACKLOG_READ, build_batch, build_snapshot, summarize_backlog
from placer.kube import anytime as runner_module
from placer.models import Cluster, Config, Pod
from placer.service import Decision, decide, state_metrics
from placer.validate import validate_placements

CONFIG = Config.model_validate({"solver": {"workers": 1, "deterministic": True, "timeLimit": 5}})


def _placer(name: str, cpu: int) -> dict[str, Any]:
    return pod(name, cpu=str(cpu), memory=f"{4 * cpu}Gi", schedulerName="placer")  # the same share of both


def _half_full() -> Cluster:
    """Four nodes of 4 cpu / 16Gi, two 3/4 full and two 1/4 full; pending: two small pods (1 cpu)
    created first, then two large ones (3 cpu)."""
    nodes = [node(n, cpu="4", memory="16Gi") for n in "abcd"]
    running = [
        pod(f"run-{n}", cpu=str(c), memory=f"{4 * c}Gi", node=n) for n, c in (("a", 3), ("b", 3), ("c", 1), ("d", 1))
    ]
    pending = [_placer("small-0", 1), _placer("small-1", 1), _placer("large-0", 3), _placer("large-1", 3)]
    for i, p in enumerate(pending):
        p["creationTimestamp"] = f"2026-01-01T00:00:0{i}Z"
    return cluster(nodes, running + pending)


def _in_batches(c: Cluster, *, waiting: bool) -> tuple[dict[str, str], float]:
    """The small pods as one batch, then the large ones (as the controller's batcher cuts them),
    each decided on the state the first left; the placements and the end state's std_score."""
    pods = {p.name: p for p in c.pods if p.pending}
    smalls, larges = [pods["small-0"], pods["small-1"]], [pods["large-0"], pods["large-1"]]
    state = build_snapshot(c.nodes, [p for p in c.pods if p.running], list(pods.values()), c.namespaces)
    placements: dict[str, str] = {}
    for batch, behind in ((smalls, larges), (larges, [])):
        decision = decide(c, state, batch, CONFIG, waiting=behind if waiting else ())
        for p, n in decision.placements:
            state.add(p, n)
            placements[p.key] = state.nodes[n].name
    assert validate_placements(c, placements) == []
    return placements, state_metrics(state)[1]


def test_a_batch_leaves_the_emptiest_nodes_to_the_large_pods_still_waiting() -> None:
    c = _half_full()
    placements, std = _in_batches(c, waiting=True)
    assert {placements["default/small-0"], placements["default/small-1"]} == {"a", "b"}
    assert {placements["default/large-0"], placements["default/large-1"]} == {"c", "d"}
    assert std == pytest.approx(0.0)  # every node full to the same level


def test_each_batch_alone_fills_its_least_loaded_nodes_and_strands_the_large_pods() -> None:
    """The cause the backlog fixes: balanced for itself, the first batch takes the nodes the
    large pods needed, and they then fit nowhere."""
    placements, _ = _in_batches(_half_full(), waiting=False)
    assert {placements["default/small-0"], placements["default/small-1"]} == {"c", "d"}
    assert "default/large-0" not in placements and "default/large-1" not in placements


def test_a_long_queue_is_read_as_a_sample_that_keeps_its_mix() -> None:
    count = 3 * BACKLOG_READ
    pods = [pod(f"p{i}", cpu="200m" if i % 4 == 0 else "100m", memory="128Mi") for i in range(count)]
    c = cluster([node("a", cpu="1000"), node("b", cpu="1000")], [{**p, "schedulerName": "placer"} for p in pods])
    pending = [p for p in c.pods if p.pending]
    state = build_snapshot(c.nodes, [], pending, c.namespaces)
    backlog = summarize_backlog(build_batch(state, pending[:1], CONFIG), pending)
    assert backlog is not None and len(backlog.counts) == 2
    cpu = state.resources.index("cpu")
    per_cpu = {int(v[cpu]): n for v, n in zip(backlog.vecs, backlog.counts, strict=True)}
    assert sum(per_cpu.values()) == pytest.approx(count, abs=2)
    assert per_cpu[200] / count == pytest.approx(0.25, abs=0.05)
    assert all(np.array_equal(nodes, [0, 1]) for nodes in backlog.allowed)


def test_waiting_pods_no_node_admits_are_left_out() -> None:
    c = cluster(
        [node("a", cpu="4")],
        [_placer("now", 1), {**_placer("never", 1), "nodeSelector": {"disk": "ssd"}}],
    )
    pending = {p.name: p for p in c.pods if p.pending}
    state = build_snapshot(c.nodes, [], list(pending.values()), c.namespaces)
    assert summarize_backlog(build_batch(state, [pending["now"]], CONFIG), [pending["never"]]) is None


def test_the_batcher_reports_the_pods_it_has_not_taken() -> None:
    b = Batcher(window=1.0, size=2)
    b.sync(["default/x", "default/y", "default/z"], now=0.0)
    taken = set(b.take())
    assert len(taken) == 2 and b.queued() == {"default/x", "default/y", "default/z"} - taken


def test_the_controller_passes_the_queue_behind_the_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    r = make_runner(metricsPort=0)
    _nodes_and_pods(r)
    seen: list[list[str]] = []

    def recording(c: Cluster, state: Any, batch: list[Pod], *args: Any, waiting: Any = (), **kw: Any) -> Decision:
        seen.append([p.key for p in waiting])
        return Decision([], [], None, "optimal", 0.0)

    monkeypatch.setattr(runner_module, "decide", recording)
    r.ctx.batcher.sync(["default/x", "default/y"], now=0.0)
    r.ctx.batcher.size = 1
    r.cycle.solve(r.cluster())
    r.ctx.pool.shutdown(wait=True)
    assert len(seen) == 1 and len(seen[0]) == 1 and seen[0][0] in {"default/x", "default/y"}
