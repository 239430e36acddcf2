"""Guard benchmark: how long the controller's safety check takes before it writes an answer.

``python -m benchmarks.guard [--sizes 500,2000,5000] [--repeats 3] [--profile]`` writes
``docs/bench/guard.md``.

``placer.service.check_decision`` runs the independent validator on a batch's answer against the
whole cluster (every node, every running pod, the batch's pending pods) before the controller
binds or evicts anything; its time adds to every cycle that writes. Two answers per size, each
the engine's own (``placer.service.decide``, computed once and untimed):

- placements: ``benchmarks.generate.cluster(nodes, running_per_node=10, pending=99)`` (the engine
  benchmark's heterogeneous nodes, 10 running pods per node, 99 pending pods with selectors,
  affinity, tolerations, host ports and weak-binding annotations); the guard checks the hard rules
  of the placements;
- anti-affinity, spreading: placements again, on ``benchmarks.generate.cluster(nodes, 10, 0, seed=1)``
  with the topology benchmark's first batch (``benchmarks.topology.workload_batch``: 3 Deployments
  x 33 pods with required anti-affinity on the hostname, or DoNotSchedule spreading over zones):
  the inter-pod rules read the running pods of every domain;
- plan: ``benchmarks.plan.infeasible(nodes)`` (10 running pods of 700m per 8-cpu node, 99 pending
  pods of 2 cpu that fit nowhere without evictions); the guard checks the whole global plan
  (evictions, steps, final state, the improvement over an answer without evictions).

Each check is timed ``--repeats`` times (wall clock, ``time.perf_counter``, and the process's CPU
time, ``time.process_time``) and the medians are reported, with the number of violations found
(0 expected: these are the engine's answers).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from benchmarks.generate import cluster as generated_cluster
from benchmarks.machine import machine_info, report_header
from benchmarks.plan import SINGLE_TENANT, infeasible
from benchmarks.topology import workload_batch
from placer.engine import Snapshot, build_snapshot
from placer.models import Cluster, Config, Pod
from placer.service import Decision, check_decision, decide, pending_batch

REPO = Path(__file__).resolve().parents[1]
SIZES = (500, 2_000, 5_000)
TARGETS = {"placements": 0.5, "plan": 1.5}  # seconds at 5,000 nodes (the guard's budget)


@dataclass(frozen=True)
class Case:
    kind: str  # placements | plan
    cluster: Cluster
    state: Snapshot
    batch: list[Pod]
    decision: Decision
    config: Config


@dataclass(frozen=True)
class Row:
    kind: str
    nodes: int
    running: int
    placed: int
    evictions: int
    median: float
    cpu: float
    violations: int


def _case(kind: str, c: Cluster, time_limit: float) -> Case:
    config = Config.model_validate({"solver": {"timeLimit": time_limit, "workers": 1}, "priority": SINGLE_TENANT})
    batch, _ = pending_batch(c, config.scheduler_name)
    state = build_snapshot(c.nodes, [p for p in c.pods if p.running], batch, c.namespaces)
    decision = decide(c, state, batch, config)
    return Case(kind, c, state, batch, decision, config)


def _topology_cluster(nodes: int, kind: Literal["anti-affinity", "spreading"]) -> Cluster:
    base = generated_cluster(nodes, 10, 0, seed=1)
    pods, replicasets = workload_batch(kind, 0)
    return base.model_copy(update={"pods": (*base.pods, *pods), "replicasets": (*base.replicasets, *replicasets)})


CASES: dict[str, Callable[[int, float], Case]] = {
    "placements": lambda nodes, limit: _case("placements", generated_cluster(nodes, 10, 99, seed=0), limit),
    "anti-affinity": lambda nodes, limit: _case("anti-affinity", _topology_cluster(nodes, "anti-affinity"), limit),
    "spreading": lambda nodes, limit: _case("spreading", _topology_cluster(nodes, "spreading"), limit),
    "plan": lambda nodes, limit: _case("plan", infeasible(nodes), limit),
}


def _check(case: Case) -> list[str]:
    return check_decision(case.cluster, case.state, case.batch, case.decision, case.config)


def measure(case: Case, repeats: int) -> Row:
    times, cpu, found = [], [], []
    for _ in range(repeats):
        started, started_cpu = time.perf_counter(), time.process_time()
        found = _check(case)
        times.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
    plan = case.decision.plan
    return Row(
        kind=case.kind,
        nodes=len(case.cluster.nodes),
        running=sum(1 for p in case.cluster.pods if p.running),
        placed=len(case.decision.placements),
        evictions=len(plan.evictions) if plan else 0,
        median=statistics.median(times),
        cpu=statistics.median(cpu),
        violations=len(found),
    )


def render(rows: list[Row], command: str) -> str:
    lines = report_header("Guard benchmark", command, machine_info())
    lines += [
        "`placer.service.check_decision` (the independent validator on the whole cluster) on the engine's "
        "own answer; median wall seconds of the repeats, and median CPU seconds of the process (what the "
        "check costs when it has a core to itself: the machine is shared). Placements: "
        "`benchmarks.generate.cluster(nodes, 10, 99)`, hard rules; anti-affinity and spreading: placements of the "
        "topology benchmark's first batch (99 pods, required anti-affinity on the hostname or zone spreading) "
        "on `benchmarks.generate.cluster(nodes, 10, 0, seed=1)`. Plan: `benchmarks.plan.infeasible(nodes)`, "
        "the whole global plan. Budget at "
        f"5,000 nodes: placements {TARGETS['placements']} s, plan {TARGETS['plan']} s.",
        "",
        "| check | nodes | running | placed | evictions | median (s) | cpu (s) | violations |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.kind} | {r.nodes:,} | {r.running:,} | {r.placed} | {r.evictions} | {r.median:.3f} | {r.cpu:.3f} "
            f"| {r.violations} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.guard", description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--time-limit", type=float, default=2.0, help="the engine's limit for the answers checked")
    ap.add_argument("--kinds", default=",".join(CASES))
    ap.add_argument("--profile", action="store_true", help="print cProfile's top functions of one check per case")
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "bench" / "guard.md")
    args = ap.parse_args(argv)
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        for kind in args.kinds.split(","):
            case = CASES[kind](size, args.time_limit)
            rows.append(measure(case, args.repeats))
            print(rows[-1], file=sys.stderr)
            if args.profile:
                prof = cProfile.Profile()
                prof.runcall(_check, case)
                pstats.Stats(prof, stream=sys.stderr).sort_stats("cumulative").print_stats(30)
    command = "python -m benchmarks.guard" + ("" if argv is None else " " + " ".join(argv))
    text = render(rows, command)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
