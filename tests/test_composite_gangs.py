"""CompositePodGroup ``minGroupCount`` (Kubernetes 1.37 ``scheduling.k8s.io/v1alpha3``): at least
that many child groups placed together, or none of the composite.

Aspects: reading (the rule reaches every pod below, nested; a bad value names the field), the
CP-SAT engine (too few child groups fit: nothing placed, with a reason saying so; enough fit: that
many whole children; children already running count; a composite gang competes jointly with
other groups), the kube-scheduler 1.37 simulation (the composite's cycle undoes a short tree),
the independent validator's own check (a hand-made short answer is refused), and a property test
over random clusters. Every engine answer goes through the validator (``support.solve``).
"""

from __future__ import annotations

from typing import Any

import pytest
from builders import property_settings
from hypothesis import given, note
from hypothesis import strategies as st
from support import DETERMINISTIC, solve, unplaced, where
from workload_builders import composite, dump, dump_json, gang, node, pod, pod_group, racks

from placer.errors import InputError
from placer.inputs import parse_cluster
from placer.models import Config, GroupQuorum
from placer.service import SolveOptions, solve_cluster
from placer.validate import validate_placements, validate_plan

PROPERTY = property_settings("PLACER_WORKLOAD_EXAMPLES", 25)
Json = dict[str, Any]


def _job(min_groups: int | None, children: dict[str, int], **composite_kw: Any) -> list[Json]:
    """CompositePodGroup ``job`` and its child gangs (name -> size), no topology keys."""
    items: list[Json] = [composite("job", key=None, min_groups=min_groups, **composite_kw)]
    for child, size in children.items():
        items += gang(child, size, key=None, parent="job")
    return items


def _children_placed(out: Any) -> set[str]:
    return {name.rsplit("-", 1)[0] for name in where(out)}


# -- reading ---------------------------------------------------------------------------------------


def test_min_group_count_reaches_every_pod_below_the_composite_nested() -> None:
    items = [
        composite("top", key=None, min_groups=2),
        composite("mid", key=None, parent="top", min_groups=3),
        *gang("w", 1, key=None, parent="mid"),
    ]
    (p,) = dump(racks({"a": 1}), *items).pods
    assert p.group_quorums == (
        GroupQuorum(group="CompositePodGroup ml/mid", child="PodGroup ml/w", min_groups=3),
        GroupQuorum(group="CompositePodGroup ml/top", child="CompositePodGroup ml/mid", min_groups=2),
    )


def test_a_basic_composite_or_a_min_group_count_of_one_is_no_rule() -> None:
    for policy in (None, 1):
        pods = dump(racks({"a": 2}), *_job(policy, {"w1": 1, "w2": 1})).pods
        assert all(p.group_quorums == () for p in pods)


def test_a_min_group_count_of_zero_names_the_field() -> None:
    with pytest.raises(InputError, match="minGroupCount"):
        dump(racks({"a": 1}), *_job(0, {"w": 1}))


# -- the engine ------------------------------------------------------------------------------------


def test_too_few_child_groups_fitting_places_none_of_the_composite_and_says_why() -> None:
    c = dump(racks({"a": 4}), *_job(3, {"w1": 2, "w2": 2, "w3": 2}))  # room for two children of three
    out = solve(c)
    assert where(out) == {}
    assert set(unplaced(out).values()) == {"Unschedulable"}
    reasons = {u.reason for u in out.result.unplaced}
    want = "CompositePodGroup ml/job: fewer than 3 of its 3 child groups (minGroupCount)"
    assert all(r.startswith(want) for r in reasons), reasons


def test_enough_child_groups_fitting_places_that_many_whole() -> None:
    c = dump(racks({"a": 5}), *_job(2, {"w1": 2, "w2": 2, "w3": 2}))  # room for two children and one pod
    out = solve(c)
    placed = _children_placed(out)
    assert len(placed) == 2 and len(where(out)) == 4


def test_child_groups_already_running_count_toward_the_quorum() -> None:
    running = [pod_group("w1", 2, key=None, parent="job"), pod("w1-0", "w1", node="a-0"), pod("w1-1", "w1", node="a-1")]
    job = composite("job", key=None, min_groups=2)
    c = dump(racks({"a": 4}), job, *running, *gang("w2", 2, key=None, parent="job"))
    out = solve(c)
    assert _children_placed(out) == {"w2"}


def test_a_composite_short_of_its_quorum_places_no_child_even_where_more_pods_would_fit() -> None:
    """Three slots: one child of the composite and the lone gang would fill them (three pods), but
    the composite asks for both of its children, which need four."""
    c = dump(racks({"a": 3}), *_job(2, {"w1": 2, "w2": 2}), *gang("other", 1, key=None))
    out = solve(c)
    assert _children_placed(out) == {"other"}


def test_a_composite_gang_waits_while_fewer_child_groups_exist_than_it_asks_for() -> None:
    out = solve(dump(racks({"a": 4}), *_job(3, {"w1": 1, "w2": 1})))
    assert where(out) == {}
    assert {u.reason for u in out.result.unplaced} == {
        "CompositePodGroup ml/job waits for 3 child groups (minGroupCount), 2 exist"
    }


def _full_of_low_pods_then_a_high_job() -> Any:
    low = [pod(f"low-{i}", node=f"a-{i}", priority=1) for i in range(4)]
    job = [composite("job", key=None, min_groups=2)]
    for child in ("w1", "w2"):
        job += gang(child, 2, key=None, parent="job", priority=100)
    return dump(racks({"a": 4}), *low, *job)


def test_a_plan_preempts_for_every_child_a_composite_gang_needs() -> None:
    out = solve(_full_of_low_pods_then_a_high_job())  # a plan: validated with validate_plan
    assert _children_placed(out) == {"w1", "w2"} and len(out.result.evictions) == 4


def test_a_plan_capped_below_what_the_quorum_needs_preempts_nothing_for_one_child() -> None:
    c = _full_of_low_pods_then_a_high_job()
    cfg = Config.model_validate(DETERMINISTIC)
    out = solve_cluster(c, SolveOptions(config=cfg, max_evictions=3))  # room for one child only
    assert out.result.evictions == [] and where(out) == {}
    assert validate_plan(c, out.result, max_evictions=3) == []


# -- the kube-scheduler 1.37 simulation ------------------------------------------------------------


def test_the_simulation_undoes_a_composite_tree_short_of_its_quorum() -> None:
    out = solve(dump(racks({"a": 4}), *_job(3, {"w1": 2, "w2": 2, "w3": 2})), policy="default")
    assert where(out) == {} and len(unplaced(out)) == 6
    assert all("fewer than 3 of its 3 child groups" in u.reason for u in out.result.unplaced)


def test_the_simulation_places_a_composite_tree_that_meets_its_quorum() -> None:
    out = solve(dump(racks({"a": 5}), *_job(2, {"w1": 2, "w2": 2, "w3": 2})), policy="default")
    assert len(_children_placed(out)) == 2 and len(where(out)) == 4


# -- the validator's own check ---------------------------------------------------------------------


def test_the_validator_refuses_one_child_of_a_composite_asking_for_two() -> None:
    c = dump(racks({"a": 4}), *_job(2, {"w1": 2, "w2": 2}))
    problems = validate_placements(c, {"ml/w1-0": "a-0", "ml/w1-1": "a-1"})
    assert any("CompositePodGroup ml/job: minGroupCount 2, but only 1 child groups" in p for p in problems), problems
    both = {f"ml/w{i}-{j}": f"a-{2 * i + j - 2}" for i in (1, 2) for j in (0, 1)}
    assert validate_placements(c, both) == []


def test_a_basic_group_below_a_composite_gang_is_refused_saying_why() -> None:
    items = [composite("job", key=None, min_groups=2), pod_group("b", None, key=None, parent="job"), pod("b-0", "b")]
    out = solve(dump(racks({"a": 2}), *items, *gang("w", 1, key=None, parent="job")))
    assert where(out) == {}
    refused = {u.pod: u.reason for u in out.result.unplaced}["ml/b-0"]
    assert "basic policy below CompositePodGroup ml/job" in refused


# -- property --------------------------------------------------------------------------------------


@st.composite
def clusters(draw: st.DrawFn) -> str:
    items: list[Json] = [node(f"n{i}", draw(st.integers(1, 3))) for i in range(draw(st.integers(1, 4)))]
    for j in range(draw(st.integers(1, 2))):
        children = draw(st.integers(1, 4))
        need = draw(st.integers(1, children + 1))
        items.append(composite(f"job{j}", key=None, min_groups=need))
        for c in range(children):
            name = f"j{j}c{c}"
            size = draw(st.integers(1, 3))
            items.append(pod_group(name, size if draw(st.booleans()) else None, key=None, parent=f"job{j}"))
            items += [pod(f"{name}-{i}", name, priority=draw(st.integers(0, 1))) for i in range(size)]
    for i in range(draw(st.integers(0, 3))):
        items.append(pod(f"loose-{i}", priority=draw(st.integers(0, 1))))
    return dump_json(*items)


@PROPERTY
@given(clusters())
def test_every_composite_gang_is_placed_with_its_quorum_or_not_at_all(raw: str) -> None:
    c = parse_cluster("dump.json", raw)
    note(raw)
    out = solve(c)  # the validator, with its own code, found nothing wrong
    placed = set(where(out))
    for job in {q.group for p in c.pods for q in p.group_quorums}:
        below = [p for p in c.pods if any(q.group == job for q in p.group_quorums)]
        need = next(q.min_groups for q in below[0].group_quorums if q.group == job)
        children = {q.child for p in below if p.name in placed for q in p.group_quorums if q.group == job}
        assert not children or len(children) >= need, (job, children, need)
