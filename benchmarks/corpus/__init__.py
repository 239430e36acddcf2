"""The public-family corpus: readers of the stored instances (``instances``) and the
benchmark that runs placer, kube-scheduler's simulation, the plain CP-SAT model and the greedy
heuristics on them (``python -m benchmarks.corpus``). Tests import the readers from here."""

from benchmarks.corpus import instances as _instances
from benchmarks.corpus.instances import *  # noqa: F403  (the readers' public names)

__all__ = _instances.__all__
