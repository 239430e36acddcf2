"""placer vs ``--policy default`` on issue 12's random heterogeneous clusters: never worse on balance.

Instances: ``benchmarks.generate.mixed(seed)`` (100-400 nodes of nine sizes, cpu- and
memory-heavy pods, 0-50 % of the cpu already requested by running pods, pending pods bringing it
to 60-85 %). Per instance, ``solve_cluster`` (what ``placer solve`` runs) with placer and with
the kube-scheduler simulation, in one batch (``--time-limit``) and with ``--batch-size 99``
(``--batch-time-limit`` per batch: the controller's batches get far less than the CLI's 10 s);
wall time of the whole call (batched: of placer's decisions in ``per_batch``'s loop, the
service's loop, which also gives the per-batch verdicts). Every placer answer goes through the independent validator
(``placer.validate.hard_violations``).

The rule (issue 12, item 4): placer places at least as many pods per key as default (compared
from the highest key down), has imbalance <= default's and std_score <= default's, and is strictly
better on one of them. ``verdict``: ``better`` (the rule holds), ``tie`` (equal on all three: the
engine returned default's answer, no single-pod move improving both measures found in time),
``violation`` (worse on one). With ``--batch-size 99`` the rule is checked at the end (placer's
run against default's) and per batch (``per_batch``: placer's decision against default's answer
for the same batch from the same state).

  python -m benchmarks.quality [--quick] [--seeds 8] [--time-limit 10] [--batch-time-limit 1]

``--quick`` (small clusters, 2 seeds) writes to ``build/bench-quick/`` unless ``--out`` says otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.generate import mixed  # noqa: E402
from benchmarks.machine import machine_info, report_header, source_revision  # noqa: E402
from benchmarks.solving import timed_solve  # noqa: E402
from placer.baseline import simulate  # noqa: E402
from placer.engine import Quality, Snapshot, build_snapshot, pod_key, with_default_spread  # noqa: E402
from placer.models import Cluster, Config, Pod, Result, SolveStatus, worst_status  # noqa: E402
from placer.service import DefaultRun, check_decision, decide, pending_batch, state_metrics  # noqa: E402
from placer.validate import hard_violations  # noqa: E402

__all__ = ["Row", "outcome_quality", "per_batch", "run_instance", "verdict"]

OUT_DIR = REPO / "docs" / "bench"
QUICK_OUT_DIR = REPO / "build" / "bench-quick"
BATCH = 99
METRIC_DIGITS = 6  # a result's imbalance and std_score are rounded to this many digits


def verdict(mine: Quality, theirs: Quality) -> str:
    if mine.better(theirs):
        return "better"
    if mine.no_worse(theirs):
        return "tie"
    return "violation"


def _key(pod: Pod, config: Config) -> tuple[int, ...]:
    return pod_key(pod, restart_tiers=config.priority.restart_tiers)


def outcome_quality(cluster: Cluster, result: Result, config: Config) -> Quality:
    """The rule's measures of a ``solve_cluster`` result (its rounded metrics: what users read)."""
    pods = {p.key: p for p in cluster.pods}
    placed = Counter(_key(pods[p.pod], config) for p in result.placements if p.pod is not None and p.kind == "pending")
    return Quality(dict(placed), result.metrics.imbalance, result.metrics.std_score)


def _state_quality(state: Snapshot, placed: list[Pod], config: Config) -> Quality:
    """As ``outcome_quality`` reads a result: the measures rounded as ``Metrics`` rounds them."""
    imbalance, std = state_metrics(state)
    return Quality(
        dict(Counter(_key(p, config) for p in placed)), round(imbalance, METRIC_DIGITS), round(std, METRIC_DIGITS)
    )


@dataclass
class BatchRun:
    """placer's batched run, decided as ``solve_cluster`` decides it."""

    pairs: list[tuple[Quality, Quality]]  # per batch: (placer's decision, default's answer from the same state)
    problems: list[str]  # what the independent validator objects to (``check_decision``)
    final: Quality  # placer's state at the end (pods placed over the whole run)
    seconds: float  # wall time of placer's decisions
    status: SolveStatus
    gap: float  # the largest reported


def per_batch(cluster: Cluster, config: Config, size: int) -> BatchRun:
    """The service's batch loop (``solve_cluster``'s, without plans: these batches fit), and per
    batch placer's decision and default's answer for the same batch from the same state, as the
    rule measures them."""
    pending, _ = pending_batch(cluster, config.scheduler_name)
    pending = with_default_spread(pending, cluster.replicasets, config.default_spread)
    state = build_snapshot(cluster.nodes, [p for p in cluster.pods if p.running], pending, cluster.namespaces)
    out: list[tuple[Quality, Quality]] = []
    problems: list[str] = []
    placed: list[Pod] = []
    seconds, gap = 0.0, 0.0
    status: SolveStatus = "optimal"
    queue, carried = list(pending), []
    beside = DefaultRun(state, cluster, evict=False)
    while queue or carried:
        target = beside.advance(queue[:size])
        batch, queue = carried + queue[:size], queue[size:]
        other = state.copy()
        sim = simulate(other, batch, "default", preemption=False, namespaces=cluster.namespaces)
        started = time.perf_counter()
        decision = decide(cluster, state, batch, config, evict=False, target=target)
        seconds += time.perf_counter() - started
        status, gap = worst_status(status, decision.status), max(gap, decision.gap)
        problems += check_decision(cluster, state, batch, decision, config)
        placed += [p for p, _ in decision.placements]
        for pod, node in decision.placements:
            state.add(pod, node)
        mine = _state_quality(state, [p for p, _ in decision.placements], config)
        out.append((mine, _state_quality(other, [p for p, _ in sim.placements], config)))
        carried = [pod for pod, _, _ in decision.unplaced]
        if not queue:
            break
    return BatchRun(out, problems, _state_quality(state, placed, config), seconds, status, gap)


@dataclass
class Row:
    seed: int
    nodes: int
    running: int
    pending: int
    running_cpu: float
    target_cpu: float
    mode: str  # "one batch" or "batch 99"
    limit: float
    default_placed: int
    default_imbalance: float
    default_std: float
    default_seconds: float
    placed: int
    imbalance: float
    std: float
    seconds: float
    status: str
    gap: float
    verdict: str
    violations: int  # the validator's, on placer's placements
    batches: int = 1
    batch_violations: int = 0
    batch_ties: int = 0


def run_instance(seed: int, mode: str, limit: float, nodes: tuple[int, int] = (100, 400)) -> Row:
    """One instance in one mode. ``batch 99``: placer's run is ``per_batch``'s loop (the service's
    loop, timed over placer's decisions only), so the per-batch rule comes from the same run."""
    cluster, shape = mixed(seed, nodes=nodes)
    size = BATCH if mode == "batch 99" else None
    config = Config.model_validate({"solver": {"timeLimit": limit}})
    default = timed_solve(cluster, "default", time_limit=limit, batch_size=size)
    ref = default.outcome.result
    theirs = outcome_quality(cluster, ref, config)
    running = sum(1 for p in cluster.pods if p.running)
    row = Row(
        seed=seed,
        nodes=shape.nodes,
        running=running,
        pending=len(cluster.pods) - running,
        running_cpu=round(shape.running_cpu, 3),
        target_cpu=round(shape.target_cpu, 3),
        mode=mode,
        limit=limit,
        default_placed=ref.metrics.placed,
        default_imbalance=ref.metrics.imbalance,
        default_std=ref.metrics.std_score,
        default_seconds=round(default.seconds, 2),
        placed=0,
        imbalance=0.0,
        std=0.0,
        seconds=0.0,
        status="",
        gap=0.0,
        verdict="",
        violations=0,
    )
    if size is None:
        mine = timed_solve(cluster, "placer", time_limit=limit)
        res = mine.outcome.result
        placed = {p.pod: p.node for p in res.placements if p.pod is not None}
        q = outcome_quality(cluster, res, config)
        row.seconds, row.status, row.gap = round(mine.seconds, 2), res.status, res.metrics.gap
        row.violations = len(hard_violations(cluster, placed))
    else:
        run = per_batch(cluster, config, size)
        q = run.final
        verdicts = [verdict(m, t) for m, t in run.pairs]
        row.seconds, row.status, row.gap = round(run.seconds, 2), run.status, round(run.gap, 6)
        row.violations = len(run.problems)
        row.batches = len(verdicts)
        row.batch_violations = verdicts.count("violation")
        row.batch_ties = verdicts.count("tie")
    row.placed = sum(q.per_key.values())
    row.imbalance, row.std = q.imbalance, q.std_score
    row.verdict = verdict(q, theirs)
    return row


def render_markdown(rows: list[Row], command: str, info: dict[str, str], load_start: str) -> str:
    lines = report_header("Balance quality: placer vs --policy default", command, info, load_start=load_start)
    lines += [__doc__.split("\n\n")[1].replace("\n", " "), "", __doc__.split("\n\n")[2].replace("\n", " "), ""]
    for mode in ("one batch", "batch 99"):
        mine = [r for r in rows if r.mode == mode]
        if not mine:
            continue
        counts = Counter(r.verdict for r in mine)
        lines += [
            f"## {mode} (time limit {mine[0].limit:g} s{' per batch' if mode == 'batch 99' else ''})",
            "",
            f"Instances violating the rule: **{counts['violation']}** of {len(mine)} (target 0); "
            f"better: {counts['better']}, tie: {counts['tie']}; validator violations: "
            f"{sum(r.violations for r in mine)}."
            + (
                f" Per batch: {sum(r.batch_violations for r in mine)} violating and "
                f"{sum(r.batch_ties for r in mine)} tied of {sum(r.batches for r in mine)} batches."
                if mode == "batch 99"
                else ""
            ),
            "",
            "| seed | nodes | running | pending | placed default | placed placer | imbalance default | "
            "imbalance placer | std_score default | std_score placer | wall s default | wall s placer | "
            "status | gap | verdict |" + (" batches (violating / tied) |" if mode == "batch 99" else ""),
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---|"
            + ("---|" if mode == "batch 99" else ""),
        ]
        for r in mine:
            extra = f" {r.batches} ({r.batch_violations} / {r.batch_ties}) |" if mode == "batch 99" else ""
            lines.append(
                f"| {r.seed} | {r.nodes} | {r.running} | {r.pending} | {r.default_placed} | {r.placed} | "
                f"{r.default_imbalance:.4f} | {r.imbalance:.4f} | {r.default_std:.4f} | {r.std:.4f} | "
                f"{r.default_seconds:.1f} | {r.seconds:.1f} | {r.status} | {r.gap:.4f} | {r.verdict} |{extra}"
            )
        lines.append("")
    lines += ["![placer / default per instance](quality.png)", ""]
    return "\n".join(lines)


def plot(rows: list[Row], path: Path) -> None:
    fig = Figure(figsize=(11, 4))
    FigureCanvasAgg(fig)
    for k, mode in enumerate(("one batch", "batch 99")):
        ax = fig.add_subplot(1, 2, k + 1)
        mine = [r for r in rows if r.mode == mode]
        x = np.arange(len(mine))
        ax.bar(x - 0.2, [r.imbalance / max(r.default_imbalance, 1e-9) for r in mine], width=0.4, label="imbalance")
        ax.bar(x + 0.2, [r.std / max(r.default_std, 1e-9) for r in mine], width=0.4, label="std_score")
        ax.axhline(1.0, color="red", linestyle="--", linewidth=1, label="default")
        ax.set_xticks(x, [f"{r.seed}\n{r.nodes}n" for r in mine], fontsize=7)
        ax.set_ylabel("placer / default (lower is better)")
        ax.set_title(mode)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def _write(out: Path, rows: list[Row], command: str, revision: str, load_start: str) -> None:
    info = {**machine_info(), "revision": revision}
    (out / "quality.md").write_text(render_markdown(rows, command, info, load_start), encoding="utf-8")
    (out / "quality.json").write_text(
        json.dumps({"machine": info, "command": command, "rows": [asdict(r) for r in rows]}, indent=1) + "\n",
        encoding="utf-8",
    )
    plot(rows, out / "quality.png")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.quality", description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--time-limit", type=float, default=10.0, help="one batch (the CLI's default)")
    parser.add_argument("--batch-time-limit", type=float, default=1.0, help="per 99-pod batch")
    parser.add_argument("--quick", action="store_true", help="smoke run: 20-40 nodes, 2 seeds, 1 s")
    parser.add_argument("--out", type=Path, help="report directory (default docs/bench, build/bench-quick if --quick)")
    args = parser.parse_args(argv)
    nodes = (20, 40) if args.quick else (100, 400)
    if args.quick:
        args.seeds, args.time_limit = 2, 1.0
    out: Path = args.out or (QUICK_OUT_DIR if args.quick else OUT_DIR)
    command = "python -m benchmarks.quality" + (" " + " ".join(argv if argv is not None else sys.argv[1:])).rstrip()
    load_start = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    revision = source_revision()
    rows: list[Row] = []
    out.mkdir(parents=True, exist_ok=True)
    for seed in range(args.seeds):
        for mode, limit in (("one batch", args.time_limit), ("batch 99", args.batch_time_limit)):
            started = time.monotonic()
            rows.append(run_instance(seed, mode, limit, nodes))
            r = rows[-1]
            print(
                f"[quality] seed {seed} {mode}: {r.nodes} nodes, {r.pending} pending; imbalance "
                f"{r.imbalance:.4f} vs {r.default_imbalance:.4f}, std {r.std:.4f} vs {r.default_std:.4f}: "
                f"{r.verdict} ({time.monotonic() - started:.0f} s)",
                flush=True,
            )
            _write(out, rows, command, revision, load_start)  # after every instance: a long run reports as it goes
    print(f"[quality] wrote {out / 'quality.md'}, {out / 'quality.png'}, {out / 'quality.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
