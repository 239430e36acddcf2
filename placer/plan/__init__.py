"""placer.plan."""
