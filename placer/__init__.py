"""placer: batch placement for Kubernetes on CP-SAT."""

__version__ = "0.1.0"
# The distribution's name on the package index (pyproject.toml): `pip install kube-placer`.
DISTRIBUTION = "kube-placer"
