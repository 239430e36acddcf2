"""Vectorised label matching over all nodes at once: nodeSelector, node affinity terms.

Semantics are Kubernetes': a nodeSelector needs every key=value pair; required terms are ORed,
the requirements inside a term ANDed; a term with no requirement matches nothing; NotIn and
DoesNotExist hold when the key is absent; Gt/Lt compare integers and never match a label that
is not an integer; matchFields supports metadata.name.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from placer.models import Node, NodeSelectorRequirement, NodeSelectorTerm
from placer.models.integers import parse_int

__all__ = ["BoolArray", "NodeLabels"]

BoolArray = npt.NDArray[np.bool_]
_ABSENT = -1


def _as_int(text: str) -> int | None:
    """Go's strconv.ParseInt(text, 10, 64): optional sign, ASCII digits only, within int64."""
    return parse_int(text)


class NodeLabels:
    """Label columns of a node list, encoded once and queried per requirement."""

    def __init__(self, nodes: Sequence[Node]) -> None:
        self.size = len(nodes)
        self._nodes = nodes
        self._codes: dict[str, tuple[npt.NDArray[np.int32], dict[str, int]]] = {}
        self._ints: dict[str, tuple[npt.NDArray[np.int64], BoolArray]] = {}
        self._names = {n.name: i for i, n in enumerate(nodes)}

    def _column(self, key: str) -> tuple[npt.NDArray[np.int32], dict[str, int]]:
        col = self._codes.get(key)
        if col is None:
            vocab: dict[str, int] = {}
            codes = np.full(self.size, _ABSENT, dtype=np.int32)
            for i, node in enumerate(self._nodes):
                value = node.labels.get(key)
                if value is not None:
                    codes[i] = vocab.setdefault(value, len(vocab))
            col = (codes, vocab)
            self._codes[key] = col
        return col

    def _int_column(self, key: str) -> tuple[npt.NDArray[np.int64], BoolArray]:
        col = self._ints.get(key)
        if col is None:
            values = np.zeros(self.size, dtype=np.int64)
            valid = np.zeros(self.size, dtype=np.bool_)
            for i, node in enumerate(self._nodes):
                parsed = _as_int(node.labels.get(key, "x"))
                if parsed is not None:
                    values[i], valid[i] = parsed, True
            col = (values, valid)
            self._ints[key] = col
        return col

    def _in(self, key: str, values: Sequence[str]) -> BoolArray:
        codes, vocab = self._column(key)
        wanted = [vocab[v] for v in values if v in vocab]
        return np.isin(codes, np.asarray(wanted, dtype=np.int32))

    def requirement(self, req: NodeSelectorRequirement) -> BoolArray:
        op = req.operator
        if op == "In":
            return self._in(req.key, req.values)
        if op == "NotIn":
            return ~self._in(req.key, req.values)
        codes, _ = self._column(req.key)
        present: BoolArray = codes != _ABSENT
        if op == "Exists":
            return present
        if op == "DoesNotExist":
            return ~present
        bound = _as_int(req.values[0]) if len(req.values) == 1 else None
        if bound is None:
            return np.zeros(self.size, dtype=np.bool_)
        ints, valid = self._int_column(req.key)
        result: BoolArray = valid & (ints > bound) if op == "Gt" else valid & (ints < bound)
        return result

    def field(self, req: NodeSelectorRequirement) -> BoolArray:
        mask = np.zeros(self.size, dtype=np.bool_)
        for name in req.values:
            idx = self._names.get(name)
            if idx is not None:
                mask[idx] = True
        return mask if req.operator == "In" else ~mask

    def term(self, term: NodeSelectorTerm) -> BoolArray:
        if not term.match_expressions and not term.match_fields:
            return np.zeros(self.size, dtype=np.bool_)
        mask = np.ones(self.size, dtype=np.bool_)
        for req in term.match_expressions:
            mask &= self.requirement(req)
        for req in term.match_fields:
            mask &= self.field(req)
        return mask

    def selector(self, node_selector: dict[str, str], required: Sequence[NodeSelectorTerm] | None) -> BoolArray:
        mask = np.ones(self.size, dtype=np.bool_)
        for key, value in node_selector.items():
            mask &= self._in(key, [value])
        if required is not None:
            any_term = np.zeros(self.size, dtype=np.bool_)
            for term in required:
                any_term |= self.term(term)
            mask &= any_term
        return mask
