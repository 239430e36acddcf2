"""placer.engine: the pure, synchronous placement engine (no I/O).

The public surface other packages use; the submodules are internal. See docs/architecture.md.
"""

from placer.engine import solve, wholegang
from placer.engine.backlog import MAX_READ as BACKLOG_READ
from placer.engine.backlog import summarize as summarize_backlog
from placer.engine.batch import Batch, Group, build_batch, gang_groups, rebased
from placer.engine.candidates import select_candidates
from placer.engine.constraints.domains import build as build_domain_constraints
from placer.engine.constraints.quorums import build as build_quorum_constraints
from placer.engine.constraints.topology import build as build_topology_constraints
from placer.engine.cuts import cut_batch
from placer.engine.descent import descend
from placer.engine.domains import DomainVars
from placer.engine.dominance import Quality
from placer.engine.encoder import encode
from placer.engine.exprs import evaluate
from placer.engine.extended import asks_extended, extended_allocated, extended_requests, held_to_other
from placer.engine.greedy import GREEDY_CHECKS_PER_SECOND, GREEDY_SHARE, Assignment, counts_of, greedy
from placer.engine.heap import no_cycle_collection
from placer.engine.held import keeps_held
from placer.engine.keys import outranks, pod_key, tier
from placer.engine.labels import BoolArray, NodeLabels
from placer.engine.levels import (
    DETERMINISTIC_UNITS_PER_SECOND,
    Budget,
    BuildStoppedError,
    Check,
    LevelReport,
    LevelSolver,
    never_stop,
)
from placer.engine.lns import strategy_cost
from placer.engine.model import upper_bounds
from placer.engine.objectives.decisions import Kept, kept_namespace, placed_by_rank
from placer.engine.objectives.fragmentation import GPU, GPU_MILLI, PRODUCT, Fragmentation, Shape, Workload, fragment
from placer.engine.objectives.loads import SCALE, LoadEntry
from placer.engine.objectives.priority import LEVEL as PLACED_LEVEL
from placer.engine.objectives.registry import (
    LEVELS,
    REBALANCE_LEVELS,
    STRATEGIES,
    Level,
    decision_strategy,
    strategy_objective,
)
from placer.engine.objectives.strategy import Aux, StrategyObjective, Term
from placer.engine.packing import Alternative, adopt
from placer.engine.packing.kernel import prime as prime_packing
from placer.engine.prefilter import PodMasks, Prefilter, fits, ports_clash, ports_conflict
from placer.engine.scoring import FloatArray, IntArray, Scorer
from placer.engine.selectors import selector_matches
from placer.engine.snapshot import Snapshot, build_snapshot, pod_vector
from placer.engine.solve import BatchResult, batch_demand, solve_batch
from placer.engine.spread_defaults import with_default_spread
from placer.engine.taints import UNSCHEDULABLE_TAINT, first_untolerated
from placer.engine.tally import Tally
from placer.engine.topology import TopologyState, running_anti_terms, term_matches, uses_topology
from placer.engine.topup import top_up
from placer.engine.unplaced import Unplaced, after_plan, refused

__all__ = [
    "BACKLOG_READ",
    "DETERMINISTIC_UNITS_PER_SECOND",
    "GPU",
    "GPU_MILLI",
    "GREEDY_CHECKS_PER_SECOND",
    "GREEDY_SHARE",
    "LEVELS",
    "PLACED_LEVEL",
    "PRODUCT",
    "REBALANCE_LEVELS",
    "SCALE",
    "STRATEGIES",
    "UNSCHEDULABLE_TAINT",
    "Alternative",
    "Assignment",
    "Aux",
    "Batch",
    "BatchResult",
    "BoolArray",
    "Budget",
    "BuildStoppedError",
    "Check",
    "DomainVars",
    "FloatArray",
    "Fragmentation",
    "Group",
    "IntArray",
    "Kept",
    "Level",
    "LevelReport",
    "LevelSolver",
    "LoadEntry",
    "NodeLabels",
    "PodMasks",
    "Prefilter",
    "Quality",
    "Scorer",
    "Shape",
    "Snapshot",
    "StrategyObjective",
    "Tally",
    "Term",
    "TopologyState",
    "Unplaced",
    "Workload",
    "adopt",
    "after_plan",
    "asks_extended",
    "batch_demand",
    "build_batch",
    "build_domain_constraints",
    "build_quorum_constraints",
    "build_snapshot",
    "build_topology_constraints",
    "counts_of",
    "cut_batch",
    "decision_strategy",
    "descend",
    "encode",
    "evaluate",
    "extended_allocated",
    "extended_requests",
    "first_untolerated",
    "fits",
    "fragment",
    "gang_groups",
    "greedy",
    "held_to_other",
    "keeps_held",
    "kept_namespace",
    "never_stop",
    "no_cycle_collection",
    "outranks",
    "placed_by_rank",
    "pod_key",
    "pod_vector",
    "ports_clash",
    "ports_conflict",
    "prime_packing",
    "rebased",
    "refused",
    "running_anti_terms",
    "select_candidates",
    "selector_matches",
    "solve",
    "solve_batch",
    "strategy_cost",
    "strategy_objective",
    "summarize_backlog",
    "term_matches",
    "tier",
    "top_up",
    "upper_bounds",
    "uses_topology",
    "wholegang",
    "with_default_spread",
]
