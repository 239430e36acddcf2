"""Soft placement wishes.

- ``kept``: pods annotated ``placer.io/when-no-node-fits: ignore-affinity`` may use non-matching
  nodes, but only when matching ones are full: maximise how many land on matching nodes, right
  after objective (1).
- ``preferences``: objective (3): preferred node-affinity weights, minus 100 per untolerated
  PreferNoSchedule taint (kube-scheduler's NodeAffinity and TaintToleration scores, unnormalised),
  plus preferred pod (anti-)affinity weights against running pods, minus 100 per pod that a
  ScheduleAnyway spread constraint sees above its skew, minus the weight of a preferred
  anti-affinity term per batch pod crowding another it prefers to avoid.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from placer.engine.objectives.decisions import Decisions
from placer.engine.objectives.strategy import Term

__all__ = ["KEPT", "PREFERENCES", "kept", "preferences"]

KEPT = "affinity-kept"
PREFERENCES = "preferences"


def kept(model: Decisions) -> list[Term]:
    terms: list[cp_model.IntVar] = []
    has_outside = False
    for gi, row in enumerate(model.by_group):
        group = model.batch.groups[gi]
        if group.masks.binding != "relaxed":
            continue
        for n, var in row:
            if group.masks.matching[n]:
                terms.append(var)
            else:
                has_outside = True
    return [Term(KEPT, cp_model.LinearExpr.sum(terms), True)] if terms and has_outside else []


def preferences(model: Decisions) -> list[Term]:
    terms: list[cp_model.LinearExprT] = []
    for gi, row in enumerate(model.by_group):
        pref = model.batch.groups[gi].masks.preference
        terms.extend(int(pref[n]) * var for n, var in row if pref[n] != 0)
    terms.extend(-weight * var for weight, var in model.soft_penalty)
    return [Term(PREFERENCES, cp_model.LinearExpr.sum(terms), True)] if terms else []
