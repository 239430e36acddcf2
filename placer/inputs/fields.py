"""Typed access to untrusted JSON with the path of every field, for one-line error messages."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

from placer.errors import InputError
from placer.inputs.stamps import parse_timestamp
from placer.models import QuantityError, parse_quantity, to_units

__all__ = ["Field", "api_object", "must_be_whole"]

_MAX_UNITS = 2**62
INT32 = (-(2**31), 2**31 - 1)
# Resources the API server lets be counted in whole units only, besides extended resources.
_WHOLE = frozenset({"pods"})


def must_be_whole(resource: str) -> bool:
    """The API server's rule: ``pods`` and extended resources (a domain-prefixed name outside
    ``kubernetes.io/``, e.g. ``nvidia.com/gpu``) are whole numbers; cpu, memory, hugepages-*,
    ephemeral-storage and the other native resources may be fractional."""
    if resource in _WHOLE:
        return True
    return "/" in resource and "kubernetes.io/" not in resource and not resource.startswith("requests.")


_new = object.__new__


class Field:
    """A value inside an input document, with the file it came from and its path.

    The path is spelled out only when asked for (an error message): a dump of 45,000 pods reads
    millions of fields, nearly all of them fine, so each child keeps just its parent and its key.
    """

    __slots__ = ("_key", "_parent", "_path", "source", "value")

    def __init__(self, source: str, path: str, value: Any) -> None:
        self.source = source
        self._path: str | None = path
        self._parent: Field | None = None
        self._key: str | int = ""
        self.value = value

    @classmethod
    def _child(cls, parent: Field, key: str | int, value: Any) -> Field:
        child = _new(cls)
        child.source = parent.source
        child._path = None
        child._parent = parent
        child._key = key
        child.value = value
        return child

    @property
    def path(self) -> str:
        if self._path is None:
            parent = self._parent
            assert parent is not None  # a child always has its parent
            self._path = parent._child_path(self._key)
        return self._path

    def fail(self, message: str) -> InputError:
        return InputError(self.source, self.path, message)

    def _child_path(self, key: str | int) -> str:
        if isinstance(key, int):
            return f"{self.path}[{key}]"
        return f"{self.path}.{key}" if self.path else key

    def get(self, key: str) -> Field:
        """The child field (value None when absent). The parent must be an object or null."""
        value = self.value
        if value is not None:
            value = (value if type(value) is dict else self.obj()).get(key)
        child = _new(Field)  # Field._child, inlined: the reader's most frequent call
        child.source = self.source
        child._path = None
        child._parent = self
        child._key = key
        child.value = value
        return child

    def present(self) -> bool:
        return self.value is not None

    def obj(self) -> dict[str, Any]:
        if self.value is None:
            return {}
        if not isinstance(self.value, dict):
            raise self.fail(f"expected an object, got {type(self.value).__name__}")
        return self.value

    def items(self) -> Iterator[Field]:
        if self.value is None:
            return
        if not isinstance(self.value, list):
            raise self.fail(f"expected a list, got {type(self.value).__name__}")
        for i, v in enumerate(self.value):
            yield Field._child(self, i, v)

    def entries(self) -> Iterator[tuple[str, Field]]:
        for k, v in self.obj().items():
            yield str(k), Field._child(self, str(k), v)

    def text(self, default: str = "") -> str:
        if self.value is None:
            return default
        if not isinstance(self.value, str):
            raise self.fail(f"expected a string, got {type(self.value).__name__}")
        return self.value

    def required_str(self) -> str:
        if self.value is None or self.value == "":
            raise self.fail("is required")
        return self.text()

    def integer(self, default: int = 0) -> int:
        if self.value is None:
            return default
        if isinstance(self.value, bool) or not isinstance(self.value, int):
            raise self.fail(f"expected an integer, got {self.value!r}")
        return self.value

    def int32(self, default: int = 0) -> int:
        """An integer the API server keeps in 32 bits (``spec.priority``)."""
        value = self.integer(default)
        if not INT32[0] <= value <= INT32[1]:
            raise self.fail(f"{value} is out of range for a 32-bit integer")
        return value

    def timestamp(self) -> str:
        """An RFC 3339 time as the API server writes it ('' when absent)."""
        text = self.text()
        if text and parse_timestamp(text) is None:
            raise self.fail(f"expected an RFC 3339 time such as 2025-01-02T03:04:05Z, got {text!r}")
        return text

    def flag(self, default: bool = False) -> bool:
        if self.value is None:
            return default
        if not isinstance(self.value, bool):
            raise self.fail(f"expected true or false, got {self.value!r}")
        return self.value

    def str_map(self) -> dict[str, str]:
        """Labels, annotations, a nodeSelector: string values only, as the API server requires
        (``zone: 1`` unquoted in YAML is a number, which it rejects)."""
        out: dict[str, str] = {}
        for k, v in self.entries():
            if not isinstance(v.value, str):
                shown = "null" if v.value is None else f"{type(v.value).__name__} {v.value!r}"
                raise v.fail(f"expected a string, got {shown}")
            out[k] = v.value
        return out

    def str_list(self) -> tuple[str, ...]:
        return tuple(item.text() for item in self.items())

    def quantities(self) -> dict[str, int]:
        """A resource list (``{cpu: "500m", memory: "1Gi"}``) in scheduler units."""
        out: dict[str, int] = {}
        obj = self.obj()
        for key, value in obj.items():
            name = str(key)
            if value is None or isinstance(value, bool | dict | list):
                raise self.get(name).fail(f"expected a quantity, got {value!r}")
            try:
                out[name] = _units(name, value)
            except QuantityError as exc:
                raise self.get(name).fail(str(exc)) from None
        return out


@functools.lru_cache(maxsize=4096)
def _units(name: str, value: str | int | float) -> int:
    """One quantity in scheduler units, validated (a dump repeats the same few: cached)."""
    exact = parse_quantity(value)
    if exact.denominator != 1 and must_be_whole(name):
        raise QuantityError(f"{value!r} must be a whole number ({name} cannot be fractional)")
    units = to_units(name, exact)
    if units >= _MAX_UNITS:
        raise QuantityError(f"{value!r} is too large (placer keeps quantities below 2^62 units)")
    return units


def api_object(raw: Any, kind: str, source: str = "api") -> Field:
    """One object as the API returns it (watch/list), its errors naming it: ``Pod ns/name``."""
    meta = raw.get("metadata", {}) if isinstance(raw, dict) else {}
    meta = meta if isinstance(meta, dict) else {}
    ns = meta.get("namespace")
    return Field(source, f"{kind} {ns + '/' if ns else ''}{meta.get('name', '?')}", raw)
