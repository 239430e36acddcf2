"""Workload groups in one topology domain (Kubernetes 1.37 ``schedulingConstraints.topology``).

For every level of the batch (``placer.engine.domains``: a PodGroup or CompositePodGroup with a
topology key) one boolean per domain its pods could use, at most one of them true, and every
placement variable of the level's pods on a node of domain d at most its bound times d's boolean:
all placed pods of the level share one domain. Several levels of a batch choose their domains in
the same model, so groups compete for domains jointly; a composite level holds the pods of the
groups below it, which nests the children's domains in the parent's. Written against what the
batch engine's model and the global plan's model share, so both apply it.

Per domain that no running pod uses yet, a flag set when any level takes it: the domain-packing
objective (``objectives.domains``) counts them, so groups fill partly used domains first and
whole domains stay free for the groups to come.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from ortools.sat.python import cp_model

from placer.engine.batch import Batch
from placer.engine.domains import DomainVars

__all__ = ["build"]


class DomainModel(Protocol):
    batch: Batch
    cp: cp_model.CpModel
    by_group: list[list[tuple[int, cp_model.IntVar]]]
    domains: DomainVars | None

    @property
    def check(self) -> Callable[[], None]:  # between the steps of the build (``Model.check``)
        ...

    def ub(self, var: cp_model.IntVar) -> int: ...


def build(model: DomainModel) -> None:
    batch = model.batch
    if not batch.levels:
        return
    out = DomainVars()
    taken: dict[tuple[str, int], list[cp_model.IntVar]] = {}
    for li, level in enumerate(batch.levels):
        model.check()
        rows = [(n, var) for gi in level.groups for n, var in model.by_group[gi]]
        picks: dict[int, tuple[cp_model.IntVar, list[cp_model.IntVar]]] = {}
        for n, var in rows:
            d = int(level.domain[n])
            if d < 0:
                model.cp.add(var == 0)  # not a node of an allowed domain (the prefilter's masks agree)
                continue
            if d not in picks:
                picks[d] = (model.cp.new_bool_var(f"domain{li}_{d}"), [])
            pick, implied = picks[d]
            model.cp.add(var <= model.ub(var) * pick)
            implied.append(var)
        if not picks:
            continue
        model.cp.add_at_most_one([pick for pick, _ in picks.values()])
        for d, (pick, implied) in picks.items():
            out.picks.append((pick, implied))
            taken.setdefault((level.key, d), []).append(pick)
    fresh = {key: batch.fresh(key) for key in {level.key for level in batch.levels}}
    for (key, d), picks_of in sorted(taken.items()):
        if fresh[key][d]:
            opened = model.cp.new_bool_var(f"opened_{key}_{d}")
            for pick in picks_of:
                model.cp.add(pick <= opened)
            out.opened.append((opened, picks_of))
    model.domains = out
