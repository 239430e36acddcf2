"""The kube-scheduler simulation inside a decision's budget: with a deadline it stops there, inside
a pod group too, and says so; the decision then goes on without that answer (``service.decide``)."""

from __future__ import annotations

import importlib
import itertools
import json
import time
from typing import Any

import pytest
from support import solve

from placer import service
from placer.baseline import SimResult, simulate
from placer.engine import build_snapshot
from placer.inputs import parse_cluster
from placer.models import Cluster

simulation = importlib.import_module("placer.baseline.simulate")  # the package's `simulate` is the function


def _cluster() -> Cluster:
    """Four nodes of 4 cpu; a v1beta1 PodGroup of 12 one-cpu pods (minCount 12), then 4 web pods."""
    items: list[dict[str, Any]] = [
        {"kind": "Node", "metadata": {"name": f"n{i}"}, "status": {"allocatable": {"cpu": "4", "memory": "8Gi"}}}
        for i in range(4)
    ]
    items.append(
        {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "train", "namespace": "ml"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 12}}},
        }
    )

    def pod(name: str, ns: str, cpu: str, minute: int, group: str | None) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "schedulerName": "placer",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
        }
        if group:
            spec["schedulingGroup"] = {"podGroupName": group}
        meta = {"name": name, "namespace": ns, "creationTimestamp": f"2026-01-01T00:0{minute}:00Z"}
        return {"kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": "Pending"}}

    items += [pod(f"g{i}", "ml", "1", 1, "train") for i in range(12)]
    items += [pod(f"web-{i}", "web", "500m", 2, None) for i in range(4)]
    return parse_cluster("test.json", json.dumps({"kind": "List", "items": items}))


def _run(c: Cluster, deadline: float | None) -> SimResult:
    pending = [p for p in c.pods if p.pending]
    return simulate(build_snapshot(c.nodes, [], pending, c.namespaces), pending, "default", deadline=deadline)


def test_without_a_deadline_or_before_it_the_simulation_runs_to_the_end() -> None:
    c = _cluster()
    whole, early = _run(c, None), _run(c, time.monotonic() + 3600)
    assert not whole.stopped and not early.stopped
    assert len(whole.placements) == 16
    assert [(p.key, n) for p, n in early.placements] == [(p.key, n) for p, n in whole.placements]


def test_a_deadline_already_past_weighs_no_pod() -> None:
    res = _run(_cluster(), time.monotonic() - 1)
    assert res.stopped and res.placements == []


def test_a_deadline_that_falls_inside_a_group_stops_the_group(monkeypatch: pytest.MonkeyPatch) -> None:
    """One second passes per clock reading: the deadline falls while the gang's members are tried."""
    ticks = itertools.count()
    monkeypatch.setattr(simulation.time, "monotonic", lambda: float(next(ticks)))
    res = _run(_cluster(), 8.5)
    assert res.stopped
    assert not any(p.name.startswith("g") for p, _ in res.placements)  # the gang was cut short, not placed


def test_a_decision_whose_simulation_cannot_finish_still_places_every_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    """The guard asks for kube-scheduler's answer (estimated free), which meets its deadline at
    once: the decision goes on without it, and its answer (checked by the independent validator
    in ``solve``) places every pod."""
    for name in ("SIM_SECONDS_PER_POD", "SIM_SECONDS_PER_PAIR", "SIM_SECONDS_PER_RUNNING"):
        monkeypatch.setattr(service, name, 0.0)
    stopped: list[bool] = []
    real = service.simulate

    def late(*args: Any, **kwargs: Any) -> SimResult:
        assert kwargs["deadline"] is not None
        res = real(*args, **{**kwargs, "deadline": time.monotonic() - 1})
        stopped.append(res.stopped)
        return res

    monkeypatch.setattr(service, "simulate", late)
    outcome = solve(_cluster(), solver={"timeLimit": 2, "workers": 1, "deterministic": False})
    assert stopped == [True]
    assert len(outcome.result.placements) == 16
