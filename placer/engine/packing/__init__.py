"""Tight batches are packing problems: the techniques that place every pod, and their dispatcher.

``dispatch`` lists the techniques (``TECHNIQUES``: each with its precondition and budget) and
runs them; ``starts`` holds the heuristics and the check every other answer goes through
(``adopt``); ``placeall`` the CP-SAT formulation; ``completion`` with ``exactcover``,
``fillsampler`` and ``largefills`` the bin-completion search; ``ejection`` the local search that
repairs the best start (its steps compiled in ``kernel``); ``overload`` the local search that lets
nodes overflow and drives the overflow to zero (steps in ``overloadsteps``, compiled in ``kernel``);
``dive`` the rounding of the LP of a cover by node contents (listed by ``contents``, compiled too);
``repack`` the CP-SAT neighbourhoods that continue from the ejection search's answer; ``tuning``
every constant; ``clock`` the deadline a race can stop.
"""

from placer.engine.packing import (
    clock,
    completion,
    contents,
    dispatch,
    dive,
    ejection,
    exactcover,
    fillsampler,
    kernel,
    largefills,
    overload,
    overloadsteps,
    placeall,
    repack,
    starts,
    tuning,
)
from placer.engine.packing.dispatch import TECHNIQUES, Technique, prepare, settle, start
from placer.engine.packing.placeall import volume_allows_all
from placer.engine.packing.starts import Alternative, adopt, better_start

__all__ = [
    "TECHNIQUES",
    "Alternative",
    "Technique",
    "adopt",
    "better_start",
    "clock",
    "completion",
    "contents",
    "dispatch",
    "dive",
    "ejection",
    "exactcover",
    "fillsampler",
    "kernel",
    "largefills",
    "overload",
    "overloadsteps",
    "placeall",
    "prepare",
    "repack",
    "settle",
    "start",
    "starts",
    "tuning",
    "volume_allows_all",
]
