# make bench-e2e: placer vs kube-scheduler on one real control plane (benchmarks/e2e.py).
BENCH_E2E_ARGS ?= --nodes 1000 --pods 5000 --bursts 10 --runs 3

.PHONY: bench-e2e
bench-e2e: $(STAMP) testenv
	$(PY) -m benchmarks.e2e $(BENCH_E2E_ARGS)
