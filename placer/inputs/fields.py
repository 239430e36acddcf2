"""Typed access to untrusted JSON with the path of every field, for one-line error messages."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from placer.errors import InputError
from placer.models import QuantityError, parse_quantity, to_units

__all__ = ["Field", "api_object"]

_MAX_UNITS = 2**62


class Field:
    """A value inside an input document, with the file it came from and its path."""

    def __init__(self, source: str, path: str, value: Any) -> None:
        self.source = source
        self.path = path
        self.value = value

    def fail(self, message: str) -> InputError:
        return InputError(self.source, self.path, message)

    def _child_path(self, key: str | int) -> str:
        if isinstance(key, int):
            return f"{self.path}[{key}]"
        return f"{self.path}.{key}" if self.path else key

    def get(self, key: str) -> Field:
        """The child field (value None when absent). The parent must be an object or null."""
        obj = self.obj()
        return Field(self.source, self._child_path(key), obj.get(key))

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
            yield Field(self.source, self._child_path(i), v)

    def entries(self) -> Iterator[tuple[str, Field]]:
        for k, v in self.obj().items():
            yield str(k), Field(self.source, self._child_path(str(k)), v)

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

    def flag(self, default: bool = False) -> bool:
        if self.value is None:
            return default
        if not isinstance(self.value, bool):
            raise self.fail(f"expected true or false, got {self.value!r}")
        return self.value

    def str_map(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for k, v in self.entries():
            if isinstance(v.value, bool) or v.value is None:
                raise v.fail("expected a string")
            out[k] = v.value if isinstance(v.value, str) else str(v.value)
        return out

    def str_list(self) -> tuple[str, ...]:
        return tuple(item.text() for item in self.items())

    def quantities(self) -> dict[str, int]:
        """A resource list (``{cpu: "500m", memory: "1Gi"}``) in scheduler units."""
        out: dict[str, int] = {}
        for name, q in self.entries():
            if q.value is None or isinstance(q.value, bool | dict | list):
                raise q.fail(f"expected a quantity, got {q.value!r}")
            try:
                out[name] = to_units(name, parse_quantity(q.value))
            except QuantityError as exc:
                raise q.fail(str(exc)) from None
            if out[name] >= _MAX_UNITS:
                raise q.fail(f"{q.value!r} is too large (placer keeps quantities below 2^62 units)")
        return out


def api_object(raw: Any, kind: str, source: str = "api") -> Field:
    """One object as the API returns it (watch/list), its errors naming it: ``Pod ns/name``."""
    meta = raw.get("metadata", {}) if isinstance(raw, dict) else {}
    meta = meta if isinstance(meta, dict) else {}
    ns = meta.get("namespace")
    return Field(source, f"{kind} {ns + '/' if ns else ''}{meta.get('name', '?')}", raw)
