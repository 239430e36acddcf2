"""Calibrate the seconds-equivalents of a deterministic budget: CP-SAT deterministic units per
second of one worker's CPU time (``placer.engine.levels.DETERMINISTIC_UNITS_PER_SECOND``) and pods
the single-pod descent weighs per CPU second (``placer.engine.descent.DESCENT_PODS_PER_SECOND``).

Runs ``placer solve FILE --deterministic --time-limit SECONDS`` in-process and records, for every
CP-SAT solve, the deterministic time it reports, and for every descent the pods it weighed, each
with the CPU time of the calling thread (1 worker solves in that thread), so the ratios do not
depend on what else the machine runs; on an idle machine one core's CPU time is its wall time.
Prints one line per run.

CLI: ``python -m benchmarks.deterministic examples/tbesk.json --time-limit 10 --runs 3``.
"""

from __future__ import annotations

import argparse
import importlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ortools.sat.python import cp_model

from placer.inputs import load_cluster
from placer.models import Config
from placer.service import SolveOptions, solve_cluster

__all__ = ["Calibration", "calibrate", "main"]


@dataclass
class Calibration:
    units: float = 0.0  # CP-SAT deterministic time
    solver_cpu: float = 0.0  # thread CPU seconds inside CP-SAT
    weighed: int = 0  # pods the descents weighed
    descent_cpu: float = 0.0
    wall: float = 0.0  # the whole solve


def calibrate(path: str, time_limit: float) -> Calibration:
    out = Calibration()
    original_solve = cp_model.CpSolver.solve
    modules = [importlib.import_module(m) for m in ("placer.engine.solve", "placer.engine.lns")]
    original_descend = modules[0].descend

    def solve(self: cp_model.CpSolver, model: cp_model.CpModel, *args: Any, **kwargs: Any) -> Any:
        start = time.thread_time()
        status = original_solve(self, model, *args, **kwargs)
        out.solver_cpu += time.thread_time() - start
        out.units += self.response_proto.deterministic_time
        return status

    def descend(*args: Any, **kwargs: Any) -> Any:
        start = time.thread_time()
        counts, moves, weighed = original_descend(*args, **kwargs)
        out.descent_cpu += time.thread_time() - start
        out.weighed += weighed
        return counts, moves, weighed

    cluster = load_cluster(path)
    config = Config.model_validate({"solver": {"workers": 1, "deterministic": True, "timeLimit": time_limit}})
    cp_model.CpSolver.solve = solve  # type: ignore[method-assign]
    for module in modules:
        module.descend = descend
    try:
        started = time.monotonic()
        solve_cluster(cluster, SolveOptions(config=config))
        out.wall = time.monotonic() - started
    finally:
        cp_model.CpSolver.solve = original_solve  # type: ignore[method-assign]
        for module in modules:
            module.descend = original_descend
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("--time-limit", type=float, default=10.0)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    for run in range(args.runs):
        c = calibrate(args.file, args.time_limit)
        units = c.units / c.solver_cpu if c.solver_cpu else 0.0
        pods = c.weighed / c.descent_cpu if c.descent_cpu else 0.0
        print(
            f"run {run + 1}: CP-SAT {c.units:.3f} units in {c.solver_cpu:.2f} s CPU ({units:.3f} units/s); "
            f"descent {c.weighed} pods in {c.descent_cpu:.2f} s CPU ({pods:.0f} pods/s); "
            f"whole solve {c.wall:.2f} s wall"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
