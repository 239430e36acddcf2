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

__all__ = ["MAX_DEPTH", "decode_document", "load_cluster", "parse_cluster", "read_cluster", "read_file"]

# Real Kubernetes objects nest about 15 levels deep (a List item's affinity term's expression's
# values); anything far deeper is refused with one line instead of exhausting Python's stack.
MAX_DEPTH = 64


def read_file(path: str | Path) -> str:
    """A file's text, or one line naming the file and why it cannot be read."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise InputError(str(path), "", f"cannot read file: {reason}") from None


def load_cluster(path: str | Path) -> Cluster:
    return parse_cluster(str(path), read_file(path))


def _too_deep(source: str, where: str) -> InputError:
    return InputError(source, where, f"nested more than {MAX_DEPTH} levels deep")


def _nests_too_deep(data: Any) -> bool:
    """Whether containers nest more than MAX_DEPTH levels deep (level by level: no recursion)."""
    level = [data] if isinstance(data, dict | list) else []
    for _ in range(MAX_DEPTH):
        below: list[Any] = []
        for value in level:
            children = value.values() if isinstance(value, dict) else value
            below += [c for c in children if isinstance(c, dict | list)]
        if not below:
            return False
        level = below
    return True


def _too_deep_path(data: Any) -> str:
    """Where ``data`` first nests deeper than MAX_DEPTH (walked with paths only on failure)."""
    stack: list[tuple[Any, str, int]] = [(data, "", 0)]
    while stack:
        value, path, depth = stack.pop()
        if depth >= MAX_DEPTH and isinstance(value, dict | list):  # the (MAX_DEPTH + 1)th level
            return path
        if isinstance(value, dict):
            stack += [(v, f"{path}.{k}" if path else str(k), depth + 1) for k, v in value.items()]
        elif isinstance(value, list):
            stack += [(v, f"{path}[{i}]", depth + 1) for i, v in enumerate(value)]
    return ""


def _check_depth(source: str, data: Any) -> None:
    """Refuse a document nested deeper than MAX_DEPTH, naming where."""
    if _nests_too_deep(data):
        path = _too_deep_path(data)
        raise _too_deep(source, path if len(path) <= 60 else path[:60] + "...")


def decode_document(source: str, text: str) -> Any:
    """A file's text as JSON or YAML, refused in one line when empty, malformed or nested too deep."""
    if not text.strip():
        raise InputError(source, "", "file is empty")
    try:
        data = _parse(source, text)
    except RecursionError:  # the JSON and YAML parsers recurse once per level
        raise _too_deep(source, "") from None
    _check_depth(source, data)
    return data


def _parse(source: str, text: str) -> Any:
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
    return read_cluster(source, decode_document(source, text))


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
