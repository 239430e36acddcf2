# make bench-e2e: placer vs kube-scheduler on scheduler_perf-style shapes, one real control plane
# per cluster (benchmarks/e2e.py; shapes in benchmarks/e2e_shapes.py). Not part of CI.
BENCH_E2E_ARGS ?= --nodes 1000 --pods 2000 --runs 3 --qps 1000 --burst 2000 --ceiling --profile

.PHONY: bench-e2e
bench-e2e: $(STAMP) testenv
	$(PY) -m benchmarks.e2e $(BENCH_E2E_ARGS)

# Topology gangs (85-100 % demand) and gang preemption against kube-scheduler 1.37.2 with its
# gang and topology plugins (benchmarks/e2e_gangs.py, docs/bench/e2e-gangs.md). Not part of CI.
BENCH_E2E_GANGS_ARGS ?= --nodes 1000 --seed 1 --joint-batch 2000 --joint-limit 5

.PHONY: bench-e2e-gangs
bench-e2e-gangs: $(STAMP) testenv
	$(PY) -m benchmarks.e2e_gangs $(BENCH_E2E_GANGS_ARGS)

# A 5,000-pod gang while plain pods keep arriving, against kube-scheduler 1.37.2 with its gang
# plugin (benchmarks/e2e_biggang.py, docs/bench/e2e-biggang.md). Not part of CI.
BENCH_E2E_BIGGANG_ARGS ?= --nodes 1000 --gang 5000 --rate 10 --seconds 60

.PHONY: bench-e2e-biggang
bench-e2e-biggang: $(STAMP) testenv
	$(PY) -m benchmarks.e2e_biggang $(BENCH_E2E_BIGGANG_ARGS)
