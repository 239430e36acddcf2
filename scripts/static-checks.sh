#!/usr/bin/env bash
# mypy --strict and the import-linter contracts over the installed package layout.
# The repo keeps models/ and cli/ at the top level but they import as placer.models and
# placer.cli; neither mypy nor import-linter can follow setuptools' editable import hook, so
# both run over a tree of symlinks shaped like the installed package (build/, git-ignored).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${VENV:-$root/.venv}
[[ $venv = /* ]] || venv="$root/$venv"
tree="$root/build/static"
rm -rf "$tree" && mkdir -p "$tree/placer"
for entry in "$root"/placer/*; do ln -s "$entry" "$tree/placer/"; done
ln -s "$root/models" "$tree/placer/models"
ln -s "$root/cli" "$tree/placer/cli"
# import-linter finds its contracts in ./pyproject.toml (its --config option is deprecated and
# prints a warning; a positional file needs import-linter newer than the pinned minimum).
ln -s "$root/pyproject.toml" "$tree/pyproject.toml"
cd "$tree"
echo "mypy --strict"
"$venv/bin/mypy" --config-file "$root/pyproject.toml" placer
echo "import-linter"
PYTHONPATH="$tree" "$venv/bin/lint-imports" --no-cache
# Product tests never depend on benchmark code: only tests of benchmark code (readers, reference
# models, generators, scorers: tests/test_benchmark*.py) import `benchmarks`. import-linter cannot
# say so: tests/ is no package and benchmarks/ is not installed, so neither is in its graph.
echo "tests importing benchmarks/"
if grep -lE '^[[:space:]]*(from|import)[[:space:]]+benchmarks([.[:space:]]|$)' "$root"/tests/*.py \
  | grep -v '/test_benchmark[^/]*\.py$'; then
  echo "these tests import benchmarks/: only tests/test_benchmark*.py may (tests of benchmark code)" >&2
  exit 1
fi
