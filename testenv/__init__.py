"""Test infrastructure: the local Kubernetes control plane for e2e tests (not shipped)."""
