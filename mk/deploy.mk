# Deploy tooling (issue 32): helm, built from the Go module proxy into a cache outside the
# repository, for the e2e suite's chart checks (tests/e2e/test_deploy_e2e.py: helm lint,
# helm template, server-side dry runs). `make helm` installs it when missing and prints its path.
# HELM_VERSION, TOOLS_DIR and HELM are set in the Makefile (mk/testenv.mk's e2e needs them first).

.PHONY: helm
helm: $(HELM)
	@echo "$(HELM)"

# GOTOOLCHAIN=local: never download a Go toolchain (as testenv/build.sh). The -X flags are those of
# helm's own Makefile: `helm version` reports the release, and `helm template`/`helm lint` assume
# the Kubernetes version of helm's client-go (1.37 for v3.22.0) instead of 1.20.
HELM_KUBE_MAJOR ?= 1
HELM_KUBE_MINOR ?= 37
HELM_LDFLAGS := -s -w -X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION) \
  $(foreach pkg,pkg/lint/rules pkg/chartutil,-X helm.sh/helm/v3/$(pkg).k8sVersionMajor=$(HELM_KUBE_MAJOR) \
    -X helm.sh/helm/v3/$(pkg).k8sVersionMinor=$(HELM_KUBE_MINOR))

$(HELM):
	@t=$$SECONDS; mkdir -p "$(dir $@)" && \
	  GOBIN="$(dir $@)" GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false \
	  go install -trimpath -ldflags "$(HELM_LDFLAGS)" helm.sh/helm/v3/cmd/helm@$(HELM_VERSION) >&2 && \
	  echo "helm: phase go install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION) took $$((SECONDS - t))s" >&2
