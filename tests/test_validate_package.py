"""The validator as a package (``placer.validate``): independent, mapped, one home per rule.

Aspects: no module of the package imports anything of placer but ``placer.models`` and the
package itself (so nothing of ``placer.engine``, directly or through another layer; import-linter's
independence contract says the same for the engine, this says it for every other module too);
the map in the package's docstring names every module and only modules that exist; the modules
the package replaced are gone, not left as shims. Found with ``ast`` and the file tree.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import pytest

import placer.validate

PACKAGE = Path(placer.validate.__file__).parent
MODULES = sorted(p for p in PACKAGE.glob("*.py") if p.name != "__init__.py")


def _placer_imports(path: Path) -> list[str]:
    """The placer modules a file imports (absolute names; a relative import reads as itself)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            out += [alias.name for alias in node.names if alias.name.split(".")[0] == "placer"]
        elif isinstance(node, ast.ImportFrom):
            name = "." * node.level + (node.module or "")
            if node.level or name.split(".")[0] == "placer":
                out.append(name)
    return out


@pytest.mark.parametrize("path", [PACKAGE / "__init__.py", *MODULES], ids=lambda p: p.name)
def test_a_validator_module_imports_only_the_models_and_its_own_package(path: Path) -> None:
    foreign = [
        name
        for name in _placer_imports(path)
        if not (name == "placer.models" or name.startswith(("placer.models.", "placer.validate.")))
    ]
    assert foreign == []


def test_the_package_map_names_every_module_and_only_those() -> None:
    doc = placer.validate.__doc__ or ""
    mapped = set(re.findall(r"^``(\w+)``", doc, flags=re.MULTILINE))
    assert mapped == {p.stem for p in MODULES}


@pytest.mark.parametrize("old", ["placer.validate_topology", "placer.validate_groups"])
def test_the_replaced_modules_are_gone(old: str) -> None:
    assert importlib.util.find_spec(old) is None
