"""placer command line (typer)."""
