"""Input edge: the only place that knows Kubernetes API shapes and file formats."""

from placer.inputs.load import load_cluster, parse_cluster, read_cluster
from placer.inputs.native import cluster_schema

__all__ = ["cluster_schema", "load_cluster", "parse_cluster", "read_cluster"]
