"""Values of CP-SAT linear expressions under a solution kept as a dict (variable index -> value)."""

from __future__ import annotations

from collections.abc import Mapping

from ortools.sat.python import cp_model, cp_model_helper

__all__ = ["evaluate"]


def evaluate(expr: cp_model.LinearExprT, values: Mapping[int, int]) -> int | None:
    """Value of a linear expression under ``values`` (None if a variable has no value there)."""
    if not isinstance(expr, cp_model.LinearExpr):
        return int(expr)
    flat = cp_model_helper.FlatIntExpr(expr)
    total = int(flat.offset)
    for var, coef in zip(flat.vars, flat.coeffs, strict=True):
        if var.index not in values:
            return None
        total += int(coef) * values[var.index]
    return total
