"""Read a cluster file (kubectl List or native schema, JSON or YAML) into a Cluster."""

from __future__ import annotations

import gc
import json
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import yaml

from placer.errors import InputError
from placer.inputs.assemble import assemble_cluster
from placer.inputs.dump import is_list, read_list
from placer.inputs.fields import Field
from placer.inputs.native import is_native, read_native
from placer.models import Cluster

__all__ = [
    "MAX_ALIASED",
    "MAX_DEPTH",
    "decode_document",
    "load_cluster",
    "load_yaml",
    "parse_cluster",
    "read_cluster",
    "read_file",
]

# Real Kubernetes objects nest about 15 levels deep (a List item's affinity term's expression's
# values); anything far deeper is refused with one line instead of exhausting Python's stack.
MAX_DEPTH = 64
# YAML aliases (``*a``) may repeat at most this many values beyond those written out: a few hundred
# bytes of nested aliases (the "billion laughs") otherwise expand to billions of values, which
# every later walk of the document visits one by one.
MAX_ALIASED = 1_000_000
_HUGE_INTEGER = "a number with more than 4,300 digits"


def read_file(path: str | Path) -> str:
    """A file's text, or one line naming the file and why it cannot be read."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise InputError(str(path), "", f"cannot read file: {reason}") from None


@contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """Python's cycle collector paused while a document is read. Decoding and modelling a dump
    allocate millions of containers and create no reference cycles, yet each few hundred
    allocations start a collection that walks the ones still alive: on a 100 MB dump that is
    three quarters of the decoding time (2.9 s against 0.7 s for json.loads alone)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def load_cluster(path: str | Path) -> Cluster:
    source = str(path)
    with _no_cycle_collection():
        # The text is dropped once decoded: the models are built beside the document alone.
        data = decode_document(source, read_file(path))
        return read_cluster(source, data)


def _too_deep(source: str, where: str) -> InputError:
    return InputError(source, where, f"nested more than {MAX_DEPTH} levels deep")


def _nests_too_deep(data: Any) -> bool:
    """Whether containers nest more than MAX_DEPTH levels deep (level by level: no recursion).
    The decoders build plain dicts and lists only, so exact type tests suffice (a third faster
    than isinstance on the 1.5 million containers of a 100 MB dump)."""
    level = [data] if isinstance(data, dict | list) else []
    for _ in range(MAX_DEPTH):
        below: list[Any] = []
        add = below.append
        for value in level:
            for child in value.values() if type(value) is dict else value:
                kind = type(child)
                if kind is dict or kind is list:
                    add(child)
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


def _stack_depth() -> int:
    frame: FrameType | None = sys._getframe(1)
    depth = 0
    while frame is not None:
        frame, depth = frame.f_back, depth + 1
    return depth


def _json_at_limit(text: str, headroom: int) -> Any:
    """json.loads with the interpreter's recursion limit ``headroom`` above this call's depth."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(_stack_depth() + headroom)
    try:
        return json.loads(text)
    finally:
        sys.setrecursionlimit(limit)


def _nested(levels: int) -> str:
    return "[" * levels + "]" * levels


def _json_headroom() -> int | None:
    """The recursion headroom at which json.loads, called from ``_decode_json``, decodes MAX_DEPTH
    levels and refuses one more; None when the decoder does not count its levels against the
    recursion limit (CPython 3.11's C decoder does; later versions count C recursion apart).
    Probed from the same call depth as the real decode each time (C calls between frames count
    too, so a value measured elsewhere may be off by one); a few dozen tiny decodes."""
    for headroom in range(MAX_DEPTH, 2 * MAX_DEPTH):
        try:
            _json_at_limit(_nested(MAX_DEPTH), headroom)
        except RecursionError:
            continue
        try:
            _json_at_limit(_nested(MAX_DEPTH + 1), headroom)
        except RecursionError:
            return headroom
        return None
    return None


def _decode_json(text: str) -> tuple[Any, bool]:
    """The JSON document and whether its depth is already known to be within MAX_DEPTH.

    Walking a 100 MB dump's 1.5 million containers for their depth takes longer than decoding it;
    where the decoder counts its levels against the recursion limit, a limit set MAX_DEPTH levels
    above the caller makes the decoder itself refuse a deeper document, at no cost. The limit is
    global to the interpreter, so this is done only while no other thread runs (the CLI's read),
    never in the controller."""
    headroom = _json_headroom() if threading.active_count() == 1 else None
    if headroom is None:
        return json.loads(text), False
    try:
        return _json_at_limit(text, headroom), True
    except RecursionError:
        return json.loads(text), False  # deeper than MAX_DEPTH: decoded again for the walk to say where


def decode_document(source: str, text: str) -> Any:
    """A file's text as JSON or YAML, refused in one line when empty, malformed or nested too deep."""
    if not text.strip():
        raise InputError(source, "", "file is empty")
    try:
        data, depth_checked = _parse(source, text)
    except RecursionError:  # the JSON and YAML parsers recurse once per level
        raise _too_deep(source, "") from None
    if not depth_checked:
        _check_depth(source, data)
    return data


# libyaml's parser when PyYAML was built with it (about five times faster); the same safe
# constructor either way.
_YAML_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _parse(source: str, text: str) -> tuple[Any, bool]:
    try:
        return _decode_json(text)
    except json.JSONDecodeError as json_err:
        if text.lstrip().startswith(("{", "[")):
            raise InputError(
                source, f"line {json_err.lineno} column {json_err.colno}", f"invalid JSON: {json_err.msg}"
            ) from None
    except ValueError:  # Python's int() refuses more than 4,300 digits
        raise InputError(source, "", f"invalid JSON: {_HUGE_INTEGER}") from None
    return load_yaml(source, text), False


def _expanded(node: yaml.Node, sizes: dict[int, int]) -> int:
    """How many values ``node`` stands for once every alias in it is expanded (shared nodes
    counted once per use; ``sizes`` memoises them, so the count itself takes linear time)."""
    known = sizes.get(id(node))
    if known is not None:
        return known
    total = 1
    if isinstance(node, yaml.SequenceNode):
        total += sum(_expanded(child, sizes) for child in node.value)
    elif isinstance(node, yaml.MappingNode):
        total += sum(_expanded(k, sizes) + _expanded(v, sizes) for k, v in node.value)
    sizes[id(node)] = min(total, 2 * MAX_ALIASED**2)  # bounded: the count stays a small integer
    return sizes[id(node)]


def load_yaml(source: str, text: str) -> Any:
    """A YAML document (None when empty), refused in one line when malformed or when its aliases
    would expand to more than ``MAX_ALIASED`` values beyond those written."""
    loader = _YAML_LOADER(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        sizes: dict[int, int] = {}
        expanded = _expanded(node, sizes)
        if expanded > len(sizes) + MAX_ALIASED:
            raise InputError(
                source, "", f"YAML aliases expand to more than {MAX_ALIASED:,} values beyond those written: refused"
            )
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1} column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "not JSON or YAML"
        if problem == "exceeded maximum nesting depth":  # libyaml stops at 1,000 levels
            raise _too_deep(source, "") from None
        raise InputError(source, where, f"invalid YAML: {problem}") from None
    except ValueError:  # Python's int() refuses more than 4,300 digits
        raise InputError(source, "", f"invalid YAML: {_HUGE_INTEGER}") from None
    finally:
        loader.dispose()


def parse_cluster(source: str, text: str) -> Cluster:
    with _no_cycle_collection():
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
