"""The one domain exception the CLI turns into a one-line message and exit code 2."""

from __future__ import annotations

__all__ = ["InputError"]


class InputError(Exception):
    """Bad input: names the file and the object/field at fault."""

    def __init__(self, source: str, where: str, message: str) -> None:
        self.source = source
        self.where = where
        self.message = message
        location = f"{source}: {where}" if where else source
        super().__init__(f"{location}: {message}")
