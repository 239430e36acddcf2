"""What the optimizer adds to its greedy start at the controller's budget, and what the decision costs.

Per size (``benchmarks.run``'s cluster: ``generate.cluster(nodes, running_per_node=10,
pending=99, seed=1)``, its time limit ``run.time_limit_for``): the greedy start (the engine's
own: prefilter, candidates, greedy pass) and the answer of ``solve_batch`` and of the service's
``decide`` (what the controller calls), each scored with the strategy's float cost over every
node (``run.strategy_cost``) and with imbalance and std_score (``service.state_metrics``); the
answer's status and reported gap; wall times of ``repeats`` decisions (median, p95 with numpy's
linear interpolation) after one warm-up.

  python -m benchmarks.contribution [--sizes 1000,5000] [--repeats 5] [--time-limit T]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.generate import cluster  # noqa: E402
from benchmarks.run import strategy_cost, time_limit_for  # noqa: E402
from placer.engine import (  # noqa: E402
    Scorer,
    Snapshot,
    batch_demand,
    build_batch,
    build_snapshot,
    greedy,
    select_candidates,
    solve_batch,
)
from placer.models import Config, Pod  # noqa: E402
from placer.service import decide, pending_batch, state_metrics  # noqa: E402


def _greedy_start(snapshot: Snapshot, pending: list[Pod], config: Config) -> list[tuple[Pod, int]]:
    batch = build_batch(snapshot, pending, config)
    scorer = Scorer(snapshot, config, batch_demand(batch))
    select_candidates(batch, scorer, config.solver.candidates)
    out: list[tuple[Pod, int]] = []
    for group, nodes in zip(batch.groups, greedy(batch, scorer), strict=True):
        out += [(pod, int(n)) for pod, n in zip(group.pods, nodes.tolist(), strict=True) if n >= 0]
    return out


def _describe(snapshot: Snapshot, pending: list[Pod], config: Config, placements: Sequence[tuple[Pod, int]]) -> str:
    every = np.arange(len(snapshot.nodes), dtype=np.int64)
    after = snapshot.copy()
    for pod, n in placements:
        after.add(pod, n)
    imbalance, std = state_metrics(after)
    cost = strategy_cost(snapshot, pending, config, placements, every)
    return f"placed {len(placements)}, strategy cost {cost:.4f}, imbalance {imbalance:.6f}, std_score {std:.6f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.contribution", description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,5000")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--time-limit", type=float, help="instead of the controller's budget per size")
    args = parser.parse_args(argv)
    for nodes in (int(s) for s in args.sizes.split(",")):
        config = Config(solver={"timeLimit": args.time_limit or time_limit_for(nodes)})
        generated = cluster(nodes, running_per_node=10, pending=99, seed=1)
        pending, _ = pending_batch(generated, config.scheduler_name)
        snapshot = build_snapshot(generated.nodes, [p for p in generated.pods if p.running], pending)
        print(f"{nodes} nodes, {len(pending)} pending, time limit {config.solver.time_limit:g} s")
        print(f"  greedy start: {_describe(snapshot, pending, config, _greedy_start(snapshot, pending, config))}")
        for name in ("solve_batch", "decide"):
            times: list[float] = []
            for _ in range(args.repeats + 1):  # the first is the warm-up
                started = time.perf_counter()
                if name == "solve_batch":
                    res = solve_batch(snapshot, pending, config)
                    placements, status, gap = res.placements, res.status, res.gap
                    levels = ", ".join(f"{lv.name} {lv.status} {lv.seconds:.3f}s" for lv in res.levels)
                else:
                    d = decide(generated, snapshot, pending, config)
                    placements, status, gap, levels = d.placements, d.status, d.gap, ""
                times.append(time.perf_counter() - started)
            arr = np.array(times[1:])
            print(
                f"  {name}: {_describe(snapshot, pending, config, placements)}; status {status}, gap {gap:.4f}; "
                f"wall median {np.median(arr):.3f} s, p95 {np.percentile(arr, 95):.3f} s ({levels})"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
