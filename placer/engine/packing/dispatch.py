"""The packing dispatcher: which technique runs on a tight batch, when, and on what budget.

A batch is tight when the greedy pass leaves pods out that have feasible nodes. Then, in order:

1. ``starts``: the classic heuristics (``placer.engine.packing.starts``), the pack strategy's
   greedy and the caller's alternative (kube-scheduler's answer) are each checked and the best per
   key becomes the hint. Milliseconds; the answer never places fewer pods per key than any of them.
2. ``prepare`` (before the model is built): a batch that bin completion applies to gets every
   feasible node as a candidate, so that any packing is a solution of the model. Where that would
   make the model too large, or under ``--deterministic`` (a race is not reproducible), completion
   runs now, alone, on its share of the budget.
3. ``settle`` (on the built model): the CP-SAT search "every placeable pod placed" (``place_all``)
   runs on its share of the budget left; where bin completion applies and was not run in
   ``prepare``, a Python thread races the CP-SAT search beside CP-SAT's workers, and the first to
   place every pod stops the other. The thread runs bin completion on its share when the pods
   fill the nodes exactly (where it usually wins in seconds and CP-SAT finds nothing; elsewhere
   it rarely succeeds), then the ejection search (``ejection``) and repacking (``repack``: small
   CP-SAT models on a few nodes at a time) in turns, each from the other's answer, from the best
   start until the CP-SAT search ends; once compiled, the overload search (``overload``: every pod
   on a node, the overload driven to zero) and the LP dive (``dive``: the linear relaxation of a
   cover by node contents rounded, where a node's contents can be listed) each run on a thread of
   their own beside them. When nobody places every pod, the last answer of the ejection search
   and repack becomes the start of the maximisation if it places more pods per key.

``TECHNIQUES`` lists each technique with its precondition and budget (docs/bench/techniques.md
reports what each achieves on the public corpus); the budgets are in ``tuning``.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from placer.engine.batch import Batch
from placer.engine.constraints.symmetry import Symmetry
from placer.engine.greedy import Assignment, counts_of
from placer.engine.levels import DETERMINISTIC_UNITS_PER_SECOND, Budget, LevelReport, LevelSolver
from placer.engine.model import Model
from placer.engine.packing import clock, completion, dive, ejection, kernel, overload, placeall, repack, starts, tuning
from placer.models import POD_COUNT

__all__ = [
    "COMPLETION",
    "DIVE",
    "EJECTION",
    "HEURISTICS",
    "OVERLOAD",
    "REPACK",
    "TECHNIQUES",
    "Technique",
    "enabled",
    "prepare",
    "settle",
    "start",
]

HEURISTICS = "heuristics"
COMPLETION = "bin-completion"
EJECTION = "ejection"
REPACK = "repack"
OVERLOAD = "overload"
DIVE = "dive"
_STOP_EVERY = 0.01  # seconds between two requests to stop the CP-SAT search once completion won


@dataclass(frozen=True)
class Technique:
    name: str
    applies: str  # its precondition, in words
    budget: str  # what it may spend, in words


TECHNIQUES = (
    Technique(
        HEURISTICS,
        "a tight batch without inter-pod rules",
        "first-fit decreasing, best-fit decreasing, dot-product: milliseconds; best start per key wins",
    ),
    Technique(
        placeall.PLACE_ALL,
        "the volume bound allows every placeable pod (per resource, demand <= free room of their nodes)",
        f"{tuning.PLACE_ALL_SHARE:.0%} of the budget left, every core (a worker fewer while the overload search races)",
    ),
    Technique(
        COMPLETION,
        f"identical free nodes, no inter-pod rules, host ports or gangs, at most {tuning.COMPLETION_MAX_PODS} pods",
        f"when the pods fill the nodes exactly, races place-all for at most {tuning.COMPLETION_RACE_SHARE:.0%} of "
        "the budget left (under --deterministic, or when the model would not hold every node: runs first, alone, "
        "on that share, as search steps under --deterministic)",
    ),
    Technique(
        EJECTION,
        "as bin-completion, on a wall-clock budget (not under --deterministic)",
        f"races place-all after bin completion, until place-all ends: in turns with repack, "
        f"{tuning.REPACK_AFTER * tuning.REPACK_CYCLE:g} s of every {tuning.REPACK_CYCLE:g} s (all of it when "
        "repack is off), each from the other's answer; the last answer becomes the maximisation's start when "
        "it places more pods",
    ),
    Technique(
        OVERLOAD,
        "as ejection, once the compiled steps are ready",
        "races place-all after bin completion, on a thread of its own beside the ejection search and repack, "
        "until place-all ends or one of them places every pod; it answers only with a packing of every pod",
    ),
    Technique(
        DIVE,
        f"as ejection, once its listing is compiled, where a node has at most {tuning.DIVE_CONTENTS:,} "
        "maximal contents",
        "races place-all after bin completion, on a thread of its own, until place-all ends or one of the "
        "others places every pod: dives one after the other; it answers only with a packing of every pod",
    ),
    Technique(
        REPACK,
        "as ejection, while pods are left out",
        f"in turns with the ejection search (the rest of every {tuning.REPACK_CYCLE:g} s) until place-all ends: "
        f"neighbourhoods of {tuning.REPACK_NODES_MIN}-{tuning.REPACK_NODES_MAX} nodes, one CP-SAT worker, at most "
        f"{tuning.REPACK_SECONDS:g} s a question",
    ),
)


def enabled(name: str) -> bool:
    """Whether technique ``name`` runs (all do, unless ``tuning.OFF`` names it)."""
    return name not in tuning.OFF


def start(batch: Batch, hint: Assignment, others: list[Assignment | None], budget: Budget | None = None) -> Assignment:
    """The best start of a tight batch per key: ``hint`` (the greedy pass), ``others`` (other
    greedy answers, the caller's alternative) and every heuristic of ``starts`` that ``budget``
    leaves time for."""
    heuristics = starts.heuristic_starts(batch, budget) if enabled(HEURISTICS) else []
    return starts.best(batch, hint, [*others, *heuristics])


def _raced(batch: Batch) -> bool:
    """Completion applies and the model will hold any packing it finds (every feasible node is a
    candidate of every group)."""
    if completion.applies(batch) is None:
        return False
    return all(np.isin(g.feasible, g.candidates).all() for g in batch.groups)


def prepare(batch: Batch, budget: Budget) -> Assignment | None:
    """Before the model is built: widen a completion batch's candidates (``placeall.widen``); if
    completion cannot race (the model would not hold its answer, or the budget is deterministic),
    run it now on its share and return its answer (checked by ``starts.adopt``)."""
    placeall.widen(batch)  # a packing may need every node, whichever technique finds it
    nodes = completion.applies(batch) if enabled(COMPLETION) else None
    if nodes is None or (_raced(batch) and not budget.deterministic):
        return None
    share = tuning.COMPLETION_RACE_SHARE * max(budget.left(), 0.0)
    if budget.deterministic:
        per_unit = tuning.STEPS_PER_SECOND / DETERMINISTIC_UNITS_PER_SECOND
        found, used = completion.complete(batch, nodes, steps=int(share * per_unit))
        budget.charge(used / per_unit)
    else:
        found, _ = completion.complete(batch, nodes, seconds=share)
    return None if found is None else _adopted(batch, found)


def _adopted(batch: Batch, found: Assignment) -> Assignment | None:
    placements = [
        (pod, int(n))
        for group, picked in zip(batch.groups, found, strict=True)
        for pod, n in zip(group.pods, picked.tolist(), strict=True)
        if n >= 0
    ]
    return starts.adopt(batch, placements)


def settle(model: Model, symmetry: Symmetry, levels: LevelSolver, budget: Budget, *, raced: bool) -> bool:
    """Every placeable pod placed, on the built model: the CP-SAT search alone, or raced by bin
    completion and the ejection search (``raced``: ``prepare`` left it to this race). On success
    the answer is in ``levels.values`` (a solution of the model) and True is returned. When the
    race ends without a packing, the ejection search's best answer becomes the current one if it
    places more pods per key."""
    restrict = placeall.place_all(model, symmetry)
    batch = model.batch
    nodes = completion.applies(batch) if raced and not budget.deterministic else None
    searching = enabled(placeall.PLACE_ALL)  # else the placed level's maximisation is the CP-SAT part
    racing = (
        nodes is not None and _raced(batch) and any(enabled(t) for t in (COMPLETION, EJECTION, REPACK, OVERLOAD, DIVE))
    )
    if nodes is None or not racing:
        return searching and levels.feasible(placeall.PLACE_ALL, restrict, share=tuning.PLACE_ALL_SHARE)
    solvers: list[object] = []
    won = threading.Event()  # a race technique placed every pod: the CP-SAT search must not start or go on
    outcome: list[bool] = []

    # While the overload search races beside the turns, the two compiled searches keep about a
    # core busy: CP-SAT gets one worker fewer (on the 2-core reference machine, 8 of the corpus's
    # 24 hardest misses packed instead of 5: docs/bench/techniques.md).
    sides = _sides()  # decided once: the kernel may finish compiling during the race
    fewer = 1 if any(name == OVERLOAD for name, _ in sides) else 0

    def starting(solver: object) -> bool:
        solvers.append(solver)
        params = solver.parameters  # type: ignore[attr-defined]
        params.num_workers = max(1, params.num_workers - fewer)
        return not won.is_set()

    start = _current(model, levels)
    race = tuning.PLACE_ALL_SHARE * max(budget.left() - budget.spare, 0.0)  # as long as the CP-SAT search may run
    with clock.stoppable() as stop:

        def search() -> None:
            if not searching:
                return
            try:
                outcome.append(
                    levels.feasible(placeall.PLACE_ALL, restrict, share=tuning.PLACE_ALL_SHARE, starting=starting)
                )
            finally:
                stop.set()  # the race's techniques give up at their next look at the clock

        thread = threading.Thread(target=search, name="placer-place-all", daemon=True)
        thread.start()
        found, partial = _race(batch, nodes, start, race, levels, sides)
        counts = _counts(model, symmetry, found) if found is not None and not stop.is_set() else None
        if counts is not None:
            won.set()
            while thread.is_alive():
                for solver in solvers:
                    solver.stop_search()  # type: ignore[attr-defined]
                thread.join(_STOP_EVERY)
        thread.join()
    if outcome and outcome[0]:
        return True  # the CP-SAT search placed every pod (its answer is in levels.values)
    if counts is None:
        kept = _counts(model, symmetry, partial) if partial is not None else None
        if kept is not None:  # places more per key than the start: the maximisation's hint
            for key, var in model.y.items():
                levels.values[var.index] = kept.get(key, 0)
        return False
    for key, var in model.y.items():
        levels.values[var.index] = counts.get(key, 0)
    return True


def _race(
    batch: Batch,
    nodes: list[int],
    start: Assignment,
    seconds: float,
    levels: LevelSolver,
    sides: list[tuple[str, _Search]],
) -> tuple[Assignment | None, Assignment | None]:
    """The race's Python side: bin completion (when the pods fill the nodes exactly in every
    resource: exact fills are what it finds fast), then the ejection search and repacking in turns
    from ``start`` (``tuning.REPACK_CYCLE``), and beside them the overload search and the LP dive,
    each on its own thread, until ``seconds`` pass, one of them places every pod or the CP-SAT
    search ends (turns that end sooner without a packing leave the other two running). A
    packing of every pod (or None), and the turns' last answer when it places more per key than
    ``start`` (or None)."""
    began = time.monotonic()
    if enabled(EJECTION) and seconds >= tuning.EJECT_PRIME_SECONDS:
        kernel.prime()  # compiled (or loaded) once per process; the Python steps run until it is ready
    if enabled(COMPLETION) and _exact(batch, nodes):
        share = min(tuning.COMPLETION_RACE_SHARE * seconds / tuning.PLACE_ALL_SHARE, seconds)
        found, _ = completion.complete(batch, nodes, seconds=share)
        levels.reports.append(
            LevelReport(COMPLETION, _status(found is not None), float("nan"), float("nan"), time.monotonic() - began)
        )
        if found is not None:
            return found, None
    left = seconds - (time.monotonic() - began)
    if not sides or left <= 0:
        return _turns(batch, nodes, start, left, levels)
    packed: list[Assignment] = []
    with clock.stoppable() as done:  # set by whichever thread places every pod first

        def side(name: str, search: _Search) -> None:
            at = time.monotonic()
            found = search(batch, nodes, start, seconds=left, seed=levels.config.solver.seed)
            if found is not None:
                packed.append(found)
                done.set()
            levels.reports.append(
                LevelReport(name, _status(found is not None), float("nan"), float("nan"), time.monotonic() - at)
            )

        threads = [
            # each thread sees this race's stops and the caller's: it runs in a copy of the context
            threading.Thread(
                target=contextvars.copy_context().run, args=(side, name, search), name=f"placer-{name}", daemon=True
            )
            for name, search in sides
        ]
        for thread in threads:
            thread.start()
        try:
            found, partial = _turns(batch, nodes, start, left, levels)
        except BaseException:
            done.set()
            for thread in threads:
                thread.join()
            raise
        if found is not None:  # the turns placed every pod: the others stop
            done.set()
        for thread in threads:  # else they run on to their deadline (the turns' own), a packing or a stop
            thread.join()
    if packed:
        return packed[0], None
    return found, partial


# The searches that race the turns on threads of their own: each module's ``search`` answers a
# packing of every pod or None, its ``available`` says whether it can run (compiled).
_SIDES = ((OVERLOAD, overload), (DIVE, dive))
_Search = Callable[..., Assignment | None]


def _sides() -> list[tuple[str, _Search]]:
    """The searches of ``_SIDES`` that are on and can run now."""
    return [(name, module.search) for name, module in _SIDES if enabled(name) and module.available()]


def _turns(
    batch: Batch, nodes: list[int], start: Assignment, seconds: float, levels: LevelSolver
) -> tuple[Assignment | None, Assignment | None]:
    """The ejection search and repacking in turns from ``start`` for ``seconds`` (``_race``)."""
    began = time.monotonic()
    seed = levels.config.solver.seed
    turns = [name for name in (EJECTION, REPACK) if enabled(name)]
    spent = dict.fromkeys(turns, 0.0)
    best: Assignment | None = start
    turn = 0
    while turns and best is not None and not _all_placed(batch, best) and clock.now() != float("inf"):
        at = time.monotonic()
        left = seconds - (at - began)
        if left <= 0:
            break
        name = turns[turn % len(turns)]
        share = tuning.REPACK_AFTER if name == EJECTION else 1.0 - tuning.REPACK_AFTER
        slice_ = left if len(turns) == 1 else min(left, tuning.REPACK_CYCLE * share)
        search = ejection.search if name == EJECTION else repack.search
        found = search(batch, nodes, best, seconds=slice_, seed=seed + turn)
        spent[name] += time.monotonic() - at
        if found is None:  # stopped before it began, or no search applies: keep what the others found
            break
        best = found
        turn += 1
    packed = best is not None and _all_placed(batch, best)
    for name, took in spent.items():
        levels.reports.append(LevelReport(name, _status(packed), float("nan"), float("nan"), took))
    if best is None or _all_placed(batch, best):
        return best, None
    return None, (best if starts.better_start(batch, start, best) is best else None)


def _status(packed: bool) -> str:
    """A race technique's report status: it placed every pod, the race was stopped, or neither."""
    return "optimal" if packed else ("stopped" if clock.now() == float("inf") else "unknown")


def _exact(batch: Batch, nodes: list[int]) -> bool:
    """The pods with a feasible node fill ``nodes`` exactly in every resource they ask for (the pod
    count aside)."""
    demand = sum((g.vec * g.size for g in batch.groups if len(g.feasible)), np.zeros_like(batch.snapshot.free[0]))
    room = batch.snapshot.free[nodes].sum(axis=0)
    asked = (demand > 0) & (np.array(batch.snapshot.resources) != POD_COUNT)
    return bool(np.all(demand[asked] == room[asked]))


def _all_placed(batch: Batch, assignment: Assignment) -> bool:
    pairs = zip(batch.groups, assignment, strict=True)
    return all(int((picked >= 0).sum()) == g.size for g, picked in pairs if len(g.feasible))


def _current(model: Model, levels: LevelSolver) -> Assignment:
    """The current answer (``levels.values``) as the batch's assignment."""
    chosen: list[list[int]] = [[] for _ in model.batch.groups]
    for (gi, n), var in model.y.items():
        chosen[gi] += [n] * levels.values.get(var.index, 0)
    return completion.padded(model.batch, chosen)


def _counts(model: Model, symmetry: Symmetry, found: Assignment) -> dict[tuple[int, int], int] | None:
    """Completion's answer as the model's counts (identical nodes permuted as the symmetry breaking
    orders them), or None when the model cannot hold it or it is not a valid start."""
    adopted = _adopted(model.batch, found)
    if adopted is None:
        return None
    counts = symmetry.order(counts_of(adopted))
    if any(key not in model.y for key in counts):
        return None
    return counts
