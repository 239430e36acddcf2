"""The ``placer`` command: thin typer wrappers over the library."""

from __future__ import annotations

import gc
import json
import logging
import os
import socket
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from enum import StrEnum
from importlib.metadata import version
from pathlib import Path
from typing import Annotated, Any, TypeVar, cast

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from placer import DISTRIBUTION
from placer.check import find_fixtures, run_fixture
from placer.cli.formats import dump
from placer.cli.render import MAX_ROWS, render_compare, render_outcome, render_rebalance
from placer.cli.render_explain import render_explanations
from placer.errors import InputError
from placer.explain import explain_answer, explain_document, explain_pods, explain_schema, unknown_pods
from placer.inputs import cluster_schema, load_cluster, read_cluster
from placer.inputs.load import load_yaml, read_file
from placer.inputs.usage import load_usage
from placer.models import (
    BASELINES,
    GROUP_BATCH_SIZE,
    POLICIES,
    Cluster,
    Config,
    ControllerConfig,
    Policy,
    StrategyName,
    compare_schema,
    result_schema,
)
from placer.rebalance import RebalanceOptions, RebalanceOutcome, rebalance_cluster
from placer.service import Outcome, SolveOptions, solve_cluster

__all__ = ["app", "main"]

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Batch placement for Kubernetes on CP-SAT.")


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"placer {version(DISTRIBUTION)}")
        raise typer.Exit()


@app.callback()
def _options(
    show_version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="print placer's version and exit"),
    ] = False,
) -> None:
    """Batch placement for Kubernetes on CP-SAT."""


class Output(StrEnum):
    text = "text"
    json = "json"
    yaml = "yaml"


def _or(names: tuple[str, ...]) -> str:
    return " | ".join(names)


def _choice(names: tuple[str, ...]) -> Callable[[str], str]:
    """A typer parser accepting one of ``names`` (the registry of models.plan; one list, no enum copy)."""

    def parse(value: str) -> str:
        if value not in names:
            raise typer.BadParameter(f"{value!r} is not one of {_or(names)}")
        return value

    return parse


def _fail(message: str) -> typer.Exit:
    typer.echo(f"placer: {message}", err=True)
    return typer.Exit(2)


ENV_PREFIX = "PLACER_"


def load_controller_config(path: Path | None, environ: Mapping[str, str]) -> ControllerConfig:
    """The controller's configuration: the file, then ``PLACER_<FIELD>`` environment overrides
    (top-level fields by their file names, e.g. PLACER_BATCHWINDOWSECONDS=5, PLACER_DRYRUN=true)."""
    source = str(path) if path else "environment"
    data: Any = {}
    if path is not None:
        data = load_yaml(source, read_file(path)) or {}
        if not isinstance(data, dict):
            raise InputError(source, "", "expected a mapping of settings")
    fields = {f.alias or name: f.alias or name for name, f in ControllerConfig.model_fields.items()}
    lowered = {k.lower(): k for k in fields}
    for key, value in environ.items():
        if key.startswith(ENV_PREFIX) and key[len(ENV_PREFIX) :].lower() in lowered:
            data[lowered[key[len(ENV_PREFIX) :].lower()]] = load_yaml(key, value)
    try:
        return ControllerConfig.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise InputError(source, ".".join(str(p) for p in err["loc"]), err["msg"]) from None


def load_config(path: Path | None) -> Config:
    if path is None:
        return Config()
    source = str(path)
    data: Any = load_yaml(source, read_file(path)) or {}
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise InputError(source, where, err["msg"]) from None


_MAX_ROWS = typer.Option(
    min=0, help="rows of a table before it is cut, saying how many more (0: every row; -o json has them all)"
)


@app.command()
def solve(
    file: Annotated[
        Path | None,
        typer.Argument(help="kubectl List dump or native-schema cluster (JSON or YAML); none: the live cluster"),
    ] = None,
    output: Annotated[Output, typer.Option("--output", "-o", help="text, json or yaml")] = Output.text,
    policy: Annotated[
        str, typer.Option(parser=_choice(POLICIES), help=f"placer, or a kube-scheduler simulation: {_or(POLICIES)}")
    ] = "placer",
    compare: Annotated[
        str | None,
        typer.Option(parser=_choice(BASELINES), help=f"also run this simulation and show both: {_or(BASELINES)}"),
    ] = None,
    strategy: Annotated[StrategyName | None, typer.Option(help="placement strategy (default: balance)")] = None,
    batch_size: Annotated[int | None, typer.Option(min=1, help="simulate the controller's batches of N pods")] = None,
    group_batch_size: Annotated[
        int | None,
        typer.Option(
            min=1,
            help=f"with --batch-size: gangs held to a topology domain join one batch up to N pods "
            f"(the controller's groupBatchSize, default {GROUP_BATCH_SIZE})",
        ),
    ] = None,
    time_limit: Annotated[float | None, typer.Option(min=0.01, help="solver time limit in seconds")] = None,
    workers: Annotated[int | None, typer.Option(min=1, help="CP-SAT worker threads")] = None,
    scheduler_name: Annotated[
        str | None, typer.Option(help="pods of this schedulerName form the batch; '*' all")
    ] = None,
    config: Annotated[Path | None, typer.Option(help="YAML/JSON engine configuration")] = None,
    deterministic: Annotated[
        bool,
        typer.Option(help="1 worker, fixed seed, the time limit as deterministic work: the same answer everywhere"),
    ] = False,
    fail_on_unplaced: Annotated[bool, typer.Option(help="exit 1 when pods stay unplaced")] = False,
    no_evict: Annotated[bool, typer.Option("--no-evict", help="never plan evictions or moves")] = False,
    max_evictions: Annotated[int | None, typer.Option(min=0, help="cap on moves + preemptions")] = None,
    plot: Annotated[
        Path | None, typer.Option(help="also draw per-node utilisation before/after (and --compare's) to a PNG")
    ] = None,
    kubeconfig: Annotated[
        str | None, typer.Option(help="without FILE: read this kubeconfig's cluster (default: as kubectl)")
    ] = None,
    context: Annotated[str | None, typer.Option(help="without FILE: the kubeconfig context to read")] = None,
    max_rows: Annotated[int, _MAX_ROWS] = MAX_ROWS,
    explain: Annotated[
        list[str] | None,
        typer.Option(help="also explain this pod (namespace/name) from the same solve; repeat for more"),
    ] = None,
) -> None:
    """Place the pending pods of a cluster and show where each goes, what stays unplaced and why.

    Without FILE the cluster is read from the API server (read-only: list calls only), as kubectl
    would with the same kubeconfig and context; placer writes nothing to it."""
    if group_batch_size is not None and batch_size is None:
        raise _fail("--group-batch-size needs --batch-size (without it every pending pod is one batch)")
    try:
        cfg = load_config(config)
        started = time.monotonic()
        cluster = _live(kubeconfig, context) if file is None else load_cluster(file)
        read_seconds = time.monotonic() - started
        gc.freeze()  # the model lives until the command ends: later collections need not walk it
    except InputError as exc:
        raise _fail(str(exc)) from None
    if explain and policy != "placer":
        raise _fail(f"--explain tells placer's decisions, not those of --policy {policy} (use --compare {policy})")
    _known_pods(cluster, explain or [], file)
    updates: dict[str, Any] = {}
    if strategy is not None:
        updates["strategy"] = strategy.value
    if scheduler_name is not None:
        updates["scheduler_name"] = scheduler_name
    solver: dict[str, Any] = {}
    if time_limit is not None:
        solver["time_limit"] = time_limit
    if workers is not None:
        solver["workers"] = workers
    if deterministic:
        solver.update(workers=1, deterministic=True)
    cfg = cfg.model_copy(update={**updates, "solver": cfg.solver.model_copy(update=solver)})
    options = SolveOptions(
        policy=cast(Policy, policy),
        batch_size=batch_size,
        group_batch_size=GROUP_BATCH_SIZE if group_batch_size is None else group_batch_size,
        config=cfg,
        evict=not no_evict,
        max_evictions=max_evictions,
    )
    outcome = _read_in(solve_cluster(cluster, options), read_seconds)
    other = None
    if compare is not None:
        other = _read_in(solve_cluster(cluster, replace(options, policy=cast(Policy, compare))), read_seconds)
    stories = explain_answer(cluster, options, outcome, explain) if explain else None
    if output is Output.text:
        console = Console()  # the terminal's width (COLUMNS when not a terminal)
        render_outcome(console, outcome, max_rows)
        if other is not None:
            console.print()
            render_compare(console, outcome, other, cluster.pods, max_rows)
        if stories is not None:
            console.print()
            render_explanations(console, stories)
    else:
        data: Any = outcome.result.contract()
        if other is not None or stories is not None:
            data = {"result": data}
        if other is not None:
            data["compare"] = other.result.contract()
        if stories is not None:
            data["explain"] = explain_document(stories)
        typer.echo(dump(data, output.value), nl=False)
    for warning in outcome.warnings:  # on stderr in every format: stdout stays the answer
        typer.echo(f"placer: warning: {warning}", err=True)
    if plot is not None:
        from placer.cli.plot import PlotUnavailableError, plot_outcomes  # noqa: PLC0415  (matplotlib is optional)

        try:
            plot_outcomes(plot, outcome, other)
        except PlotUnavailableError as exc:
            raise _fail(str(exc)) from None
        except OSError as exc:
            raise _fail(f"{plot}: cannot write the plot: {exc.strerror or exc}") from None
    if fail_on_unplaced and outcome.result.unplaced:
        raise typer.Exit(1)


@app.command()
def rebalance(
    file: Annotated[
        Path, typer.Argument(help="kubectl List dump (with Jobs, ReplicaSets, PDBs) or native-schema cluster")
    ],
    usage: Annotated[
        list[Path] | None,
        typer.Option(help="a `kubectl get --raw /apis/metrics.k8s.io/v1beta1/pods` dump; repeat to average several"),
    ] = None,
    output: Annotated[Output, typer.Option("--output", "-o", help="text, json or yaml")] = Output.text,
    config: Annotated[Path | None, typer.Option(help="YAML/JSON engine configuration (its rebalance section)")] = None,
    time_limit: Annotated[float | None, typer.Option(min=0.01, help="solver time limit in seconds")] = None,
    max_rows: Annotated[int, _MAX_ROWS] = MAX_ROWS,
) -> None:
    """Plan moves off overloaded nodes to planned landing nodes (offline, nothing is written):
    which pods move where, each node's load before and after, and the balance before and after;
    the budgets that held the plan back, each with what the plan would do were it raised (one more
    plan per budget, within one more time limit). With --usage the load is the measured usage
    (rebalance.load: usage in the config)."""
    try:
        cfg = load_config(config)
        started = time.monotonic()
        cluster = load_cluster(file)
        read_seconds = time.monotonic() - started
        gc.freeze()  # the model lives until the command ends: later collections need not walk it
        samples = load_usage(usage) if usage else None
    except InputError as exc:
        raise _fail(str(exc)) from None
    if samples is not None:
        cfg = cfg.model_copy(update={"rebalance": cfg.rebalance.model_copy(update={"load": "usage"})})
    if time_limit is not None:
        cfg = cfg.model_copy(update={"solver": cfg.solver.model_copy(update={"time_limit": time_limit})})
    now = max((s.timestamp for s in samples.samples), default=None) if samples is not None else None
    options = RebalanceOptions(config=cfg, usage=samples, now=now, what_if=True)
    outcome = _read_in(rebalance_cluster(cluster, options), read_seconds)
    if output is Output.text:
        render_rebalance(Console(), outcome, max_rows)
    else:
        typer.echo(dump(outcome.result.contract(), output.value), nl=False)
    for warning in outcome.warnings:
        typer.echo(f"placer: warning: {warning}", err=True)


_Answer = TypeVar("_Answer", Outcome, RebalanceOutcome)


def _read_in(outcome: _Answer, seconds: float) -> _Answer:
    """The answer with the time its input took to read (``metrics.read_seconds``)."""
    metrics = outcome.result.metrics.model_copy(update={"read_seconds": round(seconds, 4)})
    return replace(outcome, result=outcome.result.model_copy(update={"metrics": metrics}))


def _live(kubeconfig: str | None, context: str | None) -> Cluster:
    # Imported here so that a solve from a file never loads the Kubernetes client.
    from placer.kube.live import read_live  # noqa: PLC0415

    source, data = read_live(kubeconfig, context)
    return read_cluster(source, data)


def _known_pods(cluster: Cluster, keys: list[str], file: Path | None) -> None:
    """Every pod named to explain is in the cluster (else one line naming the first, exit 2)."""
    unknown = unknown_pods(cluster, keys)
    if unknown:
        where = f"{file}: " if file is not None else ""
        raise _fail(f"{where}no pod {unknown[0]!r} (give namespace/name)")


@app.command()
def explain(
    pods_and_file: Annotated[
        list[str],
        typer.Argument(
            metavar="POD... FILE", help="the pods (namespace/name), then the kubectl List dump or native-schema cluster"
        ),
    ],
    output: Annotated[Output, typer.Option("--output", "-o", help="text, json or yaml")] = Output.text,
    scheduler_name: Annotated[str | None, typer.Option(help="the scheduler whose batch it is; '*' all")] = None,
    config: Annotated[Path | None, typer.Option(help="YAML/JSON engine configuration")] = None,
    time_limit: Annotated[float | None, typer.Option(min=0.01, help="solver time limit in seconds")] = None,
) -> None:
    """Pods' whole stories from one solve: the filters that turned nodes away, the nodes left and
    what each costs, the rule that kept each pod off the cheaper nodes, and the decision (its
    node, its plan step, or why it stays pending, and the evictions made for it)."""
    if len(pods_and_file) < 2:
        raise _fail("give the pods to explain (namespace/name), then the cluster file")
    *keys, name = pods_and_file
    file = Path(name)
    try:
        cfg = load_config(config)
        cluster = load_cluster(file)
        gc.freeze()  # the model lives until the command ends: later collections need not walk it
    except InputError as exc:
        raise _fail(str(exc)) from None
    _known_pods(cluster, keys, file)
    updates: dict[str, Any] = {}
    if scheduler_name is not None:
        updates["scheduler_name"] = scheduler_name
    if time_limit is not None:
        updates["solver"] = cfg.solver.model_copy(update={"time_limit": time_limit})
    stories = explain_pods(cluster, SolveOptions(config=cfg.model_copy(update=updates)), keys)
    if output is not Output.text:
        typer.echo(dump(explain_document(stories), output.value), nl=False)
        return
    render_explanations(Console(), stories)


@app.command()
def check(
    directory: Annotated[Path, typer.Argument(help="directory of fixtures (each: cluster.json + expect.yaml)")],
    time_limit: Annotated[
        float, typer.Option(min=0.01, help="time limit per solve in seconds, as deterministic work")
    ] = 10.0,
    output: Annotated[Output, typer.Option("--output", "-o", help="text, json or yaml")] = Output.text,
) -> None:
    """Run regression fixtures deterministically; exit 1 on any regression, with what changed."""
    try:
        fixtures = find_fixtures(directory)
    except InputError as exc:
        raise _fail(str(exc)) from None
    results = [run_fixture(f, time_limit=time_limit) for f in fixtures]
    failed = [r for r in results if not r.passed]
    if output is not Output.text:
        document = {"directory": str(directory), "passed": len(results) - len(failed), "fixtures": results}
        typer.echo(dump(document, output.value), nl=False)
        if failed:
            raise typer.Exit(1)
        return
    console = Console()
    table = Table(title=f"placer check {directory}")
    table.add_column("fixture")
    table.add_column("result")
    table.add_column("outcome / what changed", overflow="fold")
    for r in results:
        table.add_row(
            r.name, "[green]pass[/]" if r.passed else "[red]FAIL[/]", r.summary if r.passed else "; ".join(r.diffs)
        )
    console.print(table)
    console.print(f"{len(results) - len(failed)} of {len(results)} fixtures pass")
    if failed:
        raise typer.Exit(1)


@app.command()
def run(
    config: Annotated[
        Path | None, typer.Option(help="controller configuration (YAML/JSON, e.g. a ConfigMap file)")
    ] = None,
    kubeconfig: Annotated[str | None, typer.Option(help="kubeconfig file (default: in-cluster config)")] = None,
    dry_run: Annotated[
        bool | None, typer.Option("--dry-run/--no-dry-run", help="watch and solve, touch nothing")
    ] = None,
    scheduler_name: Annotated[str | None, typer.Option(help="schedule pods with this schedulerName")] = None,
    metrics_port: Annotated[int | None, typer.Option(min=0, max=65535, help="/healthz /readyz /metrics port")] = None,
    identity: Annotated[
        str | None,
        typer.Option(
            help="leader-election identity (default: $POD_NAME or hostname), suffixed with a random id per process"
        ),
    ] = None,
    log_level: Annotated[str, typer.Option(help="DEBUG, INFO, WARNING")] = "INFO",
) -> None:
    """Run the controller: batch pending pods, bind them, execute global plans."""
    try:
        cfg = load_controller_config(config, os.environ)
    except InputError as exc:
        raise _fail(str(exc)) from None
    overrides: dict[str, Any] = {}
    if dry_run is not None:
        overrides["dry_run"] = dry_run
    if scheduler_name is not None:
        overrides["scheduler_name"] = scheduler_name
    if metrics_port is not None:
        overrides["metrics_port"] = metrics_port
    cfg = cfg.model_copy(update=overrides)
    cfg = cfg.model_copy(update={"engine": cfg.engine.model_copy(update={"scheduler_name": cfg.scheduler_name})})
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # Imported here so that `placer solve` never loads the Kubernetes client.
    from placer.kube.client import connect  # noqa: PLC0415
    from placer.kube.runner import Runner  # noqa: PLC0415

    who = identity or os.environ.get("POD_NAME") or socket.gethostname()
    try:
        api = connect(kubeconfig, who)
    except InputError as exc:
        raise _fail(str(exc)) from None
    runner = Runner(api, cfg, who)
    raise typer.Exit(runner.run())


class SchemaKind(StrEnum):
    cluster = "cluster"
    result = "result"
    compare = "compare"
    explain = "explain"


@app.command()
def schema(
    kind: Annotated[
        SchemaKind,
        typer.Argument(
            help="cluster: the native input; result: `solve -o json`; compare: `solve --compare -o json`; "
            "explain: `explain -o json`"
        ),
    ] = SchemaKind.cluster,
) -> None:
    """Print a JSON Schema: placer's native cluster format, or one of its JSON answers."""
    shapes = {"cluster": cluster_schema, "result": result_schema, "compare": compare_schema, "explain": explain_schema}
    typer.echo(json.dumps(shapes[kind.value](), indent=2))


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
