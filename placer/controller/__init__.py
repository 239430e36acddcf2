"""placer.controller."""
