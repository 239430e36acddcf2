"""placer: batch placement for Kubernetes on CP-SAT."""

__version__ = "0.1.0"
