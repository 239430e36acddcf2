"""placer.engine."""
