"""Read a cluster file (kubectl List or native schema, JSON or YAML) into a Cluster."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from placer.errors import InputError
from placer.inputs.assemble import assemble_cluster
from placer.inputs.fields import Field
from placer.inputs.kubectl import is_list, read_list
from placer.inputs.native import is_native, read_native
from placer.models import Cluster

__all__ = ["load_cluster", "parse_cluster", "read_cluster"]


def load_cluster(path: str | Path) -> Cluster:
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise InputError(source, "", f"cannot read file: {reason}") from None
    return parse_cluster(source, text)


def _decode(source: str, text: str) -> Any:
    if not text.strip():
        raise InputError(source, "", "file is empty")
    try:
        return json.loads(text)
    except json.JSONDecodeError as json_err:
        if text.lstrip().startswith(("{", "[")):
            raise InputError(
                source, f"line {json_err.lineno} column {json_err.colno}", f"invalid JSON: {json_err.msg}"
            ) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1} column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "not JSON or YAML"
        raise InputError(source, where, f"invalid YAML: {problem}") from None


def parse_cluster(source: str, text: str) -> Cluster:
    return read_cluster(source, _decode(source, text))


def read_cluster(source: str, data: Any) -> Cluster:
    """A decoded document (a file's, or the List ``placer.kube.live`` reads from the API)."""
    if is_native(data):
        objs = read_native(source, data)
    elif is_list(data):
        objs = read_list(Field(source, "", data))
    else:
        raise InputError(
            source, "", "expected a Kubernetes List (kind: List, items) or placer's native schema (nodes, pods)"
        )
    return assemble_cluster(objs, source=source)
