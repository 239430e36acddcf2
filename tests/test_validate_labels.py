"""The validator's label index (``NodeLabels``) answers exactly what its node-by-node rules answer.

Aspects: for random nodes and random nodeSelectors and required node affinity (every operator,
matchFields on the name, empty terms, absent keys, non-integer values for Gt/Lt), the nodes
``NodeLabels.matching`` returns are the nodes ``selector_matches`` accepts one by one.
"""

from __future__ import annotations

from builders import property_settings
from hypothesis import given
from hypothesis import strategies as st

from placer.models import Node, NodeSelectorRequirement, NodeSelectorTerm
from placer.validate import NodeLabels, selector_matches

PROPERTY = property_settings("PLACER_PROPERTY_EXAMPLES", 200)
KEYS = ("zone", "pool", "gen")
VALUES = ("a", "b", "3", "-1", "x7")
NAMES = ("n0", "n1", "n2", "n3", "n4", "n5")

labels = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=3)
nodes = st.lists(labels, min_size=1, max_size=len(NAMES)).map(
    lambda ls: [Node(name=NAMES[i], labels=lab, allocatable={}) for i, lab in enumerate(ls)]
)
requirement = st.builds(
    NodeSelectorRequirement,
    key=st.sampled_from(KEYS),
    operator=st.sampled_from(("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")),
    values=st.lists(st.sampled_from(VALUES), max_size=2).map(tuple),
)
field = st.builds(
    NodeSelectorRequirement,
    key=st.sampled_from(("metadata.name", "metadata.uid")),
    operator=st.sampled_from(("In", "NotIn", "Exists")),
    values=st.lists(st.sampled_from(NAMES), max_size=2).map(tuple),
)
terms = st.builds(
    NodeSelectorTerm,
    match_expressions=st.lists(requirement, max_size=3).map(tuple),
    match_fields=st.lists(field, max_size=1).map(tuple),
)
required = st.none() | st.lists(terms, max_size=3).map(tuple)
selectors = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=2)


@PROPERTY
@given(nodes=nodes, node_selector=selectors, required_terms=required)
def test_the_label_index_matches_exactly_the_nodes_the_rules_accept(
    nodes: list[Node], node_selector: dict[str, str], required_terms: tuple[NodeSelectorTerm, ...] | None
) -> None:
    expected = {n.name for n in nodes if selector_matches(node_selector, required_terms, n)}
    index = NodeLabels(nodes)
    assert index.matching(node_selector, required_terms) == expected
    assert index.matching(node_selector, required_terms) == expected  # the cached answer too
