"""``placer solve`` wall time against ``--time-limit`` at short budgets on 1,000 nodes (issue 29:
"wall time within 5 % of --time-limit plus the time to read the input").

Each shape is one decision (one batch, no ``--batch-size``) on 1,000 nodes of 16 cpu / 64Gi / 110
pods in racks of 16 and 10 zones (``benchmarks.e2e_shapes``), built offline from ``--seed``:

- ``basic``: 1,000 running pods of the e2e mixes (one per node) and 99 plain pending pods;
- ``gangs-99`` / ``gangs-1000``: topology gangs of 4-32 pods of 8 cpu / 8Gi, each required in one
  rack (``benchmarks.e2e_gangs``: v1beta1 PodGroups), up to 99 and 1,000 pending pods, on racks
  partly used by running pods (``benchmarks.gang_shapes`` shape ``used``);
- ``issue-1000``: issue 30's racks (``gang_shapes`` shape ``issue``: 6 or 10 free slots each)
  and up to 1,000 pending pods in gangs of 4, 6 or 6 (998): half of them fit;
- ``preemption``: one low-priority pod of 15 cpu per node, then 99 high-priority pods of 4 cpu
  (``e2e_shapes.preemption``): every one needs a victim, so the global plan runs;
- ``gang-preemption``: e2e_gangs's gang preemption case after its filler (low gangs of 16 pods
  bound two per node, disruptionMode all) with the first high gangs, at least 99 pods, pending
  (``e2e_gangs.preemption_dump``).

Per run: the reading (``parse_cluster`` of the JSON text, as ``placer solve`` reads a file, which
then freezes what it read out of the cycle collector's sight), then the decision
(``benchmarks.solving.timed_solve``: ``solve_cluster`` with only the time limit set,
as ``placer solve --time-limit L``), and after it the controller's solve job on the same batch
(``placer.kube.anytime.SolveJob.run``: ``decide``, then the independent ``check_decision``; run
twice, the second told how long the first's check took, as the runner tells it: the second's
time of both). wall/limit is the decision's wall time over the limit, reading excluded.

Each run is a process of its own (``--repeat`` per shape and limit, after one warm-up solve of a
tiny cluster so that first-call imports do not count). With ``--baseline REV`` the same runs are
made on the git revision REV too (``git archive`` into ``~/.cache/placer/walltime/``, imported in
place of this tree), interleaved run by run, so that both see the same load. Every run also times
the engine's phases (``PHASES``: wall seconds inside each, inclusive, wrapped at the place of use);
the report gives their medians.

    python -m benchmarks.walltime --baseline 37f0c76 --repeat 3 --out /tmp/walltime.md
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import importlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

REPO = Path(__file__).resolve().parents[1]
SOURCE = "WALLTIME_SOURCE"  # env: the placer source tree a child run imports (a baseline's archive)


def _pin_source(source: str) -> None:
    """Import placer from ``source`` (a source tree laid out as the repository: placer/, models/,
    cli/) instead of this tree's editable install; before anything imports placer."""
    sys.path.insert(0, source)
    placer = importlib.import_module("placer")
    placer.__path__.append(source)  # placer.models and placer.cli live in models/ and cli/ there
    for name in ("placer.engine", "placer.models"):
        where = importlib.import_module(name).__file__
        assert where is not None and where.startswith(source), where


if _source := os.environ.get(SOURCE):
    _pin_source(_source)

from benchmarks import e2e_gangs, e2e_shapes, gang_shapes  # noqa: E402
from benchmarks.machine import machine_info, report_header  # noqa: E402
from benchmarks.solving import timed_solve  # noqa: E402
from placer import service  # noqa: E402
from placer.engine import build_snapshot  # noqa: E402
from placer.inputs import parse_cluster  # noqa: E402
from placer.kube import anytime  # noqa: E402
from placer.models import Config, ControllerConfig  # noqa: E402
from placer.validate import validate_placements  # noqa: E402

CACHE = Path.home() / ".cache" / "placer" / "walltime"
NODES = 1000
SHAPES = ("basic", "gangs-99", "gangs-1000", "preemption", "gang-preemption", "issue-1000")
LIMITS = (0.1, 0.3, 1.0)
Json = dict[str, Any]

# Phases timed in every run: (module, attribute) at the place of use, inclusive wall seconds.
PHASES = (
    ("placer.service", "build_snapshot"),
    ("placer.service", "simulate"),
    ("placer.service", "solve_batch"),
    ("placer.engine.solve", "build_batch"),
    ("placer.engine.solve", "select_candidates"),
    ("placer.engine.solve", "greedy_start"),
    ("placer.engine.solve", "greedy"),
    ("placer.engine.solve", "encode"),
    ("placer.engine.levels", "LevelSolver.run"),
    ("placer.engine.solve", "extract"),
    ("placer.service", "plan_batch"),
    ("placer.plan.planner", "PlanModel.build"),
    ("placer.plan.planner", "_solve"),
    ("placer.service", "check_decision"),
)


def _node(i: int) -> Json:
    labels = {"kubernetes.io/hostname": f"bench-{i}", **e2e_shapes.node_labels(i)}
    return {"kind": "Node", "metadata": {"name": f"bench-{i}", "labels": labels},
            "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"}}}  # fmt: skip


def _placed(pod: Json, node: str | None, i: int, priority: int | None = None) -> Json:
    """``pod`` in namespace bench, bound to ``node`` (running) or pending for placer."""
    meta = {**pod["metadata"], "namespace": "bench"}
    meta["creationTimestamp"] = f"2026-01-01T{i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z"
    spec = {**pod["spec"], **({"nodeName": node} if node else {"schedulerName": "placer"})}
    if priority is not None:
        spec["priority"] = priority
    return {**pod, "metadata": meta, "spec": spec, "status": {"phase": "Running" if node else "Pending"}}


def cluster_list(shape: str, seed: int) -> Json:
    """The kubectl List of ``shape`` (module docstring)."""
    items: list[Json] = [_node(i) for i in range(NODES)]
    if shape == "basic":
        running = e2e_shapes.basic(NODES + 99)[0].pods
        items += [_placed(p, f"bench-{i}" if i < NODES else None, i) for i, p in enumerate(running)]
    elif shape == "preemption":
        fill, arrivals = e2e_shapes.preemption(2 * 99, NODES)
        low, high = (e2e_shapes.PRIORITIES[e2e_shapes.LOW], e2e_shapes.PRIORITIES[e2e_shapes.HIGH])
        items += [_placed(p, f"bench-{i}", i, low) for i, p in enumerate(fill.pods)]
        items += [_placed(p, None, NODES + i, high) for i, p in enumerate(arrivals.pods[:99])]
    elif shape.startswith(("gangs-", "issue-")):
        racks = "used" if shape.startswith("gangs-") else "issue"
        running = gang_shapes.running_pods(racks, NODES, np.random.default_rng([seed, 99]))
        pods = int(shape.split("-")[1])
        sizes = gang_shapes.gang_sizes(racks, pods, np.random.default_rng([seed, pods]))
        doc = gang_shapes.cluster_list(NODES, running, sizes)
        items = [_node(i) for i in range(NODES)] + [x for x in doc["items"] if x["kind"] != "Node"]
    elif shape == "gang-preemption":
        doc = e2e_gangs.preemption_dump(NODES, seed, 99)
        items = [_node(i) for i in range(NODES)] + [x for x in doc["items"] if x["kind"] != "Node"]
    else:
        raise ValueError(f"unknown shape {shape!r}")
    return {"apiVersion": "v1", "kind": "List", "items": items}


class Phases:
    """Inclusive wall seconds per phase (PHASES), by wrapping each at its place of use."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._undo: list[Callable[[], None]] = []

    def _wrap(self, owner: Any, attr: str, name: str) -> None:
        real = getattr(owner, attr)

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return real(*args, **kwargs)
            finally:
                self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - started

        setattr(owner, attr, timed)
        self._undo.append(lambda: setattr(owner, attr, real))

    @contextmanager
    def on(self) -> Iterator[None]:
        for module, path in PHASES:
            owner: Any = importlib.import_module(module)
            *parents, attr = path.split(".")
            for parent in parents:
                owner = getattr(owner, parent, None)
            if owner is not None and hasattr(owner, attr):
                self._wrap(owner, attr, path)
        try:
            yield
        finally:
            for undo in reversed(self._undo):
                undo()
            self._undo.clear()


def _warm_up() -> None:
    """One tiny solve, so that the first call's imports and caches are not timed."""
    doc = {"apiVersion": "v1", "kind": "List",
           "items": [_node(0), _placed(cluster_list_pod("warm"), None, 0)]}  # fmt: skip
    timed_solve(parse_cluster("warm-up", json.dumps(doc)), "placer", time_limit=0.1)


def cluster_list_pod(name: str) -> Json:
    requests = {"cpu": "1", "memory": "1Gi"}
    return {"kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "resources": {"requests": requests}}]}}  # fmt: skip


def run_child(shape: str, limit: float, seed: int) -> Json:
    """One run (in this process): reading, the decision, the controller's decide + check."""
    _warm_up()
    text = json.dumps(cluster_list(shape, seed))
    started = time.perf_counter()
    cluster = parse_cluster(shape, text)
    read = time.perf_counter() - started
    gc.freeze()  # as ``placer solve`` does once it has read the cluster (cli.app): no collection walks it again
    phases = Phases()
    with phases.on():
        timed = timed_solve(cluster, "placer", time_limit=limit)
    result = timed.outcome.result
    placed = {p.pod: p.node for p in result.placements if p.pod is not None and p.kind == "pending"}
    problems = [] if result.evictions else validate_placements(cluster, placed, scheduler_name="placer")
    controller = _controller(cluster, limit)
    return {
        "shape": shape, "limit": limit, "seed": seed, "read": read, "wall": timed.seconds,
        "pending": sum(1 for p in cluster.pods if p.pending), "placed": len(placed), "evictions": len(result.evictions),
        "status": result.status, "problems": len(problems) + controller["problems"],
        "controller_decide": controller["decide"], "controller_checked": controller["checked"],
        "phases": phases.seconds,
    }  # fmt: skip


def _controller(cluster: Any, limit: float) -> dict[str, float]:
    """The controller's solve job on the same batch (``SolveJob.run``: decide, then the
    independent check), twice: the second job is told how long the first one's check took, as
    the runner tells it (a tree without ``check_seconds`` ignores it). The second's times."""
    fields = {f.name for f in dataclasses.fields(anytime.SolveJob)}
    defaults = ControllerConfig()
    config = Config.model_validate({"solver": {"timeLimit": limit}})
    pending, _ = service.pending_batch(cluster, "placer")
    running = [p for p in cluster.pods if p.running]
    state = build_snapshot(cluster.nodes, running, pending, cluster.namespaces)
    check = 0.0
    out: dict[str, float] = {}
    for _ in range(2):
        job = anytime.SolveJob(
            cluster=cluster, state=state, batch=pending, config=config, budget=limit, planning=True,
            max_evictions=defaults.evictions.per_cycle, max_per_node=defaults.evictions.per_node,
            frozen=frozenset(), **({"check_seconds": check} if "check_seconds" in fields else {}),
        )  # fmt: skip
        started = time.perf_counter()
        answer = job.run()
        total = time.perf_counter() - started
        check = total - answer.seconds
        out = {"decide": answer.seconds, "checked": total, "problems": len(answer.problems)}
    return out


def _archive(revision: str) -> Path:
    """The source tree of ``revision`` (placer/, models/, cli/), exported once into the cache."""
    commit = subprocess.run(["git", "rev-parse", "--short", revision], cwd=REPO, check=True,
                            capture_output=True, text=True).stdout.strip()  # fmt: skip
    out = CACHE / f"src-{commit}"
    if not (out / "placer").is_dir():
        out.mkdir(parents=True, exist_ok=True)
        tar = subprocess.run(["git", "archive", commit, "placer", "models", "cli"], cwd=REPO, check=True,
                             capture_output=True).stdout  # fmt: skip
        subprocess.run(["tar", "-x", "-C", str(out)], input=tar, check=True)
    return out


def _spawn(source: Path | None, shape: str, limit: float, seed: int) -> Json:
    env = {k: v for k, v in os.environ.items() if k != SOURCE}
    if source is not None:
        env[SOURCE] = str(source)
    args = [sys.executable, "-m", "benchmarks.walltime", "--child", shape, "--limits", str(limit), "--seed", str(seed)]
    done = subprocess.run(args, cwd=REPO, env=env, check=True, capture_output=True, text=True)
    row: Json = json.loads(done.stdout.strip().splitlines()[-1])
    return row


def _ratio(rows: list[Json], key: str = "wall") -> tuple[float, float]:
    ratios = [r[key] / r["limit"] for r in rows]
    return statistics.median(ratios), max(ratios)


def render(rows: list[Json], command: str, info: dict[str, str], load_start: str, baseline: str | None) -> str:
    lines = report_header("placer solve wall time at short budgets (1,000 nodes)", command, info,
                          load_start=load_start)  # fmt: skip
    who = ["before", "after"] if baseline else ["after"]
    lines += [
        f"before = {baseline}, after = this tree; each cell: wall / limit, median and max over the runs "
        "(the decision alone: reading excluded); placed = pending pods placed (median); read = reading "
        "seconds (median); controller = decide + check_decision (the controller's solve job) / limit.",
        "",
        "| shape | limit | " + " | ".join(f"{w} wall/limit med / max" for w in who)
        + " | " + " | ".join(f"{w} controller med / max" for w in who)
        + " | placed " + " / ".join(who) + " | read s | runs |",
        "|---|---:|" + "---:|" * (2 * len(who)) + "---:|---:|---:|",
    ]  # fmt: skip
    for shape in dict.fromkeys(r["shape"] for r in rows):
        for limit in dict.fromkeys(r["limit"] for r in rows if r["shape"] == shape):
            cells, ctl, placed = [], [], []
            got: list[Json] = []
            for w in who:
                mine = [r for r in rows if r["shape"] == shape and r["limit"] == limit and r["who"] == w]
                got += mine
                med, top = _ratio(mine)
                cells.append(f"{med:.2f} / {top:.2f}")
                med, top = _ratio(mine, "controller_checked")
                ctl.append(f"{med:.2f} / {top:.2f}")
                placed.append(f"{statistics.median(r['placed'] for r in mine):g}")
            read = statistics.median(r["read"] for r in got)
            runs = len(got) // len(who)
            lines.append(f"| {shape} | {limit:g} | {' | '.join(cells)} | {' | '.join(ctl)} | {' / '.join(placed)} "
                         f"| {read:.2f} | {runs} |")  # fmt: skip
    names = [path for _, path in PHASES]
    lines += ["", "Phase profile, median over the runs (inclusive wall seconds: nested phases also count in "
              "their callers' cells; controller = decide + check_decision, check = check_decision alone):", "",
              "| who | shape | limit | wall | " + " | ".join(names) + " | controller | check |",
              "|---|---|---:|---:|" + "---:|" * (len(names) + 2)]  # fmt: skip
    for shape in dict.fromkeys(r["shape"] for r in rows):
        for limit in dict.fromkeys(r["limit"] for r in rows if r["shape"] == shape):
            for w in who:
                mine = [r for r in rows if r["shape"] == shape and r["limit"] == limit and r["who"] == w]
                cells = [
                    f"{statistics.median(r['phases'].get(n, 0.0) for r in mine):.3f}"
                    if any(n in r["phases"] for r in mine) else ""
                    for n in names
                ]  # fmt: skip
                wall = statistics.median(r["wall"] for r in mine)
                ctl = statistics.median(r["controller_checked"] for r in mine)
                check = statistics.median(r["controller_checked"] - r["controller_decide"] for r in mine)
                lines.append(
                    f"| {w} | {shape} | {limit:g} | {wall:.3f} | {' | '.join(cells)} | {ctl:.3f} | {check:.3f} |"
                )
    lines.append("")
    return "\n".join(lines)


def plot(rows: list[Json], path: Path) -> None:
    """wall / limit (median, the bar; max, the tick) per shape and limit, before and after."""
    keys = list(dict.fromkeys((r["shape"], r["limit"]) for r in rows))
    who = list(dict.fromkeys(r["who"] for r in rows))
    fig = Figure(figsize=(max(6.0, len(keys) * 0.55), 4))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    x = np.arange(len(keys))
    width = 0.8 / len(who)
    for k, w in enumerate(who):
        med, top = [], []
        for shape, limit in keys:
            got = [r for r in rows if r["shape"] == shape and r["limit"] == limit and r["who"] == w]
            m, t = _ratio(got) if got else (float("nan"), float("nan"))
            med.append(m)
            top.append(t)
        at = x + (k - (len(who) - 1) / 2) * width
        ax.bar(at, med, width, label=f"{w} (median)")
        ax.scatter(at, top, marker="_", s=120, color="black", zorder=3, label="max" if k == 0 else None)
    ax.axhline(1.05, color="grey", linestyle="--", linewidth=1, label="limit + 5 %")
    ax.set_yscale("log")
    ax.set_xticks(x, [f"{s} {limit:g} s" for s, limit in keys], rotation=60, fontsize=7)
    ax.set_ylabel("wall time / --time-limit")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--limits", default=",".join(f"{x:g}" for x in LIMITS))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--baseline", help="a git revision measured too, run by run (before)")
    ap.add_argument("--out", type=Path, help="write the markdown report (and .json beside it) here")
    ap.add_argument("--child", help=argparse.SUPPRESS)  # one run of this shape, in this process
    args = ap.parse_args(argv)
    limits = [float(x) for x in args.limits.split(",")]
    if args.child:
        for limit in limits:
            print(json.dumps(run_child(args.child, limit, args.seed)), flush=True)
        return 0
    shapes = args.shapes.split(",")
    if bad := [s for s in shapes if s not in SHAPES]:
        ap.error(f"--shapes: unknown {', '.join(bad)} (known: {', '.join(SHAPES)})")
    trees: list[tuple[str, Path | None]] = [("after", None)]
    if args.baseline:
        trees.insert(0, ("before", _archive(args.baseline)))
    load_start = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    rows: list[Json] = []
    for _ in range(args.repeat):
        for shape in shapes:
            for limit in limits:
                for who, source in trees:
                    row = {**_spawn(source, shape, limit, args.seed), "who": who, "load": os.getloadavg()[0]}
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    command = "python -m benchmarks.walltime " + " ".join(argv if argv is not None else sys.argv[1:])
    info = machine_info()
    report = render(rows, command.strip(), info, load_start, args.baseline)
    if args.out:
        png = args.out.with_suffix(".png")
        report += f"\n![wall time / limit]({png.name})\n"
        args.out.write_text(report, encoding="utf-8")
        args.out.with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
        plot(rows, png)
    print(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
