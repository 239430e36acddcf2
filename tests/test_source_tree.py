"""The source tree keeps one definition per concept.

Aspects: strategy names are string literals only in their registry (``placer.models.config``),
plan step names only in theirs (``placer.models.steps``); everything else refers to the
registries. No replacement is named by a string prefix (``replaces`` and a colon inside a string)
anywhere, tests included. Found with ``ast`` (string constants), so words in
docstrings, comments and log messages do not count; only a constant equal to a name does.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from placer.models import POLICIES, SOLVE_STATUSES, UNPLACED_CODES, StrategyName, step_kinds

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("placer", "models", "cli")
# A string that starts with the prefix, in either quote or an f-string (spelled in parts so that
# this file does not match).
PREFIX = re.compile("[\"']" + "replaces" + ":")


def _constants(path: Path) -> Iterator[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    # Keys of dict displays name fields (``update={"spread": ...}`` is the pod's topology spread).
    keys = {id(k) for node in ast.walk(tree) if isinstance(node, ast.Dict) for k in node.keys if k is not None}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings | keys:
            yield node.lineno, node.value


def literals_outside(names: set[str], registries: set[str]) -> list[str]:
    """Where a string constant equal to one of ``names`` appears outside the ``registries`` files."""
    found = []
    for top in SOURCES:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel in registries:
                continue
            found += [f"{rel}:{line}: {value!r}" for line, value in _constants(path) if value in names]
    return found


def test_strategy_names_are_literals_only_in_their_registry() -> None:
    names = {s.value for s in StrategyName}
    assert literals_outside(names, {"models/config.py"}) == []


def test_step_names_are_literals_only_in_their_registry() -> None:
    names = {k.op for k in step_kinds()}
    assert names >= {"evict", "await-gone", "bind"}
    assert literals_outside(names, {"models/steps.py"}) == []


def _literal_types(path: Path) -> Iterator[tuple[int, str]]:
    """The string values inside every ``Literal[...]`` of a file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and (
            (isinstance(node.value, ast.Name) and node.value.id == "Literal")
            or (isinstance(node.value, ast.Attribute) and node.value.attr == "Literal")
        ):
            for inner in ast.walk(node.slice):
                if isinstance(inner, ast.Constant) and isinstance(inner.value, str):
                    yield inner.lineno, inner.value


@pytest.mark.parametrize("names", [UNPLACED_CODES, SOLVE_STATUSES, POLICIES], ids=["codes", "statuses", "policies"])
def test_unplaced_codes_statuses_and_policies_are_declared_only_in_their_registry(names: tuple[str, ...]) -> None:
    """Other modules use the registry's types (mypy checks their values); none declares a copy."""
    found = [
        f"{path.relative_to(ROOT).as_posix()}:{line}: {value!r}"
        for top in SOURCES
        for path in sorted((ROOT / top).rglob("*.py"))
        if path.relative_to(ROOT).as_posix() != "models/codes.py"
        for line, value in _literal_types(path)
        if value in names
    ]
    assert found == []


def test_the_literal_search_finds_a_declaration_where_one_is() -> None:
    assert {v for _, v in _literal_types(ROOT / "models" / "codes.py")} >= {*UNPLACED_CODES, *SOLVE_STATUSES, *POLICIES}


def test_kube_scheduler_reason_words_are_spelled_only_as_filter_labels() -> None:
    """The reasons' words live in ``placer.models.reasons``; everything else keys by ``Filter``."""
    words = re.compile(r"node\(s\)|Insufficient |nodes are available")
    found = [
        f"{path.relative_to(ROOT).as_posix()}:{line}"
        for top in SOURCES
        for path in sorted((ROOT / top).rglob("*.py"))
        if path.relative_to(ROOT).as_posix() not in {"models/reasons.py", "placer/inputs/volumes.py"}
        for line, value in _constants(path)
        if words.search(value)
    ]
    assert found == []


def test_no_replacement_is_named_by_a_string_prefix() -> None:
    found = [
        path.relative_to(ROOT).as_posix()
        for top in (*SOURCES, "tests", "benchmarks")
        for path in sorted((ROOT / top).rglob("*.py"))
        if PREFIX.search(path.read_text(encoding="utf-8"))
    ]
    assert found == []


def _imports_of(path: Path) -> Iterator[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            yield node.lineno, node.module
        elif isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)


@pytest.mark.parametrize("package", ["placer.engine", "placer.plan"])
def test_other_packages_use_only_the_public_surface(package: str) -> None:
    """Outside ``package`` (tests and benchmarks included), imports name the package itself,
    whose ``__init__`` re-exports its public surface, never one of its modules."""
    inside = package.replace(".", "/") + "/"
    found = [
        f"{path.relative_to(ROOT).as_posix()}:{line}: {module}"
        for top in (*SOURCES, "tests", "benchmarks")
        for path in sorted((ROOT / top).rglob("*.py"))
        if not path.relative_to(ROOT).as_posix().startswith(inside)
        for line, module in _imports_of(path)
        if module.startswith(package + ".")
    ]
    assert found == []


def test_no_source_comment_points_outside_the_repository() -> None:
    outside = re.compile(r"DESIGN\.md|SEEDS\.md|STYLE\.md|\.\./shared")
    found = [
        path.relative_to(ROOT).as_posix()
        for top in (*SOURCES, "tests", "benchmarks")
        for path in sorted((ROOT / top).rglob("*.py"))
        if outside.search(path.read_text(encoding="utf-8")) and path.name != "test_source_tree.py"
    ]
    assert found == []


def test_the_search_finds_a_literal_where_one_is() -> None:
    # The check above is only worth something if the search sees string constants at all.
    assert literals_outside({"placer.io/when-no-node-fits"}, set())


def test_every_package_directory_is_shipped() -> None:
    """A package missing from pyproject's list works in the editable checkout and breaks in the
    wheel (the container image): every directory with an __init__.py is listed."""
    import tomllib  # noqa: PLC0415

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {
        "placer." + ".".join(p.parent.relative_to(ROOT / "placer").parts) if p.parent != ROOT / "placer" else "placer"
        for p in (ROOT / "placer").rglob("__init__.py")
        if "__pycache__" not in p.parts
    }
    assert found - listed == set()
