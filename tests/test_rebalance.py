"""Dynamic rebalancing (issue 15): loads, the thesis's queues, what moves, planned landing nodes.

Every plan goes through ``placer.validate.validate_rebalance`` (its own implementation of the
rules: sources above high, landings below low that stay at most at high, tiers, opt-in, budgets,
then the global plan's rules for moves), which shares no code with ``placer.rebalance``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support import cluster, node, pod
from typer.testing import CliRunner

from placer.cli.app import app
from placer.errors import InputError
from placer.inputs import parse_cluster
from placer.inputs.fields import Field
from placer.inputs.usage import read_usage
from placer.models import Cluster, Config, PodUsage, RebalanceLimits, Usage
from placer.rebalance import RebalanceOptions, job_backoff, rebalance_cluster
from placer.validate import validate_rebalance

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "rebalance.json"
IGNORE_DISRUPTION = {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}
NOW = 1_800_000_000.0


def _config(**rebalance: Any) -> Config:
    return Config.model_validate(
        {"solver": {"workers": 1, "deterministic": True, "timeLimit": 5}, "rebalance": rebalance}
    )


def _rebalance(c: Cluster, config: Config | None = None, usage: Usage | None = None) -> Any:
    config = config or _config()
    out = rebalance_cluster(c, RebalanceOptions(config=config, usage=usage, now=NOW))
    if config.rebalance.load == "requests":
        problems = validate_rebalance(c, out.result, config.rebalance, now=NOW)
        assert problems == [], problems
    return out


def _job_pod(name: str, node_name: str, job: str = "etl", restart: str = "Never", **extra: Any) -> dict[str, Any]:
    return pod(
        name,
        cpu=extra.pop("cpu", "2"),
        node=node_name,
        restartPolicy=restart,
        owner={"kind": "Job", "name": job},
        **extra,
    )


def _web(name: str, node_name: str, cpu: str = "2") -> dict[str, Any]:
    return pod(name, cpu=cpu, node=node_name, owner={"kind": "ReplicaSet", "name": "web"})


def _hot_and_cold(*pods_on_hot: dict[str, Any], **extra: Any) -> Cluster:
    """Node hot (8 cpu) runs the given pods; node cold (8 cpu) runs nothing."""
    extra.setdefault("jobs", [{"name": "etl", "podFailurePolicy": IGNORE_DISRUPTION}])
    extra.setdefault("replicaSets", [{"name": "web", "readyReplicas": 3}])
    return cluster(
        [node("hot", cpu="8", memory="32Gi"), node("cold", cpu="8", memory="32Gi")], list(pods_on_hot), **extra
    )


def test_the_example_moves_opted_in_job_pods_to_planned_taking_nodes() -> None:
    c = parse_cluster(str(EXAMPLE), EXAMPLE.read_text())
    out = _rebalance(c)
    report = out.report
    assert report.kept and out.moves
    assert report.after.spread <= report.before.spread * (1 - _config().rebalance.margin)
    pods = {p.key: p for p in c.pods}
    takers = {r.node for r in report.nodes if r.role == "takes"}
    for move in out.moves:
        moved = pods[move.pod]
        assert moved.owner is not None and moved.owner.kind == "Job" and moved.restart_policy != "Always"
        assert move.target in takers
    assert report.skipped["analytics/debug-shell"].startswith("a bare pod")
    assert all(not k.startswith("web/") for k in (m.pod for m in out.moves))


def test_never_tier_goes_first_largest_memory_first() -> None:
    c = _hot_and_cold(
        _job_pod("small", "hot", memory="1Gi"),
        _job_pod("big", "hot", memory="8Gi"),
        _job_pod("onfailure", "hot", job="train", restart="OnFailure", memory="16Gi"),
        _web("web-0", "hot"),
        jobs=[
            {"name": "etl", "podFailurePolicy": IGNORE_DISRUPTION},
            {"name": "train", "podFailurePolicy": IGNORE_DISRUPTION},
        ],
    )
    out = _rebalance(c, _config(limits={"perNode": 1}))
    assert [m.pod for m in out.moves] == ["default/big"]


def test_a_hot_node_offers_more_pods_than_it_gives_and_gives_the_fewest_that_cool_it() -> None:
    # 7.5 of 8 cpu: 1.1 cpu above 80 %. The thesis's order offers big-memory first, but that pod
    # (1 cpu) alone does not cool the node; either 3-cpu pod does, so exactly one of them moves.
    c = _hot_and_cold(
        _job_pod("memory", "hot", cpu="1", memory="6Gi"),
        _job_pod("cpu-a", "hot", cpu="3", memory="1Gi"),
        _job_pod("cpu-b", "hot", cpu="3", memory="1Gi"),
        _job_pod("tiny", "hot", cpu="0.5", memory="512Mi"),
    )
    out = _rebalance(c)
    assert [m.pod for m in out.moves] in (["default/cpu-a"], ["default/cpu-b"])
    hot = next(r for r in out.report.nodes if r.node == "hot")
    assert hot.after["cpu"] <= 0.8


def test_the_plan_and_namespace_limits_scale_with_the_cluster() -> None:
    limits = RebalanceLimits()
    assert (limits.moves(4), limits.in_namespace(4)) == (5, 3)  # small clusters: the counts
    assert (limits.moves(200), limits.in_namespace(200)) == (90, 45)  # 45 % of nodes, 50 % of that
    fixed = RebalanceLimits.model_validate({"perPeriodPercent": 0, "perNamespacePercent": 0})
    assert (fixed.moves(200), fixed.in_namespace(200)) == (5, 3)


def test_always_tier_stays_unless_allowed_and_then_only_with_two_ready_replicas() -> None:
    def c(ready: int) -> Cluster:
        return _hot_and_cold(
            *(_web(f"web-{i}", "hot") for i in range(4)), replicaSets=[{"name": "web", "readyReplicas": ready}]
        )

    assert not _rebalance(c(4)).moves
    assert _rebalance(c(4)).report.skipped["default/web-0"].startswith("restart policy Always")
    assert _rebalance(c(4), _config(moveAlwaysTier=True)).moves
    assert not _rebalance(c(1), _config(moveAlwaysTier=True)).moves


def test_jobs_that_do_not_opt_in_bare_pods_and_cooled_down_pods_stay() -> None:
    stamp = {"placer.io/moved-at": "2027-01-15T08:00:00Z"}  # 1_800_000_000 is 2027-01-15T08:00:00Z
    c = _hot_and_cold(
        _job_pod("theirs", "hot", job="report"),
        pod("bare", cpu="2", node="hot", restartPolicy="Never"),
        _job_pod("recent", "hot", annotations=stamp),
        _job_pod("other", "hot", cpu="1"),
        jobs=[{"name": "etl", "podFailurePolicy": IGNORE_DISRUPTION}, {"name": "report"}],
    )
    out = _rebalance(c)
    assert [m.pod for m in out.moves] == ["default/other"]
    skipped = out.report.skipped
    assert "does not opt in" in skipped["default/theirs"]
    assert "bare pod" in skipped["default/bare"]
    assert "moved less than" in skipped["default/recent"]


def test_a_pdb_with_no_disruption_allowed_blocks_its_pods() -> None:
    pods = [_job_pod(f"etl-{i}", "hot", labels={"app": "etl"}) for i in range(4)]
    blocked = _hot_and_cold(
        *pods, pdbs=[{"name": "etl", "selector": {"matchLabels": {"app": "etl"}}, "disruptionsAllowed": 0}]
    )
    assert not _rebalance(blocked).moves
    allowed = _hot_and_cold(
        *pods, pdbs=[{"name": "etl", "selector": {"matchLabels": {"app": "etl"}}, "disruptionsAllowed": 1}]
    )
    assert len(_rebalance(allowed).moves) == 1


def test_takers_are_the_cold_nodes_else_those_lighter_than_the_cluster_and_none_ends_above_high() -> None:
    def two(other_cpu: str) -> Cluster:
        return cluster(
            [node("hot", cpu="8"), node("other", cpu="8"), node("cold", cpu="8")],
            [*(_job_pod(f"etl-{i}", "hot") for i in range(4)), _web("web-0", "other", cpu=other_cpu)],
            jobs=[{"name": "etl", "podFailurePolicy": IGNORE_DISRUPTION}],
            replicaSets=[{"name": "web"}],
        )

    # A node below 20 % exists: only it takes.
    assert {m.target for m in _rebalance(two("3")).moves} == {"cold"}
    # None is that cold: nodes lighter than the cluster take (other at 37.5 % of a 69 % cluster).
    warm = cluster(
        [node("hot", cpu="8"), node("warm", cpu="8")],
        [*(_job_pod(f"etl-{i}", "hot") for i in range(4)), _web("web-0", "warm", cpu="3")],
        jobs=[{"name": "etl", "podFailurePolicy": IGNORE_DISRUPTION}],
        replicaSets=[{"name": "web"}],
    )
    assert [m.target for m in _rebalance(warm).moves] == ["warm"]
    # Both nodes hot: nobody takes.
    both = cluster(
        [node("hot", cpu="8"), node("busy", cpu="8")],
        [*(_job_pod(f"etl-{i}", "hot") for i in range(4)), _web("web-0", "busy", cpu="6.8")],
        jobs=[{"name": "etl", "podFailurePolicy": IGNORE_DISRUPTION}],
        replicaSets=[{"name": "web"}],
    )
    out = _rebalance(both)
    assert not out.moves and "no node is lighter" in out.report.why
    # A taking node of 4 cpu with 0.5 used: a 3-cpu pod would put it at 87.5 %, above 80 %.
    small = cluster(
        [node("hot", cpu="8"), node("small", cpu="4")],
        [
            _job_pod("big-0", "hot", cpu="3"),
            _job_pod("big-1", "hot", cpu="3"),
            _job_pod("big-2", "hot", cpu="1.5"),
            _web("w", "small", cpu="0.5"),
        ],
        jobs=[{"name": "etl", "podFailurePolicy": IGNORE_DISRUPTION}],
        replicaSets=[{"name": "web"}],
    )
    assert [m.pod for m in _rebalance(small).moves] in ([], ["default/big-2"])


def test_the_margin_keeps_plans_that_do_not_pay() -> None:
    c = _hot_and_cold(*(_job_pod(f"etl-{i}", "hot") for i in range(4)))
    assert _rebalance(c).moves
    out = _rebalance(c, _config(margin=0.99))
    assert not out.moves and "less than the margin" in out.report.why


def _usage(key: str, cpu_milli: int, at: float) -> PodUsage:
    namespace, name = key.split("/")
    return PodUsage(
        namespace=namespace, name=name, timestamp=at, window=30, usage={"cpu": cpu_milli, "memory": 1 << 30}
    )


def test_usage_decides_load_smoothed_and_stale_samples_fall_back_to_requests() -> None:
    """By requests both nodes are at 50 %; by usage node a is hot. A single spike in the window
    does not make a node hot; a stale sample falls back to the request, never to zero."""
    pods = [_job_pod(f"a-{i}", "a", cpu="1") for i in range(4)] + [_job_pod(f"b-{i}", "b", cpu="1") for i in range(4)]
    nodes = [node("a", cpu="8", memory="32Gi"), node("b", cpu="8", memory="32Gi"), node("c", cpu="8", memory="32Gi")]
    c = cluster(nodes, pods, jobs=[{"name": "etl", "podFailurePolicy": IGNORE_DISRUPTION}])
    config = _config(load="usage", weights={"cpu": 1})
    assert not _rebalance(c).moves  # by requests nobody is above 80 %
    hot = Usage(samples=tuple(_usage(f"default/a-{i}", 1900, NOW - 10) for i in range(4)))
    out = _rebalance(c, config, hot)
    assert out.moves and all(m.source == "a" and m.target == "c" for m in out.moves)
    spike = Usage(
        samples=tuple(
            s
            for i in range(4)
            for s in (
                _usage(f"default/a-{i}", 1900, NOW - 10),
                *(_usage(f"default/a-{i}", 500, NOW - t) for t in (40, 70, 100)),
            )
        )
    )
    assert not _rebalance(c, config, spike).moves  # mean 850m per pod: 42 %
    stale = Usage(samples=tuple(_usage(f"default/a-{i}", 1900, NOW - 1000) for i in range(4)))
    out = _rebalance(c, config, stale)
    assert not out.moves and len(out.report.fallbacks) == 8
    assert any("counted by their requests" in w for w in out.warnings)


def test_with_usage_a_landing_node_stays_at_most_at_high_by_requests_too() -> None:
    """Node a is hot by usage (and holds 7.5 of its 8 cpu in requests); node full is idle by
    usage, so it takes, but holds 6.3 cpu in requests: a 0.5-cpu replacement would put it at 85 %
    (a better balance by requests, still above 80 %), so nothing moves."""
    pods = [_job_pod(f"a-{i}", "a", cpu="0.5") for i in range(15)] + [_job_pod("big", "full", cpu="6.3")]
    c = cluster(
        [node("a", cpu="8", memory="32Gi"), node("full", cpu="8", memory="32Gi")],
        pods,
        jobs=[{"name": "etl", "podFailurePolicy": IGNORE_DISRUPTION}],
    )
    samples = [_usage(f"default/a-{i}", 1000, NOW - 10) for i in range(15)] + [_usage("default/big", 100, NOW - 10)]
    out = _rebalance(c, _config(load="usage", weights={"cpu": 1}), Usage(samples=tuple(samples)))
    assert not out.moves and "above the high threshold" in out.report.why


def test_a_jobs_replacement_waits_out_its_backoff_unless_disruptions_are_ignored() -> None:
    c = _hot_and_cold(
        *(_job_pod(f"train-{i}", "hot", job="train") for i in range(4)),
        jobs=[{"name": "train", "failed": 2, "annotations": {"placer.io/rebalance": "restarts-work"}}],
    )
    assert job_backoff(c, "default/train-0") == 40.0
    assert job_backoff(c, "default/train-0", evicted=3) == 160.0  # every eviction is a failure
    out = _rebalance(c)
    (move,) = out.moves
    bind = next(s for s in out.result.steps if s.replaces == move.pod)
    assert bind.wait == 40.0
    ignored = _hot_and_cold(*(_job_pod(f"etl-{i}", "hot") for i in range(4)))
    assert job_backoff(ignored, "default/etl-0") == 0.0


def test_the_validator_refuses_what_the_rules_forbid() -> None:
    c = _hot_and_cold(*(_web(f"web-{i}", "hot") for i in range(4)))
    allowed = _config(moveAlwaysTier=True)
    out = rebalance_cluster(c, RebalanceOptions(config=allowed, now=NOW))
    assert out.moves
    problems = validate_rebalance(c, out.result, _config().rebalance, now=NOW)
    assert any("Always stays" in p for p in problems)
    tight = _config(limits={"perPeriod": 0, "perPeriodPercent": 0}).rebalance
    assert any("more than the plan's limit 0" in p for p in validate_rebalance(c, out.result, tight, now=NOW))


def test_metrics_dumps_are_read_with_their_windows_and_refused_in_one_line() -> None:
    doc = {
        "kind": "PodMetricsList",
        "items": [
            {
                "metadata": {"name": "p", "namespace": "ns"},
                "timestamp": "2027-01-15T08:00:00Z",
                "window": "1m0.5s",
                "containers": [
                    {"name": "a", "usage": {"cpu": "250m", "memory": "1Mi"}},
                    {"name": "b", "usage": {"cpu": "1500000n", "memory": "1Ki"}},
                ],
            }
        ],
    }
    (sample,) = read_usage(Field("m.json", "", doc))
    assert sample.usage == {"cpu": 252, "memory": (1 << 20) + 1024} and sample.window == 60.5
    assert sample.timestamp == NOW
    doc["items"][0]["window"] = "soon"
    with pytest.raises(InputError, match=r"m.json: items\[0\].window: expected a duration"):
        read_usage(Field("m.json", "", doc))


def test_jobs_are_read_from_kubectl_dumps() -> None:
    dump = {
        "kind": "List",
        "items": [
            {
                "kind": "Node",
                "metadata": {"name": "n"},
                "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"}},
            },
            {
                "kind": "Job",
                "metadata": {
                    "name": "etl",
                    "namespace": "ns",
                    "uid": "u1",
                    "annotations": {"placer.io/rebalance": "restarts-work"},
                },
                "spec": {
                    "completionMode": "Indexed",
                    "backoffLimit": 3,
                    "podFailurePolicy": IGNORE_DISRUPTION,
                    "template": {"spec": {"schedulerName": "placer"}},
                },
                "status": {"failed": 1},
            },
        ],
    }
    (job,) = parse_cluster("d.json", json.dumps(dump)).jobs
    assert (job.indexed, job.backoff_limit, job.failed, job.ignores_disruption, job.accepts_restarts) == (
        True,
        3,
        1,
        True,
        True,
    )
    assert job.scheduler_name == "placer"


def test_the_cli_prints_the_plan_and_answers_in_the_solve_contract(tmp_path: Path) -> None:
    runner = CliRunner()
    text = runner.invoke(app, ["rebalance", str(EXAMPLE)])
    assert text.exit_code == 0, text.output
    assert "Rebalancing plan: moves" in text.output and "lower is better" in text.output
    as_json = runner.invoke(app, ["rebalance", str(EXAMPLE), "-o", "json"])
    data = json.loads(as_json.stdout)
    assert data["schemaVersion"] == 7 and data["rebalance"]["kept"] is True
    assert {e["kind"] for e in data["evictions"]} == {"move"}
    bad = tmp_path / "usage.json"
    bad.write_text('{"kind": "PodMetricsList", "items": [{"metadata": {"name": "p"}, "timestamp": "yesterday"}]}')
    failed = runner.invoke(app, ["rebalance", str(EXAMPLE), "--usage", str(bad)])
    assert failed.exit_code == 2
    assert failed.stderr.strip().count("\n") == 0 and "items[0].timestamp" in failed.stderr
