"""What the controller keeps of a batch's time limit for the validator's check of its answer.

Aspects: the cycle remembers the recent checks' seconds per pod of their batch and reserves that
times the next batch's size (``SchedulingCycle.job``), so that one large batch's slow check does
not take seconds from the small batches after it; a solve keeps at most ``CHECK_SHARE`` of its
limit for the check (``SolveJob.run``), however long the checks took. The engine's clock is
frozen (``test_deadline.Clock``): no timing. The API is the recording stand-in of
``runner_support``; every answer goes through the validator (``Answer.problems``).
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import wait
from typing import Any

import pytest
from runner_support import FakeActions, feed, make_runner
from support import cluster, node, pod
from test_deadline import Clock, FrozenBudgets, budgets_given

from placer.engine import build_snapshot
from placer.kube import anytime
from placer.kube.runner import Runner
from placer.models import Config

NODES = 5  # of 8 cpu: the first batch's 40 pods of 1 cpu fill them


def _node(name: str) -> dict[str, Any]:
    return {
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}},
    }


def _pod(name: str, on: str | None = None) -> dict[str, Any]:
    item: dict[str, Any] = {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
        "spec": {"schedulerName": "placer", "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": "Pending"},
    }
    if on is not None:
        item["spec"]["nodeName"], item["status"]["phase"] = on, "Running"
    return item


def _settle(r: Runner) -> None:
    """Let the binds in flight finish and account them."""
    wait([f for _, _, f in r.binder.inflight])
    r.binder.collect()


def test_a_large_batchs_slow_check_reserves_only_its_share_per_pod_of_a_small_batch() -> None:
    """A batch of 40 pods whose check took 2 s (0.05 s a pod): the next batch, of 2 pods, keeps
    0.1 s for its check, not the 2 s the large one took."""
    r = make_runner(
        FakeActions(), metricsPort=0, batchWindowSeconds=1, maxSolveSeconds=1,
        engine={"solver": {"workers": 1, "timeLimit": 0.5}},
    )  # fmt: skip
    nodes = [_node(f"n{i}") for i in range(NODES)]
    feed(r, "Node", *nodes)
    feed(r, "Pod", *(_pod(f"big{k}") for k in range(40)))
    r.cycle.queue()
    large = r.cycle.job(r.cluster())
    assert large is not None and len(large.batch) == 40
    assert large.check_seconds == 0.0  # no check yet
    answer = large.run()
    assert answer.problems == [] and len(answer.decision.placements) == 40
    r.cycle.apply(large, dataclasses.replace(answer, checked=2.0))  # its check took 2 s
    _settle(r)
    names = [n.name for n in large.state.nodes]
    bound = [_pod(p.name, on=names[n]) for p, n in answer.decision.placements]
    feed(r, "Pod", *bound, _pod("small0"), _pod("small1"))  # the watch shows the 40 bound; 2 new
    r.cycle.queue()
    small = r.cycle.job(r.cluster())
    assert small is not None and sorted(p.name for p in small.batch) == ["small0", "small1"]
    assert small.check_seconds == pytest.approx(2 * 2.0 / 40)


def _tight() -> Any:
    """Two nodes of 4 cpu and ten pods of 1 cpu: eight fit."""
    return cluster([node(f"n{i}", cpu="4", memory="16Gi") for i in range(2)], [pod(f"p{i}") for i in range(10)])


@pytest.mark.parametrize(("checks", "kept"), [(0.1, 0.1), (10.0, anytime.CHECK_SHARE)])
def test_a_solve_keeps_what_its_check_takes_but_never_more_than_its_share_of_the_limit(
    monkeypatch: pytest.MonkeyPatch, checks: float, kept: float
) -> None:
    """``check_seconds`` of a tenth of the limit: the decision ends that much early; of ten times
    the limit (a slow check, or a huge batch after a slow one): the decision still gets
    1 - ``CHECK_SHARE`` of the limit, not nothing."""
    limit = 1.0
    config = Config.model_validate({"solver": {"workers": 1, "seed": 0, "timeLimit": limit}})
    monkeypatch.setattr(anytime, "Budget", FrozenBudgets(Clock()))
    given = budgets_given(monkeypatch, anytime)
    c = _tight()
    batch = [p for p in c.pods if p.pending]
    state = build_snapshot(c.nodes, [], batch, c.namespaces)
    job = anytime.SolveJob(
        cluster=c, state=state, batch=batch, config=config, budget=limit, planning=False,
        max_evictions=0, max_per_node=0, frozen=frozenset(), check_seconds=checks * limit,
    )  # fmt: skip
    answer = job.run()
    assert answer.problems == [] and len(answer.decision.placements) == 8
    (budget,) = given
    assert budget is not None and budget.limit == pytest.approx((1.0 - kept) * limit)
