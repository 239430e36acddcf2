"""kube-scheduler simulation: the baseline placer is compared with."""

from placer.baseline.groups import weighed
from placer.baseline.simulate import SimResult, simulate

__all__ = ["SimResult", "simulate", "weighed"]
