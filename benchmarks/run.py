"""Engine benchmark: decision latency, placement and quality per cluster size, plus TBESK.

``python -m benchmarks.run [--sizes 100,1000,5000,10000,50000] [--repeats 5] [--time-limit T]
[--quick] [--no-tbesk]`` (``make bench``) writes ``docs/bench/engine.md``,
``docs/bench/engine_latency.png`` and (through ``benchmarks.tbesk``) ``docs/bench/tbesk.md``.

Per size, in a fresh child process (so that its memory high-water mark is its own):
1. ``benchmarks.generate.cluster(nodes, running_per_node=10, pending=99)``; parse time is not
   part of the decision: the snapshot (``build_snapshot``) is built once, timed separately.
2. One untimed warm-up decision, then ``repeats`` timed decisions:
   ``placer.engine.solve.solve_batch(snapshot, pending, config)``, which is the whole decision
   (prefilter, greedy hint, candidates, model build, every CP-SAT level, extraction), timed with
   ``time.perf_counter``. Median and p95 (numpy's linear interpolation: with 5 repeats, p95 is
   0.2 x the 4th + 0.8 x the slowest).
3. Memory: ``rss delta`` = growth of the process's ``ru_maxrss`` high-water mark over the warm-up
   and timed decisions (whole process: Python, numpy and the CP-SAT C++ heap; 0 when a decision
   needs less than the generator's own peak), and ``py peak`` = tracemalloc peak of one extra
   decision (Python and numpy allocations only, not CP-SAT's).
4. ``--policy default``: the kube-scheduler simulation on the same snapshot and batch.
5. Quality vs unpruned (sizes <= ``--quality-max``): the batch re-solved with candidate pruning
   off (``candidates = 10**9``) and a long limit (``--quality-limit``, 60 s), as one CP-SAT model
   (the engine's switch to neighbourhood search above ``LNS_VARIABLES`` pairs, which reports no
   bound, is lifted for this run). Both answers are
   scored with the strategy objective's float cost (``strategy_cost``: the one definition in
   ``placer.engine.objectives``, over every node the unpruned model touches) and compared with the
   unpruned run's best bound on its last (strategy) level, reported in the same float units:
   ``gap = (cost(placer at budget) - bound) / cost(placer at budget)``.

The solver time limit per size is the budget the latency targets imply (p95 <= 0.25 s up to
5,000 nodes, <= 1.0 s at 50,000 nodes, interpolated log-linearly): ``time_limit_for``.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from benchmarks import tbesk
from benchmarks.gap import GapRow, gaps
from benchmarks.generate import cluster
from benchmarks.machine import machine_info
from placer.baseline.simulate import simulate
from placer.engine import BatchResult, Scorer, Snapshot, build_batch, build_snapshot, pod_vector, solve_batch
from placer.engine import solve as engine_solve
from placer.models import Config, Pod
from placer.service import pending_batch

__all__ = [
    "DEFAULT_SIZES",
    "QUICK_SIZES",
    "Quality",
    "SizeResult",
    "main",
    "p95_target",
    "run_size",
    "strategy_cost",
    "time_limit_for",
]

DEFAULT_SIZES = (100, 1000, 5000, 10000, 50000)
QUICK_SIZES = (100, 1000)
OUT_DIR = Path("docs/bench")
SEED = 1
RUNNING_PER_NODE = 10
PENDING = 99


def p95_target(nodes: int) -> float:
    """The latency target: 0.25 s up to 5,000 nodes, 1.0 s at 50,000, log-linear in between."""
    if nodes <= 5000:
        return 0.25
    return float(0.25 * (nodes / 5000) ** np.log10(4.0))


def time_limit_for(nodes: int) -> float:
    """Solver time limit the target implies: 0.15 s up to 5,000 nodes (0.1 s left for the work
    around the solver), growing to 0.5 s at 50,000 nodes (half of the 1.0 s target)."""
    if nodes <= 5000:
        return 0.15
    return round(float(0.15 * (nodes / 5000) ** np.log10(0.5 / 0.15)), 3)


@dataclass
class Quality:
    """Placer at the benchmark budget against an unpruned, long solve of the same batch."""

    time_limit: float
    seconds: float
    status: str
    placed: int
    budget_cost: float  # strategy_cost of the answer at the benchmark budget
    unpruned_cost: float  # strategy_cost of the unpruned answer
    unpruned_bound: float  # unpruned strategy level's best bound (float units)
    unpruned_value: float  # unpruned strategy level's objective (float units)
    gap: float  # (budget_cost - unpruned_bound) / budget_cost
    same_earlier_levels: bool  # the levels before the strategy reached the same values
    unpruned_strategy_status: str  # CP-SAT status of the unpruned strategy level
    best_cost: float  # best known cost: unpruned CP-SAT, or the engine's neighbourhood search
    best_how: str
    gap_to_best: float  # (budget_cost - best_cost) / budget_cost: a lower estimate of the true gap


@dataclass
class SizeResult:
    nodes: int
    running: int
    pending: int
    time_limit: float
    target_p95: float
    workers: int | None  # None: the engine's default (one per core)
    generate_seconds: float
    snapshot_seconds: float
    decisions: list[float]
    median: float
    p95: float
    cpu_median: float  # process CPU time (all threads) of a decision, median
    placed: int
    status: str
    gap: float
    levels: list[dict[str, Any]]
    greedy_placed: int
    default_placed: int
    default_seconds: float
    rss_delta_mib: float
    py_peak_mib: float
    quality: Quality | None = None
    gap_rows: list[GapRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _maxrss_mib() -> float:
    # Linux reports ru_maxrss in KiB.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _levels(res: BatchResult) -> list[dict[str, Any]]:
    return [
        {"name": lv.name, "status": lv.status, "value": lv.value, "bound": lv.bound, "seconds": round(lv.seconds, 4)}
        for lv in res.levels
    ]


def strategy_cost(
    snapshot: Snapshot,
    pending: Sequence[Pod],
    config: Config,
    placements: Sequence[tuple[Pod, int]],
    nodes: npt.NDArray[np.int64],
) -> float:
    """The strategy's float cost (``placer.engine.objectives``, the one definition the engine's
    integer objective scales) of placing ``placements`` from ``snapshot``, over ``nodes``."""
    resources = snapshot.resources
    demand = np.zeros(len(resources), dtype=np.int64)
    for pod in pending:
        demand += pod_vector(pod, resources)
    scorer = Scorer(snapshot, config, demand)
    used = snapshot.used.copy()
    placed = []
    for pod, n in placements:
        vec = pod_vector(pod, resources)
        used[n] += vec
        placed.append((vec, n, 1))
    return scorer.strategy.cost(scorer, used, nodes, placed)


def _earlier(levels: Sequence[Any]) -> list[tuple[str, float]]:
    return [(lv.name, round(lv.value, 6)) for lv in levels if not lv.name.startswith("strategy")]


def _quality(snapshot: Snapshot, pending: list[Pod], config: Config, budget: BatchResult, limit: float) -> Quality:
    unpruned_cfg = config.model_copy(
        update={"solver": config.solver.model_copy(update={"candidates": 10**9, "time_limit": limit})}
    )
    batch = build_batch(snapshot, pending, config)
    touched = np.unique(np.concatenate([g.feasible for g in batch.groups] + [np.zeros(0, dtype=np.int64)]))
    pairs = sum(len(g.feasible) for g in batch.groups)
    # (a) One CP-SAT model over every feasible node: keep the engine from switching the strategy
    # level of this (now large) model to neighbourhood search, which reports no bound.
    saved = getattr(engine_solve, "LNS_VARIABLES", None)
    if saved is not None:
        engine_solve.LNS_VARIABLES = 10**12
    started = time.perf_counter()
    try:
        res = solve_batch(snapshot, pending, unpruned_cfg)
    finally:
        if saved is not None:
            engine_solve.LNS_VARIABLES = saved
    seconds = time.perf_counter() - started
    budget_cost = strategy_cost(snapshot, pending, config, budget.placements, touched)
    unpruned_cost = strategy_cost(snapshot, pending, config, res.placements, touched)
    last = res.levels[-1] if res.levels else None
    ok = last is not None and last.name.startswith("strategy") and not math.isnan(last.bound)
    bound = last.bound if ok and last is not None else float("nan")
    value = last.value if ok and last is not None else float("nan")
    same = _earlier(budget.levels) == _earlier(res.levels) and len(budget.placements) == len(res.placements)
    gap = (budget_cost - bound) / budget_cost if budget_cost > 0 and not math.isnan(bound) else float("nan")
    # (b) Best known answer: the engine's own unpruned path (neighbourhood search when large).
    best_cost, best_how = unpruned_cost, "cp-sat"
    if saved is not None and pairs > saved:
        lns = solve_batch(snapshot, pending, unpruned_cfg)
        if len(lns.placements) == len(res.placements):
            lns_cost = strategy_cost(snapshot, pending, config, lns.placements, touched)
            if lns_cost < best_cost:
                best_cost, best_how = lns_cost, "lns"
    return Quality(
        time_limit=limit,
        seconds=round(seconds, 3),
        status=res.status,
        placed=len(res.placements),
        budget_cost=budget_cost,
        unpruned_cost=unpruned_cost,
        unpruned_bound=bound,
        unpruned_value=value,
        gap=gap,
        same_earlier_levels=same,
        unpruned_strategy_status=last.status if last is not None and last.name.startswith("strategy") else "none",
        best_cost=best_cost,
        best_how=best_how,
        gap_to_best=(budget_cost - best_cost) / budget_cost if budget_cost > 0 else float("nan"),
    )


def run_size(
    nodes: int,
    repeats: int = 5,
    time_limit: float | None = None,
    *,
    seed: int = SEED,
    running_per_node: int = RUNNING_PER_NODE,
    pending: int = PENDING,
    workers: int | None = None,
    quality_max: int = 1000,
    quality_limit: float = 60.0,
    gap_max: int = 0,
    gap_limits: Sequence[float] = (),
    mip_seconds: float = 0.0,
    mip_max: int = 0,
    warmup: bool = True,
    trace_memory: bool = True,
) -> SizeResult:
    """Benchmark one cluster size (see the module docstring)."""
    limit = time_limit if time_limit is not None else time_limit_for(nodes)
    solver = {"timeLimit": limit} if workers is None else {"timeLimit": limit, "workers": workers}
    config = Config(solver=solver)
    started = time.perf_counter()
    generated = cluster(nodes, running_per_node=running_per_node, pending=pending, seed=seed)
    generate_seconds = time.perf_counter() - started

    started = time.perf_counter()
    batch, _ = pending_batch(generated, config.scheduler_name)
    snapshot = build_snapshot(generated.nodes, [p for p in generated.pods if p.running], batch)
    snapshot_seconds = time.perf_counter() - started

    rss0 = _maxrss_mib()
    if warmup:
        solve_batch(snapshot, batch, config)
    times: list[float] = []
    cpu: list[float] = []
    result: BatchResult | None = None
    for _ in range(max(repeats, 1)):
        cpu0 = time.process_time()
        started = time.perf_counter()
        result = solve_batch(snapshot, batch, config)
        times.append(time.perf_counter() - started)
        cpu.append(time.process_time() - cpu0)
    assert result is not None
    rss_delta = max(_maxrss_mib() - rss0, 0.0)

    py_peak = float("nan")
    if trace_memory:
        tracemalloc.start()
        solve_batch(snapshot, batch, config)
        py_peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()

    started = time.perf_counter()
    sim = simulate(snapshot, batch, "default")
    default_seconds = time.perf_counter() - started

    quality = _quality(snapshot, batch, config, result, quality_limit) if nodes <= quality_max else None
    mip = mip_seconds if nodes <= mip_max else 0.0
    gap_rows = gaps(snapshot, batch, config, gap_limits, mip_seconds=mip) if nodes <= gap_max else []
    arr = np.array(times)
    return SizeResult(
        nodes=nodes,
        running=sum(1 for p in generated.pods if p.running),
        pending=len(batch),
        time_limit=limit,
        target_p95=p95_target(nodes),
        workers=config.solver.workers,
        generate_seconds=round(generate_seconds, 3),
        snapshot_seconds=round(snapshot_seconds, 4),
        decisions=[round(t, 4) for t in times],
        median=float(np.median(arr)),
        p95=float(np.percentile(arr, 95)),
        cpu_median=float(np.median(cpu)),
        placed=len(result.placements),
        status=result.status,
        gap=result.gap,
        levels=_levels(result),
        greedy_placed=result.greedy_placed,
        default_placed=len(sim.placements),
        default_seconds=round(default_seconds, 4),
        rss_delta_mib=round(rss_delta, 1),
        py_peak_mib=round(py_peak, 1),
        quality=quality,
        gap_rows=gap_rows,
    )


# --------------------------------------------------------------------------------------------
# Child processes, report, plot
# --------------------------------------------------------------------------------------------
def _from_json(data: dict[str, Any]) -> SizeResult:
    q = data.pop("quality")
    rows = [GapRow(**row) for row in data.pop("gap_rows", [])]
    return SizeResult(**data, quality=Quality(**q) if q else None, gap_rows=rows)


def _run_child(nodes: int, args: argparse.Namespace) -> SizeResult:
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.run",
        "--child",
        str(nodes),
        "--repeats",
        str(args.repeats),
        "--quality-max",
        str(args.quality_max),
        "--quality-limit",
        str(args.quality_limit),
        "--gap-max",
        str(args.gap_max),
        "--gap-limits",
        args.gap_limits,
        "--mip-seconds",
        str(args.mip_seconds),
        "--mip-max",
        str(args.mip_max),
    ]
    if args.time_limit is not None:
        cmd += ["--time-limit", str(args.time_limit)]
    if args.workers is not None:
        cmd += ["--workers", str(args.workers)]
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True)
    return _from_json(json.loads(out.stdout.strip().splitlines()[-1]))


def _fmt(x: float, digits: int = 3) -> str:
    return "n/a" if math.isnan(x) else f"{x:.{digits}f}"


def _workers(results: Sequence[SizeResult]) -> str:
    configured = {r.workers for r in results}
    if configured == {None}:
        return "= the engine's default (one per core, at most 8)"
    return ", ".join(str(w) for w in sorted(configured, key=str))


def _strategy_status(levels: list[dict[str, Any]]) -> str:
    last = [lv for lv in levels if str(lv["name"]).startswith("strategy")]
    return str(last[-1]["status"]) if last else "-"


def _pct(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{100 * x:.2f}%"


def _levels_text(levels: list[dict[str, Any]]) -> str:
    return ", ".join(f"{lv['name']} {lv['status']} {lv['seconds']:.3f}s" for lv in levels) or "no solver level"


def render_markdown(results: Sequence[SizeResult], meta: dict[str, str], command: str) -> str:
    lines = [
        "# Engine benchmark",
        "",
        f"Command: `{command}` ({meta['date']}, placer at {meta['revision']}).",
        "",
        f"Machine: {meta['nproc']} cores (`nproc`), {meta['cpu']} (/proc/cpuinfo), {meta['memory']} RAM; "
        f"Python {meta['python']}, OR-Tools {meta['ortools']}, numpy {meta['numpy']}. "
        f"Shared machine: other work may have run at the same time (load average 1/5/15 min at the end: "
        f"{meta['load']}).",
        "",
        f"Clusters: `benchmarks.generate.cluster(nodes, running_per_node={RUNNING_PER_NODE}, "
        f"pending={PENDING}, seed={SEED})`: heterogeneous nodes (8 shapes, 3 zones, ~5% dedicated "
        "NoSchedule, ~5% spot PreferNoSchedule, ~1.5% GPU, ~0.5% cordoned), running pods filling 30-70%, "
        "99 pending pods in Deployments/Jobs with selectors, affinity (In/NotIn/Exists/DoesNotExist/Gt/Lt), "
        "tolerations, priorities, restart policies.",
        "",
        "Config: the defaults except the solver time limit per size (`benchmarks.run.time_limit_for`); CP-SAT "
        f"workers {_workers(results)}.",
        "",
        "Decision = `solve_batch(snapshot, pending, config)` on an in-memory snapshot (prefilter, greedy hint, "
        "candidates, model build, all CP-SAT levels, extraction), wall clock (`time.perf_counter`), after one "
        "untimed warm-up. p95 uses numpy's linear interpolation. `cpu median` = the process's CPU time per "
        "decision (all threads, CP-SAT workers included): less sensitive than wall time to other load on the "
        "machine (the targets are about wall time). `snapshot` = `build_snapshot` from the "
        "generated Cluster (not part of the decision; a controller keeps it up to date incrementally). "
        "`rss delta` = growth of the process's ru_maxrss over the decisions (fresh process per size; "
        "includes CP-SAT's C++ heap); `py peak` = tracemalloc peak of one decision (Python + numpy only).",
        "",
        "| nodes | running | pending | time limit (s) | target p95 (s) | median (s) | p95 (s) | meets target "
        "| cpu median (s) | placed placer | placed default | status | gap | strategy level | snapshot (s) "
        "| default sim (s) | rss delta (MiB) | py peak (MiB) |",
        "|---:|---:|---:|---:|---:|---:|---:|:-:|---:|---:|---:|---|---:|---|---:|---:|---:|---:|",
    ]
    for r in results:
        ok = "yes" if r.p95 <= r.target_p95 else "**no**"
        lines.append(
            f"| {r.nodes:,} | {r.running:,} | {r.pending} | {r.time_limit:g} | {r.target_p95:.2f} | "
            f"{r.median:.3f} | {r.p95:.3f} | {ok} | {r.cpu_median:.3f} | {r.placed} | {r.default_placed} | "
            f"{r.status} | "
            f"{_fmt(r.gap, 4)} | {_strategy_status(r.levels)} | {r.snapshot_seconds:.3f} | {r.default_seconds:.3f} | "
            f"{r.rss_delta_mib:.0f} | {_fmt(r.py_peak_mib, 1)} |"
        )
    unsolved = [r for r in results if _strategy_status(r.levels) not in ("optimal", "feasible", "-")]
    missed = [r for r in results if r.p95 > r.target_p95]
    lines += [
        "",
        f"Targets met: {len(results) - len(missed)} of {len(results)} sizes. "
        f"Strategy level without a solution at the budget (status `unknown`: the answer is the greedy hint, "
        f"although the status column says `feasible`): {len(unsolved)} of {len(results)} sizes.",
    ]
    lines += ["", "Solver levels of the last timed decision (name, CP-SAT status, seconds):", ""]
    lines += [f"- {r.nodes:,} nodes: {_levels_text(r.levels)}" for r in results]
    lines += ["", "All decision times (s):", ""]
    lines += [f"- {r.nodes:,} nodes: {', '.join(f'{t:.3f}' for t in r.decisions)}" for r in results]
    quality = [r for r in results if r.quality is not None]
    if quality:
        lines += [
            "",
            "## Quality vs unpruned",
            "",
            "The same batch re-solved with candidate pruning off (`candidates = 10**9`) and a long time limit. "
            "`cost` = the balance strategy objective of an answer, evaluated independently of the model "
            "(`benchmarks.run.strategy_cost`, over every node the unpruned model touches); `bound` = the "
            "unpruned run's best bound on its strategy level (the integer objective in float units); "
            "`gap` = (cost at budget - bound) / cost at budget (n/a when the unpruned strategy level found no "
            "solution in time, status `unknown`). `best known cost`: the better of the unpruned CP-SAT answer "
            "and, when the unpruned model is large enough for the engine to switch to neighbourhood search "
            "(`lns`), that run with the same limit; `gap to best known` is a lower estimate of the true gap. "
            "`same levels`: the levels before the strategy (placed pods, preferences) reached the same values "
            "in both runs, so the strategy costs are comparable.",
            "",
            "| nodes | budget (s) | cost at budget | unpruned limit (s) | unpruned time (s) | unpruned strategy level "
            "| unpruned cost | unpruned value | bound | gap to bound | best known cost | gap to best known "
            "| same levels |",
            "|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|:-:|",
        ]
        for r in quality:
            q = r.quality
            assert q is not None
            lines.append(
                f"| {r.nodes:,} | {r.time_limit:g} | {q.budget_cost:.4f} | {q.time_limit:g} | {q.seconds:.1f} | "
                f"{q.unpruned_strategy_status} | {q.unpruned_cost:.4f} | {_fmt(q.unpruned_value, 4)} | "
                f"{_fmt(q.unpruned_bound, 4)} | {_pct(q.gap)} | {q.best_cost:.4f} ({q.best_how}) | "
                f"{_pct(q.gap_to_best)} | {'yes' if q.same_earlier_levels else 'no'} |"
            )
    lines += _gap_section(results)
    return "\n".join(lines) + "\n"


def _gap_section(results: Sequence[SizeResult]) -> list[str]:
    rows = [(r, g) for r in results for g in r.gap_rows]
    if not rows:
        return []
    lines = [
        "",
        "## Gap to the relaxation bound, and what the solver adds to the greedy start",
        "",
        "The same batch solved afresh at each time limit. `cost` = the balance strategy's float cost "
        "(`strategy_cost`, over every node a batch pod may use); `greedy` = that of the greedy pass alone "
        "(the start every answer improves on); `LP bound` = the optimum of the linear relaxation of the "
        "full, unpruned model (`benchmarks/bound.py`: every feasible node, the answer's placed counts and "
        "preferences value, GLOP), a lower bound on every answer; `MIP bound` = SCIP's dual bound on the same "
        "program with integer pods after `MIP s` seconds (`proven`: SCIP solved it to optimality, so the bound "
        "is that program's optimum); `gap` = (cost - the higher bound) / cost; "
        "`solver adds` = (greedy - cost) / greedy. The shipped controller gives a batch `solver.timeLimit` "
        "= 0.5 s (k8s/config.yaml); 0.15 s is the latency benchmark's limit at these sizes.",
        "",
        "| nodes | time limit (s) | decision (s) | placed | greedy | cost | LP bound | MIP bound | MIP s | gap "
        "| solver adds | LP solve (s) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r, g in rows:
        lines.append(
            f"| {r.nodes:,} | {g.time_limit:g} | {g.seconds:.2f} | {g.placed} | {g.greedy_cost:.4f} | "
            f"{g.cost:.4f} | {g.bound:.4f} | {_fmt(g.mip_bound, 4)}{' (proven)' if g.mip_optimal else ''} | "
            f"{g.mip_seconds:.0f} | {_pct(g.gap)} | {_pct(g.contribution)} | {g.bound_seconds:.1f} |"
        )
    return lines


def plot(results: Sequence[SizeResult], path: Path) -> None:
    xs = [r.nodes for r in results]
    fig = Figure(figsize=(7, 4.2), dpi=120)
    FigureCanvasAgg(fig)  # the Agg backend, without pyplot's global state
    ax = fig.add_subplot()
    ax.plot(xs, [r.median for r in results], "o-", label="median")
    ax.plot(xs, [r.p95 for r in results], "s--", label="p95")
    ax.plot(xs, [r.time_limit for r in results], ":", color="grey", label="solver time limit")
    targets = [(5000, 0.25), (50000, 1.0)]
    ax.plot([t[0] for t in targets], [t[1] for t in targets], "r^", label="p95 target")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("nodes (log)")
    ax.set_ylabel("decision time (s, log)")
    ax.set_title(f"placer decision latency, {PENDING} pending pods, {RUNNING_PER_NODE} running/node")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", help="comma-separated node counts (default 100,1000,5000,10000,50000)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--time-limit", type=float, help="solver time limit for every size (default: per size)")
    parser.add_argument("--workers", type=int, help="CP-SAT workers (default: the Config default)")
    parser.add_argument("--quick", action="store_true", help="smoke run: sizes 100,1000, 2 repeats, short limits")
    parser.add_argument("--quality-max", type=int, default=1000, help="largest size re-solved unpruned")
    parser.add_argument("--quality-limit", type=float, default=60.0, help="time limit of the unpruned solve")
    parser.add_argument("--gap-max", type=int, default=5000, help="largest size whose gap to the LP bound is measured")
    parser.add_argument(
        "--gap-limits", default="0.15,0.5,2,10", help="time limits (s) at which the gap to the LP bound is measured"
    )
    parser.add_argument(
        "--mip-seconds", type=float, default=300.0, help="SCIP's time for the integer bound per batch (0: LP only)"
    )
    parser.add_argument("--mip-max", type=int, default=1000, help="largest size given SCIP's integer bound")
    parser.add_argument("--no-tbesk", action="store_true", help="skip the TBESK comparison")
    parser.add_argument("--tbesk-limit", type=float, default=60.0, help="placer's time limit on TBESK")
    parser.add_argument("--out", type=Path, default=OUT_DIR)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.repeats = min(args.repeats, 2)
        args.quality_limit = min(args.quality_limit, 10.0)
        args.tbesk_limit = min(args.tbesk_limit, 10.0)
        args.gap_limits = "0.15,1"
        args.mip_seconds = min(args.mip_seconds, 30.0)
    if args.child is not None:
        res = run_size(
            args.child,
            args.repeats,
            args.time_limit,
            workers=args.workers,
            quality_max=args.quality_max,
            quality_limit=args.quality_limit,
            gap_max=args.gap_max,
            gap_limits=[float(x) for x in args.gap_limits.split(",") if x.strip()],
            mip_seconds=args.mip_seconds,
            mip_max=args.mip_max,
        )
        print(json.dumps(asdict(res)))
        return 0
    sizes = (
        [int(s) for s in args.sizes.split(",") if s.strip()]
        if args.sizes
        else list(QUICK_SIZES if args.quick else DEFAULT_SIZES)
    )
    command = "python -m benchmarks.run" + (" " + " ".join(argv if argv is not None else sys.argv[1:])).rstrip()
    results = []
    for n in sizes:
        limit = args.time_limit if args.time_limit is not None else time_limit_for(n)
        print(f"[bench] {n:,} nodes: solver time limit {limit:g} s, {args.repeats} repeats ...", flush=True)
        started = time.perf_counter()
        r = _run_child(n, args)
        results.append(r)
        q = r.quality
        quality = f", quality gap to bound {_pct(q.gap)}, to best known {_pct(q.gap_to_best)}" if q else ""
        print(
            f"[bench] {n:,} nodes: median {r.median:.3f} s, p95 {r.p95:.3f} s (target {r.target_p95:.2f}), "
            f"placed {r.placed}/{r.pending} (default {r.default_placed}), {r.status}, gap {_fmt(r.gap, 4)}"
            f"{quality}; {time.perf_counter() - started:.0f} s",
            flush=True,
        )
    meta = machine_info()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "engine.md").write_text(render_markdown(results, meta, command), encoding="utf-8")
    plot(results, args.out / "engine_latency.png")
    (args.out / "engine.json").write_text(
        json.dumps({"machine": meta, "command": command, "results": [asdict(r) for r in results]}, indent=2) + "\n",
        encoding="utf-8",
    )
    print(f"[bench] wrote {args.out / 'engine.md'}, {args.out / 'engine_latency.png'}, {args.out / 'engine.json'}")
    if not args.no_tbesk:
        tbesk.main(["--time-limit", str(args.tbesk_limit), "--out", str(args.out / "tbesk.md")])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
