"""The independent validator: every rule of a placement, a global plan and a rebalancing plan,
re-stated from the Kubernetes documentation and docs/architecture.md in its own words.

It shares no code with ``placer.engine`` (import-linter enforces it), so that a bug in the engine
is not silently repeated here. Each module holds one concept; a new rule goes to the module of its
concept, and what callers use is re-exported here.

======================  ==========================================================================
module                  rules
======================  ==========================================================================
``semantics``           Kubernetes semantics: label expressions (nodeSelector, node affinity,
                        ``Gt``/``Lt`` as Go parses them, label selectors), taints and tolerations
                        (cordon as a taint), host ports, quantities (demand, allocatable), volumes
``priorities``          the priority key (priority, restart tier) and ``outranks``
``index``               the validator's own index of a cluster (``ClusterIndex``): pods by key,
                        running pods, node labels, node states (capacity, host ports), the batch,
                        room held for nominations
``eligibility``         may a pod use a node whatever its load: cordon, taints, labels with weak
                        binding (``placer.io/when-no-node-*``), volumes
``placements``          a set of placements (``validate_placements``, ``hard_violations``):
                        existence and batch membership, eligibility, capacity, host ports,
                        relaxed affinity, maximality and priority (nothing left out that fits)
``topology``            inter-pod affinity, anti-affinity, DoNotSchedule topology spread (and which
                        nodes a spread constraint counts)
``groups``              workload groups: gangs all-or-nothing, PodGroups' topology domains
                        (composite groups nested), ``disruptionMode: all``
``evictions``           who a plan may evict, move or preempt, and for whom; PodDisruptionBudgets
                        and the eviction cap
``answer``              a global plan's answer resolved against the cluster (``Plan``):
                        placements, evictions, replacements and how they name each other
``steps``               a plan's steps: references, order, room at every bind
``plans``               ``validate_plan``: the above, then the final state, maximality after the
                        plan, the groups after the plan and the improvement over a first-fit
                        answer per key (restart tiers per cluster or per namespace)
``rebalancing``         ``validate_rebalance``: thresholds, who may move, limits, then the plan rules
``violations``          ``Violation``: one broken rule as data, and ``texts``
======================  ==========================================================================
"""

from placer.validate.eligibility import (
    IGNORE_AFFINITY,
    WHEN_NO_NODE_FITS,
    WHEN_NO_NODE_MATCHES,
    Binding,
    affinity_binding,
    binding_of,
    eligibility_problems,
)
from placer.validate.evictions import EVICTION_OPT_OUT, eviction_refusal, may_preempt, move_refusal, pdbs_covering
from placer.validate.groups import (
    Domains,
    disruption_violations,
    domain_violations,
    gang_rule_violations,
    gang_violations,
)
from placer.validate.index import (
    ClusterIndex,
    NodeLabels,
    NodeState,
    batch_pods,
    final_states,
    holding_nominations,
    running_pods,
)
from placer.validate.placements import hard_rule_violations, hard_violations, placement_violations, validate_placements
from placer.validate.plans import kept_vector, per_key, validate_plan
from placer.validate.priorities import RESTART_TIERS, Key, Tiers, outranks, pod_key, tier_scope
from placer.validate.rebalancing import validate_rebalance
from placer.validate.semantics import (
    DEFAULT_MAX_PODS,
    UNSCHEDULABLE_TAINT,
    WILDCARD_IP,
    allocatable,
    demand,
    field_matches,
    go_parse_int,
    label_selector_matches,
    node_selector_matches,
    ports_clash,
    requirement_matches,
    selector_matches,
    term_matches,
    terms_match,
    tolerates,
    untolerated_taint,
    volume_problems,
)
from placer.validate.topology import (
    DO_NOT_SCHEDULE,
    METADATA_NAME,
    SpreadNodes,
    TopologyRules,
    TopologyState,
    namespace_labels,
    spread_node_eligible,
    term_matches_pod,
    term_namespace_matches,
)
from placer.validate.violations import Rule, Violation, texts

__all__ = [
    "DEFAULT_MAX_PODS",
    "DO_NOT_SCHEDULE",
    "EVICTION_OPT_OUT",
    "IGNORE_AFFINITY",
    "METADATA_NAME",
    "RESTART_TIERS",
    "UNSCHEDULABLE_TAINT",
    "WHEN_NO_NODE_FITS",
    "WHEN_NO_NODE_MATCHES",
    "WILDCARD_IP",
    "Binding",
    "ClusterIndex",
    "Domains",
    "Key",
    "NodeLabels",
    "NodeState",
    "Rule",
    "SpreadNodes",
    "Tiers",
    "TopologyRules",
    "TopologyState",
    "Violation",
    "affinity_binding",
    "allocatable",
    "batch_pods",
    "binding_of",
    "demand",
    "disruption_violations",
    "domain_violations",
    "eligibility_problems",
    "eviction_refusal",
    "field_matches",
    "final_states",
    "gang_rule_violations",
    "gang_violations",
    "go_parse_int",
    "hard_rule_violations",
    "hard_violations",
    "holding_nominations",
    "kept_vector",
    "label_selector_matches",
    "may_preempt",
    "move_refusal",
    "namespace_labels",
    "node_selector_matches",
    "outranks",
    "pdbs_covering",
    "per_key",
    "placement_violations",
    "pod_key",
    "ports_clash",
    "requirement_matches",
    "running_pods",
    "selector_matches",
    "spread_node_eligible",
    "term_matches",
    "term_matches_pod",
    "term_namespace_matches",
    "terms_match",
    "texts",
    "tier_scope",
    "tolerates",
    "untolerated_taint",
    "validate_placements",
    "validate_plan",
    "validate_rebalance",
    "volume_problems",
]
