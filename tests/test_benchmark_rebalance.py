"""Smoke tests of issue 15's rebalancing benchmark: LowNodeUtilization's semantics, the workload's
mix, moves applied by requests, and the report at a tiny size (structure, not timing)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import numpy.typing as npt

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `benchmarks/` is not an installed package
    sys.path.insert(0, str(ROOT))

from benchmarks import rebalance  # noqa: E402
from placer.models import Cluster, Config, Owner, Pod  # noqa: E402

GI = 2**30
ALLOC = np.array([[10_000.0, 10 * GI]] * 3)


def _pod(name: str, cpu: int, memory: int = GI, *, kind: str | None = "Job", priority: int = 0) -> Pod:
    owner = Owner(kind=kind, name=name) if kind else None
    return Pod(name=name, requests={"cpu": cpu, "memory": memory}, owner=owner, priority=priority, node_name="x")


def _used(pods_on: list[list[Pod]]) -> npt.NDArray[np.float64]:
    return np.array([[sum(p.requests[r] for p in pods) for r in ("cpu", "memory")] for pods in pods_on], dtype=float)


def _lnu(pods_on: list[list[Pod]], low: float = 20, high: float = 80) -> list[str]:
    present = np.ones(len(pods_on), dtype=np.bool_)
    return rebalance.lnu_evictions(ALLOC[: len(pods_on)], _used(pods_on), pods_on, present, low, high)


def test_lnu_evicts_lowest_priority_first_until_the_node_is_under_every_target() -> None:
    hot = [_pod("a", 3000, priority=5), _pod("b", 3000), _pod("c", 3000, priority=1)]  # 90 % cpu
    idle = [_pod("d", 500)]
    # One eviction (b, priority 0) takes the node to 60 % cpu: under 80 % in every resource, stop.
    assert _lnu([hot, idle, [_pod("e", 5000, 5 * GI)]]) == ["default/b"]


def test_lnu_overutilized_is_any_resource_underutilized_is_every_resource() -> None:
    memory_hot = [_pod("a", 1000, 5 * GI), _pod("b", 1000, 4 * GI)]  # 20 % cpu, 90 % memory
    cpu_low_only = [_pod("c", 500, 5 * GI)]  # 5 % cpu but 50 % memory: not underutilized
    assert _lnu([memory_hot, cpu_low_only]) == []  # no underutilized node: LNU does nothing
    assert _lnu([memory_hot, [_pod("d", 500, GI)]]) == ["default/a"]


def test_lnu_stops_when_the_underutilized_nodes_room_under_the_targets_is_used_up() -> None:
    hot = [[_pod(f"{n}{i}", 950, GI // 4) for i in range(10)] for n in "pq"]  # two nodes at 95 % cpu
    idle = [_pod("s", 1500, GI // 4)]  # 15 %: 3500m of room under a 50 % target
    # p loses pods while room is left before each eviction (3500, 2550, 1600, 650 -> -300), still
    # above 50 % when the room runs out; q keeps all of its pods.
    assert _lnu([*hot, idle], high=50) == [f"default/p{i}" for i in range(4)]
    assert _lnu([*hot, idle]) == ["default/p0", "default/p1", "default/q0", "default/q1"]  # 80 %: targets first


def test_lnu_never_evicts_daemonset_bare_or_critical_pods_nor_takes_absent_nodes() -> None:
    hot = [
        _pod("ds", 4000, kind="DaemonSet"),
        _pod("bare", 4000, kind=None),
        _pod("crit", 1000, kind="ReplicaSet", priority=rebalance.CRITICAL),
    ]
    assert _lnu([hot, [_pod("d", 100)]]) == []
    movable = [*hot, _pod("rs", 500, kind="ReplicaSet")]
    assert _lnu([movable, [_pod("d", 100)]]) == ["default/rs"]
    present = np.array([True, False])
    pods_on = [movable, [_pod("d", 100)]]
    assert rebalance.lnu_evictions(ALLOC[:2], _used(pods_on), pods_on, present, 20, 80) == []


def test_workload_is_seeded_and_has_every_tier() -> None:
    a = rebalance.workload(20, 12, 60.0, seed=3)
    assert rebalance.workload(20, 12, 60.0, seed=3).arrivals == a.arrivals
    assert rebalance.workload(20, 12, 60.0, seed=4).arrivals != a.arrivals
    pods = [s.pod for specs in a.arrivals for s in specs]
    assert {p.restart_policy for p in pods} == {"Never", "OnFailure"}
    assert all(p.owner is not None and p.owner.kind == "Job" and p.scheduler_name == "placer" for p in pods)
    jobs = {j.name: j for j in a.jobs}
    assert {jobs[p.owner.name].opted_in for p in pods if p.owner} == {True, False}
    assert a.deployments and all(max(d.replicas) > 0 for d in a.deployments)
    assert sorted(n for names in a.joins for n in names) == sorted(n.name for n in a.nodes)
    assert 0 < len(a.joins[0]) < len(a.nodes)  # some nodes join later, empty


def test_placer_moves_are_applied_only_where_they_fit_and_restart_the_job() -> None:
    stream = rebalance.workload(8, 6, 60.0, seed=1, load=3.0)
    sim = rebalance.Sim(stream, "placer")
    for k in range(len(stream.arrivals)):
        sim.churn(k)
        sim.place_pending((k + 1) * 60.0)
    running = [live for live in sim.pods.values() if live.duration is not None and live.pod.node_name]
    assert running, "the stream places some Job pods"
    live = running[0]
    source = live.pod.node_name
    assert source is not None
    cluster = sim.cluster(240.0)
    others = [n.name for n in cluster.nodes if n.name != source]
    target = next(n for n in others if sim.fits(live.pod, n))
    too_small = live.pod.model_copy(update={"requests": {"cpu": 10**9, "memory": 1}})
    assert not sim.fits(too_small, target)
    refused = sim.apply_moves([(live.pod.key, source, target), (live.pod.key, source, others[0])], 300.0)
    assert refused == 1  # the second names a source the pod has left
    moved = sim.pods[live.pod.key]
    assert moved.pod.node_name == target and moved.pod.moved_at == rebalance.EPOCH + 300.0
    assert moved.ends == 300.0 + (moved.duration or 0)
    assert len(sim.moves) == 1 and sim.moves[0].restarted > 0


def _no_moves(cluster: Cluster, config: Config, now: float, usage: object) -> list[tuple[str, str, str]]:
    assert config.rebalance.thresholds.high == 80 and now > rebalance.EPOCH and usage is None
    job_pods = [p for p in cluster.pods if p.owner and p.owner.kind == "Job"]
    assert {p.scheduler_name for p in job_pods} <= {"placer"}
    assert {p.owner.name for p in job_pods if p.owner} == {j.name for j in cluster.jobs}  # the Jobs go along
    return []


def test_run_keeps_the_arms_apart_on_one_stream() -> None:
    stream = rebalance.workload(16, 14, 60.0, seed=2, load=1.5)
    results = {r.arm: r for r in rebalance.run(stream, 20, 80, 1.0, rebalancer=_no_moves)}
    assert set(results) == set(rebalance.ARMS)
    none, placer = results["none"], results["placer"]
    assert [s.std_score for s in none.samples] == [s.std_score for s in placer.samples]  # no moves: same path
    assert none.moves == placer.moves == 0 and len(none.samples) == 14
    lnu = results["lnu"]  # new nodes join empty while others run hot: LNU evicts, and it shows
    assert lnu.moves > 0 and lnu.averages["hot"] < none.averages["hot"]
    assert lnu.moves >= lnu.landed_back and lnu.moves >= lnu.landed_hot


def test_rebalance_benchmark_writes_the_report(tmp_path: Path) -> None:
    argv = ["--nodes", "10", "--periods", "6", "--time-limit", "0.5", "--out", str(tmp_path)]
    assert rebalance.main(argv) == 0
    text = (tmp_path / "rebalance.md").read_text(encoding="utf-8")
    for label in rebalance.LABELS.values():
        assert f"| {label} |" in text
    assert "Targets (issue 15):" in text and text.count(" — met") + text.count(" — missed") == 3
    arms = json.loads((tmp_path / "rebalance.json").read_text(encoding="utf-8"))["arms"]
    assert [a["arm"] for a in arms] == list(rebalance.ARMS) and all(len(a["samples"]) == 6 for a in arms)
    assert (tmp_path / "rebalance.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_usage_follows_the_profiles_and_adds_up_per_node() -> None:
    stream = rebalance.workload(8, 6, 60.0, seed=1, load=3.0)
    assert set(stream.profiles) >= {d.name for d in stream.deployments} | {j.name for j in stream.jobs}
    sim = rebalance.Sim(stream, "none")
    for k in range(len(stream.arrivals)):
        sim.churn(k)
        sim.place_pending((k + 1) * 60.0)
    pods = sim.pod_usage(360.0)
    assert pods and all(cpu > 0 and memory > 0 for cpu, memory in pods.values())
    by_node = sim.usage_by_node(360.0)
    total = np.array([sum(u[0] for u in pods.values()), sum(u[1] for u in pods.values())], dtype=float)
    assert np.allclose(by_node.sum(axis=0), total)
    job = next(j for j in stream.jobs if any(f"/{j.name}-" in key for key in pods))  # a running Job
    profile = stream.profiles[job.name]
    assert 0.5 * 0.9 <= profile.at(0.0)[0] <= 1.3 * 1.1 and 0.6 <= profile.at(0.0)[1] <= 1.0
