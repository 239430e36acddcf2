"""Public-family corpus: placer vs the plain CP-SAT model, greedy heuristics and kube-scheduler.

Which instances run is drawn from ``--seed``: ``--per-family`` stored instances of each packing
family (at most ``--max-pods`` pods) and ``--traces`` drawn instances of each trace family. Every
method runs on every instance at the same ``--time-limit`` (see ``benchmarks/corpus/runner.py``).

  python -m benchmarks.corpus --seed S [--time-limit 10] [--per-family 80] [--traces 10]
      [--max-pods 250] [--families a,b] [--out docs/bench/corpus] [--quick]
  python -m benchmarks.corpus --only FILE [--time-limit 10] [--out DIR]

``--only FILE`` runs just the instances FILE names, one a line as ``family name`` (further words,
blank lines and lines starting with ``#`` are ignored: a list of misses can be fed back as it
is), instead of drawing them; the report says so.

``--quick`` (2 instances of at most 60 pods per packing family, 1 one-node instance per trace
family, 1 s) is a smoke run and writes to ``build/bench-quick/`` unless ``--out`` says otherwise.
The full default run (200 packing instances, 30 trace instances, 10 s) takes about 1.5 h on 2
cores: every instance costs placer's limit plus the reference's.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import asdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from benchmarks.corpus.instances import FAMILIES, draw, named  # noqa: E402
from benchmarks.corpus.report import plot, render_markdown, targets  # noqa: E402
from benchmarks.corpus.runner import METHODS, run_instance  # noqa: E402
from benchmarks.machine import machine_info, source_revision, write_report  # noqa: E402

OUT_DIR = REPO / "docs" / "bench" / "corpus"
QUICK_OUT_DIR = REPO / "build" / "bench-quick"


def _families(text: str) -> tuple[str, ...]:
    names = tuple(f for f in text.split(",") if f)
    unknown = [f for f in names if f not in FAMILIES]
    if unknown or not names:
        named = ", ".join(unknown) or "(none)"
        raise argparse.ArgumentTypeError(f"unknown family {named}; known: {', '.join(FAMILIES)}")
    return names


def _names(path: Path) -> list[tuple[str, str]]:
    """``family name`` per line of ``path`` (module docstring)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ValueError(f"{path}: {err.strerror}") from err
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        if len(words) < 2:
            raise ValueError(f"{path}:{number}: expected 'family name'")
        out.append((words[0], words[1]))
    if not out:
        raise ValueError(f"{path}: names no instance")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.corpus", description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, help="draws which instances run (required unless --only)")
    parser.add_argument("--time-limit", type=float, default=10.0, help="seconds, for every method")
    parser.add_argument("--per-family", type=int, default=80, help="instances per packing family")
    parser.add_argument("--traces", type=int, default=10, help="drawn instances per trace family")
    parser.add_argument("--max-pods", type=int, default=250, help="packing instances with at most this many pods")
    parser.add_argument("--trace-nodes", type=int, help="nodes per trace instance (default: the family's)")
    parser.add_argument("--families", type=_families, default=FAMILIES, help="comma-separated subset")
    parser.add_argument("--only", type=Path, metavar="FILE", help="run just the instances FILE names")
    parser.add_argument("--quick", action="store_true", help="smoke run: few small instances, 1 s")
    parser.add_argument(
        "--out", type=Path, help="report directory (default docs/bench/corpus, build/bench-quick if --quick)"
    )
    args = parser.parse_args(argv)
    drawing = ("seed", "per_family", "traces", "max_pods", "trace_nodes", "families", "quick")
    clash = [name for name in drawing if getattr(args, name) != parser.get_default(name)]
    if args.only is not None and clash:
        parser.error(f"--only runs the named instances: --{clash[0].replace('_', '-')} does not apply")
    if args.seed is None and args.only is None:
        parser.error("--seed is required (or --only FILE)")
    if args.quick:
        args.time_limit, args.per_family, args.traces, args.max_pods, args.trace_nodes = 1.0, 2, 1, 60, 1
    if args.time_limit <= 0 or args.per_family < 0 or args.traces < 0:
        parser.error("--time-limit must be positive, --per-family and --traces non-negative")
    out: Path = args.out or (QUICK_OUT_DIR if args.quick else OUT_DIR)
    command = "python -m benchmarks.corpus" + (" " + " ".join(argv if argv is not None else sys.argv[1:])).rstrip()
    load_start = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    revision = source_revision()  # at the start: others may commit while it runs
    if args.only is not None:
        try:
            instances = named(_names(args.only))
        except ValueError as err:
            parser.error(f"--only: {err}")
        selection = f"the {len(instances)} instances named in `{args.only}` (--only; not drawn from the seed)"
    else:
        instances = draw(
            args.seed,
            per_family=args.per_family,
            traces=args.traces,
            max_pods=args.max_pods,
            families=args.families,
            trace_nodes=args.trace_nodes,
        )
        selection = ""
    if not instances:
        parser.error("no instance drawn: raise --per-family, --traces or --max-pods")
    rows = []
    for k, inst in enumerate(instances, 1):
        row = run_instance(inst, args.time_limit)
        rows.append(row)
        invalid = [m for m in METHODS if row.violations[m]]
        print(
            f"[corpus {k}/{len(instances)}] {inst.family} {inst.name}: {inst.pods} pods on {inst.nodes} nodes; "
            + " ".join(f"{m} {row.placed[m]}" for m in METHODS)
            + f"; placer {row.seconds['placer']:.2f}s"
            + (f"; INVALID {', '.join(invalid)}: {row.violations[invalid[0]][0]}" if invalid else ""),
            flush=True,
        )
    info = {**machine_info(), "revision": revision}
    payload = {"machine": info, "command": command, "seed": args.seed, "rows": [asdict(r) for r in rows]}
    markdown = render_markdown(rows, command, info, load_start, selection)
    written = write_report(out, "corpus", markdown, payload, lambda path: plot(rows, path))
    print("\n".join(targets(rows)))
    print(f"[corpus] {written}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
