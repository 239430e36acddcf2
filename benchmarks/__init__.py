"""Cluster generators and benchmark runners for placer; results are written to docs/bench/."""
