"""Issue 32 item 3: ``placer explain`` for ten pods of the 5,000-node dump in one command, against
one ``placer solve`` of the same dump at the same ``--time-limit`` (target: at most the solve
plus one second).

The dump is ``benchmarks.bigdump``'s (5,000 nodes, 45,300 pods, 300 pending addressed to placer),
written to the cache on first use. The ten pods are pending pods spread evenly over the dump's
pending ones, so that each is part of the batch and gets the whole story (candidates, the rules
that decided, its step). Each run is a fresh ``placer`` process, solve and explain interleaved;
medians of ``--repeat`` runs. Both decide with the same deterministic work (``--config``: one
worker, the limit counted as work), so that the two differ by the explanations and not by what
CPU the solver got on a shared machine; wall and CPU time are both reported. A last set of runs
times the explanations alone in one process (``explain_answer`` after ``solve_cluster``).

    python -m benchmarks.explain --out docs/bench/explain.md
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.bigdump import write_dump
from benchmarks.machine import machine_info, report_header

PODS = 10

_ALONE = """
import gc, json, sys, time
from pathlib import Path
from placer.explain import explain_answer
from placer.inputs import load_cluster
from placer.models import Config
from placer.service import SolveOptions, solve_cluster
cluster = load_cluster(Path(sys.argv[1]))
gc.freeze()
import yaml
config = Config.model_validate(yaml.safe_load(Path(sys.argv[2]).read_text()))
options = SolveOptions(config=config)
outcome = solve_cluster(cluster, options)
wall, cpu = time.monotonic(), time.process_time()
stories = explain_answer(cluster, options, outcome, sys.argv[3:])
print(json.dumps({"wall": time.monotonic() - wall, "cpu": time.process_time() - cpu, "told": len(stories)}))
"""


def pending_pods(path: Path, count: int) -> list[str]:
    """``count`` pending pods (namespace/name) spread evenly over the dump's pending pods."""
    items = json.loads(path.read_text(encoding="utf-8"))["items"]
    pending = [
        f"{i['metadata']['namespace']}/{i['metadata']['name']}"
        for i in items
        if i["kind"] == "Pod" and not i["spec"].get("nodeName")
    ]
    step = max(len(pending) // count, 1)
    return pending[::step][:count]


def _run(args: list[str]) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds (user + system), stdout) of one subprocess."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    done = subprocess.run(args, capture_output=True, text=True, check=True)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout


def _median(runs: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def _cells(runs: list[dict[str, float]], key: str) -> str:
    return f"{_median(runs, key):.2f} ({', '.join(f'{r[key]:.2f}' for r in runs)})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=32)
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dump", type=Path, default=Path.home() / ".cache" / "placer" / "bigdump-{nodes}-{seed}.json")
    ap.add_argument("--out", type=Path, help="the Markdown report (a PNG beside it)")
    args = ap.parse_args()
    path = Path(str(args.dump).format(nodes=args.nodes, seed=args.seed))
    write_dump(path, args.nodes, args.seed)
    pods = pending_pods(path, PODS)
    placer = str(Path(sys.executable).parent / "placer")
    # Both commands decide with the same deterministic work (one worker, the limit as work), so
    # that on a shared machine the two differ by the explanations, not by the CPU the solver got.
    config = Path(tempfile.mkdtemp()) / "deterministic.yaml"
    config.write_text(f"solver: {{workers: 1, deterministic: true, timeLimit: {args.time_limit}}}\n")
    common = ["--config", str(config), "-o", "json"]
    load_start = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    solves: list[dict[str, float]] = []
    explains: list[dict[str, float]] = []
    for _ in range(args.repeat):
        wall, cpu, out = _run([placer, "solve", str(path), *common])
        metrics = json.loads(out)["metrics"]
        solves.append({"wall": wall, "cpu": cpu, "decision": metrics["solve_seconds"], "read": metrics["read_seconds"]})
        wall, cpu, out = _run([placer, "explain", *pods, str(path), *common])
        told = json.loads(out)["explanations"]
        assert [s["pod"] for s in told] == pods and all(s["in_batch"] for s in told), "ten stories of the batch"
        explains.append({"wall": wall, "cpu": cpu})
        print(f"solve {solves[-1]}, explain {explains[-1]}", flush=True)
    alone = [
        json.loads(_run([sys.executable, "-c", _ALONE, str(path), str(config), *pods])[2]) for _ in range(args.repeat)
    ]
    extra = {k: statistics.median(e[k] - s[k] for s, e in zip(solves, explains, strict=True)) for k in ("wall", "cpu")}
    command = "python -m benchmarks.explain " + " ".join(sys.argv[1:])
    lines = report_header(
        "placer explain: ten pods of a 5,000-node dump from one solve (issue 32 item 3)",
        command,
        machine_info(),
        load_start=load_start,
    )
    lines += [
        f"Dump: `benchmarks/bigdump.py` --nodes {args.nodes} --seed {args.seed} "
        f"({path.stat().st_size / 1e6:.0f} MB, 300 pending pods). Pods explained: {len(pods)} pending pods "
        f"spread over the batch ({', '.join(f'`{p}`' for p in pods[:2])}, ...). Each run is a fresh process, "
        f"solve and explain interleaved, both with `--config` `{{solver: {{workers: 1, deterministic: true, "
        f"timeLimit: {args.time_limit:g}}}}}` (the same decision work in both: the time limit counted as work) "
        f"and `-o json`; medians of {args.repeat} runs, each run in parentheses. `cpu` is the process's user + "
        "system time; on this shared machine (2 cores) it is the steadier measure, wall time depends on what "
        "else runs.",
        "",
        "| command | wall s | cpu s |",
        "|---|---|---|",
        f"| `placer solve DUMP --config C -o json` (baseline) | {_cells(solves, 'wall')} | {_cells(solves, 'cpu')} |",
        f"| `placer explain POD x{len(pods)} DUMP --config C -o json` | {_cells(explains, 'wall')} | "
        f"{_cells(explains, 'cpu')} |",
        f"| explain - solve, same run (median of the differences) | {extra['wall']:+.2f} | {extra['cpu']:+.2f} |",
        f"| the {len(pods)} explanations alone, in one process after its solve | {_cells(alone, 'wall')} | "
        f"{_cells(alone, 'cpu')} |",
        "",
        f"The solve's read (`metrics.read_seconds`) {_cells(solves, 'read')} s and decision "
        f"(`metrics.solve_seconds`) {_cells(solves, 'decision')} s. Target (issue 32): explain <= solve + 1 s; "
        f"same-run difference {extra['wall']:+.2f} s wall, {extra['cpu']:+.2f} s cpu; the explanations alone "
        f"{_median(alone, 'wall'):.2f} s.",
        "",
    ]
    if args.out is not None:
        png = args.out.with_suffix(".png")
        _plot(solves, explains, alone, png)
        lines += [f"![solve and explain per run]({png.name})", ""]
        args.out.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))


def _plot(
    solves: list[dict[str, float]], explains: list[dict[str, float]], alone: list[dict[str, float]], png: Path
) -> None:
    import matplotlib  # noqa: PLC0415  (the bench extra)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    runs = range(1, len(solves) + 1)
    for ax, key in zip(axes, ("wall", "cpu"), strict=True):
        ax.bar([r - 0.2 for r in runs], [s[key] for s in solves], 0.4, label="placer solve (baseline)")
        ax.bar([r + 0.2 for r in runs], [e[key] for e in explains], 0.4, label=f"placer explain, {PODS} pods")
        for r, s in zip(runs, solves, strict=True):
            ax.hlines(s[key] + 1, r - 0.4, r + 0.4, colors="grey", linestyles="--", lw=1)
        ax.set_xticks(list(runs), [f"run {r}" for r in runs])
        ax.set_ylabel(f"{key} seconds (dashed: solve + 1 s)")
    axes[0].legend(fontsize=8)
    median = statistics.median(a["wall"] for a in alone)
    fig.suptitle(
        f"placer explain for ten pods vs one placer solve, 5,000-node dump (explanations alone: {median:.2f} s)"
    )
    fig.tight_layout()
    fig.savefig(png, dpi=100)


if __name__ == "__main__":
    main()
