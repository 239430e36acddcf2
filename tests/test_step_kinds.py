"""Plan step kinds come from one registry, and a kind registered here is used end to end.

Aspects: the output model accepts registered kinds only; a replacement's bind names the pod it
replaces instead of a pod; a kind registered from this module (a ``checkpoint`` that changes
nothing in the cluster) goes through the service's step numbering, the controller's executor,
the independent validator and the CLI renderer without any change to their source.
"""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest
from pydantic import ValidationError
from rich.console import Console
from support import cluster, node, pod

from placer.cli.render import render_outcome
from placer.controller.executor import Bind, Evict, PlanRun, PodView, World
from placer.models import Config, Effect, Step, StepKind, register_step_kind, unregister_step_kind
from placer.plan import StepSpec
from placer.service import Outcome, SolveOptions, plan_steps, solve_cluster
from placer.validate import validate_plan

CHECKPOINT = "checkpoint"


@pytest.fixture
def checkpoint() -> Iterator[StepKind]:
    kind = register_step_kind(StepKind(CHECKPOINT, Effect.MARK, rank=3, verb="checkpoint"))
    yield kind
    unregister_step_kind(CHECKPOINT)


def test_only_registered_kinds_make_steps() -> None:
    with pytest.raises(ValidationError, match="unknown step op 'teleport'"):
        Step(id=1, op="teleport", pod="ns/a", node="a")
    with pytest.raises(ValidationError, match="either a pod or the pod it replaces"):
        Step(id=1, op="bind", pod="ns/a", replaces="ns/b", node="a")
    step = Step(id=1, op="bind", pod=None, replaces="ns/b", node="a")
    assert step.subject == "replacement of ns/b"


def _fragmented_move() -> tuple[object, Outcome]:
    """Boreas' second batch: the plan moves a backend from a to b (evict, await-gone, binds)."""
    rs = {"kind": "ReplicaSet", "name": "backend"}
    pods = [
        pod("proxy-0", cpu="7.5", node="a", owner={"kind": "ReplicaSet", "name": "proxy"}),
        pod("backend-0", cpu="5", node="a", owner=rs),
        pod("proxy-1", cpu="7.5", owner={"kind": "ReplicaSet", "name": "proxy"}),
        pod("backend-1", cpu="5", owner=rs),
        pod("backend-2", cpu="5", owner=rs),
    ]
    c = cluster([node("a", cpu="15"), node("b", cpu="15")], pods, replicaSets=[{"name": "proxy"}, {"name": "backend"}])
    cfg = Config.model_validate({"solver": {"workers": 1, "deterministic": True, "timeLimit": 5}})
    return c, solve_cluster(c, SolveOptions(config=cfg))


def _with_checkpoint(steps: list[Step]) -> list[Step]:
    """A checkpoint right after the last await-gone, waiting on every await-gone; binds that
    waited on an await-gone wait on the checkpoint instead."""
    gone = {s.id for s in steps if s.kind.effect == Effect.AWAIT_GONE}
    listing: list[Step | None] = []
    for s in steps:
        listing.append(s)
        if s.id == max(gone):
            listing.append(None)  # the checkpoint's place
    ids = {s.id: i for i, s in enumerate(listing, start=1) if s is not None}
    mark = next(i for i, s in enumerate(listing, start=1) if s is None)
    out = []
    for s in listing:
        if s is None:
            out.append(Step(id=mark, op=CHECKPOINT, pod="ns/marker", node="a", after=sorted(ids[g] for g in gone)))
            continue
        after = {ids[a] for a in s.after}
        if s.kind.effect == Effect.BIND and gone & set(s.after):
            after = {ids[a] for a in s.after if a not in gone} | {mark}
        out.append(s.model_copy(update={"id": ids[s.id], "after": sorted(after)}))
    return out


def test_a_kind_registered_here_is_used_end_to_end(checkpoint: StepKind) -> None:
    c, outcome = _fragmented_move()
    steps = outcome.result.steps
    assert [s.op for s in steps].count("await-gone") == 1
    with_mark = _with_checkpoint(steps)
    assert [s.op for s in with_mark].count(CHECKPOINT) == 1

    # Service: the step numbering of a batched run carries the kind through.
    names = ["a", "b"]
    specs = [StepSpec(s.id, s.op, s.pod, names.index(s.node), tuple(s.after), replaces=s.replaces) for s in with_mark]
    shifted = plan_steps(specs, names, earlier=[Step(id=1, op="bind", pod="ns/earlier", node="b")])
    assert [(s.id - 1, s.op) for s in shifted] == [(s.id, s.op) for s in with_mark]

    # Validator: the plan with its checkpoint is still valid (the checkpoint changes no room).
    result = outcome.result.model_copy(update={"steps": with_mark})
    assert validate_plan(c, result) == []
    # ... and follows dependencies through it: a checkpoint that waits on nothing lets the binds
    # behind it run before the victim is gone.
    hollow = [s.model_copy(update={"after": []}) if s.op == CHECKPOINT else s for s in with_mark]
    problems = validate_plan(c, outcome.result.model_copy(update={"steps": hollow}))
    assert any("before default/backend-0 is gone" in p for p in problems), problems

    # Executor: the checkpoint completes once the victim is gone, and only then do binds run.
    timeouts = {"await_gone": 60.0, "await_replacement": 60.0, "await_room": 60.0}
    run = PlanRun(with_mark, {"default/backend-0": _victim()}, started=0, **timeouts)
    full = {"a": {"cpu": 2500, "pods": 100}, "b": {"cpu": 15000, "pods": 100}}
    views = _pending_views()
    first = run.advance(World(1, {"default/backend-0": _victim(), **views}, full))
    assert [a for a in first if isinstance(a, Evict)] == [Evict(1, "default/backend-0")]
    run.evicted(1, 1, ok=True)
    mark_id = next(s.id for s in with_mark if s.op == CHECKPOINT)
    assert run.steps[mark_id].state == "waiting"
    replacement = PodView("default/backend-9", "uid-r", None, "rs-backend", created=2.0, requests={"cpu": 5000})
    free = {"a": {"cpu": 7500, "pods": 100}, "b": {"cpu": 15000, "pods": 100}}
    actions = run.advance(World(3, {**views, "default/backend-9": replacement}, free))
    assert run.steps[mark_id].state == "done"
    assert any(isinstance(a, Bind) and a.pod == "default/backend-9" for a in actions)

    # Rendering: the step table shows the kind.
    out = io.StringIO()
    render_outcome(Console(file=out, width=160), Outcome(result, outcome.before, outcome.after, []))
    assert CHECKPOINT in out.getvalue()


def _victim() -> PodView:
    return PodView("default/backend-0", "uid-v", "a", "rs-backend", created=0.0, requests={"cpu": 5000})


def _pending_views() -> dict[str, PodView]:
    return {
        f"default/{n}": PodView(f"default/{n}", f"uid-{n}", None, None, created=0.0, requests={"cpu": cpu})
        for n, cpu in (("proxy-1", 7500), ("backend-1", 5000), ("backend-2", 5000))
    }


def test_unregistering_a_built_in_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="built in"):
        unregister_step_kind("bind")
