"""PodGroup status conditions (issue 30): ``PodGroupInitiallyScheduled`` once a group placer
placed is bound, ``False``/``Unschedulable`` with kube-scheduler's words, never back from ``True``,
``DisruptionTarget`` on a group a plan preempts; each written once (not again while the cache or
the last patch already says so), in the served version's own words, and only for placer's groups.
Through the controller: the binds of a batch and of a plan, with the project's fakes."""

from __future__ import annotations

import time
from typing import Any

from runner_support import FakeActions, feed, make_runner
from workload_builders import RACK, pod, pod_group, racks

from placer.kube.groupstatus import APIS, GroupStatus
from placer.kube.informers import BETA_POD_GROUP, WORKLOAD_POD_GROUP, Informer
from placer.kube.policy import Outcome
from placer.models import Pod
from placer.plan import Plan, PlannedEviction

BETA_PATH = "/apis/scheduling.k8s.io/v1beta1"


class Writer:
    """Stands in for ``Actions``: records every condition patch and applies it to ``objects``
    only when ``echo`` (the watch showing the patch)."""

    def __init__(self, objects: dict[tuple[str, str], dict[str, Any]], *, echo: bool = True) -> None:
        self.objects, self.echo = objects, echo
        self.patches: list[tuple[str, str, dict[str, Any]]] = []

    def pod_group_condition(self, api: str, key: str, condition: dict[str, Any]) -> Outcome:
        self.patches.append((api, key, dict(condition)))
        if self.echo:
            kind = next(a.informer for a in APIS if a.path == api)
            status = self.objects[(kind, key)].setdefault("status", {})
            status["conditions"] = [c for c in status.get("conditions", []) if c["type"] != condition["type"]]
            status["conditions"].append(dict(condition))
        return Outcome(ok=True)


def _group(name: str = "w", generation: int = 3, conditions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    raw: dict[str, Any] = {"metadata": {"name": name, "namespace": "ml", "generation": generation}}
    if conditions is not None:
        raw["status"] = {"conditions": conditions}
    return raw


def _status(objects: dict[tuple[str, str], dict[str, Any]], **kw: Any) -> tuple[GroupStatus, Writer, dict[str, int]]:
    writer, counts = Writer(objects, echo=kw.pop("echo", True)), {}

    def counted(result: str) -> None:
        counts[result] = counts.get(result, 0) + 1

    gs = GroupStatus(lambda: writer, cached=lambda kind, key: objects.get((kind, key)), scheduler_name="placer",
                     counted=counted, **kw)  # fmt: skip
    return gs, writer, counts


def _member(name: str, group: str = "w", scheduler: str = "placer") -> Pod:
    return Pod(namespace="ml", name=name, gang=group, gang_size=2, gang_object="workload", scheduler_name=scheduler)


def test_a_group_is_initially_scheduled_once_every_pod_placed_for_it_is_bound_and_only_once() -> None:
    objects = {(BETA_POD_GROUP, "ml/w"): _group()}
    gs, writer, counts = _status(objects)
    a, b = _member("a"), _member("b")
    gs.placed([a, b])
    gs.bound(a.key)
    assert gs.idle(10) and writer.patches == []  # one of two bound: not yet
    gs.bound(b.key)
    assert gs.idle(10)
    ((api, key, cond),) = writer.patches
    assert (api, key) == (BETA_PATH, "ml/w")
    assert {k: cond[k] for k in ("type", "status", "reason", "message", "observedGeneration")} == {
        "type": "PodGroupInitiallyScheduled",
        "status": "True",
        "reason": "Scheduled",
        "message": "",
        "observedGeneration": 3,
    }
    assert cond["lastTransitionTime"].endswith("Z")
    gs.placed([a, b])  # scheduled again (say, a later decision of the same group): unchanged
    gs.bound(a.key), gs.bound(b.key)
    assert gs.idle(10) and len(writer.patches) == 1 and counts == {"patched": 1, "unchanged": 1}
    gs.shutdown()


def test_a_condition_patched_a_moment_ago_is_not_patched_again_before_the_watch_shows_it() -> None:
    objects = {(BETA_POD_GROUP, "ml/w"): _group()}
    gs, writer, _ = _status(objects, echo=False)
    for _ in range(3):
        gs.unschedulable(_member("a"), "0/3 nodes are available: 3 Insufficient cpu.")
        assert gs.idle(10)
    assert len(writer.patches) == 1
    gs.shutdown()


def test_unschedulable_is_false_with_kube_schedulers_words_and_keeps_its_transition_time() -> None:
    objects = {(BETA_POD_GROUP, "ml/w"): _group()}
    gs, writer, _ = _status(objects)
    gs.unschedulable(_member("a"), "0/3 nodes are available: 3 Insufficient cpu.")
    assert gs.idle(10)
    first = writer.patches[-1][2]
    assert (first["type"], first["status"], first["reason"]) == ("PodGroupInitiallyScheduled", "False", "Unschedulable")
    assert first["message"] == "0/3 nodes are available: 3 Insufficient cpu."
    first_time = first["lastTransitionTime"]
    time.sleep(1.1)
    gs.unschedulable(_member("a"), "0/3 nodes are available: 3 Insufficient memory.")
    assert gs.idle(10)
    second = writer.patches[-1][2]
    assert second["message"].endswith("Insufficient memory.") and second["lastTransitionTime"] == first_time
    gs.shutdown()


def test_a_scheduled_group_never_goes_back_to_unschedulable() -> None:
    scheduled = {"type": "PodGroupInitiallyScheduled", "status": "True", "reason": "Scheduled", "message": ""}
    objects = {(BETA_POD_GROUP, "ml/w"): _group(conditions=[scheduled])}
    gs, writer, counts = _status(objects)
    gs.unschedulable(_member("a"), "0/3 nodes are available")
    assert gs.idle(10) and writer.patches == [] and counts == {"unchanged": 1}
    gs.shutdown()


def test_a_group_just_patched_scheduled_is_not_taken_back_before_the_watch_shows_it() -> None:
    objects = {(BETA_POD_GROUP, "ml/w"): _group()}
    gs, writer, _ = _status(objects, echo=False)
    gs.placed([_member("a")])
    gs.bound("ml/a")
    assert gs.idle(10)
    gs.unschedulable(_member("b"), "0/3 nodes are available")
    assert gs.idle(10) and [c["status"] for _, _, c in writer.patches] == ["True"]
    gs.shutdown()


def test_a_1_36_server_gets_its_own_condition_name_in_v1alpha2() -> None:
    objects = {(WORKLOAD_POD_GROUP, "ml/w"): _group()}
    gs, writer, _ = _status(objects)
    gs.placed([_member("a")])
    gs.bound("ml/a")
    assert gs.idle(10)
    ((api, _, cond),) = writer.patches
    assert (api, cond["type"]) == ("/apis/scheduling.k8s.io/v1alpha2", "PodGroupScheduled")
    gs.shutdown()


def test_only_groups_of_this_scheduler_and_of_the_workload_api_get_conditions() -> None:
    objects = {(BETA_POD_GROUP, "ml/w"): _group(), (BETA_POD_GROUP, "ml/x"): _group("x")}
    gs, writer, _ = _status(objects)
    other = _member("o", "x", scheduler="default-scheduler")
    plugins = Pod(namespace="ml", name="p", gang="x", gang_size=1, gang_object="plugins", scheduler_name="placer")
    gs.placed([other, plugins])
    gs.bound(other.key), gs.bound(plugins.key)
    gs.unschedulable(other, "no")
    assert gs.idle(10) and writer.patches == []
    gs.shutdown()


def _plan(placements: list[Pod], evictions: list[PlannedEviction]) -> Plan:
    return Plan(placements=[(p, 0) for p in placements], evictions=evictions, steps=[], status="optimal", seconds=0.0)


def test_a_group_a_plan_preempts_is_a_disruption_target_once_and_a_move_is_not() -> None:
    objects = {(BETA_POD_GROUP, "ml/low"): _group("low"), (BETA_POD_GROUP, "ml/moved"): _group("moved")}
    gs, writer, _ = _status(objects)
    v1, v2, mover = _member("v1", "low"), _member("v2", "low"), _member("m", "moved")
    high = _member("h", "high")
    gs.planned(_plan([high], [
        PlannedEviction(pod=v1, node=0, kind="preempt", for_=[high.key]),
        PlannedEviction(pod=v2, node=0, kind="preempt", for_=[high.key]),
        PlannedEviction(pod=mover, node=1, kind="move", to=2),
    ]))  # fmt: skip
    for key in (v1.key, v2.key, mover.key):
        gs.evicted(key)
        assert gs.idle(10)
    ((_, key, cond),) = writer.patches
    assert key == "ml/low"
    assert (cond["type"], cond["status"], cond["reason"]) == ("DisruptionTarget", "True", "PreemptionByScheduler")
    assert cond["message"] == "placer: preempting to accommodate a higher priority PodGroup"
    gs.shutdown()


# -- through the controller -----------------------------------------------------------------------


class GroupActions(FakeActions):
    def pod_group_condition(self, api: str, key: str, condition: dict[str, Any]) -> Outcome:
        with self.lock:
            self.calls.append(("condition", api, key, condition["type"], condition["status"], condition["reason"]))
        return Outcome(ok=True)


def _controller(*pods: dict[str, Any], nodes: dict[str, int]) -> tuple[Any, GroupActions]:
    actions = GroupActions()
    r = make_runner(actions, metricsPort=0)
    r.cfg.engine.solver.time_limit = 2.0
    r.informers[BETA_POD_GROUP] = Informer(BETA_POD_GROUP, lw=None)  # type: ignore[arg-type]
    group = pod_group("w", 2, key=None)
    del group["apiVersion"], group["kind"]  # a list's items come without them
    group["metadata"]["generation"] = 1
    feed(r, BETA_POD_GROUP, group)
    feed(r, "Node", *racks(nodes))
    feed(r, "Pod", *pods)
    return r, actions


def _solve_once(r: Any) -> None:
    """One batch through the controller: solved, applied, its binds collected and accounted."""
    r.ctx.batcher.sync(r.cycle.pending_keys(), now=time.monotonic())
    r.cycle.submit(r.cluster())
    assert r.cycle.solving is not None
    r.cycle.solving[1].result(timeout=60)
    r.cycle.finish()
    r.ctx.pool.shutdown(wait=True)
    r.binder.collect()
    assert r.ctx.group_status.idle(10)


def _conditions(actions: GroupActions) -> list[tuple[str, ...]]:
    return [c[1:] for c in actions.calls if c[0] == "condition"]


def test_the_controller_marks_a_group_it_binds_initially_scheduled() -> None:
    r, actions = _controller(pod("w-0", "w"), pod("w-1", "w"), nodes={"a": 2})
    _solve_once(r)
    assert len([c for c in actions.calls if c[0] == "bind"]) == 2
    assert _conditions(actions) == [(BETA_PATH, "ml/w", "PodGroupInitiallyScheduled", "True", "Scheduled")]
    r.ctx.group_status.shutdown()


def test_the_controller_marks_a_group_it_cannot_place_unschedulable() -> None:
    r, actions = _controller(pod("w-0", "w", cpu="100"), pod("w-1", "w", cpu="100"), nodes={"a": 1})
    _solve_once(r)
    assert not [c for c in actions.calls if c[0] == "bind"]
    assert _conditions(actions) == [(BETA_PATH, "ml/w", "PodGroupInitiallyScheduled", "False", "Unschedulable")]
    r.ctx.group_status.shutdown()


def test_a_workload_gang_short_of_min_count_is_not_batched_and_no_condition_is_written() -> None:
    """The pod names its PodGroup (minCount 2) and gets its size only from that object: with one
    member pending the gang waits unbatched (kube-scheduler's GangScheduling PreEnqueue), neither
    the pod nor the group is reported; with the second both are bound and the group scheduled."""
    r, actions = _controller(pod("w-0", "w"), nodes={"a": 2})
    r.cycle.queue()
    assert len(r.ctx.batcher) == 0 and r.cycle.gated == ["ml/w-0"]
    r.reports.shutdown(wait=True)
    assert r.ctx.group_status.idle(10) and actions.calls == []
    feed(r, "Pod", pod("w-0", "w"), pod("w-1", "w"))
    r.cycle.queue()
    assert len(r.ctx.batcher) == 2 and r.cycle.gated == []
    _solve_once(r)
    assert len([c for c in actions.calls if c[0] == "bind"]) == 2
    assert _conditions(actions) == [(BETA_PATH, "ml/w", "PodGroupInitiallyScheduled", "True", "Scheduled")]
    r.ctx.group_status.shutdown()


def _listed(*groups: tuple[str, int, str | None]) -> list[dict[str, Any]]:
    """v1beta1 PodGroups (name, minCount, topology key) as a list's items come."""
    out = []
    for name, size, key in groups:
        group = pod_group(name, size, key=key)
        del group["apiVersion"], group["kind"]
        group["metadata"]["generation"] = 1
        out.append(group)
    return out


def test_the_queue_takes_workload_gangs_held_to_a_rack_together_and_places_them_jointly() -> None:
    """The issue's example through the controller: gangs of 4, 6 and 6 whose v1beta1 PodGroups
    hold each to one rack (the pods name their group; the queue learns the key from the object),
    batchSize 4: one batch takes all three (groupBatchSize), which fits each whole in one rack of
    10 and 6 slots; a gang without a topology key is not taken along."""
    actions = GroupActions()
    r = make_runner(actions, metricsPort=0, batchSize=4, groupBatchSize=20)
    r.cfg.engine.solver.time_limit = 2.0
    r.informers[BETA_POD_GROUP] = Informer(BETA_POD_GROUP, lw=None)  # type: ignore[arg-type]
    feed(r, BETA_POD_GROUP, *_listed(("g4", 4, RACK), ("g6a", 6, RACK), ("g6b", 6, RACK), ("zfree", 2, None)))
    feed(r, "Node", *racks({"a": 10, "b": 6, "c": 2}))
    members = [pod(f"{n}-{i}", n) for n, size in (("g4", 4), ("g6a", 6), ("g6b", 6), ("zfree", 2)) for i in range(size)]
    feed(r, "Pod", *members)
    _solve_once(r)
    racks_of: dict[str, set[str]] = {}
    for _, key, node_name in (c for c in actions.calls if c[0] == "bind"):
        racks_of.setdefault(key.split("/")[1].rsplit("-", 1)[0], set()).add(node_name.split("-")[0])
    assert racks_of.keys() == {"g4", "g6a", "g6b"} and all(len(r) == 1 for r in racks_of.values())
    assert sum(1 for c in actions.calls if c[0] == "bind") == 16
    r.ctx.group_status.shutdown()


def test_the_queue_batches_one_rack_gang_per_batch_without_a_group_batch_size() -> None:
    actions = GroupActions()
    r = make_runner(actions, metricsPort=0, batchSize=4, groupBatchSize=4)
    r.informers[BETA_POD_GROUP] = Informer(BETA_POD_GROUP, lw=None)  # type: ignore[arg-type]
    feed(r, BETA_POD_GROUP, *_listed(("g4", 4, RACK), ("g6a", 6, RACK)))
    feed(r, "Node", *racks({"a": 10, "b": 6}))
    feed(r, "Pod", *[pod(f"{n}-{i}", n) for n, size in (("g4", 4), ("g6a", 6)) for i in range(size)])
    r.ctx.batcher.sync(r.cycle.pending_keys(), now=time.monotonic())
    assert len(r.ctx.batcher.take(r.cycle._gangs, r.cycle._rivals)) == 4
    r.ctx.group_status.shutdown()
