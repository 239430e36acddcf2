"""Objective modules of the CP-SAT model, one concern each."""
