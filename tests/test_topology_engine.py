"""The engine on inter-pod affinity, anti-affinity and topology spread (docs/topology.md).

Each case is transcribed from kube-scheduler's semantics; every answer also goes through the
independent validator (tests/support.py).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from support import cluster, node, pod, solve, unplaced, where

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def _zoned(per_zone: int = 2, zones: str = "abc", cpu: str = "4") -> list[dict[str, Any]]:
    return [node(f"{z}{i}", cpu=cpu, labels={ZONE: z, HOST: f"{z}{i}"}) for z in zones for i in range(per_zone)]


def _term(app: str, key: str, **extra: Any) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key, **extra}


def _anti(app: str, key: str, **extra: Any) -> dict[str, Any]:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term(app, key, **extra)]}}


def _affinity(app: str, key: str, **extra: Any) -> dict[str, Any]:
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term(app, key, **extra)]}}


def _spread(app: str, key: str = ZONE, skew: int = 1, **extra: Any) -> list[dict[str, Any]]:
    return [
        {
            "maxSkew": skew,
            "topologyKey": key,
            "whenUnsatisfiable": extra.pop("when", "DoNotSchedule"),
            "labelSelector": {"matchLabels": {"app": app}},
            **extra,
        }
    ]


def _zone_of(node_name: str) -> str:
    return node_name[0]


def test_three_replicas_with_zone_anti_affinity_land_one_per_zone_and_a_fourth_waits() -> None:
    pods = [pod(f"web-{i}", labels={"app": "web"}, affinity=_anti("web", ZONE)) for i in range(4)]
    out = solve(cluster(_zoned(), pods))
    zones = Counter(_zone_of(n) for n in where(out).values())
    assert zones == {"a": 1, "b": 1, "c": 1}
    assert list(unplaced(out).values()) == ["Unschedulable"]
    assert "didn't match pod anti-affinity rules" in out.result.unplaced[0].reason


def test_hostname_anti_affinity_puts_at_most_one_replica_per_node() -> None:
    pods = [pod(f"web-{i}", labels={"app": "web"}, affinity=_anti("web", HOST)) for i in range(8)]
    out = solve(cluster(_zoned(), pods))
    assert len(where(out)) == 6
    assert len(set(where(out).values())) == 6


def test_a_running_pods_anti_affinity_repels_incoming_pods_it_matches() -> None:
    nodes = _zoned(per_zone=1)
    guard = pod("guard", node="a0", labels={"app": "guard"}, affinity=_anti("web", ZONE))
    pods = [guard] + [pod(f"web-{i}", labels={"app": "web"}) for i in range(4)]
    out = solve(cluster(nodes, pods))
    assert len(where(out)) == 4
    assert "a0" not in where(out).values()


def test_incoming_anti_affinity_avoids_domains_of_running_matches() -> None:
    nodes = _zoned(per_zone=1)
    pods = [pod("db", node="b0", labels={"app": "db"})]
    pods += [pod(f"web-{i}", labels={"app": "web"}, affinity=_anti("db", ZONE)) for i in range(3)]
    out = solve(cluster(nodes, pods))
    assert set(where(out).values()) <= {"a0", "c0"}
    assert len(where(out)) == 3


def test_required_affinity_to_a_running_pod_follows_it() -> None:
    pods = [pod("db", node="b1", labels={"app": "db"})]
    pods += [pod(f"web-{i}", labels={"app": "web"}, affinity=_affinity("db", ZONE)) for i in range(3)]
    out = solve(cluster(_zoned(), pods))
    assert {_zone_of(n) for n in where(out).values()} == {"b"}
    assert len(where(out)) == 3


def test_affinity_satisfied_by_another_pod_of_the_same_batch() -> None:
    pods = [pod("cache", labels={"app": "cache"}, nodeSelector={ZONE: "c"})]
    pods += [pod(f"web-{i}", labels={"app": "web"}, affinity=_affinity("cache", ZONE)) for i in range(3)]
    out = solve(cluster(_zoned(), pods))
    assert len(where(out)) == 4
    assert {_zone_of(n) for n in where(out).values()} == {"c"}


def test_affinity_with_no_possible_provider_waits_with_the_affinity_reason() -> None:
    pods = [pod("web", labels={"app": "web"}, affinity=_affinity("db", ZONE))]
    out = solve(cluster(_zoned(), pods))
    assert unplaced(out) == {"web": "Unschedulable"}
    assert out.result.unplaced[0].reason == "0/6 nodes are available: 6 node(s) didn't match pod affinity rules."


def test_self_affine_group_seeds_one_domain_and_follows_it() -> None:
    pods = [pod(f"w-{i}", labels={"app": "w"}, affinity=_affinity("w", ZONE)) for i in range(5)]
    out = solve(cluster(_zoned(cpu="3"), pods))
    assert len(where(out)) == 5
    assert len({_zone_of(n) for n in where(out).values()}) == 1


def test_self_affine_group_must_join_a_running_match_when_one_exists() -> None:
    pods = [pod("old", node="c0", labels={"app": "w"})]
    pods += [pod(f"w-{i}", labels={"app": "w"}, affinity=_affinity("w", ZONE)) for i in range(3)]
    out = solve(cluster(_zoned(), pods))
    assert {_zone_of(n) for n in where(out).values()} == {"c"}


def test_zone_spread_max_skew_one_balances_replicas() -> None:
    pods = [pod(f"s-{i}", labels={"app": "s"}, topologySpreadConstraints=_spread("s")) for i in range(6)]
    out = solve(cluster(_zoned(), pods))
    assert Counter(_zone_of(n) for n in where(out).values()) == {"a": 2, "b": 2, "c": 2}


def test_zone_spread_fills_the_empty_zones_first_when_one_zone_is_ahead() -> None:
    running = [pod(f"old-{i}", node="a0", cpu="0.1", labels={"app": "s"}) for i in range(3)]
    pods = [pod(f"s-{i}", labels={"app": "s"}, topologySpreadConstraints=_spread("s")) for i in range(4)]
    out = solve(cluster(_zoned(), running + pods))
    assert Counter(_zone_of(n) for n in where(out).values()) == {"b": 2, "c": 2}


def test_spread_counts_only_pods_of_its_own_namespace() -> None:
    running = [pod(f"other-{i}", namespace="other", node="a0", cpu="0.1", labels={"app": "s"}) for i in range(3)]
    pods = [pod(f"s-{i}", labels={"app": "s"}, topologySpreadConstraints=_spread("s")) for i in range(3)]
    out = solve(cluster(_zoned(), running + pods))
    assert Counter(_zone_of(n) for n in where(out).values()) == {"a": 1, "b": 1, "c": 1}


def test_min_domains_above_the_domain_count_treats_the_minimum_as_zero() -> None:
    pods = [pod(f"s-{i}", labels={"app": "s"}, topologySpreadConstraints=_spread("s", minDomains=3)) for i in range(4)]
    out = solve(cluster(_zoned(zones="ab"), pods))
    assert Counter(_zone_of(n) for n in where(out).values()) == {"a": 1, "b": 1}
    assert set(unplaced(out).values()) == {"Unschedulable"}
    assert "didn't match pod topology spread constraints" in out.result.unplaced[0].reason


def test_node_affinity_policy_honor_ignores_domains_the_pod_cannot_use() -> None:
    # Zone c holds matches but the pods' nodeSelector excludes it: under Honor it is not a domain.
    nodes = [node(f"{z}0", labels={ZONE: z, HOST: f"{z}0", "pool": "x" if z != "c" else "y"}) for z in "abc"]
    running = [pod(f"old-{i}", node="c0", cpu="0.1", labels={"app": "s"}) for i in range(3)]
    pods = [
        pod(f"s-{i}", labels={"app": "s"}, nodeSelector={"pool": "x"}, topologySpreadConstraints=_spread("s"))
        for i in range(4)
    ]
    out = solve(cluster(nodes, running + pods))
    assert Counter(where(out).values()) == {"a0": 2, "b0": 2}


def test_node_affinity_policy_ignore_counts_every_domain() -> None:
    nodes = [node(f"{z}0", labels={ZONE: z, HOST: f"{z}0", "pool": "x" if z != "c" else "y"}) for z in "abc"]
    running = [pod(f"old-{i}", node="c0", cpu="0.1", labels={"app": "s"}) for i in range(1)]
    spread = _spread("s", nodeAffinityPolicy="Ignore")
    pods = [
        pod(f"s-{i}", labels={"app": "s"}, nodeSelector={"pool": "x"}, topologySpreadConstraints=spread)
        for i in range(4)
    ]
    out = solve(cluster(nodes, running + pods))
    # c has 1 and can take none of these pods: a and b may each reach at most 1 + 1 = 2.
    assert Counter(where(out).values()) == {"a0": 2, "b0": 2}


def test_schedule_anyway_spreads_when_it_can() -> None:
    spread = _spread("s", when="ScheduleAnyway")
    pods = [pod(f"s-{i}", labels={"app": "s"}, topologySpreadConstraints=spread) for i in range(6)]
    out = solve(cluster(_zoned(), pods), strategy="pack")
    assert Counter(_zone_of(n) for n in where(out).values()) == {"a": 2, "b": 2, "c": 2}


def test_anti_affinity_across_namespaces_by_namespace_selector() -> None:
    nodes = _zoned(per_zone=1)
    running = [pod("db", namespace="prod", node="a0", labels={"app": "db"})]
    anti = _anti("db", ZONE, namespaceSelector={"matchLabels": {"env": "prod"}})
    pods = [pod(f"web-{i}", labels={"app": "web"}, affinity=anti) for i in range(2)]
    out = solve(cluster(nodes, running + pods, namespaces={"prod": {"env": "prod"}}))
    assert "a0" not in where(out).values()
    # Without the namespace's labels the selector does not select it.
    out = solve(cluster(nodes, running + pods))
    assert len(where(out)) == 2


def _rs_pods(n: int) -> list[dict[str, Any]]:
    owner = {"kind": "ReplicaSet", "name": "web"}
    return [pod(f"web-{i}", labels={"app": "web"}, owner=owner) for i in range(n)]


def test_system_default_spreading_spreads_replicaset_pods_over_zones_when_configured() -> None:
    nodes = _zoned(per_zone=1, cpu="8")
    rs = [{"name": "web", "selector": {"matchLabels": {"app": "web"}}}]
    c = cluster(nodes, _rs_pods(6), replicaSets=rs)
    packed = solve(c, strategy="pack")
    assert len(set(where(packed).values())) == 1  # pack alone fills one node
    spread = solve(c, strategy="pack", defaultSpread={"defaultingType": "System"})
    per_node = Counter(where(spread).values())
    # hostname maxSkew 3 against empty nodes: at most 3 per node, so at least two nodes.
    assert max(per_node.values()) <= 3 and len(per_node) >= 2


def test_default_spreading_needs_a_replicaset_that_selects_the_pod() -> None:
    nodes = _zoned(per_zone=1, cpu="8")
    c = cluster(nodes, _rs_pods(6))
    out = solve(c, strategy="pack", defaultSpread={"defaultingType": "System"})
    assert len(set(where(out).values())) == 1


def _preferred_anti(app: str, key: str, weight: int = 100) -> dict[str, Any]:
    term = {"weight": weight, "podAffinityTerm": _term(app, key)}
    return {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [term]}}


def test_preferred_anti_affinity_spreads_batch_replicas_over_nodes_when_there_is_room() -> None:
    pods = [pod(f"w-{i}", labels={"app": "w"}, affinity=_preferred_anti("w", HOST)) for i in range(6)]
    out = solve(cluster(_zoned(), pods), strategy="pack")
    assert len(set(where(out).values())) == 6


def test_preferred_anti_affinity_gives_way_when_replicas_outnumber_nodes() -> None:
    pods = [pod(f"w-{i}", labels={"app": "w"}, affinity=_preferred_anti("w", HOST)) for i in range(9)]
    out = solve(cluster(_zoned(), pods), strategy="pack")
    assert len(where(out)) == 9
    assert max(Counter(where(out).values()).values()) == 2


def test_preferred_anti_affinity_avoids_nodes_of_running_matches() -> None:
    nodes = _zoned(per_zone=1)
    running = [pod("db", node="a0", labels={"app": "db"})]
    pods = [pod("web", labels={"app": "web"}, affinity=_preferred_anti("db", ZONE))]
    out = solve(cluster(nodes, running + pods), strategy="pack")
    assert where(out)["web"] != "a0"


def test_a_running_pods_preferred_anti_affinity_steers_incoming_pods_it_matches_away() -> None:
    nodes = _zoned(per_zone=1)
    shy = pod("shy", node="a0", labels={"app": "shy"}, affinity=_preferred_anti("web", ZONE))
    pods = [shy, pod("web", labels={"app": "web"})]
    out = solve(cluster(nodes, pods), strategy="pack")
    assert where(out)["web"] != "a0"  # pack alone would join the only busy node


def test_a_running_pods_preferred_affinity_draws_incoming_pods_it_matches() -> None:
    nodes = _zoned(per_zone=1)
    term = {"weight": 50, "podAffinityTerm": _term("web", HOST)}
    host = pod(
        "host",
        node="c0",
        labels={"app": "host"},
        affinity={"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [term]}},
    )
    pods = [host, pod("web", labels={"app": "web"})]
    out = solve(cluster(nodes, pods), strategy="spread")
    assert where(out)["web"] == "c0"  # spread alone would pick an empty node
