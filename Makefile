# placer — developer entry points. `make demo` and `make test` are the two commands a newcomer needs.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PLACER := $(VENV)/bin/placer
# placer alone (what `make demo` needs); STAMP: with the dev and bench extras (tests, benchmarks).
BASE_STAMP := $(VENV)/.installed-base
STAMP := $(VENV)/.installed

.PHONY: install demo test lint typecheck check-fixtures bench bench-quick clean

# setuptools prints an advisory for every editable install whose packages are mapped from other
# folders (models/ and cli/ ship as placer.models and placer.cli): it warns that a folder named
# like the package in the working directory could shadow it, which here is the package's own
# source. Only that advisory is silenced; a wheel install prints none.
PIP_EDITABLE := PYTHONWARNINGS="ignore:Editable installation" $(PY) -m pip install -q -e

$(BASE_STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PIP_EDITABLE) .
	touch $@

$(STAMP): $(BASE_STAMP)
	$(PIP_EDITABLE) '.[dev,bench]'
	touch $@

install: $(STAMP)

demo: $(BASE_STAMP)
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
	$(PY) -m benchmarks.gputrace --time-limit 1
	$(PY) -m benchmarks.rebalance
	$(PY) -m benchmarks.quality $(BENCH_QUALITY_ARGS)
	$(PY) -m benchmarks.workloads
	$(PY) -m benchmarks.corpus --seed 29 $(BENCH_CORPUS_ARGS)
	$(PY) -m benchmarks.techniques --seed 5
	$(PY) -m benchmarks.biggang --out docs/bench/biggang.md

# Issue 17's packing and GPU benchmarks in under a minute, reports in build/bench-quick/.
bench-quick: $(STAMP)
	$(PY) -m benchmarks.packing --quick
	$(PY) -m benchmarks.gpu --quick

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .pytest_cache .ruff_cache

# helm for the chart checks of `make e2e` (rules in mk/deploy.mk), cached outside the repository.
HELM_VERSION ?= v3.22.0
TOOLS_DIR ?= $(HOME)/.cache/placer/tools
HELM := $(TOOLS_DIR)/helm-$(HELM_VERSION)/helm

# Real control plane targets (testenv, cluster-up, cluster-down, e2e) and the deploy tools (helm)
# live in mk/.
-include mk/*.mk
