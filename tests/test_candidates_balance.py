"""Candidate nodes that let a batch spread (issue 29 item 4: the e2e backlog's end state).

Aspects: identical pods of several groups (gangs of one workload) keep as many candidates as they
are pods together, not each group alone the same few nodes (the batch stacked on them); a group
that required pod affinity holds to one zone keeps the best nodes of the zone it will take, and one
that hard zone spreading shares out over the zones the best nodes of each zone; among nodes the
balance cost ranks alike, the less loaded one; the class cost a pod meets is the node's as the
pass left it. Each case is checked on the greedy pass (every batch's start, and its answer when
the budget ends first, as at the e2e's 0.1 s floor) and on the whole solve: one pod per node where
the old rules stacked them, and no less even than kube-scheduler's one-pod-at-a-time answer.
Workloads held to one zone each (the e2e's affinity shape live): several new in one batch take
different zones, and a zone counts the pods of its workloads still to come (in the batch, or
waiting behind it), so a new workload does not join a zone they will fill, in the greedy pass and
in the controller's decision with kube-scheduler's answer at hand. Every answer goes through the
validator.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from support import cluster, node, pod, solve, where

from placer.engine import Scorer, batch_demand, build_batch, build_snapshot, greedy, select_candidates
from placer.models import Cluster, Config
from placer.service import SolveOptions, check_decision, decide, solve_cluster, state_metrics
from placer.validate import validate_placements

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
FEW: dict[str, Any] = {"solver": {"workers": 1, "deterministic": True, "timeLimit": 5, "seed": 0, "candidates": 1}}


def _interleaved(per_zone: int, cpu: str = "8", zones: str = "ab") -> list[dict[str, Any]]:
    """Nodes of the zones (a and b) in alternate order (a0, b0, a1, ...): the lowest indices,
    which break ties between equal nodes, lie in every zone."""
    return [
        node(f"{z}{i}", cpu=cpu, memory="32Gi", labels={ZONE: z, HOST: f"{z}{i}"})
        for i in range(per_zone)
        for z in zones
    ]


def _default_std(c: Cluster) -> float:
    """std_score of kube-scheduler's simulated answer (one pod at a time)."""
    return solve_cluster(c, SolveOptions(policy="default", config=Config.model_validate(FEW))).result.metrics.std_score


def _per_node(placements: dict[str, str]) -> Counter[str]:
    return Counter(placements.values())


def _greedy(c: Cluster, behind: frozenset[str] = frozenset()) -> tuple[dict[str, str], float]:
    """The greedy pass on the candidates (every batch's start, and its answer when the budget
    ends before the levels, as at the e2e's 0.1 s floor): pod name -> node, and the std_score.
    ``behind``: names of pending pods that wait behind the batch instead of joining it."""
    config = Config.model_validate(FEW)
    pending = [p for p in c.pods if p.pending and p.name not in behind]
    waiting = [p for p in c.pods if p.pending and p.name in behind]
    snap = build_snapshot(c.nodes, [p for p in c.pods if p.running], pending + waiting, c.namespaces)
    batch = build_batch(snap, pending, config)
    scorer = Scorer(snap, config, batch_demand(batch))
    select_candidates(batch, scorer, config.solver.candidates, waiting)
    placed: dict[str, str] = {}
    for group, nodes in zip(batch.groups, greedy(batch, scorer), strict=True):
        for p, n in zip(group.pods, nodes.tolist(), strict=True):
            if n >= 0:
                placed[p.key] = snap.nodes[n].name
                snap.add(p, n)
    alone = c.model_copy(update={"pods": tuple(p for p in c.pods if p.name not in behind)})  # the batch's view
    assert validate_placements(alone, placed) == []
    return {k.split("/", 1)[1]: n for k, n in placed.items()}, state_metrics(snap)[1]


def test_gangs_of_identical_pods_take_one_node_each_not_the_same_few() -> None:
    """Three gangs of four: each gang alone would keep 1 + 4 candidates, the same five empty
    nodes for all three, and twelve pods would share five nodes."""
    nodes = [node(f"n{i}", cpu="4", memory="16Gi") for i in range(12)]
    pods = [
        pod(f"g{g}-{i}", cpu="1", memory="4Gi", annotations={"placer.io/gang": f"g{g}", "placer.io/gang-size": "4"})
        for g in range(3)
        for i in range(4)
    ]
    c = cluster(nodes, pods)
    placed, std = _greedy(c)
    assert len(placed) == 12
    assert max(_per_node(placed).values()) == 1
    assert std <= _default_std(c) + 1e-6  # the result's measures are rounded to 6 places
    assert max(_per_node(where(solve(c, **FEW))).values()) == 1


def test_a_group_held_to_one_zone_by_affinity_spreads_over_that_zone() -> None:
    """Required zone affinity to its own group: the best nodes overall alternate between the
    zones, so the old candidates held only four nodes of the zone the group took, for six pods."""
    affinity = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": ZONE}
            ]
        }
    }
    pods = [pod(f"web-{i}", labels={"app": "web"}, affinity=affinity) for i in range(6)]
    c = cluster(_interleaved(6), pods)
    placed, std = _greedy(c)
    assert len(placed) == 6
    assert len({name[0] for name in placed.values()}) == 1  # one zone
    assert max(_per_node(placed).values()) == 1
    assert std <= _default_std(c) + 1e-6  # the result's measures are rounded to 6 places
    assert max(_per_node(where(solve(c, **FEW))).values()) == 1


def test_a_group_spread_over_zones_spreads_inside_each_zone_too() -> None:
    """Zone b's nodes are busier, so the best candidates overall are zone a's and one of zone b;
    hard spreading (maxSkew 1) sends half the group to zone b, which then met a single node."""
    nodes = _interleaved(4)
    running = [pod(f"busy-{i}", cpu="2", memory="8Gi", node=f"b{i}") for i in range(4)]
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": ZONE,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}},
        }
    ]
    pods = [pod(f"web-{i}", labels={"app": "web"}, topologySpreadConstraints=spread) for i in range(4)]
    c = cluster(nodes, running + pods)
    placed, std = _greedy(c)
    assert Counter(name[0] for name in placed.values()) == {"a": 2, "b": 2}
    assert max(_per_node(placed).values()) == 1
    assert std <= _default_std(c) + 1e-6  # the result's measures are rounded to 6 places
    assert max(_per_node(where(solve(c, **FEW))).values()) == 1


def _zone_affine(app: str, count: int, cpu: str = "1", memory: str = "1Gi") -> list[dict[str, Any]]:
    """``count`` pods of ``app`` that required pod affinity holds in one zone with each other."""
    term = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": ZONE}
    affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    return [pod(f"{app}-{i}", cpu=cpu, memory=memory, labels={"app": app}, affinity=affinity) for i in range(count)]


def _zone_of_app(placed: dict[str, str]) -> dict[str, set[str]]:
    """App -> the zones (first letter of the node's name) its pods took."""
    out: dict[str, set[str]] = {}
    for name, n in placed.items():
        out.setdefault(name.rsplit("-", 1)[0], set()).add(n[0])
    return out


def test_new_zone_affine_groups_of_one_batch_take_different_zones() -> None:
    """Three workloads held to one zone each by required affinity, all new in one batch (the
    e2e's controller cuts such batches: pods that arrive together are taken in name order,
    pa-0, pa-1, pa-10, pa-100, pa-1000, ...). Each was given the candidates of the zone least
    loaded before the batch, the same zone for all three, and twelve pods stacked on its four
    nodes while the other zones stayed empty."""
    pods = _zone_affine("x", 4) + _zone_affine("y", 4, cpu="2", memory="2Gi") + _zone_affine("z", 4, memory="2Gi")
    c = cluster(_interleaved(4, zones="abc"), pods)
    placed, std = _greedy(c)
    assert len(placed) == 12
    zones = _zone_of_app(placed)
    assert all(len(z) == 1 for z in zones.values())
    assert set().union(*zones.values()) == {"a", "b", "c"}  # one workload per zone
    assert max(_per_node(placed).values()) == 1
    assert std <= _default_std(c) + 1e-6  # the result's measures are rounded to 6 places
    solved = where(solve(c, **FEW))
    assert len(set().union(*_zone_of_app(solved).values())) == 3
    assert max(_per_node(solved).values()) == 1


def test_a_workload_joining_its_running_pods_counts_before_a_new_one_chooses() -> None:
    """Zone a is the less loaded before the batch, and the batch brings six more pods of x, which
    must join x's running pod there. A new workload y judged on the load before the batch took
    zone a as well; counting x's pods first, zone b is the less loaded one for y."""
    running = [*_zone_affine("x", 1)]
    running[0]["node"] = "a0"
    busy = [pod(f"busy-{i}", cpu="1", memory="2Gi", node=f"b{i}") for i in range(4)]
    pending = [{**p, "name": f"x-{i + 1}"} for i, p in enumerate(_zone_affine("x", 6))] + _zone_affine("y", 6)
    c = cluster(_interleaved(4), running + busy + pending)
    placed, std = _greedy(c)
    assert len(placed) == 12
    assert _zone_of_app(placed) == {"x": {"a"}, "y": {"b"}}
    assert std <= _default_std(c) + 1e-6  # the result's measures are rounded to 6 places
    assert _zone_of_app(where(solve(c, **FEW))) == {"x": {"a"}, "y": {"b"}}


def test_a_workload_still_waiting_counts_in_the_zone_its_running_pods_hold() -> None:
    """One pod of x runs in zone a, six more wait behind the batch (a short solve left them for
    later); zone b is the busier before the batch. A new workload y judged on the running pods
    alone took zone a, and the six x pods then joined it there; counting them, y takes zone b.
    Checked on the greedy pass (the answer at the e2e's 0.1 s floor) with the pods waiting
    behind the batch, as the controller passes them."""
    running = _zone_affine("x", 1)
    running[0]["node"] = "a0"
    busy = [pod(f"busy-{i}", cpu="1", memory="2Gi", node=f"b{i}") for i in range(4)]
    later = [{**p, "name": f"x-{i + 1}"} for i, p in enumerate(_zone_affine("x", 6))]
    c = cluster(_interleaved(4), running + busy + later + _zone_affine("y", 4))
    placed, _ = _greedy(c, behind=frozenset(p["name"] for p in later))
    assert sorted(placed) == [f"y-{i}" for i in range(4)]
    assert {n[0] for n in placed.values()} == {"b"}
    assert max(_per_node(placed).values()) == 1


def test_the_controllers_decision_keeps_a_new_workload_out_of_the_zone_waiting_pods_will_fill() -> None:
    """The case above decided as the controller decides a batch (``decide``, the pods waiting
    behind it passed, time for kube-scheduler's answer and the guard): kube-scheduler's answer
    puts y on the nodes least loaded now, in zone a, and was adopted; the guard's view of the
    backlog spread x's waiting pods over both zones. y stays in zone b, and the validator finds
    nothing wrong with the decision."""
    running = _zone_affine("x", 1)
    running[0]["node"] = "a0"
    busy = [pod(f"busy-{i}", cpu="1", memory="2Gi", node=f"b{i}") for i in range(4)]
    later = [{**p, "name": f"x-{i + 1}"} for i, p in enumerate(_zone_affine("x", 6))]
    c = cluster(_interleaved(4), running + busy + later + _zone_affine("y", 4))
    config = Config.model_validate(FEW)
    pending = [p for p in c.pods if p.pending]
    state = build_snapshot(c.nodes, [p for p in c.pods if p.running], pending, c.namespaces)
    batch = [p for p in pending if p.name.startswith("y-")]
    decision = decide(c, state, batch, config, waiting=[p for p in pending if p.name.startswith("x-")])
    assert check_decision(c, state, batch, decision, config) == []
    names = [n.name for n in state.nodes]
    assert sorted(p.name for p, _ in decision.placements) == [f"y-{i}" for i in range(4)]
    assert {names[n][0] for _, n in decision.placements} == {"b"}


def test_a_workload_held_to_one_host_takes_the_host_with_room_for_it() -> None:
    """Two pods that required affinity holds on one host (hostname: a domain per node): the
    least loaded node, n1, has room for one of them, n2 for both. The host chosen by load alone
    was n1, and kube-scheduler's answer (both on n2) was then declined as leaving it: the batch
    went to a plan the validator refused. Both go to n2."""
    term = {"labelSelector": {"matchLabels": {"app": "api"}}, "topologyKey": HOST}
    affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    nodes = [node(f"n{i}", cpu=cpu, memory="8Gi", labels={ZONE: "a", HOST: f"n{i}"}) for i, cpu in enumerate("1121")]
    running = [pod("r0", node="n0"), pod("r1", cpu="500m", node="n3")]
    pending = [pod(f"api-{i}", labels={"app": "api"}, affinity=affinity) for i in range(2)]
    c = cluster(nodes, running + pending)
    config = Config.model_validate(FEW)
    batch = [p for p in c.pods if p.pending]
    state = build_snapshot(c.nodes, [p for p in c.pods if p.running], batch, c.namespaces)
    decision = decide(c, state, batch, config)
    assert check_decision(c, state, batch, decision, config) == []
    assert decision.plan is None
    assert sorted(state.nodes[n].name for _, n in decision.placements) == ["n2", "n2"]
