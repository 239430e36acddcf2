"""placer.kube."""
