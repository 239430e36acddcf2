"""Inter-pod anti-affinity, affinity and topology spread between the pods of a batch.

The rules come compiled from ``placer.engine.topology`` (docs/topology.md); what depends on
running pods only is already in the groups' node masks. Per rule, on the domains the batch can
reach (nodes with variables):

- conflict of groups g, h on key k: per domain, a boolean says which of the two may be there
  (g == h: at most one pod of g per domain);
- affinity: a domain receives pods of g only if it holds a running provider or a boolean
  ``provided`` backed by a provider group's pod there; in seed mode, g uses one domain per term
  (with one term, also the domains its providers reach);
- spread: ``count(d) = running matches + counted batch pods``, ``low <= count(d)`` for every
  domain, and a domain with an owner pod keeps ``count(d) <= low + max_skew`` (``low`` is 0 when
  there are fewer domains than minDomains). Soft (ScheduleAnyway) rules add an ``excess``
  variable instead, which the preferences level penalises (``model.soft_penalty``);
- preferred anti-affinity between batch groups: per domain, the pairs of the group's pods there
  (g == h) or a boolean "both groups here" (g != h), penalised by the term's weight.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Protocol

import numpy as np
import numpy.typing as npt
from ortools.sat.python import cp_model

from placer.engine.batch import Batch
from placer.engine.topology import AffinityRule, Conflict, SpreadRule

__all__ = ["SOFT_SPREAD_WEIGHT", "Model", "build"]

SOFT_SPREAD_WEIGHT = 100  # per pod above the skew: as much as the strongest preferred term
CROWD_STEPS = 8  # pairs of a crowded domain are counted exactly up to this many pods, linearly beyond


class Model(Protocol):
    """What these constraints need of a model: the batch engine's and the global plan's both have it."""

    cp: cp_model.CpModel
    batch: Batch
    by_group: list[list[tuple[int, cp_model.IntVar]]]
    soft_penalty: list[tuple[int, cp_model.IntVar]]

    def ub(self, var: cp_model.IntVar) -> int: ...


class _Domains:
    """Per (group, key), the group's variables by domain; computed once per model."""

    def __init__(self, model: Model) -> None:
        self.model = model
        self._rows: dict[tuple[int, str], dict[int, list[cp_model.IntVar]]] = {}
        self.seeds: dict[tuple[tuple[int, ...], int], dict[int, cp_model.IntVar]] = {}

    def seed(self, family: tuple[int, ...], ti: int, d: int) -> cp_model.IntVar:
        """The boolean 'the family seeds domain d for term ti' (at most one per family and term)."""
        chosen = self.seeds.setdefault((family, ti), {})
        if d not in chosen:
            chosen[d] = self.model.cp.new_bool_var(f"seed_{family[0]}_{ti}_{d}")
        return chosen[d]

    def close(self) -> None:
        for chosen in self.seeds.values():
            if len(chosen) > 1:
                self.model.cp.add(cp_model.LinearExpr.sum(list(chosen.values())) <= 1)

    def of(self, gi: int, key: str) -> dict[int, list[cp_model.IntVar]]:
        cached = self._rows.get((gi, key))
        if cached is None:
            of_node = self.model.batch.topology.domains[key].of_node
            cached = _by_domain(self.model, gi, of_node)
            self._rows[gi, key] = cached
        return cached


def _by_domain(model: Model, gi: int, of_node: npt.NDArray[np.int64]) -> dict[int, list[cp_model.IntVar]]:
    out: dict[int, list[cp_model.IntVar]] = defaultdict(list)
    row = model.by_group[gi]
    if not row:
        return out
    doms = of_node[np.array([n for n, _ in row], dtype=np.int64)].tolist()
    for (_, var), d in zip(row, doms, strict=True):
        if d >= 0:
            out[d].append(var)
    return out


def _upper(model: Model, variables: list[cp_model.IntVar]) -> int:
    return sum(model.ub(v) for v in variables)


def _conflict(model: Model, c: Conflict, rows: _Domains) -> None:
    mine = rows.of(c.g, c.key)
    if c.g == c.h:
        for d, variables in mine.items():
            top = _upper(model, variables)
            if top <= 1:
                continue
            if not c.weight:
                model.cp.add(cp_model.LinearExpr.sum(variables) <= 1)
                continue
            # kube-scheduler subtracts the weight once per matching pod already there: s pods
            # in a domain cost s(s-1)/2 pairs = sum over j >= 1 of max(0, s - j).
            for j in range(1, min(top, CROWD_STEPS + 1)):
                extra = model.cp.new_int_var(0, top - j, f"crowd_{c.g}_{d}_{j}")
                model.cp.add(cp_model.LinearExpr.sum(variables) - j <= extra)
                model.soft_penalty.append((c.weight, extra))
        return
    theirs = rows.of(c.h, c.key)
    for d in mine.keys() & theirs.keys():
        g_here = model.cp.new_bool_var(f"anti_{c.g}_{c.h}_{d}")
        model.cp.add(cp_model.LinearExpr.sum(mine[d]) <= _upper(model, mine[d]) * g_here)
        if not c.weight:
            model.cp.add(cp_model.LinearExpr.sum(theirs[d]) <= _upper(model, theirs[d]) * (1 - g_here))
            continue
        both = model.cp.new_bool_var(f"near_{c.g}_{c.h}_{d}")
        model.cp.add(cp_model.LinearExpr.sum(theirs[d]) <= _upper(model, theirs[d]) * (1 - g_here + both))
        model.soft_penalty.append((c.weight, both))


def _affinity(model: Model, rule: AffinityRule, rows: _Domains) -> None:
    for ti, term in enumerate(rule.terms):
        mine = rows.of(rule.g, term.key)
        providers: dict[int, list[cp_model.IntVar]] = defaultdict(list)
        for h in term.providers:
            for d, variables in rows.of(h, term.key).items():
                providers[d].extend(variables)
        if rule.seed:
            family = tuple(rule.family or [rule.g])
            for d, variables in mine.items():
                allowed = [rows.seed(family, ti, d)]
                if providers.get(d):
                    provided = model.cp.new_bool_var(f"provided_{rule.g}_{ti}_{d}")
                    model.cp.add(provided <= cp_model.LinearExpr.sum(providers[d]))
                    allowed.append(provided)
                top = _upper(model, variables)
                model.cp.add(cp_model.LinearExpr.sum(variables) <= top * cp_model.LinearExpr.sum(allowed))
            continue
        for d, variables in mine.items():
            if term.constant[d]:
                continue
            if not providers.get(d):
                for v in variables:
                    model.cp.add(v == 0)
                continue
            provided = model.cp.new_bool_var(f"provided_{rule.g}_{ti}_{d}")
            model.cp.add(provided <= cp_model.LinearExpr.sum(providers[d]))
            model.cp.add(cp_model.LinearExpr.sum(variables) <= _upper(model, variables) * provided)


def _spread(model: Model, ri: int, rule: SpreadRule) -> None:
    domain = rule.domain
    counted: dict[int, list[cp_model.IntVar]] = defaultdict(list)
    for h in rule.counted:
        for d, variables in _by_domain(model, h, domain).items():
            counted[d].extend(variables)
    if rule.hard:
        for n, var in model.by_group[rule.owner]:
            if domain[n] < 0:
                model.cp.add(var == 0)  # not an eligible node: kube-scheduler filters it out
    owner = _by_domain(model, rule.owner, domain)
    if not owner:
        return
    base = rule.base.tolist()
    constant_low = min((base[d] for d in range(rule.size) if d not in counted), default=None)
    if rule.floor_is_zero():
        low: cp_model.LinearExprT = 0
    else:
        top = max(base[d] + _upper(model, counted[d]) for d in range(rule.size))
        if constant_low is not None:
            top = min(top, constant_low)
        low_var = model.cp.new_int_var(0, top, f"spread_low_{ri}")
        for d, variables in counted.items():
            model.cp.add(low_var <= base[d] + cp_model.LinearExpr.sum(variables))
        low = low_var
    for d, variables in owner.items():
        here = model.cp.new_bool_var(f"spread_{ri}_{d}")
        model.cp.add(cp_model.LinearExpr.sum(variables) <= _upper(model, variables) * here)
        count = base[d] + cp_model.LinearExpr.sum(counted.get(d, []))
        if rule.hard:
            model.cp.add(count <= low + rule.max_skew).only_enforce_if(here)
        else:
            excess = model.cp.new_int_var(0, base[d] + _upper(model, counted.get(d, [])), f"excess_{ri}_{d}")
            model.cp.add(count - low - rule.max_skew <= excess).only_enforce_if(here)
            model.soft_penalty.append((SOFT_SPREAD_WEIGHT, excess))


def build(model: Model) -> None:
    topo = model.batch.topology
    rows = _Domains(model)
    for c in topo.conflicts:
        _conflict(model, c, rows)
    for rule in topo.affinity:
        _affinity(model, rule, rows)
    rows.close()
    for ri, spread in enumerate(topo.spread):
        _spread(model, ri, spread)
