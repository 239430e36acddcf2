# placer — developer entry points. `make demo` and `make test` are the two commands a newcomer needs.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PLACER := $(VENV)/bin/placer
STAMP := $(VENV)/.installed

.PHONY: install demo test lint typecheck check-fixtures bench bench-quick clean

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	@# setuptools prints an advisory for every editable install whose packages are mapped from
	@# other folders (models/ and cli/ ship as placer.models and placer.cli): it warns that a
	@# folder named like the package in the working directory could shadow it, which here is the
	@# package's own source. Only that advisory is silenced; a wheel install prints none.
	PYTHONWARNINGS="ignore:Editable installation" $(PY) -m pip install -q -e '.[dev,bench]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(PLACER) solve examples/boreas.json --compare default

test: $(STAMP)
	$(VENV)/bin/ruff check .
	VENV=$(VENV) scripts/static-checks.sh
	$(VENV)/bin/pytest -m "not e2e"

check-fixtures: $(STAMP)
	$(PLACER) check tests/fixtures/infeasible

# BENCH_TOPOLOGY_ARGS=--quick / BENCH_PACKING_ARGS=--quick / BENCH_GPU_ARGS=--quick /
# BENCH_QUALITY_ARGS=--quick for short smoke runs (packing, gpu and quality write quick reports to
# build/bench-quick/, not docs/bench/).
BENCH_TOPOLOGY_ARGS ?=
BENCH_PACKING_ARGS ?=
BENCH_GPU_ARGS ?=
BENCH_QUALITY_ARGS ?=
BENCH_CORPUS_ARGS ?=

bench: $(STAMP)
	$(PY) -m benchmarks.run
	$(PY) -m benchmarks.topology $(BENCH_TOPOLOGY_ARGS)
	$(PY) -m benchmarks.packing $(BENCH_PACKING_ARGS)
	$(PY) -m benchmarks.gpu $(BENCH_GPU_ARGS)
	$(PY) -m benchmarks.rebalance
	$(PY) -m benchmarks.quality $(BENCH_QUALITY_ARGS)
	$(PY) -m benchmarks.corpus --seed 29 $(BENCH_CORPUS_ARGS)

# Issue 17's packing and GPU benchmarks in under a minute, reports in build/bench-quick/.
bench-quick: $(STAMP)
	$(PY) -m benchmarks.packing --quick
	$(PY) -m benchmarks.gpu --quick

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .pytest_cache .ruff_cache

# Real control plane targets (testenv, cluster-up, cluster-down, e2e) live in mk/.
-include mk/*.mk
