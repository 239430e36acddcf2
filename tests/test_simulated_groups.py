"""kube-scheduler 1.37's group cycle as simulated (``placer.baseline.groups``) against the
independent validator, and the whole-answer fallback of ``service.decide`` on batches with gangs.

GangScheduling's PlacementFeasible is each PodGroup's own minCount: PodGroups without a key of
their own below a composite with one are tried together in that composite's domains, but one
gang's pods never count towards another's minCount, whichever comes first in the queue (the
members are tried highest priority first)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from workload_builders import ZONE, composite, dump, node, pod, pod_group

from placer import service
from placer.baseline import SimResult, simulate
from placer.engine import build_snapshot
from placer.models import Cluster, Config, Reason
from placer.service import decide, pending_batch
from placer.validate import hard_violations

CONFIG = Config.model_validate({"solver": {"workers": 1, "deterministic": True, "timeLimit": 2}})


def _simulated(c: Cluster) -> dict[str, str]:
    pending = [p for p in c.pods if p.pending]
    sim = simulate(build_snapshot(c.nodes, [], pending, c.namespaces), pending, "default", preemption=False)
    return {p.key: c.nodes[n].name for p, n in sim.placements}


def _siblings(first: int, second: int) -> Cluster:
    """One 4-cpu node in zone z1; below a basic CompositePodGroup held in one zone, gang ``a`` (2
    pods of 1 cpu, minCount 2, priority ``first``) and gang ``b`` (3 pods, minCount 3, priority
    ``second``): both do not fit, either does."""
    return dump(
        node("n0", 4, zone="z1"),
        composite("job", key=ZONE),
        pod_group("a", 2, key=None, parent="job"),
        pod_group("b", 3, key=None, parent="job"),
        *(pod(f"a-{i}", "a", priority=first) for i in range(2)),
        *(pod(f"b-{i}", "b", priority=second) for i in range(3)),
    )


@pytest.mark.parametrize(("first", "second", "placed"), [(5, 1, "a"), (1, 5, "b")])
def test_each_gang_below_a_composite_is_held_to_its_own_min_count(first: int, second: int, placed: str) -> None:
    """The higher-priority gang is tried first and placed whole; the other, which fits only in
    part after it, places nothing (it used to place what fit, counted towards the first gang's
    minCount: 2 of b's 3 pods, which the validator refuses)."""
    c = _siblings(first, second)
    where = _simulated(c)
    assert sorted(where) == sorted(p.key for p in c.pods if p.gang == placed)
    assert hard_violations(c, where) == []


def _left_short(monkeypatch: pytest.MonkeyPatch) -> None:
    """The solve of ``decide`` leaves every pod it placed out as "NotSolved" (out of time)."""
    real = service.solve_batch

    def short(*args: Any, **kwargs: Any) -> Any:
        res = real(*args, **kwargs)
        out = [(p, "NotSolved", Reason(nodes=len(args[0].nodes))) for p, _ in res.placements]
        return replace(res, placements=[], unplaced=[*out, *res.unplaced])

    monkeypatch.setattr(service, "solve_batch", short)


def _decided(c: Cluster) -> tuple[service.Decision, list[str]]:
    batch, _ = pending_batch(c, CONFIG.scheduler_name)
    state = build_snapshot(c.nodes, [], batch, c.namespaces)
    decision = decide(c, state.copy(), batch, CONFIG)
    return decision, service.check_decision(c, state, batch, decision, CONFIG)


def test_a_gang_batch_the_solve_left_short_takes_kube_schedulers_valid_whole_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Gangs of mixed priorities that kube-scheduler places whole, the validator accepting it: the
    decision is that answer, as for a batch without gangs (gang batches used to keep the short one)."""
    c = dump(
        node("n0", 4, zone="z1"),
        node("n1", 4, zone="z1"),
        pod_group("a", 2, key=ZONE),
        pod_group("b", 3, key=ZONE),
        pod("a-0", "a", priority=5),
        pod("a-1", "a", priority=1),
        *(pod(f"b-{i}", "b", priority=i) for i in range(3)),
    )
    _left_short(monkeypatch)
    decision, problems = _decided(c)
    assert problems == []
    assert decision.plan is None and not decision.unplaced
    assert sorted(p.name for p, _ in decision.placements) == ["a-0", "a-1", "b-0", "b-1", "b-2"]


def test_kube_schedulers_whole_answer_that_the_validator_refuses_is_not_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    """The answer must pass the validator before it is used: one that puts a gang of two 1-cpu pods
    on one 1-cpu node (a stand-in for a simulation answer placer's rules refuse) is not taken, and
    the decision keeps the solve's, whose pods wait for more time ("NotSolved")."""
    c = dump(node("n0", 1), node("n1", 1), pod_group("a", 2, key=None), pod("a-0", "a"), pod("a-1", "a", priority=3))
    monkeypatch.setattr(service, "simulate", lambda state, batch, *a, **k: SimResult([(p, 0) for p in batch], [], 0.0))
    _left_short(monkeypatch)
    decision, problems = _decided(c)
    assert problems == []
    assert decision.placements == [] and [code for _, code, _ in decision.unplaced] == ["NotSolved"] * 2
    assert not decision.settled
