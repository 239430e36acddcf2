"""Regression fixtures: a cluster dump plus expectations, solved deterministically.

A fixture is a directory holding ``cluster.json`` (or .yaml; kubectl List or native schema) and
``expect.yaml``::

    description: why the expected outcome follows from the rules
    options: {batchSize: 2, maxEvictions: 1, noEvict: false, strategy: balance, policy: placer}
    placed: 5                      # pending pods placed
    unplaced: [ns/a]               # exactly these stay unplaced
    maxEvictions: 1                # at most this many evictions (moves + preemptions)
    moved: 1                       # exactly this many moves
    preempted: 0                   # exactly this many preemptions
    evicted: [ns/x]                # exactly these pods are evicted
    untouched: [ns/y]              # these pods are never evicted
    placements: {ns/a: node-1}     # exact nodes (only where the rules force them)

Every key is optional. Solves use 1 worker, a fixed seed and a deterministic time limit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from placer.errors import InputError
from placer.inputs import load_cluster
from placer.inputs.load import load_yaml, read_file
from placer.models import Config, Policy, StrategyName, TierScope
from placer.service import SolveOptions, solve_cluster

__all__ = ["Expectations", "FixtureResult", "find_fixtures", "run_fixture"]


class FixtureOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    batch_size: int | None = Field(None, alias="batchSize", ge=1)
    max_evictions: int | None = Field(None, alias="maxEvictions", ge=0)
    no_evict: bool = Field(False, alias="noEvict")
    strategy: StrategyName = StrategyName.BALANCE
    policy: Policy = "placer"
    restart_tiers: TierScope | bool = Field("namespace", alias="restartTiers")


class Expectations(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    description: str = ""
    options: FixtureOptions = Field(default_factory=FixtureOptions)
    placed: int | None = None
    unplaced: list[str] | None = None
    max_evictions: int | None = Field(None, alias="maxEvictions")
    moved: int | None = None
    preempted: int | None = None
    evicted: list[str] | None = None
    untouched: list[str] = Field(default_factory=list)
    placements: dict[str, str] = Field(default_factory=dict)


@dataclass
class FixtureResult:
    name: str
    passed: bool
    summary: str
    diffs: list[str] = field(default_factory=list)


def find_fixtures(root: Path) -> list[Path]:
    if not root.is_dir():
        raise InputError(str(root), "", "not a directory of fixtures")
    found = sorted(p.parent for p in root.glob("*/expect.yaml"))
    if not found:
        raise InputError(str(root), "", "no fixtures (directories with expect.yaml) found")
    return found


def _cluster_file(fixture: Path) -> Path:
    for name in ("cluster.json", "cluster.yaml", "cluster.yml"):
        if (fixture / name).is_file():
            return fixture / name
    raise InputError(str(fixture), "", "no cluster.json or cluster.yaml")


def load_expectations(path: Path) -> Expectations:
    data: Any = load_yaml(str(path), read_file(path)) or {}
    try:
        return Expectations.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise InputError(str(path), ".".join(str(p) for p in err["loc"]), err["msg"]) from None


def run_fixture(fixture: Path, *, time_limit: float = 10.0) -> FixtureResult:
    """One fixture's verdict; a fixture that cannot be read fails with the one-line reason (the
    other fixtures still run)."""
    try:
        expect = load_expectations(fixture / "expect.yaml")
        cluster = load_cluster(_cluster_file(fixture))
    except InputError as exc:
        return FixtureResult(name=fixture.name, passed=False, summary="unreadable", diffs=[str(exc)])
    opts = expect.options
    config = Config.model_validate(
        {
            "strategy": opts.strategy,
            "priority": {"restartTiers": opts.restart_tiers},
            "solver": {"workers": 1, "deterministic": True, "seed": 0, "timeLimit": time_limit},
        }
    )
    outcome = solve_cluster(
        cluster,
        SolveOptions(
            policy=opts.policy,
            batch_size=opts.batch_size,
            config=config,
            evict=not opts.no_evict,
            max_evictions=opts.max_evictions,
        ),
    )
    result = outcome.result
    placed = {p.pod: p.node for p in result.placements if p.pod}
    evicted = sorted(e.pod for e in result.evictions)
    unplaced = sorted(u.pod for u in result.unplaced)
    moved = sum(1 for e in result.evictions if e.kind == "move")
    preempted = sum(1 for e in result.evictions if e.kind == "preempt")
    diffs: list[str] = []

    def differ(what: str, want: object, got: object) -> None:
        if want != got:
            diffs.append(f"{what}: expected {want}, got {got}")

    if expect.placed is not None:
        differ("placed", expect.placed, result.metrics.placed)
    if expect.unplaced is not None:
        differ("unplaced", sorted(expect.unplaced), unplaced)
    if expect.max_evictions is not None and len(evicted) > expect.max_evictions:
        diffs.append(f"evictions: expected at most {expect.max_evictions}, got {len(evicted)} ({', '.join(evicted)})")
    if expect.moved is not None:
        differ("moved", expect.moved, moved)
    if expect.preempted is not None:
        differ("preempted", expect.preempted, preempted)
    if expect.evicted is not None:
        differ("evicted", sorted(expect.evicted), evicted)
    touched = sorted(set(expect.untouched) & set(evicted))
    if touched:
        diffs.append(f"untouched: {', '.join(touched)} evicted")
    for pod, node in sorted(expect.placements.items()):
        differ(f"placement of {pod}", node, placed.get(pod, "unplaced"))
    summary = f"placed {result.metrics.placed}, unplaced {len(unplaced)}, moved {moved}, preempted {preempted}"
    return FixtureResult(name=fixture.name, passed=not diffs, summary=summary, diffs=diffs)
