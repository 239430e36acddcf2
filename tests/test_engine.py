"""The placement engine end to end on small clusters, one behaviour per test.

Aspects: joint placement beats greedy (Boreas), capacity on every resource with exact units,
labels and weak binding, taints and cordon, host ports, priority keys, strategies, batches,
unsupported constraints, unplaced reasons. Every answer is checked by the independent validator.
"""

from __future__ import annotations

import gc
from typing import Any

import numpy as np
import pytest
from support import cluster, node, pod, solve, unplaced, where

from placer.engine import (
    DETERMINISTIC_UNITS_PER_SECOND,
    Budget,
    Scorer,
    build_batch,
    build_snapshot,
    descend,
    solve_batch,
)
from placer.engine import solve as engine_solve
from placer.models import Config


def _boreas() -> Any:
    nodes = [node("a", cpu="15"), node("b", cpu="15")]
    pods = [pod(f"proxy-{i}", cpu="7.5", creationTimestamp=f"2024-01-01T00:00:0{i}Z") for i in range(2)]
    pods += [pod(f"backend-{i}", cpu="5", creationTimestamp=f"2024-01-01T00:01:0{i}Z") for i in range(3)]
    return cluster(nodes, pods)


def test_boreas_placer_places_all_five_where_the_default_scheduler_strands_one() -> None:
    c = _boreas()
    placer = solve(c)
    default = solve(c, policy="default")
    assert placer.result.metrics.placed == 5
    assert default.result.metrics.placed == 4
    got = where(placer)
    assert got["proxy-0"] == got["proxy-1"]
    assert len({got[f"backend-{i}"] for i in range(3)}) == 1
    # Both nodes had room for backend-2 before the batch; pods placed before it (the proxies and
    # two backends, equal keys, older) filled it: Outranked, with kube-scheduler's words.
    assert unplaced(default) == {"backend-2": "Outranked"}
    assert default.result.unplaced[0].reason == "0/2 nodes are available: 2 Insufficient cpu."


def test_exact_units_ten_pods_of_1g_fill_a_10g_node() -> None:
    c = cluster([node("a", cpu="100", memory="10G")], [pod(f"p{i}", cpu="1", memory="1G") for i in range(11)])
    out = solve(c)
    assert out.result.metrics.placed == 10
    # The node had room for the eleventh before the batch; ten pods of its key filled it.
    assert list(unplaced(out).values()) == ["Outranked"]
    assert "Insufficient memory" in out.result.unplaced[0].reason


def test_extended_resources_and_pod_count_are_capacities() -> None:
    nodes = [node("a", cpu="64", pods=2, allocatable={"placer.io/bandwidth": "1000"})]
    pods = [pod(f"p{i}", requests={"placer.io/bandwidth": "600"}) for i in range(2)]
    pods.append(pod("q"))
    out = solve(cluster(nodes, pods))
    assert out.result.metrics.placed == 2
    reasons = {u.pod: u.reason for u in out.result.unplaced}
    assert any("Too many pods" in r or "Insufficient placer.io/bandwidth" in r for r in reasons.values())


def test_node_selector_and_affinity_restrict_nodes() -> None:
    nodes = [node("a", labels={"zone": "x", "gen": "3"}), node("b", labels={"zone": "y", "gen": "10"})]
    gt = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["5"]}]}]
            }
        }
    }
    pods = [pod("sel", nodeSelector={"zone": "x"}), pod("aff", affinity=gt), pod("none", nodeSelector={"zone": "z"})]
    out = solve(cluster(nodes, pods))
    assert where(out) == {"sel": "a", "aff": "b"}
    assert unplaced(out) == {"none": "Unschedulable"}
    assert "2 node(s) didn't match Pod's node affinity/selector" in out.result.unplaced[0].reason


def test_when_no_node_matches_ignore_affinity_drops_the_selector() -> None:
    nodes = [node("a", labels={"zone": "x"})]
    ann = {"placer.io/when-no-node-matches": "ignore-affinity"}
    pods = [pod("p", nodeSelector={"zone": "nowhere"}, annotations=ann), pod("q", nodeSelector={"zone": "nowhere"})]
    out = solve(cluster(nodes, pods))
    assert where(out) == {"p": "a"}
    assert unplaced(out) == {"q": "Unschedulable"}


def test_when_no_node_fits_ignore_affinity_prefers_matching_nodes_then_falls_back() -> None:
    nodes = [node("a", cpu="2", labels={"zone": "x"}), node("b", cpu="8", labels={"zone": "y"})]
    ann = {"placer.io/when-no-node-fits": "ignore-affinity"}
    pods = [pod(f"p{i}", cpu="1", nodeSelector={"zone": "x"}, annotations=ann) for i in range(4)]
    out = solve(cluster(nodes, pods))
    got = where(out)
    assert len(got) == 4
    assert sorted(got.values()) == ["a", "a", "b", "b"]


def test_untolerated_taints_and_cordon_keep_pods_off() -> None:
    nodes = [
        node("tainted", taints=[{"key": "gpu", "value": "true", "effect": "NoSchedule"}]),
        node("cordoned", unschedulable=True),
        node("open", cpu="1"),
    ]
    tol = [{"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}]
    pods = [pod("tolerant", tolerations=tol), pod("plain-1"), pod("plain-2")]
    out = solve(cluster(nodes, pods))
    got = where(out)
    assert got["tolerant"] in {"tainted", "open"}
    assert "cordoned" not in got.values()
    assert out.result.metrics.placed == 2
    reason = out.result.unplaced[0].reason
    assert "node(s) had untolerated taint {gpu: true}" in reason
    assert "node(s) were unschedulable" in reason


def test_prefer_no_schedule_is_avoided_when_possible() -> None:
    nodes = [node("soft", taints=[{"key": "spot", "effect": "PreferNoSchedule"}]), node("clean")]
    out = solve(cluster(nodes, [pod("p")]))
    assert where(out) == {"p": "clean"}


def test_preferred_affinity_is_honoured() -> None:
    nodes = [node("a", labels={"disk": "hdd"}), node("b", labels={"disk": "ssd"})]
    pref = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 50,
                    "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]},
                }
            ]
        }
    }
    out = solve(cluster(nodes, [pod("p", affinity=pref)]))
    assert where(out) == {"p": "b"}


def test_host_ports_never_share_a_node() -> None:
    nodes = [node("a", cpu="8"), node("b", cpu="8")]
    pods = [pod(f"web-{i}", hostPorts=[{"port": 8080}]) for i in range(3)]
    pods.append(pod("running", node="a", hostPorts=[{"port": 9090}]))
    pods.append(pod("other", hostPorts=[{"port": 9090}]))
    out = solve(cluster(nodes, pods))
    got = where(out)
    assert sorted(got[f"web-{i}"] for i in range(3) if f"web-{i}" in got) == ["a", "b"]
    assert got["other"] == "b"
    assert "didn't have free ports" in " ".join(u.reason for u in out.result.unplaced)


def test_higher_keys_win_when_not_everything_fits() -> None:
    nodes = [node("a", cpu="2")]
    pods = [
        pod("never", cpu="2", restartPolicy="Never", creationTimestamp="2024-01-01T00:00:00Z"),
        pod("always", cpu="2", restartPolicy="Always", creationTimestamp="2024-01-01T00:00:05Z"),
    ]
    out = solve(cluster(nodes, pods))
    assert where(out) == {"always": "a"}
    assert unplaced(out) == {"never": "Outranked"}


def test_spec_priority_outranks_the_restart_tier() -> None:
    nodes = [node("a", cpu="2")]
    pods = [pod("job", cpu="2", restartPolicy="Never", priority=100), pod("svc", cpu="2")]
    out = solve(cluster(nodes, pods))
    assert where(out) == {"job": "a"}


def test_restart_tiers_can_be_turned_off() -> None:
    nodes = [node("a", cpu="2")]
    pods = [
        pod("never", cpu="2", restartPolicy="Never", creationTimestamp="2024-01-01T00:00:00Z"),
        pod("always", cpu="1500m", restartPolicy="Always", creationTimestamp="2024-01-01T00:00:05Z"),
    ]
    tiers_off = solve(cluster(nodes, pods), priority={"restartTiers": False})
    assert tiers_off.result.metrics.placed == 1
    assert solve(cluster(nodes, pods)).result.placements[0].pod == "default/always"


def test_many_small_pods_beat_one_big_pod_of_the_same_key() -> None:
    nodes = [node("a", cpu="4")]
    pods = [pod("big", cpu="4")] + [pod(f"s{i}", cpu="1") for i in range(4)]
    out = solve(cluster(nodes, pods))
    assert out.result.metrics.placed == 4
    assert "big" not in where(out)


def test_running_pods_consume_capacity_and_finished_ones_do_not() -> None:
    nodes = [node("a", cpu="4")]
    pods = [
        pod("old", cpu="3", node="a"),
        pod("done", cpu="4", node="a", phase="Succeeded"),
        pod("new-1", cpu="1"),
        pod("new-2", cpu="1"),
    ]
    out = solve(cluster(nodes, pods))
    assert out.result.metrics.placed == 1


@pytest.mark.parametrize("strategy", ["balance", "spread", "pack"])
def test_every_strategy_places_everything_that_fits(strategy: str) -> None:
    nodes = [node(f"n{i}", cpu="4", memory="8Gi") for i in range(3)]
    pods = [pod(f"p{i}", cpu="1", memory="1Gi") for i in range(6)]
    out = solve(cluster(nodes, pods), strategy=strategy)
    assert out.result.metrics.placed == 6


def test_pack_fills_few_nodes_and_spread_uses_all() -> None:
    nodes = [node(f"n{i}", cpu="4", memory="8Gi") for i in range(3)]
    pods = [pod(f"p{i}", cpu="1", memory="1Gi") for i in range(3)]
    packed = solve(cluster(nodes, pods), strategy="pack")
    spread = solve(cluster(nodes, pods), strategy="spread")
    assert len(set(where(packed).values())) == 1
    assert len(set(where(spread).values())) == 3


def test_balance_pairs_cpu_heavy_with_memory_heavy_pods() -> None:
    nodes = [node(f"n{i}", cpu="4", memory="4Gi") for i in range(2)]
    pods = [
        pod("cpu-1", cpu="3", memory="1Gi"),
        pod("cpu-2", cpu="3", memory="1Gi"),
        pod("mem-1", cpu="1", memory="3Gi"),
        pod("mem-2", cpu="1", memory="3Gi"),
    ]
    out = solve(cluster(nodes, pods))
    got = where(out)
    assert got["cpu-1"] != got["cpu-2"]
    assert got["mem-1"] != got["mem-2"]
    assert out.result.metrics.imbalance == pytest.approx(0.0, abs=1e-9)


def test_batches_are_solved_in_creation_order_on_the_state_the_previous_left() -> None:
    c = cluster(
        [node("a", cpu="15"), node("b", cpu="15")],
        [
            pod("proxy-0", cpu="7.5", creationTimestamp="2024-01-01T00:00:00Z"),
            pod("backend-0", cpu="5", creationTimestamp="2024-01-01T00:00:01Z"),
            pod("proxy-1", cpu="7.5", creationTimestamp="2024-01-01T00:00:02Z"),
            pod("backend-1", cpu="5", creationTimestamp="2024-01-01T00:00:03Z"),
            pod("backend-2", cpu="5", creationTimestamp="2024-01-01T00:00:04Z"),
        ],
    )
    whole = solve(c)
    batched = solve(c, batch_size=1)
    assert whole.result.metrics.placed == 5
    assert batched.result.metrics.placed <= 5


def test_other_schedulers_pods_and_gated_pods_are_not_in_the_batch() -> None:
    pods = [pod("mine"), pod("theirs", schedulerName="default-scheduler"), pod("gated", schedulingGates=["wait"])]
    out = solve(cluster([node("a")], pods))
    assert where(out) == {"mine": "a"}
    assert any("gated" in w for w in out.warnings)


def test_identical_replicas_on_identical_nodes_solve_fast_and_exactly() -> None:
    nodes = [node(f"n{i:02d}", cpu="8", memory="32Gi") for i in range(40)]
    pods = [pod(f"web-{i}", cpu="3", memory="2Gi", owner={"kind": "ReplicaSet", "name": "web"}) for i in range(80)]
    out = solve(cluster(nodes, pods))
    assert out.result.metrics.placed == 80
    assert out.result.status == "optimal"


GANG = {"placer.io/gang": "train", "placer.io/gang-size": "4"}


def test_a_gang_that_fits_only_in_part_is_not_placed_at_all() -> None:
    pods = [pod(f"w{i}", cpu="2", labels=GANG) for i in range(4)] + [pod("solo", cpu="1")]
    out = solve(cluster([node("a", cpu="3"), node("b", cpu="3")], pods))
    assert where(out) == {"solo": "a"} or where(out) == {"solo": "b"}
    assert set(unplaced(out)) == {f"w{i}" for i in range(4)}
    assert "cannot be placed whole" in out.result.unplaced[0].reason


def test_a_gang_that_fits_whole_is_placed_whole() -> None:
    pods = [pod(f"w{i}", cpu="2", labels=GANG) for i in range(4)]
    out = solve(cluster([node("a", cpu="4"), node("b", cpu="4")], pods))
    assert len(where(out)) == 4


def test_a_gang_with_members_missing_waits() -> None:
    pods = [pod(f"w{i}", cpu="1", annotations=GANG) for i in range(3)]
    out = solve(cluster([node("a", cpu="8")], pods))
    assert where(out) == {}
    assert "waits for all of its 4 pods (3 pending)" in out.result.unplaced[0].reason


def test_a_higher_key_gang_displaces_lower_keys_only_as_a_whole() -> None:
    gang = [pod(f"g{i}", cpu="2", labels={"scheduling.x-k8s.io/pod-group": "pg"}, priority=10) for i in range(2)]
    jobs = [pod(f"j{i}", cpu="2") for i in range(2)]
    out = solve(cluster([node("a", cpu="4")], gang + jobs))
    assert sorted(where(out)) == ["g0", "g1"]


def test_a_gang_left_partly_bound_is_completed_not_stranded() -> None:
    """A controller killed between two binds of a gang of 3 left one member running: the next
    solve places the other two together (the running one counts toward the gang size)."""
    gang = {"labels": {"placer.io/gang": "train", "placer.io/gang-size": "3"}}
    pods = [pod("w0", cpu="1", node="a", **gang), pod("w1", cpu="1", **gang), pod("w2", cpu="1", **gang)]
    out = solve(cluster([node("a", cpu="2"), node("b", cpu="1")], pods))
    assert set(where(out)) == {"w1", "w2"}
    # Without the running member the two pending ones still wait for a third.
    waiting = solve(cluster([node("a", cpu="2"), node("b", cpu="1")], pods[1:]))
    assert where(waiting) == {}


# -- Outranked, precisely: room a node had before the batch, filled by higher or equal keys placed first --


@pytest.mark.parametrize("policy", ["placer", "default"])
@pytest.mark.parametrize(
    ("case", "nodes", "pods", "want"),
    [
        (
            "a higher key fills the only room",
            [node("a", cpu="2")],
            [pod("low", cpu="2", creationTimestamp="2026-01-01T00:00:00Z"), pod("high", cpu="2", priority=10)],
            {"low": "Outranked"},
        ),
        (
            "an equal key placed first fills it",
            [node("a", cpu="2")],
            [
                pod("first", cpu="2", creationTimestamp="2026-01-01T00:00:00Z"),
                pod("second", cpu="2", creationTimestamp="2026-01-01T00:00:01Z"),
            ],
            {"second": "Outranked"},
        ),
        (
            "no node had room before the batch",
            [node("a", cpu="2")],
            [pod("big", cpu="3")],
            {"big": "Unschedulable"},
        ),
        (
            "the only node with room is one its selector does not match",
            [node("a", cpu="2", labels={"zone": "x"}), node("b", cpu="2", labels={"zone": "y"})],
            [pod("first", cpu="2", nodeSelector={"zone": "x"}), pod("picky", cpu="1", nodeSelector={"zone": "z"})],
            {"picky": "Unschedulable"},
        ),
    ],
)
def test_outranked_means_the_room_it_had_went_to_higher_or_earlier_equal_keys(
    policy: str, case: str, nodes: list[dict[str, Any]], pods: list[dict[str, Any]], want: dict[str, str]
) -> None:
    out = solve(cluster(nodes, [{**p, "schedulerName": "placer"} for p in pods]), policy=policy)
    assert unplaced(out) == want, case


def test_a_deterministic_time_limit_stays_in_seconds_as_its_deterministic_equivalent() -> None:
    deterministic = Budget.of(Config.model_validate({"solver": {"timeLimit": 4, "deterministic": True}}))
    assert deterministic.deterministic and deterministic.limit == pytest.approx(4 * DETERMINISTIC_UNITS_PER_SECOND)
    wall = Budget.of(Config.model_validate({"solver": {"timeLimit": 4}}))
    assert not wall.deterministic and wall.limit == 4


def test_descent_reaches_nodes_outside_the_candidates_only_when_wide() -> None:
    """The candidates prune the model, not the answer: a wide descent moves a pod to any feasible
    node that lowers the strategy cost; the narrow one stays among the candidates."""
    c = cluster([node("busy", cpu="8"), node("idle", cpu="8")], [pod("a", cpu="2"), pod("b", cpu="2")])
    pending = [p for p in c.pods if p.pending]
    config = Config()
    snap = build_snapshot(c.nodes, [], pending, c.namespaces)
    batch = build_batch(snap, pending, config)
    demand = sum((g.vec * g.size for g in batch.groups), np.zeros(len(snap.resources), dtype=np.int64))
    scorer = Scorer(snap, config, demand)
    busy, idle = snap.index["busy"], snap.index["idle"]
    (group,) = batch.groups
    group.candidates = np.array([busy], dtype=np.int64)
    start = {(0, busy): 2}
    narrow, _, _ = descend(batch, scorer, start, seconds=5, seed=0)
    wide, moves, _ = descend(batch, scorer, start, seconds=5, seed=0, wide=True)
    assert narrow == start
    assert wide == {(0, busy): 1, (0, idle): 1} and moves == 1


def test_a_decision_holds_the_cyclic_collector_and_gives_it_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """A full collection walks every long-lived pod (0.14-0.29 s at 50,000 running pods): the
    collector is held while a decision runs, and enabled again after it."""
    c = cluster([node(f"n{i}") for i in range(4)], [pod(f"p{i}") for i in range(6)])
    pending = [p for p in c.pods if p.pending]
    snap = build_snapshot(c.nodes, [], pending, c.namespaces)
    held: list[bool] = []
    real = engine_solve.greedy_start

    def watched(*args: Any, **kwargs: Any) -> Any:
        held.append(not gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(engine_solve, "greedy_start", watched)
    assert gc.isenabled()
    result = solve_batch(snap, pending, Config())
    assert len(result.placements) == 6
    assert held and all(held)
    assert gc.isenabled()
