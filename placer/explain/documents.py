"""``placer explain -o json``: the stories as JSON data, versioned like every answer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import TypeAdapter

from placer.explain.stories import Explanation
from placer.models import SCHEMA_VERSION

__all__ = ["explain_document", "explain_schema"]


def explain_document(stories: Sequence[Explanation]) -> dict[str, Any]:
    """The document of ``placer explain`` (and the ``explain`` part of ``placer solve
    --explain``): one story per pod named, in the order named."""
    adapter = TypeAdapter(list[Explanation])
    return {
        "schemaVersion": SCHEMA_VERSION,
        "explanations": adapter.dump_python(list(stories), mode="json", by_alias=True),
    }


def explain_schema() -> dict[str, Any]:
    """The JSON Schema of ``explain_document``."""
    schema = TypeAdapter(list[Explanation]).json_schema(mode="serialization", by_alias=True)
    defs = schema.pop("$defs", {})
    for shape in defs.values():
        if shape.get("type") == "object":
            shape.setdefault("additionalProperties", False)
    return {
        "$defs": defs,
        "type": "object",
        "properties": {"schemaVersion": {"const": SCHEMA_VERSION, "type": "integer"}, "explanations": schema},
        "required": ["schemaVersion", "explanations"],
        "additionalProperties": False,
    }
