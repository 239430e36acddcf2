"""Domain packing: the fewest whole topology domains opened by the batch's workload groups.

A group that must sit in one domain (``constraints.domains``) goes where pods already run when it
can, so that whole domains (racks with nothing on them) stay free for the next group that needs a
whole one: the fragmentation of domains, which node-level packing does not see. One term, the
number of domains that were empty and that some group takes, minimised after the preferences
and before the placement strategy.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ortools.sat.python import cp_model

from placer.engine.objectives.decisions import Decisions
from placer.engine.objectives.strategy import Aux, Term

__all__ = ["LEVEL", "build"]

LEVEL = "domains"


def _any(variables: list[cp_model.IntVar]) -> Callable[[Mapping[int, int]], int | None]:
    """1 when any of ``variables`` is positive in the values so far."""

    def value(values: Mapping[int, int]) -> int | None:
        got = [values.get(v.index) for v in variables]
        if any(g is None for g in got):
            return None
        return int(any(g for g in got))

    return value


def build(model: Decisions) -> list[Term]:
    found = model.domains
    if found is None or not found.opened:
        return []
    aux = [Aux(pick, _any(implied)) for pick, implied in found.picks]
    by_pick = {pick.index: implied for pick, implied in found.picks}
    for opened, picks in found.opened:
        aux.append(Aux(opened, _any([v for p in picks for v in by_pick[p.index]])))
    expr = cp_model.LinearExpr.sum([opened for opened, _ in found.opened])
    return [Term(LEVEL, expr, False, aux=tuple(aux))]
