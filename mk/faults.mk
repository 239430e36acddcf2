# make e2e-faults: issue 13's fault-injection suite (tests/e2e/faults) on its own control plane
# (audit log on, no kube-scheduler). Figures per scenario go to build/faults/*.json and
# build/faults/reliability.md (docs/reliability.md is written from such a run).
.PHONY: e2e-faults
e2e-faults: $(STAMP) testenv
	@t=$$SECONDS; rm -rf build/faults; \
	  PLACER_E2E_REQUIRED=1 $(VENV)/bin/pytest tests/e2e/faults -m e2e; rc=$$?; \
	  $(PY) tests/e2e/faults/report.py build/faults > build/faults/reliability.md || true; \
	  cat build/faults/reliability.md 2>/dev/null || true; \
	  echo "e2e-faults: phase pytest tests/e2e/faults took $$((SECONDS - t))s"; exit $$rc
