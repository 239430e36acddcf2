"""The machine-readable output formats (``-o json`` and ``-o yaml``), for every answer.

Answers are built from pydantic models, dataclasses and string enums (a filter's name, a
strategy). ``plain`` turns any of them into plain JSON data once, here at the edge, so that both
formats print the same document and neither meets a type it cannot represent: ``yaml.safe_dump``
refuses a ``StrEnum`` member that ``json.dumps`` would let through as a string.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from enum import Enum
from typing import Any

import yaml
from pydantic import BaseModel

__all__ = ["dump", "plain"]


def plain(value: Any) -> Any:
    """``value`` as JSON data: dicts with string keys, lists, strings, numbers, booleans, None."""
    if isinstance(value, BaseModel):
        return plain(value.model_dump(mode="json", by_alias=True))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Enum):
        return plain(value.value)
    if isinstance(value, Mapping):
        return {str(plain(k)): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = [plain(v) for v in value]
        return sorted(items, key=str) if isinstance(value, set | frozenset) else items
    if value is None:
        return None
    if isinstance(value, str):
        return str(value)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else None  # JSON has no NaN or infinity
    item = getattr(value, "item", None)  # numpy scalars
    if callable(item):
        return plain(item())
    raise TypeError(f"no JSON form for {type(value).__name__}")


def dump(value: Any, output: str) -> str:
    """The answer as ``output`` ("json" or "yaml"), ending in a newline."""
    data = plain(value)
    if output == "json":
        return json.dumps(data, indent=2) + "\n"
    if output == "yaml":
        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    raise ValueError(f"not a data format: {output!r}")
